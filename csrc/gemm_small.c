/* gemm_small.c - matmuls with few rows as a register-tiled loop nest.
 *
 * OpenBLAS's gemm copies ("packs") all of B into its own layout on every
 * call, then runs a hand-written kernel over the copy.  With many rows of
 * A the copy is paid back many times; with few it is not: a 4 x 256 x 256
 * float32 product took OpenBLAS 16 us where a kernel reading B in place
 * takes 8 (docs/ARCHITECTURE.md, "Matmul", has the figures).  So a product
 * with few rows gets this kernel, generated with the rest of the plan's
 * code for the host CPU:
 *
 *   for each tile of MR rows of C (the rest: a tile of 4, 2, 1 rows)
 *     for each tile of 2 vectors' width of C's columns (then one vector,
 *     then single columns)
 *       MR x 2 vector accumulators in registers
 *       for k in 0..K: load two vectors of B's row k, and for each row r
 *         broadcast A[r, k] and multiply-add it into that row's accumulators
 *       store the accumulators into C
 *
 * MR x 2 accumulators, two B vectors and a broadcast take 15 of the 16
 * vector registers of x86-64 (MR = 6).  Vectors are LLVM's generic
 * vectors and the multiply-add its llvm.fmuladd, so the code is correct
 * on any target; the width chosen from the host's features only decides
 * how fast it is.  C is written whole (beta = 0), like the gemm call.
 *
 * The loops are (batch..., M, K, N) as for a gemm kernel (blas.c); loop 0
 * runs [start, end), so the thread pool can split batch or rows. */
#include <stdatomic.h>
#include <string.h>

#include <llvm-c/TargetMachine.h> /* LLVMGetHostCPUFeatures */

#include "gemm_small.h"
#include "ir_kernel.h"

/* The size rule, from measurements on one core (AMD Zen 3, AVX2; the
 * figures are in docs/ARCHITECTURE.md): up to 16 rows in float32 and 12
 * in float64 this kernel is faster (1.1-2.2x at K = N = 256); from 24
 * (float32) or 16 (float64) rows on OpenBLAS is as fast or faster.  B
 * must be small enough to stay in the L2 cache between row tiles (an
 * 8 x 784 x 128 float64 product, 800 KB of B, ran slower here), and
 * large enough that its packing costs something (below 1024 elements
 * both take well under a microsecond). */
#define CJ_GEMM_SMALL_MAX_ROWS_F32 16
#define CJ_GEMM_SMALL_MAX_ROWS_F64 12
#define CJ_GEMM_SMALL_MAX_B_BYTES ((int64_t)512 * 1024)
#define CJ_GEMM_SMALL_MIN_B_ELEMS ((int64_t)1024)

#define MR_MAX 6

bool cj_gemm_small_suits(const cj_kernel *k, cj_dtype dtype) {
    if (dtype != CJ_FLOAT32 && dtype != CJ_FLOAT64) return false;
    int R = k->rank, m = R - 3, kk = R - 2, n = R - 1;
    int64_t M = k->dims[m], K = k->dims[kk], N = k->dims[n];
    int64_t max_rows = dtype == CJ_FLOAT32 ? CJ_GEMM_SMALL_MAX_ROWS_F32 : CJ_GEMM_SMALL_MAX_ROWS_F64;
    /* one row or one column: gemv (blas.c) */
    if (M < 2 || N < 2 || M > max_rows || K * N < CJ_GEMM_SMALL_MIN_B_ELEMS ||
        K * N * (int64_t)cj_dtype_size(dtype) > CJ_GEMM_SMALL_MAX_B_BYTES)
        return false;
    /* vectors run along N in B and C */
    return k->exprs[1].index.stride[n] == 1 && k->out_index.stride[n] == 1;
}

/* Is `feature` ("+avx") one whole item of LLVM's comma-separated list? */
static bool has_feature(const char *list, const char *feature) {
    size_t n = strlen(feature);
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, feature, n)) return true;
        p += len;
        p += *p == ',';
    }
    return false;
}

int cj_gemm_small_vector_bytes(void) {
    static _Atomic int bytes; /* 0: not asked yet; every thread gets the same answer */
    if (!bytes) {
        char *features = LLVMGetHostCPUFeatures();
        int v = has_feature(features, "+avx") ? 32 : 16;
        LLVMDisposeMessage(features);
        bytes = v;
    }
    return bytes;
}

typedef struct {
    LLVMContextRef ctx;
    LLVMBuilderRef b;
    LLVMValueRef fn;
    LLVMModuleRef mod;
    LLVMTypeRef i64, t, vt; /* index, element, vector of `lanes` elements */
    int lanes, elem;
    LLVMValueRef a, bm, c;  /* data pointers */
    int64_t sa_m, sa_k, sb_k, sc_m;
    int64_t K;
} gen;

static LLVMValueRef i64c(gen *g, int64_t v) { return LLVMConstInt(g->i64, (unsigned long long)v, 1); }

static LLVMValueRef add(gen *g, LLVMValueRef x, LLVMValueRef y) { return LLVMBuildAdd(g->b, x, y, ""); }
static LLVMValueRef mul(gen *g, LLVMValueRef x, int64_t s) {
    return s == 1 ? x : LLVMBuildMul(g->b, x, i64c(g, s), "");
}

typedef cj_ir_loop loop;   /* ir_kernel.h */
static LLVMValueRef loop_open(gen *g, loop *L, LLVMValueRef lo, LLVMValueRef hi, const char *name) {
    return cj_ir_loop_open(g->ctx, g->b, g->fn, L, lo, hi, name);
}
static void loop_close(gen *g, loop *L, int64_t step) { cj_ir_loop_close(g->b, L, step); }

static LLVMValueRef elem_ptr(gen *g, LLVMValueRef base, LLVMValueRef off) {
    return LLVMBuildInBoundsGEP2(g->b, g->t, base, &off, 1, "");
}

/* One tile: rows [i, i + mr) of C, columns [j, j + nv * w) where w is
 * `lanes` (vectors) or 1 (single columns).  a0, b0, c0: the batch's
 * offsets into A, B, C. */
static void tile(gen *g, LLVMValueRef a0, LLVMValueRef b0, LLVMValueRef c0, LLVMValueRef i, LLVMValueRef j,
                 int mr, int nv, int w) {
    LLVMTypeRef at = w == 1 ? g->t : LLVMVectorType(g->t, (unsigned)w);
    LLVMValueRef zero = LLVMConstNull(at);
    LLVMValueRef fmuladd = LLVMGetIntrinsicDeclaration(g->mod, LLVMLookupIntrinsicID("llvm.fmuladd", 12), &at, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(g->ctx, LLVMLookupIntrinsicID("llvm.fmuladd", 12), &at, 1);
    LLVMValueRef acc[MR_MAX][4];
    loop L;
    LLVMValueRef k = loop_open(g, &L, i64c(g, 0), i64c(g, g->K), "k");
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < nv; v++) {
            acc[r][v] = LLVMBuildPhi(g->b, at, "acc");
            LLVMAddIncoming(acc[r][v], &zero, &L.pre, 1);
        }
    LLVMValueRef bv[4];
    LLVMValueRef brow = add(g, b0, add(g, mul(g, k, g->sb_k), j)); /* B[k, j] */
    for (int v = 0; v < nv; v++) {
        bv[v] = LLVMBuildLoad2(g->b, at, elem_ptr(g, g->bm, add(g, brow, i64c(g, (int64_t)v * w))), "b");
        LLVMSetAlignment(bv[v], (unsigned)g->elem);
    }
    LLVMValueRef arow = add(g, a0, add(g, mul(g, i, g->sa_m), mul(g, k, g->sa_k))); /* A[i, k] */
    LLVMValueRef next[MR_MAX][4];
    for (int r = 0; r < mr; r++) {
        LLVMValueRef x = LLVMBuildLoad2(g->b, g->t, elem_ptr(g, g->a, add(g, arow, i64c(g, r * g->sa_m))), "a");
        if (w > 1) { /* broadcast */
            LLVMValueRef one = LLVMBuildInsertElement(g->b, LLVMGetUndef(at), x, i64c(g, 0), "");
            x = LLVMBuildShuffleVector(g->b, one, LLVMGetUndef(at),
                                       LLVMConstNull(LLVMVectorType(LLVMInt32TypeInContext(g->ctx), (unsigned)w)), "a.all");
        }
        for (int v = 0; v < nv; v++) {
            LLVMValueRef args[3] = {x, bv[v], acc[r][v]};
            next[r][v] = LLVMBuildCall2(g->b, fty, fmuladd, args, 3, "acc.next");
        }
    }
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < nv; v++) LLVMAddIncoming(acc[r][v], &next[r][v], &latch, 1);
    loop_close(g, &L, 1);
    /* K >= 1: the loop ran, and next[][] holds the sums */
    LLVMValueRef crow = add(g, c0, add(g, mul(g, i, g->sc_m), j));
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < nv; v++) {
            LLVMValueRef at_c = add(g, crow, i64c(g, r * g->sc_m + (int64_t)v * w));
            LLVMValueRef st = LLVMBuildStore(g->b, next[r][v], elem_ptr(g, g->c, at_c));
            LLVMSetAlignment(st, (unsigned)g->elem);
        }
}

/* Every column of rows [i, i + mr): whole tiles of two vectors, then one
 * vector, then single columns four at a time. */
static void row_block(gen *g, LLVMValueRef a0, LLVMValueRef b0, LLVMValueRef c0, LLVMValueRef i, int mr,
                      int64_t N) {
    int64_t wide = 2 * (int64_t)g->lanes, whole = N / wide * wide, j = whole;
    if (whole > 0) {
        loop L;
        LLVMValueRef jv = loop_open(g, &L, i64c(g, 0), i64c(g, whole), "j");
        tile(g, a0, b0, c0, i, jv, mr, 2, g->lanes);
        loop_close(g, &L, wide);
    }
    if (N - j >= g->lanes) {
        tile(g, a0, b0, c0, i, i64c(g, j), mr, 1, g->lanes);
        j += g->lanes;
    }
    while (j < N) {
        int nv = N - j < 4 ? (int)(N - j) : 4;
        tile(g, a0, b0, c0, i, i64c(g, j), mr, nv, 1);
        j += nv;
    }
}

/* Rows [lo, hi): tiles of MR_MAX rows (of all rows when there are fewer),
 * then the 1..MR_MAX-1 rows over as at most one tile each of 4, 2 and 1
 * rows, chosen at run time (the thread pool may split the rows). */
static void rows(gen *g, LLVMValueRef a0, LLVMValueRef b0, LLVMValueRef c0, LLVMValueRef lo, LLVMValueRef hi,
                 int64_t M, int64_t N) {
    int mr = M < MR_MAX ? (int)M : MR_MAX;
    LLVMValueRef span = LLVMBuildSub(g->b, hi, lo, "");
    LLVMValueRef tiled_end = add(g, lo, mul(g, LLVMBuildSDiv(g->b, span, i64c(g, mr), ""), mr));
    loop L;
    LLVMValueRef i = loop_open(g, &L, lo, tiled_end, "i");
    row_block(g, a0, b0, c0, i, mr, N);
    loop_close(g, &L, mr);
    LLVMValueRef rest = LLVMBuildSub(g->b, hi, tiled_end, "rest");
    i = tiled_end;
    for (int part = 4; part >= 1; part /= 2) {
        if (part >= mr) continue; /* rest < mr */
        LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "rest.tile");
        LLVMBasicBlockRef after = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "rest.next");
        LLVMValueRef bit = LLVMBuildAnd(g->b, rest, i64c(g, part), "");
        LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntNE, bit, i64c(g, 0), ""), yes, after);
        LLVMPositionBuilderAtEnd(g->b, yes);
        row_block(g, a0, b0, c0, i, part, N);
        LLVMBuildBr(g->b, after);
        LLVMPositionBuilderAtEnd(g->b, after);
        i = add(g, i, bit); /* past the tile when it ran */
    }
}

static LLVMValueRef data_pointer(gen *g, int buffer) { return cj_ir_kernel_buffer(g->ctx, g->b, g->fn, buffer); }

/* The batch loops from d on, then the rows; a0, b0, c0 accumulate the
 * batch offsets. */
static void batch(gen *g, const cj_kernel *k, int d, LLVMValueRef a0, LLVMValueRef b0, LLVMValueRef c0) {
    int m = k->rank - 3;
    const cj_affine *ia = &k->exprs[0].index, *ib = &k->exprs[1].index, *ic = &k->out_index;
    LLVMValueRef start = LLVMGetParam(g->fn, 0), end = LLVMGetParam(g->fn, 1);
    if (d == m) {
        rows(g, a0, b0, c0, m == 0 ? start : i64c(g, 0), m == 0 ? end : i64c(g, k->dims[m]), k->dims[m],
             k->dims[k->rank - 1]);
        return;
    }
    loop L;
    LLVMValueRef x = loop_open(g, &L, d == 0 ? start : i64c(g, 0), d == 0 ? end : i64c(g, k->dims[d]), "batch");
    batch(g, k, d + 1, add(g, a0, mul(g, x, ia->stride[d])), add(g, b0, mul(g, x, ib->stride[d])),
          add(g, c0, mul(g, x, ic->stride[d])));
    loop_close(g, &L, 1);
}

void cj_gemm_small_emit(LLVMModuleRef mod, LLVMBuilderRef b, LLVMValueRef fn, const cj_plan *plan,
                        const cj_kernel *k) {
    gen g = {.ctx = LLVMGetModuleContext(mod), .b = b, .fn = fn, .mod = mod};
    cj_dtype dt = plan->buffers[k->out_buffer].dtype;
    g.i64 = LLVMInt64TypeInContext(g.ctx);
    g.t = dt == CJ_FLOAT32 ? LLVMFloatTypeInContext(g.ctx) : LLVMDoubleTypeInContext(g.ctx);
    g.elem = (int)cj_dtype_size(dt);
    g.lanes = cj_gemm_small_vector_bytes() / g.elem;
    int R = k->rank, m = R - 3, kk = R - 2;
    const cj_affine *ia = &k->exprs[0].index, *ib = &k->exprs[1].index, *ic = &k->out_index;
    g.sa_m = ia->stride[m], g.sa_k = ia->stride[kk], g.sb_k = ib->stride[kk], g.sc_m = ic->stride[m];
    g.K = k->dims[kk];
    g.a = data_pointer(&g, k->exprs[0].buffer);
    g.bm = data_pointer(&g, k->exprs[1].buffer);
    g.c = data_pointer(&g, k->out_buffer);
    batch(&g, k, 0, i64c(&g, ia->offset), i64c(&g, ib->offset), i64c(&g, ic->offset));
}
