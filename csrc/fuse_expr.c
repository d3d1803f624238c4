/* fuse_expr.c - a kernel's expressions, built from the graph through views
 * (movement ops change only the affine offsets at which leaves load), with
 * a memo so that a value read twice in one loop body is one expression. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse.h"

/* ---- expressions --------------------------------------------------------- */

/* See fuse.h. */
int fuse_add_expr(fuser *f, const cj_expr *e) {
    cj_kernel *k = f->k;
    if (!cj_grow((void **)&k->exprs, &f->exprs_cap, k->nexprs + 1, sizeof(cj_expr))) {
        cj_error_set(f->err, CJ_ERR_MEMORY, "fuse: out of memory");
        return -1;
    }
    k->exprs[k->nexprs] = *e;
    return k->nexprs++;
}

/* See fuse.h. */
void fuse_append_label(fuser *f, const char *name) {
    size_t len = strlen(f->label);
    if (len + strlen(name) + 2 >= sizeof f->label) return;
    if (len) strcat(f->label, "+");
    strcat(f->label, name);
}

/* Element offset of a load from a contiguous buffer of shape `s` seen
 * through view `v`. */
static cj_affine buffer_offset(const cj_shape *s, const node_view *v, int loop_rank) {
    int64_t strides[CJ_MAX_RANK];
    cj_contiguous_strides(s, strides);
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

/* See fuse.h. */
void fuse_memo_clear(fuser *f) {
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
    if (!cj_grow((void **)&f->memo, &f->memo_cap, f->nmemo + 1, sizeof(memo_entry))) return false;
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

int fuse_load_expr(fuser *f, int node, int buf, const node_view *v) {
    const cj_node *n = node_at(f, node);
    cj_expr e;
    memset(&e, 0, sizeof e);
    e.kind = CJ_EX_LOAD;
    e.dtype = n->dtype;
    e.buffer = buf;
    e.index = buffer_offset(&n->shape, v, f->k->rank);
    return fuse_add_expr(f, &e);
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
        *out = fuse_load_expr(f, fr->node, f->node_buf[fr->node], v);
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
        *out = fuse_add_expr(f, &e);
        return *out < 0 ? STEP_FAIL : STEP_DONE;
    case CJ_OP_IOTA:
        e.kind = CJ_EX_INDEX;
        e.index = v->idx[n->attrs.axis];
        fuse_append_label(f, "iota");
        *out = fuse_add_expr(f, &e);
        return *out < 0 ? STEP_FAIL : STEP_DONE;
    /* elementwise: an expression of its inputs' (every unary record of ops_unary.def among them) */
#define UNARY(NAME, ...) case CJ_OP_##NAME:
#include "ops_unary.def"
#undef UNARY
    case CJ_OP_CAST: case CJ_OP_NAME: case CJ_OP_STOP_GRADIENT:
    case CJ_OP_ADD: case CJ_OP_SUB: case CJ_OP_MUL: case CJ_OP_DIV: case CJ_OP_FLOORDIV:
    case CJ_OP_POW: case CJ_OP_MAXIMUM: case CJ_OP_MINIMUM: case CJ_OP_LOGICAL_AND:
    case CJ_OP_LOGICAL_OR: case CJ_OP_EQ: case CJ_OP_NE: case CJ_OP_LT: case CJ_OP_LE:
    case CJ_OP_GT: case CJ_OP_GE: case CJ_OP_SELECT: case CJ_OP_FMA: case CJ_OP_BITCAST:
    case CJ_OP_BITWISE_AND: case CJ_OP_BITWISE_OR: case CJ_OP_BITWISE_XOR: case CJ_OP_SHIFT_LEFT:
    case CJ_OP_SHIFT_RIGHT_LOGICAL: case CJ_OP_SHIFT_RIGHT_ARITHMETIC: case CJ_OP_ROTATE_LEFT: {
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
        fuse_append_label(f, cj_op_name(n->op));
        *out = fuse_add_expr(f, &e);
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
            *out = fuse_add_expr(f, &e);
            return *out < 0 ? STEP_FAIL : STEP_DONE;
        }
        if (!reshape_input_view(&src->shape, &n->shape, v, vin)) {
            f->must_materialize = in_id;
            return STEP_FAIL;
        }
        *in = in_id;
        return STEP_INPUT;
    }

    case CJ_OP_GATHER: {
        /* the index is computed here (seen through the dims it spans); the
         * operand is loaded from its buffer at the index it gives */
        const cj_node *x = node_at(f, n->inputs[0]), *ix = node_at(f, n->inputs[1]);
        int axis = n->attrs.axis;
        if (!fr->next) {
            vin->rank = ix->shape.rank;
            for (int j = 0; j < ix->shape.rank; j++) vin->idx[j] = v->idx[axis + j];
            *in = n->inputs[1];
            return STEP_INPUT;
        }
        if (f->node_buf[n->inputs[0]] < 0) {
            f->must_materialize = n->inputs[0];
            return STEP_FAIL;
        }
        node_view vx;
        memset(&vx, 0, sizeof vx);
        vx.rank = x->shape.rank;
        for (int d = 0; d < x->shape.rank; d++)
            if (d != axis) vx.idx[d] = v->idx[d < axis ? d : d + ix->shape.rank - 1];
        int64_t strides[CJ_MAX_RANK];
        cj_contiguous_strides(&x->shape, strides);
        e.kind = CJ_EX_GATHER;
        e.buffer = f->node_buf[n->inputs[0]];
        e.index = buffer_offset(&x->shape, &vx, f->k->rank);
        e.nargs = 1;
        e.args[0] = fr->args[0];
        e.dyn_dim = x->shape.dims[axis];
        e.dyn_stride = x->shape.dims[axis] == 1 ? 0 : strides[axis];
        fuse_append_label(f, "gather");
        *out = fuse_add_expr(f, &e);
        return *out < 0 ? STEP_FAIL : STEP_DONE;
    }
    case CJ_OP_CONCATENATE:
    case CJ_OP_REDUCE_SUM: case CJ_OP_REDUCE_PROD: case CJ_OP_REDUCE_MAX: case CJ_OP_REDUCE_MIN:
    case CJ_OP_MATMUL:
    case CJ_OP_SCATTER_ADD: case CJ_OP_SCATTER_MUL: case CJ_OP_SCATTER_MIN: case CJ_OP_SCATTER_MAX:
    case CJ_OP_ARGSORT: case CJ_OP_CHOLESKY: case CJ_OP_LU: case CJ_OP_LU_PIVOTS: case CJ_OP_TRIANGULAR_SOLVE: case CJ_OP_QR: case CJ_OP_EIGH: case CJ_OP_SVD:
    case CJ_OP_SCAN: case CJ_OP_WHILE: case CJ_OP_COND: case CJ_OP_CUSTOM: case CJ_OP_RESULT:
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
int fuse_build_expr(fuser *f, int node, const node_view *v) {
    int found = memo_find(f, node, v);
    if (found >= 0) return found;
    int depth = 0, result = -1;
    if (!cj_grow((void **)&f->stack, &f->stack_cap, 1, sizeof(expr_frame))) goto oom;
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
            if (!cj_grow((void **)&f->stack, &f->stack_cap, depth + 1, sizeof(expr_frame))) goto oom;
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

