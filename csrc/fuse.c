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

#include "kernel.h"

/* The index of each dim of a node, as an affine function of the loop
 * indices of the kernel being built. */
typedef struct {
    int rank;
    cj_affine idx[CJ_MAX_RANK];
} node_view;

typedef struct {
    int node;
    node_view view;
    int expr;
    int slot;            /* its place in the hash table */
} memo_entry;

typedef struct {
    const cj_graph *g;
    cj_plan *plan;
    cj_error *err;
    bool *root;          /* node is materialized */
    int *node_buf;       /* buffer holding the node's value, or -1 */
    /* the kernel being built */
    cj_kernel *k;
    int exprs_cap;
    memo_entry *memo;    /* (node, view) -> expression, for the kernel being built */
    int nmemo, memo_cap;
    int *table;          /* hash table of memo indices, -1 when empty */
    int table_cap;       /* a power of two */
    struct expr_frame_s *stack; /* build_expr's pending nodes */
    int stack_cap;
    int must_materialize; /* node found to need a buffer, or -1 */
    /* roots computed by one multi-output kernel form a set (union-find
     * over node ids, choose_roots); the kernel is built at the set's last
     * member, `pos` */
    int *set_parent, *set_next, *set_tail, *set_pos, *set_size, *set_cost;
    /* the labels of the fused ops */
    char label[256];
} fuser;

static const cj_node *node_at(const fuser *f, int id) { return &f->g->nodes[id]; }

static void contiguous_strides(const cj_shape *s, int64_t *strides) {
    int64_t acc = 1;
    for (int d = s->rank - 1; d >= 0; d--) {
        strides[d] = acc;
        acc *= s->dims[d] > 0 ? s->dims[d] : 1;
    }
}

/* ---- growable arrays of the plan ----------------------------------------- */

static bool grow(void **ptr, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int ncap = *cap ? *cap * 2 : 16;
    while (ncap < need) ncap *= 2;
    void *p = realloc(*ptr, (size_t)ncap * elem);
    if (!p) return false;
    memset((char *)p + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
    *ptr = p;
    *cap = ncap;
    return true;
}

static int add_buffer(fuser *f, cj_buf_kind kind, int slot, int node) {
    cj_plan *p = f->plan;
    if (!grow((void **)&p->buffers, &p->buffers_cap, p->nbuffers + 1, sizeof(cj_buffer))) {
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

/* ---- expressions --------------------------------------------------------- */

static int add_expr(fuser *f, const cj_expr *e) {
    cj_kernel *k = f->k;
    if (!grow((void **)&k->exprs, &f->exprs_cap, k->nexprs + 1, sizeof(cj_expr))) {
        cj_error_set(f->err, CJ_ERR_MEMORY, "fuse: out of memory");
        return -1;
    }
    k->exprs[k->nexprs] = *e;
    return k->nexprs++;
}

static void append_label(fuser *f, const char *name) {
    size_t len = strlen(f->label);
    if (len + strlen(name) + 2 >= sizeof f->label) return;
    if (len) strcat(f->label, "+");
    strcat(f->label, name);
}

/* Element offset of a load from a contiguous buffer of shape `s` seen
 * through view `v`. */
static cj_affine buffer_offset(const cj_shape *s, const node_view *v, int loop_rank) {
    int64_t strides[CJ_MAX_RANK];
    contiguous_strides(s, strides);
    cj_affine a;
    memset(&a, 0, sizeof a);
    for (int k = 0; k < v->rank; k++) {
        if (s->dims[k] == 1) continue; /* index is always 0 there */
        a.offset += strides[k] * v->idx[k].offset;
        for (int d = 0; d < loop_rank; d++) a.stride[d] += strides[k] * v->idx[k].stride[d];
    }
    return a;
}

/* View of a RESHAPE's input, given the view of its output.  Returns false
 * when the input index is not affine (dims merged). */
static bool reshape_input_view(const cj_shape *in, const cj_shape *out, const node_view *v,
                               node_view *vin) {
    memset(vin, 0, sizeof *vin);
    vin->rank = in->rank;
    int i = 0, o = 0;
    while (i < in->rank || o < out->rank) {
        /* size-1 dims: input index 0, output index ignored */
        if (i < in->rank && in->dims[i] == 1) { i++; continue; }
        if (o < out->rank && out->dims[o] == 1) { o++; continue; }
        if (i >= in->rank || o >= out->rank) return false;
        /* one input dim split into output dims o..o2-1 */
        int64_t prod = out->dims[o];
        int o2 = o + 1;
        while (prod < in->dims[i] && o2 < out->rank) prod *= out->dims[o2++];
        if (prod != in->dims[i]) return false; /* merges input dims */
        int64_t scale = 1;
        for (int q = o2 - 1; q >= o; q--) {
            vin->idx[i].offset += scale * v->idx[q].offset;
            for (int d = 0; d < CJ_MAX_RANK; d++) vin->idx[i].stride[d] += scale * v->idx[q].stride[d];
            scale *= out->dims[q];
        }
        i++;
        o = o2;
    }
    return true;
}

/* ---- the expression memo ------------------------------------------------
 * A node seen through the same view twice in one kernel (a value read by
 * several consumers, or x * x) becomes one expression.  The memo is a hash
 * table of (node, view) -> expression, cleared entry by entry when the next
 * kernel begins, so building a plan stays linear in the graph's size. */

static uint64_t view_hash(int node, const node_view *v) {
    /* FNV-1a over the node and the view's dims in use (views are zeroed
     * before they are filled, so equal views have equal bytes, and the
     * dims past v->rank are zero) */
    uint64_t h = (1469598103934665603ull ^ (uint64_t)(uint32_t)node) * 1099511628211ull;
    const unsigned char *p = (const unsigned char *)v->idx;
    size_t n = sizeof v->idx[0] * (size_t)(v->rank > 0 ? v->rank : 0);
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

/* The slot of (node, v) in the table: its entry's, or the empty one where it goes. */
static int memo_slot(const fuser *f, int node, const node_view *v, uint64_t h) {
    int mask = f->table_cap - 1;
    for (int s = (int)(h & (uint64_t)mask);; s = (s + 1) & mask) {
        int i = f->table[s];
        if (i < 0) return s;
        const memo_entry *m = &f->memo[i];
        if (m->node == node && memcmp(&m->view, v, sizeof *v) == 0) return s;
    }
}

static int memo_find(const fuser *f, int node, const node_view *v) {
    if (!f->nmemo) return -1;
    int i = f->table[memo_slot(f, node, v, view_hash(node, v))];
    return i < 0 ? -1 : f->memo[i].expr;
}

static void memo_clear(fuser *f) {
    for (int i = 0; i < f->nmemo; i++) f->table[f->memo[i].slot] = -1;
    f->nmemo = 0;
}

static bool memo_add(fuser *f, int node, const node_view *v, int expr) {
    if (2 * (f->nmemo + 1) > f->table_cap) {
        /* grow the table (kept at most half full) and place the entries again */
        int ncap = f->table_cap ? 2 * f->table_cap : 256;
        int *t = malloc(sizeof(int) * (size_t)ncap);
        if (!t) return false;
        free(f->table);
        f->table = t;
        f->table_cap = ncap;
        for (int s = 0; s < ncap; s++) t[s] = -1;
        for (int i = 0; i < f->nmemo; i++) {
            memo_entry *m = &f->memo[i];
            m->slot = memo_slot(f, m->node, &m->view, view_hash(m->node, &m->view));
            t[m->slot] = i;
        }
    }
    if (!grow((void **)&f->memo, &f->memo_cap, f->nmemo + 1, sizeof(memo_entry))) return false;
    int slot = memo_slot(f, node, v, view_hash(node, v));
    memo_entry *m = &f->memo[f->nmemo];
    memset(m, 0, sizeof *m);
    m->node = node;
    m->view = *v;
    m->expr = expr;
    m->slot = slot;
    f->table[slot] = f->nmemo++;
    return true;
}

/* ---- expressions, built without recursion ---------------------------------
 * The expression of a node is built from those of its inputs, each seen
 * through the view the node's op gives it (a movement op changes only the
 * view).  A graph may be a chain of 100,000 nodes, so the walk keeps its
 * own stack of pending nodes instead of recursing on the C stack. */

typedef struct expr_frame_s {
    int node;
    node_view view;
    int next;        /* inputs whose expression is known */
    int args[3];
} expr_frame;

static int load_expr(fuser *f, int node, int buf, const node_view *v) {
    const cj_node *n = node_at(f, node);
    cj_expr e;
    memset(&e, 0, sizeof e);
    e.kind = CJ_EX_LOAD;
    e.dtype = n->dtype;
    e.buffer = buf;
    e.index = buffer_offset(&n->shape, v, f->k->rank);
    return add_expr(f, &e);
}

/* What one step of the walk found for a node. */
typedef enum { STEP_DONE, STEP_INPUT, STEP_FAIL } expr_step;

/* Looks at frame `fr`: either its expression is known (STEP_DONE, *out),
 * or the input `*in` must first be built through view `*vin` (STEP_INPUT). */
static expr_step expr_visit(fuser *f, expr_frame *fr, int *out, int *in, node_view *vin) {
    const cj_node *n = node_at(f, fr->node);
    const node_view *v = &fr->view;
    cj_expr e;
    memset(&e, 0, sizeof e);
    e.dtype = n->dtype;
    memset(vin, 0, sizeof *vin);

    /* a value that lives in a buffer is loaded, unless it is this kernel's own root */
    if (f->node_buf[fr->node] >= 0 && fr->node != f->k->root_node) {
        *out = load_expr(f, fr->node, f->node_buf[fr->node], v);
        return *out < 0 ? STEP_FAIL : STEP_DONE;
    }

    switch (n->op) {
    case CJ_OP_PARAM:
    case CJ_OP_ARRAY:
        cj_error_set(f->err, CJ_ERR_INTERNAL, "fuse: %s without a buffer", cj_op_name(n->op));
        return STEP_FAIL;
    case CJ_OP_CONSTANT:
        e.kind = CJ_EX_CONST;
        e.fvalue = n->attrs.fvalue;
        e.ivalue = n->attrs.ivalue;
        *out = add_expr(f, &e);
        return *out < 0 ? STEP_FAIL : STEP_DONE;
    case CJ_OP_IOTA:
        e.kind = CJ_EX_INDEX;
        e.index = v->idx[n->attrs.axis];
        append_label(f, "iota");
        *out = add_expr(f, &e);
        return *out < 0 ? STEP_FAIL : STEP_DONE;
    case CJ_OP_NEG: case CJ_OP_ABS: case CJ_OP_SIGN: case CJ_OP_EXP: case CJ_OP_EXPM1:
    case CJ_OP_LOG: case CJ_OP_LOG1P: case CJ_OP_SQRT: case CJ_OP_RECIPROCAL: case CJ_OP_TANH:
    case CJ_OP_SIN: case CJ_OP_COS: case CJ_OP_FLOOR: case CJ_OP_CEIL: case CJ_OP_LOGICAL_NOT:
    case CJ_OP_ISNAN: case CJ_OP_ISFINITE: case CJ_OP_CAST: case CJ_OP_NAME: case CJ_OP_STOP_GRADIENT:
    case CJ_OP_ADD: case CJ_OP_SUB: case CJ_OP_MUL: case CJ_OP_DIV: case CJ_OP_FLOORDIV:
    case CJ_OP_POW: case CJ_OP_MAXIMUM: case CJ_OP_MINIMUM: case CJ_OP_LOGICAL_AND:
    case CJ_OP_LOGICAL_OR: case CJ_OP_EQ: case CJ_OP_NE: case CJ_OP_LT: case CJ_OP_LE:
    case CJ_OP_GT: case CJ_OP_GE: case CJ_OP_SELECT: {
        if (cj_op_has_flag(n->op, CJ_OPF_IDENTITY)) {
            if (fr->next) break; /* the input's expression is this node's */
            *in = n->inputs[0];
            *vin = *v;
            return STEP_INPUT;
        }
        if (fr->next < n->ninputs) { /* inputs first, in order */
            *in = n->inputs[fr->next];
            *vin = *v;
            return STEP_INPUT;
        }
        e.kind = CJ_EX_OP;
        e.op = n->op;
        e.nargs = n->ninputs;
        for (int a = 0; a < n->ninputs; a++) e.args[a] = fr->args[a];
        append_label(f, cj_op_name(n->op));
        *out = add_expr(f, &e);
        return *out < 0 ? STEP_FAIL : STEP_DONE;
    }

    case CJ_OP_BROADCAST: {
        if (fr->next) break;
        const cj_node *src = node_at(f, n->inputs[0]);
        vin->rank = src->shape.rank;
        int lead = n->shape.rank - src->shape.rank;
        for (int j = 0; j < src->shape.rank; j++)
            if (src->shape.dims[j] != 1) vin->idx[j] = v->idx[j + lead];
        *in = n->inputs[0];
        return STEP_INPUT;
    }
    case CJ_OP_TRANSPOSE:
        if (fr->next) break;
        vin->rank = n->shape.rank;
        for (int d = 0; d < n->shape.rank; d++) vin->idx[n->attrs.perm[d]] = v->idx[d];
        *in = n->inputs[0];
        return STEP_INPUT;
    case CJ_OP_SLICE:
        if (fr->next) break;
        vin->rank = n->shape.rank;
        for (int k = 0; k < n->shape.rank; k++) {
            int64_t step = n->attrs.step[k];
            vin->idx[k].offset = n->attrs.start[k] + step * v->idx[k].offset;
            for (int d = 0; d < CJ_MAX_RANK; d++) vin->idx[k].stride[d] = step * v->idx[k].stride[d];
        }
        *in = n->inputs[0];
        return STEP_INPUT;
    case CJ_OP_RESHAPE: {
        if (fr->next) break;
        int in_id = n->inputs[0];
        const cj_node *src = node_at(f, in_id);
        /* a contiguous buffer keeps row-major order: load by linear offset */
        if (f->node_buf[in_id] >= 0) {
            e.kind = CJ_EX_LOAD;
            e.dtype = src->dtype;
            e.buffer = f->node_buf[in_id];
            e.index = buffer_offset(&n->shape, v, f->k->rank);
            *out = add_expr(f, &e);
            return *out < 0 ? STEP_FAIL : STEP_DONE;
        }
        if (!reshape_input_view(&src->shape, &n->shape, v, vin)) {
            f->must_materialize = in_id;
            return STEP_FAIL;
        }
        *in = in_id;
        return STEP_INPUT;
    }

    case CJ_OP_CONCATENATE:
    case CJ_OP_REDUCE_SUM: case CJ_OP_REDUCE_PROD: case CJ_OP_REDUCE_MAX: case CJ_OP_REDUCE_MIN:
    case CJ_OP_MATMUL:
        /* always materialized, so only reached for the kernel's own root */
        cj_error_set(f->err, CJ_ERR_INTERNAL, "fuse: %s inlined", cj_op_name(n->op));
        return STEP_FAIL;
    case CJ_NUM_OPS:
        cj_error_set(f->err, CJ_ERR_INTERNAL, "fuse: unknown op %d", (int)n->op);
        return STEP_FAIL;
    }
    /* a one-input op whose input is built: its expression is the input's */
    *out = fr->args[0];
    return STEP_DONE;
}

/* Builds (or reuses) the expression of `node` seen through `v`; -1 on
 * failure (f->err set, or f->must_materialize names a node). */
static int build_expr(fuser *f, int node, const node_view *v) {
    int found = memo_find(f, node, v);
    if (found >= 0) return found;
    int depth = 0, result = -1;
    if (!grow((void **)&f->stack, &f->stack_cap, 1, sizeof(expr_frame))) goto oom;
    memset(&f->stack[0], 0, sizeof f->stack[0]);
    f->stack[0].node = node;
    f->stack[0].view = *v;
    depth = 1;
    while (depth > 0) {
        expr_frame *fr = &f->stack[depth - 1];
        int out = -1, in = -1;
        node_view vin;
        expr_step step = expr_visit(f, fr, &out, &in, &vin);
        if (step == STEP_FAIL) return -1;
        if (step == STEP_INPUT) {
            int e = memo_find(f, in, &vin);
            if (e >= 0) { /* already built: hand it to the frame and look again */
                fr->args[fr->next++] = e;
                continue;
            }
            if (!grow((void **)&f->stack, &f->stack_cap, depth + 1, sizeof(expr_frame))) goto oom;
            expr_frame *child = &f->stack[depth++];
            memset(child, 0, sizeof *child);
            child->node = in;
            child->view = vin;
            continue;
        }
        /* this frame is done: remember it, and give its expression to its parent */
        if (!memo_add(f, fr->node, &fr->view, out)) goto oom;
        depth--;
        if (depth == 0) result = out;
        else {
            expr_frame *parent = &f->stack[depth - 1];
            parent->args[parent->next++] = out;
        }
    }
    return result;
oom:
    cj_error_set(f->err, CJ_ERR_MEMORY, "fuse: out of memory");
    return -1;
}

/* ---- kernels ------------------------------------------------------------- */

static cj_kernel *begin_kernel(fuser *f, int root, int rank, const int64_t *dims) {
    cj_plan *p = f->plan;
    if (!grow((void **)&p->kernels, &p->kernels_cap, p->nkernels + 1, sizeof(cj_kernel))) {
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
    memo_clear(f);
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
        memset(k, 0, sizeof *k);
        f->k = NULL;
        return false;
    }
    /* the stored value must be the last expression */
    if (value_expr != k->nexprs - 1) {
        cj_expr copy = k->exprs[value_expr];
        if (add_expr(f, &copy) < 0) return end_kernel(f, -1);
    }
    if (!f->label[0]) append_label(f, k->nexprs && k->exprs[k->nexprs - 1].kind == CJ_EX_LOAD ? "copy" : "fill");
    k->label = strdup(f->label);
    f->plan->nkernels++;
    f->k = NULL;
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
    contiguous_strides(s, strides);
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
    return end_kernel(f, build_expr(f, node, &v));
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
    int e = build_expr(f, n->inputs[0], &v);
    append_label(f, cj_op_name(n->op));
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
    int ea = build_expr(f, n->inputs[0], &va);
    int eb = ea < 0 ? -1 : build_expr(f, n->inputs[1], &vb);
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
        e = add_expr(f, &mul);
        append_label(f, "matmul");
    }
    if (n->dtype == CJ_BOOL) f->k->reduce_op = CJ_OP_REDUCE_MAX; /* "any" */
    return end_kernel(f, e);
}

/* One kernel per input, each writing its slab of the output. */
static bool emit_concatenate(fuser *f, int node, int buf) {
    const cj_node *n = node_at(f, node);
    int64_t strides[CJ_MAX_RANK];
    contiguous_strides(&n->shape, strides);
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
        int e = build_expr(f, n->inputs[i], &v);
        append_label(f, "concatenate");
        if (!end_kernel(f, e)) return false;
        pos += in->shape.dims[n->attrs.axis];
    }
    return true;
}

static bool emit_node(fuser *f, int node, int buf) {
    switch (cj_op_kind(node_at(f, node)->op)) {
    case CJ_OPKIND_REDUCE: return emit_reduce(f, node, buf);
    case CJ_OPKIND_MATMUL: return emit_matmul(f, node, buf);
    case CJ_OPKIND_CONCAT: return emit_concatenate(f, node, buf);
    case CJ_OPKIND_SOURCE: case CJ_OPKIND_UNARY: case CJ_OPKIND_BINARY: case CJ_OPKIND_COMPARE:
    case CJ_OPKIND_SELECT: case CJ_OPKIND_CAST: case CJ_OPKIND_MOVE:
        break;
    }
    return emit_elementwise(f, node, buf);
}

/* Recompute a multi-use elementwise value inline in each consumer when the
 * extra work, its chain's cost (roughly: arithmetic ops; transcendentals
 * count 4) times the consumers beyond the first, is at most this much, and
 * it has at most this many consumers.  So exp(x - max) in a softmax (cost
 * 5, two consumers) is recomputed, and a gelu read by three consumers
 * (cost 12, extra work 24) is stored once. */
#define CJ_RECOMPUTE_MAX_COST 16
#define CJ_RECOMPUTE_MAX_USERS 4

/* The most work (cj_op_cost, ops.def's cost column, summed over the fused
 * ops) one kernel's loop body takes: a longer elementwise chain is cut
 * into kernels of about this size.  LLVM's time on one loop body grows faster than its length (a
 * chain of 500 sin compiled in 20 s as one kernel), and past a hundred
 * ops a bigger body saves no memory traffic worth having.  Measured on
 * chains of 1000 sin and 5000 multiply-adds: cut at 64 they compiled in
 * 0.65 s and 0.99 s, at 128 in 0.51 s and 0.35 s, at 256 in 0.43 s and
 * 0.51 s (kernels of many transcendentals call them, see codegen.c). */
#define CJ_KERNEL_MAX_COST 128

/* Does consumer c read its input at its own index, so that in c's kernel
 * the input is seen through the same view as c?  Elementwise ops do (the
 * builders made broadcasting explicit), and so does a reduction, which
 * loops over its input's shape. */
static bool reads_at_own_index(const cj_node *c) {
    switch (cj_op_kind(c->op)) {
    case CJ_OPKIND_UNARY: case CJ_OPKIND_BINARY: case CJ_OPKIND_COMPARE: case CJ_OPKIND_SELECT:
    case CJ_OPKIND_CAST: case CJ_OPKIND_REDUCE:
        return true;
    case CJ_OPKIND_SOURCE: case CJ_OPKIND_MOVE: case CJ_OPKIND_CONCAT: case CJ_OPKIND_MATMUL:
        return false;
    }
    return false;
}

/* ---- multi-output kernels: sets of roots -----------------------------------
 * Roots of one shape whose values are computed from shared inputs can be
 * stored by one kernel: one loop body computes what they share once and
 * stores each.  Sets start as single roots and are merged by choose_roots;
 * a set's kernel is built where its last member is (its `pos`), so every
 * kernel a member reads runs before it, and every kernel that reads a
 * member must run after it (set_merge checks). */

/* The most values one kernel stores. */
#define CJ_MAX_STORES 16

static int set_find(const fuser *f, int i) {
    while (f->set_parent[i] != i) i = f->set_parent[i];
    return i;
}

static bool sets_alloc(fuser *f, int n) {
    int **arrays[] = {&f->set_parent, &f->set_next, &f->set_tail, &f->set_pos, &f->set_size, &f->set_cost};
    for (size_t a = 0; a < sizeof arrays / sizeof *arrays; a++)
        if (!(*arrays[a] = malloc(sizeof(int) * ((size_t)n + 1)))) return false;
    for (int i = 0; i < n; i++) {
        f->set_parent[i] = f->set_tail[i] = f->set_pos[i] = i;
        f->set_next[i] = -1;
        f->set_size[i] = 1;
        f->set_cost[i] = 0;
    }
    return true;
}

static void sets_free(fuser *f) {
    free(f->set_parent);
    free(f->set_next);
    free(f->set_tail);
    free(f->set_pos);
    free(f->set_size);
    free(f->set_cost);
}

/* Can the kernel of root i store other values at every point? */
static bool elementwise_root(const cj_node *nd) {
    switch (cj_op_kind(nd->op)) {
    case CJ_OPKIND_UNARY: case CJ_OPKIND_BINARY: case CJ_OPKIND_COMPARE: case CJ_OPKIND_SELECT:
    case CJ_OPKIND_CAST:
        return true;
    case CJ_OPKIND_SOURCE: case CJ_OPKIND_MOVE: case CJ_OPKIND_CONCAT: case CJ_OPKIND_REDUCE:
    case CJ_OPKIND_MATMUL:
        return false;
    }
    return false;
}

/* The consumers of each node (choose_roots' lists) and who computes them. */
typedef struct {
    const int *first, *list; /* consumers of i: list[first[i] .. first[i+1]) */
    const int *owner;        /* the root whose kernel computes a node, or -1 */
} consumers;

/* Merges the sets sets[0..n) (distinct representatives of roots) into one
 * if they may be one kernel: all elementwise roots of one shape, at most
 * CJ_MAX_STORES values and CJ_KERNEL_MAX_COST of work, and every consumer
 * of a member either in the merged kernel, reading it at its own index,
 * or in a kernel that runs after it.  Returns the merged set, or -1. */
static int set_merge(fuser *f, const int *sets, int n, const consumers *cs) {
    const cj_graph *g = f->g;
    const cj_shape *shape = &g->nodes[sets[0]].shape;
    int size = 0, cost = 0, pos = -1;
    for (int j = 0; j < n; j++) {
        int s = sets[j];
        if (!cj_shape_equal(&g->nodes[s].shape, shape)) return -1;
        for (int m = s; m >= 0; m = f->set_next[m])
            if (!elementwise_root(&g->nodes[m])) return -1;
        size += f->set_size[s];
        cost += f->set_cost[s];
        if (f->set_pos[s] > pos) pos = f->set_pos[s];
    }
    if (size > CJ_MAX_STORES || cost > CJ_KERNEL_MAX_COST) return -1;
    for (int j = 0; j < n; j++)
        for (int m = sets[j]; m >= 0; m = f->set_next[m])
            for (int q = cs->first[m]; q < cs->first[m + 1]; q++) {
                int c = cs->list[q];
                if (cs->owner[c] < 0) { /* inlined wherever it is used: all of them come after c */
                    if (c <= pos) return -1;
                    continue;
                }
                int x = set_find(f, cs->owner[c]);
                bool inside = false;
                for (int t = 0; t < n; t++) inside |= sets[t] == x;
                if (inside ? !reads_at_own_index(&g->nodes[c]) : f->set_pos[x] <= pos) return -1;
            }
    int into = sets[0];
    for (int j = 1; j < n; j++) {
        int s = sets[j];
        f->set_parent[s] = into;
        f->set_next[f->set_tail[into]] = s;
        f->set_tail[into] = f->set_tail[s];
    }
    f->set_size[into] = size;
    f->set_cost[into] = cost;
    f->set_pos[into] = pos;
    return into;
}

/* The distinct sets computing the consumers of i that read it at their
 * own index, into sets[]; -1 if some consumer is in no known kernel or
 * reads i otherwise, or there are too many. */
static int consumer_sets(const fuser *f, int i, const consumers *cs, int *sets, int own) {
    int n = 0;
    if (own >= 0) sets[n++] = own;
    for (int q = cs->first[i]; q < cs->first[i + 1]; q++) {
        int c = cs->list[q];
        if (cs->owner[c] < 0 || !reads_at_own_index(&f->g->nodes[c])) return -1;
        int x = set_find(f, cs->owner[c]);
        bool seen = false;
        for (int t = 0; t < n; t++) seen |= sets[t] == x;
        if (seen) continue;
        if (n == CJ_MAX_STORES) return -1;
        sets[n++] = x;
    }
    return n;
}

/* Which nodes get buffers, before any kernel is built.  Two passes:
 *
 * Forward, the nodes that must be stored whatever their consumers do
 * (outputs, reductions, matmuls and their computed operands, concatenates)
 * and the cuts of long chains, by the chain's cost: a value read by several
 * consumers is charged to the first of them only, as it is computed once
 * when they share a kernel.
 *
 * Backward, each remaining value's owner: the root whose kernel computes it
 * (all its consumers are computed in that kernel, each reading the value at
 * its own index).  A value read by several consumers with one owner is
 * computed once in that kernel and kept in a register (the expression memo
 * makes it one expression): y = exp(-y*y) + y repeated is one loop with no
 * temporaries.  One whose consumers are in different kernels, or read it
 * through other views, is recomputed in each when that is cheap (a short
 * chain: exp(x - max) in a softmax, read by the row sum and the quotient)
 * and stored once otherwise. */
static void choose_roots(fuser *f, const bool *live, bool enabled) {
    const cj_graph *g = f->g;
    int n = g->nnodes;
    int *users = calloc((size_t)n + 1, sizeof(int));
    int *cost = calloc((size_t)n + 1, sizeof(int));
    int *counted_by = malloc(sizeof(int) * ((size_t)n + 1)); /* the last consumer counted */
    int *first = calloc((size_t)n + 2, sizeof(int));          /* consumers of i: list[first[i] .. first[i+1]) */
    int *owner = malloc(sizeof(int) * ((size_t)n + 1));
    bool *charged = calloc((size_t)n + 1, sizeof(bool));
    int *list = NULL;
    bool counts = users && cost && counted_by && first && owner && charged;
    if (counts) {
        int total = 0;
        for (int i = 0; i < n; i++) counted_by[i] = -1;
        for (int i = 0; i < n; i++) {
            if (!live[i]) continue;
            const cj_node *nd = &g->nodes[i];
            for (int a = 0; a < nd->ninputs; a++) /* count distinct consumers */
                if (counted_by[nd->inputs[a]] != i) {
                    counted_by[nd->inputs[a]] = i;
                    users[nd->inputs[a]]++;
                    total++;
                }
        }
        counts = (list = malloc(sizeof(int) * ((size_t)total + 1))) != NULL;
        for (int i = 0; counts && i < n; i++) first[i + 1] = first[i] + users[i];
        for (int i = 0; counts && i < n; i++) counted_by[i] = -1;
        int *fill = owner; /* borrowed as the fill position of each list */
        for (int i = 0; counts && i < n; i++) fill[i] = first[i];
        for (int i = 0; counts && i < n; i++) {
            if (!live[i]) continue;
            const cj_node *nd = &g->nodes[i];
            for (int a = 0; a < nd->ninputs; a++)
                if (counted_by[nd->inputs[a]] != i) {
                    counted_by[nd->inputs[a]] = i;
                    list[fill[nd->inputs[a]]++] = i;
                }
        }
    }
    for (int i = 0; i < n; i++) {
        if (!live[i]) continue;
        const cj_node *nd = &g->nodes[i];
        cj_opkind kind = cj_op_kind(nd->op);
        bool computes = kind != CJ_OPKIND_SOURCE && kind != CJ_OPKIND_MOVE && !cj_op_has_flag(nd->op, CJ_OPF_IDENTITY);
        if (nd->op == CJ_OP_PARAM || nd->op == CJ_OP_ARRAY) continue;
        if (!enabled) {
            f->root[i] = nd->op != CJ_OP_CONSTANT && nd->op != CJ_OP_IOTA;
            continue;
        }
        if (!counts) { /* out of memory for the counts: store everything */
            f->root[i] = computes || kind == CJ_OPKIND_REDUCE || kind == CJ_OPKIND_MATMUL || kind == CJ_OPKIND_CONCAT;
            continue;
        }
        if (kind == CJ_OPKIND_REDUCE || kind == CJ_OPKIND_MATMUL || kind == CJ_OPKIND_CONCAT)
            f->root[i] = true;
        /* an output computed here is written once, straight into its array */
        if (kind != CJ_OPKIND_SOURCE)
            for (int j = 0; j < g->noutputs; j++) f->root[i] |= g->outputs[j] == i;
        int my_cost = cj_op_cost(nd->op);
        for (int a = 0; a < nd->ninputs; a++) {
            int x = nd->inputs[a];
            bool repeated = false; /* x * x reads x once (a concatenate is a root: its cost is not used) */
            for (int b = 0; b < a && nd->ninputs <= 3; b++) repeated |= nd->inputs[b] == x;
            if (f->root[x] || repeated || charged[x]) continue;
            my_cost += cost[x];
            if (users[x] > 1) charged[x] = true;
        }
        cost[i] = my_cost;
        /* a chain too long for one loop body is cut here (see CJ_KERNEL_MAX_COST) */
        if (my_cost > CJ_KERNEL_MAX_COST && computes) f->root[i] = true;
        if (kind == CJ_OPKIND_MATMUL) {
            /* matmul operands that compute something are stored, not recomputed per output */
            for (int a = 0; a < 2; a++) {
                int x = nd->inputs[a];
                while (cj_op_kind(g->nodes[x].op) == CJ_OPKIND_MOVE || cj_op_has_flag(g->nodes[x].op, CJ_OPF_IDENTITY))
                    x = g->nodes[x].inputs[0];
                cj_opkind xk = cj_op_kind(g->nodes[x].op);
                if (xk != CJ_OPKIND_SOURCE) f->root[x] = true;
            }
        }
    }
    consumers cs = {first, list, owner};
    int sets[CJ_MAX_STORES];
    for (int i = n - 1; enabled && counts && i >= 0; i--) {
        owner[i] = -1;
        if (!live[i]) continue;
        const cj_node *nd = &g->nodes[i];
        if (f->root[i]) {
            owner[i] = i;
            f->set_cost[i] = cost[i];
            /* read by other elementwise kernels of its shape: stored by one of them */
            int ns = elementwise_root(nd) ? consumer_sets(f, i, &cs, sets, i) : -1, kept = 1;
            for (int j = 1; j < ns; j++)
                if (elementwise_root(&g->nodes[sets[j]]) && cj_shape_equal(&g->nodes[sets[j]].shape, &nd->shape))
                    sets[kept++] = sets[j];
            if (kept > 1) set_merge(f, sets, kept, &cs);
            continue;
        }
        /* the one kernel every consumer is computed in, reading i at its own index, or -1 */
        int common = -2;
        for (int q = first[i]; q < first[i + 1] && common != -1; q++) {
            int c = list[q];
            int oc = reads_at_own_index(&g->nodes[c]) && owner[c] >= 0 ? set_find(f, owner[c]) : -1;
            common = oc < 0 || (common != -2 && common != oc) ? -1 : oc;
        }
        owner[i] = common >= 0 ? common : -1;
        if (owner[i] >= 0 || users[i] < 2) continue;
        cj_opkind kind = cj_op_kind(nd->op);
        if (kind == CJ_OPKIND_SOURCE || kind == CJ_OPKIND_MOVE) continue;
        /* an identity of something already in memory (grad's identity of a
         * weight, read by every recomputation of its layer) costs nothing to
         * read through: storing it would only copy it */
        if (cj_op_has_flag(nd->op, CJ_OPF_IDENTITY) && cost[i] == 0) continue;
        /* consumers in several kernels: one kernel computing them all, if they can be */
        int ns = consumer_sets(f, i, &cs, sets, -1);
        if (ns > 1 && (owner[i] = set_merge(f, sets, ns, &cs)) >= 0) continue;
        owner[i] = -1;
        /* else recompute a short chain in each, store a long one */
        if (users[i] > CJ_RECOMPUTE_MAX_USERS || cost[i] * (users[i] - 1) > CJ_RECOMPUTE_MAX_COST) {
            f->root[i] = true;
            owner[i] = i;
        }
    }
    free(users);
    free(cost);
    free(counted_by);
    free(first);
    free(owner);
    free(charged);
    free(list);
}

static void plan_reset(cj_plan *p) {
    for (int i = 0; i < p->nkernels; i++) {
        free(p->kernels[i].exprs);
        free(p->kernels[i].label);
        free(p->kernels[i].also);
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
        if ((e = build_expr(f, members[j], &v)) < 0) break;
        if (j == n - 1) break;
        k->also[k->nalso++] = (cj_store){.expr = e, .buffer = bufs[j], .index = k->out_index, .node = members[j]};
    }
    if (!end_kernel(f, e)) return false;
    for (int j = 0; j < n; j++) f->node_buf[members[j]] = bufs[j];
    return true;
}

/* One attempt at building every kernel; returns the node that must be
 * materialized before trying again, -1 when done, -2 on error. */
static int fuse_attempt(fuser *f) {
    const cj_graph *g = f->g;
    cj_plan *p = f->plan;
    plan_reset(p);
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
        int set = set_find(f, i);
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
        if (!end_kernel(f, build_expr(f, nid, &v))) {
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
    if (!sets_alloc(&f, g->nnodes)) {
        free(f.root);
        free(f.node_buf);
        sets_free(&f);
        return cj_error_set(err, CJ_ERR_MEMORY, "fuse: out of memory");
    }
    choose_roots(&f, live, enabled);
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
    sets_free(&f);
    return again == -1 ? CJ_OK : err->status;
}
