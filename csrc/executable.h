/* executable.h - what cj_compile produces (private to pipeline.c and runtime.c). */
#ifndef CJ_EXECUTABLE_H
#define CJ_EXECUTABLE_H

#include "codegen.h"
#include "pipeline.h"

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
};

/* Runs x (a loop's body) with its parameters, outputs and temporaries at
 * the given places; allocates and counts nothing (runtime.c). */
cj_status cj_runtime_run_in(cj_executable *x, void *const *params, void *const *outputs, char *arena,
                            const cj_run_poll *poll, cj_error *err);
/* Has poll asked to stop?  (see runtime.c's poll_says_stop; poll may be NULL) */
bool cj_runtime_poll(const cj_run_poll *poll, int64_t *next_ns);
/* Runs the loop kernel k of plan p (loops_rt.c) on the outer call's slots. */
cj_status cj_loop_run(const cj_plan *p, const cj_kernel *k, void *const *slots, const cj_run_poll *poll,
                      cj_error *err);

#endif
