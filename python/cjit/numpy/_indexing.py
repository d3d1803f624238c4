"""Basic indexing of traced values (ints, slices, None, ...: Tracer.__iter__,
len, and the basic part of Tracer.__getitem__, which is _gather._getitem)."""
from __future__ import annotations

import builtins
import operator

import numpy as np

from .._trace_state import current_trace
from .._cjit import Tracer
from ._core import _error, _lift, _reshape_t, _shape_of


# ---------------------------------------------------------------------------
# indexing (called by Tracer.__getitem__ and Tracer.__iter__)

def _index_key_item(k):
    """Classifies one index item: 'int', 'slice', 'none', 'ellipsis'."""
    if k is None:
        return "none"
    if k is Ellipsis:
        return "ellipsis"
    if isinstance(k, slice):
        return "slice"
    if isinstance(k, (bool, np.bool_)):
        raise NotImplementedError("cjit: indexing with a boolean is advanced indexing; only basic "
                                  "indexing (ints, slices, None, ...) is supported")
    if isinstance(k, Tracer):   # integer and boolean ones went to the gather (_gather.py)
        raise IndexError(f"only integers, slices, ..., None and integer or boolean arrays are valid "
                         f"indices, got a traced {np.dtype(k.dtype).name} value")
    if isinstance(k, (np.ndarray, list, tuple)):   # the same: only a non-integer array is left
        raise IndexError(f"only integers, slices, ..., None and integer or boolean arrays are valid "
                         f"indices, got {np.asarray(k).dtype.name} array")
    if isinstance(k, (int, np.integer)):
        return "int"
    if hasattr(type(k), "__index__"):
        return "int"
    raise IndexError("only integers, slices (`:`), ellipsis (`...`) and None (`numpy.newaxis`) "
                     f"are valid indices in cjit; got {type(k).__name__}")


def _plan_index(shape, key):
    """Normalizes a basic index against `shape`.  Returns (start, stop, step,
    out_shape) for a slice over every dim followed by a reshape to
    out_shape; an integer out of range is clamped, as JAX's (decision 260),
    other bad keys raise IndexError as NumPy's."""
    if not isinstance(key, tuple):
        key = (key,)
    kinds = [_index_key_item(k) for k in key]
    nell = kinds.count("ellipsis")
    if nell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    nreal = builtins.sum(1 for k in kinds if k in ("int", "slice"))
    ndim = len(shape)
    if nreal > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but {nreal} "
                         f"were indexed")
    if nell == 0:
        key = key + (Ellipsis,)
        kinds = kinds + ["ellipsis"]
    start, stop, step, out_shape = [], [], [], []
    dim = 0
    for k, kind in zip(key, kinds):
        if kind == "none":
            out_shape.append(1)
        elif kind == "ellipsis":
            for _ in range(ndim - nreal):
                n = shape[dim]
                start.append(0)
                stop.append(n)
                step.append(1)
                out_shape.append(n)
                dim += 1
        elif kind == "int":
            n = shape[dim]
            i = operator.index(k)
            if n == 0 or not -(1 << 63) <= i < (1 << 63):
                raise IndexError(f"index {i} is out of bounds for axis {dim} with size {n}")
            if i < 0:
                i += n
            i = min(max(i, 0), n - 1)   # out of range: clamped, as JAX's gather (decision 260)
            start.append(i)
            stop.append(i + 1)
            step.append(1)
            dim += 1
        else:
            n = shape[dim]
            b, e, s = k.indices(n)
            length = len(range(b, e, s))
            if length == 0:
                b, e, s = 0, 0, 1
            start.append(b)
            stop.append(e)
            step.append(s)
            out_shape.append(length)
            dim += 1
    return tuple(start), tuple(stop), tuple(step), tuple(out_shape)


def _getitem_basic(x, key):
    """x[key] for basic indexing: ints, slices, None, ... and tuples of them
    (x[key] with integer arrays or a mask in key: _gather._getitem)."""
    if not isinstance(x, Tracer):
        if current_trace() is None:
            return np.asarray(x)[key]
        x = _lift(x)
    shape = tuple(x.shape)
    try:
        start, stop, step, out_shape = _plan_index(shape, key)
    except (IndexError, NotImplementedError) as e:
        raise _error(type(e), "getitem", str(e), x) from None
    r = x
    whole = all(b == 0 and e == n and s == 1 for b, e, s, n in zip(start, stop, step, shape))
    if not whole:
        r = x.trace.apply("slice", x, start=start, stop=stop, step=step)
    return _reshape_t(r, out_shape)


def _iter(x):
    """Iterates over axis 0."""
    shape = _shape_of(x)
    if len(shape) == 0:
        raise TypeError("iteration over a 0-d array")
    for i in range(shape[0]):
        yield _getitem_basic(x, i)


def _len(x):
    shape = _shape_of(x)
    if len(shape) == 0:
        raise TypeError("len() of unsized object")
    return shape[0]
