"""Sorting on the C graph's argsort op (a stable merge sort per row, run by
csrc/sort_rt.c): argsort, sort (argsort then a gather, so it has a
gradient), searchsorted (every comparison, as JAX's method="compare_all"),
median, quantile and percentile."""
from __future__ import annotations

import numpy as np

from .._cjit import Tracer
from ._complex_dispatch import complex_aware
from ._core import _error, _lift, _norm_axis, _op, _reshape_t
from ._elementwise import ceil, floor, isnan, logical_and, logical_not, logical_or, where
from ._gather import _gather, _take_along_axis, take
from ._manipulation import moveaxis
from ._math import round as round_
from ._reductions import any as any_

__all__ = ["sort", "argsort", "searchsorted", "median", "quantile", "percentile"]


def _argsort_last(x, descending):
    """Indices sorting x along its last axis (stable; nan last)."""
    if descending:   # a key whose ascending order is x's descending one, ties kept in order
        kind = np.dtype(x.dtype).kind
        x = x.trace.apply("logical_not", x) if kind == "b" else \
            x.trace.apply("bitwise_not", x) if kind in "iu" else x.trace.apply("neg", x)
    return x.trace.apply("argsort", x)


def _along(x, axis, fn):
    """fn applied along `axis` of x, moved last and back."""
    if x.ndim == 0:
        return _reshape_t(fn(_reshape_t(x, (1,))), ())
    ax = _norm_axis(axis, x.ndim)
    last = x.ndim - 1
    return moveaxis(fn(moveaxis(x, ax, last) if ax != last else x), last, ax) if ax != last else fn(x)


@_op("a")
def argsort(a, axis=-1, kind=None, order=None, *, descending=False, stable=True):
    """Indices that sort a along axis: stable (equal elements keep their
    order, descending too), nan after every number, as NumPy's kind="stable"."""
    if order is not None:
        raise TypeError("cjit.numpy.argsort: order= (structured arrays) is not supported")
    x = _lift(a, "argsort")
    if axis is None:
        x, axis = _reshape_t(x, (int(np.prod(x.shape)),)), 0
    return _along(x, axis, lambda v: _argsort_last(v, descending))


@_op("a")
def sort(a, axis=-1, kind=None, order=None, *, descending=False, stable=True):
    """A sorted copy along axis (stable, nan last); differentiable: the
    gradient goes back to where each element came from."""
    if order is not None:
        raise TypeError("cjit.numpy.sort: order= (structured arrays) is not supported")
    x = _lift(a, "sort")
    if axis is None:
        x, axis = _reshape_t(x, (int(np.prod(x.shape)),)), 0
    if x.ndim == 0:
        return x
    return _take_along_axis(x, argsort(x, axis, descending=descending), axis)


@_op("a", "v", "sorter")
def searchsorted(a, v, side="left", sorter=None):
    """Where each v would go in the sorted 1-D a to keep it sorted: counts
    of the elements before it (every comparison: O(len(a) * v.size) work,
    fused into one reduction, as JAX's method="compare_all")."""
    if side not in ("left", "right"):
        raise ValueError(f"cjit.numpy.searchsorted: side must be 'left' or 'right', got {side!r}")
    s = _lift(a, "searchsorted")
    if s.ndim != 1:
        raise _error(ValueError, "searchsorted", "a must be 1-D", s)
    if sorter is not None:
        s = take(s, sorter)
    q = _lift(v, "searchsorted")
    qe = _reshape_t(q, tuple(q.shape) + (1,))
    # nan sorts last: before a nan query is every number (and, for side="right", every nan)
    if side == "left":
        before = logical_or(s < qe, logical_and(isnan(qe), logical_not(isnan(s))))
    else:
        before = logical_or(s <= qe, isnan(qe))
    return before.astype("int64").sum(axis=-1)


def _positions(n, q, method):
    """(lo, hi, weight of hi) for quantiles q of n sorted values."""
    pos = q * (n - 1)
    lo, hi = floor(pos), ceil(pos)
    if method == "linear":
        w = pos - lo
    elif method == "lower":
        w = pos * 0
    elif method == "higher":
        w = pos * 0 + 1
    elif method == "midpoint":
        w = where(hi > lo, 0.5, 0.0) + pos * 0
    elif method == "nearest":   # NumPy rounds half to even
        w = (round_(pos) - lo)
    else:
        raise ValueError(f"cjit.numpy.quantile: method {method!r} is not supported (linear, lower, higher, "
                         f"midpoint, nearest)")
    return lo.astype("int64"), hi.astype("int64"), w


@_op("a", "q")
def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
             interpolation=None):
    """NumPy's quantile (q in [0, 1], a scalar or an array whose dims come
    first); nan if the values hold one, as NumPy."""
    if out is not None:
        raise TypeError("cjit.numpy.quantile: out= is not supported")
    method = interpolation or method
    x = _lift(a, "quantile")
    if not np.issubdtype(np.dtype(x.dtype), np.floating):
        x = x.astype("float64")
    shape = tuple(x.shape)
    axes = tuple(range(x.ndim)) if axis is None else (axis,) if not isinstance(axis, (tuple, list)) else axis
    axes = tuple(sorted(_norm_axis(d, x.ndim) for d in axes))
    rest = [d for d in range(x.ndim) if d not in axes]
    # the reduced axes moved last and merged into one
    x = moveaxis(x, axes, tuple(range(len(rest), x.ndim)))
    x = _reshape_t(x, tuple(shape[d] for d in rest) + (int(np.prod([shape[d] for d in axes])),))
    srt = sort(x, -1)
    qa = q if isinstance(q, Tracer) else _lift(np.asarray(q, dtype=np.float64))
    lo, hi, w = _positions(srt.shape[-1], qa, method)
    qshape = tuple(qa.shape)

    def at(i):   # srt[..., i] for every q, q's dims first
        r = _gather(srt, _reshape_t(i, (int(np.prod(qshape)) if qshape else 1,)), srt.ndim - 1)
        return _reshape_t(moveaxis(r, -1, 0), qshape + tuple(srt.shape[:-1]))
    wq = _reshape_t(w, qshape + (1,) * (srt.ndim - 1)).astype(srt.dtype)
    res = at(lo) * (1 - wq) + at(hi) * wq
    res = where(any_(isnan(srt), axis=-1), np.nan, res)
    if keepdims:
        res = _reshape_t(res, qshape + tuple(1 if d in axes else shape[d] for d in range(len(shape))))
    return res


@_op("a", "q")
def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
               interpolation=None):
    """quantile at q / 100."""
    qa = q / 100.0 if isinstance(q, Tracer) else np.asarray(q, dtype=np.float64) / 100.0
    return quantile(a, qa, axis, out, overwrite_input, method, keepdims, interpolation=interpolation)


@_op("a")
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The middle value (the mean of the two middle ones for an even count),
    nan if the values hold one, as NumPy."""
    return quantile(a, 0.5, axis, out, overwrite_input, "linear", keepdims)


# complex arguments: the registry's implementation, or NotImplementedError
# (_complex_dispatch.py; the implementations are registered in _complex_api.py)
complex_aware(globals(), __all__)
