/* batching.h - vmap on the graph: a batched copy of a traced computation. */
#ifndef CJ_BATCHING_H
#define CJ_BATCHING_H

#include "graph.h"

/* The nodes from `first` on were traced on one example: placeholders[i]
 * stands for one element of batched[i], whose shape is the placeholder's
 * with a leading dimension of `size` (same dtype).  Appends to g, node by
 * node, the batched copy of every node that depends on a placeholder (its
 * batch dimension in front, by the op's batching rule); nodes that do not
 * depend on one are shared as they are.  out_batched[j] is the batched copy
 * of outs[j], or -1 when outs[j] does not depend on the placeholders.  The
 * per-example nodes stay in the graph, unused: dead-code elimination drops
 * them, so the batched graph fuses like one written by hand.  Returns CJ_OK
 * or an error with err set. */
cj_status cj_batch(cj_graph *g, int first, const int *placeholders, const int *batched, int n, int64_t size,
                   const int *outs, int nouts, int *out_batched, cj_error *err);

/* The batching rule of op (what tests/c/test_ops.c checks every op has):
 * ELEMENTWISE (unbatched operands broadcast, the op applied with the batch
 * dimension in front), SHIFT (the op's dims and attributes moved up by
 * one: reshape, transpose, slice, concatenate, reductions), BROADCAST,
 * MATMUL, INDEX (gather and scatters: batched indices are merged into the
 * indexed dim), or NONE for sources (never batched: they depend on nothing). */
typedef enum {
    CJ_BATCH_NONE, CJ_BATCH_ELEMENTWISE, CJ_BATCH_SHIFT, CJ_BATCH_BROADCAST, CJ_BATCH_MATMUL, CJ_BATCH_INDEX
} cj_batch_rule;
cj_batch_rule cj_batch_rule_of(cj_op op);

#endif
