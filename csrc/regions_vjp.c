/* regions_vjp.c - reverse mode through control flow (autodiff.c's rule for
 * scan, while and cond nodes calls cj_region_vjp).
 *
 * scan: the forward node is given a body that also stacks each iteration's
 *   input carries (residuals).  The backward pass is one more scan, over the
 *   rows in the other order, whose body recomputes the forward body from
 *   (carry_i, x_i) and applies its VJP (autodiff.c run on the body graph):
 *   it carries the carries' cotangent and the sums of the closed-over
 *   values' cotangents, and stacks the cotangents of the xs.
 * cond: a cond over branches that each recompute their forward branch and
 *   apply its VJP: the taken branch's gradient.
 * while: refused (the trip count is unknown when the pass is built), as
 *   JAX does; fori_loop with Python int bounds is a scan. */
#include <stdlib.h>
#include <string.h>

#include "autodiff.h"
#include "custom.h"
#include "regions.h"

static bool is_float(cj_dtype dt) { return dt == CJ_FLOAT32 || dt == CJ_FLOAT64; }

static int param(cj_graph *g, const cj_shape *s, cj_dtype dt, int slot, cj_error *err) {
    cj_node p;
    memset(&p, 0, sizeof p);
    p.op = CJ_OP_PARAM;
    p.dtype = dt;
    p.shape = *s;
    p.loc = -1;
    p.attrs.index = slot;
    return cj_graph_append(g, &p, err);
}

/* Copies graph f into g: f's PARAM k becomes g's node pmap[k] (every PARAM
 * of f must be mapped); omap gets the g nodes of f's outputs. */
static cj_status copy_into(cj_graph *g, const cj_graph *f, const int *pmap, int *omap, cj_error *err) {
    int *remap = malloc(sizeof(int) * ((size_t)f->nnodes + 1)), *ins = NULL, cap = 0;
    if (!remap) return cj_error_set(err, CJ_ERR_MEMORY, "autodiff: out of memory");
    for (int i = 0; i < f->nnodes; i++) {
        cj_node nd = f->nodes[i];
        if (nd.op == CJ_OP_PARAM) {
            remap[i] = pmap[nd.attrs.index];
            continue;
        }
        if (nd.ninputs > cap) {
            free(ins);
            cap = nd.ninputs;
            if (!(ins = malloc(sizeof(int) * (size_t)cap))) goto oom;
        }
        for (int a = 0; a < nd.ninputs; a++) ins[a] = remap[nd.inputs[a]];
        nd.inputs = ins;
        nd.loc = nd.loc >= 0 ? cj_graph_loc(g, cj_graph_loc_str(f, nd.loc)) : -1;
        cj_body *b = cj_region_body(f, &f->nodes[i]);
        if (b && (nd.attrs.index = cj_graph_add_body(g, b)) < 0) goto oom;
        if ((remap[i] = cj_graph_append(g, &nd, err)) < 0) goto fail;
    }
    for (int k = 0; k < f->noutputs; k++) omap[k] = remap[f->outputs[k]];
    free(remap);
    free(ins);
    return CJ_OK;
oom:
    cj_error_set(err, CJ_ERR_MEMORY, "autodiff: out of memory");
fail:
    free(remap);
    free(ins);
    return err->status;
}

/* Indices i < n with a float dtype (per dt(i)), into out; returns the count. */
#define FLOATS(out, n, dt_of)                                  \
    do {                                                       \
        nf_##out = 0;                                          \
        for (int i_ = 0; i_ < (n); i_++)                       \
            if (is_float(dt_of)) out[nf_##out++] = i_;          \
    } while (0)

typedef struct {
    cj_graph *g;
    int loc;
    cj_vjp_fn *vjp; /* the reverse mode that differentiates a body (cj_autodiff_vjp) */
    cj_error *err;
} outer;

static int zeros(outer *o, const cj_shape *s, cj_dtype dt) {
    return cj_build_constant(o->g, 0.0, 0, dt, false, s, o->loc, o->err);
}

/* ---- scan ------------------------------------------------------------------ */

/* The forward body with the input carries as extra stacked outputs. */
static cj_body *with_residuals(const cj_body *b, cj_error *err) {
    const cj_graph *f = b->graphs[0];
    cj_body *nb = cj_body_new(CJ_OP_SCAN, 1);
    cj_graph *g = cj_graph_new();
    int np = f->nparams, *pmap = malloc(sizeof(int) * ((size_t)np + 1));
    int *outs = malloc(sizeof(int) * ((size_t)f->noutputs + (size_t)b->ncarry + 1));
    if (!nb || !g || !pmap || !outs) {
        cj_error_set(err, CJ_ERR_MEMORY, "autodiff: out of memory");
        goto fail;
    }
    nb->graphs[0] = g;
    for (int i = 0; i < f->nnodes; i++)
        if (f->nodes[i].op == CJ_OP_PARAM) {
            const cj_node *p = &f->nodes[i];
            if ((pmap[p->attrs.index] = param(g, &p->shape, p->dtype, p->attrs.index, err)) < 0) goto fail;
            g->nodes[pmap[p->attrs.index]].weak = p->weak;
        }
    if (copy_into(g, f, pmap, outs, err) != CJ_OK) goto fail;
    for (int c = 0; c < b->ncarry; c++) outs[f->noutputs + c] = pmap[1 + c];
    if (cj_graph_set_outputs(g, outs, f->noutputs + b->ncarry, err) != CJ_OK) goto fail;
    nb->ncarry = b->ncarry;
    nb->nxs = b->nxs;
    nb->nconsts = b->nconsts;
    nb->nys = b->nys + b->ncarry;
    nb->length = b->length;
    nb->reverse = b->reverse;
    if (cj_body_finish(nb, err) != CJ_OK) goto fail;
    free(pmap);
    free(outs);
    return nb;
fail:
    free(pmap);
    free(outs);
    cj_body_unref(nb);
    return NULL;
}

static cj_status scan_vjp(outer *o, int id, const int *res_ct, int *in_ct) {
    cj_graph *g = o->g;
    cj_error *err = o->err;
    const cj_body *b0 = cj_region_body(g, &g->nodes[id]);
    int nc = b0->ncarry, nx = b0->nxs, nk = b0->nconsts, ny = b0->nys;
    const cj_graph *f = b0->graphs[0];
    cj_status st = CJ_OK;
    int n = nc + nx + nk + ny + 8;
    int *buf = malloc(sizeof(int) * (size_t)n * 20);
    cj_body *aug = NULL, *bk = NULL;
    if (!buf) return cj_error_set(err, CJ_ERR_MEMORY, "autodiff: out of memory");
    int *fc = buf, *fx = fc + n, *fy = fx + n, *fk = fy + n, nf_fc, nf_fx, nf_fy, nf_fk;
    int *pmap = fk + n, *omap = pmap + n, *outs = omap + n, *cts = outs + n, *wrt = cts + n, *grads = wrt + n;
    int *ins = grads + n, *resid = ins + 4 * n, *p_xrow = resid + n;
    FLOATS(fc, nc, b0->result_dtype[i_]);
    FLOATS(fx, nx, g->nodes[g->nodes[id].inputs[nc + i_]].dtype);
    FLOATS(fy, ny, b0->result_dtype[nc + i_]);
    FLOATS(fk, nk, g->nodes[g->nodes[id].inputs[nc + nx + i_]].dtype);

    /* 1. the forward scan stacks its input carries */
    if (!(aug = with_residuals(b0, err))) goto fail;
    int index = cj_graph_add_body(g, aug);
    if (index < 0) goto oom;
    g->nodes[id].attrs.index = index;
    for (int c = 0; c < nc; c++)
        if ((resid[c] = cj_build_result(g, id, nc + ny + c, o->loc, err)) < 0) goto fail;

    /* 2. the backward body: params [i, ct carries, ct const sums, carry rows, x rows, ct y rows, consts] */
    bk = cj_body_new(CJ_OP_SCAN, 1);
    cj_graph *G = cj_graph_new();
    if (!bk || !G) {
        cj_graph_free(G);
        goto oom;
    }
    bk->graphs[0] = G;
    int slot = 0;
    cj_shape scalar = {0, {0}};
    int p_i = param(G, &scalar, CJ_INT32, slot++, err);
    int *p_ctc = ins + 0 * n, *p_acc = ins + 1 * n, *p_row = ins + 2 * n, *p_cty = ins + 3 * n;
    for (int j = 0; j < nf_fc; j++) p_ctc[j] = param(G, &b0->result_shape[fc[j]], b0->result_dtype[fc[j]], slot++, err);
    for (int j = 0; j < nf_fk; j++) {
        const cj_node *k = &g->nodes[g->nodes[id].inputs[nc + nx + fk[j]]];
        p_acc[j] = param(G, &k->shape, k->dtype, slot++, err);
    }
    for (int c = 0; c < nc; c++) p_row[c] = param(G, &b0->result_shape[c], b0->result_dtype[c], slot++, err);
    for (int x = 0; x < nx; x++) {
        cj_shape row = g->nodes[g->nodes[id].inputs[nc + x]].shape;
        memmove(row.dims, row.dims + 1, sizeof(int64_t) * (size_t)(row.rank - 1));
        row.rank--;
        p_xrow[x] = param(G, &row, g->nodes[g->nodes[id].inputs[nc + x]].dtype, slot++, err);
    }
    for (int j = 0; j < nf_fy; j++) {
        cj_shape row = b0->result_shape[nc + fy[j]];
        memmove(row.dims, row.dims + 1, sizeof(int64_t) * (size_t)(row.rank - 1));
        row.rank--;
        p_cty[j] = param(G, &row, b0->result_dtype[nc + fy[j]], slot++, err);
    }
    if (err->status != CJ_OK || p_i < 0) goto fail;
    pmap[0] = p_i;
    for (int c = 0; c < nc; c++) pmap[1 + c] = p_row[c];
    for (int x = 0; x < nx; x++) pmap[1 + nc + x] = p_xrow[x];
    for (int k = 0; k < nk; k++) {
        const cj_node *kn = &g->nodes[g->nodes[id].inputs[nc + nx + k]];
        if ((pmap[1 + nc + nx + k] = param(G, &kn->shape, kn->dtype, slot++, err)) < 0) goto fail;
    }
    if (copy_into(G, f, pmap, omap, err) != CJ_OK) goto fail;
    /* the VJP of the body, appended to G */
    int nouts = 0, nwrt = 0;
    for (int j = 0; j < nf_fc; j++) outs[nouts] = omap[fc[j]], cts[nouts++] = p_ctc[j];
    for (int j = 0; j < nf_fy; j++) outs[nouts] = omap[nc + fy[j]], cts[nouts++] = p_cty[j];
    for (int j = 0; j < nf_fc; j++) wrt[nwrt++] = p_row[fc[j]];
    for (int j = 0; j < nf_fk; j++) wrt[nwrt++] = pmap[1 + nc + nx + fk[j]];
    for (int j = 0; j < nf_fx; j++) wrt[nwrt++] = pmap[1 + nc + fx[j]];
    if (o->vjp(G, 0, outs, cts, nouts, wrt, nwrt, grads, err) != CJ_OK) goto fail;
    int nbo = 0;
    for (int j = 0; j < nf_fc; j++) outs[nbo++] = grads[j];
    for (int j = 0; j < nf_fk; j++) {
        int sum = cj_build_binary(G, CJ_OP_ADD, p_acc[j], grads[nf_fc + j], -1, err);
        if (sum < 0) goto fail;
        outs[nbo++] = sum;
    }
    for (int j = 0; j < nf_fx; j++) outs[nbo++] = grads[nf_fc + nf_fk + j];
    if (cj_graph_set_outputs(G, outs, nbo, err) != CJ_OK) goto fail;
    bk->ncarry = nf_fc + nf_fk;
    bk->nxs = nc + nx + nf_fy;
    bk->nconsts = nk;
    bk->nys = nf_fx;
    bk->length = b0->length;
    bk->reverse = !b0->reverse;
    if (cj_body_finish(bk, err) != CJ_OK) goto fail;

    /* 3. the backward scan in the outer graph */
    int m = 0, *in = malloc(sizeof(int) * ((size_t)(nc + nk + nc + nx + ny + nk) + 1));
    if (!in) goto oom;
    for (int j = 0; j < nf_fc; j++) {
        int ct = res_ct[fc[j]];
        in[m++] = ct >= 0 ? ct : zeros(o, &b0->result_shape[fc[j]], b0->result_dtype[fc[j]]);
    }
    for (int j = 0; j < nf_fk; j++) {
        const cj_node *k = &g->nodes[g->nodes[id].inputs[nc + nx + fk[j]]];
        cj_shape s = k->shape;
        in[m++] = zeros(o, &s, k->dtype);
    }
    for (int c = 0; c < nc; c++) in[m++] = resid[c];
    for (int x = 0; x < nx; x++) in[m++] = g->nodes[id].inputs[nc + x];
    for (int j = 0; j < nf_fy; j++) {
        int ct = res_ct[nc + fy[j]];
        in[m++] = ct >= 0 ? ct : zeros(o, &b0->result_shape[nc + fy[j]], b0->result_dtype[nc + fy[j]]);
    }
    for (int k = 0; k < nk; k++) in[m++] = g->nodes[id].inputs[nc + nx + k];
    for (int j = 0; j < m; j++)
        if (in[j] < 0) {
            free(in);
            goto fail;
        }
    int back = cj_build_region(g, bk, in, m, o->loc, err);
    free(in);
    if (back < 0) goto fail;
    int r = 0;
    for (int j = 0; j < nf_fc; j++)
        if ((in_ct[fc[j]] = cj_build_result(g, back, r++, o->loc, err)) < 0) goto fail;
    for (int j = 0; j < nf_fk; j++)
        if ((in_ct[nc + nx + fk[j]] = cj_build_result(g, back, r++, o->loc, err)) < 0) goto fail;
    for (int j = 0; j < nf_fx; j++)
        if ((in_ct[nc + fx[j]] = cj_build_result(g, back, r++, o->loc, err)) < 0) goto fail;
    goto done;
oom:
    cj_error_set(err, CJ_ERR_MEMORY, "autodiff: out of memory");
fail:
    if (err->status == CJ_OK) cj_error_set(err, CJ_ERR_INTERNAL, "autodiff of scan failed");
    st = err->status;
done:
    cj_body_unref(aug);
    cj_body_unref(bk);
    free(buf);
    return st;
}

/* ---- cond ------------------------------------------------------------------- */

static cj_status cond_vjp(outer *o, int id, const int *res_ct, int *in_ct) {
    cj_graph *g = o->g;
    cj_error *err = o->err;
    const cj_body *b0 = cj_region_body(g, &g->nodes[id]);
    int no = b0->ncarry, nk = b0->nconsts, nr = b0->nresults, nin = no + nk;
    int n = nin + nr + 8;
    int *buf = malloc(sizeof(int) * (size_t)n * 10);
    cj_body *bk = cj_body_new(CJ_OP_COND, b0->ngraphs);
    cj_status st = CJ_OK;
    if (!buf || !bk) {
        free(buf);
        cj_body_unref(bk);
        return cj_error_set(err, CJ_ERR_MEMORY, "autodiff: out of memory");
    }
    int *fi = buf, *fr = fi + n, nf_fi, nf_fr, *pmap = fr + n, *omap = pmap + n, *outs = omap + n;
    int *cts = outs + n, *wrt = cts + n, *grads = wrt + n, *in = grads + n;
    const int *inputs = g->nodes[id].inputs + 1; /* after the index */
    FLOATS(fi, nin, g->nodes[inputs[i_]].dtype);
    FLOATS(fr, nr, b0->result_dtype[i_]);
    for (int j = 0; j < b0->ngraphs; j++) {
        cj_graph *G = cj_graph_new();
        if (!G) goto oom;
        bk->graphs[j] = G;
        int slot = 0;
        for (int i = 0; i < nin; i++) {
            const cj_node *x = &g->nodes[inputs[i]];
            if ((pmap[i] = param(G, &x->shape, x->dtype, slot++, err)) < 0) goto fail;
        }
        for (int r = 0; r < nf_fr; r++)
            if ((cts[r] = param(G, &b0->result_shape[fr[r]], b0->result_dtype[fr[r]], slot++, err)) < 0) goto fail;
        if (copy_into(G, b0->graphs[j], pmap, omap, err) != CJ_OK) goto fail;
        for (int r = 0; r < nf_fr; r++) outs[r] = omap[fr[r]];
        for (int i = 0; i < nf_fi; i++) wrt[i] = pmap[fi[i]];
        if (o->vjp(G, 0, outs, cts, nf_fr, wrt, nf_fi, grads, err) != CJ_OK) goto fail;
        if (cj_graph_set_outputs(G, grads, nf_fi, err) != CJ_OK) goto fail;
    }
    bk->ncarry = nin + nf_fr;
    bk->nconsts = 0;
    if (cj_body_finish(bk, err) != CJ_OK) goto fail;
    int m = 0;
    in[m++] = g->nodes[id].inputs[0];
    for (int i = 0; i < nin; i++) in[m++] = g->nodes[id].inputs[1 + i];
    for (int r = 0; r < nf_fr; r++) {
        int ct = res_ct[fr[r]];
        if ((in[m++] = ct >= 0 ? ct : zeros(o, &b0->result_shape[fr[r]], b0->result_dtype[fr[r]])) < 0) goto fail;
    }
    int back = cj_build_region(g, bk, in, m, o->loc, err);
    if (back < 0) goto fail;
    for (int i = 0; i < nf_fi; i++)
        if ((in_ct[1 + fi[i]] = cj_build_result(g, back, i, o->loc, err)) < 0) goto fail;
    goto done;
oom:
    cj_error_set(err, CJ_ERR_MEMORY, "autodiff: out of memory");
fail:
    if (err->status == CJ_OK) cj_error_set(err, CJ_ERR_INTERNAL, "autodiff of cond failed");
    st = err->status;
done:
    cj_body_unref(bk);
    free(buf);
    return st;
}

/* See regions.h. */
cj_status cj_region_vjp(cj_graph *g, int id, const int *res_ct, int *in_ct, cj_vjp_fn *vjp, cj_error *err) {
    const cj_node *n = &g->nodes[id];
    outer o = {.g = g, .loc = n->loc, .vjp = vjp, .err = err};
    for (int a = 0; a < n->ninputs; a++) in_ct[a] = -1;
    if (n->op == CJ_OP_SCAN) return scan_vjp(&o, id, res_ct, in_ct);
    if (n->op == CJ_OP_COND) return cond_vjp(&o, id, res_ct, in_ct);
    if (n->op == CJ_OP_CUSTOM) return cj_custom_vjp(g, id, res_ct, in_ct, vjp, err);
    return cj_error_set(err, CJ_ERR_VALUE,
                        "grad: reverse-mode differentiation of cjit.lax.while_loop (and of fori_loop with "
                        "traced bounds, which is one) is not supported: its trip count is unknown until it "
                        "runs. Use cjit.lax.scan, or fori_loop with Python int bounds (a scan) (at %s)",
                        cj_graph_loc_str(g, n->loc));
}
