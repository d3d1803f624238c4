/* py_lax.c - the one entry point cjit.lax needs from C: turning bodies
 * traced into the trace in progress into a region node (regions.h). */
#include "py_trace.h"
#include "regions.h"

#include <stdlib.h>
#include <string.h>

/* The node ids of a sequence of Tracers of tr into ids (PyMem, caller
 * frees); the count, or -1 with an exception set. */
static Py_ssize_t ids_of(cj_py_trace *tr, PyObject *obj, const char *what, int **ids)
{
    PyObject *seq = PySequence_Fast(obj, "lax_region: expected a sequence of traced values");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    *ids = PyMem_Malloc(sizeof(int) * (size_t)(n + 1));
    if (*ids == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        if (!Tracer_Check(o) || ((cj_py_tracer *)o)->trace != tr) {
            PyErr_Format(PyExc_TypeError, "lax_region: %s %zd is not a traced value of this trace", what, i);
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

/* lax_region(trace, kind, first, graphs, inputs, ncarry, nxs, length, reverse)
 * -> list of Tracers.  kind: "scan", "while", "cond", "custom_vjp" or
 * "custom_jvp" (nxs: the number of residuals); graphs: a list of
 * (placeholders, outputs) pairs, each traced since node `first`; inputs:
 * the region node's inputs before the consts (carries and xs; for cond the
 * index and the operands).  Returns the region's results. */
static PyObject *lax_region(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *trace_obj, *graphs, *inputs_obj;
    const char *kind;
    int first, ncarry, nxs, reverse;
    long long length;
    if (!PyArg_ParseTuple(args, "O!siOOiiLp:lax_region", &cj_py_TraceType, &trace_obj, &kind, &first, &graphs,
                          &inputs_obj, &ncarry, &nxs, &length, &reverse))
        return NULL;
    cj_py_trace *tr = (cj_py_trace *)trace_obj;
    if (tr->graph == NULL || tr->finished) {
        PyErr_SetString(PyExc_RuntimeError, "lax_region: the trace has finished");
        return NULL;
    }
    cj_op op;
    bool custom_vjp = !strcmp(kind, "custom_vjp"), custom_jvp = !strcmp(kind, "custom_jvp");
    if (custom_vjp || custom_jvp) {
        op = CJ_OP_CUSTOM;
        if (!PyList_Check(graphs) || PyList_GET_SIZE(graphs) != 2) {
            PyErr_SetString(PyExc_ValueError, "lax_region: a custom rule has two graphs (function, rule)");
            return NULL;
        }
    } else if (!cj_op_from_name(kind, &op) || cj_op_kind(op) != CJ_OPKIND_REGION || op == CJ_OP_RESULT ||
               op == CJ_OP_CUSTOM) {
        PyErr_Format(PyExc_ValueError, "lax_region: unknown kind '%s'", kind);
        return NULL;
    }
    if (!PyList_Check(graphs) || PyList_GET_SIZE(graphs) < 1 || PyList_GET_SIZE(graphs) > CJ_MAX_BRANCHES) {
        PyErr_Format(PyExc_ValueError, "lax_region: 1 to %d graphs expected", CJ_MAX_BRANCHES);
        return NULL;
    }
    cj_graph *g = tr->graph;
    int ngraphs = (int)PyList_GET_SIZE(graphs);
    int *consts = PyMem_Malloc(sizeof(int) * ((size_t)g->nnodes + 1)), nconsts = 0;
    int *ins = NULL, *ph = NULL, *outs = NULL;
    PyObject *result = NULL;
    cj_body *b = cj_body_new(op, ngraphs);
    cj_error err = {0};
    if (consts == NULL || b == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (int j = 0; j < ngraphs; j++) {
        PyObject *pair = PyList_GET_ITEM(graphs, j);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "lax_region: graphs must be (placeholders, outputs) pairs");
            goto done;
        }
        Py_ssize_t nph = ids_of(tr, PyTuple_GET_ITEM(pair, 0), "placeholder", &ph);
        Py_ssize_t nouts = nph < 0 ? -1 : ids_of(tr, PyTuple_GET_ITEM(pair, 1), "output", &outs);
        if (nouts < 0)
            goto done;
        b->graphs[j] = cj_region_extract(g, first, ph, (int)nph, outs, (int)nouts, consts, &nconsts, &err);
        PyMem_Free(ph);
        PyMem_Free(outs);
        ph = outs = NULL;
        if (b->graphs[j] == NULL) {
            cj_py_raise(&err);
            goto done;
        }
        if (op == CJ_OP_SCAN)
            b->nys = (int)nouts - ncarry;
    }
    b->ncarry = ncarry;
    b->nxs = op == CJ_OP_SCAN ? nxs : 0;
    b->nres = custom_vjp ? nxs : 0; /* a custom_vjp's residuals */
    b->jvp_rule = custom_jvp;
    b->nconsts = nconsts;
    b->length = length;
    b->reverse = reverse;
    if (cj_body_finish(b, &err) != CJ_OK) {
        cj_py_raise(&err);
        goto done;
    }
    Py_ssize_t nin = ids_of(tr, inputs_obj, "input", &ins);
    if (nin < 0)
        goto done;
    int *all = PyMem_Realloc(ins, sizeof(int) * ((size_t)nin + (size_t)nconsts + 1));
    if (all == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    ins = all;
    for (int k = 0; k < nconsts; k++)
        ins[nin + k] = consts[k];
    int loc = current_loc(g);
    int region = cj_build_region(g, b, ins, (int)nin + nconsts, loc, &err);
    if (region < 0) {
        cj_py_raise(&err);
        goto done;
    }
    result = PyList_New(b->nresults);
    for (int k = 0; result != NULL && k < b->nresults; k++) {
        int id = cj_build_result(g, region, k, loc, &err);
        PyObject *t = id < 0 ? cj_py_raise(&err) : tracer_wrap(tr, id);
        if (t == NULL)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, k, t);
    }
done:
    cj_body_unref(b);
    PyMem_Free(consts);
    PyMem_Free(ins);
    PyMem_Free(ph);
    PyMem_Free(outs);
    return result;
}

static PyMethodDef lax_methods[] = {
    {"lax_region", lax_region, METH_VARARGS,
     "lax_region(trace, kind, first, graphs, inputs, ncarry, nxs, length, reverse)\n--\n\n"
     "Cuts the bodies traced since `first` out of the trace into a scan, while or cond node; "
     "returns its results (cjit.lax)."},
    {NULL, NULL, 0, NULL},
};

/* See py_glue.h. */
int cj_py_lax_init(PyObject *m)
{
    return PyModule_AddFunctions(m, lax_methods);
}
