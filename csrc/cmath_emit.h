/* cmath_emit.h - what cmath.c and cmath_trig.c share: the emission
 * context, one-line IR helpers, polynomial evaluation and double-double
 * arithmetic.  Private to those two files. */
#ifndef CJ_CMATH_EMIT_H
#define CJ_CMATH_EMIT_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmath.h"

#define NCOEF(a) ((int)(sizeof(a) / sizeof((a)[0])))

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
static inline int mc_init(mc *m, LLVMBuilderRef b, LLVMTypeRef t)
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

static inline LLVMValueRef splat(mc *m, LLVMValueRef s)
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

static inline LLVMValueRef kf(mc *m, double v) { return splat(m, LLVMConstReal(m->fst, v)); }
static inline LLVMValueRef ki(mc *m, long long v)
{
    return splat(m, LLVMConstInt(m->ist, (unsigned long long)v, 1));
}

/* Conversions between small integer-valued floats and m->it.  For double
 * they go through i32: AVX2 converts <4 x double> to and from <4 x i32> in
 * one instruction but has nothing for i64, which LLVM would scalarize. */
static inline LLVMValueRef to_int(mc *m, LLVMValueRef v, const char *n)
{
    if (!m->dbl)
        return LLVMBuildFPToSI(m->b, v, m->it, n);
    LLVMTypeRef i32 = LLVMInt32TypeInContext(m->ctx);
    if (m->lanes)
        i32 = LLVMVectorType(i32, m->lanes);
    return LLVMBuildSExt(m->b, LLVMBuildFPToSI(m->b, v, i32, n), m->it, n);
}
static inline LLVMValueRef to_fp(mc *m, LLVMValueRef v, const char *n)
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

static inline LLVMValueRef add(mc *m, LLVMValueRef a, LLVMValueRef c, const char *n) { return LLVMBuildFAdd(m->b, a, c, n); }
static inline LLVMValueRef sub(mc *m, LLVMValueRef a, LLVMValueRef c, const char *n) { return LLVMBuildFSub(m->b, a, c, n); }
static inline LLVMValueRef mul(mc *m, LLVMValueRef a, LLVMValueRef c, const char *n) { return LLVMBuildFMul(m->b, a, c, n); }
static inline LLVMValueRef fdv(mc *m, LLVMValueRef a, LLVMValueRef c, const char *n) { return LLVMBuildFDiv(m->b, a, c, n); }
static inline LLVMValueRef sel(mc *m, LLVMValueRef c, LLVMValueRef a, LLVMValueRef d, const char *n) { return LLVMBuildSelect(m->b, c, a, d, n); }
static inline LLVMValueRef cmp(mc *m, LLVMRealPredicate pr, LLVMValueRef a, LLVMValueRef c, const char *n) { return LLVMBuildFCmp(m->b, pr, a, c, n); }
static inline LLVMValueRef band(mc *m, LLVMValueRef a, LLVMValueRef c, const char *n) { return LLVMBuildAnd(m->b, a, c, n); }
static inline LLVMValueRef bor(mc *m, LLVMValueRef a, LLVMValueRef c, const char *n) { return LLVMBuildOr(m->b, a, c, n); }
static inline LLVMValueRef bits(mc *m, LLVMValueRef a, const char *n) { return LLVMBuildBitCast(m->b, a, m->it, n); }
static inline LLVMValueRef unbits(mc *m, LLVMValueRef a, const char *n) { return LLVMBuildBitCast(m->b, a, m->ft, n); }

/* call of an overloaded intrinsic on m->ft */
static inline LLVMValueRef intr(mc *m, const char *name, LLVMValueRef *args, unsigned nargs, const char *n)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMTypeRef ty = m->ft;
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(m->mod, id, &ty, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(m->ctx, id, &ty, 1);
    return LLVMBuildCall2(m->b, fty, fn, args, nargs, n);
}
static inline LLVMValueRef fabs_(mc *m, LLVMValueRef a, const char *n) { return intr(m, "llvm.fabs", &a, 1, n); }
static inline LLVMValueRef floor_(mc *m, LLVMValueRef a, const char *n) { return intr(m, "llvm.floor", &a, 1, n); }
static inline LLVMValueRef rint_(mc *m, LLVMValueRef a, const char *n) { return intr(m, "llvm.rint", &a, 1, n); }
static inline LLVMValueRef copysign_(mc *m, LLVMValueRef mag, LLVMValueRef sgn, const char *n)
{
    LLVMValueRef a[2] = {mag, sgn};
    return intr(m, "llvm.copysign", a, 2, n);
}
/* a*b + c rounded once (exact products are built on this) */
static inline LLVMValueRef fma_(mc *m, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c, const char *n)
{
    LLVMValueRef v[3] = {a, b, c};
    return intr(m, "llvm.fma", v, 3, n);
}
/* a*b + c, fused only if the target likes it (polynomials) */
static inline LLVMValueRef mad(mc *m, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c, const char *n)
{
    LLVMValueRef v[3] = {a, b, c};
    return intr(m, "llvm.fmuladd", v, 3, n);
}

/* c[0] + c[1] t + ... + c[nc-1] t^(nc-1) by Horner; coefficients are
 * rounded to the element type by LLVMConstReal (they already are). */
static inline LLVMValueRef horner(mc *m, LLVMValueRef t, const double *c, int nc, const char *n)
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
static inline LLVMValueRef clamp(mc *m, LLVMValueRef x, double lo, double hi, const char *p)
{
    NAMES;
    LLVMValueRef c = sel(m, cmp(m, LLVMRealOGE, x, kf(m, lo), N("ge")), x, kf(m, lo), N("lo"));
    return sel(m, cmp(m, LLVMRealOLE, c, kf(m, hi), N("le")), c, kf(m, hi), N("clamp"));
}

/* ------------------------------------------------------------------ */
/* double-double arithmetic (sin/cos Payne-Hanek, pow)                 */

/* double-double helpers: values are (hi, lo) pairs */
typedef struct { LLVMValueRef hi, lo; } dd;

static inline dd two_sum(mc *m, LLVMValueRef a, LLVMValueRef c, const char *p)
{
    NAMES;
    LLVMValueRef s = add(m, a, c, N("s"));
    LLVMValueRef bb = sub(m, s, a, N("bv"));
    LLVMValueRef e = add(m, sub(m, a, sub(m, s, bb, N("av")), N("ae")), sub(m, c, bb, N("be")), N("e"));
    return (dd){s, e};
}
/* |a| >= |c| */
static inline dd fast_two_sum(mc *m, LLVMValueRef a, LLVMValueRef c, const char *p)
{
    NAMES;
    LLVMValueRef s = add(m, a, c, N("s"));
    return (dd){s, sub(m, c, sub(m, s, a, N("d")), N("e"))};
}
static inline dd two_prod(mc *m, LLVMValueRef a, LLVMValueRef c, const char *p)
{
    NAMES;
    LLVMValueRef pr = mul(m, a, c, N("p"));
    return (dd){pr, fma_(m, a, c, LLVMBuildFNeg(m->b, pr, N("np")), N("pe"))};
}
static inline dd dd_add(mc *m, dd a, dd c, const char *p)
{
    NAMES;
    dd s = two_sum(m, a.hi, c.hi, p);
    LLVMValueRef lo = add(m, s.lo, add(m, a.lo, c.lo, N("ll")), N("lo"));
    return fast_two_sum(m, s.hi, lo, p);
}
static inline dd dd_mul(mc *m, dd a, dd c, const char *p)
{
    NAMES;
    dd pr = two_prod(m, a.hi, c.hi, p);
    LLVMValueRef cross = mad(m, a.hi, c.lo, mul(m, a.lo, c.hi, N("x1")), N("x2"));
    return fast_two_sum(m, pr.hi, add(m, pr.lo, cross, N("lo")), p);
}
static inline dd ddk(mc *m, const double v[2]) { return (dd){kf(m, v[0]), kf(m, v[1])}; }

#endif
