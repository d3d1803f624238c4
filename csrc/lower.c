/* lower.c - the target-free lowering: one table of passes from a traced
 * graph to a plan (kernels, groups, buffers and their bytes).
 *
 *   graph --simplify (dead code, CSE)--> graph --fuse--> kernels
 *         (the target marks kernels a library runs: the CPU's BLAS)
 *         --group (stages sharing row loops)--> --memplan--> buffers in one arena
 *
 * CJIT_PASSES=-cse,-fuse,-group,-memplan switches passes off; results do
 * not change.  -blocks keeps memplan but gives no temporary block storage
 * (blockmem.c).  Nothing here knows a target or generates code (pipeline.c
 * and the backends take the plan from here). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "group.h"
#include "loops.h"
#include "lower.h"
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
static const char *const known_passes[] = {"cse", "fuse", "group", "memplan", "blocks"};
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
    /* control flow: each loop's bodies are lowered as graphs of their own */
    if (st == CJ_OK) st = cj_loops_lower(&l->plan, o, cj_lower, err);
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
    /* -blocks: no block storage (blockmem.c), every temporary whole */
    l->plan.threads = o && !pass_disabled("blocks") ? o->threads : 0;
    return cj_memplan_run(&l->plan, enabled, err);
}

static const lowering_pass lowering_passes[] = {
    {"cse", CJ_PHASE_SIMPLIFY, pass_simplify},
    {"fuse", CJ_PHASE_FUSE, pass_fuse},
    {"group", CJ_PHASE_GROUP, pass_group},
    {"memplan", CJ_PHASE_MEMPLAN, pass_memplan},
};

/* See lower.h. */
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


