/* graph_priv.h - helpers shared by the files of the graph (ops.c, graph.c,
 * graph_build.c, graph_shape.c, graph_reduce.c, graph_text.c, graph_check.c
 * and the family builders); no other file includes it.  The functions are
 * defined in graph.c unless said otherwise. */
#ifndef CJ_GRAPH_PRIV_H
#define CJ_GRAPH_PRIV_H

#include "graph.h"

static inline bool op_valid(cj_op op)
{
    return (int)op >= 0 && op < CJ_NUM_OPS;
}

static inline bool is_float(cj_dtype dt) { return cj_dtype_kind(dt) == CJ_KIND_FLOAT; }

static inline bool dtype_ok(cj_dtype dt) { return (int)dt >= 0 && dt < CJ_NUM_DTYPES; }

/* The dtype a weak scalar of this kind takes on its own (NumPy's defaults). */
static inline cj_dtype kind_default(cj_kind k)
{
    return cj_dtype_canon(k == CJ_KIND_FLOAT ? CJ_FLOAT64 : k == CJ_KIND_INT ? CJ_INT64 : CJ_BOOL);
}

static inline bool node_ok(const cj_graph *g, int id) { return id >= 0 && id < g->nnodes; }

/* "(2, 3) float32": how error messages name an operand. */
const char *describe(const cj_node *n, char *buf, size_t size);
/* "(2, 3)" */
const char *shape_text(const cj_shape *s, char *buf, size_t size);
/* Records "<opname>: <message> (at file:line)" in err; returns -1 so that
 * builders can `return fail(...)`. */
int fail(const cj_graph *g, cj_error *err, cj_status status, const char *opname, int loc,
         const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Checks rank, dims and element count of a shape given by a caller. */
bool shape_check(const cj_graph *g, const char *opname, const cj_shape *s, int loc, cj_error *err);
/* NumPy broadcasting of two shapes; false if they are incompatible. */
bool broadcast_shapes(const cj_shape *a, const cj_shape *b, cj_shape *out);
/* True when `from` can be broadcast to `to` (NumPy broadcast_to). */
bool broadcastable_to(const cj_shape *from, const cj_shape *to);

/* Appends a node built from parts (inputs copied; attrs may be NULL). */
int emit(cj_graph *g, cj_op op, cj_dtype dt, bool weak, const cj_shape *s, const int *inputs, int ninputs,
         const cj_attrs *attrs, int loc, cj_error *err);
/* Builder prologue: the node id must exist. */
#define CHECK_ID(g, id, opname, loc, err)                                                        \
    do {                                                                                         \
        if (!node_ok((g), (id)))                                                                 \
            return fail((g), (err), CJ_ERR_INTERNAL, (opname), (loc), "node %d does not exist",  \
                        (id));                                                           \
    } while (0)

/* Constant node c's value at dtype dt with C cast rules; false when C
 * leaves it undefined (then a CAST node must do it). */
bool const_convert(const cj_node *c, cj_dtype dt, double *f, int64_t *i);
/* A CONSTANT node of the given dtype and shape (no shape checks). */
int emit_constant(cj_graph *g, double f, int64_t i, cj_dtype dt, bool weak, const cj_shape *s, int loc,
                  cj_error *err);
/* Node x converted to dtype dt and broadcast to shape s (x itself, a
 * re-created constant, or CAST and/or BROADCAST nodes); see graph.c. */
int coerce(cj_graph *g, const char *opname, int x, cj_dtype dt, const cj_shape *s, int loc, cj_error *err);

/* graph_check.c: graph.c's checks of the families' nodes, NULL when the
 * node is consistent: a REGION-kind node against its body, ... */
const char *cj_region_check(const cj_graph *g, const cj_node *n);
/* ... a GATHER, SCATTER or ARGSORT node, ... */
const char *cj_index_check(const cj_graph *g, const cj_node *n);
/* ... a CHOLESKY, LU, LU_PIVOTS or TRIANGULAR_SOLVE node, ... */
const char *cj_linalg_check(const cj_graph *g, const cj_node *n);
/* ... a QR, EIGH or SVD node. */
const char *cj_linalg_decomp_check(const cj_graph *g, const cj_node *n);
/* The shapes the families make: x[:axis] + idx + x[axis+1:] (false past the
 * rank limit), and result `index` of a factorization op of a matrix of
 * shape a (false when index names none). */
bool cj_indexed_shape(const cj_shape *x, const cj_shape *idx, int axis, cj_shape *out);
bool cj_decomp_shape(cj_op op, const cj_shape *a, int64_t index, cj_shape *out);
/* Square matrices in the last two dims. */
static inline bool is_square(const cj_shape *s) { return s->rank >= 2 && s->dims[s->rank - 1] == s->dims[s->rank - 2]; }

#endif
