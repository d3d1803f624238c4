/* py_operand.c - traced values in and out of a Trace: operands (Tracers,
 * Python and NumPy scalars, closed-over arrays) made nodes, nodes made
 * Tracers, a Tracer described and its leak reported, and the user's source
 * line.  The Tracer type's storage is here, since this file makes
 * Tracers; its behaviour (operators, methods) is py_tracer.c's, attached
 * when the module starts.  It uses no other file of tracing, so the Trace
 * and the Tracer types, and the Trace's methods, all stand above it. */
#include "py_trace.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A traced value: the slots below, the rest at module init (py_tracer.c). */
PyTypeObject cj_py_TracerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cjit._cjit.Tracer",
    .tp_basicsize = sizeof(cj_py_tracer),
    /* No Py_TPFLAGS_HAVE_GC: a Tracer refers only to its Trace, which never
     * refers back, so Tracers cannot be part of a cycle. */
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A traced value (see _cjit.pyi).",
    .tp_hash = PyObject_HashNotImplemented,
};

/* ---- Tracer helpers --------------------------------------------------------- */

/* A new Tracer for node id of the live trace tr. */
PyObject *tracer_wrap(cj_py_trace *tr, int id)
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
void tracer_describe(const cj_py_tracer *t, char *buf, size_t n)
{
    char aval[200];
    cj_py_aval_str(t->dtype, &t->shape, aval, sizeof aval);
    snprintf(buf, n, "%s traced value created at %s", aval, tracer_loc_str(t));
}

/* Raises TracerLeakError for t; returns NULL. */
PyObject *leak_error(const cj_py_tracer *t)
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

/* ---- source locations ----------------------------------------------------- */

/* The location id of the innermost Python frame outside the cjit package
 * (the user's file:line), interned in g; -1 if there is none.  Never
 * leaves an exception set. */
int current_loc(cj_graph *g)
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

/* ---- converting operands ------------------------------------------------------ */

/* True when operand_node can convert obj (no exception is ever set). */
bool convertible(PyObject *obj)
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
                     "%s: unsupported NumPy scalar of dtype %S; cjit supports " CJ_DTYPE_NAMES_TEXT,
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
        npy_uint64 u64;
        npy_int8 i8;
        npy_int16 i16;
        npy_uint8 u8;
        npy_uint16 u16;
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
    case CJ_INT8:
        return scalar_node(tr, dt, (double)v.i8, v.i8, false, loc);
    case CJ_INT16:
        return scalar_node(tr, dt, (double)v.i16, v.i16, false, loc);
    case CJ_UINT8:
        return scalar_node(tr, dt, (double)v.u8, (int64_t)v.u8, false, loc);
    case CJ_UINT16:
        return scalar_node(tr, dt, (double)v.u16, (int64_t)v.u16, false, loc);
    case CJ_UINT64:
        return scalar_node(tr, dt, (double)v.u64, (int64_t)v.u64, false, loc);
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


/* Converts one operand of `opname` for the live trace tr.  Returns the
 * node id, -1 with an exception set, or -2 (no exception) when obj has a
 * type that cannot be converted (see convertible()). */
int operand_node(cj_py_trace *tr, PyObject *obj, const char *opname, int loc)
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
        if (overflow > 0) {
            /* 2**63 to 2**64 - 1: a weak uint64, which only an unsigned or
             * float dtype can take in (graph.c's coerce) */
            unsigned long long u = PyLong_AsUnsignedLongLong(obj);
            if (u == (unsigned long long)-1 && PyErr_Occurred()) {
                PyErr_Clear();
                PyErr_Format(PyExc_OverflowError, "%s: Python int %R is too large for uint64", opname, obj);
                return -1;
            }
            return scalar_node(tr, CJ_UINT64, (double)u, (int64_t)u, true, loc);
        }
        if (overflow) {
            PyErr_Format(PyExc_OverflowError, "%s: Python int %R is too small for int64", opname, obj);
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
int operand_node_strict(cj_py_trace *tr, PyObject *obj, const char *opname, int loc)
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
int trace_check_live(cj_py_trace *tr, const char *method)
{
    if (tr->finished) {
        PyErr_Format(PyExc_RuntimeError, "Trace.%s: this trace has already finished", method);
        return -1;
    }
    return 0;
}

/* The node of a closed-over array (the same object twice gives the same
 * node), or -1 with an exception set. */
int array_node(cj_py_trace *tr, PyObject *obj, int loc)
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
                     "unsupported array dtype %S; cjit supports " CJ_DTYPE_NAMES_TEXT,
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
     * copy made for that call (py_exec_args.c, closed_over_data). */
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
