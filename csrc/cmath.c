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
#include "cmath_emit.h"

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


/* ------------------------------------------------------------------ */
/* Other constants: {double, float}.  LN2H has trailing zero bits so that
 * k * LN2H is exact for |k| < 2^11 (double) / 2^8 (float). */

static const double LOG2E[2] = {0x1.71547652b82fep+0, 0x1.7154760000000p+0};
static const double LN2H[2] = {0x1.62e42fefa3800p-1, 0x1.62e4000000000p-1};
static const double LN2L[2] = {0x1.ef35793c76730p-45, 0x1.7f7d1c0000000p-20};
static const double SQRT_HALF[2] = {0x1.6a09e667f3bcdp-1, 0x1.6a09e60000000p-1};
/* double-double ln 2 and 2/3 for pow */
static const double LN2_DD[2] = {0x1.62e42fefa39efp-1, 0x1.abc9e3b39803fp-56};
static const double TWO_THIRDS_DD[2] = {0x1.5555555555555p-1, 0x1.5555555555555p-55};

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
/* cbrt                                                                */

/* cbrt(1.5 + u/2) for u in [-1, 1): Chebyshev interpolation at 400
 * points, relative error 1.6e-6 */
static const double CBRT_U[] = {
    0x1.250be7f34a98ep+0,  0x1.047d1b32228e2p-3,  -0x1.ce51b43b8aba4p-7,
    0x1.55b69d684d1d1p-9,  -0x1.50ad875e0e5c1p-11, 0x1.52bc637b98deep-13,
};

/* cbrt of doubles: |x| = 2^(3q + r) m with m in [1, 2) (a subnormal scaled
 * by 2^54 first), t = 2^r m in [1, 8); y = 2^(r/3) CBRT_U(2m - 3) ~ t^(1/3)
 * to 1.6e-6, one Newton step y - (y^3 - t) / (3 y^2) takes it to 3e-12,
 * and with `exact`, a second one on y^3 - t computed exactly (two
 * products by fma) to within 0.5 ulp and a tiny fraction: a perfect cube's
 * root comes out exact.  The result is 2^q y with x's sign; 0, inf and nan
 * are x itself. */
static LLVMValueRef cbrt_f64(mc *m, LLVMValueRef x, bool exact, const char *p)
{
    NAMES;
    LLVMValueRef a = fabs_(m, x, N("a"));
    LLVMValueRef ok = LLVMBuildAnd(m->b, cmp(m, LLVMRealOGT, a, kf(m, 0.0), N("nz")),
                                   cmp(m, LLVMRealOLT, a, kf(m, INFINITY), N("fin")), N("ok"));
    LLVMValueRef tiny = cmp(m, LLVMRealOLT, a, kf(m, 0x1p-1022), N("tiny"));
    LLVMValueRef as = sel(m, tiny, mul(m, a, kf(m, 0x1p54), N("up")), a, N("as"));
    LLVMValueRef ab = bits(m, as, N("ab"));
    LLVMValueRef e = sub(m, to_fp(m, LLVMBuildLShr(m->b, ab, ki(m, 52), N("eb")), N("ef")),
                         sel(m, tiny, kf(m, 1023.0 + 54.0), kf(m, 1023.0), N("bias")), N("e"));
    LLVMValueRef mm = unbits(m, bor(m, band(m, ab, ki(m, (1LL << 52) - 1), N("mb")), ki(m, 1023LL << 52), N("m1")),
                             N("m"));
    /* (e + 1/2) / 3 is never an integer, so its floor is exact */
    LLVMValueRef q = floor_(m, fdv(m, add(m, e, kf(m, 0.5), N("eh")), kf(m, 3.0), N("e3")), N("q"));
    LLVMValueRef r = sub(m, e, mul(m, q, kf(m, 3.0), N("q3")), N("r"));
    LLVMValueRef r0 = cmp(m, LLVMRealOEQ, r, kf(m, 0.0), N("r0")), r1 = cmp(m, LLVMRealOEQ, r, kf(m, 1.0), N("r1"));
    LLVMValueRef t = mul(m, mm, sel(m, r0, kf(m, 1.0), sel(m, r1, kf(m, 2.0), kf(m, 4.0), N("p12")), N("p2r")), N("t"));
    LLVMValueRef c = sel(m, r0, kf(m, 1.0), sel(m, r1, kf(m, 0x1.428a2f98d728bp+0), kf(m, 0x1.965fea53d6e3cp+0), N("c12")),
                         N("c"));
    LLVMValueRef u = sub(m, mul(m, mm, kf(m, 2.0), N("m2")), kf(m, 3.0), N("u"));
    LLVMValueRef y = mul(m, horner(m, u, CBRT_U, NCOEF(CBRT_U), N("poly")), c, N("y0"));
    LLVMValueRef y2 = mul(m, y, y, N("y2"));
    LLVMValueRef d = sub(m, mul(m, y2, y, N("y3")), t, N("d"));
    y = sub(m, y, fdv(m, d, mul(m, y2, kf(m, 3.0), N("y23")), N("dy")), N("y1"));
    if (exact) {
        dd s = two_prod(m, y, y, p);           /* y^2 = s.hi + s.lo */
        dd s3 = two_prod(m, s.hi, y, p);       /* s.hi y = s3.hi + s3.lo; y^3 = that + s.lo y */
        LLVMValueRef tail = mad(m, s.lo, y, s3.lo, N("tail"));
        LLVMValueRef resid = add(m, sub(m, s3.hi, t, N("hd")), tail, N("resid")); /* s3.hi - t: exact (Sterbenz) */
        y = sub(m, y, fdv(m, resid, mul(m, s.hi, kf(m, 3.0), N("s3")), N("dy2")), N("y2n"));
    }
    LLVMValueRef scale = unbits(m, LLVMBuildShl(m->b, LLVMBuildAdd(m->b, to_int(m, q, N("qi")), ki(m, 1023), N("qb")),
                                                ki(m, 52), N("sb")), N("scale"));
    LLVMValueRef res = copysign_(m, mul(m, y, scale, N("ys")), x, N("signed"));
    return sel(m, ok, res, x, N("res"));
}

/* cbrt(x): doubles by cbrt_f64; floats through it in double (one Newton
 * step: 3e-12 is far inside half a float ulp, so a float's cube root is
 * exact and the rest within 0.5 ulp but for rare ties), rounded once. */
LLVMValueRef cj_math_cbrt(LLVMBuilderRef b, LLVMValueRef x)
{
    mc mm, *m = &mm;
    if (!mc_init(m, b, LLVMTypeOf(x)))
        return NULL;
    if (m->dbl)
        return cbrt_f64(m, x, true, "cbrt");
    mc md;
    LLVMTypeRef dt = LLVMDoubleTypeInContext(m->ctx);
    if (m->lanes)
        dt = LLVMVectorType(dt, m->lanes);
    if (!mc_init(&md, b, dt))
        return NULL;
    LLVMValueRef r = cbrt_f64(&md, LLVMBuildFPExt(b, x, dt, "cbrt.xd"), false, "cbrt");
    return LLVMBuildFPTrunc(b, r, m->ft, "cbrt.res");
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
