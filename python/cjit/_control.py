"""cjit.lax's control flow (lax.py gathers it with _lax_ops.py's operation
names): control flow that stays in the graph, with jax.lax's signatures.

`scan`, `while_loop`, `fori_loop`, `cond` and `switch` trace their bodies
once, into the trace in progress, on placeholder values; C then cuts each
body out into a sub-graph held by one region node (csrc/regions.c), which
is lowered as a graph of its own and run as a real loop or branch
(csrc/loops.c, csrc/loops_rt.c).  Compile time does not depend on the
trip count.

Outside `jit` the same functions compile themselves (cached per function);
with CJIT_DISABLE_JIT=1 they run as Python loops on concrete values.
"""
from __future__ import annotations

import builtins
import enum

import numpy as np

from . import _cjit, _dtypes, _tree
from ._concrete import note_abstract
from ._jitted import Jitted
from ._signature import _output_tracer
from ._trace_state import _K_DISABLE_JIT, _env_flag, current_trace
from ._transform_util import aval as _aval, at_user as _where, names as _names
from ._transform_util import placeholders as _placeholders
from .numpy._creation import asarray
from .numpy._elementwise import clip, stop_gradient as _stop_leaf, where
from .numpy._info import result_type
from .numpy._manipulation import concatenate, reshape, stack

__all__ = ["scan", "while_loop", "fori_loop", "cond", "switch", "select", "stop_gradient",
           "Precision"]


class Precision(enum.Enum):
    """JAX's matmul precision names, accepted wherever `precision=` is (dot,
    matmul, einsum) and ignored: cjit's CPU matmuls compute in the operands'
    own precision."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2


# -- helpers ---------------------------------------------------------------------

def _leaf_names(treedef, root):
    try:
        return [_tree.format_keypath(p, root) for p in _tree.leaf_keypaths(treedef)]
    except Exception:   # noqa: BLE001 - names are for messages only
        return [f"{root} leaf {i}" for i in range(treedef.num_leaves)]


def _tracers(trace, leaves, names):
    return [_output_tracer(trace, x, (lambda n=n: n)) for x, n in zip(leaves, names)]


def _cast(trace, t, dtype):
    return trace.apply("cast", t, dtype=np.dtype(dtype).name)


def _match_carry(trace, who, names, init, out, body_desc):
    """The body's new carries, checked against the initial ones.  A weak
    (Python scalar) output takes the carry's dtype.  Returns (carries, retry)
    where retry lists the initial values to promote (weak ones the body
    turned into another dtype), or raises TypeError."""
    fixed, promote = [], {}
    for k, (n, a, b) in enumerate(zip(names, init, out)):
        if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
            if tuple(a.shape) == tuple(b.shape) and b.weak and not a.weak:
                fixed.append(_cast(trace, b, a.dtype))
                continue
            if tuple(a.shape) == tuple(b.shape) and a.weak:
                promote[k] = b.dtype
                fixed.append(b)
                continue
            raise TypeError(f"cjit.lax.{who}: {body_desc} changes the type of the carry {n}: it comes in "
                            f"as {_aval(a)} and goes out as {_aval(b)}; a loop's carry must keep its "
                            f"shape and dtype {_where()}")
        fixed.append(b)
    return fixed, promote


def _check_tree(who, what, expected, got, desc):
    if expected != got:
        raise TypeError(f"cjit.lax.{who}: {desc} returns a {what} of structure {got}, but the initial "
                        f"value has structure {expected}; the structure must stay the same {_where()}")


# -- outside a trace: compile (cached), or run in Python ----------------------------

_JITS = {}
_JITS_MAX = 128


def _compiled(key, make):
    """An internal jit of make() for a call on concrete values, cached by
    key (the user's functions and the static arguments)."""
    try:
        fn = _JITS.get(key)
    except TypeError:   # an unhashable part: no cache
        key, fn = None, None
    if fn is None:
        fn = Jitted(make(), _internal=True)
        if key is not None:
            if len(_JITS) >= _JITS_MAX:
                _JITS.pop(next(iter(_JITS)))
            _JITS[key] = fn
    return fn


def _eager():
    return _env_flag(_K_DISABLE_JIT)


def _np(x):
    return np.asarray(x)


# -- scan ------------------------------------------------------------------------

def _check_unroll(unroll):
    if isinstance(unroll, bool):
        return
    if not isinstance(unroll, (int, np.integer)) or unroll < 1:
        raise ValueError(f"cjit.lax.scan: unroll must be a positive int or a bool, got {unroll!r}")


def _scan_length(xs_leaves, xs_names, length):
    lengths = []
    for x, n in zip(xs_leaves, xs_names):
        shape = np.shape(x)
        if len(shape) == 0:
            raise ValueError(f"cjit.lax.scan: xs leaf {n} is a scalar; every leaf of xs needs a leading "
                             f"axis to scan over {_where()}")
        lengths.append((int(shape[0]), n))
    if length is not None:
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 0:
            raise TypeError(f"cjit.lax.scan: length must be a non-negative int, got {length!r}")
        length = int(length)
    for n_, name in lengths:
        if length is None:
            length = n_
        elif n_ != length:
            listed = ", ".join(f"{nm}: {k}" for k, nm in lengths)
            raise ValueError(f"cjit.lax.scan: the leading axes of xs must all equal the length {length}; "
                             f"got {listed} {_where()}")
    if length is None:
        raise ValueError(f"cjit.lax.scan: no xs to scan over and no length given {_where()}")
    return length


def _segment_length(n, levels):
    """The rows per segment when a scan of n rows is split over `levels`
    nested scans: n ** ((levels - 1) / levels), so each level holds about
    n ** (1 / levels) carries for the backward pass."""
    target = n ** ((levels - 1) / levels)
    # a divisor of n near the target leaves no tail scan (and no slice of xs to copy)
    near = [d for d in range(builtins.max(2, int(target / 2)), int(2 * target) + 1) if n % d == 0]
    if near:
        return builtins.min(near, key=lambda d: builtins.abs(d - target))
    return builtins.max(2, int(builtins.round(target)))


# (the function's name, its body's, the initial carry's) in a loop's messages
_SCAN_LABEL = ("scan", "the body", "init")
WEAK_INDEX = ("int32", "weak")   # with_index: the row index is a weak int
_FORI_LABEL = ("fori_loop", "body_fun", "init_val")


def _scan_segmented(trace, f, init, xs, length, reverse, with_index, levels, label=_SCAN_LABEL):
    """A scan of `length` rows as an outer scan over segments of k rows whose
    body is a scan of those rows (itself split while levels remain), plus a
    plain scan of the last length % k rows.  The value is the same; what
    changes is the gradient's memory: reverse mode through a scan keeps each
    iteration's input carries and recomputes its body, so the outer scan
    keeps one carry per segment and each segment's rows are recomputed,
    and kept, only while the backward pass is inside it (checkpointing
    every k-th carry; k ~ sqrt(length) for two levels)."""
    k = _segment_length(length, levels)
    nseg = length // k
    head = nseg * k
    xs_leaves, xs_def = _tree.flatten(xs)
    x_head = [reshape(x[:head], (nseg, k) + tuple(np.shape(x)[1:])) for x in xs_leaves]

    def rows(offset):
        if with_index:
            return lambda j, c, x: f(offset(j), c, x)
        return lambda j, c, x: f(c, x)

    index = with_index if isinstance(with_index, tuple) else True

    def segment(s, c, xseg):
        body = rows(lambda j: s * k + j)
        return _scan_traced(trace, body, c, _tree.unflatten(xs_def, xseg), k, reverse, index, levels - 1,
                            label)

    def run_head(c):
        return _scan_traced(trace, segment, c, x_head, nseg, reverse, index, 1, label)

    def run_tail(c):
        if head == length:
            return c, None
        x_tail = [x[head:] for x in xs_leaves]
        return _scan_traced(trace, rows(lambda j: head + j), c, _tree.unflatten(xs_def, x_tail),
                            length - head, reverse, index, 1, label)

    if reverse:   # the last rows run first
        c, y_tail = run_tail(init)
        c, y_head = run_head(c)
    else:
        c, y_head = run_head(init)
        c, y_tail = run_tail(c)
    yh, y_def = _tree.flatten(y_head)
    yh = [reshape(y, (head,) + tuple(np.shape(y)[2:])) for y in yh]
    if y_tail is not None:
        yh = [concatenate([a, b]) for a, b in zip(yh, _tree.flatten(y_tail)[0])]
    return c, _tree.unflatten(y_def, yh)


def _scan_traced(trace, f, init, xs, length, reverse, with_index, levels=None, label=_SCAN_LABEL):
    who, body_desc, root = label
    init_leaves, init_def = _tree.flatten(init)
    xs_leaves, xs_def = _tree.flatten(xs)
    init_names = _leaf_names(init_def, root)
    xs_names = _leaf_names(xs_def, "xs")
    length = _scan_length(xs_leaves, xs_names, length)
    if levels is None:   # a retrace of a memory_budget search may split scans
        budget = trace.memory_budget
        levels = budget.scan_levels if budget is not None else 1
    if levels > 1 and length >= 4 and length // _segment_length(length, levels) >= 2:
        return _scan_segmented(trace, f, init, xs, length, reverse, with_index, levels, label)
    carries = _tracers(trace, init_leaves, init_names)
    xs_t = _tracers(trace, xs_leaves, xs_names)
    for _ in range(2):
        # The row index is int32 (the region's counter); with_index=WEAK_INDEX
        # makes it weak, as a Python int (fori_loop's index).
        z_idx = trace.apply("constant", value=0, dtype="int32", shape=(), weak=with_index is WEAK_INDEX)
        z_c = _placeholders(trace, carries)
        z_x = _placeholders(trace, xs_t, drop_leading=True)
        first = trace.mark()
        ph_idx = trace.apply("name", z_idx, name="")
        note_abstract(trace, [ph_idx])
        ph_c, ph_x = _names(trace, z_c), _names(trace, z_x)
        c_in = _tree.unflatten(init_def, ph_c)
        x_in = _tree.unflatten(xs_def, ph_x)
        out = f(ph_idx, c_in, x_in) if with_index else f(c_in, x_in)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"cjit.lax.scan: the body must return a pair (carry, y), got "
                            f"{type(out).__name__} {_where()}")
        new_c, y = out
        nc_leaves, nc_def = _tree.flatten(new_c)
        _check_tree(who, "carry", init_def, nc_def, body_desc)
        nc = _tracers(trace, nc_leaves, init_names)
        nc, promote = _match_carry(trace, who, init_names, carries, nc, body_desc)
        if promote:
            carries = [_cast(trace, c, promote[k]) if k in promote else c for k, c in enumerate(carries)]
            continue
        break
    else:
        raise TypeError(f"cjit.lax.{who}: the carry's types do not settle {_where()}")
    y_leaves, y_def = _tree.flatten(y)
    ys = _tracers(trace, y_leaves, _leaf_names(y_def, "y"))
    res = _cjit.lax_region(trace, "scan", first, [([ph_idx] + ph_c + ph_x, nc + ys)], carries + xs_t,
                           len(carries), len(xs_t), length, bool(reverse))
    return _tree.unflatten(init_def, res[:len(carries)]), _tree.unflatten(y_def, res[len(carries):])


def _scan_eager(f, init, xs, length, reverse, with_index):
    xs_leaves, xs_def = _tree.flatten(xs)
    length = _scan_length(xs_leaves, _leaf_names(xs_def, "xs"), length)
    carry, ys = init, [None] * length
    order = range(length - 1, -1, -1) if reverse else range(length)
    for i in order:
        x = _tree.unflatten(xs_def, [leaf[i] for leaf in xs_leaves])
        carry, y = f(np.int32(i), carry, x) if with_index else f(carry, x)
        ys[i] = y
    if length == 0:
        return None
    y_leaves0, y_def = _tree.flatten(ys[0])
    stacked = [stack([_tree.flatten(y)[0][k] for y in ys]) for k in range(len(y_leaves0))]
    return carry, _tree.unflatten(y_def, stacked)


def _scan(f, init, xs, length, reverse, unroll, with_index, label=_SCAN_LABEL):
    _check_unroll(unroll)
    if not callable(f):
        raise TypeError(f"cjit.lax.scan: f must be callable, got {type(f).__name__}")
    trace = current_trace()
    if trace is not None:
        return _scan_traced(trace, f, init, xs, length, reverse, with_index, label=label)
    if _eager():
        out = _scan_eager(f, init, xs, length, reverse, with_index)
        if out is not None:
            return out
    fn = _compiled(("scan", f, length, bool(reverse), with_index),
                   lambda: lambda c, x: _scan(f, c, x, length, reverse, 1, with_index, label))
    return fn(init, xs)


def scan(f, init, xs=None, length=None, reverse=False, unroll=1, _split_transpose=False):
    """Loops ``f(carry, x) -> (carry, y)`` over the leading axis of ``xs``, as
    ``jax.lax.scan``: returns the final carry and the ``y`` stacked along a
    new leading axis.  ``xs`` and ``y`` may be pytrees (or None); ``length``
    gives the trip count when there are no ``xs``; ``reverse`` runs the rows
    from last to first (``ys[i]`` still belongs to ``xs[i]``).  ``unroll`` is
    accepted for compatibility: the body is compiled once and looped."""
    return _scan(f, init, xs, length, reverse, unroll, False)


# -- while_loop, fori_loop ----------------------------------------------------------

def _pred_check(trace, p, who, what):
    if not isinstance(p, _cjit.Tracer):
        p = _output_tracer(trace, p, lambda: what)
    if tuple(p.shape) != () or np.dtype(p.dtype) != np.bool_:
        raise TypeError(f"cjit.lax.{who}: {what} must return a boolean scalar, got {_aval(p)} {_where()}")
    return p


def _while_traced(trace, cond_fun, body_fun, init, who="while_loop", names=None):
    """names: the carries' names in messages (fori_loop's own)."""
    init_leaves, init_def = _tree.flatten(init)
    names = names or _leaf_names(init_def, "init_val")
    carries = _tracers(trace, init_leaves, names)
    for _ in range(2):
        z_c = _placeholders(trace, carries)
        first = trace.mark()
        ph = _names(trace, z_c)
        pred = _pred_check(trace, cond_fun(_tree.unflatten(init_def, ph)), who, "cond_fun")
        new = body_fun(_tree.unflatten(init_def, ph))
        new_leaves, new_def = _tree.flatten(new)
        _check_tree(who, "value", init_def, new_def, "body_fun")
        nc = _tracers(trace, new_leaves, names)
        nc, promote = _match_carry(trace, who, names, carries, nc, "body_fun")
        if promote:
            carries = [_cast(trace, c, promote[k]) if k in promote else c for k, c in enumerate(carries)]
            continue
        break
    else:
        raise TypeError(f"cjit.lax.{who}: the carry's types do not settle {_where()}")
    res = _cjit.lax_region(trace, "while", first, [(ph, [pred]), (ph, nc)], carries, len(carries), 0, 0, False)
    return _tree.unflatten(init_def, res)


def while_loop(cond_fun, body_fun, init_val):
    """``while cond_fun(val): val = body_fun(val)``, as ``jax.lax.while_loop``
    (``val`` a pytree whose types stay the same).  Not reverse-differentiable:
    use ``scan`` or ``fori_loop`` with Python int bounds for gradients."""
    if not callable(cond_fun) or not callable(body_fun):
        raise TypeError("cjit.lax.while_loop: cond_fun and body_fun must be callable")
    trace = current_trace()
    if trace is not None:
        return _while_traced(trace, cond_fun, body_fun, init_val)
    if _eager():
        val = init_val
        while True:
            p = np.asarray(cond_fun(val))
            if p.shape != () or p.dtype != np.bool_:
                raise TypeError(f"cjit.lax.while_loop: cond_fun must return a boolean scalar, got "
                                f"{p.dtype.name}{list(p.shape)} {_where()}")
            if not bool(p):
                return val
            val = body_fun(val)
    fn = _compiled(("while", cond_fun, body_fun), lambda: lambda v: while_loop(cond_fun, body_fun, v))
    return fn(init_val)


def _static_int(x):
    """A concrete integer bound as a Python int (a Python or NumPy int, or a
    0-d integer array: JAX takes any concrete bound as static), else None."""
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "iu":
        return int(x)
    return None


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """``for i in range(lower, upper): val = body_fun(i, val)``, as
    ``jax.lax.fori_loop``.  With concrete bounds it is a ``scan`` (so it is
    reverse-differentiable) and ``i`` is a weak int of the default dtype;
    with traced bounds a ``while_loop`` and ``i`` has the bounds' dtype."""
    if not callable(body_fun):
        raise TypeError("cjit.lax.fori_loop: body_fun must be callable")
    lo, hi = _static_int(lower), _static_int(upper)
    if lo is not None and hi is not None:
        n = builtins.max(hi - lo, 0)
        # As in JAX: with concrete bounds the index is a weak int of the
        # default dtype (int64 with x64), whatever the bounds' own dtype.
        def step(i, carry, _):
            return body_fun(i + lo, carry), None
        if current_trace() is None and _eager():
            val = init_val
            for i in range(lo, hi):
                val = body_fun(_dtypes.default_int().type(i) if builtins.abs(i) < 2**31 else i, val)
            return val
        return _scan(step, init_val, None, n, False, 1, WEAK_INDEX, _FORI_LABEL)[0]
    trace = current_trace()
    if trace is None and _eager():
        val = init_val
        i = np.asarray(lower)
        while bool(i < np.asarray(upper)):
            val = body_fun(i, val)
            i = i + 1
        return val

    def cond_fn(s):
        return s[0] < s[1]

    def body_fn(s):
        return (s[0] + 1, s[1], body_fun(s[0], s[2]))
    if trace is None:
        fn = _compiled(("fori", body_fun), lambda: lambda lo_, hi_, v: fori_loop(lo_, hi_, body_fun, v))
        return fn(lower, upper, init_val)
    dt = result_type(lower, upper)

    def bound(b):
        # A weak bound of the index's dtype stays as it is (astype would make
        # it strong): two weak bounds give a weak index, as in JAX.
        if isinstance(b, _cjit.Tracer):
            return b if b.weak and b.dtype == dt else b.astype(dt)
        return b if type(b) is int and dt == _dtypes.default_int() else asarray(b).astype(dt)
    lo_t, hi_t = bound(lower), bound(upper)
    names = ["the loop index", "upper"] + _leaf_names(_tree.flatten(init_val)[1], "init_val")
    return _while_traced(trace, cond_fn, body_fn, (lo_t, hi_t, init_val), "fori_loop", names)[2]


# -- cond, switch -------------------------------------------------------------------

def _switch_traced(trace, index, branches, operands, who, names):
    ops_leaves, ops_def = _tree.flatten(operands)
    ops_t = _tracers(trace, ops_leaves, _leaf_names(ops_def, "operands"))
    z = _placeholders(trace, ops_t)
    first = trace.mark()
    ph = _names(trace, z)
    outs = []
    for b in branches:
        r = b(*_tree.unflatten(ops_def, ph))
        leaves, d = _tree.flatten(r)
        outs.append((leaves, d))
    d0 = outs[0][1]
    for (leaves, d), name in zip(outs, names):
        if d != d0:
            raise TypeError(f"cjit.lax.{who}: the branches return different structures: {names[0]} returns "
                            f"{d0}, {name} returns {d} {_where()}")
    out_names = _leaf_names(d0, "output")
    tr = [_tracers(trace, leaves, out_names) for leaves, _ in outs]
    # A weak (Python scalar) output takes the type the other branches give
    # when promotion would (0 next to int8, 1 next to float32); JAX asks for
    # equal types, and a cast that promotion would not make (0.5 to an int)
    # is an error here too.  Among weak outputs only, the promoted one leads.
    for k in range(len(out_names)):
        strong = [t[k] for t in tr if not t[k].weak]
        if strong:
            ref = strong[0]
        else:
            top = result_type(*[t[k] for t in tr])
            ref = next((t[k] for t in tr if t[k].dtype == top), tr[0][k])
        for j, t in enumerate(tr):
            a = t[k]
            if (tuple(a.shape) == tuple(ref.shape) and a.dtype != ref.dtype and a.weak
                    and result_type(a, ref) == ref.dtype):
                t[k] = _cast(trace, a, ref.dtype)
            a = t[k]
            if tuple(a.shape) != tuple(ref.shape) or a.dtype != ref.dtype:
                i_ref = tr.index(next(x for x in tr if x[k] is ref)) if strong else 0
                raise TypeError(f"cjit.lax.{who}: the branches return different types for {out_names[k]}: "
                                f"{names[i_ref]} returns {_aval(ref)}, {names[j]} returns {_aval(a)}; "
                                f"every branch must return the same shapes and dtypes {_where()}")
    res = _cjit.lax_region(trace, "cond", first, [(ph, t) for t in tr], [index] + ops_t, len(ops_t), 0, 0, False)
    return _tree.unflatten(d0, res)


def _index_tracer(trace, index, who):
    t = index if isinstance(index, _cjit.Tracer) else _output_tracer(trace, index, lambda: "index")
    if tuple(t.shape) != ():
        raise TypeError(f"cjit.lax.{who}: the index must be a scalar, got {_aval(t)} {_where()}")
    if np.dtype(t.dtype).kind not in "iub":
        raise TypeError(f"cjit.lax.{who}: the index must be an integer scalar, got {_aval(t)} {_where()}")
    return t


def switch(index, branches, *operands):
    """Applies ``branches[index](*operands)``, as ``jax.lax.switch``: the
    index is clamped to ``[0, len(branches) - 1]``; every branch must return
    the same structure, shapes and dtypes.  Only the taken branch runs."""
    branches = list(branches)
    if not branches or not all(callable(b) for b in branches):
        raise TypeError("cjit.lax.switch: branches must be a non-empty sequence of callables")
    if len(branches) > 64:
        raise ValueError("cjit.lax.switch: at most 64 branches")
    trace = current_trace()
    if trace is None:
        if _eager():
            i = np.asarray(index)
            if i.shape != () or i.dtype.kind not in "iub":
                raise TypeError(f"cjit.lax.switch: the index must be an integer scalar, got "
                                f"{i.dtype.name}{list(i.shape)} {_where()}")
            return branches[builtins.min(builtins.max(int(i), 0), len(branches) - 1)](*operands)
        fn = _compiled(("switch", tuple(branches)), lambda: lambda i, ops: switch(i, branches, *ops))
        return fn(index, operands)
    t = _index_tracer(trace, index, "switch")
    if np.dtype(t.dtype) != np.int32:   # clamped first, so that a wide index does not wrap into range
        if np.dtype(t.dtype).kind in "iu":
            t = clip(t, 0, len(branches) - 1)
        t = trace.apply("cast", t, dtype="int32")
    if len(branches) == 1:
        return branches[0](*operands)
    names = [f"branch {i}" for i in range(len(branches))]
    return _switch_traced(trace, t, branches, operands, "switch", names)


def cond(pred, true_fun, false_fun, *operands):
    """``true_fun(*operands) if pred else false_fun(*operands)``, as
    ``jax.lax.cond``: ``pred`` is a boolean (or integer: nonzero is true)
    scalar; both branches must return the same structure, shapes and
    dtypes.  Only the taken branch runs."""
    if not callable(true_fun) or not callable(false_fun):
        raise TypeError("cjit.lax.cond: true_fun and false_fun must be callable")
    trace = current_trace()
    if trace is None:
        p = np.asarray(pred)
        if p.shape != () or p.dtype.kind not in "biu":
            raise TypeError(f"cjit.lax.cond: pred must be a boolean scalar, got {p.dtype.name}{list(p.shape)} "
                            f"{_where()}")
        if _eager():
            return (true_fun if bool(p) else false_fun)(*operands)
        fn = _compiled(("cond", true_fun, false_fun), lambda: lambda q, ops: cond(q, true_fun, false_fun, *ops))
        return fn(pred, operands)
    t = pred if isinstance(pred, _cjit.Tracer) else _output_tracer(trace, pred, lambda: "pred")
    if tuple(t.shape) != () or np.dtype(t.dtype).kind not in "biu":
        raise TypeError(f"cjit.lax.cond: pred must be a boolean scalar, got {_aval(t)} {_where()}")
    if np.dtype(t.dtype) != np.bool_:
        t = trace.apply("ne", t, 0)
    idx = trace.apply("cast", t, dtype="int32")
    return _switch_traced(trace, idx, [false_fun, true_fun], operands, "cond", ["false_fun", "true_fun"])


# -- select, stop_gradient ----------------------------------------------------------

def select(pred, on_true, on_false):
    """Elementwise ``on_true if pred else on_false``, as ``jax.lax.select``:
    ``pred`` is boolean and all three have one shape (no broadcasting)."""
    shapes = [tuple(np.shape(x)) for x in (pred, on_true, on_false)]
    if len(set(shapes)) != 1:
        raise TypeError(f"cjit.lax.select: pred, on_true and on_false must have one shape, got "
                        f"{shapes[0]}, {shapes[1]}, {shapes[2]} {_where()}")
    dt = np.dtype(pred.dtype) if hasattr(pred, "dtype") else np.asarray(pred).dtype
    if dt != np.bool_:
        raise TypeError(f"cjit.lax.select: pred must be boolean, got {dt.name} {_where()}")
    return where(pred, on_true, on_false)


def stop_gradient(x):
    """``x`` (a pytree) with a zero gradient."""
    return _tree.tree_map(_stop_leaf, x)
