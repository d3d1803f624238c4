/* py_tracer.c - the Tracer type: a traced value as Python sees it, with
 * NumPy's operators and the array methods (forwarded to cjit.numpy).
 *
 * A Trace (py_trace.c) owns one cj_graph while it is live.  Every Tracer
 * holds a strong reference to its Trace and the id of one node; the Trace
 * holds no reference to its Tracers, so there are no cycles between them.
 * When the trace finishes, the graph moves to a Lowered (or is freed) and
 * every Tracer of it raises TracerLeakError when used; shape, dtype and
 * repr are copied into the Tracer so that they keep working. */
#include "py_trace.h"

#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- Tracer helpers --------------------------------------------------------- */

/* Raises ConcretizationError for `what` ("bool()", ...) on t; returns NULL. */
static PyObject *concretization_error(const cj_py_tracer *t, const char *what)
{
    char d[1400];
    tracer_describe(t, d, sizeof d);
    PyErr_Format(cj_py.ConcretizationError,
                 "%s needs a concrete value, but got the abstract %s. Concrete values are not "
                 "available while tracing, so Python control flow (if, while), bool(), int(), "
                 "float() and indexing with a traced value cannot work. If the value depends "
                 "only on arguments known when tracing, mark them static with static_argnums "
                 "or static_argnames; for an elementwise choice use cjit.numpy.where; for a branch "
                 "or a loop on traced values use cjit.lax.cond, cjit.lax.switch, cjit.lax.while_loop, "
                 "cjit.lax.fori_loop or cjit.lax.scan.",
                 what, d);
    return NULL;
}

/* ---- Tracer: operators ------------------------------------------------------------- */

/* Returns the tracer of a binary slot: whichever operand is one. */
static cj_py_tracer *pick_tracer(PyObject *a, PyObject *b)
{
    return (cj_py_tracer *)(Tracer_Check(a) ? a : b);
}

static PyObject *call_cnp(const char *name, PyObject *args, PyObject *kwargs);

/* A Python or NumPy complex number or a NumPy complex array.  The core has
 * real dtypes only: a complex value in a trace is a pair of real Tracers
 * that cjit.numpy builds (numpy/_complex.py), so an operator with such an
 * operand is done there. */
static bool complex_operand(PyObject *o)
{
    return PyComplex_Check(o) || PyArray_IsScalar(o, ComplexFloating)
           || (PyArray_Check(o) && PyArray_ISCOMPLEX((PyArrayObject *)o));
}

/* a <op> b for the number-protocol slots: either operand may be the
 * Tracer.  Returns NotImplemented for operand types it cannot convert, so
 * that Python can try the other operand or raise its own TypeError. */
static PyObject *tracer_binop(PyObject *a, PyObject *b, cj_op op)
{
    cj_py_tracer *t = pick_tracer(a, b);
    if (!Tracer_Check((PyObject *)t))
        Py_RETURN_NOTIMPLEMENTED;
    cj_py_trace *tr = t->trace;
    if (tr->finished)
        return leak_error(t);
    if (complex_operand(a) || complex_operand(b))
        return call_cnp("_complex_binop", Py_BuildValue("(sOO)", cj_op_name(op), a, b), NULL);
    if (!convertible(a) || !convertible(b))
        Py_RETURN_NOTIMPLEMENTED;
    const char *opname = cj_op_name(op);
    int loc = current_loc(tr->graph);
    int x = operand_node(tr, a, opname, loc);
    if (x < 0)
        return NULL;
    int y = operand_node(tr, b, opname, loc);
    if (y < 0)
        return NULL;
    cj_error err = {0};
    int id = op == CJ_OP_MATMUL ? cj_build_matmul(tr->graph, x, y, loc, &err)
                                : cj_build_binary(tr->graph, op, x, y, loc, &err);
    if (id < 0)
        return cj_py_raise(&err);
    return tracer_wrap(tr, id);
}

/* & | ^ << >>: on two bools & | ^ are logical_and, logical_or and ne (the
 * ops autodiff and fusion know best); otherwise the bitwise op `int_op`,
 * whose builder refuses floats.  >> shifts in zeros for unsigned dtypes
 * and the sign bit for signed ones, as NumPy's right_shift. */
static PyObject *tracer_boolop(PyObject *a, PyObject *b, cj_op op, cj_op int_op, const char *sym)
{
    cj_py_tracer *t = pick_tracer(a, b);
    if (!Tracer_Check((PyObject *)t))
        Py_RETURN_NOTIMPLEMENTED;
    cj_py_trace *tr = t->trace;
    if (tr->finished)
        return leak_error(t);
    if (!convertible(a) || !convertible(b))
        Py_RETURN_NOTIMPLEMENTED;
    int loc = current_loc(tr->graph);
    int x = operand_node(tr, a, sym, loc);
    if (x < 0)
        return NULL;
    int y = operand_node(tr, b, sym, loc);
    if (y < 0)
        return NULL;
    const cj_node *nx = &tr->graph->nodes[x], *ny = &tr->graph->nodes[y];
    if (nx->dtype != CJ_BOOL || ny->dtype != CJ_BOOL)
        op = int_op;
    if (op == CJ_OP_SHIFT_RIGHT_ARITHMETIC && cj_dtype_unsigned(cj_promote(nx->dtype, nx->weak, ny->dtype, ny->weak, NULL)))
        op = CJ_OP_SHIFT_RIGHT_LOGICAL;
    cj_error err = {0};
    int id = cj_build_binary(tr->graph, op, x, y, loc, &err);
    if (id < 0)
        return cj_py_raise(&err);
    return tracer_wrap(tr, id);
}

/* One unary op on t. */
static PyObject *tracer_unop(PyObject *self, cj_op op)
{
    cj_py_tracer *t = (cj_py_tracer *)self;
    cj_py_trace *tr = t->trace;
    if (tr->finished)
        return leak_error(t);
    cj_error err = {0};
    int id = cj_build_unary(tr->graph, op, t->id, current_loc(tr->graph), &err);
    if (id < 0)
        return cj_py_raise(&err);
    return tracer_wrap(tr, id);
}

#define BINARY_SLOT(fname, OP)                                                              \
    static PyObject *fname(PyObject *a, PyObject *b) { return tracer_binop(a, b, OP); }
BINARY_SLOT(tracer_add, CJ_OP_ADD)
BINARY_SLOT(tracer_sub, CJ_OP_SUB)
BINARY_SLOT(tracer_mul, CJ_OP_MUL)
BINARY_SLOT(tracer_truediv, CJ_OP_DIV)
BINARY_SLOT(tracer_floordiv, CJ_OP_FLOORDIV)
BINARY_SLOT(tracer_matmul, CJ_OP_MATMUL)
#undef BINARY_SLOT

static PyObject *tracer_pow(PyObject *a, PyObject *b, PyObject *mod)
{
    if (mod != Py_None) {
        PyErr_SetString(PyExc_TypeError, "pow() with a modulus is not supported for traced values");
        return NULL;
    }
    return tracer_binop(a, b, CJ_OP_POW);
}

static PyObject *tracer_and(PyObject *a, PyObject *b)
{
    return tracer_boolop(a, b, CJ_OP_LOGICAL_AND, CJ_OP_BITWISE_AND, "&");
}
static PyObject *tracer_or(PyObject *a, PyObject *b)
{
    return tracer_boolop(a, b, CJ_OP_LOGICAL_OR, CJ_OP_BITWISE_OR, "|");
}
static PyObject *tracer_xor(PyObject *a, PyObject *b) { return tracer_boolop(a, b, CJ_OP_NE, CJ_OP_BITWISE_XOR, "^"); }
static PyObject *tracer_lshift(PyObject *a, PyObject *b)
{
    return tracer_boolop(a, b, CJ_OP_SHIFT_LEFT, CJ_OP_SHIFT_LEFT, "<<");
}
static PyObject *tracer_rshift(PyObject *a, PyObject *b)
{
    return tracer_boolop(a, b, CJ_OP_SHIFT_RIGHT_ARITHMETIC, CJ_OP_SHIFT_RIGHT_ARITHMETIC, ">>");
}

static PyObject *tracer_neg(PyObject *self) { return tracer_unop(self, CJ_OP_NEG); }
static PyObject *tracer_abs(PyObject *self) { return tracer_unop(self, CJ_OP_ABS); }

static PyObject *tracer_pos(PyObject *self)
{
    cj_py_tracer *t = (cj_py_tracer *)self;
    if (t->trace->finished)
        return leak_error(t);
    return Py_NewRef(self);
}

static PyObject *tracer_invert(PyObject *self)
{
    cj_py_tracer *t = (cj_py_tracer *)self;
    return tracer_unop(self, t->dtype == CJ_BOOL ? CJ_OP_LOGICAL_NOT : CJ_OP_BITWISE_NOT);
}

/* The value of t as a new NumPy array, from its trace's evaluator
 * (Trace.concrete, set where every input of the trace is concrete: grad
 * and friends called outside jit); without one, or when it answers None
 * (a value of a vmap, lax or custom-rule body), ConcretizationError for
 * `what`.  NULL with an exception set on failure. */
static PyObject *concrete_value(PyObject *self, const char *what)
{
    cj_py_tracer *t = (cj_py_tracer *)self;
    if (t->trace->finished)
        return leak_error(t);
    PyObject *hook = t->trace->concrete;
    if (hook == NULL)
        return concretization_error(t, what);
    Py_INCREF(hook);   /* the evaluator may reset Trace.concrete while it runs */
    PyObject *v = PyObject_CallOneArg(hook, self);
    Py_DECREF(hook);
    if (v == Py_None) {
        Py_DECREF(v);
        return concretization_error(t, what);
    }
    return v;
}

static int tracer_bool(PyObject *self)
{
    PyObject *v = concrete_value(self, "bool() (an if, while, and, or, not)");
    if (v == NULL)
        return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* conv(value of self), the value made concrete first. */
static PyObject *tracer_convert(PyObject *self, const char *what, PyObject *(*conv)(PyObject *))
{
    PyObject *v = concrete_value(self, what);
    if (v == NULL)
        return NULL;
    PyObject *r = conv(v);
    Py_DECREF(v);
    return r;
}

static PyObject *tracer_int(PyObject *self) { return tracer_convert(self, "int()", PyNumber_Long); }
static PyObject *tracer_float(PyObject *self) { return tracer_convert(self, "float()", PyNumber_Float); }
static PyObject *tracer_index(PyObject *self)
{
    return tracer_convert(self, "using a traced value as an index (__index__)", PyNumber_Index);
}

/* x % y and divmod(x, y), either operand traced: NumPy's remainder (the
 * sign of y) as cjit.numpy composes it, operands in the order written. */
static PyObject *tracer_remainder(PyObject *x, PyObject *y) { return call_cnp("remainder", PyTuple_Pack(2, x, y), NULL); }
static PyObject *tracer_divmod(PyObject *x, PyObject *y) { return call_cnp("divmod", PyTuple_Pack(2, x, y), NULL); }

static PyNumberMethods tracer_as_number = {
    .nb_add = tracer_add,
    .nb_subtract = tracer_sub,
    .nb_multiply = tracer_mul,
    .nb_true_divide = tracer_truediv,
    .nb_floor_divide = tracer_floordiv,
    .nb_remainder = tracer_remainder,
    .nb_divmod = tracer_divmod,
    .nb_power = tracer_pow,
    .nb_matrix_multiply = tracer_matmul,
    .nb_negative = tracer_neg,
    .nb_positive = tracer_pos,
    .nb_absolute = tracer_abs,
    .nb_invert = tracer_invert,
    .nb_and = tracer_and,
    .nb_or = tracer_or,
    .nb_xor = tracer_xor,
    .nb_lshift = tracer_lshift,
    .nb_rshift = tracer_rshift,
    .nb_bool = tracer_bool,
    .nb_int = tracer_int,
    .nb_float = tracer_float,
    .nb_index = tracer_index,
};

static PyObject *tracer_richcompare(PyObject *self, PyObject *other, int pyop)
{
    cj_op op;
    switch (pyop) {
    case Py_LT: op = CJ_OP_LT; break;
    case Py_LE: op = CJ_OP_LE; break;
    case Py_EQ: op = CJ_OP_EQ; break;
    case Py_NE: op = CJ_OP_NE; break;
    case Py_GT: op = CJ_OP_GT; break;
    case Py_GE: op = CJ_OP_GE; break;
    default: Py_RETURN_NOTIMPLEMENTED;
    }
    /* CPython always passes the Tracer first (reflected calls swap op). */
    return tracer_binop(self, other, op);
}

/* ---- Tracer: containers and forwarding to cjit.numpy ------------------------------ */

/* Calls the function cjit.numpy registered as `name` (*args, **kwargs);
 * args is a new tuple that this function consumes (decrefs).  Returns a
 * new reference. */
static PyObject *call_cnp(const char *name, PyObject *args, PyObject *kwargs)
{
    if (args == NULL)
        return NULL;
    PyObject *result = NULL;
    PyObject *fn = cj_py_tracer_function(name, false);   /* borrowed */
    if (fn != NULL)
        result = PyObject_Call(fn, args, kwargs);
    Py_DECREF(args);
    return result;
}

/* (self, *args) as a new tuple. */
static PyObject *prepend_self(PyObject *self, PyObject *args)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *t = PyTuple_New(n + 1);
    if (t == NULL)
        return NULL;
    PyTuple_SET_ITEM(t, 0, Py_NewRef(self));
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(t, i + 1, Py_NewRef(PyTuple_GET_ITEM(args, i)));
    return t;
}

static PyObject *forward(PyObject *self, const char *name, PyObject *args, PyObject *kwargs)
{
    cj_py_tracer *t = (cj_py_tracer *)self;
    if (t->trace->finished)
        return leak_error(t);
    return call_cnp(name, prepend_self(self, args), kwargs);
}

#define FORWARD(meth, name)                                                                 \
    static PyObject *meth(PyObject *self, PyObject *args, PyObject *kwargs)                  \
    {                                                                                        \
        return forward(self, name, args, kwargs);                                            \
    }
FORWARD(tracer_m_sum, "sum")
FORWARD(tracer_m_mean, "mean")
FORWARD(tracer_m_max, "max")
FORWARD(tracer_m_min, "min")
FORWARD(tracer_m_prod, "prod")
FORWARD(tracer_m_argmax, "argmax")
FORWARD(tracer_m_argmin, "argmin")
FORWARD(tracer_m_var, "var")
FORWARD(tracer_m_astype, "astype")
FORWARD(tracer_m_squeeze, "squeeze")
FORWARD(tracer_m_clip, "clip")
FORWARD(tracer_m_dot, "dot")
FORWARD(tracer_m_array_ufunc, "_tracer_array_ufunc")
/* the rest of ndarray's methods that compute, each cjit.numpy's function (not
 * trace: Tracer.trace is the Trace the value belongs to; use cjit.numpy.trace) */
FORWARD(tracer_m_all, "all")
FORWARD(tracer_m_any, "any")
FORWARD(tracer_m_cumsum, "cumsum")
FORWARD(tracer_m_cumprod, "cumprod")
FORWARD(tracer_m_std, "std")
FORWARD(tracer_m_ravel, "ravel")
FORWARD(tracer_m_round, "round")
FORWARD(tracer_m_swapaxes, "swapaxes")
FORWARD(tracer_m_take, "take")
FORWARD(tracer_m_repeat, "repeat")
FORWARD(tracer_m_diagonal, "diagonal")
FORWARD(tracer_m_copy, "copy")
FORWARD(tracer_m_conj, "conj")
FORWARD(tracer_m_conjugate, "conjugate")
FORWARD(tracer_m_sort, "sort")
FORWARD(tracer_m_argsort, "argsort")
FORWARD(tracer_m_searchsorted, "searchsorted")
FORWARD(tracer_m_nonzero, "nonzero")
FORWARD(tracer_m_ptp, "ptp")
#undef FORWARD

/* x.reshape(2, 3) and x.transpose(1, 0) take the shape/axes unpacked, as
 * ndarray's methods do: pack them into one tuple for cjit.numpy. */
static PyObject *forward_packed(PyObject *self, const char *name, PyObject *args, PyObject *kwargs)
{
    cj_py_tracer *t = (cj_py_tracer *)self;
    if (t->trace->finished)
        return leak_error(t);
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n <= 1)
        return call_cnp(name, prepend_self(self, args), kwargs);
    return call_cnp(name, Py_BuildValue("(OO)", self, args), kwargs);
}

static PyObject *tracer_m_reshape(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return forward_packed(self, "reshape", args, kwargs);
}

static PyObject *tracer_m_transpose(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return forward_packed(self, "transpose", args, kwargs);
}

static PyObject *tracer_m_flatten(PyObject *self, PyObject *unused)
{
    (void)unused;
    cj_py_tracer *t = (cj_py_tracer *)self;
    if (t->trace->finished)
        return leak_error(t);
    return call_cnp("reshape", Py_BuildValue("(O(i))", self, -1), NULL);
}

/* self's value's method `name` (item, tolist, __array__) with these arguments. */
static PyObject *concrete_method(PyObject *self, const char *what, const char *name, PyObject *args,
                                 PyObject *kwargs)
{
    PyObject *v = concrete_value(self, what);
    if (v == NULL)
        return NULL;
    PyObject *m = PyObject_GetAttrString(v, name);
    Py_DECREF(v);
    if (m == NULL)
        return NULL;
    PyObject *r = PyObject_Call(m, args, kwargs);
    Py_DECREF(m);
    return r;
}

static PyObject *tracer_m_item(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return concrete_method(self, "item() / tolist()", "item", args, kwargs);
}

/* Never a value, even where one is known (as JAX's TracerArrayConversionError
 * and its tolist()): NumPy would compute on it untraced, and a gradient
 * through it would be lost. */
static PyObject *no_value(PyObject *self, const char *what)
{
    cj_py_tracer *t = (cj_py_tracer *)self;
    if (t->trace->finished)
        return leak_error(t);
    return concretization_error(t, what);
}

static PyObject *tracer_m_tolist(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)args;
    (void)kwargs;
    return no_value(self, "tolist()");
}

static PyObject *tracer_m_array(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)args;
    (void)kwargs;
    return no_value(self, "conversion to a NumPy array (np.asarray, np.array)");
}

static Py_ssize_t tracer_len(PyObject *self)
{
    cj_py_tracer *t = (cj_py_tracer *)self;
    if (t->shape.rank == 0) {
        char d[1400];
        tracer_describe(t, d, sizeof d);
        PyErr_Format(cj_py.ConcretizationError, "len() of unsized object: the %s is 0-d", d);
        return -1;
    }
    return (Py_ssize_t)t->shape.dims[0];
}

static PyObject *tracer_getitem(PyObject *self, PyObject *key)
{
    cj_py_tracer *t = (cj_py_tracer *)self;
    if (t->trace->finished)
        return leak_error(t);
    return call_cnp("_getitem", PyTuple_Pack(2, self, key), NULL);
}

static int tracer_setitem(PyObject *self, PyObject *key, PyObject *value)
{
    (void)self;
    (void)key;
    PyErr_Format(PyExc_TypeError, "traced values are immutable: item %s is not supported "
                 "(use x.at[index].set(value), which returns the updated array, as in JAX)",
                 value ? "assignment" : "deletion");
    return -1;
}

static PyMappingMethods tracer_as_mapping = {
    .mp_length = tracer_len,
    .mp_subscript = tracer_getitem,
    .mp_ass_subscript = tracer_setitem,
};

static PyObject *tracer_iter(PyObject *self)
{
    cj_py_tracer *t = (cj_py_tracer *)self;
    if (t->trace->finished)
        return leak_error(t);
    if (t->shape.rank == 0) {
        PyErr_SetString(PyExc_TypeError, "iteration over a 0-d traced value");
        return NULL;
    }
    /* cjit.numpy._iter(self) when the Python layer provides it ... */
    PyObject *helper = cj_py_tracer_function("_iter", true);   /* borrowed */
    if (helper != NULL) {
        PyObject *res = PyObject_CallOneArg(helper, self);
        if (res == NULL)
            return NULL;
        PyObject *it = PyObject_GetIter(res);
        Py_DECREF(res);
        return it;
    }
    /* ... otherwise [self[i] for i in range(len(self))], made at once. */
    PyObject *items = PyList_New(0);
    if (items == NULL)
        return NULL;
    for (int64_t i = 0; i < t->shape.dims[0]; i++) {
        PyObject *item = call_cnp("_getitem", Py_BuildValue("(OL)", self, (long long)i), NULL);
        if (item == NULL || PyList_Append(items, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(items);
            return NULL;
        }
        Py_DECREF(item);
    }
    PyObject *it = PyObject_GetIter(items);
    Py_DECREF(items);
    return it;
}

/* ---- Tracer: attributes --------------------------------------------------------------- */

static PyObject *tracer_get_shape(cj_py_tracer *t, void *c) { (void)c; return cj_py_shape_tuple(&t->shape); }
static PyObject *tracer_get_dtype(cj_py_tracer *t, void *c) { (void)c; return cj_py_dtype_object(t->dtype); }
static PyObject *tracer_get_ndim(cj_py_tracer *t, void *c) { (void)c; return PyLong_FromLong(t->shape.rank); }
static PyObject *tracer_get_size(cj_py_tracer *t, void *c) { (void)c; return PyLong_FromLongLong(cj_shape_numel(&t->shape)); }
static PyObject *tracer_get_weak(cj_py_tracer *t, void *c) { (void)c; return PyBool_FromLong(t->weak); }
static PyObject *tracer_get_trace(cj_py_tracer *t, void *c) { (void)c; return Py_NewRef((PyObject *)t->trace); }

static PyObject *tracer_get_T(cj_py_tracer *t, void *c)
{
    (void)c;
    cj_py_trace *tr = t->trace;
    if (tr->finished)
        return leak_error(t);
    int rank = t->shape.rank;
    if (rank < 2)
        return Py_NewRef((PyObject *)t);
    int perm[CJ_MAX_RANK];
    for (int d = 0; d < rank; d++)
        perm[d] = rank - 1 - d;
    cj_error err = {0};
    int id = cj_build_transpose(tr->graph, t->id, perm, current_loc(tr->graph), &err);
    if (id < 0)
        return cj_py_raise(&err);
    return tracer_wrap(tr, id);
}

/* x.real, x.imag and x.mT: cjit.numpy's real, imag and matrix_transpose */
static PyObject *tracer_get_forwarded(PyObject *self, void *name)
{
    return forward(self, (const char *)name, PyTuple_New(0), NULL);
}

static PyObject *tracer_get_itemsize(cj_py_tracer *t, void *c)
{
    (void)c;
    return PyLong_FromLong(cj_dtype_size(t->dtype));
}

static PyObject *tracer_get_nbytes(cj_py_tracer *t, void *c)
{
    (void)c;
    return PyLong_FromLongLong(cj_shape_numel(&t->shape) * cj_dtype_size(t->dtype));
}

static PyGetSetDef tracer_getset[] = {
    {"shape", (getter)tracer_get_shape, NULL, "tuple of ints", NULL},
    {"dtype", (getter)tracer_get_dtype, NULL, "numpy.dtype", NULL},
    {"ndim", (getter)tracer_get_ndim, NULL, "number of dimensions", NULL},
    {"size", (getter)tracer_get_size, NULL, "number of elements", NULL},
    {"weak", (getter)tracer_get_weak, NULL, "a weakly typed (Python scalar) value", NULL},
    {"trace", (getter)tracer_get_trace, NULL, "the Trace this value belongs to", NULL},
    {"T", (getter)tracer_get_T, NULL, "transpose (reversed axes)", NULL},
    {"mT", (getter)tracer_get_forwarded, NULL, "the last two axes swapped", "matrix_transpose"},
    {"at", (getter)tracer_get_forwarded, NULL, "x.at[key].set/add/...: functional updates, as JAX's", "_at"},
    {"real", (getter)tracer_get_forwarded, NULL, "cjit.numpy.real(self)", "real"},
    {"imag", (getter)tracer_get_forwarded, NULL, "cjit.numpy.imag(self)", "imag"},
    {"itemsize", (getter)tracer_get_itemsize, NULL, "bytes per element", NULL},
    {"nbytes", (getter)tracer_get_nbytes, NULL, "bytes of the whole value", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

#define KW_METHOD(name, fn, doc) \
    {name, (PyCFunction)(void (*)(void))fn, METH_VARARGS | METH_KEYWORDS, doc}
static PyMethodDef tracer_methods[] = {
    KW_METHOD("sum", tracer_m_sum, "cjit.numpy.sum(self, ...)"),
    KW_METHOD("mean", tracer_m_mean, "cjit.numpy.mean(self, ...)"),
    KW_METHOD("max", tracer_m_max, "cjit.numpy.max(self, ...)"),
    KW_METHOD("min", tracer_m_min, "cjit.numpy.min(self, ...)"),
    KW_METHOD("prod", tracer_m_prod, "cjit.numpy.prod(self, ...)"),
    KW_METHOD("argmax", tracer_m_argmax, "cjit.numpy.argmax(self, ...)"),
    KW_METHOD("argmin", tracer_m_argmin, "cjit.numpy.argmin(self, ...)"),
    KW_METHOD("var", tracer_m_var, "cjit.numpy.var(self, ...)"),
    KW_METHOD("astype", tracer_m_astype, "cjit.numpy.astype(self, dtype)"),
    KW_METHOD("reshape", tracer_m_reshape, "cjit.numpy.reshape(self, shape)"),
    KW_METHOD("transpose", tracer_m_transpose, "cjit.numpy.transpose(self, axes)"),
    KW_METHOD("squeeze", tracer_m_squeeze, "cjit.numpy.squeeze(self, ...)"),
    KW_METHOD("clip", tracer_m_clip, "cjit.numpy.clip(self, ...)"),
    KW_METHOD("dot", tracer_m_dot, "cjit.numpy.dot(self, other)"),
    {"flatten", (PyCFunction)tracer_m_flatten, METH_NOARGS, "cjit.numpy.reshape(self, (-1,))"},
    KW_METHOD("all", tracer_m_all, "cjit.numpy.all(self, ...)"),
    KW_METHOD("any", tracer_m_any, "cjit.numpy.any(self, ...)"),
    KW_METHOD("cumsum", tracer_m_cumsum, "cjit.numpy.cumsum(self, ...)"),
    KW_METHOD("cumprod", tracer_m_cumprod, "cjit.numpy.cumprod(self, ...)"),
    KW_METHOD("std", tracer_m_std, "cjit.numpy.std(self, ...)"),
    KW_METHOD("ravel", tracer_m_ravel, "cjit.numpy.ravel(self, ...)"),
    KW_METHOD("round", tracer_m_round, "cjit.numpy.round(self, ...)"),
    KW_METHOD("swapaxes", tracer_m_swapaxes, "cjit.numpy.swapaxes(self, ...)"),
    KW_METHOD("take", tracer_m_take, "cjit.numpy.take(self, ...)"),
    KW_METHOD("repeat", tracer_m_repeat, "cjit.numpy.repeat(self, ...)"),
    KW_METHOD("diagonal", tracer_m_diagonal, "cjit.numpy.diagonal(self, ...)"),
    KW_METHOD("copy", tracer_m_copy, "cjit.numpy.copy(self, ...)"),
    KW_METHOD("conj", tracer_m_conj, "cjit.numpy.conj(self, ...)"),
    KW_METHOD("conjugate", tracer_m_conjugate, "cjit.numpy.conjugate(self, ...)"),
    KW_METHOD("sort", tracer_m_sort, "cjit.numpy.sort(self, ...)"),
    KW_METHOD("argsort", tracer_m_argsort, "cjit.numpy.argsort(self, ...)"),
    KW_METHOD("searchsorted", tracer_m_searchsorted, "cjit.numpy.searchsorted(self, ...)"),
    KW_METHOD("nonzero", tracer_m_nonzero, "cjit.numpy.nonzero(self, ...)"),
    KW_METHOD("ptp", tracer_m_ptp, "cjit.numpy.ptp(self, ...)"),
    KW_METHOD("item", tracer_m_item, "the value (ConcretizationError where it is abstract)"),
    KW_METHOD("tolist", tracer_m_tolist, "raises ConcretizationError"),
    KW_METHOD("__array__", tracer_m_array, "raises ConcretizationError"),
    KW_METHOD("__array_ufunc__", tracer_m_array_ufunc,
              "NumPy's operators on a traced value run as Tracer's own; other ufuncs raise "
              "TypeError naming the cjit.numpy function to use"),
    {NULL, NULL, 0, NULL},
};
#undef KW_METHOD

static PyObject *tracer_repr(cj_py_tracer *t)
{
    char aval[200];
    cj_py_aval_str(t->dtype, &t->shape, aval, sizeof aval);
    return PyUnicode_FromFormat("Tracer<%s%s>", aval, t->weak ? " weak" : "");
}

static void tracer_dealloc(cj_py_tracer *t)
{
    Py_DECREF(t->trace);
    Py_TYPE(t)->tp_free((PyObject *)t);
}


/* Gives the Tracer type (its storage is py_operand.c's, which makes
 * Tracers) its behaviour, readies it, sets its class attributes for NumPy
 * and adds it to m.  Returns 0, or -1 with an exception set. */
int cj_py_tracer_init(PyObject *m)
{
    PyTypeObject *t = &cj_py_TracerType;
    t->tp_dealloc = (destructor)tracer_dealloc;
    t->tp_repr = (reprfunc)tracer_repr;
    t->tp_as_number = &tracer_as_number;
    t->tp_as_mapping = &tracer_as_mapping;
    t->tp_richcompare = tracer_richcompare;
    t->tp_iter = tracer_iter;
    t->tp_methods = tracer_methods;
    t->tp_getset = tracer_getset;
    if (PyType_Ready(t) < 0)
        return -1;
    /* A class attribute (not a getset: NumPy looks it up on the type).
     * __array_ufunc__ (a method, forwarded to cjit.numpy) makes
     * `ndarray + tracer` run as Tracer's reflected operator would. */
    PyObject *prio = PyFloat_FromDouble(1000.0);
    if (prio == NULL)
        return -1;
    int rc = PyDict_SetItemString(cj_py_TracerType.tp_dict, "__array_priority__", prio);
    Py_DECREF(prio);
    if (rc < 0)
        return -1;
    PyType_Modified(&cj_py_TracerType);
    return PyModule_AddObjectRef(m, "Tracer", (PyObject *)&cj_py_TracerType);
}
