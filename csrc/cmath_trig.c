/* cmath_trig.c - sin and cos as plain IR: Cody-Waite argument reduction
 * inline, and Payne-Hanek for huge arguments in a helper function with
 * vector variants (see cmath.c's header comment for the conventions). */
#include "cmath_emit.h"

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

/* pi/2 = PIO2_1 + PIO2_2 + PIO2_3 to 159 (double) / 72 (float) bits */
static const double PIO2_1[2] = {0x1.921fb54442d18p+0, 0x1.921fb60000000p+0};
static const double PIO2_2[2] = {0x1.1a62633145c07p-54, -0x1.777a5c0000000p-25};
static const double PIO2_3[2] = {-0x1.f1976b7ed8fbcp-110, -0x1.ee59da0000000p-50};
static const double TWO_OVER_PI[2] = {0x1.45f306dc9c883p-1, 0x1.45f3060000000p-1};

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

