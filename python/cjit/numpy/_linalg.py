"""cjit.numpy's linear algebra: matmul, dot, transpose."""
from __future__ import annotations

import numpy as np

from ._complex_dispatch import complex_aware
from ._core import _BOOL, _common, _error, _lift, _norm_axis, _op, _operand, _shape_of
from ._elementwise import multiply
from ._manipulation import _broadcast_shapes, _concat_t, _slice_axis, broadcast_arrays
from ._reductions import sum as sum_

__all__ = ["matmul", "dot", "transpose", "tensordot", "vecdot", "vdot", "inner", "outer", "kron",
           "diagonal", "trace", "diag", "cross"]


@_op("x1", "x2")
def matmul(x1, x2):
    """NumPy matmul: 1-D, 2-D and batched with broadcasting."""
    a = _lift(_operand(x1, "matmul"))
    b = _lift(_operand(x2, "matmul"))
    for i, v in enumerate((a, b)):
        if v.ndim == 0:
            raise _error(ValueError, "matmul", f"input operand {i} does not have enough "
                         f"dimensions (has 0, requires at least 1)", a, b)
    if a.dtype != b.dtype or a.weak != b.weak:
        a, b = _common([a, b], "matmul")
    t = a.trace
    if a.dtype == _BOOL:
        # NumPy: a logical or of ands.  As a count of true products, != 0.
        a = t.apply("cast", a, dtype="int64")
        b = t.apply("cast", b, dtype="int64")
        return t.apply("ne", t.apply("matmul", a, b), 0)
    return t.apply("matmul", a, b)


@_op("a", "b")
def dot(a, b, out=None, *, precision=None):
    """NumPy dot: multiply for 0-D, matmul for 1-D and 2-D, a sum over a's
    last and b's second-to-last axis for N-D (tensordot).  precision= is
    JAX's keyword, accepted and ignored (the CPU computes in the dtype)."""
    if out is not None:
        raise TypeError("cjit.numpy.dot: out= is not supported")
    a = _operand(a, "dot")
    b = _operand(b, "dot")
    sa, sb = _shape_of(a), _shape_of(b)
    if len(sa) == 0 or len(sb) == 0:
        return multiply(a, b)
    if len(sb) == 1 or (len(sa) <= 2 and len(sb) <= 2):
        return matmul(a, b)
    # N-D: a's last axis with b's second to last
    return tensordot._cjit_impl(_lift(a), _lift(b), axes=([-1], [-2]))


@_op("a")
def transpose(a, axes=None):
    """Permutes the axes (None: reverses them)."""
    x = _lift(_operand(a, "transpose"))
    n = x.ndim
    if axes is None:
        perm = tuple(range(n - 1, -1, -1))
    else:
        if isinstance(axes, (int, np.integer)):
            axes = (axes,)
        if len(axes) != n:
            raise _error(ValueError, "transpose", f"axes {tuple(axes)} don't match array", x)
        perm = tuple(_norm_axis(ax, n) for ax in axes)
        if len(set(perm)) != n:
            raise _error(ValueError, "transpose", f"repeated axis in {tuple(axes)}", x)
    if perm == tuple(range(n)):
        return x
    return x.trace.apply("transpose", x, perm=perm)


# ---------------------------------------------------------------------------
# contractions built on matmul: tensordot, vecdot, inner, outer, kron, and
# the diagonal family

def _t(x, perm):
    if tuple(perm) == tuple(range(x.ndim)):
        return x
    return x.trace.apply("transpose", x, perm=tuple(perm))


def _rs(x, shape):
    shape = tuple(shape)
    if tuple(x.shape) == shape:
        return x
    return x.trace.apply("reshape", x, shape=shape)


def _prod(dims):
    n = 1
    for d in dims:
        n *= d
    return n


@_op("a", "b")
def tensordot(a, b, axes=2):
    """Sum of products over a's `axes[0]` and b's `axes[1]` (an int n: a's
    last n axes with b's first n), as one matmul of the two operands
    transposed and flattened to matrices."""
    x, y = _common([_operand(a, "tensordot"), _operand(b, "tensordot")], "tensordot")
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n > x.ndim or n > y.ndim:
            raise _error(ValueError, "tensordot", f"axes={n} out of range", x, y)
        ax_a = list(range(x.ndim - n, x.ndim))
        ax_b = list(range(n))
    else:
        ax_a, ax_b = axes
        ax_a = [ax_a] if isinstance(ax_a, (int, np.integer)) else list(ax_a)
        ax_b = [ax_b] if isinstance(ax_b, (int, np.integer)) else list(ax_b)
        ax_a = [_norm_axis(i, x.ndim) for i in ax_a]
        ax_b = [_norm_axis(i, y.ndim) for i in ax_b]
    if len(ax_a) != len(ax_b) or any(x.shape[i] != y.shape[j] for i, j in zip(ax_a, ax_b)):
        raise _error(ValueError, "tensordot", "shape-mismatch for sum", x, y)
    free_a = [i for i in range(x.ndim) if i not in ax_a]
    free_b = [i for i in range(y.ndim) if i not in ax_b]
    k = _prod(x.shape[i] for i in ax_a)
    xa = _rs(_t(x, free_a + ax_a), (_prod(x.shape[i] for i in free_a), k))
    yb = _rs(_t(y, ax_b + free_b), (k, _prod(y.shape[i] for i in free_b)))
    r = matmul._cjit_impl(xa, yb)
    return _rs(r, [x.shape[i] for i in free_a] + [y.shape[i] for i in free_b])


@_op("x1", "x2")
def vecdot(x1, x2, axis=-1):
    """sum(x1 * x2) along axis, with broadcasting (real dtypes: no conjugate)."""
    x, y = _common([_operand(x1, "vecdot"), _operand(x2, "vecdot")], "vecdot")
    shape = _broadcast_shapes([x.shape, y.shape], "vecdot", (x, y))
    ax = _norm_axis(axis, len(shape))
    nx = len(shape) - x.ndim
    ny = len(shape) - y.ndim
    if ax < nx or ax < ny or x.shape[ax - nx] != y.shape[ax - ny]:
        raise _error(ValueError, "vecdot", f"the contracted axis {axis} must have the same "
                     f"length in both operands", x, y)
    p = x.trace.apply("mul", x, y)
    if p.dtype == _BOOL:
        p = p.trace.apply("cast", p, dtype="int64")
        return p.trace.apply("ne", p.trace.apply("reduce_sum", p, axes=(ax,)), 0)
    r = p.trace.apply("reduce_sum", p, axes=(ax,))
    # the array API keeps the operands' type (a sum of narrow ints is int64 in the reduction)
    return r if r.dtype == p.dtype else r.trace.apply("cast", r, dtype=p.dtype.name)


@_op("a", "b")
def inner(a, b):
    """Sum of products over the last axes (scalars: multiply)."""
    a, b = _operand(a, "inner"), _operand(b, "inner")
    if len(_shape_of(a)) == 0 or len(_shape_of(b)) == 0:
        return multiply(a, b)
    x, y = _lift(a), _lift(b)
    return tensordot._cjit_impl(x, y, axes=([-1], [-1]))


@_op("a", "b")
def vdot(a, b):
    """The dot product of a and b flattened (the first conjugated when complex)."""
    x, y = _lift(_operand(a, "vdot")), _lift(_operand(b, "vdot"))
    if x.size != y.size:
        raise ValueError(f"cjit.numpy.vdot: the operands have {x.size} and {y.size} elements; "
                         f"they must have as many")
    return dot._cjit_impl(_rs(x, (x.size,)), _rs(y, (y.size,)))


@_op("a", "b")
def outer(a, b):
    """a.ravel()[:, None] * b.ravel()[None, :]."""
    x, y = _lift(_operand(a, "outer")), _lift(_operand(b, "outer"))
    return x.trace.apply("mul", _rs(x, (x.size, 1)), _rs(y, (1, y.size)))


@_op("a", "b")
def kron(a, b):
    """Kronecker product: blocks a[i] * b."""
    x, y = _lift(_operand(a, "kron")), _lift(_operand(b, "kron"))
    nd = max(x.ndim, y.ndim)
    sa = (1,) * (nd - x.ndim) + tuple(x.shape)
    sb = (1,) * (nd - y.ndim) + tuple(y.shape)
    xa = _rs(x, tuple(v for d in sa for v in (d, 1)))
    yb = _rs(y, tuple(v for d in sb for v in (1, d)))
    return _rs(x.trace.apply("mul", xa, yb), tuple(p * q for p, q in zip(sa, sb)))


@_op("a")
def diagonal(a, offset=0, axis1=0, axis2=1):
    """The diagonal at `offset` of the (axis1, axis2) planes, as a last axis:
    the two axes are moved last, flattened, and read with a strided slice."""
    x = _lift(_operand(a, "diagonal"))
    i, j = _norm_axis(axis1, x.ndim), _norm_axis(axis2, x.ndim)
    if i == j:
        raise _error(ValueError, "diagonal", "axis1 and axis2 cannot be the same", x)
    rest = [d for d in range(x.ndim) if d not in (i, j)]
    y = _t(x, rest + [i, j])
    n, m = x.shape[i], x.shape[j]
    offset = int(offset)
    length = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
    lead = [x.shape[d] for d in rest]
    if length == 0:
        z = x.trace.apply("constant", value=0, dtype=x.dtype.name, shape=tuple(lead) + (0,),
                          weak=False) if x.dtype.kind != "f" else \
            x.trace.apply("constant", value=0.0, dtype=x.dtype.name, shape=tuple(lead) + (0,),
                          weak=False)
        return z
    flat = _rs(y, lead + [n * m])
    start = offset if offset >= 0 else -offset * m
    stop = start + (length - 1) * (m + 1) + 1
    k = len(lead)
    return flat.trace.apply("slice", flat, start=(0,) * k + (start,),
                            stop=tuple(lead) + (stop,), step=(1,) * k + (m + 1,))


@_op("a")
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """Sum along the diagonal (ints and bools as int64, as NumPy's sum)."""
    if out is not None:
        raise TypeError("cjit.numpy.trace: out= is not supported")
    d = diagonal._cjit_impl(a, offset, axis1, axis2)
    return sum_._cjit_impl(d, axis=-1, dtype=dtype)


@_op("v")
def diag(v, k=0):
    """1-D v: a square array with v on the k-th diagonal; 2-D v: its k-th
    diagonal."""
    x = _lift(_operand(v, "diag"))
    k = int(k)
    if x.ndim == 2:
        return diagonal._cjit_impl(x, k)
    if x.ndim != 1:
        raise _error(ValueError, "diag", "input must be 1-d or 2-d", x)
    t = x.trace
    n = x.shape[0] + abs(k)
    zero = 0.0 if x.dtype.kind == "f" else (False if x.dtype == _BOOL else 0)
    if abs(k):
        shape = (abs(k),)
        pad = t.apply("constant", value=zero, dtype=x.dtype.name, shape=shape, weak=False)
        x = t.apply("concatenate", x, pad, axis=0)
    # row i holds v[i] (k >= 0) or column j holds v[j] (k < 0) where j - i == k
    vb = t.apply("broadcast", _rs(x, (n, 1) if k >= 0 else (1, n)), shape=(n, n))
    i = t.apply("iota", shape=(n, n), axis=0, dtype="int64")
    j = t.apply("iota", shape=(n, n), axis=1, dtype="int64")
    hit = t.apply("eq", t.apply("sub", j, i), k)
    return t.apply("select", hit, vb, t.apply("constant", value=zero, dtype=x.dtype.name,
                                              shape=(), weak=False))


@_op("a", "b")
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """Cross product of 3-vectors along the last axis (with broadcasting)."""
    if axis is not None:
        axisa = axisb = axisc = axis
    x, y = _common([_operand(a, "cross"), _operand(b, "cross")], "cross")
    if x.ndim != y.ndim and axisa == axisb == axisc and axisa < 0:
        # one axis counted from the end: the same axis of the broadcast shape
        x, y = broadcast_arrays(x, y)
    if (axisa, axisb, axisc) != (-1, -1, -1) and not (x.ndim == y.ndim and
                                                      axisa == axisb == axisc):
        raise NotImplementedError("cjit.numpy.cross: different axisa/axisb/axisc")
    ax = axisa
    xa, ya = _norm_axis(ax, x.ndim), _norm_axis(ax, y.ndim)
    if x.shape[xa] != 3 or y.shape[ya] != 3:
        raise _error(ValueError, "cross", "only 3-vectors are supported", x, y)
    t = x.trace

    def c(v, axv, i):
        return _slice_axis(v, axv, i, i + 1)
    parts = []
    for i, j, k in ((1, 2, 0), (2, 0, 1), (0, 1, 2)):
        parts.append(t.apply("sub", t.apply("mul", c(x, xa, i), c(y, ya, j)),
                             t.apply("mul", c(x, xa, j), c(y, ya, i))))
    return _concat_t(parts, _norm_axis(ax, parts[0].ndim))


# complex arguments: the registry's implementation, or NotImplementedError
# (_complex_dispatch.py; the implementations are registered in _complex_api.py)
complex_aware(globals(), __all__)
