/* test_memplan.c - the memory plan (memplan.c, memorder.c, blockmem.c) on
 * graphs built with the graph.h builders, against ARCHITECTURE.md ("Memory
 * plan", "Block storage"):
 *
 *   - every plan (check_plan in plan_check.h): no two temporaries live at
 *     once share a byte (every pair), the arena is the brute-force highest
 *     end of what is live at each group, peak = arguments + outputs + arena,
 *     a host outlives what lives in it, alias_bytes is what lives in the
 *     donated arguments;
 *   - the peak of plans whose optimum is known: three matmul results live at
 *     once take three slots; with every temporary of one size the arena is
 *     exactly the most temporaries live at once (an interval graph);
 *   - in-place updates: tanh(x @ w) takes the matmul's bytes, a chain of
 *     layers needs two slots; not when the input is read later;
 *   - donated arguments: an update written over its argument, outputs and
 *     temporaries placed in an argument after its last read;
 *   - block storage: copies x align64(block rows x row bytes), the block
 *     and copies as documented, small blocks on the stack;
 *   - generated: seeded random graphs (random donations) lowered, their
 *     plans checked, and run by the plan interpreter with every buffer at its
 *     planned offset: the graph's values.
 *
 *   make -C tests/c check     (or: make -C tests/c build/test_memplan) */
#include "plan_check.h"

#include "blockmem.h"

/* Lowers, checks the plan and its values (random parameters). */
static cj_lowered lower_run(const char *what, builder *b, const cj_compile_options *o) {
    cj_lowered l = lower_or_die(what, b, o);
    check_plan(what, &l.plan);
    double **params = random_params(l.graph, -1, 1);
    CHECK_MSG(plan_matches_graph(what, &l, params), "%s: values differ", what);
    free_params(l.graph, params);
    return l;
}

/* The most arena temporaries live at one group, and their aligned bytes. */
static int most_live(const cj_plan *p, int64_t *bytes) {
    int most = 0;
    *bytes = 0;
    for (int g = 0; g < p->ngroups; g++) {
        int n = 0;
        int64_t s = 0;
        for (int b = 0; b < p->nbuffers; b++) {
            const cj_buffer *B = &p->buffers[b];
            if (in_arena(B) && B->first_use <= g && g <= B->last_use) n++, s += align64(cj_buffer_bytes(B));
        }
        if (n > most) most = n;
        if (s > *bytes) *bytes = s;
    }
    return most;
}

/* m1 = x@x, m2 = m1@m1, m3 = m2@m1, y = m3@m3: at m3's group m1, m2 and
 * m3 are live, so three slots, and the peak is x, y and three slots. */
static void test_three_live(void) {
    const int64_t N = 20, bytes = N * N * 4;
    builder b = start(CJ_FLOAT32);
    int x = param(&b, s2(N, N));
    int m1 = matmul(&b, x, x), m2 = matmul(&b, m1, m1), m3 = matmul(&b, m2, m1), y = matmul(&b, m3, m3);
    outputs(&b, &y, 1);
    cj_lowered l = lower_run("three live", &b, NULL);
    const cj_plan *p = &l.plan;
    int64_t live;
    CHECK_MSG(most_live(p, &live) == 3 && p->arena_bytes == 3 * align64(bytes) && live == p->arena_bytes,
              "arena %lld", (long long)p->arena_bytes);
    CHECK(p->peak_bytes == 2 * bytes + 3 * align64(bytes) && p->peak_kernel == 2);
    cj_lowered_free(&l);
    cj_graph_free(b.g);
}

/* In place: each layer's tanh(h @ w) writes over the matmul's result as it
 * reads it (the matmul's epilogue in its group), so a chain of layers
 * needs two slots; when the matmul's result is read again later, the tanh
 * gets bytes of its own. */
static void test_in_place(void) {
    const int64_t N = 16, bytes = N * N * 4;
    builder b = start(CJ_FLOAT32);
    int h = param(&b, s2(N, N)), w = param(&b, s2(N, N)), t[4], a[4];
    for (int i = 0; i < 4; i++) h = a[i] = un(&b, CJ_OP_TANH, t[i] = matmul(&b, h, w));
    int y = matmul(&b, h, w);
    outputs(&b, &y, 1);
    cj_lowered l = lower_run("layers", &b, NULL);
    const cj_plan *p = &l.plan;
    /* (simplify keeps node ids here: nothing to drop or merge) */
    CHECK(l.graph->nnodes == b.g->nnodes);
    for (int i = 0; i < 4; i++) {
        int tb = buffer_of_node(p, t[i]), ab = buffer_of_node(p, a[i]);
        CHECK_MSG(tb >= 0 && ab >= 0 && p->buffers[ab].alias_of == tb && p->buffers[ab].offset == 0,
                  "layer %d: tanh in buf%d", i, ab >= 0 ? p->buffers[ab].alias_of : -9);
    }
    CHECK_MSG(p->arena_bytes == 2 * align64(bytes), "arena %lld", (long long)p->arena_bytes);
    cj_lowered_free(&l);
    cj_graph_free(b.g);

    /* t read again after the tanh: no update in place */
    b = start(CJ_FLOAT32);
    int x = param(&b, s2(N, N));
    w = param(&b, s2(N, N));
    int t0 = matmul(&b, x, w), a0 = un(&b, CJ_OP_TANH, t0);
    y = bin(&b, CJ_OP_ADD, matmul(&b, a0, w), t0);
    outputs(&b, &y, 1);
    l = lower_run("read later", &b, NULL);
    int ab = buffer_of_node(&l.plan, a0);
    CHECK(ab >= 0 && l.plan.buffers[ab].alias_of == -1 && l.plan.arena_bytes == 2 * align64(bytes));
    cj_lowered_free(&l);
    /* -memplan: every temporary its own bytes, nothing in place */
    setenv("CJIT_PASSES", "-memplan", 1);
    l = lower_run("read later -memplan", &b, NULL);
    unsetenv("CJIT_PASSES");
    for (int bi = 0; bi < l.plan.nbuffers; bi++) CHECK(l.plan.buffers[bi].alias_of == -1);
    cj_lowered_free(&l);
    cj_graph_free(b.g);
}

/* Donated arguments.  w - 0.1 * g with w donated: the output is w's memory,
 * written in place: no output bytes, alias_bytes all of w.  A chain of
 * matmuls from a donated w: the output is written into w after w's last
 * read, and a temporary first written after that read may live in w too. */
static void test_donation(void) {
    const int64_t N = 16, bytes = N * N * 4;
    builder b = start(CJ_FLOAT32);
    int w = param(&b, s2(N, N)), g = param(&b, s2(N, N));
    int y = bin(&b, CJ_OP_SUB, w, binc(&b, CJ_OP_MUL, g, 0.1));
    outputs(&b, &y, 1);
    const bool donate_w[2] = {true, false};
    cj_compile_options o = {.donated = donate_w, .ndonated = 2};
    cj_lowered l = lower_run("update", &b, &o);
    const cj_buffer *out = &l.plan.buffers[l.plan.output_buffer[0]];
    CHECK(out->alias_of >= 0 && l.plan.buffers[out->alias_of].kind == CJ_BUF_PARAM && l.plan.buffers[out->alias_of].slot == 0);
    CHECK(l.plan.output_bytes == 0 && l.plan.alias_bytes == bytes && l.plan.peak_bytes == 2 * bytes);
    cj_lowered_free(&l);
    cj_graph_free(b.g);

    /* t1 = w@w, t2 = t1@t1, t3 = t2@t2, y = t3@t3 */
    b = start(CJ_FLOAT32);
    w = param(&b, s2(N, N));
    int t1 = matmul(&b, w, w), t2 = matmul(&b, t1, t1), t3 = matmul(&b, t2, t2);
    y = matmul(&b, t3, t3);
    outputs(&b, &y, 1);
    o.ndonated = 1;
    l = lower_run("after the last read", &b, &o);
    const cj_plan *p = &l.plan;
    int in_w = 0;
    for (int bi = 0; bi < p->nbuffers; bi++) in_w += p->buffers[bi].alias_of >= 0 && p->buffers[p->buffers[bi].alias_of].kind == CJ_BUF_PARAM;
    /* y in w (from its group, 3), t2 in w too (groups 1-2, after w's last read at 0) */
    out = &p->buffers[p->output_buffer[0]];
    CHECK_MSG(out->alias_of >= 0 && out->first_use == 3 && in_w == 2, "output in buf%d from %d, %d in w", out->alias_of,
              out->first_use, in_w);
    int b2 = buffer_of_node(p, t2);
    CHECK(b2 >= 0 && p->buffers[b2].alias_of == out->alias_of);
    /* the arena: t1 (0-1) and t3 (2-3) share one slot */
    CHECK_MSG(p->arena_bytes == align64(bytes) && p->peak_bytes == bytes + align64(bytes) && p->alias_bytes == bytes,
              "arena %lld, peak %lld", (long long)p->arena_bytes, (long long)p->peak_bytes);
    cj_lowered_free(&l);
    /* not donated: the output has bytes of its own, and the arena two slots */
    l = lower_run("not donated", &b, NULL);
    CHECK(l.plan.alias_bytes == 0 && l.plan.peak_bytes == 2 * bytes + 2 * align64(bytes));
    cj_lowered_free(&l);
    cj_graph_free(b.g);
}

/* The buffer of the first kernel of p whose root applies op, or -1. */
static int buffer_by_op(const cj_lowered *l, cj_op op) {
    for (int k = 0; k < l->plan.nkernels; k++)
        if (l->graph->nodes[l->plan.kernels[k].root_node].op == op) return l->plan.kernels[k].out_buffer;
    return -1;
}

/* Block storage: v = tanh(sin(x)) + 1 of x (R, C) (cost 9, read by three
 * stages: stored), its row sum and row maximum and the result v * sum +
 * max: one group of four stages over R rows, in which v and the two row
 * vectors are group-local; a small argument z is donated (z + 1 written
 * over it), so the plan wants block storage.  Each group-local value takes
 * copies x align64(block rows x row bytes) when that is less than its
 * array: copies the threads when the group has 65536 points or more (else
 * 1), the block its 128 KiB of rows, no larger than a thread's chunk (a
 * quarter of its rows, rounded up to 16 past 64) when split; a block of at
 * most 4 KiB lives on the stack (no arena bytes). */
static void test_block_storage(void) {
    const int64_t C = 64;
    const int64_t rows[3] = {4096, 4096, 64};
    const int threads[3] = {2, 1, 2};
    for (int c = 0; c < 3; c++) {
        const int64_t R = rows[c];
        builder b = start(CJ_FLOAT32);
        int x = param(&b, s2(R, C)), z = param(&b, s1(4));
        int v = binc(&b, CJ_OP_ADD, un(&b, CJ_OP_TANH, un(&b, CJ_OP_SIN, x)), 1.0);
        int s = reduce(&b, CJ_OP_REDUCE_SUM, v, 2u), m = reduce(&b, CJ_OP_REDUCE_MAX, v, 2u);
        int y = bin(&b, CJ_OP_ADD, bin(&b, CJ_OP_MUL, v, rows_as_matrix(&b, s, R, C)), rows_as_matrix(&b, m, R, C));
        int outs[2] = {y, binc(&b, CJ_OP_ADD, z, 1.0)};
        outputs(&b, outs, 2);
        const bool donate[2] = {false, true};
        cj_compile_options o = {.donated = donate, .ndonated = 2, .threads = threads[c]};
        cj_lowered l = lower_or_die("blocks", &b, &o);
        const cj_plan *p = &l.plan;
        check_plan("blocks", p);
        int g, gy = -1;
        for (int k = 0; k < p->nkernels; k++)
            if (p->kernels[k].out_buffer == p->output_buffer[0]) gy = group_of(p, k);
        CHECK_MSG(gy >= 0 && p->groups[gy].count == 4, "case %d: the group of four stages", c);
        if (gy < 0) continue;
        g = gy;
        int64_t points = 4 * R * C;
        int copies = points >= CJ_PARALLEL_MIN_POINTS ? threads[c] : 1;
        int64_t block = 128 * 1024 / (C * 4), per_thread = (R + copies - 1) / copies;
        if (block > R) block = R;
        if (copies > 1) {
            int64_t chunk = (R + 4 * copies - 1) / (4 * copies);
            if (chunk >= 64) chunk = (chunk + 15) / 16 * 16;
            if (chunk < block) block = chunk;
        }
        if (block > per_thread) block = per_thread;
        int64_t arena_want = 0;
        bool any = false;
        const int bufs[3] = {buffer_by_op(&l, CJ_OP_ADD), buffer_by_op(&l, CJ_OP_REDUCE_SUM), buffer_by_op(&l, CJ_OP_REDUCE_MAX)};
        for (int j = 0; j < 3; j++) {
            if (bufs[j] < 0 || p->buffers[bufs[j]].kind != CJ_BUF_TEMP) {
                CHECK_MSG(false, "case %d: value %d is no temporary", c, j);
                continue;
            }
            const cj_buffer *B = &p->buffers[bufs[j]];
            int64_t stride = align64(block * (B->nbytes / R)), want = copies * stride;
            bool stack = stride <= CJ_BLOCK_STACK_MAX;
            if (want >= B->nbytes) want = 0, stack = false; /* no saving: the whole array */
            any |= want > 0;
            CHECK_MSG(B->block_storage == want && B->block_on_stack == stack,
                      "case %d, buf%d: block storage %lld%s, expected %lld%s", c, bufs[j], (long long)B->block_storage,
                      B->block_on_stack ? " on the stack" : "", (long long)want, stack ? " on the stack" : "");
            if (want > 0) CHECK(cj_block_stride(p, &p->groups[g], B) == stride);
            arena_want += stack ? 0 : align64(want > 0 ? want : B->nbytes);
        }
        CHECK_MSG(any == (c < 2), "case %d: block storage %s", c, any ? "given" : "not given"); /* 64 rows: no saving */
        CHECK_MSG(p->groups[g].local_copies == (any ? copies : 0) && p->groups[g].local_block == (any ? block : 0),
                  "case %d: %d copies of %lld rows, expected %d of %lld", c, p->groups[g].local_copies,
                  (long long)p->groups[g].local_block, copies, (long long)block);
        CHECK_MSG(p->arena_bytes == arena_want, "case %d: arena %lld, expected %lld", c, (long long)p->arena_bytes,
                  (long long)arena_want);
        cj_lowered_free(&l);
        /* without donation, or with no threads: no block storage */
        for (int plain = 0; plain < 2; plain++) {
            cj_compile_options q = {.donated = plain ? NULL : donate, .ndonated = plain ? 0 : 2,
                                  .threads = plain ? threads[c] : 0};
            l = lower_run("no blocks", &b, &q);
            for (int bi = 0; bi < l.plan.nbuffers; bi++) CHECK(l.plan.buffers[bi].block_storage == 0);
            for (int gi = 0; gi < l.plan.ngroups; gi++) CHECK(l.plan.groups[gi].local_block == 0);
            cj_lowered_free(&l);
        }
        cj_graph_free(b.g);
    }
}

/* ---- generated ------------------------------------------------------------------------- */

/* Random graphs with every value one size: the arena is exactly the most
 * temporaries live at once (placing by first use is optimal on
 * intervals, and memplan tries that order when greedy by size leaves
 * holes), so the peak is arguments + outputs + that many slots.  Then
 * graphs of all kinds with random donations: check_plan and the values. */
static void test_random_graphs(int count) {
    int donated_plans = 0, in_donors = 0;
    for (int i = 0; i < count; i++) {
        char what[64];
        snprintf(what, sizeof what, "uniform graph %d", i);
        builder b = random_graph(9000 + i, true);
        cj_lowered l = lower_run(what, &b, NULL);
        int64_t live;
        most_live(&l.plan, &live);
        CHECK_MSG(l.plan.arena_bytes == live, "%s: arena %lld, at most %lld bytes live at once", what,
                  (long long)l.plan.arena_bytes, (long long)live);
        cj_lowered_free(&l);
        cj_graph_free(b.g);

        snprintf(what, sizeof what, "donating graph %d", i);
        b = random_graph(20000 + i, false);
        bool donate[3];
        for (int j = 0; j < 3; j++) donate[j] = rng_int(2);
        cj_compile_options o = {.donated = donate, .ndonated = 3};
        l = lower_run(what, &b, &o);
        donated_plans += l.plan.alias_bytes > 0;
        for (int bi = 0; bi < l.plan.nbuffers; bi++)
            in_donors += l.plan.buffers[bi].alias_of >= 0 && l.plan.buffers[l.plan.buffers[bi].alias_of].kind == CJ_BUF_PARAM;
        cj_lowered_free(&l);
        cj_graph_free(b.g);
    }
    printf("random graphs: %d of one size, %d with donations (%d reusing them, %d buffers in donated arguments)\n",
           count, count, donated_plans, in_donors);
    CHECK_MSG(donated_plans >= count / 4, "only %d plans reuse donated bytes", donated_plans);
}

int main(void) {
    unsetenv("CJIT_PASSES");
    unsetenv("CJIT_DUMP");
    test_three_live();
    test_in_place();
    test_donation();
    test_block_storage();
    test_random_graphs(300);
    printf("test_memplan: %d checks, %d failures\n", checks, failures);
    return failures != 0;
}
