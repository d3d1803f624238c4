"""cjit.scipy.special: SciPy's special functions on traced values (as
jax.scipy.special), composed from cjit.numpy's primitives, traced or eager.
Most differentiate by a closed-form rule of their own (_ruled: an internal
custom_jvp), which holds at the domain's edges where the composition's
guards would give 0 or nan; digamma through the composition.

erf, erfc, erfinv, ndtr, ndtri, log_ndtr, gammaln and digamma evaluate
piecewise polynomials fitted by scripts/fit_special.py against references
computed with the decimal module at 70 digits (the tables are in _coefs.py).
Every piece is evaluated for every element: the piece of an element picks
the coefficients (selects of constants), so one Horner recurrence serves all
pieces, and each branch gets inputs made harmless where it is not taken, so
that neither the value nor the gradient of an untaken branch sees inf or nan.
float32 (and integer) inputs are computed in float64 and rounded back.
Accuracy against those references is in docs/API.md."""
from __future__ import annotations

import math

import numpy as np

from .._stable import logsumexp as _logsumexp, sigmoid as _sigmoid
from ..numpy._core import _with_jvp
from . import _coefs
from ..numpy._core import _lift, _op, _operand
from ..numpy._elementwise import (astype, clip, cos, equal, exp, floor, isnan, log, log1p,
                                  logical_and, logical_not, logical_or, minimum, multiply,
                                  negative, sin, sqrt, subtract, where)
from ..numpy._info import result_type

__all__ = ["logsumexp", "expit", "logit", "xlogy", "xlog1py", "erf", "erfc", "erfinv",
           "ndtr", "ndtri", "log_ndtr", "gammaln", "digamma", "psi"]


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """log(sum(exp(a))) over axis, stably (b= and return_sign= are not
    supported)."""
    if b is not None or return_sign:
        raise NotImplementedError("cjit.scipy.special.logsumexp: b= and return_sign= are not "
                                  "supported")
    return _logsumexp(a, axis=axis, keepdims=keepdims)


def expit(x):
    """1 / (1 + exp(-x)) (cjit.nn.sigmoid)."""
    return _sigmoid(x)


@_op("p")
def logit(p):
    """log(p / (1 - p)), as log(p) - log1p(-p)."""
    x = _lift(_operand(p, "logit"))
    if x.dtype.kind != "f":
        x = astype(x, "float64")
    return subtract(log(x), log1p(negative(x)))


def _xlog_value(x, y, f):
    # where x == 0 (and y is not nan) the result is 0 and the log's input
    # is made harmless, so that the value never sees log(0)
    zero = logical_and(equal(x, 0), logical_not(isnan(y)))
    safe = where(zero, 1.0 if f is log else 0.0, y)
    return where(zero, 0.0, multiply(x, f(safe)))


def _xlogy_value(x, y):
    return _xlog_value(x, y, log)


def _xlog1py_value(x, y):
    return _xlog_value(x, y, log1p)


def _xlogy_tangent(primals, tangents, out):
    """d/dx = log(y), also at x == 0 (where the value's select would cut
    it), as JAX; d/dy = x / y, 0 where x == 0 (the value is 0 for every y
    there; JAX's 0 / 0 gives nan at y == 0)."""
    (x, y), (tx, ty) = primals, tangents
    zero = equal(x, 0)
    return tx * log(y) + ty * _W(zero, 0.0, x / _W(zero, 1.0, y))


def _xlog1py_tangent(primals, tangents, out):
    (x, y), (tx, ty) = primals, tangents
    zero = equal(x, 0)
    return tx * log1p(y) + ty * _W(zero, 0.0, x / _W(zero, 1.0, 1.0 + y))


def _xlog(who, x, y, value, tangent):
    x = _lift(_operand(x, who))
    y = _lift(_operand(y, who))
    if x.dtype.kind != "f":
        x = astype(x, "float64")
    if y.dtype.kind != "f":
        y = astype(y, "float64")
    dt = result_type(x, y)
    x, y = astype(x, dt), astype(y, dt)
    return _with_jvp(value, tangent)(x, y)


@_op("x", "y")
def xlogy(x, y):
    """x * log(y), 0 where x == 0 (unless y is nan); d/dx is log(y)
    everywhere, as JAX's."""
    return _xlog("xlogy", x, y, _xlogy_value, _xlogy_tangent)


@_op("x", "y")
def xlog1py(x, y):
    """x * log1p(y), 0 where x == 0 (unless y is nan); d/dx is log1p(y)
    everywhere."""
    return _xlog("xlog1py", x, y, _xlog1py_value, _xlog1py_tangent)


# ---------------------------------------------------------------------------
# helpers

_W = where
_SQRT2 = math.sqrt(2.0)
_SQRT1_2 = math.sqrt(0.5)
_LOG_PI = math.log(math.pi)


def _float64(x, who):
    """(x as a float64 Tracer, the dtype to return): float32 stays float32
    on the way out, everything else is float64."""
    x = _lift(_operand(x, who))
    out = x.dtype if x.dtype == np.float32 else np.dtype(np.float64)
    if x.dtype != np.float64:
        x = astype(x, "float64")
    return x, out


def _back(r, out):
    return r if out == np.float64 else astype(r, out.name)


def _pick(conds, values):
    """values[i] for the first true conds[i], values[-1] where none is."""
    r = values[-1]
    for c, v in zip(conds[::-1], values[-2::-1]):
        r = _W(c, v, r)
    return r


def _piecewise(x, conds, pieces):
    """The polynomial of the piece each element falls in (the first true
    condition, the last piece where none is), at t = (x - mid) / half."""
    mid = _pick(conds, [p[0] for p in pieces])
    half = _pick(conds, [p[1] for p in pieces])
    t = (x - mid) / half
    n = max(len(p[2]) for p in pieces)
    coefs = [tuple(p[2]) + (0.0,) * (n - len(p[2])) for p in pieces]
    r = _pick(conds, [c[n - 1] for c in coefs])
    for k in range(n - 2, -1, -1):
        r = r * t + _pick(conds, [c[k] for c in coefs])
    return r


def _poly(x, coefs):
    r = coefs[-1]
    for c in coefs[-2::-1]:
        r = r * x + c
    return r


def _exp_neg_sq(a, scale):
    """exp(-scale * a^2) for 0 <= a <= 57 and scale 1 or 1/2, without the
    error of rounding a^2: a = z + d with z holding 20 fraction bits (so
    z*z is exact), and exp(-s z^2) * exp(-s (a - z)(a + z))."""
    z = floor(a * 1048576.0) * (1.0 / 1048576.0)
    return exp(-scale * (z * z)) * exp(-scale * ((a - z) * (a + z)))


def _abs(x):
    """|x| as a select, so that the gradient at 0 is that of x (abs's is 0)."""
    return _W(x < 0, -x, x)


def _erf_parts(a, small_below):
    """For a >= 0 (nan passes): (small, s, g) with small = a < small_below,
    s = erf(a) where small and g = erfcx(a) = exp(a^2) erfc(a) elsewhere."""
    small = a < small_below
    big = a >= 4.0
    a_big = _W(big, a, 4.0)
    var = _W(small, a * a, _W(big, 1.0 / (a_big * a_big), a))
    pieces = _coefs.ERF_SMALL + _coefs.ERFCX
    p = _piecewise(var, [small, a < 1.0, a < 2.0, a < 3.0, a < 4.0], pieces)
    return small, a + a * p, _W(big, p / a_big, p)


# ---------------------------------------------------------------------------
# the error function and the normal distribution

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_HALF_SQRT_PI = 0.5 * math.sqrt(math.pi)


_SLOPES = {}


def _ruled(who, value, slope, uses_out=False):
    """An elementwise function of one float (computed in float64) whose
    derivative is slope(x, out) * t, a rule of its own: the piecewise
    evaluation's selects and clamps have slopes that vanish (or turn into
    0 * inf) at the domain's edges, where the rule has the limit, and the
    polynomials' own slopes are less accurate than their values."""
    if who not in _SLOPES:
        _SLOPES[who] = lambda p, t, o: t[0] * slope(p[0], o)

    def fn(x):
        x, out = _float64(x, who)
        return _back(_with_jvp(value, _SLOPES[who], uses_out)(x), out)
    return fn


def _erf_value(x):
    a = _abs(x)
    small, s, g = _erf_parts(a, 1.0)
    ac = minimum(a, 40.0)
    r = _W(small, s, 1.0 - _exp_neg_sq(ac, 1.0) * g)
    return _W(x < 0, -r, r)


def _gauss(x):
    """2/sqrt(pi) exp(-x^2), from x clamped to [-40, 40] (exp(-1600) is 0
    already): 0 at +-inf, and so is its slope (no inf * 0)."""
    xc = clip(x, -40.0, 40.0)
    return _TWO_OVER_SQRT_PI * exp(-(xc * xc))


@_op("x")
def erf(x):
    """The error function, 2/sqrt(pi) * integral of exp(-t^2) from 0 to x."""
    return _ruled("erf", _erf_value, lambda x, out: _gauss(x))(x)


def _erfc_value(x):
    a = _abs(x)
    small, s, g = _erf_parts(a, 0.5)
    ac = minimum(a, 40.0)
    r = _W(small, 1.0 - s, _exp_neg_sq(ac, 1.0) * g)
    return _W(x < 0, 2.0 - r, r)


@_op("x")
def erfc(x):
    """1 - erf(x), with relative accuracy in the tail."""
    return _ruled("erfc", _erfc_value, lambda x, out: -_gauss(x))(x)


def _half_erfc_scaled(x):
    """(a, small, half_erfc, g) for a = |x|/sqrt(2): half_erfc = erfc(a)/2
    = ndtr(-|x|), with exp(-x^2/2) taken from x itself."""
    ax = _abs(x)
    a = ax * _SQRT1_2
    small, s, g = _erf_parts(a, 0.5)
    e = _exp_neg_sq(minimum(ax, 57.0), 0.5)
    return a, small, _W(small, 0.5 - 0.5 * s, 0.5 * (e * g)), g


def _ndtr_value(x):
    _, _, h, _ = _half_erfc_scaled(x)
    return _W(x < 0, h, 1.0 - h)


def _normal_pdf(x):
    """exp(-x^2/2) / sqrt(2 pi), from x clamped to [-40, 40] (as _gauss)."""
    xc = clip(x, -40.0, 40.0)
    return _INV_SQRT_2PI * exp(-0.5 * (xc * xc))


@_op("x")
def ndtr(x):
    """The standard normal CDF, (1 + erf(x / sqrt(2))) / 2, with relative
    accuracy for x < 0."""
    return _ruled("ndtr", _ndtr_value, lambda x, out: _normal_pdf(x))(x)


def _log_ndtr_slope(x, out):
    """pdf / ndtr: below -1 as sqrt(2/pi) / erfcx(|x|/sqrt 2) (no underflow;
    +inf at -inf), else pdf / ndtr (0 at +inf)."""
    _, _, h, g = _half_erfc_scaled(x)
    low = x < -1.0
    tail = math.sqrt(2.0 / math.pi) / _W(low, g, 1.0)
    return _W(low, tail, _normal_pdf(x) / _W(low, 0.5, _W(x < 0, h, 1.0 - h)))


def _log_ndtr_value(x):
    _, _, h, g = _half_erfc_scaled(x)
    low = x < -1.0
    neg = x < 0
    x_low = _W(low, x, -1.0)
    g_low = _W(low, g, 1.0)
    r_low = -0.5 * (x_low * x_low) + log(0.5 * g_low)
    r_mid = log(_W(logical_and(neg, logical_not(low)), h, 0.5))
    r_high = log1p(-_W(neg, 0.0, h))
    return _W(low, r_low, _W(neg, r_mid, r_high))


@_op("x")
def log_ndtr(x):
    """log(ndtr(x)), accurate in both tails: -x^2/2 + log(erfcx(|x|/sqrt 2)/2)
    below -1, log1p(-ndtr(-x)) above 0."""
    return _ruled("log_ndtr", _log_ndtr_value, _log_ndtr_slope)(x)


def _erfinv_tail_parts(central, var):
    pieces = _coefs.ERFINV_CENTRAL + _coefs.NDTRI_TAIL
    conds = [logical_and(central, var < 0.25), central, var < 2.4, var < 4.0, var < 8.0,
             var < 16.0]
    return _piecewise(var, conds, pieces)


def _erfinv_value(y):
    a = _abs(y)
    central = a <= 0.75
    tail = logical_not(central)
    pt = _W(tail, 0.5 * (1.0 - a), 0.1)        # exact for a >= 0.5
    # a == 1 gives pt = 0: r would be inf; that case is set below
    pt = _W(a == 1.0, 1e-300, pt)
    r = _W(tail, sqrt(-log(pt)), 2.0)
    u = a * a
    p = _erfinv_tail_parts(central, _W(central, u, r))
    v = _W(central, a * p, p * _SQRT1_2)
    v = _W(a == 1.0, math.inf, _W(a > 1.0, math.nan, v))
    return _W(y < 0, -v, v)


@_op("y")
def erfinv(y):
    """The inverse of erf on [-1, 1] (+-inf at +-1, nan outside); its slope
    1 / erf'(erfinv(y)) is +inf at +-1 and nan outside."""
    return _ruled("erfinv", _erfinv_value, lambda y, out: _HALF_SQRT_PI * exp(out * out), True)(y)


def _ndtri_value(p):
    q = p - 0.5
    aq = _abs(q)
    central = aq <= 0.375
    tail = logical_not(central)
    pt = _W(q < 0, p, 1.0 - p)                   # 1 - p is exact for p >= 1/2
    pt = _W(logical_and(tail, pt > 0), pt, 0.1)
    r = _W(tail, sqrt(-log(pt)), 2.0)
    y = 2.0 * q
    poly = _erfinv_tail_parts(central, _W(central, y * y, r))
    v = _W(central, _SQRT2 * (y * poly), _W(q < 0, -poly, poly))
    v = _W(p == 0.0, -math.inf, _W(p == 1.0, math.inf, v))
    bad = logical_or(logical_or(p < 0.0, p > 1.0), isnan(p))
    return _W(bad, math.nan, v)


@_op("p")
def ndtri(p):
    """The inverse of ndtr on [0, 1] (-inf at 0, inf at 1, nan outside); its
    slope 1 / pdf(ndtri(p)) is +inf at 0 and 1 and nan outside."""
    return _ruled("ndtri", _ndtri_value, lambda p, out: _SQRT_2PI * exp(0.5 * (out * out)), True)(p)


# ---------------------------------------------------------------------------
# the gamma function

_STIRLING_CONST = 0.5 * math.log(2.0 * math.pi) - 0.5


def _lgamma_pos(y):
    """log Gamma(y) for y > 0 (nan passes): near 1 and 2 as t * P(t) with
    t = y - 1 or y - 2 (exact), so the zeros at 1 and 2 keep their relative
    accuracy; below 1/2 as -log(y) + y * P(y); on [2.5, 10) the recurrence
    down to [1.5, 2.5) with the factors y - j (exact); from 10 on Stirling's
    series."""
    lt_half = y < 0.5
    lt_1h = y < 1.5
    stir = logical_not(y < 10.0)
    y_mid = _W(logical_and(logical_not(lt_1h), y < 10.0), y, 2.0)
    n = floor(y_mid - 1.5)                   # 0 .. 8 factors
    prod = 1.0
    for j in range(1, 9):
        prod = prod * _W(n >= j, y_mid - float(j), 1.0)
    r = y_mid - n                                # in [1.5, 2.5), exact
    t = _W(lt_half, y, _W(lt_1h, y - 1.0, r - 2.0))
    p = _piecewise(t, [lt_half, y < 1.0, lt_1h], _coefs.LGAMMA_NEAR_1_2[1:2] +
                   _coefs.LGAMMA_NEAR_1_2)
    tp = t * p
    y_small = _W(lt_half, y, 1.0)
    y_st = _W(y < 10.0, 10.0, y)
    w = 1.0 / (y_st * y_st)
    st = (y_st - 0.5) * (log(y_st) - 1.0) + _STIRLING_CONST + \
        _poly(w, _coefs.LGAMMA_STIRLING) / y_st
    return _W(lt_half, tp - log(y_small),
              _W(lt_1h, tp, _W(stir, st, log(prod) + tp)))


def _sinpi_cospi(x):
    """(sin(pi f), cos(pi f)) with f = x - n in [-1/2, 1/2], n the integer
    nearest x (x - n is exact; from 2^52 on x is an integer): enough for
    |sin(pi x)| and cot(pi x), which have period 1 up to sign."""
    f = x - floor(x + 0.5)
    f = _W(_abs(x) < 4503599627370496.0, f, 0.0)
    return sin(math.pi * f), cos(math.pi * f)


def _gammaln_value(x):
    pos = x > 0
    y = _W(pos, x, 1.0 - x)
    lg = _lgamma_pos(y)
    x_neg = _W(pos, -0.5, x)
    s, _ = _sinpi_cospi(x_neg)
    neg = _LOG_PI - log(_abs(s)) - lg
    return _W(pos, lg, _W(x == -math.inf, -math.inf, neg))


def _gammaln_slope(x, out):
    """digamma, nan at the poles (0 and the negative integers: the slope is
    -inf on one side and +inf on the other), +inf at +inf."""
    pole = logical_and(x <= 0, floor(x) == x)
    return _W(pole, math.nan, _digamma_value(_W(pole, 1.0, x)))


@_op("x")
def gammaln(x):
    """log|Gamma(x)| (inf at 0 and the negative integers)."""
    return _ruled("gammaln", _gammaln_value, _gammaln_slope)(x)


def _digamma_pos(y):
    """psi(y) for y > 0 (nan passes): psi(y + 1) - 1/y below 1; on [1, 2)
    (y - root) * P(y) with the root split in two doubles; on [2, 10) the
    recurrence down to [1, 2); from 10 on the asymptotic series."""
    lt1 = y < 1.0
    asym = logical_not(y < 10.0)
    y_mid = _W(logical_and(logical_not(lt1), y < 10.0), y, 1.5)
    n = floor(y_mid) - 1.0                   # 0 .. 8 terms
    acc = 0.0
    for j in range(1, 9):
        acc = acc + 1.0 / _W(n >= j, y_mid - float(j), math.inf)
    y_small = _W(lt1, y, 0.5)
    r = _W(lt1, y_small + 1.0, y_mid - n)        # in [1, 2)
    hi, lo = _coefs.DIGAMMA_ROOT
    p = _piecewise(r, [], _coefs.DIGAMMA_1_2)
    near = ((r - hi) - lo) * p
    y_as = _W(y < 10.0, 10.0, y)
    w = 1.0 / (y_as * y_as)
    asy = log(y_as) - 0.5 / y_as - w * _poly(w, _coefs.DIGAMMA_ASYMPTOTIC)
    return _W(lt1, near - 1.0 / y_small, _W(asym, asy, near + acc))


def _digamma_value(x):
    pos = x > 0
    y = _W(pos, x, 1.0 - x)
    d = _digamma_pos(y)
    x_neg = _W(pos, -0.25, x)
    s, c = _sinpi_cospi(x_neg)
    is_int = s == 0.0
    s = _W(is_int, 1.0, s)
    neg = d - math.pi * (c / s)
    # at a negative integer n: nan, as SciPy, written nan - 1/(x - n) so
    # that the slope there is +inf (trigamma's pole, as JAX) and not a
    # constant's 0
    n = floor(x_neg + 0.5)
    pole = logical_and(is_int, x < 0)
    neg = _W(is_int, math.nan - 1.0 / _W(pole, x_neg - n, 1.0), neg)
    zero = x == 0.0
    # psi(+0) = -inf and psi(-0) = +inf: -1/x, whose slope is +inf
    at_zero = -1.0 / _W(zero, x, 1.0)
    return _W(pos, d, _W(zero, at_zero, _W(x == -math.inf, math.nan, neg)))


@_op("x")
def digamma(x):
    """psi(x) = d/dx log Gamma(x) (as SciPy: -inf at 0.0, inf at -0.0, nan
    at the negative integers; its slope is +inf at those poles)."""
    x, out = _float64(x, "digamma")
    return _back(_digamma_value(x), out)


psi = digamma
