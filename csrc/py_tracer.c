/* py_tracer.c - the Trace and Tracer types: recording a graph from Python.
 *
 * A Trace owns one cj_graph while it is live.  Every Tracer holds a strong
 * reference to its Trace and the id of one node; the Trace holds no
 * reference to its Tracers, so there are no cycles between them.  When the
 * trace finishes, the graph moves to a Lowered (or is freed) and every
 * Tracer of it raises TracerLeakError when used; shape, dtype and repr are
 * copied into the Tracer so that they keep working. */
#include "autodiff.h"
#include "batching.h"
#include "jvp.h"
#include "py_glue.h"

#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define Tracer_Check(o) Py_IS_TYPE((o), &cj_py_TracerType)   /* not subclassable */

/* ---- source locations ----------------------------------------------------- */

/* The location id of the innermost Python frame outside the cjit package
 * (the user's file:line), interned in g; -1 if there is none.  Never
 * leaves an exception set. */
static int current_loc(cj_graph *g)
{
    PyFrameObject *f = cj_py_user_frame(NULL);
    if (f == NULL)
        return -1;
    PyCodeObject *code = PyFrame_GetCode(f);   /* new ref */
    const char *name = PyUnicode_Check(code->co_filename) ? PyUnicode_AsUTF8(code->co_filename) : NULL;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s:%d", name ? name : "?", PyFrame_GetLineNumber(f));
    Py_DECREF(code);
    Py_DECREF(f);
    PyErr_Clear();   /* from PyUnicode_AsUTF8, if any */
    return cj_graph_loc(g, buf);
}

/* ---- Tracer helpers --------------------------------------------------------- */

/* A new Tracer for node id of the live trace tr. */
static PyObject *tracer_wrap(cj_py_trace *tr, int id)
{
    cj_py_tracer *t = PyObject_New(cj_py_tracer, &cj_py_TracerType);
    if (t == NULL)
        return NULL;
    const cj_node *n = &tr->graph->nodes[id];
    Py_INCREF(tr);
    t->trace = tr;
    t->id = id;
    t->loc = n->loc;
    t->dtype = n->dtype;
    t->weak = n->weak;
    t->shape = n->shape;
    return (PyObject *)t;
}

/* See py_glue.h. */
PyObject *cj_py_tracer_new(cj_py_trace *tr, int id) { return tracer_wrap(tr, id); }
int cj_py_current_loc(cj_graph *g) { return current_loc(g); }

/* The tracer's "file:line" (borrowed, valid while the tracer lives). */
static const char *tracer_loc_str(const cj_py_tracer *t)
{
    const cj_py_trace *tr = t->trace;
    if (tr->graph != NULL)
        return cj_graph_loc_str(tr->graph, t->loc);
    if (t->loc >= 0 && t->loc < tr->nfinal_locs && tr->final_locs[t->loc] != NULL)
        return tr->final_locs[t->loc];
    return "?";
}

/* "float32[3] traced value created at f.py:12" into buf. */
static void tracer_describe(const cj_py_tracer *t, char *buf, size_t n)
{
    char aval[200];
    cj_py_aval_str(t->dtype, &t->shape, aval, sizeof aval);
    snprintf(buf, n, "%s traced value created at %s", aval, tracer_loc_str(t));
}

/* Raises TracerLeakError for t; returns NULL. */
static PyObject *leak_error(const cj_py_tracer *t)
{
    char d[1400];
    tracer_describe(t, d, sizeof d);
    PyErr_Format(cj_py.TracerLeakError,
                 "the %s escaped its trace: it is used after the function that was being "
                 "traced returned (it was probably stored in a global, a closure or an "
                 "attribute). Return traced values from the function instead.",
                 d);
    return NULL;
}

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

/* ---- converting operands ------------------------------------------------------ */

/* True when operand_node can convert obj (no exception is ever set). */
static bool convertible(PyObject *obj)
{
    return Tracer_Check(obj) || PyBool_Check(obj) || PyLong_Check(obj) || PyFloat_Check(obj)
           || PyArray_IsScalar(obj, Generic) || PyArray_Check(obj);
}

/* Node id of a rank-0 constant, or -1 with an exception set. */
static int scalar_node(cj_py_trace *tr, cj_dtype dt, double f, int64_t i, bool weak, int loc)
{
    cj_error err = {0};
    cj_shape s = {0};
    int id = cj_build_constant(tr->graph, f, i, dt, weak, &s, loc, &err);
    if (id < 0)
        cj_py_raise(&err);
    return id;
}

/* Node id of a NumPy scalar as a strong constant, or -1. */
static int numpy_scalar_node(cj_py_trace *tr, PyObject *obj, const char *opname, int loc)
{
    PyArray_Descr *descr = PyArray_DescrFromScalar(obj);   /* new ref */
    if (descr == NULL)
        return -1;
    cj_dtype dt;
    if (!cj_py_dtype_from_descr(descr, &dt)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: unsupported NumPy scalar of dtype %S; cjit supports bool, int32, int64, "
                     "float32, float64 and uint32",
                     opname, (PyObject *)descr);
        Py_DECREF(descr);
        return -1;
    }
    Py_DECREF(descr);
    union {
        npy_bool b;
        npy_int32 i32;
        npy_int64 i64;
        npy_uint32 u32;
        npy_float32 f32;
        npy_float64 f64;
        char raw[16];
    } v;
    memset(&v, 0, sizeof v);
    PyArray_ScalarAsCtype(obj, &v);   /* copies the raw C value */
    switch (dt) {
    case CJ_BOOL:
        return scalar_node(tr, dt, v.b != 0, v.b != 0, false, loc);
    case CJ_INT32:
        return scalar_node(tr, dt, (double)v.i32, v.i32, false, loc);
    case CJ_INT64:
        return scalar_node(tr, dt, (double)v.i64, v.i64, false, loc);
    case CJ_UINT32:
        return scalar_node(tr, dt, (double)v.u32, (int64_t)v.u32, false, loc);
    case CJ_FLOAT32:
        return scalar_node(tr, dt, (double)v.f32, 0, false, loc);
    case CJ_FLOAT64:
        return scalar_node(tr, dt, v.f64, 0, false, loc);
    case CJ_NUM_DTYPES:
        break;
    }
    PyErr_SetString(PyExc_RuntimeError, "cjit internal error: bad dtype");
    return -1;
}

static int array_node(cj_py_trace *tr, PyObject *obj, int loc);

/* Converts one operand of `opname` for the live trace tr.  Returns the
 * node id, -1 with an exception set, or -2 (no exception) when obj has a
 * type that cannot be converted (see convertible()). */
static int operand_node(cj_py_trace *tr, PyObject *obj, const char *opname, int loc)
{
    if (Tracer_Check(obj)) {
        cj_py_tracer *t = (cj_py_tracer *)obj;
        if (t->trace == tr)
            return t->id;
        if (t->trace->finished) {
            leak_error(t);
            return -1;
        }
        char d[1400];
        tracer_describe(t, d, sizeof d);
        PyErr_Format(PyExc_ValueError,
                     "%s: the %s belongs to another trace that is still running: nesting "
                     "traces (using a value traced by an outer transformation inside an inner "
                     "one) is not supported yet",
                     opname, d);
        return -1;
    }
    /* bool before int (bool is an int); NumPy scalars before float
     * (np.float64 is a float subclass but strongly typed). */
    if (PyBool_Check(obj)) {
        int b = obj == Py_True;
        return scalar_node(tr, CJ_BOOL, b, b, true, loc);
    }
    if (PyArray_IsScalar(obj, Generic))
        return numpy_scalar_node(tr, obj, opname, loc);
    if (PyLong_Check(obj)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
        if (overflow) {
            PyErr_Format(PyExc_OverflowError, "%s: Python int %R is too large for int64", opname, obj);
            return -1;
        }
        if (v == -1 && PyErr_Occurred())
            return -1;
        return scalar_node(tr, CJ_INT64, (double)v, v, true, loc);
    }
    if (PyFloat_Check(obj)) {
        double v = PyFloat_AsDouble(obj);
        if (v == -1.0 && PyErr_Occurred())
            return -1;
        return scalar_node(tr, CJ_FLOAT64, v, 0, true, loc);
    }
    if (PyArray_Check(obj))
        return array_node(tr, obj, loc);
    return -2;
}

/* Like operand_node, but an unconvertible type is a TypeError. */
static int operand_node_strict(cj_py_trace *tr, PyObject *obj, const char *opname, int loc)
{
    int id = operand_node(tr, obj, opname, loc);
    if (id == -2) {
        PyErr_Format(PyExc_TypeError,
                     "%s: unsupported argument of type %.200s (expected a traced value, a Python "
                     "bool/int/float, a NumPy scalar or a NumPy array)",
                     opname, Py_TYPE(obj)->tp_name);
        return -1;
    }
    return id;
}

/* ---- Trace ------------------------------------------------------------------- */

/* Raises (RuntimeError) unless tr is live; 0 or -1. */
static int trace_check_live(cj_py_trace *tr, const char *method)
{
    if (tr->finished) {
        PyErr_Format(PyExc_RuntimeError, "Trace.%s: this trace has already finished", method);
        return -1;
    }
    return 0;
}

/* The node of a closed-over array (the same object twice gives the same
 * node), or -1 with an exception set. */
static int array_node(cj_py_trace *tr, PyObject *obj, int loc)
{
    PyObject *key = PyLong_FromVoidPtr(obj);   /* new ref */
    if (key == NULL)
        return -1;
    PyObject *hit = PyDict_GetItemWithError(tr->array_ids, key);   /* borrowed */
    if (hit != NULL) {
        Py_DECREF(key);
        return (int)PyLong_AsLong(PyTuple_GET_ITEM(hit, 1));
    }
    PyObject *entry = NULL;
    if (PyErr_Occurred())
        goto fail;

    PyArrayObject *a = (PyArrayObject *)obj;
    PyArray_Descr *descr = PyArray_DESCR(a);   /* borrowed */
    /* A non-native byte order of a supported dtype is read through a copy
     * at each call (py_exec.c). */
    PyArray_Descr *native = PyArray_ISNBO(descr->byteorder)
                                ? (Py_INCREF(descr), descr)
                                : PyArray_DescrNewByteorder(descr, NPY_NATIVE);   /* new ref */
    if (native == NULL)
        goto fail;
    cj_dtype dt;
    bool supported = cj_py_dtype_from_descr(native, &dt);
    Py_DECREF(native);
    if (!supported) {
        PyErr_Format(PyExc_TypeError,
                     "unsupported array dtype %S; cjit supports bool, int32, int64, float32 "
                     "and float64",
                     (PyObject *)descr);
        goto fail;
    }
    if (PyArray_NDIM(a) > CJ_MAX_RANK) {
        PyErr_Format(PyExc_ValueError, "array of rank %d is more than cjit's limit of %d",
                     PyArray_NDIM(a), CJ_MAX_RANK);
        goto fail;
    }
    /* The array itself, whatever its layout, so that later in-place changes
     * are seen: each call reads it where it lies, or through a contiguous
     * copy made for that call (py_exec.c, closed_over_data). */
    cj_shape s = {.rank = PyArray_NDIM(a)};
    for (int d = 0; d < s.rank; d++)
        s.dims[d] = PyArray_DIM(a, d);

    cj_error err = {0};
    int id = cj_build_array(tr->graph, &s, dt, loc, &err);
    if (id < 0) {
        cj_py_raise(&err);
        goto fail;
    }
    if (PyList_Append(tr->arrays, obj) < 0)
        goto fail;   /* the node stays, but the trace is unusable: caller gives up */
    entry = Py_BuildValue("(Oi)", obj, id);   /* keeps obj alive: its id stays unique */
    if (entry == NULL || PyDict_SetItem(tr->array_ids, key, entry) < 0)
        goto fail;
    Py_DECREF(entry);
    Py_DECREF(key);
    return id;
fail:
    Py_XDECREF(entry);
    Py_DECREF(key);
    return -1;
}

static PyObject *trace_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, ":Trace", kwlist))
        return NULL;
    cj_py_trace *tr = (cj_py_trace *)type->tp_alloc(type, 0);   /* zeroed, GC-tracked */
    if (tr == NULL)
        return NULL;
    tr->graph = cj_graph_new();
    tr->arrays = PyList_New(0);
    tr->array_ids = PyDict_New();
    if (tr->graph == NULL || tr->arrays == NULL || tr->array_ids == NULL) {
        Py_DECREF(tr);   /* dealloc frees what was made */
        return PyErr_NoMemory();
    }
    return (PyObject *)tr;
}

static int trace_traverse(cj_py_trace *tr, visitproc visit, void *arg)
{
    Py_VISIT(tr->arrays);
    Py_VISIT(tr->array_ids);
    return 0;
}

static int trace_clear(cj_py_trace *tr)
{
    Py_CLEAR(tr->arrays);
    Py_CLEAR(tr->array_ids);
    return 0;
}

static void free_final_locs(cj_py_trace *tr)
{
    for (int i = 0; i < tr->nfinal_locs; i++)
        free(tr->final_locs[i]);
    free(tr->final_locs);
    tr->final_locs = NULL;
    tr->nfinal_locs = 0;
}

static void trace_dealloc(cj_py_trace *tr)
{
    PyObject_GC_UnTrack(tr);
    if (tr->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)tr);
    trace_clear(tr);
    cj_graph_free(tr->graph);
    free_final_locs(tr);
    Py_TYPE(tr)->tp_free((PyObject *)tr);
}

/* Marks tr finished: copies the location strings (for the messages of
 * leaked Tracers) and drops the array references.  The graph itself is
 * left to the caller (moved to a Lowered or freed). */
static void trace_mark_finished(cj_py_trace *tr)
{
    tr->finished = true;
    const cj_graph *g = tr->graph;
    if (g != NULL && g->nlocs > 0) {
        tr->final_locs = calloc((size_t)g->nlocs, sizeof(char *));
        if (tr->final_locs != NULL) {   /* out of memory: messages say "?" */
            tr->nfinal_locs = g->nlocs;
            for (int i = 0; i < g->nlocs; i++)
                tr->final_locs[i] = strdup(g->locs[i]);   /* NULL reads as "?" */
        }
    }
    Py_CLEAR(tr->array_ids);
    Py_CLEAR(tr->arrays);
}

static PyObject *trace_param(cj_py_trace *tr, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"shape", "dtype", "weak", NULL};
    PyObject *shape_obj, *dtype_obj;
    int weak = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|p:param", kwlist, &shape_obj, &dtype_obj,
                                     &weak))
        return NULL;
    if (trace_check_live(tr, "param") < 0)
        return NULL;
    cj_shape s;
    cj_dtype dt;
    if (cj_py_shape_from_obj(shape_obj, &s, "param") < 0
        || cj_py_dtype_from_obj(dtype_obj, &dt, "param") < 0)
        return NULL;
    cj_error err = {0};
    int id = cj_build_param(tr->graph, &s, dt, weak != 0, current_loc(tr->graph), &err);
    if (id < 0)
        return cj_py_raise(&err);
    return tracer_wrap(tr, id);
}

static PyObject *trace_array(cj_py_trace *tr, PyObject *a)
{
    if (trace_check_live(tr, "array") < 0)
        return NULL;
    if (!PyArray_Check(a)) {
        PyErr_Format(PyExc_TypeError, "Trace.array: expected a numpy.ndarray, got %.200s",
                     Py_TYPE(a)->tp_name);
        return NULL;
    }
    int id = array_node(tr, a, current_loc(tr->graph));
    if (id < 0)
        return NULL;
    return tracer_wrap(tr, id);
}

/* ---- Trace.apply: attributes ---------------------------------------------------- */

enum {
    A_SHAPE = 1 << 0, A_PERM = 1 << 1, A_START = 1 << 2, A_STOP = 1 << 3, A_STEP = 1 << 4,
    A_AXIS = 1 << 5, A_AXES = 1 << 6, A_DTYPE = 1 << 7, A_VALUE = 1 << 8, A_WEAK = 1 << 9,
    A_NAME = 1 << 10,
};
static const char *const attr_names[] = {"shape", "perm", "start", "stop", "step", "axis",
                                         "axes", "dtype", "value", "weak", "name"};
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
    CJ_ATTR_AXES, CJ_ATTR_DTYPE, CJ_ATTR_FVALUE, CJ_ATTR_WEAK, CJ_ATTR_NAME,
};

/* The keywords op accepts: those of the attributes it uses (ops.def).  Ops
 * with a slot (PARAM, ARRAY) take none: Trace.param and Trace.array make them. */
static unsigned attrs_allowed(cj_op op)
{
    unsigned used = cj_op_attrs(op), allowed = 0;
    if (used & CJ_ATTR_INDEX)
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
    case CJ_KIND_INT:
        if (value_is_float) {
            double d = PyFloat_AsDouble(value);
            if (d == -1.0 && PyErr_Occurred())
                return -1;
            if (!(d > -9.3e18 && d < 9.3e18)) {   /* also catches nan */
                PyErr_Format(PyExc_ValueError, "apply('constant'): %R cannot be converted to %s",
                             value, cj_dtype_name(dt));
                return -1;
            }
            i = (int64_t)d;   /* truncates, as NumPy's astype does */
        } else if (attr_int64(value, &i, "constant", "value") < 0) {
            return -1;
        }
        if ((dt == CJ_INT32 && (i < INT32_MIN || i > INT32_MAX)) ||
            (dt == CJ_UINT32 && (i < 0 || i > (int64_t)UINT32_MAX))) {
            PyErr_Format(PyExc_OverflowError, "apply('constant'): Python integer %R out of bounds "
                         "for %s", value, cj_dtype_name(dt));
            return -1;
        }
        f = (double)i;
        break;
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
    case CJ_OPKIND_MATMUL:
        id = cj_build_matmul(g, xs[0], xs[1], loc, &err);
        break;
    case CJ_OPKIND_REGION:
        PyErr_Format(PyExc_TypeError, "apply('%s'): control flow is built by cjit.lax, not by apply", opname);
        return -1;
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
static PyObject *trace_apply(cj_py_trace *tr, PyObject *args, PyObject *kwargs)
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

/* Trace.finish(outputs) -> Lowered */
static PyObject *trace_finish(cj_py_trace *tr, PyObject *outputs)
{
    if (trace_check_live(tr, "finish") < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(outputs, "Trace.finish: outputs must be a sequence of traced values");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int *ids = NULL;
    PyObject *result = NULL;
    if (n > INT32_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "Trace.finish: too many outputs");
        goto done;
    }
    ids = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    if (ids == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);   /* borrowed */
        if (!Tracer_Check(o)) {
            PyErr_Format(PyExc_TypeError, "Trace.finish: output %zd has type %.200s, not a "
                         "traced value", i, Py_TYPE(o)->tp_name);
            goto done;
        }
        cj_py_tracer *t = (cj_py_tracer *)o;
        if (t->trace != tr) {
            /* Returning a value leaked from an earlier trace is the common case. */
            if (t->trace->finished) {
                leak_error(t);
            } else {
                char d[1400];
                tracer_describe(t, d, sizeof d);
                PyErr_Format(PyExc_TypeError, "Trace.finish: output %zd, the %s, belongs to "
                             "another trace", i, d);
            }
            goto done;
        }
        ids[i] = ((cj_py_tracer *)o)->id;
    }
    cj_error err = {0};
    if (cj_graph_set_outputs(tr->graph, ids, (int)n, &err) != CJ_OK) {
        cj_py_raise(&err);
        goto done;
    }
    PyObject *arrays = Py_NewRef(tr->arrays);
    cj_graph *g = tr->graph;
    trace_mark_finished(tr);
    tr->graph = NULL;
    result = cj_py_lowered_new(g, arrays);   /* owns g from here on, even on failure */
    Py_DECREF(arrays);
done:
    PyMem_Free(ids);
    Py_DECREF(seq);
    return result;
}

/* Trace.finish_error() -> None; a no-op when already finished. */
static PyObject *trace_finish_error(cj_py_trace *tr, PyObject *unused)
{
    (void)unused;
    if (!tr->finished) {
        trace_mark_finished(tr);
        cj_graph_free(tr->graph);
        tr->graph = NULL;
    }
    Py_RETURN_NONE;
}

/* Collects the node ids of a sequence of Tracers of `tr` into a new
 * PyMem array (*ids, caller frees); returns the count or -1 with an
 * exception set. */
static Py_ssize_t tracer_ids(cj_py_trace *tr, PyObject *obj, const char *what, int **ids)
{
    PyObject *seq = PySequence_Fast(obj, "Trace: expected a sequence of traced values");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    *ids = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    if (*ids == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i); /* borrowed */
        if (!Tracer_Check(o) || ((cj_py_tracer *)o)->trace != tr) {
            PyErr_Format(PyExc_TypeError, "Trace: %s %zd is not a traced value of this trace", what, i);
            PyMem_Free(*ids);
            *ids = NULL;
            Py_DECREF(seq);
            return -1;
        }
        (*ids)[i] = ((cj_py_tracer *)o)->id;
    }
    Py_DECREF(seq);
    return n;
}

/* Trace.mark() -> int: the id the next node will get (see Trace.vjp). */
static PyObject *trace_mark(cj_py_trace *tr, PyObject *unused)
{
    (void)unused;
    if (trace_check_live(tr, "mark") < 0)
        return NULL;
    return PyLong_FromLong(tr->graph->nnodes);
}

/* Reads a chain schedule (bounds, keep, stores) as Trace.vjp takes it:
 * node ids, one truth value per bound, and (layer, position) pairs; the
 * arrays are PyMem_Malloc'd into one block at s->bound.  Returns 0, or -1
 * with an exception set. */
static int chain_schedule_from(PyObject *obj, cj_chain_schedule *s)
{
    PyObject *bounds_obj, *keep_obj, *stores_obj;
    if (!PyTuple_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "Trace.vjp: chain must be a tuple (bounds, keep, stores), got %s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (!PyArg_ParseTuple(obj, "OOO;Trace.vjp: chain must be (bounds, keep, stores)",
                          &bounds_obj, &keep_obj, &stores_obj))
        return -1;
    PyObject *bounds = PySequence_Fast(bounds_obj, "Trace.vjp: chain bounds must be a sequence");
    PyObject *keep = bounds ? PySequence_Fast(keep_obj, "Trace.vjp: chain keep must be a sequence") : NULL;
    PyObject *stores = keep ? PySequence_Fast(stores_obj, "Trace.vjp: chain stores must be a sequence") : NULL;
    int rc = -1;
    if (stores == NULL)
        goto done;
    Py_ssize_t nb = PySequence_Fast_GET_SIZE(bounds), ns = PySequence_Fast_GET_SIZE(stores);
    if (nb < 2 || PySequence_Fast_GET_SIZE(keep) != nb || nb > INT_MAX / 4 || ns > INT_MAX / 4) {
        PyErr_SetString(PyExc_ValueError, "Trace.vjp: a chain needs two bounds or more and one keep flag per bound");
        goto done;
    }
    int *ints = PyMem_Malloc(sizeof(int) * (size_t)(nb + 2 * ns + 1) + sizeof(bool) * (size_t)nb);
    if (ints == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    bool *flags = (bool *)(ints + nb + 2 * ns + 1);
    *s = (cj_chain_schedule){.nlayers = (int)nb - 1, .bound = ints, .keep = flags, .nstores = (int)ns,
                             .store_before = ints + nb, .store_at = ints + nb + ns};
    for (Py_ssize_t i = 0; i < nb; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(bounds, i));
        int truth = PyObject_IsTrue(PySequence_Fast_GET_ITEM(keep, i));
        if ((v == -1 && PyErr_Occurred()) || truth < 0)
            goto bad;
        ints[i] = v < INT_MIN || v > INT_MAX ? -1 : (int)v;
        flags[i] = truth;
    }
    for (Py_ssize_t k = 0; k < ns; k++) {
        int layer, pos;
        PyObject *item = PySequence_Fast_GET_ITEM(stores, k);
        if (!PyTuple_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "Trace.vjp: a chain store is a tuple (layer, position)");
            goto bad;
        }
        if (!PyArg_ParseTuple(item, "ii;Trace.vjp: a chain store is (layer, position)", &layer, &pos))
            goto bad;
        ints[nb + k] = layer;
        ints[nb + ns + k] = pos;
    }
    rc = 0;
    goto done;
bad:
    PyMem_Free(ints);
done:
    Py_XDECREF(bounds);
    Py_XDECREF(keep);
    Py_XDECREF(stores);
    return rc;
}

/* Trace.vjp(outputs, cotangents, wrt, first, chain=None) -> list of
 * Tracers: appends the reverse-mode gradient (csrc/autodiff.c); nodes older
 * than `first` are constants.  `chain` is a binomial checkpointing schedule
 * (memory_budget's; see cj_chain_schedule). */
static PyObject *trace_vjp(cj_py_trace *tr, PyObject *args)
{
    PyObject *outs_obj, *cts_obj, *wrt_obj, *chain_obj = Py_None;
    int first;
    if (!PyArg_ParseTuple(args, "OOOi|O:vjp", &outs_obj, &cts_obj, &wrt_obj, &first, &chain_obj))
        return NULL;
    if (trace_check_live(tr, "vjp") < 0)
        return NULL;
    int *outs = NULL, *cts = NULL, *wrt = NULL, *grads = NULL;
    cj_chain_schedule chain = {0};
    bool has_chain = false;
    PyObject *result = NULL;
    Py_ssize_t nouts = tracer_ids(tr, outs_obj, "output", &outs);
    Py_ssize_t ncts = nouts < 0 ? -1 : tracer_ids(tr, cts_obj, "cotangent", &cts);
    Py_ssize_t nwrt = ncts < 0 ? -1 : tracer_ids(tr, wrt_obj, "input", &wrt);
    if (nwrt < 0)
        goto done;
    if (ncts != nouts) {
        PyErr_Format(PyExc_ValueError, "Trace.vjp: %zd outputs but %zd cotangents", nouts, ncts);
        goto done;
    }
    grads = PyMem_Malloc((size_t)(nwrt > 0 ? nwrt : 1) * sizeof(int));
    if (grads == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (chain_obj != Py_None) {
        if (chain_schedule_from(chain_obj, &chain) < 0)
            goto done;
        has_chain = true;
    }
    cj_error err = {0};
    if (cj_autodiff_vjp_scheduled(tr->graph, first, outs, cts, (int)nouts, wrt, (int)nwrt, grads,
                                  has_chain ? &chain : NULL, &err) != CJ_OK) {
        cj_py_raise(&err);
        goto done;
    }
    result = PyList_New(nwrt);
    for (Py_ssize_t i = 0; result != NULL && i < nwrt; i++) {
        PyObject *t = tracer_wrap(tr, grads[i]);
        if (t == NULL)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, i, t); /* steals t */
    }
done:
    PyMem_Free(outs);
    PyMem_Free(cts);
    PyMem_Free(wrt);
    PyMem_Free(grads);
    if (has_chain)
        PyMem_Free((void *)chain.bound);
    return result;
}

/* A list of Tracers for ids, None where an id is -1. */
static PyObject *tracer_list(cj_py_trace *tr, const int *ids, Py_ssize_t n)
{
    PyObject *result = PyList_New(n);
    for (Py_ssize_t i = 0; result != NULL && i < n; i++) {
        PyObject *t = ids[i] >= 0 ? tracer_wrap(tr, ids[i]) : Py_NewRef(Py_None);
        if (t == NULL)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, i, t); /* steals t */
    }
    return result;
}

/* Trace.jvp(wrt, tangents, outputs, first) -> list of Tracers (None for a
 * zero tangent): appends the forward-mode tangents (csrc/jvp.c); nodes older
 * than `first` are constants. */
static PyObject *trace_jvp(cj_py_trace *tr, PyObject *args)
{
    PyObject *wrt_obj, *tan_obj, *outs_obj;
    int first;
    if (!PyArg_ParseTuple(args, "OOOi:jvp", &wrt_obj, &tan_obj, &outs_obj, &first))
        return NULL;
    if (trace_check_live(tr, "jvp") < 0)
        return NULL;
    int *wrt = NULL, *tans = NULL, *outs = NULL, *res = NULL;
    PyObject *result = NULL;
    Py_ssize_t nwrt = tracer_ids(tr, wrt_obj, "input", &wrt);
    Py_ssize_t ntan = nwrt < 0 ? -1 : tracer_ids(tr, tan_obj, "tangent", &tans);
    Py_ssize_t nouts = ntan < 0 ? -1 : tracer_ids(tr, outs_obj, "output", &outs);
    if (nouts < 0)
        goto done;
    if (ntan != nwrt) {
        PyErr_Format(PyExc_ValueError, "Trace.jvp: %zd inputs but %zd tangents", nwrt, ntan);
        goto done;
    }
    res = PyMem_Malloc((size_t)(nouts > 0 ? nouts : 1) * sizeof(int));
    if (res == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    cj_error err = {0};
    if (cj_jvp(tr->graph, first, wrt, tans, (int)nwrt, outs, (int)nouts, res, &err) != CJ_OK) {
        cj_py_raise(&err);
        goto done;
    }
    result = tracer_list(tr, res, nouts);
done:
    PyMem_Free(wrt);
    PyMem_Free(tans);
    PyMem_Free(outs);
    PyMem_Free(res);
    return result;
}

/* Trace.batch(placeholders, batched, size, outputs, first) -> list of
 * Tracers (None for an output that does not depend on the batched inputs):
 * appends a copy of the nodes since `first` with a leading batch dimension
 * of `size`, where placeholders[i] (a per-example node) stands for
 * batched[i] (its batch dimension in front); csrc/batching.c. */
static PyObject *trace_batch(cj_py_trace *tr, PyObject *args)
{
    PyObject *ph_obj, *bat_obj, *outs_obj;
    long long size;
    int first;
    if (!PyArg_ParseTuple(args, "OOLOi:batch", &ph_obj, &bat_obj, &size, &outs_obj, &first))
        return NULL;
    if (trace_check_live(tr, "batch") < 0)
        return NULL;
    int *ph = NULL, *bat = NULL, *outs = NULL, *res = NULL;
    PyObject *result = NULL;
    Py_ssize_t nph = tracer_ids(tr, ph_obj, "placeholder", &ph);
    Py_ssize_t nbat = nph < 0 ? -1 : tracer_ids(tr, bat_obj, "batched input", &bat);
    Py_ssize_t nouts = nbat < 0 ? -1 : tracer_ids(tr, outs_obj, "output", &outs);
    if (nouts < 0)
        goto done;
    if (nph != nbat) {
        PyErr_Format(PyExc_ValueError, "Trace.batch: %zd placeholders but %zd batched inputs", nph, nbat);
        goto done;
    }
    res = PyMem_Malloc((size_t)(nouts > 0 ? nouts : 1) * sizeof(int));
    if (res == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    cj_error err = {0};
    if (cj_batch(tr->graph, first, ph, bat, (int)nph, (int64_t)size, outs, (int)nouts, res, &err) != CJ_OK) {
        cj_py_raise(&err);
        goto done;
    }
    result = tracer_list(tr, res, nouts);
done:
    PyMem_Free(ph);
    PyMem_Free(bat);
    PyMem_Free(outs);
    PyMem_Free(res);
    return result;
}

/* The checkpoint policies by the names cjit.checkpoint_policies uses. */
static const struct {
    const char *name;
    cj_save_policy policy;
} save_policies[] = {
    {"nothing_saveable", CJ_SAVE_NOTHING},
    {"everything_saveable", CJ_SAVE_EVERYTHING},
    {"dots_saveable", CJ_SAVE_DOTS},
    {"save_only_these_names", CJ_SAVE_ONLY_NAMES},
    {"save_anything_except_these_names", CJ_SAVE_ALL_EXCEPT_NAMES},
};

/* Trace.region_begin(policy, names) -> int: opens a checkpoint region
 * (policy: a name of save_policies, names: a sequence of str). */
static PyObject *trace_region_begin(cj_py_trace *tr, PyObject *args)
{
    const char *policy_name;
    PyObject *names_obj;
    if (!PyArg_ParseTuple(args, "sO:region_begin", &policy_name, &names_obj))
        return NULL;
    if (trace_check_live(tr, "region_begin") < 0)
        return NULL;
    int policy = -1;
    for (size_t i = 0; i < sizeof save_policies / sizeof *save_policies; i++)
        if (strcmp(save_policies[i].name, policy_name) == 0)
            policy = (int)save_policies[i].policy;
    if (policy < 0) {
        PyErr_Format(PyExc_ValueError, "checkpoint: unknown policy '%s'", policy_name);
        return NULL;
    }
    PyObject *seq = PySequence_Fast(names_obj, "checkpoint: names must be a sequence of str");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    const char **names = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(char *));
    PyObject *result = NULL;
    if (names == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i); /* borrowed */
        if (!PyUnicode_Check(o)) {
            PyErr_SetString(PyExc_TypeError, "checkpoint: names must be str");
            goto done;
        }
        if ((names[i] = PyUnicode_AsUTF8(o)) == NULL) /* owned by o, alive while seq is */
            goto done;
    }
    cj_error err = {0};
    int id = cj_graph_region_begin(tr->graph, (cj_save_policy)policy, names, (int)n, &err);
    result = id < 0 ? cj_py_raise(&err) : PyLong_FromLong(id);
done:
    PyMem_Free(names);
    Py_DECREF(seq);
    return result;
}

/* Trace.region_end(id) -> None */
static PyObject *trace_region_end(cj_py_trace *tr, PyObject *arg)
{
    long id = PyLong_AsLong(arg);
    if (id == -1 && PyErr_Occurred())
        return NULL;
    if (!tr->finished && tr->graph != NULL)
        cj_graph_region_end(tr->graph, (int)id);
    Py_RETURN_NONE;
}

/* Trace.force_remat(ids) -> None: these forward nodes are recomputed by
 * every later vjp instead of kept (memory_budget's choice). */
static PyObject *trace_force_remat(cj_py_trace *tr, PyObject *ids)
{
    if (trace_check_live(tr, "force_remat") < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(ids, "force_remat: expected a sequence of node ids");
    if (seq == NULL)
        return NULL;
    cj_graph *g = tr->graph;
    bool *flags = calloc((size_t)g->nnodes + 1, sizeof(bool));
    if (flags == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        long id = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (id == -1 && PyErr_Occurred()) {
            free(flags);
            Py_DECREF(seq);
            return NULL;
        }
        if (id >= 0 && id < g->nnodes)
            flags[id] = true;
    }
    Py_DECREF(seq);
    free(g->force_remat);
    g->force_remat = flags;
    g->nforce_remat = g->nnodes;
    Py_RETURN_NONE;
}

static PyMethodDef trace_methods[] = {
    {"param", (PyCFunction)(void (*)(void))trace_param, METH_VARARGS | METH_KEYWORDS,
     "param($self, /, shape, dtype, weak=False)\n--\n\nAdds the next positional parameter."},
    {"array", (PyCFunction)trace_array, METH_O,
     "array($self, a, /)\n--\n\nA closed-over array, kept by reference."},
    {"apply", (PyCFunction)(void (*)(void))trace_apply, METH_VARARGS | METH_KEYWORDS,
     "apply($self, op, /, *args, **attrs)\n--\n\nAppends one primitive."},
    {"finish", (PyCFunction)trace_finish, METH_O,
     "finish($self, outputs, /)\n--\n\nEnds the trace; returns a Lowered."},
    {"region_begin", (PyCFunction)trace_region_begin, METH_VARARGS,
     "region_begin($self, policy, names, /)\n--\n\nOpens a checkpoint region."},
    {"region_end", (PyCFunction)trace_region_end, METH_O,
     "region_end($self, id, /)\n--\n\nCloses a checkpoint region."},
    {"force_remat", (PyCFunction)trace_force_remat, METH_O,
     "force_remat($self, ids, /)\n--\n\nRecompute these forward nodes in later vjps."},
    {"mark", (PyCFunction)trace_mark, METH_NOARGS,
     "mark($self, /)\n--\n\nThe id the next node will get."},
    {"vjp", (PyCFunction)trace_vjp, METH_VARARGS,
     "vjp($self, outputs, cotangents, wrt, first, chain=None, /)\n--\n\nAppends the reverse-mode gradient."},
    {"jvp", (PyCFunction)trace_jvp, METH_VARARGS,
     "jvp($self, wrt, tangents, outputs, first, /)\n--\n\nAppends the forward-mode tangents."},
    {"batch", (PyCFunction)trace_batch, METH_VARARGS,
     "batch($self, placeholders, batched, size, outputs, first, /)\n--\n\nAppends a batched copy."},
    {"finish_error", (PyCFunction)trace_finish_error, METH_NOARGS,
     "finish_error($self, /)\n--\n\nEnds the trace without outputs."},
    {NULL, NULL, 0, NULL},
};

static PyObject *trace_get_finished(cj_py_trace *tr, void *closure)
{
    (void)closure;
    return PyBool_FromLong(tr->finished);
}

static PyGetSetDef trace_getset[] = {
    {"finished", (getter)trace_get_finished, NULL, "True once finish() or finish_error() ran.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject cj_py_TraceType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cjit._cjit.Trace",
    .tp_basicsize = sizeof(cj_py_trace),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Trace()\n--\n\nOne graph being recorded.  Not thread-safe; one per trace.",
    .tp_new = trace_new,
    .tp_dealloc = (destructor)trace_dealloc,
    .tp_traverse = (traverseproc)trace_traverse,
    .tp_clear = (inquiry)trace_clear,
    .tp_weaklistoffset = offsetof(cj_py_trace, weakrefs),
    .tp_methods = trace_methods,
    .tp_getset = trace_getset,
};

/* ---- Tracer: operators ------------------------------------------------------------- */

/* Returns the tracer of a binary slot: whichever operand is one. */
static cj_py_tracer *pick_tracer(PyObject *a, PyObject *b)
{
    return (cj_py_tracer *)(Tracer_Check(a) ? a : b);
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
    if (op == CJ_OP_SHIFT_RIGHT_ARITHMETIC && cj_promote(nx->dtype, nx->weak, ny->dtype, ny->weak, NULL) == CJ_UINT32)
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

static int tracer_bool(PyObject *self)
{
    cj_py_tracer *t = (cj_py_tracer *)self;
    if (t->trace->finished)
        leak_error(t);
    else
        concretization_error(t, "bool() (an if, while, and, or, not)");
    return -1;
}

static PyObject *tracer_concrete(PyObject *self, const char *what)
{
    cj_py_tracer *t = (cj_py_tracer *)self;
    if (t->trace->finished)
        return leak_error(t);
    return concretization_error(t, what);
}

static PyObject *tracer_int(PyObject *self) { return tracer_concrete(self, "int()"); }
static PyObject *tracer_float(PyObject *self) { return tracer_concrete(self, "float()"); }
static PyObject *tracer_index(PyObject *self)
{
    return tracer_concrete(self, "using a traced value as an index (__index__)");
}

/* x % y and divmod(x, y), either operand traced: NumPy's remainder (the
 * sign of y) as cjit.numpy composes it, operands in the order written. */
static PyObject *call_cnp(const char *name, PyObject *args, PyObject *kwargs);
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

static PyObject *tracer_m_array(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)args;
    (void)kwargs;
    return tracer_concrete(self, "conversion to a NumPy array (np.asarray, np.array)");
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
                 "(build a new value instead, e.g. with cjit.numpy.where or concatenate)",
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

static PyGetSetDef tracer_getset[] = {
    {"shape", (getter)tracer_get_shape, NULL, "tuple of ints", NULL},
    {"dtype", (getter)tracer_get_dtype, NULL, "numpy.dtype", NULL},
    {"ndim", (getter)tracer_get_ndim, NULL, "number of dimensions", NULL},
    {"size", (getter)tracer_get_size, NULL, "number of elements", NULL},
    {"weak", (getter)tracer_get_weak, NULL, "a weakly typed (Python scalar) value", NULL},
    {"trace", (getter)tracer_get_trace, NULL, "the Trace this value belongs to", NULL},
    {"T", (getter)tracer_get_T, NULL, "transpose (reversed axes)", NULL},
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

PyTypeObject cj_py_TracerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cjit._cjit.Tracer",
    .tp_basicsize = sizeof(cj_py_tracer),
    /* No Py_TPFLAGS_HAVE_GC: a Tracer refers only to its Trace, which never
     * refers back, so Tracers cannot be part of a cycle. */
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A traced value (see _cjit.pyi).",
    .tp_dealloc = (destructor)tracer_dealloc,
    .tp_repr = (reprfunc)tracer_repr,
    .tp_as_number = &tracer_as_number,
    .tp_as_mapping = &tracer_as_mapping,
    .tp_hash = PyObject_HashNotImplemented,
    .tp_richcompare = tracer_richcompare,
    .tp_iter = tracer_iter,
    .tp_methods = tracer_methods,
    .tp_getset = tracer_getset,
};

/* Readies the types, sets Tracer's class attributes for NumPy and adds
 * both types to m.  Returns 0, or -1 with an exception set. */
int cj_py_tracer_init(PyObject *m)
{
    if (PyType_Ready(&cj_py_TraceType) < 0 || PyType_Ready(&cj_py_TracerType) < 0)
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
    if (PyModule_AddObjectRef(m, "Trace", (PyObject *)&cj_py_TraceType) < 0
        || PyModule_AddObjectRef(m, "Tracer", (PyObject *)&cj_py_TracerType) < 0)
        return -1;
    return 0;
}
