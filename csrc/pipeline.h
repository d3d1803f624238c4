/* pipeline.h - from a traced graph to something that runs.
 *
 * cj_compile runs the passes listed in pipeline.c (simplify, fuse, memplan,
 * codegen, jit) and returns an executable, or NULL with err set.  Nothing
 * is cached here: the caller fills its cache only once this succeeded. */
#ifndef CJ_PIPELINE_H
#define CJ_PIPELINE_H

#include "kernel.h"

typedef struct cj_executable cj_executable;

/* Compiles a copy of `g` (which stays the caller's).  Returns a new
 * executable owned by the caller (free with cj_executable_free). */
cj_executable *cj_compile(const cj_graph *g, cj_error *err);
void cj_executable_free(cj_executable *x);

/* The compiled graph's signature, for the caller's checks. */
int cj_executable_nparams(const cj_executable *x);
int cj_executable_narrays(const cj_executable *x);
int cj_executable_noutputs(const cj_executable *x);
/* Shape and dtype of output i (to allocate it before running). */
void cj_executable_output(const cj_executable *x, int i, cj_shape *shape, cj_dtype *dtype);

/* Runs the plan.  params[i], arrays[i] point to C-contiguous data of the
 * graph's PARAM/ARRAY shapes and dtypes; outputs[i] to C-contiguous storage
 * for output i.  Touches no Python object, so the GIL can be released. */
cj_status cj_executable_run(cj_executable *x, void *const *params, void *const *arrays,
                            void *const *outputs, cj_error *err);

/* Text of the kernels and the memory plan (caller frees). */
char *cj_executable_to_text(const cj_executable *x);
/* The plan behind memory_analysis(); borrowed, lives as long as x. */
const cj_plan *cj_executable_plan(const cj_executable *x);
int64_t cj_executable_flops(const cj_executable *x);
int64_t cj_executable_bytes_accessed(const cj_executable *x);
int64_t cj_executable_code_bytes(const cj_executable *x);

/* Process-wide runtime counters (memory the runtime really allocated for
 * arenas and outputs is counted by whoever allocates; see runtime.c). */
typedef struct {
    int64_t bytes_in_use, peak_bytes_in_use;
    int64_t compiles, code_bytes;
} cj_runtime_stats;
void cj_runtime_stats_get(cj_runtime_stats *out);
void cj_runtime_reset_peak(void);
void cj_runtime_note_alloc(int64_t nbytes);   /* +: allocated, -: freed */

#endif
