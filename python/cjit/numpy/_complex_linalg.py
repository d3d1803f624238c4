"""cjit.numpy.linalg on complex arguments: the registry's entries of
cjit.numpy.linalg's functions (names 'linalg.<name>'; _complex_dispatch.py,
_complex_api.py for cjit.numpy's own).

The norms are the same norms of |x|; products go through the interleaved
pairs; a complex system or inverse is the real one of twice the size (the
embedding [[re, -im], [im, re]], whose LU solves it); eigenvalues of a
Hermitian matrix and singular values are those of the embedding, each of
which comes twice.  Cholesky, the LU elimination behind det and slogdet,
and Householder QR are fori_loops over the columns, with real ops on the
parts; the factorizations that iterate (svd, eigh's vectors) need LAPACK's
complex routines and are not here."""
from __future__ import annotations

import numpy as np

from .._control import fori_loop
from .._trace_state import current_trace
from . import _complex as C
from ._complex import as_complex, bilinear, linear, make
from ._complex_dispatch import eager, has_traced, impl
from . import linalg
from ._creation import arange, asarray, eye, ones, tril, zeros, zeros_like
from ._elementwise import absolute, log, maximum, sqrt, where
from ._linalg import outer, tensordot
from ._manipulation import broadcast_to, concatenate, matrix_transpose, reshape
from ._math import hypot
from ._reductions import all as all_, any as any_, argmax, max as max_, sum as sum_


def _abs_first(fn_name):
    """A norm of complex x: the same norm of |x| (every vector norm, and the
    matrix norms that sum or compare absolute values)."""
    def f(x, *args, **kwargs):
        return getattr(linalg, fn_name)(C.cabs(x), *args, **kwargs)
    return f


for _n in ("vector_norm", "norm"):
    impl("linalg." + _n)(_abs_first(_n))


@impl("linalg.matrix_norm")
def _matrix_norm(x, *, keepdims=False, ord="fro"):
    if ord in (2, -2, "nuc"):
        s = _svdvals(x)
        r = s[..., 0] if ord == 2 else s[..., -1] if ord == -2 else sum_(s, axis=-1)
        return reshape(r, tuple(r.shape) + (1, 1)) if keepdims else r
    return linalg.matrix_norm(C.cabs(x), keepdims=keepdims, ord=ord)


def _pair_means(v):
    """The means of neighbouring pairs along the last axis: the eigenvalues
    (singular values) of the real embedding come in equal pairs, and their
    mean has a gradient that does not depend on how LAPACK picked the
    eigenvectors of the pair's two-dimensional eigenspace."""
    return (v[..., 0::2] + v[..., 1::2]) * 0.5


def _conj_transpose(z):
    """z^H over the last two dims."""
    return make(matrix_transpose(z.re), -matrix_transpose(z.im))


def _square(x, who):
    """x as a complex value of square matrices in its last two dims."""
    z = as_complex(x)
    if len(z.shape) < 2 or z.shape[-1] != z.shape[-2]:
        raise np.linalg.LinAlgError(f"cjit.numpy.linalg.{who}: needs square matrices in the last two "
                                    f"dims, got shape {tuple(z.shape)}")
    return z


def _traced_once(name, fn, *args):
    """fn(*args) in a trace; outside one, one compiled call of it, as the
    other eager calls (used where the caller wraps fn's tuple in a named
    result, which a compiled function cannot return)."""
    if current_trace() is None and not has_traced(args, {}):
        return eager(name, fn, args, {})
    return fn(*args)


def _product(first, re, im):
    """first times the complex values re + i im along the last axis, in
    order (a fori_loop: the plan does not grow with the axis)."""
    n = re.shape[-1]
    if n == 0:
        return first
    at = arange(n)

    def step(k, acc):
        term = make(sum_(where(at == k, re, 0.0), axis=-1), sum_(where(at == k, im, 0.0), axis=-1))
        r = C.binop("mul", make(*acc), term)
        return r.re, r.im
    return make(*fori_loop(0, n, step, (first.re, first.im)))


@impl("linalg.eigvalsh")
def _eigvalsh(x, UPLO="L", *, symmetrize_input=True):
    """The eigenvalues of a Hermitian matrix: each eigenvalue of its real
    embedding [[re, -im], [im, re]] (symmetric) twice.  The matrix is
    (x + x^H) / 2 with symmetrize_input (JAX's default), else the one x's
    lower (UPLO='U': upper) triangle names."""
    if UPLO not in ("L", "U"):
        raise ValueError(f"cjit.numpy.linalg.eigvalsh: UPLO must be 'L' or 'U', got {UPLO!r}")
    z = _square(x, "eigvalsh")
    if symmetrize_input:
        h = C.binop("mul", C.binop("add", z, _conj_transpose(z)), 0.5)
        return _pair_means(linalg.eigvalsh(_embed(h), symmetrize_input=False))
    if UPLO == "U":
        z = _conj_transpose(z)
    tri = lambda v, k: tril(v, k)
    # the Hermitian matrix the lower triangle names (the diagonal's imaginary part is dropped)
    low = make(tri(z.re, 0), tri(z.im, -1))
    h = C.binop("add", low, _conj_transpose(make(tri(z.re, -1), tri(z.im, -1))))
    return _pair_means(linalg.eigvalsh(_embed(h), symmetrize_input=False))


@impl("linalg.svdvals")
def _svdvals(x):
    """The singular values: each singular value of the real embedding twice."""
    return _pair_means(linalg.svdvals(_embed(x)))


@impl("linalg.matrix_rank")
def _matrix_rank(x, tol=None, hermitian=False, *, rtol=None):
    z = as_complex(x)
    if len(z.shape) < 2:
        return any_(C.binop("ne", z, 0.0)).astype("int64")
    s = _svdvals(z)
    if tol is not None:
        cutoff = asarray(tol)[..., None]
    else:
        eps = float(np.finfo(C.part_dtype(z.dtype)).eps)
        r = max(z.shape[-2:]) * eps if rtol is None else asarray(rtol)[..., None]
        cutoff = r * max_(s, axis=-1, keepdims=True)
    return sum_((s > cutoff).astype("int64"), axis=-1)


impl("linalg.matmul")(lambda x1, x2, /: C.complex_matmul(x1, x2))
impl("linalg.outer")(lambda x1, x2, /: bilinear(lambda p, q: outer(p, q), x1, x2))
impl("linalg.tensordot")(lambda x1, x2, /, *, axes=2: bilinear(
    lambda p, q: tensordot(p, q, axes=axes), x1, x2))
impl("linalg.cross")(lambda x1, x2, /, *, axis=-1: bilinear(
    lambda p, q: linalg.cross(p, q, axis=axis), x1, x2))
impl("linalg.vecdot")(lambda x1, x2, /, *, axis=-1: bilinear(
    lambda p, q: linalg.vecdot(p, q, axis=axis), as_complex(x1).conj(), x2))
impl("linalg.matrix_transpose")(lambda x, /: linear(lambda v: matrix_transpose(v), x))
impl("linalg.diagonal")(lambda x, /, *, offset=0: linear(
    lambda v: linalg.diagonal(v, offset=offset), x))
impl("linalg.trace")(lambda x, /, *, offset=0, dtype=None: linear(
    lambda v: linalg.trace(v, offset=offset), x))


def _embed(a):
    """The real [2n, 2n] matrix of complex a: [[re, -im], [im, re]]."""
    z = as_complex(a)
    top = concatenate([z.re, -z.im], axis=-1)
    bottom = concatenate([z.im, z.re], axis=-1)
    return concatenate([top, bottom], axis=-2)


@impl("linalg.solve")
def _solve(x1, x2):
    """A complex system as the real one of twice the size (LU of the
    embedding): the real and imaginary parts of the solution, stacked."""
    a, b = as_complex(x1), as_complex(x2)
    n = a.shape[-1]
    vector = len(b.shape) == 1          # NumPy 2: only a 1-D b is a vector
    br, bi = (b.re[..., None], b.im[..., None]) if vector else (b.re, b.im)
    sol = linalg.solve(_embed(a), concatenate([br, bi], axis=-2))
    re, im = sol[..., :n, :], sol[..., n:, :]
    return make(re[..., 0], im[..., 0]) if vector else make(re, im)


@impl("linalg.matrix_power")
def _matrix_power(x, n):
    """Repeated squaring with complex products; a negative n through inv."""
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
        ident = broadcast_to(eye(z.shape[-1], dtype=z.re.dtype), z.shape)
        result = make(ident, ident * 0)
    return result


@impl("linalg.cholesky")
def _cholesky(x, /, *, upper=False, symmetrize_input=True):
    """L with x = L L^H, one column j at a time in a fori_loop (its compile
    does not grow with n): column j is s / sqrt(s[j]) from row j down,
    s = x[:, j] - L conj(L[j, :]) (L's columns from j on are still zero).
    With symmetrize_input (the default, as JAX's) x is (x + x^H) / 2 first;
    then the lower triangle of x is read (the diagonal's imaginary part is not);
    a matrix that is not positive definite gives nan everywhere, as the real
    cholesky.  Written with real ops on the parts, so autodiff and vmap
    apply."""
    z = _square(x, "cholesky")
    n = z.shape[-1]
    if n == 0:
        return z
    if symmetrize_input:
        zh = _conj_transpose(z)
        z = make((z.re + zh.re) * 0.5, (z.im + zh.im) * 0.5)
    rows, cols = arange(n)[:, None], arange(n)

    def step(j, carry):
        lr, li = carry
        col = lambda a: sum_(where(cols == j, a, 0.0), axis=-1)[..., :, None]      # (..., n, 1)
        row = lambda a: sum_(where(rows == j, a, 0.0), axis=-2, keepdims=True)    # (..., 1, n)
        row_j = make(matrix_transpose(row(lr)), -matrix_transpose(row(li)))      # conj(L[j, :]) as a column
        prod = C.binop("matmul", make(lr, li), row_j)
        sr, si = col(z.re) - prod.re, col(z.im) - prod.im
        d = sqrt(row(sr))                                                          # (..., 1, 1)
        return (where(cols == j, where(rows >= j, sr / d, 0.0), lr),
                where(cols == j, where(rows > j, si / d, 0.0), li))

    lr, li = fori_loop(0, n, step, (zeros_like(z.re), zeros_like(z.im)))
    ok = all_(linalg.diagonal(lr) > 0, axis=-1)[..., None, None]
    L = make(where(ok, lr, np.nan), where(ok, li, np.nan))
    return _conj_transpose(L) if upper else L


def _lu_diagonal(x, who):
    """U's diagonal (re, im: (..., n) each) and the row permutation's sign
    ((...,) of +-1) of complex x = P L U, by Gaussian elimination with
    partial pivoting written with real ops on the parts, in a fori_loop
    over the columns (its compile does not grow with n): the pivot is the
    row, from k down, of the largest |x| in column k (an argmax; the swap is
    a select of rows); rows, columns and the pivot are read through masks
    of the traced k.  A zero pivot (the rest of the column is zero) gives a
    zero on U's diagonal, with nothing eliminated."""
    z = _square(x, who)
    n = z.shape[-1]
    rows, cols = arange(n)[:, None], arange(n)

    def step(k, carry):
        ar, ai, sign = carry
        col = lambda a: sum_(where(cols == k, a, 0.0), axis=-1)[..., :, None]      # (..., n, 1)
        row = lambda a, at: sum_(where(at, a, 0.0), axis=-2, keepdims=True)       # (..., 1, n)
        # |re| + |im|, as LAPACK's izamax: no squares to overflow or underflow
        mag = where(rows >= k, absolute(col(ar)) + absolute(col(ai)), -1.0)[..., 0]
        p = argmax(mag, axis=-1)[..., None, None]                                   # (..., 1, 1)
        at_p, at_k = rows == p, rows == k
        # rows k and p swapped
        pr, pi, kr, ki = row(ar, at_p), row(ai, at_p), row(ar, at_k), row(ai, at_k)
        ar = where(at_k, pr, where(at_p, kr, ar))
        ai = where(at_k, pi, where(at_p, ki, ai))
        sign = where(p[..., 0, 0] == k, sign, -sign)
        cr, ci = col(ar), col(ai)
        vr, vi = row(cr, at_k), row(ci, at_k)                                         # the pivot, (..., 1, 1)
        # l = column k below the pivot / pivot (a zero pivot divides by 1: its column is zero),
        # with the pivot scaled by its larger part m first: c / v = (c conj(v / m)) / |v / m|^2 / m,
        # where |v / m|^2 is in [1, 2], so no square overflows or underflows
        zero = (vr == 0) & (vi == 0)
        m = where(zero, 1.0, maximum(absolute(vr), absolute(vi)))
        sr, si = where(zero, 1.0, vr / m), where(zero, 0.0, vi / m)
        den = (sr * sr + si * si) * m
        below = rows > k
        lr = where(below, (cr * sr + ci * si) / den, 0.0)
        li = where(below, (ci * sr - cr * si) / den, 0.0)
        ur, ui = row(ar, at_k), row(ai, at_k)                                         # the pivot row
        return ar - (lr * ur - li * ui), ai - (lr * ui + li * ur), sign

    sign = ones(tuple(z.shape[:-2]), dtype=z.re.dtype)
    ar, ai = z.re, z.im
    if n:                                   # (a body over no rows would not trace)
        ar, ai, sign = fori_loop(0, n, step, (ar, ai, sign))
    # later steps change only the rows below their pivot: the diagonal is U's
    return linalg.diagonal(ar), linalg.diagonal(ai), sign


@impl("linalg.det")
def _det(x):
    """sign x the product of U's diagonal (complex products, in order)."""
    dr, di, sign = _lu_diagonal(x, "det")
    return _product(make(sign, zeros_like(sign)), dr, di)


@impl("linalg.slogdet", eager_jit=False)
def _slogdet(x):
    """(sign, log|det|) as a named pair; outside a trace the pair is
    computed by one compiled call, as the other functions' eager calls."""
    return linalg.SlogdetResult(*_traced_once("linalg.slogdet", _slogdet_pair, x))


def _slogdet_pair(x):
    """sign: the product of the diagonal's phases (0 when a pivot is 0, with
    log|det| = -inf), as NumPy's for complex input."""
    dr, di, sign = _lu_diagonal(x, "slogdet")
    mag = hypot(dr, di)
    logabs = sum_(log(mag), axis=-1)
    zero = mag == 0
    safe = where(zero, 1.0, mag)
    phase = make(where(zero, 0.0, dr / safe), where(zero, 0.0, di / safe))
    return _product(make(sign, zeros_like(sign)), phase.re, phase.im), logabs


def _qr_pair(x, mode):
    """Householder QR as LAPACK's geqr2 and ung2r do it, with real ops on
    the parts, one column j after another in a fori_loop (its compile does
    not grow with the size): reflector j is H = I - tau v v^H with v[j] = 1,
    R's diagonal entry beta real, -sign(Re a_jj) times the column's norm
    (zlarfg), so Q and R are NumPy's up to rounding.  The reflectors are
    kept as the columns of V and the entries of tau; Q = H_0 ... H_{k-1} I
    is a second loop, last reflector first."""
    z = as_complex(x)
    if len(z.shape) < 2:
        raise np.linalg.LinAlgError(f"cjit.numpy.linalg.qr: needs matrices in the last two dims, got "
                                    f"shape {tuple(z.shape)}")
    m, n = z.shape[-2], z.shape[-1]
    k = min(m, n)
    batch = tuple(z.shape[:-2])
    rows, cols, refl = arange(m)[:, None], arange(n), arange(k)
    pick = lambda a, at, axis: sum_(where(at, a, 0.0), axis=axis, keepdims=True)

    def reflect(j, carry):
        ar, ai, vr, vi, tr, ti = carry
        cr, ci = pick(ar, cols == j, -1), pick(ai, cols == j, -1)                   # column j, (..., m, 1)
        alr, ali = pick(cr, rows == j, -2), pick(ci, rows == j, -2)                 # a_jj, (..., 1, 1)
        below = rows > j
        # the column from row j down, divided by its largest part (as LAPACK's scaled norms):
        # the squares below neither overflow nor underflow; tau and v do not depend on the
        # scale, beta is scaled back
        big = max_(where(rows >= j, maximum(absolute(cr), absolute(ci)), 0.0), axis=-2, keepdims=True)
        sc = where(big == 0, 1.0, big)
        cr, ci, alr_s, ali_s = cr / sc, ci / sc, alr / sc, ali / sc
        xnorm2 = sum_(where(below, cr * cr + ci * ci, 0.0), axis=-2, keepdims=True)
        beta = -where(alr < 0, -1.0, 1.0) * sqrt(alr_s * alr_s + ali_s * ali_s + xnorm2)
        keep = (xnorm2 == 0) & (ali == 0)                                            # H = I, beta = alpha
        safe = where(keep, 1.0, beta)
        tau = make(where(keep, 0.0, (beta - alr_s) / safe), where(keep, 0.0, -ali_s / safe))
        # v below j: column / (alpha - beta)
        dr, di = where(keep, 1.0, alr_s - beta), where(keep, 0.0, ali_s)
        beta = where(keep, alr, beta * sc)
        den = dr * dr + di * di
        v = make(where(below, (cr * dr + ci * di) / den, where(rows == j, 1.0, 0.0)),
                 where(below, (ci * dr - cr * di) / den, 0.0))
        # A := H^H A = A - conj(tau) v (v^H A); column j becomes beta e_j exactly
        a = make(ar, ai)
        a = C.binop("sub", a, C.binop("mul", tau.conj(), C.binop("matmul", v, C.binop("matmul", _conj_transpose(v), a))))
        at_j = cols == j
        ar = where(at_j, where(rows == j, beta, where(below, 0.0, a.re)), a.re)
        ai = where(at_j, where(rows >= j, 0.0, a.im), a.im)
        return (ar, ai, where(refl == j, v.re, vr), where(refl == j, v.im, vi),
                where(refl == j, tau.re, tr), where(refl == j, tau.im, ti))

    zeros_v, zeros_t = zeros(batch + (m, k), dtype=z.re.dtype), zeros(batch + (1, k), dtype=z.re.dtype)
    ar, ai, vr, vi, tr, ti = z.re, z.im, zeros_v, zeros_v, zeros_t, zeros_t
    if k:                                   # (a body over no columns would not trace)
        ar, ai, vr, vi, tr, ti = fori_loop(0, k, reflect, (ar, ai, vr, vi, tr, ti))
    r_rows = m if mode == "complete" else k
    upper = cols[None, :] >= arange(r_rows)[:, None]
    r = make(where(upper, ar[..., :r_rows, :], 0.0), where(upper, ai[..., :r_rows, :], 0.0))
    if mode == "r":
        return (r,)
    q_cols = m if mode == "complete" else k
    ident = broadcast_to(eye(m, q_cols, dtype=z.re.dtype), batch + (m, q_cols))

    def apply(i, carry):                    # Q := H_j Q, j = k - 1 - i
        j = k - 1 - i
        v = make(pick(vr, refl == j, -1), pick(vi, refl == j, -1))                  # (..., m, 1)
        tau = make(pick(tr, refl == j, -1), pick(ti, refl == j, -1))                # (..., 1, 1)
        q = make(*carry)
        q = C.binop("sub", q, C.binop("mul", tau, C.binop("matmul", v, C.binop("matmul", _conj_transpose(v), q))))
        return q.re, q.im

    qr_, qi = ident, ident * 0.0
    if k:
        qr_, qi = fori_loop(0, k, apply, (qr_, qi))
    return make(qr_, qi), r


@impl("linalg.qr", eager_jit=False)
def _qr(x, mode="reduced"):
    """a = Q R (modes 'reduced', 'complete', 'r' as the real qr), a named
    pair; outside a trace one compiled call, as other eager calls."""
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"cjit.numpy.linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    out = _traced_once("linalg.qr", _qr_pair, x, mode)
    return out[0] if mode == "r" else linalg.QRResult(*out)


@impl("linalg.inv")
def _inv(x):
    n = as_complex(x).shape[-1]
    m = linalg.inv(_embed(x))
    return make(m[..., :n, :n], m[..., n:, :n])
