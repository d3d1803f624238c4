"""cjit.numpy's nan-ignoring reductions (nansum, nanmean, nanmax, ...) and
average: compositions of where, the reductions and a count, so they fuse
into the same kernels as the plain reductions and have their gradients."""
from __future__ import annotations

import numpy as np

from ._complex_dispatch import complex_aware
from ._core import _F64, _is_float, _lift, _norm_axes, _op, _operand
from ._elementwise import isnan
from ._elementwise import where as _where, sqrt
from ._manipulation import broadcast_to
from ._reductions import (_check_reduce_args, argmax, argmin, cumprod, cumsum, max, min, sum, mean,
                          prod)

__all__ = ["nansum", "nanprod", "nanmean", "nanvar", "nanstd", "nanmax", "nanmin", "nanargmax",
           "nanargmin", "nancumsum", "nancumprod", "average"]


def _filled(a, who, fill):
    """(x, mask of nans) with the nans of a float x replaced by `fill`; an
    integer or bool x has no nans and comes back as it is."""
    x = _lift(_operand(a, who))
    if not _is_float(x.dtype):
        return x, None
    nan = isnan(x)
    return _where(nan, fill, x), nan


@_op("a")
def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """sum with nans counted as zero."""
    _check_reduce_args("nansum", out, initial, where)
    x, _ = _filled(a, "nansum", 0)
    return sum(x, axis=axis, dtype=dtype, keepdims=keepdims)


@_op("a")
def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """prod with nans counted as one."""
    _check_reduce_args("nanprod", out, initial, where)
    x, _ = _filled(a, "nanprod", 1)
    return prod(x, axis=axis, dtype=dtype, keepdims=keepdims)


def _count(x, nan, axis, keepdims):
    """The number of non-nan elements along axis, as float64."""
    if nan is None:
        axes = _norm_axes(axis, x.ndim)
        n = 1
        for ax in axes:
            n *= x.shape[ax]
        return float(n)
    return sum(_where(nan, 0.0, 1.0), axis=axis, keepdims=keepdims)


@_op("a")
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    """mean of the non-nan elements; nan where all are nan (NumPy warns)."""
    _check_reduce_args("nanmean", out, None, where)
    x, nan = _filled(a, "nanmean", 0)
    work = x.dtype if _is_float(x.dtype) else _F64
    if dtype is not None and _is_float(np.dtype(dtype)):
        work = np.dtype(dtype)
    s = sum(x.astype(work), axis=axis, keepdims=keepdims)
    n = _count(x, nan, axis, keepdims)
    r = s / (n if isinstance(n, float) else n.astype(work))
    return r.astype(np.dtype(dtype)) if dtype is not None else r


@_op("a")
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None):
    """var of the non-nan elements, divided by count - ddof."""
    _check_reduce_args("nanvar", out, None, where)
    x, nan = _filled(a, "nanvar", 0)
    work = x.dtype if _is_float(x.dtype) else _F64
    x = x.astype(work)
    n = _count(x, nan, axis, True)
    n = n if isinstance(n, float) else n.astype(work)
    m = sum(x, axis=axis, keepdims=True) / n
    d = x - m
    if nan is not None:
        d = _where(nan, 0, d)
    r = sum(d * d, axis=axis, keepdims=True) / (n - ddof)
    if not keepdims:
        axes = _norm_axes(axis, x.ndim)
        r = r.reshape(tuple(s for i, s in enumerate(r.shape) if i not in axes))
    return r.astype(np.dtype(dtype)) if dtype is not None else r


@_op("a")
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None):
    """sqrt of nanvar."""
    return sqrt(nanvar._cjit_impl(a, axis, dtype, out, ddof, keepdims, where))


@_op("a")
def nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """max ignoring nans; nan where all are nan."""
    _check_reduce_args("nanmax", out, initial, where)
    x, nan = _filled(a, "nanmax", -np.inf)
    r = max(x, axis=axis, keepdims=keepdims)
    if nan is None:
        return r
    all_nan = sum(_where(nan, 0, 1), axis=axis, keepdims=keepdims) == 0
    return _where(all_nan, np.nan, r)


@_op("a")
def nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """min ignoring nans; nan where all are nan."""
    _check_reduce_args("nanmin", out, initial, where)
    x, nan = _filled(a, "nanmin", np.inf)
    r = min(x, axis=axis, keepdims=keepdims)
    if nan is None:
        return r
    all_nan = sum(_where(nan, 0, 1), axis=axis, keepdims=keepdims) == 0
    return _where(all_nan, np.nan, r)


@_op("a")
def nanargmax(a, axis=None, out=None, *, keepdims=False):
    """argmax ignoring nans (an all-nan slice gives 0; NumPy raises)."""
    x, _ = _filled(a, "nanargmax", -np.inf)
    return argmax(x, axis=axis, keepdims=keepdims)


@_op("a")
def nanargmin(a, axis=None, out=None, *, keepdims=False):
    """argmin ignoring nans (an all-nan slice gives 0; NumPy raises)."""
    x, _ = _filled(a, "nanargmin", np.inf)
    return argmin(x, axis=axis, keepdims=keepdims)


@_op("a")
def nancumsum(a, axis=None, dtype=None, out=None):
    """cumsum with nans counted as zero."""
    x, _ = _filled(a, "nancumsum", 0)
    return cumsum(x, axis=axis, dtype=dtype)


@_op("a")
def nancumprod(a, axis=None, dtype=None, out=None):
    """cumprod with nans counted as one."""
    x, _ = _filled(a, "nancumprod", 1)
    return cumprod(x, axis=axis, dtype=dtype)


@_op("a", "weights")
def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """The weighted mean along axis (weights of a's shape, or 1-D along a
    single axis); returned=True also gives the sum of the weights."""
    x = _lift(_operand(a, "average"))
    if not _is_float(x.dtype):
        x = x.astype(_F64)
    if weights is None:
        r = mean(x, axis=axis, keepdims=keepdims)
        if not returned:
            return r
        axes = _norm_axes(axis, x.ndim)
        n = 1
        for ax in axes:
            n *= x.shape[ax]
        return r, broadcast_to(_lift(float(n)), tuple(r.shape))
    w = _lift(_operand(weights, "average"))
    if tuple(w.shape) != tuple(x.shape):
        if axis is None or w.ndim != 1 or not isinstance(axis, (int, np.integer)):
            raise TypeError("cjit.numpy.average: weights of a shape other than a's must be 1-D, "
                            "with one int axis given")
        ax = int(axis) % x.ndim
        if w.shape[0] != x.shape[ax]:
            raise ValueError(f"cjit.numpy.average: weights of length {w.shape[0]} do not match "
                             f"axis {ax} of a, of length {x.shape[ax]}")
        w = w.reshape(tuple(w.shape[0] if i == ax else 1 for i in range(x.ndim)))
        w = broadcast_to(w, tuple(x.shape))
    ws = sum(w, axis=axis, keepdims=keepdims)
    r = sum(x * w, axis=axis, keepdims=keepdims) / ws
    return (r, broadcast_to(ws, tuple(r.shape))) if returned else r


# complex arguments: the registry's implementation, or NotImplementedError
# (_complex_dispatch.py; the implementations are registered in _complex_api.py)
complex_aware(globals(), __all__)
