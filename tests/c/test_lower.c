/* test_lower.c - cj_lower (csrc/lower.c): simplify, fuse, group and memplan
 * on graphs built with the graph.h builders, checked fact by fact.
 *
 *   fuse:     kernel counts and roots of elementwise chains, shared values,
 *             multi-output kernels, reductions, matmul, concatenate, a
 *             reshape that must materialize, chains cut at CJ_KERNEL_MAX_COST;
 *   group:    which kernels share a group, a matmul leading its group, blocks;
 *   memplan:  liveness, in-place updates, donation, and on every plan the
 *             test makes: no two arena temporaries live at once share a
 *             byte (every pair), peak = arguments + outputs + arena;
 *   autodiff: an MLP's gradient lowers, and a checkpoint region keeps what
 *             its policy says;
 *   scale:    a chain of 100,000 nodes lowers (and is differentiated) on a
 *             thread with a 256 KiB stack;
 *   memory:   the k-th allocation of a lowering fails, for every k: CJ_OK
 *             (failure absorbed) or CJ_ERR_MEMORY, no crash, no leak.
 *
 * malloc, calloc, realloc, free and strdup are wrapped by the linker
 * (--wrap) so that the test counts live blocks and makes allocations fail.
 *
 *   make -C tests/c check     (or: make -C tests/c build/test_lower) */
#include "autodiff.h"
#include "fuse.h" /* CJ_KERNEL_MAX_COST */
#include "graph.h"
#include "kernel.h"
#include "pipeline.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- allocation counting and failure injection ------------------------- */

void *__real_malloc(size_t n), *__real_calloc(size_t n, size_t size), *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n), *__wrap_calloc(size_t n, size_t size), *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
char *__wrap_strdup(const char *s);

static long allocations;     /* attempts so far */
static long live_blocks;     /* blocks allocated and not yet freed */
static long fail_at = -1;    /* the attempt (1-based, counted from arming) that fails, or -1 */
static bool fail_after;      /* and every attempt after it too */
static long armed_at;        /* `allocations` when armed */
static long injected;        /* failures made */

static bool inject(void) {
    long nth = ++allocations - armed_at;
    if (fail_at < 0 || nth < fail_at || (nth > fail_at && !fail_after)) return false;
    injected++;
    return true;
}

static void arm(long k, bool and_after) {
    armed_at = allocations;
    fail_at = k;
    fail_after = and_after;
    injected = 0;
}

static void disarm(void) { fail_at = -1; }

void *__wrap_malloc(size_t n) {
    void *p = inject() ? NULL : __real_malloc(n);
    live_blocks += p != NULL;
    return p;
}
void *__wrap_calloc(size_t n, size_t size) {
    void *p = inject() ? NULL : __real_calloc(n, size);
    live_blocks += p != NULL;
    return p;
}
void *__wrap_realloc(void *p, size_t n) {
    if (inject()) return NULL; /* p stays allocated */
    void *q = __real_realloc(p, n);
    live_blocks += (p == NULL && q != NULL) - (p != NULL && n == 0 && q == NULL);
    return q;
}
void __wrap_free(void *p) {
    live_blocks -= p != NULL;
    __real_free(p);
}
/* strdup allocates inside libc, where --wrap does not reach: route it here */
char *__wrap_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = __wrap_malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* ---- checks --------------------------------------------------------------- */

static int checks, failures;

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
#define CHECK(cond) CHECK_MSG(cond, "%s", "")

/* ---- building graphs: one error for the whole graph, ids checked once ---- */

typedef struct {
    cj_graph *g;
    cj_error err;
} builder;

static builder start(void) {
    builder b = {.g = cj_graph_new()};
    if (!b.g) fprintf(stderr, "out of memory\n"), exit(2);
    return b;
}

/* A builder's result; a failure here is a mistake in the test. */
static int ok(builder *b, int id) {
    if (id < 0) {
        fprintf(stderr, "building the test graph failed: %s\n", b->err.message);
        exit(2);
    }
    return id;
}

static cj_shape s1(int64_t a) { return (cj_shape){1, {a}}; }
static cj_shape s2(int64_t a, int64_t b) { return (cj_shape){2, {a, b}}; }

static int param(builder *b, cj_shape s) { return ok(b, cj_build_param(b->g, &s, CJ_FLOAT32, false, -1, &b->err)); }
static int un(builder *b, cj_op op, int x) { return ok(b, cj_build_unary(b->g, op, x, -1, &b->err)); }
static int bin(builder *b, cj_op op, int x, int y) { return ok(b, cj_build_binary(b->g, op, x, y, -1, &b->err)); }
/* x op c, with c a weak Python float */
static int binc(builder *b, cj_op op, int x, double c) {
    cj_shape scalar = {0, {0}};
    int k = ok(b, cj_build_constant(b->g, c, (int64_t)c, CJ_FLOAT64, true, &scalar, -1, &b->err));
    return bin(b, op, x, k);
}
static int reduce(builder *b, cj_op op, int x, uint32_t axes) {
    return ok(b, cj_build_reduce(b->g, op, x, axes, -1, &b->err));
}
static int matmul(builder *b, int x, int y) { return ok(b, cj_build_matmul(b->g, x, y, -1, &b->err)); }
static int bcast(builder *b, int x, cj_shape to) { return ok(b, cj_build_broadcast(b->g, x, &to, -1, &b->err)); }
static int reshape(builder *b, int x, cj_shape to) { return ok(b, cj_build_reshape(b->g, x, &to, -1, &b->err)); }
static void outputs(builder *b, const int *ids, int n) {
    if (cj_graph_set_outputs(b->g, ids, n, &b->err) != CJ_OK) ok(b, -1);
}

/* A row vector (R,) as (R, C): its value repeated along each row. */
static int rows_as_matrix(builder *b, int v, int64_t R, int64_t C) {
    return bcast(b, reshape(b, v, s2(R, 1)), s2(R, C));
}

/* ---- looking at a plan ------------------------------------------------------ */

static int group_of(const cj_plan *p, int k) {
    for (int g = 0; g < p->ngroups; g++)
        if (k >= p->groups[g].first && k < p->groups[g].first + p->groups[g].count) return g;
    return -1;
}

static int count_buffers(const cj_plan *p, cj_buf_kind kind) {
    int n = 0;
    for (int b = 0; b < p->nbuffers; b++) n += p->buffers[b].kind == kind;
    return n;
}

/* How many expressions of kernel k apply op (-1: any op). */
static int count_ops(const cj_kernel *k, int op) {
    int n = 0;
    for (int e = 0; e < k->nexprs; e++) n += k->exprs[e].kind == CJ_EX_OP && (op < 0 || k->exprs[e].op == (cj_op)op);
    return n;
}

/* The work in kernel k's loop body, as the fuser counts it. */
static int body_cost(const cj_kernel *k) {
    int c = 0;
    for (int e = 0; e < k->nexprs; e++)
        if (k->exprs[e].kind == CJ_EX_OP) c += cj_op_cost(k->exprs[e].op);
    return c;
}

/* The first kernel whose root applies op (simplify renumbers nodes, so
 * kernels are found by what they compute). */
static int kernel_rooted_at_op(const cj_lowered *l, cj_op op) {
    for (int k = 0; k < l->plan.nkernels; k++)
        if (l->plan.kernels[k].root_node >= 0 && l->graph->nodes[l->plan.kernels[k].root_node].op == op) return k;
    return -1;
}

static bool reads(const cj_kernel *k, int buf) {
    for (int e = 0; e < k->nexprs; e++)
        if (k->exprs[e].kind == CJ_EX_LOAD && k->exprs[e].buffer == buf) return true;
    return false;
}

static int64_t align64(int64_t n) { return (n + 63) / 64 * 64; }

/* What must hold of every plan memplan makes (memplan.c's promises). */
static void check_plan(const char *what, const cj_plan *p) {
    int64_t args = 0, outs = 0;
    for (int b = 0; b < p->nbuffers; b++) {
        const cj_buffer *B = &p->buffers[b];
        if (B->kind == CJ_BUF_PARAM || B->kind == CJ_BUF_ARRAY) args += B->nbytes;
        if (B->kind == CJ_BUF_OUTPUT && B->alias_of < 0) outs += B->nbytes;
        CHECK_MSG(B->nbytes == cj_shape_numel(&B->shape) * cj_dtype_size(B->dtype), "%s: buf%d's bytes", what, b);
        if (B->alias_of >= 0) {
            /* living in another buffer: inside it */
            CHECK_MSG(B->alias_of < p->nbuffers && B->alias_of != b, "%s: buf%d in buf%d", what, b, B->alias_of);
            if (B->alias_of < p->nbuffers)
                CHECK_MSG(B->offset >= 0 && B->offset + B->nbytes <= p->buffers[B->alias_of].nbytes,
                          "%s: buf%d at %lld in buf%d", what, b, (long long)B->offset, B->alias_of);
        } else if (B->kind == CJ_BUF_TEMP) {
            /* in the arena, aligned */
            CHECK_MSG(B->offset >= 0 && B->offset % 64 == 0 && B->offset + B->nbytes <= p->arena_bytes,
                      "%s: buf%d at %lld, arena %lld", what, b, (long long)B->offset, (long long)p->arena_bytes);
        }
    }
    CHECK_MSG(p->argument_bytes == args, "%s: argument bytes %lld, expected %lld", what,
              (long long)p->argument_bytes, (long long)args);
    CHECK_MSG(p->output_bytes == outs, "%s: output bytes %lld, expected %lld", what, (long long)p->output_bytes,
              (long long)outs);
    CHECK_MSG(p->temp_bytes == p->arena_bytes, "%s: temp bytes %lld, arena %lld", what, (long long)p->temp_bytes,
              (long long)p->arena_bytes);
    CHECK_MSG(p->peak_bytes == args + outs + p->arena_bytes, "%s: peak %lld != %lld + %lld + %lld", what,
              (long long)p->peak_bytes, (long long)args, (long long)outs, (long long)p->arena_bytes);
    /* every pair of arena temporaries live at once: disjoint bytes (one check) */
    int clashes = 0;
    for (int a = 0; a < p->nbuffers; a++)
        for (int b = a + 1; b < p->nbuffers; b++) {
            const cj_buffer *A = &p->buffers[a], *B = &p->buffers[b];
            if (A->kind != CJ_BUF_TEMP || B->kind != CJ_BUF_TEMP || A->alias_of >= 0 || B->alias_of >= 0) continue;
            if (A->nbytes == 0 || B->nbytes == 0) continue;
            bool at_once = A->first_use <= B->last_use && B->first_use <= A->last_use;
            bool apart = A->offset + A->nbytes <= B->offset || B->offset + B->nbytes <= A->offset;
            if (at_once && !apart && clashes++ < 5)
                fprintf(stderr, "%s: buf%d [%lld, +%lld) groups %d-%d and buf%d [%lld, +%lld) groups %d-%d overlap\n",
                        what, a, (long long)A->offset, (long long)A->nbytes, A->first_use, A->last_use, b,
                        (long long)B->offset, (long long)B->nbytes, B->first_use, B->last_use);
        }
    CHECK_MSG(clashes == 0, "%s: %d pairs of temporaries share bytes while both live", what, clashes);
    /* groups: consecutive, covering every kernel once */
    int next = 0;
    for (int g = 0; g < p->ngroups; g++) {
        CHECK_MSG(p->groups[g].first == next && p->groups[g].count >= 1, "%s: group %d", what, g);
        CHECK_MSG(p->groups[g].block >= 1 && p->groups[g].block <= (p->groups[g].rows > 0 ? p->groups[g].rows : 1),
                  "%s: group %d's block %lld of %lld rows", what, g, (long long)p->groups[g].block,
                  (long long)p->groups[g].rows);
        next = p->groups[g].first + p->groups[g].count;
    }
    CHECK_MSG(next == p->nkernels, "%s: groups cover %d of %d kernels", what, next, p->nkernels);
    /* liveness covers every use: a buffer is live in each group touching it */
    for (int k = 0; k < p->nkernels; k++) {
        const cj_kernel *K = &p->kernels[k];
        int g = group_of(p, k);
        for (int e = 0; e <= K->nexprs + K->nalso; e++) {
            int b = e < K->nexprs ? (K->exprs[e].kind == CJ_EX_LOAD ? K->exprs[e].buffer : -1)
                    : e < K->nexprs + K->nalso ? K->also[e - K->nexprs].buffer : K->out_buffer;
            if (b < 0) continue;
            const cj_buffer *B = &p->buffers[b];
            CHECK_MSG(B->first_use <= g && g <= B->last_use, "%s: kernel %d (group %d) uses buf%d, live %d-%d",
                      what, k, g, b, B->first_use, B->last_use);
        }
    }
    /* every output has its buffer */
    for (int j = 0; p->graph && j < p->graph->noutputs; j++) {
        int b = p->output_buffer[j];
        CHECK_MSG(b >= 0 && b < p->nbuffers && p->buffers[b].kind == CJ_BUF_OUTPUT && p->buffers[b].slot == j,
                  "%s: output %d's buffer", what, j);
    }
}

/* Lowers b's graph (which stays b's) with options o; the plan is checked. */
static cj_lowered lower(const char *what, builder *b, const cj_compile_options *o) {
    cj_lowered l;
    cj_error err = {0};
    cj_status st = cj_lower(b->g, o, &l, &err);
    CHECK_MSG(st == CJ_OK, "%s: cj_lower: %s", what, err.message);
    if (st != CJ_OK) {
        fprintf(stderr, "cannot go on\n");
        exit(1);
    }
    check_plan(what, &l.plan);
    return l;
}

/* ---- fuse ------------------------------------------------------------------ */

/* exp(x) * 2 + 1: one kernel, the output its root, no temporaries. */
static void test_elementwise_chain(void) {
    builder b = start();
    int x = param(&b, s2(4, 8));
    int y = binc(&b, CJ_OP_ADD, binc(&b, CJ_OP_MUL, un(&b, CJ_OP_EXP, x), 2.0), 1.0);
    outputs(&b, &y, 1);
    cj_lowered l = lower("chain", &b, NULL);
    const cj_plan *p = &l.plan;
    CHECK_MSG(p->nkernels == 1, "%d kernels", p->nkernels);
    CHECK(l.graph->nodes[p->kernels[0].root_node].op == CJ_OP_ADD);
    CHECK(p->kernels[0].out_buffer == p->output_buffer[0] && p->kernels[0].nalso == 0);
    CHECK_MSG(count_ops(&p->kernels[0], -1) == 3, "%d ops", count_ops(&p->kernels[0], -1));
    CHECK_MSG(strcmp(p->kernels[0].label, "exp+mul+add") == 0, "label %s", p->kernels[0].label);
    CHECK(count_buffers(p, CJ_BUF_TEMP) == 0 && p->arena_bytes == 0);
    CHECK(p->argument_bytes == 4 * 8 * 4 && p->output_bytes == 4 * 8 * 4 && p->peak_bytes == 2 * 4 * 8 * 4);
    cj_lowered_free(&l);
    cj_graph_free(b.g);
}

/* y = exp(-x*x) read twice per step, ten steps: y = y*y + y ... one kernel,
 * each value computed once (the memo), no temporaries. */
static void test_shared_values(void) {
    builder b = start();
    int x = param(&b, s1(1000));
    int y = un(&b, CJ_OP_EXP, un(&b, CJ_OP_NEG, bin(&b, CJ_OP_MUL, x, x)));
    for (int i = 0; i < 10; i++) y = bin(&b, CJ_OP_ADD, bin(&b, CJ_OP_MUL, y, y), y);
    outputs(&b, &y, 1);
    cj_lowered l = lower("shared", &b, NULL);
    const cj_plan *p = &l.plan;
    CHECK_MSG(p->nkernels == 1, "%d kernels", p->nkernels);
    CHECK(count_buffers(p, CJ_BUF_TEMP) == 0);
    /* 1 mul, 1 neg, 1 exp, then 10 x (mul, add): each once */
    CHECK_MSG(count_ops(&p->kernels[0], -1) == 3 + 20, "%d ops", count_ops(&p->kernels[0], -1));
    CHECK(count_ops(&p->kernels[0], CJ_OP_EXP) == 1);
    int loads = 0;
    for (int e = 0; e < p->kernels[0].nexprs; e++) loads += p->kernels[0].exprs[e].kind == CJ_EX_LOAD;
    CHECK_MSG(loads == 1, "x loaded %d times", loads);
    cj_lowered_free(&l);
    cj_graph_free(b.g);
}

/* (exp(x) + 1, exp(x) * 2): one kernel storing both, exp computed once. */
static void test_multi_output(void) {
    builder b = start();
    int x = param(&b, s2(16, 16));
    int e = un(&b, CJ_OP_EXP, x);
    int outs[2] = {binc(&b, CJ_OP_ADD, e, 1.0), binc(&b, CJ_OP_MUL, e, 2.0)};
    outputs(&b, outs, 2);
    cj_lowered l = lower("multi-output", &b, NULL);
    const cj_plan *p = &l.plan;
    CHECK_MSG(p->nkernels == 1, "%d kernels", p->nkernels);
    const cj_kernel *k = &p->kernels[0];
    CHECK_MSG(k->nalso == 1, "%d other stores", k->nalso);
    CHECK(count_ops(k, CJ_OP_EXP) == 1 && count_ops(k, -1) == 3);
    /* the two stores go to the two outputs, each by its own node */
    if (k->nalso == 1) {
        CHECK(k->also[0].buffer == p->output_buffer[0] && k->out_buffer == p->output_buffer[1]);
        CHECK(l.graph->nodes[k->also[0].node].op == CJ_OP_ADD && l.graph->nodes[k->root_node].op == CJ_OP_MUL);
        CHECK(k->also[0].expr < k->nexprs - 1 && k->exprs[k->also[0].expr].op == CJ_OP_ADD);
    }
    CHECK(count_buffers(p, CJ_BUF_TEMP) == 0 && p->arena_bytes == 0);
    cj_lowered_free(&l);
    cj_graph_free(b.g);
}

/* sum(exp(x), axis 1): one reduction kernel with exp inside. */
static void test_reduction(void) {
    builder b = start();
    int x = param(&b, s2(8, 32));
    int r = reduce(&b, CJ_OP_REDUCE_SUM, un(&b, CJ_OP_EXP, x), 1u << 1);
    outputs(&b, &r, 1);
    cj_lowered l = lower("reduction", &b, NULL);
    const cj_plan *p = &l.plan;
    CHECK_MSG(p->nkernels == 1, "%d kernels", p->nkernels);
    const cj_kernel *k = &p->kernels[0];
    CHECK(k->reduced == (1u << 1) && k->reduce_op == CJ_OP_REDUCE_SUM && k->rank == 2);
    CHECK(k->dims[0] == 8 && k->dims[1] == 32 && count_ops(k, CJ_OP_EXP) == 1);
    CHECK(cj_kernel_needs_identity(k));
    CHECK(p->buffers[k->out_buffer].nbytes == 8 * 4 && count_buffers(p, CJ_BUF_TEMP) == 0);
    cj_lowered_free(&l);
    cj_graph_free(b.g);
}

/* Softmax over rows: max, sum of exp(x - max) (recomputed, not stored), the
 * quotient: three kernels, two temporaries (the row max and sum), one group. */
static void test_softmax(void) {
    const int64_t R = 64, C = 1000;
    builder b = start();
    int x = param(&b, s2(R, C));
    int m = reduce(&b, CJ_OP_REDUCE_MAX, x, 1u << 1);
    int e = un(&b, CJ_OP_EXP, bin(&b, CJ_OP_SUB, x, rows_as_matrix(&b, m, R, C)));
    int s = reduce(&b, CJ_OP_REDUCE_SUM, e, 1u << 1);
    int y = bin(&b, CJ_OP_DIV, e, rows_as_matrix(&b, s, R, C));
    outputs(&b, &y, 1);
    cj_lowered l = lower("softmax", &b, NULL);
    const cj_plan *p = &l.plan;
    CHECK_MSG(p->nkernels == 3, "%d kernels", p->nkernels);
    CHECK(kernel_rooted_at_op(&l, CJ_OP_REDUCE_MAX) == 0 && kernel_rooted_at_op(&l, CJ_OP_REDUCE_SUM) == 1 &&
          kernel_rooted_at_op(&l, CJ_OP_DIV) == 2);
    CHECK(count_ops(&p->kernels[1], CJ_OP_EXP) == 1 && count_ops(&p->kernels[2], CJ_OP_EXP) == 1);
    CHECK_MSG(count_buffers(p, CJ_BUF_TEMP) == 2, "%d temporaries", count_buffers(p, CJ_BUF_TEMP));
    /* one group of three stages over the rows; a block of rows is about
     * 128 KiB of the widest row (group.c's CJ_GROUP_BLOCK_BYTES): 4000 bytes */
    CHECK_MSG(p->ngroups == 1 && p->groups[0].count == 3, "%d groups", p->ngroups);
    CHECK(p->groups[0].rows == R && p->groups[0].block == 128 * 1024 / (C * 4));
    /* the two row vectors live at once (one group), 256 bytes each */
    CHECK_MSG(p->arena_bytes == 2 * align64(R * 4), "arena %lld", (long long)p->arena_bytes);
    cj_lowered_free(&l);

    /* CJIT_PASSES=-group: the same kernels, each a group of its own */
    setenv("CJIT_PASSES", "-group", 1);
    l = lower("softmax -group", &b, NULL);
    CHECK(l.plan.nkernels == 3 && l.plan.ngroups == 3);
    cj_lowered_free(&l);
    /* -fuse: a kernel per node but the parameter (broadcasts and reshapes too) */
    setenv("CJIT_PASSES", "-fuse", 1);
    l = lower("softmax -fuse", &b, NULL);
    CHECK_MSG(l.plan.nkernels == 9 && l.graph->nnodes == 10, "%d kernels", l.plan.nkernels);
    cj_lowered_free(&l);
    /* a misspelt pass is refused, leaving nothing */
    setenv("CJIT_PASSES", "-fusion", 1);
    cj_error err = {0};
    long before = live_blocks;
    CHECK(cj_lower(b.g, NULL, &l, &err) == CJ_ERR_VALUE && strstr(err.message, "fusion") != NULL);
    CHECK(live_blocks == before && l.graph == NULL && l.plan.kernels == NULL);
    unsetenv("CJIT_PASSES");
    cj_graph_free(b.g);
}

/* Marks matmul kernels as library calls, as cj_blas_plan would with a BLAS. */
static void mark_matmuls(cj_plan *p) {
    for (int k = 0; k < p->nkernels; k++)
        p->kernels[k].gemm.on = p->kernels[k].root_node >= 0 &&
                                p->graph->nodes[p->kernels[k].root_node].op == CJ_OP_MATMUL;
}
/* A backend that marks the matmuls and makes no code. */
static const cj_backend marking = {.name = "test", .mark_library_calls = mark_matmuls};

/* Two layers relu(relu(exp(x) @ w1 + b1) @ w2): exp(x), a matmul operand that
 * computes something, is stored; each matmul leads a group with its epilogue. */
static void test_matmul(void) {
    const int64_t B = 64, D = 1024, H = 16;
    builder b = start();
    int x = param(&b, s2(B, D)), w1 = param(&b, s2(D, H)), b1 = param(&b, s1(H)), w2 = param(&b, s2(H, H));
    int h = bin(&b, CJ_OP_ADD, matmul(&b, un(&b, CJ_OP_EXP, x), w1), bcast(&b, b1, s2(B, H)));
    h = binc(&b, CJ_OP_MAXIMUM, h, 0.0);
    int y = binc(&b, CJ_OP_MAXIMUM, matmul(&b, h, w2), 0.0);
    outputs(&b, &y, 1);
    for (int marked = 0; marked < 2; marked++) {
        cj_compile_options o = {.backend = marked ? &marking : NULL};
        cj_lowered l = lower("matmul", &b, &o);
        const cj_plan *p = &l.plan;
        /* exp(x); matmul, +b1 and relu; matmul (h is its operand: stored), relu */
        CHECK_MSG(p->nkernels == 5, "%d kernels", p->nkernels);
        const cj_op roots[5] = {CJ_OP_EXP, CJ_OP_MATMUL, CJ_OP_MAXIMUM, CJ_OP_MATMUL, CJ_OP_MAXIMUM};
        for (int k = 0; k < p->nkernels && k < 5; k++)
            CHECK_MSG(l.graph->nodes[p->kernels[k].root_node].op == roots[k], "kernel %d: %s", k, p->kernels[k].label);
        CHECK(p->buffers[p->kernels[0].out_buffer].kind == CJ_BUF_TEMP);
        const cj_kernel *mm = &p->kernels[1];
        CHECK(mm->rank == 3 && mm->dims[0] == B && mm->dims[1] == D && mm->dims[2] == H && mm->reduced == (1u << 1));
        CHECK(mm->reduce_op == CJ_OP_REDUCE_SUM && count_ops(mm, CJ_OP_MUL) == 1);
        CHECK(cj_kernel_needs_identity(mm) == !marked);
        /* groups: (exp), (matmul, epilogue), (matmul, epilogue): a matmul
         * joins no group but leads one */
        CHECK_MSG(p->ngroups == 3, "%d groups", p->ngroups);
        if (p->ngroups == 3) {
            CHECK(p->groups[0].count == 1 && p->groups[1].first == 1 && p->groups[1].count == 2);
            CHECK(p->groups[2].first == 3 && p->groups[2].count == 2);
            /* (a gemm call takes all the rows at once; else a block is
             * about 128 KiB of the widest row, exp(x)'s 4 KiB) */
            CHECK_MSG(p->groups[1].block == (marked ? B : 128 * 1024 / (D * 4)), "block %lld",
                      (long long)p->groups[1].block);
        }
        cj_lowered_free(&l);
    }
    cj_graph_free(b.g);
}

/* concatenate([exp(a), b]): one kernel per input, each writing its slab of
 * the one output buffer, exp inside the first. */
static void test_concatenate(void) {
    builder b = start();
    int a = param(&b, s2(3, 5)), c = param(&b, s2(4, 5));
    int xs[2] = {un(&b, CJ_OP_EXP, a), c};
    int y = ok(&b, cj_build_concatenate(b.g, xs, 2, 0, -1, &b.err));
    outputs(&b, &y, 1);
    cj_lowered l = lower("concatenate", &b, NULL);
    const cj_plan *p = &l.plan;
    CHECK_MSG(p->nkernels == 2, "%d kernels", p->nkernels);
    if (p->nkernels == 2) {
        CHECK(p->kernels[0].out_buffer == p->output_buffer[0] && p->kernels[1].out_buffer == p->output_buffer[0]);
        CHECK(p->kernels[0].out_index.offset == 0 && p->kernels[1].out_index.offset == 3 * 5);
        CHECK(count_ops(&p->kernels[0], CJ_OP_EXP) == 1 && count_ops(&p->kernels[1], -1) == 0);
    }
    CHECK(count_buffers(p, CJ_BUF_TEMP) == 0);
    cj_lowered_free(&l);
    cj_graph_free(b.g);
}

/* A reshape is folded into the loads' offsets when it splits dims, or
 * merges dims of a value in a contiguous buffer; reshape(transpose(exp(x)))
 * merges dims that are not contiguous, so the transpose is materialized (a
 * kernel of its own into a temporary) and the reshape reads that. */
static void test_reshape(void) {
    enum { SPLIT, MERGE_PARAM, MERGE_TRANSPOSED };
    for (int c = SPLIT; c <= MERGE_TRANSPOSED; c++) {
        builder b = start();
        int x = param(&b, c == SPLIT ? s1(24) : s2(4, 6)), v;
        if (c == SPLIT) v = reshape(&b, un(&b, CJ_OP_EXP, x), s2(4, 6));
        else if (c == MERGE_PARAM) v = un(&b, CJ_OP_EXP, reshape(&b, x, s1(24)));
        else v = reshape(&b, ok(&b, cj_build_transpose(b.g, un(&b, CJ_OP_EXP, x), (const int[]){1, 0}, -1, &b.err)),
                         s1(24));
        int y = binc(&b, CJ_OP_ADD, v, 1.0);
        outputs(&b, &y, 1);
        cj_lowered l = lower("reshape", &b, NULL);
        const cj_plan *p = &l.plan;
        int expect = c == MERGE_TRANSPOSED ? 2 : 1;
        CHECK_MSG(p->nkernels == expect && count_buffers(p, CJ_BUF_TEMP) == expect - 1, "case %d: %d kernels", c,
                  p->nkernels);
        if (c == MERGE_TRANSPOSED && p->nkernels == 2) {
            CHECK(l.graph->nodes[p->kernels[0].root_node].op == CJ_OP_TRANSPOSE);
            CHECK(count_ops(&p->kernels[0], CJ_OP_EXP) == 1 && count_ops(&p->kernels[1], -1) == 1);
            /* the transpose's kernel stores x's columns as rows */
            CHECK(p->kernels[0].rank == 2 && p->kernels[0].dims[0] == 6 && p->kernels[0].dims[1] == 4);
        } else if (p->nkernels == 1) {
            CHECK(count_ops(&p->kernels[0], -1) == 2);
        }
        cj_lowered_free(&l);
        cj_graph_free(b.g);
    }
}

/* A chain of n sin: cut into kernels of at most CJ_KERNEL_MAX_COST of work
 * plus the op that crossed it; the last kernel writes the output. */
static void test_long_chain(void) {
    const int n = 100;
    builder b = start();
    int y = param(&b, s1(64));
    for (int i = 0; i < n; i++) y = un(&b, CJ_OP_SIN, y);
    outputs(&b, &y, 1);
    cj_lowered l = lower("long chain", &b, NULL);
    const cj_plan *p = &l.plan;
    /* fuse_roots.c: a root where the chain's cost first exceeds the limit */
    int per_kernel = 128 / 4 + 1, expect = (n + per_kernel - 1) / per_kernel;
    CHECK(cj_op_cost(CJ_OP_SIN) == 4 && CJ_KERNEL_MAX_COST == 128);
    CHECK_MSG(p->nkernels == expect, "%d kernels, expected %d", p->nkernels, expect);
    int total = 0;
    for (int k = 0; k < p->nkernels; k++) {
        int c = body_cost(&p->kernels[k]);
        total += count_ops(&p->kernels[k], CJ_OP_SIN);
        CHECK_MSG(c <= CJ_KERNEL_MAX_COST + cj_op_cost(CJ_OP_SIN), "kernel %d costs %d", k, c);
        if (k < p->nkernels - 1) CHECK_MSG(c > CJ_KERNEL_MAX_COST, "kernel %d costs %d", k, c);
    }
    CHECK_MSG(total == n, "%d sin in all", total);
    CHECK(p->kernels[p->nkernels - 1].out_buffer == p->output_buffer[0]);
    CHECK(count_buffers(p, CJ_BUF_TEMP) == expect - 1);
    cj_lowered_free(&l);
    cj_graph_free(b.g);
}

/* ---- memplan ------------------------------------------------------------- */

/* m1 = x@x, m2 = m1@m1, ..., m5 = m4@m4 (output): each matmul a group; m_i
 * lives from the group writing it to the one reading it, so two arena
 * slots suffice (m1 and m3 share bytes, m2 and m4). */
static void test_liveness(void) {
    const int64_t N = 32, bytes = N * N * 4;
    builder b = start();
    int m = param(&b, s2(N, N));
    for (int i = 0; i < 5; i++) m = matmul(&b, m, m);
    outputs(&b, &m, 1);
    cj_lowered l = lower("liveness", &b, NULL);
    const cj_plan *p = &l.plan;
    CHECK_MSG(p->nkernels == 5 && p->ngroups == 5, "%d kernels, %d groups", p->nkernels, p->ngroups);
    int temps = 0;
    for (int k = 0; k < p->nkernels; k++) {
        const cj_buffer *B = &p->buffers[p->kernels[k].out_buffer];
        if (B->kind != CJ_BUF_TEMP) continue;
        temps++;
        CHECK_MSG(B->first_use == k && B->last_use == k + 1, "m%d live %d-%d", k + 1, B->first_use, B->last_use);
        CHECK_MSG(B->offset == (k % 2) * bytes, "m%d at %lld", k + 1, (long long)B->offset);
    }
    CHECK(temps == 4);
    CHECK_MSG(p->arena_bytes == 2 * bytes, "arena %lld", (long long)p->arena_bytes);
    /* the peak: x, the output and two slots, at the first group where two live */
    CHECK(p->peak_bytes == 4 * bytes && p->peak_kernel == 1);
    cj_lowered_free(&l);
    /* -memplan: every temporary bytes of its own */
    setenv("CJIT_PASSES", "-memplan", 1);
    l = lower("liveness -memplan", &b, NULL);
    CHECK_MSG(l.plan.arena_bytes == 4 * bytes, "arena %lld", (long long)l.plan.arena_bytes);
    cj_lowered_free(&l);
    unsetenv("CJIT_PASSES");
    cj_graph_free(b.g);
}

/* exp(sum(x, axis 1)): the row sums (a temporary) die into the output,
 * which the quotient's stage writes as it reads them: they are computed
 * straight into the output array, and the arena is empty. */
static void test_in_place(void) {
    builder b = start();
    int x = param(&b, s2(16, 8));
    int y = un(&b, CJ_OP_EXP, reduce(&b, CJ_OP_REDUCE_SUM, x, 1u << 1));
    outputs(&b, &y, 1);
    cj_lowered l = lower("in place", &b, NULL);
    const cj_plan *p = &l.plan;
    CHECK_MSG(p->nkernels == 2, "%d kernels", p->nkernels);
    int t = p->kernels[0].out_buffer;
    CHECK(p->buffers[t].kind == CJ_BUF_TEMP && p->buffers[t].alias_of == p->output_buffer[0]);
    CHECK(p->buffers[t].offset == 0 && p->arena_bytes == 0);
    CHECK(p->peak_bytes == 16 * 8 * 4 + 16 * 4);
    cj_lowered_free(&l);
    setenv("CJIT_PASSES", "-memplan", 1);
    l = lower("in place -memplan", &b, NULL);
    CHECK(l.plan.buffers[l.plan.kernels[0].out_buffer].alias_of == -1 && l.plan.arena_bytes == align64(16 * 4));
    cj_lowered_free(&l);
    unsetenv("CJIT_PASSES");
    cj_graph_free(b.g);
}

/* Donation.  w - 0.1*g with w donated: the output is w's memory (written in
 * place), and takes no bytes.  (w@w)@(w@w) with w donated: the output is
 * written after w's last read, into w. */
static void test_donation(void) {
    const int64_t N = 16, bytes = N * N * 4;
    builder b = start();
    int w = param(&b, s2(N, N)), g = param(&b, s2(N, N));
    int y = bin(&b, CJ_OP_SUB, w, binc(&b, CJ_OP_MUL, g, 0.1));
    outputs(&b, &y, 1);
    const bool donate[2] = {true, false}, donate_g[2] = {false, true};
    cj_compile_options o = {.donated = donate, .ndonated = 2};
    cj_lowered l = lower("donated update", &b, &o);
    const cj_plan *p = &l.plan;
    int out = p->output_buffer[0];
    CHECK(p->buffers[out].alias_of >= 0 && p->buffers[p->buffers[out].alias_of].kind == CJ_BUF_PARAM &&
          p->buffers[p->buffers[out].alias_of].slot == 0);
    CHECK(p->output_bytes == 0 && p->alias_bytes == bytes && p->peak_bytes == 2 * bytes);
    CHECK(p->donated && p->donated[0] && !p->donated[1]);
    cj_lowered_free(&l);
    /* g donated instead: the output lives in g (any donated argument of its shape) */
    o.donated = donate_g;
    l = lower("donated g", &b, &o);
    out = l.plan.output_buffer[0];
    CHECK(l.plan.buffers[out].alias_of >= 0 && l.plan.buffers[l.plan.buffers[out].alias_of].slot == 1);
    cj_lowered_free(&l);
    /* nothing donated: bytes of its own */
    l = lower("not donated", &b, NULL);
    CHECK(l.plan.buffers[l.plan.output_buffer[0]].alias_of == -1 && l.plan.output_bytes == bytes);
    CHECK(l.plan.alias_bytes == 0 && l.plan.donated == NULL && l.plan.peak_bytes == 3 * bytes);
    cj_lowered_free(&l);
    cj_graph_free(b.g);

    b = start();
    w = param(&b, s2(N, N));
    int t = matmul(&b, w, w);
    y = matmul(&b, t, t);
    outputs(&b, &y, 1);
    o.donated = donate;
    o.ndonated = 1;
    l = lower("donated, after the last read", &b, &o);
    p = &l.plan;
    out = p->output_buffer[0];
    CHECK_MSG(p->buffers[out].alias_of >= 0 && p->buffers[p->buffers[out].alias_of].kind == CJ_BUF_PARAM,
              "output in buf%d", p->buffers[out].alias_of);
    CHECK(p->output_bytes == 0 && p->peak_bytes == bytes + p->arena_bytes && p->arena_bytes == bytes);
    /* the output's bytes are in use from the group writing it on */
    CHECK(p->buffers[out].first_use == 1);
    cj_lowered_free(&l);
    cj_graph_free(b.g);
}

/* ---- autodiff ---------------------------------------------------------------- */

/* loss = sum((z * tanh(z)) @ w2)^2), z = x @ w1 + b1, the hidden layer in a
 * checkpoint region of `policy`; outputs loss and the gradients of w1, b1,
 * w2.  Returns the graph. */
static builder mlp_gradient(cj_save_policy policy) {
    const int64_t B = 8, D = 12, H = 16, O = 4;
    builder b = start();
    int x = param(&b, s2(B, D)), w1 = param(&b, s2(D, H)), b1 = param(&b, s1(H)), w2 = param(&b, s2(H, O));
    int region = ok(&b, cj_graph_region_begin(b.g, policy, NULL, 0, &b.err));
    int z = bin(&b, CJ_OP_ADD, matmul(&b, x, w1), bcast(&b, b1, s2(B, H)));
    int h = bin(&b, CJ_OP_MUL, z, un(&b, CJ_OP_TANH, z));
    cj_graph_region_end(b.g, region);
    int y = matmul(&b, h, w2);
    int loss = reduce(&b, CJ_OP_REDUCE_SUM, bin(&b, CJ_OP_MUL, y, y), 3u);
    cj_shape scalar = {0, {0}};
    int one = ok(&b, cj_build_constant(b.g, 1.0, 1, CJ_FLOAT32, false, &scalar, -1, &b.err));
    int wrt[3] = {w1, b1, w2}, grads[3];
    if (cj_autodiff_vjp(b.g, 0, &loss, &one, 1, wrt, 3, grads, &b.err) != CJ_OK) ok(&b, -1);
    int outs[4] = {loss, grads[0], grads[1], grads[2]};
    outputs(&b, outs, 4);
    return b;
}

/* The forward values the backward kernels of l read from buffers. */
static int saved_buffers(const cj_lowered *l) {
    const cj_plan *p = &l->plan;
    int n = 0;
    for (int bi = 0; bi < p->nbuffers; bi++) {
        const cj_buffer *B = &p->buffers[bi];
        if (B->kind == CJ_BUF_PARAM || B->kind == CJ_BUF_ARRAY || B->node >= l->graph->backward_start) continue;
        bool read = false;
        for (int k = 0; k < p->nkernels; k++)
            read |= p->kernels[k].root_node >= l->graph->backward_start && reads(&p->kernels[k], bi);
        n += read;
    }
    return n;
}

static void test_autodiff(void) {
    const cj_save_policy policies[3] = {CJ_SAVE_EVERYTHING, CJ_SAVE_DOTS, CJ_SAVE_NOTHING};
    int residuals[3], saved[3], remat[3], matmuls_kept[3], matmul_kernels[3];
    for (int i = 0; i < 3; i++) {
        builder b = mlp_gradient(policies[i]);
        cj_lowered l = lower("mlp gradient", &b, NULL);
        CHECK(l.graph->backward_start > 0 && l.graph->noutputs == 4);
        int *res = malloc(sizeof(int) * ((size_t)l.graph->nnodes + 1));
        residuals[i] = cj_autodiff_residuals(l.graph, res);
        remat[i] = matmuls_kept[i] = 0;
        for (int j = 0; j < residuals[i]; j++) matmuls_kept[i] += l.graph->nodes[res[j]].op == CJ_OP_MATMUL;
        for (int n = 0; n < l.graph->nnodes; n++) remat[i] += l.graph->nodes[n].remat;
        matmul_kernels[i] = 0;
        for (int k = 0; k < l.plan.nkernels; k++)
            matmul_kernels[i] += l.graph->nodes[l.plan.kernels[k].root_node].op == CJ_OP_MATMUL;
        saved[i] = saved_buffers(&l);
        free(res);
        cj_lowered_free(&l);
        cj_graph_free(b.g);
    }
    /* The residuals (forward values the backward nodes read): y = h @ w2
     * is outside the region and h leaves it, so every policy keeps both.
     * everything: also z and tanh(z), nothing recomputed */
    CHECK_MSG(residuals[0] == 4 && matmuls_kept[0] == 1 && remat[0] == 0,
              "everything: %d residuals (%d matmuls), %d recomputed", residuals[0], matmuls_kept[0], remat[0]);
    /* dots: x @ w1 kept; b1's broadcast, z and tanh(z) recomputed from it */
    CHECK_MSG(residuals[1] == 3 && matmuls_kept[1] == 2 && remat[1] == 3,
              "dots: %d residuals (%d matmuls), %d recomputed", residuals[1], matmuls_kept[1], remat[1]);
    /* nothing: x @ w1 recomputed too */
    CHECK_MSG(residuals[2] == 2 && matmuls_kept[2] == 1 && remat[2] == 4,
              "nothing: %d residuals (%d matmuls), %d recomputed", residuals[2], matmuls_kept[2], remat[2]);
    /* in the plan, fusion recomputes z and tanh(z) from x @ w1 anyway
     * (cheap, read by kernels apart): the buffers kept for the backward
     * pass are x @ w1, h and y, or h and y when nothing is saved */
    CHECK_MSG(saved[0] == 3 && saved[1] == 3 && saved[2] == 2, "saved buffers %d, %d, %d", saved[0], saved[1],
              saved[2]);
    CHECK_MSG(matmul_kernels[0] == 5 && matmul_kernels[1] == 5 && matmul_kernels[2] == 6, "matmul kernels %d, %d, %d",
              matmul_kernels[0], matmul_kernels[1], matmul_kernels[2]);
}

/* ---- long chains, on a small stack -------------------------------------------
 * No pass may recurse over the graph: a thread with 256 KiB of stack
 * lowers a chain of 100,000 nodes, and differentiates a chain of 40,000
 * ops and lowers the gradient (a graph of 100,002 nodes).  Time is not
 * checked.  (The gradient's lowering is not linear yet: memplan places
 * each temporary against every one placed before, and group.c checks each
 * load against every earlier stage of its group, and here the forward
 * chain is one group: about 3 s of the test, nearly all of it theirs.) */

typedef struct {
    int ops;             /* sin and neg, alternating */
    bool gradient;
    int nodes, kernels;  /* of the graph lowered, and its plan */
    cj_status status;
} chain_job;

static void *lower_chain(void *arg) {
    chain_job *job = arg;
    builder b = start();
    int x = param(&b, s1(16)), y = x;
    for (int i = 0; i < job->ops; i++) y = un(&b, (i & 1) ? CJ_OP_NEG : CJ_OP_SIN, y);
    int outs[2] = {y, -1};
    if (job->gradient) {
        int one = ok(&b, cj_build_constant(b.g, 1.0, 1, CJ_FLOAT32, false, &(cj_shape){1, {16}}, -1, &b.err));
        job->status = cj_autodiff_vjp(b.g, 0, &y, &one, 1, &x, 1, &outs[1], &b.err);
    }
    outputs(&b, outs, job->gradient ? 2 : 1);
    job->nodes = b.g->nnodes;
    cj_error err = {0};
    cj_lowered l;
    if (job->status == CJ_OK) job->status = cj_lower(b.g, NULL, &l, &err);
    if (job->status == CJ_OK) {
        job->kernels = l.plan.nkernels;
        check_plan("long chain", &l.plan);
        cj_lowered_free(&l);
    }
    cj_graph_free(b.g);
    return NULL;
}

static void run_on_small_stack(chain_job *job) {
    pthread_attr_t attr;
    pthread_t thread;
    pthread_attr_init(&attr);
    CHECK(pthread_attr_setstacksize(&attr, 256 * 1024) == 0);
    CHECK(pthread_create(&thread, &attr, lower_chain, job) == 0 && pthread_join(thread, NULL) == 0);
    pthread_attr_destroy(&attr);
}

static void test_long_chains(void) {
    chain_job forward = {.ops = 100000 - 1};
    run_on_small_stack(&forward);
    /* cut by cost: sin 4, neg 1, 5 a pair, a root once past 128 (every 52 ops) */
    CHECK_MSG(forward.status == CJ_OK && forward.nodes == 100000 && forward.kernels == (100000 - 1 + 51) / 52,
              "status %d, %d nodes, %d kernels", forward.status, forward.nodes, forward.kernels);
    chain_job backward = {.ops = 40000, .gradient = true};
    run_on_small_stack(&backward);
    /* the parameter, 40,000 ops, the cotangent, and per pair of ops the
     * gradient's cos and mul (sin) and neg (neg) */
    CHECK_MSG(backward.status == CJ_OK && backward.nodes == 1 + 40000 + 1 + 20000 * 3 && backward.kernels > 1,
              "status %d, %d nodes, %d kernels", backward.status, backward.nodes, backward.kernels);
}

/* ---- allocation failures ------------------------------------------------------ */

/* One graph with a bit of everything: softmax rows, a matmul with its
 * epilogue, a multi-output kernel, a concatenate, a materialized reshape,
 * a donated argument. */
static builder medley(void) {
    const int64_t R = 8, C = 16;
    builder b = start();
    int x = param(&b, s2(R, C)), w = param(&b, s2(C, C));
    int m = reduce(&b, CJ_OP_REDUCE_MAX, x, 1u << 1);
    int e = un(&b, CJ_OP_EXP, bin(&b, CJ_OP_SUB, x, rows_as_matrix(&b, m, R, C)));
    int sm = bin(&b, CJ_OP_DIV, e, rows_as_matrix(&b, reduce(&b, CJ_OP_REDUCE_SUM, e, 1u << 1), R, C));
    int h = binc(&b, CJ_OP_MAXIMUM, matmul(&b, sm, w), 0.0);
    int t = ok(&b, cj_build_transpose(b.g, un(&b, CJ_OP_TANH, h), (const int[]){1, 0}, -1, &b.err));
    int r = binc(&b, CJ_OP_ADD, reshape(&b, t, s1(R * C)), 1.0);
    int xs[2] = {r, reshape(&b, w, s1(C * C))};
    int cat = ok(&b, cj_build_concatenate(b.g, xs, 2, 0, -1, &b.err));
    int ex = un(&b, CJ_OP_EXP, h);
    int outs[4] = {cat, binc(&b, CJ_OP_ADD, ex, 1.0), binc(&b, CJ_OP_MUL, ex, 2.0), binc(&b, CJ_OP_SUB, w, 0.5)};
    outputs(&b, outs, 4);
    return b;
}

/* For k = 1, 2, ... up to the allocations one lowering of b makes: the k-th
 * fails (and, with `and_after`, every later one too).  cj_lower returns
 * CJ_OK with a sound plan, or CJ_ERR_MEMORY saying so; every block it
 * allocated is freed either way. */
static void fail_each_allocation(const char *what, builder *b, const cj_compile_options *o, bool and_after) {
    cj_lowered l;
    cj_error err = {0};
    long base = live_blocks, before = allocations;
    CHECK(cj_lower(b->g, o, &l, &err) == CJ_OK);
    long n = allocations - before;
    cj_lowered_free(&l);
    CHECK_MSG(live_blocks == base, "%s: %ld blocks leaked without failures", what, live_blocks - base);
    int absorbed = 0, refused = 0;
    for (long k = 1; k <= n; k++) {
        memset(&err, 0, sizeof err);
        arm(k, and_after);
        cj_status st = cj_lower(b->g, o, &l, &err);
        disarm();
        CHECK_MSG(injected >= 1, "%s: allocation %ld of %ld never came", what, k, n);
        if (st == CJ_OK) {
            absorbed++;
            check_plan(what, &l.plan);
            cj_lowered_free(&l);
        } else {
            refused++;
            CHECK_MSG(st == CJ_ERR_MEMORY && err.status == CJ_ERR_MEMORY && strstr(err.message, "out of memory"),
                      "%s: allocation %ld of %ld failed: status %d, \"%s\"", what, k, n, st, err.message);
            CHECK_MSG(l.graph == NULL && l.plan.kernels == NULL && l.plan.buffers == NULL,
                      "%s: allocation %ld: a failed lowering left something", what, k);
        }
        CHECK_MSG(live_blocks == base, "%s: allocation %ld of %ld failing leaks %ld blocks", what, k, n,
                  live_blocks - base);
    }
    printf("%s: %ld allocations, each failing%s: %d refused, %d absorbed\n", what, n,
           and_after ? " with all after it" : " alone", refused, absorbed);
    CHECK(refused > 0);
}

static void test_allocation_failures(void) {
    const bool donate[2] = {false, true};
    cj_compile_options o = {.donated = donate, .ndonated = 2, .backend = &marking};
    builder b = medley();
    for (int after = 0; after < 2; after++) fail_each_allocation("medley", &b, &o, after);
    cj_graph_free(b.g);
    b = mlp_gradient(CJ_SAVE_NOTHING);
    for (int after = 0; after < 2; after++) fail_each_allocation("mlp gradient", &b, NULL, after);
    cj_graph_free(b.g);
}

int main(void) {
    unsetenv("CJIT_PASSES");
    unsetenv("CJIT_DUMP");
    long base = live_blocks;
    test_elementwise_chain();
    test_shared_values();
    test_multi_output();
    test_reduction();
    test_softmax();
    test_matmul();
    test_concatenate();
    test_reshape();
    test_long_chain();
    test_liveness();
    test_in_place();
    test_donation();
    test_autodiff();
    test_long_chains();
    test_allocation_failures();
    CHECK_MSG(live_blocks == base, "%ld blocks never freed", live_blocks - base);
    printf("test_lower: %d checks, %d failures\n", checks, failures);
    return failures != 0;
}
