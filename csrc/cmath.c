/* cmath.c - elementary functions emitted as straight-line LLVM IR.
 *
 * Every function here appends instructions at the builder's insertion point
 * and returns the result value; no basic blocks, no calls except to
 * intrinsics that select on X86 and NVPTX (llvm.fma, llvm.fmuladd,
 * llvm.fabs, llvm.floor, llvm.rint, llvm.copysign).  Special values are
 * handled with compares and selects, so the loop vectorizer can widen the
 * code.  x may be float or double, or a fixed vector of either.
 *
 * The one exception is the slow path of sin and cos (Payne-Hanek, for
 * large |x|): a call to a function that this file adds to the module once
 * (internal, cj.math.*), with vector variants the loop vectorizer calls in
 * the vector loop; each returns at once unless a lane needs the slow path.
 * It also reads a constant table (the bits of 2/pi; llvm.masked.gather in
 * vectors) and uses llvm.vector.reduce.or.
 *
 * Two kinds of fused multiply-add are used:
 *   - llvm.fmuladd for polynomial evaluation, where fusing is optional (the
 *     backend fuses it when the target has FMA, else it is a mul and an add);
 *   - llvm.fma where an exact product is required (sin/cos argument
 *     reduction, the double-double arithmetic of pow).  Targets without FMA
 *     hardware lower this to a libm call: correct, but slow.
 *
 * The polynomial coefficients are weighted minimax fits produced by
 * tests/c/fit_coeffs.py (Remez in 50-digit arithmetic).  Error figures in
 * the comments are the maximum measured by tests/c/test_cmath.c over
 * millions of inputs, in ulps of the result, against the exact value (the
 * long double libm); against glibc's own float/double functions the
 * results differ by at most 1 ulp (2 for tanh), except where glibc's
 * double sin/cos is itself off (by up to 1.4e5 ulp, at a few of the
 * arguments closest to multiples of pi/2, e.g. sin(1.2853022199154463e174):
 * the long double libm and an exact reduction in Python agree with cjit).
 *
 * Conventions: `m` is the emission context (builder + types), `p` is a
 * name prefix such as "exp" so that IR dumps read "exp.k", "exp.r", ... */
#include "cmath.h"

#include <stdint.h>
#include <math.h>   /* INFINITY and NAN only; nothing here calls libm */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Polynomial coefficients (tests/c/fit_coeffs.py).                    */

/* (exp(r) - 1 - r) / r^2 on |r| <= 0.35, weighted for the relative error
 * of expm1; shared by exp, expm1, tanh and pow. */
static const double EXPM1_Q_F64[] = {
    0x1.0000000000000p-1,  0x1.5555555555559p-3,  0x1.555555555553cp-5,
    0x1.111111110f4bbp-7,  0x1.6c16c16c1fb2fp-10, 0x1.a01a01b0c5e89p-13,
    0x1.a01a017997c77p-16, 0x1.71ddf5e195838p-19, 0x1.27e5387f99231p-22,
    0x1.af63604895448p-26, 0x1.1ee8709dfaa20p-29,
};
static const double EXPM1_Q_F32[] = {
    0x1.0000000000000p-1, 0x1.5555540000000p-3,  0x1.5554aa0000000p-5,
    0x1.11118e0000000p-7, 0x1.6d78c40000000p-10, 0x1.a0332c0000000p-13,
};

/* (exp(r) - 1 - r) / r^2 on |r| <= 0.35, weighted for the relative error
 * of exp; float exp and tanh only (exp(r) = 1 + r (1 + r Q(r)), degree 6
 * in all: one less than EXPM1_Q_F32, which must stay relative-accurate
 * near 0 for expm1). */
static const double EXP_Q_F32[] = {
    0x1.fffffc0000000p-2, 0x1.55548a0000000p-3, 0x1.5559160000000p-5,
    0x1.123fb40000000p-7, 0x1.6a1a8e0000000p-10,
};

/* (2 atanh(s)/s - 2) / s^2 as a polynomial in z = s^2, z <= 0.02944
 * (|s| <= 3 - 2 sqrt 2); log(1+f) = f - f^2/2 + s (f^2/2 + z P(z)). */
static const double LOG_P_F64[] = {
    0x1.5555555555592p-1, 0x1.999999997fd7bp-2, 0x1.24924941f4b97p-2,
    0x1.c71c5206413cep-3, 0x1.74663f95b0373p-3, 0x1.39a1a84a3e536p-3,
    0x1.2f0626846fe1bp-3,
};
static const double LOG_P_F32[] = {
    0x1.55557a0000000p-1, 0x1.995eb80000000p-2, 0x1.31e3460000000p-2,
};

/* (P(z) - 2/3) / z: the tail of log's series that pow evaluates in plain
 * double while it carries 2s and (2/3) s^3 in double-double. */
static const double POW_WT_F64[] = {
    0x1.9999999999b30p-2, 0x1.2492492457d2cp-2, 0x1.c71c722d6a883p-3,
    0x1.745ce9e1e6e65p-3, 0x1.3b1eec50d4f86p-3, 0x1.0f7fe2f266160p-3,
    0x1.0e42ed243ecfdp-3,
};

/* (sin(r) - r) / r^3 and (cos(r) - 1 + r^2/2) / r^4 in z = r^2, |r| <= 0.79 */
static const double SIN_S_F64[] = {
    -0x1.5555555555555p-3, 0x1.111111111110ap-7,  -0x1.a01a01a01891ep-13,
    0x1.71de3a53151cdp-19, -0x1.ae6452696817ap-26, 0x1.61207512472ddp-33,
    -0x1.aa96aa999d2bap-41,
};
static const double SIN_S_F32[] = {
    -0x1.5555560000000p-3, 0x1.1111080000000p-7, -0x1.a00f400000000p-13,
    0x1.6cc2c80000000p-19,
};
static const double COS_C_F64[] = {
    0x1.555555555554ap-5,  -0x1.6c16c16c14dd4p-10, 0x1.a01a019c57d56p-16,
    -0x1.27e4f7c9fc3e7p-22, 0x1.1ee9c1010c30ep-29, -0x1.8f98a4420bc7fp-37,
};
static const double COS_C_F32[] = {
    0x1.5555560000000p-5,  -0x1.6c16b80000000p-10, 0x1.a010a60000000p-16,
    -0x1.2413280000000p-22,
};

/* (tanh(a) - a) / a^3 in u = a^2, a <= 0.625 */
static const double TANH_T_F64[] = {
    -0x1.5555555555552p-2, 0x1.1111111110c03p-3,  -0x1.ba1ba1b9ce66ap-5,
    0x1.664f48703772ap-6,  -0x1.226e32c131e23p-7, 0x1.d6d3584e65cc9p-9,
    -0x1.7d9c1d5b9fd43p-10, 0x1.350ae19af35a5p-11, -0x1.f10cb43f9c3acp-13,
    0x1.800618cf2f02ap-14, -0x1.fa7520762884fp-16, 0x1.9580d11327a4ap-18,
};
static const double TANH_T_F32[] = {
    -0x1.5555540000000p-2, 0x1.1110660000000p-3,  -0x1.b9ee900000000p-5,
    0x1.638b580000000p-6,  -0x1.0bf4fe0000000p-7, 0x1.18e1de0000000p-9,
};

#define NCOEF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ------------------------------------------------------------------ */
/* Other constants: {double, float}.  LN2H has trailing zero bits so that
 * k * LN2H is exact for |k| < 2^11 (double) / 2^8 (float). */

static const double LOG2E[2] = {0x1.71547652b82fep+0, 0x1.7154760000000p+0};
static const double LN2H[2] = {0x1.62e42fefa3800p-1, 0x1.62e4000000000p-1};
static const double LN2L[2] = {0x1.ef35793c76730p-45, 0x1.7f7d1c0000000p-20};
static const double SQRT_HALF[2] = {0x1.6a09e667f3bcdp-1, 0x1.6a09e60000000p-1};
/* pi/2 = PIO2_1 + PIO2_2 + PIO2_3 to 159 (double) / 72 (float) bits */
static const double PIO2_1[2] = {0x1.921fb54442d18p+0, 0x1.921fb60000000p+0};
static const double PIO2_2[2] = {0x1.1a62633145c07p-54, -0x1.777a5c0000000p-25};
static const double PIO2_3[2] = {-0x1.f1976b7ed8fbcp-110, -0x1.ee59da0000000p-50};
static const double TWO_OVER_PI[2] = {0x1.45f306dc9c883p-1, 0x1.45f3060000000p-1};
/* double-double ln 2 and 2/3 for pow */
static const double LN2_DD[2] = {0x1.62e42fefa39efp-1, 0x1.abc9e3b39803fp-56};
static const double TWO_THIRDS_DD[2] = {0x1.5555555555555p-1, 0x1.5555555555555p-55};

/* ------------------------------------------------------------------ */
/* Emission context and one-line helpers.                              */

typedef struct {
    LLVMBuilderRef b;
    LLVMModuleRef mod;
    LLVMContextRef ctx;
    LLVMTypeRef ft, it;     /* the float type and the same-width integer type */
    LLVMTypeRef fst, ist;   /* their scalar element types */
    unsigned lanes;         /* vector length, 0 for scalars */
    int dbl;                /* 1: double, 0: float */
    int mant;               /* explicit mantissa bits: 52 / 23 */
    int bias;               /* exponent bias: 1023 / 127 */
} mc;

/* Fills m for values of type t; returns 0 if t is not float/double (or a
 * fixed vector of them). */
static int mc_init(mc *m, LLVMBuilderRef b, LLVMTypeRef t)
{
    memset(m, 0, sizeof *m);
    m->b = b;
    m->ft = t;
    m->fst = t;
    m->ctx = LLVMGetTypeContext(t);
    if (LLVMGetTypeKind(t) == LLVMVectorTypeKind) {
        m->lanes = LLVMGetVectorSize(t);
        m->fst = LLVMGetElementType(t);
    }
    LLVMTypeKind k = LLVMGetTypeKind(m->fst);
    if (k != LLVMDoubleTypeKind && k != LLVMFloatTypeKind)
        return 0;
    LLVMBasicBlockRef bb = LLVMGetInsertBlock(b);
    if (!bb)
        return 0;
    m->mod = LLVMGetGlobalParent(LLVMGetBasicBlockParent(bb));
    m->dbl = k == LLVMDoubleTypeKind;
    m->mant = m->dbl ? 52 : 23;
    m->bias = m->dbl ? 1023 : 127;
    m->ist = LLVMIntTypeInContext(m->ctx, m->dbl ? 64 : 32);
    m->it = m->lanes ? LLVMVectorType(m->ist, m->lanes) : m->ist;
    return 1;
}

/* index into the {double, float} constant tables */
#define P(tab) ((tab)[m->dbl ? 0 : 1])

static LLVMValueRef splat(mc *m, LLVMValueRef s)
{
    if (!m->lanes)
        return s;
    LLVMValueRef small[64];
    LLVMValueRef *v = m->lanes <= 64 ? small : malloc(m->lanes * sizeof *v);
    if (!v)
        return LLVMGetPoison(LLVMVectorType(LLVMTypeOf(s), m->lanes));
    for (unsigned i = 0; i < m->lanes; i++)
        v[i] = s;
    LLVMValueRef r = LLVMConstVector(v, m->lanes);
    if (v != small)
        free(v);
    return r;
}

static LLVMValueRef kf(mc *m, double v) { return splat(m, LLVMConstReal(m->fst, v)); }
static LLVMValueRef ki(mc *m, long long v)
{
    return splat(m, LLVMConstInt(m->ist, (unsigned long long)v, 1));
}

/* Conversions between small integer-valued floats and m->it.  For double
 * they go through i32: AVX2 converts <4 x double> to and from <4 x i32> in
 * one instruction but has nothing for i64, which LLVM would scalarize. */
static LLVMValueRef to_int(mc *m, LLVMValueRef v, const char *n)
{
    if (!m->dbl)
        return LLVMBuildFPToSI(m->b, v, m->it, n);
    LLVMTypeRef i32 = LLVMInt32TypeInContext(m->ctx);
    if (m->lanes)
        i32 = LLVMVectorType(i32, m->lanes);
    return LLVMBuildSExt(m->b, LLVMBuildFPToSI(m->b, v, i32, n), m->it, n);
}
static LLVMValueRef to_fp(mc *m, LLVMValueRef v, const char *n)
{
    if (!m->dbl)
        return LLVMBuildSIToFP(m->b, v, m->ft, n);
    LLVMTypeRef i32 = LLVMInt32TypeInContext(m->ctx);
    if (m->lanes)
        i32 = LLVMVectorType(i32, m->lanes);
    return LLVMBuildSIToFP(m->b, LLVMBuildTrunc(m->b, v, i32, n), m->ft, n);
}

/* IR value names "<prefix>.<what>".  A ring of buffers, because several
 * names may be formatted before the instructions that copy them are built
 * (argument evaluation order is unspecified). */
typedef struct {
    const char *p;
    unsigned i;
    char buf[16][48];
} namer;

static const char *nm(namer *nr, const char *what)
{
    char *buf = nr->buf[nr->i++ % 16];
    snprintf(buf, sizeof nr->buf[0], "%s.%s", nr->p, what);
    return buf;
}
#define NAMES namer nr_ = {.p = p, .i = 0}
#define N(what) nm(&nr_, what)

static LLVMValueRef add(mc *m, LLVMValueRef a, LLVMValueRef c, const char *n) { return LLVMBuildFAdd(m->b, a, c, n); }
static LLVMValueRef sub(mc *m, LLVMValueRef a, LLVMValueRef c, const char *n) { return LLVMBuildFSub(m->b, a, c, n); }
static LLVMValueRef mul(mc *m, LLVMValueRef a, LLVMValueRef c, const char *n) { return LLVMBuildFMul(m->b, a, c, n); }
static LLVMValueRef fdv(mc *m, LLVMValueRef a, LLVMValueRef c, const char *n) { return LLVMBuildFDiv(m->b, a, c, n); }
static LLVMValueRef sel(mc *m, LLVMValueRef c, LLVMValueRef a, LLVMValueRef d, const char *n) { return LLVMBuildSelect(m->b, c, a, d, n); }
static LLVMValueRef cmp(mc *m, LLVMRealPredicate pr, LLVMValueRef a, LLVMValueRef c, const char *n) { return LLVMBuildFCmp(m->b, pr, a, c, n); }
static LLVMValueRef band(mc *m, LLVMValueRef a, LLVMValueRef c, const char *n) { return LLVMBuildAnd(m->b, a, c, n); }
static LLVMValueRef bor(mc *m, LLVMValueRef a, LLVMValueRef c, const char *n) { return LLVMBuildOr(m->b, a, c, n); }
static LLVMValueRef bits(mc *m, LLVMValueRef a, const char *n) { return LLVMBuildBitCast(m->b, a, m->it, n); }
static LLVMValueRef unbits(mc *m, LLVMValueRef a, const char *n) { return LLVMBuildBitCast(m->b, a, m->ft, n); }

/* call of an overloaded intrinsic on m->ft */
static LLVMValueRef intr(mc *m, const char *name, LLVMValueRef *args, unsigned nargs, const char *n)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMTypeRef ty = m->ft;
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(m->mod, id, &ty, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(m->ctx, id, &ty, 1);
    return LLVMBuildCall2(m->b, fty, fn, args, nargs, n);
}
static LLVMValueRef fabs_(mc *m, LLVMValueRef a, const char *n) { return intr(m, "llvm.fabs", &a, 1, n); }
static LLVMValueRef floor_(mc *m, LLVMValueRef a, const char *n) { return intr(m, "llvm.floor", &a, 1, n); }
static LLVMValueRef rint_(mc *m, LLVMValueRef a, const char *n) { return intr(m, "llvm.rint", &a, 1, n); }
static LLVMValueRef copysign_(mc *m, LLVMValueRef mag, LLVMValueRef sgn, const char *n)
{
    LLVMValueRef a[2] = {mag, sgn};
    return intr(m, "llvm.copysign", a, 2, n);
}
/* a*b + c rounded once (exact products are built on this) */
static LLVMValueRef fma_(mc *m, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c, const char *n)
{
    LLVMValueRef v[3] = {a, b, c};
    return intr(m, "llvm.fma", v, 3, n);
}
/* a*b + c, fused only if the target likes it (polynomials) */
static LLVMValueRef mad(mc *m, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c, const char *n)
{
    LLVMValueRef v[3] = {a, b, c};
    return intr(m, "llvm.fmuladd", v, 3, n);
}

/* c[0] + c[1] t + ... + c[nc-1] t^(nc-1) by Horner; coefficients are
 * rounded to the element type by LLVMConstReal (they already are). */
static LLVMValueRef horner(mc *m, LLVMValueRef t, const double *c, int nc, const char *n)
{
    LLVMValueRef acc = kf(m, c[nc - 1]);
    for (int i = nc - 2; i >= 0; i--)
        acc = mad(m, acc, t, kf(m, c[i]), n);
    return acc;
}
#define HORNER(t, tab, n) \
    (m->dbl ? horner(m, t, tab##_F64, NCOEF(tab##_F64), n) \
            : horner(m, t, tab##_F32, NCOEF(tab##_F32), n))

/* x clamped to [lo, hi]; nan becomes lo (so later integer conversions
 * never see a nan; callers restore nan at the end). */
static LLVMValueRef clamp(mc *m, LLVMValueRef x, double lo, double hi, const char *p)
{
    NAMES;
    LLVMValueRef c = sel(m, cmp(m, LLVMRealOGE, x, kf(m, lo), N("ge")), x, kf(m, lo), N("lo"));
    return sel(m, cmp(m, LLVMRealOLE, c, kf(m, hi), N("le")), c, kf(m, hi), N("clamp"));
}

/* 2^k for an integer vector k with -bias < k <= bias (the name n is
 * given to the result, n.e and n.bits to the steps) */
static LLVMValueRef pow2i(mc *m, LLVMValueRef k, const char *n)
{
    char a[64], c[64];
    snprintf(a, sizeof a, "%s.e", n);
    snprintf(c, sizeof c, "%s.bits", n);
    LLVMValueRef e = LLVMBuildAdd(m->b, k, ki(m, m->bias), a);
    return unbits(m, LLVMBuildShl(m->b, e, ki(m, m->mant), c), n);
}

/* v * 2^k for integer-valued float k with |k| < 2*bias - 2; the scale is
 * applied in two halves so that both overflow and gradual underflow come
 * out right (only the last multiply rounds). */
static LLVMValueRef scale2(mc *m, LLVMValueRef v, LLVMValueRef kfl, const char *p)
{
    NAMES;
    LLVMValueRef k = to_int(m, kfl, N("ki"));
    LLVMValueRef k1 = LLVMBuildAShr(m->b, k, ki(m, 1), N("k1"));
    LLVMValueRef k2 = LLVMBuildSub(m->b, k, k1, N("k2"));
    LLVMValueRef t = mul(m, v, pow2i(m, k1, N("s1")), N("sc1"));
    return mul(m, t, pow2i(m, k2, N("s2")), N("scaled"));
}

/* Cody-Waite: x = k ln2 + r with k = rint(x / ln2).  x - k*LN2H is exact
 * (the product is exact and the difference is a Sterbenz subtraction);
 * r = hi + lo carries the rounding of the second step.  Needs |k| < 2^11
 * (double) / 2^8 (float), i.e. |x| < 1400 / 170. */
static void ln2_reduce(mc *m, LLVMValueRef x, LLVMValueRef *k, LLVMValueRef *rhi,
                       LLVMValueRef *rlo, const char *p)
{
    NAMES;
    *k = rint_(m, mul(m, x, kf(m, P(LOG2E)), N("xl2e")), N("k"));
    LLVMValueRef t = sub(m, x, mul(m, *k, kf(m, P(LN2H)), N("kln2h")), N("t"));
    LLVMValueRef kl = mul(m, *k, kf(m, P(LN2L)), N("kln2l"));
    *rhi = sub(m, t, kl, N("r"));
    if (rlo)
        *rlo = sub(m, sub(m, t, *rhi, N("rerr")), kl, N("rlo"));
}

/* expm1(r) = r + r^2 Q(r) for |r| <= 0.35 */
static LLVMValueRef expm1_poly(mc *m, LLVMValueRef r, const char *p)
{
    NAMES;
    LLVMValueRef z = mul(m, r, r, N("r2"));
    LLVMValueRef q = HORNER(r, EXPM1_Q, N("q"));
    return mad(m, z, q, r, N("em"));
}

/* ------------------------------------------------------------------ */
/* exp                                                                 */

/* float only: x = k ln2 + r with |r| <= ln2/2 (plus a rounding), for
 * |x| < 2^21.  Adding 1.5 * 2^23 to x log2(e) rounds it to an integer k
 * (floats of that size are integers) and leaves k in the low bits of *t,
 * bits(*t) = bits(1.5 * 2^23) + k, so neither a round instruction nor a
 * float -> int conversion is needed.  Then r = x - k LN2H - k LN2L as in
 * ln2_reduce, with fmuladd (exact with or without fusing: k LN2H is exact
 * and the difference is a Sterbenz subtraction). */
#define SHIFTER_F32 0x1.8p23
static LLVMValueRef exp_reduce_f32(mc *m, LLVMValueRef x, LLVMValueRef *t, const char *p)
{
    NAMES;
    *t = mad(m, x, kf(m, P(LOG2E)), kf(m, SHIFTER_F32), N("t"));
    LLVMValueRef k = sub(m, *t, kf(m, SHIFTER_F32), N("k"));
    LLVMValueRef r = mad(m, k, kf(m, -P(LN2H)), x, N("rh"));
    return mad(m, k, kf(m, -P(LN2L)), r, N("r"));
}

/* float only: exp(r) for |r| <= 0.35, 1 + r (1 + r Q(r)) (relative error
 * of the fit 2^-27.6).  Q by Estrin's scheme, the last two steps by
 * Horner (they carry the accuracy): 20 cycles of latency instead of 24,
 * for two more instructions.  In a loop that chains several functions
 * (the benchmark's tanh -> exp -> divide) latency is what limits: tanh
 * alone ran 0.84 -> 0.69 ns per float, the chain 1.87 -> 1.76, exp 0.42
 * -> 0.43 (one core, 10^6 floats). */
static LLVMValueRef exp_poly_f32(mc *m, LLVMValueRef r, const char *p)
{
    NAMES;
    const double *c = EXP_Q_F32;
    LLVMValueRef r2 = mul(m, r, r, N("r2"));
    LLVMValueRef lo = mad(m, kf(m, c[1]), r, kf(m, c[0]), N("q01"));
    LLVMValueRef hi = mad(m, kf(m, c[3]), r, kf(m, c[2]), N("q23"));
    LLVMValueRef q = mad(m, r2, mad(m, kf(m, c[4]), r2, hi, N("q234")), lo, N("q"));
    LLVMValueRef e1 = mad(m, q, r, kf(m, 1.0), N("e1"));
    return mad(m, e1, r, kf(m, 1.0), N("er"));
}

/* k of exp_reduce_f32 as an integer, from the bits of t */
static LLVMValueRef shifter_k(mc *m, LLVMValueRef t, const char *n)
{
    int32_t sb;
    float sh = (float)SHIFTER_F32;
    memcpy(&sb, &sh, sizeof sb);
    return LLVMBuildSub(m->b, bits(m, t, n), ki(m, sb), n);
}

/* x clamped to [lo, hi], nan kept (where clamp() makes it lo): for code
 * whose arithmetic carries a nan through to the result by itself */
static LLVMValueRef clamp_keep_nan(mc *m, LLVMValueRef x, double lo, double hi, const char *p)
{
    NAMES;
    LLVMValueRef c = sel(m, cmp(m, LLVMRealOLT, x, kf(m, lo), N("lt")), kf(m, lo), x, N("lo"));
    return sel(m, cmp(m, LLVMRealOGT, c, kf(m, hi), N("gt")), kf(m, hi), c, N("clamp"));
}

/* exp(x) for x in ln2_reduce's range (no special cases): 2^k (1 + em). */
static LLVMValueRef exp_core(mc *m, LLVMValueRef x, const char *p)
{
    NAMES;
    LLVMValueRef k, r;
    ln2_reduce(m, x, &k, &r, NULL, p);
    LLVMValueRef em = expm1_poly(m, r, p);
    LLVMValueRef e = add(m, kf(m, 1.0), em, N("er"));
    return scale2(m, e, k, p);
}

/* exp(x): x = k ln2 + r (Cody-Waite, |r| <= ln2/2), exp(r) = 1 + r + r^2 Q(r)
 * with Q of degree 10 (double) / 4 (float), then the exponent is added in
 * two halves so that results in the subnormal range round once and those
 * beyond the range overflow to inf.
 * float: k comes from exp_reduce_f32's shifter, and nan needs no select
 * (the clamp keeps it and the polynomial carries it).  The AVX2 loop body
 * takes 63 instructions per 16 floats (72 before: a round, a conversion,
 * a polynomial one degree longer, a nan select).
 * Measured max error: 0.96 ulp (double), 0.90 ulp (float, every float of
 * [-104, 104] checked by test_cmath's sweep; 0.97 before).  Without FMA
 * hardware (test_cmath --generic) float's is 1.18 ulp: the last two
 * Horner steps then round twice each (0.92 before).  1 + (r + r^2 Q)
 * instead would give 0.99 without FMA but 1.01 with it. */
LLVMValueRef cj_math_exp(LLVMBuilderRef b, LLVMValueRef x)
{
    mc mm, *m = &mm;
    const char *p = "exp";
    NAMES;
    if (!mc_init(m, b, LLVMTypeOf(x)))
        return NULL;
    if (!m->dbl) {
        /* below -104 the result rounds to +0, above 89 it overflows */
        LLVMValueRef xc = clamp_keep_nan(m, x, -104.0, 89.0, p);
        LLVMValueRef t;
        LLVMValueRef r = exp_reduce_f32(m, xc, &t, p);
        LLVMValueRef e = exp_poly_f32(m, r, p);
        LLVMValueRef k = shifter_k(m, t, N("ki"));
        LLVMValueRef k1 = LLVMBuildAShr(m->b, k, ki(m, 1), N("k1"));
        LLVMValueRef k2 = LLVMBuildSub(m->b, k, k1, N("k2"));
        LLVMValueRef sc = mul(m, e, pow2i(m, k1, N("s1")), N("sc1"));
        return mul(m, sc, pow2i(m, k2, N("s2")), N("res"));
    }
    /* below -746 the result rounds to +0, above 710 it overflows */
    LLVMValueRef xc = clamp(m, x, -746.0, 710.0, p);
    LLVMValueRef res = exp_core(m, xc, p);
    return sel(m, cmp(m, LLVMRealUNO, x, x, N("isnan")), x, res, N("res"));
}

/* expm1(x): the same reduction, expm1(x) = 2^k (1 + em) - 1 evaluated as
 * (2^k - 1) + 2^k em with an exact two-sum so nothing cancels badly; for
 * k = 0 it is em itself, relative-accurate near 0.  Where 2^k overflows
 * (x > ~693) the result is 2^k (1 + em).  Tiny |x| returns x (keeps -0).
 * Measured max error: 1.08 ulp (double), 1.01 ulp (float). */
LLVMValueRef cj_math_expm1(LLVMBuilderRef b, LLVMValueRef x)
{
    mc mm, *m = &mm;
    const char *p = "expm1";
    NAMES;
    if (!mc_init(m, b, LLVMTypeOf(x)))
        return NULL;
    /* below lo the result rounds to -1 */
    LLVMValueRef xc = m->dbl ? clamp(m, x, -45.0, 710.0, p) : clamp(m, x, -20.0, 89.0, p);
    LLVMValueRef k, rh, rl;
    ln2_reduce(m, xc, &k, &rh, &rl, p);
    /* em = expm1(rh + rl) ~ emh + eml */
    LLVMValueRef z = mul(m, rh, rh, N("r2"));
    LLVMValueRef zq = mul(m, z, HORNER(rh, EXPM1_Q, N("q")), N("zq"));
    LLVMValueRef emh = add(m, rh, zq, N("emh"));
    LLVMValueRef eml = add(m, add(m, sub(m, rh, emh, N("emd")), zq, N("eme")), rl, N("eml"));
    /* 2^k with k clamped to where it is a normal number */
    double kmax = m->dbl ? 1000.0 : 100.0;
    LLVMValueRef kc = sel(m, cmp(m, LLVMRealOGT, k, kf(m, kmax), N("kbig")), kf(m, kmax), k, N("kc"));
    LLVMValueRef t = pow2i(m, to_int(m, kc, N("kci")), N("t"));
    /* exact for k <= 53; above, its rounding is far below the result's ulp */
    LLVMValueRef a = sub(m, t, kf(m, 1.0), N("tm1"));
    LLVMValueRef c = mul(m, t, emh, N("temh"));          /* exact */
    /* two-sum a + c = s + e */
    LLVMValueRef s = add(m, a, c, N("s"));
    LLVMValueRef bb = sub(m, s, a, N("sb"));
    LLVMValueRef e = add(m, sub(m, a, sub(m, s, bb, N("sa")), N("ea")), sub(m, c, bb, N("eb")), N("e"));
    LLVMValueRef small = add(m, s, mad(m, t, eml, e, N("lo")), N("small"));
    LLVMValueRef big = scale2(m, add(m, kf(m, 1.0), emh, N("er")), k, p);
    LLVMValueRef res = sel(m, cmp(m, LLVMRealOGT, k, kf(m, kmax), N("kbig")), big, small, N("r0"));
    LLVMValueRef tiny = cmp(m, LLVMRealOLT, fabs_(m, x, N("ax")), kf(m, m->dbl ? 0x1p-54 : 0x1p-25), N("tiny"));
    res = sel(m, tiny, x, res, N("r1"));
    return sel(m, cmp(m, LLVMRealUNO, x, x, N("isnan")), x, res, N("res"));
}

/* ------------------------------------------------------------------ */
/* log                                                                 */

/* For positive finite x: u = x scaled into the normal range and eadj the
 * (float) exponent to add back. */
static void log_prescale(mc *m, LLVMValueRef x, LLVMValueRef *u, LLVMValueRef *eadj, const char *p)
{
    NAMES;
    double minnorm = m->dbl ? 0x1p-1022 : 0x1p-126;
    double up = m->dbl ? 0x1p54 : 0x1p25;
    LLVMValueRef sub_ = cmp(m, LLVMRealOLT, x, kf(m, minnorm), N("subn"));
    *u = sel(m, sub_, mul(m, x, kf(m, up), N("xs")), x, N("u"));
    *eadj = sel(m, sub_, kf(m, m->dbl ? -54.0 : -25.0), kf(m, 0.0), N("eadj"));
}

/* u = 2^e * mm with mm in [sqrt(1/2), sqrt(2)); u positive, normal, finite.
 * Returns e as a float (plus eadj) and mm. */
static void log_split(mc *m, LLVMValueRef u, LLVMValueRef eadj, LLVMValueRef *ef,
                      LLVMValueRef *mm, const char *p)
{
    NAMES;
    LLVMValueRef iu = bits(m, u, N("iu"));
    LLVMValueRef e = LLVMBuildSub(m->b, LLVMBuildLShr(m->b, iu, ki(m, m->mant), N("ebits")),
                                  ki(m, m->bias - 1), N("e"));
    long long mmask = (1LL << m->mant) - 1;
    long long half = (long long)(m->bias - 1) << m->mant;  /* bits of 0.5 */
    LLVMValueRef f = unbits(m, bor(m, band(m, iu, ki(m, mmask), N("mbits")), ki(m, half), N("hbits")),
                            N("m"));                      /* in [0.5, 1) */
    LLVMValueRef lo = cmp(m, LLVMRealOLT, f, kf(m, P(SQRT_HALF)), N("mlo"));
    *mm = sel(m, lo, add(m, f, f, N("m2")), f, N("mm"));
    e = sel(m, lo, LLVMBuildSub(m->b, e, ki(m, 1), N("em1")), e, N("e2"));
    *ef = to_fp(m, e, N("ef"));
    if (eadj)
        *ef = add(m, *ef, eadj, N("ef2"));
}

/* log(u) + corr for u positive, normal and finite (corr may be NULL):
 * u = 2^e (1 + f), s = f/(2+f), log(1+f) = f - f^2/2 + s (f^2/2 + z P(z)). */
static LLVMValueRef log_core(mc *m, LLVMValueRef u, LLVMValueRef eadj, LLVMValueRef corr, const char *p)
{
    NAMES;
    LLVMValueRef ef, mm;
    log_split(m, u, eadj, &ef, &mm, p);
    LLVMValueRef f = sub(m, mm, kf(m, 1.0), N("f"));     /* exact */
    LLVMValueRef s = fdv(m, f, add(m, kf(m, 2.0), f, N("f2")), N("s"));
    LLVMValueRef z = mul(m, s, s, N("z"));
    LLVMValueRef R = mul(m, z, HORNER(z, LOG_P, N("pz")), N("R"));
    LLVMValueRef hfsq = mul(m, mul(m, kf(m, 0.5), f, N("hf")), f, N("hfsq"));
    LLVMValueRef lo = mul(m, ef, kf(m, P(LN2L)), N("eln2l"));
    if (corr)
        lo = add(m, lo, corr, N("lo"));
    lo = mad(m, s, add(m, hfsq, R, N("hR")), lo, N("slo"));
    LLVMValueRef l1p = sub(m, f, sub(m, hfsq, lo, N("hl")), N("l1p"));
    return add(m, mul(m, ef, kf(m, P(LN2H)), N("eln2h")), l1p, N("log"));
}

/* log(x): subnormals are scaled up first; x = 2^e (1+f) with 1+f in
 * [sqrt(1/2), sqrt(2)), s = f/(2+f) and log(1+f) = f - f^2/2 + s (f^2/2 + R)
 * where R = z P(z), z = s^2, P of degree 6 (double) / 2 (float); e ln2 is
 * added in two parts.  log(0) = -inf, log(x<0) = nan, log(inf) = inf.
 * Measured max error: 0.82 ulp (double), 0.84 ulp (float). */
LLVMValueRef cj_math_log(LLVMBuilderRef b, LLVMValueRef x)
{
    mc mm, *m = &mm;
    const char *p = "log";
    NAMES;
    if (!mc_init(m, b, LLVMTypeOf(x)))
        return NULL;
    LLVMValueRef inf = kf(m, INFINITY);
    LLVMValueRef ok = LLVMBuildAnd(m->b, cmp(m, LLVMRealOGT, x, kf(m, 0.0), N("pos")),
                                   cmp(m, LLVMRealOLT, x, inf, N("fin")), N("ok"));
    LLVMValueRef xs = sel(m, ok, x, kf(m, 1.0), N("xs"));
    LLVMValueRef u, eadj;
    log_prescale(m, xs, &u, &eadj, p);
    LLVMValueRef res = log_core(m, u, eadj, NULL, p);
    res = sel(m, cmp(m, LLVMRealOEQ, x, inf, N("isinf")), inf, res, N("r1"));
    res = sel(m, cmp(m, LLVMRealOEQ, x, kf(m, 0.0), N("iszero")), kf(m, -INFINITY), res, N("r2"));
    /* x < 0 or nan: nan */
    return sel(m, cmp(m, LLVMRealULT, x, kf(m, 0.0), N("neg")), kf(m, NAN), res, N("res"));
}

/* log1p(x): u = 1 + x rounded, c = the rounding error (exact: 1 - (u - x)
 * when u >= 2, else x - (u - 1)), log1p(x) = log(u) + c/u with log(u) as
 * in cj_math_log.  Tiny |x| returns x.  log1p(-1) = -inf, x < -1: nan.
 * Measured max error: 0.81 ulp (double), 0.78 ulp (float). */
LLVMValueRef cj_math_log1p(LLVMBuilderRef b, LLVMValueRef x)
{
    mc mm, *m = &mm;
    const char *p = "log1p";
    NAMES;
    if (!mc_init(m, b, LLVMTypeOf(x)))
        return NULL;
    LLVMValueRef inf = kf(m, INFINITY);
    LLVMValueRef one = kf(m, 1.0);
    LLVMValueRef ok = LLVMBuildAnd(m->b, cmp(m, LLVMRealOGT, x, kf(m, -1.0), N("gtm1")),
                                   cmp(m, LLVMRealOLT, x, inf, N("fin")), N("ok"));
    LLVMValueRef xs = sel(m, ok, x, kf(m, 0.0), N("xs"));
    LLVMValueRef u = add(m, one, xs, N("u"));
    LLVMValueRef c = sel(m, cmp(m, LLVMRealOGE, u, kf(m, 2.0), N("ubig")),
                         sub(m, one, sub(m, u, xs, N("umx")), N("c1")),
                         sub(m, xs, sub(m, u, one, N("um1")), N("c2")), N("c"));
    LLVMValueRef res = log_core(m, u, NULL, fdv(m, c, u, N("cu")), p);
    LLVMValueRef tiny = cmp(m, LLVMRealOLT, fabs_(m, x, N("ax")), kf(m, m->dbl ? 0x1p-54 : 0x1p-25), N("tiny"));
    res = sel(m, tiny, x, res, N("r0"));
    res = sel(m, cmp(m, LLVMRealOEQ, x, inf, N("isinf")), inf, res, N("r1"));
    res = sel(m, cmp(m, LLVMRealOEQ, x, kf(m, -1.0), N("ism1")), kf(m, -INFINITY), res, N("r2"));
    return sel(m, cmp(m, LLVMRealULT, x, kf(m, -1.0), N("ltm1")), kf(m, NAN), res, N("res"));
}

/* ------------------------------------------------------------------ */
/* tanh                                                                */

/* float tanh's large-|x| path: 1 - 2/(exp(2a) + 1) for a in [0.625, 10]
 * (a is capped at 10, where tanh rounds to 1 from 9.01 on).  2a < 21, so
 * exp(2a) = 2^k p is a normal number and needs neither clamps nor a
 * two-step scale: k is added to the bits of p (the shifter leaves it in
 * t's low bits, and t << 23 is k << 23).  Lanes with a < 0.625 compute a
 * value that is not used; a nan lane gives 1, also unused. */
static LLVMValueRef tanh_big_f32(mc *m, LLVMValueRef a, const char *p)
{
    NAMES;
    LLVMValueRef ac = sel(m, cmp(m, LLVMRealOGT, a, kf(m, 10.0), N("capped")), kf(m, 10.0), a, N("ac"));
    LLVMValueRef t;
    LLVMValueRef r = exp_reduce_f32(m, add(m, ac, ac, N("a2")), &t, p);
    LLVMValueRef pe = exp_poly_f32(m, r, p);
    LLVMValueRef kexp = LLVMBuildShl(m->b, bits(m, t, N("tb")), ki(m, m->mant), N("kexp"));
    LLVMValueRef e = unbits(m, LLVMBuildAdd(m->b, bits(m, pe, N("pb")), kexp, N("eb")), N("e"));
    LLVMValueRef q = fdv(m, kf(m, 2.0), add(m, e, kf(m, 1.0), N("e1")), N("q"));
    return sub(m, kf(m, 1.0), q, N("big"));
}

/* tanh(x) on a = |x|: for a < 0.625, a + a^3 T(a^2) with T of degree 11
 * (double) / 5 (float); above, 1 - 2/(exp(2a) + 1) (a is capped where
 * tanh rounds to 1); the sign is x's, so tanh(-0) = -0.
 * double: exp as in cj_math_exp, copysign, and a select for nan.
 * float: tanh_big_f32; the result (positive, or a nan from the small
 * path, which a nan lane takes) gets x's sign bit by an or.  The AVX2
 * loop body takes 104 instructions per 16 floats (129 before: clamps,
 * rint, a conversion, the two-step scale, copysign and a nan select).
 * Measured max error: 1.30 ulp (double), 1.36 ulp (float, every float of
 * [2^-14, 10] checked by test_cmath's sweep; 1.31 before). */
LLVMValueRef cj_math_tanh(LLVMBuilderRef b, LLVMValueRef x)
{
    mc mm, *m = &mm;
    const char *p = "tanh";
    NAMES;
    if (!mc_init(m, b, LLVMTypeOf(x)))
        return NULL;
    LLVMValueRef a = fabs_(m, x, N("a"));
    LLVMValueRef u = mul(m, a, a, N("u"));
    LLVMValueRef au = mul(m, a, u, N("au"));
    LLVMValueRef small = mad(m, au, HORNER(u, TANH_T, N("t")), a, N("small"));
    if (!m->dbl) {
        LLVMValueRef big = tanh_big_f32(m, a, p);
        LLVMValueRef ra = sel(m, cmp(m, LLVMRealOGE, a, kf(m, 0.625), N("isbig")), big, small, N("ra"));
        LLVMValueRef sgn = band(m, bits(m, x, N("xb")), ki(m, 1LL << 31), N("sgn"));
        return unbits(m, bor(m, bits(m, ra, N("rab")), sgn, N("resb")), N("res"));
    }
    /* a in [0.625, cap]; nan goes to cap and is restored below */
    LLVMValueRef ac = clamp(m, a, 0.625, 20.0, p);
    LLVMValueRef e = exp_core(m, add(m, ac, ac, N("a2")), p);
    LLVMValueRef q = fdv(m, kf(m, 2.0), add(m, e, kf(m, 1.0), N("e1")), N("q"));
    LLVMValueRef big = sub(m, kf(m, 1.0), q, N("big"));
    LLVMValueRef r = sel(m, cmp(m, LLVMRealOLT, a, kf(m, 0.625), N("issmall")), small, big, N("ra"));
    r = copysign_(m, r, x, N("rs"));
    return sel(m, cmp(m, LLVMRealUNO, x, x, N("isnan")), x, r, N("res"));
}

/* ------------------------------------------------------------------ */
/* double-double arithmetic (sin/cos Payne-Hanek, pow)                 */

/* double-double helpers: values are (hi, lo) pairs */
typedef struct { LLVMValueRef hi, lo; } dd;

static dd two_sum(mc *m, LLVMValueRef a, LLVMValueRef c, const char *p)
{
    NAMES;
    LLVMValueRef s = add(m, a, c, N("s"));
    LLVMValueRef bb = sub(m, s, a, N("bv"));
    LLVMValueRef e = add(m, sub(m, a, sub(m, s, bb, N("av")), N("ae")), sub(m, c, bb, N("be")), N("e"));
    return (dd){s, e};
}
/* |a| >= |c| */
static dd fast_two_sum(mc *m, LLVMValueRef a, LLVMValueRef c, const char *p)
{
    NAMES;
    LLVMValueRef s = add(m, a, c, N("s"));
    return (dd){s, sub(m, c, sub(m, s, a, N("d")), N("e"))};
}
static dd two_prod(mc *m, LLVMValueRef a, LLVMValueRef c, const char *p)
{
    NAMES;
    LLVMValueRef pr = mul(m, a, c, N("p"));
    return (dd){pr, fma_(m, a, c, LLVMBuildFNeg(m->b, pr, N("np")), N("pe"))};
}
static dd dd_add(mc *m, dd a, dd c, const char *p)
{
    NAMES;
    dd s = two_sum(m, a.hi, c.hi, p);
    LLVMValueRef lo = add(m, s.lo, add(m, a.lo, c.lo, N("ll")), N("lo"));
    return fast_two_sum(m, s.hi, lo, p);
}
static dd dd_mul(mc *m, dd a, dd c, const char *p)
{
    NAMES;
    dd pr = two_prod(m, a.hi, c.hi, p);
    LLVMValueRef cross = mad(m, a.hi, c.lo, mul(m, a.lo, c.hi, N("x1")), N("x2"));
    return fast_two_sum(m, pr.hi, add(m, pr.lo, cross, N("lo")), p);
}
static dd ddk(mc *m, const double v[2]) { return (dd){kf(m, v[0]), kf(m, v[1])}; }

/* ------------------------------------------------------------------ */
/* sin, cos                                                            */

/* The fraction bits of 2/pi, 64 to a word, most significant first, after
 * a word of zeros (tests/c/two_over_pi.py computes them): word w >= 1
 * holds bits 64 (w - 1) + 1 ... 64 w, bit i having the value 2^-i.  The
 * Payne-Hanek reduction of a double of exponent 1023 reads up to word 19. */
static const unsigned long long TWO_OVER_PI_BITS[] = {
    0x0000000000000000ULL, 0xa2f9836e4e441529ULL, 0xfc2757d1f534ddc0ULL,
    0xdb6295993c439041ULL, 0xfe5163abdebbc561ULL, 0xb7246e3a424dd2e0ULL,
    0x06492eea09d1921cULL, 0xfe1deb1cb129a73eULL, 0xe88235f52ebb4484ULL,
    0xe99c7026b45f7e41ULL, 0x3991d639835339f4ULL, 0x9c845f8bbdf9283bULL,
    0x1ff897ffde05980fULL, 0xef2f118b5a0a6d1fULL, 0x6d367ecf27cb09b7ULL,
    0x4f463f669e5fea2dULL, 0x7527bac7ebe5f17bULL, 0x3d0739f78a5292eaULL,
    0x6bfb5fb11f8d5d08ULL, 0x56033046fc7b6babULL,
};
#define TWO_OVER_PI_WORDS NCOEF(TWO_OVER_PI_BITS)

/* |x| from which sin and cos take the Payne-Hanek path, {double, float}.
 * Below, the Cody-Waite reduction is exact enough with a wide margin (its
 * error k 2^-161 / k 2^-74 stays far below the closest that x comes to a
 * multiple of pi/2). */
static const double TRIG_BIG[2] = {0x1p30, 0x1p15};
/* Up to this |x| the float slow path reduces by Cody-Waite in double:
 * k is exact, x 2/pi rounds to within 2^-8 of it, and the error k 2^-161
 * is far below what float needs. */
#define FLOAT_CW_MAX 0x1p45

/* vector widths of the slow path offered to the loop vectorizer; only
 * the TRIG_CORE_LANES one holds the vector code, the others call it on
 * pieces of their vector (compiling a variant of each width costs 10-20
 * ms per kernel, most of it in the backend's 512-bit integer vectors) */
static const unsigned TRIG_VF[2][3] = {{2, 4, 8}, {4, 8, 16}};
#define TRIG_CORE_LANES 4

static LLVMValueRef ku(mc *m, unsigned long long v) { return splat(m, LLVMConstInt(m->ist, v, 0)); }
static LLVMValueRef iadd(mc *m, LLVMValueRef a, LLVMValueRef c, const char *n) { return LLVMBuildAdd(m->b, a, c, n); }
static LLVMValueRef imul(mc *m, LLVMValueRef a, LLVMValueRef c, const char *n) { return LLVMBuildMul(m->b, a, c, n); }
static LLVMValueRef shr(mc *m, LLVMValueRef a, unsigned s, const char *n) { return LLVMBuildLShr(m->b, a, ku(m, s), n); }
static LLVMValueRef shl(mc *m, LLVMValueRef a, unsigned s, const char *n) { return LLVMBuildShl(m->b, a, ku(m, s), n); }
static LLVMValueRef lo32(mc *m, LLVMValueRef a, const char *n) { return band(m, a, ku(m, 0xffffffffULL), n); }

/* sin(r) or cos(r) of the quadrant q (an integer of m->it, any value: only
 * q mod 4 counts) for |r| <= 0.8: the value at x = q pi/2 + r.
 * sin(r) = r + r^3 S(r^2), cos(r) = 1 - r^2/2 + r^4 C(r^2) (the 1 - r^2/2
 * step is a fast two-sum). */
static LLVMValueRef trig_eval(mc *m, LLVMValueRef r, LLVMValueRef q, int want_cos, const char *p)
{
    NAMES;
    LLVMValueRef z = mul(m, r, r, N("z"));
    LLVMValueRef sinr = mad(m, mul(m, r, z, N("rz")), HORNER(z, SIN_S, N("sp")), r, N("sinr"));
    LLVMValueRef hz = mul(m, z, kf(m, 0.5), N("hz"));
    LLVMValueRef w = sub(m, kf(m, 1.0), hz, N("w"));
    LLVMValueRef werr = sub(m, sub(m, kf(m, 1.0), w, N("omw")), hz, N("werr"));
    LLVMValueRef ct = mad(m, mul(m, z, z, N("z2")), HORNER(z, COS_C, N("cp")), werr, N("ct"));
    LLVMValueRef cosr = add(m, w, ct, N("cosr"));
    if (want_cos)
        q = iadd(m, q, ki(m, 1), N("q1"));
    LLVMValueRef odd = LLVMBuildICmp(m->b, LLVMIntNE, band(m, q, ki(m, 1), N("qodd")), ki(m, 0), N("swap"));
    LLVMValueRef neg = LLVMBuildICmp(m->b, LLVMIntNE, band(m, q, ki(m, 2), N("qneg")), ki(m, 0), N("neg"));
    LLVMValueRef v = sel(m, odd, cosr, sinr, N("v"));
    return sel(m, neg, LLVMBuildFNeg(m->b, v, N("nv")), v, N("sv"));
}

/* Cody-Waite: k = rint(x 2/pi), r = x - k pi/2 with pi/2 in three parts
 * (the first fma is exact; 159 bits of pi/2 for double, 72 for float);
 * returns q = k mod 4 (computed exactly in floating point, then
 * converted) and r. */
static void cody_waite(mc *m, LLVMValueRef x, LLVMValueRef *q, LLVMValueRef *r, const char *p)
{
    NAMES;
    LLVMValueRef k = rint_(m, mul(m, x, kf(m, P(TWO_OVER_PI)), N("x2pi")), N("k"));
    LLVMValueRef nk = LLVMBuildFNeg(m->b, k, N("nk"));
    LLVMValueRef t = fma_(m, nk, kf(m, P(PIO2_1)), x, N("r1"));
    t = fma_(m, nk, kf(m, P(PIO2_2)), t, N("r2"));
    *r = fma_(m, nk, kf(m, P(PIO2_3)), t, N("r3"));
    LLVMValueRef k4 = floor_(m, mul(m, k, kf(m, 0.25), N("kq")), N("kq4"));
    LLVMValueRef qf = LLVMBuildFSub(m->b, k, mul(m, k4, kf(m, 4.0), N("k4")), N("qf"));
    *q = to_int(m, qf, N("q"));
}

/* The table words W[j], ..., W[j + count - 1] for a per-lane j with
 * j + count <= TWO_OVER_PI_WORDS, loaded from a constant array of the
 * module (made once; a gather for vectors). */
static void table_window(mc *m, LLVMValueRef j, int count, LLVMValueRef *out, const char *p)
{
    NAMES;
    LLVMTypeRef i64 = LLVMInt64TypeInContext(m->ctx);
    LLVMTypeRef at = LLVMArrayType2(i64, TWO_OVER_PI_WORDS);
    LLVMValueRef tab = LLVMGetNamedGlobal(m->mod, "cj.math.two_over_pi");
    if (!tab) {
        LLVMValueRef w[TWO_OVER_PI_WORDS];
        for (int i = 0; i < TWO_OVER_PI_WORDS; i++)
            w[i] = LLVMConstInt(i64, TWO_OVER_PI_BITS[i], 0);
        tab = LLVMAddGlobal(m->mod, at, "cj.math.two_over_pi");
        LLVMSetInitializer(tab, LLVMConstArray2(i64, w, TWO_OVER_PI_WORDS));
        LLVMSetGlobalConstant(tab, 1);
        LLVMSetLinkage(tab, LLVMInternalLinkage);
        LLVMSetUnnamedAddress(tab, LLVMGlobalUnnamedAddr);
    }
    LLVMTypeRef ptr = LLVMPointerTypeInContext(m->ctx, 0);
    for (int i = 0; i < count; i++) {
        LLVMValueRef idx = iadd(m, j, ku(m, (unsigned)i), N("wi"));
        LLVMValueRef addr = LLVMBuildGEP2(m->b, i64, tab, &idx, 1, N("wp"));
        if (!m->lanes) {
            out[i] = LLVMBuildLoad2(m->b, i64, addr, N("w"));
            continue;
        }
        LLVMTypeRef tys[2] = {m->it, LLVMVectorType(ptr, m->lanes)};
        unsigned id = LLVMLookupIntrinsicID("llvm.masked.gather", 18);
        LLVMValueRef fn = LLVMGetIntrinsicDeclaration(m->mod, id, tys, 2);
        LLVMValueRef args[4] = {addr, LLVMConstInt(LLVMInt32TypeInContext(m->ctx), 8, 0),
                                splat(m, LLVMConstInt(LLVMInt1TypeInContext(m->ctx), 1, 0)), LLVMGetPoison(m->it)};
        out[i] = LLVMBuildCall2(m->b, LLVMIntrinsicGetType(m->ctx, id, tys, 2), fn, args, 4, N("w"));
    }
}

/* the 64 bits starting sh bits into the pair a:c (sh in [0, 63]) */
static LLVMValueRef funnel(mc *m, LLVMValueRef a, LLVMValueRef c, LLVMValueRef sh, const char *n)
{
    LLVMValueRef hi = LLVMBuildShl(m->b, a, sh, n);
    /* c >> (64 - sh) in two steps: a shift by 64 would be poison */
    LLVMValueRef lo = LLVMBuildLShr(m->b, shr(m, c, 1, n), LLVMBuildSub(m->b, ku(m, 63), sh, n), n);
    return bor(m, hi, lo, n);
}

/* 0 <= v < 2^52 (an integer of d->it) as a double, exactly */
static LLVMValueRef u52_to_fp(mc *d, LLVMValueRef v, const char *n)
{
    LLVMValueRef b = unbits(d, bor(d, v, ku(d, 0x4330000000000000ULL), n), n);
    return sub(d, b, kf(d, 0x1p52), n);
}

/* Payne-Hanek reduction of ax = |x| > 0, finite, as a double (d is a
 * double context; f32: x is a float widened to double).  With ax = X 2^q,
 * X an integer of 24 (f32) or 53 bits, only the bits of 2/pi from 2^-(q+2)
 * down matter for ax 2/pi mod 4: 96 (f32) / 192 of them (the window) are
 * multiplied by X as integers, in 32-bit pieces; the product's bits from
 * 2^1 down to 2^-62 (and 2^-126 for double) are ax 2/pi mod 4 in fixed
 * point, to about 2^-61 (f32) / 2^-124, which is more than enough: ax
 * 2/pi is never closer than 2^-29.8 (float) / 2^-61.5 (double) to an
 * integer (tests/c/two_over_pi.py --hard).  Returns k (mod 4, in d->it)
 * and r = ax - k pi/2 as a double, |r| <= pi/4, rounded once (f32) or
 * accurate to about 2^-100 before the final rounding. */
static void payne_hanek(mc *d, LLVMValueRef ax, int f32, LLVMValueRef *k_out, LLVMValueRef *r_out, const char *p)
{
    NAMES;
    LLVMBuilderRef b = d->b;
    LLVMValueRef ix = bits(d, ax, N("ix"));
    LLVMValueRef e = LLVMBuildSub(b, shr(d, ix, 52, N("eb")), ku(d, 1023), N("e"));
    /* the window starts at 2/pi's bit s = e - 24 (f32) / e - 53, the
     * padded table's bit s + 63 >= 0: e clamped for lanes this path
     * does not serve (0, subnormals, small values) */
    long long emin = f32 ? -39 : -10, emax = f32 ? 127 : 1023;
    e = sel(d, LLVMBuildICmp(b, LLVMIntSLT, e, ki(d, emin), N("elo")), ki(d, emin), e, N("e1"));
    e = sel(d, LLVMBuildICmp(b, LLVMIntSGT, e, ki(d, emax), N("ehi")), ki(d, emax), e, N("e2"));
    LLVMValueRef pos = iadd(d, e, ki(d, f32 ? 39 : 10), N("pos"));
    LLVMValueRef j = shr(d, pos, 6, N("j"));
    LLVMValueRef sh = band(d, pos, ku(d, 63), N("sh"));
    LLVMValueRef w[4], t[3];
    int nt = f32 ? 2 : 3;
    table_window(d, j, nt + 1, w, p);
    for (int i = 0; i < nt; i++)
        t[i] = funnel(d, w[i], w[i + 1], sh, N("t"));
    LLVMValueRef X = bor(d, band(d, ix, ku(d, (1ULL << 52) - 1), N("mb")), ku(d, 1ULL << 52), N("X"));
    /* H: ax 2/pi mod 4 in units of 2^-62; L (double only): the next 64 bits */
    LLVMValueRef H, L = NULL;
    if (f32) {
        /* X = M 2^29, window T = t0 2^64 + t1 with bits of weight 2^-126:
         * H = bits 64..127 of M T = lo64(M t0) + hi64(M t1) */
        LLVMValueRef M = shr(d, X, 29, N("M"));
        LLVMValueRef lo = iadd(d, imul(d, M, lo32(d, t[0], N("t0l")), N("m0l")),
                               shl(d, imul(d, M, shr(d, t[0], 32, N("t0h")), N("m0h")), 32, N("m0hs")), N("lo"));
        LLVMValueRef m1 = iadd(d, imul(d, M, shr(d, t[1], 32, N("t1h")), N("m1h")),
                               shr(d, imul(d, M, lo32(d, t[1], N("t1l")), N("m1l")), 32, N("m1ls")), N("m1"));
        H = iadd(d, lo, shr(d, m1, 32, N("hi")), N("H"));
    } else {
        /* X = xh 2^32 + xl, T = t0 2^128 + t1 2^64 + t2 in six 32-bit limbs
         * u0 (top) .. u5 with weight 2^-190 for the last bit: H:L = bits
         * 64..191 of X T, summed by 32-bit columns (the partial products'
         * halves), carries from below bit 64 dropped */
        LLVMValueRef xl = lo32(d, X, N("xl")), xh = shr(d, X, 32, N("xh"));
        LLVMValueRef u[6], pl[5], ph[6];
        for (int i = 0; i < 3; i++) {
            u[2 * i] = shr(d, t[i], 32, N("uh"));
            u[2 * i + 1] = lo32(d, t[i], N("ul"));
        }
        for (int i = 0; i < 5; i++)
            pl[i] = imul(d, xl, u[i], N("pl"));      /* at 2^(32 (5 - i)) */
        for (int i = 1; i < 6; i++)
            ph[i] = imul(d, xh, u[i], N("ph"));      /* at 2^(32 (6 - i)) */
#define HI(v) shr(d, v, 32, N("h"))
#define LO(v) lo32(d, v, N("l"))
        LLVMValueRef c2 = iadd(d, iadd(d, HI(pl[4]), HI(ph[5]), N("c")), iadd(d, LO(pl[3]), LO(ph[4]), N("c")), N("c2"));
        LLVMValueRef c3 = iadd(d, iadd(d, iadd(d, HI(pl[3]), HI(ph[4]), N("c")), iadd(d, LO(pl[2]), LO(ph[3]), N("c")), N("c")),
                               HI(c2), N("c3"));
        LLVMValueRef c4 = iadd(d, iadd(d, iadd(d, HI(pl[2]), HI(ph[3]), N("c")), iadd(d, LO(pl[1]), LO(ph[2]), N("c")), N("c")),
                               HI(c3), N("c4"));
        LLVMValueRef c5 = iadd(d, iadd(d, iadd(d, HI(pl[1]), HI(ph[2]), N("c")), iadd(d, LO(pl[0]), LO(ph[1]), N("c")), N("c")),
                               HI(c4), N("c5"));
#undef HI
#undef LO
        H = bor(d, shl(d, c5, 32, N("c5s")), lo32(d, c4, N("c4l")), N("H"));
        L = bor(d, shl(d, c3, 32, N("c3s")), lo32(d, c2, N("c2l")), N("L"));
    }
    /* k = H rounded to a multiple of 2^62 (mod 4), f = H - k 2^62 signed */
    LLVMValueRef k = shr(d, iadd(d, H, ku(d, 1ULL << 61), N("Hr")), 62, N("k"));
    LLVMValueRef fr = LLVMBuildSub(b, H, shl(d, k, 62, N("k62")), N("fr"));
    LLVMTypeRef i32 = LLVMInt32TypeInContext(d->ctx);
    if (d->lanes)
        i32 = LLVMVectorType(i32, d->lanes);
    LLVMValueRef fhi = LLVMBuildTrunc(b, LLVMBuildAShr(b, fr, ku(d, 32), N("frh")), i32, N("frh32"));
    LLVMValueRef d1 = mul(d, LLVMBuildSIToFP(b, fhi, d->ft, N("d1i")), kf(d, 0x1p-30), N("d1"));
    LLVMValueRef d2 = mul(d, u52_to_fp(d, lo32(d, fr, N("frl")), N("d2i")), kf(d, 0x1p-62), N("d2"));
    LLVMValueRef r;
    if (f32) {
        /* relative error 2^-52: far below float's */
        r = mul(d, add(d, d1, d2, N("f")), kf(d, PIO2_1[0]), N("r"));
    } else {
        LLVMValueRef d3 = mul(d, u52_to_fp(d, shr(d, L, 32, N("Lh")), N("d3i")), kf(d, 0x1p-94), N("d3"));
        LLVMValueRef d4 = mul(d, u52_to_fp(d, lo32(d, L, N("Ll")), N("d4i")), kf(d, 0x1p-126), N("d4"));
        /* f = d1 + d2 + d3 + d4 as a double-double: d1 + d2 is exact when
         * small, and d3 + d4 < 2^-62 <= |d1 + d2| unless that is 0 */
        dd s = two_sum(d, d1, d2, p);
        dd f = fast_two_sum(d, s.hi, add(d, s.lo, add(d, d3, d4, N("d34")), N("flo")), p);
        /* r = f pi/2 with pi/2 as a double-double */
        dd pr = two_prod(d, f.hi, kf(d, PIO2_1[0]), p);
        LLVMValueRef lo = mad(d, f.hi, kf(d, PIO2_2[0]), mul(d, f.lo, kf(d, PIO2_1[0]), N("flp")), N("rlo"));
        r = add(d, pr.hi, add(d, pr.lo, lo, N("rl")), N("r"));
    }
    *k_out = k;
    *r_out = r;
}

/* Marks fn as used so that no pass deletes it: the vector variants are
 * only named by a call's attribute until the vectorizer calls them. */
static void keep_used(LLVMModuleRef mod, LLVMValueRef fn)
{
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0);
    LLVMValueRef old = LLVMGetNamedGlobal(mod, "llvm.compiler.used");
    LLVMValueRef init = old ? LLVMGetInitializer(old) : NULL;
    unsigned n = init ? (unsigned)LLVMGetNumOperands(init) : 0;
    LLVMValueRef *els = malloc((n + 1) * sizeof *els);
    if (!els)
        return;   /* the function may then be deleted: the call falls back to scalar calls */
    for (unsigned i = 0; i < n; i++)
        els[i] = LLVMGetOperand(init, i);
    els[n] = fn;
    LLVMValueRef arr = LLVMConstArray2(ptr, els, n + 1);
    free(els);
    if (old)
        LLVMDeleteGlobal(old);
    LLVMValueRef g = LLVMAddGlobal(mod, LLVMTypeOf(arr), "llvm.compiler.used");
    LLVMSetLinkage(g, LLVMAppendingLinkage);
    LLVMSetSection(g, "llvm.metadata");
    LLVMSetInitializer(g, arr);
}

static void add_fn_attr(LLVMContextRef ctx, LLVMValueRef v, int call, const char *name, unsigned long long val)
{
    LLVMAttributeRef a = LLVMCreateEnumAttribute(ctx, LLVMGetEnumAttributeKindForName(name, strlen(name)), val);
    if (call)
        LLVMAddCallSiteAttribute(v, LLVMAttributeFunctionIndex, a);
    else
        LLVMAddAttributeAtIndex(v, LLVMAttributeFunctionIndex, a);
}

/* no side effects: the vectorizer may widen the call, and CSE merge it */
static void pure_attrs(LLVMContextRef ctx, LLVMValueRef v, int call)
{
    add_fn_attr(ctx, v, call, "nounwind", 0);
    add_fn_attr(ctx, v, call, "willreturn", 0);
    add_fn_attr(ctx, v, call, "memory", 0);   /* memory(none) */
}

/* an i1 that is true if any lane of the i1 (vector) c is */
static LLVMValueRef any_lane(LLVMBuilderRef b, LLVMValueRef c, int lanes, const char *n)
{
    if (!lanes)
        return c;
    LLVMTypeRef bt = LLVMTypeOf(c);
    LLVMModuleRef mod = LLVMGetGlobalParent(LLVMGetBasicBlockParent(LLVMGetInsertBlock(b)));
    unsigned id = LLVMLookupIntrinsicID("llvm.vector.reduce.or", 21);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(mod, id, &bt, 1);
    return LLVMBuildCall2(b, LLVMIntrinsicGetType(LLVMGetModuleContext(mod), id, &bt, 1), fn, &c, 1, n);
}

/* payne_hanek of |x| (ax, finite), with k and r negated for x < 0 */
static void payne_hanek_signed(mc *d, LLVMValueRef x, LLVMValueRef ax, int f32, LLVMValueRef *k, LLVMValueRef *r,
                               const char *p)
{
    NAMES;
    LLVMValueRef ka, ra;
    payne_hanek(d, ax, f32, &ka, &ra, p);
    LLVMValueRef xneg = cmp(d, LLVMRealOLT, x, kf(d, 0.0), N("xneg"));
    *r = sel(d, xneg, LLVMBuildFNeg(d->b, ra, N("nr")), ra, N("rs"));
    *k = sel(d, xneg, LLVMBuildNeg(d->b, ka, N("nk")), ka, N("ks"));
}

/* Does mod only declare the slow-path helpers below (cj_math_helpers_elsewhere)? */
static bool helpers_elsewhere(LLVMModuleRef mod)
{
    return LLVMGetNamedMetadata(mod, "cj.math.helpers.elsewhere", 25) != NULL;
}

void cj_math_helpers_elsewhere(LLVMModuleRef mod)
{
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMAddNamedMetadataOperand(mod, "cj.math.helpers.elsewhere", LLVMMetadataAsValue(ctx, LLVMMDNodeInContext2(ctx, NULL, 0)));
}

static void trig_big_name(char *buf, size_t n, int dbl, unsigned lanes, int want_cos)
{
    int k = snprintf(buf, n, "cj.math.%s.%s.big", want_cos ? "cos" : "sin", dbl ? "f64" : "f32");
    if (lanes)
        snprintf(buf + k, n - (size_t)k, ".v%u", lanes);
}

/* The slow path of sin/cos, a function of the module (made once):
 *     T cj.math.sin.f32.big(T x, T v)   (T float, double or a vector)
 * returns v, the fast path's result, unless some lane of x has
 * TRIG_BIG <= |x| < inf; then those lanes get the Payne-Hanek result.  A
 * branch skips the work when no lane needs it, which is why this is a
 * function: the loop vectorizer would turn a branch in the loop into
 * selects and so do the work always. */
static LLVMValueRef trig_big_fn(LLVMModuleRef mod, LLVMTypeRef t, int want_cos)
{
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    int lanes = LLVMGetTypeKind(t) == LLVMVectorTypeKind ? (int)LLVMGetVectorSize(t) : 0;
    LLVMTypeRef st = lanes ? LLVMGetElementType(t) : t;
    int dbl = LLVMGetTypeKind(st) == LLVMDoubleTypeKind;
    char name[64];
    trig_big_name(name, sizeof name, dbl, (unsigned)lanes, want_cos);
    LLVMValueRef fn = LLVMGetNamedFunction(mod, name);
    if (fn)
        return fn;
    LLVMTypeRef params[2] = {t, t};
    fn = LLVMAddFunction(mod, name, LLVMFunctionType(t, params, 2, 0));
    pure_attrs(ctx, fn, 0);
    if (helpers_elsewhere(mod))
        return fn;   /* a declaration: the JIT links the one compiled copy */
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    add_fn_attr(ctx, fn, 0, "noinline", 0);
    if (lanes)
        keep_used(mod, fn);
    LLVMValueRef x = LLVMGetParam(fn, 0), v = LLVMGetParam(fn, 1);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(ctx, fn, "entry");
    LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(ctx, fn, "slow");
    LLVMBasicBlockRef fast = LLVMAppendBasicBlockInContext(ctx, fn, "fast");
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    LLVMPositionBuilderAtEnd(b, entry);
    mc mm, *m = &mm;
    mc_init(m, b, t);
    const char *p = want_cos ? "cos" : "sin";
    NAMES;
    LLVMValueRef ax = fabs_(m, x, N("ax"));
    LLVMValueRef big = LLVMBuildAnd(b, cmp(m, LLVMRealOGE, ax, kf(m, P(TRIG_BIG)), N("ge")),
                                    cmp(m, LLVMRealOLT, ax, kf(m, INFINITY), N("fin")), N("big"));
    LLVMBuildCondBr(b, any_lane(b, big, lanes, N("any")), slow, fast);
    LLVMPositionBuilderAtEnd(b, fast);
    LLVMBuildRet(b, v);

    LLVMPositionBuilderAtEnd(b, slow);
    if (lanes && lanes != TRIG_CORE_LANES) {
        /* other widths: the core variant on TRIG_CORE_LANES lanes at a
         * time (x padded with 0, which it leaves alone) */
        LLVMValueRef core = trig_big_fn(mod, LLVMVectorType(st, TRIG_CORE_LANES), want_cos);
        LLVMTypeRef i32 = LLVMInt32TypeInContext(ctx);
        LLVMValueRef parts[16];
        int nparts = 0;
        for (int lo = 0; lo < lanes; lo += TRIG_CORE_LANES) {
            LLVMValueRef idx[TRIG_CORE_LANES], a[2];
            for (int i = 0; i < TRIG_CORE_LANES; i++)
                idx[i] = LLVMConstInt(i32, (unsigned)(lo + i < lanes ? lo + i : lanes), 0);
            LLVMValueRef mask = LLVMConstVector(idx, TRIG_CORE_LANES);
            a[0] = LLVMBuildShuffleVector(b, x, LLVMConstNull(t), mask, N("xpart"));
            a[1] = LLVMBuildShuffleVector(b, v, LLVMConstNull(t), mask, N("vpart"));
            parts[nparts] = LLVMBuildCall2(b, LLVMGlobalGetValueType(core), core, a, 2, N("part"));
            pure_attrs(ctx, parts[nparts++], 1);
        }
        /* concatenate (or truncate) the parts back to `lanes` lanes */
        LLVMValueRef res = parts[0];
        for (int w = TRIG_CORE_LANES; w < lanes; w *= 2) {
            LLVMValueRef idx[16];
            for (int i = 0; i < 2 * w; i++)
                idx[i] = LLVMConstInt(i32, (unsigned)i, 0);
            for (int i = 0; i < nparts / 2; i++)
                parts[i] = LLVMBuildShuffleVector(b, parts[2 * i], parts[2 * i + 1], LLVMConstVector(idx, (unsigned)(2 * w)), N("cat"));
            nparts /= 2;
            res = parts[0];
        }
        if (lanes < TRIG_CORE_LANES) {
            LLVMValueRef idx[TRIG_CORE_LANES];
            for (int i = 0; i < lanes; i++)
                idx[i] = LLVMConstInt(i32, (unsigned)i, 0);
            res = LLVMBuildShuffleVector(b, res, LLVMGetPoison(LLVMTypeOf(res)), LLVMConstVector(idx, (unsigned)lanes), N("trunc"));
        }
        LLVMBuildRet(b, res);
        LLVMDisposeBuilder(b);
        return fn;
    }
    LLVMValueRef k, rd;
    if (dbl) {
        payne_hanek_signed(m, x, ax, 0, &k, &rd, p);
    } else {
        /* float, in double: Cody-Waite, exact enough below FLOAT_CW_MAX,
         * and Payne-Hanek only if some lane is beyond */
        LLVMTypeRef dt = LLVMDoubleTypeInContext(ctx);
        if (lanes)
            dt = LLVMVectorType(dt, (unsigned)lanes);
        mc dm, *d = &dm;
        mc_init(d, b, dt);
        LLVMValueRef xd = LLVMBuildFPExt(b, x, dt, N("xd"));
        LLVMValueRef kc, rc;
        cody_waite(d, xd, &kc, &rc, p);
        LLVMValueRef huge = LLVMBuildAnd(b, cmp(m, LLVMRealOGE, ax, kf(m, FLOAT_CW_MAX), N("huge")), big, N("ph"));
        LLVMBasicBlockRef ph = LLVMAppendBasicBlockInContext(ctx, fn, "ph");
        LLVMBasicBlockRef eval = LLVMAppendBasicBlockInContext(ctx, fn, "eval");
        LLVMBuildCondBr(b, any_lane(b, huge, lanes, N("anyph")), ph, eval);
        LLVMPositionBuilderAtEnd(b, ph);
        LLVMValueRef kp, rp;
        payne_hanek_signed(d, xd, fabs_(d, xd, N("axd")), 1, &kp, &rp, p);
        kp = sel(d, huge, kp, kc, N("kp"));
        rp = sel(d, huge, rp, rc, N("rp"));
        LLVMBuildBr(b, eval);
        LLVMPositionBuilderAtEnd(b, eval);
        LLVMBasicBlockRef from[2] = {slow, ph};
        LLVMValueRef kv[2] = {kc, kp}, rv[2] = {rc, rp};
        k = LLVMBuildPhi(b, d->it, N("k"));
        LLVMAddIncoming(k, kv, from, 2);
        rd = LLVMBuildPhi(b, dt, N("rd"));
        LLVMAddIncoming(rd, rv, from, 2);
        rd = LLVMBuildFPTrunc(b, rd, t, N("r"));
        k = LLVMBuildTrunc(b, k, m->it, N("q"));
    }
    LLVMValueRef res = trig_eval(m, rd, k, want_cos, p);
    if (lanes)
        res = sel(m, big, res, v, N("res"));
    LLVMBuildRet(b, res);
    LLVMDisposeBuilder(b);
    return fn;
}

/* v, or the slow path's result where |x| is large: a call of
 * trig_big_fn.  Called with a scalar x, the call names the vector
 * variants (made here too) in its "vector-function-abi-variant"
 * attribute, and the loop vectorizer calls the one of its width; not on
 * NVPTX, which does not vectorize. */
static LLVMValueRef trig_big_call(mc *m, LLVMValueRef x, LLVMValueRef v, int want_cos)
{
    LLVMValueRef fn = trig_big_fn(m->mod, m->ft, want_cos);
    LLVMValueRef args[2] = {x, v};
    LLVMValueRef call = LLVMBuildCall2(m->b, LLVMGlobalGetValueType(fn), fn, args, 2, want_cos ? "cos.big" : "sin.big");
    pure_attrs(m->ctx, call, 1);
    const char *triple = LLVMGetTarget(m->mod);
    if (m->lanes || (triple && strncmp(triple, "nvptx", 5) == 0))
        return call;
    char variants[512], scalar[64], vec[64];
    size_t len = 0;
    trig_big_name(scalar, sizeof scalar, m->dbl, 0, want_cos);
    for (int i = 0; i < 3; i++) {
        unsigned vf = TRIG_VF[m->dbl ? 0 : 1][i];
        trig_big_fn(m->mod, LLVMVectorType(m->fst, vf), want_cos);
        trig_big_name(vec, sizeof vec, m->dbl, vf, want_cos);
        len += (size_t)snprintf(variants + len, sizeof variants - len, "%s_ZGV_LLVM_N%uvv_%s(%s)", i ? "," : "", vf,
                                scalar, vec);
    }
    const char *key = "vector-function-abi-variant";
    LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex,
                             LLVMCreateStringAttribute(m->ctx, key, (unsigned)strlen(key), variants, (unsigned)len));
    return call;
}

bool cj_math_define_helper(LLVMModuleRef mod, const char *name)
{
    char sc[4], dt[4];
    unsigned lanes = 0;
    int used = 0;
    if (sscanf(name, "cj.math.%3[sinco].%3[f3264].big%n", sc, dt, &used) != 2 || used == 0)
        return false;
    if (name[used] == '.' && sscanf(name + used, ".v%u", &lanes) != 1)
        return false;
    int want_cos = strcmp(sc, "cos") == 0, dbl = strcmp(dt, "f64") == 0;
    if ((!want_cos && strcmp(sc, "sin") != 0) || (!dbl && strcmp(dt, "f32") != 0) || lanes > 16)
        return false;
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMTypeRef t = dbl ? LLVMDoubleTypeInContext(ctx) : LLVMFloatTypeInContext(ctx);
    if (lanes)
        t = LLVMVectorType(t, lanes);
    LLVMValueRef fn = trig_big_fn(mod, t, want_cos);
    LLVMSetLinkage(fn, LLVMExternalLinkage);
    return true;
}

/* sin or cos: k = rint(x 2/pi), r = x - k pi/2 with pi/2 in three parts
 * (Cody-Waite; the first fma is exact; 159 bits of pi/2 for double, 72
 * for float), then trig_eval; where TRIG_BIG <= |x| < inf, the
 * Payne-Hanek reduction of trig_big_fn instead. */
static LLVMValueRef trig(LLVMBuilderRef b, LLVMValueRef x, int want_cos)
{
    mc mm, *m = &mm;
    const char *p = want_cos ? "cos" : "sin";
    NAMES;
    if (!mc_init(m, b, LLVMTypeOf(x)))
        return NULL;
    LLVMValueRef ax = fabs_(m, x, N("ax"));
    LLVMValueRef fin = cmp(m, LLVMRealOLT, ax, kf(m, INFINITY), N("fin"));
    LLVMValueRef xs = sel(m, fin, x, kf(m, 0.0), N("xs"));
    LLVMValueRef q, r;
    cody_waite(m, xs, &q, &r, p);
    /* only for |x| >= TRIG_BIG, whose result is replaced: keep r bounded */
    r = clamp(m, r, -0.8, 0.8, p);
    LLVMValueRef v = trig_eval(m, r, q, want_cos, p);
    v = trig_big_call(m, x, v, want_cos);
    if (!want_cos) {
        /* sin(x) = x for tiny x, including -0 and subnormals */
        LLVMValueRef tiny = cmp(m, LLVMRealOLT, ax, kf(m, m->dbl ? 0x1p-27 : 0x1p-13), N("tiny"));
        v = sel(m, tiny, x, v, N("vt"));
    }
    /* inf or nan: nan */
    return sel(m, fin, v, kf(m, NAN), N("res"));
}

/* sin(x): see trig above; S of degree 6 (double) / 3 (float).
 * Measured max error 1.45 ulp (double), 1.45 ulp (float) over the whole
 * range, including the arguments closest to multiples of pi/2. */
LLVMValueRef cj_math_sin(LLVMBuilderRef b, LLVMValueRef x) { return trig(b, x, 0); }

/* cos(x): as cj_math_sin, C of degree 5 (double) / 3 (float).
 * Measured max error 1.46 ulp (double), 1.48 ulp (float). */
LLVMValueRef cj_math_cos(LLVMBuilderRef b, LLVMValueRef x) { return trig(b, x, 1); }

/* ------------------------------------------------------------------ */
/* pow                                                                 */

/* log(u) in double-double for double u positive, normal, finite:
 * s = f/(2+f) as a double-double, log(1+f) = 2s + s z W(z) with
 * W = 2/3 + z Wt(z), only Wt in plain double.  Relative error ~2^-66. */
static dd log_dd(mc *m, LLVMValueRef u, LLVMValueRef eadj, const char *p)
{
    NAMES;
    LLVMValueRef ef, mm;
    log_split(m, u, eadj, &ef, &mm, p);
    LLVMValueRef f = sub(m, mm, kf(m, 1.0), N("f"));
    dd d = fast_two_sum(m, kf(m, 2.0), f, p);              /* 2 + f exactly */
    LLVMValueRef sh = fdv(m, f, d.hi, N("sh"));
    /* the remainder of a correctly rounded division is exact */
    LLVMValueRef rem = fma_(m, LLVMBuildFNeg(m->b, sh, N("nsh")), d.hi, f, N("rem"));
    rem = sub(m, rem, mul(m, sh, d.lo, N("shdl")), N("rem2"));
    dd s = {sh, fdv(m, rem, d.hi, N("sl"))};
    dd z = two_prod(m, sh, sh, p);
    z.lo = mad(m, add(m, sh, sh, N("sh2")), s.lo, z.lo, N("zl"));
    LLVMValueRef wt = horner(m, z.hi, POW_WT_F64, NCOEF(POW_WT_F64), N("wt"));
    dd zw = two_prod(m, z.hi, wt, p);
    zw.lo = mad(m, z.lo, wt, zw.lo, N("zwl"));
    dd w = dd_add(m, ddk(m, TWO_THIRDS_DD), zw, p);
    dd t = dd_mul(m, dd_mul(m, s, z, p), w, p);
    dd s2 = {add(m, s.hi, s.hi, N("s2h")), add(m, s.lo, s.lo, N("s2l"))};
    dd lm = dd_add(m, s2, t, p);
    /* + e ln2; e is an integer below 2^11 so e * LN2_DD.hi is one two_prod */
    dd el = two_prod(m, ef, kf(m, LN2_DD[0]), p);
    el.lo = mad(m, ef, kf(m, LN2_DD[1]), el.lo, N("elo"));
    return dd_add(m, el, lm, p);
}

/* exp(L.hi + L.lo) for finite L (clamped here); double or float math. */
static LLVMValueRef exp_dd(mc *m, dd L, const char *p)
{
    NAMES;
    double lo = m->dbl ? -760.0 : -110.0, hi = m->dbl ? 720.0 : 100.0;
    LLVMValueRef inr = LLVMBuildAnd(m->b, cmp(m, LLVMRealOGE, L.hi, kf(m, lo), N("ge")),
                                    cmp(m, LLVMRealOLE, L.hi, kf(m, hi), N("le")), N("inr"));
    LLVMValueRef Lh = clamp(m, L.hi, lo, hi, p);
    LLVMValueRef Ll = sel(m, inr, L.lo, kf(m, 0.0), N("Ll"));
    LLVMValueRef k, rh, rl;
    ln2_reduce(m, Lh, &k, &rh, &rl, p);
    dd r = two_sum(m, rh, add(m, rl, Ll, N("rl2")), p);
    /* exp(r.hi + r.lo) = 1 + r.hi + (r.lo + r.hi^2 Q(r.hi)) (+ O(r.lo r.hi)) */
    LLVMValueRef z = mul(m, r.hi, r.hi, N("z"));
    LLVMValueRef q = HORNER(r.hi, EXPM1_Q, N("q"));
    LLVMValueRef t = mad(m, z, q, mad(m, r.hi, r.lo, r.lo, N("rlo")), N("tail"));
    LLVMValueRef em = add(m, r.hi, t, N("em"));
    return scale2(m, add(m, kf(m, 1.0), em, N("er")), k, p);
}

/* C99 special cases of pow around the result g of |x|^y, computed for
 * finite nonzero x and finite y. */
static LLVMValueRef pow_special(mc *m, LLVMValueRef x, LLVMValueRef y, LLVMValueRef g, const char *p)
{
    NAMES;
    LLVMValueRef inf = kf(m, INFINITY), zero = kf(m, 0.0), one = kf(m, 1.0);
    LLVMValueRef ax = fabs_(m, x, N("ax")), ay = fabs_(m, y, N("ay"));
    /* y an integer (inf counts as even), y odd */
    LLVMValueRef yint = cmp(m, LLVMRealOEQ, floor_(m, y, N("fy")), y, N("yint"));
    LLVMValueRef yh = mul(m, y, kf(m, 0.5), N("yh"));
    LLVMValueRef yodd = LLVMBuildAnd(m->b, yint, cmp(m, LLVMRealONE, floor_(m, yh, N("fyh")), yh, N("hfrac")), N("yodd"));
    LLVMValueRef yneg = cmp(m, LLVMRealOLT, y, zero, N("yneg"));
    LLVMValueRef res = g;
    res = sel(m, cmp(m, LLVMRealOEQ, ax, zero, N("x0")), sel(m, yneg, inf, zero, N("z0")), res, N("r1"));
    res = sel(m, cmp(m, LLVMRealOEQ, ax, inf, N("xinf")), sel(m, yneg, zero, inf, N("zi")), res, N("r2"));
    /* y = +-inf: 1 if |x| = 1, else inf when (|x| < 1) == (y < 0), else 0 */
    LLVMValueRef toinf = LLVMBuildICmp(m->b, LLVMIntEQ, cmp(m, LLVMRealOLT, ax, one, N("axlt1")), yneg, N("toinf"));
    LLVMValueRef yi = sel(m, cmp(m, LLVMRealOEQ, ax, one, N("ax1")), one, sel(m, toinf, inf, zero, N("yi0")), N("yi"));
    res = sel(m, cmp(m, LLVMRealOEQ, ay, inf, N("yinf")), yi, res, N("r3"));
    /* sign bit of x (including -0, -inf) and odd y: negative result */
    LLVMValueRef xsign = LLVMBuildICmp(m->b, LLVMIntSLT, bits(m, x, N("xb")), ki(m, 0), N("xsign"));
    res = sel(m, LLVMBuildAnd(m->b, xsign, yodd, N("flip")), LLVMBuildFNeg(m->b, res, N("nres")), res, N("r4"));
    /* finite x < 0 with finite non-integer y: nan */
    LLVMValueRef negx = LLVMBuildAnd(m->b, cmp(m, LLVMRealOLT, x, zero, N("xneg")),
                                     cmp(m, LLVMRealOLT, ax, inf, N("xfin")), N("negx"));
    LLVMValueRef nonint = LLVMBuildAnd(m->b, negx, LLVMBuildNot(m->b, yint, N("ynint")), N("nonint"));
    LLVMValueRef nan = kf(m, NAN);
    res = sel(m, nonint, nan, res, N("r5"));
    res = sel(m, cmp(m, LLVMRealUNO, x, y, N("anynan")), nan, res, N("r6"));
    LLVMValueRef is1 = LLVMBuildOr(m->b, cmp(m, LLVMRealOEQ, y, zero, N("y0")),
                                   cmp(m, LLVMRealOEQ, x, one, N("x1")), N("is1"));
    return sel(m, is1, one, res, N("res"));
}

/* pow(x, y) = exp(y log|x|) with the C99 special cases (pow(x, 0) = 1 and
 * pow(1, y) = 1 even for nan, signed results for negative x and odd
 * integer y, nan for negative x and non-integer y, 0^-y = inf, ...).
 * double: log|x| in double-double (relative error ~2^-66, s = f/(2+f)
 * with the series 2s + (2/3) s^3 carried in double-double), y log|x| as a
 * double-double product, then exp of the double-double argument with the
 * Cody-Waite reduction above (the low part folded into the polynomial).
 * float: the same in plain double (log_core, exp), rounded once to float.
 * Measured max error: 0.79 ulp (double, also for x near 1 with huge y),
 * 0.50 ulp (float). */
LLVMValueRef cj_math_pow(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y)
{
    mc mm, *m = &mm;
    const char *p = "pow";
    NAMES;
    if (!mc_init(m, b, LLVMTypeOf(x)) || LLVMTypeOf(y) != LLVMTypeOf(x))
        return NULL;
    mc dm, *d = m;
    LLVMValueRef xd = x, yd = y;
    if (!m->dbl) {
        /* evaluate in double: float -> double is exact, special values too */
        LLVMTypeRef dt = LLVMDoubleTypeInContext(m->ctx);
        if (m->lanes)
            dt = LLVMVectorType(dt, m->lanes);
        mc_init(&dm, b, dt);
        d = &dm;
        xd = LLVMBuildFPExt(b, x, dt, N("xd"));
        yd = LLVMBuildFPExt(b, y, dt, N("yd"));
    }
    /* |x| and y made finite and nonzero; the special cases replace g */
    LLVMValueRef ax = fabs_(d, xd, N("ax"));
    LLVMValueRef xok = LLVMBuildAnd(b, cmp(d, LLVMRealOGT, ax, kf(d, 0.0), N("xnz")),
                                    cmp(d, LLVMRealOLT, ax, kf(d, INFINITY), N("xfin")), N("xok"));
    LLVMValueRef axs = sel(d, xok, ax, kf(d, 1.0), N("axs"));
    LLVMValueRef yok = cmp(d, LLVMRealOLT, fabs_(d, yd, N("ay")), kf(d, INFINITY), N("yok"));
    LLVMValueRef ys = sel(d, yok, yd, kf(d, 0.0), N("ys"));
    LLVMValueRef u, eadj;
    log_prescale(d, axs, &u, &eadj, p);
    LLVMValueRef g;
    if (m->dbl) {
        dd lx = log_dd(d, u, eadj, p);
        dd L = two_prod(d, ys, lx.hi, p);
        /* not renormalised: L.hi may be +-inf, which exp_dd clamps */
        L.lo = mad(d, ys, lx.lo, L.lo, N("Llo"));
        g = exp_dd(d, L, p);
    } else {
        LLVMValueRef lx = log_core(d, u, eadj, NULL, p);
        dd L = {mul(d, ys, lx, N("L")), kf(d, 0.0)};
        g = exp_dd(d, L, p);
    }
    LLVMValueRef res = pow_special(d, xd, yd, g, p);
    if (!m->dbl)
        res = LLVMBuildFPTrunc(b, res, m->ft, N("resf"));
    return res;
}
