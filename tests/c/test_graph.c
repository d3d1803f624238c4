/* test_graph.c - unit test of csrc/cj.c and csrc/graph.c.
 *
 * Build and run from the repository root (one command; the --wrap flags let
 * the test make malloc/calloc/realloc fail on purpose):
 *
 *   gcc -std=c11 -Wall -Wextra -Werror -g -Icsrc -o /tmp/test_graph tests/c/test_graph.c \
 *       csrc/graph.c csrc/cj.c -lm -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc && /tmp/test_graph
 *
 * and under valgrind: valgrind --leak-check=full --error-exitcode=1 /tmp/test_graph
 *
 * The expected dtypes below were produced by NumPy 2.4 (see the comment
 * above each table); where cjit deliberately differs from NumPy the test
 * maps NumPy's answer to cjit's and says why. */
#include "cj.h"
#include "graph.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- allocation failure injection ----------------------------------- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);

/* -1: never fail; k >= 0: the allocation after k more succeeds fails. */
static long alloc_countdown = -1;
static long injected_failures;

static bool inject(void)
{
    if (alloc_countdown < 0)
        return false;
    if (alloc_countdown == 0) {
        injected_failures++;
        return true; /* keep failing until reset: every later allocation fails too */
    }
    alloc_countdown--;
    return false;
}

void *__wrap_malloc(size_t n) { return inject() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return inject() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return inject() ? NULL : __real_realloc(p, n); }

/* ---- a tiny check framework ----------------------------------------- */

static int checks, failures;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        checks++;                                                                    \
        if (!(cond)) {                                                               \
            failures++;                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                            \
    } while (0)

#define CHECK_MSG(cond, ...)                                                         \
    do {                                                                             \
        checks++;                                                                    \
        if (!(cond)) {                                                               \
            failures++;                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fprintf(stderr, "\n");                                                   \
        }                                                                            \
    } while (0)

/* shp(rank, dims...): a shape literal (the dims land after a leading 0). */
#define shp(rank, ...) make_shape((rank), (const int64_t[CJ_MAX_RANK + 1]){0, __VA_ARGS__} + 1)

static cj_shape make_shape(int rank, const int64_t *dims)
{
    cj_shape s;
    memset(&s, 0, sizeof s);
    s.rank = rank;
    for (int i = 0; i < rank && i < CJ_MAX_RANK; i++)
        s.dims[i] = dims[i];
    return s;
}

static bool shape_is(const cj_graph *g, int id, cj_shape s)
{
    return id >= 0 && id < g->nnodes && cj_shape_equal(&g->nodes[id].shape, &s);
}

static void err_reset(cj_error *e) { memset(e, 0, sizeof *e); }

/* The node failed with `status` and a message that contains every
 * (NULL-terminated) substring given. */
static void expect_error(int id, cj_error *err, cj_status status, ...)
{
    CHECK_MSG(id == -1, "expected failure, got node %d", id);
    CHECK_MSG(err->status == status, "status %d, expected %d (%s)", err->status, status, err->message);
    va_list ap;
    va_start(ap, status);
    const char *sub;
    while ((sub = va_arg(ap, const char *)) != NULL)
        CHECK_MSG(strstr(err->message, sub) != NULL, "message \"%s\" lacks \"%s\"", err->message, sub);
    va_end(ap);
    err_reset(err);
}

static char dtype_code(cj_dtype dt) { return "biIfF"[dt]; }

/* Operand k of the dtype tables: 0..4 a strong (2,) param of that dtype,
 * 5..7 a weak scalar constant like Python's True, 1, 1.5. */
static int table_operand(cj_graph *g, int k, cj_error *err)
{
    if (k < 5)
        return cj_build_param(g, &(cj_shape){.rank = 1, .dims = {2}}, (cj_dtype)k, false, -1, err);
    cj_shape scalar = {.rank = 0};
    if (k == 5)
        return cj_build_constant(g, 1.0, 1, CJ_BOOL, true, &scalar, -1, err);
    if (k == 6)
        return cj_build_constant(g, 1.0, 1, CJ_INT64, true, &scalar, -1, err);
    return cj_build_constant(g, 1.5, 1, CJ_FLOAT64, true, &scalar, -1, err);
}

/* ---- cj.c ------------------------------------------------------------- */

static void test_basics(void)
{
    cj_error err = {0};
    CHECK(cj_error_set(&err, CJ_ERR_VALUE, "first %d", 1) == CJ_ERR_VALUE);
    CHECK(cj_error_set(&err, CJ_ERR_TYPE, "second") == CJ_ERR_TYPE);
    CHECK(err.status == CJ_ERR_VALUE && strcmp(err.message, "first 1") == 0);
    CHECK(cj_error_set(NULL, CJ_ERR_MEMORY, "x") == CJ_ERR_MEMORY);

    const char *names[] = {"bool", "int32", "int64", "float32", "float64", "uint32",
                           "int8", "int16", "uint8", "uint16", "uint64"};
    const int sizes[] = {1, 4, 4 + 4, 4, 8, 4, 1, 2, 1, 2, 8};
    const cj_kind kinds[] = {CJ_KIND_BOOL, CJ_KIND_INT, CJ_KIND_INT, CJ_KIND_FLOAT, CJ_KIND_FLOAT,
                             CJ_KIND_INT, CJ_KIND_INT, CJ_KIND_INT, CJ_KIND_INT, CJ_KIND_INT, CJ_KIND_INT};
    _Static_assert(sizeof names / sizeof *names == CJ_NUM_DTYPES, "a name per dtype");
    for (int i = 0; i < CJ_NUM_DTYPES; i++) {
        cj_dtype dt = CJ_NUM_DTYPES;
        CHECK(strcmp(cj_dtype_name((cj_dtype)i), names[i]) == 0);
        CHECK(cj_dtype_from_name(names[i], &dt) && dt == (cj_dtype)i);
        CHECK(cj_dtype_size((cj_dtype)i) == sizes[i]);
        CHECK(cj_dtype_kind((cj_dtype)i) == kinds[i]);
    }
    /* integer ranges and wrapping, as C casts */
    int64_t lo, hi;
    cj_dtype_int_range(CJ_INT8, &lo, &hi);
    CHECK(lo == -128 && hi == 127);
    cj_dtype_int_range(CJ_UINT16, &lo, &hi);
    CHECK(lo == 0 && hi == 65535);
    cj_dtype_int_range(CJ_INT64, &lo, &hi);
    CHECK(lo == INT64_MIN && hi == INT64_MAX);
    cj_dtype_int_range(CJ_UINT64, &lo, &hi); /* 2**64 - 1 as its bits */
    CHECK(lo == 0 && hi == -1);
    /* a uint64 value's bits read unsigned: 2**63 fits only uint64, -1 not uint64 */
    CHECK(cj_dtype_int_fits(CJ_UINT64, INT64_MIN, true) && !cj_dtype_int_fits(CJ_INT64, INT64_MIN, true));
    CHECK(!cj_dtype_int_fits(CJ_UINT64, -1, false) && cj_dtype_int_fits(CJ_INT64, -1, false));
    CHECK(cj_dtype_int_fits(CJ_UINT8, 255, false) && !cj_dtype_int_fits(CJ_UINT8, 256, false));
    CHECK(cj_dtype_int_to_double(CJ_UINT64, -1) == 18446744073709551616.0);
    CHECK(cj_dtype_int_to_double(CJ_INT64, -1) == -1.0);
    CHECK(cj_dtype_wrap_int(CJ_INT8, 200) == -56 && cj_dtype_wrap_int(CJ_UINT8, -1) == 255);
    CHECK(cj_dtype_wrap_int(CJ_INT16, 40000) == -25536 && cj_dtype_wrap_int(CJ_BOOL, 7) == 1);
    CHECK(cj_dtype_unsigned(CJ_UINT8) && !cj_dtype_unsigned(CJ_INT16));
    cj_dtype dt = CJ_BOOL;
    CHECK(!cj_dtype_from_name("float16", &dt) && dt == CJ_BOOL);
    CHECK(!cj_dtype_from_name(NULL, &dt));
    CHECK(strcmp(cj_dtype_name((cj_dtype)99), "?") == 0 && cj_dtype_size((cj_dtype)-1) == 0);

    char buf[128];
    cj_shape s0 = shp(0), s1 = shp(1, 4), s2 = shp(2, 2, 3);
    CHECK(strcmp(cj_shape_str(&s0, buf, sizeof buf), "()") == 0);
    CHECK(strcmp(cj_shape_str(&s1, buf, sizeof buf), "(4,)") == 0);
    CHECK(strcmp(cj_shape_str(&s2, buf, sizeof buf), "(2, 3)") == 0);
    CHECK(strcmp(cj_shape_str(&s2, buf, 4), "(2,") == 0); /* truncates, stays terminated */
    CHECK(cj_shape_numel(&s0) == 1 && cj_shape_numel(&s2) == 6);
    cj_shape big = shp(3, 1LL << 31, 1LL << 31, 4); /* 2**64 elements */
    CHECK(cj_shape_numel(&big) == -1);
    cj_shape zbig = shp(3, 1LL << 62, 0, 1LL << 62); /* a zero makes any size fine */
    CHECK(cj_shape_numel(&zbig) == 0);
    cj_shape neg = shp(2, 3, -1);
    CHECK(cj_shape_numel(&neg) == -1);
    CHECK(cj_shape_equal(&s2, &(cj_shape){.rank = 2, .dims = {2, 3, 99}}));
    CHECK(!cj_shape_equal(&s1, &s2));

    cj_arena a = {0};
    char *p = cj_arena_alloc(&a, 3);
    char *q = cj_arena_alloc(&a, 0);
    CHECK(p && q && p != q && ((uintptr_t)p % 16) == 0 && ((uintptr_t)q % 16) == 0);
    CHECK(p[0] == 0 && p[1] == 0 && p[2] == 0);
    unsigned char *huge = cj_arena_alloc(&a, 1 << 20); /* its own block */
    CHECK(huge && ((uintptr_t)huge % 16) == 0 && huge[0] == 0 && huge[(1 << 20) - 1] == 0);
    memset(huge, 0xab, 1 << 20);
    char *r = cj_arena_alloc(&a, 100); /* still served from the first block */
    CHECK(r && r[99] == 0);
    for (int i = 0; i < 5000; i++) {
        int *v = cj_arena_alloc(&a, 40);
        CHECK(v && v[9] == 0);
        v[9] = i;
    }
    char *dup = cj_arena_strdup(&a, "hello");
    CHECK(dup && strcmp(dup, "hello") == 0);
    CHECK(cj_arena_strdup(&a, NULL) == NULL);
    CHECK(cj_arena_alloc(&a, SIZE_MAX) == NULL);
    cj_arena_free(&a);
    CHECK(a.head == NULL);
    cj_arena_free(&a);
}

/* ---- op table --------------------------------------------------------- */

static void test_ops(void)
{
    CHECK(strcmp(cj_op_name(CJ_OP_ADD), "add") == 0);
    CHECK(strcmp(cj_op_name(CJ_OP_REDUCE_SUM), "reduce_sum") == 0);
    CHECK(cj_op_kind(CJ_OP_EQ) == CJ_OPKIND_COMPARE && cj_op_kind(CJ_OP_SLICE) == CJ_OPKIND_MOVE);
    CHECK(cj_op_kind(CJ_OP_MATMUL) == CJ_OPKIND_MATMUL && cj_op_kind(CJ_OP_CAST) == CJ_OPKIND_CAST);
    for (int i = 0; i < CJ_NUM_OPS; i++) {
        cj_op op = CJ_NUM_OPS;
        CHECK(cj_op_from_name(cj_op_name((cj_op)i), &op) && op == (cj_op)i);
    }
    cj_op op = CJ_OP_ADD;
    CHECK(cj_op_from_name("add", &op) && op == CJ_OP_ADD);
    CHECK(!cj_op_from_name("plus", &op) && op == CJ_OP_ADD);
    CHECK(!cj_op_from_name(NULL, &op));
    CHECK(strcmp(cj_op_name((cj_op)-3), "?") == 0);
}

/* ---- promotion -------------------------------------------------------- */

/* np.result_type over (bool int32 int64 float32 float64, then the Python
 * scalars True, 1, 1.5) x (the same), one code a pair:
 * b bool, i int32, I int64, f float32, F float64 (NumPy 2.4.6). */
static const char numpy_result_type[] =
    "biIfFbIFiiIFFiiFIIIFFIIFfFFfFfffFFFFFFFFbiIfFbIFIiIfFIIFFFFfFFFF";

static void test_promote(void)
{
    const char *names[8] = {"bool", "int32", "int64", "float32", "float64", "weak_bool", "weak_int",
                            "weak_float"};
    const cj_dtype weak_dt[3] = {CJ_BOOL, CJ_INT64, CJ_FLOAT64};
    int mismatches = 0;
    printf("promotion table (cjit vs numpy.result_type):\n%-10s", "");
    for (int b = 0; b < 8; b++)
        printf(" %-10s", names[b]);
    printf("\n");
    for (int a = 0; a < 8; a++) {
        printf("%-10s", names[a]);
        for (int b = 0; b < 8; b++) {
            bool aw = a >= 5, bw = b >= 5, w = !(aw && bw);
            cj_dtype da = aw ? weak_dt[a - 5] : (cj_dtype)a, db = bw ? weak_dt[b - 5] : (cj_dtype)b;
            cj_dtype r = cj_promote(da, aw, db, bw, &w);
            char want = numpy_result_type[a * 8 + b];
            bool ok = dtype_code(r) == want && w == (aw && bw);
            mismatches += !ok;
            printf(" %-7s%-3s", cj_dtype_name(r), ok ? (w ? "w" : "") : "!!");
            CHECK_MSG(ok, "promote %s %s -> %s, numpy %c", names[a], names[b], cj_dtype_name(r), want);
        }
        printf("\n");
    }
    printf("promotion: %d of 64 entries differ from numpy\n", mismatches);
    /* weak operands with a non-default dtype still count only by kind */
    bool w;
    CHECK(cj_promote(CJ_FLOAT32, true, CJ_INT32, false, &w) == CJ_FLOAT64 && !w);
    CHECK(cj_promote(CJ_INT32, true, CJ_INT32, true, &w) == CJ_INT64 && w);
    CHECK(cj_promote(CJ_FLOAT32, false, CJ_FLOAT64, true, NULL) == CJ_FLOAT32);
    /* uint32 with each of the others, either order (np.result_type, NumPy 2.4.6) */
    static const struct {
        cj_dtype other;
        bool weak;
        cj_dtype want;
    } u32[] = {{CJ_BOOL, false, CJ_UINT32},    {CJ_INT32, false, CJ_INT64},   {CJ_INT64, false, CJ_INT64},
               {CJ_FLOAT32, false, CJ_FLOAT64}, {CJ_FLOAT64, false, CJ_FLOAT64}, {CJ_UINT32, false, CJ_UINT32},
               {CJ_BOOL, true, CJ_UINT32},     {CJ_INT64, true, CJ_UINT32},   {CJ_FLOAT64, true, CJ_FLOAT64}};
    for (size_t k = 0; k < sizeof u32 / sizeof *u32; k++) {
        CHECK_MSG(cj_promote(CJ_UINT32, false, u32[k].other, u32[k].weak, NULL) == u32[k].want &&
                      cj_promote(u32[k].other, u32[k].weak, CJ_UINT32, false, NULL) == u32[k].want,
                  "promote uint32 with %s%s", u32[k].weak ? "weak " : "", cj_dtype_name(u32[k].other));
    }
    /* uint64: with any signed int NumPy 2 gives float64 (no integer holds both) */
    static const struct {
        cj_dtype other;
        bool weak;
        cj_dtype want;
    } u64[] = {{CJ_BOOL, false, CJ_UINT64},    {CJ_INT8, false, CJ_FLOAT64},   {CJ_INT64, false, CJ_FLOAT64},
               {CJ_UINT8, false, CJ_UINT64},   {CJ_UINT32, false, CJ_UINT64},  {CJ_FLOAT32, false, CJ_FLOAT64},
               {CJ_UINT64, false, CJ_UINT64},  {CJ_INT64, true, CJ_UINT64},    {CJ_FLOAT64, true, CJ_FLOAT64}};
    for (size_t k = 0; k < sizeof u64 / sizeof *u64; k++) {
        CHECK_MSG(cj_promote(CJ_UINT64, false, u64[k].other, u64[k].weak, NULL) == u64[k].want &&
                      cj_promote(u64[k].other, u64[k].weak, CJ_UINT64, false, NULL) == u64[k].want,
                  "promote uint64 with %s%s", u64[k].weak ? "weak " : "", cj_dtype_name(u64[k].other));
    }
}

/* NumPy 2.4.6 result dtypes of every binary op for the 8 x 8 operand pairs
 * of table_operand ('T': TypeError).  Generated with
 *   f(operand(a), operand(b)).dtype
 * where operand is np.ones(2, dtype) or the Python scalar True / 1 / 1.5.
 * 'c' is int8, which cjit lacks: bool floordiv/pow compute in int64. */
static const struct {
    const char *op, *codes;
} numpy_binary[] = {
    {"add", "biIfFbIFiiIFFiiFIIIFFIIFfFFfFfffFFFFFFFFbiIfFbIFIiIfFIIFFFFfFFFF"},
    {"sub", "TiIfFTIFiiIFFiiFIIIFFIIFfFFfFfffFFFFFFFFTiIfFTIFIiIfFIIFFFFfFFFF"},
    {"mul", "biIfFbIFiiIFFiiFIIIFFIIFfFFfFfffFFFFFFFFbiIfFbIFIiIfFIIFFFFfFFFF"},
    {"div", "FFFfFFFFFFFFFFFFFFFFFFFFfFFfFfffFFFFFFFFFFFfFFFFFFFfFFFFFFFfFFFF"},
    {"floordiv", "ciIfFcIFiiIFFiiFIIIFFIIFfFFfFfffFFFFFFFFciIfFcIFIiIfFIIFFFFfFFFF"},
    {"pow", "ciIfFcIFiiIFFiiFIIIFFIIFfFFfFfffFFFFFFFFciIfFcIFIiIfFIIFFFFfFFFF"},
    {"maximum", "biIfFbIFiiIFFiiFIIIFFIIFfFFfFfffFFFFFFFFbiIfFbIFIiIfFIIFFFFfFFFF"},
    {"minimum", "biIfFbIFiiIFFiiFIIIFFIIFfFFfFfffFFFFFFFFbiIfFbIFIiIfFIIFFFFfFFFF"},
    {"logical_and", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"},
    {"logical_or", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"},
    {"eq", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"},
    {"ne", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"},
    {"lt", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"},
    {"le", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"},
    {"gt", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"},
    {"ge", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"},
};

/* Checks one built node: its dtype, its shape, and that a primitive's
 * inputs agree in shape and dtype (what the builders promise). */
static void check_elementwise(const cj_graph *g, int id, char want, cj_shape s, const char *what)
{
    CHECK_MSG(id >= 0, "%s failed", what);
    if (id < 0)
        return;
    const cj_node *n = &g->nodes[id];
    CHECK_MSG(dtype_code(n->dtype) == want, "%s gives %s, want %c", what, cj_dtype_name(n->dtype), want);
    CHECK_MSG(cj_shape_equal(&n->shape, &s), "%s has the wrong shape", what);
    for (int i = 0; i < n->ninputs; i++) {
        const cj_node *in = &g->nodes[n->inputs[i]];
        CHECK_MSG(cj_shape_equal(&in->shape, &s), "%s input %d has another shape", what, i);
        if (cj_op_kind(n->op) != CJ_OPKIND_UNARY || n->op == CJ_OP_NAME)
            CHECK_MSG(in->dtype == g->nodes[n->inputs[0]].dtype, "%s inputs differ in dtype", what);
    }
}

static void test_binary_table(void)
{
    int differ = 0, total = 0;
    for (size_t t = 0; t < sizeof numpy_binary / sizeof numpy_binary[0]; t++) {
        cj_op op;
        CHECK(cj_op_from_name(numpy_binary[t].op, &op));
        for (int a = 0; a < 8; a++) {
            for (int b = 0; b < 8; b++) {
                cj_graph *g = cj_graph_new();
                cj_error err = {0};
                int x = table_operand(g, a, &err), y = table_operand(g, b, &err);
                int id = cj_build_binary(g, op, x, y, -1, &err);
                char want = numpy_binary[t].codes[a * 8 + b];
                if (want == 'c') { /* int8: cjit computes in int64 (documented deviation) */
                    want = 'I';
                    differ++;
                }
                char what[96];
                snprintf(what, sizeof what, "%s(%d, %d)", numpy_binary[t].op, a, b);
                total++;
                if (want == 'T') {
                    expect_error(id, &err, CJ_ERR_TYPE, numpy_binary[t].op, "not supported", (char *)NULL);
                } else {
                    cj_shape s = (a >= 5 && b >= 5) ? shp(0) : shp(1, 2);
                    check_elementwise(g, id, want, s, what);
                    if (id >= 0)
                        CHECK_MSG(g->nodes[id].weak == (a >= 5 && b >= 5), "%s weak flag", what);
                }
                cj_graph_free(g);
            }
        }
    }
    printf("binary ops: %d op/dtype combinations checked against numpy, %d mapped int8 -> int64\n", total,
           differ);
}

/* NumPy 2.4.6 result dtypes of the unary ops for bool int32 int64 float32
 * float64 inputs ('h' float16, 'c' int8, 'T' TypeError). */
static const struct {
    const char *op, *codes;
} numpy_unary[] = {
    {"neg", "TiIfF"},   {"abs", "biIfF"},   {"sign", "TiIfF"},       {"exp", "hFFfF"},
    {"expm1", "hFFfF"}, {"log", "hFFfF"},   {"log1p", "hFFfF"},      {"sqrt", "hFFfF"},
    {"reciprocal", "ciIfF"}, {"tanh", "hFFfF"}, {"sin", "hFFfF"},    {"cos", "hFFfF"},
    {"floor", "biIfF"}, {"ceil", "biIfF"},  {"logical_not", "bbbbb"}, {"isnan", "bbbbb"},
    {"isfinite", "bbbbb"},
};

static bool float_math(cj_op op)
{
    return op == CJ_OP_EXP || op == CJ_OP_EXPM1 || op == CJ_OP_LOG || op == CJ_OP_LOG1P ||
           op == CJ_OP_SQRT || op == CJ_OP_TANH || op == CJ_OP_SIN || op == CJ_OP_COS ||
           op == CJ_OP_RECIPROCAL;
}

static void test_unary_table(void)
{
    int differ = 0;
    for (size_t t = 0; t < sizeof numpy_unary / sizeof numpy_unary[0]; t++) {
        cj_op op;
        CHECK(cj_op_from_name(numpy_unary[t].op, &op));
        for (int a = 0; a < 5; a++) {
            cj_graph *g = cj_graph_new();
            cj_error err = {0};
            int x = table_operand(g, a, &err);
            int before = g->nnodes;
            int id = cj_build_unary(g, op, x, -1, &err);
            char want = numpy_unary[t].codes[a];
            /* cjit's documented choices: float math on bool and on ints
             * (reciprocal included) computes in float64. */
            if (want == 'h' || (op == CJ_OP_RECIPROCAL && a < 3)) {
                differ += want != 'F';
                want = 'F';
            }
            char what[64];
            snprintf(what, sizeof what, "%s(%s)", numpy_unary[t].op, cj_dtype_name((cj_dtype)a));
            if (want == 'T') {
                expect_error(id, &err, CJ_ERR_TYPE, numpy_unary[t].op, "(2,) bool", (char *)NULL);
            } else {
                check_elementwise(g, id, want, shp(1, 2), what);
            }
            if ((op == CJ_OP_FLOOR || op == CJ_OP_CEIL) && a < 3)
                CHECK_MSG(id == x && g->nnodes == before, "%s should be x itself", what);
            if ((op == CJ_OP_ISNAN || op == CJ_OP_ISFINITE) && a < 3 && id >= 0) {
                const cj_node *n = &g->nodes[id];
                CHECK_MSG(n->op == CJ_OP_CONSTANT && n->attrs.ivalue == (op == CJ_OP_ISFINITE), "%s constant", what);
            }
            if (float_math(op) && a < 3 && id >= 0)
                CHECK_MSG(g->nodes[g->nodes[id].inputs[0]].op == CJ_OP_CAST, "%s casts first", what);
            cj_graph_free(g);
        }
    }
    printf("unary ops: %d combinations checked, %d differ from numpy by design (float16/int reciprocal)\n",
           (int)(sizeof numpy_unary / sizeof numpy_unary[0]) * 5, differ);
}

/* NumPy 2.4.6: sum/prod/max/min over axis 0 of a (2, 2) array, and
 * matmul of (2, 2) operands (rows: x dtype, columns: y dtype). */
static const char numpy_reduce[4][6] = {"IIIfF", "IIIfF", "biIfF", "biIfF"};
static const char numpy_matmul[] = "biIfFiiIFFIIIFFfFFfFFFFFF";

static void test_reduce_matmul_tables(void)
{
    const cj_op reds[4] = {CJ_OP_REDUCE_SUM, CJ_OP_REDUCE_PROD, CJ_OP_REDUCE_MAX, CJ_OP_REDUCE_MIN};
    for (int r = 0; r < 4; r++) {
        for (int a = 0; a < 5; a++) {
            cj_graph *g = cj_graph_new();
            cj_error err = {0};
            cj_shape s = shp(2, 2, 2);
            int x = cj_build_param(g, &s, (cj_dtype)a, false, -1, &err);
            int id = cj_build_reduce(g, reds[r], x, 1u << 0, -1, &err);
            CHECK_MSG(id >= 0 && dtype_code(g->nodes[id].dtype) == numpy_reduce[r][a] && shape_is(g, id, shp(1, 2)),
                      "%s(%s)", cj_op_name(reds[r]), cj_dtype_name((cj_dtype)a));
            cj_graph_free(g);
        }
    }
    for (int a = 0; a < 5; a++) {
        for (int b = 0; b < 5; b++) {
            cj_graph *g = cj_graph_new();
            cj_error err = {0};
            cj_shape s = shp(2, 2, 2);
            int x = cj_build_param(g, &s, (cj_dtype)a, false, -1, &err);
            int y = cj_build_param(g, &s, (cj_dtype)b, false, -1, &err);
            int id = cj_build_matmul(g, x, y, -1, &err);
            /* bool @ bool is bool (an "or" of "and"s), as in NumPy */
            char want = numpy_matmul[a * 5 + b];
            CHECK_MSG(id >= 0 && dtype_code(g->nodes[id].dtype) == want && shape_is(g, id, shp(2, 2, 2)),
                      "matmul %s %s", cj_dtype_name((cj_dtype)a), cj_dtype_name((cj_dtype)b));
            cj_graph_free(g);
        }
    }
}

/* ---- shapes and structure of what the builders insert ---------------- */

static void test_binary_structure(void)
{
    cj_graph *g = cj_graph_new();
    cj_error err = {0};
    int loc = cj_graph_loc(g, "model.py:12");
    CHECK(loc == 0 && cj_graph_loc(g, "model.py:13") == 1 && cj_graph_loc(g, "model.py:12") == 0);
    CHECK(strcmp(cj_graph_loc_str(g, 1), "model.py:13") == 0 && strcmp(cj_graph_loc_str(g, 7), "?") == 0);
    CHECK(cj_graph_loc(g, NULL) == -1 && strcmp(cj_graph_loc_str(g, -1), "?") == 0);

    cj_shape s23 = shp(2, 2, 3), s3 = shp(1, 3), s4 = shp(1, 4), s0 = shp(0);
    int x = cj_build_param(g, &s23, CJ_FLOAT32, false, loc, &err);
    int y = cj_build_param(g, &s3, CJ_FLOAT32, false, loc, &err);
    CHECK(g->nparams == 2 && g->nodes[y].attrs.index == 1);

    /* same dtype, y broadcast: one BROADCAST node, no cast */
    int n0 = g->nnodes;
    int z = cj_build_binary(g, CJ_OP_ADD, x, y, loc, &err);
    CHECK(z == n0 + 1 && g->nodes[n0].op == CJ_OP_BROADCAST && g->nodes[z].inputs[0] == x &&
          g->nodes[z].inputs[1] == n0 && shape_is(g, z, s23) && g->nodes[z].loc == loc);

    /* same shape and dtype: the primitive alone */
    n0 = g->nnodes;
    z = cj_build_binary(g, CJ_OP_MUL, x, x, loc, &err);
    CHECK(z == n0 && g->nodes[z].inputs[0] == x && g->nodes[z].inputs[1] == x);

    /* float32 * 2.0 (weak): float32, the constant re-created at float32 and
     * the full shape instead of a cast and a broadcast */
    int c = cj_build_constant(g, 2.0, 0, CJ_FLOAT64, true, &s0, loc, &err);
    n0 = g->nnodes;
    z = cj_build_binary(g, CJ_OP_MUL, x, c, loc, &err);
    CHECK(z == n0 + 1 && g->nodes[z].dtype == CJ_FLOAT32 && !g->nodes[z].weak);
    CHECK(g->nodes[n0].op == CJ_OP_CONSTANT && g->nodes[n0].dtype == CJ_FLOAT32 &&
          g->nodes[n0].attrs.fvalue == 2.0 && shape_is(g, n0, s23));

    /* int32 param (3,) + float32 (2, 3): cast to float64 then broadcast */
    int iy = cj_build_param(g, &s3, CJ_INT32, false, loc, &err);
    n0 = g->nnodes;
    z = cj_build_binary(g, CJ_OP_ADD, iy, x, loc, &err);
    CHECK(z >= 0 && g->nodes[z].dtype == CJ_FLOAT64 && shape_is(g, z, s23));
    CHECK(g->nodes[n0].op == CJ_OP_CAST && g->nodes[n0].dtype == CJ_FLOAT64 && shape_is(g, n0, s3));
    CHECK(g->nodes[n0 + 1].op == CJ_OP_BROADCAST && g->nodes[n0 + 2].op == CJ_OP_CAST);

    /* a Python int that int32 cannot hold is refused, as NumPy 2 does */
    int cbig = cj_build_constant(g, 0, 1LL << 40, CJ_INT64, true, &s0, loc, &err);
    expect_error(cj_build_binary(g, CJ_OP_MUL, iy, cbig, loc, &err), &err, CJ_ERR_OVERFLOW, "mul:",
                 "Python integer 1099511627776 out of bounds for int32", (char *)NULL);
    /* ... but compared, it gives every element's answer (NumPy 2): int32 < 2**40 */
    z = cj_build_binary(g, CJ_OP_LT, iy, cbig, loc, &err);
    CHECK(z >= 0 && g->nodes[z].op == CJ_OP_CONSTANT && g->nodes[z].dtype == CJ_BOOL && g->nodes[z].attrs.ivalue == 1 &&
          shape_is(g, z, s3));
    z = cj_build_binary(g, CJ_OP_LE, cbig, iy, loc, &err);
    CHECK(z >= 0 && g->nodes[z].op == CJ_OP_CONSTANT && g->nodes[z].attrs.ivalue == 0);
    /* 2**63, a weak uint64, fits uint64 only */
    int c63 = cj_build_constant(g, 0, INT64_MIN, CJ_UINT64, true, &s0, loc, &err);
    CHECK(c63 >= 0 && g->nodes[c63].attrs.fvalue == 9223372036854775808.0);
    int u64 = cj_build_param(g, &s3, CJ_UINT64, false, loc, &err);
    z = cj_build_binary(g, CJ_OP_ADD, u64, c63, loc, &err);
    CHECK(z >= 0 && g->nodes[z].dtype == CJ_UINT64);
    int i64 = cj_build_param(g, &s3, CJ_INT64, false, loc, &err);
    expect_error(cj_build_binary(g, CJ_OP_ADD, i64, c63, loc, &err), &err, CJ_ERR_OVERFLOW, "add:",
                 "Python integer 9223372036854775808 out of bounds for int64", (char *)NULL);
    z = cj_build_binary(g, CJ_OP_GE, i64, c63, loc, &err);
    CHECK(z >= 0 && g->nodes[z].op == CJ_OP_CONSTANT && g->nodes[z].attrs.ivalue == 0);
    /* int / int is float64; int32 array + weak int stays int32 */
    z = cj_build_binary(g, CJ_OP_DIV, iy, iy, loc, &err);
    CHECK(z >= 0 && g->nodes[z].dtype == CJ_FLOAT64);
    int ci = cj_build_constant(g, 0, 7, CJ_INT64, true, &s0, loc, &err);
    z = cj_build_binary(g, CJ_OP_ADD, ci, iy, loc, &err);
    CHECK(z >= 0 && g->nodes[z].dtype == CJ_INT32 && g->nodes[g->nodes[z].inputs[0]].attrs.ivalue == 7);

    /* broadcasting: (2, 1, 3) with (4, 1) -> (2, 4, 3); zero-size dims */
    cj_shape a213 = shp(3, 2, 1, 3), a41 = shp(2, 4, 1), z03 = shp(2, 0, 3), o13 = shp(2, 1, 3);
    int p = cj_build_param(g, &a213, CJ_FLOAT64, false, -1, &err);
    int q = cj_build_param(g, &a41, CJ_FLOAT64, false, -1, &err);
    z = cj_build_binary(g, CJ_OP_SUB, p, q, -1, &err);
    CHECK(shape_is(g, z, shp(3, 2, 4, 3)));
    p = cj_build_param(g, &z03, CJ_FLOAT64, false, -1, &err);
    q = cj_build_param(g, &o13, CJ_FLOAT64, false, -1, &err);
    z = cj_build_binary(g, CJ_OP_LT, p, q, -1, &err);
    CHECK(shape_is(g, z, z03) && g->nodes[z].dtype == CJ_BOOL);
    CHECK(err.status == CJ_OK);

    /* the broadcast error: op, both shapes and dtypes, the location */
    int w = cj_build_param(g, &s4, CJ_FLOAT32, false, loc, &err);
    z = cj_build_binary(g, CJ_OP_ADD, x, w, loc, &err);
    CHECK(strcmp(err.message, "add: operands could not be broadcast together with shapes (2, 3) float32 and "
                              "(4,) float32 (at model.py:12)") == 0);
    expect_error(z, &err, CJ_ERR_VALUE, (char *)NULL);
    z = cj_build_binary(g, CJ_OP_GE, w, x, -1, &err);
    CHECK(strcmp(err.message, "ge: operands could not be broadcast together with shapes (4,) float32 and "
                              "(2, 3) float32") == 0);
    expect_error(z, &err, CJ_ERR_VALUE, (char *)NULL);

    /* sticky: a second error keeps the first message */
    z = cj_build_binary(g, CJ_OP_ADD, x, w, loc, &err);
    int z2 = cj_build_binary(g, CJ_OP_MUL, w, x, loc, &err);
    CHECK(z == -1 && z2 == -1 && strncmp(err.message, "add:", 4) == 0);
    err_reset(&err);

    /* select: broadcast of three, cond cast to bool, branches promoted */
    int cond = cj_build_param(g, &s3, CJ_INT64, false, -1, &err);
    z = cj_build_select(g, cond, x, c, -1, &err);
    CHECK(z >= 0 && g->nodes[z].dtype == CJ_FLOAT32 && shape_is(g, z, s23));
    CHECK(g->nodes[g->nodes[z].inputs[0]].dtype == CJ_BOOL && shape_is(g, g->nodes[z].inputs[0], s23));
    z = cj_build_select(g, cond, x, w, loc, &err);
    expect_error(z, &err, CJ_ERR_VALUE, "select:", "(3,) int64", "(2, 3) float32", "(4,) float32",
                 "(at model.py:12)", (char *)NULL);

    /* invalid ids and ops are internal errors, never crashes */
    expect_error(cj_build_binary(g, CJ_OP_ADD, x, 9999, -1, &err), &err, CJ_ERR_INTERNAL, "add", (char *)NULL);
    expect_error(cj_build_binary(g, CJ_OP_NEG, x, x, -1, &err), &err, CJ_ERR_INTERNAL, "neg", (char *)NULL);
    expect_error(cj_build_binary(g, (cj_op)1000, x, x, -1, &err), &err, CJ_ERR_INTERNAL, (char *)NULL);
    expect_error(cj_build_unary(g, CJ_OP_ADD, x, -1, &err), &err, CJ_ERR_INTERNAL, "add", (char *)NULL);
    expect_error(cj_build_unary(g, CJ_OP_EXP, -1, -1, &err), &err, CJ_ERR_INTERNAL, "exp", (char *)NULL);
    expect_error(cj_build_reduce(g, CJ_OP_ADD, x, 1, -1, &err), &err, CJ_ERR_INTERNAL, (char *)NULL);
    cj_graph_free(g);
}

static void test_matmul(void)
{
    cj_graph *g = cj_graph_new();
    cj_error err = {0};
    int loc = cj_graph_loc(g, "net.py:7");
    struct {
        cj_shape a, b, want;
    } cases[] = {
        {shp(1, 3), shp(1, 3), shp(0)},
        {shp(2, 2, 3), shp(1, 3), shp(1, 2)},
        {shp(1, 3), shp(2, 3, 4), shp(1, 4)},
        {shp(2, 2, 3), shp(2, 3, 4), shp(2, 2, 4)},
        {shp(3, 5, 2, 3), shp(2, 3, 4), shp(3, 5, 2, 4)},
        {shp(4, 2, 1, 2, 3), shp(3, 7, 3, 4), shp(4, 2, 7, 2, 4)},
        {shp(3, 5, 2, 3), shp(1, 3), shp(2, 5, 2)},
        {shp(1, 3), shp(3, 5, 3, 4), shp(2, 5, 4)},
        {shp(2, 0, 3), shp(2, 3, 0), shp(2, 0, 0)},
        {shp(1, 0), shp(1, 0), shp(0)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int x = cj_build_param(g, &cases[i].a, CJ_FLOAT32, false, loc, &err);
        int y = cj_build_param(g, &cases[i].b, CJ_FLOAT32, false, loc, &err);
        int z = cj_build_matmul(g, x, y, loc, &err);
        CHECK_MSG(shape_is(g, z, cases[i].want), "matmul case %zu (%s)", i, err.message);
        /* the MATMUL primitive itself sees equal batch dims and rank >= 2 */
        int mm = -1;
        for (int k = z; k >= 0 && mm < 0; k--)
            if (g->nodes[k].op == CJ_OP_MATMUL)
                mm = k;
        CHECK(mm >= 0 && g->nodes[mm].shape.rank >= 2);
    }
    /* errors */
    cj_shape s23 = shp(2, 2, 3), s45 = shp(2, 4, 5), s0 = shp(0), s3 = shp(1, 3), b1 = shp(3, 2, 2, 3),
             b2 = shp(3, 3, 3, 4);
    int x = cj_build_param(g, &s23, CJ_FLOAT32, false, loc, &err);
    int y = cj_build_param(g, &s45, CJ_FLOAT32, false, loc, &err);
    int sc = cj_build_param(g, &s0, CJ_FLOAT32, false, loc, &err);
    int v = cj_build_param(g, &s3, CJ_FLOAT32, false, loc, &err);
    expect_error(cj_build_matmul(g, x, y, loc, &err), &err, CJ_ERR_VALUE, "matmul:",
                 "mismatch in contraction dimension", "(2, 3) float32", "(4, 5) float32", "(at net.py:7)",
                 (char *)NULL);
    expect_error(cj_build_matmul(g, y, v, loc, &err), &err, CJ_ERR_VALUE, "matmul:", "contraction", "(4, 5)",
                 "(3,)", (char *)NULL);
    expect_error(cj_build_matmul(g, sc, x, loc, &err), &err, CJ_ERR_VALUE, "matmul:", "not have enough dimensions",
                 "() float32", (char *)NULL);
    expect_error(cj_build_matmul(g, x, sc, loc, &err), &err, CJ_ERR_VALUE, "operand 1", (char *)NULL);
    int p = cj_build_param(g, &b1, CJ_FLOAT32, false, loc, &err);
    int q = cj_build_param(g, &b2, CJ_FLOAT32, false, loc, &err);
    expect_error(cj_build_matmul(g, p, q, loc, &err), &err, CJ_ERR_VALUE, "matmul:", "batch", "(2, 2, 3)",
                 "(3, 3, 4)", (char *)NULL);
    /* bool @ bool stays bool */
    int bb = cj_build_param(g, &s3, CJ_BOOL, false, -1, &err);
    int z = cj_build_matmul(g, bb, bb, -1, &err);
    CHECK(z >= 0 && g->nodes[z].dtype == CJ_BOOL && g->nodes[z].shape.rank == 0);
    cj_graph_free(g);
}

static void test_movement(void)
{
    cj_graph *g = cj_graph_new();
    cj_error err = {0};
    int loc = cj_graph_loc(g, "m.py:3");
    cj_shape s23 = shp(2, 2, 3), s6 = shp(1, 6), s4 = shp(1, 4), s32 = shp(2, 3, 2), s0 = shp(0);
    int x = cj_build_param(g, &s23, CJ_FLOAT32, false, loc, &err);

    /* broadcast */
    cj_shape s423 = shp(3, 4, 2, 3), s43 = shp(2, 4, 3), s1 = shp(2, 2, 1);
    int b = cj_build_broadcast(g, x, &s423, loc, &err);
    CHECK(shape_is(g, b, s423) && g->nodes[b].op == CJ_OP_BROADCAST);
    CHECK(cj_build_broadcast(g, x, &s23, loc, &err) == x);
    int x1 = cj_build_param(g, &s1, CJ_FLOAT32, false, loc, &err);
    CHECK(shape_is(g, cj_build_broadcast(g, x1, &s423, loc, &err), s423));
    expect_error(cj_build_broadcast(g, x, &s43, loc, &err), &err, CJ_ERR_VALUE, "broadcast:", "(2, 3) float32",
                 "(4, 3)", "(at m.py:3)", (char *)NULL);
    expect_error(cj_build_broadcast(g, x, &s6, loc, &err), &err, CJ_ERR_VALUE, "broadcast:", (char *)NULL);

    /* reshape */
    int r = cj_build_reshape(g, x, &s6, loc, &err);
    CHECK(shape_is(g, r, s6) && g->nodes[r].op == CJ_OP_RESHAPE && cj_build_reshape(g, x, &s23, loc, &err) == x);
    expect_error(cj_build_reshape(g, x, &s4, loc, &err), &err, CJ_ERR_VALUE, "reshape:", "size 6", "(4,)",
                 "(2, 3) float32", (char *)NULL);

    /* transpose */
    int perm[2] = {1, 0}, same[2] = {0, 1}, dup[2] = {1, 1}, bad[2] = {0, 2};
    int t = cj_build_transpose(g, x, perm, loc, &err);
    CHECK(shape_is(g, t, s32) && g->nodes[t].attrs.perm[0] == 1 && cj_build_transpose(g, x, same, loc, &err) == x);
    expect_error(cj_build_transpose(g, x, dup, loc, &err), &err, CJ_ERR_VALUE, "transpose:", "repeated", (char *)NULL);
    expect_error(cj_build_transpose(g, x, bad, loc, &err), &err, CJ_ERR_VALUE, "transpose:", "out of bounds",
                 (char *)NULL);

    /* slice, with the values Python's slice.indices gives */
    cj_shape s10 = shp(2, 10, 5);
    int y = cj_build_param(g, &s10, CJ_INT32, false, loc, &err);
    {
        /* y[1:8:3, ::-1] -> (3, 5); slice(None, None, -1).indices(5) = (4, -1, -1) */
        int64_t st[2] = {1, 4}, sp[2] = {8, -1}, step[2] = {3, -1};
        int s = cj_build_slice(g, y, st, sp, step, loc, &err);
        CHECK(shape_is(g, s, shp(2, 3, 5)) && g->nodes[s].attrs.start[1] == 4 && g->nodes[s].attrs.step[1] == -1);
    }
    {
        /* y[9:2:-4, 5:5] -> (2, 0) */
        int64_t st[2] = {9, 5}, sp[2] = {2, 5}, step[2] = {-4, 1};
        CHECK(shape_is(g, cj_build_slice(g, y, st, sp, step, loc, &err), shp(2, 2, 0)));
    }
    {
        /* y[::INT64_MIN] takes one element per dim */
        int64_t st[2] = {9, 4}, sp[2] = {-1, -1}, step[2] = {INT64_MIN, INT64_MIN};
        CHECK(shape_is(g, cj_build_slice(g, y, st, sp, step, loc, &err), shp(2, 1, 1)));
    }
    {
        int64_t st[2] = {0, 0}, sp[2] = {10, 5}, step[2] = {1, 1};
        CHECK(cj_build_slice(g, y, st, sp, step, loc, &err) == y);
        step[1] = 0;
        expect_error(cj_build_slice(g, y, st, sp, step, loc, &err), &err, CJ_ERR_VALUE, "slice:",
                     "step cannot be zero", "(10, 5) int32", (char *)NULL);
        step[1] = 1;
        sp[0] = 11;
        expect_error(cj_build_slice(g, y, st, sp, step, loc, &err), &err, CJ_ERR_VALUE, "slice:", "(10, 5)",
                     (char *)NULL);
    }
    CHECK(err.status == CJ_OK);

    /* concatenate: promotion, one node of every input, errors */
    cj_shape s13 = shp(2, 1, 3), s24 = shp(2, 2, 4), v3 = shp(1, 3);
    int c1 = cj_build_param(g, &s13, CJ_INT32, false, loc, &err);
    int c2 = cj_build_param(g, &s13, CJ_FLOAT32, false, loc, &err);
    int xs[3] = {x, c1, c2};
    int cc = cj_build_concatenate(g, xs, 3, 0, loc, &err);
    CHECK(shape_is(g, cc, shp(2, 4, 3)) && g->nodes[cc].dtype == CJ_FLOAT64 && g->nodes[cc].ninputs == 3);
    CHECK(cj_build_concatenate(g, xs, 1, 0, loc, &err) == x);
    int d1 = cj_build_param(g, &s24, CJ_FLOAT32, false, loc, &err);
    int d2 = cj_build_param(g, &v3, CJ_FLOAT32, false, loc, &err);
    int sc = cj_build_param(g, &s0, CJ_FLOAT32, false, loc, &err);
    int e1[2] = {x, d1}, e2[2] = {x, d2}, e3[2] = {sc, sc};
    expect_error(cj_build_concatenate(g, e1, 2, 0, loc, &err), &err, CJ_ERR_VALUE, "concatenate:", "dimension 1",
                 "(2, 3) float32", "(2, 4) float32", (char *)NULL);
    CHECK(shape_is(g, cj_build_concatenate(g, e1, 2, 1, loc, &err), shp(2, 2, 7)));
    expect_error(cj_build_concatenate(g, e2, 2, 0, loc, &err), &err, CJ_ERR_VALUE, "concatenate:",
                 "number of dimensions", "(3,) float32", (char *)NULL);
    expect_error(cj_build_concatenate(g, e3, 2, 0, loc, &err), &err, CJ_ERR_VALUE, "zero-dimensional",
                 (char *)NULL);
    expect_error(cj_build_concatenate(g, e1, 2, 2, loc, &err), &err, CJ_ERR_VALUE, "out of bounds", (char *)NULL);
    expect_error(cj_build_concatenate(g, e1, 0, 0, loc, &err), &err, CJ_ERR_VALUE, "at least one", (char *)NULL);

    /* cast: same dtype is x itself; constants fold; weak -> strong */
    CHECK(cj_build_cast(g, x, CJ_FLOAT32, loc, &err) == x);
    int k = cj_build_constant(g, -2.75, 0, CJ_FLOAT64, true, &s0, loc, &err);
    int ki = cj_build_cast(g, k, CJ_INT32, loc, &err);
    CHECK(ki >= 0 && g->nodes[ki].op == CJ_OP_CONSTANT && g->nodes[ki].attrs.ivalue == -2 &&
          g->nodes[ki].attrs.fvalue == -2.0 && !g->nodes[ki].weak);
    int kn = cj_build_constant(g, 1e300, 0, CJ_FLOAT64, false, &s0, loc, &err);
    int kc = cj_build_cast(g, kn, CJ_INT32, loc, &err); /* not folded: C leaves it undefined */
    CHECK(kc >= 0 && g->nodes[kc].op == CJ_OP_CAST);
    int kw = cj_build_cast(g, k, CJ_FLOAT64, loc, &err);
    CHECK(kw >= 0 && kw != k && !g->nodes[kw].weak && g->nodes[kw].attrs.fvalue == -2.75);
    expect_error(cj_build_cast(g, x, (cj_dtype)CJ_NUM_DTYPES, loc, &err), &err, CJ_ERR_TYPE, "cast:", (char *)NULL);

    /* constants keep fvalue and ivalue consistent */
    int k32 = cj_build_constant(g, 0.1, 0, CJ_FLOAT32, false, &s0, loc, &err);
    CHECK(g->nodes[k32].attrs.fvalue == (double)0.1f);
    int kb = cj_build_constant(g, 0, 5, CJ_BOOL, false, &s0, loc, &err);
    CHECK(g->nodes[kb].attrs.ivalue == 1 && g->nodes[kb].attrs.fvalue == 1.0);
    int kwrap = cj_build_constant(g, 0, 1LL << 32 | 5, CJ_INT32, false, &s0, loc, &err);
    CHECK(g->nodes[kwrap].attrs.ivalue == 5 && g->nodes[kwrap].attrs.fvalue == 5.0);

    /* iota and name */
    int io = cj_build_iota(g, &s23, 1, CJ_INT64, loc, &err);
    CHECK(shape_is(g, io, s23) && g->nodes[io].attrs.axis == 1);
    expect_error(cj_build_iota(g, &s23, 2, CJ_INT64, loc, &err), &err, CJ_ERR_VALUE, "iota:", "axis 2", (char *)NULL);
    expect_error(cj_build_iota(g, &s23, 0, CJ_BOOL, loc, &err), &err, CJ_ERR_TYPE, "iota:", (char *)NULL);
    char nm[8] = "hidden";
    int nn = cj_build_name(g, x, nm, loc, &err);
    nm[0] = 'X'; /* the graph keeps its own copy */
    CHECK(nn >= 0 && strcmp(g->nodes[nn].attrs.name, "hidden") == 0 && shape_is(g, nn, s23));
    expect_error(cj_build_name(g, x, NULL, loc, &err), &err, CJ_ERR_INTERNAL, "name", (char *)NULL);
    cj_graph_free(g);
}

static void test_reduce_and_unary(void)
{
    cj_graph *g = cj_graph_new();
    cj_error err = {0};
    int loc = cj_graph_loc(g, "r.py:1");
    cj_shape s = shp(3, 2, 3, 4), e = shp(2, 0, 3), e2 = shp(2, 3, 0);
    int x = cj_build_param(g, &s, CJ_INT32, false, loc, &err);
    int r = cj_build_reduce(g, CJ_OP_REDUCE_SUM, x, (1u << 0) | (1u << 2), loc, &err);
    CHECK(shape_is(g, r, shp(1, 3)) && g->nodes[r].dtype == CJ_INT64 && g->nodes[r].attrs.axes == 5u);
    CHECK(g->nodes[g->nodes[r].inputs[0]].op == CJ_OP_CAST);
    r = cj_build_reduce(g, CJ_OP_REDUCE_MAX, x, 7u, loc, &err);
    CHECK(shape_is(g, r, shp(0)) && g->nodes[r].dtype == CJ_INT32);
    CHECK(cj_build_reduce(g, CJ_OP_REDUCE_MIN, x, 0, loc, &err) == x);
    expect_error(cj_build_reduce(g, CJ_OP_REDUCE_SUM, x, 1u << 3, loc, &err), &err, CJ_ERR_VALUE, "reduce_sum:",
                 "axis 3", "(2, 3, 4) int32", "(at r.py:1)", (char *)NULL);
    int z = cj_build_param(g, &e, CJ_FLOAT32, false, loc, &err);
    expect_error(cj_build_reduce(g, CJ_OP_REDUCE_MAX, z, 1u, loc, &err), &err, CJ_ERR_VALUE, "reduce_max:",
                 "zero-size array to reduction operation maximum which has no identity", "(0, 3) float32",
                 (char *)NULL);
    CHECK(shape_is(g, cj_build_reduce(g, CJ_OP_REDUCE_MIN, z, 2u, loc, &err), shp(1, 0)));
    CHECK(shape_is(g, cj_build_reduce(g, CJ_OP_REDUCE_SUM, z, 1u, loc, &err), shp(1, 3)));
    int z2 = cj_build_param(g, &e2, CJ_FLOAT32, false, loc, &err);
    expect_error(cj_build_reduce(g, CJ_OP_REDUCE_MIN, z2, 2u, loc, &err), &err, CJ_ERR_VALUE,
                 "operation minimum", (char *)NULL);

    /* unary weak propagation, logical_not on floats */
    cj_shape s0 = shp(0);
    int c = cj_build_constant(g, 3.0, 3, CJ_INT64, true, &s0, loc, &err);
    int ng = cj_build_unary(g, CJ_OP_NEG, c, loc, &err);
    CHECK(ng >= 0 && g->nodes[ng].weak && g->nodes[ng].dtype == CJ_INT64);
    int f = cj_build_param(g, &s, CJ_FLOAT32, false, loc, &err);
    int ln = cj_build_unary(g, CJ_OP_LOGICAL_NOT, f, loc, &err);
    CHECK(ln >= 0 && g->nodes[ln].dtype == CJ_BOOL && g->nodes[g->nodes[ln].inputs[0]].dtype == CJ_BOOL);
    int b = cj_build_param(g, &s, CJ_BOOL, false, loc, &err);
    expect_error(cj_build_unary(g, CJ_OP_NEG, b, loc, &err), &err, CJ_ERR_TYPE, "neg:", "(2, 3, 4) bool",
                 "(at r.py:1)", (char *)NULL);
    expect_error(cj_build_binary(g, CJ_OP_SUB, b, b, loc, &err), &err, CJ_ERR_TYPE, "sub:", "(2, 3, 4) bool",
                 (char *)NULL);
    cj_graph_free(g);
}

/* ---- shape validity everywhere ----------------------------------------- */

static void test_bad_shapes(void)
{
    cj_graph *g = cj_graph_new();
    cj_error err = {0};
    int loc = cj_graph_loc(g, "s.py:9");
    cj_shape r9 = shp(0);
    for (int d = 0; d < CJ_MAX_RANK; d++)
        r9.dims[d] = 1;
    r9.rank = CJ_MAX_RANK + 1; /* dims past CJ_MAX_RANK cannot be written; the rank alone is wrong */
    char rank_text[32];
    snprintf(rank_text, sizeof rank_text, "rank %d", CJ_MAX_RANK + 1);
    cj_shape negd = shp(2, 3, -2), huge = shp(3, 1LL << 40, 1LL << 40, 1LL << 40), s23 = shp(2, 2, 3);
    expect_error(cj_build_param(g, &r9, CJ_FLOAT32, false, loc, &err), &err, CJ_ERR_VALUE, "param:", rank_text,
                 "(at s.py:9)", (char *)NULL);
    expect_error(cj_build_param(g, &negd, CJ_FLOAT32, false, loc, &err), &err, CJ_ERR_VALUE, "param:",
                 "negative", "(3, -2)", (char *)NULL);
    expect_error(cj_build_array(g, &huge, CJ_FLOAT32, loc, &err), &err, CJ_ERR_VALUE, "array:", "too big",
                 (char *)NULL);
    expect_error(cj_build_constant(g, 1, 1, CJ_FLOAT32, false, &negd, loc, &err), &err, CJ_ERR_VALUE,
                 "constant:", (char *)NULL);
    expect_error(cj_build_param(g, NULL, CJ_FLOAT32, false, loc, &err), &err, CJ_ERR_INTERNAL, (char *)NULL);
    expect_error(cj_build_param(g, &s23, (cj_dtype)-1, false, loc, &err), &err, CJ_ERR_TYPE, (char *)NULL);
    int x = cj_build_param(g, &s23, CJ_FLOAT32, false, loc, &err);
    expect_error(cj_build_reshape(g, x, &r9, loc, &err), &err, CJ_ERR_VALUE, "reshape:", rank_text, (char *)NULL);
    expect_error(cj_build_broadcast(g, x, &huge, loc, &err), &err, CJ_ERR_VALUE, "broadcast:", (char *)NULL);
    expect_error(cj_build_broadcast(g, x, &negd, loc, &err), &err, CJ_ERR_VALUE, "negative", (char *)NULL);
    /* results whose size overflows: broadcasting, matmul, concatenate */
    cj_shape tall = shp(2, 1LL << 40, 1), wide = shp(2, 1, 1LL << 40), ok62 = shp(1, 1LL << 59);
    int ta = cj_build_param(g, &tall, CJ_FLOAT32, false, loc, &err);
    int tw = cj_build_param(g, &wide, CJ_FLOAT32, false, loc, &err);
    CHECK(ta >= 0 && tw >= 0);
    expect_error(cj_build_binary(g, CJ_OP_ADD, ta, tw, loc, &err), &err, CJ_ERR_VALUE, "add:", "too big",
                 (char *)NULL);
    expect_error(cj_build_select(g, ta, ta, tw, loc, &err), &err, CJ_ERR_VALUE, "select:", "too big", (char *)NULL);
    expect_error(cj_build_matmul(g, ta, tw, loc, &err), &err, CJ_ERR_VALUE, "matmul:", "too big", (char *)NULL);
    int big1 = cj_build_param(g, &ok62, CJ_FLOAT64, false, loc, &err);
    int bigs[2] = {big1, big1};
    CHECK(big1 >= 0);
    expect_error(cj_build_concatenate(g, bigs, 2, 0, loc, &err), &err, CJ_ERR_VALUE, "concatenate:", "too big",
                 (char *)NULL);
    /* rank 7 @ rank 8 would give a rank-9 result? no: batch dims broadcast to at most 6 */
    cj_shape r8 = shp(8, 1, 1, 1, 1, 1, 1, 2, 2);
    int y = cj_build_param(g, &r8, CJ_FLOAT32, false, loc, &err);
    CHECK(shape_is(g, cj_build_matmul(g, y, y, loc, &err), r8));
    /* a loc id that was never interned is refused, not trusted */
    expect_error(cj_build_param(g, &s23, CJ_FLOAT32, false, 42, &err), &err, CJ_ERR_INTERNAL, (char *)NULL);
    /* a location longer than the message keeps its line number */
    char longloc[900];
    memset(longloc, 'p', sizeof longloc);
    strcpy(longloc + 880, ".py:77");
    int ll = cj_graph_loc(g, longloc);
    cj_shape s4 = shp(1, 4);
    int w = cj_build_param(g, &s4, CJ_FLOAT32, false, ll, &err);
    CHECK(cj_build_binary(g, CJ_OP_ADD, x, w, ll, &err) == -1);
    size_t len = strlen(err.message);
    CHECK(len < sizeof err.message && len > 7 && strcmp(err.message + len - 7, ".py:77)") == 0);
    CHECK(strstr(err.message, ".py:77)") != NULL && strncmp(err.message, "add: ", 5) == 0);
    cj_graph_free(g);
}

/* ---- cj_graph_append validation --------------------------------------- */

static void test_append(void)
{
    cj_graph *g = cj_graph_new();
    cj_error err = {0};
    cj_shape s23 = shp(2, 2, 3), s32 = shp(2, 3, 2), s3 = shp(1, 3);
    int x = cj_build_param(g, &s23, CJ_FLOAT32, false, -1, &err);
    int y = cj_build_param(g, &s3, CJ_FLOAT32, false, -1, &err);
    cj_node n;
    memset(&n, 0, sizeof n);
    n.loc = -1;
    int in[2] = {x, y};

    n.op = CJ_OP_ADD, n.dtype = CJ_FLOAT32, n.shape = s23, n.ninputs = 2, n.inputs = in;
    expect_error(cj_graph_append(g, &n, &err), &err, CJ_ERR_INTERNAL, "add", "shape", (char *)NULL);
    in[1] = x;
    int ok = cj_graph_append(g, &n, &err);
    CHECK(ok >= 0 && g->nodes[ok].inputs != in && g->nodes[ok].inputs[1] == x);
    n.ninputs = 1;
    expect_error(cj_graph_append(g, &n, &err), &err, CJ_ERR_INTERNAL, "add", (char *)NULL);
    n.ninputs = 2, in[1] = 77;
    expect_error(cj_graph_append(g, &n, &err), &err, CJ_ERR_INTERNAL, "does not exist", (char *)NULL);
    in[1] = x, n.dtype = CJ_FLOAT64;
    expect_error(cj_graph_append(g, &n, &err), &err, CJ_ERR_INTERNAL, "dtype", (char *)NULL);
    n.op = CJ_OP_EQ, n.dtype = CJ_BOOL;
    CHECK(cj_graph_append(g, &n, &err) >= 0);

    memset(&n, 0, sizeof n);
    n.loc = -1, n.op = CJ_OP_TRANSPOSE, n.dtype = CJ_FLOAT32, n.shape = s32, n.ninputs = 1, n.inputs = in;
    n.attrs.perm[0] = 1, n.attrs.perm[1] = 1;
    expect_error(cj_graph_append(g, &n, &err), &err, CJ_ERR_INTERNAL, "permutation", (char *)NULL);
    n.attrs.perm[1] = 0;
    CHECK(cj_graph_append(g, &n, &err) >= 0);

    n.op = CJ_OP_SLICE, n.shape = shp(2, 2, 2), n.attrs.start[0] = 0, n.attrs.step[0] = 1;
    n.attrs.start[1] = 1, n.attrs.step[1] = 2; /* columns 1, 3: 3 is out of range */
    expect_error(cj_graph_append(g, &n, &err), &err, CJ_ERR_INTERNAL, "outside", (char *)NULL);
    n.attrs.start[1] = 2, n.attrs.step[1] = -2; /* columns 2, 0 */
    CHECK(cj_graph_append(g, &n, &err) >= 0);

    n.op = CJ_OP_MATMUL, n.ninputs = 2, n.shape = shp(2, 2, 2);
    int mi[2] = {x, x};
    n.inputs = mi;
    expect_error(cj_graph_append(g, &n, &err), &err, CJ_ERR_INTERNAL, "matmul", (char *)NULL);

    memset(&n, 0, sizeof n);
    n.loc = -1, n.op = CJ_OP_PARAM, n.dtype = CJ_INT64, n.shape = shp(0), n.attrs.index = 5;
    CHECK(cj_graph_append(g, &n, &err) >= 0 && g->nparams == 6);
    n.op = (cj_op)CJ_NUM_OPS;
    expect_error(cj_graph_append(g, &n, &err), &err, CJ_ERR_INTERNAL, "invalid op", (char *)NULL);
    CHECK(cj_graph_append(g, NULL, &err) == -1);
    err_reset(&err);

    int outs[2] = {x, 999};
    CHECK(cj_graph_set_outputs(g, outs, 2, &err) == CJ_ERR_INTERNAL);
    err_reset(&err);
    outs[1] = y;
    CHECK(cj_graph_set_outputs(g, outs, 2, &err) == CJ_OK && g->noutputs == 2 && g->outputs[1] == y);
    CHECK(cj_graph_set_outputs(g, NULL, 0, &err) == CJ_OK && g->noutputs == 0);
    cj_graph_free(g);
    cj_graph_free(NULL);
}

/* ---- text --------------------------------------------------------------- */

static void test_text(void)
{
    cj_graph *g = cj_graph_new();
    cj_error err = {0};
    int loc = cj_graph_loc(g, "model.py:12");
    int loc2 = cj_graph_loc(g, "model.py:13");
    cj_shape s45 = shp(2, 4, 5), s5 = shp(1, 5), s0 = shp(0);
    int x = cj_build_param(g, &s45, CJ_FLOAT32, false, loc, &err);
    int y = cj_build_param(g, &s5, CJ_FLOAT32, false, loc, &err);
    int c = cj_build_constant(g, 2.5, 0, CJ_FLOAT64, true, &s0, -1, &err);
    int a = cj_build_binary(g, CJ_OP_ADD, x, y, loc, &err);
    int m = cj_build_binary(g, CJ_OP_MUL, a, c, loc2, &err);
    int r = cj_build_reduce(g, CJ_OP_REDUCE_SUM, m, 1u << 1, loc2, &err);
    int perm[2] = {1, 0};
    int t = cj_build_transpose(g, x, perm, loc2, &err);
    int64_t st[2] = {0, 4}, sp[2] = {4, -1}, step[2] = {2, -1};
    int sl = cj_build_slice(g, x, st, sp, step, -1, &err);
    int nm = cj_build_name(g, r, "act\"1", loc2, &err);
    int ci = cj_build_constant(g, 0, -3, CJ_INT32, false, &s0, -1, &err);
    int cb = cj_build_constant(g, 0, 1, CJ_BOOL, true, &s0, -1, &err);
    int cf = cj_build_constant(g, 1e20, 0, CJ_FLOAT32, false, &s0, -1, &err);
    int cn = cj_build_constant(g, -INFINITY, 0, CJ_FLOAT64, false, &s0, -1, &err);
    int io = cj_build_iota(g, &s45, 0, CJ_INT32, -1, &err);
    int xs[2] = {t, t};
    int cc = cj_build_concatenate(g, xs, 2, 1, -1, &err);
    int mm = cj_build_matmul(g, x, t, -1, &err);
    (void)ci, (void)cb, (void)cf, (void)cn, (void)io, (void)sl;
    int outs[3] = {nm, cc, mm};
    CHECK(err.status == CJ_OK && cj_graph_set_outputs(g, outs, 3, &err) == CJ_OK);
    char *text = cj_graph_to_text(g);
    CHECK(text != NULL);
    if (text == NULL)
        return;
    printf("graph text:\n%s", text);
    char want[128];
    const char *lines[] = {
        "%0 = param[0] : float32[4,5]  # model.py:12\n",
        "%2 = constant(2.5) : float64[] weak\n",
        "%3 = broadcast(%1) : float32[4,5]  # model.py:12\n",
        "%4 = add(%0, %3) : float32[4,5]  # model.py:12\n",
        "%5 = constant(2.5) : float32[4,5] weak  # model.py:13\n",
        "%6 = mul(%4, %5) : float32[4,5]  # model.py:13\n",
        "%7 = reduce_sum(%6, axes=[1]) : float32[4]  # model.py:13\n",
        "%8 = transpose(%0, perm=[1,0]) : float32[5,4]  # model.py:13\n",
        "%9 = slice(%0, start=[0,4], step=[2,-1]) : float32[2,5]\n",
        "%10 = name(%7, name=\"act\\\"1\") : float32[4]  # model.py:13\n",
        "%11 = constant(-3) : int32[]\n",
        "%12 = constant(True) : bool[] weak\n",
        "%13 = constant(1e+20) : float32[]\n",
        "%14 = constant(-inf) : float64[]\n",
        "%15 = iota(axis=0) : int32[4,5]\n",
        "%16 = concatenate(%8, %8, axis=1) : float32[5,8]\n",
        "%17 = matmul(%0, %8) : float32[4,4]\n",
        "return %10, %16, %17\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        snprintf(want, sizeof want, "%s", lines[i]);
        CHECK_MSG(strstr(text, want) != NULL, "text lacks: %s", want);
    }
    free(text);
    /* an empty graph */
    cj_graph *e = cj_graph_new();
    text = cj_graph_to_text(e);
    CHECK(text && strcmp(text, "return\n") == 0);
    free(text);
    cj_graph_free(e);
    cj_graph_free(g);
}

/* ---- every allocation failing in turn -------------------------------- */

/* Builds a graph that makes every container grow (nodes past 64, locations
 * past 16, an arena block past 64 KiB) and prints it.  Returns 0 when it
 * all worked, 1 when it stopped cleanly with a memory error, -1 when it
 * failed some other way. */
static int alloc_scenario(void)
{
    cj_graph *g = cj_graph_new();
    if (g == NULL)
        return 1;
    cj_error err = {0};
    int rc = -1;
    char name[20];
    int loc = -1;
    for (int i = 0; i < 20; i++) {
        snprintf(name, sizeof name, "f.py:%d", i);
        loc = cj_graph_loc(g, name);
        if (loc < 0) {
            rc = 1;
            goto out;
        }
    }
#define TRY(e)                                               \
    do {                                                     \
        if ((e) < 0) {                                       \
            rc = err.status == CJ_ERR_MEMORY ? 1 : -1;       \
            goto out;                                        \
        }                                                    \
    } while (0)
    cj_shape s = shp(2, 4, 3), s0 = shp(0), v = shp(1, 3);
    int x, y, c;
    TRY(x = cj_build_param(g, &s, CJ_FLOAT32, false, loc, &err));
    TRY(y = cj_build_param(g, &v, CJ_INT32, false, loc, &err));
    TRY(c = cj_build_constant(g, 0.5, 0, CJ_FLOAT64, true, &s0, loc, &err));
    for (int i = 0; i < 30; i++) {
        TRY(x = cj_build_binary(g, CJ_OP_ADD, x, y, loc, &err));
        TRY(x = cj_build_binary(g, CJ_OP_MUL, x, c, loc, &err));
    }
    static char big[100000];
    memset(big, 'n', sizeof big - 1);
    TRY(x = cj_build_name(g, x, big, loc, &err));
    TRY(x = cj_build_matmul(g, x, y, loc, &err));
    TRY(cj_graph_set_outputs(g, &x, 1, &err) == CJ_OK ? 0 : -1);
#undef TRY
    char *text = cj_graph_to_text(g);
    if (text == NULL) {
        rc = 1;
        goto out;
    }
    free(text);
    rc = 0;
out:
    cj_graph_free(g);
    return rc;
}

static void test_alloc_failures(void)
{
    int runs = 0, clean = 0;
    for (long k = 0; k < 100000; k++) {
        alloc_countdown = k;
        injected_failures = 0;
        int rc = alloc_scenario();
        alloc_countdown = -1;
        runs++;
        CHECK_MSG(rc >= 0, "allocation %ld failing gave a non-memory error", k);
        if (rc == 1)
            clean++;
        if (rc == 0 && injected_failures == 0)
            break;
    }
    printf("allocation failure injection: %d runs, %d stopped cleanly with a memory error\n", runs, clean);
    CHECK(runs > 10 && clean == runs - 1);
}

int main(void)
{
    test_basics();
    test_ops();
    test_promote();
    test_binary_table();
    test_unary_table();
    test_reduce_matmul_tables();
    test_binary_structure();
    test_matmul();
    test_movement();
    test_reduce_and_unary();
    test_bad_shapes();
    test_append();
    test_text();
    test_alloc_failures();
    printf("test_graph: %d checks, %d failures\n", checks, failures);
    return failures != 0;
}
