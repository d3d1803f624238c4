/* custom.c - functions with user-defined derivatives (cjit.custom_vjp and
 * cjit.custom_jvp): the CUSTOM region node (layout in regions.h).
 *
 * The node holds the function (graphs[0]) and the rule (graphs[1]).  Only
 * the transformations read the rule:
 *   reverse mode  custom_vjp: the bwd graph inlined on the residuals (the
 *                 node's extra results) and the outputs' cotangents, plus
 *                 fwd's ordinary VJP of the residuals' cotangents (second
 *                 order: a grad of a grad that inlined bwd).
 *                 custom_jvp: the rule's tangent outputs are linear in the
 *                 tangents, so their transpose is the VJP of the rule with
 *                 respect to its tangent parameters, taken at tangent zero
 *                 (autodiff.c on a copy of the rule).
 *   forward mode  custom_jvp: the rule inlined on primals and tangents.
 *                 custom_vjp: refused, as JAX does, unless a reverse pass
 *                 read its residuals: then fwd's ordinary JVP.
 *   vmap          batching.c batches both graphs (custom_region).
 * The lowering first inlines every custom node's function
 * (cj_custom_expand, called by simplify), so what runs fuses, plans and
 * checkpoints like code written without the rule. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff.h"
#include "custom.h"
#include "jvp.h"
#include "regions.h"

static bool is_float(cj_dtype dt) { return dt == CJ_FLOAT32 || dt == CJ_FLOAT64; }

static int zeros_like(cj_graph *g, const cj_shape *s, cj_dtype dt, int loc, cj_error *err) {
    return cj_build_constant(g, 0.0, 0, dt, false, s, loc, err);
}

static int param(cj_graph *g, const cj_node *like, int slot, cj_error *err) {
    cj_node p;
    memset(&p, 0, sizeof p);
    p.op = CJ_OP_PARAM;
    p.dtype = like->dtype;
    p.shape = like->shape;
    p.loc = -1;
    p.attrs.index = slot;
    return cj_graph_append(g, &p, err);
}

/* ---- lowering: the function inlined ----------------------------------------- */

static bool has_custom(const cj_graph *g) {
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == CJ_OP_CUSTOM) return true;
    return false;
}

/* src with each custom node replaced by its function's nodes (one level). */
static cj_graph *expand_once(const cj_graph *src, cj_error *err) {
    int n = src->nnodes;
    cj_graph *g = cj_graph_new();
    int *remap = malloc(sizeof(int) * ((size_t)n + 1)), **outs_of = calloc((size_t)n + 1, sizeof(int *));
    int *ins = NULL, cap = 0;
    if (!g || !remap || !outs_of) goto oom;
    for (int b = 0; b < src->nbodies; b++) /* bodies and locations keep their numbers */
        if (cj_graph_add_body(g, src->bodies[b]) != b) goto oom;
    for (int i = 0; i < src->nlocs; i++)
        if (cj_graph_loc(g, src->locs[i]) != i) goto oom;
    for (int i = 0; i < n; i++) {
        cj_node nd = src->nodes[i];
        remap[i] = -1;
        if (src->backward_start >= 0 && i >= src->backward_start && g->backward_start < 0)
            g->backward_start = g->nnodes;
        if (nd.op == CJ_OP_RESULT && outs_of[nd.inputs[0]]) { /* a result of an inlined function */
            remap[i] = outs_of[nd.inputs[0]][nd.attrs.index];
            continue;
        }
        if (nd.ninputs > cap) {
            free(ins);
            cap = nd.ninputs;
            if (!(ins = malloc(sizeof(int) * (size_t)cap))) goto oom;
        }
        for (int a = 0; a < nd.ninputs; a++) ins[a] = remap[nd.inputs[a]];
        nd.inputs = ins;
        if (nd.op == CJ_OP_CUSTOM) {
            const cj_body *b = cj_region_body(src, &src->nodes[i]);
            if (!(outs_of[i] = malloc(sizeof(int) * ((size_t)b->nresults + 1)))) goto oom;
            g->current_region = nd.region;
            if (cj_graph_inline_located(g, b->graphs[0], ins, nd.ninputs, outs_of[i], err) != CJ_OK) goto fail;
            continue;
        }
        if ((cj_op_attrs(nd.op) & CJ_ATTR_NAME) && nd.attrs.name &&
            !(nd.attrs.name = cj_arena_strdup(&g->arena, nd.attrs.name)))
            goto oom;
        if ((remap[i] = cj_graph_append(g, &nd, err)) < 0) goto fail;
    }
    g->current_region = 0;
    g->nparams = src->nparams;
    g->narrays = src->narrays;
    if (cj_graph_set_outputs_mapped(g, src, remap, err) != CJ_OK) goto fail;
    goto done;
oom:
    cj_error_set(err, CJ_ERR_MEMORY, "custom: out of memory");
fail:
    cj_graph_free(g);
    g = NULL;
done:
    if (outs_of)
        for (int i = 0; i < n; i++) free(outs_of[i]);
    free(outs_of), free(remap), free(ins);
    return g;
}

/* See custom.h. */
cj_graph *cj_custom_expand(const cj_graph *src, cj_error *err) {
    cj_graph *owned = NULL;
    const cj_graph *cur = src;
    while (has_custom(cur)) { /* a function may itself call one */
        cj_graph *next = expand_once(cur, err);
        cj_graph_free(owned);
        if (!next) return NULL;
        cur = owned = next;
    }
    return owned;
}

/* ---- reverse mode -------------------------------------------------------------- */

/* The cotangents of a custom_vjp's residuals (res_ct[no + r]), taken back to
 * the primals through the function's ordinary derivative: a residual is a
 * value of fwd like any other, and bwd's derivative in it (second order:
 * grad of a grad that ran bwd) must reach x through fwd, as in JAX.  The
 * VJP is built on a copy of fwd in a graph of its own, then inlined; the
 * result is added to in_ct. */
static cj_status vjp_of_residuals(cj_graph *g, const cj_body *b, const int *inputs, const int *res_ct, int *in_ct,
                                  int loc, cj_vjp_fn *vjp, cj_error *err) {
    int np = b->ncarry, nk = b->nconsts, no = b->nys, nr = b->nres, nin = np + nk, nct = 0, nwrt = 0;
    for (int r = 0; r < nr; r++)
        if (res_ct[no + r] >= 0 && is_float(b->result_dtype[no + r])) nct++;
    if (!nct) return CJ_OK;
    cj_graph *G = cj_graph_new();
    int *buf = malloc(sizeof(int) * (3 * (size_t)nin + 4 * (size_t)(no + nr) + 8));
    if (!G || !buf) {
        cj_graph_free(G), free(buf);
        return cj_error_set(err, CJ_ERR_MEMORY, "autodiff: out of memory");
    }
    int *slot = buf, *wrt = slot + nin + 1, *grads = wrt + nin + 1, *fouts = grads + nin + 1;
    int *outs = fouts + no + nr + 1, *cts = outs + nr + 1, *args = cts + nr + 1; /* args: nin + nr */
    /* G's slots: the primals and consts, then one cotangent per float residual */
    for (int s = 0; s < nin && err->status == CJ_OK; s++) slot[s] = param(G, &g->nodes[inputs[s]], s, err);
    if (err->status == CJ_OK) cj_graph_inline(G, b->graphs[0], slot, nin, fouts, -1, err);
    nct = 0;
    for (int r = 0; r < nr && err->status == CJ_OK; r++) {
        if (res_ct[no + r] < 0 || !is_float(b->result_dtype[no + r])) continue;
        cj_node like = G->nodes[fouts[no + r]];
        outs[nct] = fouts[no + r];
        cts[nct] = param(G, &like, nin + nct, err);
        args[nin + nct++] = res_ct[no + r];
    }
    for (int a = 0; a < np; a++)
        if (is_float(g->nodes[inputs[a]].dtype)) wrt[nwrt++] = slot[a];
    if (err->status == CJ_OK && vjp(G, 0, outs, cts, nct, wrt, nwrt, grads, err) == CJ_OK &&
        cj_graph_set_outputs(G, grads, nwrt, err) == CJ_OK) {
        for (int s = 0; s < nin; s++) args[s] = inputs[s];
        if (cj_graph_inline(g, G, args, nin + nct, grads, loc, err) == CJ_OK)
            for (int a = 0, j = 0; a < np && err->status == CJ_OK; a++) {
                if (!is_float(g->nodes[inputs[a]].dtype)) continue;
                in_ct[a] = in_ct[a] < 0 ? grads[j] : cj_build_binary(g, CJ_OP_ADD, in_ct[a], grads[j], loc, err);
                j++;
            }
    }
    if (err->status == CJ_ERR_VALUE) { /* name the custom function, whose copy of fwd has no locations */
        char msg[sizeof err->message];
        size_t n = strlen(err->message);
        if (n >= 7 && !strcmp(err->message + n - 7, " (at ?)")) err->message[n - 7] = 0;
        snprintf(msg, sizeof msg, "%s (reached through a residual of the cjit.custom_vjp at %s: differentiating its "
                 "bwd differentiates fwd, as in JAX)", err->message, cj_graph_loc_str(g, loc));
        memcpy(err->message, msg, sizeof msg);
    }
    cj_graph_free(G);
    free(buf);
    return err->status;
}

/* custom_vjp: bwd(residuals, cotangents, consts), plus what reaches the
 * residuals (vjp_of_residuals). */
static cj_status vjp_by_bwd(cj_graph *g, int id, const cj_body *b, const int *inputs, const int *res_ct,
                            int *in_ct, int loc, cj_vjp_fn *vjp, cj_error *err) {
    int np = b->ncarry, nk = b->nconsts, no = b->nys, nr = b->nres, nargs = nr + no + nk;
    int *args = malloc(sizeof(int) * ((size_t)nargs + 1)), *outs = malloc(sizeof(int) * ((size_t)np + 1));
    if (!args || !outs) {
        free(args), free(outs);
        return cj_error_set(err, CJ_ERR_MEMORY, "autodiff: out of memory");
    }
    int m = 0;
    for (int r = 0; r < nr && err->status == CJ_OK; r++) args[m++] = cj_build_result(g, id, no + r, loc, err);
    for (int k = 0; k < no && err->status == CJ_OK; k++)
        args[m++] = res_ct[k] >= 0 ? res_ct[k] : zeros_like(g, &b->result_shape[k], b->result_dtype[k], loc, err);
    for (int c = 0; c < nk; c++) args[m++] = inputs[np + c];
    if (err->status == CJ_OK && cj_graph_inline(g, b->graphs[1], args, nargs, outs, loc, err) == CJ_OK)
        for (int a = 0; a < np; a++)
            if (is_float(g->nodes[inputs[a]].dtype)) in_ct[a] = outs[a];
    free(args), free(outs);
    if (err->status == CJ_OK) vjp_of_residuals(g, b, inputs, res_ct, in_ct, loc, vjp, err);
    return err->status;
}

/* custom_jvp: the transpose of the rule's tangent map, as the VJP of the
 * rule in its tangents (built in a graph of its own, then inlined). */
static cj_status vjp_by_jvp(cj_graph *g, const cj_body *b, const int *inputs, const int *res_ct, int *in_ct,
                            int loc, cj_vjp_fn *vjp, cj_error *err) {
    int np = b->ncarry, nk = b->nconsts, no = b->nys, nslots = 2 * np + nk + no;
    cj_graph *G = cj_graph_new();
    int *buf = malloc(sizeof(int) * (4 * (size_t)nslots + 4 * (size_t)no + 8));
    if (!G || !buf) {
        cj_graph_free(G), free(buf);
        return cj_error_set(err, CJ_ERR_MEMORY, "autodiff: out of memory");
    }
    int *slot = buf, *rule_out = slot + nslots, *wrt = rule_out + 2 * no + 1, *cts = wrt + np + 1;
    int *outs = cts + no + 1, *grads = outs + no + 1, *args = grads + np + 1, nwrt = 0, nct = 0;
    /* G's slots: primals, tangents, consts (the rule's), then the
     * cotangents of the float outputs' tangents */
    for (int s = 0; s < 2 * np + nk && err->status == CJ_OK; s++) {
        int of = s < 2 * np ? inputs[s % np] : inputs[np + s - 2 * np];
        slot[s] = param(G, &g->nodes[of], s, err);
    }
    if (err->status == CJ_OK) cj_graph_inline(G, b->graphs[1], slot, 2 * np + nk, rule_out, -1, err);
    for (int k = 0; k < no && err->status == CJ_OK; k++) {
        if (!is_float(b->result_dtype[k])) continue;
        cj_node like = G->nodes[rule_out[no + k]];
        outs[nct] = rule_out[no + k];
        cts[nct] = param(G, &like, 2 * np + nk + nct, err);
        args[2 * np + nk + nct++] = res_ct[k] >= 0 ? res_ct[k]
                                                  : zeros_like(g, &b->result_shape[k], b->result_dtype[k], loc, err);
    }
    for (int a = 0; a < np; a++)
        if (is_float(g->nodes[inputs[a]].dtype)) wrt[nwrt++] = slot[np + a];
    if (err->status == CJ_OK && vjp(G, 0, outs, cts, nct, wrt, nwrt, grads, err) == CJ_OK &&
        cj_graph_set_outputs(G, grads, nwrt, err) == CJ_OK) {
        for (int a = 0; a < np && err->status == CJ_OK; a++) {
            const cj_node *x = &g->nodes[inputs[a]];
            args[a] = inputs[a];
            args[np + a] = zeros_like(g, &x->shape, x->dtype, loc, err); /* where the tangent map is taken */
        }
        for (int c = 0; c < nk; c++) args[2 * np + c] = inputs[np + c];
        if (err->status == CJ_OK && cj_graph_inline(g, G, args, 2 * np + nk + nct, grads, loc, err) == CJ_OK)
            for (int a = 0, j = 0; a < np; a++)
                if (is_float(g->nodes[inputs[a]].dtype)) in_ct[a] = grads[j++];
    }
    cj_graph_free(G);
    free(buf);
    return err->status;
}

/* See custom.h. */
cj_status cj_custom_vjp(cj_graph *g, int id, const int *res_ct, int *in_ct, cj_vjp_fn *vjp, cj_error *err) {
    const cj_body *b = cj_region_body(g, &g->nodes[id]);
    int nin = g->nodes[id].ninputs, loc = g->nodes[id].loc;
    int *inputs = malloc(sizeof(int) * ((size_t)nin + 1)); /* appending moves the node array */
    if (!inputs) return cj_error_set(err, CJ_ERR_MEMORY, "autodiff: out of memory");
    memcpy(inputs, g->nodes[id].inputs, sizeof(int) * (size_t)nin);
    cj_status st = b->jvp_rule ? vjp_by_jvp(g, b, inputs, res_ct, in_ct, loc, vjp, err)
                               : vjp_by_bwd(g, id, b, inputs, res_ct, in_ct, loc, vjp, err);
    free(inputs);
    return st;
}

/* ---- forward mode --------------------------------------------------------------- */

/* Whether some node reads a residual of custom_vjp node id: its bwd was
 * inlined by a reverse pass (the residuals are read by nothing else). */
static bool residuals_read(const cj_graph *g, int id, int no) {
    for (int i = id + 1; i < g->nnodes; i++)
        for (int a = 0; a < g->nodes[i].ninputs; a++) {
            const cj_node *r = &g->nodes[g->nodes[i].inputs[a]];
            if (r->op == CJ_OP_RESULT && r->inputs[0] == id && r->attrs.index >= no) return true;
        }
    return false;
}

/* Forward mode through a custom_vjp that a reverse pass has gone through
 * (jacfwd(grad(f)), hessian): there fwd is ordinary code, as in JAX, whose
 * inner VJP runs fwd as plain code under the outer transformation; every
 * result's tangent is fwd's ordinary JVP (fwd inlined, then cj_jvp). */
static cj_status jvp_of_fwd(cj_graph *g, int id, const cj_body *b, const int *in_tan, int *out_tan, cj_jvp_fn *jvp,
                            cj_error *err) {
    int nin = g->nodes[id].ninputs, np = b->ncarry, nout = b->nresults, loc = g->nodes[id].loc, nwrt = 0;
    int *buf = malloc(sizeof(int) * (3 * (size_t)nin + 2 * (size_t)nout + 4));
    if (!buf) return cj_error_set(err, CJ_ERR_MEMORY, "jvp: out of memory");
    int *inputs = buf, *wrt = inputs + nin + 1, *tans = wrt + nin + 1, *fouts = tans + nin + 1, *t = fouts + nout + 1;
    memcpy(inputs, g->nodes[id].inputs, sizeof(int) * (size_t)nin);
    for (int a = 0; a < np; a++)
        if (in_tan[a] >= 0) wrt[nwrt] = inputs[a], tans[nwrt++] = in_tan[a];
    int start = g->nnodes;
    if (cj_graph_inline(g, b->graphs[0], inputs, nin, fouts, loc, err) == CJ_OK &&
        jvp(g, start, wrt, tans, nwrt, fouts, nout, t, err) == CJ_OK)
        for (int k = 0; k < nout; k++) out_tan[k] = is_float(b->result_dtype[k]) ? t[k] : -1;
    free(buf);
    return err->status;
}

/* See custom.h. */
cj_status cj_custom_jvp(cj_graph *g, int id, const int *in_tan, int *out_tan, cj_jvp_fn *jvp, cj_error *err) {
    const cj_body *b = cj_region_body(g, &g->nodes[id]);
    int loc = g->nodes[id].loc;
    if (!b->jvp_rule && residuals_read(g, id, b->nys)) return jvp_of_fwd(g, id, b, in_tan, out_tan, jvp, err);
    if (!b->jvp_rule)
        return cj_error_set(err, CJ_ERR_VALUE,
                            "jvp: forward-mode differentiation of a cjit.custom_vjp function is not supported: "
                            "its rule is a VJP (as in JAX). Use cjit.custom_jvp for a function that forward mode "
                            "(jvp, jacfwd, hessian) must go through (at %s)", cj_graph_loc_str(g, loc));
    int np = b->ncarry, nk = b->nconsts, no = b->nys, nargs = 2 * np + nk;
    int *args = malloc(sizeof(int) * ((size_t)nargs + 1)), *outs = malloc(sizeof(int) * (2 * (size_t)no + 1));
    if (!args || !outs) {
        free(args), free(outs);
        return cj_error_set(err, CJ_ERR_MEMORY, "jvp: out of memory");
    }
    for (int a = 0; a < np + nk; a++) args[a < np ? a : np + a] = g->nodes[id].inputs[a];
    for (int a = 0; a < np && err->status == CJ_OK; a++) {
        cj_node x = g->nodes[args[a]];
        args[np + a] = in_tan[a] >= 0 ? in_tan[a] : zeros_like(g, &x.shape, x.dtype, loc, err);
    }
    if (err->status == CJ_OK && cj_graph_inline(g, b->graphs[1], args, nargs, outs, loc, err) == CJ_OK)
        for (int k = 0; k < no; k++) out_tan[k] = is_float(b->result_dtype[k]) ? outs[no + k] : -1;
    free(args), free(outs);
    return err->status;
}
