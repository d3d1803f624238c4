"""The core of cjit.numpy: the dispatch between tracing and eager calls
(`_op`), operands and NumPy 2's dtype promotion, axes and shape helpers.
Every other module of the package builds on these."""
from __future__ import annotations

import functools
import inspect
import operator

import numpy as np

from .. import _cjit
from .._jitted import Jitted
from .._dtypes import canonical_dtype
from .._trace_state import current_trace, user_location
from .._trace_state import revealed
from .._cjit import Tracer


_BOOL = np.dtype(bool)
_I32 = np.dtype(np.int32)
_I64 = np.dtype(np.int64)
_U64 = np.dtype(np.uint64)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


# ---------------------------------------------------------------------------
# dispatch

def _is_float(dt):
    return dt.kind == "f"


def _has_tracer(args, kwargs):
    for a in args:
        if isinstance(a, Tracer):
            return True
        if type(a) is list or type(a) is tuple:
            for b in a:
                if isinstance(b, Tracer):
                    return True
    for a in kwargs.values():
        if isinstance(a, Tracer):
            return True
        if type(a) is list or type(a) is tuple:
            for b in a:
                if isinstance(b, Tracer):
                    return True
    return False


_INT_RANGES = {}


def _unfit_ints(call, arrays):
    """The names of Python int arguments (in array positions) that int64 or
    an integer array among the arguments cannot hold.  The eager jit makes
    them static, so that they are constants in its trace, where NumPy's
    rules for them apply as in a jitted function: OverflowError, and
    comparisons answered without converting (uint64 x > -1 is all true)."""
    names = [n for n, v in call.items() if n in arrays and type(v) is int]
    if not names:
        return ()
    ranges = []
    for v in call.values():
        if isinstance(v, (np.ndarray, np.generic)) and v.dtype.kind in "iu":
            if v.dtype not in _INT_RANGES:
                info = np.iinfo(v.dtype)
                _INT_RANGES[v.dtype] = (int(info.min), int(info.max))
            ranges.append(_INT_RANGES[v.dtype])
    ranges.append((-(1 << 63), (1 << 63) - 1))
    return tuple(n for n in names if any(not lo <= call[n] <= hi for lo, hi in ranges))


def _eager_array(v):
    """An eager argument in an array position: sequences become arrays."""
    if type(v) is list or type(v) is tuple:
        return np.asarray(v)
    return v


def _op(*array_params, seq=()):
    """Decorator for a function whose implementation traces.

    `array_params` name the parameters that hold arrays (dynamic in the
    eager jit); `seq` names parameters holding a sequence of arrays.  Every
    other parameter is static: it is part of the eager cache key and must be
    hashable (lists are turned into tuples)."""
    def deco(impl):
        sig = inspect.signature(impl)
        dynamic = set(array_params) | set(seq)
        static = tuple(n for n in sig.parameters if n not in dynamic)
        seqs = frozenset(seq)
        arrays = frozenset(array_params)
        holder = {}   # the names made static for this call (_unfit_ints) -> its Jitted

        params = sig.parameters
        pos_names = [n for n, p in params.items()
                     if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]

        def convert(name, v):
            if name in arrays:
                return _eager_array(v)
            if name in seqs:
                if isinstance(v, np.ndarray):
                    v = list(v)
                elif not isinstance(v, (list, tuple)):
                    raise TypeError(f"cjit.numpy.{impl.__name__}: {name} must be a sequence "
                                    f"of arrays, got {type(v).__name__}")
                return tuple(_eager_array(a) for a in v)
            if type(v) is list or type(v) is tuple:
                return _deep_tuple(v)
            if isinstance(v, np.ndarray):   # e.g. a shape given as an array
                return v.item() if v.ndim == 0 else _deep_tuple(v.tolist())
            return v

        def eager(*args, **kwargs):
            if len(args) > len(pos_names):
                sig.bind(*args, **kwargs)   # raises Python's own TypeError
            call = {}
            for name, v in zip(pos_names, args):
                call[name] = convert(name, v)
            for name, v in kwargs.items():
                if name in call or name not in params:
                    sig.bind(*args, **kwargs)   # raises Python's own TypeError
                call[name] = convert(name, v)
            extra = _unfit_ints(call, arrays)
            j = holder.get(extra)
            if j is None:
                j = holder[extra] = Jitted(impl, static_argnames=static + extra, _internal=True)
                j._name = f"cjit.numpy.{impl.__name__}"
            return j(**call)

        @functools.wraps(impl)
        def wrapper(*args, **kwargs):
            if current_trace() is not None:
                return impl(*args, **kwargs)
            if _has_tracer(args, kwargs):
                # traced operands inside ensure_compile_time_eval: staged
                # in the trace that was set aside
                with revealed():
                    return impl(*args, **kwargs)
            return eager(*args, **kwargs)

        wrapper._cjit_impl = impl
        return wrapper
    return deco


def _deep_tuple(v):
    """Nested lists as nested tuples (hashable static arguments)."""
    if type(v) is list or type(v) is tuple:
        return tuple(_deep_tuple(y) for y in v)
    return v


def _trace_of(*xs):
    for x in xs:
        if isinstance(x, Tracer):
            return x.trace
        if type(x) is list or type(x) is tuple:
            for y in x:
                if isinstance(y, Tracer):
                    return y.trace
    t = current_trace()
    if t is None:
        raise RuntimeError("cjit internal error: tracing with no trace in progress")
    return t


def _operand(x, who):
    """An operand for Trace.apply: Tracers, Python and NumPy scalars and
    arrays pass through; sequences become arrays; anything else is a
    TypeError naming the op."""
    if isinstance(x, Tracer):
        return x
    t = type(x)
    if t is float or t is int or t is bool or t is np.ndarray:
        return x
    if isinstance(x, (np.ndarray, np.generic, bool, int, float)):
        if isinstance(x, (np.ndarray, np.generic)):
            canonical_dtype(x.dtype, f"cjit.numpy.{who}: operand dtype")
        return x
    if t is list or t is tuple:
        if any(isinstance(y, Tracer) for y in _flat_seq(x)):
            return _stack_nested(x)
        a = np.asarray(x)
        canonical_dtype(a.dtype, f"cjit.numpy.{who}: operand dtype")
        return a
    if t.__name__ == "ComplexTracer":   # reached a function with no complex implementation
        raise NotImplementedError(f"cjit.numpy.{who}: complex arguments are not supported yet")
    from .._signature import foreign_array
    a = foreign_array(x)          # a jax.Array, a torch tensor, ... as NumPy sees it
    if a is not None:
        canonical_dtype(a.dtype, f"cjit.numpy.{who}: operand dtype")
        return a
    raise TypeError(f"cjit.numpy.{who}: unsupported operand of type {t.__name__}")


def _flat_seq(x):
    for y in x:
        if type(y) is list or type(y) is tuple:
            yield from _flat_seq(y)
        else:
            yield y


def _stack_nested(x):
    from ._manipulation import stack
    return stack([_stack_nested(y) if type(y) in (list, tuple) else y for y in x])


def _lift(x, who="asarray"):
    """A Tracer for x in the current trace (x's own if it is one)."""
    x = _operand(x, who)
    if isinstance(x, Tracer):
        return x
    trace = current_trace()
    if isinstance(x, np.ndarray):
        return trace.array(x)
    if isinstance(x, np.generic):
        return trace.apply("constant", value=x.item(), dtype=x.dtype.name, shape=(), weak=False)
    if isinstance(x, bool):
        return trace.apply("constant", value=bool(x), dtype="bool", shape=(), weak=True)
    if isinstance(x, int):
        return trace.apply("constant", value=int(x), dtype=_weak_int_dtype(x).name, shape=(), weak=True)
    return trace.apply("constant", value=float(x), dtype="float64", shape=(), weak=True)


def _info(x):
    """(dtype, weak) of an operand."""
    if isinstance(x, Tracer):
        return x.dtype, x.weak
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype, False
    if isinstance(x, bool):
        return _BOOL, True
    if isinstance(x, int):
        return _weak_int_dtype(x), True
    if isinstance(x, float):
        return _F64, True
    return np.asarray(x).dtype, False


def _weak_int_dtype(x):
    """The dtype a Python int is held in: int64, or uint64 from 2**63 on
    (only an unsigned or float operand can take such a value in; beyond
    2**64 - 1 the C layer raises OverflowError)."""
    return _U64 if x > 0x7FFFFFFFFFFFFFFF else _I64


def _desc(x):
    """'float32[3,4]' for an operand."""
    dt, _ = _info(x)
    return f"{dt.name}[{','.join(str(d) for d in _shape_of(x))}]"


def _error(exc_type, who, msg, *operands):
    """exc_type("who: msg (operands ...) (at file:line)"): the op, the
    operands' shapes and dtypes and the user's line, as C's errors read."""
    text = f"{who}: {msg}"
    if operands:
        text += (" (operand " if len(operands) == 1 else " (operands ") + \
            ", ".join(_desc(o) for o in operands) + ")"
    return exc_type(f"{text} (at {user_location()})")


def _shape_of(x):
    if isinstance(x, (Tracer, np.ndarray, np.generic)):
        return tuple(x.shape)
    if isinstance(x, (bool, int, float)):
        return ()
    return np.shape(x)




def _result_type(*infos):
    """NumPy 2 (NEP 50) result dtype of operands given as (dtype, weak):
    returns (dtype, weak).  The C layer's promotion (graph.c), the same
    one its builders apply; dtypes cjit does not have are first widened to
    one it has (_as_supported)."""
    try:
        return _cjit.result_type(infos)
    except TypeError:
        return _cjit.result_type([(_as_supported(d), w) for d, w in infos])


def _as_supported(dt):
    """A dtype of cjit's for promotion: native byte order, and the types
    cjit lacks widened to the smallest supported one that holds them
    (float16 + float32 is float32)."""
    dt = np.dtype(dt)
    if dt.byteorder not in ("=", "|"):
        dt = dt.newbyteorder("=")
    if dt.kind == "f" and dt.itemsize < 4:
        return _F32
    return dt


def _cast(x, dt):
    """x (an operand) as dtype dt (a Tracer unless it is a Python scalar
    that can stay weak)."""
    x = _lift(x)
    if x.dtype == dt and not x.weak:
        return x
    return x.trace.apply("cast", x, dtype=dt.name)


_WITH_JVP = {}


def _with_jvp(value, tangent, uses_out=False):
    """value (a function of Tracers) as a cjit.custom_jvp whose tangent
    output is tangent(primals, tangents, out): for functions whose
    composition has the right value but not the right derivative (branches
    of max/abs/select whose slopes vanish at ties, or a select that cuts the
    derivative with the value).  The rule is ordinary code, so second and
    higher derivatives are its derivatives.  Inside its own rule a custom
    function is the plain one (decision 119), whose derivative is the
    composition's; a tangent that reads out (uses_out) gets it from a second
    custom function with the same rule, so that second derivatives are the
    rule's too.  Made once per value function, on first use (cjit.custom_jvp
    imports this package)."""
    key = (value, tangent, uses_out)
    f = _WITH_JVP.get(key)
    if f is None:
        from .._custom import custom_jvp
        pair = [custom_jvp(value), custom_jvp(value) if uses_out else None]

        def make_rule(other):
            def rule(primals, tangents):
                out = (other or pair[0])(*primals)
                return out, tangent(primals, tangents, out)
            return rule
        pair[0].defjvp(make_rule(pair[1]))
        if uses_out:
            pair[1].defjvp(make_rule(pair[0]))
        f = _WITH_JVP[key] = pair[0]
    return f


def _apply(op, *args, **attrs):
    return _trace_of(*args).apply(op, *args, **attrs)


# ---------------------------------------------------------------------------
# axes

def _axis_error(axis, ndim):
    return np.exceptions.AxisError(f"axis {axis} is out of bounds for array of dimension {ndim} "
                                   f"(at {user_location()})")


def _norm_axis(axis, ndim):
    try:
        a = operator.index(axis)
    except TypeError:
        raise TypeError(f"cjit.numpy: axis must be an int, got {type(axis).__name__}") from None
    if not -ndim <= a < ndim:
        raise _axis_error(a, ndim)
    return a + ndim if a < 0 else a


def _norm_axes(axis, ndim):
    """Sorted tuple of non-negative axes (None: all)."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        axes = [_norm_axis(a, ndim) for a in axis]
        if len(set(axes)) != len(axes):
            raise ValueError(f"duplicate value in 'axis' {tuple(axis)} (at {user_location()})")
        return tuple(sorted(axes))
    return (_norm_axis(axis, ndim),)


def _kept_shape(shape, axes):
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def _reshape_t(x, shape):
    shape = tuple(shape)
    if tuple(x.shape) == shape:
        return x
    return x.trace.apply("reshape", x, shape=shape)


def _common(xs, who):
    dt, _ = _result_type(*[_info(x) for x in xs])
    out = []
    for x in xs:
        x = _lift(x, who)
        if x.dtype != dt:
            x = x.trace.apply("cast", x, dtype=dt.name)
        out.append(x)
    return out


# ---------------------------------------------------------------------------
# shapes

def _shape_arg(shape, who):
    if isinstance(shape, (int, np.integer)):
        return (operator.index(shape),)
    if isinstance(shape, Tracer):
        operator.index(shape)   # raises ConcretizationError: a shape must be concrete
    try:
        return tuple(operator.index(d) for d in shape)
    except _cjit.ConcretizationError:
        raise
    except TypeError:
        raise TypeError(f"cjit.numpy.{who}: shape must be an int or a tuple of ints, "
                        f"got {shape!r}") from None


def _resolve_shape(x, shape, who="reshape"):
    """shape with its -1 resolved for x's size; ValueError naming x."""
    size = x.size
    shape = _shape_arg(shape, who)
    unknown = [i for i, d in enumerate(shape) if d == -1]
    if len(unknown) > 1:
        raise _error(ValueError, who, f"can only specify one unknown dimension in "
                     f"{_shape_str(shape)}", x)
    if any(d < -1 for d in shape):
        raise _error(ValueError, who, f"negative dimensions not allowed in {_shape_str(shape)}",
                     x)
    if unknown:
        known = 1
        for d in shape:
            if d != -1:
                known *= d
        if known == 0 or size % known:
            raise _error(ValueError, who, f"cannot reshape array of size {size} into shape "
                         f"{_shape_str(shape)}", x)
        shape = tuple(size // known if d == -1 else d for d in shape)
    n = 1
    for d in shape:
        n *= d
    if n != size:
        raise _error(ValueError, who, f"cannot reshape array of size {size} into shape "
                     f"{_shape_str(shape)}", x)
    return shape


def _shape_str(shape):
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
