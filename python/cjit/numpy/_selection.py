"""cjit.numpy's choices among arrays and functions (select, piecewise), the
complex-number predicates on real dtypes (isreal, iscomplex, angle), copy,
and the float decompositions (ldexp, frexp, nextafter)."""
from __future__ import annotations

import numpy as np

from ._complex_dispatch import complex_aware
from ._core import _F32, _F64, _is_float, _lift, _op, _operand
from ._creation import ones_like, zeros_like
from ._elementwise import where
from ._manipulation import broadcast_arrays
from ._math import signbit
from ._vectorize import _eager

__all__ = ["select", "piecewise", "isreal", "iscomplex", "isrealobj", "iscomplexobj", "angle",
           "copy", "ldexp", "frexp", "nextafter"]


@_op(seq=("condlist", "choicelist"))
def select(condlist, choicelist, default=0):
    """The element of the first choice whose condition holds, else default."""
    if len(condlist) != len(choicelist):
        raise ValueError(f"cjit.numpy.select: {len(condlist)} conditions but {len(choicelist)} "
                         "choices; they must be as many")
    if not condlist:
        raise ValueError("cjit.numpy.select: condlist must not be empty")
    conds = [_lift(_operand(c, "select")) for c in condlist]
    for c in conds:
        if c.dtype != np.bool_:
            raise TypeError(f"cjit.numpy.select: conditions must be bool arrays, got {c.dtype}")
    r = default
    for c, v in zip(conds[::-1], list(choicelist)[::-1]):
        r = where(c, v, r)
    return _lift(r)


def piecewise(x, condlist, funclist, *args, **kw):
    """funclist[i](x) where condlist[i] holds (the last true one wins, as
    NumPy); one extra function is the otherwise case.  Each function is
    traced on the whole of x and the results are selected elementwise, so
    a function must be defined everywhere (use where inside it if not)."""
    if not isinstance(condlist, (list, tuple)):
        condlist = [condlist]
    done = _eager(lambda v, *cs: piecewise(v, list(cs), funclist, *args, **kw), [x, *condlist])
    if done is not None:
        return done
    v = _lift(_operand(x, "piecewise"))
    conds = [_lift(_operand(c, "piecewise")) for c in condlist]
    if len(funclist) not in (len(conds), len(conds) + 1):
        raise ValueError(f"cjit.numpy.piecewise: {len(conds)} conditions need {len(conds)} or "
                         f"{len(conds) + 1} functions, got {len(funclist)}")

    def value(f):
        return f(v, *args, **kw) if callable(f) else where(v == v, f, f).astype(v.dtype)

    r = value(funclist[-1]) if len(funclist) > len(conds) else zeros_like(v)
    for c, f in zip(conds, funclist):
        r = where(c, value(f), r)
    return r


@_op("x")
def isreal(x):
    """For a real x: True everywhere (complex x: _complex_api.py)."""
    v = _lift(_operand(x, "isreal"))
    return (v != v) | True


@_op("x")
def iscomplex(x):
    """For a real x: False everywhere (complex x: _complex_api.py)."""
    return isreal._cjit_impl(x) & False


def isrealobj(x):
    """For a real x: True (complex x: _complex_api.py)."""
    return True


def iscomplexobj(x):
    """For a real x: False (complex x: _complex_api.py)."""
    return False


@_op("z")
def angle(z, deg=False):
    """The argument of real z: 0 for z >= +0, pi (180 with deg) for z <= -0."""
    v = _lift(_operand(z, "angle"))
    if not _is_float(v.dtype):
        v = v.astype(_F64)
    half_turn = 180.0 if deg else np.pi
    # arctan2(0, z): nan stays nan, -0.0 gives pi as a negative does
    return where(v != v, v, where(signbit(v), half_turn, 0.0).astype(v.dtype))


@_op("a")
def copy(a, order="K"):
    """A copy of a (under jit every result is a new array anyway)."""
    return _lift(_operand(a, "copy")) + 0


@_op("x1", "x2")
def ldexp(x1, x2):
    """x1 * 2**x2 (x2 integer)."""
    m = _lift(_operand(x1, "ldexp"))
    e = _lift(_operand(x2, "ldexp"))
    if _is_float(e.dtype):
        raise TypeError("cjit.numpy.ldexp: the exponent must be an integer array")
    if not _is_float(m.dtype):
        m = m.astype(_F64)
    return m * (e.astype(m.dtype) * 0 + 2.0) ** e.astype(m.dtype)


_FLOAT_BITS = {_F32: ("int32", 23, 0xFF, 127), _F64: ("int64", 52, 0x7FF, 1023)}


@_op("x")
def frexp(x):
    """(mantissa, exponent) with x = mantissa * 2**exponent and 0.5 <=
    |mantissa| < 1 (0, inf and nan give themselves and exponent 0)."""
    v = _lift(_operand(x, "frexp"))
    if not _is_float(v.dtype):
        v = v.astype(_F64)
    itype, mbits, emask, bias = _FLOAT_BITS[v.dtype]
    t = v.trace
    # subnormals scaled into the normal range first
    tiny = np.finfo(v.dtype).tiny
    scale = 2.0 ** (mbits + 1)
    sub = (v != 0) & (abs(v) < tiny)
    w = where(sub, v * scale, v)
    bits = t.apply("bitcast", w, dtype=itype)
    biased = (bits >> mbits) & emask
    e = biased - (bias - 1)
    mant_bits = (bits & ~(emask << mbits)) | ((bias - 1) << mbits)
    mant = t.apply("bitcast", mant_bits, dtype=v.dtype.name)
    special = (v == 0) | (biased == emask)
    mant = where(special, v, mant)
    e = where(special, 0, e - where(sub, mbits + 1, 0))
    return mant, e.astype(np.int32)


@_op("x1", "x2")
def nextafter(x1, x2):
    """The next float after x1 towards x2."""
    a = _lift(_operand(x1, "nextafter"))
    b = _lift(_operand(x2, "nextafter"))
    dt = np.result_type(a.dtype, b.dtype)
    if not _is_float(np.dtype(dt)):
        dt = np.dtype(np.float64)
    a, b = broadcast_arrays(a.astype(dt), b.astype(dt))
    itype = _FLOAT_BITS[np.dtype(dt)][0]
    t = a.trace
    bits = t.apply("bitcast", a, dtype=itype)
    # moving away from zero adds one to the magnitude's bits, towards it subtracts
    away = (b > a) == (a >= 0)
    step = where(away, 1, -1)
    moved = t.apply("bitcast", bits + step, dtype=np.dtype(dt).name)
    smallest = t.apply("bitcast", ones_like(a, dtype=itype), dtype=np.dtype(dt).name)
    from_zero = where(b > a, smallest, -smallest)
    r = where(a == 0, from_zero, moved)
    r = where(a == b, b, r)
    return where((a != a) | (b != b), a + b, r)


# complex arguments: the registry's implementation, or NotImplementedError
# (_complex_dispatch.py; the implementations are registered in _complex_api.py)
complex_aware(globals(), __all__)
