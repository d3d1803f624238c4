/* stats.h - process-wide counters and the clock: memory in use and its
 * peak, compiles, the bytes of machine code, time per compile phase.  The
 * memory counters see what cjit really allocates (arenas in runtime.c,
 * outputs in py_exec.c), so memory_stats() can be held against a plan. */
#ifndef CJ_STATS_H
#define CJ_STATS_H

#include <stdint.h>

/* Where compile time goes: nanoseconds summed over every compile. */
typedef enum {
    CJ_PHASE_SIMPLIFY, CJ_PHASE_FUSE, CJ_PHASE_GROUP,      /* pipeline.c: the lowering */
    CJ_PHASE_MEMPLAN,
    CJ_PHASE_CODEGEN, CJ_PHASE_OPTIMIZE, CJ_PHASE_EMIT,    /* jit_cpu.c: IR, LLVM passes, */
    CJ_PHASE_LINK,                                         /*   machine code, JIT linking */
    CJ_PHASE_COUNT
} cj_phase;
typedef struct {
    int64_t bytes_in_use, peak_bytes_in_use;
    int64_t compiles, code_bytes;
    int64_t loads;              /* executables loaded from the disk cache */
    int64_t phase_ns[CJ_PHASE_COUNT];
    int64_t llvm_modules;       /* object files LLVM emitted for executables */
    int64_t cancelled;          /* compiles and runs stopped by a request (Ctrl-C) */
    int64_t one_function_runs;  /* loop body runs made by the body's one function (body_fn.c) */
} cj_stats;
/* A monotonic clock in nanoseconds, and adding to a phase's total. */
int64_t cj_clock_ns(void);
void cj_stats_phase(cj_phase phase, int64_t ns);
/* Counting an emitted LLVM module (jit_cpu.c), and a stopped compile or run. */
void cj_stats_module(void);
void cj_stats_cancelled(void);
/* n runs of loop bodies as one function each (loops_rt.c adds them up per loop). */
void cj_stats_one_function_runs(int64_t n);
/* "simplify", "fuse", ... (a static string). */
const char *cj_phase_name(cj_phase phase);
/* Memory cjit allocated (+) or freed (-), and a finished compile whose
 * executable holds `code_bytes`. */
void cj_stats_alloc(int64_t nbytes);
void cj_stats_compile(int64_t code_bytes);
/* An executable loaded from the disk cache (not compiled), holding code_bytes. */
void cj_stats_loaded(int64_t code_bytes);
void cj_stats_code_freed(int64_t code_bytes);
void cj_stats_get(cj_stats *out);
/* The peak starts again from what is in use now. */
void cj_stats_reset_peak(void);

#endif
