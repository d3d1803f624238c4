"""cjit.scipy.linalg, as jax.scipy.linalg: Cholesky and triangular solves
(LAPACK's potrf and BLAS's trsm, csrc/linalg_rt.c) and the QR, symmetric
eigen and singular value decompositions (cjit.numpy.linalg's, with SciPy's
return conventions), differentiable, with batch dims in front."""
from __future__ import annotations

import numpy as np

from ..numpy._core import _error, _lift, _op
from ..numpy import linalg
from ..numpy._info import result_type
from ..numpy._manipulation import broadcast_to, matrix_transpose
from ..numpy._math import conj
from ..numpy.linalg import cholesky as _cholesky

__all__ = ["cholesky", "cho_factor", "cho_solve", "solve_triangular", "qr", "eigh", "svd"]

_LOWER, _TRANSPOSE, _UNIT = 1, 2, 4


def _float(x, who):
    x = _lift(x, who)
    return x if np.dtype(x.dtype).kind == "f" else x.astype("float64")


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """SciPy's cholesky: the upper factor by default (a = U^H U, of a's upper
    triangle), the lower with lower=True (of a's lower triangle), as SciPy's
    and JAX's (neither symmetrizes)."""
    if lower:
        return _cholesky(a, symmetrize_input=False)
    return _cholesky(conj(matrix_transpose(a)), upper=True, symmetrize_input=False)


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


def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """SciPy's qr: (Q, R) for mode 'full' (Q (M, M)) or 'economic' (Q (M, K)),
    (R,) for mode 'r'.  pivoting and mode 'raw' are not supported."""
    if pivoting:
        raise NotImplementedError("cjit.scipy.linalg.qr: pivoting=True is not supported")
    modes = {"full": "complete", "economic": "reduced", "r": "r"}
    if mode not in modes:
        raise ValueError(f"cjit.scipy.linalg.qr: mode must be 'full', 'economic' or 'r', got {mode!r}")
    q, r = linalg.qr(a, mode=modes[mode] if mode != "r" else "complete")
    return (r,) if mode == "r" else (q, r)


def eigh(a, b=None, *, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False, type=1,
         check_finite=True, subset_by_index=None, subset_by_value=None, driver=None):
    """SciPy's eigh of a symmetric matrix: (w, v), or w with eigvals_only;
    the lower triangle read, or the upper with lower=False.  The generalized
    problem (b) and subsets are not supported."""
    if b is not None or subset_by_index is not None or subset_by_value is not None:
        raise NotImplementedError("cjit.scipy.linalg.eigh: b (the generalized problem) and subsets are not supported")
    uplo = "L" if lower else "U"
    if eigvals_only:
        return linalg.eigvalsh(a, UPLO=uplo)
    return tuple(linalg.eigh(a, UPLO=uplo))


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True, lapack_driver="gesdd"):
    """SciPy's svd: (U, s, Vh), or s with compute_uv=False."""
    r = linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(r) if compute_uv else r
