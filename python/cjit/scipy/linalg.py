"""cjit.scipy.linalg, as jax.scipy.linalg: Cholesky and triangular solves
(LAPACK's potrf and BLAS's trsm, csrc/linalg_rt.c), differentiable, with
batch dims in front."""
from __future__ import annotations

import numpy as np

from ..numpy._core import _error, _lift, _op
from ..numpy.linalg import cholesky as _cholesky

__all__ = ["cholesky", "cho_factor", "cho_solve", "solve_triangular"]

_LOWER, _TRANSPOSE, _UNIT = 1, 2, 4


def _float(x, who):
    x = _lift(x, who)
    return x if np.dtype(x.dtype).kind == "f" else x.astype("float64")


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """SciPy's cholesky: the upper factor by default (a = U^T U), the lower
    with lower=True."""
    return _cholesky(a, upper=not lower)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """(the factor, lower), for cho_solve.  The other triangle holds zeros
    (SciPy leaves whatever a had there)."""
    return cholesky(a, lower=lower), lower


@_op("a", "b")
def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False, check_finite=True):
    """x with op(a) x = b for a triangular a (only its triangle read): trans
    0/'N', 1/'T' or 2/'C' (real: the transpose); b (..., n) or (..., n, k)."""
    t = {0: 0, 1: 1, 2: 1, "N": 0, "T": 1, "C": 1}.get(trans)
    if t is None:
        raise ValueError(f"cjit.scipy.linalg.solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    A, B = _float(a, "solve_triangular"), _float(b, "solve_triangular")
    from ..numpy import broadcast_to, result_type
    dt = result_type(A.dtype, B.dtype)
    A, B = A.astype(dt), B.astype(dt)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise _error(ValueError, "solve_triangular", "a must be square matrices in its last two dims", A)
    vector = B.ndim == A.ndim - 1 or B.ndim == 1
    if vector:
        B = B.reshape(tuple(B.shape) + (1,))
    batch = np.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2]))
    A = broadcast_to(A, batch + tuple(A.shape[-2:]))
    B = broadcast_to(B, batch + tuple(B.shape[-2:]))
    flags = (_LOWER if lower else 0) | (_TRANSPOSE if t else 0) | (_UNIT if unit_diagonal else 0)
    x = A.trace.apply("triangular_solve", A, B, mode=flags)
    return x.reshape(tuple(x.shape[:-1])) if vector else x


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """x with a x = b, from cho_factor's (factor, lower)."""
    c, lower = c_and_lower
    y = solve_triangular(c, b, trans=0 if lower else 1, lower=lower)
    return solve_triangular(c, y, trans=1 if lower else 0, lower=lower)
