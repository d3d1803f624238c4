/* pipeline.h - the compile pipeline: its steps as one list (pipeline.c),
 * one options object per compile, the executable it makes (the CPU
 * backend's codegen and link, executable.c) and runs (runtime.c).
 *
 *   trace -> autodiff -> simplify -> fuse -> library -> loops -> group ->
 *   memplan -> collapse -> codegen -> link -> run
 *
 * Nothing is cached here: the caller fills its cache only once a compile
 * succeeded.  pipeline.c knows no target: a backend's steps come in the
 * options, so the lowering links without LLVM (tests/c/test_lower.c). */
#ifndef CJ_PIPELINE_H
#define CJ_PIPELINE_H

#include "kernel.h"
#include "stats.h"

typedef struct cj_executable cj_executable;

/* The list's steps, in its order (pipeline.c's table says what each does).
 * trace and autodiff happened while tracing: the list checks what they
 * left.  run happens at each call of the executable (cj_executable_run). */
typedef enum {
    CJ_STEP_TRACE, CJ_STEP_AUTODIFF, CJ_STEP_SIMPLIFY, CJ_STEP_FUSE, CJ_STEP_LIBRARY, CJ_STEP_LOOPS,
    CJ_STEP_GROUP, CJ_STEP_MEMPLAN, CJ_STEP_COLLAPSE, CJ_STEP_CODEGEN, CJ_STEP_LINK, CJ_STEP_RUN,
    CJ_NSTEPS
} cj_step;

/* The step's name as the list, the docs and CJIT_DUMP call it; the name
 * CJIT_PASSES=-name switches it off with, or NULL (always runs); and
 * "traced", "compile" or "call": when it runs. */
const char *cj_pipeline_step_name(cj_step step);
const char *cj_pipeline_step_switch(cj_step step);
const char *cj_pipeline_step_when(cj_step step);

/* What lowering produced: the simplified graph and the plan (kernels,
 * groups, buffers and their bytes), before any code exists. */
typedef struct {
    const cj_graph *source; /* during the lowering only */
    cj_graph *graph;        /* owned */
    cj_plan plan;           /* owned; plan.graph borrows graph */
    bool fused;             /* the fuse step ran (not switched off) */
} cj_lowered;

/* One compile as the list runs it: each step reads and fills it. */
typedef struct {
    cj_lowered lowered;     /* simplify .. collapse */
    cj_executable *exe;     /* codegen, link: made of `lowered`, which it then owns */
    void *objects;          /* codegen's output for link (the backend's) */
    cj_step ran[CJ_NSTEPS]; /* the steps that ran, in order */
    int nran;
} cj_compile_state;

typedef struct cj_compile_options cj_compile_options;

/* A target: what the list's target-dependent steps call. */
typedef struct {
    const char *name;                          /* "cpu", "gpu" */
    void (*mark_library_calls)(cj_plan *plan); /* the library step (cj_blas_plan); NULL: none */
    int (*threads)(void);                      /* threads that may run one group (block storage); NULL: 0 */
    /* codegen and link make s->exe from s->lowered; NULL: the target makes
     * its code elsewhere (the GPU's cuda_program.c), after collapse */
    cj_status (*codegen)(cj_compile_state *s, const cj_compile_options *o, cj_error *err);
    cj_status (*link)(cj_compile_state *s, const cj_compile_options *o, cj_error *err);
    void (*discard)(cj_compile_state *s);      /* frees s->exe and s->objects after a failure */
} cj_backend;

/* One compile's options, made once (cj_compile_options_make) from the
 * jit's arguments: every step reads them, none builds options of its own
 * (a loop body's come from cj_compile_options_body). */
struct cj_compile_options {
    const cj_backend *backend; /* NULL: lowering only, no library calls (the C tests) */
    const bool *donated;       /* donated[i], i < ndonated: parameter i's bytes may be reused */
    int ndonated;
    const cj_cancel *cancel;   /* checked between steps and in LLVM's phases */
    bool keep_objects;         /* the executable keeps its object files (the disk cache) */
    /* threads that may run one group (the CPU's pool): block storage of
     * group-local temporaries gets a block per thread (blockmem.c); 0 (a
     * GPU, which runs stages one after another) for none */
    int threads;
    cj_step last;              /* the last step cj_pipeline_run runs */
};

extern const cj_backend cj_backend_cpu; /* executable.c */

/* The options of a compile for `backend` with these donated parameters,
 * running the list's steps through `last` (as_text: simplify; memory_
 * budget's oracle: memplan; a compile: link, or collapse for a backend
 * without codegen), with the backend's threads when memplan runs.  No
 * cancel flag: the compile thread points it at its own. */
cj_compile_options cj_compile_options_make(const cj_backend *backend, const bool *donated, int ndonated,
                                           bool keep_objects, cj_step last);
/* A loop body's, lowered and compiled inside the step that meets it: the
 * same backend, cancel flag and kept objects; no donation, no block storage. */
cj_compile_options cj_compile_options_body(const cj_compile_options *outer);

/* Runs the list's steps on g (which stays the caller's), from trace to
 * o->last, into *s; on failure *s holds nothing.  Free a lowered result
 * with cj_lowered_free(&s->lowered); an executable is s->exe. */
cj_status cj_pipeline_run(const cj_graph *g, const cj_compile_options *o, cj_compile_state *s, cj_error *err);
/* The lowering steps (trace .. collapse) on a copy of g, whatever o->last
 * says; `o` may be NULL.  On failure *out is empty. */
cj_status cj_lower(const cj_graph *g, const cj_compile_options *o, cj_lowered *out, cj_error *err);
/* Frees l's graph and plan (plan.c's). */
void cj_lowered_free(cj_lowered *l);
/* codegen and link on what was lowered (moved out of l: it is left
 * empty); the executable, or NULL with err set.  A loop body's. */
cj_executable *cj_pipeline_compile_lowered(cj_lowered *l, const cj_compile_options *o, cj_error *err);
/* The peak bytes o's plan for g has (the list through memplan, no code:
 * memory_budget's oracle, with the jitted function's donation). */
cj_status cj_plan_peak(const cj_graph *g, const cj_compile_options *o, int64_t *peak, cj_error *err);
/* The list as text: "trace -> autodiff -> ... -> run" (malloc'd). */
char *cj_pipeline_text(void);

/* Compiles g through o->last == CJ_STEP_LINK (executable.c): a new
 * executable owned by the caller (cj_executable_free), or NULL with err
 * set.  Once *o->cancel is set (by another thread) it returns NULL with
 * CJ_ERR_CANCELLED, having freed all it made and added nothing to the
 * JIT.  It touches no Python object, so the caller may release the GIL. */
cj_executable *cj_compile(const cj_graph *g, const cj_compile_options *o, cj_error *err);
/* The bytes a later process turns back into this executable without
 * compiling (cj_executable_load): a version, the simplified graph, the
 * plan and the object files, and the same of each loop body's executable
 * (nested loops included).  Only for an executable compiled with
 * keep_objects from graph `source`, and only once (the kept objects go
 * into the bytes).  *out is malloc'd (caller frees). */
cj_status cj_executable_serialize(cj_executable *x, const cj_graph *source, uint8_t **out, size_t *len,
                                  cj_error *err);
/* A new executable from cj_executable_serialize's bytes, or NULL with
 * err set (CJ_ERR_VALUE for bytes that are not a valid entry of this
 * version; nothing is left in the JIT then).  `source` is the graph being
 * compiled, with the same key: its source locations are the ones kept. */
cj_executable *cj_executable_load(const uint8_t *data, size_t len, const cj_graph *source, cj_error *err);
/* "llvm 19.1.7; x86_64-pc-linux-gnu; znver3; +avx2,...": what machine code
 * for this host depends on besides cjit (part of the disk cache's key;
 * jit_cpu.c). */
void cj_jit_target(char *buf, size_t n);
/* The canonical bytes of graph g (plan_io.c), for a cache key (malloc'd). */
cj_status cj_graph_key_bytes(const cj_graph *g, uint8_t **out, size_t *len, cj_error *err);
void cj_executable_free(cj_executable *x);
/* The compiled graph's signature, for the caller's checks. */
int cj_executable_nparams(const cj_executable *x);
int cj_executable_narrays(const cj_executable *x);
int cj_executable_noutputs(const cj_executable *x);
/* Shape and dtype of output i (to allocate it before running). */
void cj_executable_output(const cj_executable *x, int i, cj_shape *shape, cj_dtype *dtype);

/* Asked between the kernel groups of a long run whether to stop (for a
 * Ctrl-C): stop(ctx) returns true to stop.  It is asked at most every
 * CJ_RUN_POLL_NS, never before the first group ends, and never in runs of
 * little work (runtime.c). */
typedef struct {
    bool (*stop)(void *ctx);
    void *ctx;
} cj_run_poll;
#define CJ_RUN_POLL_NS 20000000 /* 20 ms */

/* Has poll asked to stop?  poll may be NULL.  The clock is read at every
 * question; poll->stop runs once CJ_RUN_POLL_NS have passed since the first
 * question or the last time it ran.  Shared by the runtime's group loop and
 * the loops' iterations on the CPU (loops_rt.c) and the GPU (cuda_loops.c). */
static inline bool cj_runtime_poll(const cj_run_poll *poll, int64_t *next_ns) {
    if (!poll) return false;
    int64_t now = cj_clock_ns();
    if (*next_ns == 0) {
        *next_ns = now + CJ_RUN_POLL_NS;
        return false;
    }
    if (now < *next_ns) return false;
    *next_ns = now + CJ_RUN_POLL_NS;
    return poll->stop(poll->ctx);
}

/* Runs the plan.  params[i], arrays[i] point to C-contiguous data of the
 * graph's PARAM/ARRAY shapes and dtypes; outputs[i] to C-contiguous storage
 * for output i.  Touches no Python object, so the GIL can be released.
 * When poll (may be NULL) says stop, it returns CJ_ERR_CANCELLED with the
 * temporaries freed; the outputs (and donated arguments) hold garbage. */
cj_status cj_executable_run(cj_executable *x, void *const *params, void *const *arrays,
                            void *const *outputs, const cj_run_poll *poll, cj_error *err);

/* Text of the kernels and the memory plan (caller frees). */
char *cj_executable_to_text(const cj_executable *x);
/* The plan behind memory_analysis(); borrowed, lives as long as x. */
const cj_plan *cj_executable_plan(const cj_executable *x);
int64_t cj_executable_flops(const cj_executable *x);
int64_t cj_executable_bytes_accessed(const cj_executable *x);
int64_t cj_executable_code_bytes(const cj_executable *x);

/* Memory for outputs and arenas, 64-byte aligned: large blocks are cached
 * when freed and handed out again for the same size.  Free with
 * cj_runtime_block_free(p, the same nbytes); trim frees the cached ones. */
void *cj_runtime_block_alloc(size_t nbytes);
void cj_runtime_block_free(void *p, size_t nbytes);
void cj_runtime_block_trim(void);
/* Threads that run a large kernel (the caller included); starts the pool. */
int cj_runtime_num_threads(void);
/* CJIT_NUM_THREADS as the pool reads it: the number, or 0 when unset or bad
 * (the pool then uses the number of cores); for a bad value, why (n bytes)
 * says what was wrong, else it is made empty. */
int cj_runtime_threads_setting(char *why, size_t n);

#endif
