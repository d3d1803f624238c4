"""cjit.numpy: NumPy's functions on traced values, and eagerly on arrays.

Every function follows NumPy's signature and semantics for the dtypes cjit
supports (bool, int32, int64, float32, float64).  Dispatch:

- if an argument is a traced value (a Tracer), or a trace is in progress on
  this thread, the call records primitives into that trace;
- otherwise the call is *eager*: the same function runs under an internal
  jit (one per function, static parameters such as `axis` in its cache key),
  so an eager call compiles one small kernel per op signature, caches it,
  and returns NumPy arrays.  Creation functions (zeros, arange, ...) simply
  return NumPy arrays when called eagerly.

Known differences from NumPy: results are always arrays (0-d arrays where
NumPy returns scalars); math functions on bool inputs return float64 (NumPy:
float16); `reciprocal` accepts floats only.
"""
from __future__ import annotations

import builtins
import functools
import inspect
import math
import operator

import numpy as np

from . import _cjit
from .api import Jitted, canonical_dtype, current_trace, user_location
from ._cjit import Tracer


__all__ = [
    # elementwise
    "add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "power", "negative",
    "abs", "absolute", "sign", "exp", "expm1", "log", "log1p", "sqrt", "square", "reciprocal",
    "tanh", "sin", "cos", "maximum", "minimum", "clip", "where", "equal", "not_equal", "less",
    "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "logical_not",
    "isnan", "isfinite", "floor", "ceil", "astype",
    # reductions
    "sum", "mean", "max", "min", "amax", "amin", "prod", "argmax", "argmin", "var",
    # linear algebra
    "matmul", "dot", "transpose",
    # shapes
    "reshape", "expand_dims", "squeeze", "broadcast_to", "concatenate", "stack", "ravel",
    "shape", "ndim", "size",
    # creation
    "zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "arange", "asarray", "array",
    # dtypes and constants
    "bool_", "int32", "int64", "float32", "float64", "dtype", "pi", "e", "inf", "nan", "newaxis",
]

bool_ = np.bool_
int32 = np.int32
int64 = np.int64
float32 = np.float32
float64 = np.float64
dtype = np.dtype
pi = math.pi
e = math.e
inf = math.inf
nan = math.nan
newaxis = None

_BOOL = np.dtype(bool)
_I32 = np.dtype(np.int32)
_I64 = np.dtype(np.int64)
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
        holder = []

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
            if type(v) is list:
                return tuple(v)
            if type(v) is np.ndarray:   # e.g. a shape given as an array
                return v.item() if v.ndim == 0 else tuple(v.tolist())
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
            if not holder:
                j = Jitted(impl, static_argnames=static, _internal=True)
                j._name = f"{impl.__module__}.{impl.__name__}"
                holder.append(j)
            return holder[0](**call)

        @functools.wraps(impl)
        def wrapper(*args, **kwargs):
            if current_trace() is not None or _has_tracer(args, kwargs):
                return impl(*args, **kwargs)
            return eager(*args, **kwargs)

        wrapper._cjit_impl = impl
        return wrapper
    return deco


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
    raise TypeError(f"cjit.numpy.{who}: unsupported operand of type {t.__name__}")


def _flat_seq(x):
    for y in x:
        if type(y) is list or type(y) is tuple:
            yield from _flat_seq(y)
        else:
            yield y


def _stack_nested(x):
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
        return trace.apply("constant", value=int(x), dtype="int64", shape=(), weak=True)
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
        return _I64, True
    if isinstance(x, float):
        return _F64, True
    return np.asarray(x).dtype, False


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


_KIND = {"b": 0, "i": 1, "u": 1, "f": 2}
_DEFAULT_OF_KIND = {0: _BOOL, 1: _I64, 2: _F64}


def _result_type(*infos):
    """NumPy 2 (NEP 50) result dtype of operands given as (dtype, weak):
    returns (dtype, weak)."""
    strong = [d for d, w in infos if not w]
    weak = [d for d, w in infos if w]
    if strong:
        r = strong[0]
        for d in strong[1:]:
            r = np.promote_types(r, d)
        rk = _KIND[r.kind]
        for d in weak:
            k = _KIND[d.kind]
            if k > rk:
                r, rk = _DEFAULT_OF_KIND[k], k
        return r, False
    k = builtins.max(_KIND[d.kind] for d in weak)
    return _DEFAULT_OF_KIND[k], True


def _cast(x, dt):
    """x (an operand) as dtype dt (a Tracer unless it is a Python scalar
    that can stay weak)."""
    x = _lift(x)
    if x.dtype == dt and not x.weak:
        return x
    return x.trace.apply("cast", x, dtype=dt.name)


def _apply(op, *args, **attrs):
    return _trace_of(*args).apply(op, *args, **attrs)


# ---------------------------------------------------------------------------
# elementwise, two operands

def _binary_op(name, prim, doc):
    def impl(x1, x2):
        return _apply(prim, _operand(x1, name), _operand(x2, name))
    impl.__name__ = impl.__qualname__ = name
    impl.__doc__ = doc
    return _op("x1", "x2")(impl)


add = _binary_op("add", "add", "x1 + x2, elementwise, with broadcasting.")
subtract = _binary_op("subtract", "sub", "x1 - x2, elementwise.")
multiply = _binary_op("multiply", "mul", "x1 * x2, elementwise.")
power = _binary_op("power", "pow", "x1 ** x2, elementwise.")
maximum = _binary_op("maximum", "maximum", "Elementwise maximum; nan if either is nan.")
minimum = _binary_op("minimum", "minimum", "Elementwise minimum; nan if either is nan.")
equal = _binary_op("equal", "eq", "x1 == x2, elementwise (bool).")
not_equal = _binary_op("not_equal", "ne", "x1 != x2, elementwise (bool).")
less = _binary_op("less", "lt", "x1 < x2, elementwise (bool).")
less_equal = _binary_op("less_equal", "le", "x1 <= x2, elementwise (bool).")
greater = _binary_op("greater", "gt", "x1 > x2, elementwise (bool).")
greater_equal = _binary_op("greater_equal", "ge", "x1 >= x2, elementwise (bool).")


def _to_float_operand(x, who):
    """For true division: ints and bools as float64 (Python scalars stay
    Python floats, so they remain weak)."""
    x = _operand(x, who)
    if isinstance(x, (bool, int)) and not isinstance(x, np.generic):
        return float(x)
    dt, _ = _info(x)
    if _is_float(dt):
        return x
    return _cast(x, _F64)


@_op("x1", "x2")
def divide(x1, x2):
    """x1 / x2 (true division): integer and bool inputs give float64."""
    x1 = _operand(x1, "divide")
    x2 = _operand(x2, "divide")
    dt, _ = _result_type(_info(x1), _info(x2))
    if not _is_float(dt):
        x1 = _to_float_operand(x1, "divide")
        x2 = _to_float_operand(x2, "divide")
    return _apply("div", x1, x2)


true_divide = divide


@_op("x1", "x2")
def floor_divide(x1, x2):
    """x1 // x2, elementwise (integer division by zero gives 0, as NumPy)."""
    return _apply("floordiv", _operand(x1, "floor_divide"), _operand(x2, "floor_divide"))


def _to_bool(x, who):
    x = _operand(x, who)
    if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
        return builtins.bool(x)
    dt, _ = _info(x)
    if dt == _BOOL:
        return x
    return _apply("ne", _lift(x), 0)


@_op("x1", "x2")
def logical_and(x1, x2):
    """Truth of x1 and x2, elementwise (non-bool inputs: nonzero is true)."""
    a, b = _to_bool(x1, "logical_and"), _to_bool(x2, "logical_and")
    if not isinstance(a, Tracer) and not isinstance(b, Tracer):
        a = _lift(a)
    return _apply("logical_and", a, b)


@_op("x1", "x2")
def logical_or(x1, x2):
    """Truth of x1 or x2, elementwise (non-bool inputs: nonzero is true)."""
    a, b = _to_bool(x1, "logical_or"), _to_bool(x2, "logical_or")
    if not isinstance(a, Tracer) and not isinstance(b, Tracer):
        a = _lift(a)
    return _apply("logical_or", a, b)


# ---------------------------------------------------------------------------
# elementwise, one operand

def _unary_op(name, prim, doc):
    def impl(x):
        return _apply(prim, _operand(x, name))
    impl.__name__ = impl.__qualname__ = name
    impl.__doc__ = doc
    return _op("x")(impl)


exp = _unary_op("exp", "exp", "e**x, elementwise (ints become float64).")
expm1 = _unary_op("expm1", "expm1", "e**x - 1, accurate near 0.")
log = _unary_op("log", "log", "Natural logarithm, elementwise.")
log1p = _unary_op("log1p", "log1p", "log(1 + x), accurate near 0.")
sqrt = _unary_op("sqrt", "sqrt", "Square root, elementwise.")
tanh = _unary_op("tanh", "tanh", "Hyperbolic tangent, elementwise.")
sin = _unary_op("sin", "sin", "Sine, elementwise.")
cos = _unary_op("cos", "cos", "Cosine, elementwise.")
stop_gradient = _unary_op("stop_gradient", "stop_gradient",
                          "x itself, but treated as a constant by grad, value_and_grad and vjp "
                          "(as jax.lax.stop_gradient); also cjit.stop_gradient.")


@_op("x")
def negative(x):
    """-x, elementwise (TypeError on bool, as NumPy)."""
    x = _operand(x, "negative")
    if _info(x)[0] == _BOOL:
        raise TypeError("cjit.numpy.negative: the boolean negative is not supported, use "
                        "logical_not instead (as NumPy)")
    return _apply("neg", x)


@_op("x")
def abs(x):
    """|x|, elementwise."""
    x = _operand(x, "abs")
    if _info(x)[0] == _BOOL:
        return _lift(x)
    return _apply("abs", x)


absolute = abs


@_op("x")
def sign(x):
    """-1, 0 or 1 (nan for nan), elementwise; TypeError on bool as NumPy."""
    x = _operand(x, "sign")
    if _info(x)[0] == _BOOL:
        raise TypeError("cjit.numpy.sign: not defined for bool (as NumPy)")
    return _apply("sign", x)


@_op("x")
def square(x):
    """x * x, elementwise."""
    x = _lift(_operand(x, "square"))
    return x.trace.apply("mul", x, x)


@_op("x")
def reciprocal(x):
    """1 / x on float inputs.  Integer and bool inputs raise TypeError (NumPy
    returns an integer reciprocal, which is almost never what is meant)."""
    x = _operand(x, "reciprocal")
    dt, _ = _info(x)
    if not _is_float(dt):
        raise TypeError(f"cjit.numpy.reciprocal: supports float inputs only, got {dt}; use "
                        f"1.0 / x for a float result")
    return _apply("reciprocal", x)


# on ints and bools the graph builder returns the operand itself (NumPy 2
# keeps their dtype)
floor = _unary_op("floor", "floor", "Round toward -inf, elementwise (ints and bools unchanged).")
ceil = _unary_op("ceil", "ceil", "Round toward +inf, elementwise (ints and bools unchanged).")


# on ints and bools the graph builder answers with a constant (False, True)
isnan = _unary_op("isnan", "isnan", "x is nan, elementwise (always False for ints and bools).")
isfinite = _unary_op("isfinite", "isfinite",
                     "x is neither inf nor nan, elementwise (always True for ints, bools).")


@_op("x")
def logical_not(x):
    """not x, elementwise (non-bool inputs: zero is false)."""
    x = _operand(x, "logical_not")
    if _info(x)[0] == _BOOL:
        return _apply("logical_not", x)
    return _apply("eq", _lift(x), 0)


@_op("x")
def astype(x, dtype, copy=True):
    """x converted to dtype (float -> int truncates toward zero)."""
    dt = canonical_dtype(dtype)
    x = _lift(_operand(x, "astype"))
    if x.dtype == dt and not x.weak:
        return x
    return x.trace.apply("cast", x, dtype=dt.name)


@_op("a", "a_min", "a_max", "min", "max")
def clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None):
    """a limited to [a_min, a_max] (either bound may be None)."""
    if out is not None:
        raise TypeError("cjit.numpy.clip: out= is not supported")
    if min is not None:
        if a_min is not None:
            raise TypeError("cjit.numpy.clip: pass a_min or min, not both")
        a_min = min
    if max is not None:
        if a_max is not None:
            raise TypeError("cjit.numpy.clip: pass a_max or max, not both")
        a_max = max
    r = _lift(_operand(a, "clip"))
    if a_min is not None:
        r = r.trace.apply("maximum", r, _operand(a_min, "clip"))
    if a_max is not None:
        r = r.trace.apply("minimum", r, _operand(a_max, "clip"))
    return r


@_op("condition", "x", "y")
def where(condition, x=None, y=None):
    """x where condition is true, y elsewhere (with broadcasting)."""
    if x is None and y is None:
        raise NotImplementedError("cjit.numpy.where(condition) with one argument has a "
                                  "data-dependent shape, which cjit cannot compile; use "
                                  "where(condition, x, y)")
    if x is None or y is None:
        raise ValueError("cjit.numpy.where: either both or neither of x and y should be given")
    c = _to_bool(condition, "where")
    if not isinstance(c, Tracer):
        c = _lift(c)
    return c.trace.apply("select", c, _operand(x, "where"), _operand(y, "where"))


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


def _accumulate(name, a, axis, dtype, out, keepdims, initial, where):
    """sum or prod: bool and int32 inputs accumulate as int64, as NumPy.  With
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
    elif x.dtype in (_BOOL, _I32):
        x = _cast(x, _I64)
    r = _reduce("reduce_" + name, x, axes, keepdims)
    if want is not None and r.dtype != want:
        r = _cast(r, want)
    return r


@_op("a")
def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Sum over axis (None: all); bool and int32 inputs sum as int64, as NumPy."""
    return _accumulate("sum", a, axis, dtype, out, keepdims, initial, where)


@_op("a")
def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Product over axis (None: all); bool and int32 inputs as int64, as NumPy."""
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
        work = dt if _is_float(dt) else _F64
    else:
        dt = None
        work = x.dtype if _is_float(x.dtype) else _F64
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
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None):
    """Variance over axis, two-pass (mean first), divided by count - ddof."""
    _check_reduce_args("var", out, None, where)
    x = _lift(_operand(a, "var"))
    axes = _norm_axes(axis, x.ndim)
    if dtype is not None:
        dt = canonical_dtype(dtype)
        work = dt if _is_float(dt) else _F64
    else:
        dt = None
        work = x.dtype if _is_float(x.dtype) else _F64
    x = _cast(x, work)
    t = x.trace
    m = _mean_t(x, axes, None, True)
    d = t.apply("sub", x, m)
    s = _reduce("reduce_sum", t.apply("mul", d, d), axes, keepdims)
    denom = builtins.max(_count_of(x.shape, axes) - ddof, 0)
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


# ---------------------------------------------------------------------------
# linear algebra

def _common(xs, who):
    dt, _ = _result_type(*[_info(x) for x in xs])
    out = []
    for x in xs:
        x = _lift(x, who)
        if x.dtype != dt:
            x = x.trace.apply("cast", x, dtype=dt.name)
        out.append(x)
    return out


@_op("x1", "x2")
def matmul(x1, x2):
    """NumPy matmul: 1-D, 2-D and batched with broadcasting."""
    a = _lift(_operand(x1, "matmul"))
    b = _lift(_operand(x2, "matmul"))
    for i, v in enumerate((a, b)):
        if v.ndim == 0:
            raise _error(ValueError, "matmul", f"input operand {i} does not have enough "
                         f"dimensions (has 0, requires at least 1)", a, b)
    if a.dtype != b.dtype or a.weak != b.weak:
        a, b = _common([a, b], "matmul")
    t = a.trace
    if a.dtype == _BOOL:
        # NumPy: a logical or of ands.  As a count of true products, != 0.
        a = t.apply("cast", a, dtype="int64")
        b = t.apply("cast", b, dtype="int64")
        return t.apply("ne", t.apply("matmul", a, b), 0)
    return t.apply("matmul", a, b)


@_op("a", "b")
def dot(a, b):
    """NumPy dot for 0-D (multiply), 1-D and 2-D operands.  Higher ranks raise
    NotImplementedError: use matmul, whose batching rule differs from dot's."""
    a = _operand(a, "dot")
    b = _operand(b, "dot")
    sa, sb = _shape_of(a), _shape_of(b)
    if len(sa) == 0 or len(sb) == 0:
        return multiply(a, b)
    if len(sa) > 2 or len(sb) > 2:
        raise _error(NotImplementedError, "dot", "N-D dot is not supported; use matmul "
                     "(batched, with broadcasting)", a, b)
    return matmul(a, b)


@_op("a")
def transpose(a, axes=None):
    """Permutes the axes (None: reverses them)."""
    x = _lift(_operand(a, "transpose"))
    n = x.ndim
    if axes is None:
        perm = tuple(range(n - 1, -1, -1))
    else:
        if isinstance(axes, (int, np.integer)):
            axes = (axes,)
        if len(axes) != n:
            raise _error(ValueError, "transpose", f"axes {tuple(axes)} don't match array", x)
        perm = tuple(_norm_axis(ax, n) for ax in axes)
        if len(set(perm)) != n:
            raise _error(ValueError, "transpose", f"repeated axis in {tuple(axes)}", x)
    if perm == tuple(range(n)):
        return x
    return x.trace.apply("transpose", x, perm=perm)


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


@_op("a")
def reshape(a, shape, order="C"):
    """Same elements in row-major order, new shape (one entry may be -1)."""
    if order != "C":
        raise NotImplementedError(f"cjit.numpy.reshape: order={order!r}; only 'C' is supported")
    x = _lift(_operand(a, "reshape"))
    return _reshape_t(x, _resolve_shape(x, shape))


@_op("a")
def ravel(a, order="C"):
    """The flattened array (row-major)."""
    if order != "C":
        raise NotImplementedError(f"cjit.numpy.ravel: order={order!r}; only 'C' is supported")
    x = _lift(_operand(a, "ravel"))
    return _reshape_t(x, (x.size,))


@_op("a")
def expand_dims(a, axis):
    """Inserts length-1 axes at the positions `axis` (int or tuple) of the result."""
    x = _lift(_operand(a, "expand_dims"))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out_ndim = x.ndim + len(axes)
    norm = [_norm_axis(ax, out_ndim) for ax in axes]
    if len(set(norm)) != len(norm):
        raise _error(ValueError, "expand_dims", f"repeated axis in {tuple(axes)}", x)
    it = iter(x.shape)
    shape = tuple(1 if i in norm else next(it) for i in range(out_ndim))
    return _reshape_t(x, shape)


@_op("a")
def squeeze(a, axis=None):
    """Removes length-1 axes (all of them, or those in `axis`)."""
    x = _lift(_operand(a, "squeeze"))
    if axis is None:
        shape = tuple(d for d in x.shape if d != 1)
    else:
        axes = _norm_axes(axis, x.ndim)
        for ax in axes:
            if x.shape[ax] != 1:
                raise _error(ValueError, "squeeze", f"cannot select axis {ax} to squeeze out: it "
                             f"has size {x.shape[ax]}, not one", x)
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    return _reshape_t(x, shape)


@_op("array")
def broadcast_to(array, shape):
    """NumPy broadcast_to."""
    x = _lift(_operand(array, "broadcast_to"))
    shape = _shape_arg(shape, "broadcast_to")
    if tuple(x.shape) == shape:
        return x
    return x.trace.apply("broadcast", x, shape=shape)


def _seq_arg(arrays, who):
    if isinstance(arrays, (Tracer, np.ndarray)):
        x = _lift(arrays, who)
        if x.ndim == 0:
            raise TypeError(f"cjit.numpy.{who}: expected a sequence of arrays, got a 0-d array")
        return [x[i] for i in range(x.shape[0])]
    if not isinstance(arrays, (list, tuple)):
        raise TypeError(f"cjit.numpy.{who}: expected a sequence of arrays, got "
                        f"{type(arrays).__name__}")
    return [_operand(x, who) for x in arrays]


@_op(seq=("arrays",))
def concatenate(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    """Joins arrays along an existing axis (axis=None: flattens them first)."""
    if out is not None:
        raise TypeError("cjit.numpy.concatenate: out= is not supported")
    xs = _seq_arg(arrays, "concatenate")
    if not xs:
        raise _error(ValueError, "concatenate", "need at least one array to concatenate")
    if dtype is not None:
        dt = canonical_dtype(dtype)
        xs = [_cast(x, dt) for x in xs]
    else:
        xs = _common(xs, "concatenate")
    if axis is None:
        xs = [_reshape_t(x, (x.size,)) for x in xs]
        ax = 0
    else:
        nd = xs[0].ndim
        if nd == 0:
            raise _error(ValueError, "concatenate", "zero-dimensional arrays cannot be "
                         "concatenated", *xs)
        for i, x in enumerate(xs):
            if x.ndim != nd:
                raise _error(ValueError, "concatenate",
                             f"all the input arrays must have the same number of dimensions, but "
                             f"the array at index 0 has {nd} dimension(s) and the array at index "
                             f"{i} has {x.ndim} dimension(s)", *xs)
        ax = _norm_axis(axis, nd)
    if len(xs) == 1:
        return xs[0]
    return xs[0].trace.apply("concatenate", *xs, axis=ax)


@_op(seq=("arrays",))
def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    """Joins arrays of one shape along a new axis."""
    if out is not None:
        raise TypeError("cjit.numpy.stack: out= is not supported")
    xs = _seq_arg(arrays, "stack")
    if not xs:
        raise _error(ValueError, "stack", "need at least one array to stack")
    shapes = {_shape_of(x) for x in xs}
    if len(shapes) != 1:
        raise _error(ValueError, "stack", "all input arrays must have the same shape", *xs)
    shape = shapes.pop()
    ax = _norm_axis(axis, len(shape) + 1)
    new_shape = shape[:ax] + (1,) + shape[ax:]
    xs = [_reshape_t(_lift(x, "stack"), new_shape) for x in xs]
    return concatenate(xs, axis=ax, dtype=dtype)


def shape(a):
    """The shape of a (works on traced values)."""
    return _shape_of(a)


def ndim(a):
    return len(_shape_of(a))


def size(a, axis=None):
    s = _shape_of(a)
    if axis is not None:
        return s[_norm_axis(axis, len(s))]
    n = 1
    for d in s:
        n *= d
    return n


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
        return _I64
    if isinstance(v, float):
        return _F64
    return np.asarray(v).dtype


def _typed_scalar(v, dt):
    if dt == _BOOL:
        return builtins.bool(v)
    if dt.kind == "i":
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


def full(shape, fill_value, dtype=None, order="C"):
    """An array of `shape` filled with fill_value; the dtype is fill_value's
    unless given (int -> int64, float -> float64, bool -> bool)."""
    s = _shape_for_creation(shape, "full")
    dt = canonical_dtype(dtype if dtype is not None else _fill_dtype(fill_value))
    if isinstance(fill_value, Tracer):
        return _full_traced(fill_value.trace, s, fill_value, dt)
    trace = current_trace()
    if trace is None:
        return np.full(s, fill_value, dtype=dt)
    return _full_traced(trace, s, fill_value, dt)


def zeros(shape, dtype=float, order="C"):
    """An array of zeros (float64 unless dtype is given)."""
    return full(shape, 0, canonical_dtype(dtype))


def ones(shape, dtype=float, order="C"):
    """An array of ones (float64 unless dtype is given)."""
    return full(shape, 1, canonical_dtype(dtype))


def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None):
    """full() with a's shape and dtype unless given."""
    dt = canonical_dtype(dtype if dtype is not None else _fill_like_dtype(a))
    s = _shape_of(a) if shape is None else shape
    return full(s, fill_value, dt)


def _fill_like_dtype(a):
    if isinstance(a, (Tracer, np.ndarray, np.generic)):
        return a.dtype
    return _fill_dtype(a)


def zeros_like(a, dtype=None, order="K", subok=True, shape=None):
    """zeros with a's shape and dtype unless given."""
    return full_like(a, 0, dtype, shape=shape)


def ones_like(a, dtype=None, order="K", subok=True, shape=None):
    """ones with a's shape and dtype unless given."""
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


def arange(start, stop=None, step=None, dtype=None):
    """Evenly spaced values in [start, stop): int64 for integer arguments,
    float64 otherwise (NumPy's defaults).  The bounds must be concrete."""
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
        dt = _I64 if all_int else _F64
    else:
        dt = canonical_dtype(dtype)
    trace = current_trace()
    if trace is None:
        return np.arange(start, stop, step, dtype=dt)
    n = builtins.max(int(math.ceil((stop - start) / step)), 0) if not all_int else \
        builtins.max(len(range(start, stop, step)), 0)
    if all_int:
        work = _I64
        if not _is_float(dt) and dt != _BOOL:
            work = _I64
        else:
            work = _F64
    else:
        work = _F64
    r = trace.apply("iota", shape=(n,), axis=0, dtype=work.name)
    if work == _F64 and not all_int:
        delta = float(start + step) - float(start)   # NumPy steps by the first difference
        if delta != 1.0:
            r = trace.apply("mul", r, delta)
        if start != 0:
            r = trace.apply("add", r, float(start))
    else:
        if step != 1:
            r = trace.apply("mul", r, step)
        if start != 0:
            r = trace.apply("add", r, start)
    if r.dtype != dt:
        r = trace.apply("cast", r, dtype=dt.name)
    return r


def asarray(a, dtype=None, order=None, *, copy=None):
    """a as an array: a traced value inside a trace, a NumPy array outside.
    copy as NumPy's outside a trace (True: always a new array; False:
    ValueError if one would be needed); traced values are immutable, so a
    trace ignores it."""
    if isinstance(a, Tracer):
        if dtype is None:
            return a
        return astype(a, dtype)
    if type(a) in (list, tuple) and any(isinstance(y, Tracer) for y in _flat_seq(a)):
        r = _stack_nested(a)
        return r if dtype is None else astype(r, dtype)
    dt = None if dtype is None else canonical_dtype(dtype)
    outside = current_trace() is None
    arr = np.asarray(a, dtype=dt, copy=copy if outside else None)
    canonical_dtype(arr.dtype, "cjit.numpy.asarray: dtype")
    if outside:
        return arr
    return _lift(arr)


def array(object, dtype=None, copy=True, order="K", ndmin=0):
    """Like asarray (a copy outside a trace)."""
    if ndmin:
        raise NotImplementedError("cjit.numpy.array: ndmin is not supported")
    if current_trace() is None and not isinstance(object, Tracer) and not (
            type(object) in (list, tuple) and any(isinstance(y, Tracer)
                                                  for y in _flat_seq(object))):
        dt = None if dtype is None else canonical_dtype(dtype)
        arr = np.array(object, dtype=dt, copy=True)
        canonical_dtype(arr.dtype, "cjit.numpy.array: dtype")
        return arr
    return asarray(object, dtype)


# ---------------------------------------------------------------------------
# indexing (called by Tracer.__getitem__ and Tracer.__iter__)

def _index_key_item(k):
    """Classifies one index item: 'int', 'slice', 'none', 'ellipsis'."""
    if k is None:
        return "none"
    if k is Ellipsis:
        return "ellipsis"
    if isinstance(k, slice):
        return "slice"
    if isinstance(k, (bool, np.bool_)):
        raise NotImplementedError("cjit: indexing with a boolean is advanced indexing; only basic "
                                  "indexing (ints, slices, None, ...) is supported")
    if isinstance(k, Tracer):
        raise NotImplementedError(
            "cjit: indexing with a traced value is not supported (it needs a gather); only basic "
            "indexing with Python ints, slices, None and ... is supported. Make the index a "
            "static argument if it is known at trace time")
    if isinstance(k, (np.ndarray, list, tuple)):
        raise NotImplementedError("cjit: indexing with arrays or lists (advanced indexing, "
                                  "boolean masks) is not supported; only basic indexing with "
                                  "ints, slices, None and ... is supported")
    if isinstance(k, (int, np.integer)):
        return "int"
    if hasattr(type(k), "__index__"):
        return "int"
    raise IndexError("only integers, slices (`:`), ellipsis (`...`) and None (`numpy.newaxis`) "
                     f"are valid indices in cjit; got {type(k).__name__}")


def _plan_index(shape, key):
    """Normalizes a basic index against `shape`.  Returns (start, stop, step,
    out_shape) for a slice over every dim followed by a reshape to
    out_shape; raises IndexError as NumPy does."""
    if not isinstance(key, tuple):
        key = (key,)
    kinds = [_index_key_item(k) for k in key]
    nell = kinds.count("ellipsis")
    if nell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    nreal = builtins.sum(1 for k in kinds if k in ("int", "slice"))
    ndim = len(shape)
    if nreal > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but {nreal} "
                         f"were indexed")
    if nell == 0:
        key = key + (Ellipsis,)
        kinds = kinds + ["ellipsis"]
    start, stop, step, out_shape = [], [], [], []
    dim = 0
    for k, kind in zip(key, kinds):
        if kind == "none":
            out_shape.append(1)
        elif kind == "ellipsis":
            for _ in range(ndim - nreal):
                n = shape[dim]
                start.append(0)
                stop.append(n)
                step.append(1)
                out_shape.append(n)
                dim += 1
        elif kind == "int":
            n = shape[dim]
            i = operator.index(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {dim} with size {n}")
            if i < 0:
                i += n
            start.append(i)
            stop.append(i + 1)
            step.append(1)
            dim += 1
        else:
            n = shape[dim]
            b, e, s = k.indices(n)
            length = len(range(b, e, s))
            if length == 0:
                b, e, s = 0, 0, 1
            start.append(b)
            stop.append(e)
            step.append(s)
            out_shape.append(length)
            dim += 1
    return tuple(start), tuple(stop), tuple(step), tuple(out_shape)


def _getitem(x, key):
    """x[key] for basic indexing: ints, slices, None, ... and tuples of them."""
    if not isinstance(x, Tracer):
        if current_trace() is None:
            return np.asarray(x)[key]
        x = _lift(x)
    shape = tuple(x.shape)
    try:
        start, stop, step, out_shape = _plan_index(shape, key)
    except (IndexError, NotImplementedError) as e:
        raise _error(type(e), "getitem", str(e), x) from None
    r = x
    whole = all(b == 0 and e == n and s == 1 for b, e, s, n in zip(start, stop, step, shape))
    if not whole:
        r = x.trace.apply("slice", x, start=start, stop=stop, step=step)
    return _reshape_t(r, out_shape)


def _iter(x):
    """Iterates over axis 0."""
    shape = _shape_of(x)
    if len(shape) == 0:
        raise TypeError("iteration over a 0-d array")
    for i in range(shape[0]):
        yield _getitem(x, i)


def _len(x):
    shape = _shape_of(x)
    if len(shape) == 0:
        raise TypeError("len() of unsized object")
    return shape[0]


# ---------------------------------------------------------------------------
# NumPy ufuncs on traced values (Tracer.__array_ufunc__ forwards here)

# The ufuncs behind Python's operators: `ndarray + tracer` calls np.add,
# which must run as the Tracer's own (reflected) operator.
_OPERATOR_UFUNCS = {
    "add": ("__add__", "__radd__"), "subtract": ("__sub__", "__rsub__"),
    "multiply": ("__mul__", "__rmul__"), "divide": ("__truediv__", "__rtruediv__"),
    "floor_divide": ("__floordiv__", "__rfloordiv__"), "power": ("__pow__", "__rpow__"),
    "matmul": ("__matmul__", "__rmatmul__"), "bitwise_and": ("__and__", "__rand__"),
    "bitwise_or": ("__or__", "__ror__"), "bitwise_xor": ("__xor__", "__rxor__"),
    "less": ("__lt__", "__gt__"), "less_equal": ("__le__", "__ge__"),
    "greater": ("__gt__", "__lt__"), "greater_equal": ("__ge__", "__le__"),
    "equal": ("__eq__", "__eq__"), "not_equal": ("__ne__", "__ne__"),
}


def _tracer_array_ufunc(self, ufunc, method, *inputs, **kwargs):
    """Tracer.__array_ufunc__: a binary operator's ufunc with a NumPy operand
    on the left runs the Tracer's operator (an in-place `a += t` rebinds `a`
    to the traced result, as before); any other NumPy ufunc raises TypeError
    naming the cjit.numpy function to call instead."""
    name = getattr(ufunc, "__name__", str(ufunc))
    out = kwargs.pop("out", None)
    pair = _OPERATOR_UFUNCS.get(name)
    if (pair is not None and method == "__call__" and not kwargs and len(inputs) == 2
            and (out is None or (len(out) == 1 and out[0] is inputs[0]))):
        a, b = inputs
        r = getattr(a, pair[0])(b) if isinstance(a, Tracer) else getattr(b, pair[1])(a)
        if r is not NotImplemented:
            return r
    called = f"numpy.{name}" + ("" if method == "__call__" else f".{method}")
    traced = ", ".join(f"{t.dtype.name}[{','.join(map(str, t.shape))}]"
                       for t in inputs if isinstance(t, Tracer))
    fn = globals().get(name)
    if method == "__call__" and callable(fn) and not name.startswith("_"):
        hint = f"use cjit.numpy.{name} instead (import cjit.numpy as cnp; cnp.{name}(...))"
    elif method == "__call__":
        hint = f"cjit.numpy has no {name}: write it with cjit.numpy functions"
    else:
        hint = "use the cjit.numpy function that computes it instead (cnp.sum for " \
               "numpy.add.reduce, say)"
    raise TypeError(f"cjit: {called} was called on a traced value ({traced}) at "
                    f"{user_location()}: NumPy functions need concrete arrays, which do not "
                    f"exist while tracing; {hint}")
