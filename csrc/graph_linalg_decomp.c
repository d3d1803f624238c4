/* graph_linalg_decomp.c - the builder of the factorizations with several
 * results (QR, the symmetric eigensolver, the SVD; one op each, `index`
 * naming the result) (their check: graph_check.c). */
#include "graph_priv.h"

#include <string.h>

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
    if (!cj_decomp_shape(op, &x->shape, index, &s))
        return fail(g, err, CJ_ERR_VALUE, name, loc, "needs %s matrices in the last two dims and a known result "
                    "(index %d), got %s", op == CJ_OP_EIGH ? "square" : "", index, describe(x, d, sizeof d));
    cj_attrs at;
    memset(&at, 0, sizeof at);
    at.index = index;
    return emit(g, op, x->dtype, false, &s, &a, 1, &at, loc, err);
}

/* See graph_priv.h. */
