"""cjit.numpy's polynomials, 1-D convolutions and piecewise-linear lookups
(polyval, vander, convolve, correlate, interp, digitize), built from
static slices, products and sums so that they fuse and differentiate."""
from __future__ import annotations

import numpy as np

from ._complex_dispatch import complex_aware
from ._core import _F64, _is_float, _lift, _op, _operand
from ._elementwise import where
from ._creation import ones_like, zeros_like
from ._manipulation import broadcast_to, pad, stack
from ._reductions import sum

__all__ = ["polyval", "vander", "convolve", "correlate", "interp", "digitize"]


@_op("p", "x")
def polyval(p, x):
    """p[0] * x**(n-1) + ... + p[n-1], by Horner's rule (p 1-D, highest
    degree first, as NumPy)."""
    c = _lift(_operand(p, "polyval"))
    v = _lift(_operand(x, "polyval"))
    if c.ndim != 1:
        raise ValueError(f"cjit.numpy.polyval: p must be 1-D, got shape {tuple(c.shape)}")
    r = broadcast_to(c[0], tuple(v.shape)) if c.shape[0] else zeros_like(v)
    for i in range(1, c.shape[0]):
        r = r * v + c[i]
    return r


@_op("x")
def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of 1-D x: columns x**(N-1), ..., x**0 (or
    increasing powers)."""
    v = _lift(_operand(x, "vander"))
    if v.ndim != 1:
        raise ValueError(f"cjit.numpy.vander: x must be 1-D, got shape {tuple(v.shape)}")
    n = v.shape[0] if N is None else int(N)
    cols, power = [], ones_like(v)
    for _ in range(n):
        cols.append(power)
        power = power * v
    if not increasing:
        cols = cols[::-1]
    if not cols:
        return zeros_like(v[:, None])[:, :0]
    return stack(cols, axis=1)


def _sliding(a, k, who):
    """The windows of length k of 1-D a as k shifted views: windows[j][i] =
    a[i + j], i < len(a) - k + 1."""
    n = a.shape[0] - k + 1
    return [a[j:j + n] for j in range(k)]


def _correlate_valid(a, v, who):
    # sum_j a[i + j] * v[j]; v is the shorter, its length is static
    windows = _sliding(a, v.shape[0], who)
    r = windows[0] * v[0]
    for j in range(1, v.shape[0]):
        r = r + windows[j] * v[j]
    return r


def _prepare(a, v, mode, who):
    x = _lift(_operand(a, who))
    y = _lift(_operand(v, who))
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError(f"cjit.numpy.{who}: both inputs must be 1-D, got shapes "
                         f"{tuple(x.shape)} and {tuple(y.shape)}")
    if x.shape[0] == 0 or y.shape[0] == 0:
        raise ValueError(f"cjit.numpy.{who}: inputs cannot be empty")
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"cjit.numpy.{who}: mode must be 'full', 'same' or 'valid', got {mode!r}")
    return x, y


def _correlate(x, y, mode):
    """NumPy's correlate(x, y, mode) for 1-D x, y (NumPy swaps to keep the
    longer first and reverses the result when it does)."""
    n, m = x.shape[0], y.shape[0]
    swapped = m > n
    if swapped:
        x, y, n, m = y, x, m, n
    if mode == "valid":
        r = _correlate_valid(x, y, "correlate")
    elif mode == "full":
        r = _correlate_valid(pad(x, (m - 1, m - 1)), y, "correlate")
    else:   # same: the full result's middle n
        left = m // 2
        r = _correlate_valid(pad(x, (left, m - 1 - left)), y, "correlate")
    return r[::-1] if swapped else r


@_op("a", "v")
def correlate(a, v, mode="valid"):
    """The 1-D cross-correlation sum_n a[n + k] * v[n] (real inputs)."""
    x, y = _prepare(a, v, mode, "correlate")
    return _correlate(x, y, mode)


@_op("a", "v")
def convolve(a, v, mode="full"):
    """The 1-D discrete convolution of a and v."""
    x, y = _prepare(a, v, mode, "convolve")
    if y.shape[0] > x.shape[0]:
        x, y = y, x
    return _correlate(x, y[::-1], mode)


@_op("x", "xp", "fp")
def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of (xp, fp) at x (xp increasing).
    Each x is compared with every xp: O(len(x) * len(xp)) work, fused."""
    if period is not None:
        raise NotImplementedError("cjit.numpy.interp: period= is not supported")
    v = _lift(_operand(x, "interp"))
    xs = _lift(_operand(xp, "interp"))
    fs = _lift(_operand(fp, "interp"))
    if xs.ndim != 1 or fs.ndim != 1 or xs.shape[0] != fs.shape[0] or xs.shape[0] == 0:
        raise ValueError("cjit.numpy.interp: xp and fp must be 1-D of the same nonzero length, "
                         f"got shapes {tuple(xs.shape)} and {tuple(fs.shape)}")
    if not _is_float(v.dtype):
        v = v.astype(_F64)
    m = xs.shape[0]
    lo_f = fs[0] if left is None else left
    hi_f = fs[m - 1] if right is None else right
    r = where(v < xs[0], lo_f, where(v > xs[m - 1], hi_f, broadcast_to(fs[m - 1], tuple(v.shape))))
    # each segment [xp[j], xp[j+1]) writes its line where x falls in it
    for j in range(m - 1, 0, -1):
        x0, x1, f0, f1 = xs[j - 1], xs[j], fs[j - 1], fs[j]
        inside = (v >= x0) & (v < x1)
        slope = (f1 - f0) / where(x1 == x0, 1.0, x1 - x0)
        r = where(inside, f0 + slope * (v - x0), r)
    return r


@_op("x", "bins")
def digitize(x, bins, right=False):
    """The index of the bin each x falls in (bins monotonic), as NumPy:
    a count of the bin edges below (or, with right, not above) x."""
    v = _lift(_operand(x, "digitize"))
    b = _lift(_operand(bins, "digitize"))
    if b.ndim != 1:
        raise ValueError(f"cjit.numpy.digitize: bins must be 1-D, got shape {tuple(b.shape)}")
    n = b.shape[0]
    if n == 0:
        return zeros_like(v, dtype=np.int64)
    edges = b.reshape((1,) * v.ndim + (n,))
    vv = v[..., None]
    increasing = b[n - 1] >= b[0]
    below_inc = (edges < vv) if right else (edges <= vv)
    above_dec = (edges >= vv) if right else (edges > vv)
    count_inc = sum(below_inc.astype(np.int64), axis=-1)
    count_dec = sum(above_dec.astype(np.int64), axis=-1)
    return where(increasing, count_inc, count_dec)


# complex arguments: the registry's implementation, or NotImplementedError
# (_complex_dispatch.py; the implementations are registered in _complex_api.py)
complex_aware(globals(), __all__)
