/* blas.h - matmul kernels handed to a BLAS library loaded at run time. */
#ifndef CJ_BLAS_H
#define CJ_BLAS_H

#include "kernel.h"

/* Loads the BLAS library once per process (dlopen): CJIT_BLAS names the
 * library file, or 0 to use none; by default OpenBLAS ("libopenblas.so.0")
 * is tried.  Returns whether sgemm and dgemm are there to call. */
bool cj_blas_available(void);
/* Turns the use of BLAS for new compiles off or on (tests compare the two
 * paths); returns the previous setting. */
bool cj_blas_set_enabled(bool on);
/* What was loaded ("OpenBLAS 0.3.21 ..." or the file name), or why nothing was. */
const char *cj_blas_description(void);

/* Marks every matmul kernel of the plan that a gemm call can run (its
 * operands are buffers laid out as BLAS matrices, float32 or float64, and
 * the work is large enough to pay for a call): fills kernel->gemm.  Runs
 * right after fusion, on the CPU only; the NVPTX target ignores the marks. */
void cj_blas_plan(cj_plan *plan);

/* How codegen passes a marked kernel to cj_rt_gemm: an array of
 * CJ_GEMM_DESC_LEN integers, built by cj_blas_describe. */
#define CJ_GEMM_DESC_LEN (16 + 4 * CJ_MAX_RANK)
void cj_blas_describe(const cj_kernel *k, int64_t *desc);

/* The body of a marked kernel, called by its generated function with the
 * kernel ABI's arguments (codegen.h): loop-0 iterations [start, end). */
void cj_rt_gemm(const int64_t *desc, int64_t start, int64_t end, void *const *buffers);

#endif
