/* graph_grad.c - composite builders the derivative rules share (autodiff.c,
 * jvp.c): a reduction's result broadcast back over its input, a broadcast
 * undone by summing, a slice undone by placing its elements in zeros, and
 * an elementwise unary op's derivative, built from its record's D(...)
 * (ops_unary.def).  Made of the other builders only; no rule file is below
 * it. */
#include "graph_priv.h"

static int reshape(cj_graph *g, int x, const cj_shape *s, int loc, cj_error *err) {
    return x < 0 ? -1 : cj_build_reshape(g, x, s, loc, err);
}
static int zeros(cj_graph *g, const cj_shape *s, cj_dtype dt, int loc, cj_error *err) {
    return cj_build_constant(g, 0.0, 0, dt, false, s, loc, err);
}

/* The shape of a reduction's result with the reduced dims kept as 1. */
static cj_shape keepdims_shape(const cj_shape *in, uint32_t axes) {
    cj_shape s = *in;
    for (int d = 0; d < in->rank; d++)
        if (axes & (1u << d)) s.dims[d] = 1;
    return s;
}

/* See graph.h. */
int cj_build_expand_reduced(cj_graph *g, int v, const cj_shape *in, uint32_t axes, int loc, cj_error *err) {
    cj_shape kept = keepdims_shape(in, axes);
    int r = v < 0 ? -1 : cj_build_reshape(g, v, &kept, loc, err);
    return r < 0 ? -1 : cj_build_broadcast(g, r, in, loc, err);
}

/* See graph.h. */
int cj_build_unbroadcast(cj_graph *g, int ct, const cj_shape *in, int loc, cj_error *err) {
    if (ct < 0) return -1;
    cj_shape out = g->nodes[ct].shape;
    int lead = out.rank - in->rank;
    uint32_t axes = 0;
    for (int d = 0; d < out.rank; d++)
        if (d < lead || (in->dims[d - lead] == 1 && out.dims[d] != 1)) axes |= 1u << d;
    int r = axes ? cj_build_reduce(g, CJ_OP_REDUCE_SUM, ct, axes, loc, err) : ct;
    return r < 0 ? -1 : cj_build_reshape(g, r, in, loc, err);
}


/* Concatenates zeros of `before` and `after` elements around x along dim k. */
static int pad_dim(cj_graph *g, int x, int k, int64_t before, int64_t after, int loc, cj_error *err) {
    cj_node n = g->nodes[x];
    int parts[3], np = 0;
    cj_shape zs = n.shape;
    if (before > 0) {
        zs.dims[k] = before;
        parts[np++] = zeros(g, &zs, n.dtype, loc, err);
    }
    parts[np++] = x;
    if (after > 0) {
        zs.dims[k] = after;
        parts[np++] = zeros(g, &zs, n.dtype, loc, err);
    }
    for (int i = 0; i < np; i++)
        if (parts[i] < 0) return -1;
    return np == 1 ? x : cj_build_concatenate(g, parts, np, k, loc, err);
}

/* See graph.h. */
int cj_build_unslice_dim(cj_graph *g, int ct, int k, int64_t len, int64_t start, int64_t step, int loc, cj_error *err) {
    if (ct < 0) return -1;
    cj_node n = g->nodes[ct];
    int64_t count = n.shape.dims[k];
    if (count == 0) {
        cj_shape s = n.shape;
        s.dims[k] = len;
        return zeros(g, &s, n.dtype, loc, err);
    }
    if ((step > 1 || step < -1) && n.shape.rank + 1 > CJ_MAX_RANK) {
        /* no room for the extra dim below: work on (dims before k, k, dims after k) */
        cj_shape three = {3, {1, count, 1}}, back = n.shape;
        for (int d = 0; d < n.shape.rank; d++)
            if (d != k) three.dims[d < k ? 0 : 2] *= n.shape.dims[d];
        back.dims[k] = len;
        return reshape(g, cj_build_unslice_dim(g, reshape(g, ct, &three, loc, err), 1, len, start, step, loc, err), &back, loc, err);
    }
    if (step < 0) { /* reverse, so positions increase */
        int64_t st[CJ_MAX_RANK], sp[CJ_MAX_RANK], sd[CJ_MAX_RANK];
        for (int d = 0; d < n.shape.rank; d++) st[d] = 0, sp[d] = n.shape.dims[d], sd[d] = 1;
        st[k] = count - 1;
        sp[k] = -1;
        sd[k] = -1;
        ct = cj_build_slice(g, ct, st, sp, sd, loc, err);
        start = start + (count - 1) * step;
        step = -step;
        if (ct < 0) return -1;
    }
    if (step > 1) { /* interleave step-1 zeros after each element */
        cj_shape s = g->nodes[ct].shape, split = s;
        for (int d = s.rank; d > k + 1; d--) split.dims[d] = s.dims[d - 1];
        split.rank = s.rank + 1;
        split.dims[k + 1] = 1;
        int x = reshape(g, ct, &split, loc, err);
        int parts[2] = {x, -1};
        cj_shape zs = split;
        zs.dims[k + 1] = step - 1;
        parts[1] = zeros(g, &zs, n.dtype, loc, err);
        if (x < 0 || parts[1] < 0) return -1;
        x = cj_build_concatenate(g, parts, 2, k + 1, loc, err);
        cj_shape merged = s;
        merged.dims[k] = count * step;
        ct = reshape(g, x, &merged, loc, err);
        if (ct < 0) return -1;
        /* drop the zeros after the last element */
        int64_t st[CJ_MAX_RANK], sp[CJ_MAX_RANK], sd[CJ_MAX_RANK];
        for (int d = 0; d < merged.rank; d++) st[d] = 0, sp[d] = merged.dims[d], sd[d] = 1;
        sp[k] = (count - 1) * step + 1;
        ct = cj_build_slice(g, ct, st, sp, sd, loc, err);
        if (ct < 0) return -1;
    }
    int64_t covered = g->nodes[ct].shape.dims[k];
    return pad_dim(g, ct, k, start, len - start - covered, loc, err);
}

/* ---- an elementwise unary op's derivative (its record, ops_unary.def) ---- */

typedef struct {
    cj_graph *g;
    cj_error *err;
    int loc;
    int gv, x, out; /* the tangent or cotangent, the operand, the value */
} dctx;

/* -1 in, -1 out (the error is already set) */
static int cst(dctx *c, double v) {
    cj_shape scalar = {0, {0}};
    return cj_build_constant(c->g, v, (int64_t)v, CJ_FLOAT64, true, &scalar, c->loc, c->err);
}
static int bin(dctx *c, cj_op op, int a, int b) {
    return a < 0 || b < 0 ? -1 : cj_build_binary(c->g, op, a, b, c->loc, c->err);
}
static int un(dctx *c, cj_op op, int a) { return a < 0 ? -1 : cj_build_unary(c->g, op, a, c->loc, c->err); }

/* The expression's names as builder calls.  A weak float64 constant takes
 * the other operand's dtype (NEP 50), so the derivative has the op's. */
#define G (c->gv)
#define X (c->x)
#define OUT (c->out)
#define K(v) cst(c, v)
#define ADD(a, b) bin(c, CJ_OP_ADD, a, b)
#define SUB(a, b) bin(c, CJ_OP_SUB, a, b)
#define MUL(a, b) bin(c, CJ_OP_MUL, a, b)
#define DIV(a, b) bin(c, CJ_OP_DIV, a, b)
#define NEG(a) un(c, CJ_OP_NEG, a)
#define UN(op, a) un(c, CJ_OP_##op, a)
#define BUILD_D(e) (e)
#define BUILD_ZERO -1

/* See graph.h. */
int cj_unary_derivative(cj_graph *g, cj_op op, int gv, int x, int out, int loc, cj_error *err) {
    dctx ctx = {.g = g, .err = err, .loc = loc, .gv = gv, .x = x, .out = out}, *c = &ctx;
    int r = -1;
    switch ((int)op) { /* an int: the other ops are not listed */
#define UNARY(NAME, text, dtypes, cost, derivative, cpu, ptx, numpy, lax, doc) \
    case CJ_OP_##NAME: r = BUILD_##derivative; break;
#include "ops_unary.def"
#undef UNARY
    }
    if (r < 0 && err->status == CJ_OK)
        cj_error_set(err, CJ_ERR_INTERNAL, "%s has no derivative", cj_op_name(op));
    return r;
}
