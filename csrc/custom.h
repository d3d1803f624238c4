/* custom.h - functions with user-defined derivatives (the CUSTOM region
 * node of cjit.custom_vjp and cjit.custom_jvp; layout in regions.h). */
#ifndef CJ_CUSTOM_H
#define CJ_CUSTOM_H

#include "autodiff.h"
#include "graph.h"
#include "jvp.h"

/* A copy of src in which every custom node is replaced by the nodes of its
 * function (recursively), each keeping its source location; NULL with err
 * untouched when src has none (use src), NULL with err set on failure. */
cj_graph *cj_custom_expand(const cj_graph *src, cj_error *err);

/* Reverse mode through custom node id, as cj_region_vjp: res_ct[k] is the
 * cotangent of result k (-1: none); sets in_ct[a] for the float primals.
 * A custom_jvp rule is transposed by `vjp` (cj_autodiff_vjp, passed in). */
cj_status cj_custom_vjp(cj_graph *g, int id, const int *res_ct, int *in_ct, cj_vjp_fn *vjp, cj_error *err);

/* Forward mode through custom node id: in_tan[a] is the tangent of input
 * a (-1: none); out_tan[k] gets the tangent of result k (-1 for a non-float
 * one).  A custom_vjp node is refused with CJ_ERR_VALUE, unless a reverse
 * pass went through it (its residuals are read): then fwd is differentiated
 * as ordinary code by `jvp` (cj_jvp, passed in), as in JAX. */
cj_status cj_custom_jvp(cj_graph *g, int id, const int *in_tan, int *out_tan, cj_jvp_fn *jvp, cj_error *err);

#endif
