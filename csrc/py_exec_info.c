/* py_exec_info.c - a plan's introspection in Python objects: its text,
 * memory_analysis(), memory_plan() and cost_analysis(), for an Executable
 * and (through the cj_py_plan_* functions) for a CudaProgram. */
#include "py_exec.h"
#include "blockmem.h"

#include <stdlib.h>
#include <string.h>

/* ---- introspection ---------------------------------------------------------------- */

PyObject *executable_as_text(cj_py_executable *e, PyObject *unused)
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
    int64_t sa = cj_buffer_bytes(&sort_plan->buffers[a]), sb = cj_buffer_bytes(&sort_plan->buffers[b]);
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
    /* the bytes it takes: its block storage (blockmem.c), or the array */
    if (dict_set_steal(d, "size", PyLong_FromLongLong(cj_buffer_bytes(b))) < 0
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

PyObject *executable_memory_analysis(cj_py_executable *e, PyObject *unused)
{
    (void)unused;
    if (e->x == NULL)
        return released_error();
    return cj_py_plan_memory_analysis(cj_executable_plan(e->x));   /* the plan lives with e->x */
}

/* See py_glue.h. */
PyObject *cj_py_plan_memory_analysis(const cj_plan *p)
{
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
        || dict_set_steal(d, "last_use", PyLong_FromLong(b->last_use)) < 0
        /* block storage: rows per block of its group, and the array's bytes */
        || dict_set_steal(d, "block_rows", b->block_storage > 0 ? PyLong_FromLongLong(p->groups[b->first_use].local_block)
                                                                 : Py_NewRef(Py_None)) < 0
        || dict_set_steal(d, "array_bytes", PyLong_FromLongLong(b->nbytes)) < 0
        /* a block on the stack: its bytes in each running thread's frame */
        || dict_set_steal(d, "stack_bytes", PyLong_FromLongLong(b->block_on_stack ? cj_block_stride(p, &p->groups[b->first_use], b)
                                                                                 : 0)) < 0) {
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
PyObject *executable_memory_plan(cj_py_executable *e, PyObject *unused)
{
    (void)unused;
    if (e->x == NULL)
        return released_error();
    return cj_py_plan_memory_plan(cj_executable_plan(e->x));   /* the plan lives with e->x */
}

/* See py_glue.h. */
PyObject *cj_py_plan_memory_plan(const cj_plan *p)
{
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

/* cost_analysis()'s dict. */
static PyObject *cost_dict(int64_t flops, int64_t bytes)
{
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    if (dict_set_steal(d, "flops", PyLong_FromLongLong(flops)) < 0
        || dict_set_steal(d, "bytes_accessed", PyLong_FromLongLong(bytes)) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

PyObject *executable_cost_analysis(cj_py_executable *e, PyObject *unused)
{
    (void)unused;
    if (e->x == NULL)
        return released_error();
    return cost_dict(cj_executable_flops(e->x), cj_executable_bytes_accessed(e->x));
}

/* See py_glue.h. */
PyObject *cj_py_plan_costs(const cj_plan *p)
{
    int64_t flops, bytes;
    cj_plan_costs(p, &flops, &bytes);
    return cost_dict(flops, bytes);
}
