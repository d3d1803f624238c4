/* fuse.h - the fuser's own state and helpers, shared by its three files:
 * fuse.c (kernels and the plan's buffers), fuse_expr.c (expressions and
 * their memo) and fuse_roots.c (which nodes get buffers, multi-output sets).
 * Private to those files; the pass's interface is in kernel.h. */
#ifndef CJ_FUSE_H
#define CJ_FUSE_H

#include "kernel.h"

/* The index of each dim of a node, as an affine function of the loop
 * indices of the kernel being built. */
typedef struct {
    int rank;
    cj_affine idx[CJ_MAX_RANK];
} node_view;

typedef struct {
    int node;
    node_view view;
    int expr;
    int slot;            /* its place in the hash table */
} memo_entry;

typedef struct {
    const cj_graph *g;
    cj_plan *plan;
    cj_error *err;
    bool *root;          /* node is materialized */
    int *node_buf;       /* buffer holding the node's value, or -1 */
    /* the kernel being built */
    cj_kernel *k;
    int exprs_cap;
    memo_entry *memo;    /* (node, view) -> expression, for the kernel being built */
    int nmemo, memo_cap;
    int *table;          /* hash table of memo indices, -1 when empty */
    int table_cap;       /* a power of two */
    struct expr_frame_s *stack; /* fuse_build_expr's pending nodes */
    int stack_cap;
    int must_materialize; /* node found to need a buffer, or -1 */
    /* roots computed by one multi-output kernel form a set (union-find
     * over node ids, choose_roots); the kernel is built at the set's last
     * member, `pos` */
    int *set_parent, *set_next, *set_tail, *set_pos, *set_size, *set_cost;
    /* the labels of the fused ops */
    char label[256];
} fuser;

static inline const cj_node *node_at(const fuser *f, int id) { return &f->g->nodes[id]; }

/* The most work (cj_op_cost summed over the fused ops) one kernel's loop
 * body takes: a longer elementwise chain is cut into kernels of about this
 * size.  LLVM's time on one loop body grows faster than its length (a
 * chain of 500 sin compiled in 20 s as one kernel), and past a hundred ops
 * a bigger body saves no memory traffic worth having.  Measured on chains
 * of 1000 sin and 5000 multiply-adds: cut at 64 they compiled in 0.65 s
 * and 0.99 s, at 128 in 0.51 s and 0.35 s, at 256 in 0.43 s and 0.51 s
 * (kernels of many transcendentals call them, see codegen.c). */
#define CJ_KERNEL_MAX_COST 128
/* The most values one multi-output kernel stores (fuse_roots.c). */
#define CJ_MAX_STORES 16

/* fuse_expr.c */
int fuse_add_expr(fuser *f, const cj_expr *e);
void fuse_append_label(fuser *f, const char *name);
void fuse_memo_clear(fuser *f);
/* The expression of `node` seen through `v` in the kernel being built
 * (reused when built before); -1 on failure (f->err set, or
 * f->must_materialize names a node). */
int fuse_build_expr(fuser *f, int node, const node_view *v);

/* fuse_roots.c */
/* Decides f->root (which nodes get buffers) and the multi-output sets. */
/* Is concatenate c one kernel over its inputs' common shape (fuse_roots.c)? */
bool fuse_concat_shares_loop(const cj_graph *g, const cj_node *c);
void fuse_choose_roots(fuser *f, const bool *live, bool enabled);
bool fuse_sets_alloc(fuser *f, int n);
void fuse_sets_free(fuser *f);
/* The node whose buffer a region reads for its operand x: x itself, or what
 * a chain of reshapes starts from, as a reshape keeps the bytes in order
 * (a split scan's xs is a reshape of the argument). */
int fuse_region_operand(const cj_graph *g, int x);
int fuse_set_find(const fuser *f, int i);

#endif
