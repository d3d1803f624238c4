/* graph_linalg.c - the builders of the linear algebra ops (Cholesky, the
 * triangular solve) and the check graph.c makes of their nodes.  Both work
 * on the last two dims, with any batch dims in front. */
#include "graph_priv.h"

#include <string.h>

/* See graph.h. */
int cj_build_cholesky(cj_graph *g, int a, int loc, cj_error *err) {
    if (g == NULL) return cj_error_set(err, CJ_ERR_INTERNAL, "cholesky: graph is NULL"), -1;
    CHECK_ID(g, a, "cholesky", loc, err);
    const cj_node *x = &g->nodes[a];
    char d[300];
    if (!is_float(x->dtype))
        return fail(g, err, CJ_ERR_TYPE, "cholesky", loc, "needs a float array, got %s", describe(x, d, sizeof d));
    if (!is_square(&x->shape))
        return fail(g, err, CJ_ERR_VALUE, "cholesky", loc, "needs square matrices in the last two dims, got %s",
                    describe(x, d, sizeof d));
    return emit(g, CJ_OP_CHOLESKY, x->dtype, false, &x->shape, &a, 1, NULL, loc, err);
}

/* See graph.h. */
int cj_build_triangular_solve(cj_graph *g, int a, int b, int flags, int loc, cj_error *err) {
    if (g == NULL) return cj_error_set(err, CJ_ERR_INTERNAL, "triangular_solve: graph is NULL"), -1;
    CHECK_ID(g, a, "triangular_solve", loc, err);
    CHECK_ID(g, b, "triangular_solve", loc, err);
    const cj_node *x = &g->nodes[a], *y = &g->nodes[b];
    char dx[300], dy[300];
    if (!is_float(x->dtype) || x->dtype != y->dtype)
        return fail(g, err, CJ_ERR_TYPE, "triangular_solve", loc, "needs float operands of one dtype, got %s and %s",
                    describe(x, dx, sizeof dx), describe(y, dy, sizeof dy));
    bool ok = is_square(&x->shape) && y->shape.rank == x->shape.rank &&
              y->shape.dims[y->shape.rank - 2] == x->shape.dims[x->shape.rank - 1];
    for (int d = 0; ok && d < x->shape.rank - 2; d++) ok = x->shape.dims[d] == y->shape.dims[d];
    if (!ok)
        return fail(g, err, CJ_ERR_VALUE, "triangular_solve", loc,
                    "needs a (..., n, n) and a (..., n, k) with the same batch dims, got %s and %s",
                    describe(x, dx, sizeof dx), describe(y, dy, sizeof dy));
    if (flags & ~(CJ_TRI_LOWER | CJ_TRI_TRANSPOSE | CJ_TRI_UNIT))
        return fail(g, err, CJ_ERR_VALUE, "triangular_solve", loc, "unknown flags %d", flags);
    cj_attrs at;
    memset(&at, 0, sizeof at);
    at.index = flags;
    int in[2] = {a, b};
    return emit(g, CJ_OP_TRIANGULAR_SOLVE, x->dtype, false, &y->shape, in, 2, &at, loc, err);
}

/* See graph.h. */
int cj_build_lu(cj_graph *g, int a, bool pivots, int loc, cj_error *err) {
    const char *name = pivots ? "lu_pivots" : "lu";
    if (g == NULL) return cj_error_set(err, CJ_ERR_INTERNAL, "lu: graph is NULL"), -1;
    CHECK_ID(g, a, name, loc, err);
    const cj_node *x = &g->nodes[a];
    char d[300];
    if (!is_float(x->dtype))
        return fail(g, err, CJ_ERR_TYPE, name, loc, "needs a float array, got %s", describe(x, d, sizeof d));
    if (!is_square(&x->shape))
        return fail(g, err, CJ_ERR_VALUE, name, loc, "needs square matrices in the last two dims, got %s",
                    describe(x, d, sizeof d));
    cj_shape s = x->shape;
    if (pivots) s.rank--;
    return emit(g, pivots ? CJ_OP_LU_PIVOTS : CJ_OP_LU, pivots ? CJ_INT64 : x->dtype, false, &s, &a, 1, NULL, loc, err);
}

/* ---- pieces of the derivative rules (autodiff.c, jvp.c) ------------------------ */

/* x with its last two dims swapped. */
int cj_build_swap_last(cj_graph *g, int x, int loc, cj_error *err) {
    if (x < 0) return -1;
    int r = g->nodes[x].shape.rank, perm[CJ_MAX_RANK];
    for (int d = 0; d < r; d++) perm[d] = d;
    perm[r - 2] = r - 1, perm[r - 1] = r - 2;
    return cj_build_transpose(g, x, perm, loc, err);
}

/* x where (row, col) of its last two dims satisfies `keep` (row - col
 * compared with 0: lower keeps row >= col, upper row <= col, strict drops
 * the diagonal), times `diag` on the diagonal; 0 elsewhere. */
static int triangle(cj_graph *g, int x, bool lower, bool strict, double diag, int loc, cj_error *err) {
    if (x < 0) return -1;
    cj_shape s = g->nodes[x].shape, scalar = {0, {0}};
    cj_dtype dt = g->nodes[x].dtype;
    int r = s.rank;
    int row = cj_build_iota(g, &s, r - 2, CJ_INT64, loc, err), col = cj_build_iota(g, &s, r - 1, CJ_INT64, loc, err);
    int in = row < 0 || col < 0 ? -1
                                : cj_build_binary(g, strict ? (lower ? CJ_OP_GT : CJ_OP_LT) : (lower ? CJ_OP_GE : CJ_OP_LE),
                                                  row, col, loc, err);
    int zero = emit_constant(g, 0, 0, dt, false, &scalar, loc, err);
    int kept = in < 0 || zero < 0 ? -1 : cj_build_select(g, in, x, zero, loc, err);
    if (kept < 0 || diag == 1.0 || strict) return kept;
    int on = cj_build_binary(g, CJ_OP_EQ, row, col, loc, err);
    int scale = emit_constant(g, diag, (int64_t)diag, dt, false, &scalar, loc, err);
    int scaled = scale < 0 ? -1 : cj_build_binary(g, CJ_OP_MUL, kept, scale, loc, err);
    return on < 0 || scaled < 0 ? -1 : cj_build_select(g, on, scaled, kept, loc, err);
}

/* See graph.h. */
int cj_build_triangle(cj_graph *g, int x, bool lower, bool strict, int loc, cj_error *err) {
    return triangle(g, x, lower, strict, 1.0, loc, err);
}

/* See graph.h. */
int cj_build_phi(cj_graph *g, int x, int loc, cj_error *err) { return triangle(g, x, true, false, 0.5, loc, err); }

/* See graph.h.  x = op(a)^-1 b: b's cotangent is op(a)^-T g; a's is
 * -(that) x^T (-x (that)^T when op transposes), kept to a's triangle. */
cj_status cj_build_triangular_solve_vjp(cj_graph *g, int a, int x, int ct, int flags, int *ga, int *gb, int loc,
                                        cj_error *err) {
    *gb = cj_build_triangular_solve(g, a, ct, flags ^ CJ_TRI_TRANSPOSE, loc, err);
    if (*gb < 0 || !ga) return err->status;
    int outer = flags & CJ_TRI_TRANSPOSE ? cj_build_matmul(g, x, cj_build_swap_last(g, *gb, loc, err), loc, err)
                                         : cj_build_matmul(g, *gb, cj_build_swap_last(g, x, loc, err), loc, err);
    int neg = outer < 0 ? -1 : cj_build_unary(g, CJ_OP_NEG, outer, loc, err);
    *ga = cj_build_triangle(g, neg, flags & CJ_TRI_LOWER, flags & CJ_TRI_UNIT, loc, err);
    return err->status;
}

/* See graph.h.  L = chol(A): A's cotangent is sym(L^-T Phi(L^T g) L^-1),
 * sym(S) = (S + S^T) / 2: the gradient of a function of A's symmetric part,
 * as JAX's. */
int cj_build_cholesky_vjp(cj_graph *g, int L, int ct, int loc, cj_error *err) {
    cj_shape scalar = {0, {0}};
    int lt = CJ_TRI_LOWER | CJ_TRI_TRANSPOSE;
    int ltg = cj_build_matmul(g, cj_build_swap_last(g, L, loc, err), ct, loc, err);
    int p = ltg < 0 ? -1 : cj_build_phi(g, ltg, loc, err);
    int y = p < 0 ? -1 : cj_build_triangular_solve(g, L, p, lt, loc, err);                  /* L^-T P */
    int yt = cj_build_swap_last(g, y, loc, err);
    int s = cj_build_swap_last(g, yt < 0 ? -1 : cj_build_triangular_solve(g, L, yt, lt, loc, err), loc, err); /* .. L^-1 */
    int both = s < 0 ? -1 : cj_build_binary(g, CJ_OP_ADD, s, cj_build_swap_last(g, s, loc, err), loc, err);
    int half = emit_constant(g, 0.5, 0, g->nodes[L].dtype, false, &scalar, loc, err);
    return both < 0 || half < 0 ? -1 : cj_build_binary(g, CJ_OP_MUL, both, half, loc, err);
}

/* The permutation matrix of LU's row order, Pm[..., i, j] = (perm[i] == j),
 * in dtype dt: Pm a = a[perm]. */
static int perm_matrix(cj_graph *g, int a, cj_dtype dt, int loc, cj_error *err) {
    int perm = cj_build_lu(g, a, true, loc, err);
    if (perm < 0) return -1;
    cj_shape s = g->nodes[a].shape, col = s;
    col.dims[col.rank - 1] = 1;
    int p = cj_build_reshape(g, perm, &col, loc, err);
    int j = cj_build_iota(g, &s, s.rank - 1, CJ_INT64, loc, err);
    int eq = p < 0 || j < 0 ? -1 : cj_build_binary(g, CJ_OP_EQ, cj_build_broadcast(g, p, &s, loc, err), j, loc, err);
    return eq < 0 ? -1 : cj_build_cast(g, eq, dt, loc, err);
}

/* The unit lower factor L of packed factors lu. */
static int unit_lower(cj_graph *g, int lu, int loc, cj_error *err) {
    cj_shape s = g->nodes[lu].shape;
    int r = s.rank;
    int row = cj_build_iota(g, &s, r - 2, CJ_INT64, loc, err), col = cj_build_iota(g, &s, r - 1, CJ_INT64, loc, err);
    int diag = row < 0 || col < 0 ? -1 : cj_build_cast(g, cj_build_binary(g, CJ_OP_EQ, row, col, loc, err),
                                                        g->nodes[lu].dtype, loc, err);
    int strict = cj_build_triangle(g, lu, true, true, loc, err);
    return diag < 0 || strict < 0 ? -1 : cj_build_binary(g, CJ_OP_ADD, strict, diag, loc, err);
}

static int mm(cj_graph *g, int x, int y, int loc, cj_error *err) {
    return x < 0 || y < 0 ? -1 : cj_build_matmul(g, x, y, loc, err);
}

/* See graph.h.  P a = L U: with F = L^-1 P da U^-1, dL = L tril_-1(F) and
 * dU = triu(F) U, packed (dL is strictly lower, dU upper). */
int cj_build_lu_jvp(cj_graph *g, int a, int lu, int da, int loc, cj_error *err) {
    cj_dtype dt = g->nodes[lu].dtype;
    int pda = mm(g, perm_matrix(g, a, dt, loc, err), da, loc, err);
    int z = pda < 0 ? -1 : cj_build_triangular_solve(g, lu, pda, CJ_TRI_LOWER | CJ_TRI_UNIT, loc, err); /* L^-1 P da */
    int zt = cj_build_swap_last(g, z, loc, err);
    int f = cj_build_swap_last(g, zt < 0 ? -1 : cj_build_triangular_solve(g, lu, zt, CJ_TRI_TRANSPOSE, loc, err), loc,
                               err);                                                                       /* .. U^-1 */
    int dl = mm(g, unit_lower(g, lu, loc, err), cj_build_triangle(g, f, true, true, loc, err), loc, err);
    int du = mm(g, cj_build_triangle(g, f, false, false, loc, err), cj_build_triangle(g, lu, false, false, loc, err),
                loc, err);
    return dl < 0 || du < 0 ? -1 : cj_build_binary(g, CJ_OP_ADD, dl, du, loc, err);
}

/* See graph.h.  The transpose of cj_build_lu_jvp: with the cotangent split
 * into L's (strictly lower) and U's (upper) parts, Fbar = tril_-1(L^T Lbar)
 * + triu(Ubar U^T), and a's cotangent is P^T L^-T Fbar U^-T. */
int cj_build_lu_vjp(cj_graph *g, int a, int lu, int ct, int loc, cj_error *err) {
    cj_dtype dt = g->nodes[lu].dtype;
    int lbar = cj_build_triangle(g, ct, true, true, loc, err), ubar = cj_build_triangle(g, ct, false, false, loc, err);
    int lt = cj_build_swap_last(g, unit_lower(g, lu, loc, err), loc, err);
    int ut = cj_build_swap_last(g, cj_build_triangle(g, lu, false, false, loc, err), loc, err);
    int f1 = cj_build_triangle(g, mm(g, lt, lbar, loc, err), true, true, loc, err);
    int f2 = cj_build_triangle(g, mm(g, ubar, ut, loc, err), false, false, loc, err);
    int fbar = f1 < 0 || f2 < 0 ? -1 : cj_build_binary(g, CJ_OP_ADD, f1, f2, loc, err);
    int y = fbar < 0 ? -1 : cj_build_triangular_solve(g, lu, fbar, CJ_TRI_LOWER | CJ_TRI_UNIT | CJ_TRI_TRANSPOSE, loc,
                                                      err);                                             /* L^-T Fbar */
    int yt = cj_build_swap_last(g, y, loc, err);
    int m = cj_build_swap_last(g, yt < 0 ? -1 : cj_build_triangular_solve(g, lu, yt, 0, loc, err), loc, err); /* U^-T */
    return mm(g, cj_build_swap_last(g, perm_matrix(g, a, dt, loc, err), loc, err), m, loc, err);
}
