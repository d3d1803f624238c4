/* graph_index.c - the builders of gather and the scatters (indexing at an
 * integer array) and of argsort (their check: graph_check.c).  Index
 * semantics, shared by codegen: a negative index counts from the end;
 * gather clamps an index still out of range, a scatter clamps it or drops
 * its update (the node's `index` attribute). */
#include "graph_priv.h"

#include <stdio.h>
#include <string.h>

/* See graph.h. */
int cj_build_gather(cj_graph *g, int x, int idx, int axis, int loc, cj_error *err) {
    if (g == NULL) return cj_error_set(err, CJ_ERR_INTERNAL, "gather: graph is NULL"), -1;
    CHECK_ID(g, x, "gather", loc, err);
    CHECK_ID(g, idx, "gather", loc, err);
    const cj_node *a = &g->nodes[x], *i = &g->nodes[idx];
    char da[300], di[300];
    if (cj_dtype_kind(i->dtype) != CJ_KIND_INT)
        return fail(g, err, CJ_ERR_TYPE, "gather", loc, "indices must be integers, got %s",
                    describe(i, di, sizeof di));
    if (axis < 0 || axis >= a->shape.rank)
        return fail(g, err, CJ_ERR_VALUE, "gather", loc, "axis %d is out of range for an operand %s", axis,
                    describe(a, da, sizeof da));
    if (a->shape.dims[axis] == 0 && cj_shape_numel(&i->shape) > 0)
        return fail(g, err, CJ_ERR_VALUE, "gather", loc, "cannot index an empty axis: operand %s",
                    describe(a, da, sizeof da));
    cj_shape s;
    if (!cj_indexed_shape(&a->shape, &i->shape, axis, &s))
        return fail(g, err, CJ_ERR_VALUE, "gather", loc, "the result of indexing %s with %s has rank over %d",
                    describe(a, da, sizeof da), describe(i, di, sizeof di), CJ_MAX_RANK);
    cj_attrs at;
    memset(&at, 0, sizeof at);
    at.axis = axis;
    int in[2] = {x, idx};
    return emit(g, CJ_OP_GATHER, a->dtype, a->weak, &s, in, 2, &at, loc, err);
}

/* See graph.h. */
int cj_build_scatter(cj_graph *g, cj_op op, int idx, int upd, int axis, const cj_shape *shape, bool drop, int loc,
                     cj_error *err) {
    const char *name = cj_op_name(op);
    if (g == NULL) return cj_error_set(err, CJ_ERR_INTERNAL, "scatter: graph is NULL"), -1;
    if (!op_valid(op) || cj_op_kind(op) != CJ_OPKIND_SCATTER)
        return cj_error_set(err, CJ_ERR_INTERNAL, "scatter: %s is not a scatter", name), -1;
    CHECK_ID(g, idx, name, loc, err);
    CHECK_ID(g, upd, name, loc, err);
    if (!shape_check(g, name, shape, loc, err)) return -1;
    const cj_node *i = &g->nodes[idx], *u = &g->nodes[upd];
    char di[300], du[300], ds[200], dw[200];
    if (cj_dtype_kind(i->dtype) != CJ_KIND_INT)
        return fail(g, err, CJ_ERR_TYPE, name, loc, "indices must be integers, got %s", describe(i, di, sizeof di));
    if (axis < 0 || axis >= shape->rank)
        return fail(g, err, CJ_ERR_VALUE, name, loc, "axis %d is out of range for a result of shape %s", axis,
                    shape_text(shape, ds, sizeof ds));
    cj_shape want;
    if (!cj_indexed_shape(shape, &i->shape, axis, &want) || want.rank != u->shape.rank ||
        memcmp(want.dims, u->shape.dims, sizeof(int64_t) * (size_t)want.rank) != 0)
        return fail(g, err, CJ_ERR_VALUE, name, loc, "updates %s do not match indices %s into shape %s (want %s)",
                    describe(u, du, sizeof du), describe(i, di, sizeof di), shape_text(shape, ds, sizeof ds),
                    shape_text(&want, dw, sizeof dw));
    if (shape->dims[axis] == 0 && cj_shape_numel(&u->shape) > 0 && !drop)
        return fail(g, err, CJ_ERR_VALUE, name, loc, "cannot update an empty axis of shape %s",
                    shape_text(shape, ds, sizeof ds));
    cj_attrs at;
    memset(&at, 0, sizeof at);
    at.axis = axis;
    at.index = drop ? 1 : 0;
    int in[2] = {idx, upd};
    return emit(g, op, u->dtype, u->weak, shape, in, 2, &at, loc, err);
}

/* See graph.h. */
int cj_build_argsort(cj_graph *g, int x, int loc, cj_error *err) {
    if (g == NULL) return cj_error_set(err, CJ_ERR_INTERNAL, "argsort: graph is NULL"), -1;
    CHECK_ID(g, x, "argsort", loc, err);
    const cj_node *a = &g->nodes[x];
    char da[300];
    if (a->shape.rank < 1)
        return fail(g, err, CJ_ERR_VALUE, "argsort", loc, "needs an axis to sort along: operand %s",
                    describe(a, da, sizeof da));
    return emit(g, CJ_OP_ARGSORT, CJ_INT64, false, &a->shape, &x, 1, NULL, loc, err);
}

/* The int64 index an integer array idx gives into a dim of n (negative from
 * the end), and whether it lies in [0, n): composed of ordinary ops, for the
 * rules of the transformations (autodiff's dropped updates, vmap's merged
 * indices). */
static int wrapped(cj_graph *g, int idx, int64_t n, int loc, cj_error *err) {
    cj_shape scalar = {0, {0}};
    if (g->nodes[idx].dtype == CJ_UINT64) { /* at most n first, so that 2**63 and up stay past the end */
        int cap = emit_constant(g, (double)n, n, CJ_UINT64, false, &scalar, loc, err);
        idx = cap < 0 ? -1 : cj_build_binary(g, CJ_OP_MINIMUM, idx, cap, loc, err);
        if (idx < 0) return -1;
    }
    int x = cj_build_cast(g, idx, CJ_INT64, loc, err);
    if (x < 0 || cj_dtype_unsigned(g->nodes[idx].dtype)) return x;
    int zero = emit_constant(g, 0, 0, CJ_INT64, false, &scalar, loc, err);
    int len = emit_constant(g, (double)n, n, CJ_INT64, false, &scalar, loc, err);
    int neg = zero < 0 ? -1 : cj_build_binary(g, CJ_OP_LT, x, zero, loc, err);
    int up = len < 0 ? -1 : cj_build_binary(g, CJ_OP_ADD, x, len, loc, err);
    return neg < 0 || up < 0 ? -1 : cj_build_select(g, neg, up, x, loc, err);
}

/* See graph.h. */
int cj_build_index_clamped(cj_graph *g, int idx, int64_t n, int loc, cj_error *err) {
    cj_shape scalar = {0, {0}};
    int x = wrapped(g, idx, n, loc, err);
    int lo = emit_constant(g, 0, 0, CJ_INT64, false, &scalar, loc, err);
    int hi = emit_constant(g, (double)(n > 0 ? n - 1 : 0), n > 0 ? n - 1 : 0, CJ_INT64, false, &scalar, loc, err);
    x = x < 0 || lo < 0 ? -1 : cj_build_binary(g, CJ_OP_MAXIMUM, x, lo, loc, err);
    return x < 0 || hi < 0 ? -1 : cj_build_binary(g, CJ_OP_MINIMUM, x, hi, loc, err);
}

/* See graph.h. */
int cj_build_index_in_range(cj_graph *g, int idx, int64_t n, int loc, cj_error *err) {
    cj_shape scalar = {0, {0}};
    int x = wrapped(g, idx, n, loc, err);
    int lo = emit_constant(g, 0, 0, CJ_INT64, false, &scalar, loc, err);
    int len = emit_constant(g, (double)n, n, CJ_INT64, false, &scalar, loc, err);
    int ge = x < 0 || lo < 0 ? -1 : cj_build_binary(g, CJ_OP_GE, x, lo, loc, err);
    int lt = x < 0 || len < 0 ? -1 : cj_build_binary(g, CJ_OP_LT, x, len, loc, err);
    return ge < 0 || lt < 0 ? -1 : cj_build_binary(g, CJ_OP_LOGICAL_AND, ge, lt, loc, err);
}

/* ---- derivatives of the scatters that do not add ---------------------------- */

static int bin(cj_graph *g, cj_op op, int x, int y, int loc, cj_error *err) {
    return x < 0 || y < 0 ? -1 : cj_build_binary(g, op, x, y, loc, err);
}

/* See graph.h. */
int cj_build_scatter_partials(cj_graph *g, const cj_node *scatter, int idx, int upd, int out, int loc, cj_error *err) {
    const cj_node n = *scatter;
    int axis = n.attrs.axis;
    bool drop = n.attrs.index == 1;
    cj_dtype dt = n.dtype;
    cj_shape us, scalar = {0, {0}}; /* the updates' shape (upd itself is not read for an add) */
    if (!cj_indexed_shape(&n.shape, &g->nodes[idx].shape, axis, &us))
        return cj_error_set(err, CJ_ERR_VALUE, "%s: rank too large", cj_op_name(n.op)), -1;
    int one = emit_constant(g, 1, 1, dt, true, &scalar, loc, err), zero = emit_constant(g, 0, 0, dt, true, &scalar, loc, err);
    int w;
    if (n.op == CJ_OP_SCATTER_MIN || n.op == CJ_OP_SCATTER_MAX) {
        /* the updates equal to their index's result win, ties sharing */
        int eq = bin(g, CJ_OP_EQ, cj_build_gather(g, out, idx, axis, loc, err), upd, loc, err);
        int hits = eq < 0 ? -1 : cj_build_cast(g, eq, dt, loc, err);
        int count = hits < 0 ? -1 : cj_build_scatter(g, CJ_OP_SCATTER_ADD, idx, hits, axis, &n.shape, drop, loc, err);
        int shared = count < 0 ? -1 : cj_build_gather(g, bin(g, CJ_OP_MAXIMUM, count, one, loc, err), idx, axis, loc, err);
        w = bin(g, CJ_OP_DIV, hits, shared, loc, err);
    } else if (n.op == CJ_OP_SCATTER_MUL) {
        /* the product of the other updates at the index, zeros counted apart
         * so that no division by zero is needed */
        int z = bin(g, CJ_OP_EQ, upd, zero, loc, err);
        int nz = z < 0 ? -1 : cj_build_scatter(g, CJ_OP_SCATTER_ADD, idx, cj_build_cast(g, z, dt, loc, err), axis, &n.shape,
                                               drop, loc, err);
        int safe = z < 0 ? -1 : cj_build_select(g, z, one, upd, loc, err);
        int prod = safe < 0 ? -1 : cj_build_scatter(g, CJ_OP_SCATTER_MUL, idx, safe, axis, &n.shape, drop, loc, err);
        int gz = nz < 0 ? -1 : cj_build_gather(g, nz, idx, axis, loc, err);
        int gp = prod < 0 ? -1 : cj_build_gather(g, prod, idx, axis, loc, err);
        int if_zero = bin(g, CJ_OP_EQ, gz, one, loc, err), if_not = bin(g, CJ_OP_EQ, gz, zero, loc, err);
        int a = if_zero < 0 ? -1 : cj_build_select(g, if_zero, gp, zero, loc, err);
        int b = if_not < 0 ? -1 : cj_build_select(g, if_not, bin(g, CJ_OP_DIV, gp, safe, loc, err), zero, loc, err);
        w = z < 0 || a < 0 || b < 0 ? -1 : cj_build_select(g, z, a, b, loc, err);
    } else {
        w = cj_build_broadcast(g, one, &us, loc, err);
    }
    if (w < 0 || !drop) return w;
    /* a dropped update changed nothing */
    cj_shape ms = us;
    int ir = g->nodes[idx].shape.rank;
    for (int d = 0; d < ms.rank; d++)
        if (d < axis || d >= axis + ir) ms.dims[d] = 1;
    int ok = cj_build_reshape(g, cj_build_index_in_range(g, idx, n.shape.dims[axis], loc, err), &ms, loc, err);
    return ok < 0 ? -1 : cj_build_select(g, ok, w, zero, loc, err);
}
