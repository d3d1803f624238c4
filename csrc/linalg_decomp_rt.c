/* linalg_decomp_rt.c - the call kernels of the factorizations that give
 * several results (QR, the symmetric eigensolver, the SVD): each matrix of
 * a batch handed to LAPACK (blas.c), the one result the node asks for
 * (its `index`, desc[6]) copied out.  A failed or impossible call fills
 * that result with nan, since a kernel cannot raise.  desc is
 * cj_call_describe's: n = desc[3] columns, m = desc[7] rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "kernel.h"
#include "rt.h"

static void put(bool f64, void *base, size_t i, double v) {
    if (f64) ((double *)base)[i] = v;
    else ((float *)base)[i] = (float)v;
}

static double get(bool f64, const void *base, size_t i) {
    return f64 ? ((const double *)base)[i] : (double)((const float *)base)[i];
}

/* Copies rows x cols of src (leading dim lds) to dst (leading dim ldd). */
static void copy_block(bool f64, void *dst, int64_t ldd, const void *src, int64_t lds, int64_t rows, int64_t cols) {
    size_t w = f64 ? 8 : 4;
    for (int64_t i = 0; i < rows; i++)
        memcpy((char *)dst + (size_t)(i * ldd) * w, (const char *)src + (size_t)(i * lds) * w, (size_t)cols * w);
}

static void fill_nan(bool f64, void *o, size_t count) {
    for (size_t i = 0; i < count; i++) put(f64, o, i, NAN);
}

/* See rt.h.  index bit 1: R, else Q; bit 2: complete.  The work matrix is
 * m x W, W = max(n, Q's columns): a's n columns, then the rest of Q. */
void cj_rt_qr(const int64_t *desc, int64_t start, int64_t end, void *const *buffers) {
    const char *in = buffers[desc[0]];
    char *out = buffers[desc[2]];
    int64_t n = desc[3], m = desc[7], k = m < n ? m : n;
    bool f64 = desc[5] == CJ_FLOAT64, want_r = desc[6] & 1, complete = desc[6] & 2;
    size_t w = f64 ? 8 : 4;
    int64_t qcols = complete ? m : k, rrows = complete ? m : k, wide = n > qcols ? n : qcols;
    size_t omat = want_r ? (size_t)(rrows * n) : (size_t)(m * qcols);
    void *work = malloc((size_t)(m * wide) * w + 1), *tau = malloc((size_t)k * w + 1);
    for (int64_t b = start; b < end; b++) {
        char *o = out + (size_t)b * omat * w;
        if (!work || !tau) {
            fill_nan(f64, o, omat);
            continue;
        }
        memset(work, 0, (size_t)(m * wide) * w);
        copy_block(f64, work, wide, in + (size_t)(b * m * n) * w, n, m, n);
        int info = k > 0 ? cj_lapack_geqrf(f64, (int)m, (int)n, work, (int)wide, tau) : 0;
        if (info == 0 && want_r) {
            for (int64_t i = 0; i < rrows; i++)
                for (int64_t j = 0; j < n; j++) put(f64, o, (size_t)(i * n + j), j >= i ? get(f64, work, (size_t)(i * wide + j)) : 0.0);
            continue;
        }
        if (info == 0 && qcols > 0 && k > 0) info = cj_lapack_orgqr(f64, (int)m, (int)qcols, (int)k, work, (int)wide, tau);
        else if (info == 0) /* no reflectors: Q is the identity */
            for (int64_t i = 0; i < m && i < qcols; i++) put(f64, work, (size_t)(i * wide + i), 1.0);
        if (info != 0) fill_nan(f64, o, omat);
        else copy_block(f64, o, qcols, work, wide, m, qcols);
    }
    free(work);
    free(tau);
}

/* See rt.h.  index 0: the eigenvalues, 1: the eigenvectors. */
void cj_rt_eigh(const int64_t *desc, int64_t start, int64_t end, void *const *buffers) {
    const char *in = buffers[desc[0]];
    char *out = buffers[desc[2]];
    int64_t n = desc[3];
    bool f64 = desc[5] == CJ_FLOAT64, vectors = desc[6] == 1;
    size_t w = f64 ? 8 : 4, mat = (size_t)(n * n), omat = vectors ? mat : (size_t)n;
    void *work = malloc(mat * w + 1), *vals = malloc((size_t)n * w + 1);
    for (int64_t b = start; b < end; b++) {
        char *o = out + (size_t)b * omat * w;
        if (!work || !vals) {
            fill_nan(f64, o, omat);
            continue;
        }
        memcpy(work, in + (size_t)b * mat * w, mat * w);
        int info = n > 0 ? cj_lapack_syevd(f64, vectors, (int)n, work, vals) : 0;
        if (info != 0) fill_nan(f64, o, omat);
        else memcpy(o, vectors ? work : vals, omat * w);
    }
    free(work);
    free(vals);
}

/* See rt.h.  index & 3: 0 s, 1 U, 2 Vt; bit 4: full matrices. */
void cj_rt_svd(const int64_t *desc, int64_t start, int64_t end, void *const *buffers) {
    const char *in = buffers[desc[0]];
    char *out = buffers[desc[2]];
    int64_t n = desc[3], m = desc[7], k = m < n ? m : n, which = desc[6] & 3;
    bool f64 = desc[5] == CJ_FLOAT64, full = desc[6] & 4;
    size_t w = f64 ? 8 : 4;
    int64_t ucols = full ? m : k, vrows = full ? n : k;
    size_t omat = which == 0 ? (size_t)k : which == 1 ? (size_t)(m * ucols) : (size_t)(vrows * n);
    char jobz = which == 0 ? 'N' : full ? 'A' : 'S';
    void *a = malloc((size_t)(m * n) * w + 1), *s = malloc((size_t)k * w + 1);
    void *u = malloc((size_t)(m * ucols) * w + 1), *vt = malloc((size_t)(vrows * n) * w + 1);
    for (int64_t b = start; b < end; b++) {
        char *o = out + (size_t)b * omat * w;
        if (!a || !s || !u || !vt) {
            fill_nan(f64, o, omat);
            continue;
        }
        memcpy(a, in + (size_t)(b * m * n) * w, (size_t)(m * n) * w);
        int info = 0;
        if (k > 0) {
            info = cj_lapack_gesdd(f64, jobz, (int)m, (int)n, a, s, u, ucols > 0 ? (int)ucols : 1, vt, (int)n);
        } else { /* an empty matrix: full U and Vt are identities */
            memset(u, 0, (size_t)(m * ucols) * w);
            memset(vt, 0, (size_t)(vrows * n) * w);
            for (int64_t i = 0; i < m && i < ucols; i++) put(f64, u, (size_t)(i * ucols + i), 1.0);
            for (int64_t i = 0; i < n && i < vrows; i++) put(f64, vt, (size_t)(i * n + i), 1.0);
        }
        if (info != 0) fill_nan(f64, o, omat);
        else memcpy(o, which == 0 ? s : which == 1 ? u : vt, omat * w);
    }
    free(a);
    free(s);
    free(u);
    free(vt);
}
