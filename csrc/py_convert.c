/* py_convert.c - what every binding file shares: the process-wide state
 * and the NumPy C-API table (filled by cj_py_import_numpy), the one place
 * where a cj_status becomes a Python exception, the functions cjit.numpy
 * registered for the Tracer, dtype/shape conversions, and the user's frame.
 * It uses no other py_*.c file: the bindings above it share these, and
 * py_module.c (the module's init and its functions) is the top. */
#define CJ_PY_IMPORT_ARRAY /* this file holds the NumPy C-API table */
#include "py_glue.h"

#include <limits.h>

#include <stdio.h>
#include <string.h>

/* See py_glue.h for why this is a static struct and not module state. */
cj_py_state cj_py;

/* ---- errors ------------------------------------------------------------ */

/* Sets the exception matching err and returns NULL (see py_glue.h). */
PyObject *cj_py_raise(const cj_error *err)
{
    PyObject *type = PyExc_RuntimeError;
    const char *msg = err->message[0] ? err->message : "unknown error in cjit";
    switch (err->status) {
    case CJ_ERR_TYPE:
        type = PyExc_TypeError;
        break;
    case CJ_ERR_VALUE:
        type = PyExc_ValueError;
        break;
    case CJ_ERR_OVERFLOW:
        type = PyExc_OverflowError;
        break;
    case CJ_ERR_MEMORY:
        type = PyExc_MemoryError;
        break;
    case CJ_ERR_INTERNAL:
        type = PyExc_RuntimeError;
        break;
    case CJ_ERR_COMPILE:
        type = cj_py.CompileError;
        break;
    case CJ_ERR_BUDGET:
        type = cj_py.MemoryBudgetError;
        break;
    case CJ_ERR_CANCELLED:
        /* the caller normally raises what asked to stop (KeyboardInterrupt) */
        type = PyExc_KeyboardInterrupt;
        break;
    case CJ_OK:
        /* A failure that recorded no error: a bug, but never a crash. */
        type = PyExc_RuntimeError;
        msg = "cjit internal error: an operation failed without a message";
        break;
    }
    PyErr_SetString(type, msg);
    return NULL;
}

/* ---- what cjit.numpy gives the Tracer --------------------------------------- */

/* See py_glue.h.  C never imports cjit.numpy: the Python layer registers
 * the functions the Tracer's methods forward to when it is imported. */
PyObject *cj_py_tracer_function(const char *name, bool quiet)
{
    PyObject *fn = cj_py.tracer_fns ? PyDict_GetItemString(cj_py.tracer_fns, name) : NULL; /* borrowed */
    if (fn == NULL && !quiet)
        PyErr_Format(PyExc_RuntimeError, "cjit: cjit.numpy registered no '%s' for traced values "
                     "(register_tracer_functions)", name);
    return fn;
}


/* ---- dtypes and shapes -------------------------------------------------- */

/* Returns the NumPy type number for dt (NPY_NOTYPE if invalid). */
int cj_py_npy_type(cj_dtype dt)
{
    switch (dt) {
    case CJ_BOOL:
        return NPY_BOOL;
    case CJ_INT32:
        return NPY_INT32;
    case CJ_INT64:
        return NPY_INT64;
    case CJ_UINT32:
        return NPY_UINT32;
    case CJ_UINT64:
        return NPY_UINT64;
    case CJ_INT8:
        return NPY_INT8;
    case CJ_INT16:
        return NPY_INT16;
    case CJ_UINT8:
        return NPY_UINT8;
    case CJ_UINT16:
        return NPY_UINT16;
    case CJ_FLOAT32:
        return NPY_FLOAT32;
    case CJ_FLOAT64:
        return NPY_FLOAT64;
    case CJ_NUM_DTYPES:
        break;
    }
    return NPY_NOTYPE;
}

/* True, with *out set, when d is one of cjit's dtypes in native byte
 * order.  Integer dtypes are matched by kind and size, so both C long and
 * long long map to int64. */
bool cj_py_dtype_from_descr(PyArray_Descr *d, cj_dtype *out)
{
    if (d == NULL || !PyArray_ISNBO(d->byteorder))
        return false;
    switch (d->type_num) {
    case NPY_BOOL:
        *out = CJ_BOOL;
        return true;
    case NPY_BYTE:
    case NPY_SHORT:
    case NPY_INT:
    case NPY_LONG:
    case NPY_LONGLONG:
        if (PyDataType_ELSIZE(d) == 1 || PyDataType_ELSIZE(d) == 2) {
            *out = PyDataType_ELSIZE(d) == 1 ? CJ_INT8 : CJ_INT16;
            return true;
        }
        if (PyDataType_ELSIZE(d) == 4) {
            *out = CJ_INT32;
            return true;
        }
        if (PyDataType_ELSIZE(d) == 8) {
            *out = CJ_INT64;
            return true;
        }
        return false;
    case NPY_UBYTE:
    case NPY_USHORT:
    case NPY_UINT:
    case NPY_ULONG:
    case NPY_ULONGLONG:
        if (PyDataType_ELSIZE(d) == 1 || PyDataType_ELSIZE(d) == 2) {
            *out = PyDataType_ELSIZE(d) == 1 ? CJ_UINT8 : CJ_UINT16;
            return true;
        }
        if (PyDataType_ELSIZE(d) == 4) {
            *out = CJ_UINT32;
            return true;
        }
        if (PyDataType_ELSIZE(d) == 8) {
            *out = CJ_UINT64;
            return true;
        }
        return false;
    case NPY_FLOAT:
        *out = CJ_FLOAT32;
        return true;
    case NPY_DOUBLE:
        *out = CJ_FLOAT64;
        return true;
    default:
        return false;
    }
}

/* 0 with *out set, or -1 with TypeError naming `what` and the dtype. */
int cj_py_dtype_from_obj(PyObject *obj, cj_dtype *out, const char *what)
{
    if (PyUnicode_Check(obj)) {
        const char *name = PyUnicode_AsUTF8(obj);
        if (name == NULL)
            return -1;
        if (cj_dtype_from_name(name, out))
            return 0;
    }
    PyArray_Descr *descr = NULL;
    if (obj != Py_None && PyArray_DescrConverter(obj, &descr) == NPY_SUCCEED) {
        bool ok = cj_py_dtype_from_descr(descr, out);
        Py_DECREF(descr);
        if (ok)
            return 0;
    }
    PyErr_Clear();   /* the converter's own message is less helpful */
    PyErr_Format(PyExc_TypeError,
                 "%s: unsupported dtype %R; cjit supports " CJ_DTYPE_NAMES_TEXT, what, obj);
    return -1;
}

/* New reference to the np.dtype for dt. */
PyObject *cj_py_dtype_object(cj_dtype dt)
{
    int type = cj_py_npy_type(dt);
    if (type == NPY_NOTYPE) {
        PyErr_SetString(PyExc_RuntimeError, "cjit internal error: invalid dtype");
        return NULL;
    }
    return (PyObject *)PyArray_DescrFromType(type);
}

/* New tuple of ints. */
PyObject *cj_py_shape_tuple(const cj_shape *s)
{
    PyObject *t = PyTuple_New(s->rank);
    if (t == NULL)
        return NULL;
    for (int d = 0; d < s->rank; d++) {
        PyObject *v = PyLong_FromLongLong(s->dims[d]);
        if (v == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, d, v);   /* steals v */
    }
    return t;
}

/* 0 with *out filled, or -1 with an exception naming `what`. */
int cj_py_shape_from_obj(PyObject *obj, cj_shape *out, const char *what)
{
    memset(out, 0, sizeof *out);
    if (PyLong_Check(obj) || PyArray_IsScalar(obj, Integer)) {
        long long v = PyLong_AsLongLong(obj);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (v < 0) {
            PyErr_Format(PyExc_ValueError, "%s: negative dimension %lld in shape", what, v);
            return -1;
        }
        out->rank = 1;
        out->dims[0] = v;
        return 0;
    }
    PyObject *seq = PySequence_Fast(obj, "");   /* new ref */
    if (seq == NULL) {
        PyErr_Format(PyExc_TypeError, "%s: shape must be a tuple of ints, got %.100s",
                     what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > CJ_MAX_RANK) {
        PyErr_Format(PyExc_ValueError, "%s: rank %zd is more than cjit's limit of %d",
                     what, n, CJ_MAX_RANK);
        goto fail;
    }
    out->rank = (int)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);   /* borrowed */
        PyObject *idx = PyNumber_Index(item);                /* new ref */
        if (idx == NULL) {
            PyErr_Format(PyExc_TypeError, "%s: shape entries must be ints, got %.100s",
                         what, Py_TYPE(item)->tp_name);
            goto fail;
        }
        long long v = PyLong_AsLongLong(idx);
        Py_DECREF(idx);
        if (v == -1 && PyErr_Occurred())
            goto fail;
        if (v < 0) {
            PyErr_Format(PyExc_ValueError, "%s: negative dimension %lld in shape", what, v);
            goto fail;
        }
        out->dims[i] = v;
    }
    if (cj_shape_numel(out) < 0) {
        PyErr_Format(PyExc_ValueError, "%s: shape %R has too many elements", what, obj);
        goto fail;
    }
    Py_DECREF(seq);
    return 0;
fail:
    Py_DECREF(seq);
    return -1;
}

/* "float32[2,3]" ("float32[]" for a scalar); returns buf. */
char *cj_py_aval_str(cj_dtype dt, const cj_shape *s, char *buf, size_t n)
{
    size_t used = 0;
    int k = snprintf(buf, n, "%s[", cj_dtype_name(dt));
    if (k > 0)
        used = (size_t)k;
    for (int d = 0; d < s->rank && used < n; d++) {
        k = snprintf(buf + used, n - used, "%s%lld", d ? "," : "", (long long)s->dims[d]);
        if (k > 0)
            used += (size_t)k;
    }
    if (used < n)
        snprintf(buf + used, n - used, "]");
    return buf;
}


/* See py_glue.h. */
PyFrameObject *cj_py_user_frame(int *skipped)
{
    int n = 0;
    PyFrameObject *f = PyEval_GetFrame();   /* borrowed */
    Py_XINCREF(f);
    while (f != NULL) {
        PyCodeObject *code = PyFrame_GetCode(f);   /* new ref */
        PyObject *file = code->co_filename;        /* borrowed from code */
        bool ours = cj_py.package_dir != NULL && PyUnicode_Check(file)
                    && PyUnicode_Tailmatch(file, cj_py.package_dir, 0, PY_SSIZE_T_MAX, -1) == 1;
        Py_DECREF(code);
        if (!ours)
            break;
        n++;
        PyFrameObject *back = PyFrame_GetBack(f);   /* new ref or NULL */
        Py_DECREF(f);
        f = back;
    }
    PyErr_Clear();   /* from Tailmatch, if any */
    if (skipped != NULL)
        *skipped = n;
    return f;
}

/* See py_glue.h. */
int cj_py_import_numpy(void)
{
    import_array1(-1);
    return 0;
}

/* See py_glue.h. */
PyObject *str_from_owned(char *s)
{
    if (s == NULL)
        return PyErr_NoMemory();
    PyObject *r = PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
    free(s);
    return r;
}
