"""grad and its relatives outside jit, on values: Python control flow on
the values being differentiated, as JAX allows it there.

Outside ``jit``, ``grad(f)(x)`` first runs its internal ``Jitted``, which
traces f abstractly and caches the compiled gradient per signature (the
fast route, and the only one for functions without value-dependent
Python).  When that trace raises ConcretizationError, the call is retried
here: f is traced again, into a trace whose inputs are parameters bound
to the call's own values, with an evaluator set on the trace
(``Trace.concrete``).  ``bool()``, ``int()``, ``float()``, ``__index__``,
``item()``, ``tolist()`` and ``np.asarray`` of one of its values then ask
the evaluator, which compiles the graph recorded so far with that value as
its one output (``Trace.snapshot``) and runs it on the inputs.  The trace
goes on with the branch Python took, the transformation (vjp, jvp, vmap of
either) is appended as usual, and the whole graph is compiled and run on
the same inputs.

Nothing is cached by the inputs' values: each call traces again and
decides its branches from its own values.  The compiled code is cached by
the graph's content (``Lowered.key_bytes``, which is what a branch changes),
so a call that takes the same branches as an earlier one loads the earlier
machine code instead of compiling.

Values that stay abstract here, as in JAX: a value that reads a
placeholder of a vmap, lax control flow or custom-rule body traced in this
trace (note_abstract; the evaluator answers None and the Tracer raises the
usual ConcretizationError), and everything inside a user's ``jit`` called
from f (``abstract_call``)."""
from __future__ import annotations

import collections
import threading

import numpy as np

from . import _cjit, _tree
from ._signature import _convert_leaves, _Inline, _LeafError, _output_tracer
from ._trace_state import _pop_trace, _push_trace

# Machine code per graph content: key_bytes -> the serialized entry
# (Lowered.compile(for_cache=True)), loaded into each new Lowered so that
# the new one's own closed-over arrays are bound.  Bounded, least recently
# used first out.
_CODE_LIMIT = 256
_code = collections.OrderedDict()
_code_lock = threading.Lock()
_counts = {"evaluations": 0, "compiles": 0, "loads": 0}


def _executable(lowered):
    key = lowered.key_bytes()
    with _code_lock:
        blob = _code.get(key)
        if blob is not None:
            _code.move_to_end(key)
    if blob is not None:
        try:
            exe = lowered.load_cached(blob)
            _counts["loads"] += 1
            return exe
        except ValueError:
            pass
    exe, blob = lowered.compile(for_cache=True)
    _counts["compiles"] += 1
    if blob is not None:
        with _code_lock:
            _code[key] = blob
            while len(_code) > _CODE_LIMIT:
                _code.popitem(last=False)
    return exe


def counts():
    """{"evaluations", "compiles", "loads"}: values evaluated while tracing,
    and compiles and cached-code loads of this module (for tests)."""
    return dict(_counts)


class _Evaluator:
    """Trace.concrete of a trace whose parameters are bound to `arrays`."""

    __slots__ = ("arrays", "abstract", "record")

    def __init__(self, arrays, record=None):
        self.arrays = arrays
        self.abstract = []     # placeholders of bodies traced here: abstract values
        self.record = record   # a list that gets every value answered, in order

    def __call__(self, tracer):
        trace = tracer.trace
        if self.abstract and trace.depends(tracer, self.abstract):
            return None
        exe = _executable(trace.snapshot([tracer]))
        _counts["evaluations"] += 1
        value = np.asarray(exe(self.arrays)[0])
        if self.record is not None:
            self.record.append(value)
        return value


class _Replay:
    """Trace.concrete of a trace that does again what a recorded trace on
    values did (_Evaluator's `record`): the values it was asked for, in the
    same order.  The same Python function on the same values asks the same
    questions; anything else (a question more, another shape) is an error."""

    __slots__ = ("values", "next")

    def __init__(self, values):
        self.values = values
        self.next = 0

    def __call__(self, tracer):
        if self.next >= len(self.values):
            return None        # not asked on the values: abstract here
        value = self.values[self.next]
        if value.shape != tuple(tracer.shape) or value.dtype != tracer.dtype:
            raise RuntimeError(
                f"cjit: a function traced again on the values it was first run on asked for a "
                f"{tracer.dtype}{list(tracer.shape)} value where the first run asked for a "
                f"{value.dtype}{list(value.shape)} one; its Python control flow must depend only "
                f"on its arguments' values")
        self.next += 1
        return value


def replayed(trace, values, fun, *args):
    """fun(*args) traced into `trace`, answering its questions about values
    with `values` (recorded by call_on_values(..., record=)), in order."""
    saved = trace.concrete
    trace.concrete = _Replay(values)
    try:
        return fun(*args)
    finally:
        if not trace.finished:
            trace.concrete = saved


def note_abstract(trace, placeholders):
    """Marks the placeholders of a body traced into `trace` (vmap, lax
    control flow, custom rules) as abstract: values that read them have no
    value to give."""
    ev = trace.concrete
    if type(ev) is _Evaluator:
        ev.abstract.extend(placeholders)


def abstract_call(trace, fun, args, kwargs):
    """fun(*args, **kwargs) traced into `trace` with its values abstract (a
    user's jit called from a function differentiated on values)."""
    ev = trace.concrete
    if ev is None:
        return fun(*args, **kwargs)
    trace.concrete = None
    try:
        return fun(*args, **kwargs)
    finally:
        if not trace.finished:
            trace.concrete = ev


def _bind(trace, x):
    """(replacement, array or None) for one leaf of a traced argument: a
    parameter bound to its value, or the leaf itself when it is not an
    array or a scalar (the traced function reports it)."""
    try:
        arrays, avals = _convert_leaves([x])
    except (_LeafError, _Inline, TypeError, ValueError):
        return x, None
    dt, shape, weak = avals[0]
    return trace.param(shape, dt.name, weak), arrays[0]


def call_on_values(fun, args, kwargs, positions, record=None):
    """fun(*args, **kwargs) traced with an evaluator and run: the leaves of
    args[i] for i in `positions` become parameters bound to their values;
    the other arguments are passed as they are (concrete, as in JAX).  The
    values the evaluator answers are appended to `record` when it is given."""
    args = list(args)
    trace = _cjit.Trace()
    arrays = []
    trace.concrete = _Evaluator(arrays, record)
    _push_trace(trace)
    try:
        for i in positions:
            if not -len(args) <= i < len(args):
                continue        # the traced function reports the bad argnums
            leaves, treedef = _tree.flatten(args[i])
            bound = []
            for x in leaves:
                p, a = _bind(trace, x)
                if a is not None:
                    arrays.append(a)
                bound.append(p)
            args[i] = _tree.unflatten(treedef, bound)
        result = fun(*args, **kwargs)
        out_leaves, out_treedef = _tree.flatten(result)

        def describe_at(i):
            return lambda: repr(_tree.format_keypath(_tree.leaf_keypaths(out_treedef)[i],
                                                     "result"))

        outs = [_output_tracer(trace, x, describe_at(i)) for i, x in enumerate(out_leaves)]
        trace.concrete = None
        lowered = trace.finish(outs)
    except BaseException:
        try:
            trace.finish_error()
        except Exception:
            pass
        raise
    finally:
        _pop_trace()   # a memory_budget asked for here is jit's: the Lowered carries it, unused
    exe = _executable(lowered)
    return _tree.unflatten(out_treedef, exe(arrays))
