/* loops.c - lowering control flow: the bodies of each scan, while and cond
 * kernel are lowered as graphs of their own (cj_lower, recursively for
 * nested loops), and the kernel's workspace is laid out (loops.h). */
#include <stdlib.h>
#include <string.h>

#include "loops.h"

#define ALIGN 64
static int64_t align_up(int64_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

/* See loops.h. */
cj_loop_plan *cj_loop_plan_new(cj_body *b, int ninputs) {
    cj_loop_plan *L = calloc(1, sizeof *L);
    if (!L) return NULL;
    L->body = b;
    cj_body_ref(b);
    L->ninputs = ninputs;
    L->nresults = b->nresults;
    L->work_buf = -1;
    L->in_buf = malloc(sizeof(int) * ((size_t)ninputs + 1));
    L->out_buf = malloc(sizeof(int) * ((size_t)b->nresults + 1));
    L->spare_offset = calloc((size_t)b->ncarry + 1, sizeof(int64_t));
    L->dead_offset = calloc((size_t)b->nresults + 1, sizeof(int64_t));
    L->lowered = calloc((size_t)b->ngraphs + 1, sizeof(cj_lowered));
    L->exe = calloc((size_t)b->ngraphs + 1, sizeof(struct cj_executable *));
    L->plans = calloc((size_t)b->ngraphs + 1, sizeof(cj_plan *));
    if (!L->in_buf || !L->out_buf || !L->spare_offset || !L->dead_offset || !L->lowered || !L->exe || !L->plans) {
        cj_loop_plan_free(L);
        return NULL;
    }
    for (int i = 0; i < ninputs; i++) L->in_buf[i] = -1;
    for (int k = 0; k < b->nresults; k++) L->out_buf[k] = -1;
    return L;
}

/* See loops.h. */
void cj_loop_plan_free(cj_loop_plan *L) {
    if (!L) return;
    for (int j = 0; L->body && j < L->body->ngraphs; j++) {
        if (L->lowered) cj_lowered_free(&L->lowered[j]);
        if (L->exe && L->exe[j] && L->free_exe) L->free_exe(L->exe[j]);
    }
    cj_body_unref(L->body);
    free(L->lowered);
    free(L->exe);
    free(L->plans);
    free(L->in_buf);
    free(L->out_buf);
    free(L->spare_offset);
    free(L->dead_offset);
    free(L);
}

static int64_t result_bytes(const cj_body *b, int k) {
    return cj_shape_numel(&b->result_shape[k]) * cj_dtype_size(b->result_dtype[k]);
}

/* Lowers L's bodies and lays out its workspace (buffer w of p). */
static cj_status lower_loop(cj_plan *p, cj_loop_plan *L, const cj_lower_options *o, cj_error *err) {
    const cj_body *b = L->body;
    cj_lower_options inner = {.cancel = o ? o->cancel : NULL, .mark_library_calls = o ? o->mark_library_calls : NULL};
    int64_t arena = 0;
    for (int j = 0; j < b->ngraphs; j++) {
        if (cj_lower(b->graphs[j], &inner, &L->lowered[j], err) != CJ_OK) return err->status;
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
cj_status cj_loops_lower(cj_plan *p, const cj_lower_options *o, cj_error *err) {
    for (int k = 0; k < p->nkernels; k++)
        if (p->kernels[k].loop && lower_loop(p, p->kernels[k].loop, o, err) != CJ_OK) return err->status;
    return CJ_OK;
}
