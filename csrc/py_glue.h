/* py_glue.h - private to the files of the extension module (py_*.c).
 * Only these files include Python.h and the NumPy headers; the core never
 * sees a PyObject.
 *
 * Reference conventions in these files: a function returning PyObject *
 * returns a NEW reference (NULL with an exception set) unless its comment
 * says "borrowed". */
#ifndef CJ_PY_GLUE_H
#define CJ_PY_GLUE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* One NumPy C-API table shared by the binding files: py_convert.c holds it
 * and fills it (cj_py_import_numpy, called by the module's init). */
#ifndef NPY_NO_DEPRECATED_API
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#endif
#define PY_ARRAY_UNIQUE_SYMBOL cj_py_ARRAY_API
#ifndef CJ_PY_IMPORT_ARRAY
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>
#include <numpy/arrayscalars.h>

#include "graph.h"
#include "pipeline.h"

/* ---- process-wide state (py_convert.c) ------------------------------
 *
 * These live in one static struct rather than in PEP 3121 module state:
 * the number-protocol and rich-compare slots of the static Tracer type get
 * no module argument, so they could not reach module state cheaply.  The
 * module uses single-phase init and refuses a second initialisation, so
 * the struct is filled exactly once.  Every PyObject here is a strong
 * reference held until the process ends. */
typedef struct {
    PyObject *ConcretizationError;   /* TypeError subclass */
    PyObject *TracerLeakError;       /* TypeError subclass */
    PyObject *MemoryBudgetError;     /* ValueError subclass */
    PyObject *CompileError;          /* RuntimeError subclass */
    PyObject *package_dir;           /* str ending in a separator, or NULL */
    PyObject *tracer_fns;            /* name -> function, registered by cjit.numpy, or NULL */
    PyTypeObject *array_type;        /* cjit.Array (an ndarray subclass), or NULL before cjit registers it */
    PyTypeObject *deleted_type;      /* cjit.Array's subclass for deleted (donated) arrays, or NULL */
} cj_py_state;

extern cj_py_state cj_py;

/* Fills the NumPy C-API table (import_array); 0, or -1 with an exception. */
int cj_py_import_numpy(void);

/* Sets the Python exception that matches err->status (TypeError,
 * ValueError, MemoryError, RuntimeError, CompileError, MemoryBudgetError)
 * with err->message.  Always returns NULL so callers can `return` it. */
PyObject *cj_py_raise(const cj_error *err);

/* A cj_run_poll's question for a run with the GIL released, ctx the
 * PyThreadState * that PyEval_SaveThread gave: runs the signal handlers
 * (py_nogil.c); true when one raised (Ctrl-C). */
bool run_interrupted(void *ctx);

/* A new str from a malloc'd C string, which this frees (NULL: MemoryError). */
PyObject *str_from_owned(char *s);

/* The function `name` that cjit.numpy registered for the Tracer's methods
 * (register_tracer_functions, at its import).  Returns a BORROWED
 * reference, or NULL with an exception set (none set when `quiet`). */
PyObject *cj_py_tracer_function(const char *name, bool quiet);

/* The type of the arrays cjit returns: cjit.Array once registered
 * (register_array_type, at cjit's import), else NumPy's ndarray.  Results
 * are made read-only: cjit.Arrays are immutable, as JAX's. */
static inline PyTypeObject *cj_py_result_type(void)
{
    return cj_py.array_type != NULL ? cj_py.array_type : &PyArray_Type;
}

/* ---- dtype and shape conversions (py_convert.c) ---------------------- */

/* The NumPy type number of a cjit dtype. */
int cj_py_npy_type(cj_dtype dt);
/* Maps a NumPy dtype to a cjit dtype: one of bool/int32/int64/float32/
 * float64 in native byte order.  Returns false (no exception) otherwise. */
bool cj_py_dtype_from_descr(PyArray_Descr *d, cj_dtype *out);
/* Parses a dtype given as a name ("float32"), np.dtype or scalar type.
 * Returns 0, or -1 with TypeError set (naming `what` and the dtype). */
int cj_py_dtype_from_obj(PyObject *obj, cj_dtype *out, const char *what);
/* A new np.dtype object for dt. */
PyObject *cj_py_dtype_object(cj_dtype dt);
/* A new tuple of Python ints for the shape. */
PyObject *cj_py_shape_tuple(const cj_shape *s);
/* Parses a shape (sequence of non-negative ints, or one int).  Returns 0,
 * or -1 with TypeError/ValueError naming `what`. */
int cj_py_shape_from_obj(PyObject *obj, cj_shape *out, const char *what);
/* Writes "float32[2,3]" into buf; returns buf. */
char *cj_py_aval_str(cj_dtype dt, const cj_shape *s, char *buf, size_t n);

/* ---- tracing (py_trace*.c, py_tracer.c) ---------------------------- */

typedef struct {
    PyObject_HEAD
    cj_graph *graph;      /* owned; NULL once the trace has finished */
    PyObject *arrays;     /* list: closed-over arrays as the user made them, slot order */
    PyObject *array_ids;  /* dict: id(original) -> (original, node id) */
    char **final_locs;    /* copies of the location strings, made at finish */
    int nfinal_locs;
    bool finished;
    PyObject *weakrefs;   /* weak reference support */
    PyObject *concrete;   /* Trace.concrete: the evaluator of values, or NULL (abstract) */
    PyObject *budget;     /* a MemoryBudget: asked for while tracing, or the search this
                           * retrace belongs to (Trace(budget=)); NULL: none */
} cj_py_trace;

typedef struct {
    PyObject_HEAD
    cj_py_trace *trace;   /* strong reference */
    int id;               /* node id in trace->graph */
    int loc;              /* the node's location id */
    cj_dtype dtype;       /* copied from the node, so that shape/dtype/repr */
    bool weak;            /*   keep working after the trace finished */
    cj_shape shape;
} cj_py_tracer;

extern PyTypeObject cj_py_TraceType;
extern PyTypeObject cj_py_TracerType;

/* Ready Tracer (py_tracer.c) and Trace (py_trace.c) and add them to module
 * m.  0 or -1. */
int cj_py_tracer_init(PyObject *m);
int cj_py_trace_init(PyObject *m);

/* ---- lowered graphs and executables (py_lowered.c, py_exec*.c) ------ */

extern PyTypeObject cj_py_LoweredType;
extern PyTypeObject cj_py_ExecutableType;

/* A new Lowered that takes ownership of g (freed with the Lowered, also
 * when this fails) and holds a new reference to the list `arrays`. */
PyObject *cj_py_lowered_new(cj_graph *g, PyObject *arrays);

/* Ready Executable (py_exec.c) and Lowered (py_lowered.c) and add them to
 * module m.  0 or -1. */
int cj_py_exec_init(PyObject *m);
int cj_py_lowered_init(PyObject *m);

/* Whether `exe` is an Executable of nparams parameters that can run (not
 * released).  No exception. */
int cj_py_executable_ready(PyObject *exe, int nparams);
/* Runs a ready Executable on parameter data that the caller has checked
 * against its signature (dtypes, shapes, C-contiguous); releases the GIL
 * while the kernels run.  leaves[i] is the object params[i] came from (an
 * ndarray, or a Python scalar whose value the caller copied): a donated
 * argument whose memory may not be written is copied for the call.
 * Returns a new list of the outputs. */
PyObject *cj_py_executable_run_ptrs(PyObject *exe, void *const *params, PyObject *const *leaves);

/* A plan's memory_analysis(), memory_plan() and cost_analysis() dicts, as
 * an Executable gives them (py_exec_info.c); new references, or NULL with
 * an exception set. */
PyObject *cj_py_plan_memory_analysis(const cj_plan *p);
PyObject *cj_py_plan_memory_plan(const cj_plan *p);
PyObject *cj_py_plan_costs(const cj_plan *p);

/* The graph and the closed-over arrays (a list) of Lowered obj, both
 * BORROWED (they live as long as obj).  0, or -1 with TypeError set. */
int cj_py_lowered_parts(PyObject *obj, const cj_graph **g, PyObject **arrays);
/* Lowered obj carries `budget` (a MemoryBudget its trace asked for, whose
 * search has not started: Lowered.memory_budget); a new reference. */
void cj_py_lowered_set_budget(PyObject *obj, PyObject *budget);

/* ---- memory_budget (py_budget.c) ---------------------------------------- */

extern PyTypeObject cj_py_MemoryBudgetType;
int cj_py_budget_init(PyObject *m);
/* Is b (may be NULL) a search that has started (retraces carry it)? */
bool cj_py_budget_searching(PyObject *b);
/* Trace(budget=b, candidate=...): the candidate b's next try follows,
 * (kind, param, cost[, payload]): "chain" (payload: Trace.vjp's chain
 * schedule), "scans" (param: the levels each scan is split into) or
 * "recompute" (payload: forward node ids); cost orders the fitting tries
 * (the least is the best, the earlier on a tie).  0, or -1 with an
 * exception. */
int cj_py_budget_propose(PyObject *b, PyObject *candidate);
/* grad's memory_budget=nbytes asked of a trace: *slot (the trace's, NULL
 * when none) becomes a new MemoryBudget, or the smaller budget of the two
 * when its search has not started.  0, or -1 with an exception. */
int cj_py_budget_request(PyObject **slot, long long nbytes);
/* The forward values a retrace of search b recomputes, by node id (n of
 * them; NULL: none). */
const bool *cj_py_budget_force(PyObject *b, int *n);
/* Trace.finish of a retrace of search b: the oracle's peak of lowered's
 * plan, recorded as a try (the best so far when it fits).  0 or -1. */
int cj_py_budget_record(PyObject *b, PyObject *lowered);

/* ---- the jit fast path (py_jit.c) ------------------------------------- */

/* Readies JitBase and the fast path's functions, adds them to m.  0 or -1. */
int cj_py_jit_init(PyObject *m);

/* ---- CUDA (py_cuda.c) -------------------------------------------------- */

/* Readies DeviceBuffer and CudaProgram and adds them, ptx(), cuda_status(),
 * cuda_device_info() and cuda_put() to module m.  0 or -1. */
int cj_py_cuda_init(PyObject *m);

/* ---- control flow (py_lax.c) ------------------------------------------- */

/* Adds lax_region() to module m.  0 or -1. */
int cj_py_lax_init(PyObject *m);

/* ---- BLAS (py_blas.c) -------------------------------------------------- */

/* Adds blas_library() and the BLAS setup functions to module m.  0 or -1. */
int cj_py_blas_init(PyObject *m);

/* The innermost Python frame outside the cjit package (the user's code),
 * a new reference or NULL; *skipped (if not NULL) is how many of cjit's
 * own frames lie above it.  Never leaves an exception set. */
PyFrameObject *cj_py_user_frame(int *skipped);

#endif
