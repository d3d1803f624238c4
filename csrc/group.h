/* group.h - kernels that share their row loop, run row block by row block. */
#ifndef CJ_GROUP_H
#define CJ_GROUP_H

#include "kernel.h"

/* Partitions the plan's kernels (in order) into groups; with `enabled`
 * false every kernel is a group of its own.  Fills plan->groups. */
cj_status cj_group_run(cj_plan *plan, bool enabled, cj_error *err);

#endif
