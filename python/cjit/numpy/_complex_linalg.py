"""cjit.numpy.linalg on complex arguments (see _complex.py and
_complex_api.py, whose registry these implementations join).

The norms are the same norms of |x|; products go through the interleaved
pairs; a complex system or inverse is the real one of twice the size (the
embedding [[re, -im], [im, re]], whose LU solves it); eigenvalues of a
Hermitian matrix and singular values are those of the embedding, each of
which comes twice.  Cholesky, the LU elimination behind det and slogdet,
and Householder QR are written column by column with real ops on the
parts; the factorizations that iterate (svd, eigh's vectors) need LAPACK's
complex routines and are not here."""
from __future__ import annotations

import numpy as np

from . import _complex as C
from ._complex import as_complex, bilinear, linear, make
from ..api import current_trace
from ._complex_api import _cnp, _eager, _has_traced, _wrap, complex_matmul, impl


def _abs_first(fn_name):
    """A norm of complex x: the same norm of |x| (every vector norm, and the
    matrix norms that sum or compare absolute values)."""
    def f(x, *args, **kwargs):
        return getattr(_cnp().linalg, fn_name)(C.absolute(x), *args, **kwargs)
    return f


for _n in ("vector_norm", "norm"):
    impl("linalg." + _n)(_abs_first(_n))


@impl("linalg.matrix_norm")
def _matrix_norm(x, *, keepdims=False, ord="fro"):
    c = _cnp()
    if ord in (2, -2, "nuc"):
        s = _svdvals(x)
        r = s[..., 0] if ord == 2 else s[..., -1] if ord == -2 else c.sum(s, axis=-1)
        return c.reshape(r, tuple(r.shape) + (1, 1)) if keepdims else r
    return c.linalg.matrix_norm(C.absolute(x), keepdims=keepdims, ord=ord)


def _pair_means(v):
    """The means of neighbouring pairs along the last axis: the eigenvalues
    (singular values) of the real embedding come in equal pairs, and their
    mean has a gradient that does not depend on how LAPACK picked the
    eigenvectors of the pair's two-dimensional eigenspace."""
    return (v[..., 0::2] + v[..., 1::2]) * 0.5


@impl("linalg.eigvalsh")
def _eigvalsh(x, UPLO="L"):
    """The eigenvalues of a Hermitian matrix: each eigenvalue of its real
    embedding [[re, -im], [im, re]] (symmetric) twice."""
    z = as_complex(x)
    if UPLO == "U":
        z = C.linear(lambda v: _cnp().matrix_transpose(v), z).conj()
    tri = lambda v, k: _cnp().tril(v, k)
    # the Hermitian matrix the lower triangle names (the diagonal's imaginary part is dropped)
    low = make(tri(z.re, 0), tri(z.im, -1))
    h = C.binop("add", low, C.linear(lambda v: _cnp().matrix_transpose(v), make(
        tri(z.re, -1), tri(z.im, -1))).conj())
    return _pair_means(_cnp().linalg.eigvalsh(_embed(h)))


@impl("linalg.svdvals")
def _svdvals(x):
    """The singular values: each singular value of the real embedding twice."""
    return _pair_means(_cnp().linalg.svdvals(_embed(x)))


@impl("linalg.matrix_rank")
def _matrix_rank(x, tol=None, hermitian=False, *, rtol=None):
    c = _cnp()
    z = as_complex(x)
    if len(z.shape) < 2:
        return c.any(C.binop("ne", z, 0.0)).astype("int64")
    s = _svdvals(z)
    if tol is not None:
        cutoff = c.asarray(tol)[..., None]
    else:
        eps = float(np.finfo(C.part_dtype(z.dtype)).eps)
        r = max(z.shape[-2:]) * eps if rtol is None else c.asarray(rtol)[..., None]
        cutoff = r * c.max(s, axis=-1, keepdims=True)
    return c.sum((s > cutoff).astype("int64"), axis=-1)


impl("linalg.matmul")(lambda x1, x2, /: complex_matmul(x1, x2))
impl("linalg.outer")(lambda x1, x2, /: bilinear(lambda p, q: _cnp().outer(p, q), x1, x2))
impl("linalg.tensordot")(lambda x1, x2, /, *, axes=2: bilinear(
    lambda p, q: _cnp().tensordot(p, q, axes=axes), x1, x2))
impl("linalg.cross")(lambda x1, x2, /, *, axis=-1: bilinear(
    lambda p, q: _cnp().linalg.cross(p, q, axis=axis), x1, x2))
impl("linalg.vecdot")(lambda x1, x2, /, *, axis=-1: bilinear(
    lambda p, q: _cnp().linalg.vecdot(p, q, axis=axis), as_complex(x1).conj(), x2))
impl("linalg.matrix_transpose")(lambda x, /: linear(lambda v: _cnp().matrix_transpose(v), x))
impl("linalg.diagonal")(lambda x, /, *, offset=0: linear(
    lambda v: _cnp().linalg.diagonal(v, offset=offset), x))
impl("linalg.trace")(lambda x, /, *, offset=0, dtype=None: linear(
    lambda v: _cnp().linalg.trace(v, offset=offset), x))


def _embed(a):
    """The real [2n, 2n] matrix of complex a: [[re, -im], [im, re]]."""
    c = _cnp()
    z = as_complex(a)
    top = c.concatenate([z.re, -z.im], axis=-1)
    bottom = c.concatenate([z.im, z.re], axis=-1)
    return c.concatenate([top, bottom], axis=-2)


@impl("linalg.solve")
def _solve(x1, x2):
    """A complex system as the real one of twice the size (LU of the
    embedding): the real and imaginary parts of the solution, stacked."""
    c = _cnp()
    a, b = as_complex(x1), as_complex(x2)
    n = a.shape[-1]
    vector = len(b.shape) == 1          # NumPy 2: only a 1-D b is a vector
    br, bi = (b.re[..., None], b.im[..., None]) if vector else (b.re, b.im)
    sol = c.linalg.solve(_embed(a), c.concatenate([br, bi], axis=-2))
    re, im = sol[..., :n, :], sol[..., n:, :]
    return make(re[..., 0], im[..., 0]) if vector else make(re, im)


@impl("linalg.matrix_power")
def _matrix_power(x, n):
    """Repeated squaring with complex products; a negative n through inv."""
    c = _cnp()
    z = as_complex(x)
    if z.shape[-1:] != z.shape[-2:-1]:
        raise ValueError(f"cjit.numpy.linalg.matrix_power: needs square matrices, got shape "
                         f"{z.shape}")
    n = int(n)
    if n < 0:
        z, n = _inv(z), -n
    result, base = None, z
    while n:
        if n & 1:
            result = base if result is None else C.binop("matmul", result, base)
        n >>= 1
        if n:
            base = C.binop("matmul", base, base)
    if result is None:
        eye = c.broadcast_to(c.eye(z.shape[-1], dtype=z.re.dtype), z.shape)
        result = make(eye, eye * 0)
    return result


@impl("linalg.cholesky")
def _cholesky(x, /, *, upper=False):
    """L with x = L L^H, one column at a time: column j is s / sqrt(s[j]),
    s = x[:, j] - L[:, :j] conj(L[j, :j]), from row j down.  The lower
    triangle of x is read (the diagonal's imaginary part is not); a matrix
    that is not positive definite gives nan everywhere, as the real cholesky.  Written
    with real ops on the parts, so autodiff and vmap apply; its graph grows
    with n (one column step each)."""
    c = _cnp()
    z = as_complex(x)
    if len(z.shape) < 2 or z.shape[-1] != z.shape[-2]:
        raise np.linalg.LinAlgError(f"cjit.numpy.linalg.cholesky: needs square matrices in the last "
                                    f"two dims, got shape {tuple(z.shape)}")
    n = z.shape[-1]
    if n == 0:
        return z
    rows = c.arange(n)
    cols_re, cols_im, diag = [], [], []
    for j in range(n):
        s = make(z.re[..., :, j], z.im[..., :, j])
        if j:
            done = make(c.stack(cols_re, axis=-1), c.stack(cols_im, axis=-1))     # L[:, :j]
            row_j = make(done.re[..., j, :, None], -done.im[..., j, :, None])    # conj(L[j, :j])
            prod = C.binop("matmul", done, row_j)
            s = C.binop("sub", s, make(prod.re[..., 0], prod.im[..., 0]))
        d = c.sqrt(s.re[..., j:j + 1])
        diag.append(d)
        cols_re.append(c.where(rows >= j, s.re / d, 0.0))
        cols_im.append(c.where(rows > j, s.im / d, 0.0))
    ok = c.all(c.concatenate(diag, axis=-1) > 0, axis=-1)[..., None, None]
    L = make(c.where(ok, c.stack(cols_re, axis=-1), np.nan), c.where(ok, c.stack(cols_im, axis=-1), np.nan))
    return C.linear(lambda v: c.matrix_transpose(v), L).conj() if upper else L


def _lu_diagonal(x, who):
    """U's diagonal (re, im: (..., n) each) and the row permutation's sign
    ((...,) of +-1) of complex x = P L U, by Gaussian elimination with
    partial pivoting written with real ops on the parts, one column step
    after another: the pivot is the row, from k down, of the largest |x|
    in column k (an argmax; the swap is a select of rows).  A zero pivot
    (the rest of the column is zero) gives a zero on U's diagonal, with
    nothing eliminated."""
    c = _cnp()
    z = as_complex(x)
    if len(z.shape) < 2 or z.shape[-1] != z.shape[-2]:
        raise np.linalg.LinAlgError(f"cjit.numpy.linalg.{who}: needs square matrices in the last two "
                                    f"dims, got shape {tuple(z.shape)}")
    n = z.shape[-1]
    rows = c.arange(n)
    ar, ai = z.re, z.im
    sign = c.ones(tuple(z.shape[:-2]), dtype=ar.dtype)
    d_re, d_im = [], []
    for k in range(n):
        mag = c.where(rows >= k, ar[..., :, k] ** 2 + ai[..., :, k] ** 2, -1.0)
        p = c.argmax(mag, axis=-1)[..., None]                  # (..., 1)
        at_p = (rows == p)[..., None]                          # (..., n, 1)
        at_k = (rows == k)[..., None]
        # row p of each part, then rows k and p swapped
        pr, pi = c.sum(c.where(at_p, ar, 0.0), axis=-2, keepdims=True), c.sum(c.where(at_p, ai, 0.0), axis=-2, keepdims=True)
        kr, ki = ar[..., k:k + 1, :], ai[..., k:k + 1, :]
        ar = c.where(at_k, pr, c.where(at_p, kr, ar))
        ai = c.where(at_k, pi, c.where(at_p, ki, ai))
        sign = c.where(p[..., 0] == k, sign, -sign)
        vr, vi = ar[..., k, k], ai[..., k, k]                  # the pivot
        d_re.append(vr)
        d_im.append(vi)
        # l = column k below the pivot / pivot (a zero pivot divides by 1: its column is zero)
        zero = (vr == 0) & (vi == 0)
        den = c.where(zero, 1.0, vr * vr + vi * vi)
        sr, si = c.where(zero, 1.0, vr), c.where(zero, 0.0, vi)
        below = (rows > k)[..., None]
        cr, ci = ar[..., :, k:k + 1], ai[..., :, k:k + 1]      # (..., n, 1)
        lr = c.where(below, (cr * sr[..., None, None] + ci * si[..., None, None]) / den[..., None, None], 0.0)
        li = c.where(below, (ci * sr[..., None, None] - cr * si[..., None, None]) / den[..., None, None], 0.0)
        ur, ui = ar[..., k:k + 1, :], ai[..., k:k + 1, :]      # the pivot row
        ar = ar - (lr * ur - li * ui)
        ai = ai - (lr * ui + li * ur)
    if n == 0:
        empty = c.zeros(tuple(z.shape[:-2]) + (0,), dtype=ar.dtype)
        return empty, empty, sign
    return c.stack(d_re, axis=-1), c.stack(d_im, axis=-1), sign


@impl("linalg.det")
def _det(x):
    """sign x the product of U's diagonal (complex products, in order)."""
    c = _cnp()
    dr, di, sign = _lu_diagonal(x, "det")
    if dr.shape[-1] == 0:
        return make(sign, sign * 0.0)
    r = make(dr[..., 0], di[..., 0])
    for k in range(1, dr.shape[-1]):
        r = C.binop("mul", r, make(dr[..., k], di[..., k]))
    return make(r.re * sign, r.im * sign)


@impl("linalg.slogdet", eager_jit=False)
def _slogdet(x):
    """(sign, log|det|) as a named pair; outside a trace the pair is
    computed by one compiled call, as the other functions' eager calls."""
    from .linalg import SlogdetResult
    if current_trace() is None and not _has_traced((x,), {}):
        return SlogdetResult(*_eager("linalg.slogdet", _slogdet_pair, (x,), {}))
    return SlogdetResult(*_slogdet_pair(x))


def _slogdet_pair(x):
    """sign: the product of the diagonal's phases (0 when a pivot is 0, with
    log|det| = -inf), as NumPy's for complex input."""
    c = _cnp()
    dr, di, sign = _lu_diagonal(x, "slogdet")
    mag = c.hypot(dr, di)
    logabs = c.sum(c.log(mag), axis=-1)
    zero = mag == 0
    safe = c.where(zero, 1.0, mag)
    phase = make(c.where(zero, 0.0, dr / safe), c.where(zero, 0.0, di / safe))
    s = make(sign, sign * 0.0)
    for k in range(dr.shape[-1]):
        s = C.binop("mul", s, make(phase.re[..., k], phase.im[..., k]))
    return s, logabs


def _qr_pair(x, mode):
    """Householder QR as LAPACK's geqr2 and ung2r do it, with real ops on
    the parts, one column after another: reflector j is H = I - tau v v^H
    with v[j] = 1, R's diagonal entry beta real, -sign(Re a_jj) times the
    column's norm (zlarfg), so Q and R are NumPy's up to rounding."""
    c = _cnp()
    z = as_complex(x)
    if len(z.shape) < 2:
        raise np.linalg.LinAlgError(f"cjit.numpy.linalg.qr: needs matrices in the last two dims, got "
                                    f"shape {tuple(z.shape)}")
    m, n = z.shape[-2], z.shape[-1]
    k = min(m, n)
    rows = c.arange(m)[:, None]
    conj_t = lambda w: make(c.matrix_transpose(w.re), -c.matrix_transpose(w.im))
    a = z
    vs, taus = [], []
    for j in range(k):
        ar, ai = a.re[..., :, j:j + 1], a.im[..., :, j:j + 1]          # column j, (..., m, 1)
        alr, ali = a.re[..., j:j + 1, j:j + 1], a.im[..., j:j + 1, j:j + 1]
        below = rows > j
        xnorm2 = c.sum(c.where(below, ar * ar + ai * ai, 0.0), axis=-2, keepdims=True)
        beta = -c.where(alr < 0, -1.0, 1.0) * c.sqrt(alr * alr + ali * ali + xnorm2)
        keep = (xnorm2 == 0) & (ali == 0)                              # H = I, beta = alpha
        safe = c.where(keep, 1.0, beta)
        tau = make(c.where(keep, 0.0, (beta - alr) / safe), c.where(keep, 0.0, -ali / safe))
        beta = c.where(keep, alr, beta)
        # v below j: column / (alpha - beta)
        dr, di = c.where(keep, 1.0, alr - beta), c.where(keep, 0.0, ali)
        den = dr * dr + di * di
        v = make(c.where(below, (ar * dr + ai * di) / den, c.where(rows == j, 1.0, 0.0)),
                 c.where(below, (ai * dr - ar * di) / den, 0.0))
        # A := H^H A = A - conj(tau) v (v^H A); column j becomes beta e_j exactly
        w = C.binop("matmul", conj_t(v), a)                            # (..., 1, n)
        upd = C.binop("mul", tau.conj(), C.binop("matmul", v, w))
        a = C.binop("sub", a, upd)
        col = c.arange(n) == j
        a = make(c.where(col, c.where(rows == j, beta, c.where(below, 0.0, a.re)), a.re),
                 c.where(col, c.where(rows >= j, 0.0, a.im), a.im))
        vs.append(v)
        taus.append(tau)
    r_rows = m if mode == "complete" else k
    upper = c.arange(n)[None, :] >= c.arange(r_rows)[:, None]
    r = make(c.where(upper, a.re[..., :r_rows, :], 0.0), c.where(upper, a.im[..., :r_rows, :], 0.0))
    if mode == "r":
        return (r,)
    q_cols = m if mode == "complete" else k
    eye = c.broadcast_to(c.eye(m, q_cols, dtype=z.re.dtype), tuple(z.shape[:-2]) + (m, q_cols))
    q = make(eye, eye * 0.0)
    for j in reversed(range(k)):                                       # Q = H_0 H_1 ... H_{k-1} I
        upd = C.binop("mul", taus[j], C.binop("matmul", vs[j], C.binop("matmul", conj_t(vs[j]), q)))
        q = C.binop("sub", q, upd)
    return q, r


@impl("linalg.qr", eager_jit=False)
def _qr(x, mode="reduced"):
    """a = Q R (modes 'reduced', 'complete', 'r' as the real qr), a named
    pair; outside a trace one compiled call, as other eager calls."""
    from .linalg import QRResult
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"cjit.numpy.linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    if current_trace() is None and not _has_traced((x,), {}):
        out = _eager("linalg.qr", _qr_pair, (x, mode), {})
    else:
        out = _qr_pair(x, mode)
    return out[0] if mode == "r" else QRResult(*out)


@impl("linalg.inv")
def _inv(x):
    n = as_complex(x).shape[-1]
    m = _cnp().linalg.inv(_embed(x))
    return make(m[..., :n, :n], m[..., n:, :n])


def install_linalg(namespace):
    """Wraps cjit.numpy.linalg's functions (names 'linalg.<name>')."""
    for n in list(namespace.get("__all__", [])):
        fn = namespace.get(n)
        if callable(fn) and not isinstance(fn, type) and not getattr(fn, "_cjit_complex_wrapped",
                                                                      False):
            namespace[n] = _wrap("linalg." + n, fn)
