/* pipeline.c - from a graph to an executable: cj_lower's plan (lower.c),
 * then the CPU backend's code for it:
 *
 *   cj_lower:  graph --simplify, fuse, (BLAS marks), group, memplan--> plan
 *   backend:   plan --codegen + jit (jit_cpu.c)--> machine code
 *
 * and the executable as bytes for the disk cache, and back. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "blas.h"
#include "executable.h"
#include "loops.h"
#include "plan_io.h"

/* flops and bytes accessed, for cost_analysis() (plan.c). */
static void count_costs(cj_executable *x) { cj_plan_costs(&x->plan, &x->flops, &x->bytes_accessed); }

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
    int64_t bodies = 0;
    for (int k = 0; k < x->plan.nkernels; k++) {
        const cj_loop_plan *L = x->plan.kernels[k].loop;
        for (int j = 0; L && j < L->body->ngraphs; j++) bodies += L->exe[j] ? L->exe[j]->held_bytes : 0;
    }
    return bodies + cj_jit_code_bytes(x->code) + cj_plan_heap_bytes(&x->plan) + cj_graph_heap_bytes(x->graph)
           + cj_heap_bytes(x, sizeof *x)
           + cj_heap_bytes(x->kernels, ((size_t)x->plan.nkernels + 1) * sizeof(cj_kernel_fn))
           + cj_heap_bytes(x->groups, ((size_t)x->plan.ngroups + 1) * sizeof(cj_kernel_fn));
}

/* See pipeline.h. */
cj_executable *cj_compile_donated(const cj_graph *src, const bool *donated, int ndonated, cj_error *err) {
    return cj_compile_cancellable(src, donated, ndonated, NULL, err);
}

/* See pipeline.h. */
cj_executable *cj_compile_cancellable(const cj_graph *src, const bool *donated, int ndonated,
                                      const cj_cancel *cancel, cj_error *err) {
    return cj_compile_keeping(src, donated, ndonated, cancel, false, err);
}

static cj_executable *from_lowered(cj_lowered *l, const cj_cancel *cancel, bool keep_objects, cj_error *err);

/* Compiles the bodies of x's loop kernels (control flow, loops.h) into
 * executables of their own, which the loop plans hold. */
static cj_status compile_loops(cj_executable *x, const cj_cancel *cancel, cj_error *err) {
    for (int k = 0; k < x->plan.nkernels; k++) {
        cj_loop_plan *L = x->plan.kernels[k].loop;
        if (!L) continue;
        x->has_loops = true;
        L->free_exe = cj_executable_free;
        for (int j = 0; j < L->body->ngraphs; j++) {
            L->exe[j] = from_lowered(&L->lowered[j], cancel, false, err);
            if (!L->exe[j]) return err->status;
            L->exe[j]->nested = true;
            cj_runtime_prepare_body(L->exe[j]);
            L->plans[j] = &L->exe[j]->plan;
        }
    }
    return CJ_OK;
}

/* The work of x's loops: a scan's body times its trip count, a while
 * loop's once (its trip count is unknown), a cond's largest branch. */
static void count_loop_costs(cj_executable *x) {
    for (int k = 0; k < x->plan.nkernels; k++) {
        const cj_loop_plan *L = x->plan.kernels[k].loop;
        if (!L) continue;
        int64_t flops = 0, bytes = 0;
        for (int j = 0; j < L->body->ngraphs; j++) {
            const cj_executable *b = L->exe[j];
            if (L->body->op == CJ_OP_COND) {
                if (b->flops > flops) flops = b->flops;
                if (b->bytes_accessed > bytes) bytes = b->bytes_accessed;
            } else {
                flops += b->flops;
                bytes += b->bytes_accessed;
            }
        }
        int64_t times = L->body->op == CJ_OP_SCAN ? L->body->length : 1;
        x->flops += flops * times;
        x->bytes_accessed += bytes * times;
    }
}

/* An executable made of what l holds (moved out of it: l is left empty). */
static cj_executable *from_lowered(cj_lowered *l, const cj_cancel *cancel, bool keep_objects, cj_error *err) {
    cj_executable *x = calloc(1, sizeof *x);
    if (!x) {
        cj_lowered_free(l);
        return cj_error_set(err, CJ_ERR_MEMORY, "compile: out of memory"), NULL;
    }
    x->graph = l->graph; /* the executable owns what was lowered */
    x->plan = l->plan;
    memset(l, 0, sizeof *l);
    x->kernels = calloc((size_t)x->plan.nkernels + 1, sizeof(cj_kernel_fn));
    x->groups = calloc((size_t)x->plan.ngroups + 1, sizeof(cj_kernel_fn));
    if (!x->kernels || !x->groups) {
        cj_error_set(err, CJ_ERR_MEMORY, "compile: out of memory");
        goto fail;
    }
    dump_graph_and_plan(x);
    if (cj_jit_compile_keeping(&x->plan, x->kernels, x->groups, &x->code, cancel, keep_objects, err) != CJ_OK)
        goto fail;
    if (compile_loops(x, cancel, err) != CJ_OK) goto fail;
    count_costs(x);
    count_loop_costs(x);
    x->held_bytes = held_bytes(x);
    return x;
fail:
    cj_executable_free(x);
    return NULL;
}

/* See pipeline.h. */
cj_executable *cj_compile_keeping(const cj_graph *src, const bool *donated, int ndonated, const cj_cancel *cancel,
                                  bool keep_objects, cj_error *err) {
    cj_lower_options o = {.donated = donated, .ndonated = ndonated, .cancel = cancel,
                          .mark_library_calls = cj_blas_plan};
    cj_lowered l;
    if (cj_lower(src, &o, &l, err) != CJ_OK) return NULL;
    cj_executable *x = from_lowered(&l, cancel, keep_objects, err);
    if (x) cj_stats_compile(x->held_bytes);
    return x;
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

/* ---- the disk cache's entries: an executable as bytes, and back ------------- */

/* The first bytes of an entry, and its layout's version: an entry of
 * another version is refused (and compiled again by the caller). */
static const char entry_magic[8] = {'c', 'j', 'i', 't', 'e', 'x', 'e', 0};
#define CJ_ENTRY_VERSION 1

/* See pipeline.h. */
cj_status cj_executable_serialize(cj_executable *x, uint8_t **out, size_t *len, cj_error *err) {
    if (x->has_loops) return cj_error_set(err, CJ_ERR_VALUE, "serialize: control flow is not saved to the disk cache");
    cj_jit_objects *o = cj_jit_code_take_objects(x->code);
    if (!o) return cj_error_set(err, CJ_ERR_VALUE, "serialize: the executable kept no object files");
    cj_wbuf w = {0};
    cj_put_bytes(&w, entry_magic, sizeof entry_magic);
    cj_put_int(&w, CJ_ENTRY_VERSION);
    cj_graph_write(&w, x->graph);
    cj_plan_write(&w, &x->plan);
    for (int k = 0; k < x->plan.nkernels; k++) cj_put_int(&w, x->kernels[k] != NULL);
    cj_put_str(&w, o->prefix);
    cj_put_int(&w, o->nmath);
    for (int i = 0; i < o->nmath; i++) cj_put_str(&w, o->math[i]);
    cj_put_int(&w, o->nobjs);
    for (int i = 0; i < o->nobjs; i++) {
        cj_put_int(&w, (int64_t)o->sizes[i]);
        cj_put_bytes(&w, o->objs[i], o->sizes[i]);
    }
    cj_jit_objects_free(o);
    if (w.oom) {
        free(w.data);
        return cj_error_set(err, CJ_ERR_MEMORY, "serialize: out of memory");
    }
    *out = w.data;
    *len = w.len;
    return CJ_OK;
}

/* Reads the code part of an entry into o; false when the bytes are bad. */
static bool read_objects(cj_rbuf *r, cj_jit_objects *o) {
    bool absent;
    char *prefix = cj_get_str(r, &absent);
    if (!prefix || strlen(prefix) >= sizeof o->prefix || strspn(prefix, "cx0123456789abcdef") != strlen(prefix)) {
        free(prefix);
        return false;
    }
    strcpy(o->prefix, prefix);
    free(prefix);
    int nmath = (int)cj_get_int(r, 0, 4096);
    if (r->bad || !(o->math = calloc((size_t)nmath + 1, sizeof(char *)))) return false;
    for (; o->nmath < nmath; o->nmath++)
        if (!(o->math[o->nmath] = cj_get_str(r, &absent))) return false;
    int nobjs = (int)cj_get_int(r, 0, (int64_t)(r->len - r->pos));
    o->objs = calloc((size_t)nobjs + 1, sizeof(uint8_t *));
    o->sizes = calloc((size_t)nobjs + 1, sizeof(size_t));
    if (r->bad || !o->objs || !o->sizes) return false;
    for (; o->nobjs < nobjs; o->nobjs++) {
        size_t size = (size_t)cj_get_int(r, 1, (int64_t)(r->len - r->pos));
        const uint8_t *bytes = cj_get_bytes(r, size);
        if (!bytes || !(o->objs[o->nobjs] = malloc(size))) return false;
        memcpy(o->objs[o->nobjs], bytes, size);
        o->sizes[o->nobjs] = size;
    }
    return r->pos == r->len; /* nothing may follow */
}

/* See pipeline.h. */
cj_executable *cj_executable_load(const uint8_t *data, size_t len, const cj_graph *source, cj_error *err) {
    cj_rbuf r = {.data = data, .len = len};
    const uint8_t *magic = cj_get_bytes(&r, sizeof entry_magic);
    if (!magic || memcmp(magic, entry_magic, sizeof entry_magic) != 0)
        return cj_error_set(err, CJ_ERR_VALUE, "cache entry: not a cjit entry"), NULL;
    int64_t version = cj_get_int(&r, INT64_MIN, INT64_MAX);
    if (version != CJ_ENTRY_VERSION)
        return cj_error_set(err, CJ_ERR_VALUE, "cache entry: version %lld, expected %d", (long long)version,
                            CJ_ENTRY_VERSION), NULL;
    cj_jit_objects *o = calloc(1, sizeof *o);
    cj_executable *x = calloc(1, sizeof *x);
    bool *compiled = NULL;
    if (!o || !x) {
        cj_error_set(err, CJ_ERR_MEMORY, "cache entry: out of memory");
        goto fail;
    }
    if (!(x->graph = cj_graph_read(&r, source, err))) goto fail;
    if (cj_plan_read(&r, x->graph, &x->plan, err) != CJ_OK) goto fail;
    x->kernels = calloc((size_t)x->plan.nkernels + 1, sizeof(cj_kernel_fn));
    x->groups = calloc((size_t)x->plan.ngroups + 1, sizeof(cj_kernel_fn));
    compiled = calloc((size_t)x->plan.nkernels + 1, sizeof(bool));
    if (!x->kernels || !x->groups || !compiled) {
        cj_error_set(err, CJ_ERR_MEMORY, "cache entry: out of memory");
        goto fail;
    }
    for (int k = 0; k < x->plan.nkernels; k++) compiled[k] = cj_get_int(&r, 0, 1);
    if (!read_objects(&r, o) || r.bad) {
        cj_error_set(err, CJ_ERR_VALUE, "cache entry: bad code section");
        goto fail;
    }
    for (int g = 0; g < x->plan.ngroups; g++) /* every stage of a group runs through its driver */
        for (int k = x->plan.groups[g].first; x->plan.groups[g].count > 1 && k < x->plan.groups[g].first +
                                                                       x->plan.groups[g].count; k++)
            if (!compiled[k]) {
                cj_error_set(err, CJ_ERR_VALUE, "cache entry: a grouped stage has no code");
                goto fail;
            }
    if (cj_jit_load(&x->plan, o, compiled, x->kernels, x->groups, &x->code, err) != CJ_OK) goto fail;
    cj_jit_objects_free(o);
    free(compiled);
    count_costs(x);
    x->held_bytes = held_bytes(x);
    cj_stats_loaded(x->held_bytes);
    return x;
fail:
    if (err->status == CJ_OK) cj_error_set(err, CJ_ERR_VALUE, "cache entry: bad bytes");
    cj_jit_objects_free(o);
    free(compiled);
    cj_executable_free(x);
    return NULL;
}

/* See pipeline.h. */
cj_status cj_graph_key_bytes(const cj_graph *g, uint8_t **out, size_t *len, cj_error *err) {
    cj_wbuf w = {0};
    cj_graph_write(&w, g);
    if (w.oom) {
        free(w.data);
        return cj_error_set(err, CJ_ERR_MEMORY, "cache key: out of memory");
    }
    *out = w.data;
    *len = w.len;
    return CJ_OK;
}

/* ---- the executable: made by cj_compile above, freed here ---------------- */

/* See pipeline.h. */
void cj_executable_free(cj_executable *x) {
    if (!x) return;
    if (x->code && !x->nested) cj_stats_code_freed(x->held_bytes);
    cj_jit_code_free(x->code);
    cj_plan_free(&x->plan);
    if (x->graph) cj_graph_free(x->graph);
    free(x->kernels);
    free(x->groups);
    free(x->rebind);
    free(x->steps);
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
