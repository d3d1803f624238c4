/* memplan.c - where every byte of one call lives.
 *
 * Liveness over the kernel schedule: a temporary is live from the kernel
 * that first writes it to the last kernel that reads it.  Temporaries are
 * placed in one arena, largest first, each at the lowest offset that does
 * not overlap a placed buffer whose lifetime overlaps its own ("greedy by
 * size", as in TensorFlow Lite's planner and XLA's heap simulator); when
 * that leaves holes at its peak, again in other orders (the buffers live
 * at the step with the most bytes first, then the next step's, ...), and
 * the smallest arena is kept.
 *
 * The peak is exact for the plan that runs: arguments and closed-over
 * arrays are held for the whole call, outputs are allocated before the
 * first kernel and the arena for the whole call.  An output placed in a
 * donated argument (same shape and dtype) takes no new bytes: it is
 * written over the argument in place, or once the argument's last reader
 * is done, and the caller gets the argument's memory back as the result
 * (py_exec.c).
 *
 * A temporary that one group writes and reads, and nothing else, may take
 * one block of rows per thread instead of its array (blockmem.c); placement
 * counts cj_buffer_bytes, the bytes a buffer takes. */
#include <stdlib.h>
#include <string.h>

#include "blockmem.h"
#include "memorder.h" /* the orders for donation; group.c's result arrives as data (cj_group) */

#define CJ_ARENA_ALIGN 64

static int64_t align_up(int64_t n) { return (n + CJ_ARENA_ALIGN - 1) / CJ_ARENA_ALIGN * CJ_ARENA_ALIGN; }

static void note_use(cj_buffer *b, int k) {
    if (b->first_use < 0 || k < b->first_use) b->first_use = k;
    if (k > b->last_use) b->last_use = k;
}

/* Liveness in steps of groups: the stages of a group interleave row block
 * by row block, so a buffer touched by any stage is live for the group.
 * first_touch (per buffer) gets the first group that touches it, before
 * arguments and outputs are made live for the whole call. */
static void compute_liveness(cj_plan *p, int *first_touch) {
    for (int b = 0; b < p->nbuffers; b++) p->buffers[b].first_use = p->buffers[b].last_use = -1;
    for (int g = 0; g < p->ngroups; g++) {
        for (int k = p->groups[g].first; k < p->groups[g].first + p->groups[g].count; k++) {
            const cj_kernel *kern = &p->kernels[k];
            note_use(&p->buffers[kern->out_buffer], g);
            for (int i = 0; i < kern->nalso; i++) note_use(&p->buffers[kern->also[i].buffer], g);
            for (int e = 0; e < kern->nexprs; e++)
                if (cj_expr_reads(&kern->exprs[e])) note_use(&p->buffers[kern->exprs[e].buffer], g);
        }
    }
    /* arguments and outputs are held for the whole call */
    for (int b = 0; b < p->nbuffers; b++) {
        cj_buffer *buf = &p->buffers[b];
        first_touch[b] = buf->first_use;
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
    int64_t a = cj_buffer_bytes(&bufs[*(const int *)x]), b = cj_buffer_bytes(&bufs[*(const int *)y]);
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
    *f = (plan_facts){0};
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
            if (!cj_expr_reads(ex) || counted_by[ex->buffer] == k) continue;
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

/* Does stage kern read buffer x anywhere but at `at`? */
static bool reads_elsewhere(const cj_kernel *kern, int x, const cj_affine *at, int rank) {
    for (int e = 0; e < kern->nexprs; e++) {
        const cj_expr *ex = &kern->exprs[e];
        if (ex->kind == CJ_EX_LOAD && ex->buffer == x && !same_index(&ex->index, at, rank)) return true;
        if (ex->kind == CJ_EX_GATHER && ex->buffer == x) return true; /* anywhere */
    }
    return false;
}

static bool reads_buffer(const cj_kernel *kern, int x) {
    for (int e = 0; e < kern->nexprs; e++)
        if (cj_expr_reads(&kern->exprs[e]) && kern->exprs[e].buffer == x) return true;
    return false;
}

static bool same_loops(const cj_kernel *a, const cj_kernel *b) {
    if (a->rank != b->rank) return false;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d]) return false;
    return true;
}

/* Is stage k the last reader of buffer x, reading each element only where
 * it writes it at `at` (so that it may overwrite x as it goes)?  Reads by
 * stages of earlier groups are fine; any other read is not, except, when
 * `group_readers`, reads by earlier stages of k's own group that run over
 * the same loops and read x only at `at` too: a group runs its stages
 * block of rows by block of rows, so each of them has read an element
 * before k writes it (`(x, x + 1)`: the copy that returns x may write over
 * x after the add has read it). */
static bool last_read_in_place(const cj_plan *p, const plan_facts *f, int x, int k, const cj_affine *at,
                               bool group_readers) {
    const cj_kernel *kern = &p->kernels[k];
    int g = f->group_of[k];
    if (f->last_group[x] != g || reads_elsewhere(kern, x, at, kern->rank)) return false;
    if (f->last_readers[x] == 1) return true;
    if (!group_readers) return false;
    const cj_group *grp = &p->groups[g];
    for (int j = grp->first; j < grp->first + grp->count; j++) {
        const cj_kernel *other = &p->kernels[j];
        if (j == k || !reads_buffer(other, x)) continue;
        if (j > k || !same_loops(other, kern) || reads_elsewhere(other, x, at, kern->rank)) return false;
    }
    return true;
}



/* In-place updates: an elementwise stage whose input dies as it is read
 * writes over it.  A temporary that dies into an output lives in the
 * output's array; a temporary written over a dying temporary shares its
 * bytes; one written over a dying donated argument lives in the argument;
 * an output written over a dying donated argument of its shape and dtype
 * is that argument's memory, returned to the caller.  Here for the value
 * stage k stores into buffer y at `at`; an output looks for a donated
 * argument first (pass 0), then for a temporary to take in (pass 1). */
static void store_in_place(cj_plan *p, const plan_facts *f, bool *hosts, int k, int y, const cj_affine *at) {
    const cj_kernel *kern = &p->kernels[k];
    cj_buffer *Y = &p->buffers[y];
    /* a scatter fills its output with the identity before it reads anything */
    if (kern->loop || kern->reduced || kern->scatter.on || kern->call || Y->alias_of >= 0 || hosts[y] || f->writers[y] != 1)
        return;
    if (Y->kind != CJ_BUF_TEMP && Y->kind != CJ_BUF_OUTPUT) return;
    /* pass -1: an output over the donated argument of its own slot (a train
     * step's new parameters over the old ones, when the outputs' tree starts
     * like the arguments'); pass 0: over any donated argument */
    for (int pass = Y->kind == CJ_BUF_OUTPUT ? -1 : 1; pass < 2; pass++) {
        for (int e = 0; e < kern->nexprs; e++) {
            const cj_expr *ex = &kern->exprs[e];
            if (ex->kind != CJ_EX_LOAD || ex->buffer == y) continue;
            int x = ex->buffer;
            cj_buffer *X = &p->buffers[x];
            bool donated = cj_is_donated(p, X);
            if (X->alias_of >= 0 || hosts[x]) continue;
            if (pass == -1 && X->slot != Y->slot) continue;
            if (pass <= 0) {
                /* an output over a donated argument */
                if (!donated || !cj_output_fits_donor(Y, X) || !last_read_in_place(p, f, x, k, at, true)) continue;
                Y->alias_of = x;
                hosts[x] = true;
                Y->offset = 0;
                Y->first_use = f->group_of[k]; /* its bytes are the argument's until then */
                return;
            }
            if (X->kind != CJ_BUF_TEMP && !donated) continue;
            if (X->nbytes != Y->nbytes || cj_dtype_size(X->dtype) != cj_dtype_size(Y->dtype) ||
                !last_read_in_place(p, f, x, k, at, false))
                continue;
            if (X->kind == CJ_BUF_TEMP && Y->kind == CJ_BUF_OUTPUT) {
                X->alias_of = y; /* x is computed straight into the output array */
                hosts[y] = true;
            } else if (Y->kind == CJ_BUF_TEMP) {
                Y->alias_of = x; /* y overwrites x */
                hosts[x] = true;
                if (X->kind == CJ_BUF_TEMP && Y->last_use > X->last_use) X->last_use = Y->last_use;
            } else {
                continue; /* an output over a donated argument of another shape or dtype */
            }
            X->offset = Y->offset = 0;
            return;
        }
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

/* Outputs after the last read: an output not yet in a donated argument
 * takes one of its shape and dtype whose last reader ran in an earlier
 * group than the output's first write (a reduction's result, a matmul's
 * output, a later layer), and in which nothing placed in place is still
 * live by then.  The output's bytes are in use from the first group that
 * writes it, or writes a value computed straight into it, to the end of
 * the call; its first_use is set to that group, so that temporaries placed
 * in the argument later (place_in_donor) stay clear of it.  Outputs take
 * donors in slot order, each the first that fits.  Returns false when out
 * of memory. */
static bool outputs_after_last_read(cj_plan *p, const plan_facts *f, bool *hosts, const int *first_touch) {
    int *start = malloc(sizeof(int) * ((size_t)p->nbuffers + 1));       /* per output */
    int *busy_until = malloc(sizeof(int) * ((size_t)p->nbuffers + 1));  /* per donor: its residents' end */
    int *donors = malloc(sizeof(int) * ((size_t)p->nbuffers + 1));
    int *outputs = malloc(sizeof(int) * ((size_t)p->nbuffers + 1));
    if (!start || !busy_until || !donors || !outputs) {
        free(start), free(busy_until), free(donors), free(outputs);
        return false;
    }
    int ndonors = 0, noutputs = 0;
    for (int b = 0; b < p->nbuffers; b++) {
        start[b] = first_touch[b];
        busy_until[b] = -1;
    }
    for (int b = 0; b < p->nbuffers; b++) {
        const cj_buffer *buf = &p->buffers[b];
        if (buf->alias_of < 0) continue;
        if (buf->first_use >= 0 && buf->first_use < start[buf->alias_of]) start[buf->alias_of] = buf->first_use;
        if (buf->last_use > busy_until[buf->alias_of]) busy_until[buf->alias_of] = buf->last_use;
    }
    for (int b = 0; b < p->nbuffers; b++) {
        const cj_buffer *buf = &p->buffers[b];
        if (buf->kind == CJ_BUF_OUTPUT && buf->alias_of < 0 && start[b] >= 0) outputs[noutputs++] = b;
        /* (one holding an output in place is busy to the end: see busy_until) */
        if (cj_is_donated(p, buf) && buf->nbytes > 0) donors[ndonors++] = b;
    }
    /* outputs in slot order (buffers are in kernel order); the loops are
     * outputs times donors, a million steps for a thousand of each */
    for (int i = 1; i < noutputs; i++)
        for (int j = i; j > 0 && p->buffers[outputs[j]].slot < p->buffers[outputs[j - 1]].slot; j--) {
            int t = outputs[j];
            outputs[j] = outputs[j - 1];
            outputs[j - 1] = t;
        }
    for (int i = 0; i < noutputs; i++) {
        int y = outputs[i];
        cj_buffer *Y = &p->buffers[y];
        for (int jj = -1; jj < ndonors; jj++) {
            /* first the donor of the output's own slot, as in place */
            int j = jj;
            if (jj == -1)
                for (j = 0; j < ndonors && !(donors[j] >= 0 && p->buffers[donors[j]].slot == Y->slot); j++) {}
            if (j >= ndonors) continue;
            int x = donors[j];
            if (x < 0 || !cj_output_fits_donor(Y, &p->buffers[x]) || f->last_group[x] >= start[y] ||
                busy_until[x] >= start[y])
                continue;
            Y->alias_of = x;
            Y->offset = 0;
            Y->first_use = start[y];
            hosts[x] = true;
            donors[j] = -1;
            break;
        }
    }
    free(start), free(busy_until), free(donors), free(outputs);
    return true;
}

/* Places temporary t in a donated argument whose last reader ran before
 * t's first writer, at the lowest offset clear of the temporaries already
 * there that overlap t in time.  Returns whether it did. */
static bool place_in_donor(cj_plan *p, int t, const int *donor_end) {
    cj_buffer *b = &p->buffers[t];
    int64_t size = align_up(cj_buffer_bytes(b));
    for (int d = 0; d < p->nbuffers; d++) {
        if (donor_end[d] < -1 || donor_end[d] >= b->first_use || p->buffers[d].nbytes < cj_buffer_bytes(b)) continue;
        int64_t offset = 0;
        bool moved = true;
        while (moved) {
            moved = false;
            /* everything already living in d: placed here, or updated in place */
            for (int j = 0; j < p->nbuffers; j++) {
                const cj_buffer *o = &p->buffers[j];
                if (j == t || o->alias_of != d || !lifetimes_overlap(b, o)) continue;
                int64_t oend = o->offset + align_up(cj_buffer_bytes(o));
                if (offset < oend && o->offset < offset + size) {
                    offset = oend;
                    moved = true;
                }
            }
        }
        if (offset + cj_buffer_bytes(b) <= p->buffers[d].nbytes) {
            b->alias_of = d;
            b->offset = offset;
            return true;
        }
    }
    return false;
}

/* ---- placement in time order, for plans with many temporaries -------------
 * Greedy by size checks each temporary against every placed one live at
 * the same time, and in a long gradient the saved forward values are all
 * live at once: quadratic.  Past CJ_PLACE_BY_SIZE_MAX temporaries they
 * are placed in order of first use instead, each in the smallest hole
 * that the ones already dead left (or at the end), with holes merged as
 * they free.  The plan stays exact (the arena is what this placed); it
 * may be a little larger than greedy by size would make it. */
#define CJ_PLACE_BY_SIZE_MAX 2048

typedef struct {
    int64_t offset, size;
} hole;

static int by_first_use(const void *x, const void *y, void *ctx) {
    const cj_buffer *bufs = ctx;
    const cj_buffer *a = &bufs[*(const int *)x], *b = &bufs[*(const int *)y];
    if (a->first_use != b->first_use) return a->first_use < b->first_use ? -1 : 1;
    return by_size_desc(x, y, ctx);
}

static int by_last_use(const void *x, const void *y, void *ctx) {
    const cj_buffer *bufs = ctx;
    int a = bufs[*(const int *)x].last_use, b = bufs[*(const int *)y].last_use;
    if (a != b) return a < b ? -1 : 1;
    return *(const int *)x - *(const int *)y;
}

/* Gives [offset, offset + size) back: a hole, merged with its neighbours;
 * one that reaches *end lowers it instead. */
static void release(hole *holes, int *nholes, int64_t *end, int64_t offset, int64_t size) {
    int i = 0;
    while (i < *nholes && holes[i].offset < offset) i++;
    memmove(&holes[i + 1], &holes[i], sizeof(hole) * (size_t)(*nholes - i));
    holes[i] = (hole){offset, size};
    (*nholes)++;
    if (i + 1 < *nholes && holes[i].offset + holes[i].size == holes[i + 1].offset) {
        holes[i].size += holes[i + 1].size;
        memmove(&holes[i + 1], &holes[i + 2], sizeof(hole) * (size_t)(*nholes - i - 2));
        (*nholes)--;
    }
    if (i > 0 && holes[i - 1].offset + holes[i - 1].size == holes[i].offset) {
        holes[i - 1].size += holes[i].size;
        memmove(&holes[i], &holes[i + 1], sizeof(hole) * (size_t)(*nholes - i - 1));
        (*nholes)--;
        i--;
    }
    if (holes[i].offset + holes[i].size == *end) {
        *end = holes[i].offset;
        (*nholes)--;
    }
}

/* Places temporaries temps[0..n) (in the arena) in order of first use;
 * returns the arena's size, or -1 when out of memory. */
static int64_t place_in_time_order(cj_plan *p, int *temps, int n) {
    int *ends = malloc(sizeof(int) * ((size_t)n + 1));
    hole *holes = malloc(sizeof(hole) * ((size_t)n + 1));
    if (!ends || !holes) {
        free(ends);
        free(holes);
        return -1;
    }
    memcpy(ends, temps, sizeof(int) * (size_t)n);
    qsort_r(temps, (size_t)n, sizeof(int), by_first_use, p->buffers);
    qsort_r(ends, (size_t)n, sizeof(int), by_last_use, p->buffers);
    int nholes = 0, j = 0;
    int64_t end = 0, arena = 0;
    for (int i = 0; i < n; i++) {
        cj_buffer *b = &p->buffers[temps[i]];
        for (; j < n && p->buffers[ends[j]].last_use < b->first_use; j++) {
            const cj_buffer *d = &p->buffers[ends[j]];
            release(holes, &nholes, &end, d->offset, align_up(cj_buffer_bytes(d)));
        }
        int64_t size = align_up(cj_buffer_bytes(b));
        int best = -1;
        for (int h = 0; h < nholes; h++)
            if (holes[h].size >= size && (best < 0 || holes[h].size < holes[best].size)) best = h;
        if (best >= 0) {
            b->offset = holes[best].offset;
            holes[best].offset += size;
            holes[best].size -= size;
            if (holes[best].size == 0) {
                memmove(&holes[best], &holes[best + 1], sizeof(hole) * (size_t)(nholes - best - 1));
                nholes--;
            }
        } else {
            b->offset = end;
            end += size;
            if (end > arena) arena = end;
        }
    }
    free(ends);
    free(holes);
    return arena;
}

/* Places temporaries temps[0..n) in the arena in that order, each at the
 * lowest offset clear of every placed one that overlaps it in time
 * (candidates: 0 and the ends of placed ones); `placed` is scratch for n.
 * Returns the arena's size. */
static int64_t place_greedy(cj_plan *p, const int *temps, int n, int *placed) {
    int64_t arena = 0;
    for (int i = 0; i < n; i++) {
        cj_buffer *b = &p->buffers[temps[i]];
        int64_t size = align_up(cj_buffer_bytes(b)), offset = 0;
        bool moved = true;
        while (moved) {
            moved = false;
            for (int j = 0; j < i; j++) {
                const cj_buffer *o = &p->buffers[placed[j]];
                if (!lifetimes_overlap(b, o)) continue;
                int64_t oend = o->offset + align_up(cj_buffer_bytes(o));
                if (offset < oend && o->offset < offset + size) {
                    offset = oend;
                    moved = true;
                }
            }
        }
        b->offset = offset;
        placed[i] = temps[i];
        if (offset + size > arena) arena = offset + size;
    }
    return arena;
}

/* Plans the memory of the kernels in their current order. */
static cj_status plan_memory(cj_plan *p, bool enabled, const int64_t *gemm_scale, cj_error *err) {
    int n = 0;
    int *first_touch = malloc(sizeof(int) * ((size_t)p->nbuffers + 1));
    int *order = malloc(sizeof(int) * ((size_t)p->nbuffers + 1));
    int *placed = malloc(sizeof(int) * ((size_t)p->nbuffers + 1));
    bool *hosts = calloc((size_t)p->nbuffers + 1, sizeof(bool));
    int *donor_end = calloc((size_t)p->nbuffers + 1, sizeof(int));
    plan_facts facts = {0};
    bool ok = first_touch && order && placed && hosts && donor_end && facts_gather(p, &facts);
    if (ok) {
        compute_liveness(p, first_touch);
        for (int b = 0; b < p->nbuffers; b++) p->buffers[b].alias_of = -1;
        if (enabled) plan_in_place(p, &facts, hosts);
        /* outputs first written after a donated argument's last read live in it */
        if (enabled && p->donated) ok = outputs_after_last_read(p, &facts, hosts, first_touch);
        /* temporaries only one group touches: a block of rows per thread */
        if (enabled) cj_block_storage_mark(p, gemm_scale);
        else cj_block_storage_clear(p);
    }
    free(first_touch);
    if (!ok) {
        facts_free(&facts);
        free(order);
        free(placed);
        free(hosts);
        free(donor_end);
        return cj_error_set(err, CJ_ERR_MEMORY, "memplan: out of memory");
    }
    /* a donated argument takes temporaries once its last reader is done */
    int ndonors = 0;
    for (int b = 0; b < p->nbuffers; b++) {
        const cj_buffer *buf = &p->buffers[b];
        bool donated = buf->kind == CJ_BUF_PARAM && p->donated && p->donated[buf->slot];
        donor_end[b] = donated && enabled ? facts.last_group[b] : -2;
        ndonors += donor_end[b] >= -1;
    }
    facts_free(&facts);
    for (int b = 0; b < p->nbuffers; b++) {
        cj_buffer *buf = &p->buffers[b];
        if (buf->block_on_stack) buf->offset = 0; /* in the driver's frame, not the arena */
        else if (buf->kind == CJ_BUF_TEMP && buf->alias_of < 0) order[n++] = b;
    }
    qsort_r(order, (size_t)n, sizeof(int), by_size_desc, p->buffers);

    /* temporaries in donated arguments first; the rest in the arena */
    int rest = 0;
    for (int i = 0; i < n; i++)
        if (!(ndonors && !hosts[order[i]] && place_in_donor(p, order[i], donor_end))) order[rest++] = order[i];
    int64_t arena;
    if (!enabled) {
        arena = 0;
        for (int i = 0; i < rest; i++) {
            p->buffers[order[i]].offset = arena;
            arena += align_up(cj_buffer_bytes(&p->buffers[order[i]]));
        }
    } else if (rest > CJ_PLACE_BY_SIZE_MAX) {
        arena = place_in_time_order(p, order, rest);
    } else {
        /* greedy by size, and again with the buffers live where the most
         * bytes are placed first (together, at the bottom): the smaller */
        arena = place_greedy(p, order, rest, placed);
        int64_t *offsets = malloc(sizeof(int64_t) * ((size_t)rest + 1));
        int *alt = malloc(sizeof(int) * ((size_t)rest + 1));
        int64_t *live_at = calloc((size_t)p->ngroups + 2, sizeof(int64_t));
        if (!offsets || !alt || !live_at) {
            arena = -1;
        } else if (arena > 0) {
            for (int i = 0; i < rest; i++) {
                const cj_buffer *b = &p->buffers[order[i]];
                offsets[i] = b->offset;
                if (b->first_use < 0) continue;
                live_at[b->first_use] += align_up(cj_buffer_bytes(b));
                live_at[b->last_use + 1] -= align_up(cj_buffer_bytes(b));
            }
            /* steps by their live bytes, most first (insertion sort of a
             * few thousand at most); each step's buffers not yet taken */
            int *steps = malloc(sizeof(int) * ((size_t)p->ngroups + 1));
            int64_t live = 0, most = 0;
            if (!steps) {
                free(offsets), free(alt), free(live_at);
                free(order), free(placed), free(hosts), free(donor_end);
                return cj_error_set(err, CJ_ERR_MEMORY, "memplan: out of memory");
            }
            for (int g = 0; g < p->ngroups; g++) {
                live_at[g] = live += live_at[g];
                if (live > most) most = live;
                int j = g;
                for (; j > 0 && live_at[steps[j - 1]] < live; j--) steps[j] = steps[j - 1];
                steps[j] = g;
            }
            /* candidates: 0, each step's buffers largest first; 1, each
             * step's buffers first born first; 2, first born first */
            int *born = malloc(sizeof(int) * ((size_t)rest + 1));
            for (int cand = 0; born && cand < 3 && most < arena; cand++) {
                memcpy(born, order, sizeof(int) * (size_t)rest);
                if (cand > 0) qsort_r(born, (size_t)rest, sizeof(int), by_first_use, p->buffers);
                const int *from = cand == 0 ? order : born;
                int m = 0;
                for (int i = 0; i < rest; i++) p->buffers[order[i]].offset = 0;
                for (int s = cand == 2 ? p->ngroups : 0; s <= p->ngroups; s++)
                    for (int i = 0; i < rest; i++) {
                        cj_buffer *b = &p->buffers[from[i]];
                        bool take = s < p->ngroups ? b->first_use <= steps[s] && steps[s] <= b->last_use : true;
                        if (take && b->offset >= 0) {
                            alt[m++] = from[i];
                            b->offset = -1; /* taken */
                        }
                    }
                int64_t other = place_greedy(p, alt, rest, placed);
                if (other < arena) {
                    arena = other;
                    for (int i = 0; i < rest; i++) offsets[i] = p->buffers[order[i]].offset;
                }
            }
            free(born);
            for (int i = 0; i < rest; i++) p->buffers[order[i]].offset = offsets[i];
            free(steps);
        }
        free(offsets), free(alt), free(live_at);
    }
    if (arena < 0) {
        free(order);
        free(placed);
        free(hosts);
        free(donor_end);
        return cj_error_set(err, CJ_ERR_MEMORY, "memplan: out of memory");
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
        /* an output in a donated argument takes no bytes of its own */
        if (buf->kind == CJ_BUF_OUTPUT && buf->alias_of < 0) p->output_bytes += buf->nbytes;
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
        if (buf->alias_of >= 0 && buf->offset + cj_buffer_bytes(buf) > extent[buf->alias_of])
            extent[buf->alias_of] = buf->offset + cj_buffer_bytes(buf);
    }
    for (int d = 0; d < p->nbuffers; d++)
        if (p->buffers[d].kind == CJ_BUF_PARAM)
            p->alias_bytes += extent[d] < p->buffers[d].nbytes ? extent[d] : p->buffers[d].nbytes;
    free(extent);
    /* outputs in donated arguments are in neither output_bytes nor the arena */
    p->peak_bytes = p->argument_bytes + p->output_bytes + p->temp_bytes;

    /* the group at which the most temporary bytes are live names peak_live */
    /* (bytes becoming live at each group, less those dying before it, summed) */
    for (int b = 0; b < p->nbuffers; b++) {
        const cj_buffer *buf = &p->buffers[b];
        if (buf->kind != CJ_BUF_TEMP || buf->alias_of >= 0 || buf->first_use < 0) continue;
        live_at[buf->first_use] += cj_buffer_bytes(buf);
        live_at[buf->last_use + 1] -= cj_buffer_bytes(buf);
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


/* Does a gemm-led group of p run blocks smaller than its thread's rows
 * (block storage)? */
static bool gemm_blocks(const cj_plan *p) {
    for (int g = 0; g < p->ngroups; g++)
        if (p->groups[g].local_block > 0 && p->kernels[p->groups[g].first].gemm.on) return true;
    return false;
}

/* Block storage planned, gemm-led groups run their smallest blocks (two
 * rows while B is read from cache: a gemm call per two rows).  Each such
 * group's block doubles, one group at a time, while the plan's peak stays
 * (a block is only as small as the peak needs), replanning in the kept
 * order; a doubling that raises the peak is planned back. */
static cj_status widen_gemm_blocks(cj_plan *p, bool enabled, cj_error *err) {
    int64_t *scale = malloc(sizeof(int64_t) * ((size_t)p->ngroups + 1));
    if (!scale) return cj_error_set(err, CJ_ERR_MEMORY, "memplan: out of memory");
    for (int g = 0; g < p->ngroups; g++) scale[g] = 1;
    int64_t peak = p->peak_bytes;
    cj_status st = CJ_OK;
    for (int g = 0; g < p->ngroups && st == CJ_OK; g++) {
        const cj_group *grp = &p->groups[g];
        while (st == CJ_OK && grp->local_block > 0 && p->kernels[grp->first].gemm.on && scale[g] < grp->rows) {
            scale[g] *= 2;
            st = plan_memory(p, enabled, scale, err);
            if (st == CJ_OK && p->peak_bytes > peak) {
                scale[g] /= 2;
                st = plan_memory(p, enabled, scale, err);
                break;
            }
        }
    }
    free(scale);
    return st;
}

/* Updates joined to the gemm making their gradient (memorder.c, on the
 * partners group.c found), so that it takes block storage: one pair at a
 * time, after the update groups are split, each kept unless the peak grows (a gemm group moved down may keep
 * an activation alive longer).  One that leaves the peak where it is is
 * kept: the peak may be at another layer's gradient, which a later join
 * lowers.  groups and kernels: scratch for the plan's. */
#define CJ_JOIN_TRIES 64 /* tries, each a plan: in a very deep network the later pairs stay apart */

static cj_status join_updates(cj_plan *p, bool enabled, cj_group *groups, cj_kernel *kernels, cj_error *err) {
    cj_status st = CJ_OK;
    bool stale = false;  /* the plan's figures are of a try that was undone */
    for (int which = 0, tries = 0; st == CJ_OK && tries < CJ_JOIN_TRIES; tries++) {
        int64_t peak = p->peak_bytes;
        int ngroups = p->ngroups;
        memcpy(groups, p->groups, sizeof(cj_group) * (size_t)p->ngroups);
        memcpy(kernels, p->kernels, sizeof(cj_kernel) * (size_t)p->nkernels);
        int split = cj_split_update_groups(p);
        int joined = split < 0 ? -1 : cj_order_join_update(p, which);
        if (joined < 0) st = cj_error_set(err, CJ_ERR_MEMORY, "memplan: out of memory");
        if (joined > 0) st = plan_memory(p, enabled, NULL, err);
        if (st == CJ_OK && joined > 0 && p->peak_bytes <= peak) {
            stale = false;
            continue;   /* kept: the next pair is now the which-th */
        }
        p->ngroups = ngroups;
        memcpy(p->groups, groups, sizeof(cj_group) * (size_t)p->ngroups);
        memcpy(p->kernels, kernels, sizeof(cj_kernel) * (size_t)p->nkernels);
        p->peak_bytes = peak;
        stale |= joined > 0;
        if (joined <= 0) break;
        which++;
    }
    return st == CJ_OK && stale ? plan_memory(p, enabled, NULL, err) : st;
}

/* Plans p's memory in the fuser's order and, with donated arguments, in the
 * orders of memorder.c (and its joins), keeping the lowest peak. */
static cj_status plan_in_an_order(cj_plan *p, bool enabled, cj_error *err) {
    cj_status st = plan_memory(p, enabled, NULL, err);
    bool any_donated = false;
    for (int b = 0; enabled && p->donated && b < p->nbuffers; b++) any_donated |= cj_is_donated(p, &p->buffers[b]);
    if (st != CJ_OK || !any_donated || p->ngroups < 2)
        return st == CJ_OK && gemm_blocks(p) ? widen_gemm_blocks(p, enabled, err) : st;
    /* try the orders for donation in turn, each on the best so far, the
     * last with update groups split; keep one only if it lowers the peak */
    cj_group *groups = malloc(sizeof(cj_group) * ((size_t)p->nkernels + 1));
    cj_kernel *kernels = malloc(sizeof(cj_kernel) * ((size_t)p->nkernels + 1));
    if (!groups || !kernels) {
        free(groups), free(kernels);
        return cj_error_set(err, CJ_ERR_MEMORY, "memplan: out of memory");
    }
    for (int attempt = 0; attempt < 3 && st == CJ_OK; attempt++) {
        int64_t peak = p->peak_bytes;
        int ngroups = p->ngroups;
        memcpy(groups, p->groups, sizeof(cj_group) * (size_t)p->ngroups);
        memcpy(kernels, p->kernels, sizeof(cj_kernel) * (size_t)p->nkernels);
        int moved = attempt == 0 ? cj_order_for_donation(p) : attempt == 1 ? cj_order_last_readers_first(p)
                                                                       : cj_split_update_groups(p);
        if (attempt == 2 && moved > 0) {
            int a = cj_order_for_donation(p), b = a < 0 ? -1 : cj_order_last_readers_first(p);
            if (a < 0 || b < 0) moved = -1;
        }
        if (moved < 0) st = cj_error_set(err, CJ_ERR_MEMORY, "memplan: out of memory");
        if (moved > 0) st = plan_memory(p, enabled, NULL, err);
        if (moved > 0 && st == CJ_OK && p->peak_bytes >= peak) {
            p->ngroups = ngroups;
            memcpy(p->groups, groups, sizeof(cj_group) * (size_t)p->ngroups);
            memcpy(p->kernels, kernels, sizeof(cj_kernel) * (size_t)p->nkernels);
            st = plan_memory(p, enabled, NULL, err);
        }
    }
    if (st == CJ_OK) st = join_updates(p, enabled, groups, kernels, err);
    free(groups), free(kernels);
    if (st == CJ_OK && gemm_blocks(p)) st = widen_gemm_blocks(p, enabled, err);
    return st;
}

/* See kernel.h. */
cj_status cj_memplan_run(cj_plan *p, bool enabled, cj_error *err) { return plan_in_an_order(p, enabled, err); }
