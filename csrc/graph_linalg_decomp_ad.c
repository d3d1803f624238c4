/* graph_linalg_decomp_ad.c - the derivative rules of the factorizations
 * with several results (QR, EIGH, SVD), built from ordinary graph builders
 * so that they batch, vmap and differentiate again like any other nodes.
 *
 * Each result is its own node (`index` names it), so each rule gives the
 * tangent of one result (JVP) or the input's cotangent from one result's
 * cotangent (VJP; autodiff sums those of the results a program uses).  The
 * other results a rule needs are rebuilt from the input; the simplifier's
 * CSE merges them with the forward ones.
 *
 * Conventions (as JAX's): eigh's input is taken as its symmetric part;
 * eigh's and svd's vector rules assume distinct eigen / singular values
 * (and, for the SVD of a non-square matrix, nonzero ones); QR's need the
 * first min(m, n) columns of R invertible; QR's complete mode of a tall
 * matrix and the SVD's U and Vt with full_matrices of a non-square matrix
 * have no rule. */
#include "graph_priv.h"

typedef struct {
    cj_graph *g;
    int loc;
    cj_error *err;
    cj_dtype dt;
} ad_ctx;

/* Small builders: -1 in, -1 out (the error is already set). */
static int mm(ad_ctx *c, int x, int y) { return x < 0 || y < 0 ? -1 : cj_build_matmul(c->g, x, y, c->loc, c->err); }
static int tr(ad_ctx *c, int x) { return x < 0 ? -1 : cj_build_swap_last(c->g, x, c->loc, c->err); }
static int bin(ad_ctx *c, cj_op op, int x, int y) {
    return x < 0 || y < 0 ? -1 : cj_build_binary(c->g, op, x, y, c->loc, c->err);
}
static int add(ad_ctx *c, int x, int y) { return bin(c, CJ_OP_ADD, x, y); }
static int sub(ad_ctx *c, int x, int y) { return bin(c, CJ_OP_SUB, x, y); }
static int mul(ad_ctx *c, int x, int y) { return bin(c, CJ_OP_MUL, x, y); }
static int cst(ad_ctx *c, double v) {
    cj_shape scalar = {0, {0}};
    return emit_constant(c->g, v, (int64_t)v, c->dt, false, &scalar, c->loc, c->err);
}
static int result(ad_ctx *c, cj_op op, int a, int index) {
    return a < 0 ? -1 : cj_build_decomp(c->g, op, a, index, c->loc, c->err);
}

/* A vector v (..., k) as a row (..., 1, k) or a column (..., k, 1), which
 * broadcast against (..., k, k) matrices. */
static int reshaped_vector(ad_ctx *c, int v, bool row) {
    if (v < 0) return -1;
    cj_shape s = c->g->nodes[v].shape;
    s.dims[s.rank] = 1;
    if (row) s.dims[s.rank] = s.dims[s.rank - 1], s.dims[s.rank - 1] = 1;
    s.rank++;
    return cj_build_reshape(c->g, v, &s, c->loc, c->err);
}
static int row(ad_ctx *c, int v) { return reshaped_vector(c, v, true); }
static int col(ad_ctx *c, int v) { return reshaped_vector(c, v, false); }

/* Whether (i, j) of the last two dims of shape s is on the diagonal. */
static int on_diagonal(ad_ctx *c, const cj_shape *s) {
    int r = s->rank;
    int i = cj_build_iota(c->g, s, r - 2, CJ_INT64, c->loc, c->err);
    int j = cj_build_iota(c->g, s, r - 1, CJ_INT64, c->loc, c->err);
    return bin(c, CJ_OP_EQ, i, j);
}

/* The diagonal (..., k) of square matrices x (..., k, k). */
static int diagonal(ad_ctx *c, int x) {
    if (x < 0) return -1;
    cj_shape s = c->g->nodes[x].shape;
    int eye = on_diagonal(c, &s);
    int kept = eye < 0 ? -1 : cj_build_select(c->g, eye, x, cst(c, 0), c->loc, c->err);
    return kept < 0 ? -1 : cj_build_reduce(c->g, CJ_OP_REDUCE_SUM, kept, 1u << (s.rank - 1), c->loc, c->err);
}

/* 1 / d off the diagonal and 0 on it, for d (..., k, k) zero on its
 * diagonal: the diagonal is replaced by ones before dividing, so that no
 * infinity appears there (its derivative would make nan of a zero). */
static int inverse_off_diagonal(ad_ctx *c, int d) {
    if (d < 0) return -1;
    cj_shape s = c->g->nodes[d].shape;
    int eye = on_diagonal(c, &s);
    int safe = eye < 0 ? -1 : cj_build_select(c->g, eye, cst(c, 1), d, c->loc, c->err);
    int inv = safe < 0 ? -1 : cj_build_unary(c->g, CJ_OP_RECIPROCAL, safe, c->loc, c->err);
    return inv < 0 ? -1 : cj_build_select(c->g, eye, cst(c, 0), inv, c->loc, c->err);
}

/* Columns [lo, hi) of matrices x. */
static int columns(ad_ctx *c, int x, int64_t lo, int64_t hi) {
    if (x < 0) return -1;
    cj_shape s = c->g->nodes[x].shape;
    int64_t start[CJ_MAX_RANK], stop[CJ_MAX_RANK], step[CJ_MAX_RANK];
    for (int d = 0; d < s.rank; d++) start[d] = 0, stop[d] = s.dims[d], step[d] = 1;
    start[s.rank - 1] = lo, stop[s.rank - 1] = hi;
    return cj_build_slice(c->g, x, start, stop, step, c->loc, c->err);
}

/* Matrices x and y side by side. */
static int beside(ad_ctx *c, int x, int y) {
    if (x < 0 || y < 0) return -1;
    int xs[2] = {x, y};
    return cj_build_concatenate(c->g, xs, 2, c->g->nodes[x].shape.rank - 1, c->loc, c->err);
}

/* (x + x^T) / 2 */
static int sym(ad_ctx *c, int x) { return mul(c, add(c, x, tr(c, x)), cst(c, 0.5)); }

/* x - Q (Q^T x): x's part outside the span of Q's orthonormal columns. */
static int outside(ad_ctx *c, int q, int x) { return sub(c, x, mm(c, q, mm(c, tr(c, q), x))); }

/* Refuses the results whose rules do not exist (see the top comment);
 * `what` names the direction for the message. */
static bool supported(ad_ctx *c, cj_op op, int a, int index, const char *what) {
    const cj_shape *s = &c->g->nodes[a].shape;
    int64_t m = s->dims[s->rank - 2], n = s->dims[s->rank - 1];
    const char *name = cj_op_name(op);
    if (op == CJ_OP_QR && (index & 2) && m > n)
        return fail(c->g, c->err, CJ_ERR_VALUE, name, c->loc,
                    "has no %s for mode='complete' of a matrix with more rows than columns (%lld x %lld); use "
                    "mode='reduced'", what, (long long)m, (long long)n) >= 0;
    if (op == CJ_OP_SVD && (index & 4) && (index & 3) && m != n)
        return fail(c->g, c->err, CJ_ERR_VALUE, name, c->loc,
                    "has no %s for U or Vt with full_matrices=True of a non-square matrix (%lld x %lld); use "
                    "full_matrices=False", what, (long long)m, (long long)n) >= 0;
    return true;
}

/* ---- forward mode ------------------------------------------------------- */

/* w and V of A = V diag(w) V^T, S = sym(dA), P = V^T S V: dw = diag(P),
 * dV = V (F o P) with F[i, j] = 1 / (w[j] - w[i]) off the diagonal. */
static int eigh_jvp(ad_ctx *c, int a, int index, int da) {
    int V = result(c, CJ_OP_EIGH, a, 1);
    int P = mm(c, tr(c, V), mm(c, sym(c, da), V));
    if (index == 0) return diagonal(c, P);
    int w = result(c, CJ_OP_EIGH, a, 0);
    int F = inverse_off_diagonal(c, sub(c, row(c, w), col(c, w)));
    return mm(c, V, mul(c, F, P));
}

/* A = Q R with k = min(m, n), and X, Rx the first k columns of A and R
 * (Rx square and invertible).  With K = dX Rx^-1, C = Q^T K and the skew
 * part O = L - L^T of L = tril_-1(C): dQ = Q (O - C) + K, dRx = (C - O) Rx
 * and, for a wide A = [X Y] (R = [Rx Q^T Y]), dRy = dQ^T Y + Q^T dY. */
static int qr_jvp(ad_ctx *c, int a, int index, int da) {
    const cj_shape *sa = &c->g->nodes[a].shape;
    int64_t m = sa->dims[sa->rank - 2], n = sa->dims[sa->rank - 1];
    bool wide = n > m;
    int Q = result(c, CJ_OP_QR, a, 0), R = result(c, CJ_OP_QR, a, 1);
    int Rx = wide ? columns(c, R, 0, m) : R, dX = wide ? columns(c, da, 0, m) : da;
    int kt = Rx < 0 || dX < 0 ? -1 : cj_build_triangular_solve(c->g, Rx, tr(c, dX), CJ_TRI_TRANSPOSE, c->loc, c->err);
    int K = tr(c, kt); /* Rx^T K^T = dX^T */
    int C = mm(c, tr(c, Q), K);
    int L = C < 0 ? -1 : cj_build_triangle(c->g, C, true, true, c->loc, c->err);
    int O = sub(c, L, tr(c, L));
    int dQ = add(c, mm(c, Q, sub(c, O, C)), K);
    if (!(index & 1)) return dQ;
    int dR = mm(c, sub(c, C, O), Rx);
    if (!wide) return dR;
    int dRy = add(c, mm(c, tr(c, dQ), columns(c, a, m, n)), mm(c, tr(c, Q), columns(c, da, m, n)));
    return beside(c, dR, dRy);
}

/* A = U diag(s) Vt, dS = U^T dA V: ds = diag(dS); with F[i, j] =
 * 1 / (s[j]^2 - s[i]^2) off the diagonal, dU = U (F o (dS S + S dS^T))
 * (+ (I - U U^T) dA V S^-1 when m > n) and dV = V (F o (S dS + dS^T S))
 * (+ (I - V V^T) dA^T U S^-1 when n > m). */
static int svd_jvp(ad_ctx *c, int a, int index, int da) {
    const cj_shape *sa = &c->g->nodes[a].shape;
    int64_t m = sa->dims[sa->rank - 2], n = sa->dims[sa->rank - 1];
    int U = result(c, CJ_OP_SVD, a, 1), Vt = result(c, CJ_OP_SVD, a, 2), V = tr(c, Vt);
    int dS = mm(c, tr(c, U), mm(c, da, V));
    if ((index & 3) == 0) return diagonal(c, dS);
    int s = result(c, CJ_OP_SVD, a, 0), rs = row(c, s), cs = col(c, s);
    int F = inverse_off_diagonal(c, mul(c, add(c, rs, cs), sub(c, rs, cs)));
    if ((index & 3) == 1) {
        int x = mul(c, dS, rs);
        int dU = mm(c, U, mul(c, F, add(c, x, tr(c, x))));
        if (m > n) dU = add(c, dU, bin(c, CJ_OP_DIV, outside(c, U, mm(c, da, V)), rs));
        return dU;
    }
    int y = mul(c, cs, dS);
    int dV = mm(c, V, mul(c, F, add(c, y, tr(c, y))));
    if (n > m) dV = add(c, dV, bin(c, CJ_OP_DIV, outside(c, V, mm(c, tr(c, da), U)), rs));
    return tr(c, dV);
}

/* See graph.h. */
int cj_build_decomp_jvp(cj_graph *g, cj_op op, int a, int index, int da, int loc, cj_error *err) {
    ad_ctx c = {.g = g, .loc = loc, .err = err, .dt = g->nodes[a].dtype};
    if (!supported(&c, op, a, index, "derivative")) return -1;
    if (op == CJ_OP_EIGH) return eigh_jvp(&c, a, index, da);
    if (op == CJ_OP_QR) return qr_jvp(&c, a, index, da);
    if (op == CJ_OP_SVD) return svd_jvp(&c, a, index, da);
    return fail(g, err, CJ_ERR_INTERNAL, cj_op_name(op), loc, "is not a factorization");
}

/* ---- reverse mode: the transposes of the rules above -------------------- */

/* wbar: sym(V diag(wbar) V^T); Vbar: sym(V (F o V^T Vbar) V^T). */
static int eigh_vjp(ad_ctx *c, int a, int index, int ct) {
    int V = result(c, CJ_OP_EIGH, a, 1), inner;
    if (index == 0) {
        inner = mul(c, V, row(c, ct));
    } else {
        int w = result(c, CJ_OP_EIGH, a, 0);
        int F = inverse_off_diagonal(c, sub(c, row(c, w), col(c, w)));
        inner = mm(c, V, mul(c, F, mm(c, tr(c, V), ct)));
    }
    return sym(c, mm(c, inner, tr(c, V)));
}

/* The transpose of qr_jvp.  A wide A's R cotangent [Rxbar Rybar] gives Y's
 * cotangent Q Rybar and adds Y Rybar^T to Q's.  Then with M = Rxbar Rx^T -
 * Q^T Qbar, C's cotangent is M - tril_-1(M - M^T), K's Qbar + Q Cbar, and
 * X's K's times Rx^-T. */
static int qr_vjp(ad_ctx *c, int a, int index, int ct) {
    const cj_shape *sa = &c->g->nodes[a].shape;
    int64_t m = sa->dims[sa->rank - 2], n = sa->dims[sa->rank - 1];
    bool wide = n > m, is_r = index & 1;
    int Q = result(c, CJ_OP_QR, a, 0), R = result(c, CJ_OP_QR, a, 1), Rx = wide ? columns(c, R, 0, m) : R;
    int qbar = is_r ? -1 : ct, ybar = -1, M;
    if (is_r) {
        int rxbar = wide ? columns(c, ct, 0, m) : ct;
        M = mm(c, rxbar, tr(c, Rx));
        if (wide) {
            int rybar = columns(c, ct, m, n);
            qbar = mm(c, columns(c, a, m, n), tr(c, rybar));
            ybar = mm(c, Q, rybar);
            M = sub(c, M, mm(c, tr(c, Q), qbar));
        }
    } else {
        M = mm(c, tr(c, Q), ct);
        if (M >= 0) M = cj_build_unary(c->g, CJ_OP_NEG, M, c->loc, c->err);
    }
    int skew = sub(c, M, tr(c, M));
    int cbar = sub(c, M, skew < 0 ? -1 : cj_build_triangle(c->g, skew, true, true, c->loc, c->err));
    int kbar = mm(c, Q, cbar);
    if (!is_r || wide) kbar = add(c, kbar, qbar);
    int xt = Rx < 0 || kbar < 0 ? -1 : cj_build_triangular_solve(c->g, Rx, tr(c, kbar), 0, c->loc, c->err);
    int xbar = tr(c, xt); /* Rx Xbar^T = Kbar^T */
    if (!wide) return xbar;
    if (ybar == -1 && c->err->status == CJ_OK) {
        cj_shape s = c->g->nodes[a].shape;
        s.dims[s.rank - 1] = n - m;
        ybar = emit_constant(c->g, 0, 0, c->dt, false, &s, c->loc, c->err);
    }
    return beside(c, xbar, ybar);
}

/* sbar: U diag(sbar) Vt.  Ubar: with G = F o (U^T Ubar), U ((G + G^T) S)
 * Vt (+ (I - U U^T) Ubar S^-1 Vt when m > n).  Vtbar: with H = F o (V^T
 * Vbar), U (S (H + H^T)) Vt (+ U S^-1 Vtbar (I - V V^T) when n > m). */
static int svd_vjp(ad_ctx *c, int a, int index, int ct) {
    const cj_shape *sa = &c->g->nodes[a].shape;
    int64_t m = sa->dims[sa->rank - 2], n = sa->dims[sa->rank - 1];
    int U = result(c, CJ_OP_SVD, a, 1), Vt = result(c, CJ_OP_SVD, a, 2);
    if ((index & 3) == 0) return mm(c, mul(c, U, row(c, ct)), Vt);
    int s = result(c, CJ_OP_SVD, a, 0), rs = row(c, s), cs = col(c, s);
    int F = inverse_off_diagonal(c, mul(c, add(c, rs, cs), sub(c, rs, cs)));
    if ((index & 3) == 1) {
        int G = mul(c, F, mm(c, tr(c, U), ct));
        int abar = mm(c, mm(c, U, mul(c, add(c, G, tr(c, G)), rs)), Vt);
        if (m > n) abar = add(c, abar, mm(c, bin(c, CJ_OP_DIV, outside(c, U, ct), rs), Vt));
        return abar;
    }
    int V = tr(c, Vt), vbar = tr(c, ct);
    int H = mul(c, F, mm(c, Vt, vbar));
    int abar = mm(c, mm(c, U, mul(c, cs, add(c, H, tr(c, H)))), Vt);
    if (n > m) abar = add(c, abar, mm(c, bin(c, CJ_OP_DIV, U, rs), tr(c, outside(c, V, vbar))));
    return abar;
}

/* See graph.h. */
int cj_build_decomp_vjp(cj_graph *g, cj_op op, int a, int index, int ct, int loc, cj_error *err) {
    ad_ctx c = {.g = g, .loc = loc, .err = err, .dt = g->nodes[a].dtype};
    if (!supported(&c, op, a, index, "gradient")) return -1;
    if (op == CJ_OP_EIGH) return eigh_vjp(&c, a, index, ct);
    if (op == CJ_OP_QR) return qr_vjp(&c, a, index, ct);
    if (op == CJ_OP_SVD) return svd_vjp(&c, a, index, ct);
    return fail(g, err, CJ_ERR_INTERNAL, cj_op_name(op), loc, "is not a factorization");
}
