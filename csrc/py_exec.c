/* py_exec.c - Lowered (a finished graph) and Executable (compiled code
 * that runs on NumPy arrays). */
#include "autodiff.h"
#include "blas.h"
#include "py_glue.h"
#include "simplify.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- long work with the GIL released, Ctrl-C still heard ----------------
 *
 * A compile spends up to seconds in LLVM and a run in kernels; neither
 * touches a Python object, so both release the GIL and other Python threads
 * go on meanwhile.  But Python runs signal handlers (KeyboardInterrupt) only
 * on the main thread, and only with the GIL: so the waiting side takes the
 * GIL back now and then, just long enough for PyErr_CheckSignals, and when
 * that raises, the work stops at its next check, frees what it made, and
 * the exception propagates.  A compile runs on a thread of its own while
 * the calling thread waits and checks every COMPILE_CHECK_NS, setting the
 * compile's cancel flag; a run checks between kernel groups (runtime.c,
 * cj_run_poll), at most every CJ_RUN_POLL_NS. */

#define COMPILE_CHECK_NS 5000000 /* 5 ms */
/* The compile thread's stack: the passes recurse over deep graphs as they
 * did on the main thread, whose stack is usually 8 MiB. */
#define COMPILE_STACK_BYTES ((size_t)64 << 20)

/* Shared by the waiting thread and the compile thread; the last of the two
 * to let go frees it.  (A daemon thread that waits can end inside
 * PyEval_RestoreThread when the interpreter exits: then the compile thread
 * is the last.) */
typedef struct compile_job_s {
    const cj_graph *graph;
    const bool *donated;
    int ndonated;
    bool keep_objects;          /* for the disk cache: cj_compile_keeping */
    cj_cancel cancel;
    cj_executable *result;      /* taken by the waiting thread */
    cj_error err;
    pthread_mutex_t lock;
    pthread_cond_t done_cv;     /* signalled when done is set */
    bool done;
    int holders;                /* under lock */
    struct compile_job_s *next_running;   /* in running_jobs */
} compile_job;

/* The compiles running on threads of their own.  When the interpreter
 * exits, the last thing it does (Py_AtExit) is to cancel them and wait:
 * else the process's exit would run LLVM's static destructors under a
 * compile still using LLVM (a daemon thread's compile crashed the exit). */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t none_cv;     /* signalled when the list empties */
    compile_job *first;
    bool wait_registered;
} running_jobs = {.lock = PTHREAD_MUTEX_INITIALIZER, .none_cv = PTHREAD_COND_INITIALIZER};

static void wait_for_running_compiles(void)
{
    pthread_mutex_lock(&running_jobs.lock);
    for (compile_job *j = running_jobs.first; j != NULL; j = j->next_running)
        j->cancel = true;
    while (running_jobs.first != NULL)
        pthread_cond_wait(&running_jobs.none_cv, &running_jobs.lock);
    pthread_mutex_unlock(&running_jobs.lock);
}

static void running_add(compile_job *j)
{
    pthread_mutex_lock(&running_jobs.lock);
    j->next_running = running_jobs.first;
    running_jobs.first = j;
    pthread_mutex_unlock(&running_jobs.lock);
}

static void running_remove(compile_job *j)
{
    pthread_mutex_lock(&running_jobs.lock);
    compile_job **p = &running_jobs.first;
    while (*p != NULL && *p != j)
        p = &(*p)->next_running;
    if (*p == j)
        *p = j->next_running;
    if (running_jobs.first == NULL)
        pthread_cond_broadcast(&running_jobs.none_cv);
    pthread_mutex_unlock(&running_jobs.lock);
}

static void compile_job_let_go(compile_job *j)
{
    pthread_mutex_lock(&j->lock);
    bool last = --j->holders == 0;
    pthread_mutex_unlock(&j->lock);
    if (!last)
        return;
    cj_executable_free(j->result);
    pthread_cond_destroy(&j->done_cv);
    pthread_mutex_destroy(&j->lock);
    free(j);
}

static void *compile_job_main(void *arg)
{
    compile_job *j = arg;
    cj_executable *x = cj_compile_keeping(j->graph, j->donated, j->ndonated, &j->cancel, j->keep_objects, &j->err);
    pthread_mutex_lock(&j->lock);
    j->result = x;
    j->done = true;
    pthread_cond_signal(&j->done_cv);
    pthread_mutex_unlock(&j->lock);
    running_remove(j);
    compile_job_let_go(j);
    return NULL;
}

/* Waits (without the GIL) until the job is done or COMPILE_CHECK_NS passed;
 * returns whether it is done. */
static bool wait_a_while(compile_job *j)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += COMPILE_CHECK_NS;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&j->lock);
    while (!j->done && pthread_cond_timedwait(&j->done_cv, &j->lock, &until) == 0) {
    }
    bool done = j->done;
    pthread_mutex_unlock(&j->lock);
    return done;
}

/* cj_compile_cancellable with the GIL released and signals heard: the new
 * executable, or NULL with an exception (the compile's error, or what a
 * signal handler raised: then nothing compiled is kept). */
static cj_executable *compile_with_gil_released(const cj_graph *g, const bool *donated, int ndonated,
                                                bool keep_objects)
{
    compile_job *j = calloc(1, sizeof *j);
    if (j == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    *j = (compile_job){.graph = g, .donated = donated, .ndonated = ndonated, .keep_objects = keep_objects,
                       .holders = 2};
    pthread_condattr_t cattr;
    pthread_attr_t tattr;
    pthread_t thread;
    bool interrupted = false;
    pthread_mutex_init(&j->lock, NULL);
    pthread_condattr_init(&cattr);
    pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
    pthread_cond_init(&j->done_cv, &cattr);
    pthread_condattr_destroy(&cattr);
    pthread_attr_init(&tattr);
    pthread_attr_setstacksize(&tattr, COMPILE_STACK_BYTES);
    pthread_attr_setdetachstate(&tattr, PTHREAD_CREATE_DETACHED);
    if (!running_jobs.wait_registered)   /* under the GIL: once */
        running_jobs.wait_registered = Py_AtExit(wait_for_running_compiles) == 0;
    running_add(j);
    PyThreadState *ts = PyEval_SaveThread();
    if (pthread_create(&thread, &tattr, compile_job_main, j) != 0) {
        compile_job_main(j);    /* no thread to be had: compile here, deaf to signals */
    } else {
        while (!wait_a_while(j)) {
            if (interrupted)
                continue;       /* stopping: the compile sees the flag at its next check */
            PyEval_RestoreThread(ts);
            if (PyErr_CheckSignals() < 0) {
                interrupted = true;
                j->cancel = true;
            }
            ts = PyEval_SaveThread();
        }
    }
    pthread_attr_destroy(&tattr);
    cj_executable *x = NULL;
    if (!interrupted) {         /* else it is freed with the job, even if it finished */
        x = j->result;
        j->result = NULL;
    }
    cj_error err = j->err;
    compile_job_let_go(j);      /* the compile thread is done with it, or about to be */
    PyEval_RestoreThread(ts);
    if (interrupted) {
        cj_stats_cancelled();
        return NULL;            /* with the signal handler's exception */
    }
    if (x == NULL)
        cj_py_raise(&err);
    return x;
}

/* cj_run_poll's question, asked between kernel groups with the GIL
 * released: take it back, run the signal handlers, release it again. */
static bool run_interrupted(void *ctx)
{
    PyThreadState **ts = ctx;
    PyEval_RestoreThread(*ts);
    int r = PyErr_CheckSignals();
    *ts = PyEval_SaveThread();
    return r < 0;
}

/* Executables whose machine code is still held (memory_stats()'s
 * live_executables); changed under the GIL only. */
static Py_ssize_t live_executables;

/* Frees an Executable's code without the GIL: removing it from the JIT
 * waits for a compile that another thread may be running. */
static void free_executable_gil_released(cj_executable *x)
{
    if (x == NULL)
        return;
    live_executables--;
    Py_BEGIN_ALLOW_THREADS
    cj_executable_free(x);
    Py_END_ALLOW_THREADS
}

/* ---- Lowered ----------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    cj_graph *graph;     /* owned */
    PyObject *arrays;    /* list of closed-over arrays in slot order; never mutated */
    PyObject *weakrefs;  /* weak reference support */
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
    PyObject_GC_Track(lw);
    return (PyObject *)lw;
}

static int lowered_traverse(cj_py_lowered *lw, visitproc visit, void *arg)
{
    Py_VISIT(lw->arrays);
    return 0;
}

static int lowered_clear(cj_py_lowered *lw)
{
    Py_CLEAR(lw->arrays);
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

/* A new str from a malloc'd C string, which this frees. */
static PyObject *str_from_owned(char *s)
{
    if (s == NULL)
        return PyErr_NoMemory();
    PyObject *r = PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
    free(s);
    return r;
}

/* The graph as cj_lower leaves it (simplified as CJIT_PASSES allows),
 * which is what compile() compiles. */
static PyObject *lowered_as_text(cj_py_lowered *lw, PyObject *unused)
{
    (void)unused;
    cj_error err = {0};
    cj_lowered l;
    cj_lower_options o = {.mark_library_calls = cj_blas_plan};
    if (cj_lower(lw->graph, &o, &l, &err) != CJ_OK)
        return cj_py_raise(&err);
    PyObject *r = str_from_owned(cj_graph_to_text(l.graph));
    cj_lowered_free(&l);
    return r;
}

static PyObject *executable_new(cj_executable *x, const cj_graph *g, PyObject *arrays);

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
 * for_cache: (Executable, bytes of a disk cache entry), see
 * cj_executable_serialize. */
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
    cj_executable *x = compile_with_gil_released(lw->graph, donated, donated ? nparams : 0, for_cache);
    PyMem_Free(donated);
    if (x == NULL)
        return NULL;
    PyObject *blob = NULL;
    if (for_cache) {
        uint8_t *data = NULL;
        size_t len = 0;
        cj_error err = {0};
        if (cj_executable_serialize(x, &data, &len, &err) != CJ_OK) {
            cj_executable_free(x);
            return cj_py_raise(&err);
        }
        blob = PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)len);
        free(data);
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

/* Lowered.plan_peak() -> int: the peak bytes of the plan compile() would
 * make, without generating code. */
static PyObject *lowered_plan_peak(cj_py_lowered *lw, PyObject *unused)
{
    (void)unused;
    cj_error err = {0};
    int64_t peak = 0;
    cj_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cj_plan_peak(lw->graph, &peak, &err);
    Py_END_ALLOW_THREADS
    if (st != CJ_OK)
        return cj_py_raise(&err);
    return PyLong_FromLongLong(peak);
}

static PyObject *lowered_get_control_flow(cj_py_lowered *lw, void *c)
{
    (void)c;
    return PyBool_FromLong(lw->graph && lw->graph->nbodies > 0);
}

static PyGetSetDef lowered_getset[] = {
    {"has_control_flow", (getter)lowered_get_control_flow, NULL,
     "the graph holds cjit.lax control flow (not saved to the disk cache)", NULL},
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
    {"plan_peak", (PyCFunction)lowered_plan_peak, METH_NOARGS,
     "plan_peak($self, /)\n--\n\nPeak bytes of the memory plan, without compiling."},
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

/* ---- Executable ---------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    cj_executable *x;           /* owned; NULL once released */
    PyObject *arrays;           /* list of closed-over arrays (shared with the Lowered) */
    int nparams, narrays, noutputs;
    /* One malloc'd block: nparams param shapes, then noutputs output shapes. */
    cj_shape *param_shapes, *out_shapes;
    cj_dtype *param_dtypes, *out_dtypes;
    cj_shape *array_shapes;     /* each closed-over array's shape and dtype at trace time */
    cj_dtype *array_dtypes;
    int running;                /* calls in flight with the GIL released */
    bool release_pending;       /* release() came while running */
    bool warned_donation;       /* the unusable-donation warning was given */
    int *out_donor;             /* per output: the donated parameter slot whose bytes it
                                 * lives in, or -1; NULL when no output does */
    bool *hosts_output;         /* per parameter slot: an output lives in it; NULL likewise */
    PyObject *weakrefs;         /* weak reference support */
} cj_py_executable;

static PyObject *released_error(void)
{
    PyErr_SetString(PyExc_RuntimeError, "cjit: this executable's machine code was freed by its "
                    "release() method; compile the function again to call it");
    return NULL;
}

static void executable_free_code(cj_py_executable *e)
{
    cj_executable *x = e->x;
    e->x = NULL;                /* first: other threads may run while it is freed */
    e->release_pending = false;
    free_executable_gil_released(x);
}

static PyObject *executable_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                       PyObject *kwnames);

/* A new Executable owning x (freed here on failure too), with a new
 * reference to arrays.  Parameter shapes and dtypes come from g. */
static PyObject *executable_new(cj_executable *x, const cj_graph *g, PyObject *arrays)
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

/* ---- outputs: NumPy arrays over malloc'd memory ---------------------------- */

#define OUT_ALIGN 64        /* room for the header, and aligned for vector code */
#define OUT_CAPSULE "cjit.output"

/* Bytes of the block behind an output of nbytes: the header, then the
 * data rounded up (a zero-size array still gets a valid pointer). */
static size_t output_block_size(int64_t nbytes)
{
    size_t total = (size_t)OUT_ALIGN + (((size_t)nbytes + OUT_ALIGN - 1) / OUT_ALIGN) * OUT_ALIGN;
    return nbytes == 0 ? total + OUT_ALIGN : total;
}

/* The capsule that owns an output's block: block[0] is the int64 byte
 * count noted with cj_stats_alloc; the data starts OUT_ALIGN in. */
static void output_capsule_free(PyObject *cap)
{
    void *block = PyCapsule_GetPointer(cap, OUT_CAPSULE);
    if (block == NULL) {
        PyErr_Clear();   /* cannot happen for our capsules */
        return;
    }
    int64_t nbytes;
    memcpy(&nbytes, block, sizeof nbytes);
    cj_runtime_block_free(block, output_block_size(nbytes));
    cj_stats_alloc(-nbytes);
}

/* A new writeable C-contiguous array of shape s and dtype dt whose memory
 * is counted by the runtime until NumPy frees it; *data is its buffer. */
static PyObject *new_output(const cj_shape *s, cj_dtype dt, void **data)
{
    int64_t numel = cj_shape_numel(s), nbytes;
    if (numel < 0 || __builtin_mul_overflow(numel, (int64_t)cj_dtype_size(dt), &nbytes)
        || nbytes > (int64_t)PY_SSIZE_T_MAX - 4 * OUT_ALIGN) {
        PyErr_SetString(PyExc_MemoryError, "cjit: output too large");
        return NULL;
    }
    size_t total = output_block_size(nbytes);
    char *block = cj_runtime_block_alloc(total);
    if (block == NULL) {
        char aval[200];
        cj_py_aval_str(dt, s, aval, sizeof aval);
        PyErr_Format(PyExc_MemoryError, "cjit: out of memory allocating %lld bytes for an "
                     "output %s", (long long)nbytes, aval);
        return NULL;
    }
    memcpy(block, &nbytes, sizeof nbytes);
    cj_stats_alloc(nbytes);
    PyObject *cap = PyCapsule_New(block, OUT_CAPSULE, output_capsule_free);   /* new ref */
    if (cap == NULL) {
        cj_runtime_block_free(block, total);
        cj_stats_alloc(-nbytes);
        return NULL;
    }
    npy_intp dims[CJ_MAX_RANK];
    for (int d = 0; d < s->rank; d++)
        dims[d] = (npy_intp)s->dims[d];
    PyArray_Descr *descr = PyArray_DescrFromType(cj_py_npy_type(dt));   /* new ref */
    if (descr == NULL) {
        Py_DECREF(cap);   /* frees the block */
        return NULL;
    }
    PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, descr /* stolen */, s->rank, dims, NULL,
                                         block + OUT_ALIGN, NPY_ARRAY_CARRAY, NULL);
    if (arr == NULL) {
        Py_DECREF(cap);
        return NULL;
    }
    if (PyArray_SetBaseObject((PyArrayObject *)arr, cap /* stolen, also on failure */) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    *data = block + OUT_ALIGN;
    return arr;
}

/* ---- outputs in donated arguments ----------------------------------------------- */

/* A result that lives in a donated argument's memory is a new array over
 * those bytes whose base is a capsule of this name; the capsule's context
 * holds a reference to the array that owns the memory, so the memory lives
 * as long as the result.  (Not the donated array itself: that one is made
 * read-only once consumed, and a chain of bases through it would make the
 * result look read-only to the next donation, see donation_refused.) */
#define DONATED_CAPSULE "cjit.donated"

static void donated_capsule_free(PyObject *cap)
{
    PyObject *owner = PyCapsule_GetContext(cap);
    if (owner == NULL && PyErr_Occurred())
        PyErr_Clear();
    Py_XDECREF(owner);
}

/* What keeps the memory of donated array a alive (new reference): the
 * capsule of a cjit result's block or of an earlier donated result, found
 * along a's chain of bases, or else a new capsule holding the array at the
 * end of that chain.  Every result of a training loop that donates its
 * state therefore has a base chain of one link, however many steps ran. */
static PyObject *memory_keeper(PyArrayObject *a)
{
    for (;;) {
        if (PyArray_CHKFLAGS(a, NPY_ARRAY_OWNDATA))
            break;
        PyObject *base = PyArray_BASE(a);
        if (base != NULL && PyArray_Check(base)) {
            a = (PyArrayObject *)base;
            continue;
        }
        if (base != NULL && (PyCapsule_IsValid(base, OUT_CAPSULE) || PyCapsule_IsValid(base, DONATED_CAPSULE)))
            return Py_NewRef(base);
        break;   /* some other owner: hold the array, which holds it */
    }
    PyObject *cap = PyCapsule_New(a, DONATED_CAPSULE, donated_capsule_free);   /* new ref */
    if (cap == NULL)
        return NULL;
    Py_INCREF(a);
    if (PyCapsule_SetContext(cap, (PyObject *)a) < 0) {
        Py_DECREF(a);
        Py_DECREF(cap);
        return NULL;
    }
    return cap;
}

/* The result of shape s and dtype dt that the plan computed into the bytes
 * of donated array `donor`: a new writeable array over them. */
static PyObject *donated_output(PyArrayObject *donor, const cj_shape *s, cj_dtype dt)
{
    PyObject *keeper = memory_keeper(donor);   /* new ref */
    if (keeper == NULL)
        return NULL;
    npy_intp dims[CJ_MAX_RANK];
    for (int d = 0; d < s->rank; d++)
        dims[d] = (npy_intp)s->dims[d];
    PyArray_Descr *descr = PyArray_DescrFromType(cj_py_npy_type(dt));   /* new ref */
    PyObject *arr = descr == NULL ? NULL
        : PyArray_NewFromDescr(&PyArray_Type, descr /* stolen */, s->rank, dims, NULL,
                               PyArray_DATA(donor), NPY_ARRAY_CARRAY, NULL);
    if (arr == NULL) {
        Py_DECREF(keeper);
        return NULL;
    }
    if (PyArray_SetBaseObject((PyArrayObject *)arr, keeper /* stolen, also on failure */) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

/* A new array holding parameter slot's value, read from `data` (a donated
 * Python scalar on the fast path arrives as bytes in the call's key, which
 * no result may keep). */
static PyObject *param_copy(cj_py_executable *e, int slot, const void *data)
{
    const cj_shape *s = &e->param_shapes[slot];
    npy_intp dims[CJ_MAX_RANK];
    for (int d = 0; d < s->rank; d++)
        dims[d] = (npy_intp)s->dims[d];
    PyObject *a = PyArray_SimpleNew(s->rank, dims, cj_py_npy_type(e->param_dtypes[slot]));
    if (a != NULL)
        memcpy(PyArray_DATA((PyArrayObject *)a), data, (size_t)PyArray_NBYTES((PyArrayObject *)a));
    return a;
}

/* The array whose bytes are parameter slot's in this call: the argument
 * itself, or the private copy made for it (in `copies`).  Borrowed, or
 * NULL when neither is (cannot happen: usable_donations copies every
 * donated argument that holds an output and is not an array). */
static PyArrayObject *donor_array(PyObject *const *leaves, PyObject *copies, int slot, const void *data)
{
    if (leaves != NULL && PyArray_Check(leaves[slot]) && PyArray_DATA((PyArrayObject *)leaves[slot]) == data)
        return (PyArrayObject *)leaves[slot];
    for (Py_ssize_t i = 0; copies != NULL && i < PyList_GET_SIZE(copies); i++) {
        PyArrayObject *c = (PyArrayObject *)PyList_GET_ITEM(copies, i);
        if (PyArray_DATA(c) == data)
            return c;
    }
    return NULL;
}

/* NumPy arrays consumed by a donation: id -> weak reference, so that a
 * later cjit call given one raises instead of reading undefined bytes (an
 * id alone could be a new array's; the reference must still be this one).
 * Dead references are swept when the dict has doubled since the last
 * sweep.  NULL until the first donation. */
static PyObject *consumed_arrays;
static Py_ssize_t consumed_swept_size;

/* The object weak reference `ref` points to (borrowed, only to compare
 * with), or NULL when it is dead.  PyWeakref_GetObject is deprecated from
 * Python 3.13 on. */
static const PyObject *weak_target(PyObject *ref)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *o = NULL;
    if (PyWeakref_GetRef(ref, &o) <= 0) {
        PyErr_Clear();
        return NULL;
    }
    Py_DECREF(o);   /* the caller only compares the address */
    return o;
#else
    PyObject *o = PyWeakref_GetObject(ref);
    return o == Py_None ? NULL : o;
#endif
}

static void sweep_consumed(void)
{
    PyObject *dead = PyList_New(0), *key, *ref;
    Py_ssize_t pos = 0;
    if (dead == NULL) {
        PyErr_Clear();
        return;
    }
    while (PyDict_Next(consumed_arrays, &pos, &key, &ref)) {
        if (weak_target(ref) == NULL && PyList_Append(dead, key) < 0)
            PyErr_Clear();
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(dead); i++)
        if (PyDict_DelItem(consumed_arrays, PyList_GET_ITEM(dead, i)) < 0)
            PyErr_Clear();
    Py_DECREF(dead);
    consumed_swept_size = PyDict_GET_SIZE(consumed_arrays);
}

/* Remembers array a as consumed (best effort: a failure only loses the
 * clearer error later). */
static void remember_consumed(PyObject *a)
{
    if (consumed_arrays == NULL && (consumed_arrays = PyDict_New()) == NULL) {
        PyErr_Clear();
        return;
    }
    if (PyDict_GET_SIZE(consumed_arrays) >= 2 * consumed_swept_size + 64)
        sweep_consumed();
    PyObject *key = PyLong_FromVoidPtr(a), *ref = PyWeakref_NewRef(a, NULL);
    if (key == NULL || ref == NULL || PyDict_SetItem(consumed_arrays, key, ref) < 0)
        PyErr_Clear();
    Py_XDECREF(key);
    Py_XDECREF(ref);
}

static bool was_consumed(PyObject *a)
{
    if (!PyArray_Check(a) || PyArray_ISWRITEABLE((PyArrayObject *)a))
        return false;   /* consumed arrays are read-only: the common case costs a flag test */
    PyObject *key = PyLong_FromVoidPtr(a);
    if (key == NULL) {
        PyErr_Clear();
        return false;
    }
    PyObject *ref = PyDict_GetItemWithError(consumed_arrays, key);   /* borrowed */
    Py_DECREF(key);
    if (ref == NULL) {
        PyErr_Clear();
        return false;
    }
    return weak_target(ref) == a;
}

/* Raises RuntimeError when an argument is an array an earlier donation
 * consumed, as JAX does for a deleted buffer.  0 or -1. */
static int check_not_consumed(int nparams, PyObject *const *leaves)
{
    if (consumed_arrays == NULL || leaves == NULL || PyDict_GET_SIZE(consumed_arrays) == 0)
        return 0;
    for (int i = 0; i < nparams; i++) {
        if (was_consumed(leaves[i])) {
            PyErr_Format(PyExc_RuntimeError,
                         "cjit: argument %d (counting array arguments in order) is a NumPy array "
                         "that an earlier call consumed: it was donated (donate_argnums), so its "
                         "contents are undefined and its memory may hold that call's results. "
                         "Use the arrays that call returned, or donate a copy", i);
            return -1;
        }
    }
    return 0;
}

/* After a call: every donated argument whose own memory the call was given
 * is consumed: it is made read-only (writing to it raises NumPy's
 * "assignment destination is read-only"; its contents are undefined and
 * may be a result's) and remembered, so that passing it to a cjit function
 * again raises (check_not_consumed).  Arguments that were copied instead
 * stay as they are. */
static void consume_donations(const cj_plan *p, int nparams, void *const *params, PyObject *const *leaves)
{
    if (p->donated == NULL || leaves == NULL)
        return;
    for (int slot = 0; slot < nparams; slot++) {
        if (p->donated[slot] && PyArray_Check(leaves[slot])
            && PyArray_DATA((PyArrayObject *)leaves[slot]) == params[slot]) {
            PyArray_CLEARFLAGS((PyArrayObject *)leaves[slot], NPY_ARRAY_WRITEABLE);
            remember_consumed(leaves[slot]);
        }
    }
}

/* ---- calling -------------------------------------------------------------------- */

/* Raises TypeError for argument i; returns -1. */
static int bad_argument(cj_py_executable *e, int i, PyObject *a, const char *why)
{
    char want[200];
    cj_py_aval_str(e->param_dtypes[i], &e->param_shapes[i], want, sizeof want);
    if (!PyArray_Check(a)) {
        PyErr_Format(PyExc_TypeError, "argument %d: expected a numpy.ndarray %s, got %.200s", i,
                     want, Py_TYPE(a)->tp_name);
        return -1;
    }
    PyArrayObject *arr = (PyArrayObject *)a;
    PyObject *shape = PyObject_GetAttrString(a, "shape");   /* new ref */
    if (shape == NULL)
        return -1;
    PyErr_Format(PyExc_TypeError, "argument %d: expected a C-contiguous %s array, got %S %R%s", i,
                 want, (PyObject *)PyArray_DESCR(arr), shape, why);
    Py_DECREF(shape);
    return -1;
}

/* Checks argument i and returns its data pointer via *data.  0 or -1. */
static int check_argument(cj_py_executable *e, int i, PyObject *a, void **data)
{
    if (!PyArray_Check(a))
        return bad_argument(e, i, a, "");
    PyArrayObject *arr = (PyArrayObject *)a;
    cj_dtype dt;
    if (!cj_py_dtype_from_descr(PyArray_DESCR(arr), &dt) || dt != e->param_dtypes[i])
        return bad_argument(e, i, a, "");
    const cj_shape *s = &e->param_shapes[i];
    if (PyArray_NDIM(arr) != s->rank)
        return bad_argument(e, i, a, "");
    for (int d = 0; d < s->rank; d++) {
        if (PyArray_DIM(arr, d) != s->dims[d])
            return bad_argument(e, i, a, "");
    }
    if (!PyArray_ISCARRAY_RO(arr))
        return bad_argument(e, i, a, " (not C-contiguous and aligned)");
    *data = PyArray_DATA(arr);
    return 0;
}

/* Runs the executable on the sequence `argseq`: checks every argument,
 * then runs as the cached-call path does.  Returns a new list of output
 * arrays. */
static PyObject *executable_run(cj_py_executable *e, PyObject *argseq)
{
    if (e->x == NULL || e->release_pending)
        return released_error();
    if (e->arrays == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Executable: object was cleared");
        return NULL;
    }
    /* A tuple keeps every argument alive while the GIL is released, even if
     * another thread changes the caller's list meanwhile. */
    PyObject *args = PySequence_Tuple(argseq);   /* new ref */
    if (args == NULL)
        return NULL;
    PyObject *outs = NULL;
    void *stack[16];
    void **params = e->nparams <= 16 ? stack : PyMem_Malloc((size_t)e->nparams * sizeof(void *));
    if (params == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (PyTuple_GET_SIZE(args) != e->nparams) {
        PyErr_Format(PyExc_TypeError, "Executable: expected %d arguments, got %zd", e->nparams,
                     PyTuple_GET_SIZE(args));
        goto done;
    }
    for (int i = 0; i < e->nparams; i++) {
        if (check_argument(e, i, PyTuple_GET_ITEM(args, i), &params[i]) < 0)
            goto done;
    }
    outs = cj_py_executable_run_ptrs((PyObject *)e, params, &PyTuple_GET_ITEM(args, 0));
done:
    if (params != NULL && params != stack)
        PyMem_Free(params);
    Py_DECREF(args);
    return outs;
}

/* See py_glue.h. */
int cj_py_executable_ready(PyObject *exe, int nparams)
{
    if (Py_TYPE(exe) != &cj_py_ExecutableType)
        return 0;
    cj_py_executable *e = (cj_py_executable *)exe;
    return e->x != NULL && !e->release_pending && e->arrays != NULL && e->nparams == nparams;
}

/* A donated argument's bytes may hold temporaries while the call runs, so
 * it must not share memory with another argument (f(x, x) with argument 0
 * donated), which would still be read: raises ValueError, as JAX does.
 * Arguments are contiguous here, so a buffer's bytes are [data, data + nbytes). */
static int check_donated(const cj_plan *p, void *const *params)
{
    if (p->donated == NULL)
        return 0;
    for (int a = 0; a < p->nbuffers; a++) {
        const cj_buffer *A = &p->buffers[a];
        if (A->kind != CJ_BUF_PARAM || !p->donated[A->slot] || A->nbytes == 0)
            continue;
        const char *lo = params[A->slot], *hi = lo + A->nbytes;
        for (int b = 0; b < p->nbuffers; b++) {
            const cj_buffer *B = &p->buffers[b];
            if (B->kind != CJ_BUF_PARAM || B->slot == A->slot || B->nbytes == 0)
                continue;
            const char *blo = params[B->slot], *bhi = blo + B->nbytes;
            if (blo < hi && lo < bhi) {
                PyErr_Format(PyExc_ValueError,
                             "cjit: argument %d (counting array arguments in order) is donated "
                             "(donate_argnums) but shares memory with argument %d; the call could "
                             "overwrite it while reading it. Pass a copy, or do not donate it",
                             A->slot, B->slot);
                return -1;
            }
        }
    }
    return 0;
}

/* A donated argument must not share memory with a closed-over array either
 * (a global that is also passed, donated): the plan may write over it while
 * the function still reads the global.  ValueError, as for arguments. */
static int check_donated_closed_over(cj_py_executable *e, const cj_plan *p, void *const *params,
                                     void *const *arrays)
{
    if (p->donated == NULL)
        return 0;
    for (int a = 0; a < p->nbuffers; a++) {
        const cj_buffer *A = &p->buffers[a];
        if (A->kind != CJ_BUF_PARAM || !p->donated[A->slot] || A->nbytes == 0)
            continue;
        const char *lo = params[A->slot], *hi = lo + A->nbytes;
        for (int j = 0; j < e->narrays; j++) {
            int64_t n = cj_shape_numel(&e->array_shapes[j]) * cj_dtype_size(e->array_dtypes[j]);
            const char *blo = arrays[j], *bhi = blo + n;
            if (n > 0 && blo < hi && lo < bhi) {
                PyErr_Format(PyExc_ValueError,
                             "cjit: argument %d (counting array arguments in order) is donated "
                             "(donate_argnums) but shares memory with closed-over array %d (an "
                             "array the function reads from a global or a closure); the call "
                             "could overwrite it while reading it. Pass a copy, or do not donate it",
                             A->slot, j);
                return -1;
            }
        }
    }
    return 0;
}

/* Why the plan may not write into the bytes of argument `obj` although it
 * is donated, or NULL when it may.  It may when the array and every array
 * it is a view of are writeable, and the chain of bases ends in memory
 * NumPy allocated (OWNDATA), in a cjit output's block, or in a result
 * that lives in donated memory (DONATED_CAPSULE).  Anything else
 * (a memory-mapped file, a bytes object, memory of a C library) belongs to
 * someone who did not hand it over for writing.  Python scalars on the
 * fast path arrive as copies in the caller's key, so they may. */
static const char *donation_refused(PyObject *obj)
{
    if (!PyArray_Check(obj))
        return NULL;
    PyArrayObject *a = (PyArrayObject *)obj;
    for (;;) {
        if (!PyArray_ISWRITEABLE(a))
            return "it is read-only";
        if (PyArray_CHKFLAGS(a, NPY_ARRAY_OWNDATA))
            return NULL;
        PyObject *base = PyArray_BASE(a);
        if (base != NULL && PyArray_Check(base)) {
            a = (PyArrayObject *)base;
            continue;
        }
        if (base != NULL && (PyCapsule_IsValid(base, OUT_CAPSULE) || PyCapsule_IsValid(base, DONATED_CAPSULE)))
            return NULL;
        return "its memory is not NumPy's own (a memory-mapped file, a bytes object, a "
               "foreign buffer)";
    }
}

/* The stacklevel of a warning that points at the user's code: 1 plus the
 * frames of cjit's own Python files on top of the stack (none on the C
 * fast path, _call_slow's on the first call). */
static int user_stacklevel(void)
{
    int skipped = 0;
    Py_XDECREF(cj_py_user_frame(&skipped));
    return 1 + skipped;
}

/* The parameter pointers of one call, with every donated argument whose
 * memory may not be written replaced by a private copy (in *copies, a new
 * list, or NULL when none was needed), so that the plan, which may place
 * temporaries in a donated argument, stays valid and the caller's memory
 * is only read.  The first such call of an executable warns (UserWarning),
 * as JAX does when a donated buffer cannot be used.  Returns params
 * itself, or *owned (PyMem, caller frees), or NULL with an exception. */
static void *const *usable_donations(cj_py_executable *e, const cj_plan *p, void *const *params,
                                     PyObject *const *leaves, void ***owned, PyObject **copies)
{
    *owned = NULL;
    *copies = NULL;
    if (p->donated == NULL || leaves == NULL)
        return params;
    for (int slot = 0; slot < e->nparams; slot++) {
        if (!p->donated[slot])
            continue;
        const char *why = donation_refused(leaves[slot]);
        /* a Python scalar's bytes (in the fast path's key) cannot become a result */
        bool scalar = why == NULL && e->hosts_output != NULL && e->hosts_output[slot]
                      && !PyArray_Check(leaves[slot]);
        if (why == NULL && !scalar)
            continue;
        if (why != NULL && !e->warned_donation) {
            e->warned_donation = true;
            if (PyErr_WarnFormat(PyExc_UserWarning, user_stacklevel(),
                                 "cjit: argument %d (counting array arguments in order) is donated "
                                 "(donate_argnums) but its memory cannot be reused: %s. Each call "
                                 "copies it instead (this warning is given once per compiled "
                                 "signature)", slot, why) < 0)
                goto fail;
        }
        if (*owned == NULL) {
            *owned = PyMem_Malloc(((size_t)e->nparams + 1) * sizeof(void *));
            *copies = PyList_New(0);
            if (*owned == NULL || *copies == NULL) {
                PyErr_NoMemory();
                goto fail;
            }
            memcpy(*owned, params, (size_t)e->nparams * sizeof(void *));
        }
        PyObject *copy = scalar ? param_copy(e, slot, params[slot])
                                : PyArray_NewCopy((PyArrayObject *)leaves[slot], NPY_CORDER);   /* new ref */
        if (copy == NULL || PyList_Append(*copies, copy) < 0) {
            Py_XDECREF(copy);
            goto fail;
        }
        Py_DECREF(copy);   /* the list keeps it */
        (*owned)[slot] = PyArray_DATA((PyArrayObject *)copy);
    }
    return *owned != NULL ? *owned : params;
fail:
    PyMem_Free(*owned);
    *owned = NULL;
    Py_CLEAR(*copies);
    return NULL;
}

/* The data of every closed-over array for one call, in *data.  They are
 * held as the user made them (any strides, byte order, broadcast), so that
 * in-place changes show in every later call: a C-contiguous, aligned,
 * native array is read where it lies; any other is copied into a fresh
 * C-contiguous array for this call (kept alive in *copies, a new list, or
 * NULL when none was needed).  0, or -1 with an exception. */
static int closed_over_data(cj_py_executable *e, void **data, PyObject **copies)
{
    *copies = NULL;
    for (int j = 0; j < e->narrays; j++) {
        PyArrayObject *a = (PyArrayObject *)PyList_GET_ITEM(e->arrays, j);   /* borrowed */
        const cj_shape *s = &e->array_shapes[j];
        bool same = PyArray_NDIM(a) == s->rank && PyArray_TYPE(a) == cj_py_npy_type(e->array_dtypes[j]);
        for (int d = 0; same && d < s->rank; d++)
            same = PyArray_DIM(a, d) == s->dims[d];
        if (!same) {
            PyErr_Format(PyExc_RuntimeError, "Executable: closed-over array %d was resized or "
                         "changed dtype after tracing", j);
            goto fail;
        }
        if (PyArray_ISCARRAY_RO(a) && PyArray_ISNOTSWAPPED(a)) {
            data[j] = PyArray_DATA(a);
            continue;
        }
        PyArray_Descr *native = PyArray_DescrFromType(cj_py_npy_type(e->array_dtypes[j]));
        PyObject *c = native == NULL ? NULL
            : PyArray_FromArray(a, native /* stolen */, NPY_ARRAY_CARRAY_RO | NPY_ARRAY_ENSURECOPY
                                                        | NPY_ARRAY_ENSUREARRAY);
        if (c == NULL)
            goto fail;
        if ((*copies == NULL && (*copies = PyList_New(0)) == NULL) || PyList_Append(*copies, c) < 0) {
            Py_DECREF(c);
            goto fail;
        }
        Py_DECREF(c);   /* the list keeps it */
        data[j] = PyArray_DATA((PyArrayObject *)c);
    }
    return 0;
fail:
    Py_CLEAR(*copies);
    return -1;
}

/* See py_glue.h: executable_run without the argument checks, which the
 * caller's signature key has made. */
PyObject *cj_py_executable_run_ptrs(PyObject *exe, void *const *params_in, PyObject *const *leaves)
{
    cj_py_executable *e = (cj_py_executable *)exe;
    if (e->x == NULL || e->release_pending)
        return released_error();
    const cj_plan *plan = cj_executable_plan(e->x);
    if (check_not_consumed(e->nparams, leaves) < 0)
        return NULL;
    void **owned_params;
    PyObject *copies;
    void *const *params = usable_donations(e, plan, params_in, leaves, &owned_params, &copies);
    if (params == NULL)
        return NULL;
    if (check_donated(plan, params) < 0) {
        PyMem_Free(owned_params);
        Py_XDECREF(copies);
        return NULL;
    }
    PyObject *outs = NULL;
    void *stack[16];
    /* closed-over arrays' data, outputs' data, and the donated array each
     * output lives in (when the plan placed some there) */
    size_t nptr = (size_t)e->narrays + (size_t)e->noutputs * (e->out_donor != NULL ? 2 : 1);
    void **ptrs = nptr <= 16 ? stack : PyMem_Malloc(nptr * sizeof(void *));
    if (ptrs == NULL) {
        PyMem_Free(owned_params);
        Py_XDECREF(copies);
        return PyErr_NoMemory();
    }
    void **arrays = ptrs, **outputs = ptrs + e->narrays;
    PyArrayObject **donors = (PyArrayObject **)(outputs + e->noutputs);
    PyObject *array_copies = NULL;
    if (closed_over_data(e, arrays, &array_copies) < 0 || check_donated_closed_over(e, plan, params, arrays) < 0)
        goto fail;
    outs = PyList_New(e->noutputs);
    if (outs == NULL)
        goto fail;
    for (int k = 0; k < e->noutputs; k++) {
        if (e->out_donor != NULL && e->out_donor[k] >= 0) {
            /* lives in a donated argument: no memory of its own (runtime.c) */
            int slot = e->out_donor[k];
            donors[k] = donor_array(leaves, copies, slot, params[slot]);
            if (donors[k] == NULL) {
                PyErr_SetString(PyExc_RuntimeError, "cjit internal error: no array behind a "
                                "donated argument that holds an output");
                goto fail;
            }
            outputs[k] = NULL;
            continue;
        }
        PyObject *o = new_output(&e->out_shapes[k], e->out_dtypes[k], &outputs[k]);
        if (o == NULL)
            goto fail;
        PyList_SET_ITEM(outs, k, o);   /* steals o */
    }
    cj_error err = {0};
    cj_status st;
    cj_executable *x = e->x;
    Py_INCREF(exe);   /* the caller's reference may be a table's, cleared meanwhile */
    e->running++;
    PyThreadState *ts = PyEval_SaveThread();
    cj_run_poll poll = {.stop = run_interrupted, .ctx = &ts};
    st = cj_executable_run(x, params, arrays, outputs, &poll, &err);
    PyEval_RestoreThread(ts);
    consume_donations(plan, e->nparams, params, leaves);   /* their bytes may have been written */
    e->running--;
    if (e->running == 0 && e->release_pending)
        executable_free_code(e);
    Py_DECREF(exe);
    if (st != CJ_OK) {
        if (st != CJ_ERR_CANCELLED || !PyErr_Occurred())   /* else: the handler's exception */
            cj_py_raise(&err);
        goto fail;
    }
    for (int k = 0; e->out_donor != NULL && k < e->noutputs; k++) {
        if (e->out_donor[k] < 0)
            continue;
        PyObject *o = donated_output(donors[k], &e->out_shapes[k], e->out_dtypes[k]);
        if (o == NULL)
            goto fail;
        PyList_SET_ITEM(outs, k, o);   /* steals o; the slot was empty */
    }
    if (ptrs != stack)
        PyMem_Free(ptrs);
    PyMem_Free(owned_params);
    Py_XDECREF(copies);
    Py_XDECREF(array_copies);
    return outs;
fail:
    Py_XDECREF(outs);
    if (ptrs != stack)
        PyMem_Free(ptrs);
    PyMem_Free(owned_params);
    Py_XDECREF(copies);
    Py_XDECREF(array_copies);
    return NULL;
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

/* ---- introspection ---------------------------------------------------------------- */

static PyObject *executable_as_text(cj_py_executable *e, PyObject *unused)
{
    (void)unused;
    if (e->x == NULL)
        return released_error();
    return str_from_owned(cj_executable_to_text(e->x));
}

static int dict_set_steal(PyObject *d, const char *key, PyObject *v)
{
    if (v == NULL)
        return -1;
    int rc = PyDict_SetItemString(d, key, v);
    Py_DECREF(v);
    return rc;
}

static const char *buf_kind_name(cj_buf_kind k)
{
    switch (k) {
    case CJ_BUF_PARAM:
        return "param";
    case CJ_BUF_ARRAY:
        return "array";
    case CJ_BUF_OUTPUT:
        return "output";
    case CJ_BUF_TEMP:
        return "temp";
    }
    return "?";
}

static const cj_plan *sort_plan;   /* for by_size_desc; used under the GIL only */

static int by_size_desc(const void *pa, const void *pb)
{
    int a = *(const int *)pa, b = *(const int *)pb;
    int64_t sa = sort_plan->buffers[a].nbytes, sb = sort_plan->buffers[b].nbytes;
    if (sa != sb)
        return sa > sb ? -1 : 1;
    return a < b ? -1 : a > b;
}

/* A new dict describing buffer b of plan p (one entry of peak_live). */
static PyObject *buffer_dict(const cj_plan *p, const cj_buffer *b)
{
    const cj_graph *g = p->graph;
    const char *op = "?", *source = "?";
    if (g != NULL && b->node >= 0 && b->node < g->nnodes) {
        op = cj_op_name(g->nodes[b->node].op);
        source = cj_graph_loc_str(g, g->nodes[b->node].loc);
    }
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    if (dict_set_steal(d, "size", PyLong_FromLongLong(b->nbytes)) < 0
        || dict_set_steal(d, "op", PyUnicode_FromString(op)) < 0
        || dict_set_steal(d, "source", PyUnicode_DecodeUTF8(source, (Py_ssize_t)strlen(source),
                                                            "replace")) < 0
        || dict_set_steal(d, "kind", PyUnicode_FromString(buf_kind_name(b->kind))) < 0
        || dict_set_steal(d, "shape", cj_py_shape_tuple(&b->shape)) < 0
        || dict_set_steal(d, "dtype", PyUnicode_FromString(cj_dtype_name(b->dtype))) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* The buffers live during the peak kernel, largest first (a new list). */
static PyObject *peak_live_list(const cj_plan *p)
{
    PyObject *list = PyList_New(0);
    if (list == NULL || p->nbuffers <= 0)
        return list;
    int *idx = PyMem_Malloc((size_t)p->nbuffers * sizeof(int));
    if (idx == NULL) {
        Py_DECREF(list);
        return PyErr_NoMemory();
    }
    int n = 0;
    for (int i = 0; i < p->nbuffers; i++) {
        const cj_buffer *b = &p->buffers[i];
        /* a buffer living in another's bytes (in place, donated) adds none */
        if (b->alias_of < 0 && b->first_use <= p->peak_kernel && p->peak_kernel <= b->last_use)
            idx[n++] = i;
    }
    sort_plan = p;
    qsort(idx, (size_t)n, sizeof(int), by_size_desc);
    for (int k = 0; k < n; k++) {
        PyObject *d = buffer_dict(p, &p->buffers[idx[k]]);
        if (d == NULL || PyList_Append(list, d) < 0) {
            Py_XDECREF(d);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(d);
    }
    PyMem_Free(idx);
    return list;
}

static PyObject *executable_memory_analysis(cj_py_executable *e, PyObject *unused)
{
    (void)unused;
    if (e->x == NULL)
        return released_error();
    const cj_plan *p = cj_executable_plan(e->x);   /* borrowed, lives with e->x */
    if (p == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "cjit internal error: the executable has no memory plan");
        return NULL;
    }
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    if (dict_set_steal(d, "argument_size_in_bytes", PyLong_FromLongLong(p->argument_bytes)) < 0
        || dict_set_steal(d, "output_size_in_bytes", PyLong_FromLongLong(p->output_bytes)) < 0
        || dict_set_steal(d, "alias_size_in_bytes", PyLong_FromLongLong(p->alias_bytes)) < 0
        || dict_set_steal(d, "temp_size_in_bytes", PyLong_FromLongLong(p->temp_bytes)) < 0
        || dict_set_steal(d, "peak_memory_in_bytes", PyLong_FromLongLong(p->peak_bytes)) < 0
        || dict_set_steal(d, "num_kernels", PyLong_FromLong(p->ngroups)) < 0
        || dict_set_steal(d, "peak_live", peak_live_list(p)) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* One entry of memory_plan()["buffers"]: buffer_dict's description, plus
 * where its bytes are (arena offset, or the buffer it shares bytes with)
 * and its lifetime in group indices. */
static PyObject *plan_buffer_dict(const cj_plan *p, int i)
{
    const cj_buffer *b = &p->buffers[i];
    PyObject *d = buffer_dict(p, b);
    if (d == NULL)
        return NULL;
    if (dict_set_steal(d, "id", PyLong_FromLong(i)) < 0
        || dict_set_steal(d, "slot", PyLong_FromLong(b->slot)) < 0
        || dict_set_steal(d, "offset", PyLong_FromLongLong(b->offset)) < 0
        || dict_set_steal(d, "alias_of", b->alias_of >= 0 ? PyLong_FromLong(b->alias_of)
                                                          : Py_NewRef(Py_None)) < 0
        || dict_set_steal(d, "first_use", PyLong_FromLong(b->first_use)) < 0
        || dict_set_steal(d, "last_use", PyLong_FromLong(b->last_use)) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* The stages of group grp, in run order: a list of (label, source line of
 * the value the stage computes). */
static PyObject *plan_group_stages(const cj_plan *p, const cj_group *grp)
{
    PyObject *list = PyList_New(0);
    for (int k = grp->first; list != NULL && k < grp->first + grp->count; k++) {
        const cj_kernel *kern = &p->kernels[k];
        const char *source = "?";
        if (p->graph != NULL && kern->root_node >= 0 && kern->root_node < p->graph->nnodes)
            source = cj_graph_loc_str(p->graph, p->graph->nodes[kern->root_node].loc);
        PyObject *stage = Py_BuildValue("(sN)", kern->label ? kern->label : "?",
                                        PyUnicode_DecodeUTF8(source, (Py_ssize_t)strlen(source),
                                                             "replace"));
        if (stage == NULL || PyList_Append(list, stage) < 0)
            Py_CLEAR(list);
        Py_XDECREF(stage);
    }
    return list;
}

/* memory_plan(): the plan's buffers and groups as they are, for
 * Compiled.memory_timeline (python/cjit/_memory.py does the sums). */
static PyObject *executable_memory_plan(cj_py_executable *e, PyObject *unused)
{
    (void)unused;
    if (e->x == NULL)
        return released_error();
    const cj_plan *p = cj_executable_plan(e->x);   /* borrowed, lives with e->x */
    PyObject *buffers = PyList_New(p->nbuffers > 0 ? p->nbuffers : 0);
    PyObject *groups = PyList_New(p->ngroups > 0 ? p->ngroups : 0);
    PyObject *d = PyDict_New();
    if (buffers == NULL || groups == NULL || d == NULL)
        goto fail;
    for (int i = 0; i < p->nbuffers; i++) {
        PyObject *b = plan_buffer_dict(p, i);
        if (b == NULL)
            goto fail;
        PyList_SET_ITEM(buffers, i, b);   /* steals b */
    }
    for (int g = 0; g < p->ngroups; g++) {
        PyObject *stages = plan_group_stages(p, &p->groups[g]);
        if (stages == NULL)
            goto fail;
        PyList_SET_ITEM(groups, g, stages);   /* steals stages */
    }
    /* dict_set_steal lets go of the list whether it succeeds or not */
    int rc = dict_set_steal(d, "buffers", buffers);
    rc |= dict_set_steal(d, "groups", groups);
    if (rc < 0 || dict_set_steal(d, "arena_bytes", PyLong_FromLongLong(p->arena_bytes)) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
fail:
    Py_XDECREF(buffers);
    Py_XDECREF(groups);
    Py_XDECREF(d);
    return NULL;
}

static PyObject *executable_cost_analysis(cj_py_executable *e, PyObject *unused)
{
    (void)unused;
    if (e->x == NULL)
        return released_error();
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    if (dict_set_steal(d, "flops", PyLong_FromLongLong(cj_executable_flops(e->x))) < 0
        || dict_set_steal(d, "bytes_accessed",
                          PyLong_FromLongLong(cj_executable_bytes_accessed(e->x))) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
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

/* See py_glue.h (used by py_cuda.c). */
int cj_py_executable_parts(PyObject *obj, cj_executable **x, PyObject **arrays)
{
    if (!PyObject_TypeCheck(obj, &cj_py_ExecutableType)) {
        PyErr_Format(PyExc_TypeError, "expected a cjit._cjit.Executable, got %.200s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    cj_py_executable *e = (cj_py_executable *)obj;
    if (e->x == NULL || e->release_pending || e->arrays == NULL) {
        released_error();
        return -1;
    }
    *x = e->x;
    *arrays = e->arrays;
    return 0;
}

/* Readies Lowered and Executable and adds them to m.  0 or -1. */
int cj_py_exec_init(PyObject *m)
{
    if (PyType_Ready(&cj_py_LoweredType) < 0 || PyType_Ready(&cj_py_ExecutableType) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "Lowered", (PyObject *)&cj_py_LoweredType) < 0
        || PyModule_AddObjectRef(m, "Executable", (PyObject *)&cj_py_ExecutableType) < 0)
        return -1;
    return 0;
}
