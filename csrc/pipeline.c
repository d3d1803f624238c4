/* pipeline.c - the compile pipeline as one list: every step from a traced
 * function to code that runs, in order, each a named function below.
 *
 *   trace     py_trace*.c, graph*.c  Tracer operations append nodes to a graph    } while
 *   autodiff  autodiff.c, jvp.c      vjp/jvp appended to it; checkpoint regions   } tracing
 *   simplify  simplify.c             dead nodes dropped, identical ones merged (CSE)
 *   fuse      fuse.c                 graph -> kernels (loop nests, affine loads)
 *   library   the backend's          kernels a library runs marked (the CPU's BLAS)
 *   loops     loops.c                each loop's bodies lowered by this list
 *   group     group.c                kernels sharing their rows -> one kernel
 *   memplan   memplan.c              liveness, donation, one arena, exact peak
 *   collapse  group.c                lone kernels' loops merged
 *   codegen   the backend's          LLVM modules -> object files (jit_cpu.c)
 *   link      the backend's          object files -> the JIT, kernels looked up
 *   run       runtime.c              at each call: the plan on the thread pool
 *
 * One options object (cj_compile_options_make) is built per compile from
 * the jit's arguments; `last` says where a use stops: as_text after
 * simplify, memory_budget's oracle after memplan, a GPU after collapse
 * (its code is cuda_program.c's), a compile after link.  trace and autodiff
 * ran before the list is given the graph: their entries check what they
 * left.  CJIT_PASSES=-cse,-fuse,-group,-memplan switches steps off with
 * unchanged results (-blocks keeps memplan without block storage,
 * blockmem.c).  This file knows no target: the backend's steps come in the
 * options, so the lowering links without LLVM (tests/c/test_lower.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "group.h"
#include "loops.h"
#include "pipeline.h"
#include "simplify.h"

/* Is step `name` switched off by CJIT_PASSES? */
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

/* ---- the steps --------------------------------------------------------------
 * Each reads and fills the compile's state; `on` is false when CJIT_PASSES
 * switched it off (it then does the least that keeps results right). */

typedef cj_status (*step_fn)(cj_compile_state *s, const cj_compile_options *o, bool on, cj_error *err);

/* trace (done while tracing): a graph whose outputs are among its nodes,
 * each node reading only older ones. */
static cj_status step_traced(cj_compile_state *s, const cj_compile_options *o, bool on, cj_error *err) {
    (void)o, (void)on;
    const cj_graph *g = s->lowered.source;
    bool ok = g->noutputs >= 0 && (g->noutputs == 0 || g->outputs);
    for (int i = 0; ok && i < g->noutputs; i++) ok = g->outputs[i] >= 0 && g->outputs[i] < g->nnodes;
    for (int i = 0; ok && i < g->nnodes; i++)
        for (int j = 0; ok && j < g->nodes[i].ninputs; j++) ok = g->nodes[i].inputs[j] >= 0 && g->nodes[i].inputs[j] < i;
    return ok ? CJ_OK : cj_error_set(err, CJ_ERR_VALUE, "compile: the traced graph is not finished (an output "
                                                       "or an input that is not an older node)");
}

/* autodiff (done while tracing): the backward pass, its checkpoint regions
 * and recomputed copies, and memory_budget's forced recomputation within
 * the graph. */
static cj_status step_differentiated(cj_compile_state *s, const cj_compile_options *o, bool on, cj_error *err) {
    (void)o, (void)on;
    const cj_graph *g = s->lowered.source;
    bool ok = g->backward_start >= -1 && g->backward_start <= g->nnodes && g->nforce_remat <= g->nnodes &&
              (g->nforce_remat == 0 || g->force_remat);
    for (int i = 0; ok && i < g->nnodes; i++)
        ok = g->nodes[i].region >= 0 && g->nodes[i].region < (g->nregions > 0 ? g->nregions : 1) && g->nodes[i].remat >= 0;
    return ok ? CJ_OK : cj_error_set(err, CJ_ERR_VALUE, "compile: the differentiated graph is not consistent "
                                                       "(backward start, checkpoint region or recomputation)");
}

static cj_status step_simplify(cj_compile_state *s, const cj_compile_options *o, bool on, cj_error *err) {
    (void)o;
    cj_lowered *l = &s->lowered;
    if (!(l->graph = cj_simplify_run(l->source, on, err))) return err->status;
    cj_graph_trim(l->graph); /* kept as long as the executable: without the spare capacity */
    return CJ_OK;
}

static cj_status step_fuse(cj_compile_state *s, const cj_compile_options *o, bool on, cj_error *err) {
    (void)o;
    cj_lowered *l = &s->lowered;
    bool *live = calloc((size_t)l->graph->nnodes + 1, sizeof(bool));
    if (!live) return cj_error_set(err, CJ_ERR_MEMORY, "compile: out of memory");
    for (int i = 0; i < l->graph->nnodes; i++) live[i] = true; /* simplify dropped the dead */
    cj_status st = cj_fuse_run(l->graph, live, on, &l->plan, err);
    free(live);
    l->fused = on;
    return st;
}

/* the backend marks the kernels a library call runs (cj_blas_plan) */
static cj_status step_library(cj_compile_state *s, const cj_compile_options *o, bool on, cj_error *err) {
    (void)on, (void)err;
    if (o && o->backend && o->backend->mark_library_calls) o->backend->mark_library_calls(&s->lowered.plan);
    return CJ_OK;
}

/* control flow: each loop's bodies lowered as graphs of their own, by this
 * list (cj_lower), with a body's options */
static cj_status step_loops(cj_compile_state *s, const cj_compile_options *o, bool on, cj_error *err) {
    (void)on;
    cj_compile_options body = cj_compile_options_body(o);
    return cj_loops_lower(&s->lowered.plan, &body, cj_lower, err);
}

static cj_status step_group(cj_compile_state *s, const cj_compile_options *o, bool on, cj_error *err) {
    (void)o;
    return cj_group_run(&s->lowered.plan, on && s->lowered.fused, err);
}

static cj_status step_memplan(cj_compile_state *s, const cj_compile_options *o, bool on, cj_error *err) {
    cj_lowered *l = &s->lowered;
    if (o && o->donated && o->ndonated > 0) {
        l->plan.donated = calloc((size_t)l->graph->nparams + 1, sizeof(bool));
        if (!l->plan.donated) return cj_error_set(err, CJ_ERR_MEMORY, "compile: out of memory");
        for (int i = 0; i < o->ndonated && i < l->graph->nparams; i++) l->plan.donated[i] = o->donated[i];
    }
    /* -blocks: no block storage (blockmem.c), every temporary whole */
    l->plan.threads = o && !pass_disabled("blocks") ? o->threads : 0;
    return cj_memplan_run(&l->plan, on, err);
}

/* the order is final: kernels left alone merge their loops (memplan's
 * orders may have joined an update to its gemm, which needs its rows) */
static cj_status step_collapse(cj_compile_state *s, const cj_compile_options *o, bool on, cj_error *err) {
    (void)o, (void)on, (void)err;
    cj_group_collapse_lone(&s->lowered.plan);
    return CJ_OK;
}

static cj_status step_codegen(cj_compile_state *s, const cj_compile_options *o, bool on, cj_error *err) {
    (void)on;
    if (!o || !o->backend || !o->backend->codegen)
        return cj_error_set(err, CJ_ERR_VALUE, "compile: no backend makes code in this compile");
    return o->backend->codegen(s, o, err);
}

static cj_status step_link(cj_compile_state *s, const cj_compile_options *o, bool on, cj_error *err) {
    (void)on;
    if (!o || !o->backend || !o->backend->link || !s->exe)
        return cj_error_set(err, CJ_ERR_VALUE, "compile: no backend links code in this compile");
    return o->backend->link(s, o, err);
}

/* ---- the list ----------------------------------------------------------------
 * The only place that knows the steps' order, their CJIT_PASSES names and
 * their timers; the loop in run_steps is the only one that runs them. */

#define NO_PHASE (-1) /* no timer, or the step's own (jit_cpu.c times LLVM's phases) */

typedef struct {
    const char *name;
    const char *off;  /* CJIT_PASSES=-off switches it off; NULL: always runs */
    int phase;        /* the cj_phase it adds its time to */
    const char *when; /* "traced": before the list gets the graph; "call": at each call */
    step_fn run;      /* NULL: not a compile's */
} pipeline_step;

static const pipeline_step cj_pipeline[CJ_NSTEPS] = {
    [CJ_STEP_TRACE] = {"trace", NULL, NO_PHASE, "traced", step_traced},
    [CJ_STEP_AUTODIFF] = {"autodiff", NULL, NO_PHASE, "traced", step_differentiated},
    [CJ_STEP_SIMPLIFY] = {"simplify", "cse", CJ_PHASE_SIMPLIFY, "compile", step_simplify},
    [CJ_STEP_FUSE] = {"fuse", "fuse", CJ_PHASE_FUSE, "compile", step_fuse},
    [CJ_STEP_LIBRARY] = {"library", NULL, CJ_PHASE_FUSE, "compile", step_library},
    [CJ_STEP_LOOPS] = {"loops", NULL, CJ_PHASE_FUSE, "compile", step_loops},
    [CJ_STEP_GROUP] = {"group", "group", CJ_PHASE_GROUP, "compile", step_group},
    [CJ_STEP_MEMPLAN] = {"memplan", "memplan", CJ_PHASE_MEMPLAN, "compile", step_memplan},
    [CJ_STEP_COLLAPSE] = {"collapse", NULL, CJ_PHASE_MEMPLAN, "compile", step_collapse},
    [CJ_STEP_CODEGEN] = {"codegen", NULL, NO_PHASE, "compile", step_codegen},
    [CJ_STEP_LINK] = {"link", NULL, NO_PHASE, "compile", step_link},
    [CJ_STEP_RUN] = {"run", NULL, NO_PHASE, "call", NULL}, /* cj_executable_run */
};

const char *cj_pipeline_step_name(cj_step step) { return step < CJ_NSTEPS ? cj_pipeline[step].name : NULL; }
const char *cj_pipeline_step_switch(cj_step step) { return step < CJ_NSTEPS ? cj_pipeline[step].off : NULL; }
const char *cj_pipeline_step_when(cj_step step) { return step < CJ_NSTEPS ? cj_pipeline[step].when : NULL; }

/* See pipeline.h. */
char *cj_pipeline_text(void) {
    size_t n = 1;
    for (int i = 0; i < CJ_NSTEPS; i++) n += strlen(cj_pipeline[i].name) + 4;
    char *text = malloc(n);
    if (!text) return NULL;
    text[0] = 0;
    for (int i = 0; i < CJ_NSTEPS; i++) strcat(strcat(text, i ? " -> " : ""), cj_pipeline[i].name);
    return text;
}

/* The environment a compile reads, checked before it starts: CJIT_PASSES
 * must be a comma-separated list of -name with the list's switch names
 * (a typo would otherwise switch nothing off, silently) or memplan's
 * "blocks", and CJIT_DUMP a directory that exists or can be made, and can
 * be written. */
static bool known_switch(const char *p, size_t len) {
    if (len == 7 && !strncmp(p, "-blocks", len)) return true;
    for (int i = 0; i < CJ_NSTEPS; i++)
        if (cj_pipeline[i].off && len == strlen(cj_pipeline[i].off) + 1 && p[0] == '-' &&
            !strncmp(p + 1, cj_pipeline[i].off, len - 1))
            return true;
    return false;
}

static bool settings_ok(cj_error *err) {
    const char *spec = getenv("CJIT_PASSES");
    for (const char *p = spec; p && *p;) {
        size_t len = strcspn(p, ",");
        if (!known_switch(p, len) && len > 0) {
            char names[64] = "";
            for (int i = 0; i < CJ_NSTEPS; i++)
                if (cj_pipeline[i].off)
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s, ", cj_pipeline[i].off);
            cj_error_set(err, CJ_ERR_VALUE, "CJIT_PASSES=%s: '%.*s' is not a pass to switch off; the list is "
                         "-name,-name,... with names %sblocks", spec, (int)len, p, names);
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

/* ---- the options, built once ------------------------------------------------ */

/* The options for backend b through step `last`; with `threads`, b's
 * threads for block storage when memplan will run (asking starts the
 * CPU's thread pool: as_text never asks). */
static cj_compile_options options_for(const cj_backend *b, const bool *donated, int ndonated, bool keep_objects,
                                      cj_step last, bool threads) {
    bool has_code = b && b->codegen && b->link;
    if (last > CJ_STEP_COLLAPSE && !has_code) last = CJ_STEP_COLLAPSE;
    if (last > CJ_STEP_LINK) last = CJ_STEP_LINK;
    threads = threads && last >= CJ_STEP_MEMPLAN && b && b->threads;
    return (cj_compile_options){.backend = b,
                                .donated = ndonated > 0 ? donated : NULL,
                                .ndonated = donated ? ndonated : 0,
                                .keep_objects = keep_objects,
                                .threads = threads ? b->threads() : 0,
                                .last = last};
}

/* See pipeline.h. */
cj_compile_options cj_compile_options_make(const cj_backend *backend, const bool *donated, int ndonated,
                                           bool keep_objects, cj_step last) {
    return options_for(backend, donated, ndonated, keep_objects, last, true);
}

/* See pipeline.h. */
cj_compile_options cj_compile_options_body(const cj_compile_options *outer) {
    /* a body is lowered (loops step) and compiled (link step) inside its
     * loop's compile; no block storage: it runs on its loop's thread */
    cj_compile_options o = options_for(outer ? outer->backend : NULL, NULL, 0, outer && outer->keep_objects,
                                       CJ_STEP_LINK, false);
    o.cancel = outer ? outer->cancel : NULL;
    return o;
}

/* ---- running the list ------------------------------------------------------- */

/* Steps first..last on s; on failure s is emptied (the backend frees what
 * its steps made). */
static cj_status run_steps(cj_compile_state *s, const cj_compile_options *o, cj_step first, cj_step last,
                           cj_error *err) {
    for (int i = first; i <= (int)last; i++) {
        const pipeline_step *step = &cj_pipeline[i];
        bool on = !(step->off && pass_disabled(step->off));
        int64_t t0 = cj_clock_ns();
        cj_status st = step->run ? step->run(s, o, on, err)
                                 : cj_error_set(err, CJ_ERR_VALUE, "compile: step %s is not a compile's", step->name);
        if (step->phase != NO_PHASE) cj_stats_phase((cj_phase)step->phase, cj_clock_ns() - t0);
        s->ran[s->nran++] = (cj_step)i;
        if (st == CJ_OK && i < (int)last && o && cj_cancelled(o->cancel))
            st = cj_error_set(err, CJ_ERR_CANCELLED, "compile: cancelled");
        if (st != CJ_OK) {
            if (o && o->backend && o->backend->discard) o->backend->discard(s);
            cj_lowered_free(&s->lowered);
            return st;
        }
    }
    s->lowered.source = NULL;
    return CJ_OK;
}

/* See pipeline.h. */
cj_status cj_pipeline_run(const cj_graph *g, const cj_compile_options *o, cj_compile_state *s, cj_error *err) {
    memset(s, 0, sizeof *s);
    if (!settings_ok(err)) return err->status;
    s->lowered.source = g;
    cj_step last = o ? o->last : CJ_STEP_COLLAPSE;
    return run_steps(s, o, CJ_STEP_TRACE, last < CJ_STEP_RUN ? last : CJ_STEP_LINK, err);
}

/* See pipeline.h. */
cj_status cj_lower(const cj_graph *g, const cj_compile_options *o, cj_lowered *out, cj_error *err) {
    cj_compile_state s;
    memset(&s, 0, sizeof s);
    s.lowered.source = g;
    cj_status st = settings_ok(err) ? run_steps(&s, o, CJ_STEP_TRACE, CJ_STEP_COLLAPSE, err) : err->status;
    *out = s.lowered; /* empty on failure */
    out->source = NULL;
    return st;
}

/* See pipeline.h. */
cj_executable *cj_pipeline_compile_lowered(cj_lowered *l, const cj_compile_options *o, cj_error *err) {
    cj_compile_state s;
    memset(&s, 0, sizeof s);
    s.lowered = *l;
    memset(l, 0, sizeof *l);
    return run_steps(&s, o, CJ_STEP_CODEGEN, CJ_STEP_LINK, err) == CJ_OK ? s.exe : NULL;
}

/* See pipeline.h. */
cj_status cj_plan_peak(const cj_graph *g, const cj_compile_options *o, int64_t *peak, cj_error *err) {
    cj_compile_options until = *o;
    until.last = CJ_STEP_MEMPLAN;
    cj_compile_state s;
    if (cj_pipeline_run(g, &until, &s, err) != CJ_OK) return err->status;
    *peak = s.lowered.plan.peak_bytes;
    cj_lowered_free(&s.lowered);
    return CJ_OK;
}
