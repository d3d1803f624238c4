/* blas.c - matmul kernels run by a BLAS library.
 *
 * A fast matmul is mostly not about the arithmetic: it is about keeping
 * tiles of A and B in registers and cache, packing them so that the inner
 * kernel reads memory in order, and choosing tile sizes per processor.
 * OpenBLAS has done that, by hand and per microarchitecture, for every CPU
 * cjit runs on; our generated loop nests reach a third of its speed.  So a
 * matmul kernel whose operands are plain matrices becomes one gemm call per
 * batch index (docs/ARCHITECTURE.md, "Matmul", gives the measurements),
 * except a product with few rows, which gemm_small.c's kernel runs faster
 * (OpenBLAS packs all of B on every call).
 *
 * The library is opened with dlopen, as the CUDA driver is, so cjit builds
 * and runs without it: then every matmul stays a generated loop nest.  It
 * is, in this order: the file CJIT_BLAS names (CJIT_BLAS=0: none); the
 * OpenBLAS of the scipy-openblas32 wheel, whose path the Python package
 * hands over at import (cj_blas_set_default_path); the system's OpenBLAS.
 * The wheel comes first because it is current: older OpenBLAS releases
 * (Debian 12 ships 0.3.21) take processors newer than themselves for a
 * Pentium 4 ("Prescott") and run SSE3 kernels, 4-5x slower.
 *
 * The call sits inside cjit's own machinery: the thread pool splits the
 * rows of C between threads, the group driver runs the matmul's epilogue on
 * those rows right after it, and the memory plan is unchanged.  So the
 * library must not start threads of its own (a threaded OpenBLAS, as the
 * wheel's is, is told to use one), and must be safe to call from several
 * threads at once.  OpenBLAS's threaded build is; its sequential build is
 * not (two calls at once share one packing buffer and give wrong results,
 * as measured here), so with that build the calls take turns behind a mutex.
 * One thing lies outside the plan: the library's own packing workspace,
 * allocated once per process by OpenBLAS and reused by every call. */
#ifndef _GNU_SOURCE /* for dladdr; the build may define it already */
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "blas.h"
#include "rt.h"
#include "gemm_small.h"

/* CBLAS's enums and the two entry points used (LP64: int dimensions). */
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };
typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                         float *, int);
typedef void (*dgemm_fn)(int, int, int, int, int, int, double, const double *, int, const double *, int, double,
                         double *, int);
typedef void (*sgemv_fn)(int, int, int, int, float, const float *, int, const float *, int, float, float *, int);
typedef void (*dgemv_fn)(int, int, int, int, double, const double *, int, const double *, int, double, double *, int);

/* The entry points cjit looks up, by their plain names.  scipy-openblas32
 * spells every one with a "scipy_" prefix (so that it cannot clash with
 * another BLAS in the process); a library uses one spelling throughout,
 * the one under which cblas_sgemm is found. */
enum {
    E_SGEMM, E_DGEMM, E_SGEMV, E_DGEMV, E_GET_PARALLEL, E_SET_THREADS, E_GET_CONFIG,
    E_SPOTRF, E_DPOTRF, E_STRSM, E_DTRSM, E_SGETRF, E_DGETRF,
    E_SGEQRF, E_DGEQRF, E_SORGQR, E_DORGQR, E_SSYEVD, E_DSYEVD, E_SGESDD, E_DGESDD, E_COUNT
};
static const char *const entry_names[E_COUNT] = {
    "cblas_sgemm", "cblas_dgemm", "cblas_sgemv", "cblas_dgemv",
    "openblas_get_parallel", "openblas_set_num_threads", "openblas_get_config",
    "LAPACKE_spotrf", "LAPACKE_dpotrf", "cblas_strsm", "cblas_dtrsm", "LAPACKE_sgetrf", "LAPACKE_dgetrf",
    "LAPACKE_sgeqrf", "LAPACKE_dgeqrf", "LAPACKE_sorgqr", "LAPACKE_dorgqr", "LAPACKE_ssyevd", "LAPACKE_dsyevd",
    "LAPACKE_sgesdd", "LAPACKE_dgesdd",
};
static const char *const prefixes[] = {"scipy_", ""};

/* Below this many multiply-adds a call costs more than the loop nest. */
#define CJ_BLAS_MIN_WORK ((int64_t)4096)

static struct {
    pthread_once_t once;
    sgemm_fn sgemm;
    dgemm_fn dgemm;
    sgemv_fn sgemv;         /* matrix-vector products, when the library has them */
    dgemv_fn dgemv;
    void *potrf[2], *trsm[2], *getrf[2]; /* [float32, float64]: LAPACKE's Cholesky and LU, BLAS's triangular solve */
    void *geqrf[2], *orgqr[2], *syevd[2], *gesdd[2]; /* QR, symmetric eigen, SVD: NULL where missing */
    bool serialize;         /* one call at a time (a sequential OpenBLAS) */
    pthread_mutex_t lock;   /* for serialize; also guards default_path and loaded */
    bool loaded;            /* blas_load has started: default_path is read */
    char default_path[PATH_MAX];
    char description[768];
    char warning[512];
} blas = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

static _Atomic bool blas_enabled = true; /* cj_blas_set_enabled, for tests */
static _Atomic bool small_enabled = true; /* cj_blas_set_small_enabled, for tests */

bool cj_blas_set_default_path(const char *path) {
    pthread_mutex_lock(&blas.lock);
    bool ok = !blas.loaded && strlen(path) < sizeof blas.default_path;
    if (ok) strcpy(blas.default_path, path);
    pthread_mutex_unlock(&blas.lock);
    return ok;
}

/* The cores OpenBLAS names whose kernels predate AVX2 (at most SSE, AVX or
 * AMD's FMA4/FMA3 without AVX2): what it falls back to on a processor it
 * does not know. */
static const char *const pre_avx2_cores[] = {
    "Generic", "Katmai", "Coppermine", "Northwood", "Prescott", "Banias", "Core2", "Penryn", "Dunnington",
    "Nehalem", "Atom", "Sandybridge", "Athlon", "Opteron", "Opteron_SSE3", "Barcelona", "Bobcat", "Bulldozer",
    "Piledriver", "Steamroller", "Nano",
};

/* See blas.h.  The config string is words separated by spaces ("OpenBLAS
 * 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Prescott MAX_THREADS=64"); the
 * core is one of them. */
void cj_blas_core_warning(const char *config, const char *library, bool cpu_has_avx2, char *buf, size_t n) {
    if (n) buf[0] = 0;
    if (!cpu_has_avx2 || !config) return;
    for (const char *w = config; *w;) {
        size_t len = strcspn(w, " ");
        for (size_t i = 0; i < sizeof pre_avx2_cores / sizeof *pre_avx2_cores; i++)
            if (len == strlen(pre_avx2_cores[i]) && !strncasecmp(w, pre_avx2_cores[i], len)) {
                snprintf(buf, n,
                         "the BLAS library %s runs OpenBLAS's %s kernels, which predate AVX2, on a processor "
                         "that has AVX2 (OpenBLAS did not recognize it, or OPENBLAS_CORETYPE chose this core), "
                         "so matmuls run several times slower than they could. Install a current OpenBLAS "
                         "(pip install scipy-openblas32) or point CJIT_BLAS at one. Its configuration: %s",
                         library, pre_avx2_cores[i], config);
                return;
            }
        w += len;
        w += strspn(w, " ");
    }
}

static bool cpu_has_avx2(void) {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("avx2"); /* the CPUID bit, and that the OS saves the AVX registers */
#else
    return false; /* other architectures: no check */
#endif
}

/* Opens `name`; on success fills blas.sgemm/dgemm and the description and
 * returns true, else appends why not to `why`. */
static bool try_library(const char *name, char *why, size_t nwhy) {
    size_t used = strlen(why);
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(why + used, nwhy - used, "%s%s", used ? "; " : "", e ? e : name);
        return false;
    }
    void *fn[E_COUNT] = {0};
    for (size_t p = 0; p < sizeof prefixes / sizeof *prefixes && !fn[E_SGEMM]; p++)
        for (int e = 0; e < E_COUNT; e++) {
            char sym[64];
            snprintf(sym, sizeof sym, "%s%s", prefixes[p], entry_names[e]);
            fn[e] = dlsym(lib, sym);
        }
    if (!fn[E_SGEMM] || !fn[E_DGEMM]) {
        snprintf(why + used, nwhy - used, "%s%s has no cblas_sgemm/cblas_dgemm", used ? "; " : "", name);
        dlclose(lib);
        return false;
    }
    /* our pool splits the rows; a library with threads of its own would
     * oversubscribe the cores, so it gets one */
    int (*get_parallel)(void) = (int (*)(void))(uintptr_t)fn[E_GET_PARALLEL];
    void (*set_threads)(int) = (void (*)(int))(uintptr_t)fn[E_SET_THREADS];
    char *(*get_config)(void) = (char *(*)(void))(uintptr_t)fn[E_GET_CONFIG];
    if (get_parallel && set_threads && get_parallel() != 0) set_threads(1);
    blas.serialize = get_parallel && get_parallel() == 0;
    /* the file actually opened: a bare soname becomes the path it was found at */
    Dl_info info;
    const char *path = dladdr(fn[E_SGEMM], &info) && info.dli_fname ? info.dli_fname : name;
    const char *config = get_config ? get_config() : NULL;
    snprintf(blas.description, sizeof blas.description, "%s [%s]%s", config ? config : "unknown BLAS", path,
             blas.serialize ? " (sequential build: one call at a time)" : "");
    cj_blas_core_warning(config, path, cpu_has_avx2(), blas.warning, sizeof blas.warning);
    blas.sgemm = (sgemm_fn)(uintptr_t)fn[E_SGEMM];
    blas.dgemm = (dgemm_fn)(uintptr_t)fn[E_DGEMM];
    if (fn[E_SGEMV] && fn[E_DGEMV]) {
        blas.sgemv = (sgemv_fn)(uintptr_t)fn[E_SGEMV];
        blas.dgemv = (dgemv_fn)(uintptr_t)fn[E_DGEMV];
    }
    if (fn[E_SPOTRF] && fn[E_DPOTRF] && fn[E_STRSM] && fn[E_DTRSM] && fn[E_SGETRF] && fn[E_DGETRF]) {
        blas.potrf[0] = fn[E_SPOTRF], blas.potrf[1] = fn[E_DPOTRF];
        blas.trsm[0] = fn[E_STRSM], blas.trsm[1] = fn[E_DTRSM];
        blas.getrf[0] = fn[E_SGETRF], blas.getrf[1] = fn[E_DGETRF];
        for (int t = 0; t < 2; t++) {
            blas.geqrf[t] = fn[E_SGEQRF + t], blas.orgqr[t] = fn[E_SORGQR + t];
            blas.syevd[t] = fn[E_SSYEVD + t], blas.gesdd[t] = fn[E_SGESDD + t];
        }
    }
    return true;
}

static void blas_load(void) {
    pthread_mutex_lock(&blas.lock);
    blas.loaded = true;
    pthread_mutex_unlock(&blas.lock);
    const char *want = getenv("CJIT_BLAS");
    if (want && (!strcmp(want, "0") || !strcmp(want, "none"))) {
        snprintf(blas.description, sizeof blas.description, "none (CJIT_BLAS=%s)", want);
        return;
    }
    char why[512] = "";
    if (want && *want) { /* the user's choice, and nothing else */
        if (!try_library(want, why, sizeof why))
            snprintf(blas.description, sizeof blas.description, "none (CJIT_BLAS: %s)", why);
        return;
    }
    const char *names[] = {blas.default_path, "libopenblas.so.0", "libopenblas.so"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (*names[i] && try_library(names[i], why, sizeof why)) return;
    snprintf(blas.description, sizeof blas.description, "none (%s)", why);
}

bool cj_blas_available(void) {
    pthread_once(&blas.once, blas_load);
    return blas.sgemm != NULL && atomic_load(&blas_enabled);
}

const char *cj_blas_description(void) {
    pthread_once(&blas.once, blas_load);
    return blas.description;
}

const char *cj_blas_warning(void) {
    pthread_once(&blas.once, blas_load);
    return blas.warning;
}

bool cj_blas_set_enabled(bool on) { return atomic_exchange(&blas_enabled, on); }

bool cj_blas_set_small_enabled(bool on) { return atomic_exchange(&small_enabled, on); }

/* Is the R x C matrix whose element (r, c) lies at r*sr + c*sc a BLAS
 * operand?  Row-major as it stands (*trans false) or as the transpose of a
 * stored C x R matrix (*trans true); *ld is the stored leading dimension. */
static bool as_matrix(int64_t R, int64_t C, int64_t sr, int64_t sc, bool *trans, int64_t *ld) {
    if ((sc == 1 || C == 1) && (R == 1 || sr >= C)) {
        *trans = false;
        *ld = R == 1 ? (C > 1 ? C : 1) : sr;
        return *ld >= 1 && *ld <= INT_MAX;
    }
    if ((sr == 1 || R == 1) && (C == 1 || sc >= R)) {
        *trans = true;
        *ld = C == 1 ? (R > 1 ? R : 1) : sc;
        return *ld >= 1 && *ld <= INT_MAX;
    }
    return false;
}

/* Loops (batch..., M, K, N), K reduced; exprs: load A, load B, multiply. */
static bool gemm_layout(const cj_plan *p, const cj_kernel *k, cj_gemm *out) {
    const cj_graph *g = p->graph;
    if (!g || k->root_node < 0 || g->nodes[k->root_node].op != CJ_OP_MATMUL) return false;
    cj_dtype dt = p->buffers[k->out_buffer].dtype;
    if (dt != CJ_FLOAT32 && dt != CJ_FLOAT64) return false;
    int R = k->rank, m = R - 3, kk = R - 2, n = R - 1;
    if (R < 3 || k->reduced != (1u << kk) || k->reduce_op != CJ_OP_REDUCE_SUM || k->nexprs != 3) return false;
    const cj_expr *a = &k->exprs[0], *b = &k->exprs[1], *mul = &k->exprs[2];
    if (a->kind != CJ_EX_LOAD || b->kind != CJ_EX_LOAD || mul->kind != CJ_EX_OP || mul->op != CJ_OP_MUL ||
        mul->args[0] != 0 || mul->args[1] != 1 || a->dtype != dt || b->dtype != dt)
        return false;
    for (int d = 0; d < m; d++)
        if (k->dims[d] < 1) return false;
    int64_t M = k->dims[m], K = k->dims[kk], N = k->dims[n];
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX || M * N * K < CJ_BLAS_MIN_WORK) return false;
    /* A does not move with n, B not with m, C not with k; C's rows are plain */
    if (a->index.stride[n] != 0 || b->index.stride[m] != 0 || k->out_index.stride[kk] != 0) return false;
    for (int d = 0; d < R; d++)
        if (a->index.stride[d] < 0 || b->index.stride[d] < 0 || k->out_index.stride[d] < 0) return false;
    bool c_trans;
    if (!as_matrix(M, K, a->index.stride[m], a->index.stride[kk], &out->trans_a, &out->lda) ||
        !as_matrix(K, N, b->index.stride[kk], b->index.stride[n], &out->trans_b, &out->ldb) ||
        !as_matrix(M, N, k->out_index.stride[m], k->out_index.stride[n], &c_trans, &out->ldc) || c_trans)
        return false;
    out->on = true;
    return true;
}

/* See blas.h. */
void cj_blas_plan(cj_plan *p) {
    bool ok = cj_blas_available();
    for (int i = 0; i < p->nkernels; i++) {
        cj_kernel *k = &p->kernels[i];
        memset(&k->gemm, 0, sizeof k->gemm);
        if (ok && gemm_layout(p, k, &k->gemm))
            k->gemm.small = atomic_load(&small_enabled) && cj_gemm_small_suits(k, p->buffers[k->out_buffer].dtype);
    }
}

/* The layout of a descriptor. */
enum {
    D_DTYPE, D_BATCH_RANK, D_M, D_N, D_K, D_A, D_B, D_C, D_TRANS_A, D_TRANS_B,
    D_LDA, D_LDB, D_LDC, D_A_ROW, D_C_ROW,
    D_BATCH_DIMS = 16, D_A_OFF = D_BATCH_DIMS + CJ_MAX_RANK,
    D_B_OFF = D_A_OFF + CJ_MAX_RANK, D_C_OFF = D_B_OFF + CJ_MAX_RANK,
};
/* D_A_OFF + d (d < batch rank) is A's stride over batch loop d, and
 * D_A_OFF + CJ_MAX_RANK - 1 A's base offset; likewise for B and C. */

/* See blas.h. */
void cj_blas_describe(const cj_kernel *k, int64_t *desc) {
    memset(desc, 0, sizeof(int64_t) * CJ_GEMM_DESC_LEN);
    const cj_affine *a = &k->exprs[0].index, *b = &k->exprs[1].index, *c = &k->out_index;
    int R = k->rank, m = R - 3;
    desc[D_DTYPE] = k->exprs[2].dtype;
    desc[D_BATCH_RANK] = m;
    desc[D_M] = k->dims[m];
    desc[D_K] = k->dims[R - 2];
    desc[D_N] = k->dims[R - 1];
    desc[D_A] = k->exprs[0].buffer;
    desc[D_B] = k->exprs[1].buffer;
    desc[D_C] = k->out_buffer;
    desc[D_TRANS_A] = k->gemm.trans_a;
    desc[D_TRANS_B] = k->gemm.trans_b;
    desc[D_LDA] = k->gemm.lda;
    desc[D_LDB] = k->gemm.ldb;
    desc[D_LDC] = k->gemm.ldc;
    desc[D_A_ROW] = a->stride[m]; /* to start at row `start` when loop 0 is M */
    desc[D_C_ROW] = c->stride[m];
    for (int d = 0; d < m; d++) {
        desc[D_BATCH_DIMS + d] = k->dims[d];
        desc[D_A_OFF + d] = a->stride[d];
        desc[D_B_OFF + d] = b->stride[d];
        desc[D_C_OFF + d] = c->stride[d];
    }
    desc[D_A_OFF + CJ_MAX_RANK - 1] = a->offset;
    desc[D_B_OFF + CJ_MAX_RANK - 1] = b->offset;
    desc[D_C_OFF + CJ_MAX_RANK - 1] = c->offset;
}

/* A product with one column (N = 1) or one row (M = 1) as a gemv call:
 * OpenBLAS's gemm packs the whole matrix for it, 3-4x slower (logistic
 * regression's X @ w and X.T @ d).  y = op(A) x for N = 1; for M = 1,
 * c = op(B)^T a.  y is zeroed first: with beta = 0 a library may still
 * multiply what y held (NaN * 0 is NaN).  Returns false when it does not
 * apply. */
static bool one_gemv(const int64_t *d, int M, int N, int K, const void *A, const void *B, void *C) {
    if ((N != 1 && M != 1) || !blas.sgemv) return false;
    bool ta = d[D_TRANS_A], tb = d[D_TRANS_B], f32 = d[D_DTYPE] == CJ_FLOAT32;
    int lda = (int)d[D_LDA], ldb = (int)d[D_LDB], ldc = (int)d[D_LDC];
    const void *mat, *vec;
    int rows, cols, ld, trans, incx, incy, ny;
    if (N == 1) { /* A is M x K (or stored K x M), x a column of B, y a column of C */
        mat = A, vec = B, ld = lda, ny = M;
        rows = ta ? K : M, cols = ta ? M : K, trans = ta ? CBLAS_TRANS : CBLAS_NO_TRANS;
        incx = tb ? 1 : ldb, incy = ldc;
    } else { /* B is K x N (or stored N x K), x the row of A, y the row of C */
        mat = B, vec = A, ld = ldb, ny = N;
        rows = tb ? N : K, cols = tb ? K : N, trans = tb ? CBLAS_NO_TRANS : CBLAS_TRANS;
        incx = ta ? lda : 1, incy = 1;
    }
    size_t elem = f32 ? sizeof(float) : sizeof(double);
    for (int i = 0; i < ny; i++) memset((char *)C + (size_t)i * (size_t)incy * elem, 0, elem);
    if (f32) blas.sgemv(CBLAS_ROW_MAJOR, trans, rows, cols, 1.0f, mat, ld, vec, incx, 0.0f, C, incy);
    else blas.dgemv(CBLAS_ROW_MAJOR, trans, rows, cols, 1.0, mat, ld, vec, incx, 0.0, C, incy);
    return true;
}

static void one_gemm(const int64_t *d, int64_t rows, int64_t a_off, int64_t b_off, int64_t c_off,
                     void *const *bufs) {
    int ta = d[D_TRANS_A] ? CBLAS_TRANS : CBLAS_NO_TRANS, tb = d[D_TRANS_B] ? CBLAS_TRANS : CBLAS_NO_TRANS;
    int M = (int)rows, N = (int)d[D_N], K = (int)d[D_K];
    size_t elem = d[D_DTYPE] == CJ_FLOAT32 ? sizeof(float) : sizeof(double);
    if (blas.serialize) pthread_mutex_lock(&blas.lock);
    if (one_gemv(d, M, N, K, (const char *)bufs[d[D_A]] + a_off * (int64_t)elem,
                 (const char *)bufs[d[D_B]] + b_off * (int64_t)elem, (char *)bufs[d[D_C]] + c_off * (int64_t)elem)) {
        if (blas.serialize) pthread_mutex_unlock(&blas.lock);
        return;
    }
    if (d[D_DTYPE] == CJ_FLOAT32) {
        const float *A = (const float *)bufs[d[D_A]] + a_off, *B = (const float *)bufs[d[D_B]] + b_off;
        blas.sgemm(CBLAS_ROW_MAJOR, ta, tb, M, N, K, 1.0f, A, (int)d[D_LDA], B, (int)d[D_LDB], 0.0f,
                   (float *)bufs[d[D_C]] + c_off, (int)d[D_LDC]);
    } else {
        const double *A = (const double *)bufs[d[D_A]] + a_off, *B = (const double *)bufs[d[D_B]] + b_off;
        blas.dgemm(CBLAS_ROW_MAJOR, ta, tb, M, N, K, 1.0, A, (int)d[D_LDA], B, (int)d[D_LDB], 0.0,
                   (double *)bufs[d[D_C]] + c_off, (int)d[D_LDC]);
    }
    if (blas.serialize) pthread_mutex_unlock(&blas.lock);
}

/* See blas.h.  Loop 0 is M when there are no batch loops, else the first
 * batch loop; the other batch loops run whole, last one fastest. */
void cj_rt_gemm(const int64_t *d, int64_t start, int64_t end, void *const *bufs) {
    int nb = (int)d[D_BATCH_RANK];
    int64_t a0 = d[D_A_OFF + CJ_MAX_RANK - 1], b0 = d[D_B_OFF + CJ_MAX_RANK - 1], c0 = d[D_C_OFF + CJ_MAX_RANK - 1];
    if (nb == 0) {
        if (end > start) one_gemm(d, end - start, a0 + start * d[D_A_ROW], b0, c0 + start * d[D_C_ROW], bufs);
        return;
    }
    int64_t idx[CJ_MAX_RANK] = {0};
    for (idx[0] = start; idx[0] < end;) {
        int64_t a = a0, b = b0, c = c0;
        for (int q = 0; q < nb; q++) {
            a += idx[q] * d[D_A_OFF + q];
            b += idx[q] * d[D_B_OFF + q];
            c += idx[q] * d[D_C_OFF + q];
        }
        one_gemm(d, d[D_M], a, b, c, bufs);
        int q = nb - 1; /* next batch index, odometer style */
        while (q > 0 && ++idx[q] == d[D_BATCH_DIMS + q]) idx[q--] = 0;
        if (q == 0) idx[0]++;
    }
}

/* ---- LAPACK and the triangular solve (linalg_rt.c calls these) ----------------- */

enum { LAPACK_ROW_MAJOR = 101, CBLAS_LEFT = 141, CBLAS_UPPER = 121, CBLAS_LOWER = 122, CBLAS_NON_UNIT = 131,
       CBLAS_UNIT = 132 };
typedef int (*spotrf_fn)(int, char, int, float *, int);
typedef int (*dpotrf_fn)(int, char, int, double *, int);
typedef void (*strsm_fn)(int, int, int, int, int, int, int, float, const float *, int, float *, int);
typedef void (*dtrsm_fn)(int, int, int, int, int, int, int, double, const double *, int, double *, int);

/* See blas.h. */
bool cj_lapack_available(void) {
    pthread_once(&blas.once, blas_load);
    return blas.potrf[0] != NULL;
}

/* See blas.h. */
int cj_lapack_potrf(bool f64, int n, void *a) {
    if (blas.serialize) pthread_mutex_lock(&blas.lock);
    int info = f64 ? ((dpotrf_fn)(uintptr_t)blas.potrf[1])(LAPACK_ROW_MAJOR, 'L', n, a, n)
                   : ((spotrf_fn)(uintptr_t)blas.potrf[0])(LAPACK_ROW_MAJOR, 'L', n, a, n);
    if (blas.serialize) pthread_mutex_unlock(&blas.lock);
    return info;
}

/* See blas.h. */
void cj_blas_trsm(bool f64, bool lower, bool trans, bool unit, int n, int k, const void *a, void *b) {
    int uplo = lower ? CBLAS_LOWER : CBLAS_UPPER, op = trans ? CBLAS_TRANS : CBLAS_NO_TRANS;
    int diag = unit ? CBLAS_UNIT : CBLAS_NON_UNIT;
    if (blas.serialize) pthread_mutex_lock(&blas.lock);
    if (f64)
        ((dtrsm_fn)(uintptr_t)blas.trsm[1])(CBLAS_ROW_MAJOR, CBLAS_LEFT, uplo, op, diag, n, k, 1.0, a, n, b, k);
    else
        ((strsm_fn)(uintptr_t)blas.trsm[0])(CBLAS_ROW_MAJOR, CBLAS_LEFT, uplo, op, diag, n, k, 1.0f, a, n, b, k);
    if (blas.serialize) pthread_mutex_unlock(&blas.lock);
}

typedef int (*sgetrf_fn)(int, int, int, float *, int, int32_t *);
typedef int (*dgetrf_fn)(int, int, int, double *, int, int32_t *);

/* See blas.h. */
int cj_lapack_getrf(bool f64, int n, void *a, int32_t *ipiv) {
    if (blas.serialize) pthread_mutex_lock(&blas.lock);
    int info = f64 ? ((dgetrf_fn)(uintptr_t)blas.getrf[1])(LAPACK_ROW_MAJOR, n, n, a, n, ipiv)
                   : ((sgetrf_fn)(uintptr_t)blas.getrf[0])(LAPACK_ROW_MAJOR, n, n, a, n, ipiv);
    if (blas.serialize) pthread_mutex_unlock(&blas.lock);
    return info;
}

typedef int (*sgeqrf_fn)(int, int, int, float *, int, float *);
typedef int (*dgeqrf_fn)(int, int, int, double *, int, double *);
typedef int (*sorgqr_fn)(int, int, int, int, float *, int, const float *);
typedef int (*dorgqr_fn)(int, int, int, int, double *, int, const double *);
typedef int (*ssyevd_fn)(int, char, char, int, float *, int, float *);
typedef int (*dsyevd_fn)(int, char, char, int, double *, int, double *);
typedef int (*sgesdd_fn)(int, char, int, int, float *, int, float *, float *, int, float *, int);
typedef int (*dgesdd_fn)(int, char, int, int, double *, int, double *, double *, int, double *, int);

/* See blas.h. */
int cj_lapack_geqrf(bool f64, int m, int n, void *a, int lda, void *tau) {
    if (!blas.geqrf[f64]) return -1000;
    if (blas.serialize) pthread_mutex_lock(&blas.lock);
    int info = f64 ? ((dgeqrf_fn)(uintptr_t)blas.geqrf[1])(LAPACK_ROW_MAJOR, m, n, a, lda, tau)
                   : ((sgeqrf_fn)(uintptr_t)blas.geqrf[0])(LAPACK_ROW_MAJOR, m, n, a, lda, tau);
    if (blas.serialize) pthread_mutex_unlock(&blas.lock);
    return info;
}

/* See blas.h. */
int cj_lapack_orgqr(bool f64, int m, int n, int k, void *a, int lda, const void *tau) {
    if (!blas.orgqr[f64]) return -1000;
    if (blas.serialize) pthread_mutex_lock(&blas.lock);
    int info = f64 ? ((dorgqr_fn)(uintptr_t)blas.orgqr[1])(LAPACK_ROW_MAJOR, m, n, k, a, lda, tau)
                   : ((sorgqr_fn)(uintptr_t)blas.orgqr[0])(LAPACK_ROW_MAJOR, m, n, k, a, lda, tau);
    if (blas.serialize) pthread_mutex_unlock(&blas.lock);
    return info;
}

/* See blas.h. */
int cj_lapack_syevd(bool f64, bool vectors, int n, void *a, void *w) {
    if (!blas.syevd[f64]) return -1000;
    char jobz = vectors ? 'V' : 'N';
    if (blas.serialize) pthread_mutex_lock(&blas.lock);
    int info = f64 ? ((dsyevd_fn)(uintptr_t)blas.syevd[1])(LAPACK_ROW_MAJOR, jobz, 'L', n, a, n, w)
                   : ((ssyevd_fn)(uintptr_t)blas.syevd[0])(LAPACK_ROW_MAJOR, jobz, 'L', n, a, n, w);
    if (blas.serialize) pthread_mutex_unlock(&blas.lock);
    return info;
}

/* See blas.h. */
int cj_lapack_gesdd(bool f64, char jobz, int m, int n, void *a, void *s, void *u, int ldu, void *vt, int ldvt) {
    if (!blas.gesdd[f64]) return -1000;
    if (blas.serialize) pthread_mutex_lock(&blas.lock);
    int info = f64 ? ((dgesdd_fn)(uintptr_t)blas.gesdd[1])(LAPACK_ROW_MAJOR, jobz, m, n, a, n, s, u, ldu, vt, ldvt)
                   : ((sgesdd_fn)(uintptr_t)blas.gesdd[0])(LAPACK_ROW_MAJOR, jobz, m, n, a, n, s, u, ldu, vt, ldvt);
    if (blas.serialize) pthread_mutex_unlock(&blas.lock);
    return info;
}
