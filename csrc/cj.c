/* cj.c - the small shared pieces of the core: the sticky error, dtype
 * tables, shape helpers and the bump arena. */
#include "cj.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>   /* malloc_usable_size */
#endif

/* ---- errors ---------------------------------------------------------- */

/* Records status and message only if err holds no error yet (the first
 * error is the one worth reporting; later ones are usually consequences).
 * Returns `status` in every case.  err may be NULL. */
cj_status cj_error_set(cj_error *err, cj_status status, const char *fmt, ...)
{
    if (err == NULL || status == CJ_OK || err->status != CJ_OK)
        return status;
    err->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return status;
}

/* ---- dtypes ---------------------------------------------------------- */

static const struct {
    const char *name;
    int size;
    cj_kind kind;
} dtype_info[CJ_NUM_DTYPES] = {
    [CJ_BOOL] = {"bool", 1, CJ_KIND_BOOL},
    [CJ_INT32] = {"int32", 4, CJ_KIND_INT},
    [CJ_INT64] = {"int64", 8, CJ_KIND_INT},
    [CJ_FLOAT32] = {"float32", 4, CJ_KIND_FLOAT},
    [CJ_FLOAT64] = {"float64", 8, CJ_KIND_FLOAT},
    [CJ_UINT32] = {"uint32", 4, CJ_KIND_INT},
    [CJ_INT8] = {"int8", 1, CJ_KIND_INT},
    [CJ_INT16] = {"int16", 2, CJ_KIND_INT},
    [CJ_UINT8] = {"uint8", 1, CJ_KIND_INT},
    [CJ_UINT16] = {"uint16", 2, CJ_KIND_INT},
    [CJ_UINT64] = {"uint64", 8, CJ_KIND_INT},
};

static bool dtype_valid(cj_dtype dt)
{
    return (int)dt >= 0 && dt < CJ_NUM_DTYPES;
}

/* Returns a static string ("float32"), or "?" for an invalid dtype. */
const char *cj_dtype_name(cj_dtype dt)
{
    return dtype_valid(dt) ? dtype_info[dt].name : "?";
}

/* Parses one of the dtype names; returns false (out untouched) for
 * anything else, including NULL. */
bool cj_dtype_from_name(const char *name, cj_dtype *out)
{
    if (name == NULL)
        return false;
    for (int i = 0; i < CJ_NUM_DTYPES; i++) {
        if (strcmp(name, dtype_info[i].name) == 0) {
            if (out)
                *out = (cj_dtype)i;
            return true;
        }
    }
    return false;
}

/* Returns the element size in bytes (bool is 1), 0 for an invalid dtype. */
int cj_dtype_size(cj_dtype dt)
{
    return dtype_valid(dt) ? dtype_info[dt].size : 0;
}

/* True for the dtypes whose integer bits are read without a sign. */
static bool x64_on = true;

void cj_set_x64(bool on)
{
    x64_on = on;
}

bool cj_x64_enabled(void)
{
    return x64_on;
}

cj_dtype cj_dtype_canon(cj_dtype dt)
{
    if (x64_on)
        return dt;
    return dt == CJ_INT64 ? CJ_INT32 : dt == CJ_UINT64 ? CJ_UINT32 : dt == CJ_FLOAT64 ? CJ_FLOAT32 : dt;
}

bool cj_dtype_unsigned(cj_dtype dt)
{
    return dt == CJ_BOOL || dt == CJ_UINT32 || dt == CJ_UINT8 || dt == CJ_UINT16 || dt == CJ_UINT64;
}

/* See cj.h.  int64 is the widest; an invalid dtype reads as int64. */
void cj_dtype_int_range(cj_dtype dt, int64_t *lo, int64_t *hi)
{
    if (dt == CJ_BOOL) {
        *lo = 0;
        *hi = 1;
        return;
    }
    int bits = dtype_valid(dt) ? 8 * dtype_info[dt].size : 64;
    if (dt == CJ_UINT64) {
        *lo = 0;
        *hi = -1; /* 2**64 - 1 as int64 bits */
    } else if (bits >= 64) {
        *lo = INT64_MIN;
        *hi = INT64_MAX;
    } else if (cj_dtype_unsigned(dt)) {
        *lo = 0;
        *hi = (int64_t)((UINT64_C(1) << bits) - 1);
    } else {
        *lo = -(INT64_C(1) << (bits - 1));
        *hi = (INT64_C(1) << (bits - 1)) - 1;
    }
}

/* See cj.h. */
bool cj_dtype_int_fits(cj_dtype dt, int64_t v, bool v_unsigned)
{
    if (v_unsigned && v < 0) /* 2**63 or more: only uint64 holds it */
        return dt == CJ_UINT64;
    if (dt == CJ_UINT64)
        return v >= 0;
    int64_t lo, hi;
    cj_dtype_int_range(dt, &lo, &hi);
    return v >= lo && v <= hi;
}

/* See cj.h. */
double cj_dtype_int_to_double(cj_dtype dt, int64_t v)
{
    return dt == CJ_UINT64 ? (double)(uint64_t)v : (double)v;
}

/* See cj.h. */
int64_t cj_dtype_wrap_int(cj_dtype dt, int64_t v)
{
    uint64_t u = (uint64_t)v;
    switch (dt) {
    case CJ_BOOL: return v != 0;
    case CJ_INT8: return (int8_t)(uint8_t)u;
    case CJ_UINT8: return (uint8_t)u;
    case CJ_INT16: return (int16_t)(uint16_t)u;
    case CJ_UINT16: return (uint16_t)u;
    case CJ_INT32: return (int32_t)(uint32_t)u;
    case CJ_UINT32: return (uint32_t)u;
    case CJ_INT64:
    case CJ_UINT64:
    case CJ_FLOAT32:
    case CJ_FLOAT64:
    case CJ_NUM_DTYPES: return v;
    }
    return v;
}

/* Returns the kind (bool < int < float); an invalid dtype reads as bool. */
cj_kind cj_dtype_kind(cj_dtype dt)
{
    return dtype_valid(dt) ? dtype_info[dt].kind : CJ_KIND_BOOL;
}

/* ---- shapes ---------------------------------------------------------- */

/* Returns the number of elements (1 for rank 0), or -1 when the shape is
 * invalid (bad rank, negative dim) or the product overflows int64. */
int64_t cj_shape_numel(const cj_shape *s)
{
    if (s == NULL || s->rank < 0 || s->rank > CJ_MAX_RANK)
        return -1;
    int64_t n = 1;
    bool zero = false;
    for (int d = 0; d < s->rank; d++) {
        if (s->dims[d] < 0)
            return -1;
        if (s->dims[d] == 0)
            zero = true;
    }
    if (zero)
        return 0;
    for (int d = 0; d < s->rank; d++) {
        if (__builtin_mul_overflow(n, s->dims[d], &n))
            return -1;
    }
    return n;
}

/* Returns true when both shapes have the same rank and dims (dims beyond
 * the rank are ignored). */
bool cj_shape_equal(const cj_shape *a, const cj_shape *b)
{
    if (a->rank != b->rank)
        return false;
    for (int d = 0; d < a->rank && d < CJ_MAX_RANK; d++) {
        if (a->dims[d] != b->dims[d])
            return false;
    }
    return true;
}

/* Writes the shape as a Python tuple ("()", "(4,)", "(2, 3)") into buf of
 * n bytes, truncating if needed; returns buf. */
char *cj_shape_str(const cj_shape *s, char *buf, size_t n)
{
    if (buf == NULL || n == 0)
        return buf;
    size_t used = 0;
    buf[0] = '\0';
#define PUT(...)                                                          \
    do {                                                                  \
        if (used < n) {                                                   \
            int k_ = snprintf(buf + used, n - used, __VA_ARGS__);         \
            if (k_ > 0)                                                   \
                used += (size_t)k_;                                       \
        }                                                                 \
    } while (0)
    int rank = s->rank;
    if (rank < 0 || rank > CJ_MAX_RANK) {
        PUT("(<rank %d>)", rank);
        return buf;
    }
    PUT("(");
    for (int d = 0; d < rank; d++)
        PUT("%s%lld", d ? ", " : "", (long long)s->dims[d]);
    PUT(rank == 1 ? ",)" : ")");
#undef PUT
    return buf;
}

/* ---- arena ----------------------------------------------------------- */

#define ARENA_ALIGN 16
/* Blocks double from the first size to the largest: a graph of a few
 * nodes (most eager ops, small functions) holds 4 KiB, not 64, for as long
 * as its executable lives. */
#define ARENA_FIRST_BLOCK (4 * 1024)
#define ARENA_BLOCK_SIZE (64 * 1024)

/* One malloc'd block.  The header is padded to ARENA_ALIGN so that `data`
 * (which follows it) starts aligned; malloc gives at least 16-byte
 * alignment on the 64-bit platforms cjit targets. */
struct cj_arena_block {
    cj_arena_block *next;
    size_t used, cap;
    size_t pad_;
};

static size_t block_header(void)
{
    return (sizeof(cj_arena_block) + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
}

/* Returns `size` zeroed bytes aligned to 16 that live until cj_arena_free,
 * or NULL when out of memory.  A zero size still gets a distinct pointer. */
void *cj_arena_alloc(cj_arena *a, size_t size)
{
    if (a == NULL)
        return NULL;
    if (size == 0)
        size = 1;
    if (size > SIZE_MAX / 2)
        return NULL;
    size = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    cj_arena_block *b = a->head;
    if (b == NULL || b->cap - b->used < size) {
        /* A large request gets a block of its own, linked behind the
         * current head so that the head's free space stays in use. */
        bool own = size > ARENA_BLOCK_SIZE / 4;
        size_t next = b == NULL ? ARENA_FIRST_BLOCK : b->cap * 2;
        if (next > ARENA_BLOCK_SIZE)
            next = ARENA_BLOCK_SIZE;
        while (!own && next < size)
            next *= 2;
        size_t cap = own ? size : next;
        /* calloc zeroes the block, and memory is never handed out twice,
         * so every allocation is zeroed without a memset. */
        cj_arena_block *nb = calloc(1, block_header() + cap);
        if (nb == NULL)
            return NULL;
        nb->cap = cap;
        nb->used = 0;
        if (own && b != NULL) {
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = a->head;
            a->head = nb;
        }
        b = nb;
    }
    char *p = (char *)b + block_header() + b->used;
    b->used += size;
    return p;
}

/* Returns an arena copy of s (NULL when s is NULL or memory runs out). */
char *cj_arena_strdup(cj_arena *a, const char *s)
{
    if (s == NULL)
        return NULL;
    size_t n = strlen(s) + 1;
    char *p = cj_arena_alloc(a, n);
    if (p)
        memcpy(p, s, n);
    return p;
}

/* See cj.h. */
int64_t cj_heap_bytes(const void *p, size_t requested)
{
    if (p == NULL)
        return 0;
#ifdef __GLIBC__
    (void)requested;
    return (int64_t)(malloc_usable_size((void *)p) + sizeof(size_t));
#else
    return (int64_t)(requested + 2 * sizeof(size_t));
#endif
}

/* See cj.h. */
int64_t cj_arena_heap_bytes(const cj_arena *a)
{
    int64_t n = 0;
    for (const cj_arena_block *b = a ? a->head : NULL; b != NULL; b = b->next)
        n += cj_heap_bytes(b, block_header() + b->cap);
    return n;
}

/* Frees every block; the arena is empty and reusable afterwards. */
void cj_arena_free(cj_arena *a)
{
    if (a == NULL)
        return;
    cj_arena_block *b = a->head;
    while (b) {
        cj_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
}
