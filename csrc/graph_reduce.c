/* graph_reduce.c - the builders of reductions and of matmul (with its
 * batch broadcasting), and of NAME.  See graph.c. */
#include "graph_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- builders: reductions and contraction ------------------------------ */

/* Appends a reduction of x over the dims in the bit mask `axes` (removed
 * from the result).  Sums and products of bool and int32 accumulate in
 * int64, as NumPy does on 64-bit Linux.  max/min over an empty axis is a
 * ValueError, as in NumPy.  With no axes, returns x (cast where needed). */
int cj_build_reduce(cj_graph *g, cj_op op, int x, uint32_t axes, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "reduce: graph is NULL"), -1;
    const char *opname = cj_op_name(op);
    if (!op_valid(op) || cj_op_kind(op) != CJ_OPKIND_REDUCE)
        return fail(g, err, CJ_ERR_INTERNAL, opname, loc, "is not a reduction for cj_build_reduce");
    CHECK_ID(g, x, opname, loc, err);
    cj_node n = g->nodes[x];
    char d[300];
    int rank = n.shape.rank;
    if (axes >> rank) {
        int bad = rank;
        while (!(axes & (1u << bad)))
            bad++;
        return fail(g, err, CJ_ERR_VALUE, opname, loc, "axis %d is out of bounds for array of dimension %d (operand %s)",
                    bad, rank, describe(&n, d, sizeof d));
    }
    cj_shape out = {.rank = 0};
    for (int i = 0; i < rank; i++) {
        if (axes & (1u << i)) {
            if (n.shape.dims[i] == 0 && (op == CJ_OP_REDUCE_MAX || op == CJ_OP_REDUCE_MIN))
                return fail(g, err, CJ_ERR_VALUE, opname, loc,
                            "zero-size array to reduction operation %s which has no identity (operand %s, axis %d)",
                            op == CJ_OP_REDUCE_MAX ? "maximum" : "minimum", describe(&n, d, sizeof d), i);
        } else {
            out.dims[out.rank++] = n.shape.dims[i];
        }
    }
    cj_dtype dt = n.dtype;
    /* NumPy sums and multiplies bool and the narrower integers in the
     * platform integer: int64, or uint64 for the unsigned */
    if ((op == CJ_OP_REDUCE_SUM || op == CJ_OP_REDUCE_PROD) && cj_dtype_kind(dt) != CJ_KIND_FLOAT)
        dt = cj_dtype_canon(dt != CJ_BOOL && cj_dtype_unsigned(dt) ? CJ_UINT64 : CJ_INT64);
    int xi = coerce(g, opname, x, dt, &n.shape, loc, err);
    if (xi < 0 || axes == 0)
        return xi;
    cj_attrs a;
    memset(&a, 0, sizeof a);
    a.axes = axes;
    return emit(g, op, dt, n.weak, &out, &xi, 1, &a, loc, err);
}

/* Appends NumPy matmul(x, y) for operands of rank >= 1: a 1-D x is taken as
 * (1, K) and a 1-D y as (K, 1) through RESHAPE nodes, and the added dims are
 * removed from the result; batch dims broadcast (BROADCAST nodes make them
 * identical); dtypes are promoted, with bool computed as int64 (NumPy's
 * bool matmul is a logical or of ands; cjit gives integer counts).
 * Returns the node id. */
int cj_build_matmul(cj_graph *g, int x, int y, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "matmul: graph is NULL"), -1;
    CHECK_ID(g, x, "matmul", loc, err);
    CHECK_ID(g, y, "matmul", loc, err);
    cj_node a = g->nodes[x], b = g->nodes[y];
    char da[300], db[300];
    if (a.shape.rank == 0 || b.shape.rank == 0)
        return fail(g, err, CJ_ERR_VALUE, "matmul", loc,
                    "input operand %d does not have enough dimensions (has 0, matmul requires at least 1): "
                    "shapes %s and %s",
                    a.shape.rank == 0 ? 0 : 1, describe(&a, da, sizeof da), describe(&b, db, sizeof db));
    /* The operands as matrices: (..., M, K) and (..., K, N). */
    cj_shape am = a.shape, bm = b.shape;
    if (am.rank == 1) {
        am.rank = 2;
        am.dims[1] = am.dims[0];
        am.dims[0] = 1;
    }
    if (bm.rank == 1) {
        bm.rank = 2;
        bm.dims[1] = 1;
    }
    int64_t ka = am.dims[am.rank - 1], kb = bm.dims[bm.rank - 2];
    if (ka != kb)
        return fail(g, err, CJ_ERR_VALUE, "matmul", loc,
                    "mismatch in contraction dimension: shapes %s and %s (size %lld is different from %lld)",
                    describe(&a, da, sizeof da), describe(&b, db, sizeof db), (long long)kb, (long long)ka);
    cj_shape abatch = {.rank = am.rank - 2}, bbatch = {.rank = bm.rank - 2}, batch;
    memcpy(abatch.dims, am.dims, sizeof(int64_t) * (size_t)abatch.rank);
    memcpy(bbatch.dims, bm.dims, sizeof(int64_t) * (size_t)bbatch.rank);
    if (!broadcast_shapes(&abatch, &bbatch, &batch))
        return fail(g, err, CJ_ERR_VALUE, "matmul", loc, "batch dimensions could not be broadcast together with shapes %s and %s",
                    describe(&a, da, sizeof da), describe(&b, db, sizeof db));
    int64_t m = am.dims[am.rank - 2], nn = bm.dims[bm.rank - 1];
    cj_shape ta = batch, tb = batch, out = batch;
    int r = batch.rank;
    ta.rank = tb.rank = out.rank = r + 2;
    ta.dims[r] = m, ta.dims[r + 1] = ka;
    tb.dims[r] = kb, tb.dims[r + 1] = nn;
    out.dims[r] = m, out.dims[r + 1] = nn;
    /* The squeezed result shape, checked before anything is appended. */
    cj_shape fin = {.rank = 0};
    for (int i = 0; i < r; i++)
        fin.dims[fin.rank++] = batch.dims[i];
    if (a.shape.rank > 1)
        fin.dims[fin.rank++] = m;
    if (b.shape.rank > 1)
        fin.dims[fin.rank++] = nn;
    if (!shape_check(g, "matmul", &ta, loc, err) || !shape_check(g, "matmul", &tb, loc, err) ||
        !shape_check(g, "matmul", &out, loc, err))
        return -1;

    bool weak;
    /* bool @ bool stays bool, as in NumPy: the fuser computes it as "any(a and b)" */
    cj_dtype dt = cj_promote(a.dtype, a.weak, b.dtype, b.weak, &weak);
    int ids[2] = {x, y};
    const cj_shape *mats[2] = {&am, &bm}, *targets[2] = {&ta, &tb};
    for (int i = 0; i < 2; i++) {
        cj_shape own = g->nodes[ids[i]].shape;
        int id = coerce(g, "matmul", ids[i], dt, &own, loc, err);
        if (id < 0)
            return -1;
        id = cj_build_reshape(g, id, mats[i], loc, err);
        if (id < 0)
            return -1;
        id = coerce(g, "matmul", id, dt, targets[i], loc, err);
        if (id < 0)
            return -1;
        ids[i] = id;
    }
    if (out.rank + 1 > CJ_MAX_RANK) {
        /* A matmul's loop nest has one dim more than its result (K), so
         * with the most batch dims it would not fit: the batch dims (equal
         * in both operands now) become one, which row-major order allows. */
        int64_t nbatch = cj_shape_numel(&batch);
        cj_shape flat[2] = {{.rank = 3, .dims = {nbatch, m, ka}}, {.rank = 3, .dims = {nbatch, kb, nn}}};
        for (int i = 0; i < 2; i++)
            if ((ids[i] = cj_build_reshape(g, ids[i], &flat[i], loc, err)) < 0)
                return -1;
        out = (cj_shape){.rank = 3, .dims = {nbatch, m, nn}};
    }
    int mm = emit(g, CJ_OP_MATMUL, dt, weak, &out, ids, 2, NULL, loc, err);
    if (mm < 0)
        return -1;
    return cj_build_reshape(g, mm, &fin, loc, err);
}

/* Appends an identity of x tagged with `name` (copied into the arena), for
 * the name-based checkpoint policies.  Returns the node id. */
int cj_build_name(cj_graph *g, int x, const char *name, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "name: graph is NULL"), -1;
    CHECK_ID(g, x, "name", loc, err);
    if (name == NULL)
        return fail(g, err, CJ_ERR_INTERNAL, "name", loc, "name is NULL");
    cj_node n = g->nodes[x];
    cj_attrs a;
    memset(&a, 0, sizeof a);
    a.name = name; /* push_node copies it into the arena */
    return emit(g, CJ_OP_NAME, n.dtype, n.weak, &n.shape, &x, 1, &a, loc, err);
}
