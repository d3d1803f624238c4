/* codegen.c - fused kernels to LLVM IR, for the CPU or for NVPTX.
 *
 * On the CPU each kernel becomes `void k(i64 start, i64 end, ptr buffers)`:
 * a loop nest over the kernel's dims (the outermost from start to end, so
 * that a thread pool can split it), whose innermost body evaluates the
 * expression DAG and stores or accumulates the result.  All shapes are
 * compile-time constants, so every offset is an affine function of the loop
 * counters with constant strides, which LLVM's vectorizer understands.
 *
 * On NVPTX the same body (emit_exprs and everything below it is shared) is
 * wrapped differently, see emit_kernel_nvptx: the kernel takes the buffers
 * it touches as separate pointer parameters and gets its index from
 * blockIdx.x * blockDim.x + threadIdx.x, in a grid-stride loop.
 *
 * Values are kept in registers as i1 (bool), i32, i64, float or double;
 * bools are i8 in memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/DebugInfo.h> /* temporary metadata nodes: self-referential loop ids and scopes */

#include "blas.h"
#include "cmath.h"
#include "codegen.h"
#include "gemm_small.h"
#include "mathlib.h"

/* Most storages one kernel's alias metadata distinguishes (more: none). */
#define CJ_MAX_SCOPES 32

typedef struct {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    const cj_plan *plan;
    const cj_kernel *k;
    cj_target target;
    cj_error *err;
    LLVMValueRef fn;
    LLVMValueRef *buf_ptr;              /* per plan buffer, loaded in the entry block */
    LLVMValueRef *scope, *noalias;      /* per plan buffer: alias metadata for its accesses (CPU) */
    LLVMValueRef idx[CJ_MAX_RANK];      /* loop counters */
    int unroll_dim, unroll;             /* reduced loop evaluated `unroll` points at a time */
    bool call_math;                     /* elementary functions as calls into mathlib.c, not inline */
    LLVMTypeRef i1, i8, i32, i64, f32, f64, ptr, void_t;
} cg;

static LLVMTypeRef reg_type(cg *c, cj_dtype dt) {
    switch (dt) {
    case CJ_BOOL: return c->i1;
    case CJ_INT32: return c->i32;
    case CJ_UINT32: return c->i32;
    case CJ_INT64: return c->i64;
    case CJ_FLOAT32: return c->f32;
    case CJ_FLOAT64: return c->f64;
    case CJ_NUM_DTYPES: break;
    }
    return c->i64;
}

static LLVMTypeRef mem_type(cg *c, cj_dtype dt) { return dt == CJ_BOOL ? c->i8 : reg_type(c, dt); }

static bool is_float(cj_dtype dt) { return dt == CJ_FLOAT32 || dt == CJ_FLOAT64; }

/* The integer compare predicate of a signed one, for dtype dt (bool and
 * uint32 compare without a sign). */
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

static LLVMValueRef const_of(cg *c, cj_dtype dt, double f, int64_t i) {
    if (is_float(dt)) return LLVMConstReal(reg_type(c, dt), f);
    if (dt == CJ_BOOL) return LLVMConstInt(c->i1, i != 0, 0);
    return LLVMConstInt(reg_type(c, dt), (unsigned long long)i, 1);
}

static LLVMValueRef call_intrinsic(cg *c, const char *name, LLVMTypeRef type, LLVMValueRef *args,
                                   unsigned nargs, const char *label) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, &type, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(c->ctx, id, &type, 1);
    return LLVMBuildCall2(c->b, fty, fn, args, nargs, label);
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

static LLVMValueRef element_ptr(cg *c, int buffer, const cj_affine *a) {
    cj_dtype dt = c->plan->buffers[buffer].dtype;
    LLVMValueRef off = affine_value(c, a);
    return LLVMBuildInBoundsGEP2(c->b, mem_type(c, dt), c->buf_ptr[buffer], &off, 1, "addr");
}

/* Tags a load or store of `buffer` with its alias scope (see set_alias_scopes). */
static void tag_access(cg *c, int buffer, LLVMValueRef inst) {
    if (!c->scope || !c->scope[buffer]) return;
    LLVMSetMetadata(inst, LLVMGetMDKindIDInContext(c->ctx, "alias.scope", 11), c->scope[buffer]);
    LLVMSetMetadata(inst, LLVMGetMDKindIDInContext(c->ctx, "noalias", 7), c->noalias[buffer]);
}

static LLVMValueRef load_value(cg *c, int buffer, const cj_affine *a) {
    cj_dtype dt = c->plan->buffers[buffer].dtype;
    LLVMValueRef v = LLVMBuildLoad2(c->b, mem_type(c, dt), element_ptr(c, buffer, a), "ld");
    tag_access(c, buffer, v);
    if (dt == CJ_BOOL) v = LLVMBuildICmp(c->b, LLVMIntNE, v, LLVMConstInt(c->i8, 0, 0), "ldb");
    return v;
}

static void store_value(cg *c, int buffer, const cj_affine *a, LLVMValueRef v) {
    cj_dtype dt = c->plan->buffers[buffer].dtype;
    if (dt == CJ_BOOL) v = LLVMBuildZExt(c->b, v, c->i8, "stb");
    tag_access(c, buffer, LLVMBuildStore(c->b, v, element_ptr(c, buffer, a)));
}

/* A distinct node !{self, ops...}: loop ids, alias scopes and
 * domains must be.  The temporary first operand is replaced by the node
 * itself, which ties the knot. */
static LLVMMetadataRef self_node(cg *c, LLVMMetadataRef *ops, int nops) {
    LLVMMetadataRef all[4];
    all[0] = LLVMTemporaryMDNode(c->ctx, NULL, 0);
    for (int i = 0; i < nops; i++) all[i + 1] = ops[i];
    LLVMMetadataRef node = LLVMMDNodeInContext2(c->ctx, all, (size_t)nops + 1);
    LLVMMetadataReplaceAllUsesWith(all[0], node);
    return node;
}

/* The buffer whose bytes b lives in (itself unless in place or donated). */
static int storage_of(const cj_plan *p, int b) {
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
static void set_alias_scopes(cg *c, int ki, const cj_kernel *k) {
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

/* Converts v from dtype `from` to dtype `to` (NumPy astype rules for
 * in-range values; out-of-range float->int is frozen, not undefined). */
static LLVMValueRef emit_cast(cg *c, LLVMValueRef v, cj_dtype from, cj_dtype to) {
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
    /* integer target; a float reaches uint32 through int64, so that -1.0
     * wraps to 2**32 - 1 as NumPy's astype does on x86 */
    if (is_float(from) && to == CJ_UINT32)
        return LLVMBuildTrunc(c->b, emit_cast(c, v, from, CJ_INT64), t, "ftou");
    if (is_float(from)) return LLVMBuildFreeze(c->b, LLVMBuildFPToSI(c->b, v, t, "ftoi"), "ftoi.frozen");
    if (cj_dtype_size(from) == cj_dtype_size(to)) return v; /* int32 <-> uint32: the same bits */
    if (cj_dtype_size(from) < cj_dtype_size(to))
        return cj_dtype_unsigned(from) ? LLVMBuildZExt(c->b, v, t, "zext") : LLVMBuildSExt(c->b, v, t, "sext");
    return LLVMBuildTrunc(c->b, v, t, "trunc");
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
static LLVMValueRef emit_minmax(cg *c, bool is_max, LLVMValueRef x, LLVMValueRef y, cj_dtype dt) {
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
 * compile error (-Wswitch-enum) until it is given one. */
static LLVMValueRef emit_op(cg *c, cj_op op, const LLVMValueRef *args, cj_dtype in_dt, cj_dtype out_dt) {
    cj_dtype dt = in_dt;
    LLVMTypeRef t = reg_type(c, dt);
    bool f = is_float(dt);
    LLVMValueRef x = args[0], y = cj_op_arity(op) >= 2 ? args[1] : NULL;
    switch (op) {
    /* one input */
    case CJ_OP_NEG:
        return f ? LLVMBuildFNeg(c->b, x, "neg") : LLVMBuildSub(c->b, LLVMConstInt(t, 0, 0), x, "neg");
    case CJ_OP_ABS:
        if (f) return call_intrinsic(c, "llvm.fabs", t, &x, 1, "abs");
        if (cj_dtype_unsigned(dt)) return x;
        return LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, x, LLVMConstInt(t, 0, 0), "isneg"),
                               LLVMBuildSub(c->b, LLVMConstInt(t, 0, 0), x, "negx"), x, "abs");
    case CJ_OP_SIGN:
        if (f) {
            LLVMValueRef pos = LLVMBuildFCmp(c->b, LLVMRealOGT, x, LLVMConstReal(t, 0), "pos");
            LLVMValueRef neg = LLVMBuildFCmp(c->b, LLVMRealOLT, x, LLVMConstReal(t, 0), "neg");
            /* zeros of either sign give +0.0 (NumPy, the array API); nan stays nan */
            LLVMValueRef zero = LLVMBuildFCmp(c->b, LLVMRealOEQ, x, LLVMConstReal(t, 0), "zero");
            LLVMValueRef r = LLVMBuildSelect(c->b, zero, LLVMConstReal(t, 0), x, "z");
            r = LLVMBuildSelect(c->b, neg, LLVMConstReal(t, -1), r, "s");
            return LLVMBuildSelect(c->b, pos, LLVMConstReal(t, 1), r, "sign");
        }
        if (dt == CJ_BOOL) return x;
        if (dt == CJ_UINT32) return LLVMBuildZExt(c->b, LLVMBuildICmp(c->b, LLVMIntNE, x, LLVMConstInt(t, 0, 0), "nz"), t, "sign");
        {
            LLVMValueRef pos = LLVMBuildZExt(c->b, LLVMBuildICmp(c->b, LLVMIntSGT, x, LLVMConstInt(t, 0, 0), "p"), t, "pz");
            LLVMValueRef neg = LLVMBuildZExt(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, x, LLVMConstInt(t, 0, 0), "n"), t, "nz");
            return LLVMBuildSub(c->b, pos, neg, "sign");
        }
    case CJ_OP_EXP: case CJ_OP_EXPM1: case CJ_OP_LOG: case CJ_OP_LOG1P: case CJ_OP_TANH:
    case CJ_OP_SIN: case CJ_OP_COS:
        return c->call_math ? cj_mathlib_call(c->b, op, &x, 1) : cj_mathlib_inline(c->b, op, &x);
    case CJ_OP_SQRT: return call_intrinsic(c, "llvm.sqrt", t, &x, 1, "sqrt");
    case CJ_OP_RECIPROCAL:
        if (f) return LLVMBuildFDiv(c->b, LLVMConstReal(t, 1), x, "recip");
        if (cj_dtype_unsigned(dt)) return emit_uint_floordiv(c, LLVMConstInt(t, 1, 0), x, t);
        return emit_int_floordiv(c, LLVMConstInt(t, 1, 0), x, t);
    case CJ_OP_FLOOR: return f ? call_intrinsic(c, "llvm.floor", t, &x, 1, "floor") : x;
    case CJ_OP_CEIL: return f ? call_intrinsic(c, "llvm.ceil", t, &x, 1, "ceil") : x;
    case CJ_OP_LOGICAL_NOT:
        return LLVMBuildXor(c->b, emit_cast(c, x, dt, CJ_BOOL), LLVMConstInt(c->i1, 1, 0), "not");
    case CJ_OP_BITWISE_NOT: return LLVMBuildXor(c->b, x, LLVMConstAllOnes(t), "bnot");
    case CJ_OP_ISNAN:
        return f ? LLVMBuildFCmp(c->b, LLVMRealUNO, x, x, "isnan") : LLVMConstInt(c->i1, 0, 0);
    case CJ_OP_ISFINITE:
        if (!f) return LLVMConstInt(c->i1, 1, 0);
        return LLVMBuildFCmp(c->b, LLVMRealOLT, call_intrinsic(c, "llvm.fabs", t, &x, 1, "ax"),
                             LLVMConstReal(t, __builtin_inf()), "isfinite");
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

    /* never inside a kernel's expression (loads, constants, indices and
     * the kernel's own loop structure stand for them) */
    case CJ_OP_PARAM: case CJ_OP_ARRAY: case CJ_OP_CONSTANT: case CJ_OP_IOTA:
    case CJ_OP_BROADCAST: case CJ_OP_RESHAPE: case CJ_OP_TRANSPOSE: case CJ_OP_SLICE: case CJ_OP_CONCATENATE:
    case CJ_OP_REDUCE_SUM: case CJ_OP_REDUCE_PROD: case CJ_OP_REDUCE_MAX: case CJ_OP_REDUCE_MIN:
    case CJ_OP_MATMUL: case CJ_NUM_OPS:
    case CJ_OP_SCAN: case CJ_OP_WHILE: case CJ_OP_COND: case CJ_OP_RESULT:
        break;
    }
    cj_error_set(c->err, CJ_ERR_INTERNAL, "codegen: %s in a kernel", cj_op_name(op));
    return NULL;
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
        switch (e->kind) {
        case CJ_EX_LOAD: v = load_value(c, e->buffer, &e->index); break;
        case CJ_EX_CONST: v = const_of(c, e->dtype, e->fvalue, e->ivalue); break;
        case CJ_EX_INDEX: v = emit_cast(c, affine_value(c, &e->index), CJ_INT64, e->dtype); break;
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
static LLVMValueRef emit_exprs(cg *c) {
    LLVMValueRef *val = emit_values(c);
    if (!val) return NULL;
    LLVMValueRef v = val[c->k->nexprs - 1];
    free(val);
    return v;
}

/* Computes the kernel at the current indices and stores every value it
 * keeps (one, or several for a multi-output kernel). */
static bool emit_stores(cg *c) {
    const cj_kernel *k = c->k;
    LLVMValueRef *val = emit_values(c);
    if (!val) return false;
    for (int i = 0; i < k->nalso; i++) store_value(c, k->also[i].buffer, &k->also[i].index, val[k->also[i].expr]);
    store_value(c, k->out_buffer, &k->out_index, val[k->nexprs - 1]);
    free(val);
    return true;
}

static LLVMValueRef reduce_combine(cg *c, cj_op op, LLVMValueRef acc, LLVMValueRef v, cj_dtype dt) {
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
    case CJ_OP_PARAM: case CJ_OP_ARRAY: case CJ_OP_CONSTANT: case CJ_OP_IOTA: case CJ_OP_NEG: case CJ_OP_ABS:
    case CJ_OP_SIGN: case CJ_OP_EXP: case CJ_OP_EXPM1: case CJ_OP_LOG: case CJ_OP_LOG1P: case CJ_OP_SQRT:
    case CJ_OP_RECIPROCAL: case CJ_OP_TANH: case CJ_OP_SIN: case CJ_OP_COS: case CJ_OP_FLOOR: case CJ_OP_CEIL:
    case CJ_OP_LOGICAL_NOT: case CJ_OP_ISNAN: case CJ_OP_ISFINITE: case CJ_OP_CAST: case CJ_OP_NAME:
    case CJ_OP_BITWISE_NOT: case CJ_OP_BITCAST: case CJ_OP_BITWISE_AND: case CJ_OP_BITWISE_OR: case CJ_OP_BITWISE_XOR:
    case CJ_OP_SHIFT_LEFT: case CJ_OP_SHIFT_RIGHT_LOGICAL: case CJ_OP_SHIFT_RIGHT_ARITHMETIC: case CJ_OP_ROTATE_LEFT:
    case CJ_OP_STOP_GRADIENT: case CJ_OP_ADD: case CJ_OP_SUB: case CJ_OP_MUL: case CJ_OP_DIV: case CJ_OP_FLOORDIV:
    case CJ_OP_POW: case CJ_OP_MAXIMUM: case CJ_OP_MINIMUM: case CJ_OP_LOGICAL_AND: case CJ_OP_LOGICAL_OR:
    case CJ_OP_EQ: case CJ_OP_NE: case CJ_OP_LT: case CJ_OP_LE: case CJ_OP_GT: case CJ_OP_GE: case CJ_OP_SELECT:
    case CJ_OP_BROADCAST: case CJ_OP_RESHAPE: case CJ_OP_TRANSPOSE: case CJ_OP_SLICE: case CJ_OP_CONCATENATE:
    case CJ_OP_MATMUL: case CJ_NUM_OPS:
    case CJ_OP_SCAN: case CJ_OP_WHILE: case CJ_OP_COND: case CJ_OP_RESULT:
        return cj_error_set(c->err, CJ_ERR_INTERNAL, "codegen: %s is not a reduction", cj_op_name(op)), NULL;
    }
    /* sums and products may be reassociated, which lets them vectorize */
    if (r && is_float(dt) && LLVMIsAInstruction(r)) LLVMSetFastMathFlags(r, LLVMFastMathAllowReassoc);
    return r;
}

/* The value a reduction's output starts from (ops.def's identity column). */
static LLVMValueRef reduce_identity(cg *c, cj_op op, cj_dtype dt) {
    double f;
    int64_t i;
    cj_reduce_identity(op, dt, &f, &i);
    return const_of(c, dt, f, i);
}

static LLVMValueRef new_function(cg *c, const char *name, LLVMValueRef *start, LLVMValueRef *end) {
    LLVMTypeRef params[3] = {c->i64, c->i64, c->ptr};
    LLVMValueRef fn = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->void_t, params, 3, 0));
    LLVMSetValueName2(LLVMGetParam(fn, 0), "start", 5);
    LLVMSetValueName2(LLVMGetParam(fn, 1), "end", 3);
    LLVMSetValueName2(LLVMGetParam(fn, 2), "buffers", 7);
    /* kernels never unwind; say so, it helps the optimizer */
    unsigned nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(c->ctx, nounwind, 0));
    *start = LLVMGetParam(fn, 0);
    *end = LLVMGetParam(fn, 1);
    LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->ctx, fn, "entry"));
    c->fn = fn;
    return fn;
}

/* The storage buffer b lives in (as storage_of) and b's byte offset there,
 * as the runtime binds it (runtime.c: a host's address plus the offset). */
static int storage_and_offset(const cj_plan *p, int b, int64_t *offset) {
    *offset = 0;
    while (p->buffers[b].alias_of >= 0) {
        *offset += p->buffers[b].offset;
        b = p->buffers[b].alias_of;
    }
    return b;
}

/* Loads buffer's data pointer in the entry block.  Buffers at one address
 * (an in-place update reads x and writes y over it) get one pointer value:
 * LLVM then sees that each iteration loads and stores the same element,
 * and vectorizes the loop without a run-time overlap check, which two
 * pointers of unknown distance would need (and which always failed). */
static void load_buffer_pointer(cg *c, int buffer) {
    if (c->buf_ptr[buffer]) return;
    const cj_kernel *k = c->k;
    int64_t offset, other_offset;
    int root = storage_and_offset(c->plan, buffer, &offset);
    int others[1 + 64], nothers = 0;
    others[nothers++] = k->out_buffer;
    for (int i = 0; i < k->nalso && nothers < 32; i++) others[nothers++] = k->also[i].buffer;
    for (int e = 0; e < k->nexprs && nothers < (int)(sizeof others / sizeof *others); e++)
        if (k->exprs[e].kind == CJ_EX_LOAD) others[nothers++] = k->exprs[e].buffer;
    for (int i = 0; i < nothers; i++) {
        int o = others[i];
        if (o == buffer || !c->buf_ptr[o]) continue;
        if (storage_and_offset(c->plan, o, &other_offset) == root && other_offset == offset) {
            c->buf_ptr[buffer] = c->buf_ptr[o];
            return;
        }
    }
    LLVMValueRef bufs = LLVMGetParam(c->fn, 2);
    LLVMValueRef i = LLVMConstInt(c->i64, (unsigned long long)buffer, 0);
    LLVMValueRef slot = LLVMBuildInBoundsGEP2(c->b, c->ptr, bufs, &i, 1, "slot");
    char name[32];
    snprintf(name, sizeof name, "buf%d", buffer);
    c->buf_ptr[buffer] = LLVMBuildLoad2(c->b, c->ptr, slot, name);
}

/* for (i = lo; i < hi; i++) around whatever `body` emits; rotated form. */
typedef struct {
    LLVMBasicBlockRef body, exit;
    LLVMValueRef phi, hi;
    LLVMBasicBlockRef pre;
    LLVMValueRef latch;  /* the back-edge branch, which carries loop metadata */
} loop_state;

static void loop_begin(cg *c, loop_state *L, LLVMValueRef lo, LLVMValueRef hi, const char *name) {
    L->pre = LLVMGetInsertBlock(c->b);
    L->body = LLVMAppendBasicBlockInContext(c->ctx, c->fn, name);
    L->exit = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "exit");
    L->hi = hi;
    LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, lo, hi, "enter"), L->body, L->exit);
    LLVMPositionBuilderAtEnd(c->b, L->body);
    L->phi = LLVMBuildPhi(c->b, c->i64, name);
    LLVMAddIncoming(L->phi, &lo, &L->pre, 1);
}

static void loop_end_step(cg *c, loop_state *L, int64_t step) {
    LLVMValueRef next = LLVMBuildAdd(c->b, L->phi, LLVMConstInt(c->i64, (unsigned long long)step, 0), "next");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(c->b);
    LLVMAddIncoming(L->phi, &next, &latch, 1);
    L->latch = LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, next, L->hi, "more"), L->body, L->exit);
    LLVMPositionBuilderAtEnd(c->b, L->exit);
}

/* The vectorizer's cost model runs a loop whose body is a long polynomial
 * (exp, tanh, ...) one vector at a time, and each vector then waits on the
 * latency of its own chain of multiply-adds.  Two vectors per iteration
 * overlap the chains: the 8-op chain benchmark ran 1.4x faster.  A body
 * with several elementary functions is one long dependent path per element
 * (tanh, then exp, then a division in that benchmark): four vectors in
 * flight ran it 1.3x faster again (1.79 -> 1.37 ns per float32 element on
 * one Zen 3 core), while a single exp or tanh, already bound by the
 * multiply-add ports, ran no faster and compiled slower. */
#define CJ_MATH_INTERLEAVE 2
#define CJ_MATH_INTERLEAVE_LONG 4
#define CJ_MATH_INTERLEAVE_MIN_TRIP 64

static unsigned math_interleave(const cj_kernel *k) {
    return cj_kernel_long_math(k) >= 2 ? CJ_MATH_INTERLEAVE_LONG : CJ_MATH_INTERLEAVE;
}


/* !llvm.loop !{self, !{"llvm.loop.interleave.count", i32 n}} on the latch */
static void set_interleave(cg *c, LLVMValueRef latch, unsigned n) {
    const char *key = "llvm.loop.interleave.count";
    LLVMMetadataRef hint[2] = {LLVMMDStringInContext2(c->ctx, key, strlen(key)),
                               LLVMValueAsMetadata(LLVMConstInt(c->i32, n, 0))};
    LLVMMetadataRef op = LLVMMDNodeInContext2(c->ctx, hint, 2);
    LLVMMetadataRef loop = self_node(c, &op, 1);
    LLVMSetMetadata(latch, LLVMGetMDKindIDInContext(c->ctx, "llvm.loop", 9), LLVMMetadataAsValue(c->ctx, loop));
}

static void loop_end(cg *c, loop_state *L) { loop_end_step(c, L, 1); }

/* Unroll-and-jam of a reduced loop that accumulates in memory (matmul's K,
 * with the output row innermost): each innermost iteration adds `unroll`
 * consecutive terms, so the output row is loaded and stored `unroll` times
 * less often.  The CPU's kernels are bound by that traffic. */
#define CJ_UNROLL_REDUCED 4

static int unrolled_reduced_dim(const cg *c) {
    const cj_kernel *k = c->k;
    if (c->target != CJ_TARGET_CPU || !k->reduced || (k->reduced & (1u << (k->rank - 1)))) return -1;
    for (int d = k->rank - 2; d >= 1; d--)
        if ((k->reduced & (1u << d)) && k->dims[d] >= CJ_UNROLL_REDUCED) return d;
    return -1;
}

/* v combined into the register slot of a reduction's accumulator. */
static bool accumulate_value(cg *c, LLVMValueRef v) {
    const cj_kernel *k = c->k;
    LLVMValueRef slot = c->buf_ptr[c->plan->nbuffers];
    cj_dtype dt = c->plan->buffers[k->out_buffer].dtype;
    LLVMValueRef acc = LLVMBuildLoad2(c->b, reg_type(c, dt), slot, "acc");
    LLVMValueRef r = reduce_combine(c, k->reduce_op, acc, v, dt);
    if (!r) return false;
    LLVMBuildStore(c->b, r, slot);
    return true;
}

/* Pairwise float sums.  A float sum kept in one accumulator (even a vector
 * of them) loses digits like n * eps: 10^7 float32 copies of 0.1 came to
 * 997297.6.  So the innermost reduced loop runs in blocks of CJ_SUM_BLOCK
 * points, each summed (vectorized, reassociated) from zero, and the block
 * sums are added pairwise like the digits of a binary counter: level l of
 * a small stack holds the sum of 2^l blocks; the j-th block sum pushed
 * takes the levels below ctz(j) along and goes to level ctz(j).  At the
 * end the levels of the count's set bits hold every block.  A partial
 * block (the points after the last whole one) is pushed like a block, and
 * reduced loops around the innermost one push their blocks into the same
 * counter, so x[:, :1500].sum() is one pairwise sum too.  The error grows
 * like eps * (CJ_SUM_BLOCK / lanes + log2(n)), as NumPy's pairwise sum's
 * does.  The pairing depends on the reduced dims alone, never on threads
 * (they split other dims); sums of at most one block keep the plain
 * accumulator.  512: with AVX2's 32 float32 lanes each lane adds 16
 * points, as each of NumPy's 8 accumulators does; 256 to 2048 ran equally
 * fast (from memory, L3 or L2). */
#define CJ_SUM_BLOCK 512

typedef struct {
    LLVMTypeRef t, stack_t;
    LLVMValueRef stack;     /* [levels x t]: level l holds a sum of 2^l blocks */
    LLVMValueRef carry;     /* the sum being pushed up the levels */
    LLVMValueRef count;     /* i64: block sums pushed so far */
    int last;               /* the reduced dim run in blocks */
} pairwise;

/* The first of the reduced dims that one pairwise sum covers, or -1.  In
 * the CPU loop nest (`trailing`) they are the run of reduced dims that ends
 * with the innermost dim; in a GPU thread, all reduced dims. */
static int pairwise_from(const cg *c, bool trailing) {
    const cj_kernel *k = c->k;
    if (k->reduce_op != CJ_OP_REDUCE_SUM || !is_float(c->plan->buffers[k->out_buffer].dtype)) return -1;
    int first = k->rank;
    int64_t points = 1;
    for (int d = k->rank - 1; d >= 0; d--) {
        if (k->reduced & (1u << d)) {
            first = d;
            points *= k->dims[d];
        } else if (trailing) {
            break;
        }
    }
    return first < k->rank && points > CJ_SUM_BLOCK ? first : -1;
}

/* An alloca in the entry block, where it is allocated once per call. */
static LLVMValueRef entry_alloca(cg *c, LLVMTypeRef t, const char *name) {
    LLVMBuilderRef b = LLVMCreateBuilderInContext(c->ctx);
    LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(c->fn);
    LLVMValueRef first = LLVMGetFirstInstruction(entry);
    if (first) LLVMPositionBuilderBefore(b, first);
    else LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef slot = LLVMBuildAlloca(b, t, name);
    LLVMDisposeBuilder(b);
    return slot;
}

static LLVMValueRef level_ptr(cg *c, const pairwise *p, LLVMValueRef level) {
    LLVMValueRef at[2] = {LLVMConstInt(c->i64, 0, 0), level};
    return LLVMBuildInBoundsGEP2(c->b, p->stack_t, p->stack, at, 2, "level.at");
}

/* The j-th block sum v onto the stack: the levels below ctz(j) are added
 * to it, and it goes to level ctz(j).  These adds are not reassociated. */
static void pairwise_push(cg *c, pairwise *p, LLVMValueRef v) {
    LLVMValueRef j = LLVMBuildAdd(c->b, LLVMBuildLoad2(c->b, c->i64, p->count, "pushed"), LLVMConstInt(c->i64, 1, 0), "j");
    LLVMBuildStore(c->b, j, p->count);
    LLVMBuildStore(c->b, v, p->carry);
    LLVMValueRef args[2] = {j, LLVMConstInt(c->i1, 1, 0)};
    LLVMValueRef top = call_intrinsic(c, "llvm.cttz", c->i64, args, 2, "top");
    loop_state L;
    loop_begin(c, &L, LLVMConstInt(c->i64, 0, 0), top, "carry");
    LLVMValueRef lower = LLVMBuildLoad2(c->b, p->t, level_ptr(c, p, L.phi), "lower");
    LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, lower, LLVMBuildLoad2(c->b, p->t, p->carry, "c"), "pair"), p->carry);
    loop_end(c, &L);
    LLVMBuildStore(c->b, LLVMBuildLoad2(c->b, p->t, p->carry, "c"), level_ptr(c, p, top));
}

/* The sum of `count` points from idx[d] = first on, from a zero register
 * accumulator (the slot). */
static LLVMValueRef emit_block_sum(cg *c, int d, LLVMValueRef first, LLVMValueRef count) {
    LLVMValueRef slot = c->buf_ptr[c->plan->nbuffers];
    LLVMTypeRef t = reg_type(c, c->plan->buffers[c->k->out_buffer].dtype);
    LLVMBuildStore(c->b, LLVMConstReal(t, 0), slot);
    loop_state L;
    loop_begin(c, &L, LLVMConstInt(c->i64, 0, 0), count, "i.block");
    c->idx[d] = LLVMBuildAdd(c->b, first, L.phi, "i");
    LLVMValueRef v = emit_exprs(c);
    if (!v || !accumulate_value(c, v)) return NULL;
    loop_end(c, &L);
    if (c->target == CJ_TARGET_CPU && cj_kernel_long_math(c->k) > 0) set_interleave(c, L.latch, math_interleave(c->k));
    return LLVMBuildLoad2(c->b, t, slot, "block.sum");
}

/* The reduced loops from d on, the last one in blocks, each pushed.  The
 * last block of a row may be partial: the block loop's count says so,
 * rather than a second loop for it (less code to vectorize). */
static bool emit_pairwise_loops(cg *c, pairwise *p, int d) {
    const cj_kernel *k = c->k;
    while (d < p->last && !(k->reduced & (1u << d))) d++;
    if (d == p->last) {
        int64_t n = k->dims[d], nblocks = (n + CJ_SUM_BLOCK - 1) / CJ_SUM_BLOCK;
        LLVMValueRef block = LLVMConstInt(c->i64, CJ_SUM_BLOCK, 0);
        loop_state L;
        loop_begin(c, &L, LLVMConstInt(c->i64, 0, 0), LLVMConstInt(c->i64, (unsigned long long)nblocks, 0), "block");
        LLVMValueRef first = LLVMBuildMul(c->b, L.phi, block, "first");
        LLVMValueRef count = block;
        if (n % CJ_SUM_BLOCK) {
            LLVMValueRef left = LLVMBuildSub(c->b, LLVMConstInt(c->i64, (unsigned long long)n, 0), first, "left");
            count = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, left, block, "partial"), left, block, "count");
        }
        LLVMValueRef v = emit_block_sum(c, d, first, count);
        if (!v) return false;
        pairwise_push(c, p, v);
        loop_end(c, &L);
        return true;
    }
    char name[16];
    snprintf(name, sizeof name, "r%d", d);
    loop_state L;
    loop_begin(c, &L, LLVMConstInt(c->i64, 0, 0), LLVMConstInt(c->i64, (unsigned long long)k->dims[d], 0), name);
    c->idx[d] = L.phi;
    if (!emit_pairwise_loops(c, p, d + 1)) return false;
    loop_end(c, &L);
    return true;
}

/* The pairwise sum over the reduced dims from d on (pairwise_from) at the
 * current indices of the other dims. */
static LLVMValueRef emit_pairwise_sum(cg *c, int d) {
    const cj_kernel *k = c->k;
    pairwise p = {.t = reg_type(c, c->plan->buffers[k->out_buffer].dtype)};
    int64_t pushes = 1;
    for (int q = d; q < k->rank; q++) {
        if (!(k->reduced & (1u << q))) continue;
        p.last = q;
        pushes *= k->dims[q];
    }
    int64_t n = k->dims[p.last];
    pushes = pushes / n * (n / CJ_SUM_BLOCK + (n % CJ_SUM_BLOCK != 0));
    int levels = 0;
    while (pushes >> levels) levels++;
    p.stack_t = LLVMArrayType2(p.t, (uint64_t)levels);
    p.stack = entry_alloca(c, p.stack_t, "sum.levels");
    p.carry = entry_alloca(c, p.t, "sum.carry");
    p.count = entry_alloca(c, c->i64, "sum.pushed");
    LLVMBuildStore(c->b, LLVMConstInt(c->i64, 0, 0), p.count);
    if (!emit_pairwise_loops(c, &p, d)) return NULL;
    /* the full levels, smallest first */
    LLVMValueRef total = NULL;
    for (int l = 0; l < levels; l++) {
        if (!((pushes >> l) & 1)) continue;
        LLVMValueRef v = LLVMBuildLoad2(c->b, p.t, level_ptr(c, &p, LLVMConstInt(c->i64, (unsigned long long)l, 0)), "level");
        total = total ? LLVMBuildFAdd(c->b, v, total, "pair") : v;
    }
    return total;
}

static bool emit_loops(cg *c, int d, LLVMValueRef start, LLVMValueRef end) {
    const cj_kernel *k = c->k;
    const cj_buffer *out = &c->plan->buffers[k->out_buffer];
    bool accumulate = k->reduced != 0;
    int inner = k->rank - 1;
    if (d == k->rank) {
        if (!accumulate) return emit_stores(c);
        LLVMValueRef v = emit_exprs(c);
        if (!v) return false;
        if (k->reduced & (1u << inner)) {
            /* accumulator in a register: see the innermost loop below */
            return accumulate_value(c, v);
        } else {
            /* the other unrolled terms, combined before touching memory */
            if (c->unroll > 1) {
                LLVMValueRef base = c->idx[c->unroll_dim];
                for (int j = 1; j < c->unroll && v; j++) {
                    c->idx[c->unroll_dim] = LLVMBuildAdd(c->b, base, LLVMConstInt(c->i64, (unsigned long long)j, 0), "kj");
                    LLVMValueRef vj = emit_exprs(c);
                    v = vj ? reduce_combine(c, k->reduce_op, v, vj, out->dtype) : NULL;
                }
                c->idx[c->unroll_dim] = base;
                if (!v) return false;
            }
            LLVMValueRef acc = load_value(c, k->out_buffer, &k->out_index);
            LLVMValueRef r = reduce_combine(c, k->reduce_op, acc, v, out->dtype);
            if (!r) return false;
            store_value(c, k->out_buffer, &k->out_index, r);
        }
        return true;
    }
    if (d == pairwise_from(c, true)) {
        /* reduced from here on (loop 0 then runs whole): out += the pairwise sum */
        for (int q = d; q < k->rank; q++) c->idx[q] = LLVMConstInt(c->i64, 0, 0);
        LLVMValueRef before = load_value(c, k->out_buffer, &k->out_index);
        LLVMValueRef total = emit_pairwise_sum(c, d);
        if (!total) return false;
        for (int q = d; q < k->rank; q++) c->idx[q] = LLVMConstInt(c->i64, 0, 0);
        store_value(c, k->out_buffer, &k->out_index, LLVMBuildFAdd(c->b, before, total, "sum"));
        return true;
    }
    if (d == unrolled_reduced_dim(c) && c->unroll_dim != d) {
        /* main loop over whole groups of CJ_UNROLL_REDUCED, then the rest one by one */
        int64_t n = k->dims[d], main = n / CJ_UNROLL_REDUCED * CJ_UNROLL_REDUCED;
        loop_state L;
        c->unroll_dim = d;
        c->unroll = CJ_UNROLL_REDUCED;
        loop_begin(c, &L, LLVMConstInt(c->i64, 0, 0), LLVMConstInt(c->i64, (unsigned long long)main, 0), "k.main");
        c->idx[d] = L.phi;
        bool ok = emit_loops(c, d + 1, start, end);
        if (ok) loop_end_step(c, &L, CJ_UNROLL_REDUCED);
        c->unroll = 1;
        if (ok && main < n) {
            loop_begin(c, &L, LLVMConstInt(c->i64, (unsigned long long)main, 0), LLVMConstInt(c->i64, (unsigned long long)n, 0), "k.rest");
            c->idx[d] = L.phi;
            ok = emit_loops(c, d + 1, start, end);
            if (ok) loop_end(c, &L);
        }
        c->unroll_dim = -1;
        return ok;
    }
    LLVMValueRef lo = d == 0 ? start : LLVMConstInt(c->i64, 0, 0);
    LLVMValueRef hi = d == 0 ? end : LLVMConstInt(c->i64, (unsigned long long)k->dims[d], 0);
    bool reg_acc = accumulate && d == inner && (k->reduced & (1u << inner));
    LLVMValueRef acc_slot = reg_acc ? c->buf_ptr[c->plan->nbuffers] : NULL;
    if (reg_acc) {
        /* the output offset does not depend on a reduced loop: use i = 0 */
        c->idx[d] = LLVMConstInt(c->i64, 0, 0);
        LLVMBuildStore(c->b, load_value(c, k->out_buffer, &k->out_index), acc_slot);
    }
    char name[16];
    snprintf(name, sizeof name, "i%d", d);
    loop_state L;
    loop_begin(c, &L, lo, hi, name);
    c->idx[d] = L.phi;
    if (!emit_loops(c, d + 1, start, end)) return false;
    loop_end(c, &L);
    /* not on short loops of known length: with alias scopes, LLVM 19's
     * vectorizer never finished a pow loop of 3 iterations so hinted */
    if (d == inner && c->target == CJ_TARGET_CPU && cj_kernel_long_math(k) > 0 && (d == 0 || k->dims[d] >= CJ_MATH_INTERLEAVE_MIN_TRIP))
        set_interleave(c, L.latch, math_interleave(k));
    if (reg_acc) {
        c->idx[d] = LLVMConstInt(c->i64, 0, 0);
        LLVMValueRef acc = LLVMBuildLoad2(c->b, reg_type(c, out->dtype), acc_slot, "acc.final");
        store_value(c, k->out_buffer, &k->out_index, acc);
    }
    return true;
}

/* A kernel that BLAS runs (blas.c): its function passes a constant
 * descriptor and its own arguments on to cj_rt_gemm. */
static void emit_gemm_call(cg *c, int ki, LLVMValueRef start, LLVMValueRef end) {
    int64_t desc[CJ_GEMM_DESC_LEN];
    cj_blas_describe(&c->plan->kernels[ki], desc);
    LLVMValueRef elems[CJ_GEMM_DESC_LEN];
    for (int i = 0; i < CJ_GEMM_DESC_LEN; i++) elems[i] = LLVMConstInt(c->i64, (unsigned long long)desc[i], 1);
    LLVMValueRef init = LLVMConstArray2(c->i64, elems, CJ_GEMM_DESC_LEN);
    char name[64];
    snprintf(name, sizeof name, "%s.desc", LLVMGetValueName(c->fn));
    LLVMValueRef global = LLVMAddGlobal(c->mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(global, init);
    LLVMSetGlobalConstant(global, 1);
    LLVMSetLinkage(global, LLVMPrivateLinkage);
    LLVMTypeRef params[4] = {c->ptr, c->i64, c->i64, c->ptr};
    LLVMTypeRef fty = LLVMFunctionType(c->void_t, params, 4, 0);
    LLVMValueRef callee = LLVMGetNamedFunction(c->mod, "cj_rt_gemm");
    if (!callee) callee = LLVMAddFunction(c->mod, "cj_rt_gemm", fty);
    LLVMValueRef args[4] = {global, start, end, LLVMGetParam(c->fn, 2)};
    LLVMBuildCall2(c->b, fty, callee, args, 4, "");
}

/* A kernel with more elementary functions than this calls them (mathlib.c)
 * instead of inlining them.  Each inline copy costs LLVM about 4 ms (16
 * sin in one loop body: 90 ms), while the calls cost nothing measurable
 * at run time (the vector variants take whole vectors); a few inline
 * copies keep small programs free of the library's one-off compile. */
#define CJ_INLINE_MATH_MAX 4


static bool emit_kernel(cg *c, int ki, const char *prefix) {
    const cj_kernel *k = &c->plan->kernels[ki];
    c->k = k;
    char name[128];
    snprintf(name, sizeof name, "%s_k%d", prefix, ki);
    LLVMValueRef start, end;
    new_function(c, name, &start, &end);
    if (k->gemm.on) {
        if (k->gemm.small) cj_gemm_small_emit(c->mod, c->b, c->fn, c->plan, k);
        else emit_gemm_call(c, ki, start, end);
        LLVMBuildRetVoid(c->b);
        return true; /* beta = 0: no init */
    }
    memset(c->buf_ptr, 0, sizeof(LLVMValueRef) * ((size_t)c->plan->nbuffers + 1));
    load_buffer_pointer(c, k->out_buffer);
    for (int i = 0; i < k->nalso; i++) load_buffer_pointer(c, k->also[i].buffer);
    for (int e = 0; e < k->nexprs; e++)
        if (k->exprs[e].kind == CJ_EX_LOAD) load_buffer_pointer(c, k->exprs[e].buffer);
    if (c->scope) set_alias_scopes(c, ki, k);
    c->call_math = c->target == CJ_TARGET_CPU && cj_kernel_long_math(k) > CJ_INLINE_MATH_MAX;
    /* the register accumulator lives in a stack slot that mem2reg promotes */
    c->buf_ptr[c->plan->nbuffers] =
        LLVMBuildAlloca(c->b, reg_type(c, c->plan->buffers[k->out_buffer].dtype), "acc.slot");
    if (!emit_loops(c, 0, start, end)) return false;
    LLVMBuildRetVoid(c->b);

    return true;
}

/* ---- NVPTX ----------------------------------------------------------------- */

/* See codegen.h. */
int cj_codegen_kernel_buffers(const cj_kernel *k, int *bufs) {
    int n = 0;
    bufs[n++] = k->out_buffer;
    for (int i = 0; i < k->nalso; i++) bufs[n++] = k->also[i].buffer;
    for (int e = 0; e < k->nexprs; e++) {
        if (k->exprs[e].kind != CJ_EX_LOAD) continue;
        bool seen = false;
        for (int j = 0; j < n; j++) seen |= bufs[j] == k->exprs[e].buffer;
        if (!seen) bufs[n++] = k->exprs[e].buffer;
    }
    return n;
}

/* Do the non-reduced dims of k store to distinct elements (strides that
 * nest without overlap)?  Size-1 dims do not matter. */
static bool stores_disjoint(const cj_kernel *k) {
    int order[CJ_MAX_RANK], n = 0;
    for (int d = 0; d < k->rank; d++) {
        if ((k->reduced & (1u << d)) || k->dims[d] <= 1) continue;
        int64_t s = k->out_index.stride[d];
        if (s <= 0) return false;
        int j = n++;
        while (j > 0 && k->out_index.stride[order[j - 1]] > s) order[j] = order[j - 1], j--;
        order[j] = d;
    }
    for (int j = 1; j < n; j++)
        if (k->out_index.stride[order[j]] < k->out_index.stride[order[j - 1]] * k->dims[order[j - 1]])
            return false;
    return true;
}

/* See codegen.h. */
int64_t cj_codegen_gpu_points(const cj_plan *plan, int ki, bool *serial) {
    const cj_kernel *k = &plan->kernels[ki];
    int64_t points = 1;
    bool ok = stores_disjoint(k);
    for (int d = 0; d < k->rank; d++) {
        bool red = k->reduced & (1u << d);
        if (red && k->dims[d] > 1 && k->out_index.stride[d] != 0) ok = false;
        if (!red) points *= k->dims[d];
    }
    /* a kernel that reads its own output elsewhere than where it writes */
    for (int e = 0; ok && e < k->nexprs; e++) {
        const cj_expr *x = &k->exprs[e];
        if (x->kind == CJ_EX_LOAD && x->buffer == k->out_buffer &&
            memcmp(&x->index, &k->out_index, sizeof x->index) != 0)
            ok = false;
        for (int i = 0; ok && x->kind == CJ_EX_LOAD && i < k->nalso; i++)
            if (x->buffer == k->also[i].buffer && memcmp(&x->index, &k->also[i].index, sizeof x->index) != 0) ok = false;
    }
    *serial = !ok;
    return ok ? points : (points > 0 ? 1 : 0);
}

static LLVMValueRef read_sreg(cg *c, const char *name) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, NULL, 0);
    LLVMTypeRef fty = LLVMIntrinsicGetType(c->ctx, id, NULL, 0);
    return LLVMBuildZExt(c->b, LLVMBuildCall2(c->b, fty, fn, NULL, 0, name + 24), c->i64, "sreg");
}

/* A PTX kernel "name" whose parameters are the data pointers of the plan
 * buffers bufs[0..n) (generic pointers; NVPTX assumes kernel pointer
 * parameters point to global memory).  Leaves the builder in its entry. */
static void new_gpu_function(cg *c, const char *name, const int *bufs, int n) {
    LLVMTypeRef *params = calloc((size_t)n + 1, sizeof(LLVMTypeRef));
    for (int i = 0; params && i < n; i++) params[i] = c->ptr;
    LLVMValueRef fn = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->void_t, params, (unsigned)n, 0));
    free(params);
    LLVMSetFunctionCallConv(fn, LLVMPTXKernelCallConv);
    unsigned nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(c->ctx, nounwind, 0));
    memset(c->buf_ptr, 0, sizeof(LLVMValueRef) * ((size_t)c->plan->nbuffers + 1));
    for (int i = 0; i < n; i++) {
        char pname[32];
        snprintf(pname, sizeof pname, "buf%d", bufs[i]);
        LLVMValueRef p = LLVMGetParam(fn, (unsigned)i);
        LLVMSetValueName2(p, pname, strlen(pname));
        c->buf_ptr[bufs[i]] = p;
    }
    LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->ctx, fn, "entry"));
    c->fn = fn;
}

/* for (t = gid; t < n; t += gridDim.x * blockDim.x): the phi is *t. */
static void grid_loop_begin(cg *c, loop_state *L, LLVMValueRef n, LLVMValueRef *t, LLVMValueRef *step) {
    LLVMValueRef block = read_sreg(c, "llvm.nvvm.read.ptx.sreg.ctaid.x");
    LLVMValueRef width = read_sreg(c, "llvm.nvvm.read.ptx.sreg.ntid.x");
    LLVMValueRef gid = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, block, width, "base"),
                                    read_sreg(c, "llvm.nvvm.read.ptx.sreg.tid.x"), "gid");
    *step = LLVMBuildMul(c->b, read_sreg(c, "llvm.nvvm.read.ptx.sreg.nctaid.x"), width, "gstride");
    loop_begin(c, L, gid, n, "t");
    *t = L->phi;
}

static void grid_loop_end(cg *c, loop_state *L, LLVMValueRef step) {
    LLVMValueRef next = LLVMBuildAdd(c->b, L->phi, step, "tnext");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(c->b);
    LLVMAddIncoming(L->phi, &next, &latch, 1);
    LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, next, L->hi, "more"), L->body, L->exit);
    LLVMPositionBuilderAtEnd(c->b, L->exit);
}

/* Inside one thread: the reduced dims from d on, in order, accumulating
 * into the register slot. */
static bool emit_reduced_loops(cg *c, int d) {
    const cj_kernel *k = c->k;
    while (d < k->rank && !(k->reduced & (1u << d))) d++;
    if (d == k->rank) {
        LLVMValueRef v = emit_exprs(c);
        return v && accumulate_value(c, v);
    }
    if (d == pairwise_from(c, false)) {
        LLVMValueRef slot = c->buf_ptr[c->plan->nbuffers];
        LLVMValueRef before = LLVMBuildLoad2(c->b, reg_type(c, c->plan->buffers[k->out_buffer].dtype), slot, "acc.in");
        LLVMValueRef total = emit_pairwise_sum(c, d);
        if (!total) return false;
        LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, before, total, "sum"), slot);
        return true;
    }
    char name[16];
    snprintf(name, sizeof name, "r%d", d);
    loop_state L;
    loop_begin(c, &L, LLVMConstInt(c->i64, 0, 0), LLVMConstInt(c->i64, (unsigned long long)k->dims[d], 0), name);
    c->idx[d] = L.phi;
    if (!emit_reduced_loops(c, d + 1)) return false;
    loop_end(c, &L);
    return true;
}

/* One point of the parallel (non-reduced) dims, flat index t: split t into
 * the loop indices, then store the value, or run the reduced dims in this
 * thread and store the total. */
static bool emit_gpu_point(cg *c, LLVMValueRef t) {
    const cj_kernel *k = c->k;
    int outermost = -1;
    for (int d = 0; d < k->rank && outermost < 0; d++)
        if (!(k->reduced & (1u << d))) outermost = d;
    LLVMValueRef rest = t;
    for (int d = k->rank - 1; d >= 0; d--) {
        if (k->reduced & (1u << d) || k->dims[d] == 1) {
            c->idx[d] = LLVMConstInt(c->i64, 0, 0);
        } else if (d == outermost) {
            c->idx[d] = rest;
        } else {
            LLVMValueRef n = LLVMConstInt(c->i64, (unsigned long long)k->dims[d], 0);
            c->idx[d] = LLVMBuildURem(c->b, rest, n, "idx");
            rest = LLVMBuildUDiv(c->b, rest, n, "rest");
        }
    }
    if (!k->reduced) return emit_stores(c);
    /* reduced indices are 0 here, and the output offset does not use them */
    LLVMValueRef slot = c->buf_ptr[c->plan->nbuffers];
    LLVMBuildStore(c->b, load_value(c, k->out_buffer, &k->out_index), slot);
    if (!emit_reduced_loops(c, 0)) return false;
    for (int d = 0; d < k->rank; d++)
        if (k->reduced & (1u << d)) c->idx[d] = LLVMConstInt(c->i64, 0, 0);
    cj_dtype dt = c->plan->buffers[k->out_buffer].dtype;
    store_value(c, k->out_buffer, &k->out_index, LLVMBuildLoad2(c->b, reg_type(c, dt), slot, "acc.final"));
    return true;
}

/* The PTX form of kernel ki ("<prefix>_k<i>", and "<prefix>_k<i>_init" for
 * reductions): parameters are the buffers of cj_codegen_kernel_buffers; the
 * threads share out the cj_codegen_gpu_points points in a grid-stride loop.
 * A kernel that cannot be split that way runs the CPU loop nest in thread 0. */
static bool emit_kernel_nvptx(cg *c, int ki, const char *prefix) {
    const cj_kernel *k = &c->plan->kernels[ki];
    c->k = k;
    int *bufs = calloc((size_t)k->nexprs + k->nalso + 2, sizeof(int));
    if (!bufs) return cj_error_set(c->err, CJ_ERR_MEMORY, "codegen: out of memory"), false;
    int nbufs = cj_codegen_kernel_buffers(k, bufs);
    char name[128];
    snprintf(name, sizeof name, "%s_k%d", prefix, ki);
    new_gpu_function(c, name, bufs, nbufs);
    free(bufs);
    c->buf_ptr[c->plan->nbuffers] =
        LLVMBuildAlloca(c->b, reg_type(c, c->plan->buffers[k->out_buffer].dtype), "acc.slot");
    bool serial;
    int64_t points = cj_codegen_gpu_points(c->plan, ki, &serial);
    LLVMValueRef t, step;
    loop_state L;
    grid_loop_begin(c, &L, LLVMConstInt(c->i64, (unsigned long long)points, 0), &t, &step);
    if (serial) {
        /* thread 0 (the only point) runs the whole nest, as on the CPU */
        LLVMValueRef zero = LLVMConstInt(c->i64, 0, 0);
        if (!emit_loops(c, 0, zero, LLVMConstInt(c->i64, (unsigned long long)k->dims[0], 0))) return false;
    } else if (!emit_gpu_point(c, t)) {
        return false;
    }
    grid_loop_end(c, &L, step);
    LLVMBuildRetVoid(c->b);

    if (k->reduced) {
        const cj_buffer *out = &c->plan->buffers[k->out_buffer];
        snprintf(name, sizeof name, "%s_k%d_init", prefix, ki);
        new_gpu_function(c, name, &k->out_buffer, 1);
        grid_loop_begin(c, &L, LLVMConstInt(c->i64, (unsigned long long)cj_shape_numel(&out->shape), 0), &t, &step);
        LLVMValueRef v = reduce_identity(c, k->reduce_op, out->dtype);
        if (out->dtype == CJ_BOOL) v = LLVMBuildZExt(c->b, v, c->i8, "b");
        LLVMBuildStore(c->b, v, LLVMBuildInBoundsGEP2(c->b, mem_type(c, out->dtype), c->buf_ptr[k->out_buffer], &t, 1, "addr"));
        grid_loop_end(c, &L, step);
        LLVMBuildRetVoid(c->b);
    }
    return true;
}

/* The kernels with only[i] (all when only is NULL) into mod. */
static cj_status codegen_kernels(const cj_plan *plan, LLVMModuleRef mod, const char *prefix, cj_target target,
                                 const bool *only, cj_error *err) {
    cg c;
    memset(&c, 0, sizeof c);
    c.ctx = LLVMGetModuleContext(mod);
    c.mod = mod;
    c.plan = plan;
    c.target = target;
    c.unroll_dim = -1;
    c.unroll = 1;
    c.err = err;
    c.i1 = LLVMInt1TypeInContext(c.ctx);
    c.i8 = LLVMInt8TypeInContext(c.ctx);
    c.i32 = LLVMInt32TypeInContext(c.ctx);
    c.i64 = LLVMInt64TypeInContext(c.ctx);
    c.f32 = LLVMFloatTypeInContext(c.ctx);
    c.f64 = LLVMDoubleTypeInContext(c.ctx);
    c.ptr = LLVMPointerTypeInContext(c.ctx, 0);
    c.void_t = LLVMVoidTypeInContext(c.ctx);
    c.buf_ptr = calloc((size_t)plan->nbuffers + 1, sizeof(LLVMValueRef));
    if (target == CJ_TARGET_CPU) {
        c.scope = calloc((size_t)plan->nbuffers + 1, sizeof(LLVMValueRef));
        c.noalias = calloc((size_t)plan->nbuffers + 1, sizeof(LLVMValueRef));
    }
    if (!c.buf_ptr || (target == CJ_TARGET_CPU && (!c.scope || !c.noalias))) {
        free(c.buf_ptr);
        free(c.scope);
        free(c.noalias);
        return cj_error_set(err, CJ_ERR_MEMORY, "codegen: out of memory");
    }
    c.b = LLVMCreateBuilderInContext(c.ctx);
    for (int i = 0; i < plan->nkernels && err->status == CJ_OK; i++)
        if ((!only || only[i]) && !(target == CJ_TARGET_NVPTX ? emit_kernel_nvptx(&c, i, prefix) : emit_kernel(&c, i, prefix)) &&
            err->status == CJ_OK)
            cj_error_set(err, CJ_ERR_INTERNAL, "codegen: kernel %d failed", i);
    LLVMDisposeBuilder(c.b);
    free(c.buf_ptr);
    free(c.scope);
    free(c.noalias);
    return err->status;
}

/* See codegen.h. */
cj_status cj_codegen_module_target(const cj_plan *plan, LLVMModuleRef mod, const char *prefix,
                                   cj_target target, cj_error *err) {
    for (int k = 0; target == CJ_TARGET_NVPTX && k < plan->nkernels; k++)
        if (plan->kernels[k].loop)
            return cj_error_set(err, CJ_ERR_VALUE, "cuda: %s (cjit.lax control flow) runs on the CPU only for now",
                                plan->kernels[k].label ? plan->kernels[k].label : "a loop");
    return codegen_kernels(plan, mod, prefix, target, NULL, err);
}

/* See codegen.h. */
cj_status cj_codegen_module(const cj_plan *plan, LLVMModuleRef mod, const char *prefix, const bool *only,
                            cj_error *err) {
    cj_math_helpers_elsewhere(mod); /* sin/cos slow paths: one copy in the JIT (mathlib.c) */
    return codegen_kernels(plan, mod, prefix, CJ_TARGET_CPU, only, err);
}
