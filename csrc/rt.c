/* rt.c - the functions generated code calls (see rt.h). */
#include <stdbool.h>

#include "graph.h"
#include "rt.h"

const cj_rt_symbol cj_rt_symbols[] = {
    {"cj_rt_ipow", (void *)&cj_rt_ipow},
    {"cj_rt_fill_identity", (void *)&cj_rt_fill_identity},
    {"cj_rt_gemm", (void *)&cj_rt_gemm}, /* blas.c */
    {"cj_rt_thread_index", (void *)&cj_rt_thread_index},
    {"cj_rt_argsort", (void *)&cj_rt_argsort}, /* sort_rt.c */
    {"cj_rt_cholesky", (void *)&cj_rt_cholesky}, /* linalg_rt.c */
    {"cj_rt_trisolve", (void *)&cj_rt_trisolve},
    {"cj_rt_lu", (void *)&cj_rt_lu},
    {"cj_rt_lu_pivots", (void *)&cj_rt_lu_pivots},
    {"cj_rt_qr", (void *)&cj_rt_qr}, /* linalg_decomp_rt.c */
    {"cj_rt_eigh", (void *)&cj_rt_eigh},
    {"cj_rt_svd", (void *)&cj_rt_svd},
    {NULL, NULL},
};

/* 0 on any thread but the pool's workers, which runtime.c numbers 1 ..
 * nthreads - 1: which block of a group's block storage the thread uses
 * (blockmem.c).  A call that finds the pool busy runs on its own thread,
 * with its own arena, so index 0 is never used twice in one arena at once. */
static _Thread_local int32_t thread_index;

/* See rt.h. */
int32_t cj_rt_thread_index(void) { return thread_index; }

/* See rt.h. */
void cj_rt_set_thread_index(int32_t index) { thread_index = index; }

/* See rt.h. */
int64_t cj_rt_ipow(int64_t base, int64_t exponent) {
    if (exponent < 0) {
        /* NumPy refuses negative integer powers; we cannot raise from a
         * kernel, so give the integer part of the true result. */
        if (base == 1) return 1;
        if (base == -1) return (exponent & 1) ? -1 : 1;
        return 0;
    }
    uint64_t result = 1, b = (uint64_t)base; /* unsigned: wraps like NumPy */
    while (exponent) {
        if (exponent & 1) result *= b;
        b *= b;
        exponent >>= 1;
    }
    return (int64_t)result;
}

#define FILL(type, value)                                                            \
    do {                                                                             \
        type v = (value), *o = out;                                                  \
        for (int64_t i = start; i < end; i++) o[i] = v;                              \
    } while (0)

/* See rt.h.  The value is ops.c's cj_reduce_identity (the one the
 * NVPTX init kernels compile in too): -inf and +inf for float max and
 * min, the integer extremes, false/true for any/all. */
void cj_rt_fill_identity(void *out, int64_t start, int64_t end, int32_t dtype, int32_t op) {
    double f;
    int64_t i;
    cj_reduce_identity((cj_op)op, (cj_dtype)dtype, &f, &i);
    switch ((cj_dtype)dtype) {
    case CJ_BOOL: FILL(uint8_t, (uint8_t)i); break;
    case CJ_INT32: FILL(int32_t, (int32_t)i); break;
    case CJ_INT64: FILL(int64_t, i); break;
    case CJ_UINT32: FILL(uint32_t, (uint32_t)i); break;
    case CJ_INT8: FILL(int8_t, (int8_t)i); break;
    case CJ_INT16: FILL(int16_t, (int16_t)i); break;
    case CJ_UINT8: FILL(uint8_t, (uint8_t)i); break;
    case CJ_UINT16: FILL(uint16_t, (uint16_t)i); break;
    case CJ_UINT64: FILL(uint64_t, (uint64_t)i); break;
    case CJ_FLOAT32: FILL(float, (float)f); break;
    case CJ_FLOAT64: FILL(double, f); break;
    case CJ_NUM_DTYPES: break;
    }
}
