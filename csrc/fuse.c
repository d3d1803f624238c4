/* fuse.c - group graph nodes into kernels.
 *
 * A node is "materialized" (gets a buffer and the kernel that writes it)
 * when it must be: graph outputs, reductions, matmuls, concatenations,
 * operands of a matmul that compute something (a matmul reads each operand
 * element many times), values whose consumers are computed in different
 * kernels unless recomputing them is cheap, and the ends of chains too long
 * for one loop body (choose_roots).  Everything
 * else is inlined into the kernel of the materialized node that uses it:
 * elementwise ops become expressions, constants and iota become values,
 * and movement ops (broadcast, transpose, slice, reshape) only change the
 * affine offsets at which the leaves load.
 *
 * The one movement op that is not always affine is a reshape that merges
 * dims of a value that is not in a contiguous buffer.  When the fuser meets
 * one, it materializes the reshape's input and starts again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse.h"
#include "loops.h"



static int add_buffer(fuser *f, cj_buf_kind kind, int slot, int node) {
    cj_plan *p = f->plan;
    if (!cj_grow((void **)&p->buffers, &p->buffers_cap, p->nbuffers + 1, sizeof(cj_buffer))) {
        cj_error_set(f->err, CJ_ERR_MEMORY, "fuse: out of memory");
        return -1;
    }
    const cj_node *n = node_at(f, node);
    cj_buffer *b = &p->buffers[p->nbuffers];
    memset(b, 0, sizeof *b);
    b->kind = kind;
    b->slot = slot;
    b->dtype = n->dtype;
    b->shape = n->shape;
    b->nbytes = cj_shape_numel(&n->shape) * cj_dtype_size(n->dtype);
    b->node = node;
    b->first_use = b->last_use = -1;
    b->alias_of = -1;
    return p->nbuffers++;
}

/* ---- kernels ------------------------------------------------------------- */

static cj_kernel *begin_kernel(fuser *f, int root, int rank, const int64_t *dims) {
    cj_plan *p = f->plan;
    if (!cj_grow((void **)&p->kernels, &p->kernels_cap, p->nkernels + 1, sizeof(cj_kernel))) {
        cj_error_set(f->err, CJ_ERR_MEMORY, "fuse: out of memory");
        return NULL;
    }
    cj_kernel *k = &p->kernels[p->nkernels];
    memset(k, 0, sizeof *k);
    k->root_node = root;
    k->rank = rank;
    for (int d = 0; d < rank; d++) k->dims[d] = dims[d];
    k->reduce_op = CJ_OP_NAME; /* "no reduction"; only read when reduced != 0 */
    f->k = k;
    f->exprs_cap = 0;
    fuse_memo_clear(f);
    f->label[0] = 0;
    f->must_materialize = -1;
    return k;
}

/* Finishes the kernel begun last; on failure drops it. */
static bool end_kernel(fuser *f, int value_expr) {
    cj_kernel *k = f->k;
    if (value_expr < 0) {
        free(k->exprs);
        free(k->also);
        cj_loop_plan_free(k->loop);
        memset(k, 0, sizeof *k);
        f->k = NULL;
        return false;
    }
    /* the stored value must be the last expression */
    if (value_expr != k->nexprs - 1) {
        cj_expr copy = k->exprs[value_expr];
        if (fuse_add_expr(f, &copy) < 0) return end_kernel(f, -1);
    }
    if (!f->label[0]) fuse_append_label(f, k->nexprs && k->exprs[k->nexprs - 1].kind == CJ_EX_LOAD ? "copy" : "fill");
    k->label = strdup(f->label);
    f->plan->nkernels++;
    f->k = NULL;
    if (!k->label) cj_error_set(f->err, CJ_ERR_MEMORY, "fuse: out of memory");
    return k->label != NULL;
}

static node_view identity_view(int rank) {
    node_view v;
    memset(&v, 0, sizeof v);
    v.rank = rank;
    for (int d = 0; d < rank; d++) v.idx[d].stride[d] = 1;
    return v;
}

/* out_index of a contiguous buffer of shape s, written at loop dims
 * `dim_of[k]` (-1: that dim of s is not a loop dim) plus `offset`. */
static cj_affine store_index(const cj_shape *s, const int *dim_of, int64_t offset) {
    int64_t strides[CJ_MAX_RANK];
    cj_contiguous_strides(s, strides);
    cj_affine a;
    memset(&a, 0, sizeof a);
    a.offset = offset;
    for (int k = 0; k < s->rank; k++)
        if (dim_of[k] >= 0 && s->dims[k] != 1) a.stride[dim_of[k]] = strides[k];
    return a;
}

/* An elementwise kernel writing `node` (shape s) into `buf`. */
static bool emit_elementwise(fuser *f, int node, int buf) {
    const cj_node *n = node_at(f, node);
    if (!begin_kernel(f, node, n->shape.rank, n->shape.dims)) return false;
    node_view v = identity_view(n->shape.rank);
    int dim_of[CJ_MAX_RANK];
    for (int d = 0; d < n->shape.rank; d++) dim_of[d] = d;
    f->k->out_buffer = buf;
    f->k->out_index = store_index(&n->shape, dim_of, 0);
    /* the root itself must be computed here, not loaded from its own buffer */
    return end_kernel(f, fuse_build_expr(f, node, &v));
}

static bool emit_reduce(fuser *f, int node, int buf) {
    const cj_node *n = node_at(f, node);
    const cj_node *in = node_at(f, n->inputs[0]);
    if (!begin_kernel(f, node, in->shape.rank, in->shape.dims)) return false;
    cj_kernel *k = f->k;
    k->reduced = n->attrs.axes;
    k->reduce_op = n->op;
    int dim_of[CJ_MAX_RANK], o = 0;
    for (int d = 0; d < in->shape.rank; d++)
        if (!(n->attrs.axes & (1u << d))) dim_of[o++] = d;
    k->out_buffer = buf;
    k->out_index = store_index(&n->shape, dim_of, 0);
    node_view v = identity_view(in->shape.rank);
    int e = fuse_build_expr(f, n->inputs[0], &v);
    fuse_append_label(f, cj_op_name(n->op));
    return end_kernel(f, e);
}

/* (..., M, K) @ (..., K, N): loops (..., M, K, N), K accumulated. */
static bool emit_matmul(fuser *f, int node, int buf) {
    const cj_node *n = node_at(f, node);
    const cj_node *a = node_at(f, n->inputs[0]);
    const cj_node *b = node_at(f, n->inputs[1]);
    int r = a->shape.rank; /* equal ranks, equal batch dims (graph.c) */
    int64_t dims[CJ_MAX_RANK];
    if (r + 1 > CJ_MAX_RANK) {
        cj_error_set(f->err, CJ_ERR_VALUE, "matmul: rank %d too large (at most %d)", r, CJ_MAX_RANK - 1);
        return false;
    }
    for (int d = 0; d < r - 2; d++) dims[d] = a->shape.dims[d];
    int m = r - 2, kk = r - 1, nn = r;
    dims[m] = a->shape.dims[r - 2];
    dims[kk] = a->shape.dims[r - 1];
    dims[nn] = b->shape.dims[r - 1];
    if (!begin_kernel(f, node, r + 1, dims)) return false;
    f->k->reduced = 1u << kk;
    f->k->reduce_op = CJ_OP_REDUCE_SUM;
    node_view va, vb;
    memset(&va, 0, sizeof va);
    memset(&vb, 0, sizeof vb);
    va.rank = vb.rank = r;
    for (int d = 0; d < r - 2; d++) va.idx[d].stride[d] = vb.idx[d].stride[d] = 1;
    va.idx[r - 2].stride[m] = 1;
    va.idx[r - 1].stride[kk] = 1;
    vb.idx[r - 2].stride[kk] = 1;
    vb.idx[r - 1].stride[nn] = 1;
    int ea = fuse_build_expr(f, n->inputs[0], &va);
    int eb = ea < 0 ? -1 : fuse_build_expr(f, n->inputs[1], &vb);
    int dim_of[CJ_MAX_RANK];
    for (int d = 0; d < r - 2; d++) dim_of[d] = d;
    dim_of[r - 2] = m;
    dim_of[r - 1] = nn;
    f->k->out_buffer = buf;
    f->k->out_index = store_index(&n->shape, dim_of, 0);
    int e = -1;
    if (eb >= 0) {
        cj_expr mul;
        memset(&mul, 0, sizeof mul);
        mul.kind = CJ_EX_OP;
        mul.op = n->dtype == CJ_BOOL ? CJ_OP_LOGICAL_AND : CJ_OP_MUL;
        mul.dtype = n->dtype;
        mul.nargs = 2;
        mul.args[0] = ea;
        mul.args[1] = eb;
        e = fuse_add_expr(f, &mul);
        fuse_append_label(f, "matmul");
    }
    if (n->dtype == CJ_BOOL) f->k->reduce_op = CJ_OP_REDUCE_MAX; /* "any" */
    return end_kernel(f, e);
}

/* Inputs of one shape (fuse_concat_shares_loop): one kernel over that
 * shape that computes every input and stores each at its slab's offset, so
 * that what they share is computed once (the stacked parts of a complex
 * value: one loop, no temporaries). */
static bool emit_concatenate_shared(fuser *f, int node, int buf) {
    const cj_node *n = node_at(f, node);
    const cj_node *in0 = node_at(f, n->inputs[0]);
    int64_t strides[CJ_MAX_RANK];
    cj_contiguous_strides(&n->shape, strides);
    int64_t slab = in0->shape.dims[n->attrs.axis] * strides[n->attrs.axis];
    cj_kernel *k = begin_kernel(f, node, in0->shape.rank, in0->shape.dims);
    if (!k) return false;
    int dim_of[CJ_MAX_RANK];
    for (int d = 0; d < in0->shape.rank; d++) dim_of[d] = d;
    k->out_buffer = buf;
    k->out_index = store_index(&n->shape, dim_of, slab * (n->ninputs - 1));
    if (!(k->also = calloc((size_t)n->ninputs, sizeof(cj_store)))) {
        cj_error_set(f->err, CJ_ERR_MEMORY, "fuse: out of memory");
        return end_kernel(f, -1);
    }
    node_view v = identity_view(in0->shape.rank);
    int e = -1;
    for (int i = 0; i < n->ninputs; i++) {
        if ((e = fuse_build_expr(f, n->inputs[i], &v)) < 0) break;
        if (i == n->ninputs - 1) break;
        k->also[k->nalso++] = (cj_store){.expr = e, .buffer = buf, .node = node,
                                         .index = store_index(&n->shape, dim_of, slab * i)};
    }
    fuse_append_label(f, "concatenate");
    return end_kernel(f, e);
}

/* One kernel per input, each writing its slab of the output. */
static bool emit_concatenate(fuser *f, int node, int buf) {
    const cj_node *n = node_at(f, node);
    if (fuse_concat_shares_loop(f->g, n)) return emit_concatenate_shared(f, node, buf);
    int64_t strides[CJ_MAX_RANK];
    cj_contiguous_strides(&n->shape, strides);
    int64_t pos = 0;
    for (int i = 0; i < n->ninputs; i++) {
        const cj_node *in = node_at(f, n->inputs[i]);
        if (!begin_kernel(f, node, in->shape.rank, in->shape.dims)) return false;
        int dim_of[CJ_MAX_RANK];
        for (int d = 0; d < in->shape.rank; d++) dim_of[d] = d;
        f->k->out_buffer = buf;
        /* the output dim along `axis` may be 1 only if this input's is too */
        f->k->out_index = store_index(&n->shape, dim_of, pos * strides[n->attrs.axis]);
        if (n->shape.dims[n->attrs.axis] == 1) f->k->out_index.offset = 0;
        node_view v = identity_view(in->shape.rank);
        int e = fuse_build_expr(f, n->inputs[i], &v);
        fuse_append_label(f, "concatenate");
        if (!end_kernel(f, e)) return false;
        pos += in->shape.dims[n->attrs.axis];
    }
    return true;
}

/* The reduction whose combine and identity a scatter op uses. */
static cj_op scatter_combine(cj_op op) {
    return op == CJ_OP_SCATTER_MUL ? CJ_OP_REDUCE_PROD : op == CJ_OP_SCATTER_MIN ? CJ_OP_REDUCE_MIN
         : op == CJ_OP_SCATTER_MAX ? CJ_OP_REDUCE_MAX : CJ_OP_REDUCE_SUM;
}

/* A scatter: loops over the updates (shape[:axis] + idx + shape[axis+1:]),
 * each point combining its update into the output at its index (kernel.h,
 * cj_scatter); the output holds the identity first. */
static bool emit_scatter(fuser *f, int node, int buf) {
    const cj_node *n = node_at(f, node);
    const cj_node *ix = node_at(f, n->inputs[0]), *upd = node_at(f, n->inputs[1]);
    int axis = n->attrs.axis, ri = ix->shape.rank;
    if (!begin_kernel(f, node, upd->shape.rank, upd->shape.dims)) return false;
    cj_kernel *k = f->k;
    int dim_of[CJ_MAX_RANK];
    for (int d = 0; d < n->shape.rank; d++) dim_of[d] = d < axis ? d : d == axis ? -1 : d + ri - 1;
    int64_t strides[CJ_MAX_RANK];
    cj_contiguous_strides(&n->shape, strides);
    k->out_buffer = buf;
    k->out_index = store_index(&n->shape, dim_of, 0);
    k->reduce_op = scatter_combine(n->op);
    k->scatter.on = true;
    k->scatter.drop = n->attrs.index == 1;
    k->scatter.dim = n->shape.dims[axis];
    k->scatter.stride = n->shape.dims[axis] == 1 ? 0 : strides[axis];
    node_view vi;
    memset(&vi, 0, sizeof vi);
    vi.rank = ri;
    for (int j = 0; j < ri; j++) vi.idx[j].stride[axis + j] = 1;
    k->scatter.index_expr = fuse_build_expr(f, n->inputs[0], &vi);
    node_view vu = identity_view(upd->shape.rank);
    int ev = k->scatter.index_expr < 0 ? -1 : fuse_build_expr(f, n->inputs[1], &vu);
    fuse_append_label(f, cj_op_name(n->op));
    return end_kernel(f, ev);
}

/* A call kernel (kernel.h, cj_call): one loop over the rows (argsort) or
 * the matrices of a batch (linear algebra), each handled by the runtime;
 * an expression loads each operand's row or matrix, so that every pass
 * sees the operands read (whole: never in place). */
static bool emit_call(fuser *f, int node, int buf, cj_call call) {
    const cj_node *n = node_at(f, node);
    for (int a = 0; a < n->ninputs; a++)
        if (f->node_buf[n->inputs[a]] < 0) {
            f->must_materialize = n->inputs[a];
            return false;
        }
    int trailing = call == CJ_CALL_ARGSORT ? 1 : 2; /* dims of the operand each call handles whole */
    const cj_node *x0 = node_at(f, n->inputs[0]);
    int64_t per0 = 1;
    for (int d = x0->shape.rank - trailing; d < x0->shape.rank; d++) per0 *= x0->shape.dims[d];
    int64_t rows = per0 ? cj_shape_numel(&x0->shape) / per0 : 0;
    int64_t whole = rows ? cj_shape_numel(&n->shape) / rows : 0; /* output elements per call */
    if (!begin_kernel(f, node, 1, &rows)) return false;
    cj_kernel *k = f->k;
    k->call = call;
    k->out_buffer = buf;
    k->out_index.stride[0] = whole;
    int last = -1;
    for (int a = 0; a < n->ninputs; a++) {
        const cj_node *x = node_at(f, n->inputs[a]);
        int64_t per = 1;
        for (int d = x->shape.rank - trailing; d < x->shape.rank; d++) per *= x->shape.dims[d];
        cj_expr e;
        memset(&e, 0, sizeof e);
        e.kind = CJ_EX_LOAD;
        e.dtype = x->dtype;
        e.buffer = f->node_buf[n->inputs[a]];
        e.index.stride[0] = per;
        if ((last = fuse_add_expr(f, &e)) < 0) break;
    }
    fuse_append_label(f, cj_op_name(n->op));
    return end_kernel(f, last);
}

static bool emit_node(fuser *f, int node, int buf) {
    switch (cj_op_kind(node_at(f, node)->op)) {
    case CJ_OPKIND_REDUCE: return emit_reduce(f, node, buf);
    case CJ_OPKIND_MATMUL: return emit_matmul(f, node, buf);
    case CJ_OPKIND_CONCAT: return emit_concatenate(f, node, buf);
    case CJ_OPKIND_SCATTER: return emit_scatter(f, node, buf);
    case CJ_OPKIND_SORT: return emit_call(f, node, buf, CJ_CALL_ARGSORT);
    case CJ_OPKIND_LINALG: {
        cj_op op = node_at(f, node)->op;
        return emit_call(f, node, buf, op == CJ_OP_CHOLESKY ? CJ_CALL_CHOLESKY : op == CJ_OP_LU ? CJ_CALL_LU
                                       : op == CJ_OP_LU_PIVOTS ? CJ_CALL_LU_PIVOTS : op == CJ_OP_QR ? CJ_CALL_QR
                                       : op == CJ_OP_EIGH ? CJ_CALL_EIGH : op == CJ_OP_SVD ? CJ_CALL_SVD
                                       : CJ_CALL_TRISOLVE);
    }
    case CJ_OPKIND_SOURCE: case CJ_OPKIND_UNARY: case CJ_OPKIND_BINARY: case CJ_OPKIND_COMPARE:
    case CJ_OPKIND_SELECT: case CJ_OPKIND_TERNARY: case CJ_OPKIND_CAST: case CJ_OPKIND_MOVE: case CJ_OPKIND_GATHER:
        break;
    case CJ_OPKIND_REGION: /* built by emit_region */
        cj_error_set(f->err, CJ_ERR_INTERNAL, "fuse: %s built as a value", cj_op_name(node_at(f, node)->op));
        return false;
    }
    return emit_elementwise(f, node, buf);
}

static void plan_reset(cj_plan *p) {
    for (int i = 0; i < p->nkernels; i++) {
        free(p->kernels[i].exprs);
        free(p->kernels[i].label);
        free(p->kernels[i].also);
        cj_loop_plan_free(p->kernels[i].loop);
    }
    p->nkernels = 0;
    p->nbuffers = 0;
}

/* The kernel of a set of roots (set_merge): one loop over their shape
 * that computes each member, in graph order, and stores it.  A member read
 * by a later one is the same expression there (the memo), not a load. */
static bool emit_set(fuser *f, int set, const int *out_of) {
    int members[CJ_MAX_STORES], bufs[CJ_MAX_STORES], n = 0;
    for (int m = set; m >= 0 && n < CJ_MAX_STORES; m = f->set_next[m]) {
        int j = n++;
        while (j > 0 && members[j - 1] > m) members[j] = members[j - 1], j--;
        members[j] = m;
    }
    for (int j = 0; j < n; j++) {
        int m = members[j];
        bufs[j] = out_of[m] >= 0 ? add_buffer(f, CJ_BUF_OUTPUT, out_of[m], m) : add_buffer(f, CJ_BUF_TEMP, -1, m);
        if (bufs[j] < 0) return false;
    }
    const cj_node *last = node_at(f, members[n - 1]);
    cj_kernel *k = begin_kernel(f, members[n - 1], last->shape.rank, last->shape.dims);
    if (!k) return false;
    int dim_of[CJ_MAX_RANK];
    for (int d = 0; d < last->shape.rank; d++) dim_of[d] = d;
    k->out_buffer = bufs[n - 1];
    k->out_index = store_index(&last->shape, dim_of, 0);
    if (!(k->also = calloc((size_t)n, sizeof(cj_store)))) {
        cj_error_set(f->err, CJ_ERR_MEMORY, "fuse: out of memory");
        return end_kernel(f, -1);
    }
    node_view v = identity_view(last->shape.rank);
    int e = -1;
    for (int j = 0; j < n; j++) {
        if ((e = fuse_build_expr(f, members[j], &v)) < 0) break;
        if (j == n - 1) break;
        k->also[k->nalso++] = (cj_store){.expr = e, .buffer = bufs[j], .index = k->out_index, .node = members[j]};
    }
    if (!end_kernel(f, e)) return false;
    for (int j = 0; j < n; j++) f->node_buf[members[j]] = bufs[j];
    return true;
}

/* The kernel of region node `node` (a scan, while or cond): it loads each
 * input (so that liveness sees its reads), stores into a workspace (the
 * bodies' temporaries and second carry buffers, sized by cj_loops_lower)
 * and into one buffer per result read by a RESULT node.  The runtime runs
 * its bodies; nothing is generated for it. */
static bool emit_region(fuser *f, int node, int *out_of) {
    const cj_graph *g = f->g;
    const cj_node *n = node_at(f, node);
    cj_body *b = cj_region_body(g, n);
    cj_loop_plan *L = b ? cj_loop_plan_new(b, n->ninputs) : NULL;
    if (!L) return cj_error_set(f->err, CJ_ERR_MEMORY, "fuse: out of memory"), false;
    int work = add_buffer(f, CJ_BUF_TEMP, -1, node);
    if (work < 0) return cj_loop_plan_free(L), false;
    L->work_buf = work;
    for (int a = 0; a < n->ninputs; a++) L->in_buf[a] = f->node_buf[fuse_region_operand(g, n->inputs[a])];
    for (int i = node + 1; i < g->nnodes; i++) {
        const cj_node *r = &g->nodes[i];
        if (r->op != CJ_OP_RESULT || r->inputs[0] != node || !f->root[i]) continue;
        int k = r->attrs.index;
        if (L->out_buf[k] >= 0) { /* a second RESULT of one value: a copy of the first */
            f->node_buf[i] = L->out_buf[k];
            out_of[i] = -1;
            continue;
        }
        int buf = out_of[i] >= 0 ? add_buffer(f, CJ_BUF_OUTPUT, out_of[i], i) : add_buffer(f, CJ_BUF_TEMP, -1, i);
        if (buf < 0) return cj_loop_plan_free(L), false;
        L->out_buf[k] = f->node_buf[i] = buf;
    }
    int64_t one = 1;
    cj_kernel *k = begin_kernel(f, node, 1, &one);
    if (!k) return cj_loop_plan_free(L), false;
    k->loop = L;
    k->out_buffer = work;
    int e = -1;
    for (int a = 0; a < n->ninputs; a++) {
        if (L->in_buf[a] < 0) {
            cj_error_set(f->err, CJ_ERR_INTERNAL, "fuse: an input of %s has no buffer", cj_op_name(n->op));
            return end_kernel(f, -1);
        }
        cj_expr ld = {.kind = CJ_EX_LOAD, .dtype = f->plan->buffers[L->in_buf[a]].dtype, .buffer = L->in_buf[a]};
        if ((e = fuse_add_expr(f, &ld)) < 0) return end_kernel(f, -1);
    }
    if (e < 0) {
        cj_expr zero = {.kind = CJ_EX_CONST, .dtype = CJ_FLOAT32};
        if ((e = fuse_add_expr(f, &zero)) < 0) return end_kernel(f, -1);
    }
    if (!(k->also = calloc((size_t)L->nresults + 1, sizeof(cj_store))))
        return cj_error_set(f->err, CJ_ERR_MEMORY, "fuse: out of memory"), end_kernel(f, -1);
    for (int r = 0; r < L->nresults; r++)
        if (L->out_buf[r] >= 0) k->also[k->nalso++] = (cj_store){.expr = e, .buffer = L->out_buf[r], .node = f->plan->buffers[L->out_buf[r]].node};
    fuse_append_label(f, cj_op_name(n->op));
    f->node_buf[node] = work;
    return end_kernel(f, e);
}

/* One attempt at building every kernel; returns the node that must be
 * materialized before trying again, -1 when done, -2 on error. */
static int fuse_attempt(fuser *f) {
    const cj_graph *g = f->g;
    cj_plan *p = f->plan;
    plan_reset(p);
    /* no node to materialize yet: a kernel failing for want of memory
     * before its first expression must not read as one (a stale id, or
     * node 0, would be made a root and the memory error dropped) */
    f->must_materialize = -1;
    for (int i = 0; i < g->nnodes; i++) f->node_buf[i] = -1;
    for (int i = 0; i < g->nnodes; i++) {
        const cj_node *n = &g->nodes[i];
        if (n->op == CJ_OP_PARAM || n->op == CJ_OP_ARRAY) {
            f->node_buf[i] = add_buffer(f, n->op == CJ_OP_PARAM ? CJ_BUF_PARAM : CJ_BUF_ARRAY,
                                        n->attrs.index, i);
            if (f->node_buf[i] < 0) return -2;
        }
    }
    /* outputs: a root not yet claimed writes straight into the output */
    int *out_of = malloc(sizeof(int) * (size_t)(g->nnodes + 1));
    if (!out_of) return cj_error_set(f->err, CJ_ERR_MEMORY, "fuse: out of memory"), -2;
    for (int i = 0; i < g->nnodes; i++) out_of[i] = -1;
    for (int j = 0; j < g->noutputs; j++) {
        int nid = g->outputs[j];
        if (f->root[nid] && out_of[nid] < 0) out_of[nid] = j;
    }
    for (int i = 0; i < g->nnodes; i++) {
        if (!f->root[i]) continue;
        if (cj_op_kind(g->nodes[i].op) == CJ_OPKIND_REGION) {
            /* a region writes its results' buffers; a result needs nothing more */
            if (g->nodes[i].op != CJ_OP_RESULT && !emit_region(f, i, out_of)) goto fail;
            continue;
        }
        int set = fuse_set_find(f, i);
        if (f->set_pos[set] != i) continue; /* built with the set's last member */
        if (f->set_size[set] > 1) {
            if (!emit_set(f, set, out_of)) {
                if (f->must_materialize >= 0) {
                    int m = f->must_materialize;
                    free(out_of);
                    return m;
                }
                goto fail;
            }
            continue;
        }
        int buf = out_of[i] >= 0 ? add_buffer(f, CJ_BUF_OUTPUT, out_of[i], i)
                                 : add_buffer(f, CJ_BUF_TEMP, -1, i);
        if (buf < 0) goto fail;
        if (!emit_node(f, i, buf)) {
            if (f->must_materialize >= 0) {
                int m = f->must_materialize;
                free(out_of);
                return m;
            }
            goto fail;
        }
        f->node_buf[i] = buf;
    }
    /* outputs not written above (arguments, repeated outputs, non-roots) get a copy */
    for (int j = 0; j < g->noutputs; j++) {
        int nid = g->outputs[j];
        if (out_of[nid] == j) continue;
        int buf = add_buffer(f, CJ_BUF_OUTPUT, j, nid);
        if (buf < 0) goto fail;
        const cj_node *n = &g->nodes[nid];
        if (!begin_kernel(f, nid, n->shape.rank, n->shape.dims)) goto fail;
        node_view v = identity_view(n->shape.rank);
        int dim_of[CJ_MAX_RANK];
        for (int d = 0; d < n->shape.rank; d++) dim_of[d] = d;
        f->k->out_buffer = buf;
        f->k->out_index = store_index(&n->shape, dim_of, 0);
        f->k->root_node = -1; /* load the node's buffer if it has one */
        if (!end_kernel(f, fuse_build_expr(f, nid, &v))) {
            if (f->must_materialize >= 0) {
                int m = f->must_materialize;
                free(out_of);
                return m;
            }
            goto fail;
        }
        f->plan->kernels[f->plan->nkernels - 1].root_node = nid;
    }
    free(out_of);
    return -1;
fail:
    free(out_of);
    if (f->err->status == CJ_OK) cj_error_set(f->err, CJ_ERR_INTERNAL, "fuse: failed");
    return -2;
}

/* See kernel.h. */
cj_status cj_fuse_run(const cj_graph *g, const bool *live, bool enabled, cj_plan *plan,
                      cj_error *err) {
    fuser f;
    memset(&f, 0, sizeof f);
    f.g = g;
    f.plan = plan;
    f.err = err;
    plan->graph = (cj_graph *)g;
    f.root = calloc((size_t)g->nnodes + 1, sizeof(bool));
    f.node_buf = malloc(sizeof(int) * ((size_t)g->nnodes + 1));
    if (!f.root || !f.node_buf) {
        free(f.root);
        free(f.node_buf);
        return cj_error_set(err, CJ_ERR_MEMORY, "fuse: out of memory");
    }
    if (!fuse_sets_alloc(&f, g->nnodes)) {
        free(f.root);
        free(f.node_buf);
        fuse_sets_free(&f);
        return cj_error_set(err, CJ_ERR_MEMORY, "fuse: out of memory");
    }
    fuse_choose_roots(&f, live, enabled);
    int again;
    while ((again = fuse_attempt(&f)) >= 0) {
        if (f.root[again]) { /* cannot happen: a root is always in a buffer */
            cj_error_set(err, CJ_ERR_INTERNAL, "fuse: reshape of node %d not affine", again);
            again = -2;
            break;
        }
        f.root[again] = true;
        err->status = CJ_OK;
    }
    if (again == -1) {
        /* loop dims are merged later (group.c), once grouping has seen the rows */
        for (int i = 0; i < plan->nkernels; i++)
            if (plan->kernels[i].rank == 0) plan->kernels[i].rank = 1, plan->kernels[i].dims[0] = 1;
        plan->output_buffer = malloc(sizeof(int) * ((size_t)g->noutputs + 1));
        if (!plan->output_buffer) again = -2, cj_error_set(err, CJ_ERR_MEMORY, "fuse: out of memory");
        for (int b = 0; again == -1 && b < plan->nbuffers; b++)
            if (plan->buffers[b].kind == CJ_BUF_OUTPUT) plan->output_buffer[plan->buffers[b].slot] = b;
    }
    free(f.root);
    free(f.node_buf);
    free(f.memo);
    free(f.table);
    free(f.stack);
    fuse_sets_free(&f);
    return again == -1 ? CJ_OK : err->status;
}
