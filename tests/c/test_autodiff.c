/* test_autodiff.c - reverse mode (autodiff.c, graph_grad.c) and forward
 * mode (jvp.c) on float64 graphs built with the graph.h builders, the
 * gradient graphs evaluated by the graph interpreter of plan_check.h:
 *
 *   - x * y and sin(x): the gradients are exactly ct * y, ct * x and
 *     ct * cos(x);
 *   - tanh chains, sums and broadcasts, matmuls: the gradient against
 *     central differences of the same interpreter;
 *   - forward mode against reverse mode: <J v, u> = <v, J^T u>;
 *   - checkpoint regions: with CJ_SAVE_NOTHING the backward pass keeps only
 *     the region's input and output and recomputes the chain, with
 *     CJ_SAVE_EVERYTHING it keeps each tanh; the gradients are equal bit
 *     for bit, and the lowered plan stores fewer forward values;
 *   - generated: seeded random smooth graphs (tanh, sin, products, sums
 *     broadcast back, matmuls), their gradients against central
 *     differences, and their gradient plans run by the plan interpreter.
 *
 *   make -C tests/c check     (or: make -C tests/c build/test_autodiff) */
#include "plan_check.h"

#include "autodiff.h"
#include "jvp.h"

/* The scalar value of node n of g on params. */
static double value_of(const cj_graph *g, int n, double *const *params) {
    double **v = eval_graph(g, params);
    double r = v[n][0];
    free_values(g, v);
    return r;
}

/* Appends the gradients of scalar `loss` with respect to wrt[0..n) to b's
 * graph (cotangent 1); a failure ends the test. */
static void gradients(builder *b, int loss, const int *wrt, int n, int *grads) {
    cj_shape scalar = s0();
    int one = ok(b, cj_build_constant(b->g, 1.0, 1, b->dt, false, &scalar, -1, &b->err));
    if (cj_autodiff_vjp(b->g, 0, &loss, &one, 1, wrt, n, grads, &b->err) != CJ_OK) ok(b, -1);
}

/* Compares gradient node grads[i] (of param node wrt[i]) with central
 * differences of loss; returns the largest relative error. */
static double against_differences(const char *what, const cj_graph *g, int loss, const int *wrt, const int *grads, int n,
                                  double *const *params) {
    double **v = eval_graph(g, params), worst = 0;
    for (int i = 0; i < n; i++) {
        double *p = params[g->nodes[wrt[i]].attrs.index];
        for (int64_t e = 0; e < cj_shape_numel(&g->nodes[wrt[i]].shape); e++) {
            const double h = 1e-5, keep = p[e];
            p[e] = keep + h;
            double up = value_of(g, loss, params);
            p[e] = keep - h;
            double down = value_of(g, loss, params);
            p[e] = keep;
            double fd = (up - down) / (2 * h), got = v[grads[i]][e];
            double err = fabs(got - fd) / (1 + fabs(fd));
            if (err > worst) worst = err;
            if (!(err <= 1e-6)) {
                CHECK_MSG(false, "%s: d/d(param %d)[%lld] = %.12g, differences give %.12g", what, i, (long long)e, got, fd);
                i = n;
                break;
            }
        }
    }
    free_values(g, v);
    return worst;
}

/* x * y and sin(x), summed: the gradients are ct * y, ct * x and ct *
 * cos(x) exactly (ct = 1 broadcast). */
static void test_exact_rules(void) {
    builder b = start(CJ_FLOAT64);
    int x = param(&b, s2(3, 4)), y = param(&b, s2(3, 4));
    int loss = reduce(&b, CJ_OP_REDUCE_SUM, bin(&b, CJ_OP_ADD, bin(&b, CJ_OP_MUL, x, y), un(&b, CJ_OP_SIN, x)), 3u);
    int wrt[2] = {x, y}, grads[2];
    gradients(&b, loss, wrt, 2, grads);
    CHECK(b.g->backward_start > loss);
    double **params = random_params(b.g, -2, 2);
    double **v = eval_graph(b.g, params);
    for (int e = 0; e < 12; e++) {
        CHECK_MSG(v[grads[0]][e] == params[1][e] + cos(params[0][e]), "d/dx[%d] = %.17g", e, v[grads[0]][e]);
        CHECK_MSG(v[grads[1]][e] == params[0][e], "d/dy[%d] = %.17g", e, v[grads[1]][e]);
    }
    free_values(b.g, v);
    free_params(b.g, params);
    cj_graph_free(b.g);
}

/* Small functions against central differences. */
static void test_against_differences(void) {
    for (int kase = 0; kase < 4; kase++) {
        builder b = start(CJ_FLOAT64);
        int x = param(&b, s2(3, 4)), w = param(&b, s2(4, 2)), r = param(&b, s1(4)), loss, n = 3;
        const char *what;
        if (kase == 0) { /* a tanh chain */
            int t = x;
            for (int i = 0; i < 5; i++) t = un(&b, CJ_OP_TANH, binc(&b, CJ_OP_MUL, t, 1.5));
            loss = reduce(&b, CJ_OP_REDUCE_SUM, bin(&b, CJ_OP_MUL, t, t), 3u), n = 1, what = "tanh chain";
        } else if (kase == 1) { /* sums and broadcasts: (x + r)^2 * rowsum(x), a row vector broadcast */
            int xr = bin(&b, CJ_OP_ADD, x, bcast(&b, r, s2(3, 4)));
            int rs = rows_as_matrix(&b, reduce(&b, CJ_OP_REDUCE_SUM, x, 2u), 3, 4);
            loss = reduce(&b, CJ_OP_REDUCE_SUM, bin(&b, CJ_OP_MUL, bin(&b, CJ_OP_MUL, xr, xr), rs), 3u), what = "broadcasts";
        } else if (kase == 2) { /* matmul: sum(tanh(x @ w) @ w.T * x) */
            int h = un(&b, CJ_OP_TANH, matmul(&b, x, w));
            loss = reduce(&b, CJ_OP_REDUCE_SUM, bin(&b, CJ_OP_MUL, matmul(&b, h, transpose2(&b, w)), x), 3u), what = "matmul";
        } else { /* maxima, a division, sin, a column mean */
            int m = reduce(&b, CJ_OP_REDUCE_MAX, bin(&b, CJ_OP_MUL, x, bcast(&b, r, s2(3, 4))), 2u);
            int c = binc(&b, CJ_OP_MUL, reduce(&b, CJ_OP_REDUCE_SUM, x, 1u), 1.0 / 3);
            int q = bin(&b, CJ_OP_DIV, un(&b, CJ_OP_SIN, c), binc(&b, CJ_OP_ADD, bin(&b, CJ_OP_MUL, c, c), 1.0));
            loss = bin(&b, CJ_OP_ADD, reduce(&b, CJ_OP_REDUCE_SUM, m, 1u), reduce(&b, CJ_OP_REDUCE_SUM, q, 1u)), what = "max, div";
        }
        int wrt[3] = {x, kase == 1 || kase == 3 ? r : w, w}, grads[3];
        if (kase != 2 && n == 3) n = 2;
        gradients(&b, loss, wrt, n, grads);
        rng_seed(77 + kase);
        double **params = random_params(b.g, -1, 1);
        against_differences(what, b.g, loss, wrt, grads, n, params);
        free_params(b.g, params);
        cj_graph_free(b.g);
    }
}

/* Forward against reverse mode: for f(x) = tanh(x @ w) * sin(x @ w) + x @ w
 * (one output of shape (3, 2)), with tangent dx and cotangent u,
 * sum(jvp(dx) * u) equals sum(dx * vjp(u)) (to rounding). */
static void test_jvp_against_vjp(void) {
    builder b = start(CJ_FLOAT64);
    int x = param(&b, s2(3, 4)), w = param(&b, s2(4, 2)), dx = param(&b, s2(3, 4)), u = param(&b, s2(3, 2));
    int z = matmul(&b, x, w);
    int f = bin(&b, CJ_OP_ADD, bin(&b, CJ_OP_MUL, un(&b, CJ_OP_TANH, z), un(&b, CJ_OP_SIN, z)), z);
    int tangent, grad;
    if (cj_jvp(b.g, 0, &x, &dx, 1, &f, 1, &tangent, &b.err) != CJ_OK) ok(&b, -1);
    if (cj_autodiff_vjp(b.g, 0, &f, &u, 1, &x, 1, &grad, &b.err) != CJ_OK) ok(&b, -1);
    int lhs = reduce(&b, CJ_OP_REDUCE_SUM, bin(&b, CJ_OP_MUL, ok(&b, tangent), u), 3u);
    int rhs = reduce(&b, CJ_OP_REDUCE_SUM, bin(&b, CJ_OP_MUL, dx, ok(&b, grad)), 3u);
    for (int t = 0; t < 10; t++) {
        rng_seed(300 + t);
        double **params = random_params(b.g, -1, 1);
        double **v = eval_graph(b.g, params);
        CHECK_MSG(fabs(v[lhs][0] - v[rhs][0]) <= 1e-12 * (1 + fabs(v[rhs][0])), "<J dx, u> = %.17g, <dx, J^T u> = %.17g",
                  v[lhs][0], v[rhs][0]);
        free_values(b.g, v);
        free_params(b.g, params);
    }
    cj_graph_free(b.g);
}

/* The forward values the backward kernels of l read from buffers. */
static int saved_buffers(const cj_lowered *l) {
    const cj_plan *p = &l->plan;
    int n = 0;
    for (int bi = 0; bi < p->nbuffers; bi++) {
        const cj_buffer *B = &p->buffers[bi];
        if (B->kind == CJ_BUF_PARAM || B->node >= l->graph->backward_start) continue;
        bool read = false;
        for (int k = 0; k < p->nkernels; k++)
            read |= p->kernels[k].root_node >= l->graph->backward_start && kernel_reads(&p->kernels[k], bi);
        n += read;
    }
    return n;
}

/* loss = sum(tanh^d(u) * s), u = x * s computed outside a checkpoint region
 * holding the chain of d tanh (each after a multiply by 1.25, whose rule
 * reads nothing of the forward pass).  tanh's rule reads its output: with
 * CJ_SAVE_EVERYTHING the d outputs are the residuals and nothing is
 * recomputed; with CJ_SAVE_NOTHING only u (the region's input) and the
 * last tanh (its output, read outside it) are, and the rest of the chain
 * is recomputed (2(d - 1) remat copies: each multiply and tanh); the
 * gradients are the same numbers. */
static void test_checkpoint(void) {
    const int d = 6;
    double grad_values[2][16];
    int residuals[2], remat[2], saved[2];
    for (int pol = 0; pol < 2; pol++) {
        builder b = start(CJ_FLOAT64);
        int x = param(&b, s1(16)), s = param(&b, s1(16));
        int u = bin(&b, CJ_OP_MUL, x, s);
        int region = ok(&b, cj_graph_region_begin(b.g, pol ? CJ_SAVE_NOTHING : CJ_SAVE_EVERYTHING, NULL, 0, &b.err));
        int t = u;
        for (int i = 0; i < d; i++) t = un(&b, CJ_OP_TANH, binc(&b, CJ_OP_MUL, t, 1.25));
        cj_graph_region_end(b.g, region);
        int loss = reduce(&b, CJ_OP_REDUCE_SUM, bin(&b, CJ_OP_MUL, t, s), 1u), grad;
        gradients(&b, loss, &x, 1, &grad);
        int outs[2] = {loss, grad};
        outputs(&b, outs, 2);
        int *res = malloc(sizeof(int) * ((size_t)b.g->nnodes + 1));
        if (!res) die("out of memory");
        residuals[pol] = cj_autodiff_residuals(b.g, res);
        int tanh_kept = 0, u_kept = 0;
        for (int j = 0; j < residuals[pol]; j++) {
            tanh_kept += b.g->nodes[res[j]].op == CJ_OP_TANH;
            u_kept += res[j] == u;
        }
        free(res);
        remat[pol] = 0;
        for (int n = 0; n < b.g->nnodes; n++) remat[pol] += b.g->nodes[n].remat > 0;
        if (pol == 0) CHECK_MSG(tanh_kept == d && u_kept == 0, "everything: %d tanh kept, u %d", tanh_kept, u_kept);
        else CHECK_MSG(tanh_kept == 1 && u_kept == 1, "nothing: %d tanh kept, u %d", tanh_kept, u_kept);
        rng_seed(5);
        double **params = random_params(b.g, -1, 1);
        double **v = eval_graph(b.g, params);
        memcpy(grad_values[pol], v[grad], sizeof(double) * 16);
        free_values(b.g, v);
        /* lowered: the plan's values, and the forward buffers the backward reads */
        cj_lowered l = lower_or_die("checkpoint", &b, NULL);
        check_plan("checkpoint", &l.plan);
        CHECK_MSG(plan_matches_graph("checkpoint", &l, params), "checkpoint: plan values differ");
        saved[pol] = saved_buffers(&l);
        cj_lowered_free(&l);
        free_params(b.g, params);
        cj_graph_free(b.g);
    }
    CHECK_MSG(residuals[0] == d && residuals[1] == 2, "residuals %d and %d", residuals[0], residuals[1]);
    CHECK_MSG(remat[0] == 0 && remat[1] == 2 * (d - 1), "remat copies %d and %d", remat[0], remat[1]);
    CHECK_MSG(memcmp(grad_values[0], grad_values[1], sizeof grad_values[0]) == 0, "the gradients differ");
    CHECK_MSG(saved[0] > saved[1], "saved buffers: everything %d, nothing %d", saved[0], saved[1]);
}

/* ---- generated ---------------------------------------------------------------------------
 * Smooth random graphs of float64 (N x N) values: tanh, sin, products and
 * sums, a row sum broadcast back, matmuls (scaled by 1/N); the loss is
 * the sum of the last value times a fixed weight; the gradients of every
 * parameter against central differences, and the whole gradient graph
 * lowered and run by the plan interpreter. */
static void test_random_gradients(int count) {
    int compared = 0;
    double worst = 0;
    for (int i = 0; i < count; i++) {
        rng_seed(40000 + i);
        builder b = start(CJ_FLOAT64);
        int64_t N = 2 + rng_int(3);
        int pool[40], n = 0, nparams = 1 + rng_int(3);
        for (int j = 0; j < nparams; j++) pool[n++] = param(&b, s2(N, N));
        for (int j = 0, ops = 2 + rng_int(12); j < ops; j++) {
            int x = pool[n - 1 - rng_int(n < 3 ? n : 3)], y = pool[rng_int(n)], v;
            switch (rng_int(6)) {
            case 0: v = un(&b, rng_int(2) ? CJ_OP_TANH : CJ_OP_SIN, x); break;
            case 1: v = bin(&b, CJ_OP_MUL, x, rng_int(2) ? y : transpose2(&b, y)); break;
            case 2: v = bin(&b, rng_int(2) ? CJ_OP_ADD : CJ_OP_SUB, x, y); break;
            case 3: v = binc(&b, CJ_OP_MUL, matmul(&b, x, y), 1.0 / (double)N); break;
            case 4: v = bin(&b, CJ_OP_MUL, x, rows_as_matrix(&b, reduce(&b, CJ_OP_REDUCE_SUM, un(&b, CJ_OP_TANH, y), 2u), N, N)); break;
            default: v = un(&b, CJ_OP_TANH, binc(&b, CJ_OP_ADD, x, 0.5)); break;
            }
            pool[n++] = v;
        }
        int weight = bcast(&b, binc(&b, CJ_OP_ADD, ok(&b, cj_build_iota(b.g, &(cj_shape){1, {N}}, 0, CJ_FLOAT64, -1, &b.err)), 0.5), s2(N, N));
        int loss = reduce(&b, CJ_OP_REDUCE_SUM, bin(&b, CJ_OP_MUL, pool[n - 1], weight), 3u);
        int grads[3];
        gradients(&b, loss, pool, nparams, grads);
        int outs[4] = {loss, grads[0], nparams > 1 ? grads[1] : grads[0], nparams > 2 ? grads[2] : grads[0]};
        outputs(&b, outs, 4);
        double **params = random_params(b.g, -1, 1);
        char what[64];
        snprintf(what, sizeof what, "random gradient %d", i);
        double err = against_differences(what, b.g, loss, pool, grads, nparams, params);
        if (err > worst) worst = err;
        compared += nparams;
        cj_lowered l = lower_or_die(what, &b, NULL);
        check_plan(what, &l.plan);
        CHECK_MSG(plan_matches_graph(what, &l, params), "%s: plan values differ", what);
        cj_lowered_free(&l);
        free_params(b.g, params);
        cj_graph_free(b.g);
    }
    printf("random gradients: %d graphs, %d gradients against central differences (worst relative error %.1e)\n", count,
           compared, worst);
}

int main(void) {
    unsetenv("CJIT_PASSES");
    unsetenv("CJIT_DUMP");
    test_exact_rules();
    test_against_differences();
    test_jvp_against_vjp();
    test_checkpoint();
    test_random_gradients(150);
    printf("test_autodiff: %d checks, %d failures\n", checks, failures);
    return failures != 0;
}
