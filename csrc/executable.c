/* executable.c - the CPU backend: the pipeline's codegen and link steps
 * (pipeline.c's list calls them through cj_backend_cpu), the executable
 * they make, its costs and its life, and the executable as bytes for the
 * disk cache, and back.
 *
 *   codegen:  the lowered plan -> an executable; LLVM modules compiled to
 *             object files on parallel threads (jit_cpu.c, cj_jit_emit)
 *   link:     the object files into the process's JIT, the kernels looked
 *             up (cj_jit_link); each loop body compiled the same way */
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

/* CJIT_LOOP_ONE_FUNCTION=0 compiles every loop body group by group (the
 * general path, for comparisons); read at each compile, part of the disk
 * cache's key. */
static bool one_function_wanted(void) {
    const char *env = getenv("CJIT_LOOP_ONE_FUNCTION");
    return !(env && strcmp(env, "0") == 0);
}

/* Makes exe, compiled or loaded, body j of loop plan L: a loop's body, its
 * run worked out once (cj_runtime_prepare_body). */
static void adopt_body(cj_loop_plan *L, int j, cj_executable *exe) {
    exe->nested = true;
    cj_runtime_prepare_body(exe);
    L->exe[j] = exe;
    L->plans[j] = &exe->plan;
}

/* Compiles the bodies of x's loop kernels (control flow, loops.h), lowered
 * by the loops step, into executables of their own, which the loop plans
 * hold (each keeping its object files too when x does: a disk cache entry
 * holds every body's). */
static cj_status compile_loops(cj_executable *x, const cj_compile_options *o, cj_error *err) {
    cj_compile_options body = cj_compile_options_body(o);
    for (int k = 0; k < x->plan.nkernels; k++) {
        cj_loop_plan *L = x->plan.kernels[k].loop;
        if (!L) continue;
        x->has_loops = true;
        L->free_exe = cj_executable_free;
        for (int j = 0; j < L->body->ngraphs; j++) {
            cj_executable *exe = cj_pipeline_compile_lowered(&L->lowered[j], &body, err);
            if (!exe) return err->status;
            adopt_body(L, j, exe);
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

/* ---- the CPU backend: the codegen and link steps ----------------------------- */

/* codegen: an executable made of what was lowered (moved out of
 * s->lowered), its kernels compiled to object files (s->objects). */
static cj_status cpu_codegen(cj_compile_state *s, const cj_compile_options *o, cj_error *err) {
    cj_executable *x = s->exe = calloc(1, sizeof *x);
    if (!x) return cj_error_set(err, CJ_ERR_MEMORY, "compile: out of memory");
    x->graph = s->lowered.graph; /* the executable owns what was lowered */
    x->plan = s->lowered.plan;
    memset(&s->lowered, 0, sizeof s->lowered);
    x->kernels = calloc((size_t)x->plan.nkernels + 1, sizeof(cj_kernel_fn));
    x->groups = calloc((size_t)x->plan.ngroups + 1, sizeof(cj_kernel_fn));
    if (!x->kernels || !x->groups) return cj_error_set(err, CJ_ERR_MEMORY, "compile: out of memory");
    dump_graph_and_plan(x);
    x->plan.one_function = x->plan.loop_body && cj_plan_one_function(&x->plan) && one_function_wanted();
    cj_jit_pending *pending = NULL;
    cj_status st = cj_jit_emit(&x->plan, o->cancel, o->keep_objects, &pending, err);
    s->objects = pending;
    return st;
}

/* link: the object files into the JIT, the loop bodies compiled, the
 * executable's costs and held bytes counted. */
static cj_status cpu_link(cj_compile_state *s, const cj_compile_options *o, cj_error *err) {
    cj_executable *x = s->exe;
    cj_jit_pending *pending = s->objects;
    s->objects = NULL; /* consumed, also on failure */
    if (cj_jit_link(&x->plan, pending, x->kernels, x->groups, &x->code, err) != CJ_OK) return err->status;
    if (compile_loops(x, o, err) != CJ_OK) return err->status;
    count_costs(x);
    count_loop_costs(x);
    x->held_bytes = held_bytes(x);
    return CJ_OK;
}

static void cpu_discard(cj_compile_state *s) {
    cj_jit_pending_free(s->objects);
    cj_executable_free(s->exe);
    s->objects = NULL;
    s->exe = NULL;
}

const cj_backend cj_backend_cpu = {
    .name = "cpu",
    .mark_library_calls = cj_blas_plan,
    .threads = cj_runtime_num_threads,
    .codegen = cpu_codegen,
    .link = cpu_link,
    .discard = cpu_discard,
};

/* See pipeline.h. */
cj_executable *cj_compile(const cj_graph *g, const cj_compile_options *o, cj_error *err) {
    cj_compile_state s;
    if (o->last != CJ_STEP_LINK)
        return cj_error_set(err, CJ_ERR_VALUE, "compile: the options stop before link"), NULL;
    if (cj_pipeline_run(g, o, &s, err) != CJ_OK) return NULL;
    cj_stats_compile(s.exe->held_bytes);
    return s.exe;
}

/* ---- the disk cache's entries: an executable as bytes, and back ------------- */

/* The first bytes of an entry, and its layout's version: an entry of
 * another version is refused (and compiled again by the caller).
 *
 * An executable's bytes: its graph (with its bodies), its plan, which
 * kernels have code, for each kernel whether it is a loop and then the
 * loop plan and its bodies' executables (the same layout, one level
 * deeper), then its object files.  Each body executable has code of its
 * own, under a prefix of its own. */
static const char entry_magic[8] = {'c', 'j', 'i', 't', 'e', 'x', 'e', 0};
#define CJ_ENTRY_VERSION 3

static cj_status write_exe(cj_wbuf *w, cj_executable *x, const cj_loc_pool *pool, int depth, cj_error *err);

static cj_status write_loop(cj_wbuf *w, const cj_loop_plan *L, const cj_loc_pool *pool, int depth, cj_error *err) {
    for (int a = 0; a < L->ninputs; a++) cj_put_int(w, L->in_buf[a]);
    for (int k = 0; k < L->nresults; k++) cj_put_int(w, L->out_buf[k]);
    cj_put_int(w, L->work_buf);
    cj_put_int(w, L->arena_bytes);
    for (int c = 0; c < L->body->ncarry; c++) cj_put_int(w, L->spare_offset[c]);
    for (int k = 0; k < L->nresults; k++) cj_put_int(w, L->dead_offset[k]);
    cj_put_int(w, L->pred_offset);
    cj_put_int(w, L->work_bytes);
    for (int j = 0; j < L->body->ngraphs; j++)
        if (write_exe(w, L->exe[j], pool, depth + 1, err) != CJ_OK) return err->status;
    return CJ_OK;
}

static cj_status write_exe(cj_wbuf *w, cj_executable *x, const cj_loc_pool *pool, int depth, cj_error *err) {
    if (depth > CJ_ENTRY_MAX_DEPTH)
        return cj_error_set(err, CJ_ERR_VALUE, "serialize: control flow nested more than %d deep", CJ_ENTRY_MAX_DEPTH);
    cj_jit_objects *o = cj_jit_code_take_objects(x->code);
    if (!o) return cj_error_set(err, CJ_ERR_VALUE, "serialize: the executable kept no object files");
    cj_graph_write(w, x->graph, pool);
    cj_plan_write(w, &x->plan);
    for (int k = 0; k < x->plan.nkernels; k++) cj_put_int(w, x->kernels[k] != NULL);
    for (int k = 0; k < x->plan.nkernels; k++) {
        const cj_loop_plan *L = x->plan.kernels[k].loop;
        cj_put_int(w, L != NULL);
        if (L && write_loop(w, L, pool, depth, err) != CJ_OK) {
            cj_jit_objects_free(o);
            return err->status;
        }
    }
    cj_put_str(w, o->prefix);
    cj_put_int(w, o->nmath);
    for (int i = 0; i < o->nmath; i++) cj_put_str(w, o->math[i]);
    cj_put_int(w, o->nobjs);
    for (int i = 0; i < o->nobjs; i++) {
        cj_put_int(w, (int64_t)o->sizes[i]);
        cj_put_bytes(w, o->objs[i], o->sizes[i]);
    }
    cj_jit_objects_free(o);
    if (w->too_deep)
        return cj_error_set(err, CJ_ERR_VALUE, "serialize: control flow nested more than %d deep", CJ_ENTRY_MAX_DEPTH);
    return CJ_OK;
}

/* See pipeline.h. */
cj_status cj_executable_serialize(cj_executable *x, const cj_graph *source, uint8_t **out, size_t *len,
                                  cj_error *err) {
    cj_loc_pool pool;
    if (cj_loc_pool_build(&pool, source, err) != CJ_OK) return err->status;
    cj_wbuf w = {0};
    cj_put_bytes(&w, entry_magic, sizeof entry_magic);
    cj_put_int(&w, CJ_ENTRY_VERSION);
    cj_status st = write_exe(&w, x, &pool, 0, err);
    cj_loc_pool_free(&pool);
    if (st == CJ_OK && w.oom) st = cj_error_set(err, CJ_ERR_MEMORY, "serialize: out of memory");
    if (st != CJ_OK) {
        free(w.data);
        return st;
    }
    *out = w.data;
    *len = w.len;
    return CJ_OK;
}

/* See codegen.h. */
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
    return !r->bad;
}

static int64_t bytes_of(const cj_shape *s, cj_dtype dt) { return cj_shape_numel(s) * cj_dtype_size(dt); }

static bool rows_of(const cj_shape *s, cj_shape *row) { /* s without its leading dim */
    if (s->rank < 1) return false;
    memset(row, 0, sizeof *row);
    row->rank = s->rank - 1;
    for (int d = 1; d < s->rank; d++) row->dims[d - 1] = s->dims[d];
    return true;
}

/* The shape and dtype loops_rt.c gives parameter `slot` of a body graph of
 * region node n (the layouts in regions.h); false when there is none. */
static bool body_param(const cj_graph *g, const cj_node *n, const cj_body *b, int slot, cj_shape *s, cj_dtype *dt) {
    int input = slot; /* while: [carries, consts] are the node's inputs */
    if (b->op == CJ_OP_SCAN) {
        if (slot == 0) { /* the row index */
            memset(s, 0, sizeof *s);
            *dt = CJ_INT32;
            return true;
        }
        input = slot - 1;
    } else if (b->op == CJ_OP_COND) {
        input = slot + 1; /* after the branch index */
    }
    if (slot < 0 || input >= n->ninputs) return false;
    const cj_node *in = &g->nodes[n->inputs[input]];
    *dt = in->dtype;
    if (b->op == CJ_OP_SCAN && input >= b->ncarry && input < b->ncarry + b->nxs) return rows_of(&in->shape, s);
    *s = in->shape;
    return true;
}

/* The number of outputs body graph j returns, and output o's shape and dtype. */
static int body_outputs(const cj_body *b, int j) {
    return b->op == CJ_OP_WHILE ? (j == 0 ? 1 : b->ncarry) : b->nresults;
}

static bool body_output(const cj_body *b, int j, int o, cj_shape *s, cj_dtype *dt) {
    if (b->op == CJ_OP_WHILE && j == 0) {
        memset(s, 0, sizeof *s);
        *dt = CJ_BOOL;
        return true;
    }
    *dt = b->result_dtype[o];
    if (b->op == CJ_OP_SCAN && o >= b->ncarry) return rows_of(&b->result_shape[o], s);
    *s = b->result_shape[o];
    return true;
}

/* Does body executable bx take what the loop passes it and write what the
 * loop gives it room for? */
static bool body_fits(const cj_graph *g, const cj_node *n, const cj_loop_plan *L, int j, const cj_executable *bx) {
    const cj_graph *bg = bx->graph;
    const cj_body *b = L->body;
    if (bg->narrays != 0 || bg->noutputs != body_outputs(b, j) || bx->plan.arena_bytes > L->arena_bytes) return false;
    cj_shape s;
    cj_dtype dt;
    for (int i = 0; i < bg->nnodes; i++) {
        const cj_node *p = &bg->nodes[i];
        if (p->op != CJ_OP_PARAM) continue;
        if (!body_param(g, n, b, p->attrs.index, &s, &dt) || dt != p->dtype || !cj_shape_equal(&s, &p->shape))
            return false;
    }
    for (int o = 0; o < bg->noutputs; o++) {
        const cj_node *out = &bg->nodes[bg->outputs[o]];
        if (!body_output(b, j, o, &s, &dt) || dt != out->dtype || !cj_shape_equal(&s, &out->shape)) return false;
    }
    return true;
}

/* Is offset..offset+n inside the workspace? */
static bool in_work(const cj_loop_plan *L, int64_t offset, int64_t n) {
    return offset >= 0 && n >= 0 && offset <= L->work_bytes && n <= L->work_bytes - offset;
}

/* Are L's buffers and workspace what the loop's run will touch? */
static bool loop_fits(const cj_plan *p, const cj_node *n, const cj_graph *g, const cj_kernel *kern,
                      const cj_loop_plan *L) {
    const cj_body *b = L->body;
    for (int a = 0; a < L->ninputs; a++) {
        const cj_node *in = &g->nodes[n->inputs[a]];
        if (p->buffers[L->in_buf[a]].nbytes != bytes_of(&in->shape, in->dtype)) return false;
    }
    const cj_buffer *work = &p->buffers[L->work_buf];
    if (L->work_buf != kern->out_buffer || work->kind != CJ_BUF_TEMP || work->nbytes != L->work_bytes ||
        !in_work(L, 0, L->arena_bytes))
        return false;
    for (int k = 0; k < L->nresults; k++) {
        int64_t nbytes = bytes_of(&b->result_shape[k], b->result_dtype[k]);
        if (L->out_buf[k] >= 0 ? p->buffers[L->out_buf[k]].nbytes != nbytes : !in_work(L, L->dead_offset[k], nbytes))
            return false;
        if (b->op != CJ_OP_COND && k < b->ncarry && !in_work(L, L->spare_offset[k], nbytes)) return false;
    }
    return b->op != CJ_OP_WHILE || in_work(L, L->pred_offset, 1);
}

static cj_executable *read_exe(cj_rbuf *r, const cj_loc_pool *pool, int depth, cj_error *err);

/* The loop plan of kernel k of x (a scan, while or cond node's kernel) and
 * its bodies' executables; false with err set when the bytes are bad. */
static bool read_loop(cj_rbuf *r, cj_executable *x, int k, const cj_loc_pool *pool, int depth, cj_error *err) {
    cj_kernel *kern = &x->plan.kernels[k];
    const cj_graph *g = x->graph;
    const cj_node *n = kern->root_node >= 0 ? &g->nodes[kern->root_node] : NULL;
    cj_body *b = n && n->op != CJ_OP_CUSTOM ? cj_region_body(g, n) : NULL;
    if (!b || depth >= CJ_ENTRY_MAX_DEPTH) return r->bad = true, false;
    cj_loop_plan *L = kern->loop = cj_loop_plan_new(b, n->ninputs);
    if (!L) return cj_error_set(err, CJ_ERR_MEMORY, "cache entry: out of memory"), false;
    L->free_exe = cj_executable_free;
    int nb = x->plan.nbuffers;
    for (int a = 0; a < L->ninputs; a++) L->in_buf[a] = (int)cj_get_int(r, 0, nb - 1);
    for (int i = 0; i < L->nresults; i++) L->out_buf[i] = (int)cj_get_int(r, -1, nb - 1);
    L->work_buf = (int)cj_get_int(r, 0, nb - 1);
    L->arena_bytes = cj_get_int(r, 0, INT64_MAX);
    for (int c = 0; c < b->ncarry; c++) L->spare_offset[c] = cj_get_int(r, 0, INT64_MAX);
    for (int i = 0; i < L->nresults; i++) L->dead_offset[i] = cj_get_int(r, 0, INT64_MAX);
    L->pred_offset = cj_get_int(r, 0, INT64_MAX);
    L->work_bytes = cj_get_int(r, 0, INT64_MAX);
    if (r->bad || !loop_fits(&x->plan, n, g, kern, L)) return r->bad = true, false;
    for (int j = 0; j < b->ngraphs; j++) {
        cj_executable *exe = read_exe(r, pool, depth + 1, err);
        if (!exe) return false;
        adopt_body(L, j, exe);
        if (!body_fits(g, n, L, j, L->exe[j])) return r->bad = true, false;
    }
    x->has_loops = true;
    return true;
}

/* One executable of an entry (write_exe's layout), its code added to the
 * JIT; NULL with err set. */
static cj_executable *read_exe(cj_rbuf *r, const cj_loc_pool *pool, int depth, cj_error *err) {
    cj_jit_objects *o = calloc(1, sizeof *o);
    cj_executable *x = calloc(1, sizeof *x);
    bool *compiled = NULL;
    if (!o || !x) {
        cj_error_set(err, CJ_ERR_MEMORY, "cache entry: out of memory");
        goto fail;
    }
    if (!(x->graph = cj_graph_read(r, pool, err))) goto fail;
    if (cj_plan_read(r, x->graph, &x->plan, err) != CJ_OK) goto fail;
    x->kernels = calloc((size_t)x->plan.nkernels + 1, sizeof(cj_kernel_fn));
    x->groups = calloc((size_t)x->plan.ngroups + 1, sizeof(cj_kernel_fn));
    compiled = calloc((size_t)x->plan.nkernels + 1, sizeof(bool));
    if (!x->kernels || !x->groups || !compiled) {
        cj_error_set(err, CJ_ERR_MEMORY, "cache entry: out of memory");
        goto fail;
    }
    for (int k = 0; k < x->plan.nkernels; k++) compiled[k] = cj_get_int(r, 0, 1);
    for (int k = 0; k < x->plan.nkernels && !r->bad; k++) {
        const cj_kernel *kern = &x->plan.kernels[k];
        bool region = kern->root_node >= 0 && cj_region_body(x->graph, &x->graph->nodes[kern->root_node]) &&
                      x->graph->nodes[kern->root_node].op != CJ_OP_CUSTOM;
        bool loop = cj_get_int(r, 0, 1);
        if (loop != region || (loop && compiled[k])) r->bad = true; /* a region's kernel is its loop, and only that */
        else if (loop && !read_loop(r, x, k, pool, depth, err)) goto fail;
    }
    if (r->bad || !read_objects(r, o)) {
        cj_error_set(err, CJ_ERR_VALUE, "cache entry: bad code section");
        goto fail;
    }
    /* a body's plan is read at depth 1 or more; compiled as one function, its kernels have no code of their own */
    bool any_compiled = false;
    for (int k = 0; k < x->plan.nkernels; k++) any_compiled |= compiled[k];
    x->plan.loop_body = depth > 0;
    x->plan.one_function = x->plan.loop_body && !any_compiled && cj_plan_one_function(&x->plan);
    for (int g = 0; g < x->plan.ngroups && !x->plan.one_function; g++) /* every stage of a group runs through its driver */
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
    count_loop_costs(x);
    x->held_bytes = held_bytes(x);
    return x;
fail:
    if (err->status == CJ_OK) cj_error_set(err, CJ_ERR_VALUE, "cache entry: bad bytes");
    cj_jit_objects_free(o);
    free(compiled);
    cj_executable_free(x);
    return NULL;
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
    cj_loc_pool pool;
    if (cj_loc_pool_build(&pool, source, err) != CJ_OK) return NULL;
    cj_executable *x = read_exe(&r, &pool, 0, err);
    cj_loc_pool_free(&pool);
    if (x && r.pos != r.len) { /* nothing may follow */
        cj_executable_free(x);
        return cj_error_set(err, CJ_ERR_VALUE, "cache entry: bytes after the end"), NULL;
    }
    if (x) cj_stats_loaded(x->held_bytes);
    return x;
}

/* See pipeline.h. */
cj_status cj_graph_key_bytes(const cj_graph *g, uint8_t **out, size_t *len, cj_error *err) {
    cj_wbuf w = {0};
    cj_graph_write(&w, g, NULL);
    if (w.oom) {
        free(w.data);
        return cj_error_set(err, CJ_ERR_MEMORY, "cache key: out of memory");
    }
    *out = w.data;
    *len = w.len;
    return CJ_OK;
}

/* ---- the executable: made by the codegen and link steps above, freed here --- */

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
