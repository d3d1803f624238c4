/* py_jit.c - the C fast path of a jitted call.
 *
 * cjit.Jitted (api.py) subclasses JitBase.  Calling one runs jit_call:
 * it flattens the arguments in C when they are of the common kinds (exact
 * ndarrays and cjit.Arrays that are C-contiguous and of a supported dtype,
 * 64-bit ones narrowed to a 32-bit copy with x64 off, Python
 * bool/int/float, None, and exact tuples, lists and dicts with str keys of
 * them), writes their abstract signature (structure, dict keys, dtype and
 * shape per leaf) as a byte string, and looks it up in a table of its own.
 * On a hit it runs the executable on the leaves' data and rebuilds the
 * output tree: no Python code runs.  Anything else (a miss, a static
 * argument, a trace in progress, CJIT_DISABLE_JIT, an unusual leaf) goes to
 * the Python method `_call_slow(fkey, *args, **kwargs)`, where fkey is the
 * signature bytes (None when the arguments are not of the common kinds);
 * Python fills the table with `_fast_put` once it has the entry.
 *
 * The key determines the Python cache key (tree structure, statics (none
 * here), dtype/shape/weak per leaf), so an entry found here is the entry
 * Python would find.  Hits counted here are added to Python's counts by
 * cache_info(). */
#include "py_glue.h"

#include "codegen.h"

#include <stdlib.h>
#include <string.h>

#define KEY_MAX 2048
#define LEAF_MAX 64
#define DEPTH_MAX 32
#define TABLE_MAX 256   /* entries; the table starts again when full */

typedef struct {
    uint64_t hash;
    size_t keylen;
    unsigned char *key;   /* malloc'd; NULL marks an empty slot */
    PyObject *exe;        /* the Executable */
    PyObject *rebuild;    /* callable(list of outputs) -> result; NULL for kinds 0-2 */
    int out_kind;         /* 0: the single output, 1: a tuple of them, 2: a list, 3: rebuild */
} fast_entry;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    fast_entry *table;    /* open addressing, cap a power of two */
    int cap, count;
    long long hits;       /* hits served here */
    bool enabled;         /* false: every call goes to _call_slow */
    bool internal;        /* CJIT_DISABLE_JIT does not apply */
} jit_base;

/* Under the GIL: traces in progress (any thread), and hits served here. */
static long trace_depth;
static long long total_hits;
static PyObject *str_call_slow;   /* interned "_call_slow" */

/* ---- the signature key --------------------------------------------------- */

typedef union {
    double f;
    int64_t i;
    float f32;      /* x64 off: Python floats and ints are weak float32 and int32 */
    int32_t i32;
    npy_bool b;
} scalar;

typedef struct {
    unsigned char buf[KEY_MAX];
    size_t len;
    int nleaves;
    PyObject *leaf[LEAF_MAX];       /* borrowed (from the arguments or from `narrowed`) */
    void *data[LEAF_MAX];           /* parameter data pointers */
    scalar value[LEAF_MAX];         /* Python scalars, as the kernels read them */
    PyObject *narrowed[LEAF_MAX];   /* x64 off: owned 32-bit copies of 64-bit array arguments */
    int nnarrowed;
} key_builder;

static void release_narrowed(key_builder *k)
{
    for (int i = 0; i < k->nnarrowed; i++)
        Py_DECREF(k->narrowed[i]);
    k->nnarrowed = 0;
}

static bool put(key_builder *k, const void *p, size_t n)
{
    if (k->len + n > KEY_MAX)
        return false;
    if (n > 0)          /* p is NULL for a 0-d array's dims */
        memcpy(k->buf + k->len, p, n);
    k->len += n;
    return true;
}

static bool put_u8(key_builder *k, unsigned v)
{
    unsigned char c = (unsigned char)v;
    return put(k, &c, 1);
}

static bool put_u32(key_builder *k, size_t v)
{
    if (v > UINT32_MAX)
        return false;
    uint32_t u = (uint32_t)v;
    return put(k, &u, sizeof u);
}

static bool add_leaf(key_builder *k, PyObject *o, void *data)
{
    if (k->nleaves >= LEAF_MAX)
        return false;
    k->leaf[k->nleaves] = o;
    k->data[k->nleaves] = data;
    k->nleaves++;
    return true;
}

/* With x64 off, a 64-bit array argument is computed on as its 32-bit
 * counterpart, as JAX converts it: the copy is made here (NumPy's unsafe
 * cast, as the Python path's astype), so such a call stays on the fast
 * path.  The key marks it 'n', apart from a true 32-bit argument. */
static bool add_narrowed_leaf(key_builder *k, PyArrayObject *a, cj_dtype canon)
{
    if (k->nnarrowed >= LEAF_MAX)
        return false;
    PyArray_Descr *d = PyArray_DescrFromType(cj_py_npy_type(canon));   /* new ref */
    PyObject *c = d == NULL ? NULL : PyArray_CastToType(a, d /* stolen */, 0);
    if (c == NULL) {
        PyErr_Clear();
        return false;
    }
    k->narrowed[k->nnarrowed++] = c;
    int nd = PyArray_NDIM(a);
    return put_u8(k, 'n') && put_u8(k, (unsigned)canon) && put_u8(k, (unsigned)nd)
           && put(k, PyArray_DIMS(a), sizeof(npy_intp) * (size_t)nd)
           && add_leaf(k, c, PyArray_DATA((PyArrayObject *)c));
}

static bool put_str(key_builder *k, PyObject *s)
{
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    if (u == NULL) {
        PyErr_Clear();
        return false;
    }
    return put_u32(k, (size_t)n) && put(k, u, (size_t)n);
}

/* Sorts n exact str objects (insertion sort: dicts here are small). */
static void sort_strs(PyObject **a, Py_ssize_t *idx, Py_ssize_t n)
{
    for (Py_ssize_t i = 1; i < n; i++) {
        PyObject *s = a[i];
        Py_ssize_t x = idx[i], j = i - 1;
        while (j >= 0 && PyUnicode_Compare(a[j], s) > 0) {
            a[j + 1] = a[j];
            idx[j + 1] = idx[j];
            j--;
        }
        a[j + 1] = s;
        idx[j + 1] = x;
    }
}

static bool walk(key_builder *k, PyObject *o, int depth);

static bool nd_ok(PyArrayObject *a) { return PyArray_NDIM(a) <= CJ_MAX_RANK; }

static bool walk_seq(key_builder *k, PyObject *const *items, Py_ssize_t n, int depth)
{
    if (!put_u32(k, (size_t)n))
        return false;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!walk(k, items[i], depth + 1))
            return false;
    return true;
}

static bool walk_dict(key_builder *k, PyObject *d, int depth)
{
    Py_ssize_t n = PyDict_GET_SIZE(d);
    if (n > LEAF_MAX)
        return false;
    PyObject *keys[LEAF_MAX], *vals[LEAF_MAX];
    Py_ssize_t idx[LEAF_MAX], pos = 0, i = 0;
    PyObject *key, *val;
    while (PyDict_Next(d, &pos, &key, &val)) {
        if (i >= n || !PyUnicode_CheckExact(key))
            return false;
        keys[i] = key;
        vals[i] = val;
        idx[i] = i;
        i++;
    }
    if (i != n)
        return false;
    sort_strs(keys, idx, n);
    if (!put_u8(k, 'd') || !put_u32(k, (size_t)n))
        return false;
    for (i = 0; i < n; i++)
        if (!put_str(k, keys[i]) || !walk(k, vals[idx[i]], depth + 1))
            return false;
    return true;
}

/* Appends o's signature to the key and its leaves to the list; false when
 * o is not of the kinds handled here (the Python path takes the call). */
static bool walk(key_builder *k, PyObject *o, int depth)
{
    if (depth > DEPTH_MAX)
        return false;
    PyTypeObject *t = Py_TYPE(o);
    if (t == &PyArray_Type || t == cj_py.array_type) {
        PyArrayObject *a = (PyArrayObject *)o;
        cj_dtype dt;
        if (!PyArray_ISCARRAY_RO(a) || !cj_py_dtype_from_descr(PyArray_DESCR(a), &dt))
            return false;
        if (cj_dtype_canon(dt) != dt)
            return nd_ok(a) && add_narrowed_leaf(k, a, cj_dtype_canon(dt));
        int nd = PyArray_NDIM(a);
        if (nd > CJ_MAX_RANK || !put_u8(k, 'a') || !put_u8(k, (unsigned)dt) || !put_u8(k, (unsigned)nd)
            || !put(k, PyArray_DIMS(a), sizeof(npy_intp) * (size_t)nd))
            return false;
        return add_leaf(k, o, PyArray_DATA(a));
    }
    if (t == &PyFloat_Type) {
        if (k->nleaves >= LEAF_MAX)
            return false;
        if (cj_x64_enabled())
            k->value[k->nleaves].f = PyFloat_AS_DOUBLE(o);
        else
            k->value[k->nleaves].f32 = (float)PyFloat_AS_DOUBLE(o);
        return put_u8(k, 'f') && add_leaf(k, o, &k->value[k->nleaves]);
    }
    if (t == &PyBool_Type) {
        if (k->nleaves >= LEAF_MAX)
            return false;
        k->value[k->nleaves].b = o == Py_True;
        return put_u8(k, 'b') && add_leaf(k, o, &k->value[k->nleaves]);
    }
    if (t == &PyLong_Type) {
        if (k->nleaves >= LEAF_MAX)
            return false;
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return false;   /* the Python path names the argument */
        }
        if (cj_x64_enabled()) {
            k->value[k->nleaves].i = (int64_t)v;
        } else {
            if (v < INT32_MIN || v > INT32_MAX)
                return false;   /* the Python path raises OverflowError */
            k->value[k->nleaves].i32 = (int32_t)v;
        }
        return put_u8(k, 'i') && add_leaf(k, o, &k->value[k->nleaves]);
    }
    if (o == Py_None)
        return put_u8(k, 'n');
    if (t == &PyTuple_Type)
        return put_u8(k, 't') && walk_seq(k, &PyTuple_GET_ITEM(o, 0), PyTuple_GET_SIZE(o), depth);
    if (t == &PyList_Type)
        return put_u8(k, 'l') && walk_seq(k, &PyList_GET_ITEM(o, 0), PyList_GET_SIZE(o), depth);
    if (t == &PyDict_Type)
        return walk_dict(k, o, depth);
    return false;
}

/* The key of a call: positional arguments, then keyword arguments in
 * sorted name order (the order of Python's flatten of (args, kwargs)). */
static bool build_key(key_builder *k, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    k->len = 0;
    k->nleaves = 0;
    k->nnarrowed = 0;
    /* the mode is part of the key: an entry traced in one is never served in the other */
    if (!put_u8(k, cj_x64_enabled() ? 'A' : 'a') || !walk_seq(k, args, nargs, 0))
        return false;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nkw == 0)
        return true;
    if (nkw > LEAF_MAX)
        return false;
    PyObject *names[LEAF_MAX];
    Py_ssize_t idx[LEAF_MAX];
    for (Py_ssize_t i = 0; i < nkw; i++) {
        names[i] = PyTuple_GET_ITEM(kwnames, i);
        if (!PyUnicode_CheckExact(names[i]))
            return false;
        idx[i] = i;
    }
    sort_strs(names, idx, nkw);
    if (!put_u8(k, 'K') || !put_u32(k, (size_t)nkw))
        return false;
    for (Py_ssize_t i = 0; i < nkw; i++)
        if (!put_str(k, names[i]) || !walk(k, args[nargs + idx[i]], 1))
            return false;
    return true;
}

static uint64_t hash_bytes(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

/* ---- the table ------------------------------------------------------------- */

static fast_entry *table_find(jit_base *self, const unsigned char *key, size_t len, uint64_t h)
{
    if (self->cap == 0)
        return NULL;
    size_t mask = (size_t)self->cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        fast_entry *e = &self->table[i];
        if (e->key == NULL)
            return NULL;
        if (e->hash == h && e->keylen == len && memcmp(e->key, key, len) == 0)
            return e;
    }
}

static void table_clear(jit_base *self)
{
    fast_entry *t = self->table;
    int cap = self->cap;
    self->table = NULL;
    self->cap = self->count = 0;
    for (int i = 0; i < cap; i++) {
        if (t[i].key == NULL)
            continue;
        free(t[i].key);
        Py_XDECREF(t[i].exe);
        Py_XDECREF(t[i].rebuild);
    }
    free(t);
}

/* Adds an entry (taking new references).  0, or -1 with an exception. */
static int table_put(jit_base *self, const unsigned char *key, size_t len, PyObject *exe,
                     int out_kind, PyObject *rebuild)
{
    uint64_t h = hash_bytes(key, len);
    fast_entry *old = table_find(self, key, len, h);
    if (old != NULL) {   /* replaced (after a release, say) */
        Py_SETREF(old->exe, Py_NewRef(exe));
        Py_XSETREF(old->rebuild, Py_XNewRef(rebuild));
        old->out_kind = out_kind;
        return 0;
    }
    if (self->count >= TABLE_MAX)
        table_clear(self);
    if ((self->count + 1) * 2 > self->cap) {
        int ncap = self->cap ? self->cap * 2 : 8;
        fast_entry *nt = calloc((size_t)ncap, sizeof *nt);
        if (nt == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (int i = 0; i < self->cap; i++) {
            fast_entry *e = &self->table[i];
            if (e->key == NULL)
                continue;
            size_t j = (size_t)e->hash & (size_t)(ncap - 1);
            while (nt[j].key != NULL)
                j = (j + 1) & (size_t)(ncap - 1);
            nt[j] = *e;
        }
        free(self->table);
        self->table = nt;
        self->cap = ncap;
    }
    unsigned char *copy = malloc(len ? len : 1);
    if (copy == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(copy, key, len);
    size_t mask = (size_t)self->cap - 1, i = (size_t)h & mask;
    while (self->table[i].key != NULL)
        i = (i + 1) & mask;
    fast_entry *e = &self->table[i];
    e->hash = h;
    e->keylen = len;
    e->key = copy;
    e->exe = Py_NewRef(exe);
    e->rebuild = Py_XNewRef(rebuild);
    e->out_kind = out_kind;
    self->count++;
    return 0;
}

/* ---- the call ------------------------------------------------------------------ */

static bool disable_jit_set(void)
{
    const char *v = getenv("CJIT_DISABLE_JIT");
    if (v == NULL)
        return false;
    static const char *const no[] = {"", "0", "false", "False", "no", "off"};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        if (strcmp(v, no[i]) == 0)
            return false;
    return true;
}

/* Runs entry e on the leaves of k; returns the result (new ref). */
static PyObject *run_entry(jit_base *self, fast_entry *e, key_builder *k)
{
    PyObject *exe = Py_NewRef(e->exe), *rebuild = Py_XNewRef(e->rebuild);
    int kind = e->out_kind;
    /* The leaves stay alive while the GIL is released, whatever other
     * threads do to the containers they came in. */
    for (int i = 0; i < k->nleaves; i++)
        Py_INCREF(k->leaf[i]);
    PyObject *outs = cj_py_executable_run_ptrs(exe, k->data, k->leaf);
    for (int i = 0; i < k->nleaves; i++)
        Py_DECREF(k->leaf[i]);
    Py_DECREF(exe);
    PyObject *r = NULL;
    if (outs != NULL) {
        self->hits++;
        total_hits++;
        Py_ssize_t n = PyList_GET_SIZE(outs);
        switch (kind) {
        case 0:
            r = n == 1 ? Py_NewRef(PyList_GET_ITEM(outs, 0)) : NULL;
            if (r == NULL)
                PyErr_SetString(PyExc_RuntimeError, "cjit internal error: expected one output");
            break;
        case 1:
            r = PyList_AsTuple(outs);
            break;
        case 2:
            r = Py_NewRef(outs);
            break;
        default:
            r = PyObject_CallOneArg(rebuild, outs);
            break;
        }
        Py_DECREF(outs);
    }
    Py_XDECREF(rebuild);
    return r;
}

/* self._call_slow(fkey, *args, **kwargs) */
static PyObject *call_slow(PyObject *self, PyObject *fkey, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, total = nargs + nkw + 2;
    PyObject *stack[18];
    PyObject **a = total <= 18 ? stack : PyMem_Malloc((size_t)total * sizeof(PyObject *));
    if (a == NULL)
        return PyErr_NoMemory();
    a[0] = self;
    a[1] = fkey;
    if (nargs + nkw > 0)
        memcpy(a + 2, args, (size_t)(nargs + nkw) * sizeof(PyObject *));
    PyObject *r = PyObject_VectorcallMethod(str_call_slow, a, (size_t)(nargs + 2), kwnames);
    if (a != stack)
        PyMem_Free(a);
    return r;
}

static PyObject *jit_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    jit_base *self = (jit_base *)obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!self->enabled || trace_depth > 0 || (!self->internal && disable_jit_set()))
        return call_slow(obj, Py_None, args, nargs, kwnames);
    key_builder k;
    if (!build_key(&k, args, nargs, kwnames)) {
        release_narrowed(&k);
        return call_slow(obj, Py_None, args, nargs, kwnames);
    }
    uint64_t h = hash_bytes(k.buf, k.len);
    fast_entry *e = table_find(self, k.buf, k.len, h);
    if (e != NULL) {
        if (cj_py_executable_ready(e->exe, k.nleaves)) {
            PyObject *r = run_entry(self, e, &k);
            release_narrowed(&k);
            return r;
        }
        table_clear(self);   /* released (clear_caches, eviction): ask Python again */
    }
    release_narrowed(&k);    /* the Python path converts the arguments itself */
    PyObject *fkey = PyBytes_FromStringAndSize((const char *)k.buf, (Py_ssize_t)k.len);
    if (fkey == NULL)
        return NULL;
    PyObject *r = call_slow(obj, fkey, args, nargs, kwnames);
    Py_DECREF(fkey);
    return r;
}

/* ---- JitBase ----------------------------------------------------------------- */

static PyObject *jit_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)args;
    (void)kwargs;
    jit_base *self = (jit_base *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = jit_vectorcall;
    self->table = NULL;
    self->cap = self->count = 0;
    self->hits = 0;
    self->enabled = false;   /* until _fast_configure */
    self->internal = false;
    return (PyObject *)self;
}

static int jit_traverse(jit_base *self, visitproc visit, void *arg)
{
    /* subtype_traverse visits a heap subclass's type itself */
    for (int i = 0; i < self->cap; i++) {
        if (self->table[i].key == NULL)
            continue;
        Py_VISIT(self->table[i].exe);
        Py_VISIT(self->table[i].rebuild);
    }
    return 0;
}

static int jit_clear(jit_base *self)
{
    table_clear(self);
    return 0;
}

/* (subtype_dealloc drops a heap subclass's reference to its type.) */
static void jit_dealloc(jit_base *self)
{
    PyObject_GC_UnTrack(self);
    table_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* _fast_put(fkey, exe, out_kind, rebuild) */
static PyObject *jit_fast_put(jit_base *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyBytes_Check(args[0]) || Py_TYPE(args[1]) != &cj_py_ExecutableType
        || !PyLong_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "_fast_put(fkey: bytes, exe: Executable, out_kind: int, "
                        "rebuild)");
        return NULL;
    }
    long kind = PyLong_AsLong(args[2]);
    if (kind < 0 || kind > 3 || (kind == 3 && !PyCallable_Check(args[3]))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "_fast_put: out_kind 0-3; 3 needs a callable");
        return NULL;
    }
    if (table_put(self, (const unsigned char *)PyBytes_AS_STRING(args[0]),
                  (size_t)PyBytes_GET_SIZE(args[0]), args[1], (int)kind,
                  kind == 3 ? args[3] : NULL) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *jit_fast_clear(jit_base *self, PyObject *unused)
{
    (void)unused;
    table_clear(self);
    Py_RETURN_NONE;
}

/* _fast_configure(enabled, internal) */
static PyObject *jit_fast_configure(jit_base *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_fast_configure(enabled, internal)");
        return NULL;
    }
    int en = PyObject_IsTrue(args[0]), in = PyObject_IsTrue(args[1]);
    if (en < 0 || in < 0)
        return NULL;
    self->enabled = en;
    self->internal = in;
    table_clear(self);
    Py_RETURN_NONE;
}

static PyObject *jit_get_fast_hits(jit_base *self, void *c)
{
    (void)c;
    return PyLong_FromLongLong(self->hits);
}

static PyObject *jit_get_fast_entries(jit_base *self, void *c)
{
    (void)c;
    return PyLong_FromLong(self->count);
}

static PyMethodDef jit_methods[] = {
    {"_fast_put", (PyCFunction)(void (*)(void))jit_fast_put, METH_FASTCALL,
     "_fast_put($self, fkey, exe, out_kind, rebuild, /)\n--\n\nRemembers exe for calls whose "
     "signature is fkey; the outputs come back as the single output (0), a tuple (1), a list (2) "
     "or rebuild(outputs) (3)."},
    {"_fast_clear", (PyCFunction)jit_fast_clear, METH_NOARGS,
     "_fast_clear($self, /)\n--\n\nForgets every entry of the fast path."},
    {"_fast_configure", (PyCFunction)(void (*)(void))jit_fast_configure, METH_FASTCALL,
     "_fast_configure($self, enabled, internal, /)\n--\n\nenabled: hits may skip Python; "
     "internal: CJIT_DISABLE_JIT does not apply."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef jit_getset[] = {
    {"_fast_hits", (getter)jit_get_fast_hits, NULL, "cache hits served by the C fast path", NULL},
    {"_fast_entries", (getter)jit_get_fast_entries, NULL, "entries of the fast path's table", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject JitBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cjit._cjit.JitBase",
    .tp_basicsize = sizeof(jit_base),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC
                | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Base of cjit.Jitted: the C fast path of a cached call.",
    .tp_new = jit_new,
    .tp_dealloc = (destructor)jit_dealloc,
    .tp_traverse = (traverseproc)jit_traverse,
    .tp_clear = (inquiry)jit_clear,
    .tp_vectorcall_offset = offsetof(jit_base, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_methods = jit_methods,
    .tp_getset = jit_getset,
};

/* ---- module functions ------------------------------------------------------------ */

/* _trace_depth(delta): api.py's trace stack grew or shrank; returns the depth. */
static PyObject *mod_trace_depth(PyObject *m, PyObject *arg)
{
    (void)m;
    long d = PyLong_AsLong(arg);
    if (d == -1 && PyErr_Occurred())
        return NULL;
    trace_depth += d;
    if (trace_depth < 0)
        trace_depth = 0;
    return PyLong_FromLong(trace_depth);
}

static PyObject *mod_fast_hits(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    return PyLong_FromLongLong(total_hits);
}

/* _enable_vectorcall(cls): a Python subclass of JitBase that does not
 * define __call__ is called through vectorcall (Python 3.12 inherits the
 * flag; 3.11 does not). */
static PyObject *mod_enable_vectorcall(PyObject *m, PyObject *arg)
{
    (void)m;
    if (!PyType_Check(arg) || !PyType_IsSubtype((PyTypeObject *)arg, &JitBaseType)) {
        PyErr_SetString(PyExc_TypeError, "_enable_vectorcall: expected a subclass of JitBase");
        return NULL;
    }
    PyTypeObject *t = (PyTypeObject *)arg;
    if (t->tp_call == JitBaseType.tp_call && t->tp_vectorcall_offset == JitBaseType.tp_vectorcall_offset) {
        t->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
        PyType_Modified(t);
        Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

/* _hold_compiles(on): for tests of Ctrl-C during a compile (jit_cpu.c);
 * returns the previous setting. */
static PyObject *mod_hold_compiles(PyObject *m, PyObject *flag)
{
    (void)m;
    int on = PyObject_IsTrue(flag);
    if (on < 0)
        return NULL;
    return PyBool_FromLong(cj_jit_hold_compiles(on != 0));
}

static PyObject *mod_compiles_held(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    return PyLong_FromLong(cj_jit_compiles_held());
}

static PyMethodDef jit_functions[] = {
    {"_hold_compiles", mod_hold_compiles, METH_O,
     "_hold_compiles($module, on, /)\n--\n\nWhile on, each compile waits before LLVM's phase until it "
     "is cancelled (Ctrl-C) or the hold is lifted, at most 120 s; returns the previous setting (for tests)."},
    {"_compiles_held", mod_compiles_held, METH_NOARGS,
     "_compiles_held($module, /)\n--\n\nHow many compile threads wait at the hold now."},
    {"_trace_depth", mod_trace_depth, METH_O,
     "_trace_depth($module, delta, /)\n--\n\nAdds delta to the count of traces in progress "
     "(the fast path stands aside while any runs); returns it."},
    {"fast_hits", mod_fast_hits, METH_NOARGS,
     "fast_hits($module, /)\n--\n\nCache hits served by the C fast path, process-wide."},
    {"_enable_vectorcall", mod_enable_vectorcall, METH_O,
     "_enable_vectorcall($module, cls, /)\n--\n\nLets calls of a JitBase subclass use vectorcall."},
    {NULL, NULL, 0, NULL},
};

/* See py_glue.h. */
int cj_py_jit_init(PyObject *m)
{
    if (str_call_slow == NULL) {
        str_call_slow = PyUnicode_InternFromString("_call_slow");   /* kept for the process */
        if (str_call_slow == NULL)
            return -1;
    }
    if (PyType_Ready(&JitBaseType) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "JitBase", (PyObject *)&JitBaseType) < 0)
        return -1;
    return PyModule_AddFunctions(m, jit_functions);
}
