/* plan.c - helpers on kernels and plans that every pass and backend uses:
 * growing the plan's arrays, contiguous strides, merging loop dims, the
 * facts a backend asks of a kernel, the plan's text, and the life of a
 * plan's parts: loop plans made and freed, a lowered graph and its plan
 * freed.  fuse.c makes plans; this file is where they end. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "loops.h"

/* See kernel.h. */
bool cj_grow(void **ptr, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int ncap = *cap ? *cap * 2 : 16;
    while (ncap < need) ncap *= 2;
    void *p = realloc(*ptr, (size_t)ncap * elem);
    if (!p) return false;
    memset((char *)p + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
    *ptr = p;
    *cap = ncap;
    return true;
}

/* See kernel.h. */
void cj_contiguous_strides(const cj_shape *s, int64_t *strides) {
    int64_t acc = 1;
    for (int d = s->rank - 1; d >= 0; d--) {
        strides[d] = acc;
        acc *= s->dims[d] > 0 ? s->dims[d] : 1;
    }
}

/* See kernel.h. */
int cj_kernel_long_math(const cj_kernel *k) {
    int n = 0;
    for (int e = 0; e < k->nexprs; e++) n += k->exprs[e].kind == CJ_EX_OP && cj_op_has_flag(k->exprs[e].op, CJ_OPF_LONG_MATH);
    return n;
}

/* Removes loop d (of size 1: every access is at index 0 there). */
static void drop_loop(cj_kernel *k, int d) {
    for (int q = d; q < k->rank - 1; q++) {
        k->dims[q] = k->dims[q + 1];
        k->out_index.stride[q] = k->out_index.stride[q + 1];
        for (int e = 0; e < k->nexprs; e++) k->exprs[e].index.stride[q] = k->exprs[e].index.stride[q + 1];
        for (int i = 0; i < k->nalso; i++) k->also[i].index.stride[q] = k->also[i].index.stride[q + 1];
    }
    k->reduced = (k->reduced & ((1u << d) - 1)) | ((k->reduced >> (d + 1)) << d);
    k->rank--;
    k->out_index.stride[k->rank] = 0;
    for (int e = 0; e < k->nexprs; e++) k->exprs[e].index.stride[k->rank] = 0;
    for (int i = 0; i < k->nalso; i++) k->also[i].index.stride[k->rank] = 0;
}

/* See kernel.h. */
void cj_kernel_collapse(cj_kernel *k) {
    /* loops of size 1 go first: (800000, 1).sum(axis=0) is then one reduced
     * innermost loop, which sums pairwise and vectorizes */
    for (int d = k->rank - 1; d >= 0 && k->rank > 1; d--)
        if (k->dims[d] == 1) drop_loop(k, d);
    for (int d = k->rank - 2; d >= 0; d--) {
        bool red_d = k->reduced & (1u << d), red_n = k->reduced & (1u << (d + 1));
        if (red_d != red_n) continue;
        int64_t inner = k->dims[d + 1];
        bool ok = k->out_index.stride[d] == k->out_index.stride[d + 1] * inner;
        for (int e = 0; ok && e < k->nexprs; e++) {
            const cj_expr *x = &k->exprs[e];
            if (x->kind == CJ_EX_LOAD || x->kind == CJ_EX_INDEX || x->kind == CJ_EX_GATHER)
                ok = x->index.stride[d] == x->index.stride[d + 1] * inner;
        }
        for (int i = 0; ok && i < k->nalso; i++)
            ok = k->also[i].index.stride[d] == k->also[i].index.stride[d + 1] * inner;
        if (!ok) continue;
        /* dims d and d+1 become one dim d of size dims[d]*inner with d+1's strides */
        k->dims[d] *= inner;
        k->out_index.stride[d] = k->out_index.stride[d + 1];
        for (int e = 0; e < k->nexprs; e++) k->exprs[e].index.stride[d] = k->exprs[e].index.stride[d + 1];
        for (int i = 0; i < k->nalso; i++) k->also[i].index.stride[d] = k->also[i].index.stride[d + 1];
        drop_loop(k, d + 1);
    }
    /* every kernel has at least one loop dim: the one threads split */
    if (k->rank == 0) {
        k->rank = 1;
        k->dims[0] = 1;
    }
}

/* See kernel.h. */
bool cj_kernel_is_matvec(const cj_plan *p, const cj_kernel *k) {
    cj_dtype dt = p->buffers[k->out_buffer].dtype;
    if ((dt != CJ_FLOAT32 && dt != CJ_FLOAT64) || k->loop || k->call || k->scatter.on || k->nalso || k->nexprs != 3)
        return false;
    if (k->rank == 3 ? k->dims[2] != 1 : k->rank != 2) return false;
    if (k->reduced != 2u || k->reduce_op != CJ_OP_REDUCE_SUM || k->out_index.stride[1] != 0) return false;
    const cj_expr *a = &k->exprs[0], *b = &k->exprs[1], *mul = &k->exprs[2];
    if (a->kind != CJ_EX_LOAD || b->kind != CJ_EX_LOAD || mul->kind != CJ_EX_OP || mul->op != CJ_OP_MUL ||
        mul->args[0] != 0 || mul->args[1] != 1 || a->dtype != dt || b->dtype != dt || mul->dtype != dt)
        return false;
    if (b->index.stride[0] != 0 || (a->index.stride[1] != 1 && !(a->index.stride[0] == 1 && k->dims[0] >= 8))) return false;
    return k->dims[0] * k->dims[1] * (int64_t)cj_dtype_size(dt) <= CJ_MATVEC_MAX_A_BYTES;
}

/* See kernel.h. */
bool cj_kernel_needs_identity(const cj_kernel *k) { return (k->reduced != 0 && !k->gemm.on) || k->scatter.on; }

/* See kernel.h. */
bool cj_kernel_cpu_needs_identity(const cj_plan *p, const cj_kernel *k) {
    return cj_kernel_needs_identity(k) && !cj_kernel_is_matvec(p, k);
}

/* See kernel.h. */
void cj_call_describe(const cj_plan *p, const cj_kernel *k, int64_t *desc) {
    const cj_buffer *a = &p->buffers[k->exprs[0].buffer];
    const cj_buffer *b = k->nexprs > 1 ? &p->buffers[k->exprs[1].buffer] : NULL;
    desc[0] = k->exprs[0].buffer;
    desc[1] = b ? k->exprs[1].buffer : -1;
    desc[2] = k->out_buffer;
    desc[3] = a->shape.rank > 0 ? a->shape.dims[a->shape.rank - 1] : 1;
    desc[4] = b && b->shape.rank > 0 ? b->shape.dims[b->shape.rank - 1] : desc[3];
    desc[5] = a->dtype;
    desc[6] = p->graph && k->root_node >= 0 ? p->graph->nodes[k->root_node].attrs.index : 0;
    desc[7] = a->shape.rank > 1 ? a->shape.dims[a->shape.rank - 2] : 1;
}

/* See kernel.h. */
bool cj_kernel_is_small_copy(const cj_plan *p, const cj_kernel *k) {
    if (k->loop || k->gemm.on || k->call || k->reduced || k->nalso || k->nexprs != 1 || k->exprs[0].kind != CJ_EX_LOAD)
        return false;
    if (p->buffers[k->exprs[0].buffer].dtype != p->buffers[k->out_buffer].dtype) return false;
    int64_t points = 1;
    for (int d = 0; d < k->rank; d++) points *= k->dims[d];
    return points < CJ_RUNTIME_COPY_POINTS;
}

/* See kernel.h. */
bool cj_plan_one_function(const cj_plan *p) {
    if (!p->loop_body || p->nkernels > CJ_ONE_FUNCTION_MAX_KERNELS || p->ngroups < 1) return false;
    for (int g = 0; g < p->ngroups; g++) {
        const cj_group *grp = &p->groups[g];
        for (int k = grp->first; k < grp->first + grp->count; k++) {
            const cj_kernel *kern = &p->kernels[k];
            if (kern->loop || kern->call || kern->gemm.on) return false;
            int64_t points = 1;
            for (int d = 0; d < kern->rank; d++) points *= kern->dims[d];
            if (points >= CJ_SMALL_BODY_KERNEL_POINTS) return false;
        }
    }
    return true;
}

/* See kernel.h. */
int64_t cj_plan_heap_bytes(const cj_plan *p) {
    int64_t n = cj_heap_bytes(p->kernels, (size_t)p->kernels_cap * sizeof *p->kernels)
                + cj_heap_bytes(p->buffers, (size_t)p->buffers_cap * sizeof *p->buffers)
                + cj_heap_bytes(p->groups, (size_t)p->nkernels * sizeof *p->groups)
                + cj_heap_bytes(p->output_buffer, sizeof(int) * (size_t)(p->graph ? p->graph->noutputs : 0))
                + cj_heap_bytes(p->donated, sizeof(bool) * (size_t)(p->graph ? p->graph->nparams : 0));
    for (int i = 0; i < p->nkernels; i++) {
        n += cj_heap_bytes(p->kernels[i].exprs, (size_t)p->kernels[i].nexprs * sizeof(cj_expr));
        n += cj_heap_bytes(p->kernels[i].label, p->kernels[i].label ? strlen(p->kernels[i].label) + 1 : 0);
        n += cj_heap_bytes(p->kernels[i].also, (size_t)p->kernels[i].nalso * sizeof(cj_store));
    }
    return n;
}

/* See kernel.h. */
void cj_plan_free(cj_plan *plan) {
    if (!plan) return;
    for (int i = 0; i < plan->nkernels; i++) {
        free(plan->kernels[i].exprs);
        free(plan->kernels[i].label);
        free(plan->kernels[i].also);
        cj_loop_plan_free(plan->kernels[i].loop);
    }
    free(plan->kernels);
    free(plan->groups);
    free(plan->buffers);
    free(plan->output_buffer);
    free(plan->donated);
    memset(plan, 0, sizeof *plan);
}

/* ---- text ---------------------------------------------------------------- */

typedef struct {
    char *s;
    size_t len, cap;
    bool oom;
} text_buf;

static void put(text_buf *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text_buf *t, const char *fmt, ...) {
    if (t->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (t->s && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t ncap = (t->cap ? t->cap : 256) * 2;
        while (ncap < t->len + (size_t)n + 1) ncap *= 2;
        char *s = realloc(t->s, ncap);
        if (!s) {
            t->oom = true;
            return;
        }
        t->s = s;
        t->cap = ncap;
    }
}

static const char *buf_kind_name(cj_buf_kind k) {
    switch (k) {
    case CJ_BUF_PARAM: return "param";
    case CJ_BUF_ARRAY: return "array";
    case CJ_BUF_OUTPUT: return "output";
    case CJ_BUF_TEMP: return "temp";
    }
    return "?";
}

/* Marks the buffers that kernels of the backward pass read (bool per buffer). */
static bool *read_by_backward(const cj_plan *p) {
    bool *read = calloc((size_t)p->nbuffers + 1, sizeof(bool));
    const cj_graph *g = p->graph;
    for (int k = 0; read && g && k < p->nkernels; k++) {
        const cj_kernel *kern = &p->kernels[k];
        if (kern->root_node < g->backward_start) continue;
        for (int e = 0; e < kern->nexprs; e++)
            if (cj_expr_reads(&kern->exprs[e])) read[kern->exprs[e].buffer] = true;
    }
    return read;
}

/* See kernel.h. */
void cj_plan_costs(const cj_plan *p, int64_t *flops, int64_t *bytes) {
    *flops = *bytes = 0;
    for (int k = 0; k < p->nkernels; k++) {
        const cj_kernel *kern = &p->kernels[k];
        int64_t points = 1;
        for (int d = 0; d < kern->rank; d++) points *= kern->dims[d];
        int ops = 0;
        for (int e = 0; e < kern->nexprs; e++) ops += kern->exprs[e].kind == CJ_EX_OP;
        if (kern->reduced) ops++;
        *flops += points * ops;
        *bytes += p->buffers[kern->out_buffer].nbytes;
        for (int i = 0; i < kern->nalso; i++) *bytes += p->buffers[kern->also[i].buffer].nbytes;
        for (int e = 0; e < kern->nexprs; e++) {
            if (!cj_expr_reads(&kern->exprs[e])) continue;
            bool seen = false;
            for (int f = 0; f < e; f++)
                seen |= cj_expr_reads(&kern->exprs[f]) && kern->exprs[f].buffer == kern->exprs[e].buffer;
            if (!seen) *bytes += p->buffers[kern->exprs[e].buffer].nbytes;
        }
    }
}

/* See kernel.h. */
char *cj_plan_to_text(const cj_plan *p) {
    text_buf t = {0};
    char shape[128];
    const cj_graph *g = p->graph;
    int gi = 0, group_count = 0; /* the group of stage k (groups are consecutive runs of stages) */
    for (int k = 0; k < p->nkernels; k++) {
        const cj_kernel *kern = &p->kernels[k];
        for (; gi < p->ngroups && p->groups[gi].first <= k; gi++) {
            const cj_group *grp = &p->groups[gi];
            group_count = grp->count;
            if (grp->first == k)
                put(&t, grp->count > 1 ? "kernel %d: %d stages over %lld rows, in blocks of %lld rows\n" : "kernel %d:\n",
                    gi, grp->count, (long long)grp->rows, (long long)grp->block);
        }
        bool recomputed = g && kern->root_node >= 0 && g->nodes[kern->root_node].remat;
        bool copied = group_count == 1 && cj_kernel_is_small_copy(p, kern) && !p->one_function;
        put(&t, "  stage %d: %s%s%s%s  loops [", k, kern->label ? kern->label : "?",
            cj_kernel_is_matvec(p, kern) ? " (matvec)" : kern->gemm.small ? " (small gemm)" : kern->gemm.on ? " (BLAS gemm)" : "", copied ? " (copied by the runtime)" : "",
            recomputed ? " (recomputed for the backward pass)" : "");
        for (int d = 0; d < kern->rank; d++)
            put(&t, "%s%lld%s", d ? ", " : "", (long long)kern->dims[d], kern->reduced & (1u << d) ? "r" : "");
        put(&t, "] -> ");
        for (int i = 0; i < kern->nalso; i++) put(&t, "buf%d, ", kern->also[i].buffer);
        put(&t, "buf%d", kern->out_buffer);
        if (kern->root_node >= 0 && g) put(&t, "  # %s", cj_graph_loc_str(g, g->nodes[kern->root_node].loc));
        put(&t, "\n      reads:");
        int nreads = 0;
        for (int e = 0; e < kern->nexprs; e++) {
            if (!cj_expr_reads(&kern->exprs[e])) continue;
            bool seen = false;
            for (int f = 0; f < e; f++)
                seen |= cj_expr_reads(&kern->exprs[f]) && kern->exprs[f].buffer == kern->exprs[e].buffer;
            if (!seen) put(&t, " buf%d", kern->exprs[e].buffer), nreads++;
        }
        put(&t, "%s\n", nreads ? "" : " (nothing)");
        for (int j = 0; kern->loop && j < kern->loop->body->ngraphs; j++) {
            /* a loop's bodies: their own plans, indented */
            const cj_body *b = kern->loop->body;
            const char *what = b->op == CJ_OP_SCAN ? "body" : b->op == CJ_OP_COND ? "branch" : j == 0 ? "cond" : "body";
            put(&t, "      %s %d%s%s:\n", what, j,
                b->op == CJ_OP_SCAN ? (b->reverse ? " (reversed rows)" : "") : "",
                kern->loop->plans[j] && kern->loop->plans[j]->one_function ? " (one function per run)" : "");
            char *inner = kern->loop->plans[j] ? cj_plan_to_text(kern->loop->plans[j]) : NULL;
            for (char *line = inner, *end; line && *line; line = end + (*end != 0)) {
                end = strchr(line, '\n');
                if (!end) end = line + strlen(line);
                put(&t, "      | %.*s\n", (int)(end - line), line);
            }
            free(inner);
        }
    }
    put(&t, "buffers:\n");
    bool *backward_reads = read_by_backward(p);
    for (int b = 0; b < p->nbuffers; b++) {
        const cj_buffer *buf = &p->buffers[b];
        put(&t, "  buf%d %s", b, buf_kind_name(buf->kind));
        if (buf->kind != CJ_BUF_TEMP) put(&t, "[%d]", buf->slot);
        put(&t, " %s%s %lld bytes", cj_dtype_name(buf->dtype), cj_shape_str(&buf->shape, shape, sizeof shape),
            (long long)buf->nbytes);
        if (buf->alias_of >= 0)
            put(&t, " in buf%d's bytes at offset %lld (%s)", buf->alias_of, (long long)buf->offset,
                p->buffers[buf->alias_of].kind == CJ_BUF_PARAM ? "donated" : "in place");
        else if (buf->kind == CJ_BUF_TEMP)
            put(&t, " at offset %lld", (long long)buf->offset);
        put(&t, ", live in kernels %d..%d", buf->first_use, buf->last_use);
        if (g && buf->node >= 0 && g->backward_start >= 0 && buf->node < g->backward_start &&
            buf->kind == CJ_BUF_TEMP && backward_reads && backward_reads[b])
            put(&t, ", saved for the backward pass");
        if (g && buf->node >= 0)
            put(&t, "  # %s at %s", cj_op_name(g->nodes[buf->node].op), cj_graph_loc_str(g, g->nodes[buf->node].loc));
        put(&t, "\n");
    }
    free(backward_reads);
    put(&t, "memory: arguments %lld, outputs %lld, temporaries %lld (one arena), peak %lld bytes\n",
        (long long)p->argument_bytes, (long long)p->output_bytes, (long long)p->temp_bytes,
        (long long)p->peak_bytes);
    if (t.oom) {
        free(t.s);
        return NULL;
    }
    return t.s;
}

/* ---- loop plans and lowered graphs: made here, freed here ----------------- */

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

/* See pipeline.h. */
void cj_lowered_free(cj_lowered *l) {
    cj_plan_free(&l->plan);
    cj_graph_free(l->graph);
    memset(l, 0, sizeof *l);
}
