/* blas.h - matmul kernels handed to a BLAS library loaded at run time. */
#ifndef CJ_BLAS_H
#define CJ_BLAS_H

#include <stddef.h>

#include "kernel.h"

/* Loads the BLAS library once per process (dlopen): the file CJIT_BLAS
 * names, or none for CJIT_BLAS=0; by default the library given to
 * cj_blas_set_default_path (the scipy-openblas32 wheel's), then the
 * system's OpenBLAS ("libopenblas.so.0").  Returns whether sgemm and dgemm
 * are there to call. */
bool cj_blas_available(void);
/* The library to try before the system's; false (and ignored) once the
 * library is loaded, or if the path is too long. */
bool cj_blas_set_default_path(const char *path);
/* Turns the use of BLAS for new compiles off or on (tests compare the two
 * paths); returns the previous setting. */
bool cj_blas_set_enabled(bool on);
/* Turns cjit's own kernel for matmuls with few rows (gemm_small.c) off or
 * on for new compiles: off, BLAS runs them too.  Returns the previous
 * setting. */
bool cj_blas_set_small_enabled(bool on);
/* What was loaded: OpenBLAS's configuration, which names the core it chose,
 * and the file ("OpenBLAS 0.3.34 ... Haswell MAX_THREADS=64 [/path/lib.so]"),
 * or "none (why)". */
const char *cj_blas_description(void);
/* cj_blas_core_warning for the loaded library: "" when all is well. */
const char *cj_blas_warning(void);
/* Writes to buf a warning when `config` (OpenBLAS's configuration string)
 * names a core whose kernels predate AVX2 while the processor has AVX2:
 * OpenBLAS did not know the processor.  Else writes "". */
void cj_blas_core_warning(const char *config, const char *library, bool cpu_has_avx2, char *buf, size_t n);

/* Marks every matmul kernel of the plan that a gemm call can run (its
 * operands are buffers laid out as BLAS matrices, float32 or float64, and
 * the work is large enough to pay for a call): fills kernel->gemm.  Of
 * those, the ones with few rows are marked gemm.small: codegen emits
 * gemm_small.c's loop nest for them instead of the call.  Runs
 * right after fusion, on the CPU only; the NVPTX target ignores the marks. */
void cj_blas_plan(cj_plan *plan);

/* How codegen passes a marked kernel to cj_rt_gemm: an array of
 * CJ_GEMM_DESC_LEN integers, built by cj_blas_describe. */
#define CJ_GEMM_DESC_LEN (16 + 4 * CJ_MAX_RANK)
void cj_blas_describe(const cj_kernel *k, int64_t *desc);

/* The body of a marked kernel, called by its generated function with the
 * kernel ABI's arguments (codegen.h): loop-0 iterations [start, end). */
/* cj_rt_gemm (rt.h) is defined in blas.c. */

/* LAPACK's Cholesky (potrf) and BLAS's triangular solve (trsm), from the
 * same library, when it has them (the scipy-openblas32 wheel does). */
bool cj_lapack_available(void);
/* a (n x n, row-major) replaced by its lower factor (the upper triangle
 * left as it was); LAPACK's info: 0, or the order of a minor that is not
 * positive definite. */
int cj_lapack_potrf(bool f64, int n, void *a);
/* a (n x n, row-major) replaced by its packed LU factors with partial
 * pivoting, ipiv[i] (1-based) the row swapped with row i; LAPACK's info
 * (> 0: U is singular, the factors are still complete). */
int cj_lapack_getrf(bool f64, int n, void *a, int32_t *ipiv);
/* b (n x k, row-major) replaced by op(a)^-1 b, a (n x n) triangular. */
void cj_blas_trsm(bool f64, bool lower, bool trans, bool unit, int n, int k, const void *a, void *b);
/* The factorizations linalg_decomp_rt.c calls (row-major; LAPACK's info,
 * -1000 when the library lacks the routine).  geqrf: a (m x n, leading dim
 * lda) replaced by R above its diagonal and the reflectors below, tau
 * min(m, n) long; orgqr: the first n columns of Q from k reflectors in a. */
int cj_lapack_geqrf(bool f64, int m, int n, void *a, int lda, void *tau);
int cj_lapack_orgqr(bool f64, int m, int n, int k, void *a, int lda, const void *tau);
/* a (n x n) symmetric, its lower triangle read: w gets the eigenvalues
 * ascending and, when vectors, a the eigenvectors as columns. */
int cj_lapack_syevd(bool f64, bool vectors, int n, void *a, void *w);
/* a (m x n, destroyed) = U diag(s) Vt; jobz 'N' (s only), 'S' (U m x k,
 * Vt k x n) or 'A' (U m x m, Vt n x n). */
int cj_lapack_gesdd(bool f64, char jobz, int m, int n, void *a, void *s, void *u, int ldu, void *vt, int ldvt);

#endif
