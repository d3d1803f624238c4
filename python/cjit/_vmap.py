"""cjit.vmap: the batching transformation.

The function is traced once, into the trace in progress, on placeholders
of the per-example shapes; csrc/batching.c then appends a batched copy of
what was traced (one rule per op), with the batch dimension in front, and
the per-example nodes are left for dead-code elimination.  Because the
function is traced into the caller's own graph, it may close over the
caller's traced values (they are simply not batched), and vmap nests and
composes with grad, jvp and jit in any order.  On concrete arrays it runs
through an internal ``jit`` of itself, so repeated calls hit the cache.
"""
import functools

import numpy as np

from . import _cjit, _tree
from ._jitted import Jitted
from ._transform_util import leaf_node
from ._concrete import note_abstract
from ._signature import _output_tracer
from ._trace_state import current_trace, user_location


def _is_none(x):
    return x is None


def _check_axis_spec(spec, what):
    for a in _tree.tree_leaves(spec, is_leaf=_is_none):
        if a is not None and (isinstance(a, bool) or not isinstance(a, (int, np.integer))):
            raise TypeError(f"cjit.vmap: {what} must be ints, None, or pytrees of them, "
                            f"got {a!r}")


def _per_leaf_axes(spec, tree, what):
    """The axis of each leaf of `tree` from `spec`, a pytree prefix of it
    (None leaves of spec are axes, not empty nodes)."""
    leaves = _tree.tree_leaves(tree)
    if spec is None or isinstance(spec, (int, np.integer)):
        return [spec] * len(leaves)
    spec_leaves, spec_def = _tree.flatten(spec, is_leaf=_is_none)
    try:
        subtrees = _tree.flatten_up_to(spec_def, tree)
    except ValueError as e:
        raise ValueError(f"cjit.vmap: {what} {spec!r} is not a prefix of the structure of the "
                         f"value it describes ({e})") from None
    out = []
    for a, sub in zip(spec_leaves, subtrees):
        out.extend([a] * len(_tree.tree_leaves(sub)))
    return out


def _in_axes_per_arg(in_axes, nargs):
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if isinstance(in_axes, tuple):
        if len(in_axes) != nargs:
            raise ValueError(f"cjit.vmap: in_axes is a tuple of {len(in_axes)} entries, but the "
                             f"function was called with {nargs} positional arguments; give one "
                             f"entry per argument (or a single int or None for all)")
        return in_axes
    return (in_axes,) * nargs


def _move_axis(trace, x, src, dst):
    if src == dst:
        return x
    perm = list(range(len(x.shape)))
    perm.insert(dst, perm.pop(src))
    return trace.apply("transpose", x, perm=tuple(perm))


def _vmap_traced(fun, in_axes, out_axes, axis_size, args, kwargs):
    trace = current_trace()
    per_arg = _in_axes_per_arg(in_axes, len(args))
    # keyword arguments are mapped over their leading axis, as in JAX
    leaves, treedef = _tree.flatten((tuple(args), kwargs))
    axes = []
    for i, (spec, a) in enumerate(zip(per_arg, args)):
        axes.extend(_per_leaf_axes(spec, a, f"in_axes[{i}]" if isinstance(in_axes, (tuple, list))
                                   else "in_axes"))
    axes.extend([0] * len(_tree.tree_leaves(kwargs)))
    paths = _tree.leaf_keypaths(treedef)

    def where(k):
        p = _tree.format_keypath(paths[k], "")
        return "argument " + p.lstrip(".") if p else "the argument"

    sizes = []   # (size, description)
    mapped = []  # (leaf index, Tracer with the batch axis in front)
    for k, (x, ax) in enumerate(zip(leaves, axes)):
        if ax is None:
            continue
        t = leaf_node(trace, x, f"cjit.vmap: {where(k)} has type {{type}}; only arrays and scalars can be mapped")
        rank = len(t.shape)
        if not -rank <= ax < rank:
            raise ValueError(f"cjit.vmap: in_axes {ax} for {where(k)} of shape {tuple(t.shape)}: "
                             f"an axis of a rank-{rank} value must be in [{-rank}, {rank}) "
                             f"(at {user_location()})")
        ax %= rank
        sizes.append((t.shape[ax], f"{where(k)} of shape {tuple(t.shape)} along axis {ax}"))
        mapped.append((k, _move_axis(trace, t, ax, 0)))
    if axis_size is not None and (isinstance(axis_size, bool) or
                                  not isinstance(axis_size, (int, np.integer)) or axis_size < 0):
        raise TypeError(f"cjit.vmap: axis_size must be a non-negative int, got {axis_size!r}")
    if not sizes and axis_size is None:
        raise ValueError(f"cjit.vmap: no argument is mapped (every in_axes is None) and no "
                         f"axis_size was given, so the batch size is unknown (at {user_location()})")
    size = int(axis_size) if axis_size is not None else sizes[0][0]
    if any(s != size for s, _ in sizes):
        listed = "; ".join(f"{d}: size {s}" for s, d in sizes)
        given = f"axis_size {axis_size}; " if axis_size is not None else ""
        raise ValueError(f"cjit.vmap got inconsistent sizes for the mapped axes: {given}{listed} "
                         f"(at {user_location()})")
    # placeholders: per-example values for fun to be traced on
    zeros = [trace.apply("constant", value=0, dtype=t.dtype.name, shape=tuple(t.shape[1:]))
             for _, t in mapped]
    first = trace.mark()
    placeholders = [trace.apply("name", z, name="") for z in zeros]
    note_abstract(trace, placeholders)   # per-example values are abstract, as in JAX
    new_leaves = list(leaves)
    for (k, _), p in zip(mapped, placeholders):
        new_leaves[k] = p
    a, kw = _tree.unflatten(treedef, new_leaves)
    result = fun(*a, **kw)
    out_leaves, out_def = _tree.flatten(result)
    outs = [_output_tracer(trace, x, functools.partial(
                lambda i: repr(_tree.format_keypath(_tree.leaf_keypaths(out_def)[i], "result")), i))
            for i, x in enumerate(out_leaves)]
    batched = trace.batch(placeholders, [t for _, t in mapped], size, outs, first)
    _check_axis_spec(out_axes, "out_axes")
    try:
        oaxes = _per_leaf_axes(out_axes, result, "out_axes")
    except ValueError:
        raise
    final = []
    for i, (o, b, ax) in enumerate(zip(outs, batched, oaxes)):
        if ax is None:
            if b is not None:
                raise ValueError(f"cjit.vmap: out_axes is None for output "
                                 f"{_tree.format_keypath(_tree.leaf_keypaths(out_def)[i], 'result')}, "
                                 f"but it depends on the mapped arguments; only an output that "
                                 f"does not can be returned unmapped")
            final.append(o)
            continue
        if b is None:   # the same for every example
            b = trace.apply("broadcast", o, shape=(size,) + tuple(o.shape))
        rank = len(b.shape)
        if not -rank <= ax < rank:
            raise ValueError(f"cjit.vmap: out_axes {ax} for an output of rank {rank - 1} "
                             f"(batched: rank {rank})")
        final.append(_move_axis(trace, b, 0, ax % rank))
    return _tree.unflatten(out_def, final)


def vmap(fun, in_axes=0, out_axes=0, axis_size=None):
    """Vectorizes ``fun`` over an axis of its arguments, as ``jax.vmap``:
    ``in_axes`` (an int, None, or a tuple with one entry per positional
    argument, each a pytree prefix of it) says which axis of each argument
    is mapped (None: not mapped), ``out_axes`` where the batch axis goes in
    each output, ``axis_size`` the batch size when no argument is mapped."""
    if not callable(fun):
        raise TypeError(f"cjit.vmap: expected a function, got {type(fun).__name__}")
    _check_axis_spec(in_axes, "in_axes")
    _check_axis_spec(out_axes, "out_axes")

    def traced(*args, **kwargs):
        return _vmap_traced(fun, in_axes, out_axes, axis_size, args, kwargs)

    functools.update_wrapper(traced, fun)
    compiled = Jitted(traced, _internal=True)

    @functools.wraps(fun)
    def batched(*args, **kwargs):
        if current_trace() is not None:
            return traced(*args, **kwargs)
        return compiled(*args, **kwargs)
    batched._cjit_compiled = compiled
    return batched
