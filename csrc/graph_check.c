/* graph_check.c - the rules that tie a node of each op family to its
 * inputs beyond the element-wise kinds graph.c checks itself: control
 * flow (a region node against its body), indexing and sorting, and the
 * linear algebra ops; and the shapes those families produce, which their
 * builders share.  graph.c asks it about every node it appends; it uses
 * nothing of graph.c or the builders, so that the builders can use graph.c
 * without a cycle. */
#include <string.h>

#include "graph_priv.h"
#include "regions.h"

/* ---- shapes ---------------------------------------------------------------- */

/* The shape x[:axis] + idx + x[axis+1:], or false past the rank limit. */
bool cj_indexed_shape(const cj_shape *x, const cj_shape *idx, int axis, cj_shape *out) {
    if (x->rank - 1 + idx->rank > CJ_MAX_RANK) return false;
    out->rank = 0;
    for (int d = 0; d < axis; d++) out->dims[out->rank++] = x->dims[d];
    for (int d = 0; d < idx->rank; d++) out->dims[out->rank++] = idx->dims[d];
    for (int d = axis + 1; d < x->rank; d++) out->dims[out->rank++] = x->dims[d];
    return true;
}

/* The shape of result `index` of op on a matrix of shape a, false when
 * index names none. */
bool cj_decomp_shape(cj_op op, const cj_shape *a, int64_t index, cj_shape *out) {
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

/* ---- checks (NULL when the node is consistent, else a static reason) -------- */

/* See graph_priv.h. */
const char *cj_region_check(const cj_graph *g, const cj_node *n) {
    if (n->op == CJ_OP_RESULT) {
        const cj_node *r = &g->nodes[n->inputs[0]];
        const cj_body *b = cj_region_body(g, r);
        if (!b) return "a result reads a node that is not a scan, while or cond";
        if (n->attrs.index < 0 || n->attrs.index >= b->nresults) return "result number out of range";
        if (n->dtype != b->result_dtype[n->attrs.index] || !cj_shape_equal(&n->shape, &b->result_shape[n->attrs.index]))
            return "result shape or dtype differs from the body's";
        return NULL;
    }
    const cj_body *b = cj_region_body(g, n);
    if (!b || b->op != n->op) return "the node's body is missing or of another kind";
    if (n->ninputs != cj_region_inputs(b)) return "input count differs from the body's";
    if (n->dtype != CJ_FLOAT32 || n->shape.rank != 0) return "a region node is a float32 scalar";
    int carries = b->op == CJ_OP_COND || b->op == CJ_OP_CUSTOM ? 0 : b->ncarry;
    for (int k = 0; k < carries; k++) {
        const cj_node *in = &g->nodes[n->inputs[k]];
        if (in->dtype != b->result_dtype[k] || !cj_shape_equal(&in->shape, &b->result_shape[k]))
            return "a carry's initial value differs from what the body returns";
    }
    if (b->op == CJ_OP_COND) {
        const cj_node *ix = &g->nodes[n->inputs[0]];
        if (ix->dtype != CJ_INT32 || ix->shape.rank != 0) return "the branch index is an int32 scalar";
    }
    if (b->op == CJ_OP_SCAN)
        for (int k = 0; k < b->nxs; k++) {
            const cj_node *x = &g->nodes[n->inputs[b->ncarry + k]];
            if (x->shape.rank < 1 || x->shape.dims[0] != b->length) return "xs must have the trip count as dim 0";
        }
    return NULL;
}

/* See graph_priv.h. */
const char *cj_index_check(const cj_graph *g, const cj_node *n) {
    if (n->op == CJ_OP_ARGSORT) {
        const cj_node *x = &g->nodes[n->inputs[0]];
        if (n->dtype != CJ_INT64 || !cj_shape_equal(&n->shape, &x->shape) || n->shape.rank < 1)
            return "argsort gives int64 indices of its operand's shape";
        return NULL;
    }
    bool gather = n->op == CJ_OP_GATHER;
    const cj_node *x = &g->nodes[n->inputs[0]], *idx = &g->nodes[n->inputs[gather ? 1 : 0]];
    const cj_node *upd = gather ? n : &g->nodes[n->inputs[1]];
    const cj_shape *full = gather ? &x->shape : &n->shape;
    if (cj_dtype_kind(idx->dtype) != CJ_KIND_INT) return "indices must be integers";
    if (n->attrs.axis < 0 || n->attrs.axis >= full->rank) return "axis out of range";
    if (gather ? x->dtype != n->dtype : upd->dtype != n->dtype) return "dtype differs from the operand's";
    if (!gather && n->attrs.index != 0 && n->attrs.index != 1) return "scatter mode is 0 (clamp) or 1 (drop)";
    cj_shape want;
    if (!cj_indexed_shape(full, &idx->shape, n->attrs.axis, &want) || want.rank != upd->shape.rank ||
        memcmp(want.dims, upd->shape.dims, sizeof(int64_t) * (size_t)want.rank) != 0)
        return gather ? "gathered shape is wrong" : "updates' shape is wrong";
    return NULL;
}

/* See graph_priv.h. */
const char *cj_linalg_check(const cj_graph *g, const cj_node *n) {
    const cj_node *a = &g->nodes[n->inputs[0]];
    if (n->op == CJ_OP_QR || n->op == CJ_OP_EIGH || n->op == CJ_OP_SVD) return cj_linalg_decomp_check(g, n);
    if (n->op == CJ_OP_LU_PIVOTS) {
        if (n->dtype != CJ_INT64 || !is_float(a->dtype) || !is_square(&a->shape) || n->shape.rank != a->shape.rank - 1)
            return "lu_pivots gives int64 rows of a square float matrix";
        return NULL;
    }
    if (!is_float(n->dtype) || a->dtype != n->dtype || !is_square(&a->shape)) return "needs square float matrices";
    if (n->op == CJ_OP_CHOLESKY || n->op == CJ_OP_LU)
        return cj_shape_equal(&n->shape, &a->shape) ? NULL : "shape differs from the input's";
    const cj_node *b = &g->nodes[n->inputs[1]];
    if (b->dtype != n->dtype || !cj_shape_equal(&n->shape, &b->shape)) return "shape differs from b's";
    if (n->attrs.index & ~7) return "unknown triangular solve flags";
    return NULL;
}

/* See graph_priv.h. */
const char *cj_linalg_decomp_check(const cj_graph *g, const cj_node *n) {
    const cj_node *a = &g->nodes[n->inputs[0]];
    cj_shape s;
    if (!is_float(n->dtype) || a->dtype != n->dtype) return "needs float matrices of the result's dtype";
    if (!cj_decomp_shape(n->op, &a->shape, n->attrs.index, &s) || !cj_shape_equal(&s, &n->shape))
        return "result shape does not match the factorization of the input";
    return NULL;
}
