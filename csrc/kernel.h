/* kernel.h - fused kernels and the memory plan.
 *
 * A kernel is one loop nest over `rank` dims (outermost first).  Each point
 * of the nest evaluates a small expression DAG whose leaves load from
 * buffers at affine offsets, and stores (or, for reduced dims, accumulates)
 * the result into one buffer at an affine offset.  Movement ops never
 * appear here: the fuser folds them into the affine offsets. */
#ifndef CJ_KERNEL_H
#define CJ_KERNEL_H

#include "graph.h"

/* element offset = offset + sum_d stride[d] * i_d over the loop dims */
typedef struct {
    int64_t offset;
    int64_t stride[CJ_MAX_RANK];
} cj_affine;

typedef enum {
    CJ_EX_LOAD,    /* buffer[index] */
    CJ_EX_CONST,   /* fvalue / ivalue */
    CJ_EX_INDEX,   /* the integer value of affine `index` (iota) */
    CJ_EX_OP,      /* a UNARY, BINARY, COMPARE, SELECT or CAST op on args */
    CJ_EX_GATHER,  /* buffer[index + dyn_stride * i], i = the integer args[0]
                    * made an index into a dim of dyn_dim (graph_index.c) */
} cj_expr_kind;

typedef struct {
    cj_expr_kind kind;
    cj_op op;           /* CJ_EX_OP only */
    cj_dtype dtype;     /* of the result */
    int nargs;
    int args[3];        /* indices of earlier exprs in the kernel */
    int buffer;         /* CJ_EX_LOAD: index into the plan's buffers */
    cj_affine index;    /* CJ_EX_LOAD, CJ_EX_INDEX, CJ_EX_GATHER */
    double fvalue;      /* CJ_EX_CONST */
    int64_t ivalue;
    int64_t dyn_stride, dyn_dim; /* CJ_EX_GATHER */
} cj_expr;

/* Does expression e read a buffer (e->buffer)? */
static inline bool cj_expr_reads(const cj_expr *e) { return e->kind == CJ_EX_LOAD || e->kind == CJ_EX_GATHER; }

/* A scatter kernel (fuse.c, emit_scatter): its last expression is combined
 * (by the kernel's reduce_op) into out_buffer at out_index + stride * i,
 * i = expression index_expr made an index into a dim of `dim`; the output
 * holds the identity first, and the loop is never split across threads. */
typedef struct {
    bool on;
    bool drop;              /* an out-of-range index's value is dropped (else clamped) */
    int index_expr;
    int64_t stride, dim;
} cj_scatter;

/* A matmul kernel that one BLAS gemm call per batch index runs (blas.c).
 * The kernel's loops are (batch..., M, K, N) with K reduced; C is the
 * output, A and B the two loads, each a row-major matrix (or its
 * transpose) with leading dimension ld. */
typedef struct {
    bool on;
    bool small;             /* cjit's own kernel for few rows runs it (gemm_small.c), not BLAS */
    bool trans_a, trans_b;
    int64_t lda, ldb, ldc;
} cj_gemm;

/* A value a multi-output kernel stores besides its last expression:
 * expression `expr` into `buffer` at `index`, at every point of the loop
 * nest (such kernels never reduce).  Values of one shape computed from
 * shared inputs are one loop body this way: what they share is computed
 * once and kept in registers (fuse.c, choose_roots). */
typedef struct {
    int expr;
    int buffer;
    cj_affine index;
    int node;               /* the graph node whose value it is */
} cj_store;

/* Kernels whose code is a call into the runtime, for its block of loop 0:
 * argsort (sort_rt.c: each row of the operand sorted), Cholesky and the
 * triangular solve (linalg_rt.c: LAPACK/BLAS on each matrix of a batch).
 * Their expressions are one load per operand (what each block reads), so
 * every pass sees the operands read; they never write in place. */
typedef enum { CJ_CALL_NONE, CJ_CALL_ARGSORT, CJ_CALL_CHOLESKY, CJ_CALL_TRISOLVE, CJ_CALL_LU, CJ_CALL_LU_PIVOTS,
               CJ_CALL_QR, CJ_CALL_EIGH, CJ_CALL_SVD } cj_call;

typedef struct {
    int rank;
    int64_t dims[CJ_MAX_RANK];
    uint32_t reduced;       /* bit d: loop d accumulates (never split across threads) */
    cj_op reduce_op;        /* CJ_OP_REDUCE_* when reduced != 0 */
    cj_expr *exprs;         /* topological; the last one is stored */
    int nexprs;
    int out_buffer;
    cj_affine out_index;
    int root_node;          /* the graph node this kernel materializes */
    char *label;            /* "exp+mul+reduce_sum": the ops fused, for as_text */
    cj_gemm gemm;           /* on: a BLAS call runs this kernel, not a loop nest */
    cj_store *also;         /* the other values it stores (multi-output), or NULL */
    int nalso;
    cj_scatter scatter;     /* on: a scatter's read-modify-write store */
    cj_call call;           /* not CJ_CALL_NONE: a runtime function runs the kernel (see cj_call) */
    struct cj_loop_plan *loop; /* a scan, while or cond node: the runtime runs its bodies
                                * (loops.h); no code of its own.  Owned. */
} cj_kernel;

/* Does kernel k store into buffer b (its output or one of its others)? */
static inline bool cj_kernel_writes(const cj_kernel *k, int b) {
    if (k->out_buffer == b) return true;
    for (int i = 0; i < k->nalso; i++)
        if (k->also[i].buffer == b) return true;
    return false;
}

typedef enum {
    CJ_BUF_PARAM,   /* the caller's argument `slot` */
    CJ_BUF_ARRAY,   /* closed-over array `slot`, passed by reference */
    CJ_BUF_OUTPUT,  /* result `slot`, allocated by the caller */
    CJ_BUF_TEMP,    /* lives at `offset` in the call's arena */
} cj_buf_kind;

typedef struct {
    cj_buf_kind kind;
    int slot;
    cj_dtype dtype;
    cj_shape shape;
    int64_t nbytes;
    int64_t offset;         /* CJ_BUF_TEMP: in the arena, or in buffer alias_of */
    int alias_of;           /* -1, or the buffer whose bytes this one reuses (at offset):
                             * an in-place update, or a temporary in a donated argument */
    int node;               /* graph node whose value this is */
    int first_use, last_use;/* group indices (liveness) */
    int64_t block_storage;  /* > 0: a group-local temporary that holds one block of rows per
                             * thread, this many bytes in all, instead of nbytes (blockmem.c) */
    bool block_on_stack;    /* block storage small enough for the group driver's stack frame:
                             * no bytes in the arena (blockmem.c) */
} cj_buffer;

/* The bytes buffer b takes where it lives (the arena, or a buffer it
 * reuses): its block storage, none for blocks on the stack, or all of it. */
static inline int64_t cj_buffer_bytes(const cj_buffer *b) {
    if (b->block_on_stack) return 0;
    return b->block_storage > 0 ? b->block_storage : b->nbytes;
}

/* Consecutive kernels (stages) run together block of rows by block of rows
 * (group.c).  A group of one kernel is just that kernel. */
typedef struct {
    int first, count;       /* kernels[first .. first+count) */
    int64_t rows;           /* loop 0 of every stage */
    int64_t block;          /* rows per block */
    int64_t local_block;    /* > 0: the group has block storage (blockmem.c) and runs blocks of
                             * this many rows instead of `block` */
    int local_copies;       /* with block storage: blocks of it (threads that may run the group) */
    int join_partner;       /* a gemm-led group: the out_buffer of the one kernel that reads its
                             * result and could run as its last stage (group.c), -1: none; the
                             * orders for donation use it (memorder.c) */
} cj_group;

typedef struct {
    cj_graph *graph;        /* borrowed */
    cj_kernel *kernels;
    int nkernels, kernels_cap;
    cj_buffer *buffers;
    int nbuffers, buffers_cap;
    int64_t arena_bytes;    /* size of the temp arena */
    int64_t argument_bytes, output_bytes, temp_bytes, peak_bytes;
    int64_t alias_bytes;    /* bytes of donated arguments reused */
    int peak_kernel;        /* index of the group during which the peak is reached */
    cj_group *groups;       /* what runs: num_kernels in memory_analysis() is ngroups */
    int ngroups;
    int *output_buffer;     /* buffer index for each graph output */
    bool *donated;          /* per PARAM slot: its bytes may be reused (donate_argnums); may be NULL */
    int threads;            /* the CPU pool's threads, for block storage (blockmem.c); 0: none */
    bool grouped;           /* the group pass ran (not switched off), so memplan may join groups */
    bool loop_body;         /* a loop's body (loops.c): its kernels run once per iteration, so the
                             * JIT vectorizes small ones too (jit_cpu.c) */
    bool one_function;      /* a loop body compiled as one function (body_fn.c), its kernels and
                             * drivers inlined into it and not compiled on their own: decided by
                             * pipeline.c (cj_plan_one_function, CJIT_LOOP_ONE_FUNCTION) */
} cj_plan;

#endif

/* ---- passes over kernels (fuse.c, memplan.c) ---------------------------- */

/* Groups the graph's nodes into kernels and creates the plan's buffers.
 * With `enabled` false every op gets a kernel of its own (same results).
 * `live` marks the nodes that outputs depend on (others are skipped). */
cj_status cj_fuse_run(const cj_graph *g, const bool *live, bool enabled, cj_plan *plan,
                      cj_error *err);
/* Places temporaries in one arena by liveness (greedy by size); with
 * `enabled` false each gets bytes of its own.  Fills the size fields. */
cj_status cj_memplan_run(cj_plan *plan, bool enabled, cj_error *err);
/* Merges adjacent loop dims of k that every access walks contiguously, so
 * that an elementwise op on a (1000, 1000) array is one loop of 10^6. */
void cj_kernel_collapse(cj_kernel *k);
/* Grows the array *ptr of *cap elements of `elem` bytes to hold `need`
 * (doubling, new elements zeroed); false when out of memory (*ptr kept). */
bool cj_grow(void **ptr, int *cap, int need, size_t elem);
/* The row-major strides of shape s (a dim of 0 counts as 1). */
void cj_contiguous_strides(const cj_shape *s, int64_t *strides);
/* How many of k's expressions are elementary functions evaluated by long
 * polynomials (CJ_OPF_LONG_MATH in ops.def): what makes a kernel costly to compile. */
int cj_kernel_long_math(const cj_kernel *k);
/* The descriptor a call kernel passes to its runtime function (rt.h):
 * {operand buffer, second operand buffer or -1, output buffer, n (the
 * operand's last dim), k (the second operand's last dim, else n), dtype,
 * flags (the node's `index`: a triangular solve's, a factorization's
 * output), m (the operand's second-to-last dim, else 1)}, CJ_CALL_DESC_LEN
 * integers. */
#define CJ_CALL_DESC_LEN 8
void cj_call_describe(const cj_plan *p, const cj_kernel *k, int64_t *desc);
/* Does kernel k accumulate into its output in a loop nest (so that the
 * output must hold the identity first)? */
bool cj_kernel_needs_identity(const cj_kernel *k);
/* The same on the CPU, whose matvec kernels (matvec.c) write C whole. */
bool cj_kernel_cpu_needs_identity(const cj_plan *p, const cj_kernel *k);
/* Kernels that copy fewer points than this, element for element, are not
 * compiled when they run alone (not in a group of stages): the runtime
 * copies (runtime.c).  A concatenate of 10,000 small arrays was 10,000
 * compiled loops, a millisecond of LLVM each. */
#define CJ_RUNTIME_COPY_POINTS 4096
/* Is kernel k a copy the runtime may do: one load of a buffer of the
 * output's dtype, stored unchanged, over fewer than CJ_RUNTIME_COPY_POINTS points? */
bool cj_kernel_is_small_copy(const cj_plan *p, const cj_kernel *k);
/* A, b of a matrix-vector product C = A @ b this big or smaller run as
 * cjit's own kernel (matvec.c) even when BLAS would take them. */
#define CJ_MATVEC_MAX_A_BYTES ((int64_t)128 * 1024)
/* Is kernel k a float matrix-vector product (loops (M, K) or (M, K, 1),
 * K reduced, A read along K, or along M with 8 rows or more, b not moving with M) that the CPU
 * runs as matvec.c's vectorized kernel?  That kernel writes C whole, so
 * the output needs no identity fill first. */
bool cj_kernel_is_matvec(const cj_plan *p, const cj_kernel *k);
/* A loop body's kernels of fewer points than this are compiled without the
 * vectorizer (jit_cpu.c): it pays from one vector's width on (16 floats
 * with AVX-512), as a body's kernels run once per iteration. */
#define CJ_SMALL_BODY_KERNEL_POINTS 16
/* At most this many kernels in a loop body that runs as one function. */
#define CJ_ONE_FUNCTION_MAX_KERNELS 32
/* May loop body p run as one generated function per iteration (body_fn.c)
 * rather than group by group through the runtime?  When its kernels are
 * tiny (each under CJ_SMALL_BODY_KERNEL_POINTS points, so the runtime's
 * bookkeeping would cost more than they do), at most
 * CJ_ONE_FUNCTION_MAX_KERNELS, and none is a loop, a gemm or matvec, or a
 * runtime call (its small copies are compiled into it, not left to the
 * runtime). */
bool cj_plan_one_function(const cj_plan *p);
/* Frees what the plan owns (not the graph). */
void cj_plan_free(cj_plan *plan);
/* Bytes of heap the plan holds (not the graph's). */
int64_t cj_plan_heap_bytes(const cj_plan *plan);
/* Readable kernels and buffers (caller frees). */
char *cj_plan_to_text(const cj_plan *plan);
/* cost_analysis(): flops, one per arithmetic expression per loop point;
 * bytes, every buffer a kernel touches, read or written once. */
void cj_plan_costs(const cj_plan *plan, int64_t *flops, int64_t *bytes);
