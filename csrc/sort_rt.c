/* sort_rt.c - argsort kernels, run by the runtime (not a loop body): each
 * row's indices merge-sorted by the row's values.  Merge sort is stable,
 * so equal values keep their order (NumPy's kind="stable", the array
 * API's default); a nan compares after every number, as NumPy sorts it. */
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "rt.h"

/* `before(a, b)`: does element a come strictly before element b? */
#define DEFINE_SORT(NAME, T, BEFORE)                                                            \
    static void NAME(const T *key, int64_t *idx, int64_t *tmp, int64_t n) {                     \
        for (int64_t w = 1; w < n; w *= 2) { /* bottom-up: runs of w, merged in pairs */        \
            for (int64_t lo = 0; lo < n; lo += 2 * w) {                                         \
                int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;    \
                int64_t i = lo, j = mid, o = lo;                                                \
                while (i < mid && j < hi) {                                                     \
                    T a = key[idx[i]], b = key[idx[j]];                                         \
                    tmp[o++] = (BEFORE) ? idx[j++] : idx[i++]; /* b before a: take b */         \
                }                                                                               \
                while (i < mid) tmp[o++] = idx[i++];                                            \
                while (j < hi) tmp[o++] = idx[j++];                                             \
            }                                                                                   \
            memcpy(idx, tmp, sizeof(int64_t) * (size_t)n);                                      \
        }                                                                                       \
    }

/* floats: b before a when b < a, or a is nan and b is not */
DEFINE_SORT(sort_f64, double, (b < a || (a != a && b == b)))
DEFINE_SORT(sort_f32, float, (b < a || (a != a && b == b)))
DEFINE_SORT(sort_i64, int64_t, (b < a))
DEFINE_SORT(sort_i32, int32_t, (b < a))
DEFINE_SORT(sort_i16, int16_t, (b < a))
DEFINE_SORT(sort_i8, int8_t, (b < a))
DEFINE_SORT(sort_u32, uint32_t, (b < a))
DEFINE_SORT(sort_u64, uint64_t, (b < a))
DEFINE_SORT(sort_u16, uint16_t, (b < a))
DEFINE_SORT(sort_u8, uint8_t, (b < a)) /* bool too: one byte, 0 or 1 */

/* See rt.h. */
void cj_rt_argsort(const int64_t *desc, int64_t start, int64_t end, void *const *buffers) {
    const char *in = buffers[desc[0]];
    int64_t *out = buffers[desc[2]], n = desc[3];
    cj_dtype dt = (cj_dtype)desc[5];
    int64_t *tmp = n > 0 ? malloc(sizeof(int64_t) * (size_t)n) : NULL;
    if (n > 0 && !tmp) { /* no memory for the merge: the rows stay in order (cannot raise from here) */
        for (int64_t r = start; r < end; r++)
            for (int64_t i = 0; i < n; i++) out[r * n + i] = i;
        return;
    }
    size_t width = (size_t)cj_dtype_size(dt);
    for (int64_t r = start; r < end; r++) {
        int64_t *idx = out + r * n;
        const void *key = in + (size_t)(r * n) * width;
        for (int64_t i = 0; i < n; i++) idx[i] = i;
        switch (dt) {
        case CJ_FLOAT64: sort_f64(key, idx, tmp, n); break;
        case CJ_FLOAT32: sort_f32(key, idx, tmp, n); break;
        case CJ_INT64: sort_i64(key, idx, tmp, n); break;
        case CJ_INT32: sort_i32(key, idx, tmp, n); break;
        case CJ_INT16: sort_i16(key, idx, tmp, n); break;
        case CJ_INT8: sort_i8(key, idx, tmp, n); break;
        case CJ_UINT32: sort_u32(key, idx, tmp, n); break;
        case CJ_UINT64: sort_u64(key, idx, tmp, n); break;
        case CJ_UINT16: sort_u16(key, idx, tmp, n); break;
        case CJ_UINT8: case CJ_BOOL: sort_u8(key, idx, tmp, n); break;
        case CJ_NUM_DTYPES: break;
        }
    }
    free(tmp);
}
