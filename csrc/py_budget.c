/* py_budget.c - memory_budget as an object: MemoryBudget holds the whole
 * search in one struct (the budget, the candidate being traced, the tries
 * and their peaks, the best plan so far) and travels on the Trace.
 *
 * grad(memory_budget=N) asks it of the trace it runs in
 * (Trace.request_memory_budget); Trace.finish hands it to the Lowered.  The
 * jitted function then starts the search (start: the peak as traced, with
 * its donated arguments) and retraces with Trace(budget=b, candidate=...)
 * for each candidate it chooses: the trace hands the candidate to b, the
 * trace's grad vjp reads it from b (the values to recompute, or the chain
 * schedule), lax.scan its split, and Trace.finish runs the oracle
 * (cj_plan_peak: the compile's own options, through memplan) and records
 * the try in b.  Per candidate no call crosses into C but the trace's own.  Nothing of the
 * search lives anywhere else: no global keyed by a trace, no thread-local
 * state.  Which candidates to propose, and in which order, is _budget.py's. */
#include "autodiff.h"
#include "py_trace.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

enum { TRY_AS_TRACED, TRY_CHAIN, TRY_SCANS, TRY_RECOMPUTE };
static const char *const try_names[] = {"as traced", "chain", "scans", "recompute"};

typedef struct {
    PyObject_HEAD
    int64_t budget;             /* bytes the plan's peak must fit in */
    bool searching;             /* started: retraces carry it */
    bool *donated;              /* PyMem, per parameter: the jitted function's donation */
    cj_compile_options options; /* the compile's, made once at start: the oracle's */
    int64_t peak;               /* the plan as traced */
    /* the candidate the next retrace follows */
    int kind;
    int64_t param, cost;        /* chain: slots; scans: levels; recompute: the set's index */
    bool *force;                /* PyMem, by node id: forward values to recompute */
    int nforce;
    cj_chain_schedule chain;    /* PyMem (chain.bound's block) */
    bool has_chain, chain_given;
    /* what was tried */
    PyObject *tried;            /* list of (kind, param, cost, peak) */
    int64_t last_peak, least;
    PyObject *best;             /* the Lowered of the fitting try of least cost, or NULL */
    int64_t best_cost;
} cj_py_budget;

static void drop_candidate(cj_py_budget *b)
{
    PyMem_Free(b->force);
    if (b->has_chain)
        PyMem_Free((void *)b->chain.bound);
    b->force = NULL;
    b->nforce = 0;
    b->has_chain = b->chain_given = false;
    b->kind = TRY_AS_TRACED;
    b->param = b->cost = 0;
}

/* MemoryBudget(nbytes): a search not started yet. */
static PyObject *budget_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"nbytes", NULL};
    long long nbytes;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "L:MemoryBudget", kwlist, &nbytes))
        return NULL;
    if (nbytes <= 0) {
        PyErr_Format(PyExc_ValueError, "MemoryBudget: the budget must be a positive number of bytes, got %lld",
                     nbytes);
        return NULL;
    }
    cj_py_budget *b = (cj_py_budget *)type->tp_alloc(type, 0); /* zeroed */
    if (b == NULL)
        return NULL;
    b->budget = nbytes;
    b->least = INT64_MAX;
    b->tried = PyList_New(0);
    if (b->tried == NULL) {
        Py_DECREF(b);
        return NULL;
    }
    return (PyObject *)b;
}

static int budget_traverse(cj_py_budget *b, visitproc visit, void *arg)
{
    Py_VISIT(b->tried);
    Py_VISIT(b->best);
    return 0;
}

static int budget_clear(cj_py_budget *b)
{
    Py_CLEAR(b->tried);
    Py_CLEAR(b->best);
    return 0;
}

static void budget_dealloc(cj_py_budget *b)
{
    PyObject_GC_UnTrack(b);
    budget_clear(b);
    drop_candidate(b);
    PyMem_Free(b->donated);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

/* The oracle: the peak of g's plan under the compile's options, recorded
 * as a try of the candidate in play; the best plan so far is `lowered`
 * when it fits and costs less than the best.  0 or -1. */
static int measure(cj_py_budget *b, PyObject *lowered, const cj_graph *g)
{
    cj_error err = {0};
    int64_t peak = 0;
    cj_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cj_plan_peak(g, &b->options, &peak, &err);
    Py_END_ALLOW_THREADS
    if (st != CJ_OK) {
        cj_py_raise(&err);
        return -1;
    }
    PyObject *item = Py_BuildValue("(sLLL)", try_names[b->kind], (long long)b->param, (long long)b->cost,
                                   (long long)peak);
    if (item == NULL || PyList_Append(b->tried, item) < 0) {
        Py_XDECREF(item);
        return -1;
    }
    Py_DECREF(item);
    b->last_peak = peak;
    if (peak < b->least)
        b->least = peak;
    if (peak <= b->budget && (b->best == NULL || b->cost < b->best_cost)) {
        Py_XSETREF(b->best, Py_NewRef(lowered));
        b->best_cost = b->cost;
    }
    return 0;
}

/* start(lowered, donate) -> bool: the search begins with the plan as
 * traced (`lowered`, whose trace asked for the budget) and the jitted
 * function's donated parameter slots; True when that plan fits. */
static PyObject *budget_start(cj_py_budget *b, PyObject *args)
{
    PyObject *lowered, *donate;
    if (!PyArg_ParseTuple(args, "OO:start", &lowered, &donate))
        return NULL;
    const cj_graph *g;
    PyObject *arrays;
    if (cj_py_lowered_parts(lowered, &g, &arrays) < 0)
        return NULL;
    if (b->searching) {
        PyErr_SetString(PyExc_RuntimeError, "MemoryBudget.start: the search has started already");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(donate, "MemoryBudget.start: donate must be a sequence of ints");
    if (seq == NULL)
        return NULL;
    b->donated = PyMem_Calloc((size_t)g->nparams + 1, sizeof(bool));
    if (b->donated == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        long slot = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (slot == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
        if (slot >= 0 && slot < g->nparams)
            b->donated[slot] = true;
    }
    Py_DECREF(seq);
    /* the options compile() will use; the oracle stops them after memplan */
    b->options = cj_compile_options_make(&cj_backend_cpu, b->donated, g->nparams, false, CJ_STEP_LINK);
    b->searching = true;
    drop_candidate(b);
    if (measure(b, lowered, g) < 0)
        return NULL;
    b->peak = b->last_peak;
    return PyBool_FromLong(b->best != NULL);
}

/* Reads a chain schedule (bounds, keep, stores) as Trace.vjp takes it:
 * node ids, one truth value per bound, and (layer, position) pairs; the
 * arrays are PyMem_Malloc'd into one block at s->bound.  Returns 0, or -1
 * with an exception set.  (py_trace.h: Trace.vjp reads one; memory_budget's propose too.) */
int cj_py_chain_schedule_from(PyObject *obj, cj_chain_schedule *s)
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

/* See py_glue.h. */
int cj_py_budget_propose(PyObject *self, PyObject *candidate)
{
    cj_py_budget *b = (cj_py_budget *)self;
    const char *kind;
    long long param, cost;
    PyObject *payload = Py_None;
    if (!PyTuple_Check(candidate)) {
        PyErr_SetString(PyExc_TypeError, "Trace: candidate must be a tuple (kind, param, cost[, payload])");
        return -1;
    }
    if (!PyArg_ParseTuple(candidate, "sLL|O;Trace: candidate must be (kind, param, cost[, payload])", &kind,
                          &param, &cost, &payload))
        return -1;
    drop_candidate(b);
    if (strcmp(kind, "chain") == 0) {
        if (cj_py_chain_schedule_from(payload, &b->chain) < 0)
            return -1;
        b->has_chain = true;
        b->kind = TRY_CHAIN;
    } else if (strcmp(kind, "scans") == 0) {
        if (param < 1 || param > 64) {
            PyErr_Format(PyExc_ValueError, "Trace: candidate: %lld scan levels", param);
            return -1;
        }
        b->kind = TRY_SCANS;
    } else if (strcmp(kind, "recompute") == 0) {
        PyObject *seq = PySequence_Fast(payload, "Trace: candidate: recompute takes a sequence of node ids");
        if (seq == NULL)
            return -1;
        long most = -1;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
            long id = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
            if (id == -1 && PyErr_Occurred()) {
                Py_DECREF(seq);
                return -1;
            }
            if (id > most && id < INT32_MAX)
                most = id;
        }
        b->force = PyMem_Calloc((size_t)most + 2, sizeof(bool));
        if (b->force == NULL) {
            Py_DECREF(seq);
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
            long id = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
            if (id >= 0 && id <= most)
                b->force[id] = true;
        }
        b->nforce = (int)most + 1;
        Py_DECREF(seq);
        b->kind = TRY_RECOMPUTE;
    } else {
        PyErr_Format(PyExc_ValueError, "Trace: candidate: unknown kind '%s' (chain, scans, recompute)", kind);
        return -1;
    }
    b->param = param;
    b->cost = cost;
    return 0;
}

/* ---- what the trace asks of the budget it carries (py_glue.h) ---------------- */

bool cj_py_budget_searching(PyObject *b) { return b != NULL && ((cj_py_budget *)b)->searching; }

int cj_py_budget_request(PyObject **slot, long long nbytes)
{
    if (*slot == NULL) {
        *slot = PyObject_CallFunction((PyObject *)&cj_py_MemoryBudgetType, "L", nbytes);
        return *slot == NULL ? -1 : 0;
    }
    cj_py_budget *b = (cj_py_budget *)*slot;
    if (!b->searching && nbytes < b->budget) /* a retrace asks again: its search has the budget */
        b->budget = nbytes;
    return 0;
}

const bool *cj_py_budget_force(PyObject *b, int *n)
{
    cj_py_budget *s = (cj_py_budget *)b;
    *n = cj_py_budget_searching(b) ? s->nforce : 0;
    return *n > 0 ? s->force : NULL;
}

const cj_chain_schedule *cj_py_budget_take_chain(PyObject *b, int first)
{
    cj_py_budget *s = (cj_py_budget *)b;
    /* one vjp only: the first whose differentiated nodes start at or
     * before the chain's first layer */
    if (!cj_py_budget_searching(b) || !s->has_chain || s->chain_given || first > s->chain.bound[1])
        return NULL;
    s->chain_given = true;
    return &s->chain;
}

int cj_py_budget_record(PyObject *b, PyObject *lowered)
{
    const cj_graph *g;
    PyObject *arrays;
    if (cj_py_lowered_parts(lowered, &g, &arrays) < 0)
        return -1;
    return measure((cj_py_budget *)b, lowered, g);
}

/* ---- the type ------------------------------------------------------------------ */

static PyObject *budget_get_int(cj_py_budget *b, void *which)
{
    switch ((int)(intptr_t)which) {
    case 0: return PyLong_FromLongLong(b->budget);
    case 1: return PyLong_FromLongLong(b->peak);
    case 2: return PyLong_FromLongLong(b->least == INT64_MAX ? 0 : b->least);
    case 3: return PyLong_FromLongLong(b->last_peak);
    default: return PyLong_FromLong(b->searching && b->kind == TRY_SCANS ? (long)b->param : 1);
    }
}

static PyObject *budget_get_searching(cj_py_budget *b, void *c)
{
    (void)c;
    return PyBool_FromLong(b->searching);
}

static PyObject *budget_get_best(cj_py_budget *b, void *c)
{
    (void)c;
    return Py_NewRef(b->best != NULL ? b->best : Py_None);
}

static PyObject *budget_get_tried(cj_py_budget *b, void *c)
{
    (void)c;
    return PyList_GetSlice(b->tried, 0, PyList_GET_SIZE(b->tried));
}

static PyGetSetDef budget_getset[] = {
    {"budget", (getter)budget_get_int, NULL, "bytes the plan's peak must fit in", (void *)0},
    {"peak", (getter)budget_get_int, NULL, "the peak of the plan as traced (after start)", (void *)1},
    {"least", (getter)budget_get_int, NULL, "the least peak tried", (void *)2},
    {"last_peak", (getter)budget_get_int, NULL, "the peak of the last try", (void *)3},
    {"scan_levels", (getter)budget_get_int, NULL, "the levels the candidate splits each scan into (1: none)",
     (void *)4},
    {"searching", (getter)budget_get_searching, NULL, "the search has started", NULL},
    {"best", (getter)budget_get_best, NULL, "the Lowered of the fitting try of least cost, or None", NULL},
    {"tried", (getter)budget_get_tried, NULL, "(kind, param, cost, peak) of each try, in order", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef budget_methods[] = {
    {"start", (PyCFunction)budget_start, METH_VARARGS,
     "start($self, lowered, donate, /)\n--\n\nBegins the search with the plan as traced; True when it fits."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject cj_py_MemoryBudgetType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cjit._cjit.MemoryBudget",
    .tp_basicsize = sizeof(cj_py_budget),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "MemoryBudget(nbytes)\n--\n\nmemory_budget's search, carried on the traces it makes.",
    .tp_new = budget_new,
    .tp_dealloc = (destructor)budget_dealloc,
    .tp_traverse = (traverseproc)budget_traverse,
    .tp_clear = (inquiry)budget_clear,
    .tp_methods = budget_methods,
    .tp_getset = budget_getset,
};

/* Readies MemoryBudget and adds it to m.  0 or -1. */
int cj_py_budget_init(PyObject *m)
{
    if (PyType_Ready(&cj_py_MemoryBudgetType) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "MemoryBudget", (PyObject *)&cj_py_MemoryBudgetType);
}
