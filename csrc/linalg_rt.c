/* linalg_rt.c - the call kernels of the linear algebra ops: each matrix of
 * a batch handed to LAPACK (Cholesky) or BLAS (the triangular solve) of the
 * library blas.c loaded.  desc is cj_call_describe's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "kernel.h"
#include "rt.h"

/* See rt.h.  Matrices [start, end) of the batch: copy, factor in place,
 * zero the upper triangle; a matrix that is not positive definite comes
 * out all nan (as JAX's), since a kernel cannot raise. */
void cj_rt_cholesky(const int64_t *desc, int64_t start, int64_t end, void *const *buffers) {
    const char *in = buffers[desc[0]];
    char *out = buffers[desc[2]];
    int64_t n = desc[3];
    bool f64 = desc[5] == CJ_FLOAT64;
    size_t w = f64 ? 8 : 4, mat = (size_t)(n * n) * w;
    for (int64_t m = start; m < end; m++) {
        char *o = out + (size_t)m * mat;
        if (o != in + (size_t)m * mat) memcpy(o, in + (size_t)m * mat, mat);
        int info = n > 0 ? cj_lapack_potrf(f64, (int)n, o) : 0;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) {
                bool zero = j > i, bad = info != 0;
                if (!zero && !bad) continue;
                if (f64) ((double *)o)[i * n + j] = bad ? NAN : 0.0;
                else ((float *)o)[i * n + j] = bad ? NAN : 0.0f;
            }
    }
}

/* See rt.h.  op(a) x = b for matrices [start, end) of the batch. */
void cj_rt_trisolve(const int64_t *desc, int64_t start, int64_t end, void *const *buffers) {
    const char *a = buffers[desc[0]], *b = buffers[desc[1]];
    char *out = buffers[desc[2]];
    int64_t n = desc[3], k = desc[4], flags = desc[6];
    bool f64 = desc[5] == CJ_FLOAT64;
    size_t w = f64 ? 8 : 4, amat = (size_t)(n * n) * w, bmat = (size_t)(n * k) * w;
    for (int64_t m = start; m < end; m++) {
        char *o = out + (size_t)m * bmat;
        if (o != b + (size_t)m * bmat) memcpy(o, b + (size_t)m * bmat, bmat);
        if (n > 0 && k > 0)
            cj_blas_trsm(f64, flags & CJ_TRI_LOWER, flags & CJ_TRI_TRANSPOSE, flags & CJ_TRI_UNIT, (int)n, (int)k,
                         a + (size_t)m * amat, o);
    }
}

/* getrf on matrix m of the batch into `lu` (n x n), ipiv filled. */
static void factor(const int64_t *desc, int64_t m, void *const *buffers, char *lu, int32_t *ipiv) {
    int64_t n = desc[3];
    size_t mat = (size_t)(n * n) * (desc[5] == CJ_FLOAT64 ? 8 : 4);
    const char *in = (const char *)buffers[desc[0]] + (size_t)m * mat;
    if (lu != in) memcpy(lu, in, mat);
    if (n > 0) cj_lapack_getrf(desc[5] == CJ_FLOAT64, (int)n, lu, ipiv);
}

/* See rt.h.  The packed factors of matrices [start, end). */
void cj_rt_lu(const int64_t *desc, int64_t start, int64_t end, void *const *buffers) {
    int64_t n = desc[3];
    size_t mat = (size_t)(n * n) * (desc[5] == CJ_FLOAT64 ? 8 : 4);
    int32_t *ipiv = n > 0 ? malloc(sizeof(int32_t) * (size_t)n) : NULL;
    if (n > 0 && !ipiv) return; /* cannot raise from here; the output keeps its bytes */
    for (int64_t m = start; m < end; m++) factor(desc, m, buffers, (char *)buffers[desc[2]] + (size_t)m * mat, ipiv);
    free(ipiv);
}

/* See rt.h.  The row order of matrices [start, end): LAPACK's swaps
 * (ipiv, 1-based) applied in turn to 0..n-1. */
void cj_rt_lu_pivots(const int64_t *desc, int64_t start, int64_t end, void *const *buffers) {
    int64_t n = desc[3], *perm = buffers[desc[2]];
    size_t mat = (size_t)(n * n) * (desc[5] == CJ_FLOAT64 ? 8 : 4);
    char *scratch = n > 0 ? malloc(mat) : NULL;
    int32_t *ipiv = n > 0 ? malloc(sizeof(int32_t) * (size_t)n) : NULL;
    for (int64_t m = start; m < end; m++) {
        int64_t *p = perm + m * n;
        for (int64_t i = 0; i < n; i++) p[i] = i;
        if (!scratch || !ipiv) continue; /* no memory: the identity order */
        factor(desc, m, buffers, scratch, ipiv);
        for (int64_t i = 0; i < n; i++) {
            int64_t j = ipiv[i] - 1, t = p[i];
            p[i] = p[j];
            p[j] = t;
        }
    }
    free(scratch);
    free(ipiv);
}
