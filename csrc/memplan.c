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
            for (int i = 0; i < kern->nalso; i++) note_use(&p->buffers[kern->also[i].buffer], g);
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

/* Facts about who reads and writes each buffer, gathered in one pass over
 * the kernels so that no question below walks every kernel again (a plan
 * may have thousands of kernels and buffers). */
typedef struct {
    int *group_of;      /* per kernel: its group */
    int *writers;       /* per buffer: kernels that write it */
    int *last_group;    /* per buffer: the last group that reads it, or -1 */
    int *last_readers;  /* per buffer: kernels of that group that read it */
} plan_facts;

static void facts_free(plan_facts *f) {
    free(f->group_of);
    free(f->writers);
    free(f->last_group);
    free(f->last_readers);
}

static bool facts_gather(const cj_plan *p, plan_facts *f) {
    f->group_of = malloc(sizeof(int) * ((size_t)p->nkernels + 1));
    f->writers = calloc((size_t)p->nbuffers + 1, sizeof(int));
    f->last_group = malloc(sizeof(int) * ((size_t)p->nbuffers + 1));
    f->last_readers = calloc((size_t)p->nbuffers + 1, sizeof(int));
    if (!f->group_of || !f->writers || !f->last_group || !f->last_readers) {
        facts_free(f);
        return false;
    }
    for (int k = 0; k < p->nkernels; k++) f->group_of[k] = -1;
    for (int g = 0; g < p->ngroups; g++)
        for (int k = p->groups[g].first; k < p->groups[g].first + p->groups[g].count; k++) f->group_of[k] = g;
    /* the last kernel counted as a reader of each buffer: each kernel once */
    int *counted_by = f->last_readers == NULL ? NULL : malloc(sizeof(int) * ((size_t)p->nbuffers + 1));
    if (!counted_by) {
        facts_free(f);
        return false;
    }
    for (int b = 0; b < p->nbuffers; b++) f->last_group[b] = counted_by[b] = -1;
    for (int k = 0; k < p->nkernels; k++) {
        const cj_kernel *kern = &p->kernels[k];
        int g = f->group_of[k];
        f->writers[kern->out_buffer]++;
        for (int i = 0; i < kern->nalso; i++) f->writers[kern->also[i].buffer]++;
        for (int e = 0; e < kern->nexprs; e++) {
            const cj_expr *ex = &kern->exprs[e];
            if (ex->kind != CJ_EX_LOAD || counted_by[ex->buffer] == k) continue;
            counted_by[ex->buffer] = k;
            if (g > f->last_group[ex->buffer]) {
                f->last_group[ex->buffer] = g;
                f->last_readers[ex->buffer] = 0;
            }
            if (g == f->last_group[ex->buffer]) f->last_readers[ex->buffer]++;
        }
    }
    free(counted_by);
    return true;
}

static bool same_index(const cj_affine *a, const cj_affine *b, int rank) {
    if (a->offset != b->offset) return false;
    for (int d = 0; d < rank; d++)
        if (a->stride[d] != b->stride[d]) return false;
    return true;
}

/* Is stage k the last reader of buffer x, reading each element only where
 * it writes it at `at` (so that it may overwrite x as it goes)?  Reads by
 * stages of earlier groups are fine; any other read is not. */
static bool last_read_in_place(const cj_plan *p, const plan_facts *f, int x, int k, const cj_affine *at) {
    const cj_kernel *kern = &p->kernels[k];
    if (f->last_group[x] != f->group_of[k] || f->last_readers[x] != 1) return false;
    for (int e = 0; e < kern->nexprs; e++) {
        const cj_expr *ex = &kern->exprs[e];
        if (ex->kind == CJ_EX_LOAD && ex->buffer == x && !same_index(&ex->index, at, kern->rank))
            return false;
    }
    return true;
}

/* In-place updates: an elementwise stage whose input dies as it is read
 * writes over it.  A temporary that dies into an output lives in the
 * output's array; a temporary written over a dying temporary shares its
 * bytes; one written over a dying donated argument lives in the argument.
 * Here for the value stage k stores into buffer y at `at`. */
static void store_in_place(cj_plan *p, const plan_facts *f, bool *hosts, int k, int y, const cj_affine *at) {
    const cj_kernel *kern = &p->kernels[k];
    cj_buffer *Y = &p->buffers[y];
    if (kern->reduced || Y->alias_of >= 0 || hosts[y] || f->writers[y] != 1) return;
    if (Y->kind != CJ_BUF_TEMP && Y->kind != CJ_BUF_OUTPUT) return;
    for (int e = 0; e < kern->nexprs; e++) {
        const cj_expr *ex = &kern->exprs[e];
        if (ex->kind != CJ_EX_LOAD || ex->buffer == y) continue;
        int x = ex->buffer;
        cj_buffer *X = &p->buffers[x];
        bool donated = X->kind == CJ_BUF_PARAM && p->donated && p->donated[X->slot];
        if (X->kind != CJ_BUF_TEMP && !donated) continue;
        if (X->alias_of >= 0 || hosts[x] || X->nbytes != Y->nbytes ||
            cj_dtype_size(X->dtype) != cj_dtype_size(Y->dtype) || !last_read_in_place(p, f, x, k, at))
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
        return;
    }
}

/* Every stored value may take a dying input's bytes (one input each: a
 * multi-output stage's values take different ones). */
static void plan_in_place(cj_plan *p, const plan_facts *f, bool *hosts) {
    for (int k = 0; k < p->nkernels; k++) {
        const cj_kernel *kern = &p->kernels[k];
        for (int i = 0; i < kern->nalso; i++) store_in_place(p, f, hosts, k, kern->also[i].buffer, &kern->also[i].index);
        store_in_place(p, f, hosts, k, kern->out_buffer, &kern->out_index);
    }
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
    plan_facts facts;
    if (!facts_gather(p, &facts)) {
        free(order);
        free(placed);
        free(hosts);
        free(donor_end);
        return cj_error_set(err, CJ_ERR_MEMORY, "memplan: out of memory");
    }
    for (int b = 0; b < p->nbuffers; b++) p->buffers[b].alias_of = -1;
    if (enabled) plan_in_place(p, &facts, hosts);
    /* a donated argument takes temporaries once its last reader is done */
    int ndonors = 0;
    for (int b = 0; b < p->nbuffers; b++) {
        const cj_buffer *buf = &p->buffers[b];
        bool donated = buf->kind == CJ_BUF_PARAM && p->donated && p->donated[buf->slot];
        donor_end[b] = donated && enabled ? facts.last_group[b] : -2;
        ndonors += donor_end[b] >= -1;
    }
    facts_free(&facts);
    for (int b = 0; b < p->nbuffers; b++)
        if (p->buffers[b].kind == CJ_BUF_TEMP && p->buffers[b].alias_of < 0) order[n++] = b;
    qsort_r(order, (size_t)n, sizeof(int), by_size_desc, p->buffers);

    int64_t arena = 0;
    int nplaced = 0;
    for (int i = 0; i < n; i++) {
        cj_buffer *b = &p->buffers[order[i]];
        int64_t size = align_up(b->nbytes);
        int64_t offset = 0;
        if (ndonors && !hosts[order[i]] && place_in_donor(p, order[i], donor_end)) {
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
    int64_t *extent = calloc((size_t)p->nbuffers + 1, sizeof(int64_t)); /* how much of each is reused */
    int64_t *live_at = calloc((size_t)p->ngroups + 2, sizeof(int64_t));
    if (!extent || !live_at) {
        free(extent);
        free(live_at);
        return cj_error_set(err, CJ_ERR_MEMORY, "memplan: out of memory");
    }
    for (int b = 0; b < p->nbuffers; b++) {
        const cj_buffer *buf = &p->buffers[b];
        if (buf->alias_of >= 0 && buf->offset + buf->nbytes > extent[buf->alias_of])
            extent[buf->alias_of] = buf->offset + buf->nbytes;
    }
    for (int d = 0; d < p->nbuffers; d++)
        if (p->buffers[d].kind == CJ_BUF_PARAM)
            p->alias_bytes += extent[d] < p->buffers[d].nbytes ? extent[d] : p->buffers[d].nbytes;
    free(extent);
    /* outputs are never placed in arguments yet, so nothing is counted twice */
    p->peak_bytes = p->argument_bytes + p->output_bytes + p->temp_bytes;

    /* the group at which the most temporary bytes are live names peak_live */
    /* (bytes becoming live at each group, less those dying before it, summed) */
    for (int b = 0; b < p->nbuffers; b++) {
        const cj_buffer *buf = &p->buffers[b];
        if (buf->kind != CJ_BUF_TEMP || buf->alias_of >= 0 || buf->first_use < 0) continue;
        live_at[buf->first_use] += buf->nbytes;
        live_at[buf->last_use + 1] -= buf->nbytes;
    }
    int64_t best = -1, live = 0;
    p->peak_kernel = 0;
    for (int k = 0; k < p->ngroups; k++) {
        live += live_at[k];
        if (live > best) {
            best = live;
            p->peak_kernel = k;
        }
    }
    free(live_at);
    return CJ_OK;
}
