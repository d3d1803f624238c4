"""Complex numbers in a trace: a complex value is a pair of real values.

cjit's core knows real dtypes only.  A complex64 (complex128) array inside a
trace is a `ComplexTracer`: its real and imaginary parts, two float32
(float64) Tracers of the same shape.  Every complex operation is written
with real operations on the parts (the product is ac - bd + i(ad + bc)), so
fusion, memory planning, autodiff, vmap and both backends handle complex
programs with nothing new in C.  A chain of complex operations fuses into
one kernel: the parts of an intermediate result are never stored together.

At the edges (arguments and results of jit, grad, vjp, vmap and the lax
control flow), a complex array travels as a real array with a trailing
axis of 2, the parts interleaved: the memory layout of NumPy's complex
arrays, so passing one in or getting one back is a view, not a copy
(cjit/_tree.py makes complex values a pytree node of that pair; the hooks
are set at the end of this module).

This module is the value and its arithmetic: what ComplexTracer's
operators and methods reach (+ - * / ** @ == != abs astype), with exp and
log for powers.  The elementwise functions are in _complex_elementary.py
and _complex_inverse.py; which cjit.numpy function takes complex arguments
how is registered in _complex_api.py.  The complex functions are named
with a c (cexp, clog, cdiv, ...): the plain names are cjit.numpy's real
functions, applied to the parts.

Where a formula would cancel, the cancelling sum is formed exactly: a
product a*b is p + e with p = a*b rounded and e = fma(a, b, -p) (exact, the
FMA op rounds once), a sum a + b is s + r with Knuth's two-sum.  So
x^2 + y^2 - 1 (log next to |z| = 1) is rounded once, at the end.
"""
from __future__ import annotations

import numpy as np

from .. import _tree
from .._array import wrap
from .._cjit import Tracer
from .._xla_math import fma
from ._complex_dispatch import is_complex_dtype
from ._core import _lift, _result_type
from ._creation import asarray, zeros_like
from ._elementwise import (absolute, astype, cos, equal, exp, isfinite, isnan, log, log1p, maximum,
                           minimum, sin, where)
from ._linalg import matmul
from ._manipulation import broadcast_arrays, reshape, stack
from ._math import arctan2, copysign, hypot, isinf


_C64 = np.dtype(np.complex64)
_C128 = np.dtype(np.complex128)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def complex_dtype_of(real_dtype):
    """complex64 for float32 parts (and narrower), complex128 otherwise."""
    return _C64 if np.dtype(real_dtype) == _F32 else _C128


def part_dtype(complex_dtype):
    """The dtype of the parts of a complex64 or complex128 value."""
    dt = np.dtype(complex_dtype)
    if dt not in (_C64, _C128):
        raise TypeError(f"cjit: dtype {dt.name} is not supported; the complex dtypes are "
                        f"complex64 and complex128")
    return _F32 if dt == _C64 else _F64


def _lift_part(v):
    return _lift(v)


class ComplexTracer:
    """A traced complex array: `re` and `im` are real Tracers of one float
    dtype and shape.  Behaves as a complex array of cjit.numpy."""
    __slots__ = ("re", "im")
    __array_priority__ = 1000
    __array_ufunc__ = None          # NumPy's operators defer to ours

    def __init__(self, re, im):
        re, im = _lift_part(re), _lift_part(im)
        if re.dtype != im.dtype or re.dtype.kind != "f":
            dt, _ = _result_type((re.dtype, re.weak), (im.dtype, im.weak))
            if dt.kind != "f":
                dt = _F64
            re = re.astype(dt) if re.dtype != dt else re
            im = im.astype(dt) if im.dtype != dt else im
        if tuple(re.shape) != tuple(im.shape):
            re, im = broadcast_arrays(re, im)
        self.re, self.im = re, im

    # -- what it is --------------------------------------------------------
    @property
    def dtype(self):
        return complex_dtype_of(self.re.dtype)

    @property
    def shape(self):
        return tuple(self.re.shape)

    @property
    def ndim(self):
        return len(self.re.shape)

    @property
    def size(self):
        return int(np.prod(self.re.shape, dtype=np.int64))

    @property
    def weak(self):
        return False

    @property
    def trace(self):
        return self.re.trace

    @property
    def real(self):
        return self.re

    @property
    def imag(self):
        return self.im

    def __repr__(self):
        return f"ComplexTracer({self.dtype.name}{list(self.shape)})"

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d complex array")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d complex array")
        return (self[i] for i in range(self.shape[0]))

    def __bool__(self):
        return bool(self.re)        # raises the ConcretizationError of a Tracer

    def __hash__(self):
        raise TypeError("unhashable type: ComplexTracer")

    def __array__(self, *a, **k):
        return self.re.__array__()  # raises the Tracer's error

    # -- operators ---------------------------------------------------------
    def __add__(self, o): return binop("add", self, o)
    def __radd__(self, o): return binop("add", o, self)
    def __sub__(self, o): return binop("sub", self, o)
    def __rsub__(self, o): return binop("sub", o, self)
    def __mul__(self, o): return binop("mul", self, o)
    def __rmul__(self, o): return binop("mul", o, self)
    def __truediv__(self, o): return binop("div", self, o)
    def __rtruediv__(self, o): return binop("div", o, self)
    def __pow__(self, o): return binop("pow", self, o)
    def __rpow__(self, o): return binop("pow", o, self)
    def __matmul__(self, o): return binop("matmul", self, o)
    def __rmatmul__(self, o): return binop("matmul", o, self)
    def __eq__(self, o): return binop("eq", self, o)
    def __ne__(self, o): return binop("ne", self, o)
    def __neg__(self): return ComplexTracer(-self.re, -self.im)
    def __pos__(self): return self
    def __abs__(self): return cabs(self)

    def __lt__(self, o): return _no_order("<")
    __le__ = __gt__ = __ge__ = __lt__

    def __floordiv__(self, o):
        raise TypeError("cjit.numpy: floor division (//) is not defined for complex numbers")
    __rfloordiv__ = __mod__ = __rmod__ = __floordiv__

    # -- methods -----------------------------------------------------------
    def conj(self): return ComplexTracer(self.re, -self.im)
    conjugate = conj

    def _both(self, name, *a, **k):
        return ComplexTracer(getattr(self.re, name)(*a, **k), getattr(self.im, name)(*a, **k))

    def __getitem__(self, idx): return ComplexTracer(self.re[idx], self.im[idx])
    def reshape(self, *a, **k): return self._both("reshape", *a, **k)
    def transpose(self, *a): return self._both("transpose", *a)
    def ravel(self, *a, **k): return self._both("ravel", *a, **k)
    def flatten(self, *a, **k): return self._both("ravel", *a, **k)
    def squeeze(self, *a, **k): return self._both("squeeze", *a, **k)
    def swapaxes(self, *a): return self._both("swapaxes", *a)
    def sum(self, *a, **k): return self._both("sum", *a, **k)
    def mean(self, *a, **k): return self._both("mean", *a, **k)
    def cumsum(self, *a, **k): return self._both("cumsum", *a, **k)
    def diagonal(self, *a, **k): return self._both("diagonal", *a, **k)
    def copy(self, *a, **k): return self

    @property
    def T(self): return ComplexTracer(self.re.T, self.im.T)

    @property
    def mT(self): return ComplexTracer(self.re.mT, self.im.mT)

    def astype(self, dtype, copy=True, **k):
        return castype(self, dtype)

    def dot(self, other): return binop("matmul", self, other)

    @property
    def at(self):
        raise NotImplementedError("cjit.numpy: .at[] updates of complex arrays are not supported "
                                  "yet; update the real and imaginary parts (x.real, x.imag) and "
                                  "combine them with cjit.lax.complex")


def _no_order(sym):
    raise TypeError(f"cjit.numpy: '{sym}' is not defined for complex numbers (they have no order)")


# ---------------------------------------------------------------------------
# operands as parts

def parts(x):
    """(re, im) of an operand; im is None for a real one.  Python and NumPy
    constants stay constants (the real operations lift them)."""
    t = type(x)
    if t is ComplexTracer:
        return x.re, x.im
    if t is complex:
        return x.real, x.imag               # weak Python floats, as JAX's weak complex
    if isinstance(x, (np.ndarray, np.generic)) and x.dtype.kind == "c":
        x = np.asarray(x)                   # a cjit.Array's parts as NumPy's views
        return np.ascontiguousarray(x.real), np.ascontiguousarray(x.imag)
    return x, None


def make(re, im):
    """A ComplexTracer of parts (im None: real, so imaginary zeros)."""
    if im is None:
        re = _lift_part(re)
        if re.dtype.kind != "f":
            re = re.astype(_F64)
        return ComplexTracer(re, re * 0.0)
    return ComplexTracer(re, im)


def as_complex(x):
    """x as a ComplexTracer (a real operand gets imaginary zeros)."""
    return x if type(x) is ComplexTracer else make(*parts(x))


def binop(op, a, b):
    """a <op> b with at least one complex operand (op as the core names it)."""
    ar, ai = parts(a)
    br, bi = parts(b)
    if op == "add":
        return make(ar + br, _add(ai, bi))
    if op == "sub":
        return make(ar - br, _sub(ai, bi))
    if op == "mul":
        return _mul(ar, ai, br, bi)
    if op == "div":
        return _div(ar, ai, br, bi)
    if op == "pow":
        return cpower(a, b)
    if op == "matmul":
        return complex_matmul(a, b)
    if op in ("eq", "ne"):
        re_eq = m_equal(ar, br)
        im_eq = m_equal(0.0 if ai is None else ai, 0.0 if bi is None else bi)
        both = re_eq & im_eq
        return both if op == "eq" else ~both
    if op in ("lt", "le", "gt", "ge"):
        _no_order({"lt": "<", "le": "<=", "gt": ">", "ge": ">="}[op])
    raise TypeError(f"cjit.numpy: the operation '{op}' is not defined for complex numbers")


def m_equal(x, y):
    return _lift_part(equal(x, y))


def _add(x, y):
    if x is None:
        return y
    return x if y is None else x + y


def _sub(x, y):
    if y is None:
        return x
    return -y if x is None else x - y


def _mul(ar, ai, br, bi):
    if ai is None and bi is None:
        return ar * br
    if ai is None:                       # real times complex: each part scaled
        return make(ar * br, ar * bi)
    if bi is None:
        return make(ar * br, ai * br)
    return make(ar * br - ai * bi, ar * bi + ai * br)


def _div(ar, ai, br, bi):
    if bi is None:                       # by a real: each part divided
        return make(ar / br, None if ai is None else ai / br)
    return cdiv(ar, 0.0 if ai is None else ai, br, bi)


def bilinear(f, a, b):
    """f(a, b) for f real-bilinear (matmul, dot, einsum, outer, ...):
    f(ar + i ai, br + i bi) = f(ar, br) - f(ai, bi) + i (f(ar, bi) + f(ai, br))."""
    ar, ai = parts(a)
    br, bi = parts(b)
    if ai is None and bi is None:
        return f(ar, br)
    if ai is None:
        return make(f(ar, br), f(ar, bi))
    if bi is None:
        return make(f(ar, br), f(ai, br))
    return make(f(ar, br) - f(ai, bi), f(ar, bi) + f(ai, br))


def linear(f, x, *args, **kwargs):
    """f applied to both parts, for f linear with real coefficients (sums,
    reshapes, slices, ...).  A complex `dtype=` keyword applies to the parts
    as their real dtype (a sum of reals into complex128 has a zero imaginary
    part)."""
    xr, xi = parts(x)
    dt = kwargs.get("dtype")
    if dt is not None and is_complex_dtype(dt):
        kwargs = dict(kwargs, dtype=part_dtype(dt))
        if xi is None:
            re = f(xr, *args, **kwargs)
            return make(re, zeros_like(re))
    if xi is None:
        return f(xr, *args, **kwargs)
    return make(f(xr, *args, **kwargs), f(xi, *args, **kwargs))


# ---------------------------------------------------------------------------
# exact sums and products (the FMA op rounds once)

def _two_prod(a, b):
    """(p, e) with p + e = a * b exactly (while a*b neither overflows nor
    underflows past the subnormals)."""
    p = a * b
    return p, fma(a, b, -p)


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


# ---------------------------------------------------------------------------
# the arithmetic: abs, exp and log (for powers), division, matmul, astype

def cabs(z):
    zr, zi = parts(z)
    if zi is None:
        return absolute(zr)
    return hypot(zr, zi)


def cexp(z):
    """e^a (cos b + i sin b), with C99's special values (Annex G): a zero
    imaginary part stays exactly zero (exp(inf + 0i) = inf + 0i, not
    inf + nan i), exp(-inf + i y) = 0 for any y, exp(+inf + i y) with y
    not finite is inf + nan i."""
    a, b = parts(z)
    scale = exp(a)
    # past a = 80 (700) the products are formed without overflowing e^a
    big, re_big = _exp_times(cos(b), a, False)
    _, im_big = _exp_times(sin(b), a, False)
    big = big & (a > 0)
    re = where(b == 0, scale, where(big, re_big, scale * cos(b)))
    im = where(b == 0, b, where(big, im_big, scale * sin(b)))
    odd = isinf(a) & ~isfinite(b)
    re = where(odd, where(a > 0, a, 0.0), re)
    im = where(odd, where(a > 0, np.nan, copysign(0.0, b)), im)
    return make(re, im)


def _exp_times(s, t, half):
    """s e^|t| (half: s e^|t| / 2, which is s cosh t, or s |sinh t|, past
    |t| = 80), without overflowing e^|t| before the product: past the
    overflow of exp the product is taken in two halves, (s e^(|t|/2)) e^(|t|/2)."""
    s, t = _lift_part(s), _lift_part(t)
    at = absolute(t)
    big = at > (80.0 if at.dtype == _F32 else 700.0)
    h = exp(where(big, at * 0.5, 0.0))
    scaled = (s * (0.5 if half else 1.0) * h) * h
    return big, scaled


def log_abs(x, y):
    """log |x + iy|.  For |z| in (1/2, 2) it is log1p(x^2 + y^2 - 1) / 2, the
    argument summed exactly (x^2 + y^2 - 1 cancels next to the unit circle,
    where log|z| loses its relative accuracy); elsewhere log(hypot(x, y))
    (hypot neither overflows nor underflows, and |log| >= log 2 there)."""
    ax, ay = absolute(x), absolute(y)
    h = hypot(ax, ay)
    near = (h > 0.5) & (h < 2.0)
    # points that are not near get harmless inputs (their gradient stays finite)
    hi = where(near, maximum(ax, ay), 1.0)
    lo = where(near, minimum(ax, ay), 0.0)
    p1, e1 = _two_prod(hi, hi)
    p2, e2 = _two_prod(lo, lo)
    t = _exact_sum([p1, -1.0, p2], [e2, e1])
    return where(near, 0.5 * log1p(t), log(where(near, 1.0, h)))


def clog(z):
    x, y = parts(z)
    return make(log_abs(x, y), arctan2(y, x))


def cpower(a, b):
    """a ** b: repeated products for a small integer exponent (exact as
    NumPy's), exp(b log a) otherwise, with 0 ** b = 0 for b with positive
    real part."""
    if isinstance(b, (int, np.integer)) and not isinstance(b, bool) and abs(int(b)) <= 64:
        n = int(b)
        base = as_complex(a)
        result = None
        p = base
        k = abs(n)
        while k:
            if k & 1:
                result = p if result is None else result * p
            k >>= 1
            if k:
                p = p * p
        if result is None:
            return make(base.re * 0.0 + 1.0, base.im * 0.0)
        return binop("div", 1.0, result) if n < 0 else result
    za = as_complex(a)
    zero = (za.re == 0) & (za.im == 0)
    safe = make(where(zero, 1.0, za.re), za.im)
    w = cexp(binop("mul", b, clog(safe)))
    br, _ = parts(b)
    return make(where(zero, where(br == 0, 1.0, 0.0), w.re), where(zero, 0.0, w.im))


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
    vs = [_lift_part(v) for v in (ar, ai, br, bi)]
    if any(v.dtype != np.float64 for v in vs):
        dt, _ = _result_type(*[(v.dtype, v.weak) for v in vs], (np.dtype(np.float32), False))
        if np.dtype(dt) == np.float32:
            return _cdiv32(*(v.astype(np.float32) for v in vs))
        vs = [v.astype(np.float64) for v in vs]
    ar, ai, br, bi = vs
    fi = np.finfo(ar.dtype)
    small, step = 2.0 ** -900, 2.0 ** 600
    big = float(fi.max) / 4.0
    mn = maximum(absolute(ar), absolute(ai))
    md = maximum(absolute(br), absolute(bi))
    sn = where(mn > big, 0.25, where(mn < small, step, 1.0))
    sd = where(md > big, 0.25, where(md < small, step, 1.0))
    xr, xi, yr, yi = ar * sn, ai * sn, br * sd, bi * sd
    big_re = absolute(yr) >= absolute(yi)
    p = where(big_re, yr, yi)
    q = where(big_re, yi, yr)
    safe_p = where(p == 0, 1.0, p)     # a harmless divisor where p is 0 (the result is set below)
    r = q / safe_p
    d = p + q * r
    under = absolute(r) < float(fi.tiny)

    def times_r(x):
        # x q / p: (x / p) q, or (x q) / p where x / p overflows (q is then far below p)
        xp = x / safe_p
        return where(under, where(isinf(xp), (x * q) / safe_p, xp * q), x * r)

    xr_r, xi_r = times_r(xr), times_r(xi)
    # |yr| >= |yi|: ((xr + xi r) + i (xi - xr r)) / d, else ((xr r + xi) + i (xi r - xr)) / d
    re = where(big_re, xr + xi_r, xr_r + xi) / d
    im = where(big_re, xi - xr_r, xi_r - xr) / d
    # back by exact powers of 2 (where both scalings go one way, the result over- or underflows anyway)
    re, im = (re * sd) * (1.0 / sn), (im * sd) * (1.0 / sn)
    return _div_specials(ar, ai, br, bi, re, im)


def _cdiv32(ar, ai, br, bi):
    """complex64 division: Smith's steps in float32, as before this module
    (a chain of complex64 operations with a division still fuses into one
    kernel without temporaries: each part is read at most four times).
    Not yet held to the sweep's bound: parts of very different sizes can
    lose bits where the ratio or a product is subnormal."""
    big_re = absolute(br) >= absolute(bi)
    safe_br = where(big_re, br, 1.0)
    safe_bi = where(big_re, 1.0, bi)
    r1 = bi / safe_br
    d1 = br + bi * r1
    r2 = br / safe_bi
    d2 = bi + br * r2
    re = where(big_re, (ar + ai * r1) / d1, (ar * r2 + ai) / d2)
    im = where(big_re, (ai - ar * r1) / d1, (ai * r2 - ar) / d2)
    return make(re, im)


def _div_specials(ar, ai, br, bi, re, im):
    """C99's infinity for an infinite dividend (no nan) over a finite nonzero
    divisor, NumPy's (ar / 0, ai / 0) for a zero divisor."""
    md = maximum(absolute(br), absolute(bi))
    inf_n = (isinf(ar) | isinf(ai)) & ~isnan(ar) & ~isnan(ai)
    rec = inf_n & isfinite(br) & isfinite(bi) & (md > 0)
    u = copysign(where(isinf(ar), 1.0, 0.0), ar)
    v = copysign(where(isinf(ai), 1.0, 0.0), ai)

    def infinity(t):
        # inf t without a product by inf, whose gradient would be nan everywhere
        return where(t > 0, np.inf, where(t < 0, -np.inf, np.nan))

    re = where(rec, infinity(u * br + v * bi), re)
    im = where(rec, infinity(v * br - u * bi), im)
    zero = md == 0
    return make(where(zero, ar / where(zero, absolute(br), 1.0), re),
                where(zero, ai / where(zero, absolute(bi), 1.0), im))


def complex_matmul(x1, x2):
    """x1 @ x2.  Two complex matrices (or stacks of them) are one real
    matmul of twice the size: [re | im] interleaved, [m, 2k], times the
    [2k, 2n] matrix whose 2x2 blocks are [[br, bi], [-bi, br]], gives the
    product's interleaved pair, [m, 2n].  One BLAS call with the flops of
    the four real products (which are what mixed and 1-D operands get)."""
    a, b = parts(x1), parts(x2)
    if a[1] is None or b[1] is None or np.ndim(a[0]) < 2 or np.ndim(b[0]) < 2:
        return bilinear(lambda p, q: matmul(p, q), x1, x2)
    za, zb = as_complex(x1), as_complex(x2)
    m, k = za.shape[-2:]
    k2, n = zb.shape[-2:]
    if k != k2:
        return bilinear(lambda p, q: matmul(p, q), x1, x2)   # the real matmul's error
    lead_a, lead_b = za.shape[:-2], zb.shape[:-2]
    a2 = reshape(stack([za.re, za.im], axis=-1), lead_a + (m, 2 * k))
    rows = stack([stack([zb.re, zb.im], axis=-1), stack([-zb.im, zb.re], axis=-1)], axis=-3)
    b2 = reshape(rows, lead_b + (2 * k, 2 * n))
    prod = matmul(a2, b2)
    pair = reshape(prod, tuple(prod.shape[:-1]) + (n, 2))
    return make(pair[..., 0], pair[..., 1])


def castype(x, dtype, /, copy=True, *, device=None):
    dt = np.dtype(dtype)
    xr, xi = parts(x)
    if dt.kind == "b":          # nonzero, as NumPy's cast of a complex to bool
        return binop("ne", x, 0.0)
    if dt.kind != "c":          # the real part, as NumPy (which warns) and JAX do
        return astype(xr, dt)
    pd = part_dtype(dt)
    return make(astype(xr, pd), astype(0.0 * asarray(xr) if xi is None else xi, pd))


# ---------------------------------------------------------------------------
# complex values at the edges: the real pair (cjit/_tree.py)

def _split(x):
    """(real pair, dtype name) of a complex value."""
    if type(x) is ComplexTracer:
        return stack([x.re, x.im], axis=-1), x.dtype.name
    if type(x) is complex:
        return np.array([x.real, x.imag]), "complex128"
    a = np.asarray(x)
    if a.dtype not in (_C64, _C128):
        return a, a.dtype.name     # refused where leaves are checked, with the argument's name
    shape = a.shape
    a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("="))   # 0-d becomes 1-d here
    return a.view(part_dtype(a.dtype)).reshape(shape + (2,)), a.dtype.name


def _join(dtype_name, pair):
    """The complex value of a real pair: a ComplexTracer in a trace, a
    cjit.Array (a view of the pair's bytes) for a result."""
    if pair is None:
        return None
    if isinstance(pair, Tracer):
        return ComplexTracer(pair[..., 0], pair[..., 1])
    if type(pair) is ComplexTracer:
        return pair
    a = np.asarray(pair)
    dt = np.dtype(dtype_name)
    shape = a.shape[:-1]
    a = np.ascontiguousarray(a, dtype=part_dtype(dt))
    return wrap(a.view(dt).reshape(shape))


_tree.set_complex_hooks(ComplexTracer, _split, _join)


# ---------------------------------------------------------------------------
# Tracer operators with a complex operand (the C Tracer calls this)

_OPS = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "pow": "pow",
        "matmul": "matmul", "eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt",
        "ge": "ge"}


def tracer_binop(opname, a, b):
    op = _OPS.get(opname)
    if op is None:
        raise TypeError(f"cjit.numpy: the operation '{opname}' is not defined for complex numbers")
    return binop(op, a, b)
