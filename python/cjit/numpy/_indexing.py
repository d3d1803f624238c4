"""Indexing of traced values (Tracer.__getitem__, __iter__, len) and NumPy's
ufuncs called on them (Tracer.__array_ufunc__)."""
from __future__ import annotations

import builtins
import operator
import sys

import numpy as np

from ..api import current_trace, user_location
from .._cjit import Tracer
from ._core import _error, _lift, _reshape_t, _shape_of
from ._gather import _getitem_advanced, _has_array_index


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


def _getitem(x, key):
    """x[key] for basic indexing: ints, slices, None, ... and tuples of them."""
    if not isinstance(x, Tracer):
        if current_trace() is None:
            return np.asarray(x)[key]
        x = _lift(x)
    if _has_array_index(key):   # integer arrays or a boolean mask: a gather
        return _getitem_advanced(x, key)
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
        yield _getitem(x, i)


def _len(x):
    shape = _shape_of(x)
    if len(shape) == 0:
        raise TypeError("len() of unsized object")
    return shape[0]


# ---------------------------------------------------------------------------
# NumPy ufuncs on traced values (Tracer.__array_ufunc__ forwards here)

# The ufuncs behind Python's operators: `ndarray + tracer` calls np.add,
# which must run as the Tracer's own (reflected) operator.
_OPERATOR_UFUNCS = {
    "add": ("__add__", "__radd__"), "subtract": ("__sub__", "__rsub__"),
    "multiply": ("__mul__", "__rmul__"), "divide": ("__truediv__", "__rtruediv__"),
    "floor_divide": ("__floordiv__", "__rfloordiv__"), "power": ("__pow__", "__rpow__"),
    "matmul": ("__matmul__", "__rmatmul__"), "bitwise_and": ("__and__", "__rand__"),
    "bitwise_or": ("__or__", "__ror__"), "bitwise_xor": ("__xor__", "__rxor__"),
    "less": ("__lt__", "__gt__"), "less_equal": ("__le__", "__ge__"),
    "greater": ("__gt__", "__lt__"), "greater_equal": ("__ge__", "__le__"),
    "equal": ("__eq__", "__eq__"), "not_equal": ("__ne__", "__ne__"),
}


def _tracer_array_ufunc(self, ufunc, method, *inputs, **kwargs):
    """Tracer.__array_ufunc__: a binary operator's ufunc with a NumPy operand
    on the left runs the Tracer's operator (an in-place `a += t` rebinds `a`
    to the traced result, as before); any other NumPy ufunc raises TypeError
    naming the cjit.numpy function to call instead."""
    name = getattr(ufunc, "__name__", str(ufunc))
    out = kwargs.pop("out", None)
    pair = _OPERATOR_UFUNCS.get(name)
    if (pair is not None and method == "__call__" and not kwargs and len(inputs) == 2
            and (out is None or (len(out) == 1 and out[0] is inputs[0]))):
        a, b = inputs
        r = getattr(a, pair[0])(b) if isinstance(a, Tracer) else getattr(b, pair[1])(a)
        if r is not NotImplemented:
            return r
    called = f"numpy.{name}" + ("" if method == "__call__" else f".{method}")
    traced = ", ".join(f"{t.dtype.name}[{','.join(map(str, t.shape))}]"
                       for t in inputs if isinstance(t, Tracer))
    fn = getattr(sys.modules["cjit.numpy"], name, None)
    if method == "__call__" and callable(fn) and not name.startswith("_"):
        hint = f"use cjit.numpy.{name} instead (import cjit.numpy as cnp; cnp.{name}(...))"
    elif method == "__call__":
        hint = f"cjit.numpy has no {name}: write it with cjit.numpy functions"
    else:
        hint = "use the cjit.numpy function that computes it instead (cnp.sum for " \
               "numpy.add.reduce, say)"
    raise TypeError(f"cjit: {called} was called on a traced value ({traced}) at "
                    f"{user_location()}: NumPy functions need concrete arrays, which do not "
                    f"exist while tracing; {hint}")
