/* jvp.h - forward-mode differentiation on the graph. */
#ifndef CJ_JVP_H
#define CJ_JVP_H

#include "graph.h"

/* Appends to g the Jacobian-vector product: given the tangent tangents[i]
 * of node wrt[i] (same shape and dtype), computes out_tangents[j], the
 * tangent of node outs[j].  Only nodes with ids >= `first` carry tangents
 * (older ones belong to an enclosing computation and are constants); an
 * output that does not depend on any wrt node, or whose dtype is not a
 * float, gets -1 (a zero tangent the caller materializes).  Returns CJ_OK
 * or an error with err set (unused nodes may remain; dead-code elimination
 * drops them). */
cj_status cj_jvp(cj_graph *g, int first, const int *wrt, const int *tangents, int nwrt, const int *outs,
                 int nouts, int *out_tangents, cj_error *err);

/* The type of cj_jvp. */
typedef cj_status cj_jvp_fn(cj_graph *g, int first, const int *wrt, const int *tangents, int nwrt, const int *outs,
                            int nouts, int *out_tangents, cj_error *err);

/* Forward mode through a region (jvp_regions.c, called by cj_jvp): the
 * JVP region of region node id, whose input a has tangent in_tan[a] (-1:
 * none); returns its id or -1 with err set.  A body is differentiated by
 * the same forward mode as the outer graph: cj_jvp passes itself in as
 * `jvp`, so that jvp_regions.c stays below jvp.c. */
int cj_jvp_region(cj_graph *g, int id, const int *in_tan, cj_jvp_fn *jvp, cj_error *err);
/* The tangent of RESULT node result_id, read from the JVP region new_region. */
int cj_jvp_result(cj_graph *g, int result_id, int new_region, cj_error *err);

/* Whether op has a JVP rule (every op that is neither a source nor
 * flagged CJ_OPF_ZERO_GRAD must have one: tests/c/test_ops.c). */
bool cj_jvp_has_rule(cj_op op);

#endif
