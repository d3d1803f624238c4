/* codegen_unary.c - the elementwise unary ops as IR: each record's cpu and
 * ptx columns (ops_unary.def) expanded into emit_unary, and the IR(...)
 * emitters those columns name.  emit_op (codegen_expr.c) sends every
 * unary record here. */
#include "cmath.h"
#include "codegen_priv.h"
#include "mathlib.h"

/* ---- the IR(...) emitters: x of dtype dt ------------------------------- */

static LLVMValueRef emit_neg(cg *c, LLVMValueRef x, cj_dtype dt) {
    if (is_float(dt)) return LLVMBuildFNeg(c->b, x, "neg");
    return LLVMBuildSub(c->b, LLVMConstInt(reg_type(c, dt), 0, 0), x, "neg");
}

static LLVMValueRef emit_abs(cg *c, LLVMValueRef x, cj_dtype dt) {
    LLVMTypeRef t = reg_type(c, dt);
    if (is_float(dt)) return call_intrinsic(c, "llvm.fabs", t, &x, 1, "abs");
    if (cj_dtype_unsigned(dt)) return x;
    return LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, x, LLVMConstInt(t, 0, 0), "isneg"),
                           LLVMBuildSub(c->b, LLVMConstInt(t, 0, 0), x, "negx"), x, "abs");
}

static LLVMValueRef emit_sign(cg *c, LLVMValueRef x, cj_dtype dt) {
    LLVMTypeRef t = reg_type(c, dt);
    if (is_float(dt)) {
        LLVMValueRef pos = LLVMBuildFCmp(c->b, LLVMRealOGT, x, LLVMConstReal(t, 0), "pos");
        LLVMValueRef neg = LLVMBuildFCmp(c->b, LLVMRealOLT, x, LLVMConstReal(t, 0), "neg");
        /* zeros of either sign give +0.0 (NumPy, the array API); nan stays nan */
        LLVMValueRef zero = LLVMBuildFCmp(c->b, LLVMRealOEQ, x, LLVMConstReal(t, 0), "zero");
        LLVMValueRef r = LLVMBuildSelect(c->b, zero, LLVMConstReal(t, 0), x, "z");
        r = LLVMBuildSelect(c->b, neg, LLVMConstReal(t, -1), r, "s");
        return LLVMBuildSelect(c->b, pos, LLVMConstReal(t, 1), r, "sign");
    }
    if (dt == CJ_BOOL) return x;
    if (cj_dtype_unsigned(dt))
        return LLVMBuildZExt(c->b, LLVMBuildICmp(c->b, LLVMIntNE, x, LLVMConstInt(t, 0, 0), "nz"), t, "sign");
    LLVMValueRef pos = LLVMBuildZExt(c->b, LLVMBuildICmp(c->b, LLVMIntSGT, x, LLVMConstInt(t, 0, 0), "p"), t, "pz");
    LLVMValueRef neg = LLVMBuildZExt(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, x, LLVMConstInt(t, 0, 0), "n"), t, "nz");
    return LLVMBuildSub(c->b, pos, neg, "sign");
}

/* floats only (the FLOAT rule: an int operand was cast to float) */
static LLVMValueRef emit_reciprocal(cg *c, LLVMValueRef x, cj_dtype dt) {
    return LLVMBuildFDiv(c->b, LLVMConstReal(reg_type(c, dt), 1), x, "recip");
}

static LLVMValueRef emit_logical_not(cg *c, LLVMValueRef x, cj_dtype dt) {
    return LLVMBuildXor(c->b, emit_cast(c, x, dt, CJ_BOOL), LLVMConstInt(c->i1, 1, 0), "not");
}

static LLVMValueRef emit_bitwise_not(cg *c, LLVMValueRef x, cj_dtype dt) {
    return LLVMBuildXor(c->b, x, LLVMConstAllOnes(reg_type(c, dt)), "bnot");
}

static LLVMValueRef emit_isnan(cg *c, LLVMValueRef x, cj_dtype dt) {
    return is_float(dt) ? LLVMBuildFCmp(c->b, LLVMRealUNO, x, x, "isnan") : LLVMConstInt(c->i1, 0, 0);
}

static LLVMValueRef emit_isfinite(cg *c, LLVMValueRef x, cj_dtype dt) {
    if (!is_float(dt)) return LLVMConstInt(c->i1, 1, 0);
    LLVMTypeRef t = reg_type(c, dt);
    return LLVMBuildFCmp(c->b, LLVMRealOLT, call_intrinsic(c, "llvm.fabs", t, &x, 1, "ax"),
                         LLVMConstReal(t, __builtin_inf()), "isfinite");
}

/* ---- MATH(f) and INTRINSIC("llvm.f") ------------------------------------ */

/* cjit's polynomial: a call into mathlib.c where the kernel holds much
 * long math (c->call_math, CPU only), else inline. */
static LLVMValueRef math(cg *c, cj_op op, LLVMValueRef x, LLVMValueRef (*inline_fn)(LLVMBuilderRef, LLVMValueRef)) {
    LLVMValueRef r = c->call_math ? cj_mathlib_call(c->b, op, &x, 1) : NULL;
    return r ? r : inline_fn(c->b, x);
}

/* the intrinsic on a float; an int (floor, ceil) is its own result */
static LLVMValueRef intrinsic(cg *c, const char *name, LLVMValueRef x, cj_dtype dt) {
    if (!is_float(dt)) return x;
    return call_intrinsic(c, name, reg_type(c, dt), &x, 1, name + 5 /* past "llvm." */);
}

/* ---- the records ---------------------------------------------------------- */

#define CODE_MATH(f) math(c, op, x, cj_math_##f)
#define CODE_INTRINSIC(name) intrinsic(c, name, x, dt)
#define CODE_IR(fn) fn(c, x, dt)
/* the ptx column: SAME, or code of its own */
#define OWN_PTX_SAME false
#define OWN_PTX_MATH(f) true
#define OWN_PTX_INTRINSIC(name) true
#define OWN_PTX_IR(fn) true
#define PTX_SAME NULL
#define PTX_MATH(f) CODE_MATH(f)
#define PTX_INTRINSIC(name) CODE_INTRINSIC(name)
#define PTX_IR(fn) CODE_IR(fn)

/* See codegen_priv.h. */
LLVMValueRef emit_unary(cg *c, cj_op op, LLVMValueRef x, cj_dtype dt) {
    bool gpu = c->target != CJ_TARGET_CPU;
    switch ((int)op) { /* an int: the other ops are not listed */
#define UNARY(NAME, text, dtypes, cost, derivative, cpu, ptx, numpy, lax, doc) \
    case CJ_OP_##NAME: return gpu && OWN_PTX_##ptx ? PTX_##ptx : CODE_##cpu;
#include "ops_unary.def"
#undef UNARY
    }
    cj_error_set(c->err, CJ_ERR_INTERNAL, "codegen: %s is not an elementwise unary op", cj_op_name(op));
    return NULL;
}
