/* py_exec_out.c - an Executable's results as NumPy arrays: over malloc'd
 * memory, or over a donated argument's bytes; and donated arguments that
 * a call consumed (read-only afterwards, refused by later calls). */
#include "py_exec.h"

#include <stdlib.h>
#include <string.h>

/* ---- outputs: NumPy arrays over malloc'd memory ---------------------------- */

#define OUT_ALIGN 64        /* room for the header, and aligned for vector code */

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

/* A new read-only C-contiguous array (a cjit.Array once registered) of
 * shape s and dtype dt whose memory
 * is counted by the runtime until NumPy frees it; *data is its buffer. */
PyObject *new_output(const cj_shape *s, cj_dtype dt, void **data)
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
    PyObject *arr = PyArray_NewFromDescr(cj_py_result_type(), descr /* stolen */, s->rank, dims, NULL,
                                         block + OUT_ALIGN, NPY_ARRAY_CARRAY_RO, NULL);
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
PyObject *donated_output(PyArrayObject *donor, const cj_shape *s, cj_dtype dt)
{
    PyObject *keeper = memory_keeper(donor);   /* new ref */
    if (keeper == NULL)
        return NULL;
    npy_intp dims[CJ_MAX_RANK];
    for (int d = 0; d < s->rank; d++)
        dims[d] = (npy_intp)s->dims[d];
    PyArray_Descr *descr = PyArray_DescrFromType(cj_py_npy_type(dt));   /* new ref */
    PyObject *arr = descr == NULL ? NULL
        : PyArray_NewFromDescr(cj_py_result_type(), descr /* stolen */, s->rank, dims, NULL,
                               PyArray_DATA(donor), NPY_ARRAY_CARRAY_RO, NULL);
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
PyObject *param_copy(cj_py_executable *e, int slot, const void *data)
{
    const cj_shape *s = &e->param_shapes[slot];
    npy_intp dims[CJ_MAX_RANK];
    for (int d = 0; d < s->rank; d++)
        dims[d] = (npy_intp)s->dims[d];
    PyArray_Descr *descr = PyArray_DescrFromType(cj_py_npy_type(e->param_dtypes[slot]));   /* new ref */
    PyObject *a = descr == NULL ? NULL
        : PyArray_NewFromDescr(cj_py_result_type(), descr /* stolen */, s->rank, dims, NULL, NULL, 0, NULL);
    if (a != NULL) {
        memcpy(PyArray_DATA((PyArrayObject *)a), data, (size_t)PyArray_NBYTES((PyArrayObject *)a));
        PyArray_CLEARFLAGS((PyArrayObject *)a, NPY_ARRAY_WRITEABLE);
    }
    return a;
}

/* The array whose bytes are parameter slot's in this call: the argument
 * itself, or the private copy made for it (in `copies`).  Borrowed, or
 * NULL when neither is (cannot happen: usable_donations copies every
 * donated argument that holds an output and is not an array). */
PyArrayObject *donor_array(PyObject *const *leaves, PyObject *copies, int slot, const void *data)
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
    if (cj_py.deleted_type != NULL && Py_TYPE(a) == cj_py.deleted_type)
        return true;
    if (Py_TYPE(a) == cj_py.array_type)
        return false;   /* a consumed cjit.Array changed its type (consume_donations) */
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
int check_not_consumed(int nparams, PyObject *const *leaves)
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
void consume_donations(const cj_plan *p, int nparams, void *const *params, PyObject *const *leaves)
{
    if (p->donated == NULL || leaves == NULL)
        return;
    for (int slot = 0; slot < nparams; slot++) {
        if (p->donated[slot] && PyArray_Check(leaves[slot])
            && PyArray_DATA((PyArrayObject *)leaves[slot]) == params[slot]) {
            PyArray_CLEARFLAGS((PyArrayObject *)leaves[slot], NPY_ARRAY_WRITEABLE);
            if (Py_TYPE(leaves[slot]) == cj_py.array_type && cj_py.deleted_type != NULL) {
                /* a cjit.Array is deleted, as JAX deletes donated arrays */
                if (PyObject_SetAttrString(leaves[slot], "__class__", (PyObject *)cj_py.deleted_type) < 0)
                    PyErr_Clear();
                else
                    continue;
            }
            remember_consumed(leaves[slot]);
        }
    }
}
