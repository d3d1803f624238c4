/* jvp_regions.c - forward mode through cjit.lax control flow.
 *
 * The JVP of a region is a region of the same kind whose bodies are the
 * JVPs of the old ones: each body graph is copied, given a tangent
 * parameter beside each primal slot that carries one, run through cj_jvp,
 * and cut out again with its parameters in the new slot order.  Layouts
 * (T: tangent; only float values have one):
 *
 *   SCAN  inputs  [carries, T carries (every float one), xs, T xs (those
 *                 with a tangent), consts, T consts (those with one)]
 *         body    [i, the same in that order, xs as rows] ->
 *                 [carries, T carries, y rows, T y rows (every float y)]
 *   WHILE inputs  [carries, T carries, consts, T consts]; the condition
 *                 reads the same parameters, the body returns [carries, T carries]
 *   COND  inputs  [index, operands, T operands, consts, T consts]
 *         branch  -> [outputs, T outputs (every float one)]
 *
 * A carry always gets a tangent (zeros when its initial value has none):
 * the body may make it depend on something that has one.  The new region
 * recomputes the primal values; the old one stays for the primal results
 * already read, so a loop under jvp runs twice (see docs/API.md). */
#include <stdlib.h>
#include <string.h>

#include "jvp.h"
#include "regions.h"

static bool is_float(cj_dtype dt) { return dt == CJ_FLOAT32 || dt == CJ_FLOAT64; }

/* One slot of the new layout: the old slot it is (or is the tangent of). */
typedef struct {
    int old;      /* the old slot, or -1 for scan's iteration number kept at 0 */
    bool tangent; /* the tangent of slot `old` */
    cj_shape shape;
    cj_dtype dtype;
} slot;

/* The JVP of body graph src under the new slot layout; outputs: primal
 * outputs, with tangents of the float ones of each group inserted after
 * the group (groups: [0, split) and [split, n); split = n for one group). */
static cj_graph *jvp_body(const cj_graph *src, const slot *slots, int nslots, int nold, int split, bool with_tangents,
                          cj_jvp_fn *jvp, cj_error *err) {
    cj_graph *w = cj_graph_copy(src, err), *out = NULL;
    size_t ns = (size_t)nslots + 1, no = 2 * (size_t)src->noutputs + 1;
    int *old = malloc(sizeof(int) * ((size_t)nold + 1)), *ph = malloc(sizeof(int) * ns);
    int *wrt = malloc(sizeof(int) * ns), *tan = malloc(sizeof(int) * ns), nw = 0;
    int *outs = malloc(sizeof(int) * no), *otan = malloc(sizeof(int) * no), nouts = 0;
    if (!w) goto done;
    if (!old || !ph || !wrt || !tan || !outs || !otan) {
        cj_error_set(err, CJ_ERR_MEMORY, "jvp: out of memory");
        goto done;
    }
    for (int s = 0; s < nold; s++) old[s] = -1;
    for (int i = 0; i < w->nnodes; i++)
        if (w->nodes[i].op == CJ_OP_PARAM && w->nodes[i].attrs.index < nold) old[w->nodes[i].attrs.index] = i;
    /* primal slots first (a tangent parameter needs its primal's id) */
    for (int pass = 0; pass < 2; pass++)
        for (int s = 0; s < nslots; s++) {
            if (slots[s].tangent != (pass == 1)) continue;
            int o = slots[s].old;
            if (!slots[s].tangent && o >= 0 && old[o] >= 0) {
                ph[s] = old[o];
                continue;
            }
            cj_node p;
            memset(&p, 0, sizeof p);
            p.op = CJ_OP_PARAM;
            p.loc = -1;
            p.attrs.index = s;
            p.dtype = slots[s].dtype;
            p.shape = slots[s].shape;
            if ((ph[s] = cj_graph_append(w, &p, err)) < 0) goto done;
            if (!slots[s].tangent) {
                if (o >= 0) old[o] = ph[s];
            } else if (old[o] >= 0) {
                wrt[nw] = old[o];
                tan[nw++] = ph[s];
            }
        }
    int n = src->noutputs;
    if (jvp(w, 0, wrt, tan, nw, w->outputs, n, otan, err) != CJ_OK) goto done;
    for (int group = 0; group < 2; group++) {
        int lo = group ? split : 0, hi = group ? n : split;
        for (int k = lo; k < hi; k++) outs[nouts++] = w->outputs[k];
        for (int k = lo; with_tangents && k < hi; k++) {
            const cj_node *o = &w->nodes[w->outputs[k]];
            if (!is_float(o->dtype)) continue;
            int t = otan[k];
            if (t < 0 && (t = cj_build_constant(w, 0.0, 0, o->dtype, false, &o->shape, -1, err)) < 0) goto done;
            outs[nouts++] = t;
        }
    }
    out = cj_graph_reslot(w, ph, nslots, outs, nouts, err);
done:
    free(old), free(ph), free(wrt), free(tan), free(outs), free(otan);
    cj_graph_free(w);
    return out;
}

/* Groups of region inputs, in order: the first `ncarry` (after cond's
 * index) always get tangents when float; xs and consts when they have one. */
typedef struct {
    int *ins, nins;  /* new region inputs */
    slot *slots;
    int nslots;
    int ntc, ntx, ntk;  /* tangent carries, xs, consts */
} layout;

static bool push_input(layout *L, int x) { return (L->ins[L->nins++] = x) >= 0; }

static void push_slot(layout *L, int old, bool tangent, const cj_node *like, bool row) {
    slot *s = &L->slots[L->nslots++];
    s->old = old;
    s->tangent = tangent;
    s->dtype = like->dtype;
    s->shape = like->shape;
    if (row) { /* scan's body sees one row of xs */
        for (int d = 1; d < s->shape.rank; d++) s->shape.dims[d - 1] = s->shape.dims[d];
        s->shape.rank--;
    }
}

/* See jvp.h. */
int cj_jvp_region(cj_graph *g, int id, const int *in_tan, cj_jvp_fn *jvp, cj_error *err) {
    cj_node n = g->nodes[id];
    const cj_body *b = cj_region_body(g, &n);
    if (!b) return cj_error_set(err, CJ_ERR_INTERNAL, "jvp: region without a body"), -1;
    int nin = n.ninputs, lead = b->op == CJ_OP_COND ? 1 : 0; /* cond's index */
    int nc = b->ncarry, nx = b->op == CJ_OP_SCAN ? b->nxs : 0, nk = nin - lead - nc - nx;
    /* old body slots: scan [i, carries, x rows, consts]; while [carries, consts]; cond [operands, consts] */
    int base = b->op == CJ_OP_SCAN ? 1 : 0, nold = base + nc + nx + nk;
    layout L = {.ins = malloc(sizeof(int) * (2 * (size_t)nin + 1)),
                .slots = malloc(sizeof(slot) * (2 * (size_t)nold + 2))};
    cj_body *nb = cj_body_new(b->op, b->ngraphs);
    int r = -1;
    if (!L.ins || !L.slots || !nb) {
        cj_error_set(err, CJ_ERR_MEMORY, "jvp: out of memory");
        goto done;
    }
    if (lead && !push_input(&L, n.inputs[0])) goto done;
    if (b->op == CJ_OP_SCAN) {
        cj_node iter;
        memset(&iter, 0, sizeof iter);
        iter.dtype = CJ_INT32;
        push_slot(&L, 0, false, &iter, false);
    }
    /* three groups: carries (tangents always), xs and consts (tangents when given) */
    int starts[3] = {lead, lead + nc, lead + nc + nx}, counts[3] = {nc, nx, nk}, *tcount[3] = {&L.ntc, &L.ntx, &L.ntk};
    for (int grp = 0; grp < 3; grp++) {
        for (int j = 0; j < counts[grp]; j++) {
            int a = starts[grp] + j, x = n.inputs[a];
            if (!push_input(&L, x)) goto done;
            push_slot(&L, base + a - lead, false, &g->nodes[x], grp == 1);
        }
        for (int j = 0; j < counts[grp]; j++) {
            int a = starts[grp] + j, x = n.inputs[a];
            if (!is_float(g->nodes[x].dtype) || (grp > 0 && in_tan[a] < 0)) continue;
            int t = in_tan[a];
            if (t < 0) t = cj_build_constant(g, 0.0, 0, g->nodes[x].dtype, false, &g->nodes[x].shape, n.loc, err);
            if (!push_input(&L, t)) goto done;
            push_slot(&L, base + a - lead, true, &g->nodes[x], grp == 1);
            (*tcount[grp])++;
        }
    }
    for (int i = 0; i < b->ngraphs; i++) {
        const cj_graph *src = b->graphs[i];
        bool cond_graph = b->op == CJ_OP_WHILE && i == 0;
        int split = b->op == CJ_OP_SCAN ? b->ncarry : src->noutputs;
        if (!(nb->graphs[i] = jvp_body(src, L.slots, L.nslots, nold, split, !cond_graph, jvp, err))) goto done;
    }
    /* scan's ys: the float ones gain tangents */
    int nty = 0;
    if (b->op == CJ_OP_SCAN)
        for (int k = b->ncarry; k < b->nresults; k++) nty += is_float(b->result_dtype[k]);
    nb->ncarry = nc + L.ntc; /* cond: the operands */
    nb->nxs = nx + L.ntx;
    nb->nconsts = nk + L.ntk;
    nb->nys = b->nys + nty;
    nb->length = b->length, nb->reverse = b->reverse;
    if (cj_body_finish(nb, err) != CJ_OK) goto done;
    r = cj_build_region(g, nb, L.ins, L.nins, n.loc, err);
done:
    cj_body_unref(nb);
    free(L.ins), free(L.slots);
    return r;
}

/* See jvp.h. */
int cj_jvp_result(cj_graph *g, int result_id, int new_region, cj_error *err) {
    cj_node r = g->nodes[result_id];
    const cj_body *b = cj_region_body(g, &g->nodes[r.inputs[0]]);
    int k = r.attrs.index, nfloat_before = 0, at;
    if (b->op == CJ_OP_SCAN && k >= b->ncarry) {
        /* y j: after [carries, T carries, ys] */
        int ntc = 0;
        for (int c = 0; c < b->ncarry; c++) ntc += is_float(b->result_dtype[c]);
        for (int j = b->ncarry; j < k; j++) nfloat_before += is_float(b->result_dtype[j]);
        at = b->ncarry + ntc + (b->nresults - b->ncarry) + nfloat_before;
    } else {
        int group = b->op == CJ_OP_SCAN ? b->ncarry : b->nresults;
        for (int j = 0; j < k; j++) nfloat_before += is_float(b->result_dtype[j]);
        at = group + nfloat_before;
    }
    return cj_build_result(g, new_region, at, r.loc, err);
}
