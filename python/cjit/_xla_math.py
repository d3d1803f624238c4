"""The math functions cjit has twice, in one place, each with the reason for
its copy.  Every copy here is the function as JAX's CPU backend (XLA)
evaluates it, step for step, so that cjit.random returns jax.random's bits;
cjit's own versions (cjit.numpy, cjit.scipy.special) are more accurate or
faster and are what everything else uses.

    copy here          cjit's own                     why the copy
    fma                the fma op (csrc/ops.def)       the op on traced values, for the
                                                       copies below and the exact sums
                                                       of numpy/_complex.py
    xla_log            cjit.numpy.log                  gumbel's log(-log u): XLA's float32
                                                       polynomial (_log32), libc's float64
    _log1p32, _log1p64 cjit.numpy.log1p                inside erfinv32/64: w = -log1p(-x*x)
                                                       rounded as XLA rounds it
    erfinv32, erfinv64 cjit.scipy.special.erfinv       normal and truncated_normal: the
    (erfinv_as_xla)                                    draw is sqrt(2) erfinv(u), bit for bit
    erf32              cjit.scipy.special.erf          truncated_normal's float32 bounds,
                                                       in the graph
    erf_libm           cjit.scipy.special.erf          truncated_normal's concrete float64
                                                       bounds: the C library's erf, which
                                                       XLA's CPU backend calls too

erfinv and float32 erf: XLA lowers erf_inv to Giles' single-precision
polynomial ("Approximating the erfinv function", GPU Computing Gems, 2011) on
w = -log1p(-x*x).  Its log1p is a rational function for |x| below
sqrt(2) - 1 and, above, the Cephes-style float32 log of 1 + x.  What makes
the bits come out equal is the rounding: the CPU backend contracts each
product whose only use is an addition into one fused multiply-add, so every
such step below is the FMA op (one rounding, the same on every machine),
and every other step is a separately rounded multiply or add in the order
XLA's IR has them.  The coefficients are float32 values, written by their
bits.

Checked against jax.jit(lax.erf_inv) on every value a float32 normal draw
can pass to it (all 2^23), and against jax.random (tests/test_random.py).
XLA flushes subnormal results to zero; these functions keep them (no draw
produces one)."""

import math

import numpy as np

from ._cjit import Tracer
from .numpy._elementwise import abs, maximum, minimum, sqrt, where


def _f32(bits):
    return np.array(bits, np.uint32).view(np.float32)[()]


# Cephes' float32 log(1 + x) polynomial on [sqrt(1/2) - 1, sqrt(2) - 1],
# split in three cubic pieces as XLA evaluates it
_LOG_P = [_f32(b) for b in (0x3D9021BB, 0xBDEBD1B8, 0x3DEF251A,    # 7.0376836e-2, -1.1514610e-1, 1.1676999e-1
                            0xBDFE5D4F, 0x3E11E9BF, 0xBE2AAE50,    # -1.2420141e-1, 1.4249323e-1, -1.6668057e-1
                            0x3E4CCEAC, 0xBE7FFFFC, 0x3EAAAAAA)]   # 2.0000715e-1, -2.4999994e-1, 3.3333331e-1
_LN2_LO, _LN2_HI = _f32(0xB95E8083), _f32(0x3F318000)             # ln 2 = 0.693359375 - 2.12194440e-4
_SQRT_HALF = _f32(0x3F3504F3)

# log1p(x) = x - x^2/2 + x^3 P(x)/Q(x) for |x| < sqrt(2) - 1
_LOG1P_SMALL = _f32(0x3ED413CD)
_LOG1P_P = [np.float32(4.527e-05)] + [_f32(b) for b in (0x3EFF40C5, 0x40D284FA, 0x41EF4B9C,
                                                         0x4273CC76, 0x426473AD, 0x41A05101)]
_LOG1P_Q = [np.float32(1.0)] + [_f32(b) for b in (0x417101AD, 0x42A6185B, 0x435DC32D,
                                                   0x439A8CA3, 0x43586D8A, 0x42707982)]

# Giles' erfinv: w < 5 (central) and the tail, highest power first
_GILES_CENTRAL = [np.float32(c) for c in (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                                          0.00021858087, -0.00125372503, -0.00417768164, 0.246640727,
                                          1.50140941)]
_GILES_TAIL = [np.float32(c) for c in (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                                       0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)]


def fma(x, y, z):
    """x * y + z rounded once (the FMA op)."""
    t = next(v for v in (x, y, z) if isinstance(v, Tracer)).trace   # one of them is traced
    return t.apply("fma", x, y, z)


def _log32(v):
    """float32 log of v > 0 as XLA's CPU backend computes it: v = m 2^e with
    m in [sqrt(1/2), sqrt(2)), log v = e ln 2 + log(m) by a polynomial in
    m - 1.  nan below 0 and for nan, -inf at 0, inf at inf."""
    t = v.trace
    x = where(v > np.float32(np.finfo(np.float32).tiny), v, np.float32(np.finfo(np.float32).tiny))
    bits = t.apply("bitcast", x, dtype="int32")
    e = ((bits >> np.int32(23)) - np.int32(127)).astype(np.float32) + np.float32(1.0)
    m = t.apply("bitcast", (bits & np.int32(-2139095041)) | np.int32(0x3F000000), dtype="float32")  # in [1/2, 1)
    low = m < _SQRT_HALF
    x = (m + np.float32(-1.0)) + where(low, m, np.float32(0.0))   # 2m - 1 or m - 1
    e = e - where(low, np.float32(1.0), np.float32(0.0))
    x2 = x * x
    x3 = x2 * x
    p = _LOG_P
    y1 = fma(fma(x, p[0], p[1]), x, p[2])
    y2 = fma(fma(x, p[3], p[4]), x, p[5])
    y3 = fma(fma(x, p[6], p[7]), x, p[8])
    y = fma(fma(fma(y1, x3, y2), x3, y3), x3, e * _LN2_LO)
    r = fma(e, _LN2_HI, fma(x2, np.float32(-0.5), x) + y)
    r = where(v == np.float32(np.inf), np.float32(np.inf), r)
    r = where(v == np.float32(0.0), np.float32(-np.inf), r)
    return where((v > np.float32(0.0)) | (v == np.float32(np.inf)), r, np.float32(np.nan))


def xla_log(v):
    """log as XLA's CPU backend computes it: float32 by its polynomial
    (_log32), float64 by the C library's log (the log_libc op)."""
    return _log32(v) if v.dtype == np.float32 else v.trace.apply("log_libc", v)


def _log1p32(z):
    """float32 log1p as XLA computes it: a rational function near 0, the
    log of 1 + z elsewhere."""
    big = _log32(z + np.float32(1.0))
    z2 = z * z
    p, q = _LOG1P_P[0], _LOG1P_Q[0]
    for a, b in zip(_LOG1P_P[1:], _LOG1P_Q[1:]):
        p, q = fma(p, z, a), fma(q, z, b)
    small = z + fma(z2, np.float32(-0.5), (z * z2) * (p / q))
    return where(abs(z) < _LOG1P_SMALL, small, big)


def erfinv32(x):
    """erfinv of float32 x in [-1, 1] with XLA's rounding."""
    lg = _log1p32(x * -x)
    central = lg > np.float32(-5.0)           # w = -lg < 5
    w = where(central, np.float32(-2.5) - lg, sqrt(-lg) + np.float32(-3.0))
    p = where(central, _GILES_CENTRAL[0], _GILES_TAIL[0])
    for c, d in zip(_GILES_CENTRAL[1:], _GILES_TAIL[1:]):
        p = fma(p, w, where(central, c, d))
    return x * where(abs(x) == np.float32(1.0), np.float32(np.inf), p)


# float32 erf: x P(x^2) / Q(x^2) on x clamped to +-3.9427 (erf is +-1 in
# float32 beyond); XLA writes these FMAs itself
_ERF_CLAMP = _f32(0x406F9C68)
_ERF_P = [_f32(b) for b in (0x39702D51, 0x3B5F5DA2, 0x3D50B6EB, 0x3E3DA740, 0x3F906EBA)]
_ERF_Q = [_f32(b) for b in (0xB3FD3906, 0x37C588DF, 0x3A856D28, 0x3C6687D4, 0x3DE34C21, 0x3EFEB44A)] + \
    [np.float32(1.0)]


def erf32(v):
    """float32 erf with XLA's rounding."""
    x = minimum(maximum(v, -_ERF_CLAMP), _ERF_CLAMP)
    x2 = x * x
    p = fma(x2, _ERF_P[0], _ERF_P[1])
    for c in _ERF_P[2:]:
        p = fma(p, x2, c)
    q = fma(x2, _ERF_Q[0], _ERF_Q[1])
    for c in _ERF_Q[2:]:
        q = fma(q, x2, c)
    one = where(v < np.float32(0.0), np.float32(-1.0), np.float32(1.0))
    return where(abs(v) >= _ERF_CLAMP, one, (x * p) / q)


# ---- float64 --------------------------------------------------------------

def _f64(bits):
    return np.array(bits, np.uint64).view(np.float64)[()]


_LOG1P64_SMALL = _f64(0x3FDA827999FCEF32)
_LOG1P64_P = [_f64(b) for b in (0x3F07BC0962B395CA, 0x3FDFE818A0FE1A83, 0x401A509F46F4FA53, 0x403DE9738B8CB9C9,
                                0x404E798EB86C3351, 0x404C8E7597479A10, 0x40340A202D99830A)]
_LOG1P64_Q = [1.0] + [_f64(b) for b in (0x402E20359E903E37, 0x4054C30B52213498, 0x406BB86590FCFB56,
                                         0x407351945DC908A5, 0x406B0DB13E48E066, 0x404E0F304466448E)]

# Giles' double-precision erfinv: w < 6.25, w < 16 and beyond, highest power
# first; the three polynomials have 23, 19 and 17 coefficients
_ERFINV64 = [[_f64(b) for b in bits] for bits in (
    (0xBBB135D2E746E627, 0xBC08DDF93324D327, 0x3C37B83EEF0B7C9F, 0x3C69BA72CD589B91, 0xBCA33689090A6B96,
     0x3C782E11898132E0, 0x3CFDE4ACFD9E26BA, 0xBD26D33EED66C487, 0xBD36F2167040D8E2, 0x3D872A22C2D77E20,
     0xBDAC8859C4E5C0AF, 0xBDCDC583D118A561, 0x3E120F47CCF46B3C, 0xBE31A9E38DC84D60, 0xBE5F36CD6D3D46A9,
     0x3E9C6B4F5D03B787, 0xBEB6E8A5434AE8A2, 0xBEED1D1F7B8736F6, 0x3F2879C2A212F024, 0xBF4845769484FCA8,
     0xBF78B6C33114F909, 0x3FCEBD80D9B13E28, 0x3FFA755E7C99AE86),
    (0x3E23040F87DBD932, 0x3E785CBE52878635, 0xBE92777453DD3955, 0x3E5395ABCD554C6C, 0x3EB936388A3790AD,
     0xBED0D5DB812B5083, 0x3EC8860CD5D652F6, 0x3EEA29A0CACDFB23, 0xBF08CEF1F80281F2, 0x3F11E684D0B9188A,
     0x3EF932CD54C8A222, 0xBF37448A89EF8AA3, 0x3F4F3CC55AD40C25, 0xBF5BA924132F38B1, 0x3F6468EECA533CF8,
     0xBF6EBADABB891BBD, 0x3F75FFCFE5B76AFC, 0x3FF0158A6D641D39, 0x4008ABCC380D5A48),
    (0xBDBDCEC3A7785389, 0xBDF18FEEC0E38727, 0x3E19E6BF2DDA45E3, 0xBE30468FB24E2F5F, 0x3E405AC6A8FBA182,
     0xBE50102E495FB9C0, 0x3E5F4C20E1334AF8, 0xBE722D220FDF9C3E, 0x3E8EBC8BB824CB54, 0xBEB0A8D40EA372CC,
     0x3ED2FBD29D093D2B, 0xBEF4A3497E1E0FAC, 0x3F13EBF4EB00938F, 0xBF2C2F36A8FC5D53, 0xBF222EA5DF04047C,
     0x3FF02A30D1FBA0DC, 0x4013664DDD1AD7FB))]


def _log1p64(z):
    """float64 log1p as XLA computes it: the rational function near 0, the
    C library's log of 1 + z elsewhere (the log_libc op)."""
    z2 = z * z
    p, q = _LOG1P64_P[0], _LOG1P64_Q[0]
    for a, b in zip(_LOG1P64_P[1:], _LOG1P64_Q[1:]):
        p, q = fma(p, z, a), fma(q, z, b)
    small = z + fma(z2, -0.5, (z * z2) * (p / q))
    big = z.trace.apply("log_libc", z + 1.0)
    return where(abs(z) < _LOG1P64_SMALL, small, big)


def erfinv64(x):
    """erfinv of float64 x in [-1, 1] with XLA's rounding."""
    lg = _log1p64(x * -x)
    central, middle = lg > -6.25, lg > -16.0          # w = -lg < 6.25, < 16
    w = where(central, -3.125 - lg, sqrt(-lg) - where(middle, 3.25, 5.0))
    a, b, c = _ERFINV64

    def coef(i):
        return where(central, a[i], where(middle, b[i], c[i]))
    p = coef(0)
    for i in range(1, 17):                            # the tail's polynomial ends here
        p = fma(p, w, coef(i))
    tail = p
    for i in range(17, 19):                           # the middle one's
        p = fma(p, w, where(central, a[i], b[i]))
    middle_p = p
    for i in range(19, 23):
        p = fma(p, w, a[i])
    p = where(central, p, where(middle, middle_p, tail))
    return x * where(abs(x) == 1.0, np.inf, p)


def erfinv_as_xla(x):
    """erfinv in the draw's dtype (float32 or float64), rounded as JAX's CPU
    backend rounds it, so normal draws have jax.random's bits."""
    return erfinv32(x) if x.dtype == np.float32 else erfinv64(x)


# erf of concrete float64 values by the C library (math.erf), as XLA's CPU
# backend computes a float64 erf
erf_libm = np.vectorize(math.erf, otypes=[np.float64])
