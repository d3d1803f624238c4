/* runtime.c - running a compiled plan on the CPU, and the memory counters.
 *
 * A call allocates the plan's arena once, points every buffer slot at its
 * argument, output or arena offset, and runs the kernels in order.  The
 * counters see every byte the runtime allocates (arenas here, outputs in
 * py_exec.c), so memory_stats() can be held against the plan. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executable.h"

static _Atomic int64_t bytes_in_use, peak_bytes_in_use, compiles, code_bytes;

/* See pipeline.h. */
void cj_runtime_note_alloc(int64_t nbytes) {
    int64_t now = atomic_fetch_add(&bytes_in_use, nbytes) + nbytes;
    int64_t peak = atomic_load(&peak_bytes_in_use);
    while (now > peak && !atomic_compare_exchange_weak(&peak_bytes_in_use, &peak, now)) {
    }
}

void cj_runtime_note_compile(int64_t nbytes) {
    atomic_fetch_add(&compiles, 1);
    atomic_fetch_add(&code_bytes, nbytes);
}

/* See pipeline.h. */
void cj_runtime_stats_get(cj_runtime_stats *out) {
    out->bytes_in_use = atomic_load(&bytes_in_use);
    out->peak_bytes_in_use = atomic_load(&peak_bytes_in_use);
    out->compiles = atomic_load(&compiles);
    out->code_bytes = atomic_load(&code_bytes);
}

/* See pipeline.h. */
void cj_runtime_reset_peak(void) { atomic_store(&peak_bytes_in_use, atomic_load(&bytes_in_use)); }

/* See pipeline.h. */
cj_status cj_executable_run(cj_executable *x, void *const *params, void *const *arrays,
                            void *const *outputs, cj_error *err) {
    const cj_plan *p = &x->plan;
    void *stack_slots[32];
    void **slots = p->nbuffers <= 32 ? stack_slots : malloc(sizeof(void *) * (size_t)p->nbuffers);
    if (!slots) return cj_error_set(err, CJ_ERR_MEMORY, "run: out of memory");
    char *arena = NULL;
    if (p->arena_bytes > 0) {
        arena = aligned_alloc(64, (size_t)p->arena_bytes);
        if (!arena) {
            if (slots != stack_slots) free(slots);
            return cj_error_set(err, CJ_ERR_MEMORY, "run: cannot allocate %lld bytes of temporaries",
                                (long long)p->arena_bytes);
        }
        cj_runtime_note_alloc(p->arena_bytes);
    }
    for (int b = 0; b < p->nbuffers; b++) {
        const cj_buffer *buf = &p->buffers[b];
        switch (buf->kind) {
        case CJ_BUF_PARAM: slots[b] = params[buf->slot]; break;
        case CJ_BUF_ARRAY: slots[b] = arrays[buf->slot]; break;
        case CJ_BUF_OUTPUT: slots[b] = outputs[buf->slot]; break;
        case CJ_BUF_TEMP: slots[b] = arena + buf->offset; break;
        }
    }
    for (int k = 0; k < p->nkernels; k++) {
        const cj_kernel *kern = &p->kernels[k];
        if (x->inits[k]) {
            int64_t n = cj_shape_numel(&p->buffers[kern->out_buffer].shape);
            x->inits[k](0, n, slots);
        }
        x->kernels[k](0, kern->dims[0], slots);
    }
    if (arena) {
        free(arena);
        cj_runtime_note_alloc(-p->arena_bytes);
    }
    if (slots != stack_slots) free(slots);
    return CJ_OK;
}

/* See pipeline.h. */
void cj_executable_free(cj_executable *x) {
    if (!x) return;
    if (x->code) atomic_fetch_sub(&code_bytes, cj_jit_code_bytes(x->code));
    cj_jit_code_free(x->code);
    cj_plan_free(&x->plan);
    if (x->graph) cj_graph_free(x->graph);
    free(x->kernels);
    free(x->inits);
    free(x);
}

int cj_executable_nparams(const cj_executable *x) { return x->graph->nparams; }
int cj_executable_narrays(const cj_executable *x) { return x->graph->narrays; }
int cj_executable_noutputs(const cj_executable *x) { return x->graph->noutputs; }

void cj_executable_output(const cj_executable *x, int i, cj_shape *shape, cj_dtype *dtype) {
    const cj_node *n = &x->graph->nodes[x->graph->outputs[i]];
    *shape = n->shape;
    *dtype = n->dtype;
}

const cj_plan *cj_executable_plan(const cj_executable *x) { return &x->plan; }
int64_t cj_executable_flops(const cj_executable *x) { return x->flops; }
int64_t cj_executable_bytes_accessed(const cj_executable *x) { return x->bytes_accessed; }
int64_t cj_executable_code_bytes(const cj_executable *x) { return cj_jit_code_bytes(x->code); }
