/* test_group.c - kernel groups (group.c) on graphs built with the graph.h
 * builders, against ARCHITECTURE.md ("Kernel groups"):
 *
 *   - row stages share a group: softmax, log-softmax and layer norm are one
 *     group of three stages each;
 *   - a matmul leads a group with its epilogue (even one with a row
 *     reduction) and never follows another stage;
 *   - no group across a dependence that forbids it: a stage reading an
 *     earlier stage's value through a transpose, a column or full
 *     reduction (loop 0 reduced), stages over other rows;
 *   - a block of rows is about 128 KiB of the widest row, all rows for a
 *     gemm call;
 *   - generated: seeded random graphs, fused and grouped, keep group.c's
 *     rule stage by stage (check_groups in plan_check.h: every stage of a
 *     group may be one, and no group stops before a kernel that could have
 *     joined it), and lowered with CJIT_PASSES=-group every group is one
 *     kernel.
 *
 *   make -C tests/c check     (or: make -C tests/c build/test_group) */
#include "plan_check.h"

/* The groups of b's graph, fused and grouped (no memplan), as a string of
 * each group's stages' root ops: "reduce_max+reduce_sum+div|exp". */
static void describe_groups(const cj_plan *p, char *out, size_t cap) {
    size_t n = 0;
    out[0] = 0;
    for (int g = 0; g < p->ngroups; g++)
        for (int k = p->groups[g].first; k < p->groups[g].first + p->groups[g].count; k++) {
            const char *op = cj_op_name(p->graph->nodes[p->kernels[k].root_node].op);
            n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s%s", k == p->groups[g].first ? (g ? "|" : "") : "+", op);
        }
}

/* Fuses and groups b's graph, checks group.c's rule on it, and compares the
 * grouping with `expect`; also lowers it (memplan's promises). */
static void expect_groups(const char *what, builder *b, const char *expect) {
    cj_plan p = fuse_only(b->g, true);
    check_groups(what, &p);
    char got[512];
    describe_groups(&p, got, sizeof got);
    CHECK_MSG(strcmp(got, expect) == 0, "%s: groups %s, expected %s", what, got, expect);
    cj_plan_free(&p);
    cj_lowered l = lower_or_die(what, b, NULL);
    check_plan(what, &l.plan);
    cj_lowered_free(&l);
}

/* Softmax, log-softmax and layer norm over rows: three stages, one group. */
static void test_row_stages(void) {
    const int64_t R = 32, C = 48;
    for (int kase = 0; kase < 3; kase++) {
        builder b = start(CJ_FLOAT32);
        int x = param(&b, s2(R, C)), y;
        const char *expect;
        if (kase < 2) {
            int m = reduce(&b, CJ_OP_REDUCE_MAX, x, 2u);
            int d = bin(&b, CJ_OP_SUB, x, rows_as_matrix(&b, m, R, C));
            int s = reduce(&b, CJ_OP_REDUCE_SUM, un(&b, CJ_OP_EXP, d), 2u);
            if (kase == 0) {
                y = bin(&b, CJ_OP_DIV, un(&b, CJ_OP_EXP, d), rows_as_matrix(&b, s, R, C));
                expect = "reduce_max+reduce_sum+div";
            } else {
                y = bin(&b, CJ_OP_SUB, d, rows_as_matrix(&b, un(&b, CJ_OP_LOG, s), R, C));
                expect = "reduce_max+reduce_sum+sub";
            }
        } else {
            int mean = binc(&b, CJ_OP_MUL, reduce(&b, CJ_OP_REDUCE_SUM, x, 2u), 1.0 / C);
            int d = bin(&b, CJ_OP_SUB, x, rows_as_matrix(&b, mean, R, C));
            int var = binc(&b, CJ_OP_MUL, reduce(&b, CJ_OP_REDUCE_SUM, bin(&b, CJ_OP_MUL, d, d), 2u), 1.0 / C);
            int inv = un(&b, CJ_OP_RECIPROCAL, un(&b, CJ_OP_SQRT, binc(&b, CJ_OP_ADD, var, 1e-5)));
            y = bin(&b, CJ_OP_MUL, d, rows_as_matrix(&b, inv, R, C));
            expect = "reduce_sum+reduce_sum+mul";
        }
        outputs(&b, &y, 1);
        expect_groups(kase == 0 ? "softmax" : kase == 1 ? "log-softmax" : "layer norm", &b, expect);
        /* one block: the rows (48 floats) fit 128 KiB many times */
        cj_plan p = fuse_only(b.g, true);
        CHECK(p.ngroups == 1 && p.groups[0].rows == R && p.groups[0].block == R);
        cj_plan_free(&p);
        cj_graph_free(b.g);
    }
}

/* A matmul leads its epilogue: exp(x) then tanh(exp(x) @ w + bias) is
 * (exp) (matmul + add); a second layer is a group of its own; an epilogue
 * with a row reduction, tanh(h) * sum(tanh(h), rows), is still one group. */
static void test_matmul_leads(void) {
    const int64_t B = 16, D = 24, H = 8;
    builder b = start(CJ_FLOAT32);
    int x = param(&b, s2(B, D)), w = param(&b, s2(D, H)), bias = param(&b, s1(H)), w2 = param(&b, s2(H, H));
    int h = un(&b, CJ_OP_TANH, bin(&b, CJ_OP_ADD, matmul(&b, un(&b, CJ_OP_EXP, x), w), bcast(&b, bias, s2(B, H))));
    int h2 = matmul(&b, h, w2);
    int t = un(&b, CJ_OP_TANH, h2);
    int y = bin(&b, CJ_OP_MUL, t, rows_as_matrix(&b, reduce(&b, CJ_OP_REDUCE_SUM, t, 2u), B, H));
    outputs(&b, &y, 1);
    expect_groups("two layers", &b, "exp|matmul+tanh|matmul+reduce_sum+mul");
    cj_graph_free(b.g);

    /* a matmul never follows a stage: exp(x) @ w with x's rows, then a row stage */
    b = start(CJ_FLOAT32);
    x = param(&b, s2(B, D)), w = param(&b, s2(D, D));
    int e = un(&b, CJ_OP_EXP, x);
    int outs[2] = {e, binc(&b, CJ_OP_ADD, matmul(&b, e, w), 1.0)};
    outputs(&b, outs, 2);
    expect_groups("matmul after a stage", &b, "exp|matmul+add");
    cj_graph_free(b.g);
}

/* No group across a dependence that forbids it. */
static void test_forbidden(void) {
    const int64_t N = 12;
    /* t = x @ w; t + 1 reads t by rows: one group; t.T + 1 reads t's
     * columns, which other row blocks write: two */
    for (int transposed = 0; transposed < 2; transposed++) {
        builder b = start(CJ_FLOAT32);
        int x = param(&b, s2(N, N)), w = param(&b, s2(N, N));
        int t = matmul(&b, x, w);
        int y = binc(&b, CJ_OP_ADD, transposed ? transpose2(&b, t) : t, 1.0);
        outputs(&b, &y, 1);
        expect_groups(transposed ? "transposed read" : "row read", &b, transposed ? "matmul|add" : "matmul+add");
        cj_graph_free(b.g);
    }
    /* softmax over columns: the reductions' loop 0 accumulates, so neither
     * leads nor joins; the quotient leads a group of its own */
    builder b = start(CJ_FLOAT32);
    int x = param(&b, s2(N, 2 * N));
    int m = reduce(&b, CJ_OP_REDUCE_MAX, x, 1u);
    int d = bin(&b, CJ_OP_SUB, x, bcast(&b, m, s2(N, 2 * N)));
    int s = reduce(&b, CJ_OP_REDUCE_SUM, un(&b, CJ_OP_EXP, d), 1u);
    int y = bin(&b, CJ_OP_DIV, un(&b, CJ_OP_EXP, d), bcast(&b, s, s2(N, 2 * N)));
    outputs(&b, &y, 1);
    expect_groups("column softmax", &b, "reduce_max|reduce_sum|div");
    cj_graph_free(b.g);
    /* a full sum, then x / sum: two groups */
    b = start(CJ_FLOAT32);
    x = param(&b, s2(N, N));
    y = bin(&b, CJ_OP_DIV, x, bcast(&b, reduce(&b, CJ_OP_REDUCE_SUM, un(&b, CJ_OP_EXP, x), 3u), s2(N, N)));
    outputs(&b, &y, 1);
    expect_groups("full sum", &b, "reduce_sum|div");
    cj_graph_free(b.g);
    /* stages over other rows: a (N, N) row sum, then an elementwise stage
     * over (2N, N) reading it through a concatenate's rows */
    b = start(CJ_FLOAT32);
    x = param(&b, s2(N, N));
    int x2 = param(&b, s2(2 * N, N));
    int r = reduce(&b, CJ_OP_REDUCE_SUM, x, 2u);
    int outs[2] = {binc(&b, CJ_OP_MUL, r, 2.0), bin(&b, CJ_OP_MUL, x2, bcast(&b, reshape(&b, r, s2(1, N)), s2(2 * N, N)))};
    outputs(&b, outs, 2);
    cj_plan p = fuse_only(b.g, true);
    check_groups("other rows", &p);
    /* the row sum and its double share rows (N); the (2N, N) product does not */
    int k2 = -1;
    for (int k = 0; k < p.nkernels; k++)
        if (p.kernels[k].dims[0] == 2 * N) k2 = k;
    CHECK(k2 >= 0 && p.groups[group_of(&p, k2)].count == 1);
    cj_plan_free(&p);
    cj_graph_free(b.g);
}

/* Marks matmul kernels as gemm calls, as cj_blas_plan would. */
static void mark_matmuls(cj_plan *p) {
    for (int k = 0; k < p->nkernels; k++) p->kernels[k].gemm.on = is_matmul_kernel(p, &p->kernels[k]);
}
/* A backend that marks the matmuls and makes no code. */
static const cj_backend marking = {.name = "test", .mark_library_calls = mark_matmuls};

/* The block: 128 KiB over the widest row any stage touches, at least 1,
 * at most the rows; a gemm-led group takes all its rows. */
static void test_blocks(void) {
    const int64_t rows[3] = {4096, 300, 64}, cols[3] = {4, 1000, 40000};
    for (int c = 0; c < 3; c++) {
        builder b = start(CJ_FLOAT32);
        int x = param(&b, s2(rows[c], cols[c]));
        int s = reduce(&b, CJ_OP_REDUCE_SUM, x, 2u);
        int y = bin(&b, CJ_OP_MUL, x, rows_as_matrix(&b, s, rows[c], cols[c]));
        outputs(&b, &y, 1);
        cj_plan p = fuse_only(b.g, true);
        int64_t want = 128 * 1024 / (cols[c] * 4);
        if (want < 1) want = 1;
        if (want > rows[c]) want = rows[c];
        CHECK_MSG(p.ngroups == 1 && p.groups[0].block == want, "%lld x %lld: block %lld, expected %lld",
                  (long long)rows[c], (long long)cols[c], (long long)p.groups[0].block, (long long)want);
        cj_plan_free(&p);
        cj_graph_free(b.g);
    }
    builder b = start(CJ_FLOAT32);
    int x = param(&b, s2(512, 64)), w = param(&b, s2(64, 64));
    int y = binc(&b, CJ_OP_MAXIMUM, matmul(&b, x, w), 0.0);
    outputs(&b, &y, 1);
    for (int marked = 0; marked < 2; marked++) {
        cj_compile_options o = {.backend = marked ? &marking : NULL};
        cj_lowered l = lower_or_die("gemm block", &b, &o);
        check_plan("gemm block", &l.plan);
        CHECK_MSG(l.plan.ngroups == 1 && l.plan.groups[0].block == (marked ? 512 : 128 * 1024 / (64 * 4)), "block %lld",
                  (long long)l.plan.groups[0].block);
        cj_lowered_free(&l);
    }
    cj_graph_free(b.g);
}

/* ---- generated ----------------------------------------------------------------------- */

static void test_random_graphs(int count) {
    int multi = 0, groups = 0, kernels = 0;
    for (int i = 0; i < count; i++) {
        builder b = random_graph(5000 + i, false);
        char what[64];
        snprintf(what, sizeof what, "random graph %d", i);
        cj_plan p = fuse_only(b.g, true);
        multi += check_groups(what, &p);
        groups += p.ngroups;
        kernels += p.nkernels;
        cj_plan_free(&p);
        if (i % 4 == 0) {
            setenv("CJIT_PASSES", "-group", 1);
            cj_lowered l = lower_or_die(what, &b, NULL);
            unsetenv("CJIT_PASSES");
            CHECK_MSG(l.plan.ngroups == l.plan.nkernels, "%s -group: %d groups of %d kernels", what, l.plan.ngroups,
                      l.plan.nkernels);
            check_plan(what, &l.plan);
            cj_lowered_free(&l);
        }
        cj_graph_free(b.g);
    }
    printf("random graphs: %d fused and grouped: %d kernels in %d groups, %d of two stages or more\n", count, kernels,
           groups, multi);
    /* the generator must exercise the rule: some groups of several stages */
    CHECK_MSG(multi >= count / 4, "only %d groups of several stages", multi);
}

int main(void) {
    unsetenv("CJIT_PASSES");
    unsetenv("CJIT_DUMP");
    test_row_stages();
    test_matmul_leads();
    test_forbidden();
    test_blocks();
    test_random_graphs(400);
    printf("test_group: %d checks, %d failures\n", checks, failures);
    return failures != 0;
}
