/* test_fuse.c - the fuser (fuse.c, fuse_expr.c, fuse_roots.c) on graphs
 * built with the graph.h builders, against ARCHITECTURE.md ("Kernels: loop
 * nests with affine loads", "Multi-output kernels", "Graphs of any length"):
 *
 *   - an elementwise chain with broadcasting is one kernel, no temporary;
 *   - a reduction takes its producers in, and its consumers are kernels of
 *     their own that read its buffer;
 *   - a value read by consumers in several kernels is recomputed in each
 *     when it has at most 4 consumers and its cost times the consumers
 *     beyond the first is at most 16, and stored otherwise (every cost
 *     1..20 and 2..6 consumers); a chain of one element of cost at most 32
 *     is recomputed whatever its consumers (API.md decision 154);
 *   - multi-output kernels stay apart where documented (`y` and
 *     `y * y.sum()`, `y.T + y`);
 *   - a chain of 100,000 nodes fuses on a 256 KiB stack, the work bounded
 *     by the calls into the op table (wrapped and counted), linear in n;
 *   - generated: seeded random graphs lowered and run by the plan
 *     interpreter (plan_check.h) give the graph's values, and their plans
 *     keep the fuser's invariants.
 *
 * cj_op_kind is wrapped by the linker (--wrap) to count the fuser's visits.
 *
 *   make -C tests/c check     (or: make -C tests/c build/test_fuse) */
#include "plan_check.h"

#include "fuse.h" /* CJ_KERNEL_MAX_COST */

#include <pthread.h>

/* ---- counting the fuser's look-ups in the op table ------------------------ */

cj_opkind __real_cj_op_kind(cj_op op);
cj_opkind __wrap_cj_op_kind(cj_op op);
static long op_kind_calls;
cj_opkind __wrap_cj_op_kind(cj_op op) {
    op_kind_calls++;
    return __real_cj_op_kind(op);
}

/* The kernel whose root (or another store) is node n, or -1. */
static int kernel_storing(const cj_plan *p, int n) {
    for (int k = 0; k < p->nkernels; k++) {
        if (p->kernels[k].root_node == n) return k;
        for (int a = 0; a < p->kernels[k].nalso; a++)
            if (p->kernels[k].also[a].node == n) return k;
    }
    return -1;
}

static int loads(const cj_kernel *k) {
    int n = 0;
    for (int e = 0; e < k->nexprs; e++) n += k->exprs[e].kind == CJ_EX_LOAD;
    return n;
}

/* Lowers b (cj_lower, all passes), checks the plan and that running it
 * gives the graph's values; returns the lowering. */
static cj_lowered lower_checked(const char *what, builder *b) {
    cj_lowered l = lower_or_die(what, b, NULL);
    check_plan(what, &l.plan);
    double **params = random_params(l.graph, -1.5, 1.5);
    CHECK_MSG(plan_matches_graph(what, &l, params), "%s: values differ", what);
    free_params(l.graph, params);
    return l;
}

/* tanh(x * r) - exp(x) + 1, r a row broadcast over x's rows: one kernel
 * storing the output, x and r loaded once each, no temporaries. */
static void test_elementwise_chain(void) {
    builder b = start(CJ_FLOAT32);
    int x = param(&b, s2(8, 16)), r = param(&b, s1(16));
    int y = binc(&b, CJ_OP_ADD,
                 bin(&b, CJ_OP_SUB, un(&b, CJ_OP_TANH, bin(&b, CJ_OP_MUL, x, bcast(&b, r, s2(8, 16)))), un(&b, CJ_OP_EXP, x)),
                 1.0);
    outputs(&b, &y, 1);
    cj_plan p = fuse_only(b.g, false);
    CHECK_MSG(p.nkernels == 1, "%d kernels", p.nkernels);
    CHECK(p.kernels[0].root_node == y && p.kernels[0].out_buffer == p.output_buffer[0] && p.kernels[0].nalso == 0);
    CHECK_MSG(loads(&p.kernels[0]) == 2 && count_ops(&p.kernels[0], -1) == 5, "%d loads, %d ops",
              loads(&p.kernels[0]), count_ops(&p.kernels[0], -1));
    /* r is read with stride 0 along the rows */
    for (int e = 0; e < p.kernels[0].nexprs; e++) {
        const cj_expr *x_ = &p.kernels[0].exprs[e];
        if (x_->kind == CJ_EX_LOAD && p.buffers[x_->buffer].slot == 1 && p.buffers[x_->buffer].kind == CJ_BUF_PARAM)
            CHECK(x_->index.stride[0] == 0 && x_->index.stride[1] == 1);
    }
    CHECK(count_buffers(&p, CJ_BUF_TEMP) == 0);
    cj_plan_free(&p);
    cj_lowered l = lower_checked("chain", &b);
    CHECK(l.plan.nkernels == 1 && l.plan.arena_bytes == 0);
    cj_lowered_free(&l);
    cj_graph_free(b.g);
}

/* A reduction takes its elementwise producers in; its consumers do not go
 * into its kernel (a reduction's loop nest accumulates): exp(sum(exp(x)))
 * is two kernels, and x - max(x, axis 1) reads the row maxima through a
 * broadcast (stride 0 along the columns). */
static void test_reduction_consumers(void) {
    const int64_t R = 6, C = 10;
    builder b = start(CJ_FLOAT32);
    int x = param(&b, s2(R, C));
    int s = reduce(&b, CJ_OP_REDUCE_SUM, un(&b, CJ_OP_EXP, x), 1u << 1);
    int y = un(&b, CJ_OP_EXP, s);
    int m = reduce(&b, CJ_OP_REDUCE_MAX, x, 1u << 1);
    int z = bin(&b, CJ_OP_SUB, x, rows_as_matrix(&b, m, R, C));
    int outs[2] = {y, z};
    outputs(&b, outs, 2);
    cj_plan p = fuse_only(b.g, false);
    CHECK_MSG(p.nkernels == 4, "%d kernels", p.nkernels);
    int ks = kernel_storing(&p, s), ky = kernel_storing(&p, y), km = kernel_storing(&p, m), kz = kernel_storing(&p, z);
    CHECK(ks >= 0 && ky > ks && km >= 0 && kz > km);
    if (ks >= 0 && ky >= 0 && km >= 0 && kz >= 0) {
        CHECK(count_ops(&p.kernels[ks], CJ_OP_EXP) == 1 && p.kernels[ks].reduced == 2u);
        CHECK(count_ops(&p.kernels[ky], CJ_OP_EXP) == 1 && kernel_reads(&p.kernels[ky], p.kernels[ks].out_buffer));
        CHECK(p.buffers[p.kernels[ks].out_buffer].kind == CJ_BUF_TEMP && p.buffers[p.kernels[km].out_buffer].kind == CJ_BUF_TEMP);
        bool through_broadcast = false;
        for (int e = 0; e < p.kernels[kz].nexprs; e++) {
            const cj_expr *ex = &p.kernels[kz].exprs[e];
            if (ex->kind == CJ_EX_LOAD && ex->buffer == p.kernels[km].out_buffer)
                through_broadcast = ex->index.stride[0] == 1 && ex->index.stride[1] == 0;
        }
        CHECK(through_broadcast);
    }
    cj_plan_free(&p);
    cj_lowered l = lower_checked("reduction consumers", &b);
    cj_lowered_free(&l);
    cj_graph_free(b.g);
}

/* The rule for a value read by consumers in several kernels (fuse_roots.c,
 * ARCHITECTURE.md): recomputed in each when it has at most 4 consumers and
 * cost x (consumers - 1) <= 16, stored once otherwise.  v = x * x * ... (cost
 * c, each mul 1), read by u reductions (sum, max, min over either axis: six
 * kernels that cannot merge, each reading v at its own index). */
static void test_recompute_or_store(void) {
    const int64_t R = 3, C = 5;
    const cj_op rops[3] = {CJ_OP_REDUCE_SUM, CJ_OP_REDUCE_MAX, CJ_OP_REDUCE_MIN};
    int cases = 0;
    for (int c = 1; c <= 20; c++)
        for (int u = 2; u <= 6; u++, cases++) {
            builder b = start(CJ_FLOAT32);
            int x = param(&b, s2(R, C)), v = x;
            for (int i = 0; i < c; i++) v = bin(&b, CJ_OP_MUL, v, x);
            int outs[6];
            for (int j = 0; j < u; j++) outs[j] = reduce(&b, rops[j / 2], v, 1u << (j % 2));
            outputs(&b, outs, u);
            bool stored = u > 4 || c * (u - 1) > 16;
            cj_plan p = fuse_only(b.g, false);
            int vb = buffer_of_node(&p, v);
            CHECK_MSG((vb >= 0) == stored && p.nkernels == u + stored, "cost %d, %d consumers: %s, %d kernels", c, u,
                      vb >= 0 ? "stored" : "recomputed", p.nkernels);
            int muls = 0;
            for (int k = 0; k < p.nkernels; k++) muls += count_ops(&p.kernels[k], CJ_OP_MUL);
            /* stored: computed once; recomputed: once in each consumer */
            CHECK_MSG(muls == (stored ? c : c * u), "cost %d, %d consumers: %d muls", c, u, muls);
            cj_plan_free(&p);
            if (c % 7 == 1) { /* and the values, on some */
                cj_lowered l = lower_checked("recompute", &b);
                cj_lowered_free(&l);
            }
            cj_graph_free(b.g);
        }
    CHECK(cases == 100);
}

/* A chain of one element (cost at most 32) is recomputed however many
 * consumers read it (API.md decision 154: Adam's bias correction): v =
 * s * s * ... of a scalar s, read by 8 products with vectors of 8 lengths
 * (kernels that cannot merge).  Of cost 33 it is stored, and a chain of
 * two elements read 8 times is stored whatever its cost. */
static void test_one_element_chain(void) {
    for (int kase = 0; kase < 4; kase++) {
        int c = kase == 0 ? 1 : kase == 1 ? 32 : kase == 2 ? 33 : 1;
        int64_t len = kase == 3 ? 2 : 1;
        builder b = start(CJ_FLOAT32);
        int s = param(&b, len == 1 ? s0() : s1(len)), v = s;
        for (int i = 0; i < c; i++) v = bin(&b, CJ_OP_MUL, v, s);
        int outs[8];
        for (int j = 0; j < 8; j++) {
            int64_t n = len == 1 ? j + 2 : 2;
            int xj = param(&b, len == 1 ? s1(n) : s2(j + 2, n));
            outs[j] = bin(&b, CJ_OP_ADD, xj, bcast(&b, v, len == 1 ? s1(n) : s2(j + 2, n)));
        }
        outputs(&b, outs, 8);
        bool stored = kase >= 2;
        cj_plan p = fuse_only(b.g, false);
        int vb = buffer_of_node(&p, v);
        CHECK_MSG((vb >= 0) == stored && p.nkernels == 8 + stored, "case %d (cost %d, %lld elements): %s, %d kernels",
                  kase, c, (long long)len, vb >= 0 ? "stored" : "recomputed", p.nkernels);
        int muls = 0;
        for (int k = 0; k < p.nkernels; k++) muls += count_ops(&p.kernels[k], CJ_OP_MUL);
        CHECK_MSG(muls == (stored ? c : 8 * c), "case %d: %d muls", kase, muls);
        cj_plan_free(&p);
        cj_lowered l = lower_checked("one element", &b);
        cj_lowered_free(&l);
        cj_graph_free(b.g);
    }
}

/* Multi-output kernels: (exp(x) + 1, exp(x) * 2, tanh(exp(x))) is one
 * kernel storing three values, exp once; `y` and `y * y.sum()` stay apart
 * (a kernel reading y's sum must run between them), and so do `y` and
 * `y.T + y` (y read through another view). */
static void test_multi_output(void) {
    const int64_t N = 6;
    for (int kase = 0; kase < 3; kase++) {
        builder b = start(CJ_FLOAT32);
        int x = param(&b, s2(N, N)), y = un(&b, CJ_OP_EXP, x), outs[3], n;
        if (kase == 0) {
            outs[0] = binc(&b, CJ_OP_ADD, y, 1.0), outs[1] = binc(&b, CJ_OP_MUL, y, 2.0), outs[2] = un(&b, CJ_OP_TANH, y);
            n = 3;
        } else if (kase == 1) {
            outs[0] = y, outs[1] = bin(&b, CJ_OP_MUL, y, bcast(&b, reduce(&b, CJ_OP_REDUCE_SUM, y, 3u), s2(N, N)));
            n = 2;
        } else {
            outs[0] = y, outs[1] = bin(&b, CJ_OP_ADD, transpose2(&b, y), y);
            n = 2;
        }
        outputs(&b, outs, n);
        cj_plan p = fuse_only(b.g, false);
        int exps = 0;
        for (int k = 0; k < p.nkernels; k++) exps += count_ops(&p.kernels[k], CJ_OP_EXP);
        CHECK_MSG(exps == 1, "case %d: exp computed %d times", kase, exps);
        if (kase == 0) {
            CHECK_MSG(p.nkernels == 1 && p.kernels[0].nalso == 2, "%d kernels", p.nkernels);
        } else {
            /* y's kernel, (the sum's,) and the last, reading y's output buffer */
            CHECK_MSG(p.nkernels == (kase == 1 ? 3 : 2), "case %d: %d kernels", kase, p.nkernels);
            const cj_kernel *last = &p.kernels[p.nkernels - 1];
            CHECK(p.kernels[0].out_buffer == p.output_buffer[0] && p.kernels[0].nalso == 0);
            CHECK(kernel_reads(last, p.output_buffer[0]) && last->out_buffer == p.output_buffer[1]);
            if (kase == 2) CHECK(loads(last) == 2);
        }
        cj_plan_free(&p);
        cj_lowered l = lower_checked("multi-output", &b);
        cj_lowered_free(&l);
        cj_graph_free(b.g);
    }
}

/* ---- a long chain on a small stack --------------------------------------------
 * sin applied n times: kernels of 33 sin (cost 4 each: a root once past
 * 128), fused on a thread with 256 KiB of stack (a recursion of a frame per
 * node overflows it in a few thousand nodes).  The fuser's work is counted
 * as its calls to cj_op_kind (every visit of a node asks for its kind): it
 * must grow linearly, at most a fixed number of calls per node. */

typedef struct {
    int n;
    long calls;
    int kernels;
} chain_job;

static void *fuse_chain(void *arg) {
    chain_job *job = arg;
    builder b = start(CJ_FLOAT32);
    int y = param(&b, s1(4));
    for (int i = 0; i < job->n; i++) y = un(&b, CJ_OP_SIN, y);
    outputs(&b, &y, 1);
    long before = op_kind_calls;
    cj_plan p = fuse_only(b.g, false);
    job->calls = op_kind_calls - before;
    job->kernels = p.nkernels;
    cj_plan_free(&p);
    cj_graph_free(b.g);
    return NULL;
}

static void run_on_small_stack(chain_job *job) {
    pthread_attr_t attr;
    pthread_t thread;
    pthread_attr_init(&attr);
    CHECK(pthread_attr_setstacksize(&attr, 256 * 1024) == 0);
    CHECK(pthread_create(&thread, &attr, fuse_chain, job) == 0 && pthread_join(thread, NULL) == 0);
    pthread_attr_destroy(&attr);
}

static void test_long_chain(void) {
    CHECK(cj_op_cost(CJ_OP_SIN) == 4 && CJ_KERNEL_MAX_COST == 128);
    chain_job small = {.n = 10000}, large = {.n = 100000};
    run_on_small_stack(&small);
    run_on_small_stack(&large);
    CHECK_MSG(small.kernels == (small.n + 32) / 33 && large.kernels == (large.n + 32) / 33, "%d and %d kernels",
              small.kernels, large.kernels);
    double per_node = (double)large.calls / large.n;
    printf("long chain: %ld op-table look-ups for 10,000 nodes, %ld for 100,000 (%.1f a node)\n", small.calls,
           large.calls, per_node);
    CHECK_MSG(per_node <= 16 && large.calls <= 11 * small.calls, "%ld and %ld look-ups", small.calls, large.calls);
}

/* ---- generated: random graphs ---------------------------------------------------
 * Each lowered plan: check_plan's promises; every kernel stores its root
 * node's value, and its expressions are in order (arguments before use);
 * every temporary is written by a kernel before any kernel reads it; and
 * the plan run by the interpreter gives the graph's values. */
static void test_random_graphs(int count) {
    int kernels = 0;
    for (int i = 0; i < count; i++) {
        builder b = random_graph(1000 + i, false);
        char what[64];
        snprintf(what, sizeof what, "random graph %d", i);
        cj_lowered l = lower_checked(what, &b);
        const cj_plan *p = &l.plan;
        kernels += p->nkernels;
        int *written = malloc(sizeof(int) * ((size_t)p->nbuffers + 1));
        if (!written) die("out of memory");
        for (int bi = 0; bi < p->nbuffers; bi++) written[bi] = p->buffers[bi].kind == CJ_BUF_PARAM ? -1 : p->nkernels;
        for (int k = 0; k < p->nkernels; k++) {
            const cj_kernel *K = &p->kernels[k];
            CHECK_MSG(K->nexprs >= 1 && p->buffers[K->out_buffer].node == K->root_node, "%s: kernel %d", what, k);
            for (int e = 0; e < K->nexprs; e++) {
                const cj_expr *x = &K->exprs[e];
                for (int a = 0; x->kind == CJ_EX_OP && a < x->nargs; a++)
                    CHECK_MSG(x->args[a] >= 0 && x->args[a] < e, "%s: kernel %d expr %d", what, k, e);
                if (cj_expr_reads(x))
                    CHECK_MSG(written[x->buffer] < k, "%s: kernel %d reads buf%d before it is written", what, k, x->buffer);
            }
            for (int a = -1; a < K->nalso; a++) {
                int bi = a < 0 ? K->out_buffer : K->also[a].buffer;
                if (written[bi] > k) written[bi] = k;
            }
        }
        for (int bi = 0; bi < p->nbuffers; bi++)
            CHECK_MSG(written[bi] < p->nkernels, "%s: buf%d never written", what, bi);
        free(written);
        cj_lowered_free(&l);
        cj_graph_free(b.g);
    }
    printf("random graphs: %d lowered, run and compared (%d kernels)\n", count, kernels);
}

int main(void) {
    unsetenv("CJIT_PASSES");
    unsetenv("CJIT_DUMP");
    test_elementwise_chain();
    test_reduction_consumers();
    test_recompute_or_store();
    test_one_element_chain();
    test_multi_output();
    test_long_chain();
    test_random_graphs(300);
    printf("test_fuse: %d checks, %d failures\n", checks, failures);
    return failures != 0;
}
