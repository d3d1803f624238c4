/* test_plan_io.c - graphs with control flow as bytes (plan_io.c): the
 * disk cache key covers every body, nested ones included, even where the
 * enclosing graph holds no copy of a body's nodes; the entry form reads
 * back to the same graph; every truncation is refused; nesting past
 * CJ_ENTRY_MAX_DEPTH is refused when writing, not crashed on when reading.
 *
 * The graphs are built here with the builders, so a body's nodes exist
 * only in the body (a traced body also leaves dead copies in the trace,
 * which would hide a key that forgot the bodies). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_io.h"
#include "regions.h"

static int checks, failures;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        checks++;                                                                      \
        if (!(cond)) {                                                                 \
            failures++;                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                              \
    } while (0)

static cj_error err;

static int ok(int id) {
    if (id < 0) {
        fprintf(stderr, "building the test graph failed: %s\n", err.message);
        exit(2);
    }
    return id;
}

static const cj_shape scalar = {0, {0}}, row = {1, {4}}, rows = {2, {6, 4}};

/* A scan body: (i, carry f32[4], x f32[4], [consts]) -> carry * k + x, or,
 * with `inner`, the carry through a scan of `inner` over a broadcast of x
 * first; `op` combines (add or subtract). */
static cj_body *scan_body(double k, cj_op op, cj_body *inner, const char *loc) {
    cj_graph *g = cj_graph_new();
    int where = loc ? ok(cj_graph_loc(g, loc)) : -1;
    ok(cj_build_param(g, &scalar, CJ_INT32, false, where, &err));
    int c = ok(cj_build_param(g, &row, CJ_FLOAT32, false, where, &err));
    int x = ok(cj_build_param(g, &row, CJ_FLOAT32, false, where, &err));
    if (inner) {
        int xs = ok(cj_build_broadcast(g, x, &rows, where, &err));
        int ins[2] = {c, xs};
        int r = ok(cj_build_region(g, inner, ins, 2, where, &err));
        c = ok(cj_build_result(g, r, 0, where, &err));
    }
    int kc = ok(cj_build_constant(g, k, 0, CJ_FLOAT32, true, &scalar, where, &err));
    int ck = ok(cj_build_binary(g, CJ_OP_MUL, c, kc, where, &err));
    int out = ok(cj_build_binary(g, op, ck, x, where, &err));
    if (cj_graph_set_outputs(g, &out, 1, &err) != CJ_OK) ok(-1);
    cj_body *b = cj_body_new(CJ_OP_SCAN, 1);
    b->graphs[0] = g;
    b->ncarry = 1;
    b->nxs = 1;
    b->length = 6;
    if (cj_body_finish(b, &err) != CJ_OK) ok(-1);
    return b;
}

/* xs f32[6,4] -> the final carry of a scan of b from zeros. */
static cj_graph *outer_graph(cj_body *b) {
    cj_graph *g = cj_graph_new();
    int where = ok(cj_graph_loc(g, "outer.py:1"));
    int xs = ok(cj_build_param(g, &rows, CJ_FLOAT32, false, where, &err));
    int zero = ok(cj_build_constant(g, 0.0, 0, CJ_FLOAT32, false, &row, where, &err));
    int ins[2] = {zero, xs};
    int r = ok(cj_build_region(g, b, ins, 2, where, &err));
    int out = ok(cj_build_result(g, r, 0, where, &err));
    if (cj_graph_set_outputs(g, &out, 1, &err) != CJ_OK) ok(-1);
    cj_body_unref(b);
    return g;
}

static cj_wbuf key_of(const cj_graph *g) {
    cj_wbuf w = {0};
    cj_graph_write(&w, g, NULL);
    CHECK(!w.oom && !w.too_deep);
    return w;
}

static bool same_bytes(cj_wbuf a, cj_wbuf b) { return a.len == b.len && memcmp(a.data, b.data, a.len) == 0; }

/* Graphs differing only in a body give different keys; equal ones equal keys. */
static void test_key_covers_bodies(void) {
    double k2 = 0.500000059604644775390625; /* one float32 ulp above 0.5 */
    cj_graph *g[] = {
        outer_graph(scan_body(0.5, CJ_OP_ADD, NULL, "a.py:3")),
        outer_graph(scan_body(0.5, CJ_OP_ADD, NULL, "b.py:9")), /* only the location text differs */
        outer_graph(scan_body(k2, CJ_OP_ADD, NULL, "a.py:3")),
        outer_graph(scan_body(0.5, CJ_OP_SUB, NULL, "a.py:3")),
        outer_graph(scan_body(0.5, CJ_OP_ADD, scan_body(0.25, CJ_OP_ADD, NULL, NULL), "a.py:3")),
        outer_graph(scan_body(0.5, CJ_OP_ADD, scan_body(0.25, CJ_OP_SUB, NULL, NULL), "a.py:3")),
        outer_graph(scan_body(0.5, CJ_OP_ADD, scan_body(0.75, CJ_OP_ADD, NULL, NULL), "a.py:3")),
    };
    int n = (int)(sizeof g / sizeof g[0]);
    cj_wbuf keys[sizeof g / sizeof g[0]];
    for (int i = 0; i < n; i++) keys[i] = key_of(g[i]);
    CHECK(same_bytes(keys[0], keys[1]));
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (!(i == 0 && j == 1)) CHECK(!same_bytes(keys[i], keys[j]));
    for (int i = 0; i < n; i++) {
        free(keys[i].data);
        cj_graph_free(g[i]);
    }
}

/* The entry form of a graph with a nested scan reads back to a graph with
 * the same key and the caller's location texts; every prefix is refused. */
static void test_entry_round_trip_and_truncations(void) {
    cj_graph *g = outer_graph(scan_body(0.5, CJ_OP_ADD, scan_body(0.25, CJ_OP_SUB, NULL, "inner.py:7"), "a.py:3"));
    cj_loc_pool pool;
    CHECK(cj_loc_pool_build(&pool, g, &err) == CJ_OK);
    CHECK(pool.n == 3 && !strcmp(pool.texts[0], "outer.py:1") && !strcmp(pool.texts[1], "a.py:3") &&
          !strcmp(pool.texts[2], "inner.py:7"));
    cj_wbuf w = {0};
    cj_graph_write(&w, g, &pool);
    CHECK(!w.oom && !w.too_deep);
    cj_rbuf r = {.data = w.data, .len = w.len};
    cj_graph *back = cj_graph_read(&r, &pool, &err);
    CHECK(back && r.pos == r.len);
    if (back) {
        cj_wbuf k1 = key_of(g), k2 = key_of(back);
        CHECK(same_bytes(k1, k2));
        const cj_graph *body = back->bodies[0]->graphs[0], *inner = body->bodies[0]->graphs[0];
        CHECK(!strcmp(cj_graph_loc_str(inner, inner->nodes[inner->nnodes - 1].loc), "inner.py:7"));
        free(k1.data);
        free(k2.data);
        cj_graph_free(back);
    }
    int refused = 0;
    for (size_t n = 0; n < w.len; n++) {
        cj_rbuf t = {.data = w.data, .len = n};
        cj_error e = {0};
        cj_graph *part = cj_graph_read(&t, &pool, &e);
        if (!part && e.status == CJ_ERR_VALUE) refused++;
        cj_graph_free(part);
    }
    CHECK(refused == (int)w.len);
    free(w.data);
    cj_loc_pool_free(&pool);
    cj_graph_free(g);
}

/* Scans nested past the entry limit: the key is written, the entry refused,
 * and bytes claiming that depth are refused by the reader. */
static void test_nesting_past_the_limit(void) {
    cj_body *b = scan_body(0.5, CJ_OP_ADD, NULL, NULL);
    for (int d = 0; d < CJ_ENTRY_MAX_DEPTH + 2; d++) b = scan_body(0.5, CJ_OP_ADD, b, NULL);
    cj_graph *g = outer_graph(b);
    cj_wbuf key = key_of(g);
    CHECK(key.len > 0);
    cj_loc_pool pool;
    CHECK(cj_loc_pool_build(&pool, g, &err) == CJ_OK);
    cj_wbuf w = {0};
    cj_graph_write(&w, g, &pool);
    CHECK(w.too_deep);
    cj_rbuf r = {.data = w.data, .len = w.len};
    cj_error e = {0};
    cj_graph *back = cj_graph_read(&r, &pool, &e);
    CHECK(!back && e.status == CJ_ERR_VALUE);
    free(key.data);
    free(w.data);
    cj_loc_pool_free(&pool);
    cj_graph_free(g);
}

int main(void) {
    test_key_covers_bodies();
    test_entry_round_trip_and_truncations();
    test_nesting_past_the_limit();
    printf("test_plan_io: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
