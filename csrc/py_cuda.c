/* py_cuda.c - the CUDA side of the extension module: DeviceBuffer (an
 * array in GPU memory), CudaProgram (a Lowered's kernels loaded on a GPU),
 * ptx() (the PTX of a Lowered, no GPU needed) and the driver's status.
 * cjit.Array (_devices.py) wraps a DeviceBuffer.
 *
 * The GPU compiles from the pipeline's plan (pipeline.c's list through
 * collapse, the GPU backend's options) and nothing else: no CPU code is
 * generated for a function that runs on a GPU.  Its plan marks no library
 * calls (BLAS is the CPU's), so every kernel is a loop nest. */
#include "py_glue.h"

#include <string.h>

#include "jit_cuda.h"
#include "pipeline.h"

/* ---- DeviceBuffer ----------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    uint64_t addr;      /* owned device memory (0 when empty) */
    int dev;
    cj_dtype dtype;
    cj_shape shape;
    int64_t nbytes;
} cj_py_devbuf;

static PyTypeObject DeviceBufferType;

/* A new DeviceBuffer of fresh device memory for shape s, dtype dt. */
static PyObject *devbuf_new(int dev, const cj_shape *s, cj_dtype dt)
{
    cj_py_devbuf *b = PyObject_New(cj_py_devbuf, &DeviceBufferType);
    if (b == NULL)
        return NULL;
    b->addr = 0;
    b->dev = dev;
    b->dtype = dt;
    b->shape = *s;
    b->nbytes = cj_shape_numel(s) * cj_dtype_size(dt);
    cj_error err = {0};
    if (cj_cuda_alloc(dev, b->nbytes, &b->addr, &err) != CJ_OK) {
        Py_DECREF(b);
        return cj_py_raise(&err);
    }
    return (PyObject *)b;
}

static void devbuf_dealloc(cj_py_devbuf *b)
{
    cj_cuda_free(b->dev, b->addr);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

/* A new host copy: a C-contiguous NumPy array. */
static PyObject *devbuf_to_host(cj_py_devbuf *b, PyObject *unused)
{
    (void)unused;
    npy_intp dims[CJ_MAX_RANK];
    for (int d = 0; d < b->shape.rank; d++)
        dims[d] = (npy_intp)b->shape.dims[d];
    PyObject *arr = PyArray_SimpleNew(b->shape.rank, dims, cj_py_npy_type(b->dtype));
    if (arr == NULL)
        return NULL;
    cj_error err = {0};
    cj_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cj_cuda_download(b->dev, PyArray_DATA((PyArrayObject *)arr), b->addr, b->nbytes, &err);
    Py_END_ALLOW_THREADS
    if (st != CJ_OK) {
        Py_DECREF(arr);
        return cj_py_raise(&err);
    }
    return arr;
}

static PyObject *devbuf_synchronize(cj_py_devbuf *b, PyObject *unused)
{
    (void)unused;
    cj_error err = {0};
    cj_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cj_cuda_synchronize(b->dev, &err);
    Py_END_ALLOW_THREADS
    if (st != CJ_OK)
        return cj_py_raise(&err);
    Py_RETURN_NONE;
}

static PyObject *devbuf_get_shape(cj_py_devbuf *b, void *c)
{
    (void)c;
    return cj_py_shape_tuple(&b->shape);
}

static PyObject *devbuf_get_dtype(cj_py_devbuf *b, void *c)
{
    (void)c;
    return cj_py_dtype_object(b->dtype);
}

static PyObject *devbuf_get_device(cj_py_devbuf *b, void *c)
{
    (void)c;
    return PyLong_FromLong(b->dev);
}

static PyObject *devbuf_get_nbytes(cj_py_devbuf *b, void *c)
{
    (void)c;
    return PyLong_FromLongLong(b->nbytes);
}

static PyGetSetDef devbuf_getset[] = {
    {"shape", (getter)devbuf_get_shape, NULL, "shape (tuple)", NULL},
    {"dtype", (getter)devbuf_get_dtype, NULL, "numpy dtype", NULL},
    {"device", (getter)devbuf_get_device, NULL, "CUDA device ordinal", NULL},
    {"nbytes", (getter)devbuf_get_nbytes, NULL, "bytes of device memory", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef devbuf_methods[] = {
    {"to_host", (PyCFunction)devbuf_to_host, METH_NOARGS,
     "to_host($self, /)\n--\n\nA new NumPy array with the contents."},
    {"synchronize", (PyCFunction)devbuf_synchronize, METH_NOARGS,
     "synchronize($self, /)\n--\n\nWaits for all work on the device."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject DeviceBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cjit._cjit.DeviceBuffer",
    .tp_basicsize = sizeof(cj_py_devbuf),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An array in GPU memory (made by cuda_put and CudaProgram calls).",
    .tp_dealloc = (destructor)devbuf_dealloc,
    .tp_methods = devbuf_methods,
    .tp_getset = devbuf_getset,
};

/* A C-contiguous, aligned array of a cjit dtype made from obj (a new
 * reference; may be obj itself), or NULL with TypeError. */
static PyArrayObject *host_array(PyObject *obj, cj_dtype *dt)
{
    PyArrayObject *a = (PyArrayObject *)PyArray_FROM_OF(obj, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED);
    if (a == NULL)
        return NULL;
    if (!PyArray_ISNOTSWAPPED(a)) {   /* a byte-swapped closed-over array, say */
        PyArray_Descr *native = PyArray_DescrNewByteorder(PyArray_DESCR(a), NPY_NATIVE);
        PyObject *c = native == NULL ? NULL
                                     : PyArray_FromArray(a, native /* stolen */, NPY_ARRAY_CARRAY);
        Py_DECREF(a);
        if (c == NULL)
            return NULL;
        a = (PyArrayObject *)c;
    }
    if (!cj_py_dtype_from_descr(PyArray_DESCR(a), dt)) {
        PyErr_Format(PyExc_TypeError, "cjit: cannot put an array of dtype %S on a GPU "
                     "(supported: " CJ_DTYPE_NAMES_TEXT ")", (PyObject *)PyArray_DESCR(a));
        Py_DECREF(a);
        return NULL;
    }
    return a;
}

/* A new DeviceBuffer on device dev holding a copy of obj (array-like). */
static PyObject *put(PyObject *obj, int dev)
{
    cj_dtype dt;
    PyArrayObject *a = host_array(obj, &dt);
    if (a == NULL)
        return NULL;
    cj_shape s = {.rank = PyArray_NDIM(a)};
    if (s.rank > CJ_MAX_RANK) {
        Py_DECREF(a);
        return PyErr_Format(PyExc_ValueError, "cjit: rank %d exceeds %d", s.rank, CJ_MAX_RANK);
    }
    for (int d = 0; d < s.rank; d++)
        s.dims[d] = PyArray_DIM(a, d);
    cj_py_devbuf *b = (cj_py_devbuf *)devbuf_new(dev, &s, dt);
    if (b == NULL) {
        Py_DECREF(a);
        return NULL;
    }
    cj_error err = {0};
    cj_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cj_cuda_upload(dev, b->addr, PyArray_DATA(a), b->nbytes, &err);
    Py_END_ALLOW_THREADS
    Py_DECREF(a);
    if (st != CJ_OK) {
        Py_DECREF(b);
        return cj_py_raise(&err);
    }
    return (PyObject *)b;
}

/* cuda_put(array, device): a new DeviceBuffer holding a copy of array. */
static PyObject *mod_cuda_put(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *obj;
    int dev;
    if (!PyArg_ParseTuple(args, "Oi:cuda_put", &obj, &dev))
        return NULL;
    return put(obj, dev);
}

/* ---- CudaProgram ---------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    cj_cuda_program *prog;      /* owned */
    cj_lowered lowered;         /* owned: the plan the kernels came from, for introspection;
                                 * empty once released */
    PyObject *arrays;           /* closed-over arrays (the Lowered's list) */
    int nparams, noutputs;
    cj_shape *shapes;           /* nparams params, then noutputs outputs */
    cj_dtype *dtypes;
    bool *param_known;          /* false for parameters the graph never reads */
    int running;                /* calls in flight with the GIL released */
    bool release_pending;       /* release() came while running */
} cj_py_program;

static PyTypeObject CudaProgramType;

/* The GPU as the pipeline sees it: no library calls, no block storage
 * (stages run one after another over all rows), and no codegen or link
 * steps: its code is made from the plan here (cuda_program.c). */
static const cj_backend gpu_backend = {.name = "gpu"};

/* The lowering for a GPU: the pipeline's list through collapse. */
static cj_status lower_for_gpu(const cj_graph *g, cj_lowered *out, cj_error *err)
{
    cj_compile_options o = cj_compile_options_make(&gpu_backend, NULL, 0, false, CJ_STEP_COLLAPSE);
    return cj_lower(g, &o, out, err);
}

/* CudaProgram(lowered, device): lowers the graph of a Lowered and loads its
 * kernels, as PTX, on a GPU. */
static PyObject *program_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *lowered;
    int dev;
    static char *kwlist[] = {"lowered", "device", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Oi:CudaProgram", kwlist, &lowered, &dev))
        return NULL;
    const cj_graph *g;
    PyObject *arrays;
    if (cj_py_lowered_parts(lowered, &g, &arrays) < 0)
        return NULL;
    cj_py_program *p = (cj_py_program *)type->tp_alloc(type, 0);   /* zeroed: lowered is empty */
    if (p == NULL)
        return NULL;
    p->arrays = Py_NewRef(arrays);
    cj_error err = {0};
    if (lower_for_gpu(g, &p->lowered, &err) != CJ_OK) {
        Py_DECREF(p);
        return cj_py_raise(&err);
    }
    const cj_graph *lg = p->lowered.graph;
    const cj_plan *plan = &p->lowered.plan;
    p->nparams = lg->nparams;
    p->noutputs = lg->noutputs;
    size_t n = (size_t)p->nparams + (size_t)p->noutputs + 1;
    p->shapes = PyMem_Calloc(n, sizeof(cj_shape));
    p->dtypes = PyMem_Calloc(n, sizeof(cj_dtype));
    p->param_known = PyMem_Calloc(n, sizeof(bool));
    if (p->shapes == NULL || p->dtypes == NULL || p->param_known == NULL) {
        Py_DECREF(p);
        return PyErr_NoMemory();
    }
    for (int b = 0; b < plan->nbuffers; b++) {
        const cj_buffer *buf = &plan->buffers[b];
        if (buf->kind == CJ_BUF_PARAM && buf->slot >= 0 && buf->slot < p->nparams) {
            p->shapes[buf->slot] = buf->shape;
            p->dtypes[buf->slot] = buf->dtype;
            p->param_known[buf->slot] = true;
        }
    }
    for (int k = 0; k < p->noutputs; k++) {
        const cj_node *out = &lg->nodes[lg->outputs[k]];
        p->shapes[p->nparams + k] = out->shape;
        p->dtypes[p->nparams + k] = out->dtype;
    }
    p->prog = cj_cuda_program_new(plan, dev, &err);
    if (p->prog == NULL) {
        Py_DECREF(p);
        return cj_py_raise(&err);
    }
    return (PyObject *)p;
}

static void program_dealloc(cj_py_program *p)
{
    cj_cuda_program_free(p->prog);
    cj_lowered_free(&p->lowered);
    Py_XDECREF(p->arrays);
    PyMem_Free(p->shapes);
    PyMem_Free(p->dtypes);
    PyMem_Free(p->param_known);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

/* Checks that buffer/array i has dtype dt and shape sh.  0 or -1. */
static int check_aval(cj_py_program *p, int i, cj_dtype dt, const cj_shape *sh)
{
    if (!p->param_known[i] || (dt == p->dtypes[i] && cj_shape_equal(sh, &p->shapes[i])))
        return 0;
    char want[200], got[200];
    cj_py_aval_str(p->dtypes[i], &p->shapes[i], want, sizeof want);
    cj_py_aval_str(dt, sh, got, sizeof got);
    PyErr_Format(PyExc_TypeError, "argument %d: expected %s, got %s", i, want, got);
    return -1;
}

/* Device address of argument i: a DeviceBuffer's own, or that of a copy of
 * a host array (appended to `keep`, which holds it until the call ends).
 * 0 or -1. */
static int argument_address(cj_py_program *p, int i, PyObject *a, PyObject *keep, uint64_t *addr)
{
    int dev = cj_cuda_program_device(p->prog);
    PyObject *buf = NULL;
    if (Py_IS_TYPE(a, &DeviceBufferType)) {
        buf = Py_NewRef(a);
        if (((cj_py_devbuf *)a)->dev != dev) {
            PyErr_Format(PyExc_ValueError, "argument %d is on cuda:%d, the function runs on cuda:%d", i,
                         ((cj_py_devbuf *)a)->dev, dev);
            Py_DECREF(buf);
            return -1;
        }
    } else if ((buf = put(a, dev)) == NULL) {
        return -1;
    }
    cj_py_devbuf *b = (cj_py_devbuf *)buf;
    if ((i >= 0 && check_aval(p, i, b->dtype, &b->shape) < 0) || PyList_Append(keep, buf) < 0) {
        Py_DECREF(buf);
        return -1;
    }
    *addr = b->addr;
    Py_DECREF(buf);   /* `keep` holds it */
    return 0;
}

/* program(args): runs on a sequence of DeviceBuffers or host arrays;
 * returns a new list of DeviceBuffers (the outputs). */
static PyObject *program_call(cj_py_program *p, PyObject *args, PyObject *kwds)
{
    PyObject *seq;
    if ((kwds != NULL && PyDict_GET_SIZE(kwds) > 0) || !PyArg_ParseTuple(args, "O:CudaProgram", &seq))
        return NULL;
    if (p->prog == NULL || p->release_pending) {
        PyErr_SetString(PyExc_RuntimeError, "executable was released by cjit.clear_caches()");
        return NULL;
    }
    PyObject *argt = PySequence_Tuple(seq);   /* new ref */
    if (argt == NULL)
        return NULL;
    int dev = cj_cuda_program_device(p->prog);
    Py_ssize_t narrays = PyList_GET_SIZE(p->arrays);
    PyObject *keep = PyList_New(0), *outs = PyList_New(p->noutputs);
    uint64_t *addr = PyMem_Calloc((size_t)p->nparams + (size_t)narrays + (size_t)p->noutputs + 1,
                                  sizeof(uint64_t));
    uint64_t *params = addr, *arrays = addr + p->nparams, *outputs = arrays + narrays;
    if (keep == NULL || outs == NULL || addr == NULL) {
        if (addr == NULL)
            PyErr_NoMemory();
        goto fail;
    }
    if (PyTuple_GET_SIZE(argt) != p->nparams) {
        PyErr_Format(PyExc_TypeError, "CudaProgram: expected %d arguments, got %zd", p->nparams,
                     PyTuple_GET_SIZE(argt));
        goto fail;
    }
    for (int i = 0; i < p->nparams; i++)
        if (argument_address(p, i, PyTuple_GET_ITEM(argt, i), keep, &params[i]) < 0)
            goto fail;
    /* closed-over arrays are read by reference: copied at every call */
    for (Py_ssize_t j = 0; j < narrays; j++)
        if (argument_address(p, -1, PyList_GET_ITEM(p->arrays, j), keep, &arrays[j]) < 0)
            goto fail;
    for (int k = 0; k < p->noutputs; k++) {
        PyObject *o = devbuf_new(dev, &p->shapes[p->nparams + k], p->dtypes[p->nparams + k]);
        if (o == NULL)
            goto fail;
        outputs[k] = ((cj_py_devbuf *)o)->addr;
        PyList_SET_ITEM(outs, k, o);   /* steals o */
    }
    cj_error err = {0};
    cj_status st;
    cj_cuda_program *prog = p->prog;
    p->running++;   /* release() now leaves prog to the last running call */
    PyThreadState *ts = PyEval_SaveThread();
    cj_run_poll poll = {.stop = run_interrupted, .ctx = &ts};   /* Ctrl-C in a loop's iterations */
    st = cj_cuda_program_run(prog, params, arrays, outputs, &poll, &err);
    PyEval_RestoreThread(ts);
    if (--p->running == 0 && p->release_pending) {
        cj_cuda_program_free(p->prog);
        p->prog = NULL;
        p->release_pending = false;
    }
    if (st != CJ_OK) {
        if (st != CJ_ERR_CANCELLED || !PyErr_Occurred())   /* else: the handler's exception */
            cj_py_raise(&err);
        goto fail;
    }
    PyMem_Free(addr);
    Py_DECREF(keep);
    Py_DECREF(argt);
    return outs;
fail:
    PyMem_Free(addr);
    Py_XDECREF(keep);
    Py_XDECREF(outs);
    Py_DECREF(argt);
    return NULL;
}

static PyObject *program_get_ptx_bytes(cj_py_program *p, void *c)
{
    (void)c;
    return PyLong_FromLongLong(p->prog ? cj_cuda_program_ptx_bytes(p->prog) : 0);
}

static PyObject *program_get_device(cj_py_program *p, void *c)
{
    (void)c;
    return PyLong_FromLong(p->prog ? cj_cuda_program_device(p->prog) : -1);
}

/* release(): unloads the kernels now, or when the running calls end. */
static PyObject *program_release(cj_py_program *p, PyObject *unused)
{
    (void)unused;
    cj_lowered_free(&p->lowered);   /* running calls use only prog */
    if (p->running > 0) {
        p->release_pending = true;
    } else {
        cj_cuda_program_free(p->prog);
        p->prog = NULL;
    }
    Py_RETURN_NONE;
}

/* The plan the kernels were made from (borrowed), or NULL with
 * RuntimeError once released. */
static const cj_plan *program_plan(cj_py_program *p)
{
    if (p->lowered.graph == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "CudaProgram: released");
        return NULL;
    }
    return &p->lowered.plan;
}

/* as_text(): the plan's kernels and buffers, as Executable.as_text. */
static PyObject *program_as_text(cj_py_program *p, PyObject *unused)
{
    (void)unused;
    const cj_plan *plan = program_plan(p);
    if (plan == NULL)
        return NULL;
    char *s = cj_plan_to_text(plan);
    if (s == NULL)
        return PyErr_NoMemory();
    PyObject *r = PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
    free(s);
    return r;
}

static PyObject *program_memory_analysis(cj_py_program *p, PyObject *unused)
{
    (void)unused;
    const cj_plan *plan = program_plan(p);
    return plan ? cj_py_plan_memory_analysis(plan) : NULL;
}

static PyObject *program_memory_plan(cj_py_program *p, PyObject *unused)
{
    (void)unused;
    const cj_plan *plan = program_plan(p);
    return plan ? cj_py_plan_memory_plan(plan) : NULL;
}

static PyObject *program_cost_analysis(cj_py_program *p, PyObject *unused)
{
    (void)unused;
    const cj_plan *plan = program_plan(p);
    return plan ? cj_py_plan_costs(plan) : NULL;
}

/* A new str of the PTX of a plan's kernels, for arch (NULL: the default). */
static PyObject *plan_ptx(const cj_plan *plan, const char *arch)
{
    cj_error err = {0};
    char *ptx = cj_cuda_ptx(plan, arch, "cj_cuda", &err);
    if (ptx == NULL)
        return cj_py_raise(&err);
    PyObject *r = PyUnicode_FromString(ptx);
    free(ptx);
    return r;
}

/* ptx(arch=None): the PTX of the program's plan (see the module's ptx()). */
static PyObject *program_ptx(cj_py_program *p, PyObject *args, PyObject *kwds)
{
    const char *arch = NULL;
    static char *kwlist[] = {"arch", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|z:ptx", kwlist, &arch))
        return NULL;
    const cj_plan *plan = program_plan(p);
    return plan ? plan_ptx(plan, arch) : NULL;
}

static PyGetSetDef program_getset[] = {
    {"ptx_bytes", (getter)program_get_ptx_bytes, NULL, "bytes of PTX loaded", NULL},
    {"device", (getter)program_get_device, NULL, "CUDA device ordinal", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef program_methods[] = {
    {"release", (PyCFunction)program_release, METH_NOARGS,
     "release($self, /)\n--\n\nUnloads the kernels; later calls raise RuntimeError."},
    {"as_text", (PyCFunction)program_as_text, METH_NOARGS,
     "as_text($self, /)\n--\n\nThe plan's kernels and buffers."},
    {"memory_analysis", (PyCFunction)program_memory_analysis, METH_NOARGS,
     "memory_analysis($self, /)\n--\n\nThe plan's bytes, as Executable.memory_analysis."},
    {"memory_plan", (PyCFunction)program_memory_plan, METH_NOARGS,
     "memory_plan($self, /)\n--\n\nThe plan's buffers and groups, as Executable.memory_plan."},
    {"cost_analysis", (PyCFunction)program_cost_analysis, METH_NOARGS,
     "cost_analysis($self, /)\n--\n\nflops and bytes accessed of the plan."},
    {"ptx", (PyCFunction)(void (*)(void))program_ptx, METH_VARARGS | METH_KEYWORDS,
     "ptx($self, /, arch=None)\n--\n\nThe PTX of the plan's kernels."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CudaProgramType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cjit._cjit.CudaProgram",
    .tp_basicsize = sizeof(cj_py_program),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "CudaProgram(lowered, device): a Lowered's kernels loaded on a GPU.",
    .tp_new = program_tp_new,
    .tp_dealloc = (destructor)program_dealloc,
    .tp_call = (ternaryfunc)program_call,
    .tp_methods = program_methods,
    .tp_getset = program_getset,
};

/* ---- module functions -------------------------------------------------------------- */

/* ptx(lowered, arch=None): the PTX text of a Lowered's kernels, lowered as
 * a CudaProgram lowers them. */
static PyObject *mod_ptx(PyObject *self, PyObject *args, PyObject *kwds)
{
    (void)self;
    PyObject *lowered;
    const char *arch = NULL;
    static char *kwlist[] = {"lowered", "arch", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|z:ptx", kwlist, &lowered, &arch))
        return NULL;
    const cj_graph *g;
    PyObject *arrays;
    if (cj_py_lowered_parts(lowered, &g, &arrays) < 0)
        return NULL;
    cj_lowered l;
    cj_error err = {0};
    if (lower_for_gpu(g, &l, &err) != CJ_OK)
        return cj_py_raise(&err);
    PyObject *r = plan_ptx(&l.plan, arch);
    cj_lowered_free(&l);
    return r;
}

/* cuda_status(): (number of CUDA devices, why there are none or ""). */
static PyObject *mod_cuda_status(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    char why[512];
    int n;
    Py_BEGIN_ALLOW_THREADS
    n = cj_cuda_device_count(why, sizeof why);
    Py_END_ALLOW_THREADS
    return Py_BuildValue("(is)", n, n > 0 ? "" : why);
}

/* cuda_device_info(device): (name, (major, minor)). */
static PyObject *mod_cuda_device_info(PyObject *self, PyObject *arg)
{
    (void)self;
    int dev = PyLong_AsLong(arg);
    if (dev == -1 && PyErr_Occurred())
        return NULL;
    char name[256];
    int major = 0, minor = 0;
    cj_error err = {0};
    if (cj_cuda_device_info(dev, name, sizeof name, &major, &minor, &err) != CJ_OK)
        return cj_py_raise(&err);
    return Py_BuildValue("(s(ii))", name, major, minor);
}

static PyMethodDef cuda_functions[] = {
    {"ptx", (PyCFunction)(void (*)(void))mod_ptx, METH_VARARGS | METH_KEYWORDS,
     "ptx($module, lowered, arch=None)\n--\n\nThe PTX of a Lowered's kernels (no GPU needed)."},
    {"cuda_status", mod_cuda_status, METH_NOARGS,
     "cuda_status($module, /)\n--\n\n(number of CUDA devices, why there are none)."},
    {"cuda_device_info", mod_cuda_device_info, METH_O,
     "cuda_device_info($module, device, /)\n--\n\n(name, (major, minor))."},
    {"cuda_put", mod_cuda_put, METH_VARARGS,
     "cuda_put($module, array, device, /)\n--\n\nA DeviceBuffer holding a copy of array."},
    {NULL, NULL, 0, NULL},
};

/* See py_glue.h. */
int cj_py_cuda_init(PyObject *m)
{
    if (PyType_Ready(&DeviceBufferType) < 0 || PyType_Ready(&CudaProgramType) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "DeviceBuffer", (PyObject *)&DeviceBufferType) < 0
        || PyModule_AddObjectRef(m, "CudaProgram", (PyObject *)&CudaProgramType) < 0
        || PyModule_AddFunctions(m, cuda_functions) < 0)
        return -1;
    return 0;
}
