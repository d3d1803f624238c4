/* rt.h - the functions generated code calls, and the table of them that
 * the JIT defines (the extension is loaded RTLD_LOCAL, so a process-wide
 * symbol search would not find them).  One place to look for what machine
 * code may call back into. */
#ifndef CJ_RT_H
#define CJ_RT_H

#include <stdint.h>

typedef struct {
    const char *name;
    void *address;
} cj_rt_symbol;

/* Every entry point, ended by {NULL, NULL}. */
extern const cj_rt_symbol cj_rt_symbols[];
#define CJ_RT_MAX_SYMBOLS 16

/* x ** n on int64, as NumPy's integer power (wrapping; a negative n gives
 * the integer part of the true result). */
int64_t cj_rt_ipow(int64_t base, int64_t exponent);
/* out[start:end] = the identity of reduction `op` in dtype `dtype`: group
 * drivers call it before each block of an accumulating stage, and the
 * runtime before an accumulating kernel that runs alone. */
void cj_rt_fill_identity(void *out, int64_t start, int64_t end, int32_t dtype, int32_t op);
/* Which of the pool's threads runs this: 0 for the calling thread, 1 ..
 * n-1 for the workers (runtime.c sets it in each).  Group drivers with
 * block storage pick their thread's block by it (blockmem.c). */
int32_t cj_rt_thread_index(void);
void cj_rt_set_thread_index(int32_t index);
/* A matmul kernel's gemm call (blas.c), for a block of rows. */
void cj_rt_gemm(const int64_t *desc, int64_t start, int64_t end, void *const *buffers);
/* Call kernels (kernel.h, cj_call), for [start, end) of loop 0; desc is
 * cj_call_describe's.  An argsort sorts rows (sort_rt.c); Cholesky and the
 * triangular solve take matrices of a batch (linalg_rt.c). */
void cj_rt_argsort(const int64_t *desc, int64_t start, int64_t end, void *const *buffers);
void cj_rt_cholesky(const int64_t *desc, int64_t start, int64_t end, void *const *buffers);
void cj_rt_trisolve(const int64_t *desc, int64_t start, int64_t end, void *const *buffers);
void cj_rt_lu(const int64_t *desc, int64_t start, int64_t end, void *const *buffers);
void cj_rt_lu_pivots(const int64_t *desc, int64_t start, int64_t end, void *const *buffers);
void cj_rt_qr(const int64_t *desc, int64_t start, int64_t end, void *const *buffers);
void cj_rt_eigh(const int64_t *desc, int64_t start, int64_t end, void *const *buffers);
void cj_rt_svd(const int64_t *desc, int64_t start, int64_t end, void *const *buffers);

#endif
