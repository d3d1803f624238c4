"""cjit.numpy's reductions: sum, prod, max, min, mean, var, argmax, argmin."""
from __future__ import annotations

from .._dtypes import canonicalize_dtype, default_float

import builtins

from .._dtypes import canonical_dtype
from ._complex_dispatch import complex_aware
from ._core import (_BOOL, _F64, _I32, _I64, _U64, _cast, _error, _is_float, _kept_shape, _lift,
                    _norm_axes, _norm_axis, _op, _operand, _reshape_t)
from ._manipulation import _concat_t, _slice_axis

__all__ = ["std", "all", "any", "count_nonzero", "ptp", "cumsum", "cumprod", "cumulative_sum",
    "cumulative_prod", "sum", "prod", "max", "min", "amax", "amin", "mean", "var", "argmax", "argmin"]


def _check_reduce_args(who, out, initial, where):
    if out is not None:
        raise TypeError(f"cjit.numpy.{who}: out= is not supported")
    if initial is not None:
        raise TypeError(f"cjit.numpy.{who}: initial= is not supported")
    if where is not None:
        raise TypeError(f"cjit.numpy.{who}: where= is not supported")


def _reduce(prim, x, axes, keepdims):
    if axes:
        r = x.trace.apply(prim, x, axes=axes)
    else:
        r = x
    if keepdims:
        r = _reshape_t(r, _kept_shape(x.shape, axes))
    return r


def _accumulator(dt):
    """NumPy's dtype for sums and products of bool or integer dtype dt: the
    platform integer, int64, and uint64 for the unsigned."""
    return canonicalize_dtype(_U64 if dt.kind == "u" else _I64)   # x64 off: uint32, int32


def _accumulate(name, a, axis, dtype, out, keepdims, initial, where):
    """sum or prod: bool and narrower integer inputs accumulate as int64 (the
    unsigned as uint64), as NumPy.  With
    dtype=int32 or bool the result has that dtype, as NumPy's: the core
    accumulates them as int64, and wrapping to 32 bits at the end gives the
    int32 sum/product NumPy's wrapping accumulator gives; cast to bool, the
    int64 count or product of 0/1 values is NumPy's logical or/and."""
    _check_reduce_args(name, out, initial, where)
    x = _lift(_operand(a, name))
    axes = _norm_axes(axis, x.ndim)
    want = None
    if dtype is not None:
        want = canonical_dtype(dtype)
        x = _cast(x, want)
    elif x.dtype.kind in "biu":
        x = _cast(x, _accumulator(x.dtype))
    r = _reduce("reduce_" + name, x, axes, keepdims)
    if want is not None and r.dtype != want:
        r = _cast(r, want)
    return r


@_op("a")
def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Sum over axis (None: all); bool and signed integer inputs sum as
    int64, unsigned ones as uint64, as NumPy."""
    return _accumulate("sum", a, axis, dtype, out, keepdims, initial, where)


@_op("a")
def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Product over axis (None: all); bool and signed integer inputs as
    int64, unsigned ones as uint64, as NumPy."""
    return _accumulate("prod", a, axis, dtype, out, keepdims, initial, where)


def _minmax(who, prim, npname, a, axis, out, keepdims, initial, where):
    _check_reduce_args(who, out, initial, where)
    x = _lift(_operand(a, who))
    axes = _norm_axes(axis, x.ndim)
    for ax in axes:
        if x.shape[ax] == 0:
            raise _error(ValueError, who, f"zero-size array to reduction operation {npname} "
                         f"which has no identity", x)
    return _reduce(prim, x, axes, keepdims)


@_op("a")
def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Maximum over axis (None: all); nan if any is nan.  ValueError on an
    empty reduction, as NumPy."""
    return _minmax("max", "reduce_max", "maximum", a, axis, out, keepdims, initial, where)


@_op("a")
def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Minimum over axis (None: all); nan if any is nan.  ValueError on an
    empty reduction, as NumPy."""
    return _minmax("min", "reduce_min", "minimum", a, axis, out, keepdims, initial, where)


amax = max
amin = min


def _count_of(shape, axes):
    n = 1
    for ax in axes:
        n *= shape[ax]
    return n


def _mean_t(x, axes, dtype, keepdims):
    if dtype is not None:
        dt = canonical_dtype(dtype)
        work = dt if _is_float(dt) else default_float()
    else:
        dt = None
        work = x.dtype if _is_float(x.dtype) else default_float()
    x = _cast(x, work)
    s = _reduce("reduce_sum", x, axes, keepdims)
    r = s.trace.apply("div", s, float(_count_of(x.shape, axes)))
    if dt is not None and dt != work:
        r = r.trace.apply("cast", r, dtype=dt.name)
    return r


@_op("a")
def mean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    """Arithmetic mean over axis: ints and bools give float64, float32 stays
    float32 (NumPy's dtypes).  An empty mean is nan."""
    _check_reduce_args("mean", out, None, where)
    x = _lift(_operand(a, "mean"))
    return _mean_t(x, _norm_axes(axis, x.ndim), dtype, keepdims)


@_op("a")
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, *,
        correction=None, mean=None):
    """Variance over axis, two-pass (mean first), divided by count - ddof
    (correction= is the array API's name for ddof)."""
    _check_reduce_args("var", out, None, where)
    if mean is not None:
        raise TypeError("cjit.numpy.var: mean= is not supported")
    if correction is not None:
        if ddof != 0:
            raise ValueError("cjit.numpy.var: pass ddof or correction, not both")
        ddof = correction
    x = _lift(_operand(a, "var"))
    axes = _norm_axes(axis, x.ndim)
    if dtype is not None:
        dt = canonical_dtype(dtype)
        work = dt if _is_float(dt) else default_float()
    else:
        dt = None
        work = x.dtype if _is_float(x.dtype) else default_float()
    x = _cast(x, work)
    t = x.trace
    m = _mean_t(x, axes, None, True)
    d = t.apply("sub", x, m)
    s = _reduce("reduce_sum", t.apply("mul", d, d), axes, keepdims)
    denom = builtins.max(_count_of(x.shape, axes) - float(ddof), 0.0)
    r = t.apply("div", s, float(denom))
    if dt is not None and dt != work:
        r = t.apply("cast", r, dtype=dt.name)
    return r


def _arg_reduce(who, prim, a, axis, out, keepdims):
    if out is not None:
        raise TypeError(f"cjit.numpy.{who}: out= is not supported")
    x = _lift(_operand(a, who))
    t = x.trace
    orig_ndim = x.ndim
    if axis is None:
        x = _reshape_t(x, (x.size,))
        ax = 0
    else:
        ax = _norm_axis(axis, x.ndim)
    n = x.shape[ax]
    if n == 0:
        raise _error(ValueError, who, f"attempt to get {who} of an empty sequence", x)
    if x.dtype == _BOOL:
        x = t.apply("cast", x, dtype="int32")
    kept = _kept_shape(x.shape, (ax,))
    m = _reshape_t(t.apply(prim, x, axes=(ax,)), kept)
    hit = t.apply("eq", x, m)
    if _is_float(x.dtype):
        # NumPy returns the first nan's index: a nan anywhere makes m nan, so
        # then only the nans match.
        hit = t.apply("logical_or", hit, t.apply("isnan", x))
    idx = t.apply("iota", shape=tuple(x.shape), axis=ax, dtype="int64")
    cand = t.apply("select", hit, idx, n)
    r = t.apply("reduce_min", cand, axes=(ax,))
    if keepdims:
        if axis is None:
            r = _reshape_t(r, (1,) * orig_ndim)
        else:
            r = _reshape_t(r, kept)
    return r


@_op("a")
def argmax(a, axis=None, out=None, *, keepdims=False):
    """Index of the maximum along axis (None: of the flattened array); the
    first one on ties, the first nan if there is one (as NumPy)."""
    return _arg_reduce("argmax", "reduce_max", a, axis, out, keepdims)


@_op("a")
def argmin(a, axis=None, out=None, *, keepdims=False):
    """Index of the minimum along axis (None: of the flattened array); the
    first one on ties, the first nan if there is one (as NumPy)."""
    return _arg_reduce("argmin", "reduce_min", a, axis, out, keepdims)


@_op("a")
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, *,
        correction=None, mean=None):
    """Standard deviation: sqrt(var) with var's arguments."""
    v = var._cjit_impl(a, axis, dtype, out, ddof, keepdims, where, correction=correction,
                       mean=mean)
    return v.trace.apply("sqrt", v)


def _truth_count(who, a, axis, keepdims, want):
    x = _lift(_operand(a, who))
    axes = _norm_axes(axis, x.ndim)
    t = x.trace
    hit = t.apply("eq" if want == 0 else "ne", x, False if x.dtype == _BOOL else 0)
    return _reduce("reduce_sum", t.apply("cast", hit, dtype="int64"), axes, keepdims)


@_op("a")
def all(a, axis=None, out=None, keepdims=False, *, where=None):
    """True where every element along axis is nonzero (True when empty)."""
    _check_reduce_args("all", out, None, where)
    c = _truth_count("all", a, axis, keepdims, 0)
    return c.trace.apply("eq", c, 0)


@_op("a")
def any(a, axis=None, out=None, keepdims=False, *, where=None):
    """True where some element along axis is nonzero (False when empty)."""
    _check_reduce_args("any", out, None, where)
    c = _truth_count("any", a, axis, keepdims, 1)
    return c.trace.apply("gt", c, 0)


@_op("a")
def count_nonzero(a, axis=None, *, keepdims=False):
    """The number of nonzero elements along axis (int64)."""
    return _truth_count("count_nonzero", a, axis, keepdims, 1)


@_op("a")
def ptp(a, axis=None, out=None, keepdims=False):
    """max - min along axis."""
    hi = max._cjit_impl(a, axis, out, keepdims)
    lo = min._cjit_impl(a, axis, out, keepdims)
    return hi.trace.apply("sub", hi, lo)


def _shift_in(x, ax, k, fill):
    """x shifted by k along ax, the first k places filled with `fill`."""
    t = x.trace
    n = x.shape[ax]
    shape = list(x.shape)
    shape[ax] = k
    pad = t.apply("constant", value=fill, dtype=x.dtype.name, shape=tuple(shape), weak=False)
    return _concat_t([pad, _slice_axis(x, ax, 0, n - k)], ax)


def _scan(who, prim, identity, x, axis, dtype, include_initial):
    """Inclusive prefix sums/products along axis by log-step doubling
    (Hillis-Steele): after step k every element holds the combination of the
    2^k values ending at it.  ceil(log2 n) steps of shift + add, each a
    slice, a concatenate and an elementwise op that fuse; O(n log n) work,
    rounding error growing as log n (a sequential scan's grows as n)."""
    x = _lift(_operand(x, who))
    if axis is None:
        if x.ndim > 1 and who.startswith("cumulative"):
            raise ValueError(f"cjit.numpy.{who}: axis must be given for arrays of more than one "
                             f"dimension (the array API's rule)")
        x = _reshape_t(x, (x.size,))
        ax = 0
    else:
        ax = _norm_axis(axis, x.ndim)
    if dtype is not None:
        x = _cast(x, canonical_dtype(dtype))
    elif x.dtype.kind in "biu":
        x = _cast(x, _accumulator(x.dtype))
    t = x.trace
    fill = float(identity) if _is_float(x.dtype) else identity
    n = x.shape[ax]
    k = 1
    while k < n:
        x = t.apply(prim, x, _shift_in(x, ax, k, fill))
        k *= 2
    if include_initial:
        shape = list(x.shape)
        shape[ax] = 1
        x = _concat_t([t.apply("constant", value=fill, dtype=x.dtype.name, shape=tuple(shape),
                                weak=False), x], ax)
    return x


@_op("a")
def cumsum(a, axis=None, dtype=None, out=None):
    """Cumulative sum along axis (None: of the flattened array); bool and
    signed integers accumulate as int64, unsigned as uint64, as NumPy.  See
    _scan for the method."""
    if out is not None:
        raise TypeError("cjit.numpy.cumsum: out= is not supported")
    return _scan("cumsum", "add", 0, a, axis, dtype, False)


@_op("a")
def cumprod(a, axis=None, dtype=None, out=None):
    """Cumulative product along axis (None: of the flattened array)."""
    if out is not None:
        raise TypeError("cjit.numpy.cumprod: out= is not supported")
    return _scan("cumprod", "mul", 1, a, axis, dtype, False)


@_op("x")
def cumulative_sum(x, axis=None, dtype=None, include_initial=False):
    """The array API's cumulative sum (include_initial: a leading 0)."""
    return _scan("cumulative_sum", "add", 0, x, axis, dtype, include_initial)


@_op("x")
def cumulative_prod(x, axis=None, dtype=None, include_initial=False):
    """The array API's cumulative product (include_initial: a leading 1)."""
    return _scan("cumulative_prod", "mul", 1, x, axis, dtype, include_initial)


# complex arguments: the registry's implementation, or NotImplementedError
# (_complex_dispatch.py; the implementations are registered in _complex_api.py)
complex_aware(globals(), __all__)
