/* simplify.c - dead code elimination and common subexpression elimination.
 *
 * Produces a new graph holding only the nodes the outputs depend on (plus
 * every PARAM and ARRAY, whose slots callers rely on), in the same order,
 * with identical nodes (same op, dtype, shape, inputs and attributes)
 * merged into the first of them. */
#include <stdlib.h>
#include <string.h>

#include "simplify.h"

static bool same_attrs(const cj_node *a, const cj_node *b) {
    const cj_attrs *x = &a->attrs, *y = &b->attrs;
    switch (a->op) {
    case CJ_OP_CONSTANT: /* bitwise, so that nan equals nan and -0 differs from 0 */
        return memcmp(&x->fvalue, &y->fvalue, sizeof x->fvalue) == 0 && x->ivalue == y->ivalue;
    case CJ_OP_IOTA: return x->axis == y->axis;
    case CJ_OP_CONCATENATE: return x->axis == y->axis;
    case CJ_OP_REDUCE_SUM: case CJ_OP_REDUCE_PROD: case CJ_OP_REDUCE_MAX: case CJ_OP_REDUCE_MIN:
        return x->axes == y->axes;
    case CJ_OP_TRANSPOSE: return memcmp(x->perm, y->perm, sizeof(int) * (size_t)a->shape.rank) == 0;
    case CJ_OP_SLICE:
        return memcmp(x->start, y->start, sizeof(int64_t) * (size_t)a->shape.rank) == 0 &&
               memcmp(x->step, y->step, sizeof(int64_t) * (size_t)a->shape.rank) == 0;
    case CJ_OP_PARAM: case CJ_OP_ARRAY: return false; /* every argument is its own value */
    case CJ_OP_NAME: return x->name && y->name && strcmp(x->name, y->name) == 0;
    default: return true;
    }
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
    switch (n->op) {
    case CJ_OP_CONSTANT: {
        uint64_t bits;
        memcpy(&bits, &x->fvalue, sizeof bits);
        MIX(bits);
        MIX(x->ivalue);
        break;
    }
    case CJ_OP_IOTA: case CJ_OP_CONCATENATE: MIX(x->axis); break;
    case CJ_OP_REDUCE_SUM: case CJ_OP_REDUCE_PROD: case CJ_OP_REDUCE_MAX: case CJ_OP_REDUCE_MIN:
        MIX(x->axes);
        break;
    case CJ_OP_TRANSPOSE:
        for (int d = 0; d < n->shape.rank; d++) MIX(x->perm[d]);
        break;
    case CJ_OP_SLICE:
        for (int d = 0; d < n->shape.rank; d++) MIX(x->start[d]), MIX(x->step[d]);
        break;
    case CJ_OP_PARAM: case CJ_OP_ARRAY: MIX(x->index); break;
    default: break;
    }
#undef MIX
    return h;
}

/* See simplify.h. */
cj_graph *cj_simplify_run(const cj_graph *src, bool cse, cj_error *err) {
    int n = src->nnodes;
    bool *live = calloc((size_t)n + 1, sizeof(bool));
    int *remap = malloc(sizeof(int) * ((size_t)n + 1));
    int nbuckets = 1;
    while (nbuckets < 2 * n) nbuckets *= 2;
    int *bucket = malloc(sizeof(int) * (size_t)nbuckets); /* new node id, open addressing */
    cj_graph *g = cj_graph_new();
    int small[CJ_MAX_INPUTS > 3 ? CJ_MAX_INPUTS : 3], *ins = small; /* heap for a long concatenate */
    if (!live || !remap || !bucket || !g) goto oom;
    for (int b = 0; b < nbuckets; b++) bucket[b] = -1;

    for (int j = 0; j < src->noutputs; j++) live[src->outputs[j]] = true;
    for (int i = n - 1; i >= 0; i--) {
        const cj_node *nd = &src->nodes[i];
        if (nd->op == CJ_OP_PARAM || nd->op == CJ_OP_ARRAY) live[i] = true;
        if (!live[i]) continue;
        for (int a = 0; a < nd->ninputs; a++) live[nd->inputs[a]] = true;
    }
    for (int i = 0; i < src->nlocs; i++)
        if (cj_graph_loc(g, src->locs[i]) != i) goto oom;

    for (int i = 0; i < n; i++) {
        remap[i] = -1;
        if (!live[i]) continue;
        cj_node nd = src->nodes[i];
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
        if (nd.op == CJ_OP_NAME && nd.attrs.name && !(nd.attrs.name = cj_arena_strdup(&g->arena, nd.attrs.name)))
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
    {
        int *outs = malloc(sizeof(int) * ((size_t)src->noutputs + 1));
        if (!outs) goto oom;
        for (int j = 0; j < src->noutputs; j++) outs[j] = remap[src->outputs[j]];
        cj_status st = cj_graph_set_outputs(g, outs, src->noutputs, err);
        free(outs);
        if (st != CJ_OK) goto fail;
    }
    free(live);
    free(remap);
    free(bucket);
    return g;
oom:
    cj_error_set(err, CJ_ERR_MEMORY, "simplify: out of memory");
fail:
    if (ins != small) free(ins);
    free(live);
    free(remap);
    free(bucket);
    if (g) cj_graph_free(g);
    return NULL;
}
