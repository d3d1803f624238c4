/* memplan.c - where every byte of one call lives.
 *
 * Liveness over the kernel schedule: a temporary is live from the kernel
 * that first writes it to the last kernel that reads it.  Temporaries are
 * placed in one arena, largest first, each at the lowest offset that does
 * not overlap a placed buffer whose lifetime overlaps its own ("greedy by
 * size", as in TensorFlow Lite's planner and XLA's heap simulator).
 *
 * The peak is exact for the plan that runs: arguments and closed-over
 * arrays are held for the whole call, outputs are allocated before the
 * first kernel and the arena for the whole call. */
#include <stdlib.h>
#include <string.h>

#include "kernel.h"

#define CJ_ARENA_ALIGN 64

static int64_t align_up(int64_t n) { return (n + CJ_ARENA_ALIGN - 1) / CJ_ARENA_ALIGN * CJ_ARENA_ALIGN; }

static void note_use(cj_buffer *b, int k) {
    if (b->first_use < 0 || k < b->first_use) b->first_use = k;
    if (k > b->last_use) b->last_use = k;
}

/* Liveness in steps of groups: the stages of a group interleave row block
 * by row block, so a buffer touched by any stage is live for the group. */
static void compute_liveness(cj_plan *p) {
    for (int b = 0; b < p->nbuffers; b++) p->buffers[b].first_use = p->buffers[b].last_use = -1;
    for (int g = 0; g < p->ngroups; g++) {
        for (int k = p->groups[g].first; k < p->groups[g].first + p->groups[g].count; k++) {
            const cj_kernel *kern = &p->kernels[k];
            note_use(&p->buffers[kern->out_buffer], g);
            for (int e = 0; e < kern->nexprs; e++)
                if (kern->exprs[e].kind == CJ_EX_LOAD) note_use(&p->buffers[kern->exprs[e].buffer], g);
        }
    }
    /* arguments and outputs are held for the whole call */
    for (int b = 0; b < p->nbuffers; b++) {
        cj_buffer *buf = &p->buffers[b];
        if (buf->kind != CJ_BUF_TEMP) {
            buf->first_use = 0;
            buf->last_use = p->ngroups > 0 ? p->ngroups - 1 : 0;
        }
    }
}

static bool lifetimes_overlap(const cj_buffer *a, const cj_buffer *b) {
    return a->first_use <= b->last_use && b->first_use <= a->last_use;
}

static int by_size_desc(const void *x, const void *y, void *ctx) {
    const cj_buffer *bufs = ctx;
    int64_t a = bufs[*(const int *)x].nbytes, b = bufs[*(const int *)y].nbytes;
    if (a != b) return a > b ? -1 : 1;
    return *(const int *)x - *(const int *)y; /* stable: earlier buffer first */
}

/* See kernel.h. */
cj_status cj_memplan_run(cj_plan *p, bool enabled, cj_error *err) {
    compute_liveness(p);
    int n = 0;
    int *order = malloc(sizeof(int) * ((size_t)p->nbuffers + 1));
    int *placed = malloc(sizeof(int) * ((size_t)p->nbuffers + 1));
    if (!order || !placed) {
        free(order);
        free(placed);
        return cj_error_set(err, CJ_ERR_MEMORY, "memplan: out of memory");
    }
    for (int b = 0; b < p->nbuffers; b++)
        if (p->buffers[b].kind == CJ_BUF_TEMP) order[n++] = b;
    qsort_r(order, (size_t)n, sizeof(int), by_size_desc, p->buffers);

    int64_t arena = 0;
    int nplaced = 0;
    for (int i = 0; i < n; i++) {
        cj_buffer *b = &p->buffers[order[i]];
        int64_t size = align_up(b->nbytes);
        int64_t offset = 0;
        if (enabled) {
            /* lowest offset clear of every placed, overlapping-in-time buffer;
             * candidates are 0 and the ends of placed buffers */
            bool moved = true;
            while (moved) {
                moved = false;
                for (int j = 0; j < nplaced; j++) {
                    const cj_buffer *o = &p->buffers[placed[j]];
                    if (!lifetimes_overlap(b, o)) continue;
                    int64_t oend = o->offset + align_up(o->nbytes);
                    if (offset < oend && o->offset < offset + size) {
                        offset = oend;
                        moved = true;
                    }
                }
            }
        } else {
            offset = arena;
        }
        b->offset = offset;
        placed[nplaced++] = order[i];
        if (offset + size > arena) arena = offset + size;
    }
    free(order);
    free(placed);
    p->arena_bytes = arena;

    p->argument_bytes = p->output_bytes = 0;
    for (int b = 0; b < p->nbuffers; b++) {
        const cj_buffer *buf = &p->buffers[b];
        if (buf->kind == CJ_BUF_PARAM || buf->kind == CJ_BUF_ARRAY) p->argument_bytes += buf->nbytes;
        if (buf->kind == CJ_BUF_OUTPUT) p->output_bytes += buf->nbytes;
    }
    p->temp_bytes = arena;
    p->alias_bytes = 0;
    p->peak_bytes = p->argument_bytes + p->output_bytes + p->temp_bytes - p->alias_bytes;

    /* the group at which the most temporary bytes are live names peak_live */
    int64_t best = -1;
    p->peak_kernel = 0;
    for (int k = 0; k < p->ngroups; k++) {
        int64_t live = 0;
        for (int b = 0; b < p->nbuffers; b++) {
            const cj_buffer *buf = &p->buffers[b];
            if (buf->kind == CJ_BUF_TEMP && buf->first_use <= k && k <= buf->last_use) live += buf->nbytes;
        }
        if (live > best) {
            best = live;
            p->peak_kernel = k;
        }
    }
    return CJ_OK;
}
