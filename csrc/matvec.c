/* matvec.c - matrix-vector products C = A @ b as a vectorized kernel.
 *
 * The general matmul loop nest runs (M, K, N) with K reduced; with N = 1
 * its innermost loop has one point, so nothing vectorizes and every term
 * goes through C in memory: a (64, 32) @ (32,) product, the input term
 * of an RNN step, took about 1 us, most of a scan iteration.  A BLAS gemv
 * call costs about as much again in call overhead at these sizes.  So a
 * float product with one column gets this kernel instead, in one of two
 * forms after A's layout:
 *
 *   A read along K (row-major A):  4 rows at a time, a vector accumulator
 *       per row over K (b read as vectors), the rest of K added in
 *       scalars, each row's lanes summed, C stored;
 *   A read along M (A transposed, as a backward pass reads W):  4 vectors
 *       of rows of C at a time, accumulated over K as A's vector times b[k]
 *       broadcast; then single vectors, then single rows.
 *
 * Loop 0 (the rows) runs [start, end), so groups and the thread pool can
 * split it.  The vector width is gemm_small.c's choice for the host. */
#include <stdbool.h>

#include "matvec.h"
#include "ir_kernel.h"

#include "gemm_small.h"

#define ROWS_PER_TILE 4

typedef struct {
    LLVMContextRef ctx;
    LLVMBuilderRef b;
    LLVMValueRef fn;
    LLVMModuleRef mod;
    LLVMTypeRef i64, t;
    int lanes, elem;
    LLVMValueRef a, bv, c;           /* data pointers */
    int64_t a0, b0, c0;              /* base offsets, in elements */
    int64_t sa_m, sa_k, sb_k, sc_m;  /* strides, in elements */
    int64_t K;
} gen;

static LLVMValueRef i64c(gen *g, int64_t v) { return LLVMConstInt(g->i64, (unsigned long long)v, 1); }
static LLVMValueRef add(gen *g, LLVMValueRef x, LLVMValueRef y) { return LLVMBuildAdd(g->b, x, y, ""); }
static LLVMValueRef scaled(gen *g, LLVMValueRef x, int64_t s) {
    return s == 1 ? x : LLVMBuildMul(g->b, x, i64c(g, s), "");
}
static LLVMTypeRef type_of(gen *g, int w) { return w == 1 ? g->t : LLVMVectorType(g->t, (unsigned)w); }

/* w elements from base[off] (w = 1: a scalar). */
static LLVMValueRef load(gen *g, LLVMValueRef base, LLVMValueRef off, int w) {
    LLVMValueRef at = LLVMBuildInBoundsGEP2(g->b, g->t, base, &off, 1, "");
    LLVMValueRef v = LLVMBuildLoad2(g->b, type_of(g, w), at, "");
    LLVMSetAlignment(v, (unsigned)g->elem);
    return v;
}

static void store(gen *g, LLVMValueRef v, LLVMValueRef base, LLVMValueRef off) {
    LLVMValueRef at = LLVMBuildInBoundsGEP2(g->b, g->t, base, &off, 1, "");
    LLVMSetAlignment(LLVMBuildStore(g->b, v, at), (unsigned)g->elem);
}

static LLVMValueRef fmuladd(gen *g, LLVMValueRef x, LLVMValueRef y, LLVMValueRef acc) {
    LLVMTypeRef ty = LLVMTypeOf(acc);
    unsigned id = LLVMLookupIntrinsicID("llvm.fmuladd", 12);
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(g->mod, id, &ty, 1);
    LLVMValueRef args[3] = {x, y, acc};
    return LLVMBuildCall2(g->b, LLVMIntrinsicGetType(g->ctx, id, &ty, 1), f, args, 3, "");
}

static LLVMValueRef splat(gen *g, LLVMValueRef x, int w) {
    if (w == 1) return x;
    LLVMTypeRef vt = type_of(g, w);
    LLVMValueRef one = LLVMBuildInsertElement(g->b, LLVMGetUndef(vt), x, i64c(g, 0), "");
    LLVMTypeRef mask = LLVMVectorType(LLVMInt32TypeInContext(g->ctx), (unsigned)w);
    return LLVMBuildShuffleVector(g->b, one, LLVMGetUndef(vt), LLVMConstNull(mask), "");
}

/* The sum of a vector's lanes, in any order. */
static LLVMValueRef lanes_sum(gen *g, LLVMValueRef v, int w) {
    if (w == 1) return v;
    LLVMTypeRef vt = type_of(g, w);
    unsigned id = LLVMLookupIntrinsicID("llvm.vector.reduce.fadd", 23);
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(g->mod, id, &vt, 1);
    LLVMValueRef args[2] = {LLVMConstReal(g->t, -0.0), v};
    LLVMValueRef s = LLVMBuildCall2(g->b, LLVMIntrinsicGetType(g->ctx, id, &vt, 1), f, args, 2, "");
    LLVMSetFastMathFlags(s, LLVMFastMathAllowReassoc);
    return s;
}

typedef cj_ir_loop loop;   /* ir_kernel.h */
static LLVMValueRef loop_open(gen *g, loop *L, LLVMValueRef lo, LLVMValueRef hi, const char *name) {
    return cj_ir_loop_open(g->ctx, g->b, g->fn, L, lo, hi, name);
}
static void loop_close(gen *g, loop *L, int64_t step) { cj_ir_loop_close(g->b, L, step); }

/* [lo, lo + (hi - lo) / step * step): where whole tiles of `step` end. */
static LLVMValueRef tiled_end(gen *g, LLVMValueRef lo, LLVMValueRef hi, int64_t step) {
    LLVMValueRef n = LLVMBuildSDiv(g->b, LLVMBuildSub(g->b, hi, lo, ""), i64c(g, step), "");
    return add(g, lo, scaled(g, n, step));
}

/* Row-major A: rows [i, i + mr) of C, each a dot product of A's row with
 * b, w lanes at a time over K (w divides the vector part kv). */
static void dot_tile(gen *g, LLVMValueRef i, int mr, int w) {
    int64_t kv = w > 1 ? g->K / w * w : 0;
    LLVMValueRef sum[ROWS_PER_TILE];
    LLVMValueRef arow[ROWS_PER_TILE];
    for (int r = 0; r < mr; r++) arow[r] = add(g, i64c(g, g->a0), scaled(g, add(g, i, i64c(g, r)), g->sa_m));
    for (int r = 0; r < mr; r++) sum[r] = LLVMConstReal(g->t, 0.0);
    if (kv > 0) {
        LLVMTypeRef vt = type_of(g, w);
        LLVMValueRef zero = LLVMConstNull(vt), acc[ROWS_PER_TILE], next[ROWS_PER_TILE];
        loop L;
        LLVMValueRef k = loop_open(g, &L, i64c(g, 0), i64c(g, kv), "k");
        for (int r = 0; r < mr; r++) {
            acc[r] = LLVMBuildPhi(g->b, vt, "acc");
            LLVMAddIncoming(acc[r], &zero, &L.pre, 1);
        }
        LLVMValueRef bk = load(g, g->bv, add(g, i64c(g, g->b0), k), w); /* sb_k == 1 when w > 1 */
        for (int r = 0; r < mr; r++) next[r] = fmuladd(g, load(g, g->a, add(g, arow[r], k), w), bk, acc[r]);
        LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
        for (int r = 0; r < mr; r++) LLVMAddIncoming(acc[r], &next[r], &latch, 1);
        loop_close(g, &L, w);
        for (int r = 0; r < mr; r++) sum[r] = lanes_sum(g, next[r], w); /* kv > 0: the loop ran */
    }
    for (int64_t k = kv; k < g->K; k++) { /* the rest of K: fewer than w terms, or all when w == 1 */
        LLVMValueRef bk = load(g, g->bv, i64c(g, g->b0 + k * g->sb_k), 1);
        for (int r = 0; r < mr; r++)
            sum[r] = fmuladd(g, load(g, g->a, add(g, arow[r], i64c(g, k)), 1), bk, sum[r]);
    }
    for (int r = 0; r < mr; r++)
        store(g, sum[r], g->c, add(g, i64c(g, g->c0), scaled(g, add(g, i, i64c(g, r)), g->sc_m)));
}

static void dot_rows(gen *g, LLVMValueRef lo, LLVMValueRef hi) {
    int w = g->sb_k == 1 && g->K >= g->lanes ? g->lanes : 1;
    LLVMValueRef mid = tiled_end(g, lo, hi, ROWS_PER_TILE);
    loop L;
    LLVMValueRef i = loop_open(g, &L, lo, mid, "rows");
    dot_tile(g, i, ROWS_PER_TILE, w);
    loop_close(g, &L, ROWS_PER_TILE);
    i = loop_open(g, &L, mid, hi, "row");
    dot_tile(g, i, 1, w);
    loop_close(g, &L, 1);
}

/* A read along M: C[i, i + nv * w) = sum over k of A[k, i...] * b[k]. */
static void column_tile(gen *g, LLVMValueRef i, int nv, int w) {
    LLVMTypeRef vt = type_of(g, w);
    LLVMValueRef zero = LLVMConstNull(vt), acc[ROWS_PER_TILE], next[ROWS_PER_TILE];
    LLVMValueRef arow = add(g, i64c(g, g->a0), i); /* sa_m == 1 */
    loop L;
    LLVMValueRef k = loop_open(g, &L, i64c(g, 0), i64c(g, g->K), "k");
    for (int v = 0; v < nv; v++) {
        acc[v] = LLVMBuildPhi(g->b, vt, "acc");
        LLVMAddIncoming(acc[v], &zero, &L.pre, 1);
    }
    LLVMValueRef bk = splat(g, load(g, g->bv, add(g, i64c(g, g->b0), scaled(g, k, g->sb_k)), 1), w);
    LLVMValueRef at = add(g, arow, scaled(g, k, g->sa_k));
    for (int v = 0; v < nv; v++) next[v] = fmuladd(g, load(g, g->a, add(g, at, i64c(g, (int64_t)v * w)), w), bk, acc[v]);
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
    for (int v = 0; v < nv; v++) LLVMAddIncoming(acc[v], &next[v], &latch, 1);
    loop_close(g, &L, 1);
    for (int v = 0; v < nv; v++) { /* K >= 1: the loop ran, next[] holds the sums */
        LLVMValueRef ci = add(g, i64c(g, g->c0), add(g, i, i64c(g, (int64_t)v * w)));
        if (w == 1 || g->sc_m == 1) {
            store(g, next[v], g->c, ci);
            continue;
        }
        for (int e = 0; e < w; e++) /* C strided: lane by lane */
            store(g, LLVMBuildExtractElement(g->b, next[v], i64c(g, e), ""), g->c,
                  add(g, i64c(g, g->c0), scaled(g, add(g, i, i64c(g, (int64_t)v * w + e)), g->sc_m)));
    }
}

static void column_rows(gen *g, LLVMValueRef lo, LLVMValueRef hi) {
    int64_t wide = (int64_t)ROWS_PER_TILE * g->lanes;
    LLVMValueRef mid = tiled_end(g, lo, hi, wide);
    loop L;
    LLVMValueRef i = loop_open(g, &L, lo, mid, "rows");
    column_tile(g, i, ROWS_PER_TILE, g->lanes);
    loop_close(g, &L, wide);
    LLVMValueRef mid2 = tiled_end(g, mid, hi, g->lanes);
    i = loop_open(g, &L, mid, mid2, "vec");
    column_tile(g, i, 1, g->lanes);
    loop_close(g, &L, g->lanes);
    i = loop_open(g, &L, mid2, hi, "row");
    column_tile(g, i, 1, 1);
    loop_close(g, &L, 1);
}

static LLVMValueRef data_pointer(gen *g, int buffer) { return cj_ir_kernel_buffer(g->ctx, g->b, g->fn, buffer); }

/* See matvec.h. */
void cj_matvec_emit(LLVMModuleRef mod, LLVMBuilderRef b, LLVMValueRef fn, const cj_plan *plan, const cj_kernel *k) {
    gen g = {.ctx = LLVMGetModuleContext(mod), .b = b, .fn = fn, .mod = mod};
    cj_dtype dt = plan->buffers[k->out_buffer].dtype;
    g.i64 = LLVMInt64TypeInContext(g.ctx);
    g.t = dt == CJ_FLOAT32 ? LLVMFloatTypeInContext(g.ctx) : LLVMDoubleTypeInContext(g.ctx);
    g.elem = (int)cj_dtype_size(dt);
    g.lanes = cj_gemm_small_vector_bytes() / g.elem;
    const cj_affine *ia = &k->exprs[0].index, *ib = &k->exprs[1].index, *ic = &k->out_index;
    g.a0 = ia->offset, g.b0 = ib->offset, g.c0 = ic->offset;
    g.sa_m = ia->stride[0], g.sa_k = ia->stride[1], g.sb_k = ib->stride[1], g.sc_m = ic->stride[0];
    g.K = k->dims[1];
    g.a = data_pointer(&g, k->exprs[0].buffer);
    g.bv = data_pointer(&g, k->exprs[1].buffer);
    g.c = data_pointer(&g, k->out_buffer);
    LLVMValueRef start = LLVMGetParam(fn, 0), end = LLVMGetParam(fn, 1);
    if (g.K == 0) { /* empty sums */
        loop L;
        LLVMValueRef i = loop_open(&g, &L, start, end, "row");
        store(&g, LLVMConstReal(g.t, 0.0), g.c, add(&g, i64c(&g, g.c0), scaled(&g, i, g.sc_m)));
        loop_close(&g, &L, 1);
    } else if (g.sa_k == 1) {
        dot_rows(&g, start, end);
    } else {
        column_rows(&g, start, end);
    }
}
