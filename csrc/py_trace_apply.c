/* py_trace_apply.c - Trace.apply(op, *args, **attrs): decodes the keyword
 * attributes that ops.def declares for the op, and calls its builder. */
#include "py_trace.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Trace.apply: attributes ---------------------------------------------------- */

enum {
    A_SHAPE = 1 << 0, A_PERM = 1 << 1, A_START = 1 << 2, A_STOP = 1 << 3, A_STEP = 1 << 4,
    A_AXIS = 1 << 5, A_AXES = 1 << 6, A_DTYPE = 1 << 7, A_VALUE = 1 << 8, A_WEAK = 1 << 9,
    A_NAME = 1 << 10, A_MODE = 1 << 11,
};
static const char *const attr_names[] = {"shape", "perm", "start", "stop", "step", "axis",
                                         "axes", "dtype", "value", "weak", "name", "mode"};
#define NUM_ATTRS ((int)(sizeof attr_names / sizeof attr_names[0]))

typedef struct {
    PyObject *v[NUM_ATTRS];   /* borrowed from the kwargs dict; NULL if absent */
    unsigned given;
} apply_attrs;

#define ATTR(at, bit) ((at)->v[__builtin_ctz(bit)])

/* The ops.def attribute each keyword sets (slice's stop is the node's
 * extent, given with its start). */
static const unsigned attr_fields[NUM_ATTRS] = {
    CJ_ATTR_SHAPE, CJ_ATTR_PERM, CJ_ATTR_START, CJ_ATTR_START, CJ_ATTR_STEP, CJ_ATTR_AXIS,
    CJ_ATTR_AXES, CJ_ATTR_DTYPE, CJ_ATTR_FVALUE, CJ_ATTR_WEAK, CJ_ATTR_NAME, CJ_ATTR_INDEX,
};

/* The keywords op accepts: those of the attributes it uses (ops.def).  Ops
 * with a slot (PARAM, ARRAY) take none: Trace.param and Trace.array make them.
 * A scatter's `index` is its mode ("mode": 'drop' or 'clip'), a triangular
 * solve's its flags ("mode": an int). */
static unsigned attrs_allowed(cj_op op)
{
    unsigned used = cj_op_attrs(op), allowed = 0;
    if ((used & CJ_ATTR_INDEX) && cj_op_kind(op) != CJ_OPKIND_SCATTER && cj_op_kind(op) != CJ_OPKIND_LINALG)
        return 0;
    for (int i = 0; i < NUM_ATTRS; i++)
        if (used & attr_fields[i])
            allowed |= 1u << i;
    return allowed;
}

/* Fills at from kwargs; unknown or disallowed names are TypeErrors. */
static int parse_attrs(PyObject *kwargs, cj_op op, const char *opname, apply_attrs *at)
{
    memset(at, 0, sizeof *at);
    if (kwargs == NULL)
        return 0;
    unsigned allowed = attrs_allowed(op);
    Py_ssize_t pos = 0;
    PyObject *key, *value;   /* borrowed */
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
        int found = -1;
        const char *k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        if (k == NULL) {
            PyErr_Clear();
        } else {
            for (int i = 0; i < NUM_ATTRS; i++) {
                if (strcmp(k, attr_names[i]) == 0)
                    found = i;
            }
        }
        if (found < 0 || !(allowed & (1u << found))) {
            PyErr_Format(PyExc_TypeError, "apply('%s'): unexpected attribute %R", opname, key);
            return -1;
        }
        at->v[found] = value;
        at->given |= 1u << found;
    }
    return 0;
}

/* Parses an int attribute (anything with __index__).  0 or -1. */
static int attr_int64(PyObject *obj, int64_t *out, const char *opname, const char *what)
{
    PyObject *idx = PyNumber_Index(obj);   /* new ref */
    if (idx == NULL) {
        PyErr_Format(PyExc_TypeError, "apply('%s'): %s must be an int, got %.200s", opname, what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
    Py_DECREF(idx);
    if (overflow) {
        PyErr_Format(PyExc_OverflowError, "apply('%s'): %s does not fit in int64", opname, what);
        return -1;
    }
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = v;
    return 0;
}

/* Parses the integer value of a constant: int64, or from 2**63 to 2**64 - 1
 * its uint64 bits with *is_unsigned set.  0 or -1 (OverflowError beyond). */
static int attr_int_value(PyObject *obj, int64_t *out, bool *is_unsigned)
{
    *is_unsigned = false;
    PyObject *idx = PyNumber_Index(obj);   /* new ref */
    if (idx == NULL)
        return attr_int64(obj, out, "constant", "value");   /* its TypeError */
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
    if (overflow > 0) {
        unsigned long long u = PyLong_AsUnsignedLongLong(idx);
        if (!(u == (unsigned long long)-1 && PyErr_Occurred())) {
            Py_DECREF(idx);
            *out = (int64_t)u;
            *is_unsigned = true;
            return 0;
        }
        PyErr_Clear();
    }
    Py_DECREF(idx);
    if (overflow) {
        PyErr_Format(PyExc_OverflowError, "apply('constant'): Python integer %R out of bounds for "
                     "int64 and uint64", obj);
        return -1;
    }
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = v;
    return 0;
}

/* An axis normalized against rank (negative counts from the end), or -1
 * with ValueError when out of bounds. */
static int norm_axis(PyObject *obj, int rank, const char *opname, int *out)
{
    int64_t a;
    if (attr_int64(obj, &a, opname, "axis") < 0)
        return -1;
    if (a < -(int64_t)rank || a >= rank) {
        PyErr_Format(PyExc_ValueError, "apply('%s'): axis %lld is out of bounds for array of "
                     "dimension %d", opname, (long long)a, rank);
        return -1;
    }
    *out = (int)(a < 0 ? a + rank : a);
    return 0;
}

/* Parses a sequence of exactly n ints into out.  0 or -1. */
static int attr_int64s(PyObject *obj, int n, int64_t *out, const char *opname, const char *what)
{
    PyObject *seq = PySequence_Fast(obj, "");   /* new ref */
    if (seq == NULL) {
        PyErr_Format(PyExc_TypeError, "apply('%s'): %s must be a tuple of ints, got %.200s",
                     opname, what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(seq) != n) {
        PyErr_Format(PyExc_ValueError, "apply('%s'): %s has %zd entries, expected %d (one per "
                     "dimension)", opname, what, PySequence_Fast_GET_SIZE(seq), n);
        Py_DECREF(seq);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (attr_int64(PySequence_Fast_GET_ITEM(seq, i), &out[i], opname, what) < 0) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

/* Reduction axes (None = all; int; sequence) as a bit mask.  0 or -1. */
static int attr_axes(PyObject *obj, int rank, const char *opname, uint32_t *mask)
{
    *mask = 0;
    if (obj == NULL || obj == Py_None) {
        *mask = rank > 0 ? (uint32_t)((1u << rank) - 1) : 0;
        return 0;
    }
    if (PyLong_Check(obj) || PyArray_IsScalar(obj, Integer)) {
        int a;
        if (norm_axis(obj, rank, opname, &a) < 0)
            return -1;
        *mask = 1u << a;
        return 0;
    }
    PyObject *seq = PySequence_Fast(obj, "");   /* new ref */
    if (seq == NULL) {
        PyErr_Format(PyExc_TypeError, "apply('%s'): axes must be a tuple of ints, got %.200s",
                     opname, Py_TYPE(obj)->tp_name);
        return -1;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        int a;
        if (norm_axis(PySequence_Fast_GET_ITEM(seq, i), rank, opname, &a) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        if (*mask & (1u << a)) {
            PyErr_Format(PyExc_ValueError, "apply('%s'): duplicate value in axes: %d", opname, a);
            Py_DECREF(seq);
            return -1;
        }
        *mask |= 1u << a;
    }
    Py_DECREF(seq);
    return 0;
}

/* apply('constant', value=, dtype=, shape=, weak=). */
static int build_constant_attr(cj_py_trace *tr, apply_attrs *at, int loc)
{
    PyObject *value = ATTR(at, A_VALUE);
    if (value == NULL) {
        PyErr_SetString(PyExc_TypeError, "apply('constant'): missing attribute 'value'");
        return -1;
    }
    bool is_np = PyArray_IsScalar(value, Generic);
    if (!(PyBool_Check(value) || PyLong_Check(value) || PyFloat_Check(value) || is_np)) {
        PyErr_Format(PyExc_TypeError, "apply('constant'): value must be a bool, int or float, "
                     "got %.200s", Py_TYPE(value)->tp_name);
        return -1;
    }
    cj_dtype dt;
    if (ATTR(at, A_DTYPE) != NULL) {
        if (cj_py_dtype_from_obj(ATTR(at, A_DTYPE), &dt, "apply('constant')") < 0)
            return -1;
    } else if (is_np) {
        PyArray_Descr *d = PyArray_DescrFromScalar(value);   /* new ref */
        bool ok = d != NULL && cj_py_dtype_from_descr(d, &dt);
        Py_XDECREF(d);
        if (!ok) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "apply('constant'): unsupported NumPy scalar %R", value);
            return -1;
        }
    } else {
        dt = PyBool_Check(value) ? CJ_BOOL : PyLong_Check(value) ? CJ_INT64 : CJ_FLOAT64;
        int overflow = 0;
        if (dt == CJ_INT64 && (PyLong_AsLongLongAndOverflow(value, &overflow), overflow > 0))
            dt = CJ_UINT64;   /* 2**63 and more: NumPy's np.asarray(2**63) is uint64 too */
    }
    cj_shape s = {0};
    if (ATTR(at, A_SHAPE) != NULL && cj_py_shape_from_obj(ATTR(at, A_SHAPE), &s, "apply('constant')") < 0)
        return -1;
    int weak = 0;
    if (ATTR(at, A_WEAK) != NULL && (weak = PyObject_IsTrue(ATTR(at, A_WEAK))) < 0)
        return -1;

    double f = 0;
    int64_t i = 0;
    bool value_is_float = PyFloat_Check(value) || PyArray_IsScalar(value, Floating);
    switch (cj_dtype_kind(dt)) {
    case CJ_KIND_FLOAT:
        f = PyFloat_AsDouble(value);
        if (f == -1.0 && PyErr_Occurred())
            return -1;
        break;
    case CJ_KIND_BOOL: {
        int b = PyObject_IsTrue(value);
        if (b < 0)
            return -1;
        f = i = b;
        break;
    }
    case CJ_KIND_INT: {
        bool is_unsigned = false;
        if (value_is_float) {
            double d = PyFloat_AsDouble(value);
            if (d == -1.0 && PyErr_Occurred())
                return -1;
            bool big_u64 = dt == CJ_UINT64 && d >= 9223372036854775808.0 && d < 18446744073709551616.0;
            if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) && !big_u64) {   /* and nan */
                PyErr_Format(PyExc_ValueError, "apply('constant'): %R cannot be converted to %s",
                             value, cj_dtype_name(dt));
                return -1;
            }
            i = big_u64 ? (int64_t)(uint64_t)d : (int64_t)d;   /* truncates, as NumPy's astype does */
            is_unsigned = big_u64;
        } else if (attr_int_value(value, &i, &is_unsigned) < 0) {
            return -1;
        }
        if (cj_dtype_kind(dt) == CJ_KIND_INT && !cj_dtype_int_fits(dt, i, is_unsigned)) {
            PyErr_Format(PyExc_OverflowError, "apply('constant'): Python integer %R out of bounds "
                         "for %s", value, cj_dtype_name(dt));
            return -1;
        }
        f = cj_dtype_int_to_double(dt, i);
        break;
    }
    }
    cj_error err = {0};
    int id = cj_build_constant(tr->graph, f, i, dt, weak != 0, &s, loc, &err);
    if (id < 0)
        cj_py_raise(&err);
    return id;
}

/* apply('iota', shape=, axis=0, dtype=int64). */
static int build_iota_attr(cj_py_trace *tr, apply_attrs *at, int loc)
{
    cj_shape s;
    if (ATTR(at, A_SHAPE) == NULL) {
        PyErr_SetString(PyExc_TypeError, "apply('iota'): missing attribute 'shape'");
        return -1;
    }
    if (cj_py_shape_from_obj(ATTR(at, A_SHAPE), &s, "apply('iota')") < 0)
        return -1;
    int axis = 0;
    if (ATTR(at, A_AXIS) != NULL && norm_axis(ATTR(at, A_AXIS), s.rank, "iota", &axis) < 0)
        return -1;
    cj_dtype dt = CJ_INT64;
    if (ATTR(at, A_DTYPE) != NULL && cj_py_dtype_from_obj(ATTR(at, A_DTYPE), &dt, "apply('iota')") < 0)
        return -1;
    cj_error err = {0};
    int id = cj_build_iota(tr->graph, &s, axis, dt, loc, &err);
    if (id < 0)
        cj_py_raise(&err);
    return id;
}

/* The number of inputs op takes, or -1 for "one or more" (concatenate). */
/* Builds op on the input nodes xs[0..n) with attributes at.  Returns the
 * node id or -1 with an exception set. */
static int build_op(cj_py_trace *tr, cj_op op, const char *opname, const int *xs, int n,
                    apply_attrs *at, int loc)
{
    cj_graph *g = tr->graph;
    cj_error err = {0};
    int id = -1;
    int rank = n > 0 ? g->nodes[xs[0]].shape.rank : 0;
    switch (cj_op_kind(op)) {
    case CJ_OPKIND_SOURCE:
        if (op == CJ_OP_CONSTANT)
            return build_constant_attr(tr, at, loc);
        if (op == CJ_OP_IOTA)
            return build_iota_attr(tr, at, loc);
        PyErr_Format(PyExc_ValueError, "apply('%s'): use Trace.param or Trace.array", opname);
        return -1;
    case CJ_OPKIND_UNARY:
        if (op == CJ_OP_NAME) {
            PyObject *name = ATTR(at, A_NAME);
            if (name == NULL || !PyUnicode_Check(name)) {
                PyErr_SetString(PyExc_TypeError, "apply('name'): attribute 'name' must be a str");
                return -1;
            }
            const char *s = PyUnicode_AsUTF8(name);
            if (s == NULL)
                return -1;
            id = cj_build_name(g, xs[0], s, loc, &err);
        } else {
            id = cj_build_unary(g, op, xs[0], loc, &err);
        }
        break;
    case CJ_OPKIND_CAST: {
        cj_dtype dt;
        if (ATTR(at, A_DTYPE) == NULL) {
            PyErr_SetString(PyExc_TypeError, "apply('cast'): missing attribute 'dtype'");
            return -1;
        }
        if (cj_py_dtype_from_obj(ATTR(at, A_DTYPE), &dt, "apply('cast')") < 0)
            return -1;
        id = op == CJ_OP_BITCAST ? cj_build_bitcast(g, xs[0], dt, loc, &err) : cj_build_cast(g, xs[0], dt, loc, &err);
        break;
    }
    case CJ_OPKIND_BINARY:
    case CJ_OPKIND_COMPARE:
        id = cj_build_binary(g, op, xs[0], xs[1], loc, &err);
        break;
    case CJ_OPKIND_SELECT:
        id = cj_build_select(g, xs[0], xs[1], xs[2], loc, &err);
        break;
    case CJ_OPKIND_TERNARY:
        id = cj_build_fma(g, xs[0], xs[1], xs[2], loc, &err);
        break;
    case CJ_OPKIND_MATMUL:
        id = cj_build_matmul(g, xs[0], xs[1], loc, &err);
        break;
    case CJ_OPKIND_REGION:
        PyErr_Format(PyExc_TypeError, "apply('%s'): control flow is built by cjit.lax, not by apply", opname);
        return -1;
    case CJ_OPKIND_SORT:
        id = cj_build_argsort(g, xs[0], loc, &err);
        break;
    case CJ_OPKIND_LINALG: {
        /* apply('triangular_solve', a, b, mode=flags): CJ_TRI_LOWER 1, TRANSPOSE 2, UNIT 4 */
        int64_t flags = 0;
        if ((op == CJ_OP_TRIANGULAR_SOLVE || op == CJ_OP_QR || op == CJ_OP_EIGH || op == CJ_OP_SVD) &&
            ATTR(at, A_MODE) != NULL &&
            attr_int64(ATTR(at, A_MODE), &flags, opname, "mode") < 0)
            return -1;
        id = op == CJ_OP_CHOLESKY ? cj_build_cholesky(g, xs[0], loc, &err)
           : op == CJ_OP_LU || op == CJ_OP_LU_PIVOTS ? cj_build_lu(g, xs[0], op == CJ_OP_LU_PIVOTS, loc, &err)
           : op == CJ_OP_QR || op == CJ_OP_EIGH || op == CJ_OP_SVD ? cj_build_decomp(g, op, xs[0], (int)flags, loc, &err)
                                  : cj_build_triangular_solve(g, xs[0], xs[1], (int)flags, loc, &err);
        break;
    }
    case CJ_OPKIND_GATHER: {
        int axis = 0;
        if (ATTR(at, A_AXIS) != NULL && norm_axis(ATTR(at, A_AXIS), rank, opname, &axis) < 0)
            return -1;
        id = cj_build_gather(g, xs[0], xs[1], axis, loc, &err);
        break;
    }
    case CJ_OPKIND_SCATTER: {
        /* apply('scatter_add', idx, updates, shape=..., axis=0, mode='drop' or 'clip') */
        cj_shape to;
        int axis = 0;
        if (ATTR(at, A_SHAPE) == NULL) {
            PyErr_Format(PyExc_TypeError, "apply('%s'): missing attribute 'shape'", opname);
            return -1;
        }
        if (cj_py_shape_from_obj(ATTR(at, A_SHAPE), &to, "apply('scatter')") < 0)
            return -1;
        if (ATTR(at, A_AXIS) != NULL && norm_axis(ATTR(at, A_AXIS), to.rank, opname, &axis) < 0)
            return -1;
        const char *mode = "drop";
        if (ATTR(at, A_MODE) != NULL && (!PyUnicode_Check(ATTR(at, A_MODE)) ||
                                         (mode = PyUnicode_AsUTF8(ATTR(at, A_MODE))) == NULL))
            return PyErr_Occurred() ? -1 : (PyErr_SetString(PyExc_TypeError, "apply: mode must be a str"), -1);
        if (strcmp(mode, "drop") != 0 && strcmp(mode, "clip") != 0) {
            PyErr_Format(PyExc_ValueError, "apply('%s'): mode must be 'drop' or 'clip', got '%s'", opname, mode);
            return -1;
        }
        id = cj_build_scatter(g, op, xs[0], xs[1], axis, &to, mode[0] == 'd', loc, &err);
        break;
    }
    case CJ_OPKIND_MOVE:
        if (op == CJ_OP_TRANSPOSE) {
            int64_t p64[CJ_MAX_RANK];
            int perm[CJ_MAX_RANK];
            if (ATTR(at, A_PERM) == NULL) {
                for (int d = 0; d < rank; d++)
                    p64[d] = rank - 1 - d;
            } else if (attr_int64s(ATTR(at, A_PERM), rank, p64, opname, "perm") < 0) {
                return -1;
            }
            for (int d = 0; d < rank; d++) {
                int64_t p = p64[d] < 0 ? p64[d] + rank : p64[d];
                perm[d] = (p < 0 || p >= rank) ? rank : (int)p;   /* the builder rejects rank */
            }
            id = cj_build_transpose(g, xs[0], perm, loc, &err);
        } else if (op == CJ_OP_SLICE) {
            int64_t start[CJ_MAX_RANK], stop[CJ_MAX_RANK], step[CJ_MAX_RANK];
            if (ATTR(at, A_START) == NULL || ATTR(at, A_STOP) == NULL) {
                PyErr_SetString(PyExc_TypeError, "apply('slice'): attributes 'start' and 'stop' "
                                "are required");
                return -1;
            }
            if (attr_int64s(ATTR(at, A_START), rank, start, opname, "start") < 0
                || attr_int64s(ATTR(at, A_STOP), rank, stop, opname, "stop") < 0)
                return -1;
            if (ATTR(at, A_STEP) == NULL) {
                for (int d = 0; d < rank; d++)
                    step[d] = 1;
            } else if (attr_int64s(ATTR(at, A_STEP), rank, step, opname, "step") < 0) {
                return -1;
            }
            id = cj_build_slice(g, xs[0], start, stop, step, loc, &err);
        } else {
            cj_shape to;
            if (ATTR(at, A_SHAPE) == NULL) {
                PyErr_Format(PyExc_TypeError, "apply('%s'): missing attribute 'shape'", opname);
                return -1;
            }
            char what[64];
            snprintf(what, sizeof what, "apply('%s')", opname);
            if (cj_py_shape_from_obj(ATTR(at, A_SHAPE), &to, what) < 0)
                return -1;
            id = op == CJ_OP_RESHAPE ? cj_build_reshape(g, xs[0], &to, loc, &err)
                                     : cj_build_broadcast(g, xs[0], &to, loc, &err);
        }
        break;
    case CJ_OPKIND_CONCAT: {
        int axis = 0;
        if (ATTR(at, A_AXIS) != NULL) {
            int64_t a;
            if (attr_int64(ATTR(at, A_AXIS), &a, opname, "axis") < 0)
                return -1;
            if (rank > 0 && (a < -(int64_t)rank || a >= rank)) {
                PyErr_Format(PyExc_ValueError, "concatenate: axis %lld is out of bounds for "
                             "array of dimension %d", (long long)a, rank);
                return -1;
            }
            axis = (int)(a < 0 ? a + rank : a);   /* rank 0 is reported by the builder */
        }
        id = cj_build_concatenate(g, xs, n, axis, loc, &err);
        break;
    }
    case CJ_OPKIND_REDUCE: {
        uint32_t mask;
        if (attr_axes(ATTR(at, A_AXES), rank, opname, &mask) < 0)
            return -1;
        id = cj_build_reduce(g, op, xs[0], mask, loc, &err);
        break;
    }
    }
    if (id < 0)
        cj_py_raise(&err);
    return id;
}

/* Appends " (operands ...; at file:line)" to a TypeError/ValueError/
 * OverflowError raised while applying an op, unless its message already
 * names the location (the graph builders' messages do). */
static void add_apply_context(cj_py_trace *tr, const int *xs, int n, int loc)
{
    const char *where = cj_graph_loc_str(tr->graph, loc);
    if (loc < 0 || !(PyErr_ExceptionMatches(PyExc_TypeError)
                     || PyErr_ExceptionMatches(PyExc_ValueError)
                     || PyErr_ExceptionMatches(PyExc_OverflowError)))
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);   /* new refs (or NULL) */
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *msg = value != NULL ? PyObject_Str(value) : NULL;
    const char *text = msg != NULL ? PyUnicode_AsUTF8(msg) : NULL;
    if (text == NULL || strstr(text, where) != NULL
        || !(type == PyExc_TypeError || type == PyExc_ValueError || type == PyExc_OverflowError)) {
        /* Leave it alone: already located, or a subclass with its own ways. */
        PyErr_Clear();
        Py_XDECREF(msg);
        PyErr_Restore(type, value, tb);
        return;
    }
    char ops[600] = "";
    size_t used = 0;
    for (int i = 0; i < n && used < sizeof ops; i++) {
        char aval[200];
        const cj_node *nd = &tr->graph->nodes[xs[i]];
        cj_py_aval_str(nd->dtype, &nd->shape, aval, sizeof aval);
        int k = snprintf(ops + used, sizeof ops - used, "%s%s", i ? ", " : "operands ", aval);
        if (k > 0)
            used += (size_t)k;
    }
    PyErr_Format(type, "%s (%s%sat %s)", text, ops, n > 0 ? "; " : "", where);
    Py_DECREF(msg);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

/* Trace.apply(op, *args, **attrs) -> Tracer */
PyObject *trace_apply(cj_py_trace *tr, PyObject *args, PyObject *kwargs)
{
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    if (nargs < 1 || !PyUnicode_Check(PyTuple_GET_ITEM(args, 0))) {
        PyErr_SetString(PyExc_TypeError, "Trace.apply: the first argument must be the op name (str)");
        return NULL;
    }
    const char *opname = PyUnicode_AsUTF8(PyTuple_GET_ITEM(args, 0));
    if (opname == NULL)
        return NULL;
    if (tr->finished) {
        /* Most likely a leaked Tracer passed to cjit.numpy: name it. */
        for (Py_ssize_t i = 1; i < nargs; i++) {
            PyObject *a = PyTuple_GET_ITEM(args, i);
            if (Tracer_Check(a) && ((cj_py_tracer *)a)->trace == tr)
                return leak_error((cj_py_tracer *)a);
        }
        PyErr_Format(cj_py.TracerLeakError,
                     "apply('%s'): the trace has already finished (a traced value escaped it)",
                     opname);
        return NULL;
    }
    cj_op op;
    if (!cj_op_from_name(opname, &op)) {
        PyErr_Format(PyExc_ValueError, "Trace.apply: unknown op '%s'", opname);
        return NULL;
    }
    apply_attrs at;
    if (parse_attrs(kwargs, op, opname, &at) < 0)
        return NULL;

    int n = (int)(nargs - 1);
    int arity = cj_op_arity(op); /* -1: one or more */
    if (nargs - 1 > INT32_MAX / 2 || (arity >= 0 && n != arity) || (arity < 0 && n < 1)) {
        if (arity < 0)
            PyErr_Format(PyExc_TypeError, "apply('%s') takes one or more arguments, got %zd",
                         opname, nargs - 1);
        else
            PyErr_Format(PyExc_TypeError, "apply('%s') takes %d argument%s, got %zd", opname,
                         arity, arity == 1 ? "" : "s", nargs - 1);
        return NULL;
    }
    int loc = current_loc(tr->graph);
    int small[CJ_MAX_INPUTS];
    int *xs = n <= CJ_MAX_INPUTS ? small : PyMem_Malloc((size_t)n * sizeof(int));
    if (xs == NULL)
        return PyErr_NoMemory();
    PyObject *result = NULL;
    for (int i = 0; i < n; i++) {
        int x = operand_node_strict(tr, PyTuple_GET_ITEM(args, i + 1), opname, loc);
        if (x < 0) {
            add_apply_context(tr, xs, i, loc);
            goto done;
        }
        xs[i] = x;
    }
    int id = build_op(tr, op, opname, xs, n, &at, loc);
    if (id >= 0)
        result = tracer_wrap(tr, id);
    else
        add_apply_context(tr, xs, n, loc);
done:
    if (xs != small)
        PyMem_Free(xs);
    return result;
}
