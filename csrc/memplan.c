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


/* ---- reuse: in-place updates and donated arguments ------------------------ */

static int group_of(const cj_plan *p, int k) {
    for (int g = 0; g < p->ngroups; g++)
        if (k >= p->groups[g].first && k < p->groups[g].first + p->groups[g].count) return g;
    return -1;
}

static bool same_index(const cj_affine *a, const cj_affine *b, int rank) {
    if (a->offset != b->offset) return false;
    for (int d = 0; d < rank; d++)
        if (a->stride[d] != b->stride[d]) return false;
    return true;
}

/* Is stage k the last reader of buffer x, reading each element only where
 * it writes its own output (so it may overwrite x as it goes)?  Reads by
 * stages of earlier groups are fine; any other read is not. */
static bool last_read_in_place(const cj_plan *p, int x, int k) {
    const cj_kernel *kern = &p->kernels[k];
    int gk = group_of(p, k);
    bool read_by_k = false;
    for (int s = 0; s < p->nkernels; s++) {
        const cj_kernel *ks = &p->kernels[s];
        for (int e = 0; e < ks->nexprs; e++) {
            const cj_expr *ex = &ks->exprs[e];
            if (ex->kind != CJ_EX_LOAD || ex->buffer != x) continue;
            if (s == k) {
                if (!same_index(&ex->index, &kern->out_index, kern->rank)) return false;
                read_by_k = true;
            } else if (group_of(p, s) >= gk) {
                return false;
            }
        }
    }
    return read_by_k;
}

static int writer_count(const cj_plan *p, int b) {
    int n = 0;
    for (int k = 0; k < p->nkernels; k++) n += p->kernels[k].out_buffer == b;
    return n;
}

/* In-place updates: an elementwise stage whose input dies as it is read
 * writes over it.  A temporary that dies into an output lives in the
 * output's array; a temporary written over a dying temporary shares its
 * bytes; one written over a dying donated argument lives in the argument. */
static void plan_in_place(cj_plan *p, bool *hosts) {
    for (int k = 0; k < p->nkernels; k++) {
        const cj_kernel *kern = &p->kernels[k];
        int y = kern->out_buffer;
        cj_buffer *Y = &p->buffers[y];
        if (kern->reduced || Y->alias_of >= 0 || hosts[y] || writer_count(p, y) != 1) continue;
        if (Y->kind != CJ_BUF_TEMP && Y->kind != CJ_BUF_OUTPUT) continue;
        for (int e = 0; e < kern->nexprs; e++) {
            const cj_expr *ex = &kern->exprs[e];
            if (ex->kind != CJ_EX_LOAD || ex->buffer == y) continue;
            int x = ex->buffer;
            cj_buffer *X = &p->buffers[x];
            bool donated = X->kind == CJ_BUF_PARAM && p->donated && p->donated[X->slot];
            if (X->kind != CJ_BUF_TEMP && !donated) continue;
            if (X->alias_of >= 0 || hosts[x] || X->nbytes != Y->nbytes ||
                cj_dtype_size(X->dtype) != cj_dtype_size(Y->dtype) || !last_read_in_place(p, x, k))
                continue;
            if (X->kind == CJ_BUF_TEMP && Y->kind == CJ_BUF_OUTPUT) {
                X->alias_of = y; /* x is computed straight into the output array */
                hosts[y] = true;
            } else if (Y->kind == CJ_BUF_TEMP) {
                Y->alias_of = x; /* y overwrites x */
                hosts[x] = true;
                if (X->kind == CJ_BUF_TEMP && Y->last_use > X->last_use) X->last_use = Y->last_use;
            } else {
                continue; /* an output in a donated argument: not yet */
            }
            X->offset = Y->offset = 0;
            break;
        }
    }
}

/* The last group that reads buffer b, or -1. */
static int last_read_group(const cj_plan *p, int b) {
    int last = -1;
    for (int k = 0; k < p->nkernels; k++)
        for (int e = 0; e < p->kernels[k].nexprs; e++)
            if (p->kernels[k].exprs[e].kind == CJ_EX_LOAD && p->kernels[k].exprs[e].buffer == b) {
                int g = group_of(p, k);
                if (g > last) last = g;
            }
    return last;
}


/* Places temporary t in a donated argument whose last reader ran before
 * t's first writer, at the lowest offset clear of the temporaries already
 * there that overlap t in time.  Returns whether it did. */
static bool place_in_donor(cj_plan *p, int t, const int *donor_end) {
    cj_buffer *b = &p->buffers[t];
    int64_t size = align_up(b->nbytes);
    for (int d = 0; d < p->nbuffers; d++) {
        if (donor_end[d] < -1 || donor_end[d] >= b->first_use || p->buffers[d].nbytes < b->nbytes) continue;
        int64_t offset = 0;
        bool moved = true;
        while (moved) {
            moved = false;
            /* everything already living in d: placed here, or updated in place */
            for (int j = 0; j < p->nbuffers; j++) {
                const cj_buffer *o = &p->buffers[j];
                if (j == t || o->alias_of != d || !lifetimes_overlap(b, o)) continue;
                int64_t oend = o->offset + align_up(o->nbytes);
                if (offset < oend && o->offset < offset + size) {
                    offset = oend;
                    moved = true;
                }
            }
        }
        if (offset + b->nbytes <= p->buffers[d].nbytes) {
            b->alias_of = d;
            b->offset = offset;
            return true;
        }
    }
    return false;
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
    bool *hosts = calloc((size_t)p->nbuffers + 1, sizeof(bool));
    int *donor_end = calloc((size_t)p->nbuffers + 1, sizeof(int));
    if (!hosts || !donor_end) {
        free(order);
        free(placed);
        free(hosts);
        free(donor_end);
        return cj_error_set(err, CJ_ERR_MEMORY, "memplan: out of memory");
    }
    for (int b = 0; b < p->nbuffers; b++) p->buffers[b].alias_of = -1;
    if (enabled) plan_in_place(p, hosts);
    /* a donated argument takes temporaries once its last reader is done */
    for (int b = 0; b < p->nbuffers; b++) {
        const cj_buffer *buf = &p->buffers[b];
        bool donated = buf->kind == CJ_BUF_PARAM && p->donated && p->donated[buf->slot];
        donor_end[b] = donated && enabled ? last_read_group(p, b) : -2;
    }
    for (int b = 0; b < p->nbuffers; b++)
        if (p->buffers[b].kind == CJ_BUF_TEMP && p->buffers[b].alias_of < 0) order[n++] = b;
    qsort_r(order, (size_t)n, sizeof(int), by_size_desc, p->buffers);

    int64_t arena = 0;
    int nplaced = 0;
    for (int i = 0; i < n; i++) {
        cj_buffer *b = &p->buffers[order[i]];
        int64_t size = align_up(b->nbytes);
        int64_t offset = 0;
        if (!hosts[order[i]] && place_in_donor(p, order[i], donor_end)) {
            placed[nplaced++] = order[i];
            continue;
        }
        if (enabled) {
            /* lowest offset clear of every placed, overlapping-in-time buffer;
             * candidates are 0 and the ends of placed buffers */
            bool moved = true;
            while (moved) {
                moved = false;
                for (int j = 0; j < nplaced; j++) {
                    const cj_buffer *o = &p->buffers[placed[j]];
                    if (o->alias_of >= 0 || !lifetimes_overlap(b, o)) continue;
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
    free(hosts);
    free(donor_end);
    p->arena_bytes = arena;

    p->argument_bytes = p->output_bytes = 0;
    for (int b = 0; b < p->nbuffers; b++) {
        const cj_buffer *buf = &p->buffers[b];
        if (buf->kind == CJ_BUF_PARAM || buf->kind == CJ_BUF_ARRAY) p->argument_bytes += buf->nbytes;
        if (buf->kind == CJ_BUF_OUTPUT) p->output_bytes += buf->nbytes;
    }
    p->temp_bytes = arena;
    /* bytes that live in donated arguments instead of new memory */
    p->alias_bytes = 0;
    for (int d = 0; d < p->nbuffers; d++) {
        if (p->buffers[d].kind != CJ_BUF_PARAM) continue;
        int64_t extent = 0; /* how much of the argument is reused */
        for (int b = 0; b < p->nbuffers; b++) {
            const cj_buffer *buf = &p->buffers[b];
            if (buf->alias_of == d && buf->offset + buf->nbytes > extent) extent = buf->offset + buf->nbytes;
        }
        p->alias_bytes += extent < p->buffers[d].nbytes ? extent : p->buffers[d].nbytes;
    }
    /* outputs are never placed in arguments yet, so nothing is counted twice */
    p->peak_bytes = p->argument_bytes + p->output_bytes + p->temp_bytes;

    /* the group at which the most temporary bytes are live names peak_live */
    int64_t best = -1;
    p->peak_kernel = 0;
    for (int k = 0; k < p->ngroups; k++) {
        int64_t live = 0;
        for (int b = 0; b < p->nbuffers; b++) {
            const cj_buffer *buf = &p->buffers[b];
            if (buf->kind == CJ_BUF_TEMP && buf->alias_of < 0 && buf->first_use <= k && k <= buf->last_use)
                live += buf->nbytes;
        }
        if (live > best) {
            best = live;
            p->peak_kernel = k;
        }
    }
    return CJ_OK;
}
