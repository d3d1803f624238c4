/* py_trace_ad.c - the transformations' entry points on a Trace: vjp (with
 * chain schedules, checkpoint regions and memory_budget's candidates), jvp and
 * batch, which append to the graph through autodiff.c, jvp.c and
 * batching.c. */
#include "autodiff.h"
#include "batching.h"
#include "jvp.h"
#include "py_trace.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
PyObject *trace_mark(cj_py_trace *tr, PyObject *unused)
{
    (void)unused;
    if (trace_check_live(tr, "mark") < 0)
        return NULL;
    return PyLong_FromLong(tr->graph->nnodes);
}

/* memory_budget's recomputation for a retrace: the forward values its
 * candidate names (ids below the graph's size now) are recomputed by this
 * and every later vjp instead of kept.  0 or -1. */
static int force_budget_remat(cj_py_trace *tr)
{
    int n;
    const bool *force = cj_py_budget_force(tr->budget, &n);
    if (force == NULL)
        return 0;
    cj_graph *g = tr->graph;
    bool *flags = calloc((size_t)g->nnodes + 1, sizeof(bool));
    if (flags == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < n && i < g->nnodes; i++)
        flags[i] = force[i];
    free(g->force_remat);
    g->force_remat = flags;
    g->nforce_remat = g->nnodes;
    return 0;
}

/* Trace.vjp(outputs, cotangents, wrt, first, chain=None, budget=None) ->
 * list of Tracers: appends the reverse-mode gradient (csrc/autodiff.c);
 * nodes older than `first` are constants.  `chain` is a binomial
 * checkpointing schedule (see cj_chain_schedule).  `budget` is grad's: the
 * bytes of its memory_budget (0: none asked), which the trace carries to
 * its jitted function; a retrace of a memory_budget search follows the
 * search's candidate in grad's vjps (its values to recompute, or its
 * chain schedule). */
PyObject *trace_vjp(cj_py_trace *tr, PyObject *args)
{
    PyObject *outs_obj, *cts_obj, *wrt_obj, *chain_obj = Py_None, *budget_obj = Py_None;
    int first;
    if (!PyArg_ParseTuple(args, "OOOi|OO:vjp", &outs_obj, &cts_obj, &wrt_obj, &first, &chain_obj, &budget_obj))
        return NULL;
    if (trace_check_live(tr, "vjp") < 0)
        return NULL;
    long long nbytes = budget_obj == Py_None ? -1 : PyLong_AsLongLong(budget_obj);
    if (nbytes == -1 && PyErr_Occurred())
        return NULL;
    if (nbytes > 0 && cj_py_budget_request(&tr->budget, nbytes) < 0)
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
        if (cj_py_chain_schedule_from(chain_obj, &chain) < 0)
            goto done;
        has_chain = true;
    }
    const cj_chain_schedule *follow = has_chain ? &chain : NULL;
    if (nbytes >= 0 && cj_py_budget_searching(tr->budget)) {
        if (force_budget_remat(tr) < 0)
            goto done;
        if (follow == NULL)
            follow = cj_py_budget_take_chain(tr->budget, first); /* the search's, borrowed */
    }
    cj_error err = {0};
    if (cj_autodiff_vjp_scheduled(tr->graph, first, outs, cts, (int)nouts, wrt, (int)nwrt, grads, follow,
                                  &err) != CJ_OK) {
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

/* The id lists of Trace.jvp and Trace.batch, from objs: two that go in
 * pairs (inputs and tangents; placeholders and batched inputs), then the
 * outputs, into ids[0..2], and room for one result per output in ids[3].
 * Returns the number of pairs, with *nouts set, or -1 with an exception
 * set.  The caller frees ids[0..3] (PyMem) either way. */
static Py_ssize_t paired_ids(cj_py_trace *tr, const char *method, PyObject *const objs[3],
                             const char *const what[3], int *ids[4], Py_ssize_t *nouts)
{
    Py_ssize_t n0 = tracer_ids(tr, objs[0], what[0], &ids[0]);
    Py_ssize_t n1 = n0 < 0 ? -1 : tracer_ids(tr, objs[1], what[1], &ids[1]);
    *nouts = n1 < 0 ? -1 : tracer_ids(tr, objs[2], what[2], &ids[2]);
    if (*nouts < 0)
        return -1;
    if (n1 != n0) {
        PyErr_Format(PyExc_ValueError, "Trace.%s: %zd %ss but %zd %ss", method, n0, what[0], n1, what[1]);
        return -1;
    }
    ids[3] = PyMem_Malloc((size_t)(*nouts > 0 ? *nouts : 1) * sizeof(int));
    if (ids[3] == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return n0;
}

/* Trace.jvp(wrt, tangents, outputs, first) -> list of Tracers (None for a
 * zero tangent): appends the forward-mode tangents (csrc/jvp.c); nodes older
 * than `first` are constants. */
PyObject *trace_jvp(cj_py_trace *tr, PyObject *args)
{
    PyObject *objs[3];   /* wrt, tangents, outputs */
    int first;
    if (!PyArg_ParseTuple(args, "OOOi:jvp", &objs[0], &objs[1], &objs[2], &first))
        return NULL;
    if (trace_check_live(tr, "jvp") < 0)
        return NULL;
    static const char *const what[3] = {"input", "tangent", "output"};
    int *ids[4] = {NULL, NULL, NULL, NULL};
    Py_ssize_t nouts, n = paired_ids(tr, "jvp", objs, what, ids, &nouts);
    PyObject *result = NULL;
    cj_error err = {0};
    if (n >= 0) {
        if (cj_jvp(tr->graph, first, ids[0], ids[1], (int)n, ids[2], (int)nouts, ids[3], &err) != CJ_OK)
            cj_py_raise(&err);
        else
            result = tracer_list(tr, ids[3], nouts);
    }
    for (int i = 0; i < 4; i++)
        PyMem_Free(ids[i]);
    return result;
}

/* Trace.batch(placeholders, batched, size, outputs, first) -> list of
 * Tracers (None for an output that does not depend on the batched inputs):
 * appends a copy of the nodes since `first` with a leading batch dimension
 * of `size`, where placeholders[i] (a per-example node) stands for
 * batched[i] (its batch dimension in front); csrc/batching.c. */
PyObject *trace_batch(cj_py_trace *tr, PyObject *args)
{
    PyObject *objs[3];   /* placeholders, batched, outputs */
    long long size;
    int first;
    if (!PyArg_ParseTuple(args, "OOLOi:batch", &objs[0], &objs[1], &size, &objs[2], &first))
        return NULL;
    if (trace_check_live(tr, "batch") < 0)
        return NULL;
    static const char *const what[3] = {"placeholder", "batched input", "output"};
    int *ids[4] = {NULL, NULL, NULL, NULL};
    Py_ssize_t nouts, n = paired_ids(tr, "batch", objs, what, ids, &nouts);
    PyObject *result = NULL;
    cj_error err = {0};
    if (n >= 0) {
        if (cj_batch(tr->graph, first, ids[0], ids[1], (int)n, (int64_t)size, ids[2], (int)nouts, ids[3], &err)
            != CJ_OK)
            cj_py_raise(&err);
        else
            result = tracer_list(tr, ids[3], nouts);
    }
    for (int i = 0; i < 4; i++)
        PyMem_Free(ids[i]);
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
PyObject *trace_region_begin(cj_py_trace *tr, PyObject *args)
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
PyObject *trace_region_end(cj_py_trace *tr, PyObject *arg)
{
    long id = PyLong_AsLong(arg);
    if (id == -1 && PyErr_Occurred())
        return NULL;
    if (!tr->finished && tr->graph != NULL)
        cj_graph_region_end(tr->graph, (int)id);
    Py_RETURN_NONE;
}
