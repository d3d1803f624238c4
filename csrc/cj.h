/* cj.h - types shared by every part of the cjit core.
 *
 * The core never includes Python.h (only py_*.c do).  Every fallible
 * function returns a cj_status; the first error's message is kept in the
 * cj_error the caller passed, and later errors never overwrite it
 * ("sticky first error", as in SQLite). */
#ifndef CJ_H
#define CJ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CJ_MAX_RANK 16 /* NumPy allows 64; masks of dims are 32 bits */
#define CJ_MAX_INPUTS 4 /* largest fixed arity; concatenate takes any number */

typedef enum {
    CJ_OK = 0,
    CJ_ERR_TYPE,      /* becomes TypeError */
    CJ_ERR_VALUE,     /* becomes ValueError */
    CJ_ERR_MEMORY,    /* becomes MemoryError */
    CJ_ERR_INTERNAL,  /* becomes RuntimeError: a bug in cjit */
    CJ_ERR_COMPILE,   /* becomes RuntimeError: LLVM refused */
    CJ_ERR_BUDGET,    /* becomes cjit.errors.MemoryBudgetError */
    CJ_ERR_CANCELLED, /* stopped on request (Ctrl-C): the caller raises what asked */
    CJ_ERR_OVERFLOW,  /* becomes OverflowError: a Python int the dtype cannot hold */
} cj_status;

typedef struct {
    cj_status status;
    char message[1024];
} cj_error;

/* A request to stop a long piece of work early, made by another thread
 * (py_exec.c makes one when Ctrl-C arrives during a compile).  Compiles
 * look at it between phases and then return CJ_ERR_CANCELLED, having
 * freed what they made.  A NULL pointer is a request never made. */
typedef _Atomic bool cj_cancel;
static inline bool cj_cancelled(const cj_cancel *c) { return c && *c; }

/* Records the first error only; returns its status so callers can write
 * `return cj_error_set(err, CJ_ERR_VALUE, "...", ...)`. */
cj_status cj_error_set(cj_error *err, cj_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Dtypes.  Promotion is a table (graph.c), not this order; later dtypes
 * come last so that the numbers of the others (in plan_io.c's bytes) stay. */
typedef enum {
    CJ_BOOL = 0,
    CJ_INT32,
    CJ_INT64,
    CJ_FLOAT32,
    CJ_FLOAT64,
    CJ_UINT32,
    CJ_INT8,
    CJ_INT16,
    CJ_UINT8,
    CJ_UINT16,
    CJ_UINT64,
    CJ_NUM_DTYPES
} cj_dtype;

typedef enum { CJ_KIND_BOOL, CJ_KIND_INT, CJ_KIND_FLOAT } cj_kind;

const char *cj_dtype_name(cj_dtype dt);             /* "float32", ... */
bool cj_dtype_from_name(const char *name, cj_dtype *out);
int cj_dtype_size(cj_dtype dt);                     /* bytes; bool is 1 */
cj_kind cj_dtype_kind(cj_dtype dt);                 /* uint32 is of kind int */
bool cj_dtype_unsigned(cj_dtype dt);                /* uint8/16/32/64 (and bool): unsigned compares, shifts, casts */
/* "bool, int8, ..., float64": every dtype's name, for error messages. */
#define CJ_DTYPE_NAMES_TEXT "bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64"
/* The least and greatest value of an integer or bool dtype, as int64 bits:
 * uint64's greatest, 2**64 - 1, reads as -1 here (the bits a reduction's
 * identity needs); ask cj_dtype_int_fits whether a value is in range. */
void cj_dtype_int_range(cj_dtype dt, int64_t *lo, int64_t *hi);
/* Whether the integer v fits in integer or bool dtype dt; v's bits are read
 * as unsigned when v_unsigned (a uint64 value), else as signed. */
bool cj_dtype_int_fits(cj_dtype dt, int64_t v, bool v_unsigned);
/* The integer v of dtype dt (int64 bits, unsigned for uint64) as a double,
 * rounded to nearest. */
double cj_dtype_int_to_double(cj_dtype dt, int64_t v);
/* v wrapped into integer or bool dtype dt as a C cast (NumPy's astype) does;
 * bool is v != 0. */
int64_t cj_dtype_wrap_int(cj_dtype dt, int64_t v);
/* JAX's jax_enable_x64, process-wide (the bindings set it from cjit.config
 * before each trace).  Off, the dtypes promotion would make up (NumPy's
 * int32 + float32 = float64, a weak float meeting an int, an int sum, int
 * true division) are their 32-bit counterparts; a 64-bit operand given
 * explicitly keeps its dtype. */
void cj_set_x64(bool on);
bool cj_x64_enabled(void);
/* dt, or with x64 off its 32-bit counterpart (int64 -> int32, uint64 ->
 * uint32, float64 -> float32). */
cj_dtype cj_dtype_canon(cj_dtype dt);

typedef struct {
    int rank;
    int64_t dims[CJ_MAX_RANK];
} cj_shape;

int64_t cj_shape_numel(const cj_shape *s);
bool cj_shape_equal(const cj_shape *a, const cj_shape *b);
/* Writes "(2, 3)" style text into buf; returns buf. */
char *cj_shape_str(const cj_shape *s, char *buf, size_t n);

/* A bump allocator: everything one compile allocates lives here and is
 * freed at once.  Returns NULL when out of memory. */
typedef struct cj_arena_block cj_arena_block;
typedef struct {
    cj_arena_block *head;
} cj_arena;

void *cj_arena_alloc(cj_arena *a, size_t size);  /* zeroed, 16-aligned */
char *cj_arena_strdup(cj_arena *a, const char *s);
void cj_arena_free(cj_arena *a);
/* Bytes of heap the arena's blocks occupy (cj_heap_bytes of each). */
int64_t cj_arena_heap_bytes(const cj_arena *a);

/* Bytes of heap that the malloc'd block p occupies: with glibc its usable
 * size plus the chunk header; elsewhere `requested` plus two words.  0 for
 * NULL.  For memory accounting (an executable's code_bytes). */
int64_t cj_heap_bytes(const void *p, size_t requested);

#endif
