/* graph.h - the traced computation: nodes in topological order.
 *
 * Nodes are appended by the builders below, which infer shape and dtype,
 * make broadcasting and promotion explicit, and report bad input through
 * cj_error with the op, the operand shapes and dtypes and the user's
 * source line. */
#ifndef CJ_GRAPH_H
#define CJ_GRAPH_H

#include "cj.h"

typedef enum {
#define OP(name, kind, text, arity, flags, cost, identity, attrs, doc) CJ_OP_##name,
#include "ops.def"
#undef OP
    CJ_NUM_OPS
} cj_op;

typedef enum {
    CJ_OPKIND_SOURCE, CJ_OPKIND_UNARY, CJ_OPKIND_BINARY, CJ_OPKIND_COMPARE,
    CJ_OPKIND_SELECT, CJ_OPKIND_TERNARY, CJ_OPKIND_CAST, CJ_OPKIND_MOVE, CJ_OPKIND_CONCAT,
    CJ_OPKIND_REDUCE, CJ_OPKIND_MATMUL,
    CJ_OPKIND_GATHER, CJ_OPKIND_SCATTER, /* indexing at an integer array (graph_index.c) */
    CJ_OPKIND_SORT,     /* argsort: a kernel the runtime runs (sort_rt.c) */
    CJ_OPKIND_LINALG,   /* Cholesky, triangular solve: LAPACK/BLAS calls (linalg_rt.c) */
    CJ_OPKIND_REGION    /* control flow: scan, while, cond and their results (regions.h) */
} cj_opkind;

/* Op flags (the flags column of ops.def, which says what each means). */
enum {
    CJ_OPF_LONG_MATH = 1 << 0,
    CJ_OPF_FLOAT_MATH = 1 << 1,
    CJ_OPF_IDENTITY = 1 << 2,
    CJ_OPF_ZERO_GRAD = 1 << 3,
    CJ_OPF_BITS = 1 << 4,
};

/* The flags of an elementwise unary record (ops_unary.def), from its
 * dtype rule, its derivative and its CPU code: ops.def's OP line of it. */
#define CJ_UNARY_FLAGS(dtypes, derivative, cpu) (CJ_UF_##dtypes | CJ_UF_##derivative | CJ_UF_##cpu)
#define CJ_UF_FLOAT CJ_OPF_FLOAT_MATH
#define CJ_UF_SAME 0
#define CJ_UF_NOBOOL(message) 0
#define CJ_UF_ROUND 0
#define CJ_UF_TEST(value) 0
#define CJ_UF_LOGIC 0
#define CJ_UF_BITS CJ_OPF_BITS
#define CJ_UF_D(...) 0
#define CJ_UF_ZERO CJ_OPF_ZERO_GRAD
#define CJ_UF_MATH(f) CJ_OPF_LONG_MATH
#define CJ_UF_INTRINSIC(name) 0
#define CJ_UF_IR(fn) 0

/* What a reduction's output starts from (the identity column of ops.def). */
typedef enum {
    CJ_IDENTITY_NONE,    /* not a reduction */
    CJ_IDENTITY_ZERO,
    CJ_IDENTITY_ONE,
    CJ_IDENTITY_LOWEST,  /* -inf, the smallest int, false */
    CJ_IDENTITY_HIGHEST, /* +inf, the largest int, true */
} cj_identity;

/* The node fields an op uses (the attrs column of ops.def): one bit per
 * cj_attrs field, and three for node fields the caller gives instead of
 * the builder inferring them. */
enum {
    CJ_ATTR_FVALUE = 1 << 0,
    CJ_ATTR_IVALUE = 1 << 1,
    CJ_ATTR_AXIS = 1 << 2,
    CJ_ATTR_AXES = 1 << 3,
    CJ_ATTR_PERM = 1 << 4,
    CJ_ATTR_START = 1 << 5,
    CJ_ATTR_STEP = 1 << 6,
    CJ_ATTR_INDEX = 1 << 7,
    CJ_ATTR_NAME = 1 << 8,
    CJ_ATTR_SHAPE = 1 << 9,  /* the node's shape */
    CJ_ATTR_DTYPE = 1 << 10, /* the node's dtype */
    CJ_ATTR_WEAK = 1 << 11,  /* the node's weak flag */
};

/* The op table's columns (an invalid op reads as a SOURCE with no facts). */
const char *cj_op_name(cj_op op);
cj_opkind cj_op_kind(cj_op op);
bool cj_op_from_name(const char *name, cj_op *out);
/* How many inputs a node of op has; -1: any number (a CONCAT node: 2 or more). */
int cj_op_arity(cj_op op);
unsigned cj_op_flags(cj_op op);
bool cj_op_has_flag(cj_op op, unsigned flag);
/* Work per element in a fused loop body (arithmetic 1, long math 4). */
int cj_op_cost(cj_op op);
cj_identity cj_op_identity(cj_op op);
unsigned cj_op_attrs(cj_op op);
/* The semantics column, one line for the reader ("" for an invalid op). */
const char *cj_op_doc(cj_op op);
/* "unary", "binary", ...: the kind as the op table names it. */
const char *cj_opkind_name(cj_opkind kind);
/* The identity a reduction op starts from, in dtype dt: the value as a
 * double (float dtypes) and as an int64 (int and bool dtypes).  The one
 * place both the runtime's fill and the GPU init kernels take it from.
 * Returns false (zeros written) for an op that is not a reduction. */
bool cj_reduce_identity(cj_op op, cj_dtype dt, double *fvalue, int64_t *ivalue);

/* Attributes; which fields matter depends on the op (ops.def's attrs column). */
typedef struct {
    double fvalue;                  /* CONSTANT of a float dtype */
    int64_t ivalue;                 /* CONSTANT of an int or bool dtype */
    int axis;                       /* IOTA, CONCATENATE */
    uint32_t axes;                  /* REDUCE_*: bit d = input dim d reduced */
    int perm[CJ_MAX_RANK];          /* TRANSPOSE */
    int64_t start[CJ_MAX_RANK];     /* SLICE */
    int64_t step[CJ_MAX_RANK];      /* SLICE (nonzero, may be negative) */
    int index;                      /* PARAM, ARRAY: slot number */
    const char *name;               /* NAME: arena string */
} cj_attrs;

typedef struct {
    cj_op op;
    cj_dtype dtype;
    bool weak;          /* a Python scalar: yields to the other operand's dtype */
    cj_shape shape;
    int ninputs;
    int *inputs;        /* node ids, all smaller than this node's id */
    int loc;            /* source location id (cj_graph.locs), -1 if unknown */
    cj_attrs attrs;
    int region;         /* innermost checkpoint region it was traced in, 0: none */
    int remat;          /* 0: a value as traced; k > 0: a copy recomputed for the
                         * backward pass, in generation k (CSE merges nodes of one
                         * generation only: a copy never folds back into the
                         * forward value, nor into a copy made at another time) */
} cj_node;

/* What a checkpoint region keeps for the backward pass (remat policy). */
typedef enum {
    CJ_SAVE_NOTHING,            /* recompute everything from the region's inputs */
    CJ_SAVE_EVERYTHING,         /* no recomputation */
    CJ_SAVE_DOTS,               /* keep matmul results, recompute the rest */
    CJ_SAVE_ONLY_NAMES,         /* keep values named by checkpoint_name in `names` */
    CJ_SAVE_ALL_EXCEPT_NAMES,   /* keep everything but the values named in `names` */
} cj_save_policy;

typedef struct {
    int parent;                 /* enclosing region, 0: none */
    cj_save_policy policy;
    const char **names;         /* arena */
    int nnames;
} cj_region;

typedef struct {
    cj_arena arena;     /* inputs arrays, strings */
    cj_node *nodes;     /* malloc'd, grows */
    int nnodes, cap;
    int nparams;        /* PARAM slots 0..nparams-1 */
    int narrays;        /* ARRAY slots 0..narrays-1 */
    int *outputs;       /* arena; set by cj_graph_set_outputs */
    int noutputs;
    const char **locs;  /* "file:line" strings, malloc'd array of arena strings */
    int nlocs, locs_cap;
    cj_region *regions; /* malloc'd; regions[0] is "no region" */
    int nregions, regions_cap;
    int current_region; /* new nodes belong to it */
    bool *force_remat;  /* malloc'd, by node id (may be shorter than nnodes or NULL):
                         * recompute these in any backward pass (memory_budget) */
    int nforce_remat;
    int backward_start; /* first node appended by a vjp, or -1 */
    struct cj_body **bodies; /* malloc'd: the sub-graphs of control-flow nodes (regions.h),
                              * each held by a reference; a node's attrs.index names one */
    int nbodies, bodies_cap;
} cj_graph;

cj_graph *cj_graph_new(void);             /* NULL when out of memory */
void cj_graph_free(cj_graph *g);
/* Bytes of heap the graph holds (nodes, locations, regions, arena). */
int64_t cj_graph_heap_bytes(const cj_graph *g);
/* Gives back the unused capacity of the node array (for a graph that is
 * kept but no longer grows, such as an executable's copy). */
void cj_graph_trim(cj_graph *g);
/* Interns a "file:line" string and returns its id, -1 on failure. */
int cj_graph_loc(cj_graph *g, const char *file_line);
const char *cj_graph_loc_str(const cj_graph *g, int loc); /* "?" if unknown */
cj_status cj_graph_set_outputs(cj_graph *g, const int *ids, int n, cj_error *err);
/* g's outputs are src's, each through remap (src node id -> g node id):
 * how a pass that rebuilds a graph node by node finishes it. */
cj_status cj_graph_set_outputs_mapped(cj_graph *g, const cj_graph *src, const int *remap, cj_error *err);

/* Opens a checkpoint region inside the current one; nodes built until
 * cj_graph_region_end belong to it.  names are copied.  Returns its id
 * (>= 1) or -1 with err set. */
int cj_graph_region_begin(cj_graph *g, cj_save_policy policy, const char *const *names, int nnames,
                          cj_error *err);
/* Closes region `id` (the current one), making its parent current again. */
void cj_graph_region_end(cj_graph *g, int id);

/* Appends a node exactly as given (proto->inputs is copied).  Checks that
 * the inputs exist and agree with the op; infers nothing.  Returns the new
 * id, or -1 with err set.  Most code wants the builders below. */
int cj_graph_append(cj_graph *g, const cj_node *proto, cj_error *err);

/* Builders: each returns a node id, or -1 with err set (op name, shapes,
 * dtypes and source location in the message).  `loc` is a location id. */
int cj_build_param(cj_graph *g, const cj_shape *s, cj_dtype dt, bool weak, int loc, cj_error *err);
int cj_build_array(cj_graph *g, const cj_shape *s, cj_dtype dt, int loc, cj_error *err);
int cj_build_constant(cj_graph *g, double fvalue, int64_t ivalue, cj_dtype dt, bool weak,
                      const cj_shape *s, int loc, cj_error *err);
int cj_build_iota(cj_graph *g, const cj_shape *s, int axis, cj_dtype dt, int loc, cj_error *err);
/* Unary elementwise; promotes ints/bools to float64 for the float math ops. */
int cj_build_unary(cj_graph *g, cj_op op, int x, int loc, cj_error *err);

/* An elementwise unary op's record (ops_unary.def; its data in ops.c):
 * what the builder, the node check, the derivative rules and the Python
 * names take from it (its code: codegen_unary.c). */
typedef enum {
    CJ_UDT_FLOAT, CJ_UDT_SAME, CJ_UDT_NOBOOL, CJ_UDT_ROUND, CJ_UDT_TEST, CJ_UDT_LOGIC, CJ_UDT_BITS
} cj_unary_dtypes;
/* The forward values a derivative reads (the backward pass keeps them). */
enum {
    CJ_VJP_READS_X = 1 << 0,   /* the first input */
    CJ_VJP_READS_Y = 1 << 1,   /* the second input */
    CJ_VJP_READS_OUT = 1 << 2, /* the op's own value */
};
typedef struct {
    cj_unary_dtypes dtypes;
    int test_value;          /* TEST: the result for an int or bool operand */
    const char *bool_error;  /* NOBOOL: the message for a bool operand */
    bool derivative;         /* false: ZERO */
    unsigned reads;          /* the forward values the derivative reads (CJ_VJP_READS_X, _OUT) */
    const char *numpy, *lax; /* public names, "" for none */
    const char *doc;         /* the semantics column */
} cj_unary_info;
/* The record of op, or NULL when op is not an elementwise unary op. */
const cj_unary_info *cj_unary(cj_op op);
/* op's derivative at x (with value out) times gv, the tangent or cotangent:
 * the record's D(...) expression built after the graph's last node
 * (graph_grad.c).  Returns the node, or -1 (err set) when building fails
 * or op has none. */
int cj_unary_derivative(cj_graph *g, cj_op op, int gv, int x, int out, int loc, cj_error *err);
int cj_build_cast(cj_graph *g, int x, cj_dtype dt, int loc, cj_error *err);
/* The bits of x read as dt, which must have x's width (not bool). */
int cj_build_bitcast(cj_graph *g, int x, cj_dtype dt, int loc, cj_error *err);
/* Binary and compare ops with NumPy broadcasting and NEP 50 promotion. */
int cj_build_binary(cj_graph *g, cj_op op, int x, int y, int loc, cj_error *err);
int cj_build_select(cj_graph *g, int cond, int x, int y, int loc, cj_error *err);
int cj_build_fma(cj_graph *g, int x, int y, int z, int loc, cj_error *err);
int cj_build_broadcast(cj_graph *g, int x, const cj_shape *to, int loc, cj_error *err);
int cj_build_reshape(cj_graph *g, int x, const cj_shape *to, int loc, cj_error *err);
int cj_build_transpose(cj_graph *g, int x, const int *perm, int loc, cj_error *err);
/* start/stop/step per dim, already normalized by the caller to valid
 * Python slice semantics (stop exclusive, may be -1 for negative steps). */
int cj_build_slice(cj_graph *g, int x, const int64_t *start, const int64_t *stop,
                   const int64_t *step, int loc, cj_error *err);
int cj_build_concatenate(cj_graph *g, const int *xs, int n, int axis, int loc, cj_error *err);
/* axes: bit mask of input dims; the result drops them. */
int cj_build_reduce(cj_graph *g, cj_op op, int x, uint32_t axes, int loc, cj_error *err);
/* NumPy matmul on rank >= 1 operands (1-D promoted and squeezed as NumPy does). */
int cj_build_matmul(cj_graph *g, int x, int y, int loc, cj_error *err);
int cj_build_name(cj_graph *g, int x, const char *name, int loc, cj_error *err);
/* x[..., idx, ...]: dim `axis` of x indexed by the integer array idx (a
 * negative index counts from the end, an out-of-range one is clamped). */
int cj_build_gather(cj_graph *g, int x, int idx, int axis, int loc, cj_error *err);
/* A SCATTER_* op: the identity of `shape` (ops.def) with each row of upd
 * combined in at idx along `axis`; upd has shape[:axis] + idx.shape +
 * shape[axis+1:] and the result's dtype; drop: an out-of-range index's
 * update is dropped (else clamped). */
int cj_build_scatter(cj_graph *g, cj_op op, int idx, int upd, int axis, const cj_shape *shape, bool drop, int loc,
                     cj_error *err);
/* The lower Cholesky factor of each matrix of a (..., n, n) float array. */
int cj_build_cholesky(cj_graph *g, int a, int loc, cj_error *err);
/* Flags of a triangular solve (the node's `index`). */
enum { CJ_TRI_LOWER = 1, CJ_TRI_TRANSPOSE = 2, CJ_TRI_UNIT = 4 };
/* x with op(a) x = b for a (..., n, n) triangular and b (..., n, k) of one
 * float dtype and the same batch dims; flags CJ_TRI_*. */
int cj_build_triangular_solve(cj_graph *g, int a, int b, int flags, int loc, cj_error *err);
/* Pieces of the linear algebra derivative rules (graph_linalg.c): x with
 * its last two dims swapped; x's lower (upper) triangle, without the
 * diagonal when strict; and Phi(x), the lower triangle with its diagonal
 * halved. */
int cj_build_swap_last(cj_graph *g, int x, int loc, cj_error *err);

/* graph_grad.c: composites the derivative rules share (-1 in gives -1).
 * v (a reduction over `axes` of a value of shape in) reshaped with those
 * dims kept as 1 and broadcast back to in; */
int cj_build_expand_reduced(cj_graph *g, int v, const cj_shape *in, uint32_t axes, int loc, cj_error *err);
/* ct summed down to shape in, undoing NumPy broadcasting; */
int cj_build_unbroadcast(cj_graph *g, int ct, const cj_shape *in, int loc, cj_error *err);
/* the elements of ct along dim k put at positions start, start + step, ...
 * of a dim of length len, zeros elsewhere (the VJP of a slice). */
int cj_build_unslice_dim(cj_graph *g, int ct, int k, int64_t len, int64_t start, int64_t step, int loc,
                         cj_error *err);
int cj_build_triangle(cj_graph *g, int x, bool lower, bool strict, int loc, cj_error *err);
int cj_build_phi(cj_graph *g, int x, int loc, cj_error *err);
/* The reverse-mode rules of the two ops (autodiff.c calls them): a's and
 * b's cotangents of x = op(a)^-1 b given x's (ga NULL: only b's), and A's
 * of L = chol(A) given L's. */
cj_status cj_build_triangular_solve_vjp(cj_graph *g, int a, int x, int ct, int flags, int *ga, int *gb, int loc,
                                        cj_error *err);
int cj_build_cholesky_vjp(cj_graph *g, int L, int ct, int loc, cj_error *err);
/* LU with partial pivoting of each (..., n, n) float matrix: the packed
 * factors (pivots false) or the int64 row order (pivots true); their
 * forward- and reverse-mode rules, given a, the factors and da or the
 * factors' cotangent. */
int cj_build_lu(cj_graph *g, int a, bool pivots, int loc, cj_error *err);
/* Result `index` of the QR, EIGH or SVD of each (..., m, n) float matrix
 * (ops.def says what each index names). */
int cj_build_decomp(cj_graph *g, cj_op op, int a, int index, int loc, cj_error *err);
/* Their derivative rules (graph_linalg_decomp_ad.c): the tangent of result
 * `index` given a's tangent da, and a's cotangent given that result's ct.
 * The results without a rule (complete QR of a tall matrix, SVD's U or
 * Vt full and non-square) are CJ_ERR_VALUE. */
int cj_build_decomp_jvp(cj_graph *g, cj_op op, int a, int index, int da, int loc, cj_error *err);
int cj_build_decomp_vjp(cj_graph *g, cj_op op, int a, int index, int ct, int loc, cj_error *err);
int cj_build_lu_jvp(cj_graph *g, int a, int lu, int da, int loc, cj_error *err);
int cj_build_lu_vjp(cj_graph *g, int a, int lu, int ct, int loc, cj_error *err);
/* The int64 indices that sort each row of x along its last axis (stable;
 * nan after every number, as NumPy). */
int cj_build_argsort(cj_graph *g, int x, int loc, cj_error *err);
/* The int64 index idx gives into a dim of n, as gather reads it (negative
 * from the end, then clamped into range); and whether it is in range (bool). */
int cj_build_index_clamped(cj_graph *g, int idx, int64_t n, int loc, cj_error *err);
int cj_build_index_in_range(cj_graph *g, int idx, int64_t n, int loc, cj_error *err);
/* For a float scatter like node `scatter`, on indices idx and updates upd
 * with result out (the forward values, perhaps recomputed copies):
 * d out[idx[k]] / d upd[k] at every update, of upd's shape (1 for an add,
 * the winners' share for min/max, the product of the others for mul; 0
 * where one was dropped). */
int cj_build_scatter_partials(cj_graph *g, const cj_node *scatter, int idx, int upd, int out, int loc, cj_error *err);

/* NumPy result type of two operands, NEP 50 weak scalars included. */
cj_dtype cj_promote(cj_dtype a, bool a_weak, cj_dtype b, bool b_weak, bool *weak_out);
/* The result dtype of n operands (NEP 50), and whether it is weak: the one
 * definition of promotion, which cjit.numpy asks for (_cjit.result_type). */
cj_dtype cj_promote_all(const cj_dtype *dts, const bool *weak, int n, bool *weak_out);

/* One op a line: "%3 = add(%1, %2) : float32[4,5]   # file.py:12". Caller frees. */
char *cj_graph_to_text(const cj_graph *g);

#endif
