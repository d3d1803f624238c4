"""cjit.grad, cjit.value_and_grad and cjit.vjp.

The gradient is built by the C core (csrc/autodiff.c) as ordinary graph
nodes appended to the trace in progress, so it is fused, planned and
compiled like any other computation, and transformations nest:

- inside a trace (``jit(grad(f))``, ``grad(grad(f))``, ``grad`` of a
  function that calls a jitted one), the function is traced into the
  current graph and its gradient appended there;
- called on concrete arrays, the transformation runs through an internal
  ``jit`` of itself, so a repeated call hits the compile cache.

Each differentiated input gets a fresh identity node; only nodes recorded
after it are differentiated, so values computed outside the function (or by
an enclosing ``grad``) are constants for this one.
"""
import functools
import threading
import weakref

import numpy as np

from . import _cjit, _tree
from .api import Jitted, _output_tracer, current_trace, forced_remat, request_memory_budget

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _argnums_tuple(argnums, who):
    if isinstance(argnums, (int, np.integer)) and not isinstance(argnums, bool):
        return (int(argnums),), True
    if isinstance(argnums, (tuple, list)) and argnums and all(
            isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in argnums):
        return tuple(int(a) for a in argnums), False
    raise TypeError(f"{who}: argnums must be an int or a non-empty tuple of ints, got {argnums!r}")


def _fun_name(fun):
    return getattr(fun, "__name__", type(fun).__name__)


def _as_node(trace, x, what):
    """A Tracer of `trace` for a leaf of a differentiated argument."""
    if isinstance(x, _cjit.Tracer):
        return x
    if isinstance(x, np.ndarray):
        return trace.array(x)
    if isinstance(x, (bool, int, float, np.generic)):
        return trace.apply("name", x, name="")
    raise TypeError(f"{what}: cannot differentiate with respect to a value of type "
                    f"{type(x).__name__}")


def _differentiable_inputs(trace, args, argnums, who):
    """Replaces args[i] for i in argnums by fresh identity nodes; returns
    (new args, first node id, [(treedef, [proxies])] per argnum)."""
    args = list(args)
    for i in argnums:
        if not -len(args) <= i < len(args):
            raise TypeError(f"{who}: argnums {i} is out of range for a call with {len(args)} "
                            "positional arguments")
    converted = []
    for i in argnums:
        leaves, treedef = _tree.flatten(args[i])
        nodes = [_as_node(trace, x, who) for x in leaves]
        for j, t in enumerate(nodes):
            if t.dtype not in _FLOATS:
                path = _tree.format_keypath(_tree.leaf_keypaths(treedef)[j], f"argument {i}")
                raise TypeError(f"{who} requires float inputs, but {path} has dtype {t.dtype.name}; "
                                "differentiate with respect to float32 or float64 values "
                                "(or leave the argument out of argnums)")
        converted.append((i, treedef, nodes))
    # everything recorded from here on is differentiated
    first = trace.mark()
    parts = []
    for i, treedef, nodes in converted:
        proxies = [trace.apply("name", t, name="") for t in nodes]
        args[i] = _tree.unflatten(treedef, proxies)
        parts.append((treedef, proxies))
    return args, first, parts


def _scalar_output(trace, out, who):
    if isinstance(out, (bool, int, float, np.generic, np.ndarray)) and np.ndim(out) == 0:
        out = trace.apply("constant", value=float(out), dtype="float64", shape=())
    if not isinstance(out, _cjit.Tracer):
        raise TypeError(f"{who} requires the function to return a scalar array, "
                        f"got {type(out).__name__}")
    if out.shape != ():
        raise TypeError(f"{who} requires a scalar output (shape ()), got shape {out.shape} "
                        f"of dtype {out.dtype.name}; use cjit.vjp for non-scalar outputs")
    if out.dtype not in _FLOATS:
        raise TypeError(f"{who} requires a float output, got dtype {out.dtype.name}")
    return out


def _split_aux(result, has_aux, who):
    """(output, aux) of what the differentiated function returned."""
    if not has_aux:
        return result, None
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise TypeError(f"{who} with has_aux=True requires the function to return a pair "
                        f"(output, auxiliary data), got {type(result).__name__}")
    return result[0], result[1]


def _value_and_grad_traced(fun, argnums, single, has_aux, who, args, kwargs, memory_budget=None):
    trace = current_trace()
    if memory_budget is not None:
        request_memory_budget(trace, memory_budget)
    args, first, parts = _differentiable_inputs(trace, args, argnums, who)
    result = fun(*args, **kwargs)
    result, aux = _split_aux(result, has_aux, who)
    out = _scalar_output(trace, result, who)
    one = trace.apply("constant", value=1.0, dtype=out.dtype.name, shape=())
    wrt = [p for _, proxies in parts for p in proxies]
    force = forced_remat()
    if force:
        trace.force_remat(force)
    grads = trace.vjp([out], [one], wrt, first)
    trees, k = [], 0
    for treedef, proxies in parts:
        trees.append(_tree.unflatten(treedef, grads[k:k + len(proxies)]))
        k += len(proxies)
    g = trees[0] if single else tuple(trees)
    return ((out, aux), g) if has_aux else (out, g)


def _check_budget(memory_budget, who):
    if memory_budget is None:
        return None
    if isinstance(memory_budget, bool) or not isinstance(memory_budget, (int, np.integer)) \
            or memory_budget <= 0:
        raise TypeError(f"{who}: memory_budget must be a positive number of bytes, "
                        f"got {memory_budget!r}")
    return int(memory_budget)


def value_and_grad(fun=None, argnums=0, has_aux=False, *, memory_budget=None):
    """Returns a function computing ``(fun(*args), gradient)``, or
    ``((value, aux), gradient)`` with ``has_aux``.  The gradient has the
    structure of ``args[argnums]`` (a tuple of them for a tuple of argnums)."""
    if fun is None:
        return functools.partial(value_and_grad, argnums=argnums, has_aux=has_aux,
                                 memory_budget=memory_budget)
    who = "cjit.value_and_grad"
    budget = _check_budget(memory_budget, who)
    nums, single = _argnums_tuple(argnums, who)

    def traced(*args, **kwargs):
        return _value_and_grad_traced(fun, nums, single, has_aux, who, args, kwargs, budget)

    return _traced_or_compiled(fun, traced)


def grad(fun=None, argnums=0, has_aux=False, *, memory_budget=None):
    """Returns a function computing the gradient of scalar-valued ``fun``
    with respect to ``args[argnums]`` (and ``aux`` too with ``has_aux``)."""
    if fun is None:
        return functools.partial(grad, argnums=argnums, has_aux=has_aux, memory_budget=memory_budget)
    who = "cjit.grad"
    budget = _check_budget(memory_budget, who)
    nums, single = _argnums_tuple(argnums, who)

    def traced(*args, **kwargs):
        (value, g) = _value_and_grad_traced(fun, nums, single, has_aux, who, args, kwargs, budget)
        return (g, value[1]) if has_aux else g

    return _traced_or_compiled(fun, traced)


def _traced_or_compiled(fun, traced):
    """The user-facing function: traces into the trace in progress (inside
    jit or another grad), and on concrete values runs an internal jit of
    itself, so that repeated calls hit the compile cache."""
    functools.update_wrapper(traced, fun)
    compiled = Jitted(traced, _internal=True)

    @functools.wraps(fun)
    def transformed(*args, **kwargs):
        if current_trace() is not None:
            return traced(*args, **kwargs)
        return compiled(*args, **kwargs)

    transformed._cjit_compiled = compiled
    return transformed


def _check_cotangent(out_leaves, out_treedef, ct, who):
    ct_leaves, ct_treedef = _tree.flatten(ct)
    if ct_treedef != out_treedef:
        raise TypeError(f"{who}: the cotangent must have the structure of the output "
                        f"{out_treedef}, got {ct_treedef}")
    for o, c in zip(out_leaves, ct_leaves):
        shape = tuple(np.shape(c)) if not isinstance(c, _cjit.Tracer) else tuple(c.shape)
        dtype = c.dtype if hasattr(c, "dtype") else np.asarray(c).dtype
        if shape != tuple(o.shape):
            raise TypeError(f"{who}: cotangent of shape {shape} for an output of shape "
                            f"{tuple(o.shape)} (dtype {np.dtype(o.dtype).name}); they must match")
        # an output that is not float carries no gradient: its cotangent is ignored
        if (np.dtype(o.dtype) in _FLOATS and np.dtype(dtype) not in _FLOATS
                and not isinstance(c, (int, float))):
            raise TypeError(f"{who}: the cotangent of a float output must be a float array or a "
                            f"Python scalar, got dtype {np.dtype(dtype).name} for an output of "
                            f"dtype {np.dtype(o.dtype).name}")
    return ct_leaves


def _vjp_traced(fun, primals, has_aux, who):
    trace = current_trace()
    args, first, parts = _differentiable_inputs(trace, primals, tuple(range(len(primals))), who)
    result = fun(*args)
    result, aux = _split_aux(result, has_aux, who)
    out_leaves, out_treedef = _tree.flatten(result)
    # outputs that do not depend on the inputs (NumPy arrays, scalars) become
    # constants of the trace: their cotangents give zero gradients, as in JAX
    outs = [_output_tracer(trace, x, functools.partial(
                lambda i: repr(_tree.format_keypath(_tree.leaf_keypaths(out_treedef)[i],
                                                    "result")), i))
            for i, x in enumerate(out_leaves)]
    out = _tree.unflatten(out_treedef, outs)

    def vjp_fn(cotangent):
        ct_leaves = _check_cotangent(outs, out_treedef, cotangent, who)
        cts = []
        for o, c in zip(outs, ct_leaves):
            if not isinstance(c, _cjit.Tracer):
                c = trace.array(np.asarray(c)) if isinstance(c, np.ndarray) else \
                    trace.apply("constant", value=float(c), dtype=o.dtype.name, shape=())
            if c.dtype != o.dtype:
                c = trace.apply("cast", c, dtype=o.dtype.name)
            cts.append(c)
        floats = [(o, c) for o, c in zip(outs, cts) if o.dtype in _FLOATS]
        wrt = [p for _, proxies in parts for p in proxies]
        grads = trace.vjp([o for o, _ in floats], [c for _, c in floats], wrt, first)
        trees, k = [], 0
        for treedef, proxies in parts:
            trees.append(_tree.unflatten(treedef, grads[k:k + len(proxies)]))
            k += len(proxies)
        return tuple(trees)

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


# Eager vjp's compiled functions, per (function, has_aux), so that repeated
# calls hit the compile cache.  Keyed weakly by the function; the jitted
# functions reach it through a weak reference too (a strong one from the
# value would keep the key alive forever).
_eager_vjp_cache = weakref.WeakKeyDictionary()
_eager_vjp_lock = threading.Lock()


def _eager_vjp_jits(fun, has_aux, who):
    """(forward, backward) internal Jitteds for an eager vjp of fun."""
    def make(call_fun):
        def forward(*ps):
            return call_fun()(*ps)

        def backward(ps, ct):
            traced = _vjp_traced(call_fun(), ps, has_aux, who)
            return traced[1](ct)
        return Jitted(forward, _internal=True), Jitted(backward, _internal=True)

    try:
        ref = weakref.ref(fun)
    except TypeError:       # not weakly referenceable: compiled per call
        return make(lambda: fun)
    with _eager_vjp_lock:
        try:
            per_fun = _eager_vjp_cache.setdefault(fun, {})
        except TypeError:   # unhashable callable
            return make(lambda: fun)
        pair = per_fun.get(has_aux)
        if pair is None:
            pair = per_fun[has_aux] = make(ref)
    return pair


def vjp(fun, *primals, has_aux=False):
    """Returns ``(fun(*primals), vjp_fn)`` (plus ``aux`` with ``has_aux``);
    ``vjp_fn(cotangent)`` returns a tuple with one gradient per primal."""
    who = "cjit.vjp"
    if current_trace() is not None:
        return _vjp_traced(fun, primals, has_aux, who)

    # On concrete values: the forward runs compiled now, and each vjp_fn
    # call runs one compiled function that recomputes the forward and
    # appends the backward (cached per function and signature).
    forward, backward_compiled = _eager_vjp_jits(fun, bool(has_aux), who)
    result = forward(*primals)
    out, aux = (result if has_aux else (result, None))
    out_leaves, out_treedef = _tree.flatten(out)

    def vjp_fn(cotangent):
        assert fun is not None   # holds fun, so the cached backward lives as long as vjp_fn
        outs = [np.asarray(o) for o in out_leaves]
        ct_leaves = _check_cotangent(outs, out_treedef, cotangent, who)
        # Python scalars become arrays of the output's dtype here: traced, they
        # would be int64 or weak values that the check above already allowed
        ct_leaves = [np.asarray(c, dtype=o.dtype) if isinstance(c, (int, float)) else c
                     for o, c in zip(outs, ct_leaves)]
        return backward_compiled(tuple(primals), _tree.unflatten(out_treedef, ct_leaves))

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)
