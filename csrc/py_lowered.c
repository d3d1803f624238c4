/* py_lowered.c - the Lowered type: a finished graph, which shows its text,
 * compiles to an Executable (or loads one from the disk cache), and answers
 * memory_budget's questions (residuals, forward values, the plan's peak). */
#include "autodiff.h"
#include "py_exec.h"
#include "simplify.h"

#include <stdlib.h>
#include <string.h>

/* ---- Lowered ----------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    cj_graph *graph;     /* owned */
    PyObject *arrays;    /* list of closed-over arrays in slot order; never mutated */
    PyObject *weakrefs;  /* weak reference support */
    PyObject *budget;    /* the MemoryBudget its trace asked for, or NULL */
} cj_py_lowered;

/* A new Lowered owning g (see py_glue.h). */
PyObject *cj_py_lowered_new(cj_graph *g, PyObject *arrays)
{
    cj_py_lowered *lw = PyObject_GC_New(cj_py_lowered, &cj_py_LoweredType);
    if (lw == NULL) {
        cj_graph_free(g);
        return NULL;
    }
    lw->graph = g;
    lw->arrays = Py_NewRef(arrays);
    lw->weakrefs = NULL;
    lw->budget = NULL;
    PyObject_GC_Track(lw);
    return (PyObject *)lw;
}

/* See py_glue.h. */
int cj_py_lowered_parts(PyObject *obj, const cj_graph **g, PyObject **arrays)
{
    if (!PyObject_TypeCheck(obj, &cj_py_LoweredType)) {
        PyErr_Format(PyExc_TypeError, "expected a cjit._cjit.Lowered, got %.200s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    cj_py_lowered *lw = (cj_py_lowered *)obj;
    if (lw->arrays == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Lowered: object was cleared");
        return -1;
    }
    *g = lw->graph;
    *arrays = lw->arrays;
    return 0;
}

/* See py_glue.h. */
void cj_py_lowered_set_budget(PyObject *obj, PyObject *budget)
{
    cj_py_lowered *lw = (cj_py_lowered *)obj;
    Py_XSETREF(lw->budget, Py_NewRef(budget));
}

static int lowered_traverse(cj_py_lowered *lw, visitproc visit, void *arg)
{
    Py_VISIT(lw->arrays);
    Py_VISIT(lw->budget);
    return 0;
}

static int lowered_clear(cj_py_lowered *lw)
{
    Py_CLEAR(lw->arrays);
    Py_CLEAR(lw->budget);
    return 0;
}

static void lowered_dealloc(cj_py_lowered *lw)
{
    PyObject_GC_UnTrack(lw);
    if (lw->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)lw);
    lowered_clear(lw);
    cj_graph_free(lw->graph);
    Py_TYPE(lw)->tp_free((PyObject *)lw);
}

static PyObject *lowered_get_nparams(cj_py_lowered *lw, void *c)
{
    (void)c;
    return PyLong_FromLong(lw->graph->nparams);
}

static PyObject *lowered_get_narrays(cj_py_lowered *lw, void *c)
{
    (void)c;
    return PyLong_FromLong(lw->graph->narrays);
}

static PyObject *lowered_get_noutputs(cj_py_lowered *lw, void *c)
{
    (void)c;
    return PyLong_FromLong(lw->graph->noutputs);
}

/* A copy, so that callers cannot change what the executables use. */
static PyObject *lowered_get_arrays(cj_py_lowered *lw, void *c)
{
    (void)c;
    if (lw->arrays == NULL)
        return PyList_New(0);
    return PyList_GetSlice(lw->arrays, 0, PyList_GET_SIZE(lw->arrays));
}


/* The graph as the compile's simplify step leaves it (as CJIT_PASSES
 * allows): the pipeline's list run through simplify. */
static PyObject *lowered_as_text(cj_py_lowered *lw, PyObject *unused)
{
    (void)unused;
    cj_error err = {0};
    cj_compile_state s;
    cj_compile_options o = cj_compile_options_make(&cj_backend_cpu, NULL, 0, false, CJ_STEP_SIMPLIFY);
    if (cj_pipeline_run(lw->graph, &o, &s, &err) != CJ_OK)
        return cj_py_raise(&err);
    PyObject *r = str_from_owned(cj_graph_to_text(s.lowered.graph));
    cj_lowered_free(&s.lowered);
    return r;
}

/* Parses compile()'s `donate` (a sequence of parameter slots) into
 * *donated (PyMem, one flag per parameter; NULL for none).  0 or -1. */
static int parse_donate(cj_py_lowered *lw, PyObject *donate, bool **donated)
{
    int nparams = lw->graph->nparams;
    *donated = NULL;
    if (donate == NULL || donate == Py_None)
        return 0;
    PyObject *seq = PySequence_Fast(donate, "Lowered.compile: donate must be a sequence of ints");
    if (seq == NULL)
        return -1;
    *donated = PyMem_Calloc((size_t)nparams + 1, sizeof(bool));
    if (*donated == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        long slot = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (slot == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            PyMem_Free(*donated);
            *donated = NULL;
            return -1;
        }
        if (slot >= 0 && slot < nparams)
            (*donated)[slot] = true;
    }
    Py_DECREF(seq);
    return 0;
}

/* Lowered.compile(donate=(), for_cache=False) -> Executable; `donate`
 * lists the parameter slots whose bytes the plan may reuse.  With
 * for_cache: (Executable, bytes of a disk cache entry or None when it
 * cannot be stored), see cj_executable_serialize. */
static PyObject *lowered_compile(cj_py_lowered *lw, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"donate", "for_cache", NULL};
    PyObject *donate = NULL;
    int for_cache = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|Op:compile", kwlist, &donate, &for_cache))
        return NULL;
    if (lw->arrays == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Lowered.compile: object was cleared");
        return NULL;
    }
    int nparams = lw->graph->nparams;
    bool *donated = NULL;
    if (parse_donate(lw, donate, &donated) < 0)
        return NULL;
    /* The graph is only read: the Lowered (held by this call) keeps it, and
     * nothing changes a finished graph. */
    cj_compile_options o = cj_compile_options_make(&cj_backend_cpu, donated, donated ? nparams : 0, for_cache,
                                                   CJ_STEP_LINK);
    cj_executable *x = compile_with_gil_released(lw->graph, &o);
    PyMem_Free(donated);
    if (x == NULL)
        return NULL;
    PyObject *blob = NULL;
    if (for_cache) {
        uint8_t *data = NULL;
        size_t len = 0;
        cj_error err = {0};
        if (cj_executable_serialize(x, lw->graph, &data, &len, &err) != CJ_OK) {
            /* not storable (control flow nested too deep, or out of memory):
             * the executable still runs, there is just no entry */
            blob = Py_None;
            Py_INCREF(blob);
        } else {
            blob = PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)len);
            free(data);
        }
        if (blob == NULL) {
            cj_executable_free(x);
            return NULL;
        }
    }
    PyObject *exe = executable_new(x, lw->graph, lw->arrays);   /* owns x from here on */
    if (!for_cache || exe == NULL) {
        Py_XDECREF(blob);
        return exe;
    }
    return Py_BuildValue("(NN)", exe, blob);
}

/* Lowered.load_cached(entry) -> Executable: a disk cache entry made by
 * compile(for_cache=True) for this graph, turned back into an executable
 * without compiling.  ValueError when the bytes are not a valid entry. */
static PyObject *lowered_load_cached(cj_py_lowered *lw, PyObject *entry)
{
    if (!PyBytes_Check(entry)) {
        PyErr_SetString(PyExc_TypeError, "Lowered.load_cached: expected bytes");
        return NULL;
    }
    if (lw->arrays == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Lowered.load_cached: object was cleared");
        return NULL;
    }
    cj_error err = {0};
    cj_executable *x;
    const uint8_t *data = (const uint8_t *)PyBytes_AS_STRING(entry);
    size_t len = (size_t)PyBytes_GET_SIZE(entry);
    Py_BEGIN_ALLOW_THREADS   /* the JIT's lock may be held by a compile on another thread */
    x = cj_executable_load(data, len, lw->graph, &err);
    Py_END_ALLOW_THREADS
    if (x == NULL)
        return cj_py_raise(&err);
    return executable_new(x, lw->graph, lw->arrays);
}

/* Lowered.key_bytes() -> bytes: every field of the graph that compiling
 * reads (constants bit for bit; not the text of source lines), for the
 * disk cache's key. */
static PyObject *lowered_key_bytes(cj_py_lowered *lw, PyObject *unused)
{
    (void)unused;
    cj_error err = {0};
    uint8_t *data = NULL;
    size_t len = 0;
    if (cj_graph_key_bytes(lw->graph, &data, &len, &err) != CJ_OK)
        return cj_py_raise(&err);
    PyObject *r = PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)len);
    free(data);
    return r;
}

/* Lowered.residuals() -> list of (node id, shape, dtype, source, op):
 * the forward values the backward pass reads (cjit.saved_residuals). */
static PyObject *lowered_residuals(cj_py_lowered *lw, PyObject *unused)
{
    (void)unused;
    const cj_graph *g = lw->graph;
    int *ids = PyMem_Malloc(sizeof(int) * ((size_t)g->nnodes + 1));
    if (ids == NULL)
        return PyErr_NoMemory();
    int n = cj_autodiff_residuals(g, ids);
    PyObject *list = n < 0 ? PyErr_NoMemory() : PyList_New(0);
    for (int i = 0; list != NULL && i < n; i++) {
        const cj_node *nd = &g->nodes[ids[i]];
        PyObject *shape = PyTuple_New(nd->shape.rank);
        for (int d = 0; shape != NULL && d < nd->shape.rank; d++)
            PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(nd->shape.dims[d]));
        PyObject *item = shape == NULL ? NULL
            : Py_BuildValue("(iNsss)", ids[i], shape, cj_dtype_name(nd->dtype),
                            cj_graph_loc_str(g, nd->loc), cj_op_name(nd->op));
        if (item == NULL || PyList_Append(list, item) < 0)
            Py_CLEAR(list);
        Py_XDECREF(item);
    }
    PyMem_Free(ids);
    return list;
}

/* Lowered.forward_values() -> list of (node id, op): the values computed
 * before the backward pass starts (all nodes when there is none), in order;
 * the candidates memory_budget may choose to recompute. */
static PyObject *lowered_forward_values(cj_py_lowered *lw, PyObject *unused)
{
    (void)unused;
    const cj_graph *g = lw->graph;
    int end = g->backward_start >= 0 ? g->backward_start : g->nnodes;
    PyObject *list = PyList_New(0);
    for (int i = 0; list != NULL && i < end; i++) {
        cj_opkind k = cj_op_kind(g->nodes[i].op);
        if (k == CJ_OPKIND_SOURCE || k == CJ_OPKIND_MOVE || g->nodes[i].op == CJ_OP_NAME)
            continue;
        PyObject *item = Py_BuildValue("(is)", i, cj_op_name(g->nodes[i].op));
        if (item == NULL || PyList_Append(list, item) < 0)
            Py_CLEAR(list);
        Py_XDECREF(item);
    }
    return list;
}

/* Lowered.forward_chain() -> list of node ids: the chain of the backward
 * pass for binomial checkpointing (cj_autodiff_chain), empty when none. */
static PyObject *lowered_forward_chain(cj_py_lowered *lw, PyObject *unused)
{
    (void)unused;
    const cj_graph *g = lw->graph;
    int *ids = PyMem_Malloc(sizeof(int) * ((size_t)g->nnodes + 1));
    if (ids == NULL)
        return PyErr_NoMemory();
    int n = cj_autodiff_chain(g, ids);
    PyObject *list = n < 0 ? PyErr_NoMemory() : PyList_New(n);
    for (int i = 0; list != NULL && i < n; i++) {
        PyObject *v = PyLong_FromLong(ids[i]);
        if (v == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, v);
    }
    PyMem_Free(ids);
    return list;
}

/* Lowered.plan_peak(donate=()) -> int: the peak bytes of the plan
 * compile(donate) would make, without generating code. */
static PyObject *lowered_plan_peak(cj_py_lowered *lw, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"donate", NULL};
    PyObject *donate = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:plan_peak", kwlist, &donate))
        return NULL;
    bool *donated = NULL;
    if (parse_donate(lw, donate, &donated) < 0)
        return NULL;
    cj_compile_options o = cj_compile_options_make(&cj_backend_cpu, donated, donated ? lw->graph->nparams : 0,
                                                   false, CJ_STEP_MEMPLAN);
    cj_error err = {0};
    int64_t peak = 0;
    cj_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cj_plan_peak(lw->graph, &o, &peak, &err);
    Py_END_ALLOW_THREADS
    PyMem_Free(donated);
    if (st != CJ_OK)
        return cj_py_raise(&err);
    return PyLong_FromLongLong(peak);
}

static PyObject *lowered_get_control_flow(cj_py_lowered *lw, void *c)
{
    (void)c;
    return PyBool_FromLong(lw->graph && lw->graph->nbodies > 0);
}

static PyObject *lowered_get_budget(cj_py_lowered *lw, void *c)
{
    (void)c;
    return Py_NewRef(lw->budget != NULL ? lw->budget : Py_None);
}

static PyGetSetDef lowered_getset[] = {
    {"memory_budget", (getter)lowered_get_budget, NULL,
     "the MemoryBudget grad(memory_budget=) asked for while tracing, or None", NULL},
    {"has_control_flow", (getter)lowered_get_control_flow, NULL,
     "the graph holds cjit.lax control flow or custom derivatives", NULL},
    {"nparams", (getter)lowered_get_nparams, NULL, "number of positional parameters", NULL},
    {"narrays", (getter)lowered_get_narrays, NULL, "number of closed-over arrays", NULL},
    {"noutputs", (getter)lowered_get_noutputs, NULL, "number of outputs", NULL},
    {"arrays", (getter)lowered_get_arrays, NULL, "the closed-over arrays, in slot order", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef lowered_methods[] = {
    {"residuals", (PyCFunction)lowered_residuals, METH_NOARGS,
     "residuals($self, /)\n--\n\nThe forward values the backward pass reads."},
    {"forward_values", (PyCFunction)lowered_forward_values, METH_NOARGS,
     "forward_values($self, /)\n--\n\nThe computed values before the backward pass."},
    {"forward_chain", (PyCFunction)lowered_forward_chain, METH_NOARGS,
     "forward_chain($self, /)\n--\n\nThe values a chain schedule may checkpoint, in order."},
    {"plan_peak", (PyCFunction)(void (*)(void))lowered_plan_peak, METH_VARARGS | METH_KEYWORDS,
     "plan_peak($self, /, donate=())\n--\n\nPeak bytes of the memory plan compile(donate) would make, "
     "without compiling."},
    {"as_text", (PyCFunction)lowered_as_text, METH_NOARGS,
     "as_text($self, /)\n--\n\nThe graph, one op a line, with source locations."},
    {"compile", (PyCFunction)(void (*)(void))lowered_compile, METH_VARARGS | METH_KEYWORDS,
     "compile($self, /)\n--\n\nRuns the pass pipeline and LLVM; returns an Executable."},
    {"load_cached", (PyCFunction)lowered_load_cached, METH_O,
     "load_cached($self, entry, /)\n--\n\nAn Executable from a disk cache entry, without compiling."},
    {"key_bytes", (PyCFunction)lowered_key_bytes, METH_NOARGS,
     "key_bytes($self, /)\n--\n\nThe graph's canonical bytes (for the disk cache key)."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject cj_py_LoweredType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cjit._cjit.Lowered",
    .tp_basicsize = sizeof(cj_py_lowered),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A finished graph (made by Trace.finish).",
    .tp_dealloc = (destructor)lowered_dealloc,
    .tp_traverse = (traverseproc)lowered_traverse,
    .tp_clear = (inquiry)lowered_clear,
    .tp_weaklistoffset = offsetof(cj_py_lowered, weakrefs),
    .tp_methods = lowered_methods,
    .tp_getset = lowered_getset,
};

/* Readies Lowered and adds it to m.  0 or -1. */
int cj_py_lowered_init(PyObject *m)
{
    if (PyType_Ready(&cj_py_LoweredType) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "Lowered", (PyObject *)&cj_py_LoweredType);
}
