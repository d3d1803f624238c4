"""The abstract signature of a call: arguments converted to arrays and
avals (dtype, shape, weak), static arguments split off and keyed, and the
outputs of a traced function turned into Tracers.  The cache key of a
Jitted is built from what this module returns."""
from __future__ import annotations

import inspect

import numpy as np

from . import _cjit
from . import _tree
from ._array import Array, DeletedArray, _deleted_message
from ._cjit import Tracer
from ._devices import DeviceArray
from ._dtypes import (_NARROW, x64_enabled, _BOOL, _F64, _I64, _INT64_MAX, _INT64_MIN, _SUPPORTED, _SUPPORTED_NAMES,
                      ShapeDtypeStruct, canonical_dtype)


class _LeafError(Exception):
    """A leaf could not be converted; the caller names the argument."""

    def __init__(self, index, exc_type, message):
        super().__init__(message)
        self.index = index
        self.exc_type = exc_type
        self.message = message  # contains '{arg}' where the argument's name goes


class _Inline(Exception):
    """A leaf is a Tracer: the call must be inlined into the current trace."""


def foreign_array(x):
    """x as a NumPy array when it speaks DLPack or `__array__`, else None.
    DLPack is tried first (no copy); an object whose DLPack export fails (a
    GPU tensor, a dtype NumPy lacks) falls back to `__array__`."""
    if hasattr(x, "__dlpack__"):
        try:
            return np.from_dlpack(x)
        except (BufferError, TypeError, ValueError, RuntimeError):
            pass
    if hasattr(x, "__array__"):
        return np.asarray(x)
    return None


def _convert_leaf_slow(i, x, allow_sds=False):
    """Returns (array, aval) for a leaf the fast loop did not handle."""
    if isinstance(x, Tracer):
        raise _Inline()
    if allow_sds and isinstance(x, ShapeDtypeStruct):
        return None, (x.dtype, x.shape, False)
    if type(x) is DeletedArray:
        raise _LeafError(i, RuntimeError, _deleted_message(x).replace("{", "{{").replace("}", "}}")
                         + " (argument {arg})")
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
    if isinstance(x, DeviceArray):
        # A GPU array given to a CPU function: copied to the host.
        return np.asarray(x), (x.dtype, x.shape, False)
    if isinstance(x, ShapeDtypeStruct):
        raise _LeafError(i, TypeError, "cjit: argument {arg} is a ShapeDtypeStruct; those are only "
                         "accepted by Jitted.lower(), not when calling")
    if hasattr(x, "__dlpack__") or hasattr(x, "__array__"):
        # another library's array (a jax.Array, a torch CPU tensor): shared
        # through DLPack where it can be, copied by __array__ otherwise
        try:
            a = foreign_array(x)
        except Exception as e:
            why = f"{type(e).__name__}: {e}".replace("{", "{{").replace("}", "}}")
            raise _LeafError(i, TypeError, f"cjit: argument {{arg}} of type {type(x).__name__} "
                             f"could not be read as an array ({why})") from None
        if isinstance(a, np.ndarray):
            if a.dtype not in _SUPPORTED:
                try:
                    canonical_dtype(a.dtype)
                except TypeError:
                    raise _LeafError(i, TypeError,
                                     f"cjit: argument {{arg}} ({type(x).__name__}) has dtype "
                                     f"{a.dtype}, which cjit does not support (supported: "
                                     f"{_SUPPORTED_NAMES})") from None
            return _convert_leaf_slow(i, a, allow_sds)
    if _is_dataclass_instance(x):
        raise _LeafError(i, TypeError, f"cjit: argument {{arg}} is a dataclass "
                         f"({type(x).__name__}); cjit does not look inside dataclasses (JAX "
                         f"neither) unless the class is registered with "
                         f"cjit.tree_util.register_pytree_node or register_pytree_node_class; or "
                         f"pass its fields as a tuple, dict or namedtuple, or mark it static")
    raise _LeafError(i, TypeError,
                     f"cjit: argument {{arg}} has type {type(x).__name__}; cjit accepts NumPy "
                     f"arrays and scalars, objects with __dlpack__ or __array__ (jax, torch), "
                     f"Python bool/int/float and None, nested in tuples, "
                     f"lists, dicts, OrderedDicts, namedtuples and classes registered with "
                     f"cjit.tree_util.register_pytree_node")


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
        if t is np.ndarray or t is Array:
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
    if not x64_enabled():
        _narrow_leaves(arrays, avals)
    return arrays, avals


_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1


def _narrow_leaves(arrays, avals, abstract=False):
    """x64 off: 64-bit leaves become 32-bit (as JAX converts them, no
    warning); a Python int that int32 cannot hold raises OverflowError."""
    for i, (a, aval) in enumerate(zip(arrays, avals)):
        dt, shape, weak = aval
        narrow = _NARROW.get(dt)
        if narrow is None:
            continue
        if weak and dt == _I64 and a is not None and not _I32_MIN <= int(a) <= _I32_MAX:
            raise _LeafError(i, OverflowError,
                             f"cjit: argument {{arg}} = {int(a)} does not fit in int32 "
                             f"(jax_enable_x64 is off)")
        if not abstract:
            arrays[i] = np.ascontiguousarray(a, dtype=narrow).reshape(shape)
        avals[i] = (narrow, shape, weak)


def _abstract_leaves(leaves):
    """Avals only (for lower): arrays, scalars or ShapeDtypeStruct."""
    avals = []
    for i, x in enumerate(leaves):
        _, aval = _convert_leaf_slow(i, x, allow_sds=True)
        avals.append(aval)
    if not x64_enabled():
        # only a Python int's value is checked (it must fit in int32)
        _narrow_leaves([x if type(x) is int else None for x in leaves], avals, abstract=True)
    return avals


def _tracer_desc(t):
    return f"{t.dtype.name}[{','.join(str(d) for d in t.shape)}]"


def _output_tracer(trace, x, describe):
    """A Tracer for one output leaf of a traced function; with x64 off a
    64-bit one (a Python scalar, a closed-over array, an int64 index an op
    made inside) comes out as its 32-bit counterpart."""
    if not x64_enabled() and type(x) in (int, float) and -2**31 <= x < 2**31:
        # A Python scalar stays weak at the 32-bit width, as in JAX (a loop's
        # carry made from it then takes the body's dtype).
        return trace.apply("constant", value=x, dtype="int32" if type(x) is int else "float32",
                           shape=(), weak=True)
    t = _output_tracer_any(trace, x, describe)
    if not x64_enabled():
        narrow = _NARROW.get(t.dtype)
        if narrow is not None:
            t = trace.apply("cast", t, dtype=narrow.name)
    return t


def _output_tracer_any(trace, x, describe):
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
