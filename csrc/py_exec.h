/* py_exec.h - the Executable object, shared by its files: py_exec.c (the
 * type, calls), py_exec_args.c (argument checks), py_exec_out.c (results
 * and donations), py_exec_info.c (introspection), and by py_lowered.c and
 * py_nogil.c.  No other file includes it.  The functions below are
 * documented where they are defined. */
#ifndef CJ_PY_EXEC_H
#define CJ_PY_EXEC_H

#include "py_glue.h"

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    cj_executable *x;           /* owned; NULL once released */
    PyObject *arrays;           /* list of closed-over arrays (shared with the Lowered) */
    int nparams, narrays, noutputs;
    /* One malloc'd block: nparams param shapes, then noutputs output shapes. */
    cj_shape *param_shapes, *out_shapes;
    cj_dtype *param_dtypes, *out_dtypes;
    cj_shape *array_shapes;     /* each closed-over array's shape and dtype at trace time */
    cj_dtype *array_dtypes;
    int running;                /* calls in flight with the GIL released */
    bool release_pending;       /* release() came while running */
    bool warned_donation;       /* the unusable-donation warning was given */
    int *out_donor;             /* per output: the donated parameter slot whose bytes it
                                 * lives in, or -1; NULL when no output does */
    bool *hosts_output;         /* per parameter slot: an output lives in it; NULL likewise */
    PyObject *weakrefs;         /* weak reference support */
} cj_py_executable;

/* The base capsule of an output's memory (py_exec_out.c). */
#define OUT_CAPSULE "cjit.output"

/* A result that lives in a donated argument's memory is a new array over
 * those bytes whose base is a capsule of this name; the capsule's context
 * holds a reference to the array that owns the memory, so the memory lives
 * as long as the result.  (Not the donated array itself: that one is made
 * read-only once consumed, and a chain of bases through it would make the
 * result look read-only to the next donation, see donation_refused.) */
#define DONATED_CAPSULE "cjit.donated"

/* py_nogil.c */
/* Executables whose machine code is still held (memory_stats()'s
 * live_executables); changed under the GIL only. */
extern Py_ssize_t live_executables;
cj_executable *compile_with_gil_released(const cj_graph *g, const cj_compile_options *o);
void free_executable_gil_released(cj_executable *x);
/* py_exec.c */
PyObject *executable_new(cj_executable *x, const cj_graph *g, PyObject *arrays);
/* py_exec_out.c */
PyObject *new_output(const cj_shape *s, cj_dtype dt, void **data);
PyObject *donated_output(PyArrayObject *donor, const cj_shape *s, cj_dtype dt);
PyObject *param_copy(cj_py_executable *e, int slot, const void *data);
PyArrayObject *donor_array(PyObject *const *leaves, PyObject *copies, int slot, const void *data);
int check_not_consumed(int nparams, PyObject *const *leaves);
void consume_donations(const cj_plan *p, int nparams, void *const *params, PyObject *const *leaves);
/* py_exec_args.c */
PyObject *released_error(void);
void executable_free_code(cj_py_executable *e);
PyObject *executable_run(cj_py_executable *e, PyObject *argseq);
int check_donated(cj_py_executable *e, const cj_plan *p, void *const *params, void *const *arrays);
void *const *usable_donations(cj_py_executable *e, const cj_plan *p, void *const *params,
                              PyObject *const *leaves, void ***owned, PyObject **copies);
int closed_over_data(cj_py_executable *e, void **data, PyObject **copies);
/* py_exec_info.c */
PyObject *executable_as_text(cj_py_executable *e, PyObject *unused);
PyObject *executable_memory_analysis(cj_py_executable *e, PyObject *unused);
PyObject *executable_memory_plan(cj_py_executable *e, PyObject *unused);
PyObject *executable_cost_analysis(cj_py_executable *e, PyObject *unused);

#endif
