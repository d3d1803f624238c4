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

/* What the VJP rule of op reads of the forward pass, as a set of the bits
 * below; -1 when op has no rule (a source, or an op whose gradient is zero:
 * CJ_OPF_ZERO_GRAD in ops.def). */
enum {
    CJ_VJP_READS_X = 1 << 0,   /* the first input */
    CJ_VJP_READS_Y = 1 << 1,   /* the second input */
    CJ_VJP_READS_OUT = 1 << 2, /* the op's own value */
};
int cj_autodiff_rule_reads(cj_op op);

/* The residuals of the backward pass in g: forward nodes (before
 * g->backward_start, computed rather than sources) that a node the outputs
 * depend on reads from the backward pass.  Writes their ids in order to
 * `out` (room for g->nnodes) and returns the count, or -1 on no memory. */
int cj_autodiff_residuals(const cj_graph *g, int *out);

#endif
