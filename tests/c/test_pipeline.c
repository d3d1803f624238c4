/* test_pipeline.c - the compile pipeline as one list (pipeline.c), linked
 * without LLVM (a backend that marks matmuls and makes no code):
 *
 *   - the list: its names in order (cj_pipeline_text, the docs' flow), when
 *     each step runs, the CJIT_PASSES switches it names;
 *   - a use stops where its options say, having run the list's steps in
 *     the list's order: as_text after simplify, memory_budget's oracle
 *     after memplan, a lowering after collapse; what a prefix leaves is
 *     what the whole lowering leaves at that step (the graph as_text shows
 *     is the compile's);
 *   - the options: made once; the backend's threads asked only when
 *     memplan will run; a loop body's options (no donation, no blocks);
 *     the codegen step refuses a backend without code;
 *   - group's result reaches memplan as data: with the join partners
 *     group.c recorded cleared, memplan joins nothing;
 *   - generated: seeded random graphs with random donations: the oracle's
 *     peak (cj_plan_peak) is the peak of the lowering with the same
 *     options, and as_text's prefix leaves the whole lowering's graph.
 *
 *   make -C tests/c check     (or: make -C tests/c build/test_pipeline) */
#include "plan_check.h"

#include "group.h"

/* Marks matmul kernels as library calls, as cj_blas_plan would with a BLAS. */
static void mark_matmuls(cj_plan *p) {
    for (int k = 0; k < p->nkernels; k++)
        p->kernels[k].gemm.on = p->kernels[k].root_node >= 0 &&
                                p->graph->nodes[p->kernels[k].root_node].op == CJ_OP_MATMUL;
}

static int threads_asked;
static int four_threads(void) {
    threads_asked++;
    return 4;
}

/* A target that marks matmuls, has four threads and makes no code. */
static const cj_backend marking = {.name = "test", .mark_library_calls = mark_matmuls, .threads = four_threads};

static const char *const want_order[CJ_NSTEPS] = {"trace", "autodiff", "simplify", "fuse", "library", "loops",
                                                  "group", "memplan", "collapse", "codegen", "link", "run"};

static void test_the_list(void) {
    char *text = cj_pipeline_text();
    CHECK_MSG(text && !strcmp(text, "trace -> autodiff -> simplify -> fuse -> library -> loops -> group -> "
                                    "memplan -> collapse -> codegen -> link -> run"),
              "the list reads %s", text ? text : "(null)");
    free(text);
    for (int i = 0; i < CJ_NSTEPS; i++) {
        CHECK_MSG(!strcmp(cj_pipeline_step_name((cj_step)i), want_order[i]), "step %d is %s", i,
                  cj_pipeline_step_name((cj_step)i));
        const char *when = cj_pipeline_step_when((cj_step)i);
        const char *want = i <= CJ_STEP_AUTODIFF ? "traced" : i == CJ_STEP_RUN ? "call" : "compile";
        CHECK_MSG(!strcmp(when, want), "step %s runs at %s", want_order[i], when);
    }
    /* the CJIT_PASSES names are the list's */
    const char *off[CJ_NSTEPS] = {[CJ_STEP_SIMPLIFY] = "cse", [CJ_STEP_FUSE] = "fuse", [CJ_STEP_GROUP] = "group",
                                  [CJ_STEP_MEMPLAN] = "memplan"};
    for (int i = 0; i < CJ_NSTEPS; i++) {
        const char *sw = cj_pipeline_step_switch((cj_step)i);
        CHECK_MSG(off[i] ? sw && !strcmp(sw, off[i]) : sw == NULL, "step %s's switch", want_order[i]);
    }
    CHECK(cj_pipeline_step_name(CJ_NSTEPS) == NULL);
}

/* x @ w, tanh, a row sum subtracted: every lowering step has work. */
static builder small_graph(void) {
    builder b = start(CJ_FLOAT32);
    int x = param(&b, s2(16, 8)), w = param(&b, s2(8, 8));
    int h = un(&b, CJ_OP_TANH, matmul(&b, x, w));
    int r = reduce(&b, CJ_OP_REDUCE_SUM, h, 2u);
    int y = bin(&b, CJ_OP_SUB, h, rows_as_matrix(&b, r, 16, 8));
    int dead = un(&b, CJ_OP_EXP, x); /* simplify drops it */
    (void)dead;
    outputs(&b, &y, 1);
    return b;
}

/* Each stop: the steps that ran are the list's, in its order, up to it. */
static void test_stops(void) {
    builder b = small_graph();
    cj_lowered whole = lower_or_die("whole", &b, &(cj_compile_options){.backend = &marking});
    char *whole_text = cj_graph_to_text(whole.graph);
    for (int last = CJ_STEP_TRACE; last <= CJ_STEP_COLLAPSE; last++) {
        cj_compile_options o = cj_compile_options_make(&marking, NULL, 0, false, (cj_step)last);
        cj_compile_state s;
        cj_error err = {0};
        CHECK_MSG(cj_pipeline_run(b.g, &o, &s, &err) == CJ_OK, "stop after %s: %s", want_order[last], err.message);
        CHECK_MSG(s.nran == last + 1, "stop after %s: %d steps ran", want_order[last], s.nran);
        for (int i = 0; i < s.nran; i++) CHECK_MSG((int)s.ran[i] == i, "step %d ran as %d", i, (int)s.ran[i]);
        CHECK(s.exe == NULL && s.lowered.source == NULL);
        if (last >= CJ_STEP_SIMPLIFY) { /* as_text's graph is the compile's */
            char *t = cj_graph_to_text(s.lowered.graph);
            CHECK_MSG(t && whole_text && !strcmp(t, whole_text), "stop after %s: another graph", want_order[last]);
            free(t);
        } else {
            CHECK(s.lowered.graph == NULL);
        }
        if (last >= CJ_STEP_MEMPLAN) CHECK(s.lowered.plan.peak_bytes == whole.plan.peak_bytes);
        if (last == CJ_STEP_COLLAPSE) check_plan("stop after collapse", &s.lowered.plan);
        cj_lowered_free(&s.lowered);
    }
    /* a compile's options on this backend stop after collapse: it has no code */
    cj_compile_options o = cj_compile_options_make(&marking, NULL, 0, false, CJ_STEP_LINK);
    CHECK(o.last == CJ_STEP_COLLAPSE);
    /* asking for codegen without a backend that makes code is refused, leaving nothing */
    o.last = CJ_STEP_CODEGEN;
    cj_compile_state s;
    cj_error err = {0};
    CHECK(cj_pipeline_run(b.g, &o, &s, &err) == CJ_ERR_VALUE && strstr(err.message, "backend"));
    CHECK(s.lowered.graph == NULL && s.lowered.plan.kernels == NULL && s.exe == NULL);
    /* cancelled: the next step does not run */
    cj_cancel cancel = true;
    o = cj_compile_options_make(&marking, NULL, 0, false, CJ_STEP_COLLAPSE);
    o.cancel = &cancel;
    memset(&err, 0, sizeof err);
    CHECK(cj_pipeline_run(b.g, &o, &s, &err) == CJ_ERR_CANCELLED && s.nran == 1 && s.lowered.graph == NULL);
    free(whole_text);
    cj_lowered_free(&whole);
    cj_graph_free(b.g);
}

static void test_options(void) {
    const bool donate[2] = {false, true};
    threads_asked = 0;
    cj_compile_options text = cj_compile_options_make(&marking, donate, 2, false, CJ_STEP_SIMPLIFY);
    CHECK_MSG(threads_asked == 0 && text.threads == 0, "as_text asked for threads"); /* no pool started */
    cj_compile_options o = cj_compile_options_make(&marking, donate, 2, true, CJ_STEP_MEMPLAN);
    CHECK(threads_asked == 1 && o.threads == 4 && o.donated == donate && o.ndonated == 2 && o.keep_objects);
    CHECK(o.backend == &marking && o.last == CJ_STEP_MEMPLAN && o.cancel == NULL);
    cj_cancel cancel = false;
    o.cancel = &cancel;
    cj_compile_options body = cj_compile_options_body(&o);
    CHECK(body.backend == &marking && body.cancel == &cancel && body.keep_objects);
    CHECK(body.donated == NULL && body.ndonated == 0 && body.threads == 0);
    cj_compile_options none = cj_compile_options_make(NULL, NULL, 0, false, CJ_STEP_LINK);
    CHECK(none.last == CJ_STEP_COLLAPSE && none.threads == 0 && none.donated == NULL);
}

/* An optimizer step on donated weights, in the order a trace makes it:
 * h = tanh(x @ w) per layer, each weight's gradient x^T @ (h * (1 - h^2))
 * a gemm, and only then the updates w - 0.1 g over the weights. */
static builder sgd_step(int64_t R, int64_t C, int layers) {
    builder b = start(CJ_FLOAT32);
    int x = param(&b, s2(R, C)), w[4], g[4], outs[5];
    for (int i = 0; i < layers; i++) w[i] = param(&b, s2(C, C));
    int h = x;
    for (int i = 0; i < layers; i++) {
        int a = un(&b, CJ_OP_TANH, matmul(&b, h, w[i]));
        int d = bin(&b, CJ_OP_MUL, a, binc(&b, CJ_OP_ADD, un(&b, CJ_OP_NEG, bin(&b, CJ_OP_MUL, a, a)), 1.0));
        g[i] = matmul(&b, transpose2(&b, h), d);
        h = a;
    }
    outs[layers] = un(&b, CJ_OP_EXP, h); /* other rows: the updates start a group of their own */
    for (int i = 0; i < layers; i++) outs[i] = bin(&b, CJ_OP_SUB, w[i], binc(&b, CJ_OP_MUL, g[i], 0.1));
    outputs(&b, outs, layers + 1);
    return b;
}

/* How many updates joined the group of their gemm: stages that are their
 * group's join partner (group.c made none of them a stage of it). */
static int joined_stages(const cj_plan *p) {
    int n = 0;
    for (int g = 0; g < p->ngroups; g++) {
        const cj_group *G = &p->groups[g];
        if (!p->kernels[G->first].gemm.on) continue;
        for (int k = G->first + 1; k < G->first + G->count; k++)
            n += p->kernels[k].out_buffer == G->join_partner; /* an update joined its gemm */
    }
    return n;
}

static void test_join_partners_are_data(void) {
    int joins = 0;
    for (int layers = 1; layers <= 4; layers++) {
        builder b = sgd_step(256, 32, layers);
        bool donate[5] = {false, true, true, true, true};
        cj_compile_options o = cj_compile_options_make(&marking, donate, layers + 1, false, CJ_STEP_COLLAPSE);
        o.threads = 2;
        cj_lowered l = lower_or_die("sgd", &b, &o);
        check_plan("sgd", &l.plan);
        joins += joined_stages(&l.plan);
        /* the same steps by hand, group's partners cleared before memplan */
        cj_plan p = fuse_only(l.graph, false);
        mark_matmuls(&p);
        cj_error err = {0};
        CHECK(cj_group_run(&p, true, &err) == CJ_OK);
        int partners = 0;
        for (int g = 0; g < p.ngroups; g++) {
            partners += p.groups[g].join_partner >= 0;
            p.groups[g].join_partner = -1;
        }
        CHECK_MSG(partners >= 1, "%d layers: group.c found no partner", layers);
        p.donated = calloc((size_t)l.graph->nparams + 1, sizeof(bool));
        for (int i = 0; i <= layers; i++) p.donated[i] = donate[i];
        p.threads = 2;
        int stages_before = 0, stages_after = 0;
        for (int g = 0; g < p.ngroups; g++) stages_before += p.kernels[p.groups[g].first].gemm.on ? p.groups[g].count : 0;
        CHECK(cj_memplan_run(&p, true, &err) == CJ_OK);
        for (int g = 0; g < p.ngroups; g++) stages_after += p.kernels[p.groups[g].first].gemm.on ? p.groups[g].count : 0;
        CHECK_MSG(stages_after == stages_before, "%d layers: memplan joined without group's partners", layers);
        check_plan("sgd, no partners", &p);
        cj_plan_free(&p);
        cj_lowered_free(&l);
        cj_graph_free(b.g);
    }
    CHECK_MSG(joins > 0, "no update joined its gemm (%d)", joins);
}

/* ---- generated ------------------------------------------------------------------------- */

static void test_random_graphs(void) {
    int count = 0;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        builder b = random_graph(seed * 977, seed % 2 == 0);
        bool donate[3];
        for (int j = 0; j < 3; j++) donate[j] = rng_int(2);
        int nparams = b.g->nparams;
        cj_compile_options o = cj_compile_options_make(rng_int(2) ? &marking : NULL, donate, nparams, false,
                                                       CJ_STEP_COLLAPSE);
        char what[64];
        snprintf(what, sizeof what, "random graph %llu", (unsigned long long)seed);
        cj_lowered l = lower_or_die(what, &b, &o);
        int64_t peak = -1;
        cj_error err = {0};
        CHECK_MSG(cj_plan_peak(b.g, &o, &peak, &err) == CJ_OK && peak == l.plan.peak_bytes,
                  "%s: the oracle's peak %lld, the lowering's %lld", what, (long long)peak, (long long)l.plan.peak_bytes);
        cj_compile_options t = o;
        t.last = CJ_STEP_SIMPLIFY;
        cj_compile_state s;
        CHECK(cj_pipeline_run(b.g, &t, &s, &err) == CJ_OK && s.nran == CJ_STEP_SIMPLIFY + 1);
        char *a = cj_graph_to_text(s.lowered.graph), *c = cj_graph_to_text(l.graph);
        CHECK_MSG(a && c && !strcmp(a, c), "%s: as_text's graph is not the compile's", what);
        free(a), free(c);
        cj_lowered_free(&s.lowered);
        cj_lowered_free(&l);
        cj_graph_free(b.g);
        count++;
    }
    printf("random graphs: %d, each lowered, its oracle's peak and as_text's graph compared\n", count);
}

int main(void) {
    unsetenv("CJIT_PASSES");
    unsetenv("CJIT_DUMP");
    test_the_list();
    test_stops();
    test_options();
    test_join_partners_are_data();
    test_random_graphs();
    printf("test_pipeline: %d checks, %d failures\n", checks, failures);
    return failures != 0;
}
