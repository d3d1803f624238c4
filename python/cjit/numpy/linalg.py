"""cjit.numpy.linalg: the array API's linalg extension.  Cholesky, LU, QR,
eigh and the SVD run LAPACK (csrc/linalg_rt.c, linalg_decomp_rt.c) and
differentiate in C; the products, norms, matrix powers, solves, pinv,
matrix_rank and lstsq are compositions of cjit's ops."""
from __future__ import annotations

import operator
from collections import namedtuple

import numpy as np

from .._custom import custom_jvp
from ._complex_dispatch import complex_aware
from ._core import _error, _lift, _op
from ._creation import arange, asarray, eye, zeros
from ._elementwise import abs as abs_, log, sign as sign_, sqrt, where
from ._gather import take_along_axis
from ._info import result_type
from ._linalg import (cross as _cross, diagonal as _diagonal, matmul as _matmul, outer as _outer,
                      tensordot as _tensordot, vecdot as _vecdot)
from ._manipulation import (broadcast_to, expand_dims, matrix_transpose as _matrix_transpose,
                            moveaxis)
from ._reductions import any as any_, max as max_, min as min_, prod, sum as sum_

__all__ = ["cholesky", "matmul", "matrix_transpose", "tensordot", "vecdot", "outer", "cross", "diagonal",
           "trace", "vector_norm", "matrix_norm", "norm", "matrix_power", "det", "slogdet", "inv", "solve",
           "eigh", "eigvalsh", "svd", "svdvals", "qr", "pinv", "matrix_rank", "lstsq"]


def _float(x, who):
    x = _lift(x, who)
    if np.dtype(x.dtype).kind != "f":
        x = x.astype("float64")
    return x


@_op("x")
def cholesky(x, *, upper=False, symmetrize_input=True):
    """The Cholesky factor of each matrix in the last two dims: lower (x = L
    L^T), or upper (x = U^T U), as JAX's: of (x + x^T) / 2 with
    symmetrize_input (the default), else of the lower triangle of x.  A
    matrix that is not positive definite gives nan (as JAX's, where NumPy
    raises).  Its gradient is that of a function of the symmetric part."""
    a = _float(x, "linalg.cholesky")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise _error(np.linalg.LinAlgError, "linalg.cholesky", "needs square matrices in the last two dims", a)
    if symmetrize_input:
        a = (a + matrix_transpose(a)) * 0.5
    L = a.trace.apply("cholesky", a)
    return matrix_transpose(L) if upper else L


def matmul(x1, x2, /):
    return _matmul(x1, x2)


def matrix_transpose(x, /):
    return _matrix_transpose(x)


def tensordot(x1, x2, /, *, axes=2):
    return _tensordot(x1, x2, axes=axes)


def vecdot(x1, x2, /, *, axis=-1):
    return _vecdot(x1, x2, axis=axis)


def outer(x1, x2, /):
    return _outer(x1, x2)


def cross(x1, x2, /, *, axis=-1):
    return _cross(x1, x2, axis=axis)


@_op("x")
def diagonal(x, *, offset=0):
    """The diagonal of each matrix in the last two dims."""
    return _diagonal(x, offset=offset, axis1=-2, axis2=-1)


@_op("x")
def trace(x, *, offset=0, dtype=None):
    """The sum of each matrix's diagonal (last two dims)."""
    r = sum_(diagonal(x, offset=offset), axis=-1)
    return r.astype(dtype) if dtype is not None else r


@_op("x")
def vector_norm(x, *, axis=None, keepdims=False, ord=2):
    """The p-norm over axis (all of them by default): ord 2, 1, inf, -inf,
    0 (the count of nonzeros) or any other real p."""
    a = abs_(_float(x, "linalg.vector_norm"))
    if ord == 2:
        return sqrt(sum_(a * a, axis=axis, keepdims=keepdims))
    if ord == 1:
        return sum_(a, axis=axis, keepdims=keepdims)
    if ord == np.inf:
        return max_(a, axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return min_(a, axis=axis, keepdims=keepdims)
    if ord == 0:
        return sum_((a != 0).astype(a.dtype), axis=axis, keepdims=keepdims)
    return sum_(a ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)


@_op("x")
def matrix_norm(x, *, keepdims=False, ord="fro"):
    """Norms of the matrices in the last two dims: 'fro', 1, -1, inf, -inf
    and, through the singular values, 2, -2 and 'nuc'."""
    a = _float(x, "linalg.matrix_norm")
    if ord == "fro":
        r = sqrt(sum_(a * a, axis=(-2, -1), keepdims=keepdims))
    elif ord in (1, -1):
        col = sum_(abs_(a), axis=-2, keepdims=True)
        r = (max_ if ord == 1 else min_)(col, axis=-1, keepdims=True)
        r = r if keepdims else r.reshape(tuple(a.shape[:-2]))
    elif ord in (np.inf, -np.inf):
        row = sum_(abs_(a), axis=-1, keepdims=True)
        r = (max_ if ord == np.inf else min_)(row, axis=-2, keepdims=True)
        r = r if keepdims else r.reshape(tuple(a.shape[:-2]))
    elif ord in (2, -2, "nuc"):
        s = svdvals(a)
        r = s[..., 0] if ord == 2 else s[..., -1] if ord == -2 else sum_(s, axis=-1)
        if keepdims:
            r = r.reshape(tuple(a.shape[:-2]) + (1, 1))
    else:
        raise ValueError(f"cjit.numpy.linalg.matrix_norm: unknown ord {ord!r}")
    return r


@_op("x")
def norm(x, ord=None, axis=None, keepdims=False):
    """NumPy's norm: a vector norm over one axis (or all of a 1-D x), a
    matrix norm over two."""
    nd = np.ndim(x)
    if axis is None:
        if ord is None or nd == 1:
            return vector_norm(x, axis=None if ord is None else axis, keepdims=keepdims,
                               ord=2 if ord is None else ord)
        axis = (0, 1) if nd == 2 else None
    if isinstance(axis, (tuple, list)) and len(axis) == 2:
        m = moveaxis(_lift(x, "linalg.norm"), tuple(axis), (-2, -1))
        r = matrix_norm(m, keepdims=False, ord="fro" if ord is None else ord)
        if keepdims:
            r = expand_dims(r, tuple(sorted(a % nd for a in axis)))
        return r
    return vector_norm(x, axis=axis, keepdims=keepdims, ord=2 if ord is None else ord)


@_op("x")
def matrix_power(x, n):
    """x multiplied by itself n times by repeated squaring (n = 0 gives the
    identity; a negative n, the inverse's power)."""
    n = operator.index(n)
    a = _lift(x, "linalg.matrix_power")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise _error(ValueError, "linalg.matrix_power", "needs square matrices", a)
    if n < 0:   # the inverse's power (LU)
        a, n = inv(a), -n
    result, base = None, a
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    if result is None:
        result = broadcast_to(eye(a.shape[-1], dtype=a.dtype), tuple(a.shape))
    return result


def _matrices(x, who, square=False):
    a = _float(x, f"linalg.{who}")
    if a.ndim < 2 or (square and a.shape[-1] != a.shape[-2]):
        raise _error(np.linalg.LinAlgError, f"linalg.{who}",
                     "needs square matrices in the last two dims" if square else "needs matrices in the last two dims", a)
    return a


# The named results are namedtuples, as NumPy's and JAX's: a jitted
# function can return them (pytrees), and they unpack as tuples.
QRResult = namedtuple("QRResult", ["Q", "R"])


@_op("x")
def _qr(x, mode):
    a = _matrices(x, "qr")
    complete = 2 if mode == "complete" else 0
    r = a.trace.apply("qr", a, mode=1 | complete)
    return r if mode == "r" else (a.trace.apply("qr", a, mode=complete), r)


def qr(x, mode="reduced"):
    """a = Q R of each matrix in the last two dims (LAPACK's geqrf and
    orgqr): mode 'reduced' (Q (m, k), R (k, n), k = min(m, n)),
    'complete' (Q (m, m), R (m, n)) or 'r' (R alone)."""
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"cjit.numpy.linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    r = _qr(x, mode)
    return r if mode == "r" else QRResult(*r)


EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])


def _eigh_input(x, UPLO, symmetrize_input, who):
    """The matrix the eigen decomposition reads: (x + x^T) / 2 with
    symmetrize_input (JAX's default: the value and the gradient are then
    both of the symmetric part), else x's lower triangle (its upper one with
    UPLO='U'), as NumPy."""
    if UPLO not in ("L", "U"):
        raise ValueError(f"cjit.numpy.linalg.{who}: UPLO must be 'L' or 'U', got {UPLO!r}")
    a = _matrices(x, who, square=True)
    if symmetrize_input:
        return (a + matrix_transpose(a)) * 0.5
    return matrix_transpose(a) if UPLO == "U" else a


@_op("x")
def _eigh(x, UPLO="L", symmetrize_input=True):
    a = _eigh_input(x, UPLO, symmetrize_input, "eigh")
    return a.trace.apply("eigh", a, mode=0), a.trace.apply("eigh", a, mode=1)


def eigh(x, UPLO="L", symmetrize_input=True):
    """Eigenvalues (ascending) and eigenvectors (columns) of each symmetric
    matrix (LAPACK's syevd): of (x + x^T) / 2, as JAX; with
    symmetrize_input=False, of the matrix x's lower triangle names (its
    upper one with UPLO='U')."""
    return EighResult(*_eigh(x, UPLO, bool(symmetrize_input)))


@_op("x")
def eigvalsh(x, UPLO="L", *, symmetrize_input=True):
    """The eigenvalues (ascending) of each symmetric matrix, as eigh's."""
    a = _eigh_input(x, UPLO, symmetrize_input, "eigvalsh")
    return a.trace.apply("eigh", a, mode=0)


SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])


@_op("x")
def _svd(x, full_matrices, compute_uv):
    a = _matrices(x, "svd")
    full = 4 if full_matrices else 0
    s = a.trace.apply("svd", a, mode=0)
    if not compute_uv:
        return s
    return a.trace.apply("svd", a, mode=1 | full), s, a.trace.apply("svd", a, mode=2 | full)


def svd(x, full_matrices=True, compute_uv=True):
    """a = U diag(S) Vh of each matrix (LAPACK's gesdd), S descending; with
    compute_uv=False, S alone (as NumPy)."""
    r = _svd(x, bool(full_matrices), bool(compute_uv))
    return SVDResult(*r) if compute_uv else r


@_op("x")
def svdvals(x):
    """The singular values of each matrix, descending."""
    a = _matrices(x, "svdvals")
    return a.trace.apply("svd", a, mode=0)


# ---- through the SVD: pinv, matrix_rank, lstsq --------------------------------

def _default_rtol(a):
    """The array API's default relative cutoff: max(M, N) times the dtype's epsilon."""
    return max(a.shape[-2:]) * float(np.finfo(np.dtype(a.dtype)).eps)


def _pinv_value(a, rtol, hermitian):
    """V diag(1/s) U^T over the singular values above rtol times the largest
    (of an eigen decomposition when hermitian: |w| are the singular values)."""
    if hermitian:
        w, v = _eigh(a)
        s, left, right = abs_(w), v, matrix_transpose(v) / w[..., :, None]
    else:
        u, s, vt = _svd(a, False, True)
        left, right = matrix_transpose(vt), matrix_transpose(u) / s[..., :, None]
    cutoff = rtol[..., None] * max_(s, axis=-1, keepdims=True)
    kept = s > cutoff
    # zero the dropped rows before the product; the division above made them
    # inf or nan, and a select keeps those out of the value (and the gradient)
    right = where(kept[..., :, None], right, 0.0)
    return left @ right


_pinv_fn = []


def _pinv_custom():
    """The pinv of the array API with JAX's derivative rule, made on first use."""
    if _pinv_fn:
        return _pinv_fn[0]

    def pinv_(a, rtol, hermitian):
        return _pinv_value(a, rtol, hermitian)

    f = custom_jvp(pinv_, nondiff_argnums=(2,))

    def rule(hermitian, primals, tangents):
        # exact where the rank is locally constant (the cut singular values
        # stay cut): dp = -p da p + p p^T da^T (I - a p) + (I - p a) da^T p^T p
        a, rtol = primals
        da = tangents[0]
        p = f(a, rtol, hermitian)
        m, n = a.shape[-2:]
        pt, dat = matrix_transpose(p), matrix_transpose(da)
        dp = -(p @ da @ p)
        dp = dp + p @ pt @ dat @ (eye(m, dtype=a.dtype) - a @ p)
        dp = dp + (eye(n, dtype=a.dtype) - p @ a) @ dat @ pt @ p
        return p, dp

    f.defjvp(rule)
    _pinv_fn.append(f)
    return f


def _rtol_array(a, rtol, who):
    r = asarray(_default_rtol(a) if rtol is None else rtol, dtype=a.dtype)
    batch = tuple(a.shape[:-2])
    try:
        return broadcast_to(r, batch)
    except Exception as e:
        raise ValueError(f"cjit.numpy.linalg.{who}: rtol of shape {tuple(np.shape(r))} does not broadcast to the "
                         f"batch shape {batch}") from e


@_op("x", "rtol", "rcond")
def pinv(x, rcond=None, hermitian=False, *, rtol=None):
    """The Moore-Penrose pseudo-inverse of each matrix through its SVD (or,
    hermitian=True, its eigen decomposition): singular values at most rtol
    times the largest are dropped.  rtol (the array API's name) or rcond
    (NumPy's) may be a float or an array over the batch dims; neither given:
    max(M, N) * eps, the array API's default.  Differentiable, with JAX's
    rule (exact where the rank does not change)."""
    if rcond is not None and rtol is not None:
        raise ValueError("cjit.numpy.linalg.pinv: give rcond or rtol, not both")
    a = _matrices(x, "pinv", square=bool(hermitian))
    r = _rtol_array(a, rtol if rcond is None else rcond, "pinv")
    return _pinv_custom()(a, r, bool(hermitian))


@_op("x", "rtol", "tol")
def matrix_rank(x, tol=None, hermitian=False, *, rtol=None):
    """The number of singular values of each matrix above the cutoff: tol
    (absolute) or rtol times the largest; neither: max(M, N) * eps times the
    largest (NumPy's and the array API's default).  A 1-D x: 1 unless it is
    all zeros, as NumPy.  int64."""
    if tol is not None and rtol is not None:
        raise ValueError("cjit.numpy.linalg.matrix_rank: give tol or rtol, not both")
    v = _float(x, "linalg.matrix_rank")
    if v.ndim < 2:
        return any_(v != 0).astype("int64")
    a = _matrices(v, "matrix_rank", square=bool(hermitian))
    s = abs_(eigvalsh(a)) if hermitian else svdvals(a)
    if tol is not None:
        cutoff = _lift(tol, "linalg.matrix_rank").astype(a.dtype)[..., None]
    else:
        cutoff = _rtol_array(a, rtol, "matrix_rank")[..., None] * max_(s, axis=-1, keepdims=True)
    return sum_((s > cutoff).astype("int64"), axis=-1)


@_op("a", "b", "rcond")
def lstsq(a, b, rcond=None):
    """NumPy's least squares: (x, residuals, rank, s) for a (M, N) and b (M,)
    or (M, K), through the SVD; singular values at most rcond times the
    largest count as zero (None: max(M, N) * eps).  x is the minimum-norm
    solution, differentiable (it is pinv(a) @ b).  residuals: the squared
    norms of b - a x per column, shape (K,) (or (1,) for a 1-D b) when
    M > N, else (0,); unlike NumPy they are also given when a has a lower
    rank (a traced rank cannot choose a shape)."""
    A = _float(a, "linalg.lstsq")
    B = _float(b, "linalg.lstsq")
    if A.ndim != 2 or B.ndim not in (1, 2) or B.shape[0] != A.shape[0]:
        raise _error(np.linalg.LinAlgError, "linalg.lstsq",
                     f"needs a (M, N) and b (M,) or (M, K) with the same M, got b of shape {tuple(B.shape)} and",
                     A)
    dt = result_type(A.dtype, B.dtype)
    A, B = A.astype(dt), B.astype(dt)
    m, n = A.shape
    p = pinv(A, rtol=rcond)
    x = p @ B
    s = svdvals(A)
    rank = matrix_rank(A, rtol=rcond)
    if m > n:
        r = B - A @ x
        resid = sum_(r * r, axis=0)
        if B.ndim == 1:
            resid = resid.reshape((1,))
    else:
        resid = zeros((0,), dtype=dt)
    return x, resid, rank, s


# ---- through LU with partial pivoting (the lu and lu_pivots ops: LAPACK's getrf) ----

_LOWER, _UNIT = 1, 4


def _square(x, who):
    a = _float(x, f"linalg.{who}")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise _error(np.linalg.LinAlgError, f"linalg.{who}", "needs square matrices in the last two dims", a)
    return a


def _factors(a):
    return a.trace.apply("lu", a), a.trace.apply("lu_pivots", a)


def _lu_solve(lu, perm, b):
    """x with a x = b from a's factors (P a = L U): b's rows reordered, then
    the two triangular solves.  b (..., n, k), the batch dims lu's."""
    pb = take_along_axis(b, broadcast_to(perm.reshape(tuple(perm.shape) + (1,)), tuple(b.shape)), axis=-2)
    y = lu.trace.apply("triangular_solve", lu, pb, mode=_LOWER | _UNIT)
    return lu.trace.apply("triangular_solve", lu, y, mode=0)


def _parity(perm):
    """+1 or -1: the sign of the permutation perm (its inversions counted)."""
    n = perm.shape[-1]
    i = arange(n)
    later = i.reshape((n, 1)) < i.reshape((1, n))
    inv = (perm.reshape(tuple(perm.shape) + (1,)) > perm.reshape(tuple(perm.shape[:-1]) + (1, n))) & later
    count = sum_(inv.astype("int64"), axis=(-2, -1))
    return 1 - 2 * (count % 2)


@_op("x1", "x2")
def solve(x1, x2):
    """x with x1 x = x2 (LU with partial pivoting; batch dims broadcast).  x2
    is a vector when it is 1-D, else matrices (the array API's rule).  A
    singular matrix gives inf or nan, as JAX's (NumPy raises)."""
    a, b = _square(x1, "solve"), _float(x2, "solve")
    dt = result_type(a.dtype, b.dtype)
    a, b = a.astype(dt), b.astype(dt)
    vector = b.ndim == 1
    if vector:
        b = b.reshape((b.shape[0], 1))
    if b.shape[-2] != a.shape[-1]:
        raise _error(ValueError, "linalg.solve", "x2's rows must match x1's size", a, b)
    batch = tuple(np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))
    a = broadcast_to(a, batch + tuple(a.shape[-2:]))
    b = broadcast_to(b, batch + tuple(b.shape[-2:]))
    lu, perm = _factors(a)
    x = _lu_solve(lu, perm, b)
    return x.reshape(tuple(x.shape[:-1])) if vector else x


@_op("x")
def inv(x):
    """The inverse of each matrix (LU; a singular one gives inf or nan)."""
    a = _square(x, "inv")
    lu, perm = _factors(a)
    return _lu_solve(lu, perm, broadcast_to(eye(a.shape[-1], dtype=a.dtype), tuple(a.shape)))


@_op("x")
def det(x):
    """The determinant of each matrix: the product of U's diagonal, signed
    by the row permutation's parity."""
    a = _square(x, "det")
    lu, perm = _factors(a)
    return prod(diagonal(lu), axis=-1) * _parity(perm).astype(a.dtype)


SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])


@_op("x")
def _slogdet(x):
    a = _square(x, "slogdet")
    lu, perm = _factors(a)
    d = diagonal(lu)
    return prod(sign_(d), axis=-1) * _parity(perm).astype(a.dtype), sum_(log(abs_(d)), axis=-1)


def slogdet(x):
    """(sign, log |det|) of each matrix, as a named pair."""
    return SlogdetResult(*_slogdet(x))


# Complex arguments go to their implementations (_complex_linalg.py); the
# functions without one say so.
complex_aware(globals(), __all__, prefix="linalg.")
