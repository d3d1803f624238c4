/* autodiff.c - reverse mode: one VJP rule per op (a table indexed by op that
 * also says which forward values each rule reads), building ordinary nodes.
 *
 * The backward pass is appended to the same graph as the forward one, so
 * a gradient is simplified, fused and planned like any other computation,
 * and the gradient of a gradient needs nothing more: the backward nodes
 * have VJP rules too.
 *
 * Nodes older than `first` are constants for this differentiation: that is
 * how grad inside grad (or inside jit) differentiates only the function it
 * was given.  Only float values carry cotangents. */
#include <stdlib.h>
#include <string.h>

#include "autodiff.h"
#include "regions.h"

typedef struct {
    cj_graph *g;
    cj_error *err;
    int *ct;   /* cotangent node of each node, -1: none (zero) */
    int *copy; /* recomputed copy of each forward node, -1: none yet */
    int *stack; /* fwd's nodes waiting for their inputs (room for every forward node) */
    int *next_input; /* per stack entry: the first input not yet looked at */
    bool *escapes; /* read outside its checkpoint region: the region's output,
                    * which is the next region's input and so is kept */
    const char **tag; /* the checkpoint_name a value was given (by a NAME node reading it) */
    int loc;   /* location of the node whose rule is running */
    int gen;   /* the copy generation new copies get (cj_node.remat) */
    int last;  /* nodes from here on were appended by this vjp */
    /* a chain schedule (binomial checkpointing), see chain_* below */
    const cj_chain_schedule *chain;
    int *layer;      /* per forward node: its layer of the chain, 0: outside */
    bool *held;      /* per position: its value is held (kept or recomputed) */
    int cur;         /* the layer whose backward pass is being built, 0: none yet */
    int next_store;  /* the first entry of chain->store_* not done yet */
} vjp_ctx;

static bool is_float(cj_dtype dt) { return dt == CJ_FLOAT32 || dt == CJ_FLOAT64; }

static cj_node node(const vjp_ctx *c, int id) { return c->g->nodes[id]; }

/* small builders; each returns -1 with c->err set on failure */
static int cst(vjp_ctx *c, double v) {
    cj_shape scalar = {0, {0}};
    return cj_build_constant(c->g, v, (int64_t)v, CJ_FLOAT64, true, &scalar, c->loc, c->err);
}
static int bin(vjp_ctx *c, cj_op op, int x, int y) {
    return x < 0 || y < 0 ? -1 : cj_build_binary(c->g, op, x, y, c->loc, c->err);
}
static int un(vjp_ctx *c, cj_op op, int x) { return x < 0 ? -1 : cj_build_unary(c->g, op, x, c->loc, c->err); }
static int cast(vjp_ctx *c, int x, cj_dtype dt) { return x < 0 ? -1 : cj_build_cast(c->g, x, dt, c->loc, c->err); }
static int reshape(vjp_ctx *c, int x, const cj_shape *s) {
    return x < 0 ? -1 : cj_build_reshape(c->g, x, s, c->loc, c->err);
}
static int broadcast(vjp_ctx *c, int x, const cj_shape *s) {
    return x < 0 ? -1 : cj_build_broadcast(c->g, x, s, c->loc, c->err);
}
static int zeros(vjp_ctx *c, const cj_shape *s, cj_dtype dt) {
    return cj_build_constant(c->g, 0.0, 0, dt, false, s, c->loc, c->err);
}

/* ---- checkpointing: saved or recomputed ----------------------------------
 * Policy: a value computed inside a checkpoint region is kept for the
 * backward pass only if the region's policy says so (or it is forced to be
 * recomputed by a memory budget).  Mechanism: a value that is not kept is
 * copied into the backward pass, recursively from kept values, when a rule
 * first reads it; the copy is marked `remat` so that CSE never folds it back
 * into the forward value, and it lands next to its first use. */

/* Was value id named, by a NAME node or by being what a NAME node tags, with
 * one of the region's names? */
static bool name_listed(const vjp_ctx *c, const cj_region *r, int id) {
    const cj_node *n = &c->g->nodes[id];
    const char *names[2] = {n->op == CJ_OP_NAME ? n->attrs.name : NULL, c->tag[id]};
    for (int k = 0; k < 2; k++)
        for (int i = 0; names[k] && i < r->nnames; i++)
            if (strcmp(r->names[i], names[k]) == 0) return true;
    return false;
}

static bool chain_kept(const vjp_ctx *c, int id);

static bool saved(const vjp_ctx *c, int id) {
    const cj_node *n = &c->g->nodes[id];
    if (cj_op_kind(n->op) == CJ_OPKIND_SOURCE || n->remat) return true;
    if (c->layer && c->layer[id] > 0) return chain_kept(c, id);
    if (id < c->g->nforce_remat && c->g->force_remat[id]) return false;
    if (n->region <= 0 || n->region >= c->g->nregions || c->escapes[id]) return true;
    const cj_region *r = &c->g->regions[n->region];
    switch (r->policy) {
    case CJ_SAVE_NOTHING: return false;
    case CJ_SAVE_EVERYTHING: return true;
    case CJ_SAVE_DOTS: return n->op == CJ_OP_MATMUL;
    case CJ_SAVE_ONLY_NAMES: return name_listed(c, r, id);
    case CJ_SAVE_ALL_EXCEPT_NAMES: return !name_listed(c, r, id);
    }
    return true;
}

/* Is region a inside region b (or b itself)? */
static bool region_within(const cj_graph *g, int a, int b) {
    for (int guard = 0; a > 0 && guard < g->nregions; guard++, a = g->regions[a].parent)
        if (a == b) return true;
    return a == b;
}

/* Marks the values of checkpoint regions that are read outside them. */
static void find_escapes(vjp_ctx *c, int last) { /* and the names values were given */
    const cj_graph *g = c->g;
    for (int j = 0; j < last; j++) {
        const cj_node *n = &g->nodes[j];
        for (int a = 0; a < n->ninputs; a++) {
            int i = n->inputs[a];
            if (g->nodes[i].region > 0 && !region_within(g, n->region, g->nodes[i].region))
                c->escapes[i] = true;
        }
        if (n->op == CJ_OP_NAME && n->attrs.name && n->attrs.name[0]) c->tag[n->inputs[0]] = n->attrs.name;
    }
}

/* The forward value of node id as the backward pass may read it: the
 * node itself when it is saved, else its recomputed copy, made now (after
 * the copies of its own unsaved inputs) if it does not exist yet.  A chain
 * of recomputed values may be as long as the graph, so the walk keeps its
 * own stack (c->stack) of nodes waiting for their inputs' copies. */
static int fwd(vjp_ctx *c, int id) {
    if (saved(c, id)) return id;
    if (c->copy[id] >= 0) return c->copy[id];
    int depth = 0;
    c->stack[depth] = id; /* a node is on the stack at most once: room for all */
    c->next_input[depth++] = 0;
    while (depth > 0) {
        int top = c->stack[depth - 1];
        const cj_node *t = &c->g->nodes[top];
        int waiting = -1, *a = &c->next_input[depth - 1]; /* inputs before *a have their copies */
        for (; *a < t->ninputs && waiting < 0; ++*a) {
            int x = t->inputs[*a];
            if (!saved(c, x) && c->copy[x] < 0) waiting = x;
        }
        if (waiting >= 0) {
            c->stack[depth] = waiting;
            c->next_input[depth++] = 0;
            continue;
        }
        cj_node n = *t; /* appending may move the node array */
        int small[CJ_MAX_INPUTS > 3 ? CJ_MAX_INPUTS : 3];
        int *ins = n.ninputs <= (int)(sizeof small / sizeof small[0]) ? small : malloc(sizeof(int) * (size_t)n.ninputs);
        if (!ins) return cj_error_set(c->err, CJ_ERR_MEMORY, "autodiff: out of memory"), -1;
        for (int a = 0; a < n.ninputs; a++) ins[a] = saved(c, n.inputs[a]) ? n.inputs[a] : c->copy[n.inputs[a]];
        n.inputs = ins;
        n.remat = c->gen;
        n.region = 0;
        c->copy[top] = cj_graph_append(c->g, &n, c->err);
        if (ins != small) free(ins);
        if (c->copy[top] < 0) return -1;
        depth--;
    }
    return c->copy[id];
}

/* ---- binomial checkpointing: following a chain schedule --------------------
 * The schedule (autodiff.h) says which positions of the chain the forward
 * pass keeps and which ones the backward pass recomputes, and when; the
 * mechanism is fwd()'s: a value is copied, recursively from held values,
 * when something asks for it.  The schedule only decides what copy[] holds:
 * between two layers' backward passes, the copies of the held positions and
 * nothing else.  So a copy feeds one stretch of the backward pass and dies
 * after it (the plan frees a value after its last reader), a value may be
 * recomputed several times, and each recomputation is a generation of its
 * own, which CSE keeps apart. */

static bool chain_kept(const vjp_ctx *c, int id) {
    int i = c->layer[id];
    return c->chain->bound[i] == id && c->chain->keep[i];
}

/* The highest held position below i (position 0 always is). */
static int chain_base(const vjp_ctx *c, int i) {
    int p = i - 1;
    while (p > 0 && !c->held[p]) p--;
    return p;
}

/* Forgets the copies of the chain's values above position `base`, but for
 * the held positions. */
static void chain_forget(vjp_ctx *c, int base) {
    const cj_chain_schedule *s = c->chain;
    for (int id = s->bound[base] + 1; id <= s->bound[s->nlayers]; id++) {
        int i = c->layer[id];
        if (i > 0 && !(c->held[i] && s->bound[i] == id)) c->copy[id] = -1;
    }
}

/* Called when the rule loop reaches the first node of layer i: lets go of
 * the positions above i, recomputes the positions the schedule stores
 * before layer i (each from the highest held position below it), and opens
 * the generation of the layer's own copies, made from position i-1. */
static bool chain_enter(vjp_ctx *c, int i) {
    const cj_chain_schedule *s = c->chain;
    for (int p = i + 1; p <= s->nlayers; p++)
        if (c->held[p]) {
            c->held[p] = false;
            if (!s->keep[p]) c->copy[s->bound[p]] = -1;
        }
    /* position i recomputed by layer i+1's own copies (no store asked) */
    if (!c->held[i] && c->copy[s->bound[i]] >= 0) c->held[i] = true;
    chain_forget(c, chain_base(c, i));
    while (c->next_store < s->nstores && s->store_before[c->next_store] > i) c->next_store++;
    for (; c->next_store < s->nstores && s->store_before[c->next_store] == i; c->next_store++) {
        int m = s->store_at[c->next_store];
        if (c->held[m]) continue;
        int base = chain_base(c, m);
        c->gen++;
        if (fwd(c, s->bound[m]) < 0) return false;
        c->held[m] = true;
        chain_forget(c, base); /* the values on the way from base to m */
    }
    c->gen++;
    c->cur = i;
    return true;
}

/* Marks the weights among nodes 0..n-1: sources, and identities of them
 * (grad's NAME nodes); a chain never recomputes them. */
static void mark_weights(const cj_graph *g, int n, bool *weight) {
    for (int i = 0; i < n; i++) {
        const cj_node *nd = &g->nodes[i];
        weight[i] = cj_op_kind(nd->op) == CJ_OPKIND_SOURCE || (nd->op == CJ_OP_NAME && weight[nd->inputs[0]]);
    }
}

/* Checks a schedule against the graph and sets up c->layer and c->held. */
static bool chain_setup(vjp_ctx *c, const cj_chain_schedule *s, int first, int last) {
    int n = s->nlayers;
    bool ok = n >= 1 && s->bound[0] >= 0 && s->bound[1] >= first && s->bound[n] < last && s->keep[0] && s->keep[n];
    for (int i = 1; ok && i <= n; i++) ok = s->bound[i - 1] < s->bound[i];
    for (int k = 0; ok && k < s->nstores; k++)
        ok = s->store_before[k] >= 1 && s->store_before[k] <= n && s->store_at[k] >= 1 &&
             s->store_at[k] < s->store_before[k] && (k == 0 || s->store_before[k] <= s->store_before[k - 1]);
    if (!ok) {
        cj_error_set(c->err, CJ_ERR_VALUE, "autodiff: the chain schedule does not fit this differentiation");
        return false;
    }
    c->layer = calloc((size_t)last + 1, sizeof(int));
    c->held = calloc((size_t)n + 1, sizeof(bool));
    bool *weight = calloc((size_t)last + 1, sizeof(bool));
    if (!c->layer || !c->held || !weight) {
        free(weight);
        cj_error_set(c->err, CJ_ERR_MEMORY, "autodiff: out of memory");
        return false;
    }
    mark_weights(c->g, s->bound[n] + 1, weight);
    for (int i = 1; i <= n; i++)
        for (int id = s->bound[i - 1] + 1; id <= s->bound[i]; id++)
            if (!weight[id] && id >= first) c->layer[id] = i;
    free(weight);
    for (int i = 0; i <= n; i++) c->held[i] = s->keep[i];
    c->chain = s;
    return true;
}

/* See autodiff.h. */
int cj_autodiff_chain(const cj_graph *g, int *out) {
    int end = g->backward_start;
    if (end < 0) return 0;
    int *last_read = malloc(sizeof(int) * ((size_t)end + 1));
    int *opened = calloc((size_t)end + 1, sizeof(int));  /* values first live at p */
    int *closed = calloc((size_t)end + 1, sizeof(int));  /* values last live at p */
    bool *weight = calloc((size_t)end + 1, sizeof(bool));
    int *res = malloc(sizeof(int) * ((size_t)g->nnodes + 1));
    bool *read_back = calloc((size_t)end + 1, sizeof(bool));
    int n = -1;
    if (!last_read || !opened || !closed || !weight || !res || !read_back) goto done;
    int nres = cj_autodiff_residuals(g, res);
    if (nres < 0) goto done;
    for (int k = 0; k < nres; k++) read_back[res[k]] = true;
    mark_weights(g, end, weight);
    for (int i = 0; i < end; i++) {
        const cj_node *nd = &g->nodes[i];
        last_read[i] = i;
        for (int a = 0; a < nd->ninputs; a++) last_read[nd->inputs[a]] = i;
    }
    for (int i = 0; i < end; i++)
        if (!weight[i] && last_read[i] > i) opened[i]++, closed[last_read[i] - 1]++;
    /* a value v is live across p when v <= p < last_read[v] */
    n = 0;
    for (int p = 0, live = 0; p < end; p++) {
        live += opened[p];
        if (live == 1 && opened[p] == 1 && read_back[p]) out[n++] = p;
        live -= closed[p];
    }
    /* the chain may start at an argument: the one input of the first
     * stretch shaped like its end and read by nothing after it (an MLP's
     * batch), so that the chain's first layer is recomputed too */
    if (n > 0) {
        int start = -1, candidates = 0;
        const cj_node *head = &g->nodes[out[0]];
        for (int i = 0; i < out[0]; i++)
            if (weight[i] && last_read[i] > i && last_read[i] <= out[0] && g->nodes[i].dtype == head->dtype &&
                cj_shape_equal(&g->nodes[i].shape, &head->shape))
                start = i, candidates++;
        if (candidates == 1) {
            memmove(out + 1, out, sizeof(int) * (size_t)n);
            out[0] = start;
            n++;
        }
    }
done:
    free(last_read);
    free(opened);
    free(closed);
    free(weight);
    free(res);
    free(read_back);
    return n;
}

/* adds `contribution` to the cotangent of node `to` */
static bool accumulate(vjp_ctx *c, int to, int contribution) {
    if (contribution < 0) return false;
    cj_node n = node(c, to);
    cj_shape have = node(c, contribution).shape;
    if (!cj_shape_equal(&have, &n.shape))
        contribution = broadcast(c, contribution, &n.shape);
    if (contribution >= 0 && node(c, contribution).dtype != n.dtype) contribution = cast(c, contribution, n.dtype);
    if (contribution < 0) return false;
    c->ct[to] = c->ct[to] < 0 ? contribution : bin(c, CJ_OP_ADD, c->ct[to], contribution);
    return c->ct[to] >= 0;
}

/* Composite builders from graph_grad.c with this rule's graph, location
 * and error (-1 passes through). */
static int expand_reduced(vjp_ctx *c, int v, const cj_shape *in, uint32_t axes) {
    return cj_build_expand_reduced(c->g, v, in, axes, c->loc, c->err);
}
static int unbroadcast(vjp_ctx *c, int ct, const cj_shape *in) { return cj_build_unbroadcast(c->g, ct, in, c->loc, c->err); }
static int swap_last(vjp_ctx *c, int x) { return x < 0 ? -1 : cj_build_swap_last(c->g, x, c->loc, c->err); }

/* ---- the rules ------------------------------------------------------------
 * One function per op, found in `rules` by op together with the forward
 * values it reads: X (the first input), Y (the second), OUT (the op's own
 * value).  Only those are fetched (fwd: kept, or recomputed by a
 * checkpoint), so a value no rule reads is neither kept for the backward
 * pass nor recomputed for it.  A rule that reads a value it did not
 * declare finds -1 there and fails (tests/c/test_ops.c runs every rule). */

typedef struct {
    cj_node n;   /* the node whose cotangent is propagated */
    int id;      /* its id */
    int g;       /* its cotangent */
    int x, y;    /* its first and second inputs, -1: none */
    int X, Y, OUT; /* forward values the rule declared it reads, else -1 */
    int first;   /* nodes before this are constants */
} rule_args;

/* Does input i take part: a float value recorded after `first`? */
static bool wants(const vjp_ctx *c, const rule_args *r, int i) {
    return r->n.inputs[i] >= r->first && is_float(node(c, r->n.inputs[i]).dtype);
}

/* The cotangent contribution v to input i, if input i takes part. */
static bool give(vjp_ctx *c, const rule_args *r, int i, int v) {
    return !wants(c, r, i) || accumulate(c, r->n.inputs[i], v);
}

#define RULE(op) static bool vjp_##op(vjp_ctx *c, const rule_args *r)

RULE(pass) { return give(c, r, 0, r->g); } /* NAME: an identity */
RULE(cast) { return !wants(c, r, 0) || give(c, r, 0, cast(c, r->g, node(c, r->x).dtype)); }
RULE(unary) { /* an elementwise unary op: g times its record's derivative (ops_unary.def) */
    return !wants(c, r, 0) ||
           give(c, r, 0, cj_unary_derivative(c->g, r->n.op, r->g, r->X, r->OUT, c->loc, c->err));
}

RULE(add) { return give(c, r, 0, r->g) && give(c, r, 1, r->g); }
RULE(sub) { return give(c, r, 0, r->g) && (!wants(c, r, 1) || give(c, r, 1, un(c, CJ_OP_NEG, r->g))); }
RULE(mul) { /* and fma, x * y + z: z takes g as it is */
    return (!wants(c, r, 0) || give(c, r, 0, bin(c, CJ_OP_MUL, r->g, r->Y))) &&
           (!wants(c, r, 1) || give(c, r, 1, bin(c, CJ_OP_MUL, r->g, r->X))) &&
           (r->n.op != CJ_OP_FMA || give(c, r, 2, r->g));
}
RULE(div) { /* d/dy = -g * out / y */
    return (!wants(c, r, 0) || give(c, r, 0, bin(c, CJ_OP_DIV, r->g, r->Y))) &&
           (!wants(c, r, 1) ||
            give(c, r, 1, un(c, CJ_OP_NEG, bin(c, CJ_OP_DIV, bin(c, CJ_OP_MUL, r->g, r->OUT), r->Y))));
}
/* See autodiff.h. */
int cj_pow_dx(cj_graph *g, int X, int Y, int loc, cj_error *err) {
    vjp_ctx ctx = {.g = g, .err = err, .loc = loc}, *c = &ctx;
    int at0 = bin(c, CJ_OP_LOGICAL_AND, bin(c, CJ_OP_EQ, X, cst(c, 0)), bin(c, CJ_OP_EQ, Y, cst(c, 0)));
    int xs = at0 < 0 ? -1 : cj_build_select(g, at0, cst(c, 1), X, loc, err);
    int dx = bin(c, CJ_OP_MUL, Y, bin(c, CJ_OP_POW, xs, bin(c, CJ_OP_SUB, Y, cst(c, 1))));
    return dx < 0 ? -1 : cj_build_select(g, at0, cst(c, 0), dx, loc, err);
}

RULE(pow) { /* d/dx: cj_pow_dx; d/dy = g out log(X), taken as 0 where X == 0 (nan where X < 0, as JAX) */
    int X = r->X, Y = r->Y;
    bool ok = true;
    if (wants(c, r, 0)) ok = give(c, r, 0, bin(c, CJ_OP_MUL, r->g, cj_pow_dx(c->g, X, Y, c->loc, c->err)));
    if (ok && wants(c, r, 1)) {
        int zero = bin(c, CJ_OP_EQ, X, cst(c, 0));
        int logx = zero < 0 ? -1 : cj_build_select(c->g, zero, cst(c, 0), un(c, CJ_OP_LOG, X), c->loc, c->err);
        ok = give(c, r, 1, bin(c, CJ_OP_MUL, bin(c, CJ_OP_MUL, r->g, r->OUT), logx));
    }
    return ok;
}
RULE(maxmin) { /* the larger (smaller) operand takes the gradient; ties share it equally, as JAX */
    int X = r->X, Y = r->Y;
    cj_op wins = r->n.op == CJ_OP_MAXIMUM ? CJ_OP_GT : CJ_OP_LT;
    int tie = bin(c, CJ_OP_MUL, cast(c, bin(c, CJ_OP_EQ, X, Y), r->n.dtype), cst(c, 0.5));
    bool ok = true;
    if (wants(c, r, 0))
        ok = give(c, r, 0, bin(c, CJ_OP_MUL, r->g, bin(c, CJ_OP_ADD, cast(c, bin(c, wins, X, Y), r->n.dtype), tie)));
    if (ok && wants(c, r, 1))
        ok = give(c, r, 1, bin(c, CJ_OP_MUL, r->g, bin(c, CJ_OP_ADD, cast(c, bin(c, wins, Y, X), r->n.dtype), tie)));
    return ok;
}
RULE(select) { /* X is the condition */
    int z = zeros(c, &r->n.shape, r->n.dtype);
    bool ok = true;
    if (wants(c, r, 1)) ok = give(c, r, 1, z < 0 ? -1 : cj_build_select(c->g, r->X, r->g, z, c->loc, c->err));
    if (ok && wants(c, r, 2)) ok = give(c, r, 2, z < 0 ? -1 : cj_build_select(c->g, r->X, z, r->g, c->loc, c->err));
    return ok;
}

RULE(broadcast) {
    cj_shape in = node(c, r->x).shape;
    return !wants(c, r, 0) || give(c, r, 0, unbroadcast(c, r->g, &in));
}
RULE(reshape) {
    cj_shape in = node(c, r->x).shape;
    return !wants(c, r, 0) || give(c, r, 0, reshape(c, r->g, &in));
}
RULE(transpose) {
    int inv[CJ_MAX_RANK];
    for (int d = 0; d < r->n.shape.rank; d++) inv[r->n.attrs.perm[d]] = d;
    return !wants(c, r, 0) || give(c, r, 0, cj_build_transpose(c->g, r->g, inv, c->loc, c->err));
}
RULE(slice) {
    if (!wants(c, r, 0)) return true;
    const cj_node *n = &r->n;
    cj_shape in = node(c, r->x).shape;
    int v = r->g;
    for (int k = 0; k < in.rank && v >= 0; k++) {
        bool whole = n->attrs.start[k] == 0 && n->attrs.step[k] == 1 && n->shape.dims[k] == in.dims[k];
        if (!whole) v = cj_build_unslice_dim(c->g, v, k, in.dims[k], n->attrs.start[k], n->attrs.step[k], c->loc, c->err);
    }
    return give(c, r, 0, v);
}
RULE(concatenate) {
    const cj_node *n = &r->n;
    int axis = n->attrs.axis;
    int64_t pos = 0;
    for (int i = 0; i < n->ninputs; i++) {
        cj_shape in = node(c, n->inputs[i]).shape;
        if (wants(c, r, i)) {
            int64_t st[CJ_MAX_RANK], sp[CJ_MAX_RANK], sd[CJ_MAX_RANK];
            for (int d = 0; d < in.rank; d++) st[d] = 0, sp[d] = in.dims[d], sd[d] = 1;
            st[axis] = pos;
            sp[axis] = pos + in.dims[axis];
            if (!give(c, r, i, cj_build_slice(c->g, r->g, st, sp, sd, c->loc, c->err))) return false;
        }
        pos += in.dims[axis];
    }
    return true;
}

RULE(reduce_sum) {
    cj_shape in = node(c, r->x).shape;
    return !wants(c, r, 0) || give(c, r, 0, expand_reduced(c, r->g, &in, r->n.attrs.axes));
}
RULE(reduce_prod) {
    /* g times the product of the other elements, exact at zeros too (as JAX).
     * With nz = X where X != 0 and 1 where X == 0, p = prod(nz) and, per
     * element, `others` = the number of zeros among the other elements of its
     * reduced group, the others' product is
     *   p / nz                      when others == 0,
     *   p / nz * (the other zero)   when others == 1 (a value of 0),
     *   0                           when others >= 2.
     * The middle case multiplies by that zero element itself (s_other, the sum
     * of the group's zeros less this element's own), so that the derivative
     * of this gradient with respect to it is p / nz, not 0: the Hessian at an
     * exact zero is then the symmetric one (x = [0, a, b]: d2/dx0 dx1 = b both
     * ways).  Away from zeros this is g out / X. */
    if (!wants(c, r, 0)) return true;
    int X = r->X;
    cj_shape in = node(c, r->x).shape;
    uint32_t axes = r->n.attrs.axes;
    int is0 = bin(c, CJ_OP_EQ, X, cst(c, 0));
    int nz = is0 < 0 ? -1 : cj_build_select(c->g, is0, cst(c, 1), X, c->loc, c->err);
    int p = nz < 0 ? -1 : cj_build_reduce(c->g, CJ_OP_REDUCE_PROD, nz, axes, c->loc, c->err);
    int z = cast(c, is0, r->n.dtype);
    int count = z < 0 ? -1 : cj_build_reduce(c->g, CJ_OP_REDUCE_SUM, z, axes, c->loc, c->err);
    int others = bin(c, CJ_OP_SUB, expand_reduced(c, count, &in, axes), z);
    int zx = bin(c, CJ_OP_MUL, X, z);      /* the zero elements, 0 elsewhere */
    int zsum = zx < 0 ? -1 : cj_build_reduce(c->g, CJ_OP_REDUCE_SUM, zx, axes, c->loc, c->err);
    int s_other = bin(c, CJ_OP_SUB, expand_reduced(c, zsum, &in, axes), zx);
    int one0 = bin(c, CJ_OP_EQ, others, cst(c, 1));
    int none0 = bin(c, CJ_OP_EQ, others, cst(c, 0));
    int f1 = one0 < 0 || s_other < 0 ? -1 : cj_build_select(c->g, one0, s_other, cst(c, 0), c->loc, c->err);
    int factor = none0 < 0 || f1 < 0 ? -1 : cj_build_select(c->g, none0, cst(c, 1), f1, c->loc, c->err);
    int rest = bin(c, CJ_OP_DIV, expand_reduced(c, p, &in, axes), nz);
    return give(c, r, 0, bin(c, CJ_OP_MUL, expand_reduced(c, r->g, &in, axes), bin(c, CJ_OP_MUL, rest, factor)));
}
RULE(reduce_maxmin) { /* shared equally by the elements equal to the result */
    if (!wants(c, r, 0)) return true;
    cj_shape in = node(c, r->x).shape;
    uint32_t axes = r->n.attrs.axes;
    int ob = r->OUT < 0 ? -1 : expand_reduced(c, r->OUT, &in, axes);
    int hit = cast(c, bin(c, CJ_OP_EQ, r->X, ob), r->n.dtype);
    int count = hit < 0 ? -1 : cj_build_reduce(c->g, CJ_OP_REDUCE_SUM, hit, axes, c->loc, c->err);
    int share = bin(c, CJ_OP_DIV, expand_reduced(c, r->g, &in, axes), expand_reduced(c, count, &in, axes));
    return give(c, r, 0, bin(c, CJ_OP_MUL, share, hit));
}
RULE(matmul) { /* dA = g B^T, dB = A^T g */
    return (!wants(c, r, 0) || give(c, r, 0, r->Y < 0 ? -1 : cj_build_matmul(c->g, r->g, swap_last(c, r->Y), c->loc, c->err))) &&
           (!wants(c, r, 1) || give(c, r, 1, r->X < 0 ? -1 : cj_build_matmul(c->g, swap_last(c, r->X), r->g, c->loc, c->err)));
}
#undef RULE

enum { READS_X = CJ_VJP_READS_X, READS_Y = CJ_VJP_READS_Y, READS_OUT = CJ_VJP_READS_OUT };

/* Control flow (regions_vjp.c).  A result hands its region a token
 * cotangent, so that the region's rule runs once, after every result's:
 * the region's rule gathers the results' own cotangents. */
static bool vjp_result(vjp_ctx *c, const rule_args *r) { return !wants(c, r, 0) || give(c, r, 0, cst(c, 0)); }
static bool vjp_region(vjp_ctx *c, const rule_args *r) {
    int id = r->id, nres = 0;
    const cj_body *b = id >= 0 ? cj_region_body(c->g, &c->g->nodes[id]) : NULL;
    if (!b) {
        cj_error_set(c->err, CJ_ERR_INTERNAL, "autodiff: region node without a body");
        return false;
    }
    nres = b->nresults;
    int *res_ct = malloc(sizeof(int) * ((size_t)nres + 1)), *in_ct = malloc(sizeof(int) * ((size_t)r->n.ninputs + 1));
    bool ok = res_ct && in_ct;
    for (int k = 0; ok && k < nres; k++) res_ct[k] = -1;
    for (int i = id + 1; ok && i < c->last; i++) {
        const cj_node *n = &c->g->nodes[i];
        if (n->op != CJ_OP_RESULT || n->inputs[0] != id || c->ct[i] < 0) continue;
        int k = n->attrs.index;
        res_ct[k] = res_ct[k] < 0 ? c->ct[i] : bin(c, CJ_OP_ADD, res_ct[k], c->ct[i]);
        ok = res_ct[k] >= 0;
    }
    if (ok) ok = cj_region_vjp(c->g, id, res_ct, in_ct, cj_autodiff_vjp, c->err) == CJ_OK;
    int nin = c->g->nodes[id].ninputs;
    for (int a = 0; ok && a < nin; a++)
        if (in_ct[a] >= 0) ok = give(c, r, a, in_ct[a]);
    if (!res_ct || !in_ct) cj_error_set(c->err, CJ_ERR_MEMORY, "autodiff: out of memory");
    free(res_ct);
    free(in_ct);
    return ok;
}

static bool vjp_gather(vjp_ctx *c, const rule_args *r) { /* the cotangent summed back where each element came from */
    if (!wants(c, r, 0)) return true;
    const cj_node x = node(c, r->x);
    return give(c, r, 0, cj_build_scatter(c->g, CJ_OP_SCATTER_ADD, r->Y, r->g, r->n.attrs.axis, &x.shape, false, c->loc,
                                          c->err));
}
static bool vjp_scatter(vjp_ctx *c, const rule_args *r) { /* each update's cotangent read back at its index */
    if (!wants(c, r, 1)) return true;
    int ct = cj_build_gather(c->g, r->g, r->X, r->n.attrs.axis, c->loc, c->err);
    if (r->n.op != CJ_OP_SCATTER_ADD || r->n.attrs.index == 1) /* scaled by d out / d update */
        ct = bin(c, CJ_OP_MUL, ct, cj_build_scatter_partials(c->g, &r->n, r->X, r->Y, r->OUT, c->loc, c->err));
    return give(c, r, 1, ct);
}

/* The linear algebra rules' pieces are builders (graph_linalg.c). */
static bool vjp_triangular_solve(vjp_ctx *c, const rule_args *r) {
    int ga = -1, gb = -1;
    if (cj_build_triangular_solve_vjp(c->g, r->X, r->OUT, r->g, r->n.attrs.index, wants(c, r, 0) ? &ga : NULL, &gb,
                                      c->loc, c->err) != CJ_OK)
        return false;
    return give(c, r, 1, gb) && (!wants(c, r, 0) || give(c, r, 0, ga));
}

static bool vjp_lu(vjp_ctx *c, const rule_args *r) {
    return !wants(c, r, 0) || give(c, r, 0, cj_build_lu_vjp(c->g, r->X, r->OUT, r->g, c->loc, c->err));
}

static bool vjp_cholesky(vjp_ctx *c, const rule_args *r) {
    return !wants(c, r, 0) || give(c, r, 0, cj_build_cholesky_vjp(c->g, r->OUT, r->g, c->loc, c->err));
}
static bool vjp_decomp(vjp_ctx *c, const rule_args *r) { /* QR, EIGH, SVD: graph_linalg_decomp_ad.c */
    int index = (int)r->n.attrs.index;
    return !wants(c, r, 0) || give(c, r, 0, cj_build_decomp_vjp(c->g, r->n.op, r->X, index, r->g, c->loc, c->err));
}

/* Every op with a gradient but the elementwise unary ones (vjp_unary, from
 * their records): sources have none and ops flagged CJ_OPF_ZERO_GRAD in
 * ops.def give zero, so they have no entry. */
static const struct {
    bool (*fn)(vjp_ctx *c, const rule_args *r);
    unsigned reads;
} rules[CJ_NUM_OPS] = {
    [CJ_OP_NAME] = {vjp_pass, 0},
    [CJ_OP_CAST] = {vjp_cast, 0},
    [CJ_OP_ADD] = {vjp_add, 0},
    [CJ_OP_SUB] = {vjp_sub, 0},
    [CJ_OP_MUL] = {vjp_mul, READS_X | READS_Y},
    [CJ_OP_DIV] = {vjp_div, READS_Y | READS_OUT},
    [CJ_OP_POW] = {vjp_pow, READS_X | READS_Y | READS_OUT},
    [CJ_OP_MAXIMUM] = {vjp_maxmin, READS_X | READS_Y},
    [CJ_OP_MINIMUM] = {vjp_maxmin, READS_X | READS_Y},
    [CJ_OP_SELECT] = {vjp_select, READS_X},
    [CJ_OP_FMA] = {vjp_mul, READS_X | READS_Y},
    [CJ_OP_BROADCAST] = {vjp_broadcast, 0},
    [CJ_OP_RESHAPE] = {vjp_reshape, 0},
    [CJ_OP_TRANSPOSE] = {vjp_transpose, 0},
    [CJ_OP_SLICE] = {vjp_slice, 0},
    [CJ_OP_CONCATENATE] = {vjp_concatenate, 0},
    [CJ_OP_REDUCE_SUM] = {vjp_reduce_sum, 0},
    [CJ_OP_REDUCE_PROD] = {vjp_reduce_prod, READS_X},
    [CJ_OP_REDUCE_MAX] = {vjp_reduce_maxmin, READS_X | READS_OUT},
    [CJ_OP_REDUCE_MIN] = {vjp_reduce_maxmin, READS_X | READS_OUT},
    [CJ_OP_MATMUL] = {vjp_matmul, READS_X | READS_Y},
    [CJ_OP_GATHER] = {vjp_gather, READS_Y},
    [CJ_OP_CHOLESKY] = {vjp_cholesky, READS_OUT},
    [CJ_OP_LU] = {vjp_lu, READS_X | READS_OUT},
    [CJ_OP_TRIANGULAR_SOLVE] = {vjp_triangular_solve, READS_X | READS_OUT},
    [CJ_OP_QR] = {vjp_decomp, READS_X},
    [CJ_OP_EIGH] = {vjp_decomp, READS_X},
    [CJ_OP_SVD] = {vjp_decomp, READS_X},
    [CJ_OP_SCATTER_ADD] = {vjp_scatter, READS_X},
    [CJ_OP_SCATTER_MUL] = {vjp_scatter, READS_X | READS_Y},
    [CJ_OP_SCATTER_MIN] = {vjp_scatter, READS_X | READS_Y | READS_OUT},
    [CJ_OP_SCATTER_MAX] = {vjp_scatter, READS_X | READS_Y | READS_OUT},
    [CJ_OP_RESULT] = {vjp_result, 0},
    [CJ_OP_SCAN] = {vjp_region, 0},
    [CJ_OP_WHILE] = {vjp_region, 0},
    [CJ_OP_COND] = {vjp_region, 0},
    [CJ_OP_CUSTOM] = {vjp_region, 0},
};

/* See autodiff.h. */
int cj_autodiff_rule_reads(cj_op op) {
    const cj_unary_info *u = cj_unary(op);
    if (u) return u->derivative ? (int)u->reads : -1;
    if ((int)op < 0 || op >= CJ_NUM_OPS || !rules[op].fn) return -1;
    return (int)rules[op].reads;
}

/* Propagates the cotangent of node `id` to its inputs. */
static bool apply_rule(vjp_ctx *c, int id, int first) {
    cj_node n = node(c, id);
    c->loc = n.loc;
    if (cj_op_kind(n.op) == CJ_OPKIND_SOURCE || cj_op_has_flag(n.op, CJ_OPF_ZERO_GRAD)) return true;
    if (cj_autodiff_rule_reads(n.op) < 0) {
        cj_error_set(c->err, CJ_ERR_INTERNAL, "autodiff: no rule for %s", cj_op_name(n.op));
        return false;
    }
    unsigned reads = (unsigned)cj_autodiff_rule_reads(n.op);
    rule_args r = {.n = n, .id = id, .g = c->ct[id], .first = first, .X = -1, .Y = -1, .OUT = -1};
    r.x = n.ninputs > 0 ? n.inputs[0] : -1;
    r.y = n.ninputs > 1 ? n.inputs[1] : -1;
    /* the forward values the rule reads: saved ones as they are, the others
     * recomputed for the backward pass (checkpointing, see saved() above) */
    if ((reads & READS_X) && r.x >= 0 && (r.X = fwd(c, r.x)) < 0) return false;
    if ((reads & READS_Y) && r.y >= 0 && (r.Y = fwd(c, r.y)) < 0) return false;
    if ((reads & READS_OUT) && (r.OUT = fwd(c, id)) < 0) return false;
    return (cj_unary(n.op) ? vjp_unary : rules[n.op].fn)(c, &r);
}

/* See autodiff.h. */
cj_status cj_autodiff_vjp(cj_graph *g, int first, const int *outs, const int *cts, int nouts,
                          const int *wrt, int nwrt, int *grads, cj_error *err) {
    return cj_autodiff_vjp_scheduled(g, first, outs, cts, nouts, wrt, nwrt, grads, NULL, err);
}

/* See autodiff.h. */
cj_status cj_autodiff_vjp_scheduled(cj_graph *g, int first, const int *outs, const int *cts, int nouts,
                                    const int *wrt, int nwrt, int *grads, const cj_chain_schedule *chain,
                                    cj_error *err) {
    int last = g->nnodes; /* rules only run on nodes that existed before we started */
    vjp_ctx c = {.g = g, .err = err, .loc = -1, .gen = 1, .last = last};
    c.ct = malloc(sizeof(int) * ((size_t)last + 1));
    c.copy = malloc(sizeof(int) * ((size_t)last + 1));
    c.stack = malloc(sizeof(int) * ((size_t)last + 1));
    c.next_input = malloc(sizeof(int) * ((size_t)last + 1));
    c.escapes = calloc((size_t)last + 1, sizeof(bool));
    c.tag = calloc((size_t)last + 1, sizeof(char *));
    if (!c.ct || !c.copy || !c.stack || !c.next_input || !c.escapes || !c.tag) {
        free(c.ct);
        free(c.copy);
        free(c.stack);
        free(c.next_input);
        free(c.escapes);
        free(c.tag);
        return cj_error_set(err, CJ_ERR_MEMORY, "autodiff: out of memory");
    }
    for (int i = 0; i < last; i++) c.ct[i] = c.copy[i] = -1;
    int forward_end = g->backward_start >= 0 && g->backward_start < last ? g->backward_start : last;
    if (chain && !chain_setup(&c, chain, first, forward_end)) {
        free(c.ct);
        free(c.copy);
        free(c.stack);
        free(c.next_input);
        free(c.escapes);
        free(c.tag);
        free(c.layer);
        free(c.held);
        return err->status;
    }
    find_escapes(&c, last);
    /* the outputs themselves are kept: they are returned anyway */
    for (int i = 0; i < nouts; i++)
        if (outs[i] >= 0 && outs[i] < last) c.escapes[outs[i]] = true;
    if (g->backward_start < 0 || last < g->backward_start) g->backward_start = last;
    bool ok = true;
    for (int i = 0; ok && i < nouts; i++) {
        if (outs[i] < 0 || outs[i] >= last || cts[i] < 0 || cts[i] >= last) {
            cj_error_set(err, CJ_ERR_INTERNAL, "autodiff: bad node id");
            ok = false;
        } else if (is_float(g->nodes[outs[i]].dtype)) {
            ok = accumulate(&c, outs[i], cts[i]);
        }
    }
    /* c.ct may point at new nodes (>= last); rules only read c.ct[id < last] */
    for (int id = last - 1; ok && id >= first; id--) {
        if (c.ct[id] < 0) continue;
        bool is_wrt = false;
        for (int w = 0; w < nwrt; w++) is_wrt |= wrt[w] == id;
        if (is_wrt && g->nodes[id].op == CJ_OP_PARAM) continue;
        if (c.layer && c.layer[id] > 0 && c.layer[id] != c.cur) ok = chain_enter(&c, c.layer[id]);
        ok = ok && apply_rule(&c, id, first);
    }
    for (int w = 0; ok && w < nwrt; w++) {
        int id = wrt[w];
        grads[w] = c.ct[id] >= 0 ? c.ct[id] : zeros(&c, &g->nodes[id].shape, g->nodes[id].dtype);
        ok = grads[w] >= 0;
    }
    free(c.ct);
    free(c.copy);
    free(c.stack);
    free(c.next_input);
    free(c.escapes);
    free(c.tag);
    free(c.layer);
    free(c.held);
    if (!ok && err->status == CJ_OK) cj_error_set(err, CJ_ERR_INTERNAL, "autodiff failed");
    return err->status;
}

/* See autodiff.h. */
int cj_autodiff_residuals(const cj_graph *g, int *out) {
    if (g->backward_start < 0) return 0;
    bool *live = calloc((size_t)g->nnodes + 1, sizeof(bool));
    bool *res = calloc((size_t)g->nnodes + 1, sizeof(bool));
    if (!live || !res) {
        free(live);
        free(res);
        return -1;
    }
    for (int j = 0; j < g->noutputs; j++) live[g->outputs[j]] = true;
    for (int i = g->nnodes - 1; i >= 0; i--) {
        if (!live[i]) continue;
        for (int a = 0; a < g->nodes[i].ninputs; a++) {
            int in = g->nodes[i].inputs[a];
            live[in] = true;
            if (i >= g->backward_start && in < g->backward_start &&
                cj_op_kind(g->nodes[in].op) != CJ_OPKIND_SOURCE)
                res[in] = true;
        }
    }
    int n = 0;
    for (int i = 0; i < g->nnodes; i++)
        if (res[i]) out[n++] = i;
    free(live);
    free(res);
    return n;
}
