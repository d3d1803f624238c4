/* batching.c - vmap: a batched copy of the nodes traced on one example.
 *
 * The Python side traces the function once into the caller's own graph,
 * on placeholder nodes of the per-example shapes, then calls cj_batch,
 * which walks those nodes in order and appends, for each one that depends
 * on a placeholder, the same computation with a batch dimension in front.
 * The rule of each op is one of these kinds (every elementwise op is
 * ELEMENTWISE, by its op kind; the others are in the table below):
 *
 *   ELEMENTWISE  operands that are not batched are broadcast over the batch
 *                dimension (a stride-0 view: no copy), then the op is
 *                applied to the batched shapes;
 *   SHIFT        the same, with the attributes that name dims moved up by
 *                one (axis + 1, axes << 1, perm and slice bounds gain a
 *                leading entry, a shape gains the batch size);
 *   BROADCAST    NumPy aligns trailing dims, so the batched input first
 *                gets the new leading dims as 1s after the batch dim;
 *   MATMUL       a batched left operand against an unbatched matrix is one
 *                product with the batch folded into the rows (a gemm, not
 *                `size` small ones); a product over K == 1 (an outer
 *                product) a broadcast multiplication; otherwise both
 *                operands batched.
 *
 * Nodes that do not depend on a placeholder (closed-over values, constants,
 * values of the enclosing trace) are shared, not copied. */
#include <stdlib.h>
#include <string.h>

#include "batching.h"
#include "regions.h"

static const cj_batch_rule rules[CJ_NUM_OPS] = {
    [CJ_OP_PARAM] = CJ_BATCH_NONE,
    [CJ_OP_ARRAY] = CJ_BATCH_NONE,
    [CJ_OP_CONSTANT] = CJ_BATCH_NONE,
    [CJ_OP_IOTA] = CJ_BATCH_NONE,
    [CJ_OP_BROADCAST] = CJ_BATCH_BROADCAST,
    [CJ_OP_RESHAPE] = CJ_BATCH_SHIFT,
    [CJ_OP_TRANSPOSE] = CJ_BATCH_SHIFT,
    [CJ_OP_SLICE] = CJ_BATCH_SHIFT,
    [CJ_OP_CONCATENATE] = CJ_BATCH_SHIFT,
    [CJ_OP_REDUCE_SUM] = CJ_BATCH_SHIFT,
    [CJ_OP_REDUCE_PROD] = CJ_BATCH_SHIFT,
    [CJ_OP_REDUCE_MAX] = CJ_BATCH_SHIFT,
    [CJ_OP_REDUCE_MIN] = CJ_BATCH_SHIFT,
    [CJ_OP_MATMUL] = CJ_BATCH_MATMUL,
    [CJ_OP_ARGSORT] = CJ_BATCH_SHIFT, /* rows along the last axis: a batch dim in front is more rows */
    [CJ_OP_CHOLESKY] = CJ_BATCH_SHIFT, /* matrices in the last two dims: a batch dim in front is more of them */
    [CJ_OP_TRIANGULAR_SOLVE] = CJ_BATCH_SHIFT,
    [CJ_OP_LU] = CJ_BATCH_SHIFT,
    [CJ_OP_LU_PIVOTS] = CJ_BATCH_SHIFT,
    [CJ_OP_QR] = CJ_BATCH_SHIFT,
    [CJ_OP_EIGH] = CJ_BATCH_SHIFT,
    [CJ_OP_SVD] = CJ_BATCH_SHIFT,
    [CJ_OP_GATHER] = CJ_BATCH_INDEX,
    [CJ_OP_SCATTER_ADD] = CJ_BATCH_INDEX,
    [CJ_OP_SCATTER_MUL] = CJ_BATCH_INDEX,
    [CJ_OP_SCATTER_MIN] = CJ_BATCH_INDEX,
    [CJ_OP_SCATTER_MAX] = CJ_BATCH_INDEX,
};

/* See batching.h.  Every elementwise op (by its kind: the unary records of
 * ops_unary.def among them) is ELEMENTWISE; the others are in the table.
 * Sources are NONE (0), so a new op without an entry reads as "never
 * batched", which tests/c/test_ops.c refuses for every op that is not a
 * source. */
cj_batch_rule cj_batch_rule_of(cj_op op) {
    switch (cj_op_kind(op)) {
    case CJ_OPKIND_UNARY: case CJ_OPKIND_BINARY: case CJ_OPKIND_COMPARE: case CJ_OPKIND_SELECT:
    case CJ_OPKIND_TERNARY: case CJ_OPKIND_CAST:
        return CJ_BATCH_ELEMENTWISE;
    case CJ_OPKIND_SOURCE: case CJ_OPKIND_MOVE: case CJ_OPKIND_CONCAT: case CJ_OPKIND_REDUCE: case CJ_OPKIND_MATMUL:
    case CJ_OPKIND_GATHER: case CJ_OPKIND_SCATTER: case CJ_OPKIND_SORT: case CJ_OPKIND_LINALG: case CJ_OPKIND_REGION:
        break;
    }
    return (int)op >= 0 && op < CJ_NUM_OPS ? rules[op] : CJ_BATCH_NONE;
}

typedef struct {
    cj_graph *g;
    cj_error *err;
    int *bat;     /* batched copy of each node, -1: not batched */
    int last;     /* bat's length: the nodes that existed when cj_batch began */
    int64_t size; /* the batch size */
    int loc;
    /* conds with a batched index, turned into selects: region id -> results */
    struct selected {
        int region, *results;
    } *selected;
    int nselected;
} batch_ctx;

/* s with the batch dimension in front; false (err set) past the rank limit. */
static bool prefixed(batch_ctx *c, const cj_shape *s, cj_shape *out, cj_op op) {
    if (s->rank + 1 > CJ_MAX_RANK) {
        cj_error_set(c->err, CJ_ERR_VALUE,
                     "vmap: %s of a rank-%d value gets a batch dimension, past cjit's limit of rank %d (at %s)",
                     cj_op_name(op), s->rank, CJ_MAX_RANK, cj_graph_loc_str(c->g, c->loc));
        return false;
    }
    out->rank = s->rank + 1;
    out->dims[0] = c->size;
    for (int d = 0; d < s->rank; d++) out->dims[d + 1] = s->dims[d];
    return true;
}

/* Node x with the batch dimension: its batched copy, or x broadcast. */
static int lift(batch_ctx *c, int x) {
    if (x < c->last && c->bat[x] >= 0) return c->bat[x];
    cj_node n = c->g->nodes[x];
    cj_shape s;
    if (!prefixed(c, &n.shape, &s, n.op)) return -1;
    return cj_build_broadcast(c->g, x, &s, c->loc, c->err);
}

/* ELEMENTWISE and SHIFT: the node again on lifted operands, with every
 * attribute that names a dim (those the op uses, ops.def's attrs column)
 * moved up by one. */
static int shift(batch_ctx *c, const cj_node *n) {
    cj_node p = *n;
    int small[8];
    int *ins = n->ninputs <= 8 ? small : malloc(sizeof(int) * (size_t)n->ninputs);
    if (!ins) return cj_error_set(c->err, CJ_ERR_MEMORY, "vmap: out of memory"), -1;
    bool ok = prefixed(c, &n->shape, &p.shape, n->op);
    for (int i = 0; ok && i < n->ninputs; i++) ok = (ins[i] = lift(c, n->inputs[i])) >= 0;
    unsigned attrs = cj_op_attrs(n->op);
    if (ok && (attrs & CJ_ATTR_AXIS)) p.attrs.axis = n->attrs.axis + 1;
    if (ok && (attrs & CJ_ATTR_AXES)) p.attrs.axes = n->attrs.axes << 1;
    for (int d = n->shape.rank; ok && d >= 0; d--) {
        if (attrs & CJ_ATTR_PERM) p.attrs.perm[d] = d == 0 ? 0 : n->attrs.perm[d - 1] + 1;
        if (attrs & CJ_ATTR_START) p.attrs.start[d] = d == 0 ? 0 : n->attrs.start[d - 1];
        if (attrs & CJ_ATTR_STEP) p.attrs.step[d] = d == 0 ? 1 : n->attrs.step[d - 1];
    }
    int r = -1;
    if (ok) {
        p.inputs = ins;
        p.remat = false;
        r = cj_graph_append(c->g, &p, c->err);
    }
    if (ins != small) free(ins);
    return r;
}

/* BROADCAST: [B, in...] -> [B, 1 (new leading dims)..., in...] -> [B, out...] */
static int broadcast(batch_ctx *c, const cj_node *n) {
    int x = c->bat[n->inputs[0]];
    cj_shape in = c->g->nodes[n->inputs[0]].shape, mid, out;
    if (!prefixed(c, &n->shape, &out, n->op)) return -1;
    int lead = n->shape.rank - in.rank;
    mid.rank = out.rank;
    mid.dims[0] = c->size;
    for (int d = 0; d < n->shape.rank; d++) mid.dims[d + 1] = d < lead ? 1 : in.dims[d - lead];
    int r = cj_build_reshape(c->g, x, &mid, c->loc, c->err);
    return r < 0 ? -1 : cj_build_broadcast(c->g, r, &out, c->loc, c->err);
}

/* MATMUL: (B, M, K) @ (K, N) as (B M, K) @ (K, N); anything else batched. */
static int matmul(batch_ctx *c, const cj_node *n) {
    int x = n->inputs[0], y = n->inputs[1];
    cj_node a = c->g->nodes[x];
    if (c->bat[x] >= 0 && c->bat[y] < 0 && a.shape.rank == 2) {
        cj_shape rows = {2, {c->size * a.shape.dims[0], a.shape.dims[1]}}, out;
        if (!prefixed(c, &n->shape, &out, n->op)) return -1;
        int r = cj_build_reshape(c->g, c->bat[x], &rows, c->loc, c->err);
        r = r < 0 ? -1 : cj_build_matmul(c->g, r, y, c->loc, c->err);
        return r < 0 ? -1 : cj_build_reshape(c->g, r, &out, c->loc, c->err);
    }
    /* K == 1, the per-example outer products of a weight gradient (x^T g):
     * a broadcast product, one pass writing the result, where a gemm per
     * example packs its operands for a single term */
    if (a.shape.dims[a.shape.rank - 1] == 1 && n->dtype != CJ_BOOL) {
        int lx = lift(c, x), ly = lx < 0 ? -1 : lift(c, y);
        return ly < 0 ? -1 : cj_build_binary(c->g, CJ_OP_MUL, lx, ly, c->loc, c->err);
    }
    return shift(c, n);
}


/* ---- control flow: scan and cond --------------------------------------------
 *
 * A region whose inputs are batched becomes a new region whose bodies are
 * batched copies of the old ones: each body graph is copied, given
 * parameters with the batch dimension for the batched slots, and run
 * through cj_batch (a body's own regions recurse here).  To keep the loop
 * types fixed, every carry and every result is batched (broadcast if it
 * would not be).  SCAN: a batched xs (B, T, ...) enters as (T, B, ...) so the
 * loop still walks dim 0, and a stacked y leaves (T, B, ...) -> (B, T, ...).
 * COND: the index must not be batched (each example taking its own branch
 * is a select).  WHILE: refused (the condition would differ per example). */

/* ---- indexing (gather, scatters) ---------------------------------------------
 * An unbatched index gathers from (or scatters into) every example alike:
 * the op again one dim further in.  A batched one (each example its own
 * indices) merges the batch into the indexed dim, B x n -> B*n, and offsets
 * example b's indices by b*n, so one gather or scatter serves all. */

/* x with its dim `from` moved to `to`, the others in order. */
static int move_dim(batch_ctx *c, int x, int from, int to) {
    int rank = c->g->nodes[x].shape.rank, perm[CJ_MAX_RANK], k = 0;
    if (from == to) return x;
    for (int d = 0; d < rank; d++)
        if (d != from) perm[k++] = d;
    memmove(perm + to + 1, perm + to, sizeof(int) * (size_t)(rank - 1 - to));
    perm[to] = from;
    return cj_build_transpose(c->g, x, perm, c->loc, c->err);
}

/* Example b's index i into a dim of n, as an index into the merged dim of
 * B*n (B*n itself, out of range, for a dropped one when drop). */
static int merged_index(batch_ctx *c, int bidx, int64_t n, bool drop) {
    cj_graph *g = c->g;
    cj_shape is = g->nodes[bidx].shape, scalar = {0, {0}};
    int i = cj_build_index_clamped(g, bidx, n, c->loc, c->err);
    int b = cj_build_iota(g, &is, 0, CJ_INT64, c->loc, c->err);
    int len = cj_build_constant(g, (double)n, n, CJ_INT64, false, &scalar, c->loc, c->err);
    int off = b < 0 || len < 0 ? -1 : cj_build_binary(g, CJ_OP_MUL, b, len, c->loc, c->err);
    int r = i < 0 || off < 0 ? -1 : cj_build_binary(g, CJ_OP_ADD, i, off, c->loc, c->err);
    if (r < 0 || !drop) return r;
    int ok = cj_build_index_in_range(g, bidx, n, c->loc, c->err);
    int out = cj_build_constant(g, (double)(c->size * n), c->size * n, CJ_INT64, false, &scalar, c->loc, c->err);
    return ok < 0 || out < 0 ? -1 : cj_build_select(g, ok, r, out, c->loc, c->err);
}

/* x (batched, dims (B, s[0], ..., s[r-1])) with B merged into dim `axis` of s: (s[:axis], B*n, s[axis+1:]). */
static int merge_batch(batch_ctx *c, int x, int axis) {
    int m = move_dim(c, x, 0, axis);
    if (m < 0) return -1;
    cj_shape s = c->g->nodes[m].shape, t;
    t.rank = s.rank - 1;
    for (int d = 0, k = 0; d < s.rank; d++) {
        if (d == axis + 1) continue;
        t.dims[k++] = d == axis ? s.dims[axis] * s.dims[axis + 1] : s.dims[d];
    }
    return cj_build_reshape(c->g, m, &t, c->loc, c->err);
}

static int indexed(batch_ctx *c, const cj_node *n) {
    cj_graph *g = c->g;
    int axis = n->attrs.axis;
    if (n->op == CJ_OP_GATHER) {
        int x = n->inputs[0], ix = n->inputs[1], bx = c->bat[x], bi = c->bat[ix];
        if (bi < 0) return cj_build_gather(g, bx, ix, axis + 1, c->loc, c->err);
        if (bx < 0) { /* (x[:axis], B, idx..., rest) */
            int r = cj_build_gather(g, x, bi, axis, c->loc, c->err);
            return r < 0 ? -1 : move_dim(c, r, axis, 0);
        }
        int merged = merge_batch(c, bx, axis), mi = merged_index(c, bi, g->nodes[x].shape.dims[axis], false);
        int r = merged < 0 || mi < 0 ? -1 : cj_build_gather(g, merged, mi, axis, c->loc, c->err);
        return r < 0 ? -1 : move_dim(c, r, axis, 0);
    }
    /* a scatter: inputs (idx, updates) */
    int ix = n->inputs[0], bi = c->bat[ix];
    bool drop = n->attrs.index == 1;
    int upd = lift(c, n->inputs[1]);
    if (upd < 0) return -1;
    cj_shape out;
    if (!prefixed(c, &n->shape, &out, n->op)) return -1;
    if (bi < 0) return cj_build_scatter(g, n->op, ix, upd, axis + 1, &out, drop, c->loc, c->err);
    /* updates (B, s[:axis], idx..., rest) -> (s[:axis], B, idx..., rest); the result merged */
    cj_shape merged = n->shape;
    merged.dims[axis] *= c->size;
    int u = move_dim(c, upd, 0, axis), mi = merged_index(c, bi, n->shape.dims[axis], drop);
    int r = u < 0 || mi < 0 ? -1 : cj_build_scatter(g, n->op, mi, u, axis, &merged, drop, c->loc, c->err);
    if (r < 0) return -1;
    cj_shape split = n->shape;
    split.rank = n->shape.rank + 1;
    for (int d = 0; d < split.rank; d++)
        split.dims[d] = d < axis ? n->shape.dims[d] : d == axis ? c->size : n->shape.dims[d - 1];
    r = cj_build_reshape(g, r, &split, c->loc, c->err);
    return r < 0 ? -1 : move_dim(c, r, axis, 0);
}

/* The body slot region input a feeds: scan's slot 0 is the iteration
 * number, cond's input 0 the branch index (-1). */
static int slot_of_input(cj_op op, int a) { return op == CJ_OP_SCAN ? a + 1 : op == CJ_OP_COND ? a - 1 : a; }

/* (B, T, ...) <-> (T, B, ...) */
static int swap_leading(cj_graph *g, int x, int loc, cj_error *err) {
    int rank = g->nodes[x].shape.rank, perm[CJ_MAX_RANK];
    for (int d = 0; d < rank; d++) perm[d] = d;
    perm[0] = 1, perm[1] = 0;
    return cj_build_transpose(g, x, perm, loc, err);
}

/* The batched version of body graph src: parameter slot s batched when
 * batched[s]; a slot the body never read gets a parameter of slot_shape[s]
 * and slot_dtype[s] (as the region passes it); every output batched. */
static cj_graph *batch_body(const cj_graph *src, const cj_shape *slot_shape, const cj_dtype *slot_dtype,
                            const bool *batched, int nslots, int64_t size, cj_error *err) {
    cj_graph *w = cj_graph_copy(src, err), *out = NULL;
    size_t ns = (size_t)nslots + 1, no = (size_t)src->noutputs + 1;
    int *old = malloc(sizeof(int) * ns), *ph = malloc(sizeof(int) * ns), *fresh = malloc(sizeof(int) * ns);
    int *from = malloc(sizeof(int) * ns), *outs = malloc(sizeof(int) * no), *outb = malloc(sizeof(int) * no);
    int nfresh = 0, nouts = src->noutputs;
    if (!w) goto done;
    if (!old || !ph || !fresh || !from || !outs || !outb) {
        cj_error_set(err, CJ_ERR_MEMORY, "vmap: out of memory");
        goto done;
    }
    for (int s = 0; s < nslots; s++) old[s] = -1;
    for (int i = 0; i < w->nnodes; i++)
        if (w->nodes[i].op == CJ_OP_PARAM && w->nodes[i].attrs.index < nslots) old[w->nodes[i].attrs.index] = i;
    /* a parameter per slot, in slot order: the old one when it stays as it
     * is, else a new one (batched, or standing for a slot never read) */
    for (int s = 0; s < nslots; s++) {
        if (old[s] >= 0 && !batched[s]) {
            ph[s] = old[s];
            continue;
        }
        cj_node p;
        memset(&p, 0, sizeof p);
        p.op = CJ_OP_PARAM;
        p.loc = -1;
        p.attrs.index = s;
        if (old[s] >= 0) { /* batched: the old parameter with the batch dimension */
            const cj_node *o = &w->nodes[old[s]];
            p.dtype = o->dtype;
            p.shape.rank = o->shape.rank + 1;
            p.shape.dims[0] = size;
            for (int d = 0; d < o->shape.rank; d++) p.shape.dims[d + 1] = o->shape.dims[d];
        } else {
            p.dtype = slot_dtype[s];
            p.shape = slot_shape[s];
        }
        if ((ph[s] = cj_graph_append(w, &p, err)) < 0) goto done;
        if (old[s] >= 0) {
            fresh[nfresh] = ph[s];
            from[nfresh++] = old[s];
        }
    }
    for (int k = 0; k < nouts; k++) outs[k] = w->outputs[k];
    if (cj_batch(w, 0, from, fresh, nfresh, size, outs, nouts, outb, err) != CJ_OK) goto done;
    for (int k = 0; k < nouts; k++) {
        if (outb[k] >= 0) {
            outs[k] = outb[k];
            continue;
        }
        const cj_node *o = &w->nodes[outs[k]];
        cj_shape s = {o->shape.rank + 1, {size}};
        for (int d = 0; d < o->shape.rank; d++) s.dims[d + 1] = o->shape.dims[d];
        if ((outs[k] = cj_build_broadcast(w, outs[k], &s, -1, err)) < 0) goto done;
    }
    out = cj_graph_reslot(w, ph, nslots, outs, nouts, err);
done:
    free(old), free(ph), free(fresh), free(from), free(outs), free(outb);
    cj_graph_free(w);
    return out;
}

/* A cond whose branch index differs per example: every branch computed
 * on the whole batch (inlined, then batched) and the results picked per
 * example, as a select does.  Returns the first result (the region node's
 * batched stand-in); the results are kept for cj_batch_result. */
static int select_branches(batch_ctx *c, const cj_node *n, int id) {
    const cj_body *b = cj_region_body(c->g, n);
    int nb = b->ngraphs, nout = b->nresults, nargs = n->ninputs - 1, start = c->g->nnodes;
    int *outs = malloc(sizeof(int) * ((size_t)nb * (size_t)nout + 1));
    int *flat = malloc(sizeof(int) * ((size_t)nb * (size_t)nout + 1)), *res = malloc(sizeof(int) * ((size_t)nout + 1));
    int *ph = malloc(sizeof(int) * ((size_t)nargs + 1)), *bt = malloc(sizeof(int) * ((size_t)nargs + 1)), np = 0;
    struct selected *grown = realloc(c->selected, sizeof *grown * ((size_t)c->nselected + 1));
    int r = -1;
    if (grown) c->selected = grown;
    if (!outs || !flat || !res || !ph || !bt || !grown) {
        cj_error_set(c->err, CJ_ERR_MEMORY, "vmap: out of memory");
        goto done;
    }
    /* each branch on one example's values, then the new nodes batched */
    for (int i = 0; i < nb; i++)
        if (cj_graph_inline(c->g, b->graphs[i], n->inputs + 1, nargs, outs + i * nout, c->loc, c->err) != CJ_OK)
            goto done;
    for (int a = 0; a < nargs; a++)
        if (c->bat[n->inputs[a + 1]] >= 0) {
            ph[np] = n->inputs[a + 1];
            bt[np++] = c->bat[n->inputs[a + 1]];
        }
    if (cj_batch(c->g, start, ph, bt, np, c->size, outs, nb * nout, flat, c->err) != CJ_OK) goto done;
    for (int j = 0; j < nb * nout; j++)
        if ((flat[j] = flat[j] >= 0 ? flat[j] : lift(c, outs[j])) < 0) goto done;
    /* the last branch unless the index names an earlier one */
    int index = c->bat[n->inputs[0]];
    for (int k = 0; k < nout; k++) {
        int acc = flat[(nb - 1) * nout + k];
        const cj_shape *os = &c->g->nodes[acc].shape;
        cj_shape cs = {os->rank, {c->size}};
        for (int d = 1; d < os->rank; d++) cs.dims[d] = 1;
        for (int i = nb - 2; i >= 0; i--) {
            cj_shape scalar = {0, {0}};
            int ci = cj_build_constant(c->g, i, i, CJ_INT32, false, &scalar, c->loc, c->err);
            /* branch 0 takes every index <= 0: clamped, as the unbatched switch */
            int eq = ci < 0 ? -1 : cj_build_binary(c->g, i ? CJ_OP_EQ : CJ_OP_LE, index, ci, c->loc, c->err);
            int col = eq < 0 ? -1 : cj_build_reshape(c->g, eq, &cs, c->loc, c->err);
            if ((acc = col < 0 ? -1 : cj_build_select(c->g, col, flat[i * nout + k], acc, c->loc, c->err)) < 0)
                goto done;
        }
        res[k] = acc;
    }
    c->selected[c->nselected].region = id;
    c->selected[c->nselected++].results = res;
    res = NULL;
    r = c->selected[c->nselected - 1].results[0];
done:
    free(outs), free(flat), free(res), free(ph), free(bt);
    return r;
}

/* The params of body graph g by slot (every slot has one after batch_body). */
static bool params_by_slot(const cj_graph *g, int *p, int nslots, cj_error *err) {
    for (int s = 0; s < nslots; s++) p[s] = -1;
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == CJ_OP_PARAM && g->nodes[i].attrs.index < nslots) p[g->nodes[i].attrs.index] = i;
    for (int s = 0; s < nslots; s++)
        if (p[s] < 0) return cj_error_set(err, CJ_ERR_INTERNAL, "vmap: a body lacks parameter %d", s), false;
    return true;
}

/* A while_loop over a batch, with the batched condition pred (B,) and body:
 * the loop runs while any example's condition holds, and an example whose
 * condition is false keeps its carries (JAX's semantics).  Rewrites the
 * batched graphs of nb in place: cond -> any(pred); body -> select(pred,
 * body(carries), carries), the condition recomputed inside the body. */
static bool while_per_example(cj_body *nb, int ncarry, int nslots, int64_t size, cj_error *err) {
    cj_graph *cond = nb->graphs[0], *body = nb->graphs[1], *wc = NULL, *wb = NULL, *nc = NULL, *nbody = NULL;
    int *p = malloc(sizeof(int) * ((size_t)nslots + 1)), *outs = malloc(sizeof(int) * ((size_t)ncarry + 1));
    bool ok = false;
    if (!p || !outs) {
        cj_error_set(err, CJ_ERR_MEMORY, "vmap: out of memory");
        goto done;
    }
    /* the condition: any example's */
    if (!(wc = cj_graph_copy(cond, err)) || !params_by_slot(wc, p, nslots, err)) goto done;
    cj_shape scalar = {0, {0}};
    int pred = wc->outputs[0];
    int as_int = cj_build_cast(wc, pred, CJ_INT32, -1, err);
    int most = as_int < 0 ? -1 : cj_build_reduce(wc, CJ_OP_REDUCE_MAX, as_int, 1u, -1, err);
    int zero = most < 0 ? -1 : cj_build_constant(wc, 0, 0, CJ_INT32, false, &scalar, -1, err);
    int any = zero < 0 ? -1 : cj_build_binary(wc, CJ_OP_NE, most, zero, -1, err);
    if (any < 0 || !(nc = cj_graph_reslot(wc, p, nslots, &any, 1, err))) goto done;
    /* the body: the step where the example's condition holds, else the carry as it was */
    if (!(wb = cj_graph_copy(body, err)) || !params_by_slot(wb, p, nslots, err)) goto done;
    int mine;
    if (cj_graph_inline(wb, cond, p, nslots, &mine, -1, err) != CJ_OK) goto done;
    for (int k = 0; k < ncarry; k++) {
        const cj_shape *os = &wb->nodes[wb->outputs[k]].shape;
        cj_shape col = {os->rank, {size}};
        for (int d = 1; d < os->rank; d++) col.dims[d] = 1;
        int m = cj_build_reshape(wb, mine, &col, -1, err);
        if (m < 0 || (outs[k] = cj_build_select(wb, m, wb->outputs[k], p[k], -1, err)) < 0) goto done;
    }
    if (!(nbody = cj_graph_reslot(wb, p, nslots, outs, ncarry, err))) goto done;
    cj_graph_free(nb->graphs[0]);
    cj_graph_free(nb->graphs[1]);
    nb->graphs[0] = nc, nb->graphs[1] = nbody;
    nc = nbody = NULL;
    ok = true;
done:
    free(p), free(outs);
    cj_graph_free(wc), cj_graph_free(wb), cj_graph_free(nc), cj_graph_free(nbody);
    return ok;
}

/* A custom node (cjit.custom_vjp/custom_jvp) with every input batched:
 * the function and the rule batched whole, so the rule still applies to
 * the batched function.  Slots (regions.h): function [primals, consts];
 * bwd [residuals, output cotangents, consts]; jvp [primals, tangents,
 * consts]; each one batched. */
static int custom_region(batch_ctx *c, const cj_node *n) {
    const cj_body *b = cj_region_body(c->g, n);
    int nin = n->ninputs, np = b->ncarry, no = b->nys, nslots = nin + np + b->nres + no + 1;
    int *ins = malloc(sizeof(int) * ((size_t)nin + 1));
    cj_shape *shape = calloc((size_t)nslots, sizeof(cj_shape));
    cj_dtype *dtype = calloc((size_t)nslots, sizeof(cj_dtype));
    bool *batched = calloc((size_t)nslots, sizeof(bool));
    cj_body *nb = cj_body_new(CJ_OP_CUSTOM, 2);
    int r = -1, m = 0;
    if (!ins || !shape || !dtype || !batched || !nb) {
        cj_error_set(c->err, CJ_ERR_MEMORY, "vmap: out of memory");
        goto done;
    }
    for (int s = 0; s < nslots; s++) batched[s] = true;
    for (int a = 0; a < nin; a++)
        if ((ins[a] = lift(c, n->inputs[a])) < 0) goto done;
#define SLOT(shp, dt)                                                         \
    do {                                                                      \
        if (!prefixed(c, (shp), &shape[m], CJ_OP_CUSTOM)) goto done;           \
        dtype[m++] = (dt);                                                    \
    } while (0)
    for (int a = 0; a < nin; a++) SLOT(&c->g->nodes[n->inputs[a]].shape, c->g->nodes[n->inputs[a]].dtype);
    if (!(nb->graphs[0] = batch_body(b->graphs[0], shape, dtype, batched, nin, c->size, c->err))) goto done;
    m = 0;
    if (b->jvp_rule) {
        for (int a = 0; a < np; a++) SLOT(&c->g->nodes[n->inputs[a]].shape, c->g->nodes[n->inputs[a]].dtype);
        for (int a = 0; a < np; a++) SLOT(&c->g->nodes[n->inputs[a]].shape, c->g->nodes[n->inputs[a]].dtype);
    } else {
        for (int k = 0; k < b->nres; k++) SLOT(&b->result_shape[no + k], b->result_dtype[no + k]);
        for (int k = 0; k < no; k++) SLOT(&b->result_shape[k], b->result_dtype[k]);
    }
    for (int a = np; a < nin; a++) SLOT(&c->g->nodes[n->inputs[a]].shape, c->g->nodes[n->inputs[a]].dtype);
#undef SLOT
    if (!(nb->graphs[1] = batch_body(b->graphs[1], shape, dtype, batched, m, c->size, c->err))) goto done;
    nb->ncarry = np, nb->nconsts = b->nconsts, nb->nres = b->nres, nb->jvp_rule = b->jvp_rule;
    if (cj_body_finish(nb, c->err) != CJ_OK) goto done;
    r = cj_build_region(c->g, nb, ins, nin, c->loc, c->err);
done:
    cj_body_unref(nb);
    free(ins), free(shape), free(dtype), free(batched);
    return r;
}

/* The batched copy of region node n (SCAN, WHILE, COND or CUSTOM). */
static int region(batch_ctx *c, const cj_node *n, int id) {
    const cj_body *b = cj_region_body(c->g, n);
    const char *where = cj_graph_loc_str(c->g, c->loc);
    if (!b) return cj_error_set(c->err, CJ_ERR_INTERNAL, "vmap: a region without a body (at %s)", where), -1;
    if (b->op == CJ_OP_CUSTOM) return custom_region(c, n);
    if (b->op == CJ_OP_COND && c->bat[n->inputs[0]] >= 0) return select_branches(c, n, id);
    int nin = n->ninputs, nslots = b->op == CJ_OP_SCAN ? nin + 1 : b->op == CJ_OP_COND ? nin - 1 : nin;
    int *ins = malloc(sizeof(int) * ((size_t)nin + 1));
    cj_shape *shape = calloc((size_t)nslots + 1, sizeof(cj_shape));
    cj_dtype *dtype = calloc((size_t)nslots + 1, sizeof(cj_dtype));
    bool *batched = calloc((size_t)nslots + 1, sizeof(bool));
    cj_body *nb = cj_body_new(b->op, b->ngraphs);
    int r = -1;
    if (!ins || !shape || !dtype || !batched || !nb) {
        cj_error_set(c->err, CJ_ERR_MEMORY, "vmap: out of memory");
        goto done;
    }
    if (b->op == CJ_OP_SCAN) {  /* slot 0: the iteration number */
        shape[0].rank = 0;
        dtype[0] = CJ_INT32;
    }
    for (int a = 0; a < nin; a++) {
        int x = n->inputs[a], s = slot_of_input(b->op, a);
        bool carry = b->op == CJ_OP_COND ? a >= 1 && a <= b->ncarry : a < b->ncarry;
        bool xs = b->op == CJ_OP_SCAN && a >= b->ncarry && a < b->ncarry + b->nxs;
        ins[a] = carry ? lift(c, x) : c->bat[x] >= 0 ? c->bat[x] : x;
        if (ins[a] < 0) goto done;
        if (xs && c->bat[x] >= 0 && (ins[a] = swap_leading(c->g, ins[a], c->loc, c->err)) < 0) goto done;
        if (s < 0) continue;
        batched[s] = carry || c->bat[x] >= 0;
        shape[s] = c->g->nodes[ins[a]].shape;
        dtype[s] = c->g->nodes[ins[a]].dtype;
        if (xs) { /* the body sees one row */
            for (int d = 1; d < shape[s].rank; d++) shape[s].dims[d - 1] = shape[s].dims[d];
            shape[s].rank--;
        }
    }
    for (int i = 0; i < b->ngraphs; i++)
        if (!(nb->graphs[i] = batch_body(b->graphs[i], shape, dtype, batched, nslots, c->size, c->err))) goto done;
    if (b->op == CJ_OP_WHILE && !while_per_example(nb, b->ncarry, nslots, c->size, c->err)) goto done;
    nb->ncarry = b->ncarry, nb->nxs = b->nxs, nb->nconsts = b->nconsts, nb->nys = b->nys;
    nb->length = b->length, nb->reverse = b->reverse;
    if (cj_body_finish(nb, c->err) != CJ_OK) goto done;
    r = cj_build_region(c->g, nb, ins, nin, c->loc, c->err);
done:
    cj_body_unref(nb);
    free(ins), free(shape), free(dtype), free(batched);
    return r;
}

/* RESULT k of a batched region: the same result of the new region; a
 * stacked y of a scan comes (T, B, ...) and leaves (B, T, ...). */
static int result(batch_ctx *c, const cj_node *n) {
    for (int i = 0; i < c->nselected; i++)
        if (c->selected[i].region == n->inputs[0]) return c->selected[i].results[n->attrs.index];
    int nr = c->bat[n->inputs[0]];
    const cj_body *b = cj_region_body(c->g, &c->g->nodes[nr]);
    int r = cj_build_result(c->g, nr, n->attrs.index, c->loc, c->err);
    if (r >= 0 && b->op == CJ_OP_SCAN && n->attrs.index >= b->ncarry) r = swap_leading(c->g, r, c->loc, c->err);
    return r;
}

/* See batching.h. */
cj_status cj_batch(cj_graph *g, int first, const int *placeholders, const int *batched, int n, int64_t size,
                   const int *outs, int nouts, int *out_batched, cj_error *err) {
    int last = g->nnodes; /* rules run on the nodes that existed before we started */
    batch_ctx c = {.g = g, .err = err, .size = size, .loc = -1, .last = last};
    c.bat = malloc(sizeof(int) * ((size_t)last + 1));
    if (!c.bat) return cj_error_set(err, CJ_ERR_MEMORY, "vmap: out of memory");
    for (int i = 0; i < last; i++) c.bat[i] = -1;
    bool ok = size >= 0;
    if (!ok) cj_error_set(err, CJ_ERR_VALUE, "vmap: negative batch size %lld", (long long)size);
    for (int i = 0; ok && i < n; i++) {
        int p = placeholders[i], b = batched[i];
        cj_shape want;
        if (p < 0 || p >= last || b < 0 || b >= last) {
            cj_error_set(err, CJ_ERR_INTERNAL, "vmap: bad node id");
            ok = false;
        } else if (!prefixed(&c, &g->nodes[p].shape, &want, g->nodes[p].op)) {
            ok = false;
        } else if (!cj_shape_equal(&want, &g->nodes[b].shape) || g->nodes[p].dtype != g->nodes[b].dtype) {
            cj_error_set(err, CJ_ERR_INTERNAL, "vmap: a batched input does not match its placeholder");
            ok = false;
        } else {
            c.bat[p] = b;
        }
    }
    for (int id = first < 0 ? 0 : first; ok && id < last; id++) {
        cj_node nd = g->nodes[id]; /* appending may move the node array */
        if (c.bat[id] >= 0) continue;
        bool any = false;
        for (int a = 0; a < nd.ninputs; a++) any |= c.bat[nd.inputs[a]] >= 0;
        if (!any) continue;
        c.loc = nd.loc;
        int r = -1;
        switch (cj_batch_rule_of(nd.op)) {
        case CJ_BATCH_ELEMENTWISE:
        case CJ_BATCH_SHIFT: r = shift(&c, &nd); break;
        case CJ_BATCH_BROADCAST: r = broadcast(&c, &nd); break;
        case CJ_BATCH_MATMUL: r = matmul(&c, &nd); break;
        case CJ_BATCH_INDEX: r = indexed(&c, &nd); break;
        case CJ_BATCH_NONE:
            if (nd.op == CJ_OP_RESULT)
                r = result(&c, &nd);
            else if (cj_op_kind(nd.op) == CJ_OPKIND_REGION)
                r = region(&c, &nd, id);
            else
                cj_error_set(err, CJ_ERR_INTERNAL, "vmap: no batching rule for %s", cj_op_name(nd.op));
            break;
        }
        ok = (c.bat[id] = r) >= 0;
    }
    for (int j = 0; ok && j < nouts; j++) {
        if (outs[j] < 0 || outs[j] >= last) {
            cj_error_set(err, CJ_ERR_INTERNAL, "vmap: bad node id (output %d: %d of %d)", j, outs[j], last);
            ok = false;
        } else {
            out_batched[j] = c.bat[outs[j]];
        }
    }
    free(c.bat);
    for (int i = 0; i < c.nselected; i++) free(c.selected[i].results);
    free(c.selected);
    if (!ok && err->status == CJ_OK) cj_error_set(err, CJ_ERR_INTERNAL, "vmap failed");
    return err->status;
}
