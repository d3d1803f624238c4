/* pipeline.h - from a traced graph to something that runs.
 *
 * cj_compile runs cj_lower (lower.h: simplify, fuse, group, memplan), then
 * codegen and the JIT, and returns an executable, or NULL with err set.  Nothing
 * is cached here: the caller fills its cache only once this succeeded. */
#ifndef CJ_PIPELINE_H
#define CJ_PIPELINE_H

#include "lower.h"

typedef struct cj_executable cj_executable;

/* Compiles a copy of `g` (which stays the caller's).  Returns a new
 * executable owned by the caller (free with cj_executable_free). */
cj_executable *cj_compile(const cj_graph *g, cj_error *err);
/* As cj_compile; donated[i] (i < ndonated) says that parameter i's bytes
 * may be reused by the plan (donate_argnums). */
cj_executable *cj_compile_donated(const cj_graph *g, const bool *donated, int ndonated, cj_error *err);
/* As cj_compile_donated, stopping early when *cancel is set (by another
 * thread): then it returns NULL with CJ_ERR_CANCELLED, having freed all it
 * made and added nothing to the JIT.  It touches no Python object, so the
 * caller may release the GIL. */
cj_executable *cj_compile_cancellable(const cj_graph *g, const bool *donated, int ndonated,
                                      const cj_cancel *cancel, cj_error *err);
/* As cj_compile_cancellable; with keep_objects the executable also keeps
 * its object files for cj_executable_serialize (the disk cache). */
cj_executable *cj_compile_keeping(const cj_graph *g, const bool *donated, int ndonated, const cj_cancel *cancel,
                                  bool keep_objects, cj_error *err);
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
/* The peak bytes cj_compile's plan for g would have with the same donated
 * parameters, without generating code (the oracle of memory_budget).
 * Returns CJ_OK and sets *peak. */
cj_status cj_plan_peak(const cj_graph *g, const bool *donated, int ndonated, int64_t *peak, cj_error *err);

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
