/* memorder.c - orders of the groups for donation.
 *
 * With donated arguments the outputs live in the arguments, so what the
 * peak holds depends on when each temporary dies more than without: these
 * passes move groups (and split groups of independent updates) so that
 * gradients and saved activations die early.  They only reorder; memplan.c
 * plans each order and keeps it only when the peak is lower. */
#include <stdlib.h>
#include <string.h>

#include "memorder.h"

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
                if (cj_output_fits_donor(&p->buffers[b], &p->buffers[donors[d]])) {
                    m->stamp_donor[donors[d]] = mark;
                    m->stamp_target[donors[d]] = mark;
                }
        }
        for (int e = 0; e < kern->nexprs; e++) {
            if (!cj_expr_reads(&kern->exprs[e])) continue;
            int b = kern->exprs[e].buffer;
            m->stamp_read[b] = mark;
            if (cj_is_donated(p, &p->buffers[b])) m->stamp_donor[b] = mark;
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

/* Rewrites p's groups and kernels in the order seq (n group indices), using
 * groups and kernels (room for all of them) as scratch. */
static void apply_group_order(cj_plan *p, const int *seq, int n, cj_group *groups, cj_kernel *kernels) {
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

/* Reorders p's groups (and kernels with them) as described above.  Returns
 * 1 when something moved, 0 when not, -1 when out of memory. */
int cj_order_for_donation(cj_plan *p) {
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
        if (cj_is_donated(p, &p->buffers[b]) && p->buffers[b].nbytes > 0) donors[ndonors++] = b;
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
    if (moved) apply_group_order(p, seq, n, groups, kernels);
done:
    free(seq), free(donors), free(m.stamp_read), free(m.stamp_write), free(m.stamp_donor), free(m.stamp_target);
    free(groups), free(kernels);
    return moved;
}

/* ---- an order for donation: last readers first ---------------------------
 * Two neighbouring groups that do not depend on each other swap when the
 * second frees more than it costs to run it first: in a gradient, the
 * matmul that reads a saved activation for the last time (a layer's weight
 * gradient) runs before the one that makes the next layer's backpropagated
 * value, so that the activation is gone before that value is born.  The
 * figures are estimates (in-place updates are not counted); the plan keeps
 * the new order only if its peak is lower (cj_memplan_run). */

typedef struct {
    int *start;     /* per group: its first entry in buf/rw */
    int *buf, *rw;  /* per entry: a buffer, 1 read | 2 written */
} group_uses;

/* Bytes live at the worst of the two steps running group a, then b; `at`
 * is a's position, and last_read/first_write the buffers' positions. */
static int64_t pair_cost(const cj_plan *p, const group_uses *u, int a, int b, int at, const int *last_read,
                         const int *first_write) {
    int64_t alloc_a = 0, alloc_b = 0, free_a = 0;
    for (int e = u->start[a]; e < u->start[a + 1]; e++) {
        const cj_buffer *x = &p->buffers[u->buf[e]];
        if (x->kind != CJ_BUF_TEMP) continue;
        if ((u->rw[e] & 2) && first_write[u->buf[e]] >= at) alloc_a += x->nbytes;
        if (!(u->rw[e] & 1) || last_read[u->buf[e]] > at + 1) continue;
        bool b_reads = false;
        for (int f = u->start[b]; f < u->start[b + 1]; f++) b_reads |= u->buf[f] == u->buf[e] && (u->rw[f] & 1);
        if (!b_reads) free_a += x->nbytes;
    }
    for (int e = u->start[b]; e < u->start[b + 1]; e++) {
        const cj_buffer *x = &p->buffers[u->buf[e]];
        if (x->kind != CJ_BUF_TEMP || !(u->rw[e] & 2) || first_write[u->buf[e]] < at) continue;
        bool a_writes = false;
        for (int f = u->start[a]; f < u->start[a + 1]; f++) a_writes |= u->buf[f] == u->buf[e] && (u->rw[f] & 2);
        if (!a_writes) alloc_b += x->nbytes;
    }
    int64_t second = alloc_a - free_a + alloc_b;
    return alloc_a > second ? alloc_a : second;
}

static bool uses(const group_uses *u, int g, int x, int how) {
    for (int e = u->start[g]; e < u->start[g + 1]; e++)
        if (u->buf[e] == x && (u->rw[e] & how)) return true;
    return false;
}

static bool gather_uses(const cj_plan *p, group_uses *u, int *stamp) {
    int n = 0;
    for (int k = 0; k < p->nkernels; k++) n += 1 + p->kernels[k].nalso + p->kernels[k].nexprs;
    u->start = malloc(sizeof(int) * ((size_t)p->ngroups + 1));
    u->buf = malloc(sizeof(int) * ((size_t)n + 1));
    u->rw = malloc(sizeof(int) * ((size_t)n + 1));
    if (!u->start || !u->buf || !u->rw) return false;
    int m = 0;
    for (int b = 0; b < p->nbuffers; b++) stamp[b] = -1;
    for (int g = 0; g < p->ngroups; g++) {
        u->start[g] = m;
        for (int k = p->groups[g].first; k < p->groups[g].first + p->groups[g].count; k++) {
            const cj_kernel *kern = &p->kernels[k];
            for (int i = -1 - kern->nexprs; i < kern->nalso; i++) {
                int b, how;
                if (i < -1) {
                    const cj_expr *ex = &kern->exprs[-2 - i];
                    if (!cj_expr_reads(ex)) continue;
                    b = ex->buffer, how = 1;
                } else {
                    b = i < 0 ? kern->out_buffer : kern->also[i].buffer, how = 2;
                }
                if (stamp[b] < u->start[g]) {
                    stamp[b] = m;
                    u->buf[m] = b, u->rw[m++] = 0;
                }
                u->rw[stamp[b]] |= how;
            }
        }
    }
    u->start[p->ngroups] = m;
    return true;
}

/* Reorders p's groups as described above (a few sweeps of neighbour
 * swaps).  Returns 1 when something moved, 0 when not, -1 when out of
 * memory. */
int cj_order_last_readers_first(cj_plan *p) {
    int n = p->ngroups;
    int *seq = malloc(sizeof(int) * ((size_t)n + 1));
    int *last_read = malloc(sizeof(int) * ((size_t)p->nbuffers + 1));
    int *first_write = malloc(sizeof(int) * ((size_t)p->nbuffers + 1));
    order_marks m = {calloc((size_t)p->nbuffers + 1, sizeof(int)), calloc((size_t)p->nbuffers + 1, sizeof(int)),
                     calloc((size_t)p->nbuffers + 1, sizeof(int)), calloc((size_t)p->nbuffers + 1, sizeof(int))};
    cj_group *groups = malloc(sizeof(cj_group) * ((size_t)n + 1));
    cj_kernel *kernels = malloc(sizeof(cj_kernel) * ((size_t)p->nkernels + 1));
    int *donors = malloc(sizeof(int) * ((size_t)p->nbuffers + 1));
    group_uses u = {0};
    int moved = -1, mark = 0, ndonors = 0;
    if (!donors || !seq || !last_read || !first_write || !m.stamp_read || !m.stamp_write || !m.stamp_donor ||
        !m.stamp_target || !groups || !kernels || !gather_uses(p, &u, last_read))
        goto done;
    moved = 0;
    for (int b = 0; b < p->nbuffers; b++)
        if (cj_is_donated(p, &p->buffers[b]) && p->buffers[b].nbytes > 0) donors[ndonors++] = b;
    for (int g = 0; g < n; g++) seq[g] = g;
    for (int sweep = 0; sweep < 8; sweep++) {
        for (int b = 0; b < p->nbuffers; b++) last_read[b] = -1, first_write[b] = n;
        for (int i = 0; i < n; i++)
            for (int e = u.start[seq[i]]; e < u.start[seq[i] + 1]; e++) {
                if (u.rw[e] & 1) last_read[u.buf[e]] = i;
                if ((u.rw[e] & 2) && first_write[u.buf[e]] == n) first_write[u.buf[e]] = i;
            }
        bool any = false;
        for (int i = 0; i + 1 < n; i++) {
            int a = seq[i], b = seq[i + 1];
            bool sink;
            /* and each stays clear of the donated arguments the other reads or
             * could write over (their last readers stay where they were) */
            mark_group(p, &p->groups[b], donors, ndonors, &m, ++mark, &sink);
            if (must_follow(p, &p->groups[a], &m, mark, true)) continue;
            mark_group(p, &p->groups[a], donors, ndonors, &m, ++mark, &sink);
            if (must_follow(p, &p->groups[b], &m, mark, true)) continue;
            if (pair_cost(p, &u, b, a, i, last_read, first_write) >= pair_cost(p, &u, a, b, i, last_read, first_write))
                continue;
            seq[i] = b, seq[i + 1] = a;
            /* the positions of the buffers last read or first written in the pair */
            for (int e = u.start[a]; e < u.start[b + 1] && e < u.start[a + 1] + (u.start[b + 1] - u.start[b]); e++) {
                int x = e < u.start[a + 1] ? u.buf[e] : u.buf[u.start[b] + e - u.start[a + 1]];
                if (last_read[x] == i || last_read[x] == i + 1) last_read[x] = uses(&u, a, x, 1) ? i + 1 : i;
                if (first_write[x] == i || first_write[x] == i + 1) first_write[x] = uses(&u, b, x, 2) ? i : i + 1;
            }
            any = true;
            i++; /* a moves on only in the next sweep */
        }
        if (!any) break;
        moved = 1;
    }
    if (moved) apply_group_order(p, seq, n, groups, kernels);
done:
    free(seq), free(last_read), free(first_write), free(groups), free(kernels), free(donors);
    free(m.stamp_read), free(m.stamp_write), free(m.stamp_donor), free(m.stamp_target);
    free(u.start), free(u.buf), free(u.rw);
    return moved;
}

/* Splits each group whose stages store only outputs and read nothing
 * another of them stores (the updates of several parameters) into groups
 * of one stage, which the orders above may then move one by one.  Returns
 * 1 when something split, 0 when not, -1 when out of memory. */
int cj_split_update_groups(cj_plan *p) {
    int *stamp = calloc((size_t)p->nbuffers + 1, sizeof(int));
    cj_group *groups = malloc(sizeof(cj_group) * ((size_t)p->nkernels + 1));
    if (!stamp || !groups) {
        free(stamp), free(groups);
        return -1;
    }
    int n = 0;
    for (int g = 0; g < p->ngroups; g++) {
        const cj_group *grp = &p->groups[g];
        bool split = grp->count > 1;
        for (int k = grp->first; split && k < grp->first + grp->count; k++) {
            const cj_kernel *kern = &p->kernels[k];
            for (int i = -1; i < kern->nalso; i++) {
                int b = i < 0 ? kern->out_buffer : kern->also[i].buffer;
                split &= p->buffers[b].kind == CJ_BUF_OUTPUT;
                stamp[b] = g + 1;
            }
        }
        for (int k = grp->first; split && k < grp->first + grp->count; k++) {
            const cj_kernel *kern = &p->kernels[k];
            for (int e = 0; e < kern->nexprs; e++)
                if (cj_expr_reads(&kern->exprs[e]) && stamp[kern->exprs[e].buffer] == g + 1) split = false;
        }
        for (int k = grp->first; k < grp->first + (split ? grp->count : 1); k++) {
            groups[n] = *grp;
            if (split) {
                groups[n].first = k, groups[n].count = 1;
                groups[n].rows = p->kernels[k].rank >= 1 ? p->kernels[k].dims[0] : 1;
            }
            n++;
        }
    }
    int moved = n != p->ngroups;
    memcpy(p->groups, groups, sizeof(cj_group) * (size_t)n);
    p->ngroups = n;
    free(stamp), free(groups);
    return moved;
}

/* ---- an update joined to the gemm making its gradient ---------------------- */

/* Does group h write what kernel u reads or writes, or read what it writes? */
static bool conflicts(const cj_plan *p, const cj_group *h, const int *stamp, int mark) {
    for (int k = h->first; k < h->first + h->count; k++) {
        const cj_kernel *kern = &p->kernels[k];
        for (int i = -1; i < kern->nalso; i++)
            if (stamp[i < 0 ? kern->out_buffer : kern->also[i].buffer] >= mark) return true;
        for (int e = 0; e < kern->nexprs; e++)
            if (cj_expr_reads(&kern->exprs[e]) && stamp[kern->exprs[e].buffer] == mark + 1) return true;
    }
    return false;
}

/* Stamps what group g reads (mark) and writes (mark + 1), counting as
 * written the donated arguments it reads or one of its outputs could take:
 * it must stay their last reader, so that it may write over them. */
static void mark_uses(const cj_plan *p, const cj_group *g, int *stamp, int mark) {
    for (int k = g->first; k < g->first + g->count; k++) {
        const cj_kernel *kern = &p->kernels[k];
        for (int e = 0; e < kern->nexprs; e++)
            if (cj_expr_reads(&kern->exprs[e]))
                stamp[kern->exprs[e].buffer] = cj_is_donated(p, &p->buffers[kern->exprs[e].buffer]) ? mark + 1 : mark;
    }
    for (int k = g->first; k < g->first + g->count; k++) {
        const cj_kernel *kern = &p->kernels[k];
        for (int i = -1; i < kern->nalso; i++) {
            const cj_buffer *out = &p->buffers[i < 0 ? kern->out_buffer : kern->also[i].buffer];
            stamp[i < 0 ? kern->out_buffer : kern->also[i].buffer] = mark + 1;
            for (int b = 0; out->kind == CJ_BUF_OUTPUT && b < p->nbuffers; b++)
                if (cj_is_donated(p, &p->buffers[b]) && cj_output_fits_donor(out, &p->buffers[b])) stamp[b] = mark + 1;
        }
    }
}

/* See memorder.h. */
int cj_order_join_update(cj_plan *p, int which) {
    int n = p->ngroups, nb = p->nbuffers;
    int *reader = malloc(sizeof(int) * ((size_t)nb + 1));     /* the one group reading b, -2: several */
    int *stamp = calloc((size_t)nb + 1, sizeof(int));
    cj_group *groups = malloc(sizeof(cj_group) * ((size_t)n + 1));
    cj_kernel *kernels = malloc(sizeof(cj_kernel) * ((size_t)p->nkernels + 1));
    int moved = -1;
    if (!reader || !stamp || !groups || !kernels) goto done;
    moved = 0;
    if (!p->grouped) goto done; /* CJIT_PASSES=-group: no group of two stages */
    for (int b = 0; b < nb; b++) reader[b] = -1;
    for (int g = 0; g < n; g++)
        for (int k = p->groups[g].first; k < p->groups[g].first + p->groups[g].count; k++)
            for (int e = 0; e < p->kernels[k].nexprs; e++) {
                const cj_expr *x = &p->kernels[k].exprs[e];
                if (!cj_expr_reads(x) || reader[x->buffer] == g) continue;
                reader[x->buffer] = reader[x->buffer] == -1 ? g : -2;
            }
    int mark = 0, g = 0, u = -1;
    bool up = true;
    for (; g < n; g++) {
        const cj_group *G = &p->groups[g];
        const cj_kernel *head = &p->kernels[G->first];
        int t = head->out_buffer;
        u = reader[t];
        if (!head->gemm.on || p->buffers[t].kind != CJ_BUF_TEMP || u <= g || p->groups[u].count != 1) continue;
        /* group.c said which kernel may run as the group's last stage */
        if (G->join_partner < 0 || G->join_partner != p->kernels[p->groups[u].first].out_buffer) continue;
        /* u may run right after g: no group between writes what u reads or
         * writes or reads what u writes (stamp mark: read, mark + 1:
         * written); or else g right before u, likewise */
        bool down = true;
        up = true;
        mark_uses(p, &p->groups[u], stamp, mark += 2);
        for (int h = g + 1; h < u && up; h++) up = !conflicts(p, &p->groups[h], stamp, mark);
        mark_uses(p, G, stamp, mark += 2);
        for (int h = g + 1; h < u && !up && down; h++) down = !conflicts(p, &p->groups[h], stamp, mark);
        if ((up || down) && which-- == 0) break;
    }
    if (g < n) {
        /* the groups before g, then (when u moves up) g and u, the groups
         * between, (when g moves down) g and u, and the rest */
        int m = 0, k = 0;
        for (int i = 0; i < n; i++) {
            if ((i == g && !up) || i == u) continue;
            groups[m] = p->groups[i];
            groups[m].first = k;
            memcpy(kernels + k, p->kernels + p->groups[i].first, sizeof(cj_kernel) * (size_t)p->groups[i].count);
            k += p->groups[i].count;
            if (i == (up ? g : u - 1)) {
                if (!up) {
                    groups[++m] = p->groups[g];
                    groups[m].first = k;
                    memcpy(kernels + k, p->kernels + p->groups[g].first, sizeof(cj_kernel) * (size_t)p->groups[g].count);
                    k += p->groups[g].count;
                }
                kernels[k++] = p->kernels[p->groups[u].first];
                groups[m].count++;
            }
            m++;
        }
        memcpy(p->groups, groups, sizeof(cj_group) * (size_t)m);
        memcpy(p->kernels, kernels, sizeof(cj_kernel) * (size_t)p->nkernels);
        p->ngroups = m;
        moved = 1;
    }
done:
    free(reader), free(stamp), free(groups), free(kernels);
    return moved;
}
