/* codegen_types.c - the IR helpers every emitter shares: the LLVM types
 * of dtypes (in registers and in memory), constants, calls of overloaded
 * intrinsics and conversions between dtypes.  Below codegen_unary.c and
 * codegen_expr.c. */
#include <string.h>

#include "codegen_priv.h"

LLVMTypeRef reg_type(cg *c, cj_dtype dt) {
    switch (dt) {
    case CJ_BOOL: return c->i1;
    case CJ_INT8: case CJ_UINT8: return c->i8;
    case CJ_INT16: case CJ_UINT16: return c->i16;
    case CJ_INT32: return c->i32;
    case CJ_UINT32: return c->i32;
    case CJ_INT64: case CJ_UINT64: return c->i64;
    case CJ_FLOAT32: return c->f32;
    case CJ_FLOAT64: return c->f64;
    case CJ_NUM_DTYPES: break;
    }
    return c->i64;
}

LLVMTypeRef mem_type(cg *c, cj_dtype dt) { return dt == CJ_BOOL ? c->i8 : reg_type(c, dt); }

LLVMValueRef const_of(cg *c, cj_dtype dt, double f, int64_t i) {
    if (is_float(dt)) return LLVMConstReal(reg_type(c, dt), f);
    if (dt == CJ_BOOL) return LLVMConstInt(c->i1, i != 0, 0);
    return LLVMConstInt(reg_type(c, dt), (unsigned long long)i, 1);
}

LLVMValueRef call_intrinsic(cg *c, const char *name, LLVMTypeRef type, LLVMValueRef *args,
                                   unsigned nargs, const char *label) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, &type, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(c->ctx, id, &type, 1);
    return LLVMBuildCall2(c->b, fty, fn, args, nargs, label);
}

/* Converts v from dtype `from` to dtype `to` (NumPy astype rules for
 * in-range values; out-of-range float->int is frozen, not undefined). */
LLVMValueRef emit_cast(cg *c, LLVMValueRef v, cj_dtype from, cj_dtype to) {
    if (from == to) return v;
    LLVMTypeRef t = reg_type(c, to);
    if (to == CJ_BOOL) {
        if (is_float(from)) return LLVMBuildFCmp(c->b, LLVMRealUNE, v, LLVMConstReal(reg_type(c, from), 0), "tobool");
        return LLVMBuildICmp(c->b, LLVMIntNE, v, LLVMConstInt(reg_type(c, from), 0, 0), "tobool");
    }
    if (is_float(to)) {
        if (is_float(from)) return from == CJ_FLOAT32 ? LLVMBuildFPExt(c->b, v, t, "fext") : LLVMBuildFPTrunc(c->b, v, t, "ftrunc");
        if (cj_dtype_unsigned(from)) return LLVMBuildUIToFP(c->b, v, t, "utof");
        return LLVMBuildSIToFP(c->b, v, t, "itof");
    }
    /* integer target; a float reaches an unsigned through int64, so that
     * -1.0 wraps to 2**32 - 1 as NumPy's astype does on x86, and int8 or
     * int16 through int32 (graph.c's const_convert folds constants alike) */
    if (is_float(from) && to == CJ_UINT64) {
        /* as a C compiler's cast on x86: below 2**63 through int64 (-1.0
         * gives 2**64 - 1), from 2**63 on the integer of v - 2**63 with the
         * top bit set */
        LLVMValueRef two63 = LLVMConstReal(reg_type(c, from), 9223372036854775808.0);
        LLVMValueRef low = emit_cast(c, v, from, CJ_INT64);
        LLVMValueRef high = LLVMBuildXor(c->b, emit_cast(c, LLVMBuildFSub(c->b, v, two63, "v63"), from, CJ_INT64),
                                         LLVMConstInt(c->i64, UINT64_C(1) << 63, 0), "ftou.high");
        return LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealOGE, v, two63, "big"), high, low, "ftou64");
    }
    if (is_float(from) && cj_dtype_unsigned(to))
        return LLVMBuildTrunc(c->b, emit_cast(c, v, from, CJ_INT64), t, "ftou");
    if (is_float(from) && cj_dtype_size(to) < 4)
        return LLVMBuildTrunc(c->b, emit_cast(c, v, from, CJ_INT32), t, "ftoi.narrow");
    if (is_float(from)) return LLVMBuildFreeze(c->b, LLVMBuildFPToSI(c->b, v, t, "ftoi"), "ftoi.frozen");
    /* int32 <-> uint32, int64 <-> uint64, ...: the same bits (bool is an i1 in a register) */
    if (from != CJ_BOOL && cj_dtype_size(from) == cj_dtype_size(to)) return v;
    if (from == CJ_BOOL || cj_dtype_size(from) < cj_dtype_size(to))
        return cj_dtype_unsigned(from) ? LLVMBuildZExt(c->b, v, t, "zext") : LLVMBuildSExt(c->b, v, t, "sext");
    return LLVMBuildTrunc(c->b, v, t, "trunc");
}
