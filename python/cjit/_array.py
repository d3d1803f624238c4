"""cjit.Array: the type of the arrays cjit returns, with JAX's contract.

A cjit.Array is a NumPy ndarray subclass whose memory cjit owns and nobody
writes: results of jitted functions (made in C, csrc/py_exec_out.c), of
cjit.numpy's eager calls and of device_put.  NumPy reads it without a copy
(np.asarray gives a read-only view, DLPack shares the buffer), and the C
fast path takes it as it takes an ndarray, so a cached call costs the same.
What differs from an ndarray is JAX's:

- it is immutable: `x[i] = v` raises TypeError pointing at `x.at[i].set(v)`,
  in-place operators rebind (`x += 1` is `x = x + 1`), and NumPy's writes
  into it (`out=`, `np.copyto`) fail on its read-only flag;
- its operators and methods are cjit.numpy's (float32 stays float32, an
  int32 sum is int32 with x64 off, indexing out of bounds clamps);
- indexing gives new arrays (a slice is a copy, as in JAX), so donating an
  array can never change another one through a shared buffer;
- `.at`, `.block_until_ready()`, `.device`, `.devices()`, `.is_deleted()`;
- `isinstance(v, cjit.Array)` is true for traced values and GPU arrays too.

NumPy's own functions (`np.sin(x)`, `np.concatenate([x, y])`) see plain
ndarrays and return them, as they do with JAX arrays.

This module sits below cjit.numpy: the functions its operators and methods
call are registered by cjit.numpy when it is imported (`register`)."""
from __future__ import annotations

import numpy as np

from . import _cjit
from ._cjit import Tracer

# name -> function, filled by cjit.numpy (register) and by the modules of
# the array-like types that count as cjit.Arrays (register_virtual).
_F = {}
_VIRTUAL = []          # classes whose instances are cjit.Arrays too


class _ArrayMeta(type):
    """isinstance(v, cjit.Array) for traced values and GPU arrays as well
    (the fast path, an exact Array, never reaches __instancecheck__)."""

    def __instancecheck__(cls, v):
        if type.__instancecheck__(cls, v):
            return True
        return cls is Array and any(isinstance(v, c) for c in _VIRTUAL)

    def __subclasscheck__(cls, c):
        if type.__subclasscheck__(cls, c):
            return True
        return cls is Array and any(issubclass(c, v) for v in _VIRTUAL)


def register_virtual(cls):
    """Counts instances of cls (the Tracer, a GPU array) as cjit.Arrays."""
    if cls not in _VIRTUAL:
        _VIRTUAL.append(cls)


def register(functions):
    """Gives the operators and methods their cjit.numpy functions."""
    _F.update(functions)


_IMMUTABLE = ("'cjit.Array' object does not support item assignment. cjit arrays are immutable "
              "(as JAX's). Instead of ``x[idx] = y``, use ``x = x.at[idx].set(y)`` or another "
              ".at[] method (add, multiply, min, max, ...)")

_ARRAYISH = (np.ndarray, np.generic, int, float, complex, bool)


def _operand_ok(v):
    """Whether an operator's other operand is one cjit takes (else Python
    tries the other side, then raises its TypeError)."""
    return isinstance(v, _ARRAYISH) or isinstance(v, Array)


def _binary(name, swap=False):
    def op(self, other):
        if not _operand_ok(other):
            return NotImplemented
        f = _F[name]
        return f(other, self) if swap else f(self, other)
    op.__name__ = f"__{'r' if swap else ''}{name}__"
    op.__doc__ = f"cjit.numpy.{name}"
    return op


def _unary(name):
    def op(self):
        return _F[name](self)
    op.__doc__ = f"cjit.numpy.{name}"
    return op


def _method(name):
    def method(self, *args, **kwargs):
        f = _F.get(name)
        if f is None:
            raise AttributeError(f"cjit.Array.{name} is not implemented yet (cjit.numpy has no "
                                 f"{name})")
        return f(self, *args, **kwargs)
    method.__name__ = name
    method.__doc__ = f"cjit.numpy.{name}(self, ...)"
    return method


def _plain(v):
    """v with every cjit.Array (also in lists and tuples) seen as a plain
    ndarray view: what NumPy's own functions get."""
    t = type(v)
    if t is Array:
        return v.view(np.ndarray)
    if t is list or t is tuple:
        return t(_plain(w) for w in v)
    if isinstance(v, Array) and isinstance(v, np.ndarray):
        return v.view(np.ndarray)
    return v


def wrap(a):
    """A cjit.Array holding ndarray a's values: a itself re-typed when it
    owns its fresh memory (no one else may hold it: callers pass results
    they made), read-only."""
    if type(a) is Array:
        return a
    if isinstance(a, np.generic) or not isinstance(a, np.ndarray):
        a = np.asarray(a)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    r = a.view(Array)
    r.flags.writeable = False
    return r


def as_result(r, args=()):
    """A function's result with its ndarrays and NumPy scalars (also in
    tuples, lists and namedtuples) as cjit.Arrays.  An ndarray that is one of
    the call's arguments or a view of someone's memory is copied first: a
    cjit.Array's buffer is never one its caller can still write."""
    t = type(r)
    if t is Array:
        return r
    if t is np.ndarray:
        if not r.flags.owndata or any(r is a for a in args):
            r = np.array(r)
        return wrap(r)
    if isinstance(r, np.generic):
        return wrap(r)
    if t is tuple or t is list:
        return t(as_result(v, args) for v in r)
    if isinstance(r, tuple) and hasattr(r, "_fields"):      # a namedtuple
        return t(*(as_result(v, args) for v in r))
    return r


def index_axes(ndim, items):
    """The first of x's axes each item of an index indexes (None for None and
    Ellipsis): an integer or integer array takes one axis, a boolean mask as
    many as it has dimensions, Ellipsis the ones no other item takes."""
    def width(k):
        if k is None or k is Ellipsis:
            return 0
        if isinstance(k, (np.ndarray, list)) and np.asarray(k).dtype == np.bool_:
            return max(np.ndim(k), 1)
        return 1
    rest = max(ndim - sum(width(k) for k in items), 0)
    axes, ax = [], 0
    for k in items:
        axes.append(None if k is None or k is Ellipsis else ax)
        ax += rest if k is Ellipsis else width(k)
    return axes


def _normalize_index(shape, key):
    """key with its integers and integer arrays clamped into range the way
    JAX's gather does (a negative index counts from the end first), so that
    NumPy's indexing gives JAX's values; NumPy keeps its IndexError for
    forms JAX rejects too (too many indices, float indices)."""
    items = [np.asarray(k) if isinstance(k, list) else k.view(np.ndarray) if isinstance(k, Array)
             else k for k in (key if isinstance(key, tuple) else (key,))]
    out = []
    for k, axis in zip(items, index_axes(len(shape), items)):
        n = shape[axis] if axis is not None and axis < len(shape) else None
        if n and isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
            k = int(k)
            if not -n <= k < n:
                k = min(max(k + n if k < 0 else k, 0), n - 1)
        elif n and isinstance(k, np.ndarray) and k.dtype.kind in "iu" and k.size:
            if k.min() < -n or k.max() >= n:
                k = np.clip(np.where(k < 0, k + n, k), 0, n - 1)
        out.append(k)
    return tuple(out)


def _has_tracer(key):
    t = Tracer
    if isinstance(key, tuple):
        return any(isinstance(k, t) or (isinstance(k, list) and any(isinstance(j, t) for j in k))
                   for k in key)
    return isinstance(key, t) or (isinstance(key, list) and any(isinstance(j, t) for j in key))


class Array(np.ndarray, metaclass=_ArrayMeta):
    __slots__ = ()
    __array_priority__ = 100.0

    def __new__(cls, *args, **kwargs):
        raise TypeError("cjit.Array is not constructed directly; use cjit.numpy.asarray(x) or "
                        "cjit.device_put(x)")

    # ---- immutability -------------------------------------------------------------

    def __setitem__(self, key, value):
        raise TypeError(_IMMUTABLE)

    def __delitem__(self, key):
        raise TypeError(_IMMUTABLE)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return wrap(np.array(self.view(np.ndarray)))

    def __reduce__(self):
        return (_rebuild, (np.array(self.view(np.ndarray)),))

    # ---- indexing ------------------------------------------------------------------

    def __getitem__(self, key):
        if _has_tracer(key):          # a traced index: this array is a constant of the trace
            return _F["_getitem"](self, key)
        r = np.ndarray.__getitem__(self.view(np.ndarray), _normalize_index(self.shape, key))
        return wrap(np.array(r))      # a copy, as JAX's: no array shares another's buffer

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        for i in range(self.shape[0]):
            yield self[i]

    # ---- JAX's attributes ----------------------------------------------------------

    @property
    def at(self):
        """x.at[idx].set(y), .add, .multiply, .min, .max, .get, ...: a new array."""
        return _F["_at"](self)

    @property
    def T(self):
        return _F["transpose"](self)

    @property
    def mT(self):
        return _F["matrix_transpose"](self)

    @property
    def real(self):
        return _F["real"](self)

    @property
    def imag(self):
        return _F["imag"](self)

    @property
    def device(self):
        return _F["_cpu_device"]

    def devices(self):
        return {_F["_cpu_device"]}

    @property
    def weak_type(self):
        return False

    def block_until_ready(self):
        """Returns the array: cjit's CPU calls finish before they return."""
        return self

    def copy_to_host_async(self):
        """Nothing to do on the CPU (JAX's name)."""

    def is_deleted(self):
        return False

    def delete(self):
        """Ends this array, as JAX's delete(): later uses raise RuntimeError."""
        self.__class__ = DeletedArray

    def unsafe_buffer_pointer(self):
        return self.ctypes.data

    def item(self, *args):
        return np.ndarray.item(self.view(np.ndarray), *args)

    def tolist(self):
        return np.ndarray.tolist(self.view(np.ndarray))

    def flatten(self, order="C"):
        return _F["ravel"](self, order=order)

    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = shape[0]
        return _F["reshape"](self, shape, order=order)

    def transpose(self, *axes):
        if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
            axes = axes[0]
        return _F["transpose"](self, axes or None)

    def view(self, *args, **kwargs):
        return np.ndarray.view(self, *args, **kwargs)

    # ---- NumPy's functions see plain arrays ----------------------------------------

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # a NumPy scalar's operator (np.float32(2) * x) is cjit's, as JAX's
        name = _OPERATOR_UFUNCS.get(ufunc)
        if name is not None and method == "__call__" and not kwargs and all(
                type(v) is Array or isinstance(v, (np.generic, int, float, complex)) for v in inputs):
            return _F[name](*inputs)
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = _plain(out)
        return getattr(ufunc, method)(*_plain(inputs), **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return func(*_plain(args), **{k: _plain(v) for k, v in kwargs.items()})

    def __repr__(self):
        s = np.array_repr(self.view(np.ndarray))
        if "dtype=" not in s:
            s = s[:-1] + f", dtype={self.dtype.name})"
        return "Array" + s[len("array"):]


class DeletedArray(Array):
    """A cjit.Array after delete() or a donation consumed it: its buffer may
    hold another array's values, so every use raises, as JAX's."""
    __slots__ = ()

    def __getattribute__(self, name):
        if name in ("shape", "dtype", "ndim", "size", "is_deleted", "__class__", "__repr__"):
            return object.__getattribute__(self, name)
        raise RuntimeError(_deleted_message(self))

    def is_deleted(self):
        return True

    def __repr__(self):
        return f"Array(<deleted>, shape={self.shape}, dtype={self.dtype.name})"

    def __array_ufunc__(self, *args, **kwargs):
        raise RuntimeError(_deleted_message(self))

    def __array_function__(self, *args, **kwargs):
        raise RuntimeError(_deleted_message(self))

    def __getitem__(self, key):
        raise RuntimeError(_deleted_message(self))


def _deleted_message(a):
    return (f"cjit.Array has been deleted (shape {tuple(a.shape)}, dtype {a.dtype.name}): it was "
            f"donated to a jitted call (donate_argnums) or delete() was called. Use the arrays "
            f"that call returned")


def _rebuild(a):
    return wrap(a)


# Python's operators, as cjit.numpy's functions; the in-place forms rebind
# the name to a new array (JAX arrays have no in-place operators either).
_BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "truediv": "true_divide",
           "floordiv": "floor_divide", "mod": "remainder", "divmod": "divmod", "pow": "power",
           "matmul": "matmul", "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
           "lshift": "left_shift", "rshift": "right_shift"}
for _py, _np_name in _BINARY.items():
    setattr(Array, f"__{_py}__", _binary(_np_name))
    setattr(Array, f"__r{_py}__", _binary(_np_name, swap=True))
    if _py != "divmod":
        setattr(Array, f"__i{_py}__", _binary(_np_name))
for _py, _np_name in {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
                      "eq": "equal", "ne": "not_equal"}.items():
    setattr(Array, f"__{_py}__", _binary(_np_name))
for _py, _np_name in {"neg": "negative", "pos": "positive", "abs": "abs",
                      "invert": "invert"}.items():
    setattr(Array, f"__{_py}__", _unary(_np_name))
Array.__hash__ = None

# The ufuncs behind Python's operators: called by a NumPy scalar's operator
# with a cjit.Array, they run as the array's reflected operator would
_OPERATOR_UFUNCS = {
    np.add: "add", np.subtract: "subtract", np.multiply: "multiply",
    np.true_divide: "true_divide", np.floor_divide: "floor_divide", np.remainder: "remainder",
    np.power: "power", np.matmul: "matmul", np.bitwise_and: "bitwise_and",
    np.bitwise_or: "bitwise_or", np.bitwise_xor: "bitwise_xor", np.left_shift: "left_shift",
    np.right_shift: "right_shift", np.less: "less", np.less_equal: "less_equal",
    np.greater: "greater", np.greater_equal: "greater_equal", np.equal: "equal",
    np.not_equal: "not_equal"}

# Methods that are cjit.numpy's functions on the array (JAX's Array methods)
METHODS = ("sum", "mean", "max", "min", "prod", "argmax", "argmin", "var", "std", "astype",
           "squeeze", "clip", "dot", "all", "any", "cumsum", "cumprod", "ravel", "round",
           "swapaxes", "take", "repeat", "diagonal", "copy", "conj", "conjugate", "sort",
           "argsort", "searchsorted", "nonzero", "ptp", "trace")
for _name in METHODS:
    setattr(Array, _name, _method(_name))
del _py, _np_name, _name

register_virtual(Tracer)

_cjit.register_array_type(Array, DeletedArray)
