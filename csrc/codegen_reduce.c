/* codegen_reduce.c - reductions in the loop nest: combining and identities,
 * unroll-and-jam of a reduced loop that accumulates in memory, and
 * pairwise summation of float sums in blocks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_priv.h"

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
    case CJ_OP_PARAM: case CJ_OP_ARRAY: case CJ_OP_CONSTANT: case CJ_OP_IOTA: case CJ_OP_NEG: case CJ_OP_ABS:
    case CJ_OP_SIGN: case CJ_OP_EXP: case CJ_OP_EXPM1: case CJ_OP_LOG: case CJ_OP_LOG_LIBC: case CJ_OP_LOG1P: case CJ_OP_SQRT:
    case CJ_OP_RECIPROCAL: case CJ_OP_TANH: case CJ_OP_SIN: case CJ_OP_COS: case CJ_OP_FLOOR: case CJ_OP_CEIL:
    case CJ_OP_LOGICAL_NOT: case CJ_OP_ISNAN: case CJ_OP_ISFINITE: case CJ_OP_CAST: case CJ_OP_NAME:
    case CJ_OP_BITWISE_NOT: case CJ_OP_BITCAST: case CJ_OP_BITWISE_AND: case CJ_OP_BITWISE_OR: case CJ_OP_BITWISE_XOR:
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

int unrolled_reduced_dim(const cg *c) {
    const cj_kernel *k = c->k;
    if (c->target != CJ_TARGET_CPU || !k->reduced || (k->reduced & (1u << (k->rank - 1)))) return -1;
    for (int d = k->rank - 2; d >= 1; d--)
        if ((k->reduced & (1u << d)) && k->dims[d] >= CJ_UNROLL_REDUCED) return d;
    return -1;
}

/* v combined into the register slot of a reduction's accumulator. */
bool accumulate_value(cg *c, LLVMValueRef v) {
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
int pairwise_from(const cg *c, bool trailing) {
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
LLVMValueRef emit_pairwise_sum(cg *c, int d) {
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
