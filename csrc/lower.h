/* lower.h - the target-free lowering: a traced graph to a plan.
 *
 * cj_lower runs lower.c's table of passes (simplify, fuse, group, memplan)
 * and knows no target and no code generator: cj_compile (pipeline.c) hands
 * the plan it returns to the CPU backend, and cj_plan_peak (memory_budget's
 * oracle) reads its peak.  It links without LLVM (tests/c/test_lower.c). */
#ifndef CJ_LOWER_H
#define CJ_LOWER_H

#include "kernel.h"
#include "stats.h"

/* What lowering produced: the simplified graph and the plan (kernels,
 * groups, buffers and their bytes), before any code exists. */
typedef struct {
    const cj_graph *source; /* during cj_lower only */
    cj_graph *graph;        /* owned */
    cj_plan plan;           /* owned; plan.graph borrows graph */
    bool fused;             /* the fuse pass ran (not switched off) */
} cj_lowered;

typedef struct {
    const bool *donated;    /* donated[i], i < ndonated: parameter i's bytes may be reused */
    int ndonated;
    const cj_cancel *cancel;/* checked between passes */
    /* the target's step after fusion: marks the kernels a library call
     * runs (cj_blas_plan on the CPU); NULL for none */
    void (*mark_library_calls)(cj_plan *plan);
    /* threads that may run one group (the CPU's pool): block storage of
     * group-local temporaries gets a block per thread (blockmem.c); 0
     * (a GPU, which runs stages one after another) for none */
    int threads;
} cj_lower_options;

/* Runs the lowering passes (lower.c's table: simplify, fuse, group,
 * memplan) on a copy of g; `o` may be NULL.  On failure *out is empty. */
cj_status cj_lower(const cj_graph *g, const cj_lower_options *o, cj_lowered *out, cj_error *err);
/* Frees l's graph and plan (plan.c's). */
void cj_lowered_free(cj_lowered *l);

#endif
