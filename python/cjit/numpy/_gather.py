"""Indexing at integer arrays, on the C graph's gather and scatter ops
(csrc/graph_index.c): x[idx], x[i, j], x[:, idx], take, take_along_axis,
and JAX's functional updates x.at[key].set/add/multiply/min/max/get/apply.

Index semantics follow JAX: a negative index counts from the end; an
index still out of range is clamped when reading (gather) and its update
dropped when writing (.at[...].set/add/...), so nothing is read or written
outside the array.  Concrete (NumPy, Python) indices do the same, as in
JAX (decision 260); `take` keeps NumPy's IndexError with no mode."""
from __future__ import annotations

import builtins
import operator

import numpy as np

from .._array import index_axes
from .._cjit import Tracer
from .._jitted import Jitted
from .._trace_state import current_trace
from .._control import fori_loop
from ._complex_dispatch import complex_aware
from ._core import _error, _lift, _norm_axis, _op, _reshape_t
from ._creation import arange, asarray, ones_like, zeros
from ._elementwise import clip, maximum, minimum, power, true_divide, where
from ._indexing import _getitem_basic
from ._linalg import transpose
from ._manipulation import broadcast_arrays, broadcast_shapes, broadcast_to, moveaxis
from ._math import remainder

_INT_KINDS = "iu"


# ---- the ops ----------------------------------------------------------------------

def _gather(x, idx, axis):
    return x.trace.apply("gather", x, idx, axis=axis)


def _scatter(op, idx, upd, shape, axis=0, mode="drop"):
    return upd.trace.apply(op, idx, upd, shape=tuple(shape), axis=axis, mode=mode)


def _is_array_index(k):
    """An integer (or boolean) array index: a Tracer, an ndarray, or a list."""
    if isinstance(k, Tracer):
        return k.ndim > 0 or np.dtype(k.dtype).kind in _INT_KINDS + "b"
    return isinstance(k, (np.ndarray, list))


def _index_tracer(k, n, who, x, check=True):
    """An integer index array as a Tracer (a concrete one checked against n
    unless check is False: then it is left to the op's mode)."""
    if isinstance(k, Tracer):
        kind = np.dtype(k.dtype).kind
        if kind == "b":
            from ..errors import NonConcreteBooleanIndexError
            raise _error(NonConcreteBooleanIndexError, who, "a traced boolean mask selects a number of elements "
                         "known only when it runs; use cjit.numpy.where, or index with a concrete mask", x)
        if kind not in _INT_KINDS:
            raise _error(IndexError, who, f"arrays used as indices must be of integer type, got "
                         f"{np.dtype(k.dtype).name}", x)
        return k
    a = np.asarray(k)
    if a.dtype.kind not in _INT_KINDS:
        if a.size == 0:
            a = a.astype(np.int64)
        else:
            raise _error(IndexError, who, f"arrays used as indices must be of integer type, got "
                         f"{a.dtype.name}", x)
    if check and a.size and (a.min() < -n or a.max() >= n):
        bad = a[(a < -n) | (a >= n)].flat[0]
        raise _error(IndexError, who, f"index {int(bad)} is out of bounds for an axis of size {n}", x)
    if a.dtype.kind == "u" and a.dtype.itemsize >= 8:   # 2**63 and up capped, so still past the end
        a = np.minimum(a, np.uint64(n)).astype(np.int64)
    return _lift(a)


def _as_int64(i, n):
    """i as an int64 index into a dim of n, negative ones counted from the
    end; an unsigned one capped at n first, so that a uint64 of 2**63 or
    more stays past the end instead of turning negative."""
    if np.dtype(i.dtype).kind == "u":
        return minimum(i, n).astype("int64")
    i = i.astype("int64")
    return where(i < 0, i + n, i)


def _wrap_clamp(i, n):
    """i as gather reads it (negative from the end, clamped), as int64."""
    return clip(_as_int64(i, n), 0, builtins.max(n - 1, 0))


def _in_range(i, n):
    i = _as_int64(i, n)
    return (i >= 0) & (i < n)


# ---- x[key] -----------------------------------------------------------------------

def _expand_key(key, ndim, who, x):
    """key as a tuple of one entry per dim of x (slices for the rest); a
    concrete boolean mask becomes its integer arrays.  None (new axes) and
    an ellipsis next to array indices are expanded too."""
    if not isinstance(key, tuple):
        key = (key,)
    out = []
    for k in key:
        if isinstance(k, (np.ndarray, list)) and np.asarray(k).dtype == np.bool_:
            out.extend(np.nonzero(np.asarray(k)))
        else:
            out.append(k)
    if builtins.any(k is None for k in out):
        raise _error(NotImplementedError, who, "None (a new axis) mixed with array indices is not supported; "
                     "add the axis with cjit.numpy.expand_dims first", x)
    nell = builtins.sum(1 for k in out if k is Ellipsis)
    if nell > 1:
        raise _error(IndexError, who, "an index can only have a single ellipsis ('...')", x)
    real = builtins.sum(1 for k in out if k is not Ellipsis)
    if real > ndim:
        raise _error(IndexError, who, f"too many indices for array: array is {ndim}-dimensional, but "
                     f"{real} were indexed", x)
    if nell:
        at = out.index(Ellipsis)
        out[at:at + 1] = [slice(None)] * (ndim - real)
    return tuple(out) + (slice(None),) * (ndim - len(out))


def _advanced(x, key, who, check=False):
    """x[key] for a key with integer arrays, and the bool mask of the
    result's elements whose indices were in range (None when all must be).
    check: a concrete index out of range is an IndexError (JAX's indexing
    clamps it, decision 260: no caller asks any more)."""
    key = _expand_key(key, x.ndim, who, x)
    adv = [d for d, k in enumerate(key) if _is_array_index(k) or not isinstance(k, slice)]
    # the slices first, every indexed dim kept whole
    basic = tuple(slice(None) if d in adv else k for d, k in enumerate(key))
    y = _getitem(x, basic) if builtins.any(k != slice(None) for k in basic) else x
    shape = tuple(y.shape)
    idx = [_index_tracer(key[d] if _is_array_index(key[d]) else operator.index(key[d]), shape[d], who, x, check)
           for d in adv]
    idx = list(broadcast_arrays(*idx)) if len(idx) > 1 else idx
    ok = None
    for d, i in zip(adv, idx):
        r = _in_range(i, shape[d])
        ok = r if ok is None else ok & r
    def placed(r, pos):
        """(r, the in-range mask shaped to broadcast against r)"""
        if ok is None:
            return r, pos, None
        nb = len(tuple(ok.shape))
        return r, pos, _reshape_t(ok, (1,) * pos + tuple(ok.shape) + (1,) * (r.ndim - pos - nb))

    if len(adv) == 1:   # one dim: a gather along it, its index dims where it was
        return placed(_gather(y, idx[0], adv[0]), adv[0])
    # several: those dims moved to the front and merged, one linear index into them
    lin = None
    stride = 1
    for d, i in reversed(list(zip(adv, idx))):
        term = _wrap_clamp(i, shape[d]) * stride
        lin = term if lin is None else lin + term
        stride *= shape[d]
    rest = [d for d in range(len(shape)) if d not in adv]
    merged = _reshape_t(transpose(y, tuple(adv) + tuple(rest)), (stride,) + tuple(shape[d] for d in rest))
    r = _gather(merged, lin, 0)
    nb = len(tuple(lin.shape))
    # adjacent indexed dims keep their place; others go first, as NumPy does
    if adv == list(range(adv[0], adv[0] + len(adv))) and adv[0] > 0:
        r = moveaxis(r, tuple(range(nb)), tuple(range(adv[0], adv[0] + nb)))
        return placed(r, adv[0])
    return placed(r, 0)


def _getitem(x, key):
    """x[key] (Tracer.__getitem__): a gather where key holds integer arrays or
    a boolean mask, basic indexing (_indexing.py) otherwise."""
    if not isinstance(x, Tracer):
        if current_trace() is None:
            return np.asarray(x)[key]
        x = _lift(x)
    if _has_array_index(key):   # integer arrays or a boolean mask: a gather
        return _getitem_advanced(x, key)
    return _getitem_basic(x, key)


def _getitem_advanced(x, key):
    return _advanced(x, key, "getitem")[0]


def _has_array_index(key):
    items = key if isinstance(key, tuple) else (key,)
    return builtins.any(_is_array_index(k) for k in items)


# ---- take, take_along_axis ----------------------------------------------------------

def _check_concrete(indices, a, axis, mode, who):
    """Outside a trace, NumPy's IndexError for a concrete index out of range
    (inside, the compiled take sees the indices as values)."""
    if mode not in (None, "raise") or isinstance(indices, Tracer) or current_trace() is not None:
        return
    i, shape = np.asarray(indices), np.shape(a)
    n = int(np.prod(shape)) if axis is None else shape[axis]
    if i.size and i.dtype.kind in _INT_KINDS and (i.min() < -n or i.max() >= n):
        bad = int(i[(i < -n) | (i >= n)].flat[0])
        raise IndexError(f"cjit.numpy.{who}: index {bad} is out of bounds for axis {axis or 0} with size {n}")


def take(a, indices, axis=None, out=None, mode=None):
    """Elements of a at `indices` along axis (None: of the flattened array);
    see _take."""
    _check_concrete(indices, a, axis, mode, "take")
    return _take(a, indices, axis, out, mode)


def take_along_axis(arr, indices, axis, mode=None):
    """out[..., j, ...] = arr[..., indices[..., j, ...], ...] along axis, as NumPy's."""
    _check_concrete(indices, arr, axis, mode, "take_along_axis")
    return _take_along_axis(arr, indices, axis, mode)


@_op("a", "indices")
def _take(a, indices, axis=None, out=None, mode=None):
    """Elements of a at `indices` along axis (None: of the flattened array).
    mode None (NumPy's: a negative index counts from the end; out of range
    is an IndexError for concrete indices, clamped for traced ones), 'clip'
    (clamped into [0, n)) or 'wrap' (modulo n)."""
    if out is not None:
        raise TypeError("cjit.numpy.take: out= is not supported")
    x = _lift(a, "take")
    if axis is None:
        x = _reshape_t(x, (int(np.prod(x.shape)),))
        ax = 0
    else:
        ax = _norm_axis(axis, x.ndim)
    n = x.shape[ax]
    if mode not in (None, "raise", "clip", "wrap", "fill", "promise_in_bounds"):
        raise ValueError(f"cjit.numpy.take: mode must be 'raise', 'clip' or 'wrap', got {mode!r}")
    if mode in ("clip", "wrap"):
        i = indices if isinstance(indices, Tracer) else _lift(np.asarray(indices))
        if np.dtype(i.dtype).kind not in _INT_KINDS:
            raise _error(IndexError, "take", "indices must be integers", i)
        i = clip(i, 0, n - 1) if mode == "clip" else remainder(i, n)
    else:
        i = _index_tracer(indices, n, "take", x)
    return _gather(x, i, ax)


@_op("arr", "indices")
def _take_along_axis(arr, indices, axis, mode=None):
    """out[..., j, ...] = arr[..., indices[..., j, ...], ...] along axis (the
    other dims of indices broadcast against arr's), as NumPy's."""
    x = _lift(arr, "take_along_axis")
    if axis is None:
        x = _reshape_t(x, (int(np.prod(x.shape)),))
        axis = 0
    ax = _norm_axis(axis, x.ndim)
    i = _index_tracer(indices, x.shape[ax], "take_along_axis", x)
    if i.ndim != x.ndim:
        raise _error(ValueError, "take_along_axis", "indices and arr must have the same number of dimensions",
                     x, i)
    shape = list(broadcast_shapes(tuple(x.shape[:ax]) + (1,) + tuple(x.shape[ax + 1:]),
                                  tuple(i.shape[:ax]) + (1,) + tuple(i.shape[ax + 1:])))
    shape[ax] = i.shape[ax]
    i = broadcast_to(i, tuple(shape))
    # one linear index into the flattened arr
    xs = list(x.shape)
    big = [builtins.max(a, b) if d != ax else a for d, (a, b) in enumerate(zip(xs, shape))]
    xb = broadcast_to(x, tuple(big)) if big != xs else x
    lin, stride = None, 1
    for d in reversed(range(len(big))):
        if d == ax:
            term = _wrap_clamp(i, big[d])
        else:
            coord = arange(shape[d]).reshape(tuple(shape[d] if e == d else 1 for e in range(len(shape))))
            term = coord
        term = term * stride
        lin = term if lin is None else lin + term
        stride *= big[d]
    return _gather(_reshape_t(xb, (stride,)), lin, 0)


# ---- x.at[key] ----------------------------------------------------------------------

class _At:
    """x.at: indexing it gives the updates of JAX's functional syntax."""
    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x

    def __getitem__(self, key):
        return _AtIndex(self.x, key)

    def __repr__(self):
        return f"_At({self.x!r})"


_MODES = (None, "clip", "fill", "drop", "promise_in_bounds")


def _fill_value(dt, fill_value):
    """What .get(mode="fill") gives for an index out of range: fill_value in
    x's dtype, by default NaN (inexact), the smallest (signed) or largest
    (unsigned) integer, or True, as JAX's."""
    if fill_value is not None:
        return np.asarray(fill_value).astype(dt)
    if dt.kind in "fc":
        return np.array(np.nan, dt)
    if dt.kind == "b":
        return np.array(True)
    return np.array(np.iinfo(dt).min if dt.kind == "i" else np.iinfo(dt).max, dt)


def _out_of_range_ints_as_arrays(key, shape):
    """key with its Python integers that are out of range for their axis as
    0-d arrays, so that an update drops them (and .get clamps or fills) as
    it does an array's, instead of a basic index's clamping (decision 260)."""
    items = key if isinstance(key, tuple) else (key,)
    out, changed = [], False
    for k, ax in zip(items, index_axes(len(shape), items)):
        if isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)) \
                and ax is not None and ax < len(shape) and not -shape[ax] <= int(k) < shape[ax]:
            k = np.asarray(int(k))
            changed = True
        out.append(k)
    if not changed:
        return key
    return tuple(out) if isinstance(key, tuple) else out[0]


class _AtIndex:
    """x.at[key]: .set, .add, .multiply/.mul, .divide, .power, .min, .max,
    .apply and .get, each returning a new array (x itself is unchanged).

    mode, as JAX's: None or "promise_in_bounds" (a traced index out of range
    is clamped by .get and dropped by the updates; a concrete one is an
    IndexError), "clip" (clamped), "fill"/"drop" (.get gives fill_value, the
    updates are dropped).  With an explicit mode a concrete index out of
    range follows it too."""

    def __init__(self, x, key):
        self.x, self.key = x, _out_of_range_ints_as_arrays(key, tuple(x.shape))

    @staticmethod
    def _mode(mode, who):
        if mode not in _MODES:
            raise ValueError(f"cjit.numpy: x.at[...].{who}: unknown mode {mode!r}; expected one of "
                             f"'clip', 'fill', 'drop', 'promise_in_bounds' or None")
        return mode

    def _flat_targets(self, mode):
        """(the flat index of every selected element, int64, the selection's
        shape): iota indexed like x, out-of-range targets sent past the end
        (dropped) unless mode is 'clip'."""
        x = self.x
        size = int(np.prod(x.shape))
        iota = _reshape_t(arange(size), tuple(x.shape))
        if _has_array_index(self.key):
            lin, _, ok = _advanced(iota, self.key, "at")
            if ok is not None and mode != "clip":
                lin = where(ok, lin, size)
        else:
                lin = _getitem(iota, self.key)
        return lin, size

    def _single_axis(self, mode):
        """(axis, index) when the key is one integer array with whole slices
        around it (x.at[idx], x.at[:, idx]): one scatter along that axis, no
        flat index per element.  None otherwise."""
        key = self.key if isinstance(self.key, tuple) else (self.key,)
        if Ellipsis in [k for k in key if not _is_array_index(k)]:
            return None
        arrays = [d for d, k in enumerate(key) if _is_array_index(k)]
        if len(arrays) != 1 or len(key) > self.x.ndim or builtins.any(
                not _is_array_index(k) and not (isinstance(k, slice) and k == slice(None)) for k in key):
            return None
        k = key[arrays[0]]
        if not isinstance(k, Tracer) and np.asarray(k).dtype == np.bool_:
            return None
        return arrays[0], _index_tracer(k, self.x.shape[arrays[0]], "at", self.x, check=False)

    def _scatter(self, op, values, mode, who="update"):
        """The scatter of `values` at the key, of x's shape, starting from
        op's identity."""
        mode = self._mode(mode, who)
        x = self.x
        v = values if isinstance(values, Tracer) else _lift(
            asarray(values) if isinstance(values, (list, tuple)) else values)
        if np.dtype(v.dtype) != np.dtype(x.dtype):
            v = v.astype(x.dtype)
        m = "clip" if mode == "clip" else "drop"
        single = self._single_axis(mode)
        if single is not None:
            ax, idx = single
            shape = tuple(x.shape)
            return _scatter(op, idx, broadcast_to(v, shape[:ax] + tuple(idx.shape) + shape[ax + 1:]), shape, ax, m)
        lin, size = self._flat_targets(mode)
        v = broadcast_to(v, tuple(lin.shape))
        n = int(np.prod(lin.shape))
        flat = _scatter(op, _reshape_t(lin, (n,)), _reshape_t(v, (n,)), (size,), 0, m)
        return _reshape_t(flat, tuple(x.shape))

    def get(self, mode=None, fill_value=None, **_):
        """x[key]; with mode "fill" (or "drop") an element whose index is out
        of range is fill_value (see _fill_value)."""
        mode = self._mode(mode, "get")
        key = self.key if isinstance(self.key, tuple) else (self.key,)
        ints = builtins.any(not isinstance(k, slice) and k is not Ellipsis and k is not None for k in key)
        if mode in ("fill", "drop") and ints:
            r, _, ok = _advanced(self.x, self.key, "at", check=False)
            if ok is None:
                return r
            return where(ok, r, _fill_value(np.dtype(self.x.dtype), fill_value))
        if _has_array_index(self.key):
            return _advanced(self.x, self.key, "at")[0]
        return _getitem(self.x, self.key)

    def _read(self, mode):
        """The selected values, for an update in `mode`: an index out of range
        is read clamped (its update is dropped or clamped by the scatter)."""
        return self.get(mode=None if mode is None else "clip")

    def add(self, values, mode=None, **_):
        return self.x + self._scatter("scatter_add", values, mode, "add")

    def multiply(self, values, mode=None, **_):
        return self.x * self._scatter("scatter_mul", values, mode, "multiply")

    mul = multiply

    def divide(self, values, mode=None, **_):
        """x / (the product of the values at each index, in x's dtype), as
        JAX's: true division, so an integer x gives a float result."""
        return true_divide(self.x, self._scatter("scatter_mul", values, mode, "divide"))

    def power(self, values, mode=None, **_):
        return self.set(power(self._read(mode), values), mode)

    def min(self, values, mode=None, **_):
        return minimum(self.x, self._scatter("scatter_min", values, mode, "min"))

    def max(self, values, mode=None, **_):
        return maximum(self.x, self._scatter("scatter_max", values, mode, "max"))

    def set(self, values, mode=None, **_):
        """With indices that repeat, a float array gets the mean of the
        values given for one element and any other dtype the largest (JAX
        leaves which one wins unspecified); the mean keeps it differentiable."""
        x = self.x
        dt = np.dtype(x.dtype)
        if dt.kind == "f":
            s = self._scatter("scatter_add", values, mode, "set")
            hits = self._scatter("scatter_add", ones_like(self._read(mode)), mode, "set")
            return where(hits > 0, s / where(hits > 0, hits, 1), x)
        s = self._scatter("scatter_max", values, mode, "set")
        hit = _AtIndex(x.astype("int32") if dt == np.bool_ else x, self.key)
        hits = hit._scatter("scatter_add", ones_like(hit._read(mode)), mode, "set")
        return where(hits > 0, s, x)

    def apply(self, func, mode=None, **_):
        """func applied at the key once per occurrence of an element, as
        np.ufunc.at and JAX's: twice where an index repeats.  func must be
        elementwise.  A concrete key whose elements are all distinct is
        set(func(get())); otherwise each element's count of occurrences
        bounds a loop over the whole array (Python int bounds for a concrete
        key, so reverse-differentiable; a while_loop for a traced one)."""
        self._mode(mode, "apply")
        x = self.x
        dt = np.dtype(x.dtype)
        top = None
        if not _has_traced_index(self.key):
            c = np.zeros(tuple(x.shape), np.int32)
            try:
                np.add.at(c, self.key, 1)
                top = int(c.max()) if c.size else 0
            except IndexError:   # out of range with an explicit mode: counted by the scatter
                top = None
        if top is not None and top <= 1:
            return self.set(func(self._read(mode)), mode)
        counts = _AtIndex(zeros(tuple(x.shape), "int32"), self.key).add(1, mode)

        def once(k, y):
            return where(counts > k, func(y).astype(dt), y)
        if top is not None and top <= 4:
            y = x
            for k in range(top):
                y = once(k, y)
            return y
        return fori_loop(0, top if top is not None else counts.max(), once, x)


def _has_traced_index(key):
    items = key if isinstance(key, tuple) else (key,)
    return builtins.any(isinstance(k, Tracer) for k in items)


def _at(x):
    """Tracer.at and cjit.Array.at (csrc/py_tracer.c, _array.py forward here)."""
    if not isinstance(x, Tracer):
        if current_trace() is None:
            return _EagerAt(x)
        x = _lift(x)
    return _At(x)


# ---------------------------------------------------------------------------
# x.at[...] on a concrete array: the traced update under an internal jit,
# with the key's arrays as arguments and the rest of it in the cache key

class _EagerAt:
    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x

    def __getitem__(self, key):
        return _EagerAtIndex(self.x, key)


_eager_at_jits = {}


def _key_skeleton(key):
    """(skeleton, arrays): the key's static part (hashable) and its arrays."""
    items = key if isinstance(key, tuple) else (key,)
    skel, arrays = [], []
    for k in items:
        if isinstance(k, (np.ndarray, list)) or (isinstance(k, np.generic) and k.dtype == np.bool_):
            skel.append(("array", len(arrays)))
            arrays.append(np.asarray(k))
        elif isinstance(k, slice):
            skel.append(("slice", k.start, k.stop, k.step))
        elif isinstance(k, np.integer):
            skel.append(("int", int(k)))
        else:
            skel.append(("item", k))
    return (isinstance(key, tuple), tuple(skel)), arrays


def _key_rebuild(skel, arrays):
    is_tuple, parts = skel
    items = []
    for p in parts:
        if p[0] == "array":
            items.append(arrays[p[1]])
        elif p[0] == "slice":
            items.append(slice(p[1], p[2], p[3]))
        else:
            items.append(p[1])
    return tuple(items) if is_tuple else items[0]


class _EagerAtIndex:
    __slots__ = ("x", "key")

    def __init__(self, x, key):
        self.x = x
        self.key = key

    def _run(self, method, values, kwargs):
        skel, arrays = _key_skeleton(self.key)
        kw = tuple(sorted(kwargs.items()))
        jkey = (method, skel, kw, values is None)
        j = _eager_at_jits.get(jkey)
        if j is None:
            def update(x, arrays, values):
                at = _AtIndex(x, _key_rebuild(skel, arrays))
                args = () if values is None else (values,)
                return getattr(at, method)(*args, **dict(kw))
            j = Jitted(update, _internal=True)
            j._name = f"cjit.Array.at[...].{method}"
            if len(_eager_at_jits) > 512:
                _eager_at_jits.clear()
            _eager_at_jits[jkey] = j
        return j(self.x, arrays, values)

    def get(self, **kwargs):
        return self._run("get", None, kwargs)

    def apply(self, func, **kwargs):
        """func is not hashable in general: one trace per call."""
        skel, arrays = _key_skeleton(self.key)
        kw = tuple(sorted(kwargs.items()))
        j = Jitted(lambda x, arrays: _AtIndex(x, _key_rebuild(skel, arrays)).apply(func, **dict(kw)),
                   _internal=True)
        return j(self.x, arrays)


def _eager_update(method):
    def update(self, values, **kwargs):
        return self._run(method, values, kwargs)
    update.__name__ = method
    return update


for _m in ("set", "add", "multiply", "mul", "divide", "power", "min", "max"):
    setattr(_EagerAtIndex, _m, _eager_update(_m))
del _m


# complex arguments: the registry's implementation, or NotImplementedError
# (_complex_dispatch.py; the implementations are registered in _complex_api.py)
complex_aware(globals(), ["take", "take_along_axis"])
