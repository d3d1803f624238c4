/* graph_linalg_decomp.c - the builder of the factorizations with several
 * results (QR, the symmetric eigensolver, the SVD; one op each, `index`
 * naming the result) and the check graph.c makes of their nodes. */
#include "graph_priv.h"

#include <string.h>

/* The shape of result `index` of op on a matrix of shape a, false when
 * index names none. */
static bool decomp_shape(cj_op op, const cj_shape *a, int64_t index, cj_shape *out) {
    int r = a->rank;
    if (r < 2) return false;
    int64_t m = a->dims[r - 2], n = a->dims[r - 1], k = m < n ? m : n;
    *out = *a;
    if (op == CJ_OP_QR) {
        if (index & ~3) return false;
        bool complete = index & 2;
        if (index & 1) out->dims[r - 2] = complete ? m : k;
        else out->dims[r - 1] = complete ? m : k;
        return true;
    }
    if (op == CJ_OP_EIGH) {
        if (m != n || index < 0 || index > 1) return false;
        if (index == 0) out->rank--;
        return true;
    }
    if (index & ~7 || (index & 3) == 3) return false;
    bool full = index & 4;
    switch (index & 3) {
    case 0: out->rank--, out->dims[r - 2] = k; break;
    case 1: out->dims[r - 1] = full ? m : k; break;
    default: out->dims[r - 2] = full ? n : k; break;
    }
    return true;
}

/* See graph.h. */
int cj_build_decomp(cj_graph *g, cj_op op, int a, int index, int loc, cj_error *err) {
    const char *name = cj_op_name(op);
    if (g == NULL) return cj_error_set(err, CJ_ERR_INTERNAL, "decomposition: graph is NULL"), -1;
    CHECK_ID(g, a, name, loc, err);
    const cj_node *x = &g->nodes[a];
    char d[300];
    if (op != CJ_OP_QR && op != CJ_OP_EIGH && op != CJ_OP_SVD)
        return fail(g, err, CJ_ERR_INTERNAL, name, loc, "is not a factorization");
    if (!is_float(x->dtype))
        return fail(g, err, CJ_ERR_TYPE, name, loc, "needs a float array, got %s", describe(x, d, sizeof d));
    cj_shape s;
    if (!decomp_shape(op, &x->shape, index, &s))
        return fail(g, err, CJ_ERR_VALUE, name, loc, "needs %s matrices in the last two dims and a known result "
                    "(index %d), got %s", op == CJ_OP_EIGH ? "square" : "", index, describe(x, d, sizeof d));
    cj_attrs at;
    memset(&at, 0, sizeof at);
    at.index = index;
    return emit(g, op, x->dtype, false, &s, &a, 1, &at, loc, err);
}

/* See graph_priv.h. */
const char *cj_linalg_decomp_check(const cj_graph *g, const cj_node *n) {
    const cj_node *a = &g->nodes[n->inputs[0]];
    cj_shape s;
    if (!is_float(n->dtype) || a->dtype != n->dtype) return "needs float matrices of the result's dtype";
    if (!decomp_shape(n->op, &a->shape, n->attrs.index, &s) || !cj_shape_equal(&s, &n->shape))
        return "result shape does not match the factorization of the input";
    return NULL;
}
