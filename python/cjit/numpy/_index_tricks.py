"""cjit.numpy.r_ and c_ (concatenation by index syntax, on static slices and
on arrays, traced or not) and rot90."""
from __future__ import annotations

import numpy as np

from .._cjit import Tracer
from ._complex_dispatch import complex_aware
from ._core import _lift, _op, _operand
from ._creation import arange, linspace
from ._manipulation import concatenate, flip, swapaxes

__all__ = ["r_", "c_", "rot90"]


def _item(k, who):
    """One item of r_[...] as an array: a slice is a range (a complex step
    is a point count, as linspace), a scalar a 1-element array."""
    if isinstance(k, slice):
        start = 0 if k.start is None else k.start
        step = 1 if k.step is None else k.step
        if isinstance(step, complex):
            return linspace(start, k.stop, int(abs(step)), endpoint=True)
        return arange(start, k.stop, step)
    if isinstance(k, str):
        raise NotImplementedError(f"cjit.numpy.{who}: string directives ({k!r}) are not supported")
    if isinstance(k, Tracer):
        return k if k.ndim else k.reshape((1,))
    a = np.asarray(k)
    return a if a.ndim else a.reshape((1,))


def _join(parts, axis):
    if all(isinstance(p, np.ndarray) for p in parts):
        return np.concatenate(parts, axis=axis)
    return concatenate([_lift(_operand(p, "r_")) for p in parts], axis=axis)


class _RowConcat:
    """r_[a, b, 1:4, 0:1:5j]: the items joined along the first axis."""

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        return _join([_item(k, "r_") for k in items], 0)


class _ColumnConcat:
    """c_[a, b]: 1-D items become columns, everything joined along the last
    axis (np.c_)."""

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        parts = []
        for k in items:
            p = _item(k, "c_")
            if p.ndim == 1:
                p = p.reshape((p.shape[0], 1))
            parts.append(p)
        return _join(parts, -1)


r_ = _RowConcat()
c_ = _ColumnConcat()


@_op("m")
def rot90(m, k=1, axes=(0, 1)):
    """m rotated by 90 degrees k times in the plane of axes (from the first
    axis towards the second), as NumPy."""
    x = _lift(_operand(m, "rot90"))
    if len(axes) != 2 or x.ndim < 2:
        raise ValueError(f"cjit.numpy.rot90: needs two axes of an array of 2 or more dims, got "
                         f"axes {axes} for shape {tuple(x.shape)}")
    a0, a1 = (int(a) % x.ndim for a in axes)
    if a0 == a1:
        raise ValueError(f"cjit.numpy.rot90: axes must differ, got {axes}")
    k %= 4
    if k == 0:
        return x
    if k == 2:
        return flip(flip(x, a0), a1)
    if k == 1:
        return swapaxes(flip(x, a1), a0, a1)
    return flip(swapaxes(x, a0, a1), a1)


# complex arguments: the registry's implementation, or NotImplementedError
# (_complex_dispatch.py; the implementations are registered in _complex_api.py)
complex_aware(globals(), __all__)
