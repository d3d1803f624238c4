/* regions.c - bodies of control-flow nodes: their life, the region and
 * result builders, and cutting a traced body out of the graph it was
 * traced into (see regions.h). */
#include <stdlib.h>
#include <string.h>

#include "regions.h"

/* See regions.h. */
cj_body *cj_body_new(cj_op op, int ngraphs) {
    cj_body *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->graphs = calloc((size_t)ngraphs + 1, sizeof(cj_graph *));
    if (!b->graphs) {
        free(b);
        return NULL;
    }
    b->refs = 1;
    b->op = op;
    b->ngraphs = ngraphs;
    return b;
}

/* The value graph g returns as output k. */
static const cj_node *output_node(const cj_graph *g, int k) { return &g->nodes[g->outputs[k]]; }

/* See regions.h. */
cj_status cj_body_finish(cj_body *b, cj_error *err) {
    for (int i = 0; i < b->ngraphs; i++)
        if (!b->graphs[i]) return cj_error_set(err, CJ_ERR_INTERNAL, "%s: a body is missing", cj_op_name(b->op));
    const cj_graph *main = b->graphs[b->op == CJ_OP_WHILE ? 1 : 0];
    int want = b->op == CJ_OP_SCAN ? b->ncarry + b->nys : b->op == CJ_OP_WHILE ? b->ncarry : main->noutputs;
    if (main->noutputs != want)
        return cj_error_set(err, CJ_ERR_INTERNAL, "%s: the body returns %d values, expected %d", cj_op_name(b->op),
                            main->noutputs, want);
    if (b->op == CJ_OP_WHILE) {
        const cj_graph *c = b->graphs[0];
        if (c->noutputs != 1 || output_node(c, 0)->dtype != CJ_BOOL || output_node(c, 0)->shape.rank != 0)
            return cj_error_set(err, CJ_ERR_INTERNAL, "while: the condition must return one bool scalar");
    }
    if (b->op == CJ_OP_CUSTOM) {
        const cj_graph *rule = b->ngraphs == 2 ? b->graphs[1] : NULL;
        int nys = main->noutputs - b->nres;
        int rule_outs = b->jvp_rule ? 2 * nys : b->ncarry;
        if (!rule || nys < 0 || rule->noutputs != rule_outs)
            return cj_error_set(err, CJ_ERR_INTERNAL, "custom: the rule returns %d values, expected %d",
                                rule ? rule->noutputs : -1, rule_outs);
        b->nys = nys;
    }
    if (b->op == CJ_OP_COND)
        for (int i = 1; i < b->ngraphs; i++) {
            if (b->graphs[i]->noutputs != want)
                return cj_error_set(err, CJ_ERR_VALUE, "cond: branch %d returns %d values, branch 0 %d", i,
                                    b->graphs[i]->noutputs, want);
            for (int k = 0; k < want; k++) {
                const cj_node *x = output_node(b->graphs[i], k), *y = output_node(main, k);
                if (x->dtype != y->dtype || !cj_shape_equal(&x->shape, &y->shape))
                    return cj_error_set(err, CJ_ERR_VALUE, "cond: output %d of branch %d differs from branch 0's", k, i);
            }
        }
    b->nresults = want;
    b->result_shape = calloc((size_t)want + 1, sizeof(cj_shape));
    b->result_dtype = calloc((size_t)want + 1, sizeof(cj_dtype));
    if (!b->result_shape || !b->result_dtype) return cj_error_set(err, CJ_ERR_MEMORY, "out of memory");
    for (int k = 0; k < want; k++) {
        const cj_node *o = output_node(main, k);
        b->result_dtype[k] = o->dtype;
        b->result_shape[k] = o->shape;
        if (b->op == CJ_OP_SCAN && k >= b->ncarry) { /* a stacked y: the rows gain a leading dim */
            cj_shape *s = &b->result_shape[k];
            if (s->rank + 1 > CJ_MAX_RANK)
                return cj_error_set(err, CJ_ERR_VALUE, "scan: a stacked output would have rank %d (at most %d)",
                                    s->rank + 1, CJ_MAX_RANK);
            memmove(s->dims + 1, s->dims, sizeof(int64_t) * (size_t)s->rank);
            s->dims[0] = b->length;
            s->rank++;
        }
    }
    return CJ_OK;
}

/* See regions.h. */
int cj_graph_add_body(cj_graph *g, cj_body *b) {
    if (g->nbodies == g->bodies_cap) {
        int cap = g->bodies_cap ? 2 * g->bodies_cap : 4;
        cj_body **p = realloc(g->bodies, sizeof(cj_body *) * (size_t)cap);
        if (!p) return -1;
        g->bodies = p;
        g->bodies_cap = cap;
    }
    cj_body_ref(b);
    g->bodies[g->nbodies] = b;
    return g->nbodies++;
}

/* See regions.h. */
int cj_build_region(cj_graph *g, cj_body *b, const int *inputs, int ninputs, int loc, cj_error *err) {
    int index = cj_graph_add_body(g, b);
    if (index < 0) return cj_error_set(err, CJ_ERR_MEMORY, "%s: out of memory", cj_op_name(b->op)), -1;
    cj_node n;
    memset(&n, 0, sizeof n);
    n.op = b->op;
    n.dtype = CJ_FLOAT32;
    n.ninputs = ninputs;
    n.inputs = (int *)inputs;
    n.loc = loc;
    n.region = g->current_region;
    n.attrs.index = index;
    return cj_graph_append(g, &n, err);
}

/* See regions.h. */
int cj_build_result(cj_graph *g, int region, int k, int loc, cj_error *err) {
    if (region < 0 || region >= g->nnodes) return cj_error_set(err, CJ_ERR_INTERNAL, "result: no node %d", region), -1;
    const cj_body *b = cj_region_body(g, &g->nodes[region]);
    if (!b || k < 0 || k >= b->nresults)
        return cj_error_set(err, CJ_ERR_INTERNAL, "result: node %d has no result %d", region, k), -1;
    cj_node n;
    memset(&n, 0, sizeof n);
    n.op = CJ_OP_RESULT;
    n.dtype = b->result_dtype[k];
    n.shape = b->result_shape[k];
    n.ninputs = 1;
    n.inputs = &region;
    n.loc = loc;
    n.region = g->current_region;
    n.attrs.index = k;
    return cj_graph_append(g, &n, err);
}

/* See regions.h. */
cj_graph *cj_graph_copy(const cj_graph *src, cj_error *err) {
    cj_graph *c = cj_graph_new();
    if (!c) return cj_error_set(err, CJ_ERR_MEMORY, "out of memory"), NULL;
    for (int i = 0; i < src->nnodes; i++) {
        cj_node nd = src->nodes[i];
        nd.loc = nd.loc >= 0 ? cj_graph_loc(c, cj_graph_loc_str(src, nd.loc)) : -1;
        cj_body *b = cj_region_body(src, &src->nodes[i]);
        if (b && (nd.attrs.index = cj_graph_add_body(c, b)) < 0) {
            cj_error_set(err, CJ_ERR_MEMORY, "out of memory");
            cj_graph_free(c);
            return NULL;
        }
        if (cj_graph_append(c, &nd, err) < 0 ||
            (i == src->nnodes - 1 && cj_graph_set_outputs(c, src->outputs, src->noutputs, err) != CJ_OK)) {
            cj_graph_free(c);
            return NULL;
        }
    }
    if (src->nnodes == 0 && cj_graph_set_outputs(c, src->outputs, src->noutputs, err) != CJ_OK) {
        cj_graph_free(c);
        return NULL;
    }
    return c;
}

/* cj_graph_inline (every node at loc) and cj_graph_inline_located (loc
 * -2: each node keeps its own location). */
static cj_status inline_nodes(cj_graph *g, const cj_graph *body, const int *args, int nargs, int *outs, int loc,
                              cj_error *err) {
    int *remap = malloc(sizeof(int) * ((size_t)body->nnodes + 1)), *ins = NULL, cap = 0;
    if (!remap) return cj_error_set(err, CJ_ERR_MEMORY, "out of memory");
    for (int i = 0; i < body->nnodes && err->status == CJ_OK; i++) {
        cj_node nd = body->nodes[i];
        if (nd.op == CJ_OP_PARAM) {
            if (nd.attrs.index < 0 || nd.attrs.index >= nargs) {
                cj_error_set(err, CJ_ERR_INTERNAL, "inline: parameter %d of %d", (int)nd.attrs.index, nargs);
                break;
            }
            remap[i] = args[nd.attrs.index];
            continue;
        }
        if (nd.ninputs > cap) {
            free(ins);
            cap = nd.ninputs;
            if (!(ins = malloc(sizeof(int) * (size_t)cap))) {
                cj_error_set(err, CJ_ERR_MEMORY, "out of memory");
                break;
            }
        }
        for (int a = 0; a < nd.ninputs; a++) ins[a] = remap[nd.inputs[a]];
        nd.inputs = ins;
        nd.loc = loc != -2 ? loc : nd.loc >= 0 ? cj_graph_loc(g, cj_graph_loc_str(body, nd.loc)) : -1;
        nd.region = g->current_region;
        cj_body *b = cj_region_body(body, &body->nodes[i]);
        if (b && (nd.attrs.index = cj_graph_add_body(g, b)) < 0) {
            cj_error_set(err, CJ_ERR_MEMORY, "out of memory");
            break;
        }
        remap[i] = cj_graph_append(g, &nd, err);
    }
    for (int k = 0; err->status == CJ_OK && k < body->noutputs; k++) outs[k] = remap[body->outputs[k]];
    free(remap), free(ins);
    return err->status;
}

/* See regions.h. */
cj_status cj_graph_inline(cj_graph *g, const cj_graph *body, const int *args, int nargs, int *outs, int loc,
                          cj_error *err) {
    return inline_nodes(g, body, args, nargs, outs, loc < 0 ? -1 : loc, err);
}

/* See regions.h. */
cj_status cj_graph_inline_located(cj_graph *g, const cj_graph *body, const int *args, int nargs, int *outs,
                                  cj_error *err) {
    return inline_nodes(g, body, args, nargs, outs, -2, err);
}

/* ---- cutting a body out of the graph it was traced into --------------------- */

/* A PARAM of child c standing for outer node `of`, slot `slot`. */
static int child_param(cj_graph *c, const cj_node *of, int slot, cj_error *err) {
    cj_node p;
    memset(&p, 0, sizeof p);
    p.op = CJ_OP_PARAM;
    p.dtype = of->dtype;
    p.weak = of->weak;
    p.shape = of->shape;
    p.loc = -1;
    p.attrs.index = slot;
    return cj_graph_append(c, &p, err);
}

/* Is node i a value a body should compute itself rather than read from
 * outside: a constant or iota, or a view or cast of one (the scalars a
 * body's arithmetic makes, broadcast): free in a fused loop body, and a
 * buffer of its own outside. */
static bool cheap(const cj_graph *g, const char *cheap_of, int i) {
    const cj_node *n = &g->nodes[i];
    if (n->op == CJ_OP_CONSTANT || n->op == CJ_OP_IOTA) return true;
    cj_opkind k = cj_op_kind(n->op);
    return (k == CJ_OPKIND_MOVE || k == CJ_OPKIND_CAST) && cheap_of[n->inputs[0]];
}

/* See regions.h.  One pass forward (what depends on the placeholders), one
 * backward (what the outputs need), one forward copying: no recursion. */
/* cj_region_extract, and cj_graph_reslot when local_only: then a value
 * that no parameter reaches (a constant expression) is copied in too. */
static cj_graph *extract(cj_graph *g, int first, const int *ph, int nph, const int *outs, int nouts, int *consts,
                         int *nconsts, bool local_only, cj_error *err) {
    int n = g->nnodes;
    char *dep = calloc((size_t)n + 1, 1), *need = calloc((size_t)n + 1, 1), *cheap_of = calloc((size_t)n + 1, 1);
    int *remap = malloc(sizeof(int) * ((size_t)n + 1)), *const_of = malloc(sizeof(int) * ((size_t)n + 1));
    int *ins = NULL, ins_cap = 0, *o = malloc(sizeof(int) * ((size_t)nouts + 1));
    cj_graph *c = cj_graph_new();
    if (!dep || !need || !remap || !const_of || !c || !o || !cheap_of) goto oom;
    for (int i = 0; i < n; i++) {
        cheap_of[i] = cheap(g, cheap_of, i);
        if (local_only && g->nodes[i].op != CJ_OP_PARAM) { /* no parameter among its inputs' ancestors */
            bool local = true;
            for (int a = 0; a < g->nodes[i].ninputs && local; a++) local = cheap_of[g->nodes[i].inputs[a]];
            cheap_of[i] |= local;
        }
    }
    for (int i = 0; i < n; i++) remap[i] = const_of[i] = -1;
    for (int k = 0; k < *nconsts; k++) const_of[consts[k]] = k;
    for (int k = 0; k < nph; k++) {
        if (ph[k] < first || ph[k] >= n) {
            cj_error_set(err, CJ_ERR_INTERNAL, "region: placeholder %d is not recent", ph[k]);
            goto fail;
        }
        dep[ph[k]] = 1;
    }
    for (int i = first; i < n; i++)
        for (int a = 0; a < g->nodes[i].ninputs && !dep[i]; a++) dep[i] = dep[g->nodes[i].inputs[a]];
    /* cheap values are copied into the body (dep: inside), wherever they were made */
    for (int i = 0; i < n; i++) dep[i] |= cheap_of[i];
    for (int k = 0; k < nouts; k++)
        if (dep[outs[k]]) need[outs[k]] = 1;
    for (int i = n - 1; i >= 0; i--)
        for (int a = 0; need[i] && a < g->nodes[i].ninputs; a++)
            if (dep[g->nodes[i].inputs[a]]) need[g->nodes[i].inputs[a]] = 1;
    /* the placeholders are the first parameters, in their order */
    for (int k = 0; k < nph; k++)
        if ((remap[ph[k]] = child_param(c, &g->nodes[ph[k]], k, err)) < 0) goto fail;
    /* an outer value the body reads: a const parameter (made at first use) */
#define CONST_PARAM(x, out)                                                                   \
    do {                                                                                      \
        if (const_of[x] < 0) {                                                                \
            const_of[x] = (*nconsts)++;                                                       \
            consts[const_of[x]] = (x);                                                        \
        }                                                                                     \
        if (remap[x] < 0 && (remap[x] = child_param(c, &g->nodes[x], nph + const_of[x], err)) < 0) goto fail; \
        (out) = remap[x];                                                                     \
    } while (0)
    for (int i = 0; i < n; i++) {
        if (!need[i] || remap[i] >= 0) continue;
        cj_node nd = g->nodes[i];
        if (nd.ninputs > ins_cap) {
            free(ins);
            ins_cap = nd.ninputs;
            if (!(ins = malloc(sizeof(int) * (size_t)ins_cap))) goto oom;
        }
        for (int a = 0; a < nd.ninputs; a++) {
            int x = nd.inputs[a];
            if (dep[x]) ins[a] = remap[x];
            else CONST_PARAM(x, ins[a]);
        }
        nd.inputs = ins;
        nd.loc = nd.loc >= 0 ? cj_graph_loc(c, cj_graph_loc_str(g, nd.loc)) : -1;
        nd.region = 0;
        nd.remat = 0;
        cj_body *b = cj_region_body(g, &g->nodes[i]);
        if (b && (nd.attrs.index = cj_graph_add_body(c, b)) < 0) goto oom;
        if ((remap[i] = cj_graph_append(c, &nd, err)) < 0) goto fail;
    }
    for (int k = 0; k < nouts; k++) {
        int x = outs[k];
        if (dep[x]) o[k] = remap[x];
        else {
            int p;
            CONST_PARAM(x, p);
            o[k] = p;
        }
    }
#undef CONST_PARAM
    if (cj_graph_set_outputs(c, o, nouts, err) != CJ_OK) goto fail;
    /* every const slot so far exists in this body, read or not, so that the
     * body's parameter count is the same for each graph of a region */
    for (int k = 0; k < *nconsts; k++)
        if (remap[consts[k]] < 0 && (remap[consts[k]] = child_param(c, &g->nodes[consts[k]], nph + k, err)) < 0) goto fail;
    cj_graph_trim(c);
    free(dep), free(need), free(remap), free(const_of), free(ins), free(o), free(cheap_of);
    return c;
oom:
    cj_error_set(err, CJ_ERR_MEMORY, "region: out of memory");
fail:
    free(dep), free(need), free(remap), free(const_of), free(ins), free(o), free(cheap_of);
    cj_graph_free(c);
    return NULL;
}

/* See regions.h. */
cj_graph *cj_region_extract(cj_graph *g, int first, const int *ph, int nph, const int *outs, int nouts,
                            int *consts, int *nconsts, cj_error *err) {
    return extract(g, first, ph, nph, outs, nouts, consts, nconsts, false, err);
}

/* See regions.h. */
cj_graph *cj_graph_reslot(cj_graph *g, const int *ph, int nph, const int *outs, int nouts, cj_error *err) {
    int nconsts = 0, *consts = malloc(sizeof(int) * ((size_t)g->nnodes + 1));
    if (!consts) return cj_error_set(err, CJ_ERR_MEMORY, "out of memory"), NULL;
    cj_graph *c = extract(g, 0, ph, nph, outs, nouts, consts, &nconsts, true, err);
    free(consts);
    if (c && nconsts) {
        cj_error_set(err, CJ_ERR_INTERNAL, "a body reads a value that is not one of its parameters");
        cj_graph_free(c);
        return NULL;
    }
    return c;
}
