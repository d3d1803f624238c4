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
(cjit/_tree.py makes complex values a pytree node of that pair).
"""
from __future__ import annotations

import numpy as np

from ..api import current_trace
from .._cjit import Tracer

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


def is_complex_dtype(dt):
    try:
        return np.dtype(dt).kind == "c"
    except TypeError:
        return False


def is_complex_value(x):
    """Is x a complex value: a ComplexTracer, a Python or NumPy complex
    number, or a NumPy complex array?"""
    t = type(x)
    if t is ComplexTracer or t is complex:
        return True
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype.kind == "c"
    return False


def _cnp():
    """The cjit.numpy namespace (imported late: it imports this module)."""
    from .. import numpy as cnp
    return cnp


def _lift_part(v):
    from ._core import _lift
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
            from ._core import _result_type
            dt, _ = _result_type((re.dtype, re.weak), (im.dtype, im.weak))
            if dt.kind != "f":
                dt = _F64
            re = re.astype(dt) if re.dtype != dt else re
            im = im.astype(dt) if im.dtype != dt else im
        if tuple(re.shape) != tuple(im.shape):
            c = _cnp()
            re, im = c.broadcast_arrays(re, im)
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
    def __abs__(self): return absolute(self)

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
        from ._complex_api import astype
        return astype(self, dtype)

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
        return power(a, b)
    if op == "matmul":
        from ._complex_api import complex_matmul
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
    from ._elementwise import equal
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
    from ._complex_elementary import cdiv
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
            return make(re, _cnp().zeros_like(re))
    if xi is None:
        return f(xr, *args, **kwargs)
    return make(f(xr, *args, **kwargs), f(xi, *args, **kwargs))


# ---------------------------------------------------------------------------
# elementwise functions

def absolute(z):
    c = _cnp()
    zr, zi = parts(z)
    if zi is None:
        return c.abs(zr)
    return c.hypot(zr, zi)


def angle(z, deg=False):
    c = _cnp()
    zr, zi = parts(z)
    if zi is None:
        from ._selection import angle as real_angle
        return real_angle(zr, deg=deg)
    a = c.arctan2(zi, zr)
    return a * (180.0 / np.pi) if deg else a


def exp(z):
    """e^a (cos b + i sin b), with C99's special values (Annex G): a zero
    imaginary part stays exactly zero (exp(inf + 0i) = inf + 0i, not
    inf + nan i), exp(-inf + i y) = 0 for any y, exp(+inf + i y) with y
    not finite is inf + nan i."""
    c = _cnp()
    a, b = parts(z)
    scale = c.exp(a)
    # past a = 80 (700) the products are formed without overflowing e^a
    big, re_big = _exp_times(c.cos(b), a, False)
    _, im_big = _exp_times(c.sin(b), a, False)
    big = big & (a > 0)
    re = c.where(b == 0, scale, c.where(big, re_big, scale * c.cos(b)))
    im = c.where(b == 0, b, c.where(big, im_big, scale * c.sin(b)))
    odd = c.isinf(a) & ~c.isfinite(b)
    re = c.where(odd, c.where(a > 0, a, 0.0), re)
    im = c.where(odd, c.where(a > 0, np.nan, c.copysign(0.0, b)), im)
    return make(re, im)


def log(z):
    """log |z| + i arg z, log |z| accurate next to |z| = 1 (_complex_elementary)."""
    from ._complex_elementary import clog
    return clog(z)


def sqrt(z):
    """The principal square root (Kahan's formulation: no cancellation),
    with z scaled by 1/4 near overflow (hypot + |x| would overflow) and by
    4^k for tiny parts (so that (hypot + |x|) / 2 keeps its bits), and
    C99's special values: sqrt(x +- inf i) = inf +- inf i for every x,
    sqrt(-inf + yi) = 0 + inf i, sqrt(inf + yi) = inf + 0i."""
    c = _cnp()
    zr, zi = parts(z)
    zr, zi = _lift_part(zr), _lift_part(zi)
    f32 = zr.dtype == _F32
    big_at = 1e37 if f32 else 1e307
    small_at = 1e-30 if f32 else 1e-290
    up, down = (2.0 ** 48, 2.0 ** -24) if f32 else (2.0 ** 108, 2.0 ** -54)
    m = c.maximum(c.abs(zr), c.abs(zi))
    scale = c.where(m > big_at, 0.25, c.where(m < small_at, up, 1.0))
    back = c.where(m > big_at, 2.0, c.where(m < small_at, down, 1.0))
    xr, xi = zr * scale, zi * scale
    t = c.sqrt((c.hypot(xr, xi) + c.abs(xr)) * 0.5)
    safe_t = c.where(t == 0, 1.0, t)
    half = xi / (2.0 * safe_t)
    re = c.where(xr >= 0, t, c.abs(half)) * back
    im = c.where(xr >= 0, half, c.copysign(t, xi)) * back
    re, im = c.where(t == 0, 0.0, re), c.where(t == 0, zi, im)
    # C99: an infinite imaginary part wins over everything, nan included
    inf_re, inf_im = c.isinf(zr), c.isinf(zi)
    re = c.where(inf_re & (zr > 0), np.inf, c.where(inf_re, c.where(c.isnan(zi), np.nan, 0.0), re))
    im = c.where(inf_re & (zr > 0), c.where(c.isnan(zi), zi, c.copysign(0.0, zi)),
                 c.where(inf_re, c.where(c.isnan(zi), np.inf, c.copysign(np.inf, zi)), im))
    re = c.where(inf_im, np.inf, re)
    im = c.where(inf_im, zi, im)
    return make(re, im)


def _exp_times(s, t, half):
    """s e^|t| (half: s e^|t| / 2, which is s cosh t, or s |sinh t|, past
    |t| = 80), without overflowing e^|t| before the product: past the
    overflow of exp the product is taken in two halves, (s e^(|t|/2)) e^(|t|/2)."""
    c = _cnp()
    s, t = _lift_part(s), _lift_part(t)
    at = c.abs(t)
    big = at > (80.0 if at.dtype == _F32 else 700.0)
    h = c.exp(c.where(big, at * 0.5, 0.0))
    scaled = (s * (0.5 if half else 1.0) * h) * h
    return big, scaled


def sin(z):
    """sin z = -i sinh(iz), so that C99's values (which Annex G defines that
    way) and the care against overflow come from sinh."""
    a, b = parts(z)
    w = sinh(make(-b if b is not None else 0.0 * a, a))
    return make(w.im, -w.re)


def cos(z):
    """cos z = cosh(iz)."""
    a, b = parts(z)
    return cosh(make(-b if b is not None else 0.0 * a, a))


def _zero_keeping(b, value):
    """value, except where b is zero: there b itself (a function that maps
    the real line to itself keeps a zero imaginary part exactly, where the
    product formula would give inf * 0 = nan)."""
    return _cnp().where(b == 0, b, value)


def sinh(z):
    """(sinh a cos b, cosh a sin b), with Annex G's values at infinities;
    past |a| = 80 (float32; 700 float64) cosh a = |sinh a| = e^|a| / 2 and
    the products are formed without overflowing it (_exp_times)."""
    c = _cnp()
    a, b = parts(z)
    cb, sb = c.cos(b), c.sin(b)
    big, re_big = _exp_times(cb, a, True)
    _, im_big = _exp_times(sb, a, True)
    re = c.where(big, c.copysign(1.0, a) * re_big, c.sinh(a) * cb)
    im = _zero_keeping(b, c.where(big, im_big, c.cosh(a) * sb))
    re = c.where((a == 0) & ~c.isfinite(b), a, re)          # sinh(0 + inf i) = 0 + nan i
    re = c.where(c.isinf(a) & ~c.isfinite(b), a, re)        # sinh(inf + inf i) = inf + nan i
    return make(re, im)


def cosh(z):
    """(cosh a cos b, sinh a sin b), with Annex G's values at infinities
    and sinh's care against overflow; cosh is even, so a zero imaginary
    part takes the sign of a times b's."""
    c = _cnp()
    a, b = parts(z)
    cb, sb = c.cos(b), c.sin(b)
    big, re_big = _exp_times(cb, a, True)
    _, im_big = _exp_times(sb, a, True)
    re = c.where(big, re_big, c.cosh(a) * cb)
    im = c.where(big, c.copysign(1.0, a) * im_big, c.sinh(a) * sb)
    im = c.where(b == 0, b * c.copysign(1.0, a), im)
    im = c.where((a == 0) & ~c.isfinite(b), 0.0, im)        # cosh(0 + inf i) = nan + 0i
    re = c.where(c.isinf(a) & ~c.isfinite(b), c.abs(a), re)  # cosh(inf + inf i) = inf + nan i
    return make(re, im)


def tan(z):
    from ._complex_elementary import ctan
    return ctan(z)


def tanh(z):
    from ._complex_elementary import ctanh
    return ctanh(z)


def power(a, b):
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
    c = _cnp()
    za = as_complex(a)
    zero = (za.re == 0) & (za.im == 0)
    safe = make(c.where(zero, 1.0, za.re), za.im)
    w = exp(binop("mul", b, log(safe)))
    br, _ = parts(b)
    return make(c.where(zero, c.where(br == 0, 1.0, 0.0), w.re), c.where(zero, 0.0, w.im))


def reciprocal(z):
    from ._complex_elementary import creciprocal
    return creciprocal(z)


def square(z):
    """(x - y)(x + y) + 2xy i: no cancellation of x^2 - y^2, and no
    inf - inf where both squares overflow."""
    zr, zi = parts(z)
    if zi is None:
        return zr * zr
    re = (zr - zi) * (zr + zi)
    c = _cnp()
    # a zero real part: +0 where |x| = |y| (as NumPy), the true sign where x^2 - y^2 underflows
    return make(c.where(re == 0, c.copysign(0.0, c.abs(zr) - c.abs(zi)), re), 2.0 * zr * zi)


def isnan(z):
    c = _cnp()
    zr, zi = parts(z)
    return c.isnan(zr) | c.isnan(zi)


def isinf(z):
    c = _cnp()
    zr, zi = parts(z)
    return c.isinf(zr) | c.isinf(zi)


def isfinite(z):
    c = _cnp()
    zr, zi = parts(z)
    return c.isfinite(zr) & c.isfinite(zi)


def where(condition, x, y):
    c = _cnp()
    xr, xi = parts(x)
    yr, yi = parts(y)
    return make(c.where(condition, xr, yr),
                c.where(condition, 0.0 if xi is None else xi, 0.0 if yi is None else yi))


def in_trace():
    return current_trace() is not None


__all__ = ["ComplexTracer", "Tracer"]
