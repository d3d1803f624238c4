"""cjit.numpy's elementwise functions that map to one primitive (or nearly)."""
from __future__ import annotations

import builtins

import numpy as np

from .._dtypes import requested_dtype
from .._dtypes import canonical_dtype
from .. import _cjit
from .._cjit import Tracer
from ._complex_dispatch import complex_aware
from ._core import (_BOOL, _F64, _apply, _cast, _info, _is_float, _lift, _op, _operand,
                    _result_type)

# (and at the end, every elementwise unary primitive's NumPy name: _UNARY)
__all__ = ["add", "subtract", "multiply", "power", "maximum", "minimum", "equal", "not_equal",
    "less", "less_equal", "greater", "greater_equal", "divide", "true_divide", "floor_divide",
    "logical_and", "logical_or", "stop_gradient", "negative", "abs", "absolute", "sign", "square",
    "reciprocal", "logical_not", "bitwise_invert", "bitwise_not", "invert", "astype", "clip",
    "where"]


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
# elementwise, one operand: the primitives' own functions come from the op
# table at the end of this file; those below keep NumPy's rules where the
# primitive has others (bool and int operands)

def _unary_op(name, prim, doc):
    def impl(x):
        return _apply(prim, _operand(x, name))
    impl.__name__ = impl.__qualname__ = name
    impl.__doc__ = doc
    return _op("x")(impl)


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


@_op("x")
def logical_not(x):
    """not x, elementwise (non-bool inputs: zero is false)."""
    x = _operand(x, "logical_not")
    if _info(x)[0] == _BOOL:
        return _apply("logical_not", x)
    return _apply("eq", _lift(x), 0)


@_op("x")
def bitwise_invert(x):
    """~x: logical not on bools, every bit flipped on integers."""
    x = _lift(_operand(x, "bitwise_invert"))
    t = x.trace
    if x.dtype == _BOOL:
        return t.apply("logical_not", x)
    if _is_float(x.dtype):
        raise TypeError("cjit.numpy.bitwise_invert: not defined for floats (as NumPy)")
    return t.apply("bitwise_not", x)


bitwise_not = invert = bitwise_invert


@_op("x")
def astype(x, dtype, copy=True, *, device=None):
    """x converted to dtype (float -> int truncates toward zero); device= as
    the array API's (the CPU only)."""
    if device is not None and device != "cpu" and getattr(device, "platform", None) != "cpu":
        raise ValueError(f"cjit.numpy.astype: device={device!r}; cjit runs on the CPU only")
    dt = canonical_dtype(requested_dtype(dtype, "astype"))
    x = _lift(_operand(x, "astype"))
    if x.dtype == dt and not x.weak:
        return x
    return x.trace.apply("cast", x, dtype=dt.name)


@_op("a", "min", "max", "a_min", "a_max")
def clip(a, min=None, max=None, out=None, *, a_min=None, a_max=None):
    """a limited to [min, max] (either bound may be None); NumPy's keyword
    names a_min and a_max are accepted too."""
    if out is not None:
        raise TypeError("cjit.numpy.clip: out= is not supported")
    if a_min is not None:
        if min is not None:
            raise TypeError("cjit.numpy.clip: pass a_min or min, not both")
        min = a_min
    if a_max is not None:
        if max is not None:
            raise TypeError("cjit.numpy.clip: pass a_max or max, not both")
        max = a_max
    a_min, a_max = min, max
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
# every other elementwise unary primitive (csrc/ops_unary.def): a function
# of its NumPy name that applies it, documented by its record

_NOTES = {"float": "integer and bool inputs compute in float64 (float32 without x64)",
          "round": "integers and bools unchanged", "test": "a constant for integers and bools",
          "nobool": "not for bool", "bits": "integers and bools only"}


def _unary_doc(rec):
    note = _NOTES.get(rec["dtypes"])
    doc = rec["doc"][0].upper() + rec["doc"][1:]
    return f"{doc}, elementwise (the primitive `{rec['name']}`{'; ' + note if note else ''})."


_UNARY = [r for r in _cjit.op_table() if r["kind"] == "unary" and r.get("numpy")]
for _r in _UNARY:
    if _r["numpy"] not in globals():
        globals()[_r["numpy"]] = _unary_op(_r["numpy"], _r["name"], _unary_doc(_r))
__all__ += [r["numpy"] for r in _UNARY if r["numpy"] not in __all__]
del _r


# complex arguments: the registry's implementation, or NotImplementedError
# (_complex_dispatch.py; the implementations are registered in _complex_api.py)
complex_aware(globals(), __all__)
