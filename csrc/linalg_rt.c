/* linalg_rt.c - the call kernels of the linear algebra ops: each matrix of
 * a batch handed to LAPACK (Cholesky) or BLAS (the triangular solve) of the
 * library blas.c loaded.  desc is cj_call_describe's. */
#include <math.h>
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
