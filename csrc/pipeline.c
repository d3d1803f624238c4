/* pipeline.c - the pass list.  Reading cj_compile tells the whole story:
 *
 *   graph --simplify (dead code, CSE)--> graph --fuse--> kernels
 *         --blas (matmuls a library call runs)--> --group (stages sharing row loops)-->
 *         --memplan--> buffers in one arena
 *         --codegen + jit--> machine code
 *
 * CJIT_PASSES=-cse,-fuse,-group,-memplan switches passes off; results do not change. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blas.h"
#include "executable.h"
#include "group.h"
#include "simplify.h"

void cj_runtime_note_compile(int64_t code_bytes); /* runtime.c */

/* Is pass `name` switched off by CJIT_PASSES? */
static bool pass_disabled(const char *name) {
    const char *spec = getenv("CJIT_PASSES");
    if (!spec) return false;
    size_t n = strlen(name);
    for (const char *p = spec; (p = strstr(p, name)) != NULL; p += n) {
        bool starts = p > spec && p[-1] == '-';
        bool ends = p[n] == 0 || p[n] == ',';
        if (starts && ends) return true;
    }
    return false;
}

/* The environment a compile reads, checked before it starts: CJIT_PASSES
 * must be a comma-separated list of -name with known names (a typo would
 * otherwise switch nothing off, silently), and CJIT_DUMP a directory that
 * exists or can be made, and can be written. */
static const char *const known_passes[] = {"cse", "fuse", "group", "memplan"};
static bool settings_ok(cj_error *err) {
    const char *spec = getenv("CJIT_PASSES");
    for (const char *p = spec; p && *p;) {
        size_t len = strcspn(p, ",");
        bool known = false;
        for (size_t i = 0; i < sizeof known_passes / sizeof *known_passes; i++)
            known |= len == strlen(known_passes[i]) + 1 && p[0] == '-' && !strncmp(p + 1, known_passes[i], len - 1);
        if (!known && len > 0) {
            char names[64] = "";
            for (size_t i = 0; i < sizeof known_passes / sizeof *known_passes; i++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", known_passes[i]);
            cj_error_set(err, CJ_ERR_VALUE, "CJIT_PASSES=%s: '%.*s' is not a pass to switch off; the list is "
                         "-name,-name,... with names %s", spec, (int)len, p, names);
            return false;
        }
        p += len + (p[len] == ',');
    }
    const char *dir = getenv("CJIT_DUMP");
    if (dir && *dir) {
        struct stat st;
        const char *why = NULL;
        if (mkdir(dir, 0777) != 0 && errno != EEXIST) why = strerror(errno);
        else if (stat(dir, &st) != 0) why = strerror(errno);
        else if (!S_ISDIR(st.st_mode)) why = "it is not a directory";
        else if (access(dir, W_OK | X_OK) != 0) why = strerror(errno);
        if (why) {
            cj_error_set(err, CJ_ERR_VALUE, "CJIT_DUMP=%s: cannot write the dump there (%s); set it to a "
                         "writable directory, or unset it", dir, why);
            return false;
        }
    }
    return true;
}

/* flops: one per arithmetic expression per loop point; bytes: every
 * buffer a kernel touches, read or written once. */
static void count_costs(cj_executable *x) {
    const cj_plan *p = &x->plan;
    x->flops = x->bytes_accessed = 0;
    for (int k = 0; k < p->nkernels; k++) {
        const cj_kernel *kern = &p->kernels[k];
        int64_t points = 1;
        for (int d = 0; d < kern->rank; d++) points *= kern->dims[d];
        int ops = 0;
        for (int e = 0; e < kern->nexprs; e++) ops += kern->exprs[e].kind == CJ_EX_OP;
        if (kern->reduced) ops++;
        x->flops += points * ops;
        x->bytes_accessed += p->buffers[kern->out_buffer].nbytes;
        for (int e = 0; e < kern->nexprs; e++) {
            if (kern->exprs[e].kind != CJ_EX_LOAD) continue;
            bool seen = false;
            for (int f = 0; f < e; f++)
                seen |= kern->exprs[f].kind == CJ_EX_LOAD && kern->exprs[f].buffer == kern->exprs[e].buffer;
            if (!seen) x->bytes_accessed += p->buffers[kern->exprs[e].buffer].nbytes;
        }
    }
}

/* CJIT_DUMP=DIR: the simplified graph and the plan of each compile, next
 * to the LLVM IR that jit_cpu.c writes there. */
static void dump_graph_and_plan(const cj_executable *x) {
    const char *dir = getenv("CJIT_DUMP");
    if (!dir || !*dir) return;
    static _Atomic int counter;
    mkdir(dir, 0777);
    char path[1024];
    snprintf(path, sizeof path, "%s/compile%d.graph.txt", dir, ++counter);
    FILE *f = fopen(path, "w");
    if (!f) return;
    char *graph = cj_graph_to_text(x->graph), *plan = cj_plan_to_text(&x->plan);
    fprintf(f, "%s\n%s", graph ? graph : "", plan ? plan : "");
    free(graph);
    free(plan);
    fclose(f);
}

/* See pipeline.h. */
cj_executable *cj_compile(const cj_graph *src, cj_error *err) { return cj_compile_donated(src, NULL, 0, err); }

/* The memory a compiled executable holds until it is freed: the JIT's
 * mapped machine code, the plan, the graph copy (for names and source
 * lines) and the executable's own arrays, each block as the allocator
 * holds it.  This is what cache limits (max_code_bytes) bound. */
static int64_t held_bytes(const cj_executable *x) {
    return cj_jit_code_bytes(x->code) + cj_plan_heap_bytes(&x->plan) + cj_graph_heap_bytes(x->graph)
           + cj_heap_bytes(x, sizeof *x)
           + cj_heap_bytes(x->kernels, ((size_t)x->plan.nkernels + 1) * sizeof(cj_kernel_fn))
           + cj_heap_bytes(x->groups, ((size_t)x->plan.ngroups + 1) * sizeof(cj_kernel_fn));
}

/* See pipeline.h. */
cj_executable *cj_compile_donated(const cj_graph *src, const bool *donated, int ndonated, cj_error *err) {
    return cj_compile_cancellable(src, donated, ndonated, NULL, err);
}

/* Between phases: has the caller asked to stop?  Then err says so. */
static bool stop_requested(const cj_cancel *cancel, cj_error *err) {
    if (!cj_cancelled(cancel)) return false;
    cj_error_set(err, CJ_ERR_CANCELLED, "compile: cancelled");
    return true;
}

/* See pipeline.h. */
cj_executable *cj_compile_cancellable(const cj_graph *src, const bool *donated, int ndonated,
                                      const cj_cancel *cancel, cj_error *err) {
    if (!settings_ok(err)) return NULL;
    cj_executable *x = calloc(1, sizeof *x);
    bool *live = NULL;
    if (!x) return cj_error_set(err, CJ_ERR_MEMORY, "compile: out of memory"), NULL;
    int64_t t0 = cj_runtime_now_ns(), t1;
    if (!(x->graph = cj_simplify_run(src, !pass_disabled("cse"), err))) goto fail;
    cj_graph_trim(x->graph); /* kept as long as x: without the spare capacity */
    t1 = cj_runtime_now_ns();
    cj_runtime_note_phase(CJ_PHASE_SIMPLIFY, t1 - t0);
    if (stop_requested(cancel, err)) goto fail;
    if (!(live = calloc((size_t)x->graph->nnodes + 1, sizeof(bool)))) {
        cj_error_set(err, CJ_ERR_MEMORY, "compile: out of memory");
        goto fail;
    }
    for (int i = 0; i < x->graph->nnodes; i++) live[i] = true; /* simplify dropped the dead */
    if (cj_fuse_run(x->graph, live, !pass_disabled("fuse"), &x->plan, err) != CJ_OK) goto fail;
    cj_blas_plan(&x->plan);
    t0 = cj_runtime_now_ns();
    cj_runtime_note_phase(CJ_PHASE_FUSE, t0 - t1);
    if (stop_requested(cancel, err)) goto fail;
    if (donated && ndonated > 0) {
        x->plan.donated = calloc((size_t)x->graph->nparams + 1, sizeof(bool));
        if (!x->plan.donated) {
            cj_error_set(err, CJ_ERR_MEMORY, "compile: out of memory");
            goto fail;
        }
        for (int i = 0; i < ndonated && i < x->graph->nparams; i++) x->plan.donated[i] = donated[i];
    }
    if (cj_group_run(&x->plan, !pass_disabled("group") && !pass_disabled("fuse"), err) != CJ_OK) goto fail;
    if (cj_memplan_run(&x->plan, !pass_disabled("memplan"), err) != CJ_OK) goto fail;
    cj_runtime_note_phase(CJ_PHASE_MEMPLAN, cj_runtime_now_ns() - t0);
    if (stop_requested(cancel, err)) goto fail;
    x->kernels = calloc((size_t)x->plan.nkernels + 1, sizeof(cj_kernel_fn));
    x->groups = calloc((size_t)x->plan.ngroups + 1, sizeof(cj_kernel_fn));
    if (!x->kernels || !x->groups) {
        cj_error_set(err, CJ_ERR_MEMORY, "compile: out of memory");
        goto fail;
    }
    dump_graph_and_plan(x);
    if (cj_jit_compile(&x->plan, x->kernels, x->groups, &x->code, cancel, err) != CJ_OK) goto fail;
    count_costs(x);
    x->held_bytes = held_bytes(x);
    cj_runtime_note_compile(x->held_bytes);
    free(live);
    return x;
fail:
    free(live);
    cj_executable_free(x);
    return NULL;
}

/* See pipeline.h. */
cj_status cj_plan_peak(const cj_graph *src, int64_t *peak, cj_error *err) {
    if (!settings_ok(err)) return err->status;
    cj_plan plan;
    memset(&plan, 0, sizeof plan);
    cj_graph *g = cj_simplify_run(src, !pass_disabled("cse"), err);
    bool *live = g ? calloc((size_t)g->nnodes + 1, sizeof(bool)) : NULL;
    if (g && !live) cj_error_set(err, CJ_ERR_MEMORY, "plan: out of memory");
    if (live) {
        for (int i = 0; i < g->nnodes; i++) live[i] = true;
        if (cj_fuse_run(g, live, !pass_disabled("fuse"), &plan, err) == CJ_OK &&
            (cj_blas_plan(&plan), true) &&
            cj_group_run(&plan, !pass_disabled("group") && !pass_disabled("fuse"), err) == CJ_OK &&
            cj_memplan_run(&plan, !pass_disabled("memplan"), err) == CJ_OK)
            *peak = plan.peak_bytes;
    }
    cj_plan_free(&plan);
    free(live);
    cj_graph_free(g);
    return err->status;
}

/* ---- text ---------------------------------------------------------------- */

typedef struct {
    char *s;
    size_t len, cap;
    bool oom;
} text_buf;

static void put(text_buf *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
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
            if (kern->exprs[e].kind == CJ_EX_LOAD) read[kern->exprs[e].buffer] = true;
    }
    return read;
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
        bool copied = group_count == 1 && cj_kernel_is_small_copy(p, kern);
        put(&t, "  stage %d: %s%s%s%s  loops [", k, kern->label ? kern->label : "?",
            kern->gemm.small ? " (small gemm)" : kern->gemm.on ? " (BLAS gemm)" : "", copied ? " (copied by the runtime)" : "",
            recomputed ? " (recomputed for the backward pass)" : "");
        for (int d = 0; d < kern->rank; d++)
            put(&t, "%s%lld%s", d ? ", " : "", (long long)kern->dims[d], kern->reduced & (1u << d) ? "r" : "");
        put(&t, "] -> buf%d", kern->out_buffer);
        if (kern->root_node >= 0 && g) put(&t, "  # %s", cj_graph_loc_str(g, g->nodes[kern->root_node].loc));
        put(&t, "\n      reads:");
        int nreads = 0;
        for (int e = 0; e < kern->nexprs; e++) {
            if (kern->exprs[e].kind != CJ_EX_LOAD) continue;
            bool seen = false;
            for (int f = 0; f < e; f++)
                seen |= kern->exprs[f].kind == CJ_EX_LOAD && kern->exprs[f].buffer == kern->exprs[e].buffer;
            if (!seen) put(&t, " buf%d", kern->exprs[e].buffer), nreads++;
        }
        put(&t, "%s\n", nreads ? "" : " (nothing)");
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

/* See pipeline.h. */
char *cj_executable_to_text(const cj_executable *x) { return cj_plan_to_text(&x->plan); }
