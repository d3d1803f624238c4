/* fuse_roots.c - which nodes get buffers (roots), and which roots one
 * multi-output kernel stores together (sets), before any kernel is built. */
#include <stdlib.h>
#include <string.h>

#include "fuse.h"

/* Recompute a multi-use elementwise value inline in each consumer when the
 * extra work, its chain's cost (roughly: arithmetic ops; transcendentals
 * count 4) times the consumers beyond the first, is at most this much, and
 * it has at most this many consumers.  So exp(x - max) in a softmax (cost
 * 5, two consumers) is recomputed, and a gelu read by three consumers
 * (cost 12, extra work 24) is stored once. */
#define CJ_RECOMPUTE_MAX_COST 16
#define CJ_RECOMPUTE_MAX_USERS 4
/* A chain of one element of at most this cost is recomputed however many
 * consumers read it: each computes it once, before its loop. */
#define CJ_RECOMPUTE_SCALAR_MAX_COST 32

/* See fuse.h. */
int fuse_region_operand(const cj_graph *g, int x) {
    while (g->nodes[x].op == CJ_OP_RESHAPE) x = g->nodes[x].inputs[0];
    return x;
}

/* Does consumer c read its input at its own index, so that in c's kernel
 * the input is seen through the same view as c?  Elementwise ops do (the
 * builders made broadcasting explicit), and so does a reduction, which
 * loops over its input's shape. */
/* Inputs of one shape (at least two, none empty): fuse.c builds such a
 * concatenate as one kernel over that shape computing every input (the
 * parts of a complex value, stacked, share most of their work). */
bool fuse_concat_shares_loop(const cj_graph *g, const cj_node *c) {
    if (cj_op_kind(c->op) != CJ_OPKIND_CONCAT || c->ninputs < 2 || c->ninputs > CJ_MAX_STORES) return false;
    const cj_shape *s = &g->nodes[c->inputs[0]].shape;
    if (cj_shape_numel(s) == 0) return false;
    for (int a = 1; a < c->ninputs; a++)
        if (!cj_shape_equal(&g->nodes[c->inputs[a]].shape, s)) return false;
    return true;
}

/* A reshape that only inserts or drops dims of size 1 (expand_dims, squeeze):
 * the element at a loop point is its input's at the same point. */
static bool unit_reshape(const cj_graph *g, const cj_node *c) {
    if (c->op != CJ_OP_RESHAPE) return false;
    const cj_shape *in = &g->nodes[c->inputs[0]].shape;
    int i = 0, j = 0;
    for (;;) {
        while (i < in->rank && in->dims[i] == 1) i++;
        while (j < c->shape.rank && c->shape.dims[j] == 1) j++;
        if (i == in->rank || j == c->shape.rank) return i == in->rank && j == c->shape.rank;
        if (in->dims[i++] != c->shape.dims[j++]) return false;
    }
}

static bool reads_at_own_index(const cj_graph *g, const cj_node *c) {
    if (fuse_concat_shares_loop(g, c) || unit_reshape(g, c)) return true;
    switch (cj_op_kind(c->op)) {
    case CJ_OPKIND_UNARY: case CJ_OPKIND_BINARY: case CJ_OPKIND_COMPARE: case CJ_OPKIND_SELECT:
    case CJ_OPKIND_TERNARY:
    case CJ_OPKIND_CAST: case CJ_OPKIND_REDUCE:
        return true;
    case CJ_OPKIND_SOURCE: case CJ_OPKIND_MOVE: case CJ_OPKIND_CONCAT: case CJ_OPKIND_MATMUL:
    case CJ_OPKIND_REGION: case CJ_OPKIND_GATHER: case CJ_OPKIND_SCATTER: case CJ_OPKIND_SORT: case CJ_OPKIND_LINALG:
        return false;
    }
    return false;
}

/* ---- multi-output kernels: sets of roots -----------------------------------
 * Roots of one shape whose values are computed from shared inputs can be
 * stored by one kernel: one loop body computes what they share once and
 * stores each.  Sets start as single roots and are merged by choose_roots;
 * a set's kernel is built where its last member is (its `pos`), so every
 * kernel a member reads runs before it, and every kernel that reads a
 * member must run after it (set_merge checks). */

/* See fuse.h. */
int fuse_set_find(const fuser *f, int i) {
    while (f->set_parent[i] != i) i = f->set_parent[i];
    return i;
}

/* See fuse.h. */
bool fuse_sets_alloc(fuser *f, int n) {
    int **arrays[] = {&f->set_parent, &f->set_next, &f->set_tail, &f->set_pos, &f->set_size, &f->set_cost};
    for (size_t a = 0; a < sizeof arrays / sizeof *arrays; a++)
        if (!(*arrays[a] = malloc(sizeof(int) * ((size_t)n + 1)))) return false;
    for (int i = 0; i < n; i++) {
        f->set_parent[i] = f->set_tail[i] = f->set_pos[i] = i;
        f->set_next[i] = -1;
        f->set_size[i] = 1;
        f->set_cost[i] = 0;
    }
    return true;
}

/* See fuse.h. */
void fuse_sets_free(fuser *f) {
    free(f->set_parent);
    free(f->set_next);
    free(f->set_tail);
    free(f->set_pos);
    free(f->set_size);
    free(f->set_cost);
}

/* Can the kernel of root i store other values at every point? */
static bool elementwise_root(const cj_node *nd) {
    switch (cj_op_kind(nd->op)) {
    case CJ_OPKIND_UNARY: case CJ_OPKIND_BINARY: case CJ_OPKIND_COMPARE: case CJ_OPKIND_SELECT:
    case CJ_OPKIND_TERNARY:
    case CJ_OPKIND_CAST:
        return true;
    case CJ_OPKIND_SOURCE: case CJ_OPKIND_MOVE: case CJ_OPKIND_CONCAT: case CJ_OPKIND_REDUCE:
    case CJ_OPKIND_MATMUL: case CJ_OPKIND_REGION: case CJ_OPKIND_GATHER: case CJ_OPKIND_SCATTER: case CJ_OPKIND_SORT: case CJ_OPKIND_LINALG:
        return false;
    }
    return false;
}

/* The consumers of each node (choose_roots' lists) and who computes them. */
typedef struct {
    const int *first, *list; /* consumers of i: list[first[i] .. first[i+1]) */
    const int *owner;        /* the root whose kernel computes a node, or -1 */
} consumers;

/* Merges the sets sets[0..n) (distinct representatives of roots) into one
 * if they may be one kernel: all elementwise roots of one shape, at most
 * CJ_MAX_STORES values and CJ_KERNEL_MAX_COST of work, and every consumer
 * of a member either in the merged kernel, reading it at its own index,
 * or in a kernel that runs after it.  Returns the merged set, or -1. */
static int set_merge(fuser *f, const int *sets, int n, const consumers *cs) {
    const cj_graph *g = f->g;
    const cj_shape *shape = &g->nodes[sets[0]].shape;
    int size = 0, cost = 0, pos = -1;
    for (int j = 0; j < n; j++) {
        int s = sets[j];
        if (!cj_shape_equal(&g->nodes[s].shape, shape)) return -1;
        for (int m = s; m >= 0; m = f->set_next[m])
            if (!elementwise_root(&g->nodes[m])) return -1;
        size += f->set_size[s];
        cost += f->set_cost[s];
        if (f->set_pos[s] > pos) pos = f->set_pos[s];
    }
    if (size > CJ_MAX_STORES || cost > CJ_KERNEL_MAX_COST) return -1;
    for (int j = 0; j < n; j++)
        for (int m = sets[j]; m >= 0; m = f->set_next[m])
            for (int q = cs->first[m]; q < cs->first[m + 1]; q++) {
                int c = cs->list[q];
                if (cs->owner[c] < 0) { /* inlined wherever it is used: all of them come after c */
                    if (c <= pos) return -1;
                    continue;
                }
                int x = fuse_set_find(f, cs->owner[c]);
                bool inside = false;
                for (int t = 0; t < n; t++) inside |= sets[t] == x;
                if (inside ? !reads_at_own_index(g, &g->nodes[c]) : f->set_pos[x] <= pos) return -1;
            }
    int into = sets[0];
    for (int j = 1; j < n; j++) {
        int s = sets[j];
        f->set_parent[s] = into;
        f->set_next[f->set_tail[into]] = s;
        f->set_tail[into] = f->set_tail[s];
    }
    f->set_size[into] = size;
    f->set_cost[into] = cost;
    f->set_pos[into] = pos;
    return into;
}

/* The distinct sets computing the consumers of i that read it at their
 * own index, into sets[]; -1 if some consumer is in no known kernel or
 * reads i otherwise, or there are too many. */
static int consumer_sets(const fuser *f, int i, const consumers *cs, int *sets, int own) {
    int n = 0;
    if (own >= 0) sets[n++] = own;
    for (int q = cs->first[i]; q < cs->first[i + 1]; q++) {
        int c = cs->list[q];
        if (cs->owner[c] < 0 || !reads_at_own_index(f->g, &f->g->nodes[c])) return -1;
        int x = fuse_set_find(f, cs->owner[c]);
        bool seen = false;
        for (int t = 0; t < n; t++) seen |= sets[t] == x;
        if (seen) continue;
        if (n == CJ_MAX_STORES) return -1;
        sets[n++] = x;
    }
    return n;
}

/* Which nodes get buffers, before any kernel is built.  Two passes:
 *
 * Forward, the nodes that must be stored whatever their consumers do
 * (outputs, reductions, matmuls and their computed operands, concatenates)
 * and the cuts of long chains, by the chain's cost: a value read by several
 * consumers is charged to the first of them only, as it is computed once
 * when they share a kernel.
 *
 * Backward, each remaining value's owner: the root whose kernel computes it
 * (all its consumers are computed in that kernel, each reading the value at
 * its own index).  A value read by several consumers with one owner is
 * computed once in that kernel and kept in a register (the expression memo
 * makes it one expression): y = exp(-y*y) + y repeated is one loop with no
 * temporaries.  One whose consumers are in different kernels, or read it
 * through other views, is recomputed in each when that is cheap (a short
 * chain: exp(x - max) in a softmax, read by the row sum and the quotient)
 * and stored once otherwise. */
void fuse_choose_roots(fuser *f, const bool *live, bool enabled) {
    const cj_graph *g = f->g;
    int n = g->nnodes;
    int *users = calloc((size_t)n + 1, sizeof(int));
    int *cost = calloc((size_t)n + 1, sizeof(int));
    int *counted_by = malloc(sizeof(int) * ((size_t)n + 1)); /* the last consumer counted */
    int *first = calloc((size_t)n + 2, sizeof(int));          /* consumers of i: list[first[i] .. first[i+1]) */
    int *owner = malloc(sizeof(int) * ((size_t)n + 1));
    bool *charged = calloc((size_t)n + 1, sizeof(bool));
    int *list = NULL;
    bool counts = users && cost && counted_by && first && owner && charged;
    if (counts) {
        int total = 0;
        for (int i = 0; i < n; i++) counted_by[i] = -1;
        for (int i = 0; i < n; i++) {
            if (!live[i]) continue;
            const cj_node *nd = &g->nodes[i];
            for (int a = 0; a < nd->ninputs; a++) /* count distinct consumers */
                if (counted_by[nd->inputs[a]] != i) {
                    counted_by[nd->inputs[a]] = i;
                    users[nd->inputs[a]]++;
                    total++;
                }
        }
        counts = (list = malloc(sizeof(int) * ((size_t)total + 1))) != NULL;
        for (int i = 0; counts && i < n; i++) first[i + 1] = first[i] + users[i];
        for (int i = 0; counts && i < n; i++) counted_by[i] = -1;
        int *fill = owner; /* borrowed as the fill position of each list */
        for (int i = 0; counts && i < n; i++) fill[i] = first[i];
        for (int i = 0; counts && i < n; i++) {
            if (!live[i]) continue;
            const cj_node *nd = &g->nodes[i];
            for (int a = 0; a < nd->ninputs; a++)
                if (counted_by[nd->inputs[a]] != i) {
                    counted_by[nd->inputs[a]] = i;
                    list[fill[nd->inputs[a]]++] = i;
                }
        }
    }
    for (int i = 0; i < n; i++) {
        if (!live[i]) continue;
        const cj_node *nd = &g->nodes[i];
        cj_opkind kind = cj_op_kind(nd->op);
        bool computes = kind != CJ_OPKIND_SOURCE && kind != CJ_OPKIND_MOVE && !cj_op_has_flag(nd->op, CJ_OPF_IDENTITY);
        if (nd->op == CJ_OP_PARAM || nd->op == CJ_OP_ARRAY) continue;
        if (kind == CJ_OPKIND_REGION) { /* a kernel boundary: its bodies read and write whole buffers */
            f->root[i] = true;
            for (int a = 0; a < nd->ninputs; a++) {
                int x = fuse_region_operand(g, nd->inputs[a]);
                if (g->nodes[x].op != CJ_OP_PARAM && g->nodes[x].op != CJ_OP_ARRAY) f->root[x] = true;
            }
            if (counts) cost[i] = 0;
            continue;
        }
        if (kind == CJ_OPKIND_GATHER || kind == CJ_OPKIND_SORT || kind == CJ_OPKIND_LINALG) {
            /* operands read anywhere (a gather's first, every one of a call): from memory */
            for (int a = 0; a < (kind == CJ_OPKIND_LINALG ? nd->ninputs : 1); a++) {
                int x = nd->inputs[a];
                if (g->nodes[x].op != CJ_OP_PARAM && g->nodes[x].op != CJ_OP_ARRAY) f->root[x] = true;
            }
        }
        if (!enabled) {
            f->root[i] = nd->op != CJ_OP_CONSTANT && nd->op != CJ_OP_IOTA;
            continue;
        }
        if (!counts) { /* out of memory for the counts: store everything */
            f->root[i] = computes || kind == CJ_OPKIND_REDUCE || kind == CJ_OPKIND_MATMUL || kind == CJ_OPKIND_CONCAT ||
                         kind == CJ_OPKIND_SCATTER || kind == CJ_OPKIND_SORT || kind == CJ_OPKIND_LINALG;
            continue;
        }
        if (kind == CJ_OPKIND_REDUCE || kind == CJ_OPKIND_MATMUL || kind == CJ_OPKIND_CONCAT || kind == CJ_OPKIND_SCATTER ||
            kind == CJ_OPKIND_SORT || kind == CJ_OPKIND_LINALG)
            f->root[i] = true;
        /* an output computed here is written once, straight into its array */
        if (kind != CJ_OPKIND_SOURCE)
            for (int j = 0; j < g->noutputs; j++) f->root[i] |= g->outputs[j] == i;
        int my_cost = cj_op_cost(nd->op);
        for (int a = 0; a < nd->ninputs; a++) {
            int x = nd->inputs[a];
            bool repeated = false; /* x * x reads x once (a concatenate is a root: its cost is not used) */
            for (int b = 0; b < a && nd->ninputs <= 3; b++) repeated |= nd->inputs[b] == x;
            if (f->root[x] || repeated || charged[x]) continue;
            my_cost += cost[x];
            if (users[x] > 1) charged[x] = true;
        }
        cost[i] = my_cost;
        /* a chain too long for one loop body is cut here (see CJ_KERNEL_MAX_COST) */
        if (my_cost > CJ_KERNEL_MAX_COST && computes) f->root[i] = true;
        if (kind == CJ_OPKIND_MATMUL) {
            /* matmul operands that compute something are stored, not recomputed per output */
            for (int a = 0; a < 2; a++) {
                int x = nd->inputs[a];
                while (cj_op_kind(g->nodes[x].op) == CJ_OPKIND_MOVE || cj_op_has_flag(g->nodes[x].op, CJ_OPF_IDENTITY))
                    x = g->nodes[x].inputs[0];
                cj_opkind xk = cj_op_kind(g->nodes[x].op);
                if (xk != CJ_OPKIND_SOURCE) f->root[x] = true;
            }
        }
    }
    consumers cs = {first, list, owner};
    int sets[CJ_MAX_STORES];
    for (int i = n - 1; enabled && counts && i >= 0; i--) {
        owner[i] = -1;
        if (!live[i]) continue;
        const cj_node *nd = &g->nodes[i];
        if (f->root[i]) {
            owner[i] = i;
            f->set_cost[i] = cost[i];
            /* read by other elementwise kernels of its shape: stored by one of them */
            int ns = elementwise_root(nd) ? consumer_sets(f, i, &cs, sets, i) : -1, kept = 1;
            for (int j = 1; j < ns; j++)
                if (elementwise_root(&g->nodes[sets[j]]) && cj_shape_equal(&g->nodes[sets[j]].shape, &nd->shape))
                    sets[kept++] = sets[j];
            if (kept > 1) set_merge(f, sets, kept, &cs);
            continue;
        }
        /* the one kernel every consumer is computed in, reading i at its own index, or -1 */
        int common = -2;
        for (int q = first[i]; q < first[i + 1] && common != -1; q++) {
            int c = list[q];
            int oc = reads_at_own_index(g, &g->nodes[c]) && owner[c] >= 0 ? fuse_set_find(f, owner[c]) : -1;
            common = oc < 0 || (common != -2 && common != oc) ? -1 : oc;
        }
        owner[i] = common >= 0 ? common : -1;
        if (owner[i] >= 0 || users[i] < 2) continue;
        cj_opkind kind = cj_op_kind(nd->op);
        if (kind == CJ_OPKIND_SOURCE || kind == CJ_OPKIND_MOVE) continue;
        /* an identity of something already in memory (grad's identity of a
         * weight, read by every recomputation of its layer) costs nothing to
         * read through: storing it would only copy it */
        if (cj_op_has_flag(nd->op, CJ_OPF_IDENTITY) && cost[i] == 0) continue;
        /* consumers in several kernels: one kernel computing them all, if they can be */
        int ns = consumer_sets(f, i, &cs, sets, -1);
        if (ns > 1 && (owner[i] = set_merge(f, sets, ns, &cs)) >= 0) continue;
        owner[i] = -1;
        /* else recompute a short chain in each, store a long one; a chain
         * of one element (Adam's bias correction, read by every update) is
         * computed before each consumer's loop (codegen_expr.c,
         * emit_invariants) */
        bool one_element = cj_shape_numel(&nd->shape) == 1 && cost[i] <= CJ_RECOMPUTE_SCALAR_MAX_COST;
        if (!one_element &&
            (users[i] > CJ_RECOMPUTE_MAX_USERS || cost[i] * (users[i] - 1) > CJ_RECOMPUTE_MAX_COST)) {
            f->root[i] = true;
            owner[i] = i;
        }
    }
    free(users);
    free(cost);
    free(counted_by);
    free(first);
    free(owner);
    free(charged);
    free(list);
}

