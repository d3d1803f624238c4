/* blockmem.c - group-local temporaries in one block of rows per thread.
 *
 * A group (group.c) runs its stages row block by row block: for rows
 * [r0, r1) every stage runs before the next block starts.  A temporary that
 * the group's stages write and read, and that nothing outside the group
 * touches (it is not an output, no later kernel reads it), only ever needs
 * the rows of the block being worked on.  It gets one block of rows per
 * thread that may run the group ("block storage") instead of the whole
 * array: bytes = copies x align64(block rows x row bytes).
 *
 * How the stages find it: each stage addresses the buffer by absolute row
 * (row r at slot + r * row_bytes), as without block storage, so its code
 * does not change.  The group's driver (drivers.c) passes the stages a copy
 * of the slot array in which that buffer's pointer is shifted: for block
 * [r0, r1) run by thread t it is storage + t * stride - r0 * row_bytes, so
 * that row r0 lands at the start of thread t's block.  The thread comes from
 * cj_rt_thread_index (rt.c: 0 for the calling thread, 1.. for the pool's
 * workers, numbered by runtime.c); a group with block storage is split across the pool only
 * when the pool has no more threads than the plan made blocks for (a plan
 * from the disk cache may meet a larger pool: it then runs on one thread).
 *
 * Which plans: the block costs nothing for a group of elementwise stages (its
 * blocks are already about 128 KiB of rows), but a group led by a BLAS gemm
 * runs every row of a thread at once (a gemm call repacks B), so smaller
 * blocks mean more gemm calls.  Block storage is given when the plan has
 * donated arguments (where every donated byte stays taken and a gradient
 * needs bytes of its own) and the CPU backend asked for it (p->threads).
 * A gemm-led group's block starts at its smallest (two rows while B fits in
 * the L2 cache, so that each call reads B from cache; else 32 rows: one row
 * would be a gemv, which OpenBLAS sums in another order), and
 * memplan.c (widen_gemm_blocks) doubles it (gemm_scale, per group) as long
 * as the plan's peak does not grow, so the blocks are only as small as the
 * peak needs.  The gradient of a weight becomes group-local when its update
 * joins the gemm's group (memorder.c, cj_order_join_update, on group.c's partners).
 *
 * Small blocks go on the stack: a block of at most CJ_BLOCK_STACK_MAX bytes
 * lives in the driver's frame (an alloca of the running thread's own), so it
 * takes no arena bytes at all, as XLA keeps small thread-local temporaries
 * on the stack.  The plan still says which buffers these are (block_on_stack)
 * and how large a block is; memory_analysis counts heap bytes, which is
 * what the arena and the outputs are. */
#include <stdlib.h>

#include "blockmem.h"
#include "memorder.h"

/* B (K x N) of at most this many bytes is read from cache by every call */
#define CJ_BLOCK_GEMM_CACHED_B (256 * 1024)
#define CJ_BLOCK_GEMM_MIN_ROWS 32
#define CJ_BLOCK_ALIGN 64

static int64_t align_up(int64_t n) { return (n + CJ_BLOCK_ALIGN - 1) / CJ_BLOCK_ALIGN * CJ_BLOCK_ALIGN; }

/* See blockmem.h. */
int64_t cj_group_points(const cj_plan *p, const cj_group *g) {
    int64_t points = 0;
    for (int k = g->first; k < g->first + g->count; k++) {
        int64_t n = 1;
        for (int d = 0; d < p->kernels[k].rank; d++) n *= p->kernels[k].dims[d];
        points += n;
    }
    return points;
}

/* See blockmem.h. */
void cj_block_storage_clear(cj_plan *p) {
    for (int b = 0; b < p->nbuffers; b++) {
        p->buffers[b].block_storage = 0;
        p->buffers[b].block_on_stack = false;
    }
    for (int g = 0; g < p->ngroups; g++) {
        p->groups[g].local_block = 0;
        p->groups[g].local_copies = 0;
    }
}

/* See blockmem.h. */
int64_t cj_block_stride(const cj_plan *p, const cj_group *g, const cj_buffer *b) {
    (void)p;
    return align_up(g->local_block * (b->nbytes / g->rows));
}

/* Does access `a` of kernel k (loop 0 of g->rows rows) touch only row i_0
 * of buffer b? */
static bool row_local(const cj_kernel *k, const cj_buffer *b, const cj_affine *a) {
    int64_t rows = k->dims[0];
    if (rows <= 0 || b->shape.rank == 0 || b->shape.dims[0] != rows) return false;
    int64_t row_size = cj_shape_numel(&b->shape) / rows;
    if (a->stride[0] != row_size) return false;
    int64_t lo = a->offset, hi = a->offset;
    for (int d = 1; d < k->rank; d++) {
        int64_t span = a->stride[d] * (k->dims[d] - 1);
        if (span < 0) lo += span;
        else hi += span;
    }
    return lo >= 0 && hi < row_size;
}

/* Is every access of buffer b by the stages of group g row-local? */
static bool accessed_by_rows(const cj_plan *p, const cj_group *g, int b) {
    const cj_buffer *buf = &p->buffers[b];
    for (int s = g->first; s < g->first + g->count; s++) {
        const cj_kernel *k = &p->kernels[s];
        if (k->out_buffer == b && !row_local(k, buf, &k->out_index)) return false;
        for (int i = 0; i < k->nalso; i++)
            if (k->also[i].buffer == b && !row_local(k, buf, &k->also[i].index)) return false;
        for (int e = 0; e < k->nexprs; e++) {
            const cj_expr *x = &k->exprs[e];
            if (!cj_expr_reads(x) || x->buffer != b) continue;
            if (x->kind == CJ_EX_GATHER || !row_local(k, buf, &x->index)) return false;
        }
    }
    return true;
}

static bool plan_wants_blocks(const cj_plan *p) {
    if (p->threads <= 0 || !p->donated) return false;
    for (int b = 0; b < p->nbuffers; b++)
        if (cj_is_donated(p, &p->buffers[b])) return true;
    return false;
}

/* Rows of a block of group g at scale `gemm_scale` (a gemm-led group's
 * smallest block times it), at most one thread's rows. */
static int64_t block_rows(const cj_plan *p, const cj_group *g, int copies, int64_t gemm_scale) {
    const cj_kernel *head = &p->kernels[g->first];
    int64_t per_thread = (g->rows + copies - 1) / copies;
    int64_t rows = g->block;
    if (copies > 1 && !head->gemm.on) {
        /* the runtime hands out 4 chunks a thread (runtime.c, parallel_for),
         * and no block is larger than its chunk: blocks of a chunk cost the
         * same bytes as larger ones and run the same */
        int64_t chunk = (g->rows + 4 * copies - 1) / (4 * copies);
        if (chunk >= 64) chunk = (chunk + 15) / 16 * 16;
        if (chunk < rows) rows = chunk;
    }
    if (head->gemm.on) {
        int64_t elem = cj_dtype_size(p->buffers[head->out_buffer].dtype);
        int64_t b_bytes = head->dims[head->rank - 2] * head->dims[head->rank - 1] * elem;
        int64_t least = b_bytes <= CJ_BLOCK_GEMM_CACHED_B ? 2 : CJ_BLOCK_GEMM_MIN_ROWS;
        rows = least * gemm_scale;
    }
    return rows < per_thread ? rows : per_thread;
}

/* See blockmem.h. */
int cj_block_storage_mark(cj_plan *p, const int64_t *gemm_scale) {
    cj_block_storage_clear(p);
    if (!plan_wants_blocks(p)) return 0;
    /* buffers something lives in (in place, or a temporary in it) keep their bytes */
    bool *hosts = calloc((size_t)p->nbuffers + 1, sizeof(bool));
    if (!hosts) return 0; /* no block storage: the plan stays sound */
    for (int b = 0; b < p->nbuffers; b++)
        if (p->buffers[b].alias_of >= 0) hosts[p->buffers[b].alias_of] = true;
    int gemm_groups = 0;
    for (int b = 0; b < p->nbuffers; b++) {
        cj_buffer *buf = &p->buffers[b];
        if (buf->kind != CJ_BUF_TEMP || buf->alias_of >= 0 || hosts[b] || buf->first_use < 0 ||
            buf->first_use != buf->last_use)
            continue;
        cj_group *g = &p->groups[buf->first_use];
        if (g->count < 2 || g->rows < 2 || buf->shape.rank == 0 || buf->shape.dims[0] != g->rows ||
            !accessed_by_rows(p, g, b))
            continue;
        int copies = g->local_copies;
        if (copies == 0) {
            copies = cj_group_points(p, g) >= CJ_PARALLEL_MIN_POINTS ? p->threads : 1;
            int64_t rows = block_rows(p, g, copies, gemm_scale ? gemm_scale[buf->first_use] : 1);
            g->local_block = rows;
            g->local_copies = copies;
            gemm_groups += p->kernels[g->first].gemm.on;
        }
        int64_t storage = copies * cj_block_stride(p, g, buf);
        if (storage < buf->nbytes) buf->block_storage = storage;
    }
    /* small blocks on the stack, while the group's frame stays small (no
     * memory for the count: every block stays in the arena) */
    int64_t *on_stack = calloc((size_t)p->ngroups + 1, sizeof(int64_t));
    for (int b = 0; on_stack && b < p->nbuffers; b++) {
        cj_buffer *buf = &p->buffers[b];
        if (buf->block_storage <= 0) continue;
        int64_t stride = cj_block_stride(p, &p->groups[buf->first_use], buf);
        if (stride > CJ_BLOCK_STACK_MAX || on_stack[buf->first_use] + stride > CJ_BLOCK_STACK_GROUP) continue;
        buf->block_on_stack = true;
        on_stack[buf->first_use] += stride;
    }
    free(on_stack);
    /* a group none of whose buffers took block storage runs as before */
    for (int g = 0; g < p->ngroups; g++) {
        bool any = false;
        for (int b = 0; b < p->nbuffers && p->groups[g].local_block > 0; b++)
            any |= p->buffers[b].block_storage > 0 && p->buffers[b].first_use == g;
        if (!any && p->groups[g].local_block > 0) {
            gemm_groups -= p->kernels[p->groups[g].first].gemm.on;
            p->groups[g].local_block = 0;
            p->groups[g].local_copies = 0;
        }
    }
    free(hosts);
    return gemm_groups;
}
