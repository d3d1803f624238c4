/* codegen_expr.c - the loop body: loads and stores at affine offsets with
 * their alias metadata, one op as IR (emit_op; an elementwise unary op's
 * code is codegen_unary.c's), and a kernel's expression DAG evaluated and
 * stored (emit_exprs, emit_stores).  Shared by the CPU and NVPTX wrappers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/DebugInfo.h> /* temporary metadata nodes: self-referential loop ids and scopes */

#include "cmath.h"
#include "codegen_priv.h"
#include "mathlib.h"

/* The integer compare predicate of a signed one, for dtype dt (bool and
 * the unsigned compare without a sign). */
static LLVMIntPredicate int_pred(cj_dtype dt, LLVMIntPredicate signed_pred) {
    if (!cj_dtype_unsigned(dt)) return signed_pred;
    switch (signed_pred) {
    case LLVMIntSLT: return LLVMIntULT;
    case LLVMIntSLE: return LLVMIntULE;
    case LLVMIntSGT: return LLVMIntUGT;
    case LLVMIntSGE: return LLVMIntUGE;
    case LLVMIntEQ: case LLVMIntNE: case LLVMIntUGT: case LLVMIntUGE: case LLVMIntULT: case LLVMIntULE: break;
    }
    return signed_pred;
}

/* offset + sum stride[d] * i_d, as i64 */
static LLVMValueRef affine_value(cg *c, const cj_affine *a) {
    LLVMValueRef v = LLVMConstInt(c->i64, (unsigned long long)a->offset, 1);
    for (int d = 0; d < c->k->rank; d++) {
        if (a->stride[d] == 0) continue;
        LLVMValueRef term = a->stride[d] == 1
            ? c->idx[d]
            : LLVMBuildMul(c->b, c->idx[d], LLVMConstInt(c->i64, (unsigned long long)a->stride[d], 1), "term");
        v = LLVMBuildAdd(c->b, v, term, "off");
    }
    return v;
}

static LLVMValueRef element_ptr_at(cg *c, int buffer, LLVMValueRef off) {
    cj_dtype dt = c->plan->buffers[buffer].dtype;
    return LLVMBuildInBoundsGEP2(c->b, mem_type(c, dt), c->buf_ptr[buffer], &off, 1, "addr");
}


/* Tags a load or store of `buffer` with its alias scope (see set_alias_scopes). */
static void tag_access(cg *c, int buffer, LLVMValueRef inst) {
    if (!c->scope || !c->scope[buffer]) return;
    LLVMSetMetadata(inst, LLVMGetMDKindIDInContext(c->ctx, "alias.scope", 11), c->scope[buffer]);
    LLVMSetMetadata(inst, LLVMGetMDKindIDInContext(c->ctx, "noalias", 7), c->noalias[buffer]);
}

/* buffer[off] (off an i64 element offset) */
static LLVMValueRef load_at(cg *c, int buffer, LLVMValueRef off) {
    cj_dtype dt = c->plan->buffers[buffer].dtype;
    LLVMValueRef v = LLVMBuildLoad2(c->b, mem_type(c, dt), element_ptr_at(c, buffer, off), "ld");
    tag_access(c, buffer, v);
    if (dt == CJ_BOOL) v = LLVMBuildICmp(c->b, LLVMIntNE, v, LLVMConstInt(c->i8, 0, 0), "ldb");
    return v;
}

static void store_at(cg *c, int buffer, LLVMValueRef off, LLVMValueRef v) {
    cj_dtype dt = c->plan->buffers[buffer].dtype;
    if (dt == CJ_BOOL) v = LLVMBuildZExt(c->b, v, c->i8, "stb");
    tag_access(c, buffer, LLVMBuildStore(c->b, v, element_ptr_at(c, buffer, off)));
}

LLVMValueRef load_value(cg *c, int buffer, const cj_affine *a) { return load_at(c, buffer, affine_value(c, a)); }

void store_value(cg *c, int buffer, const cj_affine *a, LLVMValueRef v) { store_at(c, buffer, affine_value(c, a), v); }


/* The element offset that index value i (of dtype dt) gives along a dim of
 * `dim` elements `stride` apart (graph_index.c): a negative index counts
 * from the end, then it is clamped into range.  *in_range, when asked,
 * says whether it was in range before the clamp. */
static LLVMValueRef index_offset(cg *c, LLVMValueRef i, cj_dtype dt, int64_t dim, int64_t stride,
                                 LLVMValueRef *in_range) {
    LLVMValueRef x = emit_cast(c, i, dt, CJ_INT64), zero = LLVMConstInt(c->i64, 0, 0);
    LLVMValueRef n = LLVMConstInt(c->i64, (unsigned long long)dim, 1);
    LLVMValueRef hi = LLVMConstInt(c->i64, (unsigned long long)(dim > 0 ? dim - 1 : 0), 1);
    if (cj_dtype_unsigned(dt)) { /* compared unsigned: a uint64 >= 2**63 is past the end, not negative */
        if (in_range) *in_range = LLVMBuildICmp(c->b, LLVMIntULT, x, n, "ltn");
        x = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntUGT, x, hi, "hi"), hi, x, "ch");
        return LLVMBuildMul(c->b, x, LLVMConstInt(c->i64, (unsigned long long)stride, 1), "dyn");
    }
    x = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, x, zero, "neg"), LLVMBuildAdd(c->b, x, n, "wrap"), x,
                        "ix");
    if (in_range)
        *in_range = LLVMBuildAnd(c->b, LLVMBuildICmp(c->b, LLVMIntSGE, x, zero, "ge0"),
                                 LLVMBuildICmp(c->b, LLVMIntSLT, x, n, "ltn"), "inrange");
    x = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, x, zero, "lo"), zero, x, "cl");
    x = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSGT, x, hi, "hi"), hi, x, "ch");
    return LLVMBuildMul(c->b, x, LLVMConstInt(c->i64, (unsigned long long)stride, 1), "dyn");
}

/* A distinct node !{self, ops...}: loop ids, alias scopes and
 * domains must be.  The temporary first operand is replaced by the node
 * itself, which ties the knot. */
LLVMMetadataRef self_node(cg *c, LLVMMetadataRef *ops, int nops) {
    LLVMMetadataRef all[4];
    all[0] = LLVMTemporaryMDNode(c->ctx, NULL, 0);
    for (int i = 0; i < nops; i++) all[i + 1] = ops[i];
    LLVMMetadataRef node = LLVMMDNodeInContext2(c->ctx, all, (size_t)nops + 1);
    LLVMMetadataReplaceAllUsesWith(all[0], node);
    return node;
}

/* The buffer whose bytes b lives in (itself unless in place or donated). */
int storage_of(const cj_plan *p, int b) {
    while (p->buffers[b].alias_of >= 0) b = p->buffers[b].alias_of;
    return b;
}

/* Buffers are pointers loaded from an array, so LLVM must assume that the
 * store of a kernel may write any buffer it reads: it would not hoist a
 * row's mean out of the loop over the row, and it would version every
 * vectorized loop with run-time overlap checks.  The plan knows better:
 * distinct buffers touched by one kernel never overlap (memplan gives
 * buffers live at once distinct bytes) unless one lives in the other's
 * bytes, an in-place update or donation, which storage_of follows.  Two
 * arguments may be one array, but only read.  So each storage gets a scope,
 * and each access says it does not alias the kernel's other storages. */
void set_alias_scopes(cg *c, int ki, const cj_kernel *k) {
    int nb = c->plan->nbuffers;
    for (int b = 0; b < nb; b++) c->scope[b] = c->noalias[b] = NULL;
    int *bufs = malloc(sizeof(int) * ((size_t)k->nexprs + k->nalso + 1));
    if (!bufs) return; /* no metadata: slower code, same results */
    int n = cj_codegen_kernel_buffers(k, bufs);
    char label[48];
    snprintf(label, sizeof label, "cj.kernel%d", ki);
    LLVMMetadataRef name = LLVMMDStringInContext2(c->ctx, label, strlen(label));
    LLVMMetadataRef domain = self_node(c, &name, 1);
    LLVMMetadataRef scopes[CJ_MAX_SCOPES];
    int roots[CJ_MAX_SCOPES], nroots = 0;
    for (int i = 0; i < n && nroots < CJ_MAX_SCOPES; i++) {
        int r = storage_of(c->plan, bufs[i]), j = 0;
        while (j < nroots && roots[j] != r) j++;
        if (j < nroots) continue;
        snprintf(label, sizeof label, "cj.buf%d", r);
        LLVMMetadataRef ops[2] = {domain, LLVMMDStringInContext2(c->ctx, label, strlen(label))};
        roots[nroots] = r;
        scopes[nroots++] = self_node(c, ops, 2);
    }
    if (nroots < 2 || nroots == CJ_MAX_SCOPES) {
        free(bufs);
        return; /* one storage: nothing to say; too many: say nothing */
    }
    for (int i = 0; i < n; i++) {
        int r = storage_of(c->plan, bufs[i]), mine = 0;
        while (roots[mine] != r) mine++;
        LLVMMetadataRef others[CJ_MAX_SCOPES];
        int nothers = 0;
        for (int j = 0; j < nroots; j++)
            if (j != mine) others[nothers++] = scopes[j];
        c->scope[bufs[i]] = LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, &scopes[mine], 1));
        c->noalias[bufs[i]] = LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, others, (size_t)nothers));
    }
    free(bufs);
}

/* Python's floor division on signed integers; x // 0 gives 0 (as NumPy). */
static LLVMValueRef emit_int_floordiv(cg *c, LLVMValueRef x, LLVMValueRef y, LLVMTypeRef t) {
    LLVMValueRef zero = LLVMConstInt(t, 0, 0), one = LLVMConstInt(t, 1, 0);
    LLVMValueRef minus1 = LLVMConstAllOnes(t);
    LLVMValueRef y_zero = LLVMBuildICmp(c->b, LLVMIntEQ, y, zero, "y0");
    LLVMValueRef y_m1 = LLVMBuildICmp(c->b, LLVMIntEQ, y, minus1, "ym1");
    /* a divisor that can never trap: 0 and -1 are answered separately */
    LLVMValueRef safe = LLVMBuildSelect(c->b, LLVMBuildOr(c->b, y_zero, y_m1, "bad"), one, y, "ysafe");
    LLVMValueRef q = LLVMBuildSDiv(c->b, x, safe, "q");
    LLVMValueRef r = LLVMBuildSRem(c->b, x, safe, "r");
    LLVMValueRef r_nz = LLVMBuildICmp(c->b, LLVMIntNE, r, zero, "rnz");
    LLVMValueRef signs_differ = LLVMBuildICmp(c->b, LLVMIntSLT, LLVMBuildXor(c->b, r, safe, "rx"), zero, "sd");
    LLVMValueRef adjust = LLVMBuildAnd(c->b, r_nz, signs_differ, "adj");
    q = LLVMBuildSub(c->b, q, LLVMBuildZExt(c->b, adjust, t, "adjz"), "qf");
    q = LLVMBuildSelect(c->b, y_m1, LLVMBuildSub(c->b, zero, x, "negx"), q, "q1");
    return LLVMBuildSelect(c->b, y_zero, zero, q, "fdiv");
}

/* Floor division of unsigned integers (truncation is the floor); x // 0
 * gives 0. */
static LLVMValueRef emit_uint_floordiv(cg *c, LLVMValueRef x, LLVMValueRef y, LLVMTypeRef t) {
    LLVMValueRef zero = LLVMConstInt(t, 0, 0);
    LLVMValueRef y_zero = LLVMBuildICmp(c->b, LLVMIntEQ, y, zero, "y0");
    LLVMValueRef safe = LLVMBuildSelect(c->b, y_zero, LLVMConstInt(t, 1, 0), y, "ysafe");
    return LLVMBuildSelect(c->b, y_zero, zero, LLVMBuildUDiv(c->b, x, safe, "q"), "fdiv");
}

/* x << y, x >> y (logical or arithmetic) with NumPy's and XLA's answer for
 * a count that is negative or at least the width, where LLVM's shifts are
 * poison: 0, or the sign bits for an arithmetic right shift. */
static LLVMValueRef emit_shift(cg *c, cj_op op, LLVMValueRef x, LLVMValueRef y, LLVMTypeRef t) {
    LLVMValueRef width = LLVMConstInt(t, LLVMGetIntTypeWidth(t), 0);
    LLVMValueRef out_of_range = LLVMBuildICmp(c->b, LLVMIntUGE, y, width, "oob");
    if (op == CJ_OP_SHIFT_RIGHT_ARITHMETIC) {
        LLVMValueRef last = LLVMConstInt(t, LLVMGetIntTypeWidth(t) - 1, 0);
        return LLVMBuildAShr(c->b, x, LLVMBuildSelect(c->b, out_of_range, last, y, "cnt"), "sra");
    }
    LLVMValueRef safe = LLVMBuildSelect(c->b, out_of_range, LLVMConstInt(t, 0, 0), y, "cnt");
    LLVMValueRef r = op == CJ_OP_SHIFT_LEFT ? LLVMBuildShl(c->b, x, safe, "shl") : LLVMBuildLShr(c->b, x, safe, "srl");
    return LLVMBuildSelect(c->b, out_of_range, LLVMConstInt(t, 0, 0), r, "shift");
}

/* NumPy's float floor division: from fmod, so that 1 // 0.1 == 9. */
static LLVMValueRef emit_float_floordiv(cg *c, LLVMValueRef x, LLVMValueRef y, LLVMTypeRef t) {
    LLVMValueRef zero = LLVMConstReal(t, 0), one = LLVMConstReal(t, 1), half = LLVMConstReal(t, 0.5);
    LLVMValueRef mod = LLVMBuildFRem(c->b, x, y, "mod");
    LLVMValueRef div = LLVMBuildFDiv(c->b, LLVMBuildFSub(c->b, x, mod, "xm"), y, "div");
    LLVMValueRef mod_nz = LLVMBuildFCmp(c->b, LLVMRealUNE, mod, zero, "modnz");
    LLVMValueRef y_neg = LLVMBuildFCmp(c->b, LLVMRealOLT, y, zero, "yneg");
    LLVMValueRef m_neg = LLVMBuildFCmp(c->b, LLVMRealOLT, mod, zero, "mneg");
    LLVMValueRef fix = LLVMBuildAnd(c->b, mod_nz, LLVMBuildXor(c->b, y_neg, m_neg, "sx"), "fix");
    div = LLVMBuildSelect(c->b, fix, LLVMBuildFSub(c->b, div, one, "d1"), div, "divf");
    LLVMValueRef fl = call_intrinsic(c, "llvm.floor", t, &div, 1, "fl");
    LLVMValueRef up = LLVMBuildFCmp(c->b, LLVMRealOGT, LLVMBuildFSub(c->b, div, fl, "frac"), half, "up");
    fl = LLVMBuildSelect(c->b, up, LLVMBuildFAdd(c->b, fl, one, "fl1"), fl, "flr");
    LLVMValueRef q = LLVMBuildFDiv(c->b, x, y, "q");
    LLVMValueRef args[2] = {zero, q};
    LLVMValueRef signed_zero = call_intrinsic(c, "llvm.copysign", t, args, 2, "sz");
    LLVMValueRef div_nz = LLVMBuildFCmp(c->b, LLVMRealUNE, div, zero, "divnz");
    LLVMValueRef res = LLVMBuildSelect(c->b, div_nz, fl, signed_zero, "res");
    LLVMValueRef y_zero = LLVMBuildFCmp(c->b, LLVMRealOEQ, y, zero, "y0");
    return LLVMBuildSelect(c->b, y_zero, q, res, "ffdiv");
}

/* The body of cj_rt_ipow (rt.c) in IR, for targets that cannot call
 * back into the host: square-and-multiply, wrapping like NumPy; a negative
 * exponent gives the integer part of the true result. */
static void define_ipow(cg *c, LLVMValueRef fn) {
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    LLVMBuilderRef b = LLVMCreateBuilderInContext(c->ctx);
    LLVMValueRef base = LLVMGetParam(fn, 0), ex = LLVMGetParam(fn, 1);
    LLVMTypeRef t = c->i64;
    LLVMValueRef zero = LLVMConstInt(t, 0, 0), one = LLVMConstInt(t, 1, 0), minus1 = LLVMConstAllOnes(t);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(c->ctx, fn, "entry");
    LLVMBasicBlockRef neg = LLVMAppendBasicBlockInContext(c->ctx, fn, "negative");
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(c->ctx, fn, "loop");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(c->ctx, fn, "step");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(c->ctx, fn, "done");
    LLVMPositionBuilderAtEnd(b, entry);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, ex, zero, "eneg"), neg, loop);
    LLVMPositionBuilderAtEnd(b, neg);
    LLVMValueRef odd = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, ex, one, "e1"), zero, "odd");
    LLVMValueRef m1 = LLVMBuildSelect(b, odd, minus1, one, "pm1");
    LLVMValueRef r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, base, minus1, "bm1"), m1, zero, "r");
    r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, base, one, "b1"), one, r, "rneg");
    LLVMBuildRet(b, r);
    LLVMPositionBuilderAtEnd(b, loop);
    LLVMValueRef res = LLVMBuildPhi(b, t, "res"), bb = LLVMBuildPhi(b, t, "b"), ee = LLVMBuildPhi(b, t, "e");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, ee, zero, "edone"), done, body);
    LLVMPositionBuilderAtEnd(b, body);
    LLVMValueRef bit = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, ee, one, "ebit"), zero, "bit");
    LLVMValueRef res2 = LLVMBuildSelect(b, bit, LLVMBuildMul(b, res, bb, "rb"), res, "res2");
    LLVMValueRef bb2 = LLVMBuildMul(b, bb, bb, "b2");
    LLVMValueRef ee2 = LLVMBuildLShr(b, ee, one, "e2");
    LLVMBuildBr(b, loop);
    LLVMValueRef res_in[2] = {one, res2}, bb_in[2] = {base, bb2}, ee_in[2] = {ex, ee2};
    LLVMBasicBlockRef from[2] = {entry, body};
    LLVMAddIncoming(res, res_in, from, 2);
    LLVMAddIncoming(bb, bb_in, from, 2);
    LLVMAddIncoming(ee, ee_in, from, 2);
    LLVMPositionBuilderAtEnd(b, done);
    LLVMBuildRet(b, res);
    LLVMDisposeBuilder(b);
}

static LLVMValueRef emit_int_pow(cg *c, LLVMValueRef x, LLVMValueRef y, cj_dtype dt) {
    LLVMTypeRef params[2] = {c->i64, c->i64};
    LLVMTypeRef fty = LLVMFunctionType(c->i64, params, 2, 0);
    LLVMValueRef fn = LLVMGetNamedFunction(c->mod, "cj_rt_ipow");
    if (!fn) {
        fn = LLVMAddFunction(c->mod, "cj_rt_ipow", fty);
        /* the CPU JIT links runtime.c's helper; a GPU module carries its own */
        if (c->target == CJ_TARGET_NVPTX) define_ipow(c, fn);
    }
    LLVMValueRef args[2] = {emit_cast(c, x, dt, CJ_INT64), emit_cast(c, y, dt, CJ_INT64)};
    LLVMValueRef r = LLVMBuildCall2(c->b, fty, fn, args, 2, "ipow");
    return emit_cast(c, r, CJ_INT64, dt);
}

/* x ** y on floats.  A constant exponent of 1 or 2 (x ** 2 in a variance,
 * and x ** 1 in its gradient) is exact as x or x * x, and far cheaper than
 * the general pow. */
static LLVMValueRef emit_float_pow(cg *c, LLVMValueRef x, LLVMValueRef y) {
    if (LLVMIsAConstantFP(y)) {
        LLVMBool lossy = 0;
        double e = LLVMConstRealGetDouble(y, &lossy);
        if (e == 1.0) return x;
        if (e == 2.0) return LLVMBuildFMul(c->b, x, x, "square");
    }
    if (c->call_math) {
        LLVMValueRef args[2] = {x, y};
        return cj_mathlib_call(c->b, CJ_OP_POW, args, 2);
    }
    return cj_math_pow(c->b, x, y);
}

/* maximum/minimum that propagate nan, as NumPy's */
LLVMValueRef emit_minmax(cg *c, bool is_max, LLVMValueRef x, LLVMValueRef y, cj_dtype dt) {
    if (dt == CJ_BOOL) return is_max ? LLVMBuildOr(c->b, x, y, "max") : LLVMBuildAnd(c->b, x, y, "min");
    if (!is_float(dt))
        return LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, int_pred(dt, is_max ? LLVMIntSGT : LLVMIntSLT), x, y, "cmp"),
                               x, y, is_max ? "max" : "min");
    LLVMValueRef better = LLVMBuildFCmp(c->b, is_max ? LLVMRealOGT : LLVMRealOLT, x, y, "cmp");
    LLVMValueRef x_nan = LLVMBuildFCmp(c->b, LLVMRealUNO, x, x, "xnan");
    return LLVMBuildSelect(c->b, LLVMBuildOr(c->b, better, x_nan, "pick"), x, y, is_max ? "max" : "min");
}

/* One elementwise op on the values args (ops of kinds UNARY, BINARY,
 * COMPARE, CAST, SELECT); in_dt is the dtype of args[0], out_dt the
 * result's.  Every op has its case here, so a new op in ops.def is a
 * compile error (-Wswitch-enum) until it is given one; an elementwise
 * unary op has its case from its record, and its code in codegen_unary.c. */
LLVMValueRef emit_op(cg *c, cj_op op, const LLVMValueRef *args, cj_dtype in_dt, cj_dtype out_dt) {
    cj_dtype dt = in_dt;
    LLVMTypeRef t = reg_type(c, dt);
    bool f = is_float(dt);
    LLVMValueRef x = args[0], y = cj_op_arity(op) >= 2 ? args[1] : NULL;
    switch (op) {
    /* one input: the op's record (ops_unary.def, codegen_unary.c) */
#define UNARY(NAME, ...) case CJ_OP_##NAME:
#include "ops_unary.def"
#undef UNARY
        return emit_unary(c, op, x, dt);
    case CJ_OP_NAME:
    case CJ_OP_STOP_GRADIENT: return x;
    case CJ_OP_CAST: return emit_cast(c, x, in_dt, out_dt);
    case CJ_OP_BITCAST: return LLVMBuildBitCast(c->b, x, reg_type(c, out_dt), "bitcast");

    /* two inputs */
    case CJ_OP_ADD: return f ? LLVMBuildFAdd(c->b, x, y, "add") : dt == CJ_BOOL ? LLVMBuildOr(c->b, x, y, "or") : LLVMBuildAdd(c->b, x, y, "add");
    case CJ_OP_SUB: return f ? LLVMBuildFSub(c->b, x, y, "sub") : LLVMBuildSub(c->b, x, y, "sub");
    case CJ_OP_MUL: return f ? LLVMBuildFMul(c->b, x, y, "mul") : dt == CJ_BOOL ? LLVMBuildAnd(c->b, x, y, "and") : LLVMBuildMul(c->b, x, y, "mul");
    case CJ_OP_DIV:
        if (f) return LLVMBuildFDiv(c->b, x, y, "div");
        return cj_dtype_unsigned(dt) ? emit_uint_floordiv(c, x, y, t) : emit_int_floordiv(c, x, y, t);
    case CJ_OP_FLOORDIV:
        if (f) return emit_float_floordiv(c, x, y, t);
        return cj_dtype_unsigned(dt) ? emit_uint_floordiv(c, x, y, t) : emit_int_floordiv(c, x, y, t);
    case CJ_OP_POW: return f ? emit_float_pow(c, x, y) : emit_int_pow(c, x, y, dt);
    case CJ_OP_MAXIMUM: return emit_minmax(c, true, x, y, dt);
    case CJ_OP_MINIMUM: return emit_minmax(c, false, x, y, dt);
    case CJ_OP_LOGICAL_AND: return LLVMBuildAnd(c->b, emit_cast(c, x, dt, CJ_BOOL), emit_cast(c, y, dt, CJ_BOOL), "and");
    case CJ_OP_LOGICAL_OR: return LLVMBuildOr(c->b, emit_cast(c, x, dt, CJ_BOOL), emit_cast(c, y, dt, CJ_BOOL), "or");
    case CJ_OP_BITWISE_AND: return LLVMBuildAnd(c->b, x, y, "band");
    case CJ_OP_BITWISE_OR: return LLVMBuildOr(c->b, x, y, "bor");
    case CJ_OP_BITWISE_XOR: return LLVMBuildXor(c->b, x, y, "bxor");
    case CJ_OP_SHIFT_LEFT: case CJ_OP_SHIFT_RIGHT_LOGICAL: case CJ_OP_SHIFT_RIGHT_ARITHMETIC:
        return emit_shift(c, op, x, y, t);
    case CJ_OP_ROTATE_LEFT: {
        if (dt == CJ_BOOL) return x; /* a one-bit value rotates onto itself */
        LLVMValueRef args[3] = {x, x, y}; /* a funnel shift of x with itself; the count is taken modulo the width */
        return call_intrinsic(c, "llvm.fshl", t, args, 3, "rotl");
    }
    case CJ_OP_EQ: return f ? LLVMBuildFCmp(c->b, LLVMRealOEQ, x, y, "eq") : LLVMBuildICmp(c->b, LLVMIntEQ, x, y, "eq");
    case CJ_OP_NE: return f ? LLVMBuildFCmp(c->b, LLVMRealUNE, x, y, "ne") : LLVMBuildICmp(c->b, LLVMIntNE, x, y, "ne");
    case CJ_OP_LT: return f ? LLVMBuildFCmp(c->b, LLVMRealOLT, x, y, "lt") : LLVMBuildICmp(c->b, int_pred(dt, LLVMIntSLT), x, y, "lt");
    case CJ_OP_LE: return f ? LLVMBuildFCmp(c->b, LLVMRealOLE, x, y, "le") : LLVMBuildICmp(c->b, int_pred(dt, LLVMIntSLE), x, y, "le");
    case CJ_OP_GT: return f ? LLVMBuildFCmp(c->b, LLVMRealOGT, x, y, "gt") : LLVMBuildICmp(c->b, int_pred(dt, LLVMIntSGT), x, y, "gt");
    case CJ_OP_GE: return f ? LLVMBuildFCmp(c->b, LLVMRealOGE, x, y, "ge") : LLVMBuildICmp(c->b, int_pred(dt, LLVMIntSGE), x, y, "ge");
    case CJ_OP_SELECT: return LLVMBuildSelect(c->b, x, y, args[2], "sel");
    case CJ_OP_FMA: {
        LLVMValueRef xyz[3] = {x, y, args[2]};
        return call_intrinsic(c, "llvm.fma", t, xyz, 3, "fma");
    }

    /* never inside a kernel's expression (loads, constants, indices and
     * the kernel's own loop structure stand for them) */
    case CJ_OP_PARAM: case CJ_OP_ARRAY: case CJ_OP_CONSTANT: case CJ_OP_IOTA:
    case CJ_OP_BROADCAST: case CJ_OP_RESHAPE: case CJ_OP_TRANSPOSE: case CJ_OP_SLICE: case CJ_OP_CONCATENATE:
    case CJ_OP_REDUCE_SUM: case CJ_OP_REDUCE_PROD: case CJ_OP_REDUCE_MAX: case CJ_OP_REDUCE_MIN:
    case CJ_OP_MATMUL: case CJ_NUM_OPS:
    case CJ_OP_GATHER: case CJ_OP_ARGSORT: case CJ_OP_CHOLESKY: case CJ_OP_LU: case CJ_OP_LU_PIVOTS: case CJ_OP_TRIANGULAR_SOLVE: case CJ_OP_QR: case CJ_OP_EIGH: case CJ_OP_SVD: case CJ_OP_SCATTER_ADD: case CJ_OP_SCATTER_MUL: case CJ_OP_SCATTER_MIN: case CJ_OP_SCATTER_MAX:
    case CJ_OP_SCAN: case CJ_OP_WHILE: case CJ_OP_COND: case CJ_OP_CUSTOM: case CJ_OP_RESULT:
        break;
    }
    cj_error_set(c->err, CJ_ERR_INTERNAL, "codegen: %s in a kernel", cj_op_name(op));
    return NULL;
}

/* Computes, where the builder is (before the loop nest), the expressions
 * that are the same at every point: loads through an index no loop moves
 * (a broadcast scalar), and ops of those and constants, such as Adam's bias
 * correction recomputed in each update.  LLVM's LICM would hoist them only
 * where it proves the loads unaliased by the loop's stores.  A kernel with
 * an empty dim runs no point, and reads nothing: none then. */
void emit_invariants(cg *c) {
    const cj_kernel *k = c->k;
    free(c->hoisted);
    c->hoisted = NULL;
    for (int d = 0; d < k->rank; d++)
        if (k->dims[d] <= 0) return;
    LLVMValueRef *val = calloc((size_t)k->nexprs + 1, sizeof(LLVMValueRef));
    if (!val) return; /* every value is computed in the loop, as without this */
    bool any_op = false;
    for (int i = 0; i < k->nexprs && c->err->status == CJ_OK; i++) {
        const cj_expr *e = &k->exprs[i];
        if (e->kind == CJ_EX_CONST) {
            val[i] = const_of(c, e->dtype, e->fvalue, e->ivalue);
        } else if (e->kind == CJ_EX_LOAD) {
            bool fixed = true;
            for (int d = 0; d < k->rank; d++) fixed &= e->index.stride[d] == 0;
            if (fixed) val[i] = load_value(c, e->buffer, &e->index);
        } else if (e->kind == CJ_EX_OP) {
            LLVMValueRef args[3] = {NULL, NULL, NULL};
            bool fixed = true;
            for (int a = 0; a < e->nargs && a < 3; a++) fixed &= (args[a] = val[e->args[a]]) != NULL;
            if (fixed) val[i] = emit_op(c, e->op, args, k->exprs[e->args[0]].dtype, e->dtype);
            any_op |= fixed;
        }
    }
    if (!any_op || c->err->status != CJ_OK) {
        free(val);
        return;
    }
    c->hoisted = val;
}

/* The value of every expression at the current loop indices, in an array
 * the caller frees; NULL on failure. */
static LLVMValueRef *emit_values(cg *c) {
    const cj_kernel *k = c->k;
    LLVMValueRef *val = calloc((size_t)k->nexprs + 1, sizeof(LLVMValueRef));
    if (!val) return cj_error_set(c->err, CJ_ERR_MEMORY, "codegen: out of memory"), NULL;
    for (int i = 0; i < k->nexprs; i++) {
        const cj_expr *e = &k->exprs[i];
        LLVMValueRef v = NULL;
        if (c->hoisted && c->hoisted[i]) {
            val[i] = c->hoisted[i];
            continue;
        }
        switch (e->kind) {
        case CJ_EX_LOAD: v = load_value(c, e->buffer, &e->index); break;
        case CJ_EX_CONST: v = const_of(c, e->dtype, e->fvalue, e->ivalue); break;
        case CJ_EX_INDEX: v = emit_cast(c, affine_value(c, &e->index), CJ_INT64, e->dtype); break;
        case CJ_EX_GATHER: {
            LLVMValueRef at = index_offset(c, val[e->args[0]], k->exprs[e->args[0]].dtype, e->dyn_dim, e->dyn_stride, NULL);
            v = load_at(c, e->buffer, LLVMBuildAdd(c->b, affine_value(c, &e->index), at, "goff"));
            break;
        }
        case CJ_EX_OP: {
            LLVMValueRef args[3] = {NULL, NULL, NULL};
            for (int a = 0; a < e->nargs && a < 3; a++) args[a] = val[e->args[a]];
            v = emit_op(c, e->op, args, k->exprs[e->args[0]].dtype, e->dtype);
            break;
        }
        }
        if (!v) break;
        val[i] = v;
    }
    if (c->err->status == CJ_OK && k->nexprs > 0 && val[k->nexprs - 1]) return val;
    free(val);
    return NULL;
}

/* The value of the kernel's last expression at the current indices. */
LLVMValueRef emit_exprs(cg *c) {
    LLVMValueRef *val = emit_values(c);
    if (!val) return NULL;
    LLVMValueRef v = val[c->k->nexprs - 1];
    free(val);
    return v;
}

/* Computes the kernel at the current indices and stores every value it
 * keeps (one, or several for a multi-output kernel). */
bool emit_stores(cg *c) {
    const cj_kernel *k = c->k;
    LLVMValueRef *val = emit_values(c);
    if (!val) return false;
    for (int i = 0; i < k->nalso; i++) store_value(c, k->also[i].buffer, &k->also[i].index, val[k->also[i].expr]);
    if (k->scatter.on) { /* combined in at the index (kernel.h, cj_scatter) */
        const cj_scatter *s = &k->scatter;
        cj_dtype dt = c->plan->buffers[k->out_buffer].dtype;
        LLVMValueRef ok = NULL;
        LLVMValueRef at = index_offset(c, val[s->index_expr], k->exprs[s->index_expr].dtype, s->dim, s->stride,
                                       s->drop ? &ok : NULL);
        LLVMValueRef off = LLVMBuildAdd(c->b, affine_value(c, &k->out_index), at, "soff");
        if (s->dim > 0) { /* an empty dim takes no update (the builder allows it only when dropping) */
            LLVMValueRef before = load_at(c, k->out_buffer, off);
            LLVMValueRef r = reduce_combine(c, k->reduce_op, before, val[k->nexprs - 1], dt);
            if (!r) {
                free(val);
                return false;
            }
            if (ok) r = LLVMBuildSelect(c->b, ok, r, before, "kept");
            store_at(c, k->out_buffer, off, r);
        }
        free(val);
        return true;
    }
    store_value(c, k->out_buffer, &k->out_index, val[k->nexprs - 1]);
    free(val);
    return true;
}

/* ---- a reduction's combine and start, one op as IR like emit_op ---------- */

/* acc (op) v for a reduction op; a sum or product may be reassociated. */
LLVMValueRef reduce_combine(cg *c, cj_op op, LLVMValueRef acc, LLVMValueRef v, cj_dtype dt) {
    LLVMValueRef r = NULL;
    switch (op) {
    case CJ_OP_REDUCE_SUM: r = emit_op(c, CJ_OP_ADD, (LLVMValueRef[]){acc, v}, dt, dt); break;
    case CJ_OP_REDUCE_PROD: r = emit_op(c, CJ_OP_MUL, (LLVMValueRef[]){acc, v}, dt, dt); break;
    case CJ_OP_REDUCE_MAX:
    case CJ_OP_REDUCE_MIN:
        if (is_float(dt) && c->target == CJ_TARGET_CPU) {
            /* llvm.maximum/minimum propagate nan, as NumPy's max does, and
             * the vectorizer knows them as reductions; the select form of
             * emit_minmax would keep the loop scalar (4x slower) */
            LLVMValueRef args[2] = {acc, v};
            return call_intrinsic(c, op == CJ_OP_REDUCE_MAX ? "llvm.maximum" : "llvm.minimum", reg_type(c, dt), args,
                                  2, op == CJ_OP_REDUCE_MAX ? "max" : "min");
        }
        return emit_minmax(c, op == CJ_OP_REDUCE_MAX, acc, v, dt);
    /* not reductions */
#define UNARY(NAME, ...) case CJ_OP_##NAME:
#include "ops_unary.def"
#undef UNARY
    case CJ_OP_PARAM: case CJ_OP_ARRAY: case CJ_OP_CONSTANT: case CJ_OP_IOTA: case CJ_OP_CAST: case CJ_OP_NAME:
    case CJ_OP_BITCAST: case CJ_OP_BITWISE_AND: case CJ_OP_BITWISE_OR: case CJ_OP_BITWISE_XOR:
    case CJ_OP_SHIFT_LEFT: case CJ_OP_SHIFT_RIGHT_LOGICAL: case CJ_OP_SHIFT_RIGHT_ARITHMETIC: case CJ_OP_ROTATE_LEFT:
    case CJ_OP_STOP_GRADIENT: case CJ_OP_ADD: case CJ_OP_SUB: case CJ_OP_MUL: case CJ_OP_DIV: case CJ_OP_FLOORDIV:
    case CJ_OP_POW: case CJ_OP_MAXIMUM: case CJ_OP_MINIMUM: case CJ_OP_LOGICAL_AND: case CJ_OP_LOGICAL_OR:
    case CJ_OP_EQ: case CJ_OP_NE: case CJ_OP_LT: case CJ_OP_LE: case CJ_OP_GT: case CJ_OP_GE: case CJ_OP_SELECT: case CJ_OP_FMA:
    case CJ_OP_BROADCAST: case CJ_OP_RESHAPE: case CJ_OP_TRANSPOSE: case CJ_OP_SLICE: case CJ_OP_CONCATENATE:
    case CJ_OP_MATMUL: case CJ_NUM_OPS:
    case CJ_OP_GATHER: case CJ_OP_ARGSORT: case CJ_OP_CHOLESKY: case CJ_OP_LU: case CJ_OP_LU_PIVOTS: case CJ_OP_TRIANGULAR_SOLVE: case CJ_OP_QR: case CJ_OP_EIGH: case CJ_OP_SVD: case CJ_OP_SCATTER_ADD: case CJ_OP_SCATTER_MUL: case CJ_OP_SCATTER_MIN: case CJ_OP_SCATTER_MAX:
    case CJ_OP_SCAN: case CJ_OP_WHILE: case CJ_OP_COND: case CJ_OP_CUSTOM: case CJ_OP_RESULT:
        return cj_error_set(c->err, CJ_ERR_INTERNAL, "codegen: %s is not a reduction", cj_op_name(op)), NULL;
    }
    /* sums and products may be reassociated, which lets them vectorize */
    if (r && is_float(dt) && LLVMIsAInstruction(r)) LLVMSetFastMathFlags(r, LLVMFastMathAllowReassoc);
    return r;
}

/* The value a reduction's output starts from (ops.def's identity column). */
LLVMValueRef reduce_identity(cg *c, cj_op op, cj_dtype dt) {
    double f;
    int64_t i;
    cj_reduce_identity(op, dt, &f, &i);
    return const_of(c, dt, f, i);
}

/* See codegen.h. */
int cj_codegen_kernel_buffers(const cj_kernel *k, int *bufs) {
    int n = 0;
    bufs[n++] = k->out_buffer;
    for (int i = 0; i < k->nalso; i++) bufs[n++] = k->also[i].buffer;
    for (int e = 0; e < k->nexprs; e++) {
        if (!cj_expr_reads(&k->exprs[e])) continue;
        bool seen = false;
        for (int j = 0; j < n; j++) seen |= bufs[j] == k->exprs[e].buffer;
        if (!seen) bufs[n++] = k->exprs[e].buffer;
    }
    return n;
}
