"""jit and its companions: the Python side of tracing and caching.

Python decides *what* to trace: it splits static from dynamic arguments,
flattens pytrees, converts leaves to arrays and keys the cache by the
abstract signature (treedef, static values, dtype/shape/weak per leaf).
C (cjit._cjit) records the graph, compiles it and runs it.
"""
from __future__ import annotations

import functools
import inspect
import operator
import os
import sys
import threading
import weakref
from collections import namedtuple

import numpy as np

from . import _cjit
from . import _tree
from ._cjit import Tracer

__all__ = [
    "jit", "Jitted", "Lowered", "Compiled", "MemoryAnalysis", "ShapeDtypeStruct",
    "grad", "value_and_grad", "vjp", "checkpoint", "remat", "checkpoint_name",
    "checkpoint_policies", "saved_residuals", "clear_caches", "cache_info", "set_cache_limits",
    "memory_stats", "reset_peak_memory_stats", "devices", "device_put", "Device", "Array",
]

# ---------------------------------------------------------------------------
# dtypes

_SUPPORTED_DTYPES = tuple(np.dtype(n) for n in ("bool", "int32", "int64", "float32", "float64"))
_SUPPORTED = frozenset(_SUPPORTED_DTYPES)
_BOOL, _I32, _I64, _F32, _F64 = _SUPPORTED_DTYPES
_SUPPORTED_NAMES = "bool, int32, int64, float32, float64"
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def canonical_dtype(dtype, what="dtype"):
    """np.dtype for a supported dtype given as a dtype, type or string;
    TypeError for anything else."""
    if isinstance(dtype, np.dtype) and dtype in _SUPPORTED:
        return dtype
    prefix = "" if what.startswith("cjit") else "cjit: "
    try:
        dt = np.dtype(dtype)
    except Exception:
        raise TypeError(f"{prefix}{what} {dtype!r} is not a dtype; supported dtypes are "
                        f"{_SUPPORTED_NAMES}") from None
    if dt not in _SUPPORTED:
        native = dt.newbyteorder("=") if dt.byteorder not in ("=", "|") else dt
        if native in _SUPPORTED:
            return native
        raise TypeError(f"{prefix}{what} {dt} is not supported; supported dtypes are "
                        f"{_SUPPORTED_NAMES}")
    return dt


def _aval_str(aval):
    dt, shape, weak = aval
    s = f"{dt.name}[{','.join(str(d) for d in shape)}]"
    return s + " (weak)" if weak else s


# ---------------------------------------------------------------------------
# the trace in progress on this thread

_tls = threading.local()


def current_trace():
    """The innermost trace in progress on this thread, or None."""
    stack = getattr(_tls, "stack", None)
    return stack[-1] if stack else None


def _push_trace(trace):
    stack = getattr(_tls, "stack", None)
    if stack is None:
        stack = _tls.stack = []
    stack.append(trace)
    _cjit._trace_depth(1)   # the C fast path stands aside while any trace runs


def _pop_trace():
    _tls.stack.pop()
    _cjit._trace_depth(-1)


_FALSE = frozenset(("", "0", "false", "False", "no", "off"))
_FALSE_B = frozenset(v.encode() for v in _FALSE)
# os.environ.get costs a raised-and-caught KeyError per missing variable
# (about 1 us); the flags are read on every call, so on CPython the mapping's
# encoded dict is read directly (it is what os.environ itself reads).
_env_data = getattr(os.environ, "_data", None)
_env_encode = getattr(os.environ, "encodekey", None)
if not isinstance(_env_data, dict) or _env_encode is None:
    _env_data = None


def _env_flag(name):
    if _env_data is not None:
        v = _env_data.get(_env_encode(name))
        return v is not None and v not in _FALSE_B
    return os.environ.get(name, "0") not in _FALSE


_K_DISABLE_JIT = "CJIT_DISABLE_JIT"


# ---------------------------------------------------------------------------
# leaf conversion

class _LeafError(Exception):
    """A leaf could not be converted; the caller names the argument."""

    def __init__(self, index, exc_type, message):
        super().__init__(message)
        self.index = index
        self.exc_type = exc_type
        self.message = message  # contains '{arg}' where the argument's name goes


class _Inline(Exception):
    """A leaf is a Tracer: the call must be inlined into the current trace."""


def _convert_leaf_slow(i, x, allow_sds=False):
    """Returns (array, aval) for a leaf the fast loop did not handle."""
    if isinstance(x, Tracer):
        raise _Inline()
    if allow_sds and isinstance(x, ShapeDtypeStruct):
        return None, (x.dtype, x.shape, False)
    if isinstance(x, np.ndarray):
        dt = x.dtype
        if dt not in _SUPPORTED:
            try:
                dt = canonical_dtype(dt)
            except TypeError:
                raise _LeafError(i, TypeError,
                                 f"cjit: argument {{arg}} is an array of dtype {x.dtype}, which "
                                 f"cjit does not support (supported: {_SUPPORTED_NAMES})") from None
        a = np.ascontiguousarray(x, dtype=dt).reshape(x.shape)   # ascontiguousarray makes 0-d 1-d
        if type(a) is not np.ndarray or not a.flags.aligned:
            a = np.array(a, dtype=dt, copy=True, subok=False)
        return a, (dt, a.shape, False)
    if isinstance(x, np.generic):
        dt = x.dtype
        if dt not in _SUPPORTED:
            raise _LeafError(i, TypeError,
                             f"cjit: argument {{arg}} is a NumPy scalar of dtype {dt}, which cjit "
                             f"does not support (supported: {_SUPPORTED_NAMES})")
        return np.asarray(x), (dt, (), False)
    if isinstance(x, bool):
        return np.asarray(bool(x)), (_BOOL, (), True)
    if isinstance(x, int):
        if not _INT64_MIN <= x <= _INT64_MAX:
            raise _LeafError(i, OverflowError,
                             f"cjit: argument {{arg}} = {int(x)} does not fit in int64")
        return np.asarray(int(x), dtype=_I64), (_I64, (), True)
    if isinstance(x, float):
        return np.asarray(float(x), dtype=_F64), (_F64, (), True)
    if isinstance(x, Array):
        # A GPU array given to a CPU function: copied to the host.
        return np.asarray(x), (x.dtype, x.shape, False)
    if isinstance(x, ShapeDtypeStruct):
        raise _LeafError(i, TypeError, "cjit: argument {arg} is a ShapeDtypeStruct; those are only "
                         "accepted by Jitted.lower(), not when calling")
    if _is_dataclass_instance(x):
        raise _LeafError(i, TypeError, f"cjit: argument {{arg}} is a dataclass "
                         f"({type(x).__name__}); cjit does not look inside dataclasses (JAX "
                         f"neither, unless one is registered as a pytree): pass its fields as a "
                         f"tuple, dict or namedtuple, or mark the argument static")
    raise _LeafError(i, TypeError,
                     f"cjit: argument {{arg}} has type {type(x).__name__}; cjit accepts NumPy "
                     f"arrays and scalars, Python bool/int/float and None, nested in tuples, "
                     f"lists, dicts, OrderedDicts and namedtuples")


def _is_dataclass_instance(x):
    return hasattr(type(x), "__dataclass_fields__")


_WEAK_BOOL = (_BOOL, (), True)
_WEAK_INT = (_I64, (), True)
_WEAK_FLOAT = (_F64, (), True)


def _convert_leaves(leaves):
    """Returns (arrays, avals).  Raises _LeafError or _Inline."""
    arrays = []
    avals = []
    for i, x in enumerate(leaves):
        t = type(x)
        if t is np.ndarray:
            dt = x.dtype
            if dt in _SUPPORTED:
                if not x.flags.c_contiguous:
                    x = np.ascontiguousarray(x)
                if not x.flags.aligned:     # contiguous but unaligned (a byte buffer's view)
                    x = x.copy()
                arrays.append(x)
                avals.append((dt, x.shape, False))
                continue
        elif t is float:
            arrays.append(np.asarray(x, dtype=_F64))
            avals.append(_WEAK_FLOAT)
            continue
        elif t is int:
            if _INT64_MIN <= x <= _INT64_MAX:
                arrays.append(np.asarray(x, dtype=_I64))
                avals.append(_WEAK_INT)
                continue
        elif t is bool:
            arrays.append(np.asarray(x, dtype=_BOOL))
            avals.append(_WEAK_BOOL)
            continue
        a, aval = _convert_leaf_slow(i, x)
        arrays.append(a)
        avals.append(aval)
    return arrays, avals


def _abstract_leaves(leaves):
    """Avals only (for lower): arrays, scalars or ShapeDtypeStruct."""
    avals = []
    for i, x in enumerate(leaves):
        _, aval = _convert_leaf_slow(i, x, allow_sds=True)
        avals.append(aval)
    return avals


def _tracer_desc(t):
    return f"{t.dtype.name}[{','.join(str(d) for d in t.shape)}]"


def user_location():
    """'file:line' of the innermost frame outside the cjit package."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_PKG_DIR):
            return f"{fn}:{f.f_lineno}"
        f = f.f_back
    return "?"


_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _output_tracer(trace, x, describe):
    """A Tracer for one output leaf of a traced function."""
    if isinstance(x, Tracer):
        if x.trace is not trace:
            if x.trace.finished:
                raise _cjit.TracerLeakError(
                    f"cjit: output {describe()} is a {_tracer_desc(x)} traced value of a trace "
                    f"that already ended (a leaked tracer, kept from an earlier trace in a "
                    f"global, closure or attribute); return values computed from this call's "
                    f"arguments instead")
            raise TypeError(f"cjit: output {describe()} is a {_tracer_desc(x)} traced value of "
                            f"another trace that is still running")
        return x
    if isinstance(x, np.ndarray):
        dt = canonical_dtype(x.dtype, f"the dtype of output {describe()},")
        return trace.array(np.ascontiguousarray(x, dtype=dt).reshape(x.shape))
    if isinstance(x, np.generic):
        dt = canonical_dtype(x.dtype, f"the dtype of output {describe()},")
        return trace.apply("constant", value=x.item(), dtype=dt.name, shape=(), weak=False)
    if isinstance(x, bool):
        return trace.apply("constant", value=bool(x), dtype="bool", shape=(), weak=True)
    if isinstance(x, int):
        if not _INT64_MIN <= x <= _INT64_MAX:
            raise OverflowError(f"cjit: output {describe()} = {x} does not fit in int64")
        return trace.apply("constant", value=int(x), dtype="int64", shape=(), weak=True)
    if isinstance(x, float):
        return trace.apply("constant", value=float(x), dtype="float64", shape=(), weak=True)
    if _is_dataclass_instance(x):
        raise TypeError(f"cjit: output {describe()} is a dataclass ({type(x).__name__}); cjit "
                        f"does not look inside dataclasses: return its fields as a tuple, dict "
                        f"or namedtuple")
    raise TypeError(f"cjit: output {describe()} has type {type(x).__name__}; a jitted function "
                    f"must return arrays or scalars nested in tuples, lists, dicts, "
                    f"OrderedDicts and namedtuples (or None)")


# ---------------------------------------------------------------------------
# static / dynamic argument split

def _argnums(nums, what):
    """static_argnums / donate_argnums as a tuple of ints; TypeError naming
    the option for anything else (a float, a string, ...)."""
    if nums is None:
        return ()
    if isinstance(nums, int) and not isinstance(nums, bool):
        return (nums,)
    if isinstance(nums, (str, bytes)):
        nums = (nums,)
    try:
        nums = tuple(nums)
    except TypeError:
        raise TypeError(f"cjit.jit: {what} must be an int or a sequence of ints, got "
                        f"{nums!r} of type {type(nums).__name__}") from None
    for n in nums:
        if not isinstance(n, int) or isinstance(n, bool):
            raise TypeError(f"cjit.jit: {what} must be ints, got {n!r} of type "
                            f"{type(n).__name__} in {nums!r}")
    return nums


class _ArgSpec:
    """How one function's arguments split into static and dynamic ones."""

    def __init__(self, fun, static_argnums, static_argnames):
        static_argnums = _argnums(static_argnums, "static_argnums")
        if static_argnames is None:
            static_argnames = ()
        elif isinstance(static_argnames, str):
            static_argnames = (static_argnames,)
        try:
            static_argnames = tuple(static_argnames)
        except TypeError:
            raise TypeError(f"cjit.jit: static_argnames must be a string or a sequence of "
                            f"strings, got {static_argnames!r}") from None
        for n in static_argnames:
            if not isinstance(n, str):
                raise TypeError(f"cjit.jit: static_argnames must be strings, got {n!r}")

        try:
            sig = inspect.signature(fun)
        except (TypeError, ValueError):
            sig = None
        self.has_signature = sig is not None
        self.positional_names = []     # names of parameters that can be given by position
        self.varargs_name = None
        self.keyword_names = set()     # names that can be given by keyword
        has_varkw = False
        if sig is not None:
            for p in sig.parameters.values():
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                    self.positional_names.append(p.name)
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                    self.keyword_names.add(p.name)
                if p.kind == p.VAR_POSITIONAL:
                    self.varargs_name = p.name
                if p.kind == p.VAR_KEYWORD:
                    has_varkw = True
            # As in JAX: names and positions given on one side are mapped
            # to the other through the signature, when only one is given.
            if static_argnums and not static_argnames:
                names = []
                for n in static_argnums:
                    if 0 <= n < len(self.positional_names):
                        name = self.positional_names[n]
                        if name in self.keyword_names:
                            names.append(name)
                static_argnames = tuple(names)
            elif static_argnames and not static_argnums:
                nums = []
                for name in static_argnames:
                    if name in self.positional_names and name in self.keyword_names:
                        nums.append(self.positional_names.index(name))
                static_argnums = tuple(nums)
            if not has_varkw:
                for name in static_argnames:
                    if name not in self.keyword_names:
                        raise ValueError(f"cjit.jit: static_argnames names {name!r}, which is "
                                         f"not a keyword parameter of {_fun_name(fun)}")
            self.check_argnums(static_argnums, "static_argnums", fun)
        self.static_argnums = tuple(sorted(set(static_argnums)))
        self.static_argnames = frozenset(static_argnames)
        self.has_statics = bool(self.static_argnums or self.static_argnames)

    def check_argnums(self, nums, what, fun):
        """ValueError for a position that no call can fill: past the
        positional parameters of a function without *args (negative numbers
        count from the end, as in JAX)."""
        if self.varargs_name is not None or not self.has_signature:
            return
        n = len(self.positional_names)
        for i in nums:
            if not -n <= i < n:
                raise ValueError(f"cjit.jit: {what} contains {i}, but {_fun_name(fun)} has "
                                 f"{n} positional parameter{'' if n == 1 else 's'}"
                                 f"{' (' + ', '.join(self.positional_names) + ')' if n else ''}")

    def normalized(self, i):
        """Position i as a non-negative index when the signature fixes it."""
        if i < 0 and self.varargs_name is None and self.has_signature:
            return i + len(self.positional_names)
        return i

    def positional_name(self, pos):
        if pos < len(self.positional_names):
            return self.positional_names[pos]
        if self.varargs_name is not None:
            return f"{self.varargs_name}[{pos - len(self.positional_names)}]"
        return f"args[{pos}]"

    def static_positions(self, nargs):
        out = set()
        for n in self.static_argnums:
            p = n + nargs if n < 0 else n
            if 0 <= p < nargs:
                out.add(p)
        return out

    def split(self, args, kwargs):
        """Returns (dyn_args, dyn_kwargs, statics, call).

        statics is the hashable cache-key part: (name, type, value) per static
        argument, sorted, where name is the parameter's name when it has one
        (so f(x, 3) and f(x, n=3) share an entry) and its position otherwise.
        call = (dyn_positions, static_pos, static_kw) rebuilds the call:
        dyn_positions maps dynamic positional index -> original position (None
        when no positional argument is static)."""
        if not self.has_statics:
            return args, kwargs, (), _NO_STATICS
        spos = self.static_positions(len(args))
        statics = []
        static_pos = []
        static_kw = {}
        if spos:
            dyn = []
            dyn_positions = []
            names = self.positional_names
            for i, a in enumerate(args):
                if i in spos:
                    static_pos.append((i, a))
                    name = names[i] if i < len(names) and names[i] in self.keyword_names else i
                    statics.append((name, type(a), _static_key(a)))
                else:
                    dyn.append(a)
                    dyn_positions.append(i)
            dyn_args = tuple(dyn)
        else:
            dyn_args = args
            dyn_positions = None
        if kwargs and self.static_argnames:
            dyn_kwargs = {}
            for k, v in kwargs.items():
                if k in self.static_argnames:
                    static_kw[k] = v
                    statics.append((k, type(v), _static_key(v)))
                else:
                    dyn_kwargs[k] = v
        else:
            dyn_kwargs = kwargs
        statics.sort(key=lambda s: str(s[0]))
        statics = tuple(statics)
        try:
            hash(statics)
        except TypeError:
            for where, _, v in statics:
                name = self.static_name(where)
                part = _unhashable_part(v, name)
                if part is not None:
                    path, bad = part
                    fix = {"list": "a tuple instead of the list", "dict":
                           "a tuple of (key, value) pairs instead of the dict", "set":
                           "a frozenset instead of the set"}.get(
                               type(bad).__name__, "a hashable value (a tuple, a number, ...)")
                    raise TypeError(
                        f"cjit: static argument {name!r} must be hashable (static values key "
                        f"the compile cache), but {path} is of type {type(bad).__name__}, "
                        f"which is not; pass {fix}, or make the argument dynamic") from None
            raise
        return dyn_args, dyn_kwargs, statics, (dyn_positions, tuple(static_pos), static_kw)

    @staticmethod
    def merge(dyn_args, dyn_kwargs, call):
        """Rebuilds (args, kwargs) for calling the function."""
        _, static_pos, static_kw = call
        kw = dict(dyn_kwargs)
        kw.update(static_kw)
        if not static_pos:
            return tuple(dyn_args), kw
        pos = dict(static_pos)
        args = []
        it = iter(dyn_args)
        for i in range(len(dyn_args) + len(pos)):
            args.append(pos[i] if i in pos else next(it))
        return tuple(args), kw

    def leaf_name(self, treedef, index, dyn_positions):
        """The Python-syntax name of dynamic leaf `index` of (args, kwargs)."""
        path = _tree.leaf_keypaths(treedef)[index]
        if not path:
            return "?"
        (_, top), rest = path[0], path[1:]
        if top == 0:   # positional
            j = rest[0][1]
            pos = dyn_positions[j] if dyn_positions is not None else j
            return _tree.format_keypath(rest[1:], self.positional_name(pos))
        return _tree.format_keypath(rest[1:], str(rest[0][1]))

    def static_name(self, where):
        return self.positional_name(where) if isinstance(where, int) else where


_NO_STATICS = (None, (), {})


class _FloatKey:
    """A static float in the cache key, compared by value bits: nan finds its
    entry (nan != nan), and -0.0 gets its own (-0.0 == 0.0, but 1/x and
    copysign tell them apart).  repr is the float's, for messages."""

    __slots__ = ("value", "_bits")

    def __init__(self, value):
        self.value = value
        f = float(value)
        self._bits = (type(value), "nan" if f != f else f.hex())

    def __eq__(self, other):
        return type(other) is _FloatKey and self._bits == other._bits

    def __hash__(self):
        return hash(self._bits)

    def __repr__(self):
        return repr(self.value)


def _static_key(v):
    """v as it goes into the cache key: floats (also inside tuples) by bits."""
    t = type(v)
    if t is float or isinstance(v, (float, np.floating)):
        return _FloatKey(v)
    if t is tuple:
        return tuple([_static_key(x) for x in v])
    return v


def _unhashable_part(v, path):
    """(path, value) of the first unhashable value in v (v itself, or an
    item of a tuple/frozenset in it), or None when v is hashable."""
    try:
        hash(v)
        return None
    except TypeError:
        pass
    if isinstance(v, tuple):
        fields = getattr(type(v), "_fields", None)
        for i, x in enumerate(v):
            sub = f"{path}.{fields[i]}" if fields else f"{path}[{i}]"
            part = _unhashable_part(x, sub)
            if part is not None:
                return part
    return path, v


def _fun_name(fun):
    return getattr(fun, "__name__", None) or getattr(fun, "__qualname__", None) or repr(fun)


# ---------------------------------------------------------------------------
# process-wide bookkeeping

_all_jitted = weakref.WeakSet()
_stats_lock = threading.Lock()
_stats = {"hits": 0, "misses": 0, "compiles": 0}


def _count(name, n=1):
    with _stats_lock:
        _stats[name] += n


def _check_device(device, who):
    """The Device that `device` names (None: the CPU).  ValueError for a
    name cjit does not know; RuntimeError, saying why, for a GPU that this
    machine lacks."""
    if device is None:
        return _CPU
    if isinstance(device, Device):
        if device.platform == "cpu":
            return device
        d = f"cuda:{device.id}"
    elif isinstance(device, str):
        d = device.lower()
    else:
        d = None
    if d in ("cpu", "cpu:0"):
        return _CPU
    if d is not None and (d in ("cuda", "gpu") or d.startswith(("cuda:", "gpu:"))):
        ordinal = d.partition(":")[2] or "0"
        if ordinal.isdigit():
            n, why = _cjit.cuda_status()
            if n == 0:
                raise RuntimeError(f"cjit: no CUDA device: {why} ({who}(device={device!r}))")
            if int(ordinal) >= n:
                raise RuntimeError(f"cjit: no CUDA device {d}: this machine has {n} "
                                   f"({who}(device={device!r}))")
            return Device("cuda", int(ordinal))
    raise ValueError(f"cjit: unknown device {device!r}; known devices: 'cpu', 'cuda', 'cuda:N'")


# ---------------------------------------------------------------------------
# jit

def jit(fun=None, *, static_argnums=None, static_argnames=None, donate_argnums=None, device=None):
    """Compiles `fun` for the abstract signature of its arguments.

    Usable bare (`@jit`) or with options (`@jit(static_argnums=1)`).  Returns
    a `Jitted`: calling it traces `fun` on a cache miss, compiles the graph
    and runs it; later calls with the same shapes, dtypes and static values
    run the cached code.
    """
    dev = _check_device(device, "jit")
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames, donate_argnums=donate_argnums,
                                 device=device)
    if not callable(fun):
        raise TypeError(f"cjit.jit: expected a callable, got {type(fun).__name__}")
    cls = Jitted if dev.platform == "cpu" else _CudaJitted
    return cls(fun, static_argnums=static_argnums, static_argnames=static_argnames,
               donate_argnums=donate_argnums, device=dev)


class _Entry:
    __slots__ = ("exe", "out_treedef")

    def __init__(self, exe, out_treedef):
        self.exe = exe
        self.out_treedef = out_treedef


# ---------------------------------------------------------------------------
# cache limits: one LRU over the entries of every Jitted (and eager op)

_cache_limits = {"max_entries": 4096, "max_code_bytes": 512 << 20}
_lru_lock = threading.Lock()
_lru = {}              # (id(jitted), key) -> [weakref(jitted), key, code_bytes, hits seen]
_lru_bytes = [0]


def set_cache_limits(max_entries=None, max_code_bytes=None):
    """Bounds the process-wide compile cache; returns the previous limits.

    `max_entries` (default 4096) caps the executables kept over every
    jitted function and eager op together, `max_code_bytes` (default
    512 MiB) the memory they hold (`cache_info()["code_bytes"]`).  When a new
    executable would pass either bound, the least recently used ones are
    evicted: dropped from their function's cache, and their machine code is
    freed as soon as no call is running them.  A later call with an evicted
    signature compiles again.  Arguments left as None keep their value;
    0 means no cached executable survives its next neighbour's compile."""
    with _lru_lock:
        old = dict(_cache_limits)
        for name, v in (("max_entries", max_entries), ("max_code_bytes", max_code_bytes)):
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"cjit.set_cache_limits: {name} must be an int >= 0, got {v!r}")
            _cache_limits[name] = v
        _lru_evict(None)
    return old


def _jit_hits(j):
    return j._hits + getattr(j, "_fast_hits", 0)


def _lru_evict(keep):
    """Evicts least recently used entries (never `keep`) until the limits
    hold.  Called with _lru_lock held; touches no Jitted lock.  A Jitted
    whose C fast path served hits since its entries were last looked at
    gets a second chance (those hits never reach Python)."""
    max_n, max_b = _cache_limits["max_entries"], _cache_limits["max_code_bytes"]
    second_chance = len(_lru)
    while _lru and (len(_lru) > max_n or _lru_bytes[0] > max_b):
        rk = next(iter(_lru))
        if rk == keep:
            if len(_lru) == 1:
                break
            _lru[rk] = _lru.pop(rk)
            continue
        rec = _lru.pop(rk)
        j = rec[0]()
        if j is not None and second_chance > 0 and _jit_hits(j) != rec[3]:
            second_chance -= 1
            rec[3] = _jit_hits(j)
            _lru[rk] = rec
            continue
        _lru_bytes[0] -= rec[2]
        if j is not None and dict.pop(j._cache, rec[1], None) is not None:
            fast_clear = getattr(j, "_fast_clear", None)
            if fast_clear is not None:
                fast_clear()      # the C table must not keep the evicted code


class _CacheDict(dict):
    """One Jitted's cache: a dict whose insertions, lookups and clear()
    keep the process-wide LRU (set_cache_limits) up to date."""

    __slots__ = ("_owner",)

    def __init__(self, owner):
        super().__init__()
        self._owner = weakref.ref(owner)

    def __setitem__(self, key, entry):
        dict.__setitem__(self, key, entry)
        owner = self._owner()
        try:
            nbytes = int(entry.exe.code_bytes)
        except Exception:
            nbytes = 0
        rk = (id(owner), key)
        with _lru_lock:
            old = _lru.pop(rk, None)
            if old is not None:
                _lru_bytes[0] -= old[2]
            _lru[rk] = [self._owner, key, nbytes, _jit_hits(owner) if owner else 0]
            _lru_bytes[0] += nbytes
            _lru_evict(rk)

    def get(self, key, default=None):
        entry = dict.get(self, key, default)
        if entry is not default:
            rk = (id(self._owner()), key)
            with _lru_lock:
                rec = _lru.pop(rk, None)
                if rec is not None:
                    _lru[rk] = rec
        return entry

    def clear(self):
        owner_id = id(self._owner())
        with _lru_lock:
            for k in list(self.keys()):
                rec = _lru.pop((owner_id, k), None)
                if rec is not None:
                    _lru_bytes[0] -= rec[2]
        dict.clear(self)


def _out_kind(out_treedef):
    """How the C fast path returns the output list: (kind, rebuild), see
    JitBase._fast_put."""
    node = out_treedef._node
    if isinstance(node, int):
        if node == _tree._LEAF:
            return 0, None
    elif node[0] in (_tree._TUPLE, _tree._LIST) and \
            all(isinstance(k, int) and k == _tree._LEAF for k in node[1]):
        return (1 if node[0] == _tree._TUPLE else 2), None
    return 3, functools.partial(_tree.unflatten, out_treedef)


class Jitted(_cjit.JitBase):
    """A function compiled per abstract signature; see `cjit.jit`.

    Calls go first to the C fast path (JitBase, csrc/py_jit.c): for
    arguments of the common kinds and no static arguments, a cache hit runs
    without Python code.  Everything else comes to `_call_slow`."""

    def __init__(self, fun, *, static_argnums=None, static_argnames=None, donate_argnums=None,
                 device=None, _internal=False):
        self._fun = fun
        self._spec = spec = _ArgSpec(fun, static_argnums, static_argnames)
        self._donate_argnums = _argnums(donate_argnums, "donate_argnums")
        spec.check_argnums(self._donate_argnums, "donate_argnums", fun)
        both = sorted({spec.normalized(i) for i in self._donate_argnums}
                      & {spec.normalized(i) for i in spec.static_argnums})
        if both:
            raise ValueError(f"cjit.jit: argument {spec.positional_name(both[0])!r} "
                             f"(position {both[0]}) of {_fun_name(fun)} is in both "
                             f"static_argnums and donate_argnums; a static argument is part of "
                             f"the cache key, not a buffer, so it cannot be donated")
        self._options = dict(static_argnums=static_argnums, static_argnames=static_argnames,
                             donate_argnums=donate_argnums, device=device, _internal=_internal)
        self._device = device
        self._internal = _internal    # eager-op jits ignore CJIT_DISABLE_JIT
        self._fast_configure(not self._spec.has_statics, _internal)
        self._cache = _CacheDict(self)   # bounded: see set_cache_limits
        self._lock = threading.RLock()
        self._hits = 0
        self._misses = 0
        self._last_key = None
        self._name = _fun_name(fun)
        functools.update_wrapper(self, fun, updated=())
        _all_jitted.add(self)

    def __repr__(self):
        return f"<cjit.Jitted {self._name}>"

    def __copy__(self):
        """A new jitted function of the same Python function and options,
        with a cache of its own (its first call compiles)."""
        return type(self)(self._fun, **self._options)

    def __deepcopy__(self, memo):
        # The Python function is shared, as copy.deepcopy shares functions.
        return self.__copy__()

    def __get__(self, obj, objtype=None):
        # Decorating a method: bind `self` as the first (dynamic) argument.
        if obj is None:
            return self
        return functools.partial(self, obj)

    @property
    def static_argnums(self):
        return self._spec.static_argnums

    @property
    def static_argnames(self):
        return tuple(sorted(self._spec.static_argnames))

    @property
    def donate_argnums(self):
        return self._donate_argnums

    def _call_slow(self, _fkey, /, *args, **kwargs):
        """A call the C fast path did not serve.  _fkey: the signature
        bytes of the arguments when the fast path could serve the next call
        like this one (then the entry is handed to it), else None."""
        if current_trace() is not None:
            # jit inside jit (or a jitted function called while tracing):
            # trace the body into the enclosing graph.
            return self._fun(*args, **kwargs)
        if not self._internal and _env_flag(_K_DISABLE_JIT):
            return self._fun(*args, **kwargs)
        spec = self._spec
        dyn_args, dyn_kwargs, statics, call = spec.split(args, kwargs)
        leaves, node = _tree.flatten_args(dyn_args, dyn_kwargs)
        try:
            arrays, avals = _convert_leaves(leaves)
        except _Inline:
            # A Tracer with no trace in progress here: a leaked one (or
            # another thread's).  Calling the function reports it.
            return self._fun(*args, **kwargs)
        except _LeafError as e:
            raise e.exc_type(e.message.format(arg=self._arg_desc(
                spec.leaf_name(_tree.treedef_of(node), e.index, call[0])))) from None
        key = (node, statics, tuple(avals))
        entry = self._cache.get(key)
        if entry is None:
            with self._lock:
                entry = self._cache.get(key)
                if entry is None:
                    entry = self._compile(key, call, avals)
                else:
                    self._hits += 1
                    _stats["hits"] += 1
        else:
            # Unlocked: under the GIL a lost update needs a thread switch
            # inside `+=`, and these counters are statistics.
            self._hits += 1
            _stats["hits"] += 1
        if _fkey is not None and type(entry.exe) is _cjit.Executable:
            self._fast_put(_fkey, entry.exe, *_out_kind(entry.out_treedef))
        return _tree.unflatten(entry.out_treedef, entry.exe(arrays))

    # -- the slow path ------------------------------------------------------

    def _arg_desc(self, name):
        return f"'{name}' of {self._name}"

    def _trace(self, treedef, call, avals):
        """Traces the function on abstract arguments; returns (C Lowered,
        output treedef, [(shape, dtype)] per output leaf)."""
        trace = _cjit.Trace()
        _push_trace(trace)
        try:
            params = [trace.param(shape, dt.name, weak) for dt, shape, weak in avals]
            dyn_args, dyn_kwargs = _tree.unflatten(treedef, params)
            args, kwargs = _ArgSpec.merge(dyn_args, dyn_kwargs, call)
            result = self._fun(*args, **kwargs)
            out_leaves, out_treedef = _tree.flatten(result)

            def describe_at(i):
                return lambda: repr(_tree.format_keypath(_tree.leaf_keypaths(out_treedef)[i],
                                                         "result"))

            outs = [_output_tracer(trace, x, describe_at(i)) for i, x in enumerate(out_leaves)]
            out_avals = [(tuple(t.shape), t.dtype) for t in outs]
            lowered = trace.finish(outs)
        except BaseException:
            # finish() may itself have raised after ending the trace; either
            # way the trace must end and the original error must surface.
            try:
                trace.finish_error()
            except Exception:
                pass
            _budget_requests.pop(id(trace), None)
            raise
        finally:
            _pop_trace()
        budget = _budget_requests.pop(id(trace), None)
        if budget is not None and getattr(_remat_tls, "force", None) is None:
            return _fit_memory_budget(self, treedef, call, avals, budget, lowered, out_treedef, out_avals)
        return lowered, out_treedef, out_avals

    def _compile(self, key, call, avals):
        """Traces, compiles and caches one entry (the caller holds the lock).
        The cache is only touched once everything succeeded."""
        self._misses += 1
        _count("misses")
        if _env_flag("CJIT_LOG_COMPILES"):
            reason = self._miss_reason(key, call[0])
            print(f"cjit: compiling {self._name}: {reason}", file=sys.stderr, flush=True)
        treedef = _tree.treedef_of(key[0])
        lowered, out_treedef, _ = self._trace(treedef, call, avals)
        exe = self._executable(lowered, self._donated_leaves(treedef, call[0]))
        _count("compiles")
        entry = _Entry(exe, out_treedef)
        self._cache[key] = entry
        self._last_key = key
        return entry

    def _executable(self, lowered, donate=()):
        """Compiles a C Lowered for this function's device (the CPU here;
        _CudaJitted overrides it).  `donate`: parameter slots (flat leaf
        indices) whose buffers the memory plan may reuse."""
        return lowered.compile(donate=donate) if donate else lowered.compile()

    def _donated_leaves(self, treedef, dyn_positions):
        """Flat leaf indices of the arguments in donate_argnums."""
        if not self._donate_argnums:
            return ()
        donate = set(self._donate_argnums)
        out = []
        for i, path in enumerate(_tree.leaf_keypaths(treedef)):
            if not path or path[0][1] != 0 or len(path) < 2:
                continue   # keyword arguments are not donated (as in JAX)
            j = path[1][1]
            pos = dyn_positions[j] if dyn_positions is not None else j
            if pos in donate:
                out.append(i)
        return tuple(out)

    def _miss_reason(self, key, dyn_positions):
        last = self._last_key
        if last is None:
            return "first call" if not self._cache else "cache miss"
        node, statics, avals = key
        onode, ostatics, oavals = last
        spec = self._spec
        if node != onode:
            return (f"argument structure changed: {_tree.treedef_of(onode)} -> "
                    f"{_tree.treedef_of(node)}")
        if statics != ostatics:
            old = {w: v for w, _, v in ostatics}
            new = {w: v for w, _, v in statics}
            for w in sorted(set(old) | set(new), key=str):
                if w not in old or w not in new or old[w] != new[w] or \
                        type(old[w]) is not type(new[w]):
                    o = repr(old[w]) if w in old else "(not given)"
                    n = repr(new[w]) if w in new else "(not given)"
                    return f"static argument {spec.static_name(w)!r} changed: {o} -> {n}"
            return "static arguments changed"
        for i, (a, b) in enumerate(zip(oavals, avals)):
            if a != b:
                name = spec.leaf_name(_tree.treedef_of(node), i, dyn_positions)
                return f"argument '{name}' changed: {_aval_str(a)} -> {_aval_str(b)}"
        return "cache miss"

    # -- introspection -------------------------------------------------------

    def lower(self, *args, **kwargs):
        """Traces only.  Arguments may be arrays, scalars or ShapeDtypeStruct."""
        spec = self._spec
        dyn_args, dyn_kwargs, statics, call = spec.split(args, kwargs)
        leaves, treedef = _tree.flatten((dyn_args, dyn_kwargs))
        try:
            avals = _abstract_leaves(leaves)
        except _Inline:
            raise TypeError("cjit: Jitted.lower() was given a traced value; call it outside "
                            "jit") from None
        except _LeafError as e:
            raise e.exc_type(e.message.format(
                arg=self._arg_desc(spec.leaf_name(treedef, e.index, call[0])))) from None
        lowered, out_treedef, out_avals = self._trace(treedef, call, avals)
        return Lowered(lowered, self, treedef, statics, tuple(avals), call[0], out_treedef,
                       out_avals)

    def eval_shape(self, *args, **kwargs):
        """ShapeDtypeStructs of the outputs (traces, compiles nothing)."""
        low = self.lower(*args, **kwargs)
        return low.out_info

    def cache_info(self):
        return {"hits": self._hits + self._fast_hits, "misses": self._misses,
                "entries": len(self._cache)}

    def clear_cache(self):
        """Drops this function's cached executables.  Their machine code is
        freed when the last reference goes: at once, unless a call is
        running one (that call holds it and finishes normally) or a
        Compiled holds it.  Nothing is released under a running call."""
        with self._lock:
            self._fast_clear()
            self._cache.clear()
            self._last_key = None


# Calls of Jitted skip the argument tuple (Python 3.12 does this by itself).
_cjit._enable_vectorcall(Jitted)


# ---------------------------------------------------------------------------
# Lowered / Compiled

# ---------------------------------------------------------------------------
# memory_budget: choose what the backward pass recomputes

_remat_tls = threading.local()   # .force: forward node ids to recompute (a search in progress)
_budget_requests = {}            # id(trace) -> the smallest budget asked for in that trace


def request_memory_budget(trace, budget):
    """Called by grad/value_and_grad(memory_budget=N) while tracing: the
    jitted function that owns `trace` must fit its plan's peak within N."""
    key = id(trace)
    _budget_requests[key] = min(budget, _budget_requests.get(key, budget))


def forced_remat():
    """The forward node ids a budget search wants recomputed, or None."""
    return getattr(_remat_tls, "force", None)


def _fit_memory_budget(jitted, treedef, call, avals, budget, lowered, out_treedef, out_avals):
    """Chooses which forward values the backward pass recomputes instead of
    keeping, so that the exact plan's peak fits `budget`; the plan is the
    oracle, so the answer is known before anything runs.

    Candidates, tried in order of growing recomputation until one fits:
    keep everything; recompute all but the matmul results (cheap
    elementwise work, like dots_saveable); then keep only every s-th
    computed forward value (s = 2, 3, 4, ...) and recompute the segments in
    between from those boundaries, the schedule of Chen et al. (sqrt(n)
    segments at s ~ sqrt(n)).  Raises MemoryBudgetError naming the smallest
    peak reached."""
    peak = lowered.plan_peak()
    if peak <= budget:
        return lowered, out_treedef, out_avals
    values = lowered.forward_values()          # (node id, op), forward order
    n = len(values)
    candidates = [[nid for nid, op in values if op != "matmul"]]
    for s in sorted({2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, max(2, int(round(n ** 0.5)))}):
        if s < n:
            candidates.append([nid for i, (nid, _) in enumerate(values) if (i + 1) % s != 0])
    candidates.append([nid for nid, _ in values])   # recompute everything from the inputs
    least = peak
    for force in candidates:
        _remat_tls.force = force
        try:
            result = jitted._trace(treedef, call, avals)
        finally:
            _remat_tls.force = None
        p = result[0].plan_peak()
        if p <= budget:
            return result
        least = min(least, p)
    raise _cjit.MemoryBudgetError(
        f"{jitted._name}: no choice of saved and recomputed values fits memory_budget={budget} "
        f"bytes: the smallest peak cjit can reach is {least} bytes (saving everything: {peak})")


class ShapeDtypeStruct:
    """An abstract array: shape and dtype, no data (for Jitted.lower)."""

    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape, dtype, weak_type=False):
        if isinstance(shape, int):
            shape = (shape,)
        try:
            # operator.index, as NumPy: 2.5 or "2" is not a dimension
            shape = tuple(operator.index(d) for d in shape)
        except TypeError:
            raise TypeError(f"cjit.ShapeDtypeStruct: shape must be a tuple of ints, "
                            f"got {shape!r}") from None
        if any(d < 0 for d in shape):
            raise ValueError(f"cjit.ShapeDtypeStruct: negative dimension in {shape}")
        self.shape = shape
        self.dtype = canonical_dtype(dtype)
        self.weak_type = bool(weak_type)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __repr__(self):
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name})"

    def __eq__(self, other):
        if not isinstance(other, ShapeDtypeStruct):
            return NotImplemented
        return (self.shape, self.dtype, self.weak_type) == \
            (other.shape, other.dtype, other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))


class Lowered:
    """A traced graph, not compiled yet (see Jitted.lower)."""

    def __init__(self, lowered, jitted, in_treedef, statics, in_avals, dyn_positions, out_treedef,
                 out_avals):
        self._out_avals = out_avals
        self._lowered = lowered
        self._jitted = jitted
        self._in_treedef = in_treedef
        self._statics = statics
        self._in_avals = in_avals
        self._dyn_positions = dyn_positions
        self._out_treedef = out_treedef

    def as_text(self):
        return self._lowered.as_text()

    @property
    def in_avals(self):
        return [ShapeDtypeStruct(s, d, w) for d, s, w in self._in_avals]

    @property
    def out_info(self):
        """ShapeDtypeStructs of the outputs, in the output pytree."""
        infos = [ShapeDtypeStruct(s, d) for s, d in self._out_avals]
        return _tree.unflatten(self._out_treedef, infos)

    def compile(self):
        exe = self._jitted._executable(
            self._lowered, self._jitted._donated_leaves(self._in_treedef, self._dyn_positions))
        _count("compiles")
        return Compiled(exe, self)

    def __repr__(self):
        return f"<cjit.Lowered {self._jitted._name}>"


_BufferInfo = namedtuple("BufferInfo", "size op source shape dtype kind")
_BufferInfo.__new__.__defaults__ = (None, None, None, None, None, None)


class MemoryAnalysis:
    """The memory plan of a compiled function, in bytes (exact, not an
    estimate).  `peak_live` lists the buffers live at the peak."""

    _FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
               "temp_size_in_bytes", "peak_memory_in_bytes", "num_kernels")

    def __init__(self, d):
        for f in self._FIELDS:
            setattr(self, f, int(d.get(f, 0)))
        live = []
        for b in d.get("peak_live", ()) or ():
            if isinstance(b, dict):
                live.append(_BufferInfo(**{k: b.get(k) for k in _BufferInfo._fields}))
            else:
                live.append(b)
        self.peak_live = live
        self._raw = d

    def __getitem__(self, name):
        return getattr(self, name)

    def __repr__(self):
        lines = ["MemoryAnalysis("]
        for f in self._FIELDS:
            lines.append(f"  {f}={getattr(self, f)},")
        if self.peak_live:
            lines.append("  peak_live=[")
            for b in self.peak_live:
                desc = f"{b.size} bytes"
                if b.dtype is not None and b.shape is not None:
                    dt = getattr(b.dtype, "name", b.dtype)
                    desc += f" {dt}{list(b.shape)}"
                if b.kind:
                    desc += f" {b.kind}"
                if b.op:
                    desc += f" from {b.op}"
                if b.source:
                    desc += f" at {b.source}"
                lines.append(f"    {desc},")
            lines.append("  ],")
        else:
            lines.append("  peak_live=[],")
        lines.append(")")
        return "\n".join(lines)


class Compiled:
    """A compiled function for one abstract signature (see Lowered.compile)."""

    def __init__(self, exe, lowered):
        self._exe = exe
        self._low = lowered

    def _signature_error(self, msg):
        return TypeError(f"cjit: Compiled {self._low._jitted._name} called with a different "
                         f"signature than it was lowered for: {msg}")

    def __call__(self, *args, **kwargs):
        low = self._low
        spec = low._jitted._spec
        leaves, treedef = _tree.flatten((args, kwargs))
        dyn_positions = low._dyn_positions
        if treedef != low._in_treedef:
            # Called with the static arguments too, as the Jitted was.
            dyn_args, dyn_kwargs, statics, call = spec.split(args, kwargs)
            dyn_positions = call[0]
            if statics and statics != low._statics:
                raise self._signature_error(
                    f"static arguments {[(spec.static_name(w), v) for w, _, v in statics]} "
                    f"differ from {[(spec.static_name(w), v) for w, _, v in low._statics]}")
            leaves, treedef = _tree.flatten((dyn_args, dyn_kwargs))
            if treedef != low._in_treedef:
                raise self._signature_error(
                    f"argument structure {treedef} differs from {low._in_treedef}")
        try:
            arrays, avals = _convert_leaves(leaves)
        except _Inline:
            raise TypeError("cjit: a Compiled function cannot be called on traced values; "
                            "call the Jitted instead") from None
        except _LeafError as e:
            raise e.exc_type(e.message.format(
                arg=low._jitted._arg_desc(spec.leaf_name(treedef, e.index, dyn_positions)))) \
                from None
        for i, (a, b) in enumerate(zip(avals, low._in_avals)):
            if a[0] != b[0] or a[1] != b[1]:
                name = spec.leaf_name(treedef, i, dyn_positions)
                raise self._signature_error(
                    f"argument '{name}' is {_aval_str(a)}, lowered for {_aval_str(b)}")
        outs = self._exe(arrays)
        return _tree.unflatten(low._out_treedef, outs)

    def as_text(self):
        return self._exe.as_text()

    def memory_analysis(self):
        return MemoryAnalysis(self._exe.memory_analysis())

    def cost_analysis(self):
        return dict(self._exe.cost_analysis())

    @property
    def code_bytes(self):
        return self._exe.code_bytes

    def __repr__(self):
        return f"<cjit.Compiled {self._low._jitted._name}>"


# ---------------------------------------------------------------------------
# process-wide caches and memory

def clear_caches():
    """Drops every cached executable (every Jitted, the eager-op kernels);
    their machine code is freed as soon as no running call holds it."""
    for j in list(_all_jitted):
        j.clear_cache()


def cache_info():
    """Process-wide: entries, hits, misses, compiles, code_bytes."""
    entries = 0
    code = 0
    for j in list(_all_jitted):
        cache = list(j._cache.values())
        entries += len(cache)
        for e in cache:
            try:
                code += e.exe.code_bytes
            except Exception:
                pass
    with _stats_lock:
        out = {"entries": entries, "hits": _stats["hits"] + _cjit.fast_hits(),
               "misses": _stats["misses"],
               "compiles": _stats["compiles"], "code_bytes": code}
    return out


def memory_stats():
    """bytes_in_use and peak_bytes_in_use, as the runtime counts them."""
    s = _cjit.runtime_stats()
    return {"bytes_in_use": int(s["bytes_in_use"]),
            "peak_bytes_in_use": int(s["peak_bytes_in_use"])}


def reset_peak_memory_stats():
    _cjit.reset_peak_memory_stats()


# ---------------------------------------------------------------------------
# devices

class Device:
    """A device cjit can run on: the CPU, or a CUDA GPU (by ordinal)."""

    __slots__ = ("platform", "id")

    def __init__(self, platform="cpu", id=0):
        self.platform = platform
        self.id = id

    def __repr__(self):
        return f"CpuDevice(id={self.id})" if self.platform == "cpu" else \
            f"CudaDevice(id={self.id})"

    def __str__(self):
        return f"{self.platform}:{self.id}"

    def __eq__(self, other):
        return isinstance(other, Device) and (self.platform, self.id) == (other.platform, other.id)

    def __hash__(self):
        return hash((self.platform, self.id))


_CPU = Device("cpu", 0)


def devices(backend=None):
    """The devices of `backend` ("cpu" or "cuda"; default: all there are).
    The CPU is always there; CUDA devices when the driver (libcuda.so.1)
    and a GPU are.  devices("cuda") without one is a RuntimeError."""
    n, _ = _cjit.cuda_status()
    gpus = [Device("cuda", i) for i in range(n)]
    if backend is None:
        return [_CPU] + gpus
    dev = _check_device(backend, "devices")
    return [_CPU] if dev.platform == "cpu" else gpus


def device_put(x, device=None):
    """Places x (a pytree) on `device`.  On the CPU: fresh C-contiguous
    NumPy copies of the leaves; on a GPU: cjit.Arrays."""
    dev = _check_device(device, "device_put")
    if dev.platform == "cpu":
        return _tree.tree_map(lambda a: np.array(a, copy=True, order="C"), x)

    def put(a):
        if isinstance(a, Array) and a.device == dev:
            return a
        h = np.asarray(a)
        if h.dtype not in _SUPPORTED:
            h = h.astype(canonical_dtype(h.dtype, "cjit.device_put: dtype"))
        return Array._wrap(_cjit.cuda_put(h, dev.id), dev)
    return _tree.tree_map(put, x)


class Array:
    """An array in GPU memory: shape, dtype, device, block_until_ready(),
    and np.asarray(a), which copies it to the host.  Made by
    cjit.device_put(x, "cuda") and returned by functions jitted with
    device="cuda"; not constructed directly."""

    __slots__ = ("_buf", "shape", "dtype", "device", "__weakref__")

    def __init__(self, *args, **kwargs):
        raise TypeError("cjit.Array is not constructed directly; use "
                        "cjit.device_put(x, 'cuda')")

    @classmethod
    def _wrap(cls, buf, device):
        a = object.__new__(cls)
        a._buf = buf
        a.shape = tuple(buf.shape)
        a.dtype = buf.dtype
        a.device = device
        return a

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self):
        return self._buf.nbytes

    def block_until_ready(self):
        """Waits until the device has computed this array; returns it."""
        self._buf.synchronize()
        return self

    def __array__(self, dtype=None, copy=None):
        h = self._buf.to_host()
        return h if dtype is None else h.astype(dtype, copy=False)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d cjit.Array")
        return self.shape[0]

    def __repr__(self):
        return f"cjit.Array({np.asarray(self)!r}, device={self.device})"


class _CudaExecutable:
    """A compiled function on a GPU: the CPU Executable (its plan, text,
    memory and cost analyses) and its kernels loaded as PTX on the device.
    Called with a list of NumPy arrays or cjit.Arrays; returns cjit.Arrays."""

    __slots__ = ("_cpu", "_prog", "_device")

    def __init__(self, cpu_exe, device):
        self._cpu = cpu_exe
        self._device = device
        self._prog = _cjit.CudaProgram(cpu_exe, device.id)

    def __call__(self, arrays):
        args = [a._buf if type(a) is Array else a for a in arrays]
        dev = self._device
        return [Array._wrap(b, dev) for b in self._prog(args)]

    def as_text(self):
        return self._cpu.as_text()

    def memory_analysis(self):
        return self._cpu.memory_analysis()

    def cost_analysis(self):
        return self._cpu.cost_analysis()

    @property
    def code_bytes(self):
        return self._prog.ptx_bytes

    def ptx(self):
        return _cjit.ptx(self._cpu)

    def release(self):
        self._prog.release()
        self._cpu.release()


class _CudaJitted(Jitted):
    """jit(..., device="cuda"): the same tracing and cache; arguments may be
    cjit.Arrays (used in place) or host values (copied to the device at each
    call); results are cjit.Arrays."""

    def _executable(self, lowered, donate=()):
        return _CudaExecutable(lowered.compile(), self._device)

    def __call__(self, *args, **kwargs):
        if current_trace() is not None:
            return self._fun(*args, **kwargs)
        spec = self._spec
        dyn_args, dyn_kwargs, statics, call = spec.split(args, kwargs)
        leaves, node = _tree.flatten_args(dyn_args, dyn_kwargs)
        on_device = [i for i, x in enumerate(leaves) if type(x) is Array]
        host = list(leaves)
        for i in on_device:
            host[i] = 0   # placeholder, replaced below
        try:
            arrays, avals = _convert_leaves(host)
        except _Inline:
            return self._fun(*args, **kwargs)
        except _LeafError as e:
            raise e.exc_type(e.message.format(arg=self._arg_desc(
                spec.leaf_name(_tree.treedef_of(node), e.index, call[0])))) from None
        for i in on_device:
            x = leaves[i]
            arrays[i] = x
            avals[i] = (x.dtype, x.shape, False)
        key = (node, statics, tuple(avals))
        with self._lock:
            entry = self._cache.get(key)
            if entry is None:
                entry = self._compile(key, call, avals)
            else:
                self._hits += 1
                _count("hits")
        return _tree.unflatten(entry.out_treedef, entry.exe(arrays))


# ---------------------------------------------------------------------------
# checkpoint policies (checkpoint, remat and saved_residuals live in _remat.py;
# grad, value_and_grad and vjp in _autodiff.py)


def checkpoint_name(x, name):
    """Names a value for the name-based checkpoint policies; the identity
    otherwise (also on concrete arrays)."""
    if not isinstance(name, str):
        raise TypeError(f"cjit.checkpoint_name: name must be a str, got {type(name).__name__}")

    def tag(v):
        if isinstance(v, Tracer):
            return v.trace.apply("name", v, name=name)
        return v
    return _tree.tree_map(tag, x)


class _Policy:
    """A checkpoint policy: which values of a region the backward keeps."""

    __slots__ = ("kind", "names")

    def __init__(self, kind, names=()):
        self.kind = kind
        self.names = tuple(names)

    def __repr__(self):
        if self.names:
            return f"checkpoint_policies.{self.kind}({', '.join(map(repr, self.names))})"
        return f"checkpoint_policies.{self.kind}"

    def __eq__(self, other):
        return isinstance(other, _Policy) and (self.kind, self.names) == (other.kind, other.names)

    def __hash__(self):
        return hash((self.kind, self.names))


def _names_policy(kind, names):
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"cjit.checkpoint_policies.{kind}: names must be str, got {n!r}")
    return _Policy(kind, names)


class checkpoint_policies:
    """The policies of SPEC section 5: which values of a checkpointed region
    the backward pass keeps (the rest is recomputed)."""

    everything_saveable = _Policy("everything_saveable")
    nothing_saveable = _Policy("nothing_saveable")
    dots_saveable = _Policy("dots_saveable")

    @staticmethod
    def save_only_these_names(*names):
        return _names_policy("save_only_these_names", names)

    @staticmethod
    def save_anything_except_these_names(*names):
        return _names_policy("save_anything_except_these_names", names)

    def __init__(self):
        raise TypeError("cjit.checkpoint_policies is a namespace")
