/* py_trace.c - the Trace type: one graph being recorded from Python.  It
 * turns operands (Tracers, Python and NumPy scalars, closed-over arrays)
 * into nodes, makes parameters, and at finish hands the graph to a Lowered.
 * Trace.apply is py_trace_apply.c; vjp, jvp, batch and checkpoint regions
 * are py_trace_ad.c; the Tracer type is py_tracer.c. */
#include "py_trace.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
