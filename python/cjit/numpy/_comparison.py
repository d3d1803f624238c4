"""cjit.numpy's whole-array comparisons: isclose, allclose, array_equal,
array_equiv."""
from __future__ import annotations

import numpy as np

from ._complex_dispatch import complex_aware
from ._core import _is_float, _lift, _op, _operand
from ._elementwise import abs as _abs
from ._elementwise import isfinite, isnan, logical_and, logical_or
from ._reductions import all as _all

__all__ = ["isclose", "allclose", "array_equal", "array_equiv"]


@_op("a", "b")
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol * |b|, elementwise; infinities are close only
    to themselves, nans to nothing unless equal_nan."""
    x = _lift(_operand(a, "isclose"))
    y = _lift(_operand(b, "isclose"))
    if not (_is_float(x.dtype) or _is_float(y.dtype)):
        return x == y
    near = _abs(x - y) <= atol + rtol * _abs(y)
    finite = logical_and(isfinite(x), isfinite(y))
    r = logical_or(logical_and(finite, near), x == y)   # x == y: equal infinities
    if equal_nan:
        r = logical_or(r, logical_and(isnan(x), isnan(y)))
    return r


@_op("a", "b")
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of isclose(a, b) is true (a 0-d bool array)."""
    return _all(isclose._cjit_impl(a, b, rtol, atol, equal_nan))


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def array_equal(a1, a2, equal_nan=False):
    """Same shape and the same elements (nans equal if equal_nan).  Shapes
    are static, so arrays of different shapes give False at trace time."""
    if _shape(a1) != _shape(a2):
        return np.bool_(False)
    return _equal_elements(a1, a2, equal_nan)


@_op("a1", "a2")
def _equal_elements(a1, a2, equal_nan=False):
    x = _lift(_operand(a1, "array_equal"))
    y = _lift(_operand(a2, "array_equal"))
    same = x == y
    if equal_nan and (_is_float(x.dtype) or _is_float(y.dtype)):
        same = logical_or(same, logical_and(isnan(x), isnan(y)))
    return _all(same)


def array_equiv(a1, a2):
    """Whether a1 and a2 broadcast to each other and are equal everywhere."""
    try:
        np.broadcast_shapes(_shape(a1), _shape(a2))
    except ValueError:
        return np.bool_(False)
    return _equal_elements(a1, a2, False)


# complex arguments: the registry's implementation, or NotImplementedError
# (_complex_dispatch.py; the implementations are registered in _complex_api.py)
complex_aware(globals(), __all__)
