/* graph_shape.c - the builders of movement ops: broadcast, reshape,
 * transpose, slice and concatenate.  See graph.c. */
#include "graph_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- builders: movement ------------------------------------------------ */

/* Appends NumPy broadcast_to(x, to).  Returns x itself when the shape is
 * already `to`; a constant is re-created at the new shape. */
int cj_build_broadcast(cj_graph *g, int x, const cj_shape *to, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "broadcast: graph is NULL"), -1;
    CHECK_ID(g, x, "broadcast", loc, err);
    if (!shape_check(g, "broadcast", to, loc, err))
        return -1;
    cj_node n = g->nodes[x];
    if (!broadcastable_to(&n.shape, to)) {
        char d[300], sh[256];
        return fail(g, err, CJ_ERR_VALUE, "broadcast", loc, "operand %s cannot be broadcast to shape %s",
                    describe(&n, d, sizeof d), shape_text(to, sh, sizeof sh));
    }
    return coerce(g, "broadcast", x, n.dtype, to, loc, err);
}

/* Appends x reshaped to `to` (same element count, row-major).  Returns x
 * itself when nothing changes. */
int cj_build_reshape(cj_graph *g, int x, const cj_shape *to, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "reshape: graph is NULL"), -1;
    CHECK_ID(g, x, "reshape", loc, err);
    if (!shape_check(g, "reshape", to, loc, err))
        return -1;
    cj_node n = g->nodes[x];
    if (cj_shape_numel(&n.shape) != cj_shape_numel(to)) {
        char d[300], sh[256];
        return fail(g, err, CJ_ERR_VALUE, "reshape", loc, "cannot reshape array of size %lld into shape %s (operand %s)",
                    (long long)cj_shape_numel(&n.shape), shape_text(to, sh, sizeof sh),
                    describe(&n, d, sizeof d));
    }
    if (cj_shape_equal(&n.shape, to))
        return x;
    if (n.op == CJ_OP_CONSTANT)
        return emit_constant(g, n.attrs.fvalue, n.attrs.ivalue, n.dtype, n.weak, to, loc, err);
    return emit(g, CJ_OP_RESHAPE, n.dtype, n.weak, to, &x, 1, NULL, loc, err);
}

/* Appends the transpose of x: output dim d is input dim perm[d] (perm has
 * rank entries).  Returns x itself for the identity permutation. */
int cj_build_transpose(cj_graph *g, int x, const int *perm, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "transpose: graph is NULL"), -1;
    CHECK_ID(g, x, "transpose", loc, err);
    cj_node n = g->nodes[x];
    int rank = n.shape.rank;
    if (perm == NULL && rank > 0)
        return fail(g, err, CJ_ERR_INTERNAL, "transpose", loc, "perm is NULL");
    char d[300];
    bool seen[CJ_MAX_RANK] = {false};
    bool identity = true;
    cj_attrs a;
    memset(&a, 0, sizeof a);
    cj_shape out = {.rank = rank};
    for (int i = 0; i < rank; i++) {
        int p = perm[i];
        if (p < 0 || p >= rank)
            return fail(g, err, CJ_ERR_VALUE, "transpose", loc, "axis %d is out of bounds for array of dimension %d (operand %s)",
                        p, rank, describe(&n, d, sizeof d));
        if (seen[p])
            return fail(g, err, CJ_ERR_VALUE, "transpose", loc, "repeated axis %d in perm (operand %s)", p,
                        describe(&n, d, sizeof d));
        seen[p] = true;
        identity = identity && p == i;
        a.perm[i] = p;
        out.dims[i] = n.shape.dims[p];
    }
    if (identity)
        return x;
    if (n.op == CJ_OP_CONSTANT)
        return emit_constant(g, n.attrs.fvalue, n.attrs.ivalue, n.dtype, n.weak, &out, loc, err);
    return emit(g, CJ_OP_TRANSPOSE, n.dtype, n.weak, &out, &x, 1, &a, loc, err);
}

/* Appends x[start:stop:step] per dim, with the values Python's
 * slice.indices(n) gives (so 0 <= start, stop <= n for positive steps and
 * -1 <= start, stop <= n - 1 for negative ones).  Returns x itself when the
 * slice takes everything in order. */
int cj_build_slice(cj_graph *g, int x, const int64_t *start, const int64_t *stop, const int64_t *step,
                   int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "slice: graph is NULL"), -1;
    CHECK_ID(g, x, "slice", loc, err);
    cj_node n = g->nodes[x];
    int rank = n.shape.rank;
    if (rank > 0 && (start == NULL || stop == NULL || step == NULL))
        return fail(g, err, CJ_ERR_INTERNAL, "slice", loc, "start/stop/step is NULL");
    char d[300];
    cj_attrs a;
    memset(&a, 0, sizeof a);
    cj_shape out = {.rank = rank};
    bool identity = true;
    for (int i = 0; i < rank; i++) {
        int64_t dim = n.shape.dims[i], b = start[i], e = stop[i], s = step[i], len;
        if (s == 0)
            return fail(g, err, CJ_ERR_VALUE, "slice", loc, "slice step cannot be zero (dimension %d of operand %s)", i,
                        describe(&n, d, sizeof d));
        bool ok = s > 0 ? (b >= 0 && b <= dim && e >= 0 && e <= dim)
                        : (b >= -1 && b <= dim - 1 && e >= -1 && e <= dim - 1);
        if (!ok)
            return fail(g, err, CJ_ERR_VALUE, "slice", loc,
                        "start %lld, stop %lld, step %lld is not a normalized slice of dimension %d "
                        "(size %lld) of operand %s",
                        (long long)b, (long long)e, (long long)s, i, (long long)dim, describe(&n, d, sizeof d));
        /* len(range(b, e, s)); unsigned arithmetic because |s| may be 2**63 */
        if (s > 0)
            len = b < e ? (int64_t)((uint64_t)(e - b - 1) / (uint64_t)s) + 1 : 0;
        else
            len = b > e ? (int64_t)((uint64_t)(b - e - 1) / (0 - (uint64_t)s)) + 1 : 0;
        out.dims[i] = len;
        a.start[i] = len > 0 ? b : 0;
        a.step[i] = len > 1 ? s : 1; /* the step of a 0- or 1-long slice never matters */
        identity = identity && len == dim && a.start[i] == 0 && a.step[i] == 1;
    }
    if (identity)
        return x;
    if (n.op == CJ_OP_CONSTANT)
        return emit_constant(g, n.attrs.fvalue, n.attrs.ivalue, n.dtype, n.weak, &out, loc, err);
    return emit(g, CJ_OP_SLICE, n.dtype, n.weak, &out, &x, 1, &a, loc, err);
}

/* Appends xs[0..n) joined along `axis` (already in [0, rank)), promoting
 * dtypes as NumPy does: one CONCATENATE node with n inputs; a single
 * input is returned as is. */
int cj_build_concatenate(cj_graph *g, const int *xs, int n, int axis, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "concatenate: graph is NULL"), -1;
    if (n < 1 || xs == NULL)
        return fail(g, err, CJ_ERR_VALUE, "concatenate", loc, "need at least one array to concatenate");
    for (int i = 0; i < n; i++)
        CHECK_ID(g, xs[i], "concatenate", loc, err);
    const cj_node *first = &g->nodes[xs[0]];
    int rank = first->shape.rank;
    char d0[300], di[300];
    if (rank == 0)
        return fail(g, err, CJ_ERR_VALUE, "concatenate", loc, "zero-dimensional arrays cannot be concatenated (operand %s)",
                    describe(first, d0, sizeof d0));
    if (axis < 0 || axis >= rank)
        return fail(g, err, CJ_ERR_VALUE, "concatenate", loc, "axis %d is out of bounds for array of dimension %d", axis,
                    rank);
    cj_dtype dt = first->dtype;
    bool weak = first->weak;
    int64_t total = first->shape.dims[axis];
    for (int i = 1; i < n; i++) {
        const cj_node *xi = &g->nodes[xs[i]];
        if (xi->shape.rank != rank)
            return fail(g, err, CJ_ERR_VALUE, "concatenate", loc,
                        "all the input arrays must have the same number of dimensions, but the array at "
                        "index 0 is %s and the array at index %d is %s",
                        describe(first, d0, sizeof d0), i, describe(xi, di, sizeof di));
        for (int d = 0; d < rank; d++) {
            if (d != axis && xi->shape.dims[d] != first->shape.dims[d])
                return fail(g, err, CJ_ERR_VALUE, "concatenate", loc,
                            "all the input array dimensions except for the concatenation axis must match "
                            "exactly, but along dimension %d, the array at index 0 is %s and the array at "
                            "index %d is %s",
                            d, describe(first, d0, sizeof d0), i, describe(xi, di, sizeof di));
        }
        if (__builtin_add_overflow(total, xi->shape.dims[axis], &total))
            return fail(g, err, CJ_ERR_VALUE, "concatenate", loc, "the result is too big");
        bool w;
        dt = cj_promote(dt, weak, xi->dtype, xi->weak, &w);
        weak = w;
    }
    cj_shape out = first->shape;
    out.dims[axis] = total;
    if (!shape_check(g, "concatenate", &out, loc, err))
        return -1;
    if (n == 1)
        return xs[0];
    cj_attrs a;
    memset(&a, 0, sizeof a);
    a.axis = axis;
    /* one node reading every input (after promotion), so that each input is
     * copied once into its slab of the result */
    int *ins = malloc(sizeof(int) * (size_t)n);
    if (ins == NULL)
        return fail(g, err, CJ_ERR_MEMORY, "concatenate", loc, "out of memory");
    for (int i = 0; i < n; i++) {
        cj_shape own = g->nodes[xs[i]].shape;
        if ((ins[i] = coerce(g, "concatenate", xs[i], dt, &own, loc, err)) < 0) {
            free(ins);
            return -1;
        }
    }
    int id = emit(g, CJ_OP_CONCATENATE, dt, weak, &out, ins, n, &a, loc, err);
    free(ins);
    return id;
}
