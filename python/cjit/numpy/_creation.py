"""cjit.numpy's creation functions: full, zeros, ones, *_like, arange, asarray, array."""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from .._dtypes import canonical_dtype
from .._trace_state import current_trace
from .._dtypes import canonicalize_dtype, default_float, default_int, requested_dtype
from .. import _array
from .._array import Array
from .._cjit import Tracer
from ._complex_dispatch import complex_aware
from ._core import (_BOOL, _F64, _I64, _U64, _cast, _flat_seq, _is_float, _lift, _operand,
                    _shape_arg, _shape_of, _stack_nested, _weak_int_dtype)
from ._elementwise import astype
from .._jitted import Jitted

__all__ = ["empty", "empty_like", "eye", "identity", "linspace", "logspace", "meshgrid",
    "tril", "triu", "tri", "full", "zeros", "ones", "full_like", "zeros_like", "ones_like", "arange", "asarray",
    "array"]


# ---------------------------------------------------------------------------
# creation

def _shape_for_creation(shape, who):
    s = _shape_arg(shape, who)
    for d in s:
        if d < 0:
            raise ValueError("negative dimensions are not allowed")
    return s


def _fill_dtype(v):
    if isinstance(v, (Tracer, np.ndarray, np.generic)):
        return v.dtype
    if isinstance(v, bool):
        return _BOOL
    if isinstance(v, int):
        return _weak_int_dtype(v)
    if isinstance(v, float):
        return _F64
    return np.asarray(v).dtype


def _typed_scalar(v, dt):
    if dt == _BOOL:
        return builtins.bool(v)
    if dt.kind in "iu":
        return int(v)
    return float(v)


def _full_traced(trace, shape, fill_value, dt):
    if isinstance(fill_value, (Tracer, np.ndarray)) or type(fill_value) in (list, tuple):
        v = _cast(_operand(fill_value, "full"), dt)
        if tuple(v.shape) == shape:
            return v
        return trace.apply("broadcast", v, shape=shape)
    if isinstance(fill_value, np.generic):
        fill_value = fill_value.item()
    if not isinstance(fill_value, (bool, int, float)):
        raise TypeError(f"cjit.numpy.full: fill_value of type {type(fill_value).__name__}")
    return trace.apply("constant", value=_typed_scalar(fill_value, dt), dtype=dt.name,
                       shape=shape, weak=False)


def full(shape, fill_value, dtype=None, order="C", *, device=None):
    """An array of `shape` filled with fill_value; the dtype is fill_value's
    unless given (int -> int64, float -> float64, bool -> bool)."""
    _no_device(device, "full")
    s = _shape_for_creation(shape, "full")
    dt = canonical_dtype(requested_dtype(dtype, "full") if dtype is not None
                         else canonicalize_dtype(_fill_dtype(fill_value)))
    if isinstance(fill_value, Tracer):
        return _full_traced(fill_value.trace, s, fill_value, dt)
    trace = current_trace()
    if trace is None:
        return np.full(s, fill_value, dtype=dt)
    return _full_traced(trace, s, fill_value, dt)


def zeros(shape, dtype=float, order="C", *, device=None):
    """An array of zeros (the default float unless dtype is given)."""
    _no_device(device, "zeros")
    return full(shape, 0, canonical_dtype(requested_dtype(dtype, "zeros")))


def ones(shape, dtype=float, order="C", *, device=None):
    """An array of ones (the default float unless dtype is given)."""
    _no_device(device, "ones")
    return full(shape, 1, canonical_dtype(requested_dtype(dtype, "ones")))


def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """full() with a's shape and dtype unless given."""
    _no_device(device, "full_like")
    dt = canonical_dtype(requested_dtype(dtype, "full_like") if dtype is not None
                         else canonicalize_dtype(_fill_like_dtype(a)))
    s = _shape_of(a) if shape is None else shape
    return full(s, fill_value, dt)


def _fill_like_dtype(a):
    if isinstance(a, (Tracer, np.ndarray, np.generic)):
        return a.dtype
    return _fill_dtype(a)


def zeros_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """zeros with a's shape and dtype unless given."""
    _no_device(device, "zeros_like")
    return full_like(a, 0, dtype, shape=shape)


def ones_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """ones with a's shape and dtype unless given."""
    _no_device(device, "ones_like")
    return full_like(a, 1, dtype, shape=shape)


def _concrete_number(v, who):
    if isinstance(v, Tracer):
        # raises ConcretizationError with the C side's message
        float(v)
    if isinstance(v, (np.ndarray,)) and v.ndim == 0:
        v = v.item()
    if isinstance(v, np.generic):
        v = v.item()
    if not isinstance(v, (int, float)) or isinstance(v, complex):
        raise TypeError(f"cjit.numpy.{who}: expected a number, got {type(v).__name__}")
    return v


def arange(start, stop=None, step=None, dtype=None, *, device=None):
    """Evenly spaced values in [start, stop): int64 for integer arguments,
    float64 otherwise (NumPy's defaults).  The bounds must be concrete."""
    _no_device(device, "arange")
    start = _concrete_number(start, "arange")
    if stop is None:
        start, stop = 0, start
    else:
        stop = _concrete_number(stop, "arange")
    step = 1 if step is None else _concrete_number(step, "arange")
    if step == 0:
        raise ZeroDivisionError("arange: step must not be zero")
    all_int = all(isinstance(v, int) for v in (start, stop, step))
    if dtype is None:
        # NumPy's arange of an int past int64 (2**63) is a float64 one
        all_int = all_int and all(-(1 << 63) <= v < (1 << 63) for v in (start, stop, step))
        dt = default_int() if all_int else default_float()
    else:
        dt = canonical_dtype(requested_dtype(dtype, "arange"))
    trace = current_trace()
    if trace is None:
        return np.arange(start, stop, step, dtype=dt)
    n = builtins.max(int(math.ceil((stop - start) / step)), 0) if not all_int else \
        builtins.max(len(range(start, stop, step)), 0)
    if all_int:
        work = _U64 if dt == _U64 else _F64 if _is_float(dt) or dt == _BOOL else _I64
    else:
        work = _F64
    r = trace.apply("iota", shape=(n,), axis=0, dtype=work.name)
    if work == _F64 and not all_int:
        delta = float(start + step) - float(start)   # NumPy steps by the first difference
        if delta != 1.0:
            r = trace.apply("mul", r, delta)
        if start != 0:
            r = trace.apply("add", r, float(start))
    elif work == _U64 and step < 0:   # start - i * |step|: no negative uint64
        r = trace.apply("sub", start, trace.apply("mul", r, -step))
    else:
        if step != 1:
            r = trace.apply("mul", r, step)
        if start != 0:
            r = trace.apply("add", r, start)
    if r.dtype != dt:
        r = trace.apply("cast", r, dtype=dt.name)
    return r


def asarray(a, dtype=None, order=None, *, copy=None, device=None):
    """a as an array: a traced value inside a trace, a NumPy array outside.
    copy as NumPy's outside a trace (True: always a new array; False:
    ValueError if one would be needed); traced values are immutable, so a
    trace ignores it."""
    _no_device(device, "asarray")
    if isinstance(a, Tracer):
        if dtype is None:
            return a
        return astype(a, dtype)
    if type(a) in (list, tuple) and any(isinstance(y, Tracer) for y in _flat_seq(a)):
        r = _stack_nested(a)
        return r if dtype is None else astype(r, dtype)
    dt = None if dtype is None else canonical_dtype(requested_dtype(dtype, "asarray"))
    outside = current_trace() is None
    if outside and type(a) is Array and (dt is None or a.dtype == dt) and not copy:
        return a
    arr = np.asarray(a, dtype=dt, copy=copy if outside else None)
    canonical_dtype(arr.dtype, "cjit.numpy.asarray: dtype")
    if dt is None and canonicalize_dtype(arr.dtype) != arr.dtype:
        arr = arr.astype(canonicalize_dtype(arr.dtype))    # x64 off: as JAX, no warning
    if outside:
        # a cjit.Array owns its memory: a NumPy array is copied (unless
        # copy=False), so that writing to it later cannot change the result
        if copy is False:
            return _array.wrap(arr)
        return _array.wrap(arr if arr is not a and copy is None and arr.base is None
                           else np.array(arr))
    return _lift(arr)


def array(object, dtype=None, copy=True, order="K", ndmin=0):
    """Like asarray (a copy outside a trace)."""
    if ndmin:
        raise NotImplementedError("cjit.numpy.array: ndmin is not supported")
    if current_trace() is None and not isinstance(object, Tracer) and not (
            type(object) in (list, tuple) and any(isinstance(y, Tracer)
                                                  for y in _flat_seq(object))):
        dt = None if dtype is None else canonical_dtype(requested_dtype(dtype, "array"))
        arr = np.array(object, dtype=dt, copy=True)
        canonical_dtype(arr.dtype, "cjit.numpy.array: dtype")
        if canonicalize_dtype(arr.dtype) != arr.dtype:
            arr = arr.astype(canonicalize_dtype(arr.dtype))
        return _array.wrap(arr)
    return asarray(object, dtype)


# ---------------------------------------------------------------------------
# more creation functions (the array API's and NumPy's)

def _no_device(device, who):
    """The array API's device= keyword: None, "cpu" or a cjit Device."""
    if device is None or device == "cpu" or getattr(device, "platform", None) == "cpu":
        return
    raise ValueError(f"cjit.numpy.{who}: device={device!r}; cjit runs on the CPU only")


def empty(shape, dtype=float, order="C", *, device=None):
    """zeros(shape, dtype): a traced value always has defined contents."""
    _no_device(device, "empty")
    return zeros(shape, dtype)


def empty_like(prototype, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """zeros_like(prototype, dtype)."""
    _no_device(device, "empty_like")
    return zeros_like(prototype, dtype, shape=shape)


def eye(N, M=None, k=0, dtype=float, order="C", *, device=None):
    """Ones on the k-th diagonal of an N x M array, zeros elsewhere."""
    _no_device(device, "eye")
    n = operator.index(N)
    m = n if M is None else operator.index(M)
    k = operator.index(k)
    dt = canonical_dtype(requested_dtype(dtype if dtype is not None else float, "eye"))
    trace = current_trace()
    if trace is None:
        return np.eye(n, m, k, dtype=dt)
    i = trace.apply("iota", shape=(n, m), axis=0, dtype="int64")
    j = trace.apply("iota", shape=(n, m), axis=1, dtype="int64")
    hit = trace.apply("eq", trace.apply("sub", j, i), k)
    return trace.apply("cast", hit, dtype=dt.name)


def identity(n, dtype=float):
    """eye(n)."""
    return eye(n, dtype=dtype)


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    """num evenly spaced values from start to stop (inclusive unless
    endpoint=False), computed as NumPy's: start + i * step, the last one
    exactly stop.  Bounds must be concrete scalars."""
    _no_device(device, "linspace")
    start = _concrete_number(start, "linspace")
    stop = _concrete_number(stop, "linspace")
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"cjit.numpy.linspace: number of samples, {num}, must be non-negative")
    if axis != 0:
        raise NotImplementedError("cjit.numpy.linspace: only axis=0 is supported")
    dt = default_float() if dtype is None else canonical_dtype(requested_dtype(dtype, "linspace"))
    trace = current_trace()
    if trace is None:
        r = np.linspace(start, stop, num, endpoint=endpoint, retstep=retstep, dtype=dt)
        return r
    div = (num - 1) if endpoint else num
    step = (stop - start) / div if div > 0 else math.nan
    i = trace.apply("iota", shape=(num,), axis=0, dtype="float64")
    if div > 0:
        r = trace.apply("add", trace.apply("mul", i, float(step)), float(start))
    else:
        r = trace.apply("add", trace.apply("mul", i, 0.0), float(start))
    if endpoint and num > 1:
        r = trace.apply("select", trace.apply("eq", i, float(num - 1)), float(stop), r)
    if r.dtype != dt:
        r = trace.apply("cast", r, dtype=dt.name)
    return (r, step) if retstep else r


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """base ** linspace(start, stop, num)."""
    y = linspace(start, stop, num, endpoint=endpoint, axis=axis)
    trace = current_trace()
    dt = default_float() if dtype is None else canonical_dtype(requested_dtype(dtype, "logspace"))
    if trace is None:
        return np.power(base, y).astype(dt)
    r = trace.apply("pow", float(base), y)
    return r if r.dtype == dt else trace.apply("cast", r, dtype=dt.name)


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """Coordinate arrays from 1-D coordinate vectors (indexing 'xy' or 'ij')."""
    if indexing not in ("xy", "ij"):
        raise ValueError("cjit.numpy.meshgrid: indexing must be 'xy' or 'ij'")
    if not any(isinstance(x, Tracer) for x in xi) and current_trace() is None:
        return list(np.meshgrid(*[np.asarray(x) for x in xi], copy=True, sparse=sparse,
                                indexing=indexing))
    xs = [_lift(_operand(x, "meshgrid"), "meshgrid") for x in xi]
    xs = [x if x.ndim == 1 else x.trace.apply("reshape", x, shape=(x.size,)) for x in xs]
    n = len(xs)
    sizes = [x.shape[0] for x in xs]
    if indexing == "xy" and n >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, x in enumerate(xs):
        pos = i
        if indexing == "xy" and n >= 2 and i < 2:
            pos = 1 - i
        shape = [1] * n
        shape[pos] = x.shape[0]
        v = x.trace.apply("reshape", x, shape=tuple(shape))
        if not sparse:
            v = x.trace.apply("broadcast", v, shape=tuple(sizes))
        out.append(v)
    return out


def _tri_mask(trace, shape, k, lower):
    n, m = shape[-2], shape[-1]
    i = trace.apply("iota", shape=(n, m), axis=0, dtype="int64")
    j = trace.apply("iota", shape=(n, m), axis=1, dtype="int64")
    d = trace.apply("sub", j, i)
    return trace.apply("le" if lower else "ge", d, k)


def _tri(x, k, lower, who):
    x = _lift(_operand(x, who), who)
    if x.ndim < 2:
        raise ValueError(f"cjit.numpy.{who}: input must be at least 2-d, got shape "
                         f"{tuple(x.shape)}")
    t = x.trace
    zero = t.apply("constant", value=_typed_scalar(0, x.dtype), dtype=x.dtype.name, shape=(),
                   weak=False)
    return t.apply("select", _tri_mask(t, x.shape, operator.index(k), lower), x, zero)


def tril(m, k=0):
    """m with the elements above the k-th diagonal set to zero (last two axes)."""
    return _eager_or_traced(lambda a: _tri(a, k, True, "tril"), m, ("tril", k))


def triu(m, k=0):
    """m with the elements below the k-th diagonal set to zero (last two axes)."""
    return _eager_or_traced(lambda a: _tri(a, k, False, "triu"), m, ("triu", k))


def tri(N, M=None, k=0, dtype=float):
    """Ones at and below the k-th diagonal of an N x M array."""
    n = operator.index(N)
    m = n if M is None else operator.index(M)
    dt = canonical_dtype(requested_dtype(dtype, "tri"))
    trace = current_trace()
    if trace is None:
        return np.tri(n, m, k, dtype=dt)
    return trace.apply("cast", _tri_mask(trace, (n, m), operator.index(k), True), dtype=dt.name)


_EAGER_CACHE = {}


def _eager_or_traced(fn, x, key):
    """fn(x) traced, or under a cached internal jit keyed by `key` when
    called eagerly (the _op decorator for functions built as closures)."""
    if isinstance(x, Tracer) or current_trace() is not None:
        return fn(x)
    j = _EAGER_CACHE.get(key)
    if j is None:
        j = Jitted(fn, _internal=True)
        j._name = f"cjit.numpy.{key[0]}"
        _EAGER_CACHE[key] = j
    return j(np.asarray(x))


# complex arguments: the registry's implementation, or NotImplementedError
# (_complex_dispatch.py; the implementations are registered in _complex_api.py)
complex_aware(globals(), __all__)
