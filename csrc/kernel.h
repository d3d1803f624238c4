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
} cj_expr_kind;

typedef struct {
    cj_expr_kind kind;
    cj_op op;           /* CJ_EX_OP only */
    cj_dtype dtype;     /* of the result */
    int nargs;
    int args[3];        /* indices of earlier exprs in the kernel */
    int buffer;         /* CJ_EX_LOAD: index into the plan's buffers */
    cj_affine index;    /* CJ_EX_LOAD, CJ_EX_INDEX */
    double fvalue;      /* CJ_EX_CONST */
    int64_t ivalue;
} cj_expr;

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
} cj_kernel;

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
    int64_t offset;         /* CJ_BUF_TEMP */
    int node;               /* graph node whose value this is */
    int first_use, last_use;/* kernel indices (liveness) */
} cj_buffer;

typedef struct {
    cj_graph *graph;        /* borrowed */
    cj_kernel *kernels;
    int nkernels, kernels_cap;
    cj_buffer *buffers;
    int nbuffers, buffers_cap;
    int64_t arena_bytes;    /* size of the temp arena */
    int64_t argument_bytes, output_bytes, temp_bytes, peak_bytes;
    int *output_buffer;     /* buffer index for each graph output */
} cj_plan;

#endif
