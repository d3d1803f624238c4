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
 * first kernel and the arena for the whole call.  An output placed in a
 * donated argument (same shape and dtype) takes no new bytes: it is
 * written over the argument in place, or once the argument's last reader
 * is done, and the caller gets the argument's memory back as the result
 * (py_exec.c). */
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

static bool is_donated(const cj_plan *p, const cj_buffer *b) {
    return b->kind == CJ_BUF_PARAM && p->donated && p->donated[b->slot];
}

/* May output y live in donated argument x?  Same dtype and shape, as JAX
 * asks of an output that takes a donated buffer, and some bytes. */
static bool output_fits_donor(const cj_buffer *y, const cj_buffer *x) {
    if (x->dtype != y->dtype || x->shape.rank != y->shape.rank || y->nbytes == 0) return false;
    for (int d = 0; d < x->shape.rank; d++)
        if (x->shape.dims[d] != y->shape.dims[d]) return false;
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
            bool donated = is_donated(p, X);
            if (X->alias_of >= 0 || hosts[x]) continue;
            if (pass == -1 && X->slot != Y->slot) continue;
            if (pass <= 0) {
                /* an output over a donated argument */
                if (!donated || !output_fits_donor(Y, X) || !last_read_in_place(p, f, x, k, at, true)) continue;
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
        if (is_donated(p, buf) && buf->nbytes > 0) donors[ndonors++] = b;
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
            if (x < 0 || !output_fits_donor(Y, &p->buffers[x]) || f->last_group[x] >= start[y] ||
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
            release(holes, &nholes, &end, d->offset, align_up(d->nbytes));
        }
        int64_t size = align_up(b->nbytes);
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

/* Plans the memory of the kernels in their current order. */
static cj_status plan_memory(cj_plan *p, bool enabled, cj_error *err) {
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
    for (int b = 0; b < p->nbuffers; b++)
        if (p->buffers[b].kind == CJ_BUF_TEMP && p->buffers[b].alias_of < 0) order[n++] = b;
    qsort_r(order, (size_t)n, sizeof(int), by_size_desc, p->buffers);

    int64_t arena = 0;
    int nplaced = 0;
    if (enabled && n > CJ_PLACE_BY_SIZE_MAX) {
        /* donors first, as below; the rest in time order */
        int rest = 0;
        for (int i = 0; i < n; i++)
            if (!(ndonors && !hosts[order[i]] && place_in_donor(p, order[i], donor_end))) order[rest++] = order[i];
        arena = place_in_time_order(p, order, rest);
        n = 0; /* nothing left for the loop below */
        if (arena < 0) {
            free(order);
            free(placed);
            free(hosts);
            free(donor_end);
            return cj_error_set(err, CJ_ERR_MEMORY, "memplan: out of memory");
        }
    }
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
        if (buf->alias_of >= 0 && buf->offset + buf->nbytes > extent[buf->alias_of])
            extent[buf->alias_of] = buf->offset + buf->nbytes;
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


/* ---- an order for donation: updates right after what they need ---------- */

/* With donated arguments, a group that stores only outputs (an optimizer's
 * update of one layer) may run as soon as its inputs exist, instead of
 * where the trace put it (after every layer's gradient): the temporaries it
 * reads last (that layer's gradient) then die there, instead of all of them
 * living until the end.  Without donation such a gradient is computed
 * straight into its output array, so the order does not matter; with it,
 * the output lives in the donated argument and the gradient needs bytes of
 * its own while it lives.  Groups that read arguments only and store a few
 * bytes of temporaries (the step count's bias correction) go as early too.
 *
 * A group is moved before no group that writes what it reads or writes,
 * reads what it writes, or reads a donated argument that it reads or whose
 * shape and dtype one of its outputs has (so that it stays the argument's
 * last reader, and may write over it).  The order is kept only when the
 * plan's peak is lower (cj_memplan_run), so it never costs bytes. */

#define SMALL_TEMP_BYTES 64

typedef struct {
    int *stamp_read, *stamp_write, *stamp_donor; /* per buffer: marked for the group placed */
    int *stamp_target;  /* donated arguments it reads that one of its outputs could take */
} order_marks;

/* Does group h touch what group g (marked with `mark`) must follow?  With
 * `donors` false, only the data: h writes what g reads or writes, or reads
 * what g writes. */
static bool must_follow(const cj_plan *p, const cj_group *h, const order_marks *m, int mark, bool donors) {
    for (int k = h->first; k < h->first + h->count; k++) {
        const cj_kernel *kern = &p->kernels[k];
        if (m->stamp_read[kern->out_buffer] == mark || m->stamp_write[kern->out_buffer] == mark) return true;
        for (int i = 0; i < kern->nalso; i++) {
            int b = kern->also[i].buffer;
            if (m->stamp_read[b] == mark || m->stamp_write[b] == mark) return true;
        }
        for (int e = 0; e < kern->nexprs; e++) {
            int b = kern->exprs[e].buffer;
            if (cj_expr_reads(&kern->exprs[e]) && (m->stamp_write[b] == mark || (donors && m->stamp_donor[b] == mark)))
                return true;
        }
    }
    return false;
}

static bool reads_marked(const cj_plan *p, const cj_group *h, const int *stamp, int mark) {
    for (int k = h->first; k < h->first + h->count; k++) {
        const cj_kernel *kern = &p->kernels[k];
        for (int e = 0; e < kern->nexprs; e++)
            if (cj_expr_reads(&kern->exprs[e]) && stamp[kern->exprs[e].buffer] == mark) return true;
    }
    return false;
}

/* Marks what group g reads and writes; returns whether it may move
 * earlier: it stores only outputs and reads some temporary, or reads no
 * temporary and stores at most SMALL_TEMP_BYTES of temporaries.  *sink:
 * whether it may move later, to after the last reader of a donated
 * argument that one of its outputs could take (it stores only outputs and
 * reads such an argument). */
static bool mark_group(const cj_plan *p, const cj_group *g, const int *donors, int ndonors, order_marks *m,
                       int mark, bool *sink) {
    int64_t temp_stored = 0;
    bool reads_temp = false;
    for (int k = g->first; k < g->first + g->count; k++) {
        const cj_kernel *kern = &p->kernels[k];
        for (int i = -1; i < kern->nalso; i++) {
            int b = i < 0 ? kern->out_buffer : kern->also[i].buffer;
            m->stamp_write[b] = mark;
            if (p->buffers[b].kind == CJ_BUF_TEMP) temp_stored += p->buffers[b].nbytes;
            if (p->buffers[b].kind != CJ_BUF_OUTPUT) continue;
            for (int d = 0; d < ndonors; d++)
                if (output_fits_donor(&p->buffers[b], &p->buffers[donors[d]])) {
                    m->stamp_donor[donors[d]] = mark;
                    m->stamp_target[donors[d]] = mark;
                }
        }
        for (int e = 0; e < kern->nexprs; e++) {
            if (!cj_expr_reads(&kern->exprs[e])) continue;
            int b = kern->exprs[e].buffer;
            m->stamp_read[b] = mark;
            if (is_donated(p, &p->buffers[b])) m->stamp_donor[b] = mark;
            if (p->buffers[b].kind == CJ_BUF_TEMP) reads_temp = true;
        }
    }
    /* stage-to-stage values inside the group are its own business */
    bool only_outputs = true;
    for (int k = g->first; k < g->first + g->count; k++) {
        const cj_kernel *kern = &p->kernels[k];
        for (int i = -1; i < kern->nalso; i++) {
            int b = i < 0 ? kern->out_buffer : kern->also[i].buffer;
            if (p->buffers[b].kind != CJ_BUF_OUTPUT) only_outputs = false;
        }
    }
    bool reads_target = false;
    for (int d = 0; d < ndonors; d++) {
        if (m->stamp_target[donors[d]] == mark && m->stamp_read[donors[d]] == mark) reads_target = true;
        else if (m->stamp_target[donors[d]] == mark) m->stamp_target[donors[d]] = 0;  /* fits, not read */
    }
    *sink = only_outputs && reads_target;
    return (only_outputs && reads_temp) || (!reads_temp && temp_stored <= SMALL_TEMP_BYTES);
}

/* Reorders p's groups (and kernels with them) as described above.  Returns
 * 1 when something moved, 0 when not, -1 when out of memory. */
static int order_for_donation(cj_plan *p) {
    int n = p->ngroups;
    int *seq = malloc(sizeof(int) * ((size_t)n + 1));
    int *donors = malloc(sizeof(int) * ((size_t)p->nbuffers + 1));
    order_marks m = {calloc((size_t)p->nbuffers + 1, sizeof(int)), calloc((size_t)p->nbuffers + 1, sizeof(int)),
                     calloc((size_t)p->nbuffers + 1, sizeof(int)), calloc((size_t)p->nbuffers + 1, sizeof(int))};
    cj_group *groups = malloc(sizeof(cj_group) * ((size_t)n + 1));
    cj_kernel *kernels = malloc(sizeof(cj_kernel) * ((size_t)p->nkernels + 1));
    int moved = -1;
    if (!seq || !donors || !m.stamp_read || !m.stamp_write || !m.stamp_donor || !m.stamp_target || !groups ||
        !kernels)
        goto done;
    int ndonors = 0;
    for (int b = 0; b < p->nbuffers; b++)
        if (is_donated(p, &p->buffers[b]) && p->buffers[b].nbytes > 0) donors[ndonors++] = b;
    moved = 0;
    bool sink;
    for (int g = 0; g < n; g++) {
        int at = g; /* seq[0..g) holds the groups placed so far */
        if (mark_group(p, &p->groups[g], donors, ndonors, &m, g + 1, &sink)) {
            while (at > 0 && !must_follow(p, &p->groups[seq[at - 1]], &m, g + 1, true)) at--;
            memmove(seq + at + 1, seq + at, sizeof(int) * (size_t)(g - at));
        }
        seq[at] = g;
        moved |= at != g;
    }
    /* then, last to first, a group that could write over a donated argument
     * it reads but is not its last reader (`(p - lr * g, p.sum())`) moves to
     * after that reader, when nothing in between needs it first */
    for (int i = n - 1; i >= 0; i--) {
        int mark = n + 1 + seq[i], last = -1;
        mark_group(p, &p->groups[seq[i]], donors, ndonors, &m, mark, &sink);
        for (int j = i + 1; sink && j < n; j++) {
            if (must_follow(p, &p->groups[seq[j]], &m, mark, false)) break;
            if (reads_marked(p, &p->groups[seq[j]], m.stamp_target, mark)) last = j;
        }
        if (last > i) {
            int g = seq[i];
            memmove(seq + i, seq + i + 1, sizeof(int) * (size_t)(last - i));
            seq[last] = g;
            moved = 1;
        }
    }
    if (moved) {
        int k = 0;
        for (int i = 0; i < n; i++) {
            const cj_group *old = &p->groups[seq[i]];
            groups[i] = *old;
            groups[i].first = k;
            memcpy(kernels + k, p->kernels + old->first, sizeof(cj_kernel) * (size_t)old->count);
            k += old->count;
        }
        memcpy(p->groups, groups, sizeof(cj_group) * (size_t)n);
        memcpy(p->kernels, kernels, sizeof(cj_kernel) * (size_t)p->nkernels);
    }
done:
    free(seq), free(donors), free(m.stamp_read), free(m.stamp_write), free(m.stamp_donor), free(m.stamp_target);
    free(groups), free(kernels);
    return moved;
}

/* See kernel.h. */
cj_status cj_memplan_run(cj_plan *p, bool enabled, cj_error *err) {
    cj_status st = plan_memory(p, enabled, err);
    bool any_donated = false;
    for (int b = 0; enabled && p->donated && b < p->nbuffers; b++) any_donated |= is_donated(p, &p->buffers[b]);
    if (st != CJ_OK || !any_donated || p->ngroups < 2) return st;
    /* try the order for donation; keep it only if it lowers the peak */
    int64_t peak = p->peak_bytes;
    cj_group *groups = malloc(sizeof(cj_group) * ((size_t)p->ngroups + 1));
    cj_kernel *kernels = malloc(sizeof(cj_kernel) * ((size_t)p->nkernels + 1));
    if (!groups || !kernels) {
        free(groups), free(kernels);
        return cj_error_set(err, CJ_ERR_MEMORY, "memplan: out of memory");
    }
    memcpy(groups, p->groups, sizeof(cj_group) * (size_t)p->ngroups);
    memcpy(kernels, p->kernels, sizeof(cj_kernel) * (size_t)p->nkernels);
    int moved = order_for_donation(p);
    if (moved < 0) st = cj_error_set(err, CJ_ERR_MEMORY, "memplan: out of memory");
    if (moved > 0) st = plan_memory(p, enabled, err);
    if (moved > 0 && st == CJ_OK && p->peak_bytes >= peak) {
        memcpy(p->groups, groups, sizeof(cj_group) * (size_t)p->ngroups);
        memcpy(p->kernels, kernels, sizeof(cj_kernel) * (size_t)p->nkernels);
        st = plan_memory(p, enabled, err);
    }
    free(groups), free(kernels);
    return st;
}
