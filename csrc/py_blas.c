/* py_blas.c - the BLAS library that runs matmuls (blas.c), seen from
 * Python: which one was loaded, the path the package hands over at import,
 * and the warning about a library that did not know the processor. */
#include "py_glue.h"

#include "blas.h"

static PyObject *mod_blas_library(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    cj_blas_available(); /* loads it */
    return PyUnicode_FromString(cj_blas_description());
}

/* Whether matmuls are marked for the BLAS now (loaded and enabled): what
 * the plan's gemm kernels depend on (part of the disk cache's key). */
static PyObject *mod_blas_in_use(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(cj_blas_available());
}

static PyObject *mod_set_blas_enabled(PyObject *self, PyObject *flag)
{
    (void)self;
    int on = PyObject_IsTrue(flag);
    if (on < 0)
        return NULL;
    return PyBool_FromLong(cj_blas_set_enabled(on != 0));
}

static PyObject *mod_set_small_gemm_enabled(PyObject *self, PyObject *flag)
{
    (void)self;
    int on = PyObject_IsTrue(flag);
    if (on < 0)
        return NULL;
    return PyBool_FromLong(cj_blas_set_small_enabled(on != 0));
}

static PyObject *mod_set_blas_path(PyObject *self, PyObject *path)
{
    (void)self;
    const char *s = PyUnicode_Check(path) ? PyUnicode_AsUTF8(path) : NULL;
    if (s == NULL) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "_set_blas_path: expected str, got %.100s",
                         Py_TYPE(path)->tp_name);
        return NULL;
    }
    return PyBool_FromLong(cj_blas_set_default_path(s));
}

static PyObject *mod_blas_warnings(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    const char *w = cj_blas_warning(); /* loads the library */
    return w[0] ? Py_BuildValue("[s]", w) : PyList_New(0);
}

static PyObject *mod_blas_core_warning(PyObject *self, PyObject *args)
{
    (void)self;
    const char *config, *library;
    int avx2;
    if (!PyArg_ParseTuple(args, "ssp:_blas_core_warning", &config, &library, &avx2))
        return NULL;
    char buf[1024];
    cj_blas_core_warning(config, library, avx2 != 0, buf, sizeof buf);
    return PyUnicode_FromString(buf);
}

static PyMethodDef blas_functions[] = {
    {"blas_library", mod_blas_library, METH_NOARGS,
     "blas_library($module, /)\n--\n\nThe BLAS library that runs matmuls: OpenBLAS's configuration "
     "(which names the core it chose) and [the file], or 'none (why)'. Loaded at import: CJIT_BLAS "
     "names another, CJIT_BLAS=0 none."},
    {"_blas_in_use", mod_blas_in_use, METH_NOARGS,
     "_blas_in_use($module, /)\n--\n\nWhether matmuls are planned as BLAS calls now."},
    {"_set_blas_enabled", mod_set_blas_enabled, METH_O,
     "_set_blas_enabled($module, on, /)\n--\n\nWhether new compiles hand matmuls to BLAS; returns "
     "the previous setting (for tests)."},
    {"_set_small_gemm_enabled", mod_set_small_gemm_enabled, METH_O,
     "_set_small_gemm_enabled($module, on, /)\n--\n\nWhether new compiles run matmuls with few rows "
     "with cjit's own kernel (else BLAS); returns the previous setting."},
    {"_set_blas_path", mod_set_blas_path, METH_O,
     "_set_blas_path($module, path, /)\n--\n\nThe library to try after CJIT_BLAS and before the "
     "system's OpenBLAS; False (ignored) once a library is loaded."},
    {"_blas_warnings", mod_blas_warnings, METH_NOARGS,
     "_blas_warnings($module, /)\n--\n\nLoads the BLAS library; a list holding the warning about it "
     "if it runs kernels older than the processor (AVX2), else empty."},
    {"_blas_core_warning", mod_blas_core_warning, METH_VARARGS,
     "_blas_core_warning($module, config, library, cpu_has_avx2, /)\n--\n\nThe warning for an OpenBLAS "
     "configuration string, '' when its core suits the processor (for tests)."},
    {NULL, NULL, 0, NULL},
};

/* See py_glue.h. */
int cj_py_blas_init(PyObject *m)
{
    return PyModule_AddFunctions(m, blas_functions);
}
