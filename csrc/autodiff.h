/* autodiff.h - reverse-mode differentiation on the graph. */
#ifndef CJ_AUTODIFF_H
#define CJ_AUTODIFF_H

#include "graph.h"

/* Appends to g the vector-Jacobian product: for each node wrt[i],
 * grads[i] = sum over outputs j of cts[j] . d outs[j] / d wrt[i].
 * Nodes with ids below `first` are treated as constants (they belong to an
 * enclosing computation); the wrt nodes should be at or after `first`.
 * Non-float outputs carry no cotangent; a wrt node the outputs do not
 * depend on gets zeros.  Returns CJ_OK, or an error with err set (the graph
 * may then hold unused nodes, which dead-code elimination drops). */
cj_status cj_autodiff_vjp(cj_graph *g, int first, const int *outs, const int *cts, int nouts,
                          const int *wrt, int nwrt, int *grads, cj_error *err);
/* The type of cj_autodiff_vjp: the rules of regions and custom nodes
 * (regions_vjp.c, custom.c) differentiate a body with the same reverse
 * mode as the outer graph, and receive it as a parameter of this type so
 * that they stay below autodiff.c. */
typedef cj_status cj_vjp_fn(cj_graph *g, int first, const int *outs, const int *cts, int nouts, const int *wrt,
                            int nwrt, int *grads, cj_error *err);

/* A checkpoint schedule over a chain of layers (binomial checkpointing,
 * python/cjit/_budget.py chooses it).  Position i (0..nlayers) is the value
 * of node bound[i]; layer i is the forward nodes with ids in
 * (bound[i-1], bound[i]], each reading only its own layer, bound[i-1] and
 * values outside the chain (cj_autodiff_chain finds such bounds).  The
 * forward pass keeps the positions with keep[i] set (0 and nlayers always);
 * every other value of the chain is recomputed.  Before the backward pass
 * of layer i, the positions store_at[k] of the entries with
 * store_before[k] == i are recomputed in that (increasing) order, each from
 * the highest position then held, and held until the backward pass is
 * below them; the layer's own values are recomputed from position i-1.
 * Each recomputation is a copy generation of its own (cj_node.remat), so
 * that CSE keeps two copies of one value made at different times apart. */
typedef struct {
    int nlayers;
    const int *bound;        /* nlayers + 1 increasing node ids */
    const bool *keep;        /* nlayers + 1 */
    int nstores;
    const int *store_before; /* layer, nonincreasing along the list */
    const int *store_at;     /* position, < store_before[k] */
} cj_chain_schedule;

/* cj_autodiff_vjp following `chain` (NULL: as cj_autodiff_vjp).  A chain
 * whose layers are not forward nodes of this differentiation (bound[1] at
 * or after `first`, bound[nlayers] before the vjp starts) is refused with
 * CJ_ERR_VALUE; bound[0] may be older (an argument). */
cj_status cj_autodiff_vjp_scheduled(cj_graph *g, int first, const int *outs, const int *cts, int nouts,
                                    const int *wrt, int nwrt, int *grads, const cj_chain_schedule *chain,
                                    cj_error *err);

/* The chain of the first backward pass in g, for binomial checkpointing:
 * the values p, in increasing order, that the backward pass reads and that
 * alone cross their point of the forward pass (no other computed forward
 * value older than p, weights' identities aside, is read by a forward node
 * after p).  Writes them to `out` (room for g->nnodes) and returns the
 * count (0 without a backward pass), or -1 on no memory. */
int cj_autodiff_chain(const cj_graph *g, int *out);

/* What the VJP rule of op reads of the forward pass, as a set of graph.h's
 * CJ_VJP_READS_* bits; -1 when op has no rule (a source, or an op whose
 * gradient is zero: CJ_OPF_ZERO_GRAD in ops.def). */
int cj_autodiff_rule_reads(cj_op op);

/* d(X^Y)/dX = Y X^(Y-1) for pow's rules (autodiff.c, jvp.c), taken as 0 at
 * X == Y == 0 (X^0 is constant; there the product would be 0 * inf).  The
 * product reads X replaced by 1 at that point, so its own derivatives, which
 * the select multiplies by 0, stay finite: x**0.0 has second derivative 0 at
 * 0, and d/dY of the derivative at Y == 0 is 1/X.  -1 with err set. */
int cj_pow_dx(cj_graph *g, int X, int Y, int loc, cj_error *err);

/* The residuals of the backward pass in g: forward nodes (before
 * g->backward_start, computed rather than sources) that a node the outputs
 * depend on reads from the backward pass.  Writes their ids in order to
 * `out` (room for g->nnodes) and returns the count, or -1 on no memory. */
int cj_autodiff_residuals(const cj_graph *g, int *out);

#endif
