/* test_ops.c - every op in ops.def, through every place that must know it.
 *
 * For each op the test checks that:
 *   - its table facts agree with each other (arity and kind, reductions and
 *     their identities, costs and flags, attributes and kinds);
 *   - an elementwise unary op has a record (ops_unary.def) whose columns
 *     give its flags, and its builder keeps the record's dtype rule in
 *     every dtype;
 *   - a builder makes it (the switch in build_op lists every op, and the
 *     test is compiled with -Wswitch-enum -Werror, so a new op must be
 *     added there);
 *   - autodiff has a rule for it, unless it is a source or its gradient is
 *     zero (CJ_OPF_ZERO_GRAD), and the rule reads exactly the forward
 *     values its table entry declares (X, Y, OUT), no more and no fewer;
 *   - forward mode (jvp.c) has a rule exactly where autodiff has one, and it
 *     gives a tangent of the op's shape and dtype; batching (batching.c) has
 *     a rule for every op that is not a source, and the batched node has the
 *     op's shape with the batch dimension in front, for every operand batched
 *     and for each operand batched alone;
 *   - CSE compares exactly the attributes the op uses: two copies merge,
 *     copies differing in an unused field merge, copies differing in a used
 *     one do not;
 *   - an identity (CJ_OPF_IDENTITY) leaves fusion's plan as it was without it;
 *   - code generation handles it in every dtype its builder accepts, for
 *     the CPU and for NVPTX, fused and unfused, into IR that LLVM verifies,
 *     and an elementwise op really reached codegen as an expression.
 *
 *   make -C tests/c check     (or: make -C tests/c build/test_ops) */
#include "autodiff.h"
#include "blas.h"
#include "batching.h"
#include "jvp.h"
#include "codegen.h"
#include "graph.h"
#include "group.h"
#include "kernel.h"
#include "mathlib.h"
#include "simplify.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static const cj_dtype all_dtypes[] = {CJ_BOOL, CJ_INT32, CJ_INT64, CJ_FLOAT32, CJ_FLOAT64, CJ_UINT32};
#define NDTYPES ((int)(sizeof all_dtypes / sizeof all_dtypes[0]))

static cj_shape shape2(int64_t a, int64_t b) { return (cj_shape){2, {a, b}}; }

/* ---- the table's facts agree with each other ---------------------------- */

static int kind_arity(cj_opkind k) {
    switch (k) {
    case CJ_OPKIND_SOURCE: return 0;
    case CJ_OPKIND_UNARY: case CJ_OPKIND_CAST: case CJ_OPKIND_MOVE: case CJ_OPKIND_REDUCE: return 1;
    case CJ_OPKIND_BINARY: case CJ_OPKIND_COMPARE: case CJ_OPKIND_MATMUL: return 2;
    case CJ_OPKIND_GATHER: case CJ_OPKIND_SCATTER: return 2;
    case CJ_OPKIND_SORT: return 1;
    case CJ_OPKIND_LINALG: return -3; /* one (cholesky) or two (a triangular solve) */
    case CJ_OPKIND_SELECT: case CJ_OPKIND_TERNARY: return 3;
    case CJ_OPKIND_CONCAT: return -1;
    case CJ_OPKIND_REGION: return -1;
    }
    return -2;
}

static void test_table(void) {
    for (int i = 0; i < CJ_NUM_OPS; i++) {
        if (cj_op_kind((cj_op)i) == CJ_OPKIND_REGION) continue; /* control flow: tests/test_lax.py */
        cj_op op = (cj_op)i, back;
        const char *name = cj_op_name(op);
        cj_opkind kind = cj_op_kind(op);
        unsigned flags = cj_op_flags(op), attrs = cj_op_attrs(op);
        int cost = cj_op_cost(op);
        CHECK_MSG(strcmp(name, "?") != 0 && cj_op_from_name(name, &back) && back == op, "op %d's name", i);
        if (flags & CJ_OPF_BITS)
            CHECK_MSG((flags & CJ_OPF_ZERO_GRAD) && (kind == CJ_OPKIND_UNARY || kind == CJ_OPKIND_BINARY),
                      "%s: a bitwise op is elementwise on integers, with a zero gradient", name);
        CHECK_MSG(cj_op_arity(op) == kind_arity(kind) || (kind == CJ_OPKIND_LINALG && cj_op_arity(op) >= 1),
                  "%s: arity %d, its kind says %d", name, cj_op_arity(op), kind_arity(kind));
        /* a reduction or a scatter starts from its identity; nothing else has one */
        CHECK_MSG((kind == CJ_OPKIND_REDUCE || kind == CJ_OPKIND_SCATTER) == (cj_op_identity(op) != CJ_IDENTITY_NONE),
                  "%s: identity", name);
        CHECK_MSG((kind == CJ_OPKIND_REDUCE) == ((attrs & CJ_ATTR_AXES) != 0), "%s: axes", name);
        /* costs: long math 4, views and identities 0, other computing ops at least 1 */
        if (flags & CJ_OPF_LONG_MATH) CHECK_MSG(cost == 4, "%s: long math costs %d", name, cost);
        if (kind == CJ_OPKIND_SOURCE || kind == CJ_OPKIND_MOVE || (flags & CJ_OPF_IDENTITY))
            CHECK_MSG(cost == 0, "%s: a source, view or identity costs %d", name, cost);
        else
            CHECK_MSG(cost >= 1, "%s: costs %d", name, cost);
        if (flags & CJ_OPF_IDENTITY) CHECK_MSG(kind == CJ_OPKIND_UNARY, "%s: an identity is unary", name);
        if (flags & (CJ_OPF_LONG_MATH | CJ_OPF_FLOAT_MATH))
            CHECK_MSG(kind == CJ_OPKIND_UNARY || kind == CJ_OPKIND_BINARY, "%s: math is elementwise", name);
        /* slots belong to sources; a source's shape and dtype are given */
        if (attrs & CJ_ATTR_INDEX)
            CHECK_MSG(kind == CJ_OPKIND_SOURCE || kind == CJ_OPKIND_SCATTER || kind == CJ_OPKIND_LINALG, "%s: index", name);
        if (kind == CJ_OPKIND_SOURCE)
            CHECK_MSG((attrs & CJ_ATTR_SHAPE) && (attrs & CJ_ATTR_DTYPE), "%s: a source's shape", name);
        /* a gradient rule, or a reason to have none */
        int reads = cj_autodiff_rule_reads(op);
        bool no_rule = kind == CJ_OPKIND_SOURCE || (flags & CJ_OPF_ZERO_GRAD);
        CHECK_MSG(no_rule == (reads < 0), "%s: gradient rule %s", name, reads < 0 ? "missing" : "for a zero gradient");
        CHECK_MSG(no_rule == !cj_jvp_has_rule(op), "%s: jvp rule %s", name, no_rule ? "for a zero tangent" : "missing");
        CHECK_MSG((kind == CJ_OPKIND_SOURCE) == (cj_batch_rule_of(op) == CJ_BATCH_NONE), "%s: batching rule %s", name,
                  kind == CJ_OPKIND_SOURCE ? "for a source" : "missing");
        if (reads >= 0 && kind_arity(kind) >= 0) {
            if (reads & CJ_VJP_READS_X) CHECK_MSG(kind_arity(kind) >= 1, "%s reads a missing x", name);
            if (reads & CJ_VJP_READS_Y) CHECK_MSG(kind_arity(kind) >= 2, "%s reads a missing y", name);
        }
    }
    CHECK_MSG(cj_op_arity((cj_op)CJ_NUM_OPS) == 0 && cj_op_flags((cj_op)-1) == 0, "invalid ops have no facts");

    /* the identities every reduction starts from, in every dtype (one function
     * serves the runtime's fill and the GPU's init kernels) */
    static const struct {
        cj_op op;
        cj_dtype dt;
        double f;
        int64_t i;
    } want[] = {
        {CJ_OP_REDUCE_SUM, CJ_FLOAT32, 0.0, 0},        {CJ_OP_REDUCE_SUM, CJ_INT32, 0.0, 0},
        {CJ_OP_REDUCE_PROD, CJ_FLOAT64, 1.0, 1},       {CJ_OP_REDUCE_PROD, CJ_BOOL, 1.0, 1},
        {CJ_OP_REDUCE_MAX, CJ_FLOAT64, -INFINITY, 0},  {CJ_OP_REDUCE_MAX, CJ_INT32, -INFINITY, INT32_MIN},
        {CJ_OP_REDUCE_MAX, CJ_INT64, -INFINITY, INT64_MIN}, {CJ_OP_REDUCE_MAX, CJ_BOOL, -INFINITY, 0},
        {CJ_OP_REDUCE_MIN, CJ_FLOAT32, INFINITY, 0},   {CJ_OP_REDUCE_MIN, CJ_INT32, INFINITY, INT32_MAX},
        {CJ_OP_REDUCE_MIN, CJ_INT64, INFINITY, INT64_MAX}, {CJ_OP_REDUCE_MIN, CJ_BOOL, INFINITY, 1},
        {CJ_OP_REDUCE_MAX, CJ_UINT32, -INFINITY, 0},   {CJ_OP_REDUCE_MIN, CJ_UINT32, INFINITY, UINT32_MAX},
    };
    for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
        double f;
        int64_t i;
        bool ok = cj_reduce_identity(want[k].op, want[k].dt, &f, &i);
        bool is_f = want[k].dt == CJ_FLOAT32 || want[k].dt == CJ_FLOAT64;
        CHECK_MSG(ok && (is_f ? f == want[k].f : i == want[k].i), "identity of %s in dtype %d",
                  cj_op_name(want[k].op), (int)want[k].dt);
    }
    double f = 7;
    int64_t i = 7;
    CHECK_MSG(!cj_reduce_identity(CJ_OP_ADD, CJ_FLOAT64, &f, &i) && f == 0 && i == 0, "add has no identity");
}

/* ---- the elementwise unary records (ops_unary.def) ------------------------- */

/* Every UNARY op that computes is a record, its ops.def flags follow from its
 * columns, its names are unique, and its builder keeps its dtype rule in
 * every dtype. */
static void test_records(void) {
    for (int i = 0; i < CJ_NUM_OPS; i++) {
        cj_op op = (cj_op)i;
        const char *name = cj_op_name(op);
        const cj_unary_info *u = cj_unary(op);
        bool want = cj_op_kind(op) == CJ_OPKIND_UNARY && !cj_op_has_flag(op, CJ_OPF_IDENTITY);
        CHECK_MSG((u != NULL) == want, "%s: %s", name, want ? "no record" : "a record for no computing unary op");
        if (!u) continue;
        CHECK_MSG(u->doc && u->doc[0] && u->numpy && u->lax, "%s: the record's strings", name);
        CHECK_MSG((u->dtypes == CJ_UDT_FLOAT) == cj_op_has_flag(op, CJ_OPF_FLOAT_MATH), "%s: FLOAT and its flag", name);
        CHECK_MSG((u->dtypes == CJ_UDT_BITS) == cj_op_has_flag(op, CJ_OPF_BITS), "%s: BITS and its flag", name);
        CHECK_MSG(u->derivative == !cj_op_has_flag(op, CJ_OPF_ZERO_GRAD), "%s: ZERO and its flag", name);
        CHECK_MSG(u->derivative || u->reads == 0, "%s: no derivative reads something", name);
        CHECK_MSG((u->dtypes == CJ_UDT_NOBOOL) == (u->bool_error != NULL), "%s: NOBOOL's message", name);
        for (int j = 0; j < i; j++) {
            const cj_unary_info *v = cj_unary((cj_op)j);
            if (!v) continue;
            CHECK_MSG(!u->numpy[0] || strcmp(u->numpy, v->numpy) != 0, "%s and %s: one numpy name", name, cj_op_name((cj_op)j));
            CHECK_MSG(!u->lax[0] || strcmp(u->lax, v->lax) != 0, "%s and %s: one lax name", name, cj_op_name((cj_op)j));
        }
        for (int d = 0; d < NDTYPES; d++) {
            cj_dtype dt = all_dtypes[d];
            bool fl = dt == CJ_FLOAT32 || dt == CJ_FLOAT64;
            cj_graph *g = cj_graph_new();
            cj_error err = {0};
            cj_shape s = shape2(2, 3);
            int x = cj_build_param(g, &s, dt, false, -1, &err);
            int id = cj_build_unary(g, op, x, -1, &err);
            const cj_node *n = id >= 0 ? &g->nodes[id] : NULL;
            bool refused = u->dtypes == CJ_UDT_BITS ? fl : u->dtypes == CJ_UDT_NOBOOL && dt == CJ_BOOL;
            cj_dtype out = dt;
            if (u->dtypes == CJ_UDT_FLOAT && !fl) out = cj_dtype_canon(CJ_FLOAT64);
            if (u->dtypes == CJ_UDT_TEST || u->dtypes == CJ_UDT_LOGIC) out = CJ_BOOL;
            if (refused) {
                CHECK_MSG(id < 0 && err.status == CJ_ERR_TYPE && strstr(err.message, name) &&
                              (!u->bool_error || strstr(err.message, u->bool_error)),
                          "%s(%s): a TypeError naming the op, not %s", name, cj_dtype_name(dt), err.message);
            } else if (!fl && u->dtypes == CJ_UDT_ROUND) {
                CHECK_MSG(id == x, "%s(%s): the operand itself", name, cj_dtype_name(dt));
            } else if (!fl && u->dtypes == CJ_UDT_TEST) {
                CHECK_MSG(n && n->op == CJ_OP_CONSTANT && n->dtype == CJ_BOOL && n->attrs.ivalue == u->test_value,
                          "%s(%s): the constant %d", name, cj_dtype_name(dt), u->test_value);
            } else {
                CHECK_MSG(n && n->op == op && n->dtype == out && cj_shape_equal(&n->shape, &s) &&
                              g->nodes[n->inputs[0]].dtype == (u->dtypes == CJ_UDT_TEST ? dt : out),
                          "%s(%s): %s", name, cj_dtype_name(dt), n ? cj_dtype_name(n->dtype) : err.message);
            }
            cj_graph_free(g);
        }
    }
}

/* ---- a builder for every op ------------------------------------------------ */

/* An input of shape s and dtype dt: a parameter, or (computed) a value the
 * forward pass computes from one, so that autodiff counts reading it. */
static int input(cj_graph *g, cj_shape s, cj_dtype dt, bool computed, cj_error *err) {
    int p = cj_build_param(g, &s, dt, false, -1, err);
    if (!computed || p < 0) return p;
    return dt == CJ_BOOL ? cj_build_unary(g, CJ_OP_LOGICAL_NOT, p, -1, err) : cj_build_unary(g, CJ_OP_NEG, p, -1, err);
}

/* Builds op with its own builder on inputs of dtype dt; returns the node,
 * or -1 with err set when the builder refuses that dtype.  Bitwise ops
 * refuse floats: asked for a float dtype they are built on uint32 (the
 * generic "build every op" case) or, for bitcast, from dt's own width. */
static int build_op(cj_graph *g, cj_op op, cj_dtype dt, bool computed, cj_error *err) {
    cj_shape s = shape2(2, 3);
    if (cj_op_has_flag(op, CJ_OPF_BITS) && (dt == CJ_FLOAT64 || dt == CJ_FLOAT32)) dt = CJ_UINT32;
#define IN(a, b) input(g, shape2(a, b), dt, computed, err)
    switch (op) {
    case CJ_OP_PARAM: return cj_build_param(g, &s, dt, false, -1, err);
    case CJ_OP_ARRAY: return cj_build_array(g, &s, dt, -1, err);
    case CJ_OP_CONSTANT: return cj_build_constant(g, 1.5, 1, dt, false, &s, -1, err);
    case CJ_OP_IOTA: return cj_build_iota(g, &s, 1, dt, -1, err);
#define UNARY(NAME, ...) case CJ_OP_##NAME: /* every record of ops_unary.def */
#include "ops_unary.def"
#undef UNARY
    case CJ_OP_STOP_GRADIENT:
        return cj_build_unary(g, op, IN(2, 3), -1, err);
    case CJ_OP_BITCAST: {
        /* float32 -> uint32, float64 -> int64, an integer -> the float of its width */
        cj_dtype to = dt == CJ_FLOAT32 ? CJ_UINT32 : dt == CJ_FLOAT64 ? CJ_INT64 : cj_dtype_size(dt) == 8 ? CJ_FLOAT64 : CJ_FLOAT32;
        return cj_build_bitcast(g, IN(2, 3), to, -1, err);
    }
    case CJ_OP_CAST: return cj_build_cast(g, IN(2, 3), dt == CJ_FLOAT64 ? CJ_FLOAT32 : CJ_FLOAT64, -1, err);
    case CJ_OP_NAME: return cj_build_name(g, IN(2, 3), "tag", -1, err);
    case CJ_OP_ADD: case CJ_OP_SUB: case CJ_OP_MUL: case CJ_OP_DIV: case CJ_OP_FLOORDIV: case CJ_OP_POW:
    case CJ_OP_MAXIMUM: case CJ_OP_MINIMUM: case CJ_OP_LOGICAL_AND: case CJ_OP_LOGICAL_OR: case CJ_OP_EQ:
    case CJ_OP_NE: case CJ_OP_LT: case CJ_OP_LE: case CJ_OP_GT: case CJ_OP_GE: case CJ_OP_BITWISE_AND:
    case CJ_OP_BITWISE_OR: case CJ_OP_BITWISE_XOR: case CJ_OP_SHIFT_LEFT: case CJ_OP_SHIFT_RIGHT_LOGICAL:
    case CJ_OP_SHIFT_RIGHT_ARITHMETIC: case CJ_OP_ROTATE_LEFT: {
        int x = IN(2, 3);
        return cj_build_binary(g, op, x, IN(2, 3), -1, err);
    }
    case CJ_OP_SELECT: {
        int a = input(g, s, CJ_FLOAT64, computed, err);
        int cond = cj_build_binary(g, CJ_OP_GT, a, input(g, s, CJ_FLOAT64, computed, err), -1, err);
        int x = IN(2, 3);
        return cj_build_select(g, cond, x, IN(2, 3), -1, err);
    }
    case CJ_OP_FMA: {
        int x = IN(2, 3), y = IN(2, 3);
        return cj_build_fma(g, x, y, IN(2, 3), -1, err);
    }
    case CJ_OP_BROADCAST: return cj_build_broadcast(g, IN(1, 3), &s, -1, err);
    case CJ_OP_RESHAPE: {
        cj_shape to = shape2(3, 2);
        return cj_build_reshape(g, IN(2, 3), &to, -1, err);
    }
    case CJ_OP_TRANSPOSE: return cj_build_transpose(g, IN(2, 3), (const int[]){1, 0}, -1, err);
    case CJ_OP_SLICE:
        return cj_build_slice(g, IN(2, 3), (const int64_t[]){0, 2}, (const int64_t[]){2, -1},
                              (const int64_t[]){1, -2}, -1, err);
    case CJ_OP_CONCATENATE: {
        int xs[2];
        xs[0] = IN(2, 3);
        xs[1] = IN(1, 3);
        return cj_build_concatenate(g, xs, 2, 0, -1, err);
    }
    case CJ_OP_REDUCE_SUM: case CJ_OP_REDUCE_PROD: case CJ_OP_REDUCE_MAX: case CJ_OP_REDUCE_MIN:
        return cj_build_reduce(g, op, IN(2, 3), 1u << 1, -1, err);
    case CJ_OP_MATMUL: {
        int x = IN(2, 3);
        return cj_build_matmul(g, x, IN(3, 2), -1, err);
    }
    case CJ_OP_ARGSORT: return cj_build_argsort(g, IN(2, 3), -1, err);
    case CJ_OP_CHOLESKY: return cj_build_cholesky(g, IN(3, 3), -1, err);
    case CJ_OP_LU: case CJ_OP_LU_PIVOTS: return cj_build_lu(g, IN(3, 3), op == CJ_OP_LU_PIVOTS, -1, err);
    case CJ_OP_QR: case CJ_OP_SVD: return cj_build_decomp(g, op, IN(3, 2), 1, -1, err);
    case CJ_OP_EIGH: return cj_build_decomp(g, op, IN(3, 3), 1, -1, err);
    case CJ_OP_TRIANGULAR_SOLVE: {
        int a = IN(3, 3);
        return cj_build_triangular_solve(g, a, IN(3, 2), CJ_TRI_LOWER, -1, err);
    }
    case CJ_OP_GATHER: { /* rows of a (2, 3) picked by 4 indices along dim 1 */
        int x = IN(2, 3);
        return cj_build_gather(g, x, input(g, (cj_shape){1, {4}}, CJ_INT64, computed, err), 1, -1, err);
    }
    case CJ_OP_SCATTER_ADD: case CJ_OP_SCATTER_MUL: case CJ_OP_SCATTER_MIN: case CJ_OP_SCATTER_MAX: {
        int idx = input(g, (cj_shape){1, {4}}, CJ_INT64, computed, err);
        return cj_build_scatter(g, op, idx, IN(2, 4), 1, &s, true, -1, err);
    }
    case CJ_OP_SCAN: case CJ_OP_WHILE: case CJ_OP_COND: case CJ_OP_CUSTOM: case CJ_OP_RESULT: /* need bodies: tests/test_lax.py */
    case CJ_NUM_OPS: break;
    }
#undef IN
    return cj_error_set(err, CJ_ERR_INTERNAL, "no builder"), -1;
}

/* Every op is built, as itself, on float64 inputs. */
static void test_builders(void) {
    for (int i = 0; i < CJ_NUM_OPS; i++) {
        if (cj_op_kind((cj_op)i) == CJ_OPKIND_REGION) continue; /* control flow: tests/test_lax.py */
        cj_op op = (cj_op)i;
        cj_graph *g = cj_graph_new();
        cj_error err = {0};
        int id = build_op(g, op, CJ_FLOAT64, false, &err);
        CHECK_MSG(id >= 0 && g->nodes[id].op == op, "builder of %s: %s", cj_op_name(op), err.message);
        cj_graph_free(g);
    }
}

/* ---- forward mode and batching rules ------------------------------------------ */

static void test_jvp_and_batching(void) {
    for (int i = 0; i < CJ_NUM_OPS; i++) {
        if (cj_op_kind((cj_op)i) == CJ_OPKIND_REGION) continue; /* control flow: tests/test_lax.py */
        cj_op op = (cj_op)i;
        if (cj_op_kind(op) == CJ_OPKIND_SOURCE) continue;
        /* jvp: a tangent parameter per float parameter */
        if (cj_jvp_has_rule(op)) {
            cj_graph *g = cj_graph_new();
            cj_error err = {0};
            int id = build_op(g, op, CJ_FLOAT64, true, &err);
            int wrt[16], tans[16], nwrt = 0, last = g->nnodes, tout = -1;
            for (int k = 0; id >= 0 && k < last && nwrt < 16; k++)
                if (g->nodes[k].op == CJ_OP_PARAM && g->nodes[k].dtype == CJ_FLOAT64) {
                    wrt[nwrt] = k;
                    tans[nwrt++] = cj_build_param(g, &g->nodes[k].shape, CJ_FLOAT64, false, -1, &err);
                }
            cj_status st = id < 0 ? CJ_ERR_INTERNAL : cj_jvp(g, 0, wrt, tans, nwrt, &id, 1, &tout, &err);
            CHECK_MSG(st == CJ_OK && tout >= 0, "jvp of %s: %s", cj_op_name(op), err.message);
            if (st == CJ_OK && tout >= 0)
                CHECK_MSG(cj_shape_equal(&g->nodes[tout].shape, &g->nodes[id].shape) &&
                              g->nodes[tout].dtype == g->nodes[id].dtype,
                          "jvp of %s: the tangent's shape or dtype differs from the value's", cj_op_name(op));
            cj_graph_free(g);
        }
        /* batching: every parameter batched (mask all ones), then each alone */
        for (unsigned mask = 0; mask < 8; mask++) {
            cj_graph *g = cj_graph_new();
            cj_error err = {0};
            int id = build_op(g, op, CJ_FLOAT64, true, &err);
            int ph[16], bat[16], n = 0, params = 0, last = g->nnodes, out = -1;
            for (int k = 0; id >= 0 && k < last && n < 16; k++) {
                if (g->nodes[k].op != CJ_OP_PARAM) continue;
                bool batched = mask == 0 ? true : (mask & (1u << params)) != 0;
                params++;
                if (!batched) continue;
                cj_shape s = g->nodes[k].shape;
                for (int d = s.rank; d > 0; d--) s.dims[d] = s.dims[d - 1];
                s.dims[0] = 3;
                s.rank++;
                ph[n] = k;
                bat[n++] = cj_build_param(g, &s, g->nodes[k].dtype, false, -1, &err);
            }
            if (mask != 0 && (n == 0 || (mask >> params) != 0)) {
                cj_graph_free(g);
                continue; /* no parameter of that number */
            }
            cj_status st = id < 0 ? CJ_ERR_INTERNAL : cj_batch(g, 0, ph, bat, n, 3, &id, 1, &out, &err);
            CHECK_MSG(st == CJ_OK && out >= 0, "batching %s (mask %u): %s", cj_op_name(op), mask, err.message);
            if (st == CJ_OK && out >= 0) {
                cj_shape want = g->nodes[id].shape, got = g->nodes[out].shape;
                bool ok = got.rank == want.rank + 1 && got.dims[0] == 3 && g->nodes[out].dtype == g->nodes[id].dtype;
                for (int d = 0; ok && d < want.rank; d++) ok = got.dims[d + 1] == want.dims[d];
                CHECK_MSG(ok, "batching %s (mask %u): wrong shape or dtype", cj_op_name(op), mask);
            }
            cj_graph_free(g);
        }
    }
}

/* ---- gradient rules read what they declare ----------------------------------- */

static void test_gradients(void) {
    for (int i = 0; i < CJ_NUM_OPS; i++) {
        if (cj_op_kind((cj_op)i) == CJ_OPKIND_REGION) continue; /* control flow: tests/test_lax.py */
        cj_op op = (cj_op)i;
        int reads = cj_autodiff_rule_reads(op);
        if (reads < 0) continue; /* checked by test_table */
        for (int remat = 0; remat < 2; remat++) {
            cj_graph *g = cj_graph_new();
            cj_error err = {0};
            /* remat: the forward pass in a region that keeps nothing, so the
             * values a rule reads are recomputed (checkpointing) */
            int region = remat ? cj_graph_region_begin(g, CJ_SAVE_NOTHING, NULL, 0, &err) : 0;
            int id = build_op(g, op, CJ_FLOAT64, true, &err);
            if (remat) cj_graph_region_end(g, region);
            CHECK_MSG(id >= 0, "building %s: %s", cj_op_name(op), err.message);
            if (id < 0) {
                cj_graph_free(g);
                continue;
            }
            cj_node n = g->nodes[id];
            int ct = cj_build_param(g, &n.shape, n.dtype, false, -1, &err);
            int wrt[16], nwrt = 0, grads[16];
            for (int k = 0; k < g->nnodes && nwrt < 16; k++)
                if (g->nodes[k].op == CJ_OP_PARAM && k != ct && g->nodes[k].dtype == CJ_FLOAT64) wrt[nwrt++] = k;
            cj_status st = cj_autodiff_vjp(g, 0, &id, &ct, 1, wrt, nwrt, grads, &err);
            CHECK_MSG(st == CJ_OK, "vjp of %s%s: %s", cj_op_name(op), remat ? " (recomputed)" : "", err.message);
            if (st != CJ_OK) {
                cj_graph_free(g);
                continue;
            }
            cj_graph_set_outputs(g, grads, nwrt, &err);
            int *res = malloc(sizeof(int) * ((size_t)g->nnodes + 1));
            int nres = cj_autodiff_residuals(g, res);
            if (!remat) {
                /* the forward values the backward pass reads are exactly those declared */
                int got = 0;
                for (int r = 0; r < nres; r++) {
                    int v = res[r];
                    int bit = v == id ? CJ_VJP_READS_OUT
                              : v == n.inputs[0] ? CJ_VJP_READS_X
                              : n.ninputs > 1 && v == n.inputs[1] ? CJ_VJP_READS_Y
                                                                 : 0;
                    CHECK_MSG(bit != 0, "%s's rule reads node %d (%s), not one of x, y, out", cj_op_name(op), v,
                              cj_op_name(g->nodes[v].op));
                    got |= bit;
                }
                CHECK_MSG(got == reads, "%s's rule reads %#x of the forward pass, its entry says %#x",
                          cj_op_name(op), got, reads);
            } else {
                /* nothing forward is kept but what escapes (the output itself) */
                for (int r = 0; r < nres; r++)
                    CHECK_MSG(res[r] == id, "%s (recomputed) keeps node %d", cj_op_name(op), res[r]);
            }
            free(res);
            /* a forward value is recomputed only for a rule that reads it: no
             * recomputed copy is dead (dead-code removal keeps every one) */
            cj_error e2 = {0};
            cj_graph *s = cj_simplify_run(g, false, &e2);
            CHECK_MSG(s != NULL, "simplifying the gradient of %s: %s", cj_op_name(op), e2.message);
            int copies = 0, live_copies = 0;
            for (int k = 0; k < g->nnodes; k++) copies += g->nodes[k].remat;
            for (int k = 0; s && k < s->nnodes; k++) live_copies += s->nodes[k].remat;
            CHECK_MSG(copies == live_copies, "%s%s: %d of %d recomputed copies are never read", cj_op_name(op),
                      remat ? " (recomputed)" : "", copies - live_copies, copies);
            if (s) cj_graph_free(s);
            cj_graph_free(g);
        }
    }
}

/* ---- CSE compares exactly the attributes an op uses --------------------------- */

/* Simplifies g with outputs a and b; are they merged into one node? */
static bool merged(cj_graph *g, int a, int b) {
    cj_error err = {0};
    int outs[2] = {a, b};
    if (cj_graph_set_outputs(g, outs, 2, &err) != CJ_OK) return false;
    cj_graph *s = cj_simplify_run(g, true, &err);
    if (!s) {
        fprintf(stderr, "simplify failed: %s\n", err.message);
        return false;
    }
    bool same = s->outputs[0] == s->outputs[1];
    cj_graph_free(s);
    return same;
}

/* Appends a copy of node id (same inputs), changed by `edit`. */
static int append_copy(cj_graph *g, int id, void (*edit)(cj_node *n, unsigned field), unsigned field) {
    cj_node n = g->nodes[id];
    int ins[8];
    for (int a = 0; a < n.ninputs && a < 8; a++) ins[a] = n.inputs[a];
    n.inputs = ins;
    if (edit) edit(&n, field);
    cj_error err = {0};
    int c = cj_graph_append(g, &n, &err);
    if (c < 0) fprintf(stderr, "append of a %s copy failed: %s\n", cj_op_name(n.op), err.message);
    return c;
}

/* Puts other values in the fields of cj_attrs the op does not use. */
static void scramble_unused(cj_node *n, unsigned field) {
    (void)field;
    unsigned used = cj_op_attrs(n->op);
    cj_attrs *a = &n->attrs;
    if (!(used & CJ_ATTR_FVALUE)) a->fvalue = 42.5;
    if (!(used & CJ_ATTR_IVALUE)) a->ivalue = 42;
    if (!(used & CJ_ATTR_AXIS)) a->axis = 7;
    if (!(used & CJ_ATTR_AXES)) a->axes = 0x70;
    for (int d = 0; d < CJ_MAX_RANK; d++) {
        if (!(used & CJ_ATTR_PERM)) a->perm[d] = 9;
        if (!(used & CJ_ATTR_START)) a->start[d] = 9;
        if (!(used & CJ_ATTR_STEP)) a->step[d] = 9;
    }
    if (!(used & CJ_ATTR_INDEX)) a->index = 5;
}

/* Builds two nodes of op that differ only in attribute `field` (another
 * valid value); false if the test knows no such pair for op. */
static bool differing_pair(cj_graph *g, cj_op op, unsigned field, int out[2]) {
    cj_error err = {0};
    cj_opkind kind = cj_op_kind(op);
    for (int k = 0; k < 2; k++) {
        cj_node n;
        memset(&n, 0, sizeof n);
        n.op = op;
        n.loc = -1;
        n.dtype = CJ_FLOAT64;
        int in[2] = {-1, -1};
        if (field == CJ_ATTR_FVALUE && op == CJ_OP_CONSTANT) {
            n.attrs.fvalue = k ? 2.0 : 1.0;
        } else if (field == CJ_ATTR_IVALUE && op == CJ_OP_CONSTANT) {
            n.dtype = CJ_INT64;
            n.attrs.ivalue = k ? 2 : 1;
        } else if (field == CJ_ATTR_AXIS && op == CJ_OP_IOTA) {
            n.dtype = CJ_INT64;
            n.shape = shape2(2, 2);
            n.attrs.axis = k;
        } else if (field == CJ_ATTR_AXIS && kind == CJ_OPKIND_CONCAT) { /* empty: the shape stays (0, 0) */
            n.shape = shape2(0, 0);
            in[0] = input(g, n.shape, n.dtype, false, &err);
            in[1] = input(g, n.shape, n.dtype, false, &err);
            n.ninputs = 2;
            n.attrs.axis = k;
        } else if (field == CJ_ATTR_AXES && kind == CJ_OPKIND_REDUCE) {
            n.shape = (cj_shape){1, {1}};
            in[0] = input(g, shape2(1, 1), n.dtype, false, &err);
            n.ninputs = 1;
            n.attrs.axes = k ? 1u : 2u;
        } else if (field == CJ_ATTR_PERM && op == CJ_OP_TRANSPOSE) {
            n.shape = shape2(2, 2);
            in[0] = input(g, n.shape, n.dtype, false, &err);
            n.ninputs = 1;
            n.attrs.perm[0] = k;
            n.attrs.perm[1] = 1 - k;
        } else if ((field == CJ_ATTR_START || field == CJ_ATTR_STEP) && op == CJ_OP_SLICE) {
            n.shape = (cj_shape){1, {1}};
            in[0] = input(g, (cj_shape){1, {3}}, n.dtype, false, &err);
            n.ninputs = 1;
            n.attrs.start[0] = field == CJ_ATTR_START ? k : 0;
            n.attrs.step[0] = field == CJ_ATTR_STEP ? 1 + k : 1;
        } else if (field == CJ_ATTR_NAME && kind == CJ_OPKIND_UNARY) {
            n.shape = shape2(2, 2);
            in[0] = input(g, n.shape, n.dtype, false, &err);
            n.ninputs = 1;
            n.attrs.name = k ? "b" : "a";
        } else if (field == CJ_ATTR_AXIS && kind == CJ_OPKIND_GATHER) { /* (2, 2) at 2 indices: (2, 2) either way */
            n.shape = shape2(2, 2);
            in[0] = input(g, n.shape, n.dtype, false, &err);
            in[1] = input(g, (cj_shape){1, {2}}, CJ_INT64, false, &err);
            n.ninputs = 2;
            n.attrs.axis = k;
        } else if (field == CJ_ATTR_INDEX && op == CJ_OP_TRIANGULAR_SOLVE) {
            n.shape = shape2(2, 2);
            in[0] = input(g, n.shape, n.dtype, false, &err);
            in[1] = input(g, n.shape, n.dtype, false, &err);
            n.ninputs = 2;
            n.attrs.index = k ? CJ_TRI_LOWER : 0;
        } else if (field == CJ_ATTR_INDEX && (op == CJ_OP_QR || op == CJ_OP_EIGH || op == CJ_OP_SVD)) {
            in[0] = input(g, shape2(2, 2), n.dtype, false, &err); /* Q and R, w and V, U and Vt */
            n.shape = op == CJ_OP_EIGH && !k ? (cj_shape){1, {2}} : shape2(2, 2);
            n.ninputs = 1;
            n.attrs.index = op == CJ_OP_SVD ? 1 + k : k;
        } else if ((field == CJ_ATTR_AXIS || field == CJ_ATTR_INDEX) && kind == CJ_OPKIND_SCATTER) {
            n.shape = shape2(2, 2);
            in[0] = input(g, (cj_shape){1, {2}}, CJ_INT64, false, &err);
            in[1] = input(g, n.shape, n.dtype, false, &err);
            n.ninputs = 2;
            n.attrs.axis = field == CJ_ATTR_AXIS ? k : 0;
            n.attrs.index = field == CJ_ATTR_INDEX ? k : 0;
        } else if (field == CJ_ATTR_INDEX && kind == CJ_OPKIND_SOURCE) {
            n.shape = shape2(2, 2);
            n.attrs.index = 0; /* the same slot: still two values */
        } else {
            return false;
        }
        if (k == 1 && n.ninputs > 0) { /* the same inputs as the first node */
            in[0] = g->nodes[out[0]].inputs[0];
            if (n.ninputs > 1) in[1] = g->nodes[out[0]].inputs[1];
        }
        n.inputs = n.ninputs ? in : NULL;
        out[k] = cj_graph_append(g, &n, &err);
        if (out[k] < 0) {
            fprintf(stderr, "differing_pair(%s): %s\n", cj_op_name(op), err.message);
            return false;
        }
    }
    return true;
}

static void test_cse(void) {
    static const unsigned fields[] = {CJ_ATTR_FVALUE, CJ_ATTR_IVALUE, CJ_ATTR_AXIS, CJ_ATTR_AXES, CJ_ATTR_PERM,
                                      CJ_ATTR_START, CJ_ATTR_STEP, CJ_ATTR_INDEX, CJ_ATTR_NAME};
    for (int i = 0; i < CJ_NUM_OPS; i++) {
        if (cj_op_kind((cj_op)i) == CJ_OPKIND_REGION) continue; /* control flow: tests/test_lax.py */
        cj_op op = (cj_op)i;
        /* every argument is its own value */
        bool slot = (cj_op_attrs(op) & CJ_ATTR_INDEX) && cj_op_kind(op) == CJ_OPKIND_SOURCE;
        for (int variant = 0; variant < 2; variant++) {
            cj_graph *g = cj_graph_new();
            cj_error err = {0};
            int id = build_op(g, op, CJ_FLOAT64, false, &err);
            int copy = id < 0 ? -1 : append_copy(g, id, variant ? scramble_unused : NULL, 0);
            CHECK_MSG(copy >= 0 && merged(g, id, copy) == !slot, "%s: %s copy %s", cj_op_name(op),
                      variant ? "a scrambled-unused-fields" : "an identical", slot ? "merged" : "kept apart");
            cj_graph_free(g);
        }
        for (size_t f = 0; f < sizeof fields / sizeof *fields; f++) {
            if (!(cj_op_attrs(op) & fields[f])) continue;
            if (op == CJ_OP_NAME) { /* simplify drops names: both become their input */
                cj_graph *g = cj_graph_new();
                int pair[2];
                bool built = differing_pair(g, op, fields[f], pair);
                CHECK_MSG(built && merged(g, pair[0], pair[1]), "name: differently named copies are one value");
                cj_graph_free(g);
                continue;
            }
            cj_graph *g = cj_graph_new();
            int pair[2];
            bool built = differing_pair(g, op, fields[f], pair);
            CHECK_MSG(built, "%s: the test has no pair differing in attribute %#x", cj_op_name(op), fields[f]);
            if (built) CHECK_MSG(!merged(g, pair[0], pair[1]), "%s: CSE ignores attribute %#x", cj_op_name(op), fields[f]);
            cj_graph_free(g);
        }
    }
}

/* ---- identities are transparent to fusion --------------------------------------- */

/* Fuses g (CSE on) and reports its kernels, buffers and long-math expressions. */
static bool plan_figures(const cj_graph *src, int *kernels, int *buffers, int *long_math) {
    cj_error err = {0};
    cj_graph *g = cj_simplify_run(src, true, &err);
    if (!g) return false;
    bool *live = malloc((size_t)g->nnodes + 1);
    for (int i = 0; i < g->nnodes; i++) live[i] = true;
    cj_plan plan;
    memset(&plan, 0, sizeof plan);
    bool ok = cj_fuse_run(g, live, true, &plan, &err) == CJ_OK;
    free(live);
    *kernels = plan.nkernels;
    *buffers = plan.nbuffers;
    *long_math = 0;
    for (int k = 0; ok && k < plan.nkernels; k++) *long_math += cj_kernel_long_math(&plan.kernels[k]);
    cj_plan_free(&plan);
    cj_graph_free(g);
    return ok;
}

/* Wraps v in identity op `op` (when op is not ADD, the "no identity" case). */
static int wrap(cj_graph *g, cj_op op, int v, cj_error *err) {
    if (op == CJ_OP_ADD) return v;
    return op == CJ_OP_NAME ? cj_build_name(g, v, "h", -1, err) : cj_build_unary(g, op, v, -1, err);
}

/* A value passed through an identity (checkpoint_name, stop_gradient) is
 * fused exactly as the value itself: h = tanh(exp(x)) read by three
 * elementwise outputs is one kernel computing exp once, and as a matmul
 * operand it is stored once. */
static void test_identities(void) {
    for (int i = 0; i < CJ_NUM_OPS; i++) {
        if (cj_op_kind((cj_op)i) == CJ_OPKIND_REGION) continue; /* control flow: tests/test_lax.py */
        cj_op op = (cj_op)i;
        if (!cj_op_has_flag(op, CJ_OPF_IDENTITY)) continue;
        for (int form = 0; form < 2; form++) {
            int figures[2][3];
            for (int with = 0; with < 2; with++) {
                cj_graph *g = cj_graph_new();
                cj_error err = {0};
                cj_shape s = shape2(4, 8);
                int x = cj_build_param(g, &s, CJ_FLOAT64, false, -1, &err);
                int h = cj_build_unary(g, CJ_OP_TANH, cj_build_unary(g, CJ_OP_EXP, x, -1, &err), -1, &err);
                h = wrap(g, with ? op : CJ_OP_ADD, h, &err);
                int outs[3];
                if (form == 0) {
                    outs[0] = cj_build_binary(g, CJ_OP_MUL, h, x, -1, &err);
                    outs[1] = cj_build_binary(g, CJ_OP_ADD, h, x, -1, &err);
                    outs[2] = cj_build_unary(g, CJ_OP_SIN, h, -1, &err);
                } else {
                    cj_shape ws = shape2(8, 8);
                    int w = cj_build_param(g, &ws, CJ_FLOAT64, false, -1, &err);
                    outs[0] = cj_build_matmul(g, h, w, -1, &err);
                    outs[1] = cj_build_matmul(g, h, cj_build_unary(g, CJ_OP_NEG, w, -1, &err), -1, &err);
                    outs[2] = cj_build_matmul(g, cj_build_unary(g, CJ_OP_NEG, h, -1, &err), w, -1, &err);
                }
                cj_graph_set_outputs(g, outs, 3, &err);
                CHECK_MSG(err.status == CJ_OK && plan_figures(g, &figures[with][0], &figures[with][1], &figures[with][2]),
                          "%s: building or fusing: %s", cj_op_name(op), err.message);
                cj_graph_free(g);
            }
            CHECK_MSG(memcmp(figures[0], figures[1], sizeof figures[0]) == 0,
                      "%s changes fusion (form %d): kernels %d/%d, buffers %d/%d, long math %d/%d without/with",
                      cj_op_name(op), form, figures[0][0], figures[1][0], figures[0][1], figures[1][1],
                      figures[0][2], figures[1][2]);
        }
    }
}

/* ---- code generation handles every op ------------------------------------------ */

/* Does the plan compute op: as an expression, or as a kernel's reduction? */
static bool plan_has(const cj_plan *p, cj_op op) {
    for (int k = 0; k < p->nkernels; k++) {
        const cj_kernel *kern = &p->kernels[k];
        if (kern->reduced && kern->reduce_op == op) return true;
        for (int e = 0; e < kern->nexprs; e++)
            if (kern->exprs[e].kind == CJ_EX_OP && kern->exprs[e].op == op) return true;
    }
    return false;
}

/* Lowers g (outputs set) and generates code for target; LLVM verifies it. */
static bool lower_and_generate(const cj_graph *src, bool fused, cj_target target, cj_op op, int *dtype_seen) {
    cj_error err = {0};
    cj_graph *g = cj_simplify_run(src, fused, &err);
    if (!g) return false;
    bool *live = malloc((size_t)g->nnodes + 1);
    for (int i = 0; i < g->nnodes; i++) live[i] = true;
    cj_plan plan;
    memset(&plan, 0, sizeof plan);
    bool ok = cj_fuse_run(g, live, fused, &plan, &err) == CJ_OK && cj_group_run(&plan, fused, &err) == CJ_OK &&
              cj_memplan_run(&plan, fused, &err) == CJ_OK;
    free(live);
    if (ok) {
        LLVMContextRef ctx = LLVMContextCreate();
        LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("test_ops", ctx);
        ok = (target == CJ_TARGET_CPU ? cj_codegen_module(&plan, mod, "t", NULL, &err)
                                      : cj_codegen_module_target(&plan, mod, "t", target, &err)) == CJ_OK;
        char *msg = NULL;
        if (ok && LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg)) {
            fprintf(stderr, "%s: invalid IR: %s\n", cj_op_name(op), msg);
            ok = false;
        }
        LLVMDisposeMessage(msg);
        LLVMDisposeModule(mod);
        LLVMContextDispose(ctx);
        /* an elementwise op (not an identity) reached codegen as itself */
        cj_opkind kind = cj_op_kind(op);
        bool expr_kind = kind == CJ_OPKIND_UNARY || kind == CJ_OPKIND_BINARY || kind == CJ_OPKIND_COMPARE ||
                         kind == CJ_OPKIND_SELECT || kind == CJ_OPKIND_CAST || kind == CJ_OPKIND_REDUCE;
        if (ok && expr_kind && !cj_op_has_flag(op, CJ_OPF_IDENTITY)) *dtype_seen += plan_has(&plan, op);
    }
    if (!ok && err.status != CJ_OK) fprintf(stderr, "%s: %s\n", cj_op_name(op), err.message);
    cj_plan_free(&plan);
    cj_graph_free(g);
    return ok;
}

static void test_codegen(void) {
    static const cj_target targets[] = {CJ_TARGET_CPU, CJ_TARGET_NVPTX};
    for (int i = 0; i < CJ_NUM_OPS; i++) {
        if (cj_op_kind((cj_op)i) == CJ_OPKIND_REGION) continue; /* control flow: tests/test_lax.py */
        cj_op op = (cj_op)i;
        int built = 0, seen = 0;
        for (int d = 0; d < NDTYPES; d++) {
            cj_graph *g = cj_graph_new();
            cj_error err = {0};
            int id = build_op(g, op, all_dtypes[d], false, &err);
            if (id < 0 || g->nodes[id].op != op) { /* the builder refuses this dtype, or rewrites the op */
                cj_graph_free(g);
                continue;
            }
            built++;
            cj_graph_set_outputs(g, &id, 1, &err);
            for (int fused = 0; fused < 2; fused++)
                for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
                    /* argsort and the linear algebra run on the CPU only: the GPU refuses them, cleanly */
                    bool expect = !(cj_op_kind(op) == CJ_OPKIND_SORT || cj_op_kind(op) == CJ_OPKIND_LINALG) ||
                                  targets[t] != CJ_TARGET_NVPTX;
                    /* the CPU's linear algebra needs LAPACK, which this binary finds only when a
                     * libopenblas is on the loader's path (tests/test_linalg.py runs it) */
                    if (cj_op_kind(op) == CJ_OPKIND_LINALG && targets[t] == CJ_TARGET_CPU) expect = cj_lapack_available();
                    int seen_before = seen;
                    CHECK_MSG(lower_and_generate(g, fused, targets[t], op, &seen) == expect,
                              "codegen of %s in dtype %d (%s%s)", cj_op_name(op), (int)all_dtypes[d],
                              targets[t] == CJ_TARGET_CPU ? "cpu" : "nvptx", fused ? ", fused" : "");
                    if (!expect) seen = seen_before;
                }
            cj_graph_free(g);
        }
        CHECK_MSG(built > 0, "%s is built in no dtype", cj_op_name(op));
        cj_opkind kind = cj_op_kind(op);
        if ((kind == CJ_OPKIND_UNARY || kind == CJ_OPKIND_BINARY || kind == CJ_OPKIND_COMPARE ||
             kind == CJ_OPKIND_SELECT || kind == CJ_OPKIND_CAST || kind == CJ_OPKIND_REDUCE) &&
            !cj_op_has_flag(op, CJ_OPF_IDENTITY))
            CHECK_MSG(seen > 0, "%s never reached codegen as an expression", cj_op_name(op));
    }

    /* long math: both of its forms exist exactly for the ops flagged so */
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("math", ctx);
    LLVMTypeRef f64 = LLVMDoubleTypeInContext(ctx), params[2] = {f64, f64};
    LLVMValueRef fn = LLVMAddFunction(mod, "f", LLVMFunctionType(f64, params, 2, 0));
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, fn, "entry"));
    LLVMValueRef args[2] = {LLVMGetParam(fn, 0), LLVMGetParam(fn, 1)};
    for (int i = 0; i < CJ_NUM_OPS; i++) {
        if (cj_op_kind((cj_op)i) == CJ_OPKIND_REGION) continue; /* control flow: tests/test_lax.py */
        cj_op op = (cj_op)i;
        bool long_math = cj_op_has_flag(op, CJ_OPF_LONG_MATH);
        int nargs = cj_op_arity(op) == 2 ? 2 : 1;
        CHECK_MSG((cj_mathlib_inline(b, op, args) != NULL) == long_math, "inline math for %s", cj_op_name(op));
        CHECK_MSG((cj_mathlib_call(b, op, args, nargs) != NULL) == long_math, "math call for %s", cj_op_name(op));
    }
    LLVMDisposeBuilder(b);
    LLVMDisposeModule(mod);
    LLVMContextDispose(ctx);
}

int main(void) {
    test_table();
    test_records();
    test_builders();
    test_gradients();
    test_jvp_and_batching();
    test_cse();
    test_identities();
    test_codegen();
    printf("test_ops: %d checks, %d failures, %d ops\n", checks, failures, CJ_NUM_OPS);
    return failures ? 1 : 0;
}
