/* py_exec.c - the Executable type (compiled code that runs on NumPy
 * arrays): made from a Lowered, its methods, released.  Calls are checked
 * and run in py_exec_args.c, results made in py_exec_out.c, introspection
 * is py_exec_info.c; the Lowered type is py_lowered.c and the GIL-released
 * work py_nogil.c. */
#include "py_exec.h"

#include <stdlib.h>
#include <string.h>

/* ---- Executable ---------------------------------------------------------- */



static PyObject *executable_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                       PyObject *kwnames);

/* A new Executable owning x (freed here on failure too), with a new
 * reference to arrays.  Parameter shapes and dtypes come from g. */
PyObject *executable_new(cj_executable *x, const cj_graph *g, PyObject *arrays)
{
    int np = cj_executable_nparams(x), na = cj_executable_narrays(x);
    int no = cj_executable_noutputs(x);
    if (np != g->nparams || na != g->narrays || na != PyList_GET_SIZE(arrays) || np < 0 || no < 0) {
        cj_executable_free(x);
        PyErr_Format(PyExc_RuntimeError, "cjit internal error: the executable's signature "
                     "(%d params, %d arrays) differs from the graph's (%d, %d)",
                     np, na, g->nparams, g->narrays);
        return NULL;
    }
    cj_py_executable *e = PyObject_GC_New(cj_py_executable, &cj_py_ExecutableType);
    if (e == NULL) {
        cj_executable_free(x);
        return NULL;
    }
    e->vectorcall = executable_vectorcall;
    e->x = x;
    live_executables++;
    e->arrays = Py_NewRef(arrays);
    e->nparams = np;
    e->narrays = na;
    e->noutputs = no;
    e->running = 0;
    e->release_pending = false;
    e->warned_donation = false;
    e->out_donor = NULL;
    e->hosts_output = NULL;
    e->weakrefs = NULL;
    size_t nshapes = (size_t)np + (size_t)no;
    e->param_shapes = calloc(nshapes + 1, sizeof(cj_shape));
    e->param_dtypes = calloc(nshapes + 1, sizeof(cj_dtype));
    e->array_shapes = calloc((size_t)na + 1, sizeof(cj_shape));
    e->array_dtypes = calloc((size_t)na + 1, sizeof(cj_dtype));
    e->out_shapes = e->param_shapes ? e->param_shapes + np : NULL;
    e->out_dtypes = e->param_dtypes ? e->param_dtypes + np : NULL;
    PyObject_GC_Track(e);
    if (e->param_shapes == NULL || e->param_dtypes == NULL || e->array_shapes == NULL
        || e->array_dtypes == NULL) {
        Py_DECREF(e);
        return PyErr_NoMemory();
    }
    for (int i = 0; i < g->nnodes; i++) {
        const cj_node *n = &g->nodes[i];
        if (n->op == CJ_OP_PARAM && n->attrs.index >= 0 && n->attrs.index < np) {
            e->param_shapes[n->attrs.index] = n->shape;
            e->param_dtypes[n->attrs.index] = n->dtype;
        }
        if (n->op == CJ_OP_ARRAY && n->attrs.index >= 0 && n->attrs.index < na) {
            e->array_shapes[n->attrs.index] = n->shape;
            e->array_dtypes[n->attrs.index] = n->dtype;
        }
    }
    for (int k = 0; k < no; k++)
        cj_executable_output(x, k, &e->out_shapes[k], &e->out_dtypes[k]);
    /* outputs the plan placed in donated arguments (memplan.c) */
    const cj_plan *plan = cj_executable_plan(x);
    for (int b = 0; b < plan->nbuffers; b++) {
        const cj_buffer *buf = &plan->buffers[b];
        if (buf->kind != CJ_BUF_OUTPUT || buf->alias_of < 0 || buf->slot < 0 || buf->slot >= no)
            continue;
        const cj_buffer *host = &plan->buffers[buf->alias_of];
        if (host->kind != CJ_BUF_PARAM || host->slot < 0 || host->slot >= np)
            continue;
        if (e->out_donor == NULL) {
            e->out_donor = malloc(sizeof(int) * ((size_t)no + 1));
            e->hosts_output = calloc((size_t)np + 1, sizeof(bool));
            if (e->out_donor == NULL || e->hosts_output == NULL) {
                Py_DECREF(e);
                return PyErr_NoMemory();
            }
            for (int k = 0; k < no; k++)
                e->out_donor[k] = -1;
        }
        e->out_donor[buf->slot] = host->slot;
        e->hosts_output[host->slot] = true;
    }
    return (PyObject *)e;
}

static int executable_traverse(cj_py_executable *e, visitproc visit, void *arg)
{
    Py_VISIT(e->arrays);
    return 0;
}

static int executable_clear(cj_py_executable *e)
{
    Py_CLEAR(e->arrays);
    return 0;
}

static void executable_dealloc(cj_py_executable *e)
{
    PyObject_GC_UnTrack(e);
    if (e->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)e);
    executable_clear(e);
    free_executable_gil_released(e->x);   /* nothing runs: a call holds a reference */
    free(e->param_shapes);
    free(e->param_dtypes);
    free(e->array_shapes);
    free(e->array_dtypes);
    free(e->out_donor);
    free(e->hosts_output);
    Py_TYPE(e)->tp_free((PyObject *)e);
}


static PyObject *executable_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                       PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if ((kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) || nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "Executable() takes one argument: a sequence of arrays");
        return NULL;
    }
    return executable_run((cj_py_executable *)self, args[0]);
}


/* release(): frees the machine code now, or as soon as running calls end. */
static PyObject *executable_release(cj_py_executable *e, PyObject *unused)
{
    (void)unused;
    if (e->x != NULL) {
        if (e->running > 0)
            e->release_pending = true;   /* the last running call frees it */
        else
            executable_free_code(e);
    }
    Py_RETURN_NONE;
}

static PyObject *executable_get_code_bytes(cj_py_executable *e, void *c)
{
    (void)c;
    if (e->x == NULL)
        return released_error();
    return PyLong_FromLongLong(cj_executable_code_bytes(e->x));
}

static PyObject *executable_get_nparams(cj_py_executable *e, void *c)
{
    (void)c;
    return PyLong_FromLong(e->nparams);
}

static PyObject *executable_get_noutputs(cj_py_executable *e, void *c)
{
    (void)c;
    return PyLong_FromLong(e->noutputs);
}

static PyObject *executable_get_out_shapes(cj_py_executable *e, void *c)
{
    (void)c;
    PyObject *list = PyList_New(e->noutputs);
    if (list == NULL)
        return NULL;
    for (int k = 0; k < e->noutputs; k++) {
        PyObject *t = cj_py_shape_tuple(&e->out_shapes[k]);
        if (t == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, k, t);   /* steals t */
    }
    return list;
}

static PyObject *executable_get_out_dtypes(cj_py_executable *e, void *c)
{
    (void)c;
    PyObject *list = PyList_New(e->noutputs);
    if (list == NULL)
        return NULL;
    for (int k = 0; k < e->noutputs; k++) {
        PyObject *t = cj_py_dtype_object(e->out_dtypes[k]);
        if (t == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, k, t);   /* steals t */
    }
    return list;
}

/* Executable.live_count() -> int (a class method). */
static PyObject *executable_live_count(PyObject *cls, PyObject *unused)
{
    (void)cls;
    (void)unused;
    return PyLong_FromSsize_t(live_executables);
}

static PyGetSetDef executable_getset[] = {
    {"code_bytes", (getter)executable_get_code_bytes, NULL,
     "bytes of memory it holds: machine code pages, the plan and the graph", NULL},
    {"nparams", (getter)executable_get_nparams, NULL, "number of positional parameters", NULL},
    {"noutputs", (getter)executable_get_noutputs, NULL, "number of outputs", NULL},
    {"out_shapes", (getter)executable_get_out_shapes, NULL, "list of output shapes", NULL},
    {"out_dtypes", (getter)executable_get_out_dtypes, NULL, "list of output dtypes", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef executable_methods[] = {
    {"as_text", (PyCFunction)executable_as_text, METH_NOARGS,
     "as_text($self, /)\n--\n\nThe fused kernels and the memory plan."},
    {"memory_analysis", (PyCFunction)executable_memory_analysis, METH_NOARGS,
     "memory_analysis($self, /)\n--\n\nSizes from the memory plan, and the buffers live at the peak."},
    {"memory_plan", (PyCFunction)executable_memory_plan, METH_NOARGS,
     "memory_plan($self, /)\n--\n\nThe plan's buffers (kind, size, offset, alias_of, first_use, "
     "last_use, ...) and groups (their stages' labels and source lines)."},
    {"cost_analysis", (PyCFunction)executable_cost_analysis, METH_NOARGS,
     "cost_analysis($self, /)\n--\n\nflops and bytes_accessed."},
    {"live_count", (PyCFunction)executable_live_count, METH_NOARGS | METH_CLASS,
     "live_count($cls, /)\n--\n\nHow many Executables still hold their machine code."},
    {"release", (PyCFunction)executable_release, METH_NOARGS,
     "release($self, /)\n--\n\nFrees the machine code now; later calls raise RuntimeError."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject cj_py_ExecutableType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cjit._cjit.Executable",
    .tp_basicsize = sizeof(cj_py_executable),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Compiled code for one graph; call it with a sequence of arrays.",
    .tp_dealloc = (destructor)executable_dealloc,
    .tp_traverse = (traverseproc)executable_traverse,
    .tp_clear = (inquiry)executable_clear,
    .tp_weaklistoffset = offsetof(cj_py_executable, weakrefs),
    .tp_vectorcall_offset = offsetof(cj_py_executable, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_methods = executable_methods,
    .tp_getset = executable_getset,
};

/* Readies Executable and adds it to m.  0 or -1. */
int cj_py_exec_init(PyObject *m)
{
    if (PyType_Ready(&cj_py_ExecutableType) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "Executable", (PyObject *)&cj_py_ExecutableType);
}

/* See py_glue.h. */
int cj_py_executable_ready(PyObject *exe, int nparams)
{
    if (Py_TYPE(exe) != &cj_py_ExecutableType)
        return 0;
    cj_py_executable *e = (cj_py_executable *)exe;
    return e->x != NULL && !e->release_pending && e->arrays != NULL && e->nparams == nparams;
}
