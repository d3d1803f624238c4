/* jvp.c - forward mode: one JVP rule per op (a table indexed by op, the
 * counterpart of autodiff.c's VJP rules), building ordinary nodes.
 *
 * The tangents are appended to the same graph as the values they are
 * tangents of, in one pass over the nodes in order, so they fuse with the
 * primal computation (`exp(x)` and its tangent `t * exp(x)` are one loop)
 * and can themselves be differentiated either way: grad of jvp and jvp of
 * grad need nothing more.  A tangent has its primal's shape and dtype;
 * only float values carry one. */
#include <stdlib.h>

#include "custom.h"
#include "jvp.h"
#include "regions.h"

typedef struct {
    cj_graph *g;
    cj_error *err;
    int loc; /* location of the node whose rule is running */
} jvp_ctx;

static bool is_float(cj_dtype dt) { return dt == CJ_FLOAT32 || dt == CJ_FLOAT64; }

/* Small builders: -1 in, -1 out (the error is already set). */
static int cst(jvp_ctx *c, double v) {
    cj_shape scalar = {0, {0}};
    return cj_build_constant(c->g, v, (int64_t)v, CJ_FLOAT64, true, &scalar, c->loc, c->err);
}
static int bin(jvp_ctx *c, cj_op op, int x, int y) {
    return x < 0 || y < 0 ? -1 : cj_build_binary(c->g, op, x, y, c->loc, c->err);
}
static int un(jvp_ctx *c, cj_op op, int x) { return x < 0 ? -1 : cj_build_unary(c->g, op, x, c->loc, c->err); }
static int sel(jvp_ctx *c, int cond, int x, int y) {
    return cond < 0 || x < 0 || y < 0 ? -1 : cj_build_select(c->g, cond, x, y, c->loc, c->err);
}
static int reduce(jvp_ctx *c, cj_op op, int x, uint32_t axes) {
    return x < 0 ? -1 : cj_build_reduce(c->g, op, x, axes, c->loc, c->err);
}
static int zeros_like(jvp_ctx *c, int id) {
    cj_node n = c->g->nodes[id];
    return cj_build_constant(c->g, 0.0, 0, n.dtype, false, &n.shape, c->loc, c->err);
}
/* x cast to dtype dt (the product of a float64 factor and a float32 tangent
 * would otherwise promote). */
static int as_dtype(jvp_ctx *c, int x, cj_dtype dt) {
    if (x < 0) return -1;
    return c->g->nodes[x].dtype == dt ? x : cj_build_cast(c->g, x, dt, c->loc, c->err);
}

/* The same node as n, reading `ins` instead of its inputs: the tangent of a
 * linear op (movement, sums, negation, an identity) is the op applied to
 * the tangents.  Shape and dtype are the primal's. */
static int same_op(jvp_ctx *c, const cj_node *n, const int *ins) {
    cj_node p = *n;
    p.inputs = (int *)ins;
    p.remat = false;
    p.region = c->g->current_region;
    p.loc = c->loc;
    return cj_graph_append(c->g, &p, c->err);
}

/* a + b where either may be absent (-1 meaning zero); -1 when both are. */
static int add_opt(jvp_ctx *c, int a, int b) {
    if (c->err->status != CJ_OK) return -1;
    if (a < 0) return b;
    if (b < 0) return a;
    return bin(c, CJ_OP_ADD, a, b);
}


/* ---- the rules ------------------------------------------------------------
 * Each gets the node n (its id `id` is its own value), and t[i], the tangent
 * of input i or -1 when it is zero; at least one is present.  It returns the
 * tangent of n, or -1 (with c->err set on failure, else meaning zero). */
/* graph_grad.c's, with this rule's location and error. */
static int expand_reduced(jvp_ctx *c, int v, const cj_shape *in, uint32_t axes) {
    return cj_build_expand_reduced(c->g, v, in, axes, c->loc, c->err);
}

#define RULE(op) static int jvp_##op(jvp_ctx *c, const cj_node *n, int id, const int *t)
#define X (n->inputs[0])
#define Y (n->inputs[1])

RULE(linear) { /* NAME, movement, reduce_sum */
    (void)id;
    return same_op(c, n, t);
}
RULE(cast) {
    (void)id;
    if (!is_float(n->dtype)) return -1;
    return cj_build_cast(c->g, t[0], n->dtype, c->loc, c->err);
}
RULE(add) {
    (void)id, (void)n;
    return add_opt(c, t[0], t[1]);
}
RULE(sub) {
    (void)id, (void)n;
    if (t[1] < 0) return t[0];
    return t[0] < 0 ? un(c, CJ_OP_NEG, t[1]) : bin(c, CJ_OP_SUB, t[0], t[1]);
}
RULE(mul) { /* and fma, x * y + z: plus tz */
    (void)id;
    int a = t[0] < 0 ? -1 : bin(c, CJ_OP_MUL, t[0], Y);
    int b = t[1] < 0 ? -1 : bin(c, CJ_OP_MUL, X, t[1]);
    return n->op == CJ_OP_FMA ? add_opt(c, add_opt(c, a, b), t[2]) : add_opt(c, a, b);
}
RULE(div) { /* tx / y - ty * out / y */
    int a = t[0] < 0 ? -1 : bin(c, CJ_OP_DIV, t[0], Y);
    int b = t[1] < 0 ? -1 : un(c, CJ_OP_NEG, bin(c, CJ_OP_DIV, bin(c, CJ_OP_MUL, t[1], id), Y));
    return add_opt(c, a, b);
}
RULE(pow) { /* as autodiff.c: d/dx = cj_pow_dx; d/dy = out log x, 0 where x == 0, nan where x < 0 */
    int a = -1, b = -1;
    if (t[0] >= 0) a = bin(c, CJ_OP_MUL, t[0], cj_pow_dx(c->g, X, Y, c->loc, c->err));
    if (t[1] >= 0) {
        int logx = sel(c, bin(c, CJ_OP_EQ, X, cst(c, 0)), cst(c, 0), un(c, CJ_OP_LOG, X));
        b = bin(c, CJ_OP_MUL, bin(c, CJ_OP_MUL, t[1], id), logx);
    }
    return add_opt(c, a, b);
}
RULE(maxmin) { /* the winner's tangent; at a tie the mean of both, as the VJP shares it */
    (void)id;
    cj_op wins = n->op == CJ_OP_MAXIMUM ? CJ_OP_GT : CJ_OP_LT;
    int tie = bin(c, CJ_OP_MUL, as_dtype(c, bin(c, CJ_OP_EQ, X, Y), n->dtype), cst(c, 0.5));
    int wx = bin(c, CJ_OP_ADD, as_dtype(c, bin(c, wins, X, Y), n->dtype), tie);
    int wy = bin(c, CJ_OP_ADD, as_dtype(c, bin(c, wins, Y, X), n->dtype), tie);
    int a = t[0] < 0 ? -1 : bin(c, CJ_OP_MUL, t[0], wx);
    int b = t[1] < 0 ? -1 : bin(c, CJ_OP_MUL, t[1], wy);
    return add_opt(c, a, b);
}
RULE(select) { /* t[0] is the condition's, always absent (bool) */
    (void)id;
    int tx = t[1] >= 0 ? t[1] : zeros_like(c, Y);
    int ty = t[2] >= 0 ? t[2] : zeros_like(c, n->inputs[2]);
    return sel(c, X, tx, ty);
}
RULE(concatenate) { /* absent pieces are zeros */
    (void)id;
    int small[8];
    int *ins = n->ninputs <= 8 ? small : malloc(sizeof(int) * (size_t)n->ninputs);
    if (!ins) return cj_error_set(c->err, CJ_ERR_MEMORY, "jvp: out of memory"), -1;
    bool ok = true;
    for (int i = 0; ok && i < n->ninputs; i++) ok = (ins[i] = t[i] >= 0 ? t[i] : zeros_like(c, n->inputs[i])) >= 0;
    int r = ok ? same_op(c, n, ins) : -1;
    if (ins != small) free(ins);
    return r;
}
RULE(reduce_prod) {
    /* sum over the group of t times the product of the other elements, exact
     * at zeros: with nz = x (1 where x == 0), p = prod(nz) and k zeros in the
     * group, the others' product is p / nz when k == 0, p (times 1 at the zero
     * itself, 0 elsewhere) when k == 1, and 0 when k >= 2. */
    (void)id;
    cj_shape in = c->g->nodes[X].shape;
    uint32_t axes = n->attrs.axes;
    int is0 = bin(c, CJ_OP_EQ, X, cst(c, 0));
    int nz = sel(c, is0, cst(c, 1), X);
    int p = reduce(c, CJ_OP_REDUCE_PROD, nz, axes);
    int z = as_dtype(c, is0, n->dtype);
    int k = expand_reduced(c, reduce(c, CJ_OP_REDUCE_SUM, z, axes), &in, axes);
    int factor = sel(c, bin(c, CJ_OP_EQ, k, cst(c, 0)), cst(c, 1), sel(c, bin(c, CJ_OP_EQ, k, cst(c, 1)), z, cst(c, 0)));
    int others = bin(c, CJ_OP_MUL, bin(c, CJ_OP_DIV, expand_reduced(c, p, &in, axes), nz), factor);
    return reduce(c, CJ_OP_REDUCE_SUM, bin(c, CJ_OP_MUL, t[0], as_dtype(c, others, n->dtype)), axes);
}
RULE(reduce_maxmin) { /* the mean of the tangents of the elements equal to the result */
    cj_shape in = c->g->nodes[X].shape;
    uint32_t axes = n->attrs.axes;
    int hit = as_dtype(c, bin(c, CJ_OP_EQ, X, expand_reduced(c, id, &in, axes)), n->dtype);
    int count = reduce(c, CJ_OP_REDUCE_SUM, hit, axes);
    return bin(c, CJ_OP_DIV, reduce(c, CJ_OP_REDUCE_SUM, bin(c, CJ_OP_MUL, t[0], hit), axes), count);
}
RULE(matmul) { /* tx @ y + x @ ty, on the primitive's already-matched operands */
    (void)id;
    int a = t[0] < 0 ? -1 : cj_build_matmul(c->g, t[0], Y, c->loc, c->err);
    int b = t[1] < 0 ? -1 : cj_build_matmul(c->g, X, t[1], c->loc, c->err);
    return add_opt(c, a, b);
}
#undef RULE
#undef X
#undef Y

/* Every op with a tangent but the elementwise unary ones (their records'
 * derivative, ops_unary.def): sources have none, and ops flagged
 * CJ_OPF_ZERO_GRAD in ops.def (piecewise constant, boolean, stop_gradient)
 * give zero, so they have no entry. */
static int jvp_gather(jvp_ctx *c, const cj_node *n, int id, const int *t) { /* linear in x: the tangent gathered at the same indices */
    (void)id;
    return t[0] < 0 ? -1 : cj_build_gather(c->g, t[0], n->inputs[1], n->attrs.axis, c->loc, c->err);
}
static int jvp_scatter(jvp_ctx *c, const cj_node *n, int id, const int *t) {
    if (t[1] < 0) return -1;
    int tu = n->op == CJ_OP_SCATTER_ADD ? t[1] : bin(c, CJ_OP_MUL, t[1], cj_build_scatter_partials(c->g, n, n->inputs[0], n->inputs[1], id, c->loc, c->err));
    /* min/max/mul: each update's tangent times d out / d update, summed at its index */
    return tu < 0 ? -1 : cj_build_scatter(c->g, CJ_OP_SCATTER_ADD, n->inputs[0], tu, n->attrs.axis, &n->shape,
                                          n->attrs.index == 1, c->loc, c->err);
}

/* dx = op(a)^-1 (db - op(da) x), da kept to a's triangle. */
static int jvp_triangular_solve(jvp_ctx *c, const cj_node *n, int id, const int *t) {
    int flags = n->attrs.index, loc = c->loc, r = t[1];
    if (t[0] >= 0) {
        int da = cj_build_triangle(c->g, t[0], flags & CJ_TRI_LOWER, flags & CJ_TRI_UNIT, loc, c->err);
        if (flags & CJ_TRI_TRANSPOSE) da = cj_build_swap_last(c->g, da, loc, c->err);
        int dax = da < 0 ? -1 : cj_build_matmul(c->g, da, id, loc, c->err);
        r = r >= 0 ? bin(c, CJ_OP_SUB, r, dax) : un(c, CJ_OP_NEG, dax);
    }
    return r < 0 ? -1 : cj_build_triangular_solve(c->g, n->inputs[0], r, flags, loc, c->err);
}

static int jvp_lu(jvp_ctx *c, const cj_node *n, int id, const int *t) {
    return cj_build_lu_jvp(c->g, n->inputs[0], id, t[0], c->loc, c->err);
}

/* dL = L Phi(L^-1 sym(dA) L^-T). */
static int jvp_cholesky(jvp_ctx *c, const cj_node *n, int id, const int *t) {
    (void)n;
    int loc = c->loc, lo = CJ_TRI_LOWER;
    int da = bin(c, CJ_OP_MUL, bin(c, CJ_OP_ADD, t[0], cj_build_swap_last(c->g, t[0], loc, c->err)), cst(c, 0.5));
    int z = da < 0 ? -1 : cj_build_triangular_solve(c->g, id, da, lo, loc, c->err);               /* L^-1 dA */
    int zt = cj_build_swap_last(c->g, z, loc, c->err);
    int w = cj_build_swap_last(c->g, zt < 0 ? -1 : cj_build_triangular_solve(c->g, id, zt, lo, loc, c->err), loc,
                               c->err);                                                             /* .. L^-T */
    int p = cj_build_phi(c->g, w, loc, c->err);
    return p < 0 ? -1 : cj_build_matmul(c->g, id, p, loc, c->err);
}

/* QR, EIGH, SVD: the tangent of the result `index` names (graph_linalg_decomp_ad.c). */
static int jvp_decomp(jvp_ctx *c, const cj_node *n, int id, const int *t) {
    (void)id;
    return cj_build_decomp_jvp(c->g, n->op, n->inputs[0], (int)n->attrs.index, t[0], c->loc, c->err);
}

static int (*const rules[CJ_NUM_OPS])(jvp_ctx *c, const cj_node *n, int id, const int *t) = {
    [CJ_OP_NAME] = jvp_linear,
    [CJ_OP_CAST] = jvp_cast,
    [CJ_OP_ADD] = jvp_add,
    [CJ_OP_SUB] = jvp_sub,
    [CJ_OP_MUL] = jvp_mul,
    [CJ_OP_DIV] = jvp_div,
    [CJ_OP_POW] = jvp_pow,
    [CJ_OP_MAXIMUM] = jvp_maxmin,
    [CJ_OP_MINIMUM] = jvp_maxmin,
    [CJ_OP_SELECT] = jvp_select,
    [CJ_OP_FMA] = jvp_mul,
    [CJ_OP_BROADCAST] = jvp_linear,
    [CJ_OP_RESHAPE] = jvp_linear,
    [CJ_OP_TRANSPOSE] = jvp_linear,
    [CJ_OP_SLICE] = jvp_linear,
    [CJ_OP_CONCATENATE] = jvp_concatenate,
    [CJ_OP_REDUCE_SUM] = jvp_linear,
    [CJ_OP_REDUCE_PROD] = jvp_reduce_prod,
    [CJ_OP_REDUCE_MAX] = jvp_reduce_maxmin,
    [CJ_OP_REDUCE_MIN] = jvp_reduce_maxmin,
    [CJ_OP_MATMUL] = jvp_matmul,
    [CJ_OP_GATHER] = jvp_gather,
    [CJ_OP_CHOLESKY] = jvp_cholesky,
    [CJ_OP_LU] = jvp_lu,
    [CJ_OP_TRIANGULAR_SOLVE] = jvp_triangular_solve,
    [CJ_OP_QR] = jvp_decomp,
    [CJ_OP_EIGH] = jvp_decomp,
    [CJ_OP_SVD] = jvp_decomp,
    [CJ_OP_SCATTER_ADD] = jvp_scatter,
    [CJ_OP_SCATTER_MUL] = jvp_scatter,
    [CJ_OP_SCATTER_MIN] = jvp_scatter,
    [CJ_OP_SCATTER_MAX] = jvp_scatter,
};

/* A custom node (its results' tangents kept in (*custom_tan)[id], the
 * node's own tan a marker) or a result of one. */
static bool jvp_custom(cj_graph *g, int id, int *tan, int ***custom_tan, int last, cj_error *err) {
    const cj_node *n = &g->nodes[id];
    if (n->op == CJ_OP_RESULT) {
        const int *t = (*custom_tan)[n->inputs[0]];
        tan[id] = t[n->attrs.index];
        return true;
    }
    if (!*custom_tan && !(*custom_tan = calloc((size_t)last + 1, sizeof(int *))))
        return cj_error_set(err, CJ_ERR_MEMORY, "jvp: out of memory"), false;
    const cj_body *b = cj_region_body(g, n);
    int nin = n->ninputs, *in_tan = malloc(sizeof(int) * ((size_t)nin + 1));
    int *out = (*custom_tan)[id] = malloc(sizeof(int) * ((size_t)b->nresults + 1));
    if (!in_tan || !out) {
        free(in_tan);
        return cj_error_set(err, CJ_ERR_MEMORY, "jvp: out of memory"), false;
    }
    for (int a = 0; a < nin; a++) in_tan[a] = tan[n->inputs[a]];
    for (int k = 0; k < b->nresults; k++) out[k] = -1;
    bool ok = cj_custom_jvp(g, id, in_tan, out, cj_jvp, err) == CJ_OK;
    free(in_tan);
    tan[id] = id;
    return ok;
}

/* See jvp.h. */
bool cj_jvp_has_rule(cj_op op) {
    if (cj_unary(op)) return cj_unary(op)->derivative;
    return (int)op >= 0 && op < CJ_NUM_OPS && rules[op] != NULL;
}

/* The tangent of an elementwise unary node id: t times its derivative. */
static int jvp_unary(jvp_ctx *c, const cj_node *n, int id, const int *t) {
    return cj_unary_derivative(c->g, n->op, t[0], n->inputs[0], id, c->loc, c->err);
}

/* See jvp.h. */
cj_status cj_jvp(cj_graph *g, int first, const int *wrt, const int *tangents, int nwrt, const int *outs,
                 int nouts, int *out_tangents, cj_error *err) {
    int last = g->nnodes; /* rules run on the nodes that existed before we started */
    int *tan = malloc(sizeof(int) * ((size_t)last + 1)), **custom_tan = NULL;
    if (!tan) return cj_error_set(err, CJ_ERR_MEMORY, "jvp: out of memory");
    for (int i = 0; i < last; i++) tan[i] = -1;
    bool ok = true;
    for (int w = 0; ok && w < nwrt; w++) {
        int id = wrt[w], t = tangents[w];
        if (id < 0 || id >= last || t < 0 || t >= last) {
            cj_error_set(err, CJ_ERR_INTERNAL, "jvp: bad node id");
            ok = false;
        } else if (!cj_shape_equal(&g->nodes[id].shape, &g->nodes[t].shape) ||
                   g->nodes[id].dtype != g->nodes[t].dtype) {
            cj_error_set(err, CJ_ERR_VALUE, "jvp: a tangent must have its primal's shape and dtype");
            ok = false;
        } else if (is_float(g->nodes[id].dtype)) {
            tan[id] = t;
        }
    }
    int small[8];
    for (int id = first < 0 ? 0 : first; ok && id < last; id++) {
        cj_node n = g->nodes[id]; /* appending may move the node array */
        if (tan[id] >= 0 || cj_op_kind(n.op) == CJ_OPKIND_SOURCE || cj_op_has_flag(n.op, CJ_OPF_ZERO_GRAD) ||
            !is_float(n.dtype))
            continue;
        bool any = false;
        for (int a = 0; a < n.ninputs; a++) any |= tan[n.inputs[a]] >= 0;
        if (!any) continue;
        if (n.op == CJ_OP_CUSTOM || (n.op == CJ_OP_RESULT && g->nodes[n.inputs[0]].op == CJ_OP_CUSTOM)) {
            /* a user-defined rule (custom.c): the region stands for its results' tangents */
            ok = jvp_custom(g, id, tan, &custom_tan, last, err);
            continue;
        }
        if (!rules[n.op] && cj_op_kind(n.op) == CJ_OPKIND_REGION) {
            /* control flow: a JVP region (jvp_regions.c); its results' tangents read it */
            if (n.op == CJ_OP_RESULT) {
                tan[id] = cj_jvp_result(g, id, tan[n.inputs[0]], err);
            } else {
                int *t = malloc(sizeof(int) * ((size_t)n.ninputs + 1));
                if (!t) {
                    cj_error_set(err, CJ_ERR_MEMORY, "jvp: out of memory");
                    ok = false;
                    break;
                }
                for (int a = 0; a < n.ninputs; a++) t[a] = tan[n.inputs[a]];
                tan[id] = cj_jvp_region(g, id, t, cj_jvp, err);
                free(t);
            }
            ok = tan[id] >= 0;
            continue;
        }
        if (!cj_jvp_has_rule(n.op)) {
            cj_error_set(err, CJ_ERR_INTERNAL, "jvp: no rule for %s", cj_op_name(n.op));
            ok = false;
            break;
        }
        int *t = n.ninputs <= 8 ? small : malloc(sizeof(int) * (size_t)n.ninputs);
        if (!t) {
            cj_error_set(err, CJ_ERR_MEMORY, "jvp: out of memory");
            ok = false;
            break;
        }
        for (int a = 0; a < n.ninputs; a++) t[a] = tan[n.inputs[a]];
        jvp_ctx c = {.g = g, .err = err, .loc = n.loc};
        tan[id] = (cj_unary(n.op) ? jvp_unary : rules[n.op])(&c, &n, id, t);
        if (t != small) free(t);
        ok = err->status == CJ_OK;
        /* a tangent keeps its primal's dtype (a weak constant never widens it) */
        if (ok && tan[id] >= 0 && g->nodes[tan[id]].dtype != n.dtype)
            ok = (tan[id] = cj_build_cast(g, tan[id], n.dtype, n.loc, err)) >= 0;
    }
    for (int j = 0; ok && j < nouts; j++) {
        if (outs[j] < 0 || outs[j] >= last) {
            cj_error_set(err, CJ_ERR_INTERNAL, "jvp: bad node id");
            ok = false;
        } else {
            out_tangents[j] = tan[outs[j]];
        }
    }
    free(tan);
    if (custom_tan)
        for (int i = 0; i < last; i++) free(custom_tan[i]);
    free(custom_tan);
    if (!ok && err->status == CJ_OK) cj_error_set(err, CJ_ERR_INTERNAL, "jvp failed");
    return err->status;
}
