"""Complex log, log1p, tanh, tan, expm1, sign, reciprocal and division,
accurate part by part over the whole plane (NumPy's values at the special
points, tests/test_complex_plane.py).

Where a formula would cancel, the cancelling sum is formed exactly: a
product a*b is p + e with p = a*b rounded and e = fma(a, b, -p) (exact, the
FMA op rounds once), a sum a + b is s + r with Knuth's two-sum.  So
x^2 + y^2 - 1 (log next to |z| = 1) and 2x + x^2 + y^2 (log1p next to
|1 + z| = 1) are rounded once, at the end, and log1p of them keeps every
bit that the inputs determine.
"""
from __future__ import annotations

import numpy as np

from ._complex import _exp_times, _lift_part, make, parts


def _cnp():
    from .. import numpy as cnp
    return cnp


def _fma(x, y, z):
    """x * y + z rounded once."""
    x = _lift_part(x)
    return x.trace.apply("fma", x, y, z)


def _two_prod(a, b):
    """(p, e) with p + e = a * b exactly (while a*b neither overflows nor
    underflows past the subnormals)."""
    p = a * b
    return p, _fma(a, b, -p)


def _two_sum(a, b):
    """(s, r) with s + r = a + b exactly (Knuth: no order of |a|, |b| needed)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _exact_sum(terms, tails=()):
    """The sum of terms (the large ones, in any order) and tails (small ones,
    each below an ulp of the result's scale), rounded about once: the terms
    are added with two-sums and their rounding errors collected with the
    tails."""
    s = terms[0]
    errs = list(tails)
    for t in terms[1:]:
        s, r = _two_sum(s, t)
        errs.append(r)
    tail = errs[0]
    for e in errs[1:]:
        tail = tail + e
    return s + tail


def log_abs(x, y):
    """log |x + iy|.  For |z| in (1/2, 2) it is log1p(x^2 + y^2 - 1) / 2, the
    argument summed exactly (x^2 + y^2 - 1 cancels next to the unit circle,
    where log|z| loses its relative accuracy); elsewhere log(hypot(x, y))
    (hypot neither overflows nor underflows, and |log| >= log 2 there)."""
    c = _cnp()
    ax, ay = c.abs(x), c.abs(y)
    h = c.hypot(ax, ay)
    near = (h > 0.5) & (h < 2.0)
    # points that are not near get harmless inputs (their gradient stays finite)
    hi = c.where(near, c.maximum(ax, ay), 1.0)
    lo = c.where(near, c.minimum(ax, ay), 0.0)
    p1, e1 = _two_prod(hi, hi)
    p2, e2 = _two_prod(lo, lo)
    t = _exact_sum([p1, -1.0, p2], [e2, e1])
    return c.where(near, 0.5 * c.log1p(t), c.log(c.where(near, 1.0, h)))


def clog(z):
    c = _cnp()
    x, y = parts(z)
    return make(log_abs(x, y), c.arctan2(y, x))


def clog1p(z):
    """log(1 + z): Re = log1p(2x + x^2 + y^2) / 2 (summed exactly) where
    |1 + z| is in (1/2, 2), log |1 + z| elsewhere (1 + x has one rounding,
    which changes log |1 + z| by at most half an ulp of 1 there);
    Im = atan2(y, 1 + x)."""
    c = _cnp()
    x, y = parts(z)
    x, y = _lift_part(x), _lift_part(y)
    u = 1.0 + x
    h = c.hypot(u, y)
    near = (h > 0.5) & (h < 2.0)
    xs = c.where(near, x, 0.0)
    ys = c.where(near, y, 0.0)
    p1, e1 = _two_prod(xs, xs)
    p2, e2 = _two_prod(ys, ys)
    t = _exact_sum([2.0 * xs, p1, p2], [e2, e1])
    re = c.where(near, 0.5 * c.log1p(t), c.log(c.where(near, 1.0, h)))
    return make(re, c.arctan2(y, u))


def ctanh(z):
    """tanh(a + ib) = (sinh a cosh a + i sin b cos b) / (sinh^2 a + cos^2 b).
    The denominator, cosh 2a + cos 2b over 2 in the textbook form, is a sum
    of squares here: no cancellation next to the poles (a = 0, cos b = 0).
    Past |a| = 20 the real part is sign(a) to working precision and the
    imaginary part 2 sin 2b e^(-2|a|).  C99's (and NumPy's) special values:
    tanh(+-0 + i y) = +-0 + i nan for y not finite, tanh(x + i y) = nan + i nan
    for other finite x, tanh(+-inf + i y) = +-1 + i 0 sin 2y (the zero's sign
    that of y where sin 2y is nan), tanh(nan + 0i) = nan + 0i."""
    c = _cnp()
    a, b = parts(z)
    a, b = _lift_part(a), _lift_part(b)
    big = c.abs(a) > 20.0
    ac = c.where(big, 0.0, a)
    s, ch = c.sinh(ac), c.cosh(ac)
    sb, cb = c.sin(b), c.cos(b)
    den = s * s + cb * cb
    re = c.where(big, c.copysign(1.0, a), (s * ch) / den)
    far = 2.0 * c.sin(2.0 * b) * c.exp(-2.0 * c.abs(c.where(big, a, 30.0)))
    im = c.where(big, far, (sb * cb) / den)
    inf_a, fin_b = c.isinf(a), c.isfinite(b)
    im = c.where(inf_a & ~fin_b, c.where(c.isnan(b), 0.0, c.copysign(0.0, b)), im)
    bad = c.isfinite(a) & ~fin_b
    re = c.where(bad, c.where(a == 0, a, np.nan), re)
    im = c.where(bad, np.nan, im)
    return make(re, c.where(b == 0, b, im))


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
    c = _cnp()
    a, b = parts(z)
    a, b = _lift_part(a), _lift_part(b)
    cb, sb = c.cos(b), c.sin(b)
    big, re_big = _exp_times(cb, a, False)
    _, im_big = _exp_times(sb, a, False)
    big = big & (a > 0)
    h = c.sin(b * 0.5)
    two_h2 = 2.0 * (h * h)
    # a = 0: cos b - 1 = -2 sin^2(b/2), a negative zero where it underflows
    re = c.where(a == 0, -two_h2, c.expm1(a) * cb - two_h2)
    # a < -1: e^a cos b is below 0.37, so nothing cancels, and expm1(-huge) cos b - ... is not -1
    re = c.where(a < -1.0, c.exp(a) * cb - 1.0, re)
    re = c.where(big, re_big, re)
    im = c.where(big, im_big, c.exp(a) * sb)
    re = c.where(b == 0, c.expm1(a), re)
    im = c.where(b == 0, b, im)
    odd = c.isinf(a) & ~c.isfinite(b)
    re = c.where(odd, c.where(a > 0, a, -1.0), re)
    im = c.where(odd, c.where(a > 0, np.nan, c.copysign(0.0, b)), im)
    return make(re, im)


def csign(z):
    """z / |z|, 0 at 0 (NumPy 2's definition), and NumPy's values at the
    infinities: an infinite part gives the unit in its direction (+-1 + 0i,
    0 +- 1i, whatever the other part, nan included); both infinite give nan."""
    c = _cnp()
    x, y = parts(z)
    x, y = _lift_part(x), _lift_part(y)
    r = c.hypot(x, y)
    zero = r == 0
    safe = c.where(zero | c.isinf(r), 1.0, r)
    re = c.where(zero, 0.0, x / safe)
    im = c.where(zero, 0.0, y / safe)
    xi, yi = c.isinf(x), c.isinf(y)
    re = c.where(xi & ~yi, c.copysign(1.0, x), c.where(yi & ~xi, 0.0, re))
    im = c.where(xi & ~yi, 0.0, c.where(yi & ~xi, c.copysign(1.0, y), im))
    both = xi & yi
    return make(c.where(both, np.nan, re), c.where(both, np.nan, im))


def creciprocal(z):
    """1 / z = conj(z) / |z|^2 formed as Smith's division does it (the ratio
    of the smaller part to the larger, no square of a part), which gives
    NumPy's values: the signs of zero parts are those of x / |z|^2 and
    -y / |z|^2 (1 / (x + 0i) = 1/x - 0i), 1/0 is nan + i nan."""
    c = _cnp()
    x, y = parts(z)
    x, y = _lift_part(x), _lift_part(y)
    by_x = c.abs(y) <= c.abs(x)
    # each branch gets a harmless divisor where the other is taken
    xs = c.where(by_x, x, 1.0)
    ys = c.where(by_x, 1.0, y)
    r1 = y / xs
    d1 = x + y * r1
    r2 = x / ys
    d2 = x * r2 + y
    re = c.where(by_x, 1.0 / d1, r2 / d2)
    im = c.where(by_x, -r1 / d1, -1.0 / d2)
    nan = c.isnan(x) | c.isnan(y) | ((x == 0) & (y == 0))
    return make(c.where(nan, np.nan, re), c.where(nan, np.nan, im))


def cdiv(ar, ai, br, bi):
    """(ar + i ai) / (br + i bi) by Smith's algorithm (the ratio r of the
    divisor's smaller part q to its larger p: no square of a part is
    formed), with three repairs.  An operand whose larger part is within a
    factor 4 of overflow is scaled by 1/4, one whose larger part is below
    2^-900 by 2^600, and the quotient scaled
    back: p + q r would overflow next to the largest floats, and subnormal
    parts lose their bits in products.  Where r is subnormal, x r is formed
    as (x / p) q (or (x q) / p where x / p overflows).  And where a part is infinite: a zero divisor gives
    (ar / 0, ai / 0) as NumPy's; an infinite dividend (no nan) over a finite
    nonzero divisor gives C99's infinity, inf (u br + v bi) + i inf (v br -
    u bi) with u, v the signed 1 or 0 of each infinite or finite part.
    complex64: plain Smith's (_cdiv32)."""
    c = _cnp()
    vs = [_lift_part(v) for v in (ar, ai, br, bi)]
    if any(v.dtype != np.float64 for v in vs):
        from ._core import _result_type
        dt, _ = _result_type(*[(v.dtype, v.weak) for v in vs], (np.dtype(np.float32), False))
        if np.dtype(dt) == np.float32:
            return _cdiv32(*(v.astype(np.float32) for v in vs))
        vs = [v.astype(np.float64) for v in vs]
    ar, ai, br, bi = vs
    fi = np.finfo(ar.dtype)
    small, step = 2.0 ** -900, 2.0 ** 600
    big = float(fi.max) / 4.0
    mn = c.maximum(c.abs(ar), c.abs(ai))
    md = c.maximum(c.abs(br), c.abs(bi))
    sn = c.where(mn > big, 0.25, c.where(mn < small, step, 1.0))
    sd = c.where(md > big, 0.25, c.where(md < small, step, 1.0))
    xr, xi, yr, yi = ar * sn, ai * sn, br * sd, bi * sd
    big_re = c.abs(yr) >= c.abs(yi)
    p = c.where(big_re, yr, yi)
    q = c.where(big_re, yi, yr)
    safe_p = c.where(p == 0, 1.0, p)     # a harmless divisor where p is 0 (the result is set below)
    r = q / safe_p
    d = p + q * r
    under = c.abs(r) < float(fi.tiny)

    def times_r(x):
        # x q / p: (x / p) q, or (x q) / p where x / p overflows (q is then far below p)
        xp = x / safe_p
        return c.where(under, c.where(c.isinf(xp), (x * q) / safe_p, xp * q), x * r)

    xr_r, xi_r = times_r(xr), times_r(xi)
    # |yr| >= |yi|: ((xr + xi r) + i (xi - xr r)) / d, else ((xr r + xi) + i (xi r - xr)) / d
    re = c.where(big_re, xr + xi_r, xr_r + xi) / d
    im = c.where(big_re, xi - xr_r, xi_r - xr) / d
    # back by exact powers of 2 (where both scalings go one way, the result over- or underflows anyway)
    re, im = (re * sd) * (1.0 / sn), (im * sd) * (1.0 / sn)
    return _div_specials(c, ar, ai, br, bi, re, im)


def _cdiv32(ar, ai, br, bi):
    """complex64 division: Smith's steps in float32, as before this module
    (a chain of complex64 operations with a division still fuses into one
    kernel without temporaries: each part is read at most four times).
    Not yet held to the sweep's bound: parts of very different sizes can
    lose bits where the ratio or a product is subnormal."""
    c = _cnp()
    big_re = c.abs(br) >= c.abs(bi)
    safe_br = c.where(big_re, br, 1.0)
    safe_bi = c.where(big_re, 1.0, bi)
    r1 = bi / safe_br
    d1 = br + bi * r1
    r2 = br / safe_bi
    d2 = bi + br * r2
    re = c.where(big_re, (ar + ai * r1) / d1, (ar * r2 + ai) / d2)
    im = c.where(big_re, (ai - ar * r1) / d1, (ai * r2 - ar) / d2)
    return make(re, im)


def _div_specials(c, ar, ai, br, bi, re, im):
    """C99's infinity for an infinite dividend (no nan) over a finite nonzero
    divisor, NumPy's (ar / 0, ai / 0) for a zero divisor."""
    md = c.maximum(c.abs(br), c.abs(bi))
    inf_n = (c.isinf(ar) | c.isinf(ai)) & ~c.isnan(ar) & ~c.isnan(ai)
    rec = inf_n & c.isfinite(br) & c.isfinite(bi) & (md > 0)
    u = c.copysign(c.where(c.isinf(ar), 1.0, 0.0), ar)
    v = c.copysign(c.where(c.isinf(ai), 1.0, 0.0), ai)

    def infinity(t):
        # inf t without a product by inf, whose gradient would be nan everywhere
        return c.where(t > 0, np.inf, c.where(t < 0, -np.inf, np.nan))

    re = c.where(rec, infinity(u * br + v * bi), re)
    im = c.where(rec, infinity(v * br - u * bi), im)
    zero = md == 0
    return make(c.where(zero, ar / c.where(zero, c.abs(br), 1.0), re),
                c.where(zero, ai / c.where(zero, c.abs(bi), 1.0), im))
