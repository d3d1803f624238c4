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


def part_ulps(got, want, fd):
    """The distance of each part in ulps (inf where a special value or the
    sign of a zero or an infinity differs)."""
    fi = np.finfo(fd)
    got = got.astype(np.float64)
    want = want.astype(np.float64)
    with np.errstate(all="ignore"):
        scale = np.maximum(np.abs(want), fi.tiny)
        ulp = np.exp2(np.floor(np.log2(scale)) - fi.nmant)
        err = np.abs(got - want) / ulp
    both_nan = np.isnan(got) & np.isnan(want)
    exact_kind = np.isinf(want) | np.isnan(want) | np.isnan(got) | np.isinf(got) | \
        ((want == 0) & (got == 0))
    same = (got == want) & (np.signbit(got) == np.signbit(want))
    err = np.where(exact_kind, np.where(same | both_nan, 0.0, np.inf), err)
    return err


def ulps(got, want):
    """max over the two parts of part_ulps, element by element.  Where one
    part of the reference is nan and the other infinite or zero, C99 leaves
    the sign of that other part unspecified (csinh(inf + inf i) = +-inf +
    nan i): there only its kind must match."""
    fd = PART[np.dtype(want.dtype)]
    e_re = part_ulps(got.real, want.real, fd)
    e_im = part_ulps(got.imag, want.imag, fd)

    def loose(g, w, other):
        kind = (np.isinf(w) & np.isinf(g)) | ((w == 0) & (g == 0))
        return np.isnan(other) & kind

    e_re = np.where(loose(got.real, want.real, want.imag), 0.0, e_re)
    e_im = np.where(loose(got.imag, want.imag, want.real), 0.0, e_im)
    return np.maximum(e_re, e_im)
