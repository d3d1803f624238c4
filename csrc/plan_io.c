/* plan_io.c - graphs and plans to bytes and back (see plan_io.h). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "blockmem.h"
#include "plan_io.h"
#include "regions.h"

/* ---- the stream ------------------------------------------------------------ */

/* See plan_io.h. */
void cj_put_bytes(cj_wbuf *w, const void *p, size_t n) {
    if (w->oom) return;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + n) cap *= 2;
        uint8_t *grown = realloc(w->data, cap);
        if (!grown) {
            w->oom = true;
            return;
        }
        w->data = grown;
        w->cap = cap;
    }
    if (n) memcpy(w->data + w->len, p, n);
    w->len += n;
}

/* zigzag (small negatives stay short), then 7 bits a byte, low first */
void cj_put_int(cj_wbuf *w, int64_t v) {
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    uint8_t b[10];
    int n = 0;
    do {
        b[n] = (uint8_t)(u & 0x7f);
        u >>= 7;
        if (u) b[n] |= 0x80;
        n++;
    } while (u);
    cj_put_bytes(w, b, (size_t)n);
}

void cj_put_f64(cj_wbuf *w, double v) {
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(bits >> (8 * i));
    cj_put_bytes(w, b, 8);
}

void cj_put_str(cj_wbuf *w, const char *s) {
    if (!s) {
        cj_put_int(w, -1);
        return;
    }
    size_t n = strlen(s);
    cj_put_int(w, (int64_t)n);
    cj_put_bytes(w, s, n);
}

/* See plan_io.h. */
const uint8_t *cj_get_bytes(cj_rbuf *r, size_t n) {
    if (r->bad || n > r->len - r->pos) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = r->data + r->pos;
    r->pos += n;
    return p;
}

int64_t cj_get_int(cj_rbuf *r, int64_t lo, int64_t hi) {
    uint64_t u = 0;
    for (int shift = 0;; shift += 7) {
        const uint8_t *b = cj_get_bytes(r, 1);
        if (!b || shift > 63) {
            r->bad = true;
            return 0;
        }
        u |= (uint64_t)(*b & 0x7f) << shift;
        if (!(*b & 0x80)) break;
    }
    int64_t v = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
    if (v < lo || v > hi) {
        r->bad = true;
        return 0;
    }
    return v;
}

double cj_get_f64(cj_rbuf *r) {
    const uint8_t *b = cj_get_bytes(r, 8);
    if (!b) return 0;
    uint64_t bits = 0;
    for (int i = 0; i < 8; i++) bits |= (uint64_t)b[i] << (8 * i);
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

char *cj_get_str(cj_rbuf *r, bool *absent) {
    *absent = false;
    int64_t n = cj_get_int(r, -1, INT32_MAX);
    if (r->bad) return NULL;
    if (n < 0) {
        *absent = true;
        return NULL;
    }
    const uint8_t *p = cj_get_bytes(r, (size_t)n);
    char *s = p ? malloc((size_t)n + 1) : NULL;
    if (!s) {
        r->bad = true;
        return NULL;
    }
    memcpy(s, p, (size_t)n);
    s[n] = 0;
    if (strlen(s) != (size_t)n) { /* a NUL inside: not what we wrote */
        free(s);
        r->bad = true;
        return NULL;
    }
    return s;
}

/* A count of items that each take at least one byte: never more than
 * what is left (so that a corrupt count cannot ask for gigabytes). */
static int get_count(cj_rbuf *r) {
    int64_t left = (int64_t)(r->len - r->pos);
    return (int)cj_get_int(r, 0, left < INT_MAX ? left : INT_MAX);
}

/* ---- the bodies a graph names, and the source locations' pool --------------- */

/* Which of g's bodies a node names (the others, such as a custom node's
 * body after simplify inlined it, change nothing that runs): index_of[b]
 * is body b's number among them, or -1.  Returns how many, -1 when out of
 * memory; *index_of is malloc'd (NULL when g has no bodies). */
static int used_bodies(const cj_graph *g, int **index_of) {
    *index_of = NULL;
    if (g->nbodies == 0) return 0;
    int *of = malloc(sizeof(int) * (size_t)g->nbodies);
    if (!of) return -1;
    for (int b = 0; b < g->nbodies; b++) of[b] = -1;
    for (int i = 0; i < g->nnodes; i++) {
        const cj_node *n = &g->nodes[i];
        if (cj_op_kind(n->op) == CJ_OPKIND_REGION && n->op != CJ_OP_RESULT && n->attrs.index >= 0 &&
            n->attrs.index < g->nbodies)
            of[n->attrs.index] = 0;
    }
    int used = 0;
    for (int b = 0; b < g->nbodies; b++)
        if (of[b] == 0) of[b] = used++;
        else of[b] = -1;
    *index_of = of;
    return used;
}

static _Thread_local const cj_loc_pool *sorting_pool; /* qsort's comparison has no context argument */

static int by_text(const void *a, const void *b) {
    const char *const *t = sorting_pool->texts;
    int c = strcmp(t[*(const int *)a], t[*(const int *)b]);
    return c ? c : *(const int *)a - *(const int *)b;
}

/* See plan_io.h.  Depth first with a stack of graphs: a graph's texts,
 * then those of the bodies its nodes name, in body order. */
cj_status cj_loc_pool_build(cj_loc_pool *p, const cj_graph *g, cj_error *err) {
    memset(p, 0, sizeof *p);
    const cj_graph **stack = NULL;
    int nstack = 0, stack_cap = 0;
    bool ok = cj_grow((void **)&stack, &stack_cap, 1, sizeof *stack);
    if (ok) stack[nstack++] = g;
    while (ok && nstack > 0) {
        const cj_graph *cur = stack[--nstack];
        for (int i = 0; i < cur->nlocs && ok; i++)
            if ((ok = cj_grow((void **)&p->texts, &p->cap, p->n + 1, sizeof *p->texts)))
                p->texts[p->n++] = cur->locs[i];
        int *index_of = NULL, nused = ok ? used_bodies(cur, &index_of) : 0;
        ok = ok && nused >= 0;
        for (int b = cur->nbodies - 1; ok && b >= 0; b--) /* pushed last to first: popped in order */
            for (int j = index_of[b] >= 0 ? cur->bodies[b]->ngraphs - 1 : -1; ok && j >= 0; j--)
                if ((ok = cj_grow((void **)&stack, &stack_cap, nstack + 1, sizeof *stack)))
                    stack[nstack++] = cur->bodies[b]->graphs[j];
        free(index_of);
    }
    free(stack);
    /* the places sorted by text, for write_locs's binary search (a program
     * with many bodies has many locations) */
    if (ok && (p->by_text = malloc(sizeof(int) * ((size_t)p->n + 1)))) {
        for (int i = 0; i < p->n; i++) p->by_text[i] = i;
        sorting_pool = p;
        qsort(p->by_text, (size_t)p->n, sizeof(int), by_text);
    }
    if (!ok || !p->by_text) {
        cj_loc_pool_free(p);
        return cj_error_set(err, CJ_ERR_MEMORY, "cache entry: out of memory");
    }
    return CJ_OK;
}

void cj_loc_pool_free(cj_loc_pool *p) {
    free(p->texts);
    free(p->by_text);
    memset(p, 0, sizeof *p);
}

/* A place in the pool holding text, or -1. */
static int pool_find(const cj_loc_pool *p, const char *text) {
    int lo = 0, hi = p->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(p->texts[p->by_text[mid]], text);
        if (c == 0) return p->by_text[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* A key holds only how many locations a graph has; an entry names each by
 * its place in the pool (or, for one that is in no source graph, its text). */
static void write_locs(cj_wbuf *w, const cj_graph *g, const cj_loc_pool *pool) {
    cj_put_int(w, g->nlocs);
    for (int i = 0; pool && i < g->nlocs; i++) {
        int at = pool_find(pool, g->locs[i]);
        cj_put_int(w, at);
        if (at < 0) cj_put_str(w, g->locs[i]);
    }
}

/* Reads write_locs's entry form into g; loc_of[i] is location i's id in g
 * (texts that became equal in this process share one) and *count how many
 * were read.  NULL when bad. */
static int *read_locs(cj_rbuf *r, cj_graph *g, const cj_loc_pool *pool, int *count) {
    int n = *count = get_count(r);
    int *loc_of = r->bad ? NULL : malloc(sizeof(int) * ((size_t)n + 1));
    for (int i = 0; loc_of && i < n; i++) {
        int at = (int)cj_get_int(r, -1, pool->n - 1);
        bool absent;
        char *text = r->bad || at >= 0 ? NULL : cj_get_str(r, &absent);
        if (r->bad || (at < 0 && !text) || (loc_of[i] = cj_graph_loc(g, at >= 0 ? pool->texts[at] : text)) < 0) {
            free(text);
            free(loc_of);
            return NULL;
        }
        free(text);
    }
    return loc_of;
}

/* ---- the graph ------------------------------------------------------------- */

static void put_shape(cj_wbuf *w, const cj_shape *s) {
    cj_put_int(w, s->rank);
    for (int d = 0; d < CJ_MAX_RANK; d++) cj_put_int(w, s->dims[d]);
}

static void get_shape(cj_rbuf *r, cj_shape *s) {
    s->rank = (int)cj_get_int(r, 0, CJ_MAX_RANK);
    for (int d = 0; d < CJ_MAX_RANK; d++) s->dims[d] = cj_get_int(r, 0, INT64_MAX);
}

static void write_graph(cj_wbuf *w, const cj_graph *g, const cj_loc_pool *pool, int depth);

/* The bodies g's nodes name, each with its counts and graphs (a level
 * deeper: the recursion follows the nesting of control flow, never the
 * nodes). */
static void write_bodies(cj_wbuf *w, const cj_graph *g, const int *index_of, int nused, const cj_loc_pool *pool,
                         int depth) {
    cj_put_int(w, nused);
    if (nused > 0 && pool && depth >= CJ_ENTRY_MAX_DEPTH) {
        w->too_deep = true;
        return;
    }
    for (int i = 0; i < g->nbodies; i++) {
        if (index_of[i] < 0) continue;
        const cj_body *b = g->bodies[i];
        cj_put_int(w, b->op);
        cj_put_int(w, b->ngraphs);
        cj_put_int(w, b->ncarry);
        cj_put_int(w, b->nxs);
        cj_put_int(w, b->nconsts);
        cj_put_int(w, b->nys);
        cj_put_int(w, b->length);
        cj_put_int(w, b->reverse);
        cj_put_int(w, b->nres);
        cj_put_int(w, b->jvp_rule);
        for (int j = 0; j < b->ngraphs; j++) write_graph(w, b->graphs[j], pool, depth + 1);
    }
}

/* See plan_io.h.  Everything a compile could read goes in, in a fixed
 * order; the attrs are written whole whatever the op (unused ones are 0). */
static void write_graph(cj_wbuf *w, const cj_graph *g, const cj_loc_pool *pool, int depth) {
    int *index_of = NULL, nused = used_bodies(g, &index_of);
    if (nused < 0) {
        w->oom = true;
        return;
    }
    write_locs(w, g, pool);
    write_bodies(w, g, index_of, nused, pool, depth);
    cj_put_int(w, g->nregions);
    for (int i = 0; i < g->nregions; i++) {
        const cj_region *rg = &g->regions[i];
        cj_put_int(w, rg->parent);
        cj_put_int(w, rg->policy);
        cj_put_int(w, rg->nnames);
        for (int k = 0; k < rg->nnames; k++) cj_put_str(w, rg->names[k]);
    }
    cj_put_int(w, g->nnodes);
    for (int i = 0; i < g->nnodes; i++) {
        const cj_node *n = &g->nodes[i];
        bool names_body = cj_op_kind(n->op) == CJ_OPKIND_REGION && n->op != CJ_OP_RESULT && index_of &&
                          n->attrs.index >= 0 && n->attrs.index < g->nbodies;
        cj_put_int(w, n->op);
        cj_put_int(w, n->dtype);
        cj_put_int(w, n->weak);
        put_shape(w, &n->shape);
        cj_put_int(w, n->ninputs);
        for (int a = 0; a < n->ninputs; a++) cj_put_int(w, n->inputs[a]);
        cj_put_int(w, n->loc);
        cj_put_int(w, n->region);
        cj_put_int(w, n->remat);
        const cj_attrs *at = &n->attrs;
        cj_put_f64(w, at->fvalue);
        cj_put_int(w, at->ivalue);
        cj_put_int(w, at->axis);
        cj_put_int(w, at->axes);
        for (int d = 0; d < CJ_MAX_RANK; d++) cj_put_int(w, at->perm[d]);
        for (int d = 0; d < CJ_MAX_RANK; d++) cj_put_int(w, at->start[d]);
        for (int d = 0; d < CJ_MAX_RANK; d++) cj_put_int(w, at->step[d]);
        cj_put_int(w, names_body ? index_of[at->index] : at->index);
        cj_put_str(w, n->op == CJ_OP_NAME ? at->name : NULL);
    }
    free(index_of);
    cj_put_int(w, g->nparams);
    cj_put_int(w, g->narrays);
    cj_put_int(w, g->noutputs);
    for (int i = 0; i < g->noutputs; i++) cj_put_int(w, g->outputs[i]);
    cj_put_int(w, g->nforce_remat);
    for (int i = 0; i < g->nforce_remat; i++) cj_put_int(w, g->force_remat[i]);
    cj_put_int(w, g->current_region);
    cj_put_int(w, g->backward_start);
}

/* See plan_io.h. */
void cj_graph_write(cj_wbuf *w, const cj_graph *g, const cj_loc_pool *pool) { write_graph(w, g, pool, 0); }

static cj_graph *graph_bad(cj_graph *g, cj_error *err, const char *what) {
    cj_graph_free(g);
    if (err->status == CJ_OK) cj_error_set(err, CJ_ERR_VALUE, "cache entry: bad graph (%s)", what);
    return NULL;
}

static bool read_regions(cj_rbuf *r, cj_graph *g) {
    int n = get_count(r);
    if (r->bad || n == 0) return !r->bad;
    if (!(g->regions = calloc((size_t)n, sizeof *g->regions))) return false;
    g->regions_cap = n;
    for (int i = 0; i < n && !r->bad; i++) {
        cj_region *rg = &g->regions[i];
        rg->parent = (int)cj_get_int(r, 0, i > 0 ? i - 1 : 0);
        rg->policy = (cj_save_policy)cj_get_int(r, CJ_SAVE_NOTHING, CJ_SAVE_ALL_EXCEPT_NAMES);
        rg->nnames = get_count(r);
        if (rg->nnames && !(rg->names = cj_arena_alloc(&g->arena, sizeof(char *) * (size_t)rg->nnames))) return false;
        for (int k = 0; k < rg->nnames && !r->bad; k++) {
            bool absent;
            char *s = cj_get_str(r, &absent);
            if (!s) return r->bad = true, false;
            rg->names[k] = cj_arena_strdup(&g->arena, s);
            free(s);
            if (!rg->names[k]) return false;
        }
        g->nregions = i + 1;
    }
    return !r->bad;
}

static cj_graph *read_graph(cj_rbuf *r, const cj_loc_pool *pool, int depth, cj_error *err);

/* One body of write_bodies, its graphs checked by cj_body_finish. */
static cj_body *read_body(cj_rbuf *r, const cj_loc_pool *pool, int depth, cj_error *err) {
    cj_op op = (cj_op)cj_get_int(r, 0, CJ_NUM_OPS - 1);
    int ngraphs = (int)cj_get_int(r, 1, CJ_MAX_BRANCHES);
    bool op_ok = op == CJ_OP_SCAN ? ngraphs == 1 : op == CJ_OP_WHILE || op == CJ_OP_CUSTOM ? ngraphs == 2
                                                                                          : op == CJ_OP_COND;
    cj_body *b = r->bad || !op_ok ? NULL : cj_body_new(op, ngraphs);
    if (!b) return NULL;
    b->ncarry = get_count(r);
    b->nxs = get_count(r);
    b->nconsts = get_count(r);
    b->nys = get_count(r);
    b->length = cj_get_int(r, 0, INT32_MAX); /* a scan's row index is an int32 */
    b->reverse = cj_get_int(r, 0, 1);
    b->nres = get_count(r);
    b->jvp_rule = cj_get_int(r, 0, 1);
    for (int j = 0; j < ngraphs && !r->bad; j++)
        if (!(b->graphs[j] = read_graph(r, pool, depth + 1, err))) break;
    if (r->bad || err->status != CJ_OK || cj_body_finish(b, err) != CJ_OK) {
        cj_body_unref(b);
        return NULL;
    }
    return b;
}

/* See plan_io.h. */
cj_graph *cj_graph_read(cj_rbuf *r, const cj_loc_pool *pool, cj_error *err) { return read_graph(r, pool, 0, err); }

static cj_graph *read_graph(cj_rbuf *r, const cj_loc_pool *pool, int depth, cj_error *err) {
    cj_graph *g = cj_graph_new();
    if (!g) return cj_error_set(err, CJ_ERR_MEMORY, "cache entry: out of memory"), NULL;
    int nlocs = 0, *loc_of = read_locs(r, g, pool, &nlocs), *inputs = NULL;
    if (!loc_of) return graph_bad(g, err, "locations");
    int nbodies = get_count(r);
    if (nbodies > 0 && depth >= CJ_ENTRY_MAX_DEPTH) r->bad = true;
    for (int i = 0; i < nbodies && !r->bad; i++) {
        cj_body *b = read_body(r, pool, depth, err);
        int index = b ? cj_graph_add_body(g, b) : -1;
        cj_body_unref(b);
        if (index != i) {
            free(loc_of);
            return graph_bad(g, err, "body");
        }
    }
    if (r->bad || !read_regions(r, g)) {
        free(loc_of);
        return graph_bad(g, err, "regions");
    }
    int nnodes = get_count(r);
    for (int i = 0; i < nnodes && !r->bad; i++) {
        cj_node n;
        memset(&n, 0, sizeof n);
        n.op = (cj_op)cj_get_int(r, 0, CJ_NUM_OPS - 1);
        n.dtype = (cj_dtype)cj_get_int(r, 0, CJ_NUM_DTYPES - 1);
        n.weak = cj_get_int(r, 0, 1);
        get_shape(r, &n.shape);
        n.ninputs = get_count(r);
        free(inputs);
        inputs = malloc(sizeof(int) * ((size_t)n.ninputs + 1));
        if (!inputs) break;
        for (int a = 0; a < n.ninputs; a++) inputs[a] = (int)cj_get_int(r, 0, i - 1);
        n.inputs = inputs;
        int loc = (int)cj_get_int(r, -1, nlocs - 1);
        n.loc = loc >= 0 ? loc_of[loc] : -1;
        /* a body's nodes keep the checkpoint region numbers of the graph
         * they were traced in (a body has no region table of its own);
         * only autodiff reads them, never on a loaded graph */
        n.region = (int)cj_get_int(r, 0, INT_MAX);
        n.remat = (int)cj_get_int(r, 0, INT_MAX);
        cj_attrs *at = &n.attrs;
        at->fvalue = cj_get_f64(r);
        at->ivalue = cj_get_int(r, INT64_MIN, INT64_MAX);
        at->axis = (int)cj_get_int(r, INT_MIN, INT_MAX);
        at->axes = (uint32_t)cj_get_int(r, 0, UINT32_MAX);
        for (int d = 0; d < CJ_MAX_RANK; d++) at->perm[d] = (int)cj_get_int(r, INT_MIN, INT_MAX);
        for (int d = 0; d < CJ_MAX_RANK; d++) at->start[d] = cj_get_int(r, INT64_MIN, INT64_MAX);
        for (int d = 0; d < CJ_MAX_RANK; d++) at->step[d] = cj_get_int(r, INT64_MIN, INT64_MAX);
        at->index = (int)cj_get_int(r, INT_MIN, INT_MAX);
        bool absent;
        char *name = cj_get_str(r, &absent);
        at->name = name;
        if (r->bad) break;
        int id = cj_graph_append(g, &n, err); /* checks the node against the op, its inputs, its body */
        free(name);
        if (id != i) {
            free(inputs);
            free(loc_of);
            return graph_bad(g, err, "node");
        }
    }
    free(inputs);
    free(loc_of);
    if (r->bad || g->nnodes != nnodes) return graph_bad(g, err, "nodes");
    /* the slot counts were inferred from the PARAM/ARRAY nodes; a graph may
     * declare more (unused parameters), never fewer */
    int nparams = (int)cj_get_int(r, g->nparams, INT_MAX), narrays = (int)cj_get_int(r, g->narrays, INT_MAX);
    int noutputs = get_count(r);
    int *outs = malloc(sizeof(int) * ((size_t)noutputs + 1));
    if (!outs) return graph_bad(g, err, "out of memory");
    for (int i = 0; i < noutputs; i++) outs[i] = (int)cj_get_int(r, 0, g->nnodes - 1);
    cj_status st = r->bad ? CJ_ERR_VALUE : cj_graph_set_outputs(g, outs, noutputs, err);
    free(outs);
    if (st != CJ_OK) return graph_bad(g, err, "outputs");
    g->nparams = nparams;
    g->narrays = narrays;
    int nforce = get_count(r);
    if (nforce > 0) {
        if (!(g->force_remat = calloc((size_t)nforce, sizeof(bool)))) return graph_bad(g, err, "out of memory");
        g->nforce_remat = nforce;
        for (int i = 0; i < nforce; i++) g->force_remat[i] = cj_get_int(r, 0, 1);
    }
    g->current_region = (int)cj_get_int(r, 0, g->nregions > 0 ? g->nregions - 1 : 0);
    g->backward_start = (int)cj_get_int(r, -1, g->nnodes);
    if (r->bad) return graph_bad(g, err, "truncated");
    cj_graph_trim(g);
    return g;
}

/* ---- the plan ---------------------------------------------------------------- */

static void put_affine(cj_wbuf *w, const cj_affine *a) {
    cj_put_int(w, a->offset);
    for (int d = 0; d < CJ_MAX_RANK; d++) cj_put_int(w, a->stride[d]);
}

static void get_affine(cj_rbuf *r, cj_affine *a) {
    a->offset = cj_get_int(r, INT64_MIN, INT64_MAX);
    for (int d = 0; d < CJ_MAX_RANK; d++) a->stride[d] = cj_get_int(r, INT64_MIN, INT64_MAX);
}

static void put_kernel(cj_wbuf *w, const cj_kernel *k) {
    cj_put_int(w, k->rank);
    for (int d = 0; d < CJ_MAX_RANK; d++) cj_put_int(w, k->dims[d]);
    cj_put_int(w, k->reduced);
    cj_put_int(w, k->reduce_op);
    cj_put_int(w, k->nexprs);
    for (int e = 0; e < k->nexprs; e++) {
        const cj_expr *x = &k->exprs[e];
        cj_put_int(w, x->kind);
        cj_put_int(w, x->op);
        cj_put_int(w, x->dtype);
        cj_put_int(w, x->nargs);
        for (int a = 0; a < 3; a++) cj_put_int(w, x->args[a]);
        cj_put_int(w, x->buffer);
        put_affine(w, &x->index);
        cj_put_f64(w, x->fvalue);
        cj_put_int(w, x->ivalue);
        cj_put_int(w, x->dyn_stride);
        cj_put_int(w, x->dyn_dim);
    }
    cj_put_int(w, k->out_buffer);
    put_affine(w, &k->out_index);
    cj_put_int(w, k->root_node);
    cj_put_str(w, k->label);
    cj_put_int(w, k->gemm.on);
    cj_put_int(w, k->gemm.trans_a);
    cj_put_int(w, k->gemm.trans_b);
    cj_put_int(w, k->gemm.lda);
    cj_put_int(w, k->gemm.ldb);
    cj_put_int(w, k->gemm.ldc);
    cj_put_int(w, k->scatter.on);
    cj_put_int(w, k->scatter.drop);
    cj_put_int(w, k->scatter.index_expr);
    cj_put_int(w, k->scatter.stride);
    cj_put_int(w, k->scatter.dim);
    cj_put_int(w, k->call);
    cj_put_int(w, k->nalso);
    for (int i = 0; i < k->nalso; i++) {
        cj_put_int(w, k->also[i].expr);
        cj_put_int(w, k->also[i].buffer);
        put_affine(w, &k->also[i].index);
        cj_put_int(w, k->also[i].node);
    }
}

/* Reads kernel k; buffer and node indices are checked against the plan. */
static void get_kernel(cj_rbuf *r, cj_kernel *k, int nbuffers, int nnodes) {
    k->rank = (int)cj_get_int(r, 0, CJ_MAX_RANK);
    for (int d = 0; d < CJ_MAX_RANK; d++) k->dims[d] = cj_get_int(r, 0, INT64_MAX);
    k->reduced = (uint32_t)cj_get_int(r, 0, (1 << CJ_MAX_RANK) - 1);
    k->reduce_op = (cj_op)cj_get_int(r, 0, CJ_NUM_OPS - 1);
    k->nexprs = (int)cj_get_int(r, 1, (int64_t)(r->len - r->pos));
    if (r->bad || !(k->exprs = calloc((size_t)k->nexprs, sizeof(cj_expr)))) {
        r->bad = true;
        return;
    }
    for (int e = 0; e < k->nexprs && !r->bad; e++) {
        cj_expr *x = &k->exprs[e];
        x->kind = (cj_expr_kind)cj_get_int(r, CJ_EX_LOAD, CJ_EX_GATHER);
        x->op = (cj_op)cj_get_int(r, 0, CJ_NUM_OPS - 1);
        x->dtype = (cj_dtype)cj_get_int(r, 0, CJ_NUM_DTYPES - 1);
        x->nargs = (int)cj_get_int(r, 0, 3);
        for (int a = 0; a < 3; a++) x->args[a] = (int)cj_get_int(r, 0, e > 0 ? e - 1 : 0);
        if (x->nargs > 0 && e == 0) r->bad = true; /* arguments are earlier expressions (x * x names one twice) */
        x->buffer = (int)cj_get_int(r, cj_expr_reads(x) ? 0 : INT_MIN, nbuffers - 1);
        get_affine(r, &x->index);
        x->fvalue = cj_get_f64(r);
        x->ivalue = cj_get_int(r, INT64_MIN, INT64_MAX);
        x->dyn_stride = cj_get_int(r, 0, INT64_MAX);
        x->dyn_dim = cj_get_int(r, 0, INT64_MAX);
    }
    k->out_buffer = (int)cj_get_int(r, 0, nbuffers - 1);
    get_affine(r, &k->out_index);
    k->root_node = (int)cj_get_int(r, -1, nnodes - 1);
    bool absent;
    k->label = cj_get_str(r, &absent);
    k->gemm.on = cj_get_int(r, 0, 1);
    k->gemm.trans_a = cj_get_int(r, 0, 1);
    k->gemm.trans_b = cj_get_int(r, 0, 1);
    k->gemm.lda = cj_get_int(r, INT64_MIN, INT64_MAX);
    k->gemm.ldb = cj_get_int(r, INT64_MIN, INT64_MAX);
    k->gemm.ldc = cj_get_int(r, INT64_MIN, INT64_MAX);
    k->scatter.on = cj_get_int(r, 0, 1);
    k->scatter.drop = cj_get_int(r, 0, 1);
    k->scatter.index_expr = (int)cj_get_int(r, 0, k->nexprs - 1);
    k->scatter.stride = cj_get_int(r, 0, INT64_MAX);
    k->scatter.dim = cj_get_int(r, 0, INT64_MAX);
    k->call = (cj_call)cj_get_int(r, CJ_CALL_NONE, CJ_CALL_SVD);
    int nalso = get_count(r);
    if (r->bad || nalso == 0) return;
    if (!(k->also = calloc((size_t)nalso, sizeof(cj_store)))) {
        r->bad = true;
        return;
    }
    k->nalso = nalso;
    for (int i = 0; i < nalso; i++) {
        k->also[i].expr = (int)cj_get_int(r, 0, k->nexprs - 1);
        k->also[i].buffer = (int)cj_get_int(r, 0, nbuffers - 1);
        get_affine(r, &k->also[i].index);
        k->also[i].node = (int)cj_get_int(r, -1, nnodes - 1);
    }
}

/* See plan_io.h. */
void cj_plan_write(cj_wbuf *w, const cj_plan *p) {
    cj_put_int(w, p->nbuffers);
    for (int i = 0; i < p->nbuffers; i++) {
        const cj_buffer *b = &p->buffers[i];
        cj_put_int(w, b->kind);
        cj_put_int(w, b->slot);
        cj_put_int(w, b->dtype);
        put_shape(w, &b->shape);
        cj_put_int(w, b->nbytes);
        cj_put_int(w, b->offset);
        cj_put_int(w, b->alias_of);
        cj_put_int(w, b->node);
        cj_put_int(w, b->first_use);
        cj_put_int(w, b->last_use);
        cj_put_int(w, b->block_storage);
        cj_put_int(w, b->block_on_stack);
    }
    cj_put_int(w, p->nkernels);
    for (int i = 0; i < p->nkernels; i++) put_kernel(w, &p->kernels[i]);
    cj_put_int(w, p->ngroups);
    for (int i = 0; i < p->ngroups; i++) {
        cj_put_int(w, p->groups[i].first);
        cj_put_int(w, p->groups[i].count);
        cj_put_int(w, p->groups[i].rows);
        cj_put_int(w, p->groups[i].block);
        cj_put_int(w, p->groups[i].local_block);
        cj_put_int(w, p->groups[i].local_copies);
    }
    cj_put_int(w, p->arena_bytes);
    cj_put_int(w, p->argument_bytes);
    cj_put_int(w, p->output_bytes);
    cj_put_int(w, p->temp_bytes);
    cj_put_int(w, p->peak_bytes);
    cj_put_int(w, p->alias_bytes);
    cj_put_int(w, p->peak_kernel);
    int noutputs = p->graph ? p->graph->noutputs : 0, nparams = p->graph ? p->graph->nparams : 0;
    for (int i = 0; i < noutputs; i++) cj_put_int(w, p->output_buffer[i]);
    cj_put_int(w, p->donated != NULL);
    for (int i = 0; p->donated && i < nparams; i++) cj_put_int(w, p->donated[i]);
}

/* The slot of a buffer must name one the runtime is given. */
static bool slot_ok(const cj_graph *g, const cj_buffer *b) {
    switch (b->kind) {
    case CJ_BUF_PARAM: return b->slot >= 0 && b->slot < g->nparams;
    case CJ_BUF_ARRAY: return b->slot >= 0 && b->slot < g->narrays;
    case CJ_BUF_OUTPUT: return b->slot >= 0 && b->slot < g->noutputs;
    case CJ_BUF_TEMP: return b->offset >= 0;
    }
    return false;
}

/* See plan_io.h. */
cj_status cj_plan_read(cj_rbuf *r, const cj_graph *g, cj_plan *p, cj_error *err) {
    memset(p, 0, sizeof *p);
    p->graph = (cj_graph *)g;
    p->nbuffers = get_count(r);
    p->buffers = calloc((size_t)p->nbuffers + 1, sizeof(cj_buffer));
    p->buffers_cap = p->nbuffers;
    if (!p->buffers) r->bad = true;
    for (int i = 0; i < p->nbuffers && !r->bad; i++) {
        cj_buffer *b = &p->buffers[i];
        b->kind = (cj_buf_kind)cj_get_int(r, CJ_BUF_PARAM, CJ_BUF_TEMP);
        b->slot = (int)cj_get_int(r, INT_MIN, INT_MAX);
        b->dtype = (cj_dtype)cj_get_int(r, 0, CJ_NUM_DTYPES - 1);
        get_shape(r, &b->shape);
        b->nbytes = cj_get_int(r, 0, INT64_MAX);
        b->offset = cj_get_int(r, INT64_MIN, INT64_MAX);
        b->alias_of = (int)cj_get_int(r, -1, p->nbuffers - 1);
        b->node = (int)cj_get_int(r, -1, g->nnodes - 1);
        b->first_use = (int)cj_get_int(r, INT_MIN, INT_MAX);
        b->last_use = (int)cj_get_int(r, INT_MIN, INT_MAX);
        b->block_storage = cj_get_int(r, 0, b->nbytes);
        b->block_on_stack = cj_get_int(r, 0, b->block_storage > 0);
        if (!r->bad && !slot_ok(g, b)) r->bad = true;
    }
    int nkernels = get_count(r);
    p->kernels = r->bad ? NULL : calloc((size_t)nkernels + 1, sizeof(cj_kernel));
    p->kernels_cap = nkernels;
    if (!p->kernels) r->bad = true;
    for (int i = 0; i < nkernels && !r->bad; i++) {
        p->nkernels = i + 1; /* so that cj_plan_free frees what was read */
        get_kernel(r, &p->kernels[i], p->nbuffers, g->nnodes);
    }
    int ngroups = get_count(r);
    p->groups = r->bad ? NULL : calloc((size_t)p->nkernels + 1, sizeof(cj_group));
    if (!p->groups || ngroups > p->nkernels) r->bad = true;
    for (int i = 0; i < ngroups && !r->bad; i++) {
        cj_group *grp = &p->groups[i];
        grp->first = (int)cj_get_int(r, 0, p->nkernels - 1);
        grp->count = (int)cj_get_int(r, 1, p->nkernels - grp->first);
        grp->rows = cj_get_int(r, 0, INT64_MAX);
        grp->block = cj_get_int(r, 0, INT64_MAX);
        grp->local_block = cj_get_int(r, 0, grp->rows);
        grp->local_copies = (int)cj_get_int(r, 0, INT_MAX);
        p->ngroups = i + 1;
    }
    p->arena_bytes = cj_get_int(r, 0, INT64_MAX);
    p->argument_bytes = cj_get_int(r, 0, INT64_MAX);
    p->output_bytes = cj_get_int(r, 0, INT64_MAX);
    p->temp_bytes = cj_get_int(r, 0, INT64_MAX);
    p->peak_bytes = cj_get_int(r, 0, INT64_MAX);
    p->alias_bytes = cj_get_int(r, 0, INT64_MAX);
    p->peak_kernel = (int)cj_get_int(r, INT_MIN, INT_MAX);
    p->output_buffer = r->bad ? NULL : calloc((size_t)g->noutputs + 1, sizeof(int));
    if (!p->output_buffer) r->bad = true;
    for (int i = 0; i < g->noutputs && !r->bad; i++) p->output_buffer[i] = (int)cj_get_int(r, 0, p->nbuffers - 1);
    if (cj_get_int(r, 0, 1)) {
        p->donated = r->bad ? NULL : calloc((size_t)g->nparams + 1, sizeof(bool));
        if (!p->donated) r->bad = true;
        for (int i = 0; i < g->nparams && !r->bad; i++) p->donated[i] = cj_get_int(r, 0, 1);
    }
    /* every temporary must fit in the arena, or in the buffer it reuses */
    for (int i = 0; i < p->nbuffers && !r->bad; i++) {
        const cj_buffer *b = &p->buffers[i];
        if (b->kind != CJ_BUF_TEMP) continue;
        int64_t room = b->alias_of >= 0 ? p->buffers[b->alias_of].nbytes : p->arena_bytes;
        if (b->offset > room || cj_buffer_bytes(b) > room - b->offset) r->bad = true;
        /* block storage: its group's blocks, one per thread that may run it */
        if (b->block_storage > 0 && !r->bad) {
            const cj_group *grp = b->first_use >= 0 && b->first_use < p->ngroups ? &p->groups[b->first_use] : NULL;
            if (!grp || grp->local_block < 1 || grp->local_copies < 1 || grp->rows < 1 ||
                b->block_storage != grp->local_copies * cj_block_stride(p, grp, b) ||
                (b->block_on_stack && cj_block_stride(p, grp, b) > CJ_BLOCK_STACK_MAX))
                r->bad = true;
        }
    }
    /* a group's blocks on the stack fit its driver's frame (drivers.c sizes
     * its table of them by CJ_BLOCK_STACK_GROUP); out of memory: unread */
    int64_t *framed = r->bad ? NULL : calloc((size_t)p->ngroups + 1, sizeof(int64_t));
    if (!framed) r->bad = true;
    for (int i = 0; i < p->nbuffers && !r->bad; i++) {
        const cj_buffer *b = &p->buffers[i];
        if (!b->block_on_stack) continue;
        if (b->kind != CJ_BUF_TEMP || b->first_use < 0 || b->first_use >= p->ngroups) {
            r->bad = true;
            break;
        }
        framed[b->first_use] += cj_block_stride(p, &p->groups[b->first_use], b);
        if (framed[b->first_use] > CJ_BLOCK_STACK_GROUP) r->bad = true;
    }
    free(framed);
    if (r->bad) {
        cj_plan_free(p);
        return cj_error_set(err, CJ_ERR_VALUE, "cache entry: bad plan");
    }
    return CJ_OK;
}
