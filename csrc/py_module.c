/* py_module.c - the module cjit._cjit: its init (the exception types, each
 * binding file's types and functions) and the small module-level
 * functions.  What the binding files share is py_convert.c's. */
#include "py_glue.h"

#include <limits.h>

#include <stdio.h>
#include <string.h>

/* ---- module functions --------------------------------------------------- */

static PyObject *mod_register_tracer_functions(PyObject *self, PyObject *fns)
{
    (void)self;
    if (!PyDict_Check(fns)) {
        PyErr_SetString(PyExc_TypeError, "register_tracer_functions: a dict of name -> function");
        return NULL;
    }
    Py_INCREF(fns);
    Py_XSETREF(cj_py.tracer_fns, fns);
    Py_RETURN_NONE;
}

/* register_array_type(Array, DeletedArray): the ndarray subclass results
 * are made as, and the one a consumed donated result becomes. */
static PyObject *mod_register_array_type(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *array, *deleted;
    if (!PyArg_ParseTuple(args, "O!O!:register_array_type", &PyType_Type, &array, &PyType_Type, &deleted))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)array, &PyArray_Type)
        || !PyType_IsSubtype((PyTypeObject *)deleted, (PyTypeObject *)array)) {
        PyErr_SetString(PyExc_TypeError, "register_array_type: an ndarray subclass and a subclass of it");
        return NULL;
    }
    Py_INCREF(array);
    Py_INCREF(deleted);
    Py_XSETREF(cj_py.array_type, (PyTypeObject *)array);
    Py_XSETREF(cj_py.deleted_type, (PyTypeObject *)deleted);
    Py_RETURN_NONE;
}

/* op_table() -> a tuple of dicts, one per op in ops.def's order: name,
 * kind, arity, doc, and for an elementwise unary op its record's dtypes,
 * derivative (bool), numpy and lax names ("" for none).  cjit.numpy and
 * cjit.lax make their functions of those ops from it. */
static PyObject *mod_op_table(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    static const char *const dtypes[] = {
        [CJ_UDT_FLOAT] = "float", [CJ_UDT_SAME] = "same", [CJ_UDT_NOBOOL] = "nobool", [CJ_UDT_ROUND] = "round",
        [CJ_UDT_TEST] = "test", [CJ_UDT_LOGIC] = "logic", [CJ_UDT_BITS] = "bits"};
    PyObject *t = PyTuple_New(CJ_NUM_OPS);
    for (int i = 0; t != NULL && i < CJ_NUM_OPS; i++) {
        cj_op op = (cj_op)i;
        const cj_unary_info *u = cj_unary(op);
        PyObject *d = Py_BuildValue("{s:s,s:s,s:i,s:s}", "name", cj_op_name(op), "kind",
                                    cj_opkind_name(cj_op_kind(op)), "arity", cj_op_arity(op), "doc", cj_op_doc(op));
        if (d != NULL && u != NULL) {
            PyObject *extra = Py_BuildValue("{s:s,s:O,s:s,s:s}", "dtypes", dtypes[u->dtypes], "derivative",
                                            u->derivative ? Py_True : Py_False, "numpy", u->numpy, "lax", u->lax);
            if (extra == NULL || PyDict_Update(d, extra) < 0)
                Py_CLEAR(d);
            Py_XDECREF(extra);
        }
        if (d == NULL)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, i, d);
    }
    return t;
}

/* user_location() -> 'file:line' of the innermost frame outside the cjit
 * package ("?" when there is none): the one definition of "the user's
 * source line", which the Python layer asks for too. */
static PyObject *mod_user_location(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyFrameObject *f = cj_py_user_frame(NULL);   /* new ref or NULL */
    if (f == NULL)
        return PyUnicode_FromString("?");
    PyCodeObject *code = PyFrame_GetCode(f);     /* new ref */
    PyObject *r = PyUnicode_FromFormat("%U:%d", code->co_filename, PyFrame_GetLineNumber(f));
    Py_DECREF(code);
    Py_DECREF(f);
    return r;
}

/* result_type(operands) -> (dtype, weak): NEP 50 promotion of operands
 * given as (dtype, weak) pairs (graph.c's cj_promote_all). */
static PyObject *mod_result_type(PyObject *self, PyObject *operands)
{
    (void)self;
    PyObject *seq = PySequence_Fast(operands, "result_type: a sequence of (dtype, weak) pairs");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > INT_MAX) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "result_type: at least one operand");
        return NULL;
    }
    cj_dtype *dts = PyMem_Malloc((size_t)n * sizeof(cj_dtype));
    bool *weak = PyMem_Malloc((size_t)n * sizeof(bool));
    PyObject *result = NULL;
    if (dts == NULL || weak == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(seq, i);   /* borrowed */
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "result_type: each operand is a (dtype, weak) pair");
            goto done;
        }
        int w = PyObject_IsTrue(PyTuple_GET_ITEM(pair, 1));
        if (w < 0 || cj_py_dtype_from_obj(PyTuple_GET_ITEM(pair, 0), &dts[i], "result_type") < 0)
            goto done;
        weak[i] = w;
    }
    bool w;
    cj_dtype r = cj_promote_all(dts, weak, (int)n, &w);
    PyObject *dto = cj_py_dtype_object(r);
    if (dto != NULL)
        result = Py_BuildValue("(NO)", dto, w ? Py_True : Py_False);
done:
    PyMem_Free(dts);
    PyMem_Free(weak);
    Py_DECREF(seq);
    return result;
}

static PyObject *mod_set_package_dir(PyObject *self, PyObject *path)
{
    (void)self;
    if (path == Py_None) {
        Py_CLEAR(cj_py.package_dir);
        Py_RETURN_NONE;
    }
    if (!PyUnicode_Check(path)) {
        PyErr_Format(PyExc_TypeError, "_set_package_dir: expected str, got %.100s",
                     Py_TYPE(path)->tp_name);
        return NULL;
    }
    /* A trailing separator, so that ".../cjit" does not also match
     * ".../cjit_examples/x.py". */
    Py_ssize_t n = PyUnicode_GET_LENGTH(path);
    Py_UCS4 last = n > 0 ? PyUnicode_READ_CHAR(path, n - 1) : 0;
    PyObject *dir;
    if (last == '/' || last == '\\') {
        dir = Py_NewRef(path);
    } else {
        dir = PyUnicode_FromFormat("%U/", path);
        if (dir == NULL)
            return NULL;
    }
    Py_XSETREF(cj_py.package_dir, dir);   /* steals dir */
    Py_RETURN_NONE;
}

static int dict_set_int(PyObject *d, const char *key, long long v)
{
    PyObject *o = PyLong_FromLongLong(v);
    if (o == NULL)
        return -1;
    int rc = PyDict_SetItemString(d, key, o);
    Py_DECREF(o);
    return rc;
}

static PyObject *mod_runtime_stats(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    cj_stats st;
    cj_stats_get(&st);
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    if (dict_set_int(d, "compiles", st.compiles) < 0
        || dict_set_int(d, "code_bytes", st.code_bytes) < 0
        || dict_set_int(d, "bytes_in_use", st.bytes_in_use) < 0
        || dict_set_int(d, "peak_bytes_in_use", st.peak_bytes_in_use) < 0
        || dict_set_int(d, "llvm_modules", st.llvm_modules) < 0
        || dict_set_int(d, "cancelled", st.cancelled) < 0
        || dict_set_int(d, "loads", st.loads) < 0
        || dict_set_int(d, "loop_one_function_runs", st.one_function_runs) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    for (int i = 0; i < CJ_PHASE_COUNT; i++) {
        char key[64];
        snprintf(key, sizeof key, "compile_ns_%s", cj_phase_name((cj_phase)i));
        if (dict_set_int(d, key, st.phase_ns[i]) < 0) {
            Py_DECREF(d);
            return NULL;
        }
    }
    return d;
}

static PyObject *mod_reset_peak(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    cj_stats_reset_peak();
    Py_RETURN_NONE;
}

static PyObject *mod_num_threads(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromLong(cj_runtime_num_threads());
}

/* What the machine code compiled here depends on besides cjit itself
 * (part of the disk cache's key): LLVM's version, the target, the CPU. */
static PyObject *mod_jit_target(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    char buf[4096];
    cj_jit_target(buf, sizeof buf);
    return PyUnicode_FromString(buf);
}

/* Problems with environment variables read outside any call (so that
 * Python can warn at import): a list of messages, empty when all is well. */
static PyObject *mod_env_warnings(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    char why[300];
    cj_runtime_threads_setting(why, sizeof why);
    return why[0] ? Py_BuildValue("[s]", why) : PyList_New(0);
}

static PyObject *mod_trim_memory(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    cj_runtime_block_trim();
    Py_RETURN_NONE;
}

/* _set_x64(flag): cjit.config's jax_enable_x64, read by promotion
 * (cj_dtype_canon) and the call fast path's key.  Returns the old value. */
static PyObject *mod_set_x64(PyObject *self, PyObject *flag)
{
    (void)self;
    int on = PyObject_IsTrue(flag);
    if (on < 0)
        return NULL;
    bool old = cj_x64_enabled();
    cj_set_x64(on != 0);
    return PyBool_FromLong(old);
}

/* pipeline() -> tuple of (name, switch or None, when): the compile
 * pipeline's steps in order (pipeline.c's list). */
static PyObject *mod_pipeline(PyObject *m, PyObject *unused)
{
    (void)m, (void)unused;
    PyObject *steps = PyTuple_New(CJ_NSTEPS);
    for (int i = 0; steps != NULL && i < CJ_NSTEPS; i++) {
        const char *off = cj_pipeline_step_switch((cj_step)i);
        PyObject *item = Py_BuildValue("(szs)", cj_pipeline_step_name((cj_step)i), off,
                                       cj_pipeline_step_when((cj_step)i));
        if (item == NULL)
            Py_CLEAR(steps);
        else
            PyTuple_SET_ITEM(steps, i, item);
    }
    return steps;
}

static PyMethodDef module_methods[] = {
    {"pipeline", mod_pipeline, METH_NOARGS,
     "pipeline($module, /)\n--\n\nThe compile pipeline's steps in order: (name, CJIT_PASSES switch or "
     "None, when)."},
    {"_set_x64", mod_set_x64, METH_O,
     "_set_x64($module, flag, /)\n--\n\nSets jax_enable_x64 for promotion and the call fast path; "
     "returns the previous value."},
    {"op_table", mod_op_table, METH_NOARGS,
     "op_table($module, /)\n--\n\nThe op table (csrc/ops.def, ops_unary.def): a dict per op with its name, kind, "
     "arity and doc, and for an elementwise unary op its dtypes rule, derivative and numpy and lax names."},
    {"result_type", mod_result_type, METH_O,
     "result_type($module, operands, /)\n--\n\n(dtype, weak) of operands given as (dtype, weak) pairs (NEP 50)."},
    {"user_location", mod_user_location, METH_NOARGS,
     "user_location($module, /)\n--\n\n'file:line' of the innermost frame outside the cjit package."},
    {"register_array_type", mod_register_array_type, METH_VARARGS,
     "register_array_type(Array, DeletedArray): the type of the arrays results are"},
    {"register_tracer_functions", mod_register_tracer_functions, METH_O,
     "register_tracer_functions($module, fns, /)\n--\n\nThe functions (name -> callable) that Tracer methods "
     "forward to; cjit.numpy registers them when it is imported."},
    {"_jit_target", mod_jit_target, METH_NOARGS,
     "_jit_target($module, /)\n--\n\nLLVM's version, the target triple, the CPU name and features."},
    {"num_threads", mod_num_threads, METH_NOARGS,
     "num_threads($module, /)\n--\n\nThreads that run a large kernel (starts the pool; "
     "CJIT_NUM_THREADS, read once, overrides the number of cores)."},
    {"_env_warnings", mod_env_warnings, METH_NOARGS,
     "_env_warnings($module, /)\n--\n\nWhat is wrong with CJIT_NUM_THREADS (a list of messages)."},
    {"trim_memory", mod_trim_memory, METH_NOARGS,
     "trim_memory($module, /)\n--\n\nFrees the large blocks kept for reuse."},
    {"_set_package_dir", mod_set_package_dir, METH_O,
     "_set_package_dir($module, path, /)\n--\n\nFrames whose file starts with path are skipped when a "
     "node takes the user's source file:line."},
    {"runtime_stats", mod_runtime_stats, METH_NOARGS,
     "runtime_stats($module, /)\n--\n\ncompiles, code_bytes, bytes_in_use, peak_bytes_in_use."},
    {"reset_peak_memory_stats", mod_reset_peak, METH_NOARGS,
     "reset_peak_memory_stats($module, /)\n--\n\nResets peak_bytes_in_use to bytes_in_use."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cjit._cjit",
    .m_doc = "The C core of cjit: tracing, compiling and running graphs.",
    .m_size = -1,   /* single-phase init; state is the static cj_py */
    .m_methods = module_methods,
};

/* Creates the exception once (a re-initialisation keeps the first one),
 * and adds it to m under `attr`.  0 or -1. */
static int add_exception(PyObject *m, PyObject **slot, const char *name, const char *attr,
                         const char *doc, PyObject *base)
{
    if (*slot == NULL) {
        *slot = PyErr_NewExceptionWithDoc(name, doc, base, NULL);   /* new ref, kept */
        if (*slot == NULL)
            return -1;
    }
    return PyModule_AddObjectRef(m, attr, *slot);
}

/* The module's entry point: returns the new module, or NULL with an
 * exception set. */
PyMODINIT_FUNC PyInit__cjit(void)
{
    if (cj_py_import_numpy() < 0)
        return NULL;

    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    /* The exceptions carry the public module name cjit.errors, which
     * re-exports them, so tracebacks show the name users import. */
    if (add_exception(m, &cj_py.ConcretizationError, "cjit.errors.ConcretizationError",
                      "ConcretizationError",
                      "A concrete value was needed from a traced value (bool(), int(), "
                      "float(), an index, Python control flow).",
                      PyExc_TypeError) < 0
        || add_exception(m, &cj_py.TracerLeakError, "cjit.errors.TracerLeakError",
                         "TracerLeakError",
                         "A traced value was used after the trace that made it ended.",
                         PyExc_TypeError) < 0
        || add_exception(m, &cj_py.MemoryBudgetError, "cjit.errors.MemoryBudgetError",
                         "MemoryBudgetError", "The memory_budget cannot be met.",
                         PyExc_ValueError) < 0
        || add_exception(m, &cj_py.CompileError, "cjit.errors.CompileError", "CompileError",
                         "Compiling failed inside cjit (LLVM or a pass): a bug in cjit.",
                         PyExc_RuntimeError) < 0)
        goto fail;
    if (cj_py_trace_init(m) < 0 || cj_py_tracer_init(m) < 0 || cj_py_lowered_init(m) < 0 || cj_py_budget_init(m) < 0 || cj_py_exec_init(m) < 0 || cj_py_cuda_init(m) < 0
        || cj_py_jit_init(m) < 0 || cj_py_blas_init(m) < 0 || cj_py_lax_init(m) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
