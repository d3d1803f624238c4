/* py_trace.c - the Trace type: one graph being recorded from Python.  It
 * makes parameters, and at finish hands the graph to a Lowered.  Operands
 * become nodes in py_operand.c; Trace.apply is py_trace_apply.c; vjp, jvp,
 * batch and checkpoint regions are py_trace_ad.c; the Tracer type is
 * py_tracer.c. */
#include "py_trace.h"
#include "regions.h"   /* cj_graph_copy */

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Trace(budget=None, candidate=None): `budget`, a MemoryBudget whose
 * search has started, makes this trace one of its retraces, following
 * `candidate` (py_glue.h, cj_py_budget_propose). */
static PyObject *trace_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"budget", "candidate", NULL};
    PyObject *budget = Py_None, *candidate = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:Trace", kwlist, &budget, &candidate))
        return NULL;
    if (budget != Py_None && (!PyObject_TypeCheck(budget, &cj_py_MemoryBudgetType)
                              || !cj_py_budget_searching(budget))) {
        PyErr_SetString(PyExc_TypeError, "Trace: budget must be a MemoryBudget whose search has started, or None");
        return NULL;
    }
    if (candidate != Py_None && (budget == Py_None || cj_py_budget_propose(budget, candidate) < 0)) {
        if (budget == Py_None)
            PyErr_SetString(PyExc_TypeError, "Trace: a candidate needs the budget it is tried for");
        return NULL;
    }
    cj_py_trace *tr = (cj_py_trace *)type->tp_alloc(type, 0);   /* zeroed, GC-tracked */
    if (tr == NULL)
        return NULL;
    tr->budget = budget == Py_None ? NULL : Py_NewRef(budget);
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
    Py_VISIT(tr->concrete);
    Py_VISIT(tr->budget);
    return 0;
}

static int trace_clear(cj_py_trace *tr)
{
    Py_CLEAR(tr->arrays);
    Py_CLEAR(tr->array_ids);
    Py_CLEAR(tr->concrete);
    Py_CLEAR(tr->budget);
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
    Py_CLEAR(tr->concrete);   /* a leaked Tracer must not keep the inputs' values alive */
    Py_CLEAR(tr->budget);
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
    PyObject *budget = tr->budget;   /* ours now */
    tr->budget = NULL;
    cj_graph *g = tr->graph;
    trace_mark_finished(tr);
    tr->graph = NULL;
    result = cj_py_lowered_new(g, arrays);   /* owns g from here on, even on failure */
    Py_DECREF(arrays);
    /* memory_budget: a retrace's plan is measured into its search; a budget
     * asked for while tracing goes with the Lowered to the jitted function */
    if (result != NULL && budget != NULL) {
        if (!cj_py_budget_searching(budget))
            cj_py_lowered_set_budget(result, budget);
        else if (cj_py_budget_record(budget, result) < 0)
            Py_CLEAR(result);
    }
    Py_XDECREF(budget);
done:
    PyMem_Free(ids);
    Py_DECREF(seq);
    return result;
}

/* The node ids of a sequence of this trace's Tracers, PyMem_Malloc'd (one
 * entry at least), or NULL with an exception naming `method`. */
static int *own_tracer_ids(cj_py_trace *tr, PyObject *seq_obj, Py_ssize_t *n, const char *method)
{
    PyObject *seq = PySequence_Fast(seq_obj, "expected a sequence of traced values");
    if (seq == NULL)
        return NULL;
    *n = PySequence_Fast_GET_SIZE(seq);
    int *ids = *n < INT32_MAX / 2 ? PyMem_Malloc((size_t)(*n > 0 ? *n : 1) * sizeof(int)) : NULL;
    if (ids == NULL) {
        Py_DECREF(seq);
        return (int *)PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        if (!Tracer_Check(o) || ((cj_py_tracer *)o)->trace != tr) {
            PyErr_Format(PyExc_TypeError, "Trace.%s: item %zd is not a traced value of this trace",
                         method, i);
            PyMem_Free(ids);
            Py_DECREF(seq);
            return NULL;
        }
        ids[i] = ((cj_py_tracer *)o)->id;
    }
    Py_DECREF(seq);
    return ids;
}

/* Trace.snapshot(outputs) -> Lowered of a copy of the graph so far with
 * these outputs; the trace goes on.  Used to evaluate a value while
 * tracing, when every input of the trace is concrete (Trace.concrete). */
static PyObject *trace_snapshot(cj_py_trace *tr, PyObject *outputs)
{
    if (trace_check_live(tr, "snapshot") < 0)
        return NULL;
    Py_ssize_t n;
    int *ids = own_tracer_ids(tr, outputs, &n, "snapshot");
    if (ids == NULL)
        return NULL;
    cj_error err = {0};
    cj_graph *g = cj_graph_copy(tr->graph, &err);
    if (g == NULL || cj_graph_set_outputs(g, ids, (int)n, &err) != CJ_OK) {
        PyMem_Free(ids);
        cj_graph_free(g);
        return cj_py_raise(&err);
    }
    PyMem_Free(ids);
    /* the trace may close over more arrays later: the copy keeps its own list */
    PyObject *arrays = PyList_GetSlice(tr->arrays, 0, PyList_GET_SIZE(tr->arrays));
    if (arrays == NULL) {
        cj_graph_free(g);
        return NULL;
    }
    PyObject *result = cj_py_lowered_new(g, arrays);   /* owns g, even on failure */
    Py_DECREF(arrays);
    return result;
}

/* Trace.depends(value, sources) -> bool: whether the value reads any of
 * the sources (directly or through other nodes). */
static PyObject *trace_depends(cj_py_trace *tr, PyObject *args)
{
    PyObject *value, *sources;
    if (!PyArg_ParseTuple(args, "O!O:depends", &cj_py_TracerType, &value, &sources))
        return NULL;
    if (trace_check_live(tr, "depends") < 0)
        return NULL;
    if (((cj_py_tracer *)value)->trace != tr) {
        PyErr_SetString(PyExc_TypeError, "Trace.depends: the value belongs to another trace");
        return NULL;
    }
    Py_ssize_t n;
    int *src = own_tracer_ids(tr, sources, &n, "depends");
    if (src == NULL)
        return NULL;
    int top = ((cj_py_tracer *)value)->id;
    /* mark[i]: node i is read by `value` (walk down: inputs have smaller ids) */
    char *mark = PyMem_Calloc((size_t)top + 1, 1);
    if (mark == NULL) {
        PyMem_Free(src);
        return PyErr_NoMemory();
    }
    mark[top] = 1;
    for (int i = top; i >= 0; i--) {
        if (!mark[i])
            continue;
        const cj_node *nd = &tr->graph->nodes[i];
        for (int k = 0; k < nd->ninputs; k++)
            mark[nd->inputs[k]] = 1;
    }
    bool found = false;
    for (Py_ssize_t k = 0; k < n && !found; k++)
        found = src[k] <= top && mark[src[k]];
    PyMem_Free(mark);
    PyMem_Free(src);
    return PyBool_FromLong(found);
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
    {"mark", (PyCFunction)trace_mark, METH_NOARGS,
     "mark($self, /)\n--\n\nThe id the next node will get."},
    {"vjp", (PyCFunction)trace_vjp, METH_VARARGS,
     "vjp($self, outputs, cotangents, wrt, first, chain=None, /)\n--\n\nAppends the reverse-mode gradient."},
    {"jvp", (PyCFunction)trace_jvp, METH_VARARGS,
     "jvp($self, wrt, tangents, outputs, first, /)\n--\n\nAppends the forward-mode tangents."},
    {"batch", (PyCFunction)trace_batch, METH_VARARGS,
     "batch($self, placeholders, batched, size, outputs, first, /)\n--\n\nAppends a batched copy."},
    {"snapshot", (PyCFunction)trace_snapshot, METH_O,
     "snapshot($self, outputs, /)\n--\n\nA Lowered of the graph so far with these outputs."},
    {"depends", (PyCFunction)trace_depends, METH_VARARGS,
     "depends($self, value, sources, /)\n--\n\nWhether value reads any of sources."},
    {"finish_error", (PyCFunction)trace_finish_error, METH_NOARGS,
     "finish_error($self, /)\n--\n\nEnds the trace without outputs."},
    {NULL, NULL, 0, NULL},
};

static PyObject *trace_get_finished(cj_py_trace *tr, void *closure)
{
    (void)closure;
    return PyBool_FromLong(tr->finished);
}

static PyObject *trace_get_concrete(cj_py_trace *tr, void *closure)
{
    (void)closure;
    return Py_NewRef(tr->concrete != NULL ? tr->concrete : Py_None);
}

static int trace_set_concrete(cj_py_trace *tr, PyObject *v, void *closure)
{
    (void)closure;
    if (v != NULL && v != Py_None && !PyCallable_Check(v)) {
        PyErr_SetString(PyExc_TypeError, "Trace.concrete must be callable or None");
        return -1;
    }
    if (v != NULL && v != Py_None && tr->finished) {
        PyErr_SetString(PyExc_RuntimeError, "Trace.concrete: this trace has already finished");
        return -1;
    }
    Py_XSETREF(tr->concrete, v == NULL || v == Py_None ? NULL : Py_NewRef(v));
    return 0;
}

static PyObject *trace_get_budget(cj_py_trace *tr, void *closure)
{
    (void)closure;
    return Py_NewRef(tr->budget != NULL ? tr->budget : Py_None);
}

static PyGetSetDef trace_getset[] = {
    {"memory_budget", (getter)trace_get_budget, NULL,
     "the MemoryBudget asked for while tracing or searched by this retrace, or None", NULL},
    {"finished", (getter)trace_get_finished, NULL, "True once finish() or finish_error() ran.", NULL},
    {"concrete", (getter)trace_get_concrete, (setter)trace_set_concrete,
     "None (values are abstract), or evaluate(tracer) -> NumPy array or None: what bool(), "
     "int(), float(), indexing and item() of this trace's values ask", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject cj_py_TraceType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cjit._cjit.Trace",
    .tp_basicsize = sizeof(cj_py_trace),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Trace(budget=None, candidate=None)\n--\n\nOne graph being recorded.  Not thread-safe; one per trace.",
    .tp_new = trace_new,
    .tp_dealloc = (destructor)trace_dealloc,
    .tp_traverse = (traverseproc)trace_traverse,
    .tp_clear = (inquiry)trace_clear,
    .tp_weaklistoffset = offsetof(cj_py_trace, weakrefs),
    .tp_methods = trace_methods,
    .tp_getset = trace_getset,
};

/* Readies Trace and adds it to m.  0 or -1. */
int cj_py_trace_init(PyObject *m)
{
    if (PyType_Ready(&cj_py_TraceType) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "Trace", (PyObject *)&cj_py_TraceType);
}
