/* group.c - consecutive kernels that share their row loop run as one.
 *
 * Row softmax is three loop nests over the same rows: the row maximum, the
 * sum of exp(x - max), and exp(x - max) / sum.  Run one after the other
 * over the whole array, each reads x from main memory.  Run row block by
 * row block, the block is still in cache when the next stage reads it, and
 * the whole computation is one pass over memory.  That is all a group is:
 * a driver function that, for each block of rows, calls every stage on
 * that block.
 *
 * Stages may be grouped when every one loops over the same rows (loop 0,
 * never reduced), a matmul only leads a group, and every buffer a stage
 * writes is written row by row
 * (each row of loop 0 touches only its own row of the buffer), so that a
 * later stage reading it for row r only needs what earlier stages wrote
 * for row r.  Running the stages in order over all rows, as without
 * grouping, gives the same results; groups only change the order of work.
 * Liveness (memplan.c) counts a group as one step, so buffers touched in
 * a group never share bytes.
 *
 * A kernel left alone has its loops merged (cj_group_collapse_lone, the
 * pipeline's step after memplan): memplan's orders for donation may still
 * join an update to the gemm whose result it reads (the join partners this
 * pass records, memorder.c moves), which needs its rows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group.h"

/* Bytes of row data a block of rows should touch: about half of a typical L2. */
#define CJ_GROUP_BLOCK_BYTES (128 * 1024)

/* The smallest and largest element offset of `a` over the kernel's loop
 * box, leaving loop 0 out. */
static void inner_range(const cj_kernel *k, const cj_affine *a, int64_t *lo, int64_t *hi) {
    *lo = *hi = a->offset;
    for (int d = 1; d < k->rank; d++) {
        int64_t span = a->stride[d] * (k->dims[d] - 1);
        if (span < 0) *lo += span;
        else *hi += span;
    }
}

/* Does access `a` of kernel k touch only row i_0 of buffer b? */
static bool row_local(const cj_plan *p, const cj_kernel *k, int b, const cj_affine *a) {
    const cj_buffer *buf = &p->buffers[b];
    int64_t rows = k->dims[0];
    if (rows <= 0 || buf->shape.rank == 0 || buf->shape.dims[0] != rows) return false;
    int64_t row_size = cj_shape_numel(&buf->shape) / rows;
    if (a->stride[0] != row_size) return false;
    int64_t lo, hi;
    inner_range(k, a, &lo, &hi);
    return lo >= 0 && hi < row_size;
}

/* Does every value kernel k stores go to row i_0 of its buffer? */
static bool stores_row_local(const cj_plan *p, const cj_kernel *k) {
    for (int i = 0; i < k->nalso; i++)
        if (!row_local(p, k, k->also[i].buffer, &k->also[i].index)) return false;
    return row_local(p, k, k->out_buffer, &k->out_index);
}

/* Can kernel k run inside a group whose stages are kernels [first, k)?
 * written_by[b] is the first stage of the group whose stages wrote buffer
 * b last (so the question costs a look per load, not one per stage). */
static bool joins_group(const cj_plan *p, int first, int k, const int *written_by) {
    const cj_kernel *kern = &p->kernels[k];
    const cj_kernel *head = &p->kernels[first];
    if (kern->rank < 1 || kern->dims[0] != head->dims[0] || (kern->reduced & 1u) || kern->dims[0] < 2)
        return false;
    /* A matmul reads all of its right operand for every row, so it gains
     * nothing from following other stages; it starts a group of its own
     * (with its epilogue).  This also keeps at most one activation of a
     * chain of layers per group, so layers still reuse each other's bytes. */
    if (kern->root_node >= 0 && p->graph && p->graph->nodes[kern->root_node].op == CJ_OP_MATMUL) return false;
    if (kern->scatter.on || kern->call || !stores_row_local(p, kern)) return false;
    /* buffers written by earlier stages must be read row by row (a gather
     * reads anywhere) */
    for (int e = 0; e < kern->nexprs; e++) {
        const cj_expr *x = &kern->exprs[e];
        if (!cj_expr_reads(x) || written_by[x->buffer] != first) continue;
        if (x->kind == CJ_EX_GATHER || !row_local(p, kern, x->buffer, &x->index)) return false;
    }
    return true;
}

/* Records that the group led by kernel `first` writes what kernel k stores. */
static void note_writes(const cj_kernel *k, int first, int *written_by) {
    written_by[k->out_buffer] = first;
    for (int i = 0; i < k->nalso; i++) written_by[k->also[i].buffer] = first;
}

static int64_t row_bytes(const cj_plan *p, const cj_kernel *k) {
    int64_t most = 0;
    int64_t rows = k->dims[0] > 0 ? k->dims[0] : 1;
    most = p->buffers[k->out_buffer].nbytes / rows;
    for (int i = 0; i < k->nalso; i++)
        if (p->buffers[k->also[i].buffer].nbytes / rows > most) most = p->buffers[k->also[i].buffer].nbytes / rows;
    for (int e = 0; e < k->nexprs; e++) {
        if (!cj_expr_reads(&k->exprs[e])) continue;
        const cj_buffer *b = &p->buffers[k->exprs[e].buffer];
        int64_t r = b->shape.rank > 0 && b->shape.dims[0] == k->dims[0] ? b->nbytes / rows : 0;
        if (r > most) most = r;
    }
    return most;
}

/* Records each gemm-led group's join partner (group.join_partner): the one
 * kernel after it that reads its result, a temporary, when that kernel
 * could run as the group's last stage (an optimizer's update reading a
 * weight's gradient).  The orders for donation (memorder.c) may then move
 * the two together, so that the gradient is group-local and takes block
 * storage; which kernels may share rows is this file's question, and its
 * answer goes to them as data.  written_by and reader: room per buffer. */
static void find_join_partners(cj_plan *p, int *written_by, int *reader) {
    for (int b = 0; b < p->nbuffers; b++) reader[b] = -1; /* the one kernel reading b, -2: several */
    for (int k = 0; k < p->nkernels; k++)
        for (int e = 0; e < p->kernels[k].nexprs; e++) {
            const cj_expr *x = &p->kernels[k].exprs[e];
            if (!cj_expr_reads(x) || reader[x->buffer] == k) continue;
            reader[x->buffer] = reader[x->buffer] == -1 ? k : -2;
        }
    for (int g = 0; g < p->ngroups; g++) {
        cj_group *G = &p->groups[g];
        const cj_kernel *head = &p->kernels[G->first];
        int t = head->out_buffer, u = reader[t];
        G->join_partner = -1;
        /* u < 0: none or several; inside G: a stage of its own reads it */
        if (!p->grouped || !head->gemm.on || p->buffers[t].kind != CJ_BUF_TEMP || u < G->first + G->count) continue;
        /* written_by keeps older groups' marks: joins_group compares with G's first */
        for (int k = G->first; k < G->first + G->count; k++) note_writes(&p->kernels[k], G->first, written_by);
        if (joins_group(p, G->first, u, written_by)) G->join_partner = p->kernels[u].out_buffer;
    }
}

/* See group.h. */
cj_status cj_group_run(cj_plan *p, bool enabled, cj_error *err) {
    free(p->groups);
    p->groups = calloc((size_t)p->nkernels + 1, sizeof(cj_group));
    if (!p->groups) return cj_error_set(err, CJ_ERR_MEMORY, "group: out of memory");
    int *written_by = malloc(sizeof(int) * (2 * (size_t)p->nbuffers + 1)); /* then the readers */
    if (!written_by) return cj_error_set(err, CJ_ERR_MEMORY, "group: out of memory");
    for (int b = 0; b < p->nbuffers; b++) written_by[b] = -1;
    p->ngroups = 0;
    p->grouped = enabled;
    for (int k = 0; k < p->nkernels;) {
        cj_group *g = &p->groups[p->ngroups++];
        g->first = k;
        g->count = 1;
        const cj_kernel *head = &p->kernels[k];
        bool can_lead = enabled && head->rank >= 1 && !(head->reduced & 1u) && !head->scatter.on && !head->call && head->dims[0] >= 2 &&
                        stores_row_local(p, head);
        note_writes(&p->kernels[k], k, written_by);
        while (can_lead && k + g->count < p->nkernels && joins_group(p, k, k + g->count, written_by))
            note_writes(&p->kernels[k + g->count++], k, written_by);
        g->rows = head->rank >= 1 ? head->dims[0] : 1;
        int64_t widest = 1;
        for (int s = k; s < k + g->count; s++) {
            int64_t r = row_bytes(p, &p->kernels[s]);
            if (r > widest) widest = r;
        }
        g->block = CJ_GROUP_BLOCK_BYTES / widest;
        if (g->block < 1) g->block = 1;
        /* a gemm call repacks B every time: give it all of a thread's rows */
        if (head->gemm.on) g->block = g->rows;
        if (g->block > g->rows) g->block = g->rows;
        k += g->count;
    }
    find_join_partners(p, written_by, written_by + p->nbuffers);
    free(written_by);
    return CJ_OK;
}

/* See group.h. */
void cj_group_collapse_lone(cj_plan *p) {
    /* a kernel on its own runs best over as few, long loops as possible */
    for (int g = 0; g < p->ngroups; g++) {
        cj_kernel *k = &p->kernels[p->groups[g].first];
        if (p->groups[g].count == 1 && !k->gemm.on && !k->loop) cj_kernel_collapse(k);
    }
}
