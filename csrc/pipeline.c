/* pipeline.c - the pass list.  Reading lowering_passes and cj_compile tells
 * the whole story:
 *
 *   cj_lower:  graph --simplify (dead code, CSE)--> graph --fuse--> kernels
 *              (the target marks kernels a library runs: the CPU's BLAS)
 *              --group (stages sharing row loops)--> --memplan--> buffers in one arena
 *   backend:   plan --codegen + jit (jit_cpu.c)--> machine code
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
        for (int i = 0; i < kern->nalso; i++) x->bytes_accessed += p->buffers[kern->also[i].buffer].nbytes;
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

/* ---- lowering: one table of passes ------------------------------------------
 * Each pass reads and changes the lowering; `name` is what CJIT_PASSES
 * calls it ("-cse" keeps simplify's dead-code removal and drops its
 * merging) and `phase` the timer it adds to.  The loop below is the only
 * place that knows about either. */

typedef struct {
    const char *name;
    cj_phase phase;
    cj_status (*run)(cj_lowered *l, const cj_lower_options *o, bool enabled, cj_error *err);
} lowering_pass;

static cj_status pass_simplify(cj_lowered *l, const cj_lower_options *o, bool enabled, cj_error *err) {
    (void)o;
    if (!(l->graph = cj_simplify_run(l->source, enabled, err))) return err->status;
    cj_graph_trim(l->graph); /* kept as long as the executable: without the spare capacity */
    return CJ_OK;
}

static cj_status pass_fuse(cj_lowered *l, const cj_lower_options *o, bool enabled, cj_error *err) {
    bool *live = calloc((size_t)l->graph->nnodes + 1, sizeof(bool));
    if (!live) return cj_error_set(err, CJ_ERR_MEMORY, "compile: out of memory");
    for (int i = 0; i < l->graph->nnodes; i++) live[i] = true; /* simplify dropped the dead */
    cj_status st = cj_fuse_run(l->graph, live, enabled, &l->plan, err);
    free(live);
    l->fused = enabled;
    /* the target marks the kernels a library runs (the CPU's BLAS) */
    if (st == CJ_OK && o && o->mark_library_calls) o->mark_library_calls(&l->plan);
    return st;
}

static cj_status pass_group(cj_lowered *l, const cj_lower_options *o, bool enabled, cj_error *err) {
    (void)o;
    return cj_group_run(&l->plan, enabled && l->fused, err);
}

static cj_status pass_memplan(cj_lowered *l, const cj_lower_options *o, bool enabled, cj_error *err) {
    if (o && o->donated && o->ndonated > 0) {
        l->plan.donated = calloc((size_t)l->graph->nparams + 1, sizeof(bool));
        if (!l->plan.donated) return cj_error_set(err, CJ_ERR_MEMORY, "compile: out of memory");
        for (int i = 0; i < o->ndonated && i < l->graph->nparams; i++) l->plan.donated[i] = o->donated[i];
    }
    return cj_memplan_run(&l->plan, enabled, err);
}

static const lowering_pass lowering_passes[] = {
    {"cse", CJ_PHASE_SIMPLIFY, pass_simplify},
    {"fuse", CJ_PHASE_FUSE, pass_fuse},
    {"group", CJ_PHASE_GROUP, pass_group},
    {"memplan", CJ_PHASE_MEMPLAN, pass_memplan},
};

/* See pipeline.h. */
cj_status cj_lower(const cj_graph *src, const cj_lower_options *o, cj_lowered *l, cj_error *err) {
    memset(l, 0, sizeof *l);
    l->source = src;
    if (!settings_ok(err)) return err->status;
    for (size_t i = 0; i < sizeof lowering_passes / sizeof *lowering_passes; i++) {
        const lowering_pass *pass = &lowering_passes[i];
        int64_t t0 = cj_clock_ns();
        cj_status st = pass->run(l, o, !pass_disabled(pass->name), err);
        cj_stats_phase(pass->phase, cj_clock_ns() - t0);
        if (st == CJ_OK && o && cj_cancelled(o->cancel)) st = cj_error_set(err, CJ_ERR_CANCELLED, "compile: cancelled");
        if (st != CJ_OK) {
            cj_lowered_free(l);
            return st;
        }
    }
    l->source = NULL;
    return CJ_OK;
}

/* See pipeline.h. */
void cj_lowered_free(cj_lowered *l) {
    cj_plan_free(&l->plan);
    cj_graph_free(l->graph);
    memset(l, 0, sizeof *l);
}

/* See pipeline.h. */
cj_executable *cj_compile_cancellable(const cj_graph *src, const bool *donated, int ndonated,
                                      const cj_cancel *cancel, cj_error *err) {
    cj_lower_options o = {.donated = donated, .ndonated = ndonated, .cancel = cancel,
                          .mark_library_calls = cj_blas_plan};
    cj_lowered l;
    if (cj_lower(src, &o, &l, err) != CJ_OK) return NULL;
    cj_executable *x = calloc(1, sizeof *x);
    if (!x) {
        cj_lowered_free(&l);
        return cj_error_set(err, CJ_ERR_MEMORY, "compile: out of memory"), NULL;
    }
    x->graph = l.graph; /* the executable owns what was lowered */
    x->plan = l.plan;
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
    cj_stats_compile(x->held_bytes);
    return x;
fail:
    cj_executable_free(x);
    return NULL;
}

/* See pipeline.h. */
cj_status cj_plan_peak(const cj_graph *src, int64_t *peak, cj_error *err) {
    cj_lower_options o = {.mark_library_calls = cj_blas_plan};
    cj_lowered l;
    if (cj_lower(src, &o, &l, err) != CJ_OK) return err->status;
    *peak = l.plan.peak_bytes;
    cj_lowered_free(&l);
    return CJ_OK;
}

/* ---- the executable: made by cj_compile above, freed here ---------------- */

/* See pipeline.h. */
void cj_executable_free(cj_executable *x) {
    if (!x) return;
    if (x->code) cj_stats_code_freed(x->held_bytes);
    cj_jit_code_free(x->code);
    cj_plan_free(&x->plan);
    if (x->graph) cj_graph_free(x->graph);
    free(x->kernels);
    free(x->groups);
    free(x);
}

int cj_executable_nparams(const cj_executable *x) { return x->graph->nparams; }
int cj_executable_narrays(const cj_executable *x) { return x->graph->narrays; }
int cj_executable_noutputs(const cj_executable *x) { return x->graph->noutputs; }

void cj_executable_output(const cj_executable *x, int i, cj_shape *shape, cj_dtype *dtype) {
    const cj_node *n = &x->graph->nodes[x->graph->outputs[i]];
    *shape = n->shape;
    *dtype = n->dtype;
}

const cj_plan *cj_executable_plan(const cj_executable *x) { return &x->plan; }
int64_t cj_executable_flops(const cj_executable *x) { return x->flops; }
int64_t cj_executable_bytes_accessed(const cj_executable *x) { return x->bytes_accessed; }
int64_t cj_executable_code_bytes(const cj_executable *x) { return x->held_bytes; }

/* See pipeline.h. */
char *cj_executable_to_text(const cj_executable *x) { return cj_plan_to_text(&x->plan); }
