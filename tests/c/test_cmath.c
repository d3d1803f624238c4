/* test_cmath.c - accuracy and vectorization tests for csrc/cmath.c.
 *
 * For every (function, float/double) pair this builds two IR functions
 * with the cj_math_* emitters:
 *     T    cj_test_<op>_<ty>(T x [, T y])                    (scalar)
 *     void cj_loop_<op>_<ty>(T *x, T *y, T *out, i64 n)      (a loop)
 * checks that the emitted code is branch-free and calls nothing but the
 * allowed intrinsics, optimises the module with "default<O2>" for the host
 * CPU, reports whether each loop was vectorized, JITs it with LLJIT and
 * compares the results with the long double libm (an almost exact
 * reference) in ulps of the result type over millions of inputs.  It also
 * compiles the unoptimised module for NVPTX, when that target is built,
 * to show that everything selects there without library calls.
 *
 * usage: test_cmath [-n COUNT] [--generic] [--bench] [-v]
 *   -n COUNT   random inputs per range (default 200000; there are ~8
 *              ranges per function)
 *   --generic  target a baseline x86-64 CPU (no FMA, SSE2 only) instead
 *              of the host, to test the unfused polynomial path
 *   --bench    also time each loop against a plain libm loop
 * Exit status: 0 when every function is within its ulp limit and every
 * special case is right, 1 otherwise. */
#include "../../csrc/cmath.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ULP_LIMIT 4.0

/* ------------------------------------------------------------------ */
/* The functions under test.                                           */

typedef LLVMValueRef (*emit1_fn)(LLVMBuilderRef, LLVMValueRef);
typedef LLVMValueRef (*emit2_fn)(LLVMBuilderRef, LLVMValueRef, LLVMValueRef);

typedef struct {
    const char *name;
    int nargs;
    emit1_fn emit1;
    emit2_fn emit2;
    long double (*ref1)(long double);
    long double (*ref2)(long double, long double);
    /* the largest error allowed, in ulps; 0: ULP_LIMIT */
    double limit;
    /* the libm functions, for --bench */
    double (*d1)(double);
    float (*f1)(float);
    double (*d2)(double, double);
    float (*f2)(float, float);
} op_info;

/* Every MATH(f) of ops_unary.def's cpu column (cj_math_<f> against libm's
 * <f>l, <f> and <f>f), then pow; sin and cos promise 1.5 ulp. */
#define TEST_MATH(fn) {#fn, 1, cj_math_##fn, NULL, fn##l, NULL, 0, fn, fn##f, NULL, NULL},
#define TEST_INTRINSIC(name)
#define TEST_IR(fn)
static op_info OPS[] = {
#define UNARY(NAME, text, dtypes, cost, derivative, cpu, ptx, numpy, lax, doc) TEST_##cpu
#include "../../csrc/ops_unary.def"
#undef UNARY
    {"pow", 2, NULL, cj_math_pow, NULL, powl, 0, NULL, NULL, pow, powf},
};
#define NOPS ((int)(sizeof OPS / sizeof OPS[0]))

/* ------------------------------------------------------------------ */
/* Building the test module.                                           */

static LLVMTypeRef ftype(LLVMContextRef ctx, int dbl)
{
    return dbl ? LLVMDoubleTypeInContext(ctx) : LLVMFloatTypeInContext(ctx);
}

static LLVMValueRef emit(LLVMBuilderRef b, const op_info *op, LLVMValueRef x, LLVMValueRef y)
{
    return op->nargs == 1 ? op->emit1(b, x) : op->emit2(b, x, y);
}

static void build_scalar(LLVMModuleRef mod, const op_info *op, int dbl)
{
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMTypeRef t = ftype(ctx, dbl);
    LLVMTypeRef params[2] = {t, t};
    char name[64];
    snprintf(name, sizeof name, "cj_test_%s_%s", op->name, dbl ? "f64" : "f32");
    LLVMValueRef fn = LLVMAddFunction(mod, name, LLVMFunctionType(t, params, op->nargs, 0));
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, fn, "entry"));
    LLVMValueRef x = LLVMGetParam(fn, 0);
    LLVMSetValueName2(x, "x", 1);
    LLVMValueRef y = NULL;
    if (op->nargs == 2) {
        y = LLVMGetParam(fn, 1);
        LLVMSetValueName2(y, "y", 1);
    }
    LLVMBuildRet(b, emit(b, op, x, y));
    LLVMDisposeBuilder(b);
}

/* for (i = 0; i < n; i++) out[i] = op(x[i], y[i]) with noalias pointers */
static void build_loop(LLVMModuleRef mod, const op_info *op, int dbl)
{
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMTypeRef t = ftype(ctx, dbl);
    LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0);
    LLVMTypeRef i64 = LLVMInt64TypeInContext(ctx);
    LLVMTypeRef params[4] = {ptr, ptr, ptr, i64};
    char name[64];
    snprintf(name, sizeof name, "cj_loop_%s_%s", op->name, dbl ? "f64" : "f32");
    LLVMValueRef fn = LLVMAddFunction(mod, name,
                                      LLVMFunctionType(LLVMVoidTypeInContext(ctx), params, 4, 0));
    unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
    for (unsigned i = 1; i <= 3; i++)
        LLVMAddAttributeAtIndex(fn, i, LLVMCreateEnumAttribute(ctx, noalias, 0));
    LLVMValueRef px = LLVMGetParam(fn, 0), py = LLVMGetParam(fn, 1);
    LLVMValueRef pout = LLVMGetParam(fn, 2), n = LLVMGetParam(fn, 3);
    LLVMSetValueName2(px, "xs", 2);
    LLVMSetValueName2(py, "ys", 2);
    LLVMSetValueName2(pout, "out", 3);
    LLVMSetValueName2(n, "n", 1);

    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(ctx, fn, "entry");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(ctx, fn, "body");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ctx, fn, "done");
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef zero = LLVMConstInt(i64, 0, 0);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, n, zero, "nonempty"), body, done);

    LLVMPositionBuilderAtEnd(b, body);
    LLVMValueRef i = LLVMBuildPhi(b, i64, "i");
    LLVMValueRef x = LLVMBuildLoad2(b, t, LLVMBuildGEP2(b, t, px, &i, 1, "xp"), "x");
    LLVMValueRef y = NULL;
    if (op->nargs == 2)
        y = LLVMBuildLoad2(b, t, LLVMBuildGEP2(b, t, py, &i, 1, "yp"), "y");
    LLVMValueRef v = emit(b, op, x, y);
    LLVMBuildStore(b, v, LLVMBuildGEP2(b, t, pout, &i, 1, "op"));
    LLVMValueRef inext = LLVMBuildAdd(b, i, LLVMConstInt(i64, 1, 0), "inext");
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(b);
    LLVMAddIncoming(i, &zero, &entry, 1);
    LLVMAddIncoming(i, &inext, &cur, 1);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, inext, n, "more"), body, done);

    LLVMPositionBuilderAtEnd(b, done);
    LLVMBuildRetVoid(b);
    LLVMDisposeBuilder(b);
}

/* out[0..3] = op(x[0..3], y[0..3]) on <4 x T> values: the emitters also
 * accept fixed vectors */
#define VLANES 4
static void build_vec(LLVMModuleRef mod, const op_info *op, int dbl)
{
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMTypeRef vt = LLVMVectorType(ftype(ctx, dbl), VLANES);
    LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0);
    LLVMTypeRef params[3] = {ptr, ptr, ptr};
    char name[64];
    snprintf(name, sizeof name, "cj_vec_%s_%s", op->name, dbl ? "f64" : "f32");
    LLVMValueRef fn = LLVMAddFunction(mod, name,
                                      LLVMFunctionType(LLVMVoidTypeInContext(ctx), params, 3, 0));
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, fn, "entry"));
    LLVMValueRef x = LLVMBuildLoad2(b, vt, LLVMGetParam(fn, 0), "x");
    LLVMValueRef y = LLVMBuildLoad2(b, vt, LLVMGetParam(fn, 1), "y");
    LLVMValueRef v = emit(b, op, x, op->nargs == 2 ? y : NULL);
    LLVMBuildStore(b, v, LLVMGetParam(fn, 2));
    LLVMBuildRetVoid(b);
    LLVMDisposeBuilder(b);
}

/* The emitters refuse non-floating-point values (NULL) instead of
 * crashing.  Returns the number of problems. */
static int check_bad_types(void)
{
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("bad", ctx);
    LLVMTypeRef i32 = LLVMInt32TypeInContext(ctx);
    LLVMValueRef fn = LLVMAddFunction(mod, "f", LLVMFunctionType(i32, &i32, 1, 0));
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, fn, "entry"));
    LLVMValueRef x = LLVMGetParam(fn, 0);
    int bad = 0;
    for (int o = 0; o < NOPS; o++)
        if (emit(b, &OPS[o], x, x) != NULL) {
            printf("FAIL: cj_math_%s accepted an i32\n", OPS[o].name);
            bad++;
        }
    /* float x with a double y */
    LLVMValueRef f = LLVMConstReal(LLVMFloatTypeInContext(ctx), 2.0);
    LLVMValueRef d = LLVMConstReal(LLVMDoubleTypeInContext(ctx), 2.0);
    if (cj_math_pow(b, f, d) != NULL) {
        printf("FAIL: cj_math_pow accepted mixed types\n");
        bad++;
    }
    LLVMDisposeBuilder(b);
    LLVMDisposeModule(mod);
    LLVMContextDispose(ctx);
    return bad;
}

/* Every call in the module must be to one of these intrinsics or to the
 * emitters' own functions (cj.math.*: the out-of-line slow path of sin and
 * cos), and every test function must be one basic block.  Returns the
 * number of problems. */
static int check_plain_ir(LLVMModuleRef mod)
{
    static const char *allowed[] = {"llvm.fma.", "llvm.fmuladd.", "llvm.fabs.", "llvm.floor.",
                                    "llvm.rint.", "llvm.copysign.", "llvm.vector.reduce.or.", "llvm.masked.gather."};
    int bad = 0;
    for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn)) {
        size_t len;
        const char *name = LLVMGetValueName2(fn, &len);
        if (LLVMIsDeclaration(fn)) {
            int ok = 0;
            for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
                ok |= strncmp(name, allowed[i], strlen(allowed[i])) == 0;
            if (!ok) {
                printf("FAIL: the emitted IR declares %s\n", name);
                bad++;
            }
        } else if (strncmp(name, "cj_test_", 8) == 0 && LLVMCountBasicBlocks(fn) != 1) {
            printf("FAIL: %s has %u basic blocks (want straight-line code)\n", name,
                   LLVMCountBasicBlocks(fn));
            bad++;
        } else if (strncmp(name, "cj_", 3) != 0 &&
                   (strncmp(name, "cj.math.", 8) != 0 || LLVMGetLinkage(fn) != LLVMInternalLinkage)) {
            printf("FAIL: the emitted IR defines %s (want internal cj.math.* functions only)\n", name);
            bad++;
        }
    }
    return bad;
}

/* After O2, the vectorized loop of sin/cos must call the slow path's
 * vector variant (so the common path stays vectorized and the slow path
 * runs only for vectors that need it).  Returns 1 on a problem. */
static int check_slow_path_call(LLVMModuleRef mod, const char *op, int dbl)
{
    char lname[64], want[64];
    snprintf(lname, sizeof lname, "cj_loop_%s_%s", op, dbl ? "f64" : "f32");
    snprintf(want, sizeof want, "@cj.math.%s.%s.big.v", op, dbl ? "f64" : "f32");
    char *ir = LLVMPrintValueToString(LLVMGetNamedFunction(mod, lname));
    int ok = strstr(ir, want) != NULL;
    LLVMDisposeMessage(ir);
    if (!ok)
        printf("FAIL: %s does not call %s* (a vector variant of the slow path)\n", lname, want + 1);
    return !ok;
}

/* Widest floating-point vector in fn's optimised IR ("<4 x double>"), or
 * "scalar". */
static void vector_width(LLVMValueRef fn, int dbl, char *out, size_t outsz)
{
    char *ir = LLVMPrintValueToString(fn);
    int best = 0;
    const char *elt = dbl ? " x double>" : " x float>";
    for (const char *s = ir; (s = strstr(s, elt)) != NULL; s++) {
        const char *q = s;
        while (q > ir && q[-1] >= '0' && q[-1] <= '9')
            q--;
        if (q > ir && q[-1] == '<') {
            int w = atoi(q);
            if (w > best)
                best = w;
        }
    }
    LLVMDisposeMessage(ir);
    if (best)
        snprintf(out, outsz, "<%d x %s>", best, dbl ? "double" : "float");
    else
        snprintf(out, outsz, "scalar");
}

/* ------------------------------------------------------------------ */
/* Targets and JIT.                                                    */

static int fail_err(LLVMErrorRef err, const char *what)
{
    if (!err)
        return 0;
    char *msg = LLVMGetErrorMessage(err);   /* consumes err */
    fprintf(stderr, "%s: %s\n", what, msg);
    LLVMDisposeErrorMessage(msg);
    return 1;
}

static LLVMTargetMachineRef make_tm(int generic)
{
    char *triple = LLVMGetDefaultTargetTriple();
    LLVMTargetRef target;
    char *err = NULL;
    if (LLVMGetTargetFromTriple(triple, &target, &err)) {
        fprintf(stderr, "no target for %s: %s\n", triple, err);
        LLVMDisposeMessage(err);
        LLVMDisposeMessage(triple);
        return NULL;
    }
    char *cpu = generic ? NULL : LLVMGetHostCPUName();
    char *features = generic ? NULL : LLVMGetHostCPUFeatures();
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(
        target, triple, generic ? "x86-64" : cpu, generic ? "" : features, LLVMCodeGenLevelDefault,
        LLVMRelocDefault, LLVMCodeModelJITDefault);
    if (cpu)
        LLVMDisposeMessage(cpu);
    if (features)
        LLVMDisposeMessage(features);
    LLVMDisposeMessage(triple);
    return tm;
}

/* Compile a copy of the module for NVPTX (sm_80); -1 when the target is
 * not built, else the number of problems. */
static int check_nvptx(LLVMModuleRef src)
{
    LLVMTargetRef target;
    char *err = NULL;
    if (LLVMGetTargetFromTriple("nvptx64-nvidia-cuda", &target, &err)) {
        LLVMDisposeMessage(err);
        return -1;
    }
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, "nvptx64-nvidia-cuda", "sm_80", "+ptx70",
                                                      LLVMCodeGenLevelDefault, LLVMRelocDefault,
                                                      LLVMCodeModelDefault);
    LLVMModuleRef mod = LLVMCloneModule(src);
    LLVMSetTarget(mod, "nvptx64-nvidia-cuda");
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(mod, td);
    LLVMDisposeTargetData(td);
    int bad = 0;
    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    bad += fail_err(LLVMRunPasses(mod, "default<O2>", tm, opts), "nvptx passes");
    LLVMDisposePassBuilderOptions(opts);
    LLVMMemoryBufferRef buf = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMAssemblyFile, &err, &buf)) {
        printf("FAIL: NVPTX code generation: %s\n", err);
        LLVMDisposeMessage(err);
        bad++;
    } else {
        size_t n = LLVMGetBufferSize(buf);
        char *ptx = malloc(n + 1);
        memcpy(ptx, LLVMGetBufferStart(buf), n);
        ptx[n] = 0;
        if (strstr(ptx, ".extern .func")) {
            printf("FAIL: the NVPTX code calls an external function\n");
            bad++;
        }
        free(ptx);
        LLVMDisposeMemoryBuffer(buf);
    }
    LLVMDisposeModule(mod);
    LLVMDisposeTargetMachine(tm);
    return bad;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------------ */
/* Inputs.                                                             */

static uint64_t rng_state = 0x243f6a8885a308d3ULL;

static uint64_t rng_next(void)   /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double rng_unit(void) { return (double)(rng_next() >> 11) * 0x1p-53; }
static double uniform(double a, double b) { return a + (b - a) * rng_unit(); }
/* magnitude log-uniform in [2^e0, 2^e1], random sign if both_signs */
static double logu(double e0, double e1, int both_signs)
{
    double v = exp2(uniform(e0, e1));
    return both_signs && (rng_next() & 1) ? -v : v;
}

typedef enum { R_UNIFORM, R_LOGU, R_LOGU_PM, R_BITS, R_NEAR_PIO2, R_HARD_PIO2, R_POW_L, R_POW_NEAR1, R_POW_NEGINT, R_POW_WIDE } rkind;

typedef struct {
    rkind kind;
    double a, b;         /* bounds; meaning depends on kind */
    int info;            /* 1: report only, not checked against the limit */
    const char *label;
} range;

/* The arguments of sin/cos whose x 2/pi comes closest to an integer, so
 * that the reduced argument is tiniest: x = m 2^(e - 23) (float) or
 * m 2^(e - 52), the best of the 24 exponents with the smallest distances
 * (tests/c/two_over_pi.py --hard finds them by continued fractions; the
 * first double is Muller's worst case 6381956970095103 2^797). */
/* HARD_F32: log2 of the distances -29.9 ... -26.5 */
static const struct { double m; int e; } HARD_F32[] = {
    {16367173.0, 95}, {10741887.0, 34}, {16367173.0, 96},
    {10741887.0, 35}, {16573937.0, 7}, {16367173.0, 97},
    {10057457.0, 85}, {11617958.0, 40}, {9012376.0, 76},
    {10741887.0, 36}, {16573937.0, 8}, {14173733.0, 111},
    {10695401.0, 25}, {9882596.0, 2}, {14015064.0, 89},
    {16367173.0, 98}, {10057457.0, 86}, {8895696.0, 57},
    {11617958.0, 41}, {9012376.0, 77}, {10741887.0, 37},
    {13444207.0, 15}, {12558490.0, 101}, {16573937.0, 9},
};
/* HARD_F64: log2 of the distances -61.5 ... -58.1 */
static const struct { double m; int e; } HARD_F64[] = {
    {6381956970095103.0, 849}, {6411027962775774.0, 5}, {6381956970095103.0, 850},
    {6411027962775774.0, 6}, {7763785107565477.0, 23}, {5916243447979695.0, 131},
    {6381956970095103.0, 851}, {8444920710073313.0, 991}, {6411027962775774.0, 7},
    {5850965514341686.0, 577}, {8160885118204141.0, 860}, {8360820580228475.0, 680},
    {8583082635084172.0, 197}, {7763785107565477.0, 24}, {7958046405119485.0, 295},
    {5916243447979695.0, 132}, {6808218460873451.0, 614}, {7636753411044619.0, 253},
    {6381956970095103.0, 852}, {8444920710073313.0, 992}, {6366906923947931.0, 246},
    {6411027962775774.0, 8}, {5850965514341686.0, 578}, {6617649673795284.0, 67},
};

/* one input (or pair) of the range; rounded to float when !dbl */
static void gen(const range *r, int dbl, double *x, double *y)
{
    *y = 0;
    switch (r->kind) {
    case R_UNIFORM: *x = uniform(r->a, r->b); break;
    case R_LOGU: *x = logu(r->a, r->b, 0); break;
    case R_LOGU_PM: *x = logu(r->a, r->b, 1); break;
    case R_BITS:
        /* any finite value of the type */
        do {
            if (dbl) {
                uint64_t u = rng_next();
                memcpy(x, &u, 8);
            } else {
                uint32_t u = (uint32_t)rng_next();
                float f;
                memcpy(&f, &u, 4);
                *x = f;
            }
        } while (!isfinite(*x) || *x < r->a || *x > r->b);
        break;
    case R_NEAR_PIO2: {
        /* the value of the type nearest to k pi/2 (+- a few ulps), k <= b:
         * the reduced argument is then tiny, the hard case for sin/cos */
        long double k = floorl((long double)uniform(1, r->b));
        long double v = k * 1.570796326794896619231321691639751442L;
        *x = dbl ? (double)v : (double)(float)v;
        int steps = (int)(rng_next() % 5) - 2;
        for (int i = 0; i < abs(steps); i++)
            *x = dbl ? nextafter(*x, steps > 0 ? INFINITY : 0)
                     : (double)nextafterf((float)*x, steps > 0 ? INFINITY : 0);
        if (rng_next() & 1)
            *x = -*x;
        break;
    }
    case R_HARD_PIO2: {
        /* a hard case, or up to 8 ulps from it, either sign */
        int i = (int)(rng_next() % 24);
        *x = dbl ? ldexp(HARD_F64[i].m, HARD_F64[i].e - 52) : ldexp(HARD_F32[i].m, HARD_F32[i].e - 23);
        int steps = (int)(rng_next() % 17) - 8;
        for (int s = 0; s < abs(steps); s++)
            *x = dbl ? nextafter(*x, steps > 0 ? INFINITY : 0)
                     : (double)nextafterf((float)*x, steps > 0 ? INFINITY : 0);
        if (rng_next() & 1)
            *x = -*x;
        break;
    }
    case R_POW_L: {
        /* x log-uniform, y chosen so that y ln x is uniform in [a, b] */
        double L = uniform(r->a, r->b);
        double lim = dbl ? 1000.0 : 120.0;
        do
            *x = logu(-lim, lim, 0);
        while (fabs(log(*x)) < 1e-3);
        *y = L / log(*x);
        break;
    }
    case R_POW_NEAR1: {
        /* x = 1 +- tiny, large y */
        double L = uniform(r->a, r->b);
        double d = logu(dbl ? -50 : -22, -4, 1);
        *x = 1.0 + d;
        if (!dbl)
            *x = (float)*x;
        if (*x == 1.0)
            *x = dbl ? 1.0 + 0x1p-52 : 1.0 + 0x1p-23;
        *y = L / log(*x);
        break;
    }
    case R_POW_NEGINT: {
        /* negative x, integer y */
        *x = -logu(-8, 8, 0);
        double lim = (dbl ? 700.0 : 85.0) / fabs(log(fabs(*x)) + 1e-300);
        if (lim > 1000)
            lim = 1000;
        *y = floor(uniform(-lim, lim));
        break;
    }
    case R_POW_WIDE:
        *x = logu(dbl ? -1074 : -149, dbl ? 1023 : 127, 0);
        *y = uniform(r->a, r->b);
        break;
    }
    if (!dbl) {
        *x = (float)*x;
        *y = (float)*y;
    }
}

static const double SPECIAL[] = {
    0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5,
    0x1p-1074, -0x1p-1074, 0x1p-1022, -0x1p-1022, 0x1.fffffffffffffp+1023, -0x1.fffffffffffffp+1023,
    0x1p-149, 0x1p-126, 0x1.fffffep+127, -0x1.fffffep+127, 1e-300, -1e-300, 1e300, -1e300,
    0x1p53, -0x1p53, 0x1p53 + 2, 0x1p24, -0x1p24, 0x1p-30, -0x1p-30, 1e-8, -1e-8,
    709.782712893384, 709.7827128933841, -745.1332191019411, -745.1332191019412, -708.4, 88.72283,
    88.72284, -103.97208, -87.33655, 3.141592653589793, -3.141592653589793, 1.5707963267948966,
    6.283185307179586, 0.625, -0.625, 19.06, 9.01, -0.99999999, -1 + 0x1p-53, -1 + 0x1p-24,
    1 + 0x1p-52, 1 - 0x1p-53, 0.1, -0.1, 7.0, 100.0, 1e5, -1e5, 1e4,
    5e7, -5e7, 1e20, -1e20, 1e22, 0x1p1023, 0x1p127, 0x1p30, 0x1p15, 0x1p45,
};
#define NSPECIAL ((int)(sizeof SPECIAL / sizeof SPECIAL[0]))

/* ranges per function; ±inf/nan/0/subnormal specials are added for all */
static int ranges_for(const char *op, int dbl, range *r)
{
    int n = 0;
#define ADD(...) (r[n++] = (range){__VA_ARGS__})
    if (!strcmp(op, "exp")) {
        if (dbl)
            ADD(R_UNIFORM, -745.2, 709.8, 0, "[-745, 710]");
        else
            ADD(R_UNIFORM, -104.0, 88.8, 0, "[-104, 89]");
        ADD(R_UNIFORM, -2, 2, 0, "[-2, 2]");
        ADD(R_LOGU_PM, -60, 0, 0, "|x| in [2^-60, 1]");
        ADD(R_BITS, -INFINITY, INFINITY, 0, "all finite");
    } else if (!strcmp(op, "expm1")) {
        if (dbl)
            ADD(R_UNIFORM, -50, 709.8, 0, "[-50, 710]");
        else
            ADD(R_UNIFORM, -20, 88.8, 0, "[-20, 89]");
        ADD(R_UNIFORM, -2, 2, 0, "[-2, 2]");
        ADD(R_LOGU_PM, -60, 0, 0, "|x| in [2^-60, 1]");
        ADD(R_BITS, -INFINITY, INFINITY, 0, "all finite");
    } else if (!strcmp(op, "log")) {
        ADD(R_BITS, 0, INFINITY, 0, "all positive finite");
        ADD(R_UNIFORM, 0.5, 2, 0, "[0.5, 2]");
        ADD(R_LOGU, dbl ? -1074 : -149, dbl ? 1024 : 128, 0, "log-uniform");
        ADD(R_BITS, -INFINITY, INFINITY, 0, "all finite");
    } else if (!strcmp(op, "log1p")) {
        ADD(R_UNIFORM, -1, 10, 0, "(-1, 10]");
        ADD(R_LOGU_PM, -60, -1, 0, "|x| in [2^-60, 0.5]");
        ADD(R_LOGU, dbl ? -1074 : -149, dbl ? 1024 : 128, 0, "log-uniform x > 0");
        ADD(R_BITS, -1, INFINITY, 0, "all finite > -1");
    } else if (!strcmp(op, "tanh")) {
        ADD(R_UNIFORM, -25, 25, 0, "[-25, 25]");
        ADD(R_UNIFORM, -1, 1, 0, "[-1, 1]");
        ADD(R_LOGU_PM, -60, 5, 0, "|x| in [2^-60, 32]");
        ADD(R_BITS, -INFINITY, INFINITY, 0, "all finite");
    } else if (!strcmp(op, "sin") || !strcmp(op, "cos")) {
        /* the fast path (Cody-Waite) below 2^30 (double) / 2^15 (float),
         * Payne-Hanek above; float's slow path uses Cody-Waite in double
         * up to 2^45 */
        ADD(R_UNIFORM, -10, 10, 0, "[-10, 10]");
        ADD(R_LOGU_PM, -60, 3, 0, "|x| in [2^-60, 8]");
        ADD(R_HARD_PIO2, 0, 0, 0, "hardest near k pi/2");
        ADD(R_BITS, -INFINITY, INFINITY, 0, "all finite");
        if (dbl) {
            ADD(R_UNIFORM, -1e5, 1e5, 0, "[-1e5, 1e5]");
            ADD(R_NEAR_PIO2, 0, 1e5, 0, "near k pi/2, |x| < 1e5");
            ADD(R_NEAR_PIO2, 0, 1e12, 0, "near k pi/2, |x| < 1e12");
            ADD(R_NEAR_PIO2, 0, 0x1p62, 0, "near k pi/2, |x| < 2^63");
            ADD(R_LOGU_PM, 3, 30, 0, "|x| in [8, 2^30]");
            ADD(R_LOGU_PM, 30, 40, 0, "|x| in [2^30, 2^40]");
            ADD(R_LOGU_PM, 40, 1024, 0, "|x| in [2^40, DBL_MAX]");
        } else {
            ADD(R_UNIFORM, -1e4, 1e4, 0, "[-1e4, 1e4]");
            ADD(R_UNIFORM, 1e6, 1e7, 0, "[1e6, 1e7]");
            ADD(R_NEAR_PIO2, 0, 4e4, 0, "near k pi/2, |x| < 6e4");
            ADD(R_NEAR_PIO2, 0, 0x1p60, 0, "near k pi/2, |x| < 2^61");
            ADD(R_LOGU_PM, 3, 15, 0, "|x| in [8, 2^15]");
            ADD(R_LOGU_PM, 15, 45, 0, "|x| in [2^15, 2^45]");
            ADD(R_LOGU_PM, 45, 128, 0, "|x| in [2^45, FLT_MAX]");
        }
    } else if (!strcmp(op, "pow")) {
        if (dbl)
            ADD(R_POW_L, -745, 709.7, 0, "y ln x in [-745, 710]");
        else
            ADD(R_POW_L, -103, 88.7, 0, "y ln x in [-103, 89]");
        ADD(R_POW_L, -5, 5, 0, "y ln x in [-5, 5]");
        ADD(R_POW_NEAR1, -700, 700, 0, "x near 1, large y");
        ADD(R_POW_NEGINT, 0, 0, 0, "x < 0, integer y");
        ADD(R_POW_WIDE, -2, 2, 0, "any x > 0, y in [-2, 2]");
        ADD(R_POW_WIDE, -1e3, 1e3, 0, "any x > 0, y in [-1e3, 1e3]");
    } else { /* a function without ranges of its own: the whole line, near 0 and 1 */
        ADD(R_UNIFORM, -10, 10, 0, "[-10, 10]");
        ADD(R_LOGU_PM, -60, 5, 0, "|x| in [2^-60, 32]");
        ADD(R_LOGU_PM, dbl ? -1074 : -149, dbl ? 1023 : 127, 0, "log-uniform |x|");
        ADD(R_BITS, -INFINITY, INFINITY, 0, "all finite");
    }
#undef ADD
    return n;
}

/* ------------------------------------------------------------------ */
/* Measuring.                                                          */

/* ulps between got and the (long double) exact value, for the result type;
 * returns INFINITY for a wrong nan/inf/zero sign. */
static double ulp_err(double got, long double exact, int dbl)
{
    double want = dbl ? (double)exact : (double)(float)exact;
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got) ? 0.0 : INFINITY;
    if (isinf(want) || isinf(got))
        return want == got ? 0.0 : INFINITY;
    if (got == 0 && want == 0)
        return signbit(got) == signbit(want) ? 0.0 : INFINITY;
    int emin = dbl ? -1022 : -126, mant = dbl ? 52 : 23;
    int e = exact == 0 ? emin : ilogbl(exact);
    if (e < emin)
        e = emin;
    long double ulp = ldexpl(1.0L, e - mant);
    return (double)(fabsl((long double)got - exact) / ulp);
}

typedef void (*loop_fn)(const void *x, const void *y, void *out, int64_t n);
typedef double (*sfn1_d)(double);
typedef double (*sfn2_d)(double, double);
typedef float (*sfn1_f)(float);
typedef float (*sfn2_f)(float, float);

typedef struct {
    double max_ulp;
    double at_x, at_y;
    double got;
    long long n, over, vs_mismatch;
    double max_glibc;   /* max ulps from glibc's own float/double function */
} stats;

/* Runs the loop (and the scalar function) over xs/ys and folds the errors
 * into st.  Returns the number of hard failures (nan/inf/sign mistakes
 * and errors beyond the limit when checked). */
static long long measure(const op_info *op, int dbl, loop_fn loop, void *scalar, const double *xs,
                         const double *ys, long long n, int checked, stats *st, int verbose)
{
    size_t sz = dbl ? 8 : 4;
    void *bx = calloc(n, sz), *by = calloc(n, sz), *bo = calloc(n, sz);
    if (!bx || !by || !bo) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    for (long long i = 0; i < n; i++) {
        if (dbl) {
            ((double *)bx)[i] = xs[i];
            ((double *)by)[i] = ys[i];
        } else {
            ((float *)bx)[i] = (float)xs[i];
            ((float *)by)[i] = (float)ys[i];
        }
    }
    loop(bx, by, bo, n);
    long long hard = 0;
    for (long long i = 0; i < n; i++) {
        double x = xs[i], y = ys[i], got, sgot;
        if (dbl) {
            got = ((double *)bo)[i];
            sgot = op->nargs == 1 ? ((sfn1_d)scalar)(x) : ((sfn2_d)scalar)(x, y);
        } else {
            got = ((float *)bo)[i];
            sgot = op->nargs == 1 ? ((sfn1_f)scalar)((float)x) : ((sfn2_f)scalar)((float)x, (float)y);
        }
        if (memcmp(&got, &sgot, 8) != 0 && !(isnan(got) && isnan(sgot)))
            st->vs_mismatch++;
        long double exact = op->nargs == 1 ? op->ref1(x) : op->ref2(x, y);
        double e = ulp_err(got, exact, dbl);
        double lim = op->limit > 0 ? op->limit : ULP_LIMIT;
        st->n++;
        double g;
        if (dbl)
            g = op->nargs == 1 ? op->d1(x) : op->d2(x, y);
        else
            g = op->nargs == 1 ? op->f1((float)x) : op->f2((float)x, (float)y);
        double eg = ulp_err(got, (long double)g, dbl);
        if (eg > st->max_glibc)
            st->max_glibc = eg;
        if (e > st->max_ulp || (isnan(e) && !isnan(st->max_ulp))) {
            st->max_ulp = e;
            st->at_x = x;
            st->at_y = y;
            st->got = got;
        }
        if (e > lim) {
            st->over++;
            if (checked || isinf(e)) {
                if (hard < 5 || verbose) {
                    char args[64];
                    if (op->nargs == 2)
                        snprintf(args, sizeof args, "%.17g, %.17g", x, y);
                    else
                        snprintf(args, sizeof args, "%.17g", x);
                    printf("  %s_%s(%s) = %.17g, want %.17Lg (%.3g ulp)\n", op->name, dbl ? "f64" : "f32",
                           args, got, exact, e);
                }
                hard++;
            }
        }
    }
    free(bx);
    free(by);
    free(bo);
    return hard;
}

static void print_stats(const char *what, const stats *st, int nargs)
{
    if (nargs == 2)
        printf("    %-30s max %7.3f ulp at (%.17g, %.17g)  n=%lld\n", what, st->max_ulp, st->at_x,
               st->at_y, st->n);
    else
        printf("    %-30s max %7.3f ulp at %.17g  n=%lld\n", what, st->max_ulp, st->at_x, st->n);
}

/* ------------------------------------------------------------------ */
/* Dense sweeps: every float32 of a range through the vectorized loop.  */

/* The float32 functions whose every argument in a range is checked, with
 * the bound cmath.c documents for them.  The reference is the double
 * libm (within one double ulp, 2^-29 float ulps, of the exact value);
 * below the ranges exp(x) and tanh(x) round to 1 and x.  tanh's negative
 * side is its positive one with the sign bit or-ed in: every 7th float. */
static const struct {
    const char *op;
    double (*ref)(double);
    float lo, hi;   /* |x| from lo to hi, both signs */
    int neg_stride; /* negative side: every neg_stride-th float */
    double bound[2];   /* with FMA (the host), without (--generic) */
} SWEEPS[] = {
    {"exp", exp, 0x1p-26f, 104.0f, 1, {1.0, 1.25}},
    {"tanh", tanh, 0x1p-14f, 10.0f, 7, {1.5, 1.5}},
};

/* ulp_err for a float result against a double reference, without long
 * double arithmetic in the common case (the sweeps make ~10^9 calls) */
static double ulp_err_f32(float got, double want)
{
    if (!isfinite(got) || !isfinite(want) || got == 0 || want == 0)
        return ulp_err(got, (long double)want, 0);
    uint64_t wb;
    memcpy(&wb, &want, 8);
    int e = (int)((wb >> 52) & 0x7ff) - 1023;   /* ilogb: want is a normal double */
    if (e < -126)
        e = -126;
    uint64_t ub = (uint64_t)(e - 23 + 1023) << 52;
    double ulp;
    memcpy(&ulp, &ub, 8);
    return fabs((double)got - want) / ulp;
}

/* Runs loop over every float in [lo, hi] (by bits) and over the negated
 * floats with the given stride; returns the largest error in ulps and
 * where it was. */
static double sweep_f32(loop_fn loop, double (*ref)(double), float lo, float hi, int neg_stride,
                        double *at, long long *count)
{
    enum { CHUNK = 1 << 20 };
    float *bx = malloc(CHUNK * sizeof *bx), *bo = malloc(CHUNK * sizeof *bo);
    if (!bx || !bo) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    uint32_t b0, b1;
    memcpy(&b0, &lo, 4);
    memcpy(&b1, &hi, 4);
    double worst = 0;
    *count = 0;
    for (int side = 0; side < 2; side++) {
        uint32_t step = side ? (uint32_t)neg_stride : 1, sign = side ? 0x80000000u : 0;
        for (uint64_t start = b0; start <= b1; start += (uint64_t)CHUNK * step) {
            int n = 0;
            for (uint64_t u = start; u <= b1 && n < CHUNK; u += step) {
                uint32_t v = (uint32_t)u | sign;
                memcpy(&bx[n++], &v, 4);
            }
            loop(bx, bx, bo, n);
            for (int i = 0; i < n; i++) {
                double e = ulp_err_f32(bo[i], ref(bx[i]));
                if (e > worst || isnan(e)) {
                    worst = isnan(e) ? INFINITY : e;
                    *at = bx[i];
                }
            }
            *count += n;
        }
    }
    free(bx);
    free(bo);
    return worst;
}

/* ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    long long per_range = 200000;
    int generic = 0, verbose = 0, bench = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            per_range = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--generic"))
            generic = 1;
        else if (!strcmp(argv[i], "-v"))
            verbose = 1;
        else if (!strcmp(argv[i], "--bench"))
            bench = 1;
        else {
            fprintf(stderr, "usage: %s [-n COUNT] [--generic] [--bench] [-v]\n", argv[0]);
            return 2;
        }
    }
    for (int o = 0; o < NOPS; o++)
        if (!strcmp(OPS[o].name, "sin") || !strcmp(OPS[o].name, "cos"))
            OPS[o].limit = 1.5;
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();

    int failures = 0;

    /* the module lives in the JIT's thread-safe context */
    LLVMOrcThreadSafeContextRef tsc = LLVMOrcCreateNewThreadSafeContext();
    LLVMContextRef ctx = LLVMOrcThreadSafeContextGetContext(tsc);
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("cmath_test", ctx);
    clock_t t0 = clock();
    for (int o = 0; o < NOPS; o++)
        for (int dbl = 0; dbl < 2; dbl++) {
            build_scalar(mod, &OPS[o], dbl);
            build_loop(mod, &OPS[o], dbl);
            build_vec(mod, &OPS[o], dbl);
        }
    char *msg = NULL;
    if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg)) {
        printf("FAIL: invalid module: %s\n", msg);
        return 1;
    }
    LLVMDisposeMessage(msg);
    failures += check_plain_ir(mod);
    failures += check_bad_types();
    if (getenv("CMATH_DUMP_IR")) {
        char *ir = LLVMPrintModuleToString(mod);
        fputs(ir, stderr);
        LLVMDisposeMessage(ir);
    }
    int ptx = check_nvptx(mod);
    if (ptx < 0)
        printf("nvptx: target not built, skipped\n");
    else {
        printf("nvptx: %s\n", ptx ? "FAILED" : "all functions compile to PTX without external calls");
        failures += ptx;
    }

    /* optimise for the host (or baseline) CPU */
    LLVMTargetMachineRef tm = make_tm(generic);
    if (!tm)
        return 1;
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(mod, td);
    LLVMDisposeTargetData(td);
    char *triple = LLVMGetTargetMachineTriple(tm);
    LLVMSetTarget(mod, triple);
    LLVMDisposeMessage(triple);
    char *cpu = LLVMGetTargetMachineCPU(tm);
    printf("target cpu: %s\n", cpu);
    LLVMDisposeMessage(cpu);
    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    if (fail_err(LLVMRunPasses(mod, "default<O2>", tm, opts), "passes"))
        return 1;
    LLVMDisposePassBuilderOptions(opts);
    printf("build + O2: %.0f ms\n", 1000.0 * (double)(clock() - t0) / CLOCKS_PER_SEC);
    if (getenv("CMATH_DUMP_OPT")) {
        char *ir = LLVMPrintModuleToString(mod);
        fputs(ir, stderr);
        LLVMDisposeMessage(ir);
    }
    char widths[NOPS][2][32];
    for (int o = 0; o < NOPS; o++)
        for (int dbl = 0; dbl < 2; dbl++) {
            char name[64];
            snprintf(name, sizeof name, "cj_loop_%s_%s", OPS[o].name, dbl ? "f64" : "f32");
            vector_width(LLVMGetNamedFunction(mod, name), dbl, widths[o][dbl], sizeof widths[o][dbl]);
            if (!strcmp(OPS[o].name, "sin") || !strcmp(OPS[o].name, "cos"))
                failures += check_slow_path_call(mod, OPS[o].name, dbl);
        }

    /* JIT with a target machine like the one used for the passes */
    LLVMOrcLLJITBuilderRef jb = LLVMOrcCreateLLJITBuilder();
    /* the builder takes ownership of the JTMB, which takes the TM */
    LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(
        jb, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(make_tm(generic)));
    LLVMOrcLLJITRef jit;
    if (fail_err(LLVMOrcCreateLLJIT(&jit, jb), "LLJIT"))   /* consumes jb */
        return 1;
    /* the JIT takes ownership of the module via the thread-safe module */
    LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(mod, tsc);
    LLVMOrcDisposeThreadSafeContext(tsc);   /* the module keeps the context alive */
    if (fail_err(LLVMOrcLLJITAddLLVMIRModule(jit, LLVMOrcLLJITGetMainJITDylib(jit), tsm), "add module"))
        return 1;

    double maxulp[NOPS][2], maxglibc[NOPS][2];
    long long cap = per_range > NSPECIAL * NSPECIAL ? per_range : NSPECIAL * NSPECIAL;
    double *xs = malloc(cap * sizeof *xs), *ys = malloc(cap * sizeof *ys);
    for (int o = 0; o < NOPS; o++)
        for (int dbl = 0; dbl < 2; dbl++) {
            const op_info *op = &OPS[o];
            char lname[64], sname[64];
            snprintf(lname, sizeof lname, "cj_loop_%s_%s", op->name, dbl ? "f64" : "f32");
            snprintf(sname, sizeof sname, "cj_test_%s_%s", op->name, dbl ? "f64" : "f32");
            LLVMOrcExecutorAddress la, sa;
            if (fail_err(LLVMOrcLLJITLookup(jit, &la, lname), lname) ||
                fail_err(LLVMOrcLLJITLookup(jit, &sa, sname), sname))
                return 1;
            loop_fn loop = (loop_fn)(uintptr_t)la;
            void *scalar = (void *)(uintptr_t)sa;
            printf("%s_%s (loop %s)\n", op->name, dbl ? "f64" : "f32", widths[o][dbl]);

            stats all = {0};
            double vs_glibc = 0;
            long long hard = 0, mismatch = 0;
            /* special values (all pairs for pow) */
            long long n = 0;
            for (int i = 0; i < NSPECIAL; i++)
                for (int j = 0; j < (op->nargs == 2 ? NSPECIAL : 1); j++) {
                    xs[n] = dbl ? SPECIAL[i] : (float)SPECIAL[i];
                    ys[n] = dbl ? SPECIAL[j] : (float)SPECIAL[j];
                    n++;
                }
            stats st = {0};
            hard += measure(op, dbl, loop, scalar, xs, ys, n, 1, &st, verbose);
            print_stats("special values", &st, op->nargs);
            mismatch += st.vs_mismatch;
            if (st.max_ulp > all.max_ulp)
                all = st;
            if (st.max_glibc > vs_glibc)
                vs_glibc = st.max_glibc;
            range rs[16];
            int nr = ranges_for(op->name, dbl, rs);
            for (int r = 0; r < nr; r++) {
                for (long long i = 0; i < per_range; i++)
                    gen(&rs[r], dbl, &xs[i], &ys[i]);
                stats s2 = {0};
                hard += measure(op, dbl, loop, scalar, xs, ys, per_range, !rs[r].info, &s2, verbose);
                char label[64];
                snprintf(label, sizeof label, "%s%s", rs[r].label, rs[r].info ? " (info)" : "");
                print_stats(label, &s2, op->nargs);
                mismatch += s2.vs_mismatch;
                if (!rs[r].info && s2.max_ulp > all.max_ulp)
                    all = s2;
                if (!rs[r].info && s2.max_glibc > vs_glibc)
                    vs_glibc = s2.max_glibc;
            }
            if (mismatch)
                printf("    note: scalar and vector results differ in %lld cases\n", mismatch);
            maxulp[o][dbl] = all.max_ulp;
            maxglibc[o][dbl] = vs_glibc;
            if (hard) {
                printf("    FAIL: %lld inputs beyond %.1f ulp or wrong special results\n", hard,
                       op->limit > 0 ? op->limit : ULP_LIMIT);
                failures++;
            }
        }
    /* the <4 x T> versions agree bit for bit with the loops */
    long long vbad = 0;
    for (int o = 0; o < NOPS; o++)
        for (int dbl = 0; dbl < 2; dbl++) {
            const op_info *op = &OPS[o];
            char lname[64], vname[64];
            snprintf(lname, sizeof lname, "cj_loop_%s_%s", op->name, dbl ? "f64" : "f32");
            snprintf(vname, sizeof vname, "cj_vec_%s_%s", op->name, dbl ? "f64" : "f32");
            LLVMOrcExecutorAddress la, va;
            if (fail_err(LLVMOrcLLJITLookup(jit, &la, lname), lname) ||
                fail_err(LLVMOrcLLJITLookup(jit, &va, vname), vname))
                return 1;
            loop_fn loop = (loop_fn)(uintptr_t)la;
            void (*vec)(const void *, const void *, void *) = (void (*)(const void *, const void *, void *))(uintptr_t)va;
            enum { NV = 4096 };
            static double bx[NV], by[NV], o1[NV], o2[NV];
            range rs[16];
            int nr = ranges_for(op->name, dbl, rs);
            for (int i = 0; i < NV; i++) {
                double x, y;
                gen(&rs[i % nr], dbl, &x, &y);
                if (i < NSPECIAL)
                    x = SPECIAL[i];
                if (dbl) {
                    bx[i] = x;
                    by[i] = y;
                } else {
                    ((float *)bx)[i] = (float)x;
                    ((float *)by)[i] = (float)y;
                }
            }
            loop(bx, by, o1, NV);
            size_t sz = dbl ? 8 : 4;
            for (int i = 0; i < NV; i += VLANES)
                vec((char *)bx + i * sz, (char *)by + i * sz, (char *)o2 + i * sz);
            for (int i = 0; i < NV; i++) {
                const char *a = (const char *)o1 + i * sz, *c = (const char *)o2 + i * sz;
                int same = memcmp(a, c, sz) == 0;
                if (!same && dbl)
                    same = isnan(((double *)o1)[i]) && isnan(((double *)o2)[i]);
                if (!same && !dbl)
                    same = isnan(((float *)o1)[i]) && isnan(((float *)o2)[i]);
                vbad += !same;
            }
        }
    printf("<%d x T> emitters: %s\n", VLANES, vbad ? "MISMATCH with the scalar code" : "bit-identical to the scalar code");
    if (vbad)
        failures++;
    free(xs);
    free(ys);

    for (size_t w = 0; w < sizeof SWEEPS / sizeof SWEEPS[0]; w++) {
        char lname[64];
        snprintf(lname, sizeof lname, "cj_loop_%s_f32", SWEEPS[w].op);
        LLVMOrcExecutorAddress la;
        if (fail_err(LLVMOrcLLJITLookup(jit, &la, lname), lname))
            return 1;
        double at = 0;
        long long count;
        double worst = sweep_f32((loop_fn)(uintptr_t)la, SWEEPS[w].ref, SWEEPS[w].lo, SWEEPS[w].hi,
                                 SWEEPS[w].neg_stride, &at, &count);
        double bound = SWEEPS[w].bound[generic];
        int ok = worst <= bound;
        printf("sweep %s_f32, every float with |x| in [%g, %g] (%lld): max %.3f ulp at %.9g, bound %.2f%s\n",
               SWEEPS[w].op, SWEEPS[w].lo, SWEEPS[w].hi, count, worst, at, bound, ok ? "" : "  FAIL");
        failures += !ok;
    }

    if (bench) {
        /* ns per element: the vectorized loop against a plain libm loop */
        enum { NB = 1 << 16, REPS = 200 };
        double *bx = malloc(NB * 8), *by = malloc(NB * 8), *bo = malloc(NB * 8);
        printf("\nbench (ns/element, %d elements x %d): cjit loop vs libm loop\n", NB, REPS);
        for (int o = 0; o < NOPS; o++)
            for (int dbl = 0; dbl < 2; dbl++) {
                const op_info *op = &OPS[o];
                char lname[64];
                snprintf(lname, sizeof lname, "cj_loop_%s_%s", op->name, dbl ? "f64" : "f32");
                LLVMOrcExecutorAddress la;
                if (fail_err(LLVMOrcLLJITLookup(jit, &la, lname), lname))
                    return 1;
                loop_fn loop = (loop_fn)(uintptr_t)la;
                range rs[16];
                ranges_for(op->name, dbl, rs);
                /* a moderate range of each function (no subnormal results,
                 * which are slow on x86 whoever computes them) */
                for (int i = 0; i < NB; i++) {
                    double x, y;
                    gen(&rs[1], dbl, &x, &y);
                    if (dbl) {
                        bx[i] = x;
                        by[i] = y;
                    } else {
                        ((float *)bx)[i] = (float)x;
                        ((float *)by)[i] = (float)y;
                    }
                }
                double t1 = now();
                for (int r = 0; r < REPS; r++)
                    loop(bx, by, bo, NB);
                double t2 = now();
                for (int r = 0; r < REPS; r++)
                    for (int i = 0; i < NB; i++) {
                        if (dbl)
                            bo[i] = op->nargs == 1 ? op->d1(bx[i]) : op->d2(bx[i], by[i]);
                        else
                            ((float *)bo)[i] = op->nargs == 1 ? op->f1(((float *)bx)[i])
                                                              : op->f2(((float *)bx)[i], ((float *)by)[i]);
                    }
                double t3 = now();
                printf("  %-6s %s  %6.2f  vs  %6.2f\n", op->name, dbl ? "f64" : "f32",
                       (t2 - t1) * 1e9 / ((double)NB * REPS), (t3 - t2) * 1e9 / ((double)NB * REPS));
            }
        free(bx);
        free(by);
        free(bo);
    }

    printf("\nsummary: max ulp over the checked ranges against the exact value (long double libm)\n"
           "and [against glibc's float/double function]; the loop's vector type after O2\n");
    for (int o = 0; o < NOPS; o++)
        printf("  %-6s f32 %6.3f [%6.3f] ulp %-13s  f64 %6.3f [%6.3f] ulp %s\n", OPS[o].name, maxulp[o][0],
               maxglibc[o][0], widths[o][0], maxulp[o][1], maxglibc[o][1], widths[o][1]);
    LLVMOrcDisposeLLJIT(jit);
    LLVMDisposeTargetMachine(tm);
    printf("%s\n", failures ? "FAILED" : "OK");
    return failures ? 1 : 0;
}
