/* codegen_reduce.c - a kernel's loop nest (emit_loops, shared by the CPU
 * and NVPTX wrappers) and its reductions: an accumulator in a register,
 * unroll-and-jam of a reduced loop that accumulates in memory, and
 * pairwise summation of float sums in blocks.  The combine of one reduction
 * op is emit_op's neighbour, reduce_combine in codegen_expr.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_priv.h"



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

/* The loop nest from dim d inward: the innermost body stores the kernel's
 * values or accumulates them. */
bool emit_loops(cg *c, int d, LLVMValueRef start, LLVMValueRef end) {
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
