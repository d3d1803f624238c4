/* group.h - kernels that share their row loop, run row block by row block. */
#ifndef CJ_GROUP_H
#define CJ_GROUP_H

#include "kernel.h"

/* Partitions the plan's kernels (in order) into groups; with `enabled`
 * false every kernel is a group of its own.  Fills plan->groups. */
cj_status cj_group_run(cj_plan *plan, bool enabled, cj_error *err);

/* Merges the loops of every kernel that is a group of its own (not a gemm
 * or a loop): run after memplan, whose orders may still join kernels. */
void cj_group_collapse_lone(cj_plan *plan);

/* With donated arguments (memplan.c tries each, and keeps it when the peak
 * is lower): a group of one stage that reads the result of a gemm-led
 * group, the only group besides it to read it (an optimizer's update
 * reading a weight's gradient), joins that group when it could have been
 * grouped there: it moves up to right after the gemm's group, or else that
 * group moves down to right before it, when nothing in between depends on
 * the one that moves or it on that (nor reads a donated argument the update
 * reads or could write over).  The gradient is then group-local and takes
 * block storage (blockmem.c).  Joins the `which`-th such pair (0 first) in
 * the current order.  Returns 1 when it joined, 0 when there is no such
 * pair, -1 when out of memory. */
int cj_group_join_updates(cj_plan *plan, int which);

#endif
