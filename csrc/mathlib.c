/* mathlib.c - the elementary functions as called functions (see mathlib.h).
 *
 * Naming: cj_m_<op>_<f32|f64> is the scalar function and
 * cj_m_<op>_<f32|f64>_v<N> its variant on N lanes.  Every function is
 * pure (memory(none), nounwind, willreturn), which is what lets the loop
 * vectorizer replace a scalar call by a vector one. */
#include <stdio.h>
#include <string.h>

#include "cmath.h"
#include "mathlib.h"

/* cmath.c's inline form of each one-argument function, by op: the unary
 * records whose cpu column is MATH(f) (ops_unary.def) */
#define INLINE_MATH(f) cj_math_##f
#define INLINE_INTRINSIC(name) NULL
#define INLINE_IR(fn) NULL
static LLVMValueRef (*const inline_unary[CJ_NUM_OPS])(LLVMBuilderRef, LLVMValueRef) = {
#define UNARY(NAME, text, dtypes, cost, derivative, cpu, ptx, numpy, lax, doc) [CJ_OP_##NAME] = INLINE_##cpu,
#include "ops_unary.def"
#undef UNARY
};

/* The library's ops in a fixed order: those records, then pow.  Slot
 * `slot` of that list, or CJ_NUM_OPS past its end. */
static cj_op math_op(int slot) {
    for (int op = 0; op < CJ_NUM_OPS; op++)
        if (inline_unary[op] && slot-- == 0) return (cj_op)op;
    return slot == 0 ? CJ_OP_POW : CJ_NUM_OPS;
}
static int num_math_ops(void) {
    int n = 0;
    while (math_op(n) != CJ_NUM_OPS) n++;
    return n;
}
/* lane counts per dtype: the scalar function first, then the vector variants
 * (128-, 256- and 512-bit vectors) */
#define NWIDTHS 4
static const int widths_f32[NWIDTHS] = {1, 4, 8, 16};
static const int widths_f64[NWIDTHS] = {1, 2, 4, 8};


static int index_of(int op_slot, bool f64, int width_slot) {
    return (op_slot * 2 + f64) * NWIDTHS + width_slot;
}

static void name_of(int index, char *buf, size_t size) {
    int width_slot = index % NWIDTHS, f64 = (index / NWIDTHS) % 2, op_slot = index / NWIDTHS / 2;
    const char *dt = f64 ? "f64" : "f32";
    int lanes = (f64 ? widths_f64 : widths_f32)[width_slot];
    if (lanes == 1) snprintf(buf, size, "cj_m_%s_%s", cj_op_name(math_op(op_slot)), dt);
    else snprintf(buf, size, "cj_m_%s_%s_v%d", cj_op_name(math_op(op_slot)), dt, lanes);
}

static int arity(int index) { return math_op(index / NWIDTHS / 2) == CJ_OP_POW ? 2 : 1; }

static LLVMTypeRef value_type(LLVMContextRef ctx, int index) {
    int width_slot = index % NWIDTHS, f64 = (index / NWIDTHS) % 2;
    LLVMTypeRef t = f64 ? LLVMDoubleTypeInContext(ctx) : LLVMFloatTypeInContext(ctx);
    int lanes = (f64 ? widths_f64 : widths_f32)[width_slot];
    return lanes == 1 ? t : LLVMVectorType(t, (unsigned)lanes);
}

static LLVMTypeRef function_type(LLVMContextRef ctx, int index) {
    LLVMTypeRef t = value_type(ctx, index), params[2] = {t, t};
    return LLVMFunctionType(t, params, (unsigned)arity(index), 0);
}

static void mark_pure(LLVMContextRef ctx, LLVMValueRef fn) {
    static const char *flags[] = {"nounwind", "willreturn", "nosync", "nofree"};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
        unsigned kind = LLVMGetEnumAttributeKindForName(flags[i], strlen(flags[i]));
        LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ctx, kind, 0));
    }
    /* memory(none): the encoded MemoryEffects of a function touching nothing is 0 */
    unsigned memory = LLVMGetEnumAttributeKindForName("memory", 6);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ctx, memory, 0));
}

static LLVMValueRef declare(LLVMModuleRef mod, int index) {
    char name[64];
    name_of(index, name, sizeof name);
    LLVMValueRef fn = LLVMGetNamedFunction(mod, name);
    if (fn) return fn;
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    fn = LLVMAddFunction(mod, name, function_type(ctx, index));
    mark_pure(ctx, fn);
    return fn;
}

/* See mathlib.h. */
LLVMValueRef cj_mathlib_call(LLVMBuilderRef b, cj_op op, LLVMValueRef *args, int nargs) {
    LLVMValueRef cur = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
    LLVMModuleRef mod = LLVMGetGlobalParent(cur);
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    bool f64 = LLVMGetTypeKind(LLVMTypeOf(args[0])) == LLVMDoubleTypeKind;
    int op_slot = 0;
    while (math_op(op_slot) != CJ_NUM_OPS && math_op(op_slot) != op) op_slot++;
    if (math_op(op_slot) == CJ_NUM_OPS) return NULL;
    int scalar = index_of(op_slot, f64, 0);
    char scalar_name[64];
    name_of(scalar, scalar_name, sizeof scalar_name);
    LLVMValueRef fn = LLVMGetNamedFunction(mod, scalar_name);
    if (!fn) {
        fn = declare(mod, scalar);
        /* the vector variants, and the mapping the vectorizer reads:
         * _ZGV_LLVM_N<lanes><v per argument>_<scalar>(<vector>) */
        char mapping[1024] = "";
        for (int w = 1; w < NWIDTHS; w++) {
            int vi = index_of(op_slot, f64, w);
            char vname[64], entry[160];
            name_of(vi, vname, sizeof vname);
            declare(mod, vi);
            snprintf(entry, sizeof entry, "%s_ZGV_LLVM_N%d%s_%s(%s)", mapping[0] ? "," : "",
                     (f64 ? widths_f64 : widths_f32)[w], nargs == 2 ? "vv" : "v", scalar_name, vname);
            strncat(mapping, entry, sizeof mapping - strlen(mapping) - 1);
        }
        const char *key = "vector-function-abi-variant";
        LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                                   LLVMCreateStringAttribute(ctx, key, (unsigned)strlen(key), mapping,
                                                             (unsigned)strlen(mapping)));
    }
    return LLVMBuildCall2(b, function_type(ctx, scalar), fn, args, (unsigned)nargs, cj_op_name(op));
}

/* The index of function `name` in the table, or -1. */
static int index_of_name(const char *name) {
    if (strncmp(name, "cj_m_", 5) != 0) return -1;
    for (int i = 0, n = num_math_ops() * 2 * NWIDTHS; i < n; i++) {
        char buf[64];
        name_of(i, buf, sizeof buf);
        if (strcmp(buf, name) == 0) return i;
    }
    return -1;
}

/* See mathlib.h. */
bool cj_mathlib_provides(const char *name) {
    return index_of_name(name) >= 0 || strncmp(name, "cj.math.", 8) == 0;
}

/* See mathlib.h. */
LLVMValueRef cj_mathlib_inline(LLVMBuilderRef b, cj_op op, LLVMValueRef *args) {
    if (op == CJ_OP_POW) return cj_math_pow(b, args[0], args[1]);
    if ((int)op < 0 || op >= CJ_NUM_OPS || !inline_unary[op]) return NULL;
    return inline_unary[op](b, args[0]);
}

/* See mathlib.h. */
bool cj_mathlib_define(LLVMModuleRef mod, const char *name) {
    int index = index_of_name(name);
    if (index < 0) return cj_math_define_helper(mod, name);
    LLVMValueRef fn = declare(mod, index);
    if (!LLVMIsDeclaration(fn)) return true;
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, fn, "entry"));
    LLVMValueRef args[2] = {LLVMGetParam(fn, 0), arity(index) == 2 ? LLVMGetParam(fn, 1) : NULL};
    LLVMValueRef r = cj_mathlib_inline(b, math_op(index / NWIDTHS / 2), args);
    LLVMBuildRet(b, r);
    LLVMDisposeBuilder(b);
    return true;
}
