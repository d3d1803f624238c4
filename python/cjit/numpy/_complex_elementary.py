"""Complex elementwise functions, accurate part by part over the whole plane
(NumPy's values at the special points, tests/test_complex_plane.py): sqrt,
sin, cos, sinh, cosh, tan, tanh, log1p, expm1, sign, reciprocal, square,
the predicates and where; the inverse functions are in _complex_inverse.py,
exp, log and division in _complex.py.  Named with a c: the plain names are
cjit.numpy's real functions, applied to the parts.

Where a formula would cancel, the cancelling sum is formed exactly (the
two-products and two-sums of _complex.py): 2x + x^2 + y^2 (log1p next to
|1 + z| = 1) is rounded once, at the end, and log1p of it keeps every bit
that the inputs determine.
"""
from __future__ import annotations

import numpy as np

from ._complex import _F32, _exact_sum, _exp_times, _lift_part, _two_prod, make, parts
from ._elementwise import (absolute, cos, exp, expm1, isfinite, isnan, log, log1p, maximum, sin,
                           sqrt, where)
from ._math import arctan2, copysign, cosh, hypot, isinf, sinh


def csqrt(z):
    """The principal square root (Kahan's formulation: no cancellation),
    with z scaled by 1/4 near overflow (hypot + |x| would overflow) and by
    4^k for tiny parts (so that (hypot + |x|) / 2 keeps its bits), and
    C99's special values: sqrt(x +- inf i) = inf +- inf i for every x,
    sqrt(-inf + yi) = 0 + inf i, sqrt(inf + yi) = inf + 0i."""
    zr, zi = parts(z)
    zr, zi = _lift_part(zr), _lift_part(zi)
    f32 = zr.dtype == _F32
    big_at = 1e37 if f32 else 1e307
    small_at = 1e-30 if f32 else 1e-290
    up, down = (2.0 ** 48, 2.0 ** -24) if f32 else (2.0 ** 108, 2.0 ** -54)
    m = maximum(absolute(zr), absolute(zi))
    scale = where(m > big_at, 0.25, where(m < small_at, up, 1.0))
    back = where(m > big_at, 2.0, where(m < small_at, down, 1.0))
    xr, xi = zr * scale, zi * scale
    t = sqrt((hypot(xr, xi) + absolute(xr)) * 0.5)
    safe_t = where(t == 0, 1.0, t)
    half = xi / (2.0 * safe_t)
    re = where(xr >= 0, t, absolute(half)) * back
    im = where(xr >= 0, half, copysign(t, xi)) * back
    re, im = where(t == 0, 0.0, re), where(t == 0, zi, im)
    # C99: an infinite imaginary part wins over everything, nan included
    inf_re, inf_im = isinf(zr), isinf(zi)
    re = where(inf_re & (zr > 0), np.inf, where(inf_re, where(isnan(zi), np.nan, 0.0), re))
    im = where(inf_re & (zr > 0), where(isnan(zi), zi, copysign(0.0, zi)),
                 where(inf_re, where(isnan(zi), np.inf, copysign(np.inf, zi)), im))
    re = where(inf_im, np.inf, re)
    im = where(inf_im, zi, im)
    return make(re, im)


def csin(z):
    """sin z = -i sinh(iz), so that C99's values (which Annex G defines that
    way) and the care against overflow come from sinh."""
    a, b = parts(z)
    w = csinh(make(-b if b is not None else 0.0 * a, a))
    return make(w.im, -w.re)


def ccos(z):
    """cos z = cosh(iz)."""
    a, b = parts(z)
    return ccosh(make(-b if b is not None else 0.0 * a, a))


def _zero_keeping(b, value):
    """value, except where b is zero: there b itself (a function that maps
    the real line to itself keeps a zero imaginary part exactly, where the
    product formula would give inf * 0 = nan)."""
    return where(b == 0, b, value)


def csinh(z):
    """(sinh a cos b, cosh a sin b), with Annex G's values at infinities;
    past |a| = 80 (float32; 700 float64) cosh a = |sinh a| = e^|a| / 2 and
    the products are formed without overflowing it (_exp_times)."""
    a, b = parts(z)
    cb, sb = cos(b), sin(b)
    big, re_big = _exp_times(cb, a, True)
    _, im_big = _exp_times(sb, a, True)
    re = where(big, copysign(1.0, a) * re_big, sinh(a) * cb)
    im = _zero_keeping(b, where(big, im_big, cosh(a) * sb))
    re = where((a == 0) & ~isfinite(b), a, re)          # sinh(0 + inf i) = 0 + nan i
    re = where(isinf(a) & ~isfinite(b), a, re)        # sinh(inf + inf i) = inf + nan i
    return make(re, im)


def ccosh(z):
    """(cosh a cos b, sinh a sin b), with Annex G's values at infinities
    and sinh's care against overflow; cosh is even, so a zero imaginary
    part takes the sign of a times b's."""
    a, b = parts(z)
    cb, sb = cos(b), sin(b)
    big, re_big = _exp_times(cb, a, True)
    _, im_big = _exp_times(sb, a, True)
    re = where(big, re_big, cosh(a) * cb)
    im = where(big, copysign(1.0, a) * im_big, sinh(a) * sb)
    im = where(b == 0, b * copysign(1.0, a), im)
    im = where((a == 0) & ~isfinite(b), 0.0, im)        # cosh(0 + inf i) = nan + 0i
    re = where(isinf(a) & ~isfinite(b), absolute(a), re)  # cosh(inf + inf i) = inf + nan i
    return make(re, im)


def csquare(z):
    """(x - y)(x + y) + 2xy i: no cancellation of x^2 - y^2, and no
    inf - inf where both squares overflow."""
    zr, zi = parts(z)
    if zi is None:
        return zr * zr
    re = (zr - zi) * (zr + zi)
    # a zero real part: +0 where |x| = |y| (as NumPy), the true sign where x^2 - y^2 underflows
    return make(where(re == 0, copysign(0.0, absolute(zr) - absolute(zi)), re), 2.0 * zr * zi)


def cisnan(z):
    zr, zi = parts(z)
    return isnan(zr) | isnan(zi)


def cisinf(z):
    zr, zi = parts(z)
    return isinf(zr) | isinf(zi)


def cisfinite(z):
    zr, zi = parts(z)
    return isfinite(zr) & isfinite(zi)


def cwhere(condition, x, y):
    xr, xi = parts(x)
    yr, yi = parts(y)
    return make(where(condition, xr, yr),
                where(condition, 0.0 if xi is None else xi, 0.0 if yi is None else yi))


def cangle(z, deg=False):
    zr, zi = parts(z)
    if zi is None:
        return cangle(zr, deg=deg)
    a = arctan2(zi, zr)
    return a * (180.0 / np.pi) if deg else a


def clog1p(z):
    """log(1 + z): Re = log1p(2x + x^2 + y^2) / 2 (summed exactly) where
    |1 + z| is in (1/2, 2), log |1 + z| elsewhere (1 + x has one rounding,
    which changes log |1 + z| by at most half an ulp of 1 there);
    Im = atan2(y, 1 + x)."""
    x, y = parts(z)
    x, y = _lift_part(x), _lift_part(y)
    u = 1.0 + x
    h = hypot(u, y)
    near = (h > 0.5) & (h < 2.0)
    xs = where(near, x, 0.0)
    ys = where(near, y, 0.0)
    p1, e1 = _two_prod(xs, xs)
    p2, e2 = _two_prod(ys, ys)
    t = _exact_sum([2.0 * xs, p1, p2], [e2, e1])
    re = where(near, 0.5 * log1p(t), log(where(near, 1.0, h)))
    return make(re, arctan2(y, u))


def ctanh(z):
    """tanh(a + ib) = (sinh a cosh a + i sin b cos b) / (sinh^2 a + cos^2 b).
    The denominator, cosh 2a + cos 2b over 2 in the textbook form, is a sum
    of squares here: no cancellation next to the poles (a = 0, cos b = 0).
    Past |a| = 20 the real part is sign(a) to working precision and the
    imaginary part 2 sin 2b e^(-2|a|).  C99's (and NumPy's) special values:
    tanh(+-0 + i y) = +-0 + i nan for y not finite, tanh(x + i y) = nan + i nan
    for other finite x, tanh(+-inf + i y) = +-1 + i 0 sin 2y (the zero's sign
    that of y where sin 2y is nan), tanh(nan + 0i) = nan + 0i."""
    a, b = parts(z)
    a, b = _lift_part(a), _lift_part(b)
    big = absolute(a) > 20.0
    ac = where(big, 0.0, a)
    s, ch = sinh(ac), cosh(ac)
    sb, cb = sin(b), cos(b)
    den = s * s + cb * cb
    re = where(big, copysign(1.0, a), (s * ch) / den)
    far = 2.0 * sin(2.0 * b) * exp(-2.0 * absolute(where(big, a, 30.0)))
    im = where(big, far, (sb * cb) / den)
    inf_a, fin_b = isinf(a), isfinite(b)
    im = where(inf_a & ~fin_b, where(isnan(b), 0.0, copysign(0.0, b)), im)
    bad = isfinite(a) & ~fin_b
    re = where(bad, where(a == 0, a, np.nan), re)
    im = where(bad, np.nan, im)
    return make(re, where(b == 0, b, im))


def ctan(z):
    """tan z = -i tanh(iz), as Annex G defines it."""
    a, b = parts(z)
    w = ctanh(make(-b, a))
    return make(w.im, -w.re)


def cexpm1(z):
    """e^z - 1: Re = expm1(a) cos b - 2 sin^2(b/2) (no cancellation of
    e^a cos b against 1 for small z; e^a cos b - 1 for a < -1, where
    nothing cancels), Im = e^a sin b; past a = 80 (float32;
    700 float64) e^a times cos b or sin b is formed without overflowing e^a
    first (the 1 is below the last bit there).  Special values are those of
    exp(z) - 1: a zero imaginary part stays exact (expm1(inf + 0i) =
    inf + 0i), expm1(-inf + i y) = -1 + 0i (-1 - 0i for y = -inf), expm1(inf + i y) = inf + i nan for
    y not finite."""
    a, b = parts(z)
    a, b = _lift_part(a), _lift_part(b)
    cb, sb = cos(b), sin(b)
    big, re_big = _exp_times(cb, a, False)
    _, im_big = _exp_times(sb, a, False)
    big = big & (a > 0)
    h = sin(b * 0.5)
    two_h2 = 2.0 * (h * h)
    # a = 0: cos b - 1 = -2 sin^2(b/2), a negative zero where it underflows
    re = where(a == 0, -two_h2, expm1(a) * cb - two_h2)
    # a < -1: e^a cos b is below 0.37, so nothing cancels, and expm1(-huge) cos b - ... is not -1
    re = where(a < -1.0, exp(a) * cb - 1.0, re)
    re = where(big, re_big, re)
    im = where(big, im_big, exp(a) * sb)
    re = where(b == 0, expm1(a), re)
    im = where(b == 0, b, im)
    odd = isinf(a) & ~isfinite(b)
    re = where(odd, where(a > 0, a, -1.0), re)
    im = where(odd, where(a > 0, np.nan, copysign(0.0, b)), im)
    return make(re, im)


def csign(z):
    """z / |z|, 0 at 0 (NumPy 2's definition), and NumPy's values at the
    infinities: an infinite part gives the unit in its direction (+-1 + 0i,
    0 +- 1i, whatever the other part, nan included); both infinite give nan."""
    x, y = parts(z)
    x, y = _lift_part(x), _lift_part(y)
    r = hypot(x, y)
    zero = r == 0
    safe = where(zero | isinf(r), 1.0, r)
    re = where(zero, 0.0, x / safe)
    im = where(zero, 0.0, y / safe)
    xi, yi = isinf(x), isinf(y)
    re = where(xi & ~yi, copysign(1.0, x), where(yi & ~xi, 0.0, re))
    im = where(xi & ~yi, 0.0, where(yi & ~xi, copysign(1.0, y), im))
    both = xi & yi
    return make(where(both, np.nan, re), where(both, np.nan, im))


def creciprocal(z):
    """1 / z = conj(z) / |z|^2 formed as Smith's division does it (the ratio
    of the smaller part to the larger, no square of a part), which gives
    NumPy's values: the signs of zero parts are those of x / |z|^2 and
    -y / |z|^2 (1 / (x + 0i) = 1/x - 0i), 1/0 is nan + i nan."""
    x, y = parts(z)
    x, y = _lift_part(x), _lift_part(y)
    by_x = absolute(y) <= absolute(x)
    # each branch gets a harmless divisor where the other is taken
    xs = where(by_x, x, 1.0)
    ys = where(by_x, 1.0, y)
    r1 = y / xs
    d1 = x + y * r1
    r2 = x / ys
    d2 = x * r2 + y
    re = where(by_x, 1.0 / d1, r2 / d2)
    im = where(by_x, -r1 / d1, -1.0 / d2)
    nan = isnan(x) | isnan(y) | ((x == 0) & (y == 0))
    return make(where(nan, np.nan, re), where(nan, np.nan, im))
