/* simplify.c - dead code elimination and common subexpression elimination.
 *
 * Produces a new graph holding only the nodes the outputs depend on (plus
 * every PARAM and ARRAY, whose slots callers rely on), in the same order,
 * with identical nodes (same op, dtype, shape, inputs and attributes)
 * merged into the first of them. */
#include <stdlib.h>
#include <string.h>

#include "custom.h"
#include "regions.h"
#include "simplify.h"

/* Do a and b (one op) agree in every attribute the op uses (ops.def's
 * attrs column)?  Shape, dtype and weak are compared by same_node. */
static bool same_attrs(const cj_node *a, const cj_node *b) {
    const cj_attrs *x = &a->attrs, *y = &b->attrs;
    unsigned used = cj_op_attrs(a->op);
    size_t rank = (size_t)a->shape.rank;
    /* a slot (a PARAM or ARRAY) is its own value, whatever its number, and so
     * is a region; a scatter's index is its mode, a triangular solve's its flags */
    if ((used & CJ_ATTR_INDEX) && ((cj_op_kind(a->op) != CJ_OPKIND_SCATTER && cj_op_kind(a->op) != CJ_OPKIND_LINALG) ||
                                   x->index != y->index))
        return false;
    /* bitwise, so that nan equals nan and -0 differs from 0 */
    if ((used & CJ_ATTR_FVALUE) && memcmp(&x->fvalue, &y->fvalue, sizeof x->fvalue) != 0) return false;
    if ((used & CJ_ATTR_IVALUE) && x->ivalue != y->ivalue) return false;
    if ((used & CJ_ATTR_AXIS) && x->axis != y->axis) return false;
    if ((used & CJ_ATTR_AXES) && x->axes != y->axes) return false;
    if ((used & CJ_ATTR_PERM) && memcmp(x->perm, y->perm, sizeof(int) * rank) != 0) return false;
    if ((used & CJ_ATTR_START) && memcmp(x->start, y->start, sizeof(int64_t) * rank) != 0) return false;
    if ((used & CJ_ATTR_STEP) && memcmp(x->step, y->step, sizeof(int64_t) * rank) != 0) return false;
    if ((used & CJ_ATTR_NAME) && !(x->name && y->name && strcmp(x->name, y->name) == 0)) return false;
    return true;
}

static bool same_node(const cj_node *a, const cj_node *b, const int *a_inputs) {
    /* a recomputed copy must not fold back into the forward value it copies */
    if (a->remat != b->remat) return false;
    if (a->op != b->op || a->dtype != b->dtype || a->weak != b->weak || a->ninputs != b->ninputs ||
        !cj_shape_equal(&a->shape, &b->shape))
        return false;
    for (int i = 0; i < a->ninputs; i++)
        if (a_inputs[i] != b->inputs[i]) return false;
    return same_attrs(a, b);
}

static uint64_t node_hash(const cj_node *n, const int *inputs) {
    uint64_t h = 1469598103934665603ull;
#define MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ull)
    MIX(n->op);
    MIX(n->dtype);
    MIX(n->shape.rank);
    for (int d = 0; d < n->shape.rank; d++) MIX(n->shape.dims[d]);
    for (int i = 0; i < n->ninputs; i++) MIX(inputs[i]);
    /* the attributes same_attrs compares, so that nodes that differ only
     * there (constants, slices of one array) do not share a probe chain */
    const cj_attrs *x = &n->attrs;
    unsigned used = cj_op_attrs(n->op);
    if (used & CJ_ATTR_FVALUE) {
        uint64_t bits;
        memcpy(&bits, &x->fvalue, sizeof bits);
        MIX(bits);
    }
    if (used & CJ_ATTR_IVALUE) MIX(x->ivalue);
    if (used & CJ_ATTR_AXIS) MIX(x->axis);
    if (used & CJ_ATTR_AXES) MIX(x->axes);
    for (int d = 0; d < n->shape.rank; d++) {
        if (used & CJ_ATTR_PERM) MIX(x->perm[d]);
        if (used & CJ_ATTR_START) MIX(x->start[d]);
        if (used & CJ_ATTR_STEP) MIX(x->step[d]);
    }
    if (used & CJ_ATTR_INDEX) MIX(x->index);
    if ((used & CJ_ATTR_NAME) && x->name)
        for (const char *p = x->name; *p; p++) MIX((unsigned char)*p);
#undef MIX
    return h;
}

/* ---- scans: stacked outputs nobody reads are not computed ------------------
 * The backward pass of a scan stacks a cotangent for every float xs, also
 * for data that is not differentiated; dropping the ys no result reads
 * (their nodes then die in the body's own simplify) saves that work and
 * its memory.  ys_live[s] is an array over scan s's results, or NULL. */

/* A copy of scan body b keeping the carries and the ys with keep[k]. */
static cj_body *scan_without(const cj_body *b, const bool *keep, cj_error *err) {
    cj_body *nb = cj_body_new(CJ_OP_SCAN, 1);
    const cj_graph *f = b->graphs[0];
    int *outs = malloc(sizeof(int) * ((size_t)f->noutputs + 1)), n = 0;
    if (!nb || !outs || !(nb->graphs[0] = cj_graph_copy(f, err))) {
        if (err->status == CJ_OK) cj_error_set(err, CJ_ERR_MEMORY, "simplify: out of memory");
        goto fail;
    }
    for (int k = 0; k < f->noutputs; k++)
        if (k < b->ncarry || keep[k]) outs[n++] = f->outputs[k];
    if (cj_graph_set_outputs(nb->graphs[0], outs, n, err) != CJ_OK) goto fail;
    nb->ncarry = b->ncarry, nb->nxs = b->nxs, nb->nconsts = b->nconsts, nb->nys = n - b->ncarry;
    nb->length = b->length, nb->reverse = b->reverse;
    if (cj_body_finish(nb, err) != CJ_OK) goto fail;
    free(outs);
    return nb;
fail:
    free(outs);
    cj_body_unref(nb);
    return NULL;
}

/* For each live scan node with a dead y: a slimmer body (added to g) and
 * the new result numbers; *renum[i][k] is -1 for a dropped result. */
static bool prune_scans(const cj_graph *src, const bool *live, cj_graph *g, int **renum, int *body_of,
                        cj_error *err) {
    int n = src->nnodes;
    for (int i = 0; i < n; i++) {
        const cj_node *r = &src->nodes[i];
        if (!live[i] || r->op != CJ_OP_RESULT || src->nodes[r->inputs[0]].op != CJ_OP_SCAN) continue;
        int s = r->inputs[0];
        const cj_body *b = cj_region_body(src, &src->nodes[s]);
        if (!renum[s]) {
            if (!(renum[s] = calloc((size_t)b->nresults + 1, sizeof(int)))) goto oom;
            for (int k = 0; k < b->nresults; k++) renum[s][k] = k < b->ncarry ? 0 : -1;
        }
        renum[s][r->attrs.index] = 0; /* read */
    }
    for (int s = 0; s < n; s++) {
        if (!renum[s]) continue;
        const cj_body *b = cj_region_body(src, &src->nodes[s]);
        bool *keep = malloc(sizeof(bool) * ((size_t)b->nresults + 1));
        int dropped = 0, m = 0;
        if (!keep) goto oom;
        for (int k = 0; k < b->nresults; k++) {
            keep[k] = renum[s][k] >= 0;
            dropped += !keep[k];
            renum[s][k] = keep[k] ? m++ : -1;
        }
        if (dropped) {
            cj_body *nb = scan_without(b, keep, err);
            body_of[s] = nb ? cj_graph_add_body(g, nb) : -1;
            cj_body_unref(nb);
            if (body_of[s] < 0) {
                free(keep);
                if (err->status == CJ_OK) goto oom;
                return false;
            }
        }
        free(keep);
    }
    return true;
oom:
    cj_error_set(err, CJ_ERR_MEMORY, "simplify: out of memory");
    return false;
}

static void free_renum(int **renum, int n, int *body_of) {
    if (renum)
        for (int i = 0; i < n; i++) free(renum[i]);
    free(renum);
    free(body_of);
}

static cj_graph *simplify(const cj_graph *src, bool cse, cj_error *err) {
    int n = src->nnodes;
    bool *live = calloc((size_t)n + 1, sizeof(bool));
    int *remap = malloc(sizeof(int) * ((size_t)n + 1)), **renum = NULL, *body_of = NULL;
    int nbuckets = 1;
    while (nbuckets < 2 * n) nbuckets *= 2;
    int *bucket = malloc(sizeof(int) * (size_t)nbuckets); /* new node id, open addressing */
    cj_graph *g = cj_graph_new();
    int small[CJ_MAX_INPUTS > 3 ? CJ_MAX_INPUTS : 3], *ins = small; /* heap for a long concatenate */
    if (!live || !remap || !bucket || !g) goto oom;
    for (int b = 0; b < nbuckets; b++) bucket[b] = -1;
    for (int b = 0; b < src->nbodies; b++) /* control flow's bodies keep their numbers */
        if (cj_graph_add_body(g, src->bodies[b]) != b) goto oom;

    for (int j = 0; j < src->noutputs; j++) live[src->outputs[j]] = true;
    for (int i = n - 1; i >= 0; i--) {
        const cj_node *nd = &src->nodes[i];
        if (nd->op == CJ_OP_PARAM || nd->op == CJ_OP_ARRAY) live[i] = true;
        if (!live[i]) continue;
        for (int a = 0; a < nd->ninputs; a++) live[nd->inputs[a]] = true;
    }
    for (int i = 0; i < src->nlocs; i++)
        if (cj_graph_loc(g, src->locs[i]) != i) goto oom;
    if (src->nbodies > 0) {
        if (!(renum = calloc((size_t)n + 1, sizeof(int *))) || !(body_of = malloc(sizeof(int) * ((size_t)n + 1))))
            goto oom;
        for (int i = 0; i < n; i++) body_of[i] = -1;
        if (!prune_scans(src, live, g, renum, body_of, err)) goto fail;
    }

    for (int i = 0; i < n; i++) {
        remap[i] = -1;
        if (!live[i]) continue;
        cj_node nd = src->nodes[i];
        if (nd.op == CJ_OP_NAME) {
            /* a name only guides the transformations (checkpoint policies),
             * which are done before lowering; kept, it would be a copy of
             * its input wherever a region or a call reads it */
            remap[i] = remap[nd.inputs[0]];
            continue;
        }
        if (body_of && body_of[i] >= 0) nd.attrs.index = body_of[i]; /* a scan with ys dropped */
        if (renum && nd.op == CJ_OP_RESULT && renum[nd.inputs[0]]) nd.attrs.index = renum[nd.inputs[0]][nd.attrs.index];
        if (nd.ninputs > (int)(sizeof small / sizeof small[0])) {
            if (ins != small) free(ins);
            if (!(ins = malloc(sizeof(int) * (size_t)nd.ninputs))) goto oom;
        }
        for (int a = 0; a < nd.ninputs; a++) ins[a] = remap[nd.inputs[a]];
        uint64_t h = node_hash(&nd, ins);
        int slot = (int)(h & (uint64_t)(nbuckets - 1));
        if (cse) {
            int found = -1;
            for (int s = slot; bucket[s] >= 0; s = (s + 1) & (nbuckets - 1))
                if (same_node(&nd, &g->nodes[bucket[s]], ins)) {
                    found = bucket[s];
                    break;
                }
            if (found >= 0) {
                remap[i] = found;
                if (ins != small) {
                    free(ins);
                    ins = small;
                }
                continue;
            }
        }
        nd.inputs = ins;
        if ((cj_op_attrs(nd.op) & CJ_ATTR_NAME) && nd.attrs.name &&
            !(nd.attrs.name = cj_arena_strdup(&g->arena, nd.attrs.name)))
            goto oom;
        remap[i] = cj_graph_append(g, &nd, err);
        if (ins != small) {
            free(ins);
            ins = small;
        }
        if (remap[i] < 0) goto fail;
        /* where the backward pass starts, in the new numbering */
        if (src->backward_start >= 0 && i >= src->backward_start && g->backward_start < 0)
            g->backward_start = remap[i];
        while (bucket[slot] >= 0) slot = (slot + 1) & (nbuckets - 1);
        bucket[slot] = remap[i];
    }
    g->nparams = src->nparams;
    g->narrays = src->narrays;
    if (cj_graph_set_outputs_mapped(g, src, remap, err) != CJ_OK) goto fail;
    free(live);
    free(remap);
    free(bucket);
    free_renum(renum, n, body_of);
    return g;
oom:
    cj_error_set(err, CJ_ERR_MEMORY, "simplify: out of memory");
fail:
    if (ins != small) free(ins);
    free(live);
    free(remap);
    free(bucket);
    free_renum(renum, n, body_of);
    if (g) cj_graph_free(g);
    return NULL;
}

/* See simplify.h.  Custom nodes (cjit.custom_vjp/custom_jvp) are for the
 * transformations only: what is lowered is their function, inlined here. */
cj_graph *cj_simplify_run(const cj_graph *src, bool cse, cj_error *err) {
    cj_graph *expanded = cj_custom_expand(src, err);
    if (!expanded && err->status != CJ_OK) return NULL;
    cj_graph *g = simplify(expanded ? expanded : src, cse, err);
    cj_graph_free(expanded);
    return g;
}
