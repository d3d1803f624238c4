"""cjit.numpy.fft: the array API's fft extension.

The frequency helpers (fftfreq, rfftfreq) and the shifts (fftshift,
ifftshift) are real-valued and work like the rest of cjit.numpy, traced or
eager.  The transforms themselves produce or consume complex arrays, and
cjit has no complex dtypes yet: they exist with the standard's signatures
so that a program finds them, and raise NotImplementedError saying so.
"""
from __future__ import annotations

import numpy as np

from ..api import current_trace
from .._dtypes import canonical_dtype
from ._core import _lift
from ._creation import _no_device
from ._manipulation import roll

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
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


def fftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The sample frequencies of an n-point FFT with sample spacing d."""
    return _frequencies(n, d, dtype, device, "fftfreq", real=False)


def rfftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The non-negative sample frequencies of an n-point real FFT."""
    return _frequencies(n, d, dtype, device, "rfftfreq", real=True)


def _shift(x, axes, sign):
    ndim = np.ndim(x)
    if axes is None:
        axes = tuple(range(ndim))
    elif isinstance(axes, (int, np.integer)):
        axes = (int(axes),)
    shape = np.shape(x)
    shifts = tuple(sign * (shape[a] // 2) for a in axes)
    if not axes:
        return roll(x, 0, axis=None) if ndim else x
    return roll(x, shifts, axis=tuple(axes))


def fftshift(x, /, *, axes=None):
    """x rolled so that the zero frequency is in the middle of each axis."""
    return _shift(x, axes, +1)


def ifftshift(x, /, *, axes=None):
    """The inverse of fftshift (they differ for odd lengths)."""
    return _shift(x, axes, -1)


def _needs_complex(who):
    raise NotImplementedError(
        f"cjit.numpy.fft.{who}: Fourier transforms produce or take complex arrays, and cjit has "
        "no complex dtypes yet; use numpy.fft outside jit")


def fft(x, /, *, n=None, axis=-1, norm="backward"):
    _needs_complex("fft")


def ifft(x, /, *, n=None, axis=-1, norm="backward"):
    _needs_complex("ifft")


def fftn(x, /, *, s=None, axes=None, norm="backward"):
    _needs_complex("fftn")


def ifftn(x, /, *, s=None, axes=None, norm="backward"):
    _needs_complex("ifftn")


def rfft(x, /, *, n=None, axis=-1, norm="backward"):
    _needs_complex("rfft")


def irfft(x, /, *, n=None, axis=-1, norm="backward"):
    _needs_complex("irfft")


def rfftn(x, /, *, s=None, axes=None, norm="backward"):
    _needs_complex("rfftn")


def irfftn(x, /, *, s=None, axes=None, norm="backward"):
    _needs_complex("irfftn")


def hfft(x, /, *, n=None, axis=-1, norm="backward"):
    _needs_complex("hfft")


def ihfft(x, /, *, n=None, axis=-1, norm="backward"):
    _needs_complex("ihfft")
