/* graph_build.c - the builders of sources (parameters, closed-over arrays,
 * constants, iota) and of elementwise ops (unary, cast, bitcast, binary
 * with broadcasting and NEP 50 promotion, select).  See graph.c. */
#include "graph_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- builders: sources ------------------------------------------------- */

/* Appends parameter slot g->nparams (the next one); returns its node id. */
int cj_build_param(cj_graph *g, const cj_shape *s, cj_dtype dt, bool weak, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "param: graph is NULL"), -1;
    if (!dtype_ok(dt))
        return fail(g, err, CJ_ERR_TYPE, "param", loc, "unsupported dtype %d", (int)dt);
    if (!shape_check(g, "param", s, loc, err))
        return -1;
    cj_attrs a = {.index = g->nparams};
    return emit(g, CJ_OP_PARAM, dt, weak, s, NULL, 0, &a, loc, err);
}

/* Appends closed-over array slot g->narrays; returns its node id. */
int cj_build_array(cj_graph *g, const cj_shape *s, cj_dtype dt, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "array: graph is NULL"), -1;
    if (!dtype_ok(dt))
        return fail(g, err, CJ_ERR_TYPE, "array", loc, "unsupported dtype %d", (int)dt);
    if (!shape_check(g, "array", s, loc, err))
        return -1;
    cj_attrs a = {.index = g->narrays};
    return emit(g, CJ_OP_ARRAY, dt, false, s, NULL, 0, &a, loc, err);
}

/* Appends a scalar constant broadcast to shape s.  For float dtypes fvalue
 * is the value, for int and bool ivalue; both are stored, made consistent.
 * Returns the node id. */
int cj_build_constant(cj_graph *g, double fvalue, int64_t ivalue, cj_dtype dt, bool weak,
                      const cj_shape *s, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "constant: graph is NULL"), -1;
    if (!dtype_ok(dt))
        return fail(g, err, CJ_ERR_TYPE, "constant", loc, "unsupported dtype %d", (int)dt);
    if (!shape_check(g, "constant", s, loc, err))
        return -1;
    return emit_constant(g, fvalue, ivalue, dt, weak, s, loc, err);
}

/* Appends the index along `axis` of shape s as dtype dt (not bool). */
int cj_build_iota(cj_graph *g, const cj_shape *s, int axis, cj_dtype dt, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "iota: graph is NULL"), -1;
    if (!dtype_ok(dt) || dt == CJ_BOOL)
        return fail(g, err, CJ_ERR_TYPE, "iota", loc, "dtype %s is not supported (use an integer or float dtype)",
                    cj_dtype_name(dt));
    if (!shape_check(g, "iota", s, loc, err))
        return -1;
    if (axis < 0 || axis >= s->rank)
        return fail(g, err, CJ_ERR_VALUE, "iota", loc, "axis %d is out of bounds for array of dimension %d",
                    axis, s->rank);
    cj_attrs a = {.axis = axis};
    return emit(g, CJ_OP_IOTA, dt, false, s, NULL, 0, &a, loc, err);
}

/* ---- builders: elementwise --------------------------------------------- */

/* Appends a unary op, by the dtype rule of its record (ops_unary.def).
 * Weak-typedness passes through (as in JAX).  NumPy choices made explicit
 * there: float math (FLOAT) on int or bool computes in float64 (NumPy gives
 * float16 for bool and keeps ints for reciprocal; cjit has no float16 and
 * keeps one simple rule); floor/ceil (ROUND) of int or bool return x itself
 * (NumPy 2 keeps the dtype); neg and sign of bool (NOBOOL) are TypeErrors,
 * as in NumPy; isnan/isfinite (TEST) of int or bool are the constants
 * false/true; logical_not (LOGIC) casts its input to bool. */
int cj_build_unary(cj_graph *g, cj_op op, int x, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "unary: graph is NULL"), -1;
    const char *opname = cj_op_name(op);
    const cj_unary_info *u = cj_unary(op);
    if (u == NULL && op != CJ_OP_STOP_GRADIENT)
        return fail(g, err, CJ_ERR_INTERNAL, opname, loc, "is not a unary op for cj_build_unary");
    CHECK_ID(g, x, opname, loc, err);
    cj_node n = g->nodes[x];
    char d[300];
    bool fl = cj_dtype_kind(n.dtype) == CJ_KIND_FLOAT;
    cj_dtype in_dt = n.dtype, out_dt = n.dtype;
    switch (u ? u->dtypes : CJ_UDT_SAME) {
    case CJ_UDT_FLOAT:
        if (!fl)
            in_dt = out_dt = cj_dtype_canon(CJ_FLOAT64);
        break;
    case CJ_UDT_SAME:
        break;
    case CJ_UDT_NOBOOL:
        if (n.dtype == CJ_BOOL)
            return fail(g, err, CJ_ERR_TYPE, opname, loc, "%s (operand %s)", u->bool_error, describe(&n, d, sizeof d));
        break;
    case CJ_UDT_ROUND:
        if (!fl)
            return x;
        break;
    case CJ_UDT_TEST:
        if (!fl)
            return emit_constant(g, u->test_value, u->test_value, CJ_BOOL, n.weak, &n.shape, loc, err);
        out_dt = CJ_BOOL;
        break;
    case CJ_UDT_LOGIC:
        in_dt = out_dt = CJ_BOOL;
        break;
    case CJ_UDT_BITS:
        if (fl)
            return fail(g, err, CJ_ERR_TYPE, opname, loc,
                        "is only supported for integer and bool operands (operand %s)", describe(&n, d, sizeof d));
        break;
    }
    int xi = coerce(g, opname, x, in_dt, &n.shape, loc, err);
    if (xi < 0)
        return -1;
    return emit(g, op, out_dt, n.weak, &n.shape, &xi, 1, NULL, loc, err);
}

/* Appends x converted to dt (C rules, float -> int truncates).  Returns x
 * itself when it already has dtype dt and is strong; the result is strong
 * (an explicit dtype).  Constants are converted here, not at run time. */
int cj_build_cast(cj_graph *g, int x, cj_dtype dt, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "cast: graph is NULL"), -1;
    CHECK_ID(g, x, "cast", loc, err);
    if (!dtype_ok(dt))
        return fail(g, err, CJ_ERR_TYPE, "cast", loc, "unsupported dtype %d", (int)dt);
    cj_node n = g->nodes[x];
    if (n.dtype == dt && !n.weak)
        return x;
    if (n.op == CJ_OP_CONSTANT) {
        double f = 0;
        int64_t i = 0;
        if (const_convert(&n, dt, &f, &i))
            return emit_constant(g, f, i, dt, false, &n.shape, loc, err);
    }
    /* A weak value cast to its own dtype becomes a same-dtype CAST node: it
     * only drops weak-typedness. */
    return emit(g, CJ_OP_CAST, dt, false, &n.shape, &x, 1, NULL, loc, err);
}

/* Appends the bits of x read as dtype dt (lax.bitcast_convert_type for
 * equal widths): float32 <-> int32/uint32, float64 <-> int64/uint64.  The result
 * is strong; x itself when it already has dtype dt. */
int cj_build_bitcast(cj_graph *g, int x, cj_dtype dt, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "bitcast: graph is NULL"), -1;
    CHECK_ID(g, x, "bitcast", loc, err);
    if (!dtype_ok(dt))
        return fail(g, err, CJ_ERR_TYPE, "bitcast", loc, "unsupported dtype %d", (int)dt);
    cj_node n = g->nodes[x];
    char d[300];
    if (n.dtype == CJ_BOOL || dt == CJ_BOOL || cj_dtype_size(n.dtype) != cj_dtype_size(dt))
        return fail(g, err, CJ_ERR_TYPE, "bitcast", loc,
                    "needs a dtype of the operand's width other than bool: %s to %s", describe(&n, d, sizeof d),
                    cj_dtype_name(dt));
    if (n.dtype == dt && !n.weak)
        return x;
    if (n.dtype == dt)
        return emit(g, CJ_OP_CAST, dt, false, &n.shape, &x, 1, NULL, loc, err);
    return emit(g, CJ_OP_BITCAST, dt, false, &n.shape, &x, 1, NULL, loc, err);
}

/* NumPy 2 compares an integer array with a Python int outside the array's
 * range without converting the int: the answer is the same for every
 * element (int32 x < 2**40 is all true, uint64 x == -1 all false).  Returns
 * that answer as a bool constant of shape out when x op y is such a pair
 * (one operand a weak int constant that integer dtype dt cannot hold), or
 * -2 when it is not. */
static int compare_out_of_range(cj_graph *g, cj_op op, const cj_node *x, const cj_node *y, cj_dtype dt,
                                const cj_shape *out, int loc, cj_error *err)
{
    bool x_const = x->op == CJ_OP_CONSTANT && x->weak && !y->weak;
    const cj_node *c = x_const ? x : y;
    if (cj_dtype_kind(dt) != CJ_KIND_INT || c->op != CJ_OP_CONSTANT || !c->weak || (x->weak && y->weak) ||
        cj_dtype_kind(c->dtype) != CJ_KIND_INT)
        return -2;
    bool c_unsigned = c->dtype == CJ_UINT64;
    if (cj_dtype_int_fits(dt, c->attrs.ivalue, c_unsigned))
        return -2;
    /* out of range: above it when non-negative (2**63 or more included), else below */
    bool above = c_unsigned || c->attrs.ivalue >= 0;
    bool x_less = x_const ? !above : above; /* x < y for every element */
    bool r = op == CJ_OP_NE || ((op == CJ_OP_LT || op == CJ_OP_LE) && x_less) ||
             ((op == CJ_OP_GT || op == CJ_OP_GE) && !x_less);
    return emit_constant(g, r, r, CJ_BOOL, false, out, loc, err);
}

/* Appends a binary or compare op with NumPy broadcasting and NEP 50
 * promotion, after inserting the BROADCAST/CAST nodes that make both
 * operands equal in shape and dtype.  Op-specific dtype rules:
 *  - div computes in float64 when the promoted dtype is not float;
 *  - logical_and/or cast both operands to bool;
 *  - floordiv and pow of bools compute in int64 (NumPy gives int8, which
 *    cjit does not have); maximum/minimum of bools stay bool;
 *  - sub of bools is a TypeError, as in NumPy;
 *  - bitwise and shift ops (CJ_OPF_BITS) refuse floats with a TypeError;
 *    shifts of bools compute in int64 (NumPy: int8);
 *  - comparisons give bool.
 * The result is weak only when both operands are.  Returns the node id. */
int cj_build_binary(cj_graph *g, cj_op op, int x, int y, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "binary: graph is NULL"), -1;
    const char *opname = cj_op_name(op);
    cj_opkind kind = cj_op_kind(op);
    if (!op_valid(op) || (kind != CJ_OPKIND_BINARY && kind != CJ_OPKIND_COMPARE))
        return fail(g, err, CJ_ERR_INTERNAL, opname, loc, "is not a binary op for cj_build_binary");
    CHECK_ID(g, x, opname, loc, err);
    CHECK_ID(g, y, opname, loc, err);
    cj_node a = g->nodes[x], b = g->nodes[y];
    char da[300], db[300];

    cj_shape out;
    if (!broadcast_shapes(&a.shape, &b.shape, &out))
        return fail(g, err, CJ_ERR_VALUE, opname, loc, "operands could not be broadcast together with shapes %s and %s",
                    describe(&a, da, sizeof da), describe(&b, db, sizeof db));
    if (!shape_check(g, opname, &out, loc, err))
        return -1;
    bool weak;
    cj_dtype dt = cj_promote(a.dtype, a.weak, b.dtype, b.weak, &weak);
    cj_dtype operand_dt = dt;
    if (op == CJ_OP_LOGICAL_AND || op == CJ_OP_LOGICAL_OR)
        operand_dt = CJ_BOOL;
    else if (op == CJ_OP_DIV && !is_float(dt))
        operand_dt = cj_dtype_canon(CJ_FLOAT64);
    else if (cj_op_has_flag(op, CJ_OPF_BITS) && is_float(dt))
        return fail(g, err, CJ_ERR_TYPE, opname, loc,
                    "is only supported for integer and bool operands (operands %s and %s)",
                    describe(&a, da, sizeof da), describe(&b, db, sizeof db));
    else if ((op == CJ_OP_FLOORDIV || op == CJ_OP_POW || op == CJ_OP_SHIFT_LEFT || op == CJ_OP_SHIFT_RIGHT_LOGICAL ||
              op == CJ_OP_SHIFT_RIGHT_ARITHMETIC || op == CJ_OP_ROTATE_LEFT) && dt == CJ_BOOL)
        operand_dt = cj_dtype_canon(CJ_INT64);
    else if (op == CJ_OP_SUB && dt == CJ_BOOL)
        return fail(g, err, CJ_ERR_TYPE, opname, loc,
                    "boolean subtract, the `-` operator, is not supported, use logical_xor or "
                    "the `^` operator instead (operands %s and %s)",
                    describe(&a, da, sizeof da), describe(&b, db, sizeof db));
    cj_dtype result_dt = kind == CJ_OPKIND_COMPARE ? CJ_BOOL : operand_dt;
    if (kind == CJ_OPKIND_COMPARE) {
        int folded = compare_out_of_range(g, op, &a, &b, operand_dt, &out, loc, err);
        if (folded != -2)
            return folded;
    }
    int in[2];
    in[0] = coerce(g, opname, x, operand_dt, &out, loc, err);
    if (in[0] < 0)
        return -1;
    in[1] = coerce(g, opname, y, operand_dt, &out, loc, err);
    if (in[1] < 0)
        return -1;
    return emit(g, op, result_dt, weak, &out, in, 2, NULL, loc, err);
}

/* Appends where(cond, x, y): all three broadcast together, cond cast to
 * bool, x and y promoted as in cj_build_binary.  Returns the node id. */
int cj_build_select(cj_graph *g, int cond, int x, int y, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "select: graph is NULL"), -1;
    CHECK_ID(g, cond, "select", loc, err);
    CHECK_ID(g, x, "select", loc, err);
    CHECK_ID(g, y, "select", loc, err);
    cj_node c = g->nodes[cond], a = g->nodes[x], b = g->nodes[y];
    cj_shape out;
    if (!broadcast_shapes(&c.shape, &a.shape, &out) || !broadcast_shapes(&out, &b.shape, &out)) {
        char dc[300], da[300], db[300];
        return fail(g, err, CJ_ERR_VALUE, "select", loc,
                    "operands could not be broadcast together with shapes %s, %s and %s",
                    describe(&c, dc, sizeof dc), describe(&a, da, sizeof da), describe(&b, db, sizeof db));
    }
    if (!shape_check(g, "select", &out, loc, err))
        return -1;
    bool weak;
    cj_dtype dt = cj_promote(a.dtype, a.weak, b.dtype, b.weak, &weak);
    int in[3];
    in[0] = coerce(g, "select", cond, CJ_BOOL, &out, loc, err);
    if (in[0] < 0)
        return -1;
    in[1] = coerce(g, "select", x, dt, &out, loc, err);
    if (in[1] < 0)
        return -1;
    in[2] = coerce(g, "select", y, dt, &out, loc, err);
    if (in[2] < 0)
        return -1;
    return emit(g, CJ_OP_SELECT, dt, weak, &out, in, 3, NULL, loc, err);
}

/* Appends fma(x, y, z) = x * y + z with one rounding: the three broadcast
 * together and promote as a binary op would (NEP 50); integer and bool
 * operands compute in float64, as div's do.  Returns the node id. */
int cj_build_fma(cj_graph *g, int x, int y, int z, int loc, cj_error *err)
{
    if (g == NULL)
        return cj_error_set(err, CJ_ERR_INTERNAL, "fma: graph is NULL"), -1;
    const int ids[3] = {x, y, z};
    for (int i = 0; i < 3; i++)
        CHECK_ID(g, ids[i], "fma", loc, err);
    cj_node a = g->nodes[x], b = g->nodes[y], c = g->nodes[z];
    cj_shape out;
    if (!broadcast_shapes(&a.shape, &b.shape, &out) || !broadcast_shapes(&out, &c.shape, &out)) {
        char da[300], db[300], dc[300];
        return fail(g, err, CJ_ERR_VALUE, "fma", loc,
                    "operands could not be broadcast together with shapes %s, %s and %s",
                    describe(&a, da, sizeof da), describe(&b, db, sizeof db), describe(&c, dc, sizeof dc));
    }
    if (!shape_check(g, "fma", &out, loc, err))
        return -1;
    bool weak_ab, weak;
    cj_dtype dt = cj_promote(a.dtype, a.weak, b.dtype, b.weak, &weak_ab);
    dt = cj_promote(dt, weak_ab, c.dtype, c.weak, &weak);
    if (!is_float(dt))
        dt = cj_dtype_canon(CJ_FLOAT64);
    int in[3];
    for (int i = 0; i < 3; i++)
        if ((in[i] = coerce(g, "fma", ids[i], dt, &out, loc, err)) < 0)
            return -1;
    return emit(g, CJ_OP_FMA, dt, weak, &out, in, 3, NULL, loc, err);
}
