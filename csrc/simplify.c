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
    /* a slot (a PARAM or ARRAY) is its own value, whatever its number */
    if (used & CJ_ATTR_INDEX) return false;
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

static cj_graph *simplify(const cj_graph *src, bool cse, cj_error *err) {
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

/* See simplify.h.  Custom nodes (cjit.custom_vjp/custom_jvp) are for the
 * transformations only: what is lowered is their function, inlined here. */
cj_graph *cj_simplify_run(const cj_graph *src, bool cse, cj_error *err) {
    cj_graph *expanded = cj_custom_expand(src, err);
    if (!expanded && err->status != CJ_OK) return NULL;
    cj_graph *g = simplify(expanded ? expanded : src, cse, err);
    cj_graph_free(expanded);
    return g;
}
