/* autodiff.c - reverse mode: one VJP rule per op, building ordinary nodes.
 *
 * The backward pass is appended to the same graph as the forward one, so
 * a gradient is simplified, fused and planned like any other computation,
 * and the gradient of a gradient needs nothing more: the backward nodes
 * have VJP rules too.
 *
 * Nodes older than `first` are constants for this differentiation: that is
 * how grad inside grad (or inside jit) differentiates only the function it
 * was given.  Only float values carry cotangents. */
#include <stdlib.h>
#include <string.h>

#include "autodiff.h"

typedef struct {
    cj_graph *g;
    cj_error *err;
    int *ct;   /* cotangent node of each node, -1: none (zero) */
    int loc;   /* location of the node whose rule is running */
} vjp_ctx;

static bool is_float(cj_dtype dt) { return dt == CJ_FLOAT32 || dt == CJ_FLOAT64; }

static cj_node node(const vjp_ctx *c, int id) { return c->g->nodes[id]; }

/* small builders; each returns -1 with c->err set on failure */
static int cst(vjp_ctx *c, double v) {
    cj_shape scalar = {0, {0}};
    return cj_build_constant(c->g, v, (int64_t)v, CJ_FLOAT64, true, &scalar, c->loc, c->err);
}
static int bin(vjp_ctx *c, cj_op op, int x, int y) {
    return x < 0 || y < 0 ? -1 : cj_build_binary(c->g, op, x, y, c->loc, c->err);
}
static int un(vjp_ctx *c, cj_op op, int x) { return x < 0 ? -1 : cj_build_unary(c->g, op, x, c->loc, c->err); }
static int cast(vjp_ctx *c, int x, cj_dtype dt) { return x < 0 ? -1 : cj_build_cast(c->g, x, dt, c->loc, c->err); }
static int reshape(vjp_ctx *c, int x, const cj_shape *s) {
    return x < 0 ? -1 : cj_build_reshape(c->g, x, s, c->loc, c->err);
}
static int broadcast(vjp_ctx *c, int x, const cj_shape *s) {
    return x < 0 ? -1 : cj_build_broadcast(c->g, x, s, c->loc, c->err);
}
static int zeros(vjp_ctx *c, const cj_shape *s, cj_dtype dt) {
    return cj_build_constant(c->g, 0.0, 0, dt, false, s, c->loc, c->err);
}

/* adds `contribution` to the cotangent of node `to` */
static bool accumulate(vjp_ctx *c, int to, int contribution) {
    if (contribution < 0) return false;
    cj_node n = node(c, to);
    cj_shape have = node(c, contribution).shape;
    if (!cj_shape_equal(&have, &n.shape))
        contribution = broadcast(c, contribution, &n.shape);
    if (contribution >= 0 && node(c, contribution).dtype != n.dtype) contribution = cast(c, contribution, n.dtype);
    if (contribution < 0) return false;
    c->ct[to] = c->ct[to] < 0 ? contribution : bin(c, CJ_OP_ADD, c->ct[to], contribution);
    return c->ct[to] >= 0;
}

/* The shape of a reduction's result with the reduced dims kept as 1. */
static cj_shape keepdims_shape(const cj_shape *in, uint32_t axes) {
    cj_shape s = *in;
    for (int d = 0; d < in->rank; d++)
        if (axes & (1u << d)) s.dims[d] = 1;
    return s;
}

/* A reduction's result (or its cotangent) broadcast back over its input. */
static int expand_reduced(vjp_ctx *c, int v, const cj_shape *in, uint32_t axes) {
    cj_shape kept = keepdims_shape(in, axes);
    return broadcast(c, reshape(c, v, &kept), in);
}

/* Sums a cotangent of shape `out` down to `in`, undoing a broadcast. */
static int unbroadcast(vjp_ctx *c, int ct, const cj_shape *in) {
    cj_shape out = node(c, ct).shape;
    int lead = out.rank - in->rank;
    uint32_t axes = 0;
    for (int d = 0; d < out.rank; d++)
        if (d < lead || (in->dims[d - lead] == 1 && out.dims[d] != 1)) axes |= 1u << d;
    int r = axes ? cj_build_reduce(c->g, CJ_OP_REDUCE_SUM, ct, axes, c->loc, c->err) : ct;
    return reshape(c, r, in);
}

/* Swaps the last two dims (matmul operands). */
static int swap_last(vjp_ctx *c, int x) {
    int rank = node(c, x).shape.rank, perm[CJ_MAX_RANK];
    for (int d = 0; d < rank; d++) perm[d] = d;
    perm[rank - 2] = rank - 1;
    perm[rank - 1] = rank - 2;
    return cj_build_transpose(c->g, x, perm, c->loc, c->err);
}

/* Concatenates zeros of `before` and `after` elements around x along dim k. */
static int pad_dim(vjp_ctx *c, int x, int k, int64_t before, int64_t after) {
    cj_node n = node(c, x);
    int parts[3], np = 0;
    cj_shape zs = n.shape;
    if (before > 0) {
        zs.dims[k] = before;
        parts[np++] = zeros(c, &zs, n.dtype);
    }
    parts[np++] = x;
    if (after > 0) {
        zs.dims[k] = after;
        parts[np++] = zeros(c, &zs, n.dtype);
    }
    for (int i = 0; i < np; i++)
        if (parts[i] < 0) return -1;
    return np == 1 ? x : cj_build_concatenate(c->g, parts, np, k, c->loc, c->err);
}

/* The VJP of a slice along dim k: put the n cotangent elements back at
 * positions start, start+step, ... of a zero dim of length `len`. */
static int unslice_dim(vjp_ctx *c, int ct, int k, int64_t len, int64_t start, int64_t step) {
    if (ct < 0) return -1;
    cj_node n = node(c, ct);
    int64_t count = n.shape.dims[k];
    if (count == 0) {
        cj_shape s = n.shape;
        s.dims[k] = len;
        return zeros(c, &s, n.dtype);
    }
    if ((step > 1 || step < -1) && n.shape.rank + 1 > CJ_MAX_RANK) {
        /* no room for the extra dim below: work on (dims before k, k, dims after k) */
        cj_shape three = {3, {1, count, 1}}, back = n.shape;
        for (int d = 0; d < n.shape.rank; d++)
            if (d != k) three.dims[d < k ? 0 : 2] *= n.shape.dims[d];
        back.dims[k] = len;
        return reshape(c, unslice_dim(c, reshape(c, ct, &three), 1, len, start, step), &back);
    }
    if (step < 0) { /* reverse, so positions increase */
        int64_t st[CJ_MAX_RANK], sp[CJ_MAX_RANK], sd[CJ_MAX_RANK];
        for (int d = 0; d < n.shape.rank; d++) st[d] = 0, sp[d] = n.shape.dims[d], sd[d] = 1;
        st[k] = count - 1;
        sp[k] = -1;
        sd[k] = -1;
        ct = cj_build_slice(c->g, ct, st, sp, sd, c->loc, c->err);
        start = start + (count - 1) * step;
        step = -step;
        if (ct < 0) return -1;
    }
    if (step > 1) { /* interleave step-1 zeros after each element */
        cj_shape s = node(c, ct).shape, split = s;
        for (int d = s.rank; d > k + 1; d--) split.dims[d] = s.dims[d - 1];
        split.rank = s.rank + 1;
        split.dims[k + 1] = 1;
        int x = reshape(c, ct, &split);
        int parts[2] = {x, -1};
        cj_shape zs = split;
        zs.dims[k + 1] = step - 1;
        parts[1] = zeros(c, &zs, n.dtype);
        if (x < 0 || parts[1] < 0) return -1;
        x = cj_build_concatenate(c->g, parts, 2, k + 1, c->loc, c->err);
        cj_shape merged = s;
        merged.dims[k] = count * step;
        ct = reshape(c, x, &merged);
        if (ct < 0) return -1;
        /* drop the zeros after the last element */
        int64_t st[CJ_MAX_RANK], sp[CJ_MAX_RANK], sd[CJ_MAX_RANK];
        for (int d = 0; d < merged.rank; d++) st[d] = 0, sp[d] = merged.dims[d], sd[d] = 1;
        sp[k] = (count - 1) * step + 1;
        ct = cj_build_slice(c->g, ct, st, sp, sd, c->loc, c->err);
        if (ct < 0) return -1;
    }
    int64_t covered = node(c, ct).shape.dims[k];
    return pad_dim(c, ct, k, start, len - start - covered);
}

/* Propagates the cotangent of node `id` to its inputs. */
static bool apply_rule(vjp_ctx *c, int id, int first) {
    cj_node n = node(c, id);
    int g = c->ct[id];
    c->loc = n.loc;
    int x = n.ninputs > 0 ? n.inputs[0] : -1, y = n.ninputs > 1 ? n.inputs[1] : -1;
    /* which inputs take part: float values recorded after `first` */
#define WANTS(i) (n.inputs[i] >= first && is_float(node(c, n.inputs[i]).dtype))
    switch (n.op) {
    case CJ_OP_PARAM: case CJ_OP_ARRAY: case CJ_OP_CONSTANT: case CJ_OP_IOTA:
        return true;
    /* piecewise constant: zero gradient */
    case CJ_OP_SIGN: case CJ_OP_FLOOR: case CJ_OP_CEIL: case CJ_OP_LOGICAL_NOT: case CJ_OP_ISNAN:
    case CJ_OP_ISFINITE: case CJ_OP_FLOORDIV: case CJ_OP_LOGICAL_AND: case CJ_OP_LOGICAL_OR:
    case CJ_OP_EQ: case CJ_OP_NE: case CJ_OP_LT: case CJ_OP_LE: case CJ_OP_GT: case CJ_OP_GE:
        return true;

    case CJ_OP_NAME: return !WANTS(0) || accumulate(c, x, g);
    case CJ_OP_CAST: return !WANTS(0) || accumulate(c, x, cast(c, g, node(c, x).dtype));
    case CJ_OP_NEG: return !WANTS(0) || accumulate(c, x, un(c, CJ_OP_NEG, g));
    case CJ_OP_ABS: return !WANTS(0) || accumulate(c, x, bin(c, CJ_OP_MUL, g, un(c, CJ_OP_SIGN, x)));
    case CJ_OP_EXP: return !WANTS(0) || accumulate(c, x, bin(c, CJ_OP_MUL, g, id));
    case CJ_OP_EXPM1: return !WANTS(0) || accumulate(c, x, bin(c, CJ_OP_MUL, g, bin(c, CJ_OP_ADD, id, cst(c, 1))));
    case CJ_OP_LOG: return !WANTS(0) || accumulate(c, x, bin(c, CJ_OP_DIV, g, x));
    case CJ_OP_LOG1P: return !WANTS(0) || accumulate(c, x, bin(c, CJ_OP_DIV, g, bin(c, CJ_OP_ADD, x, cst(c, 1))));
    case CJ_OP_SQRT: /* g / (2 sqrt(x)) */
        return !WANTS(0) || accumulate(c, x, bin(c, CJ_OP_DIV, bin(c, CJ_OP_MUL, g, cst(c, 0.5)), id));
    case CJ_OP_RECIPROCAL: /* -g / x^2 = -g * out^2 */
        return !WANTS(0) || accumulate(c, x, un(c, CJ_OP_NEG, bin(c, CJ_OP_MUL, g, bin(c, CJ_OP_MUL, id, id))));
    case CJ_OP_TANH: /* g (1 - out^2) */
        return !WANTS(0) || accumulate(c, x, bin(c, CJ_OP_MUL, g, bin(c, CJ_OP_SUB, cst(c, 1), bin(c, CJ_OP_MUL, id, id))));
    case CJ_OP_SIN: return !WANTS(0) || accumulate(c, x, bin(c, CJ_OP_MUL, g, un(c, CJ_OP_COS, x)));
    case CJ_OP_COS: return !WANTS(0) || accumulate(c, x, un(c, CJ_OP_NEG, bin(c, CJ_OP_MUL, g, un(c, CJ_OP_SIN, x))));

    case CJ_OP_ADD:
        return (!WANTS(0) || accumulate(c, x, g)) && (!WANTS(1) || accumulate(c, y, g));
    case CJ_OP_SUB:
        return (!WANTS(0) || accumulate(c, x, g)) && (!WANTS(1) || accumulate(c, y, un(c, CJ_OP_NEG, g)));
    case CJ_OP_MUL:
        return (!WANTS(0) || accumulate(c, x, bin(c, CJ_OP_MUL, g, y))) &&
               (!WANTS(1) || accumulate(c, y, bin(c, CJ_OP_MUL, g, x)));
    case CJ_OP_DIV: /* d/dy = -g * out / y */
        return (!WANTS(0) || accumulate(c, x, bin(c, CJ_OP_DIV, g, y))) &&
               (!WANTS(1) || accumulate(c, y, un(c, CJ_OP_NEG, bin(c, CJ_OP_DIV, bin(c, CJ_OP_MUL, g, id), y))));
    case CJ_OP_POW: {
        /* d/dx = g y x^(y-1), taken as 0 where y == 0 (as JAX: x^0 is constant, even at
         * x = 0 where y x^(y-1) would be 0 * inf); d/dy = g out log(x), taken as 0 where x <= 0 */
        bool ok = true;
        if (WANTS(0)) {
            int dx = bin(c, CJ_OP_MUL, y, bin(c, CJ_OP_POW, x, bin(c, CJ_OP_SUB, y, cst(c, 1))));
            int y0 = bin(c, CJ_OP_EQ, y, cst(c, 0));
            dx = dx < 0 || y0 < 0 ? -1 : cj_build_select(c->g, y0, cst(c, 0), dx, c->loc, c->err);
            ok = accumulate(c, x, bin(c, CJ_OP_MUL, g, dx));
        }
        if (ok && WANTS(1)) {
            int positive = bin(c, CJ_OP_GT, x, cst(c, 0));
            int logx = positive < 0 ? -1 : cj_build_select(c->g, positive, un(c, CJ_OP_LOG, x), cst(c, 0), c->loc, c->err);
            ok = accumulate(c, y, bin(c, CJ_OP_MUL, bin(c, CJ_OP_MUL, g, id), logx));
        }
        return ok;
    }
    case CJ_OP_MAXIMUM:
    case CJ_OP_MINIMUM: {
        /* the larger (smaller) operand takes the gradient; ties share it equally, as JAX */
        cj_op wins = n.op == CJ_OP_MAXIMUM ? CJ_OP_GT : CJ_OP_LT;
        int tie = bin(c, CJ_OP_MUL, cast(c, bin(c, CJ_OP_EQ, x, y), n.dtype), cst(c, 0.5));
        bool ok = true;
        if (WANTS(0)) ok = accumulate(c, x, bin(c, CJ_OP_MUL, g, bin(c, CJ_OP_ADD, cast(c, bin(c, wins, x, y), n.dtype), tie)));
        if (ok && WANTS(1)) ok = accumulate(c, y, bin(c, CJ_OP_MUL, g, bin(c, CJ_OP_ADD, cast(c, bin(c, wins, y, x), n.dtype), tie)));
        return ok;
    }
    case CJ_OP_SELECT: {
        int z = zeros(c, &n.shape, n.dtype), cond = x;
        bool ok = true;
        if (WANTS(1)) ok = accumulate(c, n.inputs[1], cj_build_select(c->g, cond, g, z, c->loc, c->err));
        if (ok && WANTS(2)) ok = accumulate(c, n.inputs[2], cj_build_select(c->g, cond, z, g, c->loc, c->err));
        return ok;
    }

    case CJ_OP_BROADCAST: {
        cj_shape in = node(c, x).shape;
        return !WANTS(0) || accumulate(c, x, unbroadcast(c, g, &in));
    }
    case CJ_OP_RESHAPE: {
        cj_shape in = node(c, x).shape;
        return !WANTS(0) || accumulate(c, x, reshape(c, g, &in));
    }
    case CJ_OP_TRANSPOSE: {
        int inv[CJ_MAX_RANK];
        for (int d = 0; d < n.shape.rank; d++) inv[n.attrs.perm[d]] = d;
        return !WANTS(0) || accumulate(c, x, cj_build_transpose(c->g, g, inv, c->loc, c->err));
    }
    case CJ_OP_SLICE: {
        if (!WANTS(0)) return true;
        cj_shape in = node(c, x).shape;
        int r = g;
        for (int k = 0; k < in.rank && r >= 0; k++) {
            bool whole = n.attrs.start[k] == 0 && n.attrs.step[k] == 1 && n.shape.dims[k] == in.dims[k];
            if (!whole) r = unslice_dim(c, r, k, in.dims[k], n.attrs.start[k], n.attrs.step[k]);
        }
        return accumulate(c, x, r);
    }
    case CJ_OP_CONCATENATE: {
        int axis = n.attrs.axis;
        int64_t pos = 0;
        for (int i = 0; i < n.ninputs; i++) {
            cj_shape in = node(c, n.inputs[i]).shape;
            if (WANTS(i)) {
                int64_t st[CJ_MAX_RANK], sp[CJ_MAX_RANK], sd[CJ_MAX_RANK];
                for (int d = 0; d < in.rank; d++) st[d] = 0, sp[d] = in.dims[d], sd[d] = 1;
                st[axis] = pos;
                sp[axis] = pos + in.dims[axis];
                if (!accumulate(c, n.inputs[i], cj_build_slice(c->g, g, st, sp, sd, c->loc, c->err))) return false;
            }
            pos += in.dims[axis];
        }
        return true;
    }

    case CJ_OP_REDUCE_SUM: {
        cj_shape in = node(c, x).shape;
        return !WANTS(0) || accumulate(c, x, expand_reduced(c, g, &in, n.attrs.axes));
    }
    case CJ_OP_REDUCE_PROD: {
        /* g times the product of the other elements, exact at zeros too (as JAX):
         * with nz = x where x != 0 and 1 where x == 0, p = prod(nz) and zeros = the
         * number of zeros in the reduced group, the others' product is p / nz when
         * none of the others is zero, else 0.  (Away from zeros this is g out / x;
         * higher derivatives at an exact zero are those of this piecewise form.) */
        if (!WANTS(0)) return true;
        cj_shape in = node(c, x).shape;
        uint32_t axes = n.attrs.axes;
        int is0 = bin(c, CJ_OP_EQ, x, cst(c, 0));
        int nz = is0 < 0 ? -1 : cj_build_select(c->g, is0, cst(c, 1), x, c->loc, c->err);
        int p = nz < 0 ? -1 : cj_build_reduce(c->g, CJ_OP_REDUCE_PROD, nz, axes, c->loc, c->err);
        int z = cast(c, is0, n.dtype);
        int count = z < 0 ? -1 : cj_build_reduce(c->g, CJ_OP_REDUCE_SUM, z, axes, c->loc, c->err);
        int others0 = bin(c, CJ_OP_EQ, bin(c, CJ_OP_SUB, expand_reduced(c, count, &in, axes), z), cst(c, 0));
        int rest = bin(c, CJ_OP_DIV, expand_reduced(c, p, &in, axes), nz);
        int r = others0 < 0 || rest < 0 ? -1 : cj_build_select(c->g, others0, rest, cst(c, 0), c->loc, c->err);
        return accumulate(c, x, bin(c, CJ_OP_MUL, expand_reduced(c, g, &in, axes), r));
    }
    case CJ_OP_REDUCE_MAX:
    case CJ_OP_REDUCE_MIN: { /* shared equally by the elements equal to the result */
        if (!WANTS(0)) return true;
        cj_shape in = node(c, x).shape;
        int ob = expand_reduced(c, id, &in, n.attrs.axes);
        int hit = cast(c, bin(c, CJ_OP_EQ, x, ob), n.dtype);
        int count = hit < 0 ? -1 : cj_build_reduce(c->g, CJ_OP_REDUCE_SUM, hit, n.attrs.axes, c->loc, c->err);
        int share = bin(c, CJ_OP_DIV, expand_reduced(c, g, &in, n.attrs.axes), expand_reduced(c, count, &in, n.attrs.axes));
        return accumulate(c, x, bin(c, CJ_OP_MUL, share, hit));
    }
    case CJ_OP_MATMUL: /* dA = g B^T, dB = A^T g */
        return (!WANTS(0) || accumulate(c, x, cj_build_matmul(c->g, g, swap_last(c, y), c->loc, c->err))) &&
               (!WANTS(1) || accumulate(c, y, cj_build_matmul(c->g, swap_last(c, x), g, c->loc, c->err)));
    case CJ_NUM_OPS:
        break;
    }
#undef WANTS
    cj_error_set(c->err, CJ_ERR_INTERNAL, "autodiff: no rule for %s", cj_op_name(n.op));
    return false;
}

/* See autodiff.h. */
cj_status cj_autodiff_vjp(cj_graph *g, int first, const int *outs, const int *cts, int nouts,
                          const int *wrt, int nwrt, int *grads, cj_error *err) {
    int last = g->nnodes; /* rules only run on nodes that existed before we started */
    vjp_ctx c = {.g = g, .err = err, .loc = -1};
    c.ct = malloc(sizeof(int) * ((size_t)last + 1));
    if (!c.ct) return cj_error_set(err, CJ_ERR_MEMORY, "autodiff: out of memory");
    for (int i = 0; i < last; i++) c.ct[i] = -1;
    bool ok = true;
    for (int i = 0; ok && i < nouts; i++) {
        if (outs[i] < 0 || outs[i] >= last || cts[i] < 0 || cts[i] >= last) {
            cj_error_set(err, CJ_ERR_INTERNAL, "autodiff: bad node id");
            ok = false;
        } else if (is_float(g->nodes[outs[i]].dtype)) {
            ok = accumulate(&c, outs[i], cts[i]);
        }
    }
    /* c.ct may point at new nodes (>= last); rules only read c.ct[id < last] */
    for (int id = last - 1; ok && id >= first; id--) {
        if (c.ct[id] < 0) continue;
        bool is_wrt = false;
        for (int w = 0; w < nwrt; w++) is_wrt |= wrt[w] == id;
        if (is_wrt && g->nodes[id].op == CJ_OP_PARAM) continue;
        ok = apply_rule(&c, id, first);
    }
    for (int w = 0; ok && w < nwrt; w++) {
        int id = wrt[w];
        grads[w] = c.ct[id] >= 0 ? c.ct[id] : zeros(&c, &g->nodes[id].shape, g->nodes[id].dtype);
        ok = grads[w] >= 0;
    }
    free(c.ct);
    if (!ok && err->status == CJ_OK) cj_error_set(err, CJ_ERR_INTERNAL, "autodiff failed");
    return err->status;
}
