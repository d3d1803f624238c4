/* group.h - kernels that share their row loop, run row block by row block. */
#ifndef CJ_GROUP_H
#define CJ_GROUP_H

#include <llvm-c/Core.h>

#include "kernel.h"

/* Partitions the plan's kernels (in order) into groups; with `enabled`
 * false every kernel is a group of its own.  Fills plan->groups. */
cj_status cj_group_run(cj_plan *plan, bool enabled, cj_error *err);

/* Adds "<prefix>_g<j>" to `mod` for every group j of two or more stages
 * with only[j] (every group when `only` is NULL): for each block of rows in
 * [start, end) it fills the block's rows of each accumulating stage's
 * output with the identity (cj_rt_fill_identity) and calls each stage;
 * stages not defined in `mod` are declared, to be linked from another
 * module of the same executable. */
void cj_group_emit_drivers(const cj_plan *plan, LLVMModuleRef mod, const char *prefix, const bool *only);

#endif
