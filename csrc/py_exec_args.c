/* py_exec_args.c - an Executable's calls: its arguments checked (dtypes
 * and shapes for Executable.__call__, donated arguments that overlap
 * others or cannot be written, the closed-over arrays of one call) and the
 * run on checked pointers that every call ends in (the jit fast path calls
 * it directly). */
#include "py_exec.h"

#include <stdlib.h>
#include <string.h>

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

/* Whether array a has shape s. */
static bool has_shape(PyArrayObject *a, const cj_shape *s)
{
    bool same = PyArray_NDIM(a) == s->rank;
    for (int d = 0; same && d < s->rank; d++)
        same = PyArray_DIM(a, d) == s->dims[d];
    return same;
}

/* Checks argument i and returns its data pointer via *data.  0 or -1. */
static int check_argument(cj_py_executable *e, int i, PyObject *a, void **data)
{
    cj_dtype dt;
    if (!PyArray_Check(a) || !cj_py_dtype_from_descr(PyArray_DESCR((PyArrayObject *)a), &dt)
        || dt != e->param_dtypes[i] || !has_shape((PyArrayObject *)a, &e->param_shapes[i]))
        return bad_argument(e, i, a, "");
    if (!PyArray_ISCARRAY_RO((PyArrayObject *)a))
        return bad_argument(e, i, a, " (not C-contiguous and aligned)");
    *data = PyArray_DATA((PyArrayObject *)a);
    return 0;
}

/* Runs the executable on the sequence `argseq`: checks every argument,
 * then runs as the cached-call path does.  Returns a new list of output
 * arrays. */
PyObject *executable_run(cj_py_executable *e, PyObject *argseq)
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


/* A donated argument's bytes may hold temporaries while the call runs, so
 * it must not share memory with another argument (f(x, x) with argument 0
 * donated), nor with a closed-over array (a global that is also passed,
 * donated), which would still be read: raises ValueError, as JAX does.
 * Arrays are contiguous here, so a buffer's bytes are [data, data + nbytes). */
int check_donated(cj_py_executable *e, const cj_plan *p, void *const *params, void *const *arrays)
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
        /* a cjit.Array is read-only to its users, not to the cjit call it
         * is donated to */
        if (!PyArray_ISWRITEABLE(a) && !(cj_py.array_type != NULL
                                         && PyObject_TypeCheck((PyObject *)a, cj_py.array_type)))
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
void *const *usable_donations(cj_py_executable *e, const cj_plan *p, void *const *params,
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
int closed_over_data(cj_py_executable *e, void **data, PyObject **copies)
{
    *copies = NULL;
    for (int j = 0; j < e->narrays; j++) {
        PyArrayObject *a = (PyArrayObject *)PyList_GET_ITEM(e->arrays, j);   /* borrowed */
        const cj_shape *s = &e->array_shapes[j];
        /* equivalent type numbers: an array of C long long is int64 (or uint64) too */
        if (!PyArray_EquivTypenums(PyArray_TYPE(a), cj_py_npy_type(e->array_dtypes[j])) || !has_shape(a, s)) {
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

/* ---- a call on checked pointers -------------------------------------------- */

/* The error of a call to an executable whose code release() freed. */
PyObject *released_error(void)
{
    PyErr_SetString(PyExc_RuntimeError, "cjit: this executable's machine code was freed by its "
                    "release() method; compile the function again to call it");
    return NULL;
}

/* Frees e's machine code (release(), or the last call in flight after it). */
void executable_free_code(cj_py_executable *e)
{
    cj_executable *x = e->x;
    e->x = NULL;                /* first: other threads may run while it is freed */
    e->release_pending = false;
    free_executable_gil_released(x);
}

/* See py_glue.h. */
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
    if (closed_over_data(e, arrays, &array_copies) < 0 || check_donated(e, plan, params, arrays) < 0)
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
