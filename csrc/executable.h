/* executable.h - what cj_compile produces (private to executable.c, the CPU backend, and runtime.c). */
#ifndef CJ_EXECUTABLE_H
#define CJ_EXECUTABLE_H

#include "codegen.h"
#include "pipeline.h"
#include "stats.h"

typedef struct cj_rebind cj_rebind;
typedef struct cj_run_step cj_run_step;

struct cj_executable {
    cj_graph *graph;        /* owned copy: names, shapes and source lines */
    cj_plan plan;           /* kernels and buffers */
    cj_kernel_fn *kernels;  /* one per plan kernel */
    cj_kernel_fn *groups;   /* per plan group: its driver, NULL for a group of one */
    cj_jit_code *code;      /* owns the machine code */
    int64_t flops, bytes_accessed;
    int64_t held_bytes;     /* memory it holds (cj_executable_code_bytes), set by cj_compile */
    bool nested;            /* the body of another's loop: the outer one counts its memory */
    bool has_loops;         /* a kernel is a scan, while or cond (so a run may be long: poll it) */
    /* A loop's body (cj_runtime_prepare_body): the slots at a parameter's or
     * an output's bytes, the only ones that change between iterations, and
     * how each group runs, worked out once.  NULL: at every run. */
    struct cj_rebind *rebind;
    int nrebind;
    struct cj_run_step *steps;
    /* A loop's body compiled as one function (plan.one_function, body_fn.c):
     * every group in order, in one call, on bound slots.  Else NULL. */
    cj_kernel_fn one_function;
};

/* Runs x (a loop's body) with its parameters, outputs and temporaries at
 * the given places; allocates and counts nothing (runtime.c).  slots (one
 * per buffer of x's plan) is kept by the loop from one iteration to the
 * next: `bound` says it holds the previous iteration's binding with the
 * same arena, so only the slots of x->rebind are bound again. */
cj_status cj_runtime_run_in(cj_executable *x, void **slots, bool bound, void *const *params, void *const *outputs,
                            char *arena, const cj_run_poll *poll, cj_error *err);
/* Fills x->rebind and x->steps (executable.c, for each loop body it
 * compiles); without memory it leaves them NULL, and every iteration
 * works everything out again. */
void cj_runtime_prepare_body(cj_executable *x);
/* How a loop runs one of its bodies: cj_runtime_run_in. */
typedef cj_status cj_body_runner(cj_executable *x, void **slots, bool bound, void *const *params,
                                 void *const *outputs, char *arena, const cj_run_poll *poll, cj_error *err);
/* Runs the loop kernel k of plan p (loops_rt.c) on the outer call's slots.
 * A body is an executable like the outer one, so it is run by the same
 * runtime: the caller passes its runner in (run_body), which keeps
 * loops_rt.c below runtime.c. */
cj_status cj_loop_run(const cj_plan *p, const cj_kernel *k, void *const *slots, const cj_run_poll *poll,
                      cj_body_runner *run_body, cj_error *err);

#endif
