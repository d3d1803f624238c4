"""cjit.numpy's elementwise math composed from the core's primitives:
inverse trigonometric and hyperbolic functions, logarithms in other bases,
rounding, remainders, sign manipulation, NaN handling.

Every function is a small graph of existing primitives (add, mul, div,
exp, expm1, log, log1p, sqrt, sin, cos, floor, select, compare), so it fuses
with its neighbours and its gradient comes from theirs.  Two rules recur:

- a branch not taken by a select still runs, and the select's gradient
  multiplies its cotangent (0) by the branch's derivative: a branch that
  could overflow or divide by zero gets a harmless input instead ("safe"
  operands below), or 0 * inf would turn the gradient into nan;
- |x| is taken as select(x < 0, -x, x), not abs, where a function is odd:
  abs has slope 0 at 0, which would zero the gradient there.

Accuracy (measured against NumPy in tests/test_numpy_math.py and
docs/API.md): atan/atan2/asin/acos within 2 ulp, asinh/acosh/atanh within
3 ulp, sinh/cosh within 3 ulp, tan as sin/cos within 3 ulp where cos is not
tiny.
"""
from __future__ import annotations

from .._dtypes import default_float

import math

from ._complex_dispatch import complex_aware
from ._core import (_BOOL, _F32, _F64, _apply, _common, _info, _is_float, _lift, _op, _operand,
                    _result_type, _with_jvp, _error)
from ._elementwise import _to_bool, floor_divide, power

__all__ = ["arctan", "atan", "arctan2", "atan2", "arcsin", "asin", "arccos", "acos", "arcsinh",
           "asinh", "arccosh", "acosh", "arctanh", "atanh", "sinh", "cosh", "tan", "log2",
           "log10", "exp2", "signbit", "copysign", "hypot", "logaddexp", "logaddexp2", "round",
           "around", "trunc", "fix", "remainder", "divmod", "mod", "fmod", "positive", "pow", "fmax",
           "fmin", "sinc", "degrees", "radians", "deg2rad", "rad2deg", "nan_to_num", "isinf",
           "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "left_shift",
           "bitwise_right_shift", "right_shift", "real", "imag", "conj", "conjugate",
           "isposinf", "isneginf", "heaviside", "float_power", "exp10"]

_PIO2_HI = 1.5707963267948966      # pi/2 rounded to float64
_PIO2_LO = 6.123233995736766e-17   # pi/2 - _PIO2_HI
_PI_HI = 3.141592653589793
_PI_LO = 1.2246467991473532e-16
_PIO4 = 0.7853981633974483
_TAN_PI_8 = 0.41421356237309503    # tan(pi/8) = sqrt(2) - 1
_LN2 = 0.6931471805599453
_LN10 = 2.302585092994046
_BIG = 2.0 ** 28                   # past this, x*x no longer matters next to x in asinh/acosh


def _f(x, who):
    """x as a float Tracer: ints and bools become the default float (float64,
    as NumPy's math; float32 with x64 off)."""
    x = _lift(_operand(x, who))
    if not _is_float(x.dtype):
        x = x.trace.apply("cast", x, dtype=default_float().name)
    return x


def _w(c, a, b):
    return _apply("select", c, a, b)


def _sabs(x):
    """|x| whose gradient at 0 is 1 (see the module's note); -0 becomes +0
    (x + 0.0), so that callers put the sign back from signbit alone."""
    t = x.trace
    return t.apply("select", t.apply("lt", x, 0), t.apply("neg", x), t.apply("add", x, 0.0))


def _odd(x, r):
    """r (computed from |x|, so >= +0) carrying x's sign bit: -0 gives -0."""
    t = x.trace
    return t.apply("select", _signbit_f(x), t.apply("neg", r), r)


# Taylor coefficients of atan(z)/z in s = z*z: (-1)^k / (2k+1).  On
# |z| <= tan(pi/8), s <= 0.1716 and the k-th term is below 0.1716^k/(2k+1):
# 21 terms reach 2^-58 (float64), 9 terms 2^-27 (float32).
_ATAN_TERMS = {_F64: 21, _F32: 9}


def _atan_small(z):
    t = z.trace
    n = _ATAN_TERMS[z.dtype]
    s = t.apply("mul", z, z)
    p = t.apply("constant", value=(-1.0) ** (n - 1) / (2 * n - 1), dtype=z.dtype.name,
                shape=(), weak=False)
    for k in range(n - 2, -1, -1):
        p = t.apply("add", t.apply("mul", p, s), (-1.0) ** k / (2 * k + 1))
    return t.apply("mul", z, p)


def _atan_unit(a):
    """atan(a) for a in [0, 1] (nan stays nan): past tan(pi/8) it uses
    atan(a) = pi/4 + atan((a - 1) / (a + 1))."""
    t = a.trace
    mid = t.apply("gt", a, _TAN_PI_8)
    z = t.apply("select", mid, t.apply("div", t.apply("sub", a, 1.0), t.apply("add", a, 1.0)), a)
    p = _atan_small(z)
    return t.apply("select", mid, t.apply("add", p, _PIO4), p)


def _pio2_minus(r):
    t = r.trace
    return t.apply("add", t.apply("sub", _PIO2_HI, r), _PIO2_LO)


@_op("x")
def arctan(x):
    """Inverse tangent: reduced to [0, 1] by atan(y) = pi/2 - atan(1/y),
    then to [0, tan(pi/8)], then a Taylor polynomial (within 2 ulp)."""
    x = _f(x, "arctan")
    t = x.trace
    y = _sabs(x)
    big = t.apply("gt", y, 1.0)
    inv = t.apply("div", 1.0, t.apply("select", big, y, 1.0))
    r = _atan_unit(t.apply("select", big, inv, y))
    return _odd(x, t.apply("select", big, _pio2_minus(r), r))


def _signbit_f(x):
    # the sign bit read through a bit cast to the signed integer of the same
    # width: true for -0.0, -inf and a nan with its sign bit set, as NumPy
    t = x.trace
    as_int = "int32" if x.dtype == _F32 else "int64"
    return t.apply("lt", t.apply("bitcast", x, dtype=as_int), 0)


@_op("x1", "x2")
def arctan2(x1, x2):
    """atan(x1 / x2) in the quadrant of (x2, x1), with IEEE's signed zeros
    and infinities (NumPy's special cases).  Its derivative is a rule of its
    own (_arctan2_tangent): the composition's selects would give the origin
    a finite slope where there is none."""
    y, x = _common([_f(x1, "arctan2"), _f(x2, "arctan2")], "arctan2")
    if tuple(y.shape) != tuple(x.shape):
        shape = _bshape(y.shape, x.shape, "arctan2", y, x)
        y = _bcast(y, shape)
        x = _bcast(x, shape)
    return _with_jvp(_arctan2_value, _arctan2_tangent)(y, x)


def _arctan2_tangent(primals, tangents, out):
    """(x t_y - y t_x) / (x^2 + y^2), as (u_x t_y - u_y t_x) / (m (u_x^2 +
    u_y^2)) with m the larger magnitude and u = . / m, so that nothing
    overflows; nan at the origin and where a leg is infinite, as JAX."""
    (y, x), (ty, tx) = primals, tangents
    t = y.trace
    m = t.apply("maximum", t.apply("abs", y), t.apply("abs", x))
    uy, ux = t.apply("div", y, m), t.apply("div", x, m)
    s2 = t.apply("add", t.apply("mul", uy, uy), t.apply("mul", ux, ux))
    num = t.apply("sub", t.apply("mul", ux, ty), t.apply("mul", uy, tx))
    return t.apply("div", num, t.apply("mul", m, s2))


def _arctan2_value(y, x):
    t = y.trace
    ay, ax = _sabs(y), _sabs(x)
    swap = t.apply("gt", ay, ax)
    num = t.apply("select", swap, ax, ay)
    den = t.apply("select", swap, ay, ax)
    q = t.apply("div", num, t.apply("select", t.apply("eq", den, 0), 1.0, den))
    both_inf = t.apply("logical_and", t.apply("eq", num, math.inf), t.apply("eq", den, math.inf))
    q = t.apply("select", both_inf, 1.0, q)
    r = _atan_unit(q)
    r = t.apply("select", swap, _pio2_minus(r), r)
    r = t.apply("select", _signbit_f(x),
                t.apply("add", t.apply("sub", _PI_HI, r), _PI_LO), r)
    return t.apply("select", _signbit_f(y), t.apply("neg", r), r)


def _bshape(a, b, who, *ops):
    a, b = tuple(a), tuple(b)
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + a
    b = (1,) * (n - len(b)) + b
    out = []
    for p, q in zip(a, b):
        if p != q and p != 1 and q != 1:
            raise _error(ValueError, who, "operands could not be broadcast together", *ops)
        out.append(q if p == 1 else p)
    return tuple(out)


def _bcast(x, shape):
    if tuple(x.shape) == tuple(shape):
        return x
    return x.trace.apply("broadcast", x, shape=tuple(shape))


def _one_minus_sq(x):
    t = x.trace
    return t.apply("sqrt", t.apply("mul", t.apply("sub", 1.0, x), t.apply("add", x, 1.0)))


@_op("x")
def arcsin(x):
    """Inverse sine, as atan2(x, sqrt((1 - x)(1 + x)))."""
    x = _f(x, "arcsin")
    return arctan2._cjit_impl(x, _one_minus_sq(x))


@_op("x")
def arccos(x):
    """Inverse cosine, as atan2(sqrt((1 - x)(1 + x)), x)."""
    x = _f(x, "arccos")
    return arctan2._cjit_impl(_one_minus_sq(x), x)


@_op("x")
def arcsinh(x):
    """Inverse hyperbolic sine: log1p(y + y^2 / (1 + sqrt(1 + y^2))) for
    y = |x| below 2^28, log(y) + log(2) above, with x's sign."""
    x = _f(x, "arcsinh")
    t = x.trace
    y = _sabs(x)
    big = t.apply("gt", y, _BIG)
    ys = t.apply("select", big, 1.0, y)
    yy = t.apply("mul", ys, ys)
    small = t.apply("log1p", t.apply("add", ys, t.apply(
        "div", yy, t.apply("add", t.apply("sqrt", t.apply("add", yy, 1.0)), 1.0))))
    large = t.apply("add", t.apply("log", t.apply("select", big, y, 1.0)), _LN2)
    return _odd(x, t.apply("select", big, large, small))


@_op("x")
def arccosh(x):
    """Inverse hyperbolic cosine: log1p(u + sqrt(2u + u^2)) for u = x - 1,
    log(x) + log(2) past 2^28; nan below 1."""
    x = _f(x, "arccosh")
    t = x.trace
    big = t.apply("gt", x, _BIG)
    u = t.apply("select", big, 0.0, t.apply("sub", x, 1.0))
    small = t.apply("log1p", t.apply("add", u, t.apply("sqrt", t.apply(
        "add", t.apply("mul", u, 2.0), t.apply("mul", u, u)))))
    large = t.apply("add", t.apply("log", t.apply("select", big, x, 1.0)), _LN2)
    r = t.apply("select", big, large, small)
    return t.apply("select", t.apply("lt", x, 1.0), math.nan, r)


@_op("x")
def arctanh(x):
    """Inverse hyperbolic tangent: log1p(2y / (1 - y)) / 2 for y = |x|,
    with x's sign (inf at 1, nan past it)."""
    x = _f(x, "arctanh")
    t = x.trace
    y = _sabs(x)
    r = t.apply("mul", t.apply("log1p", t.apply("div", t.apply("mul", y, 2.0),
                                                 t.apply("sub", 1.0, y))), 0.5)
    return _odd(x, r)


_EXP_SPLIT = 22.0   # past this, e^-y is below half an ulp of e^y


def _exp_big(y, big):
    """e^y as (e^(y/2) / 2) * e^(y/2): no overflow until e^y itself does."""
    t = y.trace
    h = t.apply("exp", t.apply("mul", t.apply("select", big, y, 0.0), 0.5))
    return t.apply("mul", t.apply("mul", h, 0.5), h)


@_op("x")
def sinh(x):
    """Hyperbolic sine: (E + E / (E + 1)) / 2 with E = expm1(|x|) (no
    cancellation near 0), e^|x| / 2 past 22, with x's sign."""
    x = _f(x, "sinh")
    t = x.trace
    y = _sabs(x)
    big = t.apply("gt", y, _EXP_SPLIT)
    e = t.apply("expm1", t.apply("select", big, 0.0, y))
    small = t.apply("mul", t.apply("add", e, t.apply("div", e, t.apply("add", e, 1.0))), 0.5)
    return _odd(x, t.apply("select", big, _exp_big(y, big), small))


@_op("x")
def cosh(x):
    """Hyperbolic cosine: (e + 1/e) / 2 with e = exp(|x|), e^|x| / 2 past 22."""
    x = _f(x, "cosh")
    t = x.trace
    y = _sabs(x)
    big = t.apply("gt", y, _EXP_SPLIT)
    e = t.apply("exp", t.apply("select", big, 0.0, y))
    small = t.apply("mul", t.apply("add", e, t.apply("div", 1.0, e)), 0.5)
    return t.apply("select", big, _exp_big(y, big), small)


@_op("x")
def tan(x):
    """Tangent, as sin(x) / cos(x)."""
    x = _f(x, "tan")
    return x.trace.apply("div", x.trace.apply("sin", x), x.trace.apply("cos", x))


@_op("x")
def log2(x):
    """Base-2 logarithm, log(x) / log(2)."""
    x = _f(x, "log2")
    return x.trace.apply("div", x.trace.apply("log", x), _LN2)


@_op("x")
def log10(x):
    """Base-10 logarithm, log(x) / log(10)."""
    x = _f(x, "log10")
    return x.trace.apply("div", x.trace.apply("log", x), _LN10)


@_op("x")
def exp2(x):
    """2 ** x, elementwise (pow with base 2)."""
    x = _f(x, "exp2")
    return x.trace.apply("pow", 2.0, x)


@_op("x")
def exp10(x):
    """10 ** x, elementwise."""
    x = _f(x, "exp10")
    return x.trace.apply("pow", 10.0, x)


@_op("x")
def signbit(x):
    """True where x's sign bit is set: x < 0, -0.0, -inf and -nan."""
    x = _lift(_operand(x, "signbit"))
    t = x.trace
    if x.dtype == _BOOL:
        return t.apply("ne", x, x)
    if not _is_float(x.dtype):
        return t.apply("lt", x, 0)
    return _signbit_f(x)


@_op("x1", "x2")
def copysign(x1, x2):
    """x1's magnitude with x2's sign (from signbit; a nan x2 counts as +)."""
    a, b = _common([_f(x1, "copysign"), _f(x2, "copysign")], "copysign")
    t = a.trace
    flip = t.apply("ne", _signbit_f(a), _signbit_f(b))
    return t.apply("select", flip, t.apply("neg", a), a)


def _hypot_value(a, b):
    t = a.trace
    a, b = t.apply("abs", a), t.apply("abs", b)
    m = t.apply("maximum", a, b)
    n = t.apply("minimum", a, b)
    ms = t.apply("select", t.apply("logical_or", t.apply("eq", m, 0),
                                   t.apply("eq", m, math.inf)), 1.0, m)
    q = t.apply("div", n, ms)
    r = t.apply("mul", m, t.apply("sqrt", t.apply("add", t.apply("mul", q, q), 1.0)))
    inf = t.apply("logical_or", t.apply("eq", a, math.inf), t.apply("eq", b, math.inf))
    return t.apply("select", inf, math.inf, r)


def _hypot_tangent(primals, tangents, out):
    """(x1 t1 + x2 t2) / r, as (x/m) / sqrt((x1/m)^2 + (x2/m)^2) with m the
    larger magnitude (no overflow; m's own slope cancels, so ties of the
    two magnitudes leave the second derivative alone); 0 at the origin, nan
    at an infinite leg (as JAX)."""
    (a, b), (ta, tb) = primals, tangents
    t = a.trace
    m = t.apply("maximum", t.apply("abs", a), t.apply("abs", b))
    zero = t.apply("eq", m, 0)
    ms = t.apply("select", zero, 1.0, m)
    ua, ub = t.apply("div", a, ms), t.apply("div", b, ms)
    s2 = t.apply("add", t.apply("mul", ua, ua), t.apply("mul", ub, ub))
    s = t.apply("sqrt", t.apply("select", zero, 1.0, s2))    # no sqrt(0): its slope is inf
    d = t.apply("add", t.apply("mul", ta, t.apply("div", ua, s)), t.apply("mul", tb, t.apply("div", ub, s)))
    return t.apply("select", zero, 0.0, d)


@_op("x1", "x2")
def hypot(x1, x2):
    """sqrt(x1^2 + x2^2) without overflow: m * sqrt(1 + (n/m)^2) with m, n
    the larger and smaller magnitude; inf if either is infinite.  The
    derivative is a rule of its own (x / hypot), so that it is smooth where
    the magnitudes tie: max/min's slopes jump there."""
    a, b = _common([_f(x1, "hypot"), _f(x2, "hypot")], "hypot")
    return _with_jvp(_hypot_value, _hypot_tangent)(a, b)


def _logaddexp_value(a, b, exp_fn, scale):
    t = a.trace
    m = t.apply("maximum", a, b)
    d = t.apply("sub", a, b)
    d = t.apply("select", t.apply("isnan", d), 0.0, d)     # inf - inf: equal infinities
    e = exp_fn(t, t.apply("neg", t.apply("abs", d)))
    r = t.apply("log1p", e)
    if scale != 1.0:
        r = t.apply("mul", r, scale)
    return t.apply("add", m, r)


def _logaddexp_tangent(primals, tangents, scale):
    """The weights are sigmoid(+-(x1 - x2) / scale) (scale 1, or 1/ln 2 for
    base 2), evaluated from exp(-|d|) so that nothing overflows, with |d| a
    select whose slope is +-1 on each side: the second derivative at a tie
    is s (1 - s) / scale, not 0.  Equal infinities share evenly, as the
    value's gradient always did."""
    (a, b), (ta, tb) = primals, tangents
    t = a.trace
    d = t.apply("sub", a, b)
    d = t.apply("select", t.apply("isnan", d), 0.0, d)
    if scale != 1.0:
        d = t.apply("div", d, scale)
    pos = t.apply("ge", d, 0)
    e = t.apply("exp", t.apply("select", pos, t.apply("neg", d), d))    # exp(-|d|)
    inv = t.apply("div", 1.0, t.apply("add", e, 1.0))
    big, small = inv, t.apply("mul", e, inv)                            # sigmoid(|d|), sigmoid(-|d|)
    wa = t.apply("select", pos, big, small)
    wb = t.apply("select", pos, small, big)
    return t.apply("add", t.apply("mul", ta, wa), t.apply("mul", tb, wb))


def _lae_value(a, b):
    return _logaddexp_value(a, b, lambda t, v: t.apply("exp", v), 1.0)


def _lae2_value(a, b):
    return _logaddexp_value(a, b, lambda t, v: t.apply("pow", 2.0, v), 1.0 / _LN2)


def _lae_tangent(primals, tangents, out):
    return _logaddexp_tangent(primals, tangents, 1.0)


def _lae2_tangent(primals, tangents, out):
    return _logaddexp_tangent(primals, tangents, 1.0 / _LN2)


@_op("x1", "x2")
def logaddexp(x1, x2):
    """log(exp(x1) + exp(x2)) = max + log1p(exp(-|x1 - x2|)); the gradient
    is a rule of its own (sigmoid(x1 - x2), and its mirror), so that the
    second derivative at a tie is 1/4, not the kink's 0."""
    a, b = _common([_f(x1, "logaddexp"), _f(x2, "logaddexp")], "logaddexp")
    return _with_jvp(_lae_value, _lae_tangent)(a, b)


@_op("x1", "x2")
def logaddexp2(x1, x2):
    """log2(2**x1 + 2**x2), with logaddexp's kind of rule."""
    a, b = _common([_f(x1, "logaddexp2"), _f(x2, "logaddexp2")], "logaddexp2")
    return _with_jvp(_lae2_value, _lae2_tangent)(a, b)


def _round_half_even(x):
    t = x.trace
    f = t.apply("floor", x)
    d = t.apply("sub", x, f)          # exact
    half = t.apply("floor", t.apply("mul", f, 0.5))
    odd = t.apply("ne", t.apply("sub", f, t.apply("mul", half, 2.0)), 0)
    up = t.apply("logical_or", t.apply("gt", d, 0.5),
                 t.apply("logical_and", t.apply("eq", d, 0.5), odd))
    r = t.apply("add", f, t.apply("select", up, 1.0, 0.0))
    # -0.4 rounds to -0.0, as NumPy
    return t.apply("select", t.apply("eq", r, 0), t.apply("mul", x, 0.0), r)


@_op("x")
def round(x, decimals=0, out=None):
    """Round half to even (NumPy's rule); decimals scales by 10**decimals
    first, as NumPy does.  Ints and bools are returned unchanged for
    decimals >= 0."""
    if out is not None:
        raise TypeError("cjit.numpy.round: out= is not supported")
    x = _lift(_operand(x, "round"))
    decimals = int(decimals)
    t = x.trace
    if not _is_float(x.dtype):
        if decimals >= 0:
            return x
        p = 10 ** (-decimals)
        y = _round_half_even(t.apply("div", t.apply("cast", x, dtype="float64"), float(p)))
        return t.apply("cast", t.apply("mul", y, float(p)), dtype=x.dtype.name)
    if decimals == 0:
        return _round_half_even(x)
    if decimals > 0:
        p = float(10 ** decimals)
        return t.apply("div", _round_half_even(t.apply("mul", x, p)), p)
    p = float(10 ** (-decimals))
    return t.apply("mul", _round_half_even(t.apply("div", x, p)), p)


around = round


@_op("x")
def trunc(x):
    """Round toward zero (ints and bools unchanged)."""
    x = _lift(_operand(x, "trunc"))
    if not _is_float(x.dtype):
        return x
    t = x.trace
    return t.apply("select", t.apply("lt", x, 0), t.apply("ceil", x), t.apply("floor", x))


fix = trunc


def _int_or_float_pair(x1, x2, who):
    a, b = _operand(x1, who), _operand(x2, who)
    dt, _ = _result_type(_info(a), _info(b))
    if dt == _BOOL:
        raise TypeError(f"cjit.numpy.{who}: not defined for bool operands (as NumPy)")
    return _common([a, b], who)


def divmod(x1, x2):
    """(floor_divide(x1, x2), remainder(x1, x2)), as NumPy's divmod and
    Python's divmod() of a traced value."""
    return floor_divide(x1, x2), remainder(x1, x2)


@_op("x1", "x2")
def remainder(x1, x2):
    """x1 - floor(x1 / x2) * x2: the remainder with the divisor's sign, as
    NumPy's and Python's %.  Ints: 0 where x2 is 0 (NumPy's value).  Floats:
    computed from floor division, so for quotients past 2^53 (or large
    ones with rounding) it is not the exact fmod-based value NumPy gives."""
    a, b = _int_or_float_pair(x1, x2, "remainder")
    t = a.trace
    q = t.apply("floordiv", a, b)
    r = t.apply("sub", a, t.apply("mul", q, b))
    if not _is_float(a.dtype):
        return t.apply("select", t.apply("eq", b, 0), 0, r)
    # one more correction step: r must lie between 0 and b (b's sign)
    wrong = t.apply("logical_and", t.apply("ne", r, 0),
                    t.apply("ne", t.apply("lt", r, 0), t.apply("lt", b, 0)))
    r = t.apply("select", wrong, t.apply("add", r, b), r)
    # a zero remainder carries the divisor's sign
    zero = t.apply("select", _signbit_f(b), -0.0, 0.0)
    r = t.apply("select", t.apply("eq", r, 0), zero, r)
    inf_b = t.apply("logical_and", t.apply("eq", t.apply("abs", b), math.inf),
                    t.apply("isfinite", a))
    # x % inf: x when the signs agree, inf with b's sign otherwise (NumPy)
    same = t.apply("eq", _signbit_f(a), _signbit_f(b))
    r_inf = t.apply("select", t.apply("logical_or", same, t.apply("eq", a, 0)), a, b)
    return t.apply("select", inf_b, r_inf, r)


mod = remainder


@_op("x1", "x2")
def fmod(x1, x2):
    """C's fmod: x1 - trunc(x1 / x2) * x2, the dividend's sign (ints: 0
    where x2 is 0, as NumPy)."""
    a, b = _int_or_float_pair(x1, x2, "fmod")
    t = a.trace
    if not _is_float(a.dtype):
        q = t.apply("floordiv", a, b)
        r = t.apply("sub", a, t.apply("mul", q, b))
        fix_ = t.apply("logical_and", t.apply("ne", r, 0),
                       t.apply("ne", t.apply("lt", r, 0), t.apply("lt", a, 0)))
        r = t.apply("select", fix_, t.apply("sub", r, b), r)
        return t.apply("select", t.apply("eq", b, 0), 0, r)
    q = trunc._cjit_impl(t.apply("div", a, b))
    r = t.apply("sub", a, t.apply("mul", q, b))
    r = t.apply("select", t.apply("eq", r, 0), t.apply("mul", a, 0.0), r)
    return t.apply("select", t.apply("eq", t.apply("abs", b), math.inf),
                   t.apply("select", t.apply("isfinite", a), a, math.nan), r)


@_op("x")
def positive(x):
    """+x: x itself (TypeError on bool, as NumPy)."""
    x = _lift(_operand(x, "positive"))
    if x.dtype == _BOOL:
        raise TypeError("cjit.numpy.positive: not defined for bool (as NumPy)")
    return x


def pow(x1, x2):
    """x1 ** x2 (the array API's name for power)."""
    return power(x1, x2)


@_op("x1", "x2")
def float_power(x1, x2):
    """x1 ** x2 computed in float64."""
    a = _lift(_operand(x1, "float_power"))
    b = _lift(_operand(x2, "float_power"))
    a = a.trace.apply("cast", a, dtype="float64")
    b = b.trace.apply("cast", b, dtype="float64")
    return a.trace.apply("pow", a, b)


def _fminmax(who, prim, x1, x2):
    a, b = _common([_operand(x1, who), _operand(x2, who)], who)
    t = a.trace
    r = t.apply(prim, a, b)
    if not _is_float(a.dtype):
        return r
    r = t.apply("select", t.apply("isnan", a), b, r)
    return t.apply("select", t.apply("isnan", b), a, r)


@_op("x1", "x2")
def fmax(x1, x2):
    """Elementwise maximum ignoring nans (nan only if both are nan)."""
    return _fminmax("fmax", "maximum", x1, x2)


@_op("x1", "x2")
def fmin(x1, x2):
    """Elementwise minimum ignoring nans (nan only if both are nan)."""
    return _fminmax("fmin", "minimum", x1, x2)


@_op("x")
def sinc(x):
    """sin(pi x) / (pi x), 1 at 0."""
    x = _f(x, "sinc")
    t = x.trace
    zero = t.apply("eq", x, 0)
    px = t.apply("mul", t.apply("select", zero, 1.0, x), math.pi)
    return t.apply("select", zero, 1.0, t.apply("div", t.apply("sin", px), px))


@_op("x")
def degrees(x):
    """Radians to degrees."""
    x = _f(x, "degrees")
    return x.trace.apply("mul", x, 180.0 / math.pi)


@_op("x")
def radians(x):
    """Degrees to radians."""
    x = _f(x, "radians")
    return x.trace.apply("mul", x, math.pi / 180.0)


rad2deg = degrees
deg2rad = radians


@_op("x")
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """nan -> `nan`, +inf -> posinf (default: the dtype's largest value),
    -inf -> neginf (default: the most negative); other dtypes unchanged."""
    import numpy as np
    x = _lift(_operand(x, "nan_to_num"))
    if not _is_float(x.dtype):
        return x
    t = x.trace
    big = float(np.finfo(x.dtype).max)
    hi = big if posinf is None else float(posinf)
    lo = -big if neginf is None else float(neginf)
    r = t.apply("select", t.apply("isnan", x), float(nan), x)
    r = t.apply("select", t.apply("eq", x, math.inf), hi, r)
    return t.apply("select", t.apply("eq", x, -math.inf), lo, r)


@_op("x")
def isinf(x):
    """x is +inf or -inf (always False for ints and bools)."""
    x = _lift(_operand(x, "isinf"))
    t = x.trace
    if not _is_float(x.dtype):
        return t.apply("ne", x, x)
    return t.apply("eq", t.apply("abs", x), math.inf)


@_op("x")
def isposinf(x):
    x = _lift(_operand(x, "isposinf"))
    return x.trace.apply("eq", x, math.inf) if _is_float(x.dtype) else x.trace.apply("ne", x, x)


@_op("x")
def isneginf(x):
    x = _lift(_operand(x, "isneginf"))
    return x.trace.apply("eq", x, -math.inf) if _is_float(x.dtype) else x.trace.apply("ne", x, x)


@_op("x1", "x2")
def heaviside(x1, x2):
    """0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0 (nan stays nan)."""
    a, b = _common([_f(x1, "heaviside"), _f(x2, "heaviside")], "heaviside")
    t = a.trace
    r = t.apply("select", t.apply("lt", a, 0), 0.0, t.apply("select", t.apply("gt", a, 0), 1.0, b))
    return t.apply("select", t.apply("isnan", a), a, r)


def _bool_pair(x1, x2, who):
    a, b = _to_bool(x1, who), _to_bool(x2, who)
    if not hasattr(a, "trace") and not hasattr(b, "trace"):
        a = _lift(a)
    return a, b


@_op("x1", "x2")
def logical_xor(x1, x2):
    """Truth of x1 != truth of x2, elementwise."""
    a, b = _bool_pair(x1, x2, "logical_xor")
    return _apply("ne", a, b)


def _bitwise(who, bool_prim, int_prim, x1, x2):
    """x1 <op> x2 on bools and integers (NumPy's promotion); floats are a
    TypeError, as in NumPy.  Two bools use the logical op (bool_prim)."""
    a, b = _operand(x1, who), _operand(x2, who)
    dt, _ = _result_type(_info(a), _info(b))
    if _is_float(dt):
        raise TypeError(f"cjit.numpy.{who}: not supported for the input types ({dt}), only integer "
                        f"and bool (as NumPy)")
    a, b = _common([a, b], who)
    return a.trace.apply(bool_prim if dt == _BOOL else int_prim, a, b)


@_op("x1", "x2")
def bitwise_and(x1, x2):
    """x1 & x2 on bools and integers."""
    return _bitwise("bitwise_and", "logical_and", "bitwise_and", x1, x2)


@_op("x1", "x2")
def bitwise_or(x1, x2):
    """x1 | x2 on bools and integers."""
    return _bitwise("bitwise_or", "logical_or", "bitwise_or", x1, x2)


@_op("x1", "x2")
def bitwise_xor(x1, x2):
    """x1 ^ x2 on bools and integers."""
    return _bitwise("bitwise_xor", "ne", "bitwise_xor", x1, x2)




def _shift(who, x1, x2, left):
    """x1 << x2 or x1 >> x2 (arithmetic for signed dtypes, logical for
    unsigned); a count that is negative or at least the width shifts
    everything out, as NumPy's."""
    a, b = _operand(x1, who), _operand(x2, who)
    dt, _ = _result_type(_info(a), _info(b))
    if _is_float(dt):
        raise TypeError(f"cjit.numpy.{who}: needs integer operands, got {dt}")
    # two bools shift in int64 (NumPy: int8, which cjit lacks), as floordiv
    a, b = _common([a, b], who)
    prim = "shift_left" if left else (
        "shift_right_logical" if a.dtype.kind == "u" else "shift_right_arithmetic")
    return a.trace.apply(prim, a, b)


@_op("x1", "x2")
def bitwise_left_shift(x1, x2):
    """x1 << x2 on integers."""
    return _shift("bitwise_left_shift", x1, x2, True)


@_op("x1", "x2")
def bitwise_right_shift(x1, x2):
    """x1 >> x2 on integers: arithmetic for signed dtypes, logical for unsigned ones."""
    return _shift("bitwise_right_shift", x1, x2, False)


left_shift = bitwise_left_shift
right_shift = bitwise_right_shift


@_op("x")
def real(x):
    """The real part of a real x: x itself (complex x: _complex_api.py)."""
    return _lift(_operand(x, "real"))


@_op("x")
def imag(x):
    """The imaginary part of a real x: zeros of its dtype (complex x: _complex_api.py)."""
    x = _lift(_operand(x, "imag"))
    return x.trace.apply("constant", value=0 if x.dtype.kind != "f" else 0.0,
                         dtype=x.dtype.name, shape=tuple(x.shape), weak=False) \
        if x.dtype != _BOOL else x.trace.apply("ne", x, x)


@_op("x")
def conj(x):
    """The complex conjugate of a real x: x itself (complex x: _complex_api.py)."""
    return _lift(_operand(x, "conj"))


conjugate = conj

# array API names
atan, atan2, asin, acos = arctan, arctan2, arcsin, arccos
asinh, acosh, atanh = arcsinh, arccosh, arctanh


# complex arguments: the registry's implementation, or NotImplementedError
# (_complex_dispatch.py; the implementations are registered in _complex_api.py)
complex_aware(globals(), __all__)
