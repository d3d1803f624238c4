/* loops.h - control flow in the plan: the kernel of a scan, while or cond
 * node (fuse.c's emit_region) carries a cj_loop_plan: its bodies lowered
 * as graphs of their own (loops.c), later their code (pipeline.c), and
 * where each of its inputs and results is; loops_rt.c runs it.
 *
 * The kernel's workspace, one temporary of the outer plan that is live
 * only while the kernel runs, holds every byte the loop needs beyond its
 * inputs and results, so the outer plan's peak stays exact:
 *
 *   [0, arena_bytes)           the bodies' temporaries (the largest arena;
 *                              every iteration reuses them)
 *   spare_offset[k]            carry k's second buffer (scan, while): an
 *                              iteration reads the carries from one and
 *                              writes the next into the other
 *   dead_offset[k]             results no node reads
 *   pred_offset                while: the condition's bool */
#ifndef CJ_LOOPS_H
#define CJ_LOOPS_H

#include "pipeline.h"
#include "regions.h"

struct cj_executable;

typedef struct cj_loop_plan {
    cj_body *body;                  /* a reference */
    cj_lowered *lowered;            /* per body graph; moved into exe by pipeline.c */
    struct cj_executable **exe;     /* per body graph: its code (NULL until compiled) */
    void (*free_exe)(struct cj_executable *);
    const cj_plan **plans;          /* per body graph: its plan, wherever it lives now */
    int ninputs, nresults;
    int *in_buf;                    /* outer buffer of each region input */
    int *out_buf;                   /* outer buffer of each result, -1: none reads it */
    int work_buf;                   /* the workspace (see above) */
    int64_t arena_bytes;
    int64_t *spare_offset;          /* per carry (scan, while) */
    int64_t *dead_offset;           /* per result without a buffer */
    int64_t pred_offset;
    int64_t work_bytes;
} cj_loop_plan;

/* A plan for a region of body b with ninputs inputs (buffers -1), and its
 * end (plan.c's: the plan owns its loop plans). */
cj_loop_plan *cj_loop_plan_new(cj_body *b, int ninputs);
void cj_loop_plan_free(cj_loop_plan *L);
/* The lowering of one graph (cj_lower): loops.c receives it rather than
 * calling it, because a body is lowered by the same pipeline that lowers
 * the graph holding it. */
typedef cj_status (*cj_lower_fn)(const cj_graph *src, const cj_compile_options *o, cj_lowered *l, cj_error *err);
/* Lowers the bodies of every loop kernel of p with `lower` (recursively,
 * with a body's options, cj_compile_options_body) and sizes each
 * workspace: the pipeline's loops step, after fusion, before memplan. */
cj_status cj_loops_lower(cj_plan *p, const cj_compile_options *body, cj_lower_fn lower, cj_error *err);

#endif
