/* stats.c - process-wide counters and the clock (see stats.h). */
#include <stdatomic.h>
#include <time.h>

#include "stats.h"

static _Atomic int64_t bytes_in_use, peak_bytes_in_use, compiles, code_bytes;
static _Atomic int64_t phase_ns[CJ_PHASE_COUNT];
static _Atomic int64_t llvm_modules, cancelled, loads, one_function_runs;

/* See stats.h. */
void cj_stats_alloc(int64_t nbytes) {
    int64_t now = atomic_fetch_add(&bytes_in_use, nbytes) + nbytes;
    int64_t peak = atomic_load(&peak_bytes_in_use);
    while (now > peak && !atomic_compare_exchange_weak(&peak_bytes_in_use, &peak, now)) {
    }
}

void cj_stats_compile(int64_t nbytes) {
    atomic_fetch_add(&compiles, 1);
    atomic_fetch_add(&code_bytes, nbytes);
}

void cj_stats_loaded(int64_t nbytes) {
    atomic_fetch_add(&loads, 1);
    atomic_fetch_add(&code_bytes, nbytes);
}

void cj_stats_code_freed(int64_t nbytes) { atomic_fetch_sub(&code_bytes, nbytes); }

/* See stats.h. */
int64_t cj_clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* See stats.h. */
void cj_stats_phase(cj_phase phase, int64_t ns) {
    if (phase >= 0 && phase < CJ_PHASE_COUNT) atomic_fetch_add(&phase_ns[phase], ns);
}

/* See stats.h. */
void cj_stats_module(void) { atomic_fetch_add(&llvm_modules, 1); }
void cj_stats_cancelled(void) { atomic_fetch_add(&cancelled, 1); }
void cj_stats_one_function_runs(int64_t n) { atomic_fetch_add(&one_function_runs, n); }

/* See stats.h. */
const char *cj_phase_name(cj_phase phase) {
    switch (phase) {
    case CJ_PHASE_SIMPLIFY: return "simplify";
    case CJ_PHASE_FUSE: return "fuse";
    case CJ_PHASE_GROUP: return "group";
    case CJ_PHASE_MEMPLAN: return "memplan";
    case CJ_PHASE_CODEGEN: return "codegen";
    case CJ_PHASE_OPTIMIZE: return "optimize";
    case CJ_PHASE_EMIT: return "emit";
    case CJ_PHASE_LINK: return "link";
    case CJ_PHASE_COUNT: break;
    }
    return "?";
}

/* See stats.h. */
void cj_stats_get(cj_stats *out) {
    out->bytes_in_use = atomic_load(&bytes_in_use);
    out->peak_bytes_in_use = atomic_load(&peak_bytes_in_use);
    out->compiles = atomic_load(&compiles);
    out->code_bytes = atomic_load(&code_bytes);
    for (int i = 0; i < CJ_PHASE_COUNT; i++) out->phase_ns[i] = atomic_load(&phase_ns[i]);
    out->llvm_modules = atomic_load(&llvm_modules);
    out->cancelled = atomic_load(&cancelled);
    out->loads = atomic_load(&loads);
    out->one_function_runs = atomic_load(&one_function_runs);
}

/* See stats.h. */
void cj_stats_reset_peak(void) { atomic_store(&peak_bytes_in_use, atomic_load(&bytes_in_use)); }
