/* loops.c - lowering control flow (the pipeline's loops step): the bodies
 * of each scan, while and cond kernel are lowered as graphs of their own
 * (by the lowering it is given, cj_lower: recursively for nested loops),
 * and the kernel's workspace is laid out (loops.h).  Loop plans are made
 * and freed by plan.c. */
#include <stdlib.h>
#include <string.h>

#include "loops.h"

#define ALIGN 64
static int64_t align_up(int64_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }



static int64_t result_bytes(const cj_body *b, int k) {
    return cj_shape_numel(&b->result_shape[k]) * cj_dtype_size(b->result_dtype[k]);
}

/* Lowers L's bodies and lays out its workspace (buffer w of p). */
static cj_status lower_loop(cj_plan *p, cj_loop_plan *L, const cj_compile_options *body, cj_lower_fn lower,
                            cj_error *err) {
    const cj_body *b = L->body;
    int64_t arena = 0;
    for (int j = 0; j < b->ngraphs; j++) {
        if (lower(b->graphs[j], body, &L->lowered[j], err) != CJ_OK) return err->status;
        L->lowered[j].plan.loop_body = true;
        L->plans[j] = &L->lowered[j].plan;
        if (L->lowered[j].plan.arena_bytes > arena) arena = L->lowered[j].plan.arena_bytes;
    }
    int64_t at = L->arena_bytes = align_up(arena);
    if (b->op != CJ_OP_COND)
        for (int k = 0; k < b->ncarry; k++) {
            L->spare_offset[k] = at;
            at += align_up(result_bytes(b, k));
        }
    for (int k = 0; k < b->nresults; k++) {
        if (L->out_buf[k] >= 0) continue;
        L->dead_offset[k] = at;
        at += align_up(result_bytes(b, k));
    }
    L->pred_offset = at;
    if (b->op == CJ_OP_WHILE) at += ALIGN;
    L->work_bytes = at;
    cj_buffer *w = &p->buffers[L->work_buf];
    w->dtype = CJ_BOOL;
    w->shape.rank = 1;
    w->shape.dims[0] = at;
    w->nbytes = at;
    return CJ_OK;
}

/* See loops.h. */
cj_status cj_loops_lower(cj_plan *p, const cj_compile_options *body, cj_lower_fn lower, cj_error *err) {
    for (int k = 0; k < p->nkernels; k++)
        if (p->kernels[k].loop && lower_loop(p, p->kernels[k].loop, body, lower, err) != CJ_OK) return err->status;
    return CJ_OK;
}
