"""The complex inverse trigonometric and hyperbolic functions, accurate part
by part over the whole plane (NumPy's branch cuts, C99's special values).

asin and acos follow the method of Hull, Fairgrieve and Tang ("Implementing
the complex arcsine and arccosine functions using exception handling", ACM
TOMS 23, 1997): with R = |z + 1|, S = |z - 1| and A = (R + S) / 2 >= 1,
asin z = asin(x / A) + i log(A + sqrt(A^2 - 1)), each piece rewritten where
it would cancel (A - 1 and the real part's arguments as sums of positive
terms).  atanh uses log1p: Re atanh z = log1p(4x / ((1 - x)^2 + y^2)) / 4,
Im atanh z = atan2(2y, (1 - x)(1 + x) - y^2) / 2.  The others are these
rotated: asinh z = -i asin(iz), atan z = -i atanh(iz), acosh z = +-i acos z.

Each is computed on |x|, |y| (the functions are odd or even in each part)
and the signs put back with copysign, so signed zeros pick the side of a
cut as C99 says.  Past |z| = 1e8 the asymptotic forms are exact to working
precision (their relative error is O(1/|z|^2)).
"""
from __future__ import annotations

import math

import numpy as np

from ._complex import as_complex, make
from ._elementwise import absolute, isnan, log, log1p, maximum, sqrt, where
from ._math import arccos, arcsin, arctan2, copysign, hypot, isinf, signbit

_LARGE = 1e8
_CROSS = 0.6417          # Hull et al.: above this asin(B) loses accuracy
_LN2 = math.log(2.0)
_PI = math.pi
_HALF_PI = math.pi / 2


def _eps(x):
    return float(np.finfo(x.dtype).eps)


def _far_log_abs(x, y):
    """log |z| + log 2 for large |z|, without overflowing |z|."""
    return log(hypot(x * 0.5, y * 0.5)) + 2.0 * _LN2


def _asin_acos_first_quadrant(x, y):
    """(Re asin, Re acos, Im asin) of x + iy for x, y >= 0 (nan passes)."""
    eps = _eps(x)
    far = hypot(x, y) > _LARGE
    # near: keep the far points at a harmless place (their results come from the far branch)
    xs, ys = where(far, 0.5, x), where(far, 0.5, y)
    r = hypot(xs + 1.0, ys)
    s = hypot(xs - 1.0, ys)
    a = 0.5 * (r + s)
    b = xs / a
    below = xs <= 1.0
    # the real parts where B is near 1: sums of positive terms
    safe_sm1 = where(below, 1.0, s + (xs - 1.0))
    t_below = 0.5 * (a + xs) * (ys * (ys / (r + (xs + 1.0))) + (s + (1.0 - xs)))
    t_above = 0.5 * ((a + xs) / (r + (xs + 1.0)) + (a + xs) / safe_sm1)
    k_below = sqrt(t_below)                # = sqrt(A^2 - x^2) for x <= 1
    k_above = ys * sqrt(where(below, 1.0, t_above))   # the same for x > 1
    k = where(below, k_below, k_above)
    use_b = b <= _CROSS
    # (every branch not taken gets a harmless input, so that its gradient, times 0, is not nan)
    b_safe = where(use_b, b, 0.0)
    re_asin = where(use_b, arcsin(b_safe), arctan2(xs, k))
    re_acos = where(use_b, arccos(b_safe), arctan2(k, xs))
    # Im: log(A + sqrt(A^2 - 1)) = log1p(A - 1 + sqrt((A - 1)(A + 1))), A - 1 without cancellation
    safe_1mx = where(below, 1.0 - xs, 1.0)
    d_below = s + safe_1mx                   # 0 only at z = 1, where y2 is 0 too
    # y (y / d), not y^2 / d: at x = 1 the second term is y, and y^2 may underflow
    first = ys * (ys / (r + (xs + 1.0)))
    am1 = where(below, 0.5 * (first + ys * (ys / where(d_below == 0, 1.0, d_below))),
                  0.5 * (first + (s + (xs - 1.0))))
    # y tiny beside 1 - x (x < 1): y^2 may underflow; Im = y / sqrt(1 - x^2) to working precision
    tiny_y = below & (ys < eps * absolute(1.0 - xs))
    small = (a <= 1.5) & ~tiny_y
    am1 = where(small, am1, 1.0)
    im_small = log1p(am1 + sqrt(am1 * (a + 1.0)))
    a_big = where(a <= 1.5, 2.0, a)
    im_big = log(a_big + sqrt((a_big - 1.0) * (a_big + 1.0)))
    im = where(a <= 1.5, im_small, im_big)
    im = where(tiny_y, ys / sqrt(where(tiny_y, (1.0 - xs) * (1.0 + xs), 1.0)), im)
    # far: asin z = atan2(x, y) + i (log 2|z|) to O(1/|z|^2)
    im = where(far, _far_log_abs(where(far, x, 1.0), where(far, y, 1.0)), im)
    re_asin = where(far, arctan2(x, y), re_asin)
    re_acos = where(far, arctan2(y, x), re_acos)
    return re_asin, re_acos, im


def _nan_rules(x, y, re, im, re_at_zero_x):
    """C99's values where a part is nan (for asin-like layouts: Im is the
    one that goes infinite): an infinite part gives Im = inf and Re = nan;
    x = 0 with y nan gives Re = re_at_zero_x (0 for asin, pi/2 for acos)."""
    nan = np.nan
    x_nan, y_nan = isnan(x), isnan(y)
    inf_other = (x_nan & isinf(y)) | (y_nan & isinf(x))
    re = where(inf_other, nan, re)
    im = where(inf_other, np.inf, im)
    zero_x = (x == 0) & y_nan
    re = where(zero_x, re_at_zero_x, re)
    im = where(zero_x, nan, im)
    any_nan = (x_nan | y_nan) & ~inf_other & ~zero_x
    return where(any_nan, nan, re), where(any_nan, nan, im)


def casin(z):
    z = as_complex(z)
    x, y = absolute(z.re), absolute(z.im)
    re, _, im = _asin_acos_first_quadrant(x, y)
    re, im = _nan_rules(x, y, re, im, x)
    return make(copysign(re, z.re), copysign(im, z.im))


def cacos(z):
    """acos z = (Re, -Im) of the first quadrant's, mirrored: acos(-z) =
    pi - acos z, acos(conj z) = conj acos z."""
    z = as_complex(z)
    x, y = absolute(z.re), absolute(z.im)
    _, re, im = _asin_acos_first_quadrant(x, y)
    re = where(signbit(z.re), _PI - re, re)
    re, im = _nan_rules(x, y, re, im, _HALF_PI)
    return make(re, where(isnan(im), im, copysign(im, -z.im)))


def casinh(z):
    z = as_complex(z)
    w = casin(make(-z.im, z.re))          # asinh z = -i asin(iz)
    return make(w.im, -w.re)


def cacosh(z):
    """acosh z = i acos z above the real axis (sign bit of y clear), -i acos z
    below: Re = |Im acos z|, Im = copysign(Re acos z, y)."""
    z = as_complex(z)
    w = cacos(z)
    re = absolute(w.im)
    im = where(isnan(z.im) & ~isnan(w.re), w.re, copysign(w.re, z.im))
    return make(re, im)


def catanh(z):
    z = as_complex(z)
    x, y = absolute(z.re), absolute(z.im)
    far = hypot(x, y) > _LARGE
    xs, ys = where(far, 0.5, x), where(far, 0.5, y)
    one_m = 1.0 - xs
    den = one_m * one_m + ys * ys
    fi = np.finfo(x.dtype)
    # (1 - x)^2 + y^2 may underflow next to z = 1: there the ratio of logs
    underflow = maximum(absolute(one_m), ys) < 4.0 * math.sqrt(float(fi.tiny))
    one_m_u = where(underflow, one_m, 1.0)
    re_ratio = 0.5 * (log(hypot(1.0 + xs, ys)) - log(hypot(one_m_u, ys)))
    re = where(underflow, re_ratio, 0.25 * log1p(4.0 * xs / where(underflow, 1.0, den)))
    im = 0.5 * arctan2(2.0 * ys, one_m * (1.0 + xs) - ys * ys)
    # far: atanh z = 1/z + i pi/2 to O(1/|z|^3); 1/z = conj(z) / |z|^2, scaled by |z| first
    h = where(far, hypot(x, y), 1.0)
    inf = isinf(x) | isinf(y)
    re = where(far, where(inf, 0.0, (x / h) / h), re)
    im = where(far, _HALF_PI - where(inf, 0.0, (y / h) / h), im)
    # nan: atanh(nan + i inf) = 0 + i pi/2, atanh(inf + i nan) = 0 + i nan, atanh(0 + i nan) = 0 + i nan
    x_nan, y_nan = isnan(x), isnan(y)
    re = where(x_nan & isinf(y), 0.0, re)
    im = where(x_nan & isinf(y), _HALF_PI, im)
    re = where(y_nan & (isinf(x) | (x == 0)), 0.0, re)
    im = where(y_nan, np.nan, im)
    re = where((x_nan & ~isinf(y)) | (y_nan & ~isinf(x) & (x != 0)), np.nan, re)
    return make(copysign(re, z.re), where(isnan(im), im, copysign(im, z.im)))


def catan(z):
    z = as_complex(z)
    w = catanh(make(-z.im, z.re))         # atan z = -i atanh(iz)
    return make(w.im, -w.re)
