/* group.h - kernels that share their row loop, run row block by row block. */
#ifndef CJ_GROUP_H
#define CJ_GROUP_H

#include "kernel.h"

/* Partitions the plan's kernels (in order) into groups; with `enabled`
 * false every kernel is a group of its own.  Fills plan->groups, with
 * each gemm-led group's join partner (kernel.h, cj_group). */
cj_status cj_group_run(cj_plan *plan, bool enabled, cj_error *err);

/* Merges the loops of every kernel that is a group of its own (not a gemm
 * or a loop): the pipeline's step after memplan, whose orders may still
 * join kernels (each gemm-led group's join_partner, which this pass finds
 * and memorder.c uses). */
void cj_group_collapse_lone(cj_plan *plan);

#endif
