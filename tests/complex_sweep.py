"""Shared by the complex whole-plane sweeps (test_complex_plane.py): the
points, and cjit's distance from NumPy in ulps, part by part.

The points: each part log-uniform in magnitude over the dtype's range
(1e-300 to 1e300 for complex128, the float32 range for complex64), either
sign, mixed with zeros of both signs, infinities, nans, parts of size 1
(where the inverse functions' branch points are) and points on the
branch cuts (the real axis past 1, the imaginary axis past 1).

The reference: NumPy.  For complex64 it is NumPy's complex128 result of
the same (exactly widened) input, rounded to float32 part by part; that
is nearer the exact value than NumPy's own complex64 functions, and it
keeps the special values (a complex64 input has float32 parts, so a
result that is finite in float32 is finite in float64 too).

The distance: |got - want| in ulps of the dtype at |want| for each part
separately (the ulp of the smallest normal below it), so a small part next
to a large one is judged on its own scale.  Where want is nan, got must be
nan; where want is infinite or zero, got must be the same, sign included.
"""
import numpy as np
from fractions import Fraction

PART = {np.dtype(np.complex64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.float64)}


def points(rng, n, dtype):
    """n complex points of dtype over the whole plane (see the module)."""
    fd = PART[np.dtype(dtype)]
    fi = np.finfo(fd)
    lo, hi = np.log10(fi.tiny) + 1, np.log10(fi.max) - 0.5

    def part(k):
        mag = 10.0 ** rng.uniform(lo, hi, k)
        # a third of the magnitudes near 1, where the functions change form
        near = rng.random(k) < 0.35
        mag[near] = 10.0 ** rng.uniform(-3, 3, near.sum())
        sign = np.where(rng.random(k) < 0.5, -1.0, 1.0)
        v = sign * mag
        kind = rng.random(k)
        special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, 0.5])
        v = np.where(kind < 0.15, rng.choice(special, k), v)
        return v.astype(fd)

    re, im = part(n), part(n)
    # points on the cuts: one part a signed zero, the other past 1
    cut = rng.random(n) < 0.15
    on_real = rng.random(n) < 0.5
    big = (np.where(rng.random(n) < 0.5, -1.0, 1.0) * 10.0 ** rng.uniform(0, 8, n)).astype(fd)
    zero = np.where(rng.random(n) < 0.5, -0.0, 0.0).astype(fd)
    re = np.where(cut & on_real, big, np.where(cut, zero, re))
    im = np.where(cut & on_real, zero, np.where(cut, big, im))
    z = np.empty(n, dtype)
    z.real, z.imag = re, im
    return z


def reference(fn, z):
    """NumPy's fn(z) (see the module for complex64)."""
    with np.errstate(all="ignore"):
        if z.dtype == np.complex64:
            w = fn(z.astype(np.complex128))
            out = np.empty(z.shape, np.complex64)
            out.real, out.imag = w.real.astype(np.float32), w.imag.astype(np.float32)
            return out
        return fn(z)


def _round(w, dtype):
    out = np.empty(w.shape, dtype)
    out.real, out.imag = w.real.astype(PART[np.dtype(dtype)]), w.imag.astype(PART[np.dtype(dtype)])
    return out


def reference_log1p(z):
    """log(1 + z) correctly rounded part by part, for either dtype (NumPy's
    complex log1p takes the log of the rounded |1 + z|, which loses every
    bit of a small z's real part).  Re = ln |1 + z|^2 / 2, |1 + z|^2 exact
    as a fraction and its log taken with 40 decimal digits; Im = atan2(y,
    1 + x) in float64 (rounding 1 + x moves it by at most half an ulp).
    Where a part is not finite or 1 + z is 0: NumPy's values."""
    from decimal import Decimal, localcontext
    w = z.astype(np.complex128)
    with np.errstate(all="ignore"):
        out = np.log1p(w)
        out.imag = np.arctan2(w.imag, 1.0 + w.real)
    with localcontext() as ctx:
        ctx.prec = 40
        for i, v in enumerate(w.flat):
            if not (np.isfinite(v.real) and np.isfinite(v.imag)):
                continue
            t = 2 * Fraction(v.real) + Fraction(v.real) ** 2 + Fraction(v.imag) ** 2  # |1 + z|^2 - 1
            if t == -1:
                continue
            out.flat[i] = complex(_half_log1p(t, Decimal), out.flat[i].imag)
    return _round(out, z.dtype)


def _half_log1p(t, Decimal):
    """ln(1 + t) / 2 to 40 digits for an exact fraction t > -1 (a series
    for small t, where ln of 1 + t would need as many digits as t is small)."""
    if abs(t) >= Fraction(1, 1000):
        m = 1 + t
        return float((Decimal(m.numerator) / Decimal(m.denominator)).ln() / 2)
    d = Decimal(t.numerator) / Decimal(t.denominator)
    total, power, k = Decimal(0), d, 1
    while k < 20:
        total += power / k * (1 if k % 2 else -1)
        power *= d
        k += 1
    return float(total / 2)
    return _round(out, z.dtype)


def reference_expm1(z):
    """(e^z - 1, the scale of the real part's terms) for either dtype.  NumPy's
    complex expm1 is nan where e^a sin b overflows or is inf * 0
    (expm1(1e6 + 0i) = inf + nan i), so the reference is its formula, Re =
    expm1(a) cos b - 2 sin^2(b/2), Im = e^a sin b, in float64, with exp(z) - 1
    past exp's overflow and at the special values (C99's cexp), the exact
    zero of Im at b = 0, and -0 for a real part cos b - 1 that underflows.
    The scale is max(|expm1(a) cos b|, 2 sin^2(b/2)): the two terms cancel
    where e^a cos b is near 1, and then the real part is only as good as
    cos b and expm1(a) are, a few ulps of the scale."""
    w = z.astype(np.complex128)
    a, b = w.real, w.imag
    with np.errstate(all="ignore"):
        h = np.sin(b / 2)
        t1, t2 = np.expm1(a) * np.cos(b), 2 * h * h
        re, im = t1 - t2, np.exp(a) * np.sin(b)
        e = np.exp(w) - 1
        use_e = (a > 700) | ~np.isfinite(a) | ~np.isfinite(b)
        re, im = np.where(use_e, e.real, re), np.where(use_e, e.imag, im)
        re = np.where(b == 0, np.expm1(a), np.where((a == 0) & (re == 0), -0.0, re))
        im = np.where(b == 0, b, im)
        scale = np.where(use_e | (b == 0), 0.0, np.maximum(np.abs(t1), t2))
    out = np.empty(w.shape, np.complex128)
    out.real, out.imag = re, im
    return _round(out, z.dtype), scale


def part_ulps(got, want, fd, floor=None):
    """The distance of each part in ulps (inf where a special value or the
    sign of a zero or an infinity differs); with floor, the ulps are those
    at max(|want|, floor)."""
    fi = np.finfo(fd)
    got = got.astype(np.float64)
    want = want.astype(np.float64)
    with np.errstate(all="ignore"):
        scale = np.maximum(np.abs(want), fi.tiny)
        if floor is not None:
            scale = np.maximum(scale, floor)
        ulp = np.exp2(np.floor(np.log2(scale)) - fi.nmant)
        err = np.abs(got - want) / ulp
    both_nan = np.isnan(got) & np.isnan(want)
    exact_kind = np.isinf(want) | np.isnan(want) | np.isnan(got) | np.isinf(got) | \
        ((want == 0) & (got == 0))
    same = (got == want) & (np.signbit(got) == np.signbit(want))
    err = np.where(exact_kind, np.where(same | both_nan, 0.0, np.inf), err)
    return err


def ulps(got, want, re_floor=None):
    """max over the two parts of part_ulps, element by element.  Where one
    part of the reference is nan and the other infinite or zero, C99 leaves
    the sign of that other part unspecified (csinh(inf + inf i) = +-inf +
    nan i): there only its kind must match."""
    fd = PART[np.dtype(want.dtype)]
    e_re = part_ulps(got.real, want.real, fd, re_floor)
    e_im = part_ulps(got.imag, want.imag, fd)

    def loose(g, w, other):
        kind = (np.isinf(w) & np.isinf(g)) | ((w == 0) & (g == 0))
        return np.isnan(other) & kind

    e_re = np.where(loose(got.real, want.real, want.imag), 0.0, e_re)
    e_im = np.where(loose(got.imag, want.imag, want.real), 0.0, e_im)
    return np.maximum(e_re, e_im)
