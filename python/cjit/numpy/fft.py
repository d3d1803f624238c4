"""cjit.numpy.fft: the array API's fft extension, with NumPy's and JAX's
signatures (the array to transform is `a`, `d` and `axes` may be given by
position).

The frequency helpers (fftfreq, rfftfreq) and the shifts (fftshift,
ifftshift) are real-valued and work like the rest of cjit.numpy, traced or
eager.  The transforms take and give complex arrays (numpy/_complex.py) and
are built from cjit's own ops (see "the transforms" below), so they fuse
with their neighbours and differentiate.
"""
from __future__ import annotations

import math

import numpy as np

from .._cjit import Tracer
from .._dtypes import canonical_dtype
from .._trace_state import current_trace
from . import _complex as C
from ._complex_dispatch import eager
from ._core import _lift
from ._creation import _no_device, arange, asarray
from ._elementwise import astype
from ._gather import take
from ._linalg import matmul
from ._manipulation import concatenate, moveaxis, pad, reshape, roll, swapaxes

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
           "fft2", "ifft2", "rfft2", "irfft2",
           "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _frequencies(n, d, dtype, device, who, real):
    _no_device(device, who)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
        raise ValueError(f"cjit.numpy.fft.{who}: n must be a positive integer, got {n!r}")
    n = int(n)
    dt = np.dtype(np.float64) if dtype is None else canonical_dtype(dtype, f"cjit.numpy.fft.{who}: dtype")
    if dt.kind != "f":
        raise ValueError(f"cjit.numpy.fft.{who}: dtype must be a real floating dtype, got {dt}")
    if real:
        k = np.arange(n // 2 + 1)
    else:   # 0, 1, ..., ceil(n/2) - 1, then -floor(n/2), ..., -1
        k = np.concatenate([np.arange((n + 1) // 2), np.arange(-(n // 2), 0)])
    values = (k / (n * d)).astype(dt)
    # n is static: a constant of the trace when one is running
    return values if current_trace() is None else _lift(values)


def fftfreq(n, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of an n-point FFT with sample spacing d."""
    return _frequencies(n, d, dtype, device, "fftfreq", real=False)


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    """The non-negative sample frequencies of an n-point real FFT."""
    return _frequencies(n, d, dtype, device, "rfftfreq", real=True)


def _shift(x, axes, sign):
    ndim = len(x.shape) if hasattr(x, "shape") else np.ndim(x)
    if axes is None:
        axes = tuple(range(ndim))
    elif isinstance(axes, (int, np.integer)):
        axes = (int(axes),)
    shape = np.shape(x)
    shifts = tuple(sign * (shape[a] // 2) for a in axes)
    if not axes:
        return roll(x, 0, axis=None) if ndim else x
    return roll(x, shifts, axis=tuple(axes))


def fftshift(x, axes=None):
    """x rolled so that the zero frequency is in the middle of each axis."""
    return _shift(x, axes, +1)


def ifftshift(x, axes=None):
    """The inverse of fftshift (they differ for odd lengths)."""
    return _shift(x, axes, -1)


# ---------------------------------------------------------------------------
# the transforms
#
# A transform along one axis of length n is written with cjit's own ops, so
# it fuses, differentiates and runs wherever the rest does:
# - n up to _DIRECT (or with no factor): the product with the DFT matrix,
#   a constant [n, n] (complex products are four real ones, two for a
#   real input);
# - otherwise the four-step split n = n1 * n2 (n1 the largest factor up to
#   sqrt(n)): transforms of length n1 down the columns of the [n1, n2]
#   view, a twiddle factor per element, transforms of length n2 along the
#   rows, and the transpose that puts the output in order.  The work is
#   O(n (n1 + n2)) at the top level and shrinks with each split.
# - a prime n above _DIRECT: Bluestein's chirp, which turns the transform
#   into a convolution of power-of-two length.

_DIRECT = 64


def _factor(n):
    """The largest factor of n that is at most sqrt(n) (1 for a prime)."""
    f = int(np.sqrt(n))
    while f > 1 and n % f:
        f -= 1
    return f


def _part_dtype(z):
    dt = np.dtype(z.dtype)
    if dt.kind == "c":
        return C.part_dtype(dt)
    return dt if dt == np.float32 else np.dtype(np.float64)


def _dft_last(z, inverse, pd):
    """The unnormalized DFT of z (complex or real) along its last axis."""
    n = z.shape[-1]
    sign = 1.0 if inverse else -1.0
    if n == 1:
        return C.as_complex(z) if not isinstance(z, C.ComplexTracer) else z
    f = _factor(n)
    if n <= _DIRECT or (f == 1 and n <= 4 * _DIRECT):
        k = np.arange(n)
        ang = sign * 2.0 * np.pi * (np.outer(k, k) % n) / n
        w = C.make(asarray(np.cos(ang).astype(pd)), asarray(np.sin(ang).astype(pd)))
        return C.bilinear(lambda p, q: matmul(p, q), z, w)
    if f == 1:
        return _bluestein(z, inverse, pd)
    n1, n2 = f, n // f
    lead = tuple(z.shape[:-1])
    a = C.linear(lambda v: reshape(v, lead + (n1, n2)), z)
    b = C.linear(lambda v: swapaxes(v, -1, -2), a)          # [.., n2, n1]
    b = _dft_last(b, inverse, pd)                               # over j1
    b = C.linear(lambda v: swapaxes(v, -1, -2), b)          # [.., k1, j2]
    ang = sign * 2.0 * np.pi * (np.outer(np.arange(n1), np.arange(n2)) % n) / n
    tw = C.make(asarray(np.cos(ang).astype(pd)), asarray(np.sin(ang).astype(pd)))
    c = C.binop("mul", b, tw)
    d = _dft_last(c, inverse, pd)                               # [.., k1, k2]
    d = C.linear(lambda v: swapaxes(v, -1, -2), d)          # [.., k2, k1]
    return C.linear(lambda v: reshape(v, lead + (n,)), d)


def _bluestein(z, inverse, pd):
    """A DFT of any length n as a convolution with the chirp
    w_k = exp(-+ i pi k^2 / n), done with transforms of length 2^m >= 2n - 1."""
    n = z.shape[-1]
    m = 1 << (2 * n - 2).bit_length()
    sign = 1.0 if inverse else -1.0
    k = np.arange(n)
    ang = sign * np.pi * ((k * k) % (2 * n)) / n
    chirp = C.make(asarray(np.cos(ang).astype(pd)), asarray(np.sin(ang).astype(pd)))
    a = C.binop("mul", z, chirp)
    widths = [(0, 0)] * (len(z.shape) - 1) + [(0, m - n)]
    a = C.linear(lambda v: pad(v, widths), a)
    # b_k = conj(chirp_k) for k = 0..n-1 and at m - k, zero between
    bk = np.zeros(m, dtype=np.complex128)
    conj = np.exp(-1j * ang)
    bk[:n] = conj
    bk[m - n + 1:] = conj[1:][::-1]
    fb = np.fft.fft(bk)
    fa = _dft_last(a, False, pd)
    prod = C.binop("mul", fa, C.make(asarray(fb.real.astype(pd)), asarray(fb.imag.astype(pd))))
    conv = _dft_last(prod, True, pd)
    conv = C.linear(lambda v: v[..., :n] * (1.0 / m), conv)
    return C.binop("mul", conv, chirp)


def _norm_scale(norm, n, inverse, who):
    if norm is None or norm == "backward":
        return 1.0 / n if inverse else 1.0
    if norm == "ortho":
        return 1.0 / math.sqrt(n)        # a Python float keeps complex64 results complex64
    if norm == "forward":
        return 1.0 if inverse else 1.0 / n
    raise ValueError(f"cjit.numpy.fft.{who}: norm must be 'backward', 'ortho' or 'forward', "
                     f"got {norm!r}")


def _fit(z, n, axis):
    """z cut or zero-padded to length n along axis (the last one here)."""
    have = z.shape[axis]
    if n == have:
        return z
    if n < have:
        return C.linear(lambda v: take(v, arange(n), axis=axis), z)
    widths = [(0, 0)] * len(z.shape)
    widths[axis] = (0, n - have)
    return C.linear(lambda v: pad(v, widths), z)


def _transform(z, n, axis, norm, inverse, who):
    """The (inverse) DFT of z along axis, cut or padded to n."""
    if not isinstance(z, (C.ComplexTracer,)) and not hasattr(z, "shape"):
        z = asarray(z)
    nd = len(z.shape)
    if nd == 0:
        raise ValueError(f"cjit.numpy.fft.{who}: the input must have at least one dimension")
    if not -nd <= axis < nd:
        raise ValueError(f"cjit.numpy.fft.{who}: axis {axis} is out of range for {nd} dimensions")
    axis %= nd
    n = z.shape[axis] if n is None else int(n)
    if n < 1:
        raise ValueError(f"cjit.numpy.fft.{who}: invalid number of points {n}")
    pd = _part_dtype(z)
    z = _fit(z, n, axis)
    z = C.linear(lambda v: moveaxis(v, axis, -1), z)
    if np.dtype(z.dtype).kind not in "fc":
        z = astype(z, pd)
    r = _dft_last(z, inverse, pd)
    s = _norm_scale(norm, n, inverse, who)
    if s != 1.0:
        r = C.linear(lambda v: v * s, r)
    return C.linear(lambda v: moveaxis(v, -1, axis), r)


def _run(who, impl, x, *args):
    """impl(x, *args) traced, or eagerly under an internal jit."""
    if current_trace() is None and not isinstance(x, (Tracer, C.ComplexTracer)):
        if not isinstance(x, np.ndarray) and not isinstance(x, np.generic):
            x = np.asarray(x)
        return eager(f"fft.{who}", lambda v, *a: impl(v, *a), [x, *args], {})
    return impl(x, *args)


def _ints(v):
    """s= or axes= as a tuple of Python ints (static arguments of the eager jit)."""
    return None if v is None else tuple(int(a) for a in np.atleast_1d(v))


def _axes_and_sizes(x, s, axes, who):
    nd = len(np.shape(x)) if not hasattr(x, "shape") else len(x.shape)
    if axes is None:
        axes = tuple(range(nd)) if s is None else tuple(range(nd - len(s), nd))
    elif isinstance(axes, (int, np.integer)):
        axes = (int(axes),)
    axes = tuple(int(a) for a in axes)
    if s is None:
        s = [None] * len(axes)
    elif len(s) != len(axes):
        raise ValueError(f"cjit.numpy.fft.{who}: s and axes have different lengths")
    return axes, list(s)


def fft(a, n=None, axis=-1, norm=None):
    """The discrete Fourier transform along one axis (NumPy's and the array
    API's signature)."""
    return _run("fft", lambda v, n_, a_, m_: _transform(v, n_, a_, m_, False, "fft"), a, n, axis, norm)


def ifft(a, n=None, axis=-1, norm=None):
    """The inverse discrete Fourier transform along one axis."""
    return _run("ifft", lambda v, n_, a_, m_: _transform(v, n_, a_, m_, True, "ifft"), a, n, axis, norm)


def _nd(x, s, axes, norm, inverse, who):
    axes, sizes = _axes_and_sizes(x, s, axes, who)
    for a, n in zip(axes, sizes):
        x = _transform(x, n, a, norm, inverse, who)
    return x


def fftn(a, s=None, axes=None, norm=None):
    """The N-dimensional transform over `axes` (all by default)."""
    return _run("fftn", lambda v, s_, a_, m_: _nd(v, s_, a_, m_, False, "fftn"), a,
                _ints(s), _ints(axes), norm)


def ifftn(a, s=None, axes=None, norm=None):
    """The inverse N-dimensional transform."""
    return _run("ifftn", lambda v, s_, a_, m_: _nd(v, s_, a_, m_, True, "ifftn"), a,
                _ints(s), _ints(axes), norm)


def fft2(a, s=None, axes=(-2, -1), norm=None):
    return fftn(a, s=s, axes=axes, norm=norm)


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    return ifftn(a, s=s, axes=axes, norm=norm)


def _rfft(x, n, axis, norm, who="rfft"):
    if isinstance(x, C.ComplexTracer):
        raise TypeError(f"cjit.numpy.fft.{who}: the input must be real, got {x.dtype}")
    nd = len(x.shape)
    axis %= max(nd, 1)
    full = _transform(x, n, axis, norm, False, who)
    m = full.shape[axis] // 2 + 1
    return C.linear(lambda v: take(v, arange(m), axis=axis), full)


def _irfft(x, n, axis, norm, who="irfft"):
    """The real inverse of a half spectrum: the full Hermitian spectrum is
    rebuilt (X[n - k] = conj X[k]) and transformed back; the imaginary
    parts of X[0] (and X[n/2]) drop out, as in NumPy."""
    z = C.as_complex(x if hasattr(x, "shape") else asarray(x))
    nd = len(z.shape)
    axis %= nd
    m_in = z.shape[axis]
    n = 2 * (m_in - 1) if n is None else int(n)
    if n < 1:
        raise ValueError(f"cjit.numpy.fft.{who}: invalid number of points {n} (the input has "
                         f"{m_in} along axis {axis})")
    half = _fit(z, n // 2 + 1, axis)
    pick = lambda v, idx: take(v, asarray(np.asarray(idx, dtype=np.int64)), axis=axis)
    mirror = list(range((n + 1) // 2 - 1, 0, -1))    # X[n - k] for k = n//2 + 1 .. n - 1
    if mirror:
        tail = C.linear(lambda v: pick(v, mirror), half).conj()
        full = C.make(concatenate([half.re, tail.re], axis=axis),
                      concatenate([half.im, tail.im], axis=axis))
    else:
        full = half
    return _transform(full, n, axis, norm, True, who).re


def rfft(a, n=None, axis=-1, norm=None):
    """The transform of a real input: the n // 2 + 1 non-negative frequencies."""
    return _run("rfft", _rfft, a, n, axis, norm)


def irfft(a, n=None, axis=-1, norm=None):
    """The real inverse of rfft (n defaults to 2 (m - 1) for m input points)."""
    return _run("irfft", _irfft, a, n, axis, norm)


def _rfftn(x, s, axes, norm, who="rfftn"):
    axes, sizes = _axes_and_sizes(x, s, axes, who)
    x = _rfft(x, sizes[-1], axes[-1], norm, who)
    for a, n in zip(axes[:-1], sizes[:-1]):
        x = _transform(x, n, a, norm, False, who)
    return x


def _irfftn(x, s, axes, norm, who="irfftn"):
    axes, sizes = _axes_and_sizes(x, s, axes, who)
    for a, n in zip(axes[:-1], sizes[:-1]):
        x = _transform(x, n, a, norm, True, who)
    return _irfft(x, sizes[-1], axes[-1], norm, who)


def rfftn(a, s=None, axes=None, norm=None):
    """rfft over the last of `axes`, fft over the others."""
    return _run("rfftn", _rfftn, a, _ints(s), _ints(axes), norm)


def irfftn(a, s=None, axes=None, norm=None):
    """The inverse of rfftn."""
    return _run("irfftn", _irfftn, a, _ints(s), _ints(axes), norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    return rfftn(a, s=s, axes=axes, norm=norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    return irfftn(a, s=s, axes=axes, norm=norm)


_SWAP = {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}


def hfft(a, n=None, axis=-1, norm=None):
    """The transform of a signal with Hermitian symmetry (a real spectrum)."""
    def impl(v, n_, a_, m_):
        if m_ not in _SWAP:
            _norm_scale(m_, 1, False, "hfft")
        return _irfft(C.as_complex(v).conj(), n_, a_, _SWAP[m_], "hfft")
    return _run("hfft", impl, a, n, axis, norm)


def ihfft(a, n=None, axis=-1, norm=None):
    """The inverse of hfft: the half spectrum of a real signal, conjugated."""
    def impl(v, n_, a_, m_):
        if m_ not in _SWAP:
            _norm_scale(m_, 1, False, "ihfft")
        return _rfft(v, n_, a_, _SWAP[m_], "ihfft").conj()
    return _run("ihfft", impl, a, n, axis, norm)
