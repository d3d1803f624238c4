/* py_trace.h - shared by the files of tracing: py_operand.c (operands and
 * Tracers made, the user's line), py_trace.c (the Trace type),
 * py_trace_apply.c (Trace.apply), py_trace_ad.c (vjp, jvp, batch,
 * checkpoint regions), py_tracer.c (the Tracer type's behaviour) and
 * py_lax.c (control flow).  No other file includes it. */
#ifndef CJ_PY_TRACE_H
#define CJ_PY_TRACE_H

#include "autodiff.h"
#include "py_glue.h"

#define Tracer_Check(o) Py_IS_TYPE((o), &cj_py_TracerType)   /* not subclassable */

/* py_operand.c */
/* The location id of the user's file:line, interned in g; -1 if none. */
int current_loc(cj_graph *g);
/* True when operand_node can convert obj (no exception is ever set). */
bool convertible(PyObject *obj);
/* Converts one operand of `opname` for the live trace tr.  Returns the
 * node id, -1 with an exception set, or -2 (no exception) when obj has a
 * type that cannot be converted (see convertible()). */
int operand_node(cj_py_trace *tr, PyObject *obj, const char *opname, int loc);
/* The node of closed-over array obj (the same object twice gives the same
 * node), or -1 with an exception set. */
int array_node(cj_py_trace *tr, PyObject *obj, int loc);
/* Like operand_node, but an unconvertible type is a TypeError. */
int operand_node_strict(cj_py_trace *tr, PyObject *obj, const char *opname, int loc);
/* 0, or -1 with RuntimeError when tr has finished. */
int trace_check_live(cj_py_trace *tr, const char *method);
/* A new Tracer for node id of the live trace tr. */
PyObject *tracer_wrap(cj_py_trace *tr, int id);
/* Raises TracerLeakError for t; returns NULL. */
PyObject *leak_error(const cj_py_tracer *t);
/* "float32[3] traced value created at f.py:12" into buf. */
void tracer_describe(const cj_py_tracer *t, char *buf, size_t n);
/* py_trace_apply.c, py_trace_ad.c: methods of Trace (see trace_methods) */
PyObject *trace_apply(cj_py_trace *tr, PyObject *args, PyObject *kwargs);
PyObject *trace_vjp(cj_py_trace *tr, PyObject *args);
PyObject *trace_jvp(cj_py_trace *tr, PyObject *args);
PyObject *trace_batch(cj_py_trace *tr, PyObject *args);
PyObject *trace_mark(cj_py_trace *tr, PyObject *unused);
PyObject *trace_region_begin(cj_py_trace *tr, PyObject *args);
PyObject *trace_region_end(cj_py_trace *tr, PyObject *arg);
/* Reads a chain schedule (bounds, keep, stores) as Trace.vjp takes it into
 * *s, its arrays one PyMem block at s->bound.  0, or -1 with an exception. */
int cj_py_chain_schedule_from(PyObject *obj, cj_chain_schedule *s);
/* py_budget.c: the chain schedule of search b (may be NULL) for the vjp
 * whose differentiated nodes start at `first`: given to one vjp only, the
 * first at or before the chain's first layer; NULL: none. */
const cj_chain_schedule *cj_py_budget_take_chain(PyObject *b, int first);

#endif
