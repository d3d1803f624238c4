"""cjit.numpy's linear algebra: matmul, dot, transpose."""
from __future__ import annotations

import numpy as np

from ._core import _BOOL, _common, _error, _lift, _norm_axis, _op, _operand, _shape_of
from ._elementwise import multiply

__all__ = ["matmul", "dot", "transpose"]


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
def dot(a, b):
    """NumPy dot for 0-D (multiply), 1-D and 2-D operands.  Higher ranks raise
    NotImplementedError: use matmul, whose batching rule differs from dot's."""
    a = _operand(a, "dot")
    b = _operand(b, "dot")
    sa, sb = _shape_of(a), _shape_of(b)
    if len(sa) == 0 or len(sb) == 0:
        return multiply(a, b)
    if len(sa) > 2 or len(sb) > 2:
        raise _error(NotImplementedError, "dot", "N-D dot is not supported; use matmul "
                     "(batched, with broadcasting)", a, b)
    return matmul(a, b)


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
