"""Linear algebra: Cholesky (LAPACK's potrf) and triangular solves (BLAS's
trsm) as ops of the C graph, with batch dims, gradients, forward mode and
vmap, against NumPy/SciPy and finite differences; the linalg extension's
compositions (norms, matrix_power, trace, diagonal)."""
import gc

import numpy as np
import pytest
import scipy.linalg as sl

import cjit
import cjit.numpy as cnp
from cjit.scipy import linalg as cl

RNG = np.random.default_rng(5)


def spd(*batch, n=6, dtype=np.float64):
    m = RNG.standard_normal(batch + (n, n))
    return (m @ np.swapaxes(m, -1, -2) + n * np.eye(n)).astype(dtype)


def fd_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        d = np.zeros(x.size)
        d[i] = eps
        d = d.reshape(x.shape)
        g.flat[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_cholesky_is_lapacks(dtype, batch):
    a = spd(*batch, dtype=dtype)
    tol = 1e-12 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(cjit.jit(cnp.linalg.cholesky)(a), np.linalg.cholesky(a), rtol=tol, atol=tol)
    np.testing.assert_allclose(cjit.jit(lambda a: cnp.linalg.cholesky(a, upper=True))(a),
                               np.swapaxes(np.linalg.cholesky(a), -1, -2), rtol=tol, atol=tol)
    if not batch:
        np.testing.assert_allclose(cjit.jit(cl.cholesky)(a), sl.cholesky(a), rtol=tol, atol=tol)


def test_eager_calls_outside_jit():
    a, b = spd(), RNG.standard_normal(6)
    np.testing.assert_allclose(cnp.linalg.cholesky(a), np.linalg.cholesky(a), rtol=1e-12)
    np.testing.assert_allclose(cl.solve_triangular(np.linalg.cholesky(a), b, lower=True),
                               sl.solve_triangular(np.linalg.cholesky(a), b, lower=True), rtol=1e-12)


def test_not_positive_definite_gives_nan_and_bad_input_raises():
    a = -spd()
    assert np.isnan(cjit.jit(cnp.linalg.cholesky)(a)).all()
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        cjit.jit(cnp.linalg.cholesky)(np.ones((3, 4)))
    with pytest.raises(ValueError, match="same batch dims|square"):
        cjit.jit(lambda a, b: cl.solve_triangular(a, b))(np.eye(3), np.ones((4, 2)))


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [0, 1, "T"])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular_is_scipys(lower, trans, unit):
    L = np.linalg.cholesky(spd())
    a = L if lower else L.T.copy()
    a = a + np.triu(RNG.standard_normal((6, 6)), 1) if lower else a + np.tril(RNG.standard_normal((6, 6)), -1)
    for b in (RNG.standard_normal(6), RNG.standard_normal((6, 3))):
        got = cjit.jit(lambda a, b: cl.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit))(a, b)
        np.testing.assert_allclose(got, sl.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit),
                                   rtol=1e-10, atol=1e-12)


def test_cho_solve_and_batches():
    a, b = spd(4), RNG.standard_normal((4, 6, 2))
    for lower in (True, False):
        got = cjit.jit(lambda a, b: cl.cho_solve(cl.cho_factor(a, lower=lower), b))(a, b)
        np.testing.assert_allclose(got, np.linalg.solve(a, b), rtol=1e-10)


def test_gradients_agree_with_finite_differences():
    a, b = spd(), RNG.standard_normal(6)

    def f(xp, solve_chol):
        def loss(a, b):
            s = (a + a.T) / 2
            L = xp.linalg.cholesky(s)
            return xp.sum(solve_chol(s, L, b) ** 2) + 2 * xp.sum(xp.log(xp.diagonal(L)))
        return loss
    loss_c = f(cnp, lambda s, L, b: cl.cho_solve((L, True), b))
    loss_n = f(np, lambda s, L, b: np.linalg.solve(s, b))
    ga, gb = cjit.grad(loss_c, argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ga, fd_grad(lambda v: loss_n(v, b), a), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gb, fd_grad(lambda v: loss_n(a, v), b), rtol=1e-6, atol=1e-8)
    # forward mode and second order
    da = RNG.standard_normal((6, 6))
    _, t = cjit.jvp(cnp.linalg.cholesky, (a,), (da,))
    sym = (da + da.T) / 2
    fd = (np.linalg.cholesky(a + 1e-6 * sym) - np.linalg.cholesky(a - 1e-6 * sym)) / 2e-6
    np.testing.assert_allclose(t, fd, rtol=1e-5, atol=1e-8)
    L = np.linalg.cholesky(a)
    h = cjit.hessian(lambda b: cnp.sum(cl.solve_triangular(L, b, lower=True) ** 2))(b)
    Li = np.linalg.inv(L)
    np.testing.assert_allclose(h, 2 * Li.T @ Li, rtol=1e-8)


def test_gaussian_log_likelihood_under_vmap_and_its_plan():
    """The multivariate normal log density of a batch of points, its
    gradient in the covariance, and the exact memory plan."""
    a, x = spd(n=8), RNG.standard_normal((5, 8))

    def logpdf(x, cov):
        L = cnp.linalg.cholesky(cov)
        z = cl.solve_triangular(L, x, lower=True)
        return -0.5 * cnp.sum(z * z) - cnp.sum(cnp.log(cnp.diagonal(L))) - 4 * np.log(2 * np.pi)

    got = cjit.jit(cjit.vmap(logpdf, in_axes=(0, None)))(x, a)
    import scipy.stats
    np.testing.assert_allclose(got, scipy.stats.multivariate_normal(np.zeros(8), a).logpdf(x), rtol=1e-10)
    g = cjit.jit(cjit.grad(lambda c: cjit.vmap(logpdf, in_axes=(0, None))(x, c).sum()))
    planned = g.lower(a).compile().memory_analysis().peak_memory_in_bytes
    g(a)
    gc.collect()
    base = cjit.memory_stats()["bytes_in_use"]
    cjit.reset_peak_memory_stats()
    out = g(a)
    assert cjit.memory_stats()["peak_bytes_in_use"] - base == planned
    ai = np.linalg.inv(a)
    want = 0.5 * sum(ai @ np.outer(v, v) @ ai for v in x) - 2.5 * ai   # d/dcov of the summed log densities
    np.testing.assert_allclose(out, (want + want.T) / 2, rtol=1e-8, atol=1e-10)


def test_linalg_extension_compositions():
    m = RNG.standard_normal((3, 4, 4))
    np.testing.assert_allclose(cjit.jit(lambda m: cnp.linalg.matrix_power(m, 5))(m), np.linalg.matrix_power(m, 5))
    np.testing.assert_allclose(cjit.jit(lambda m: cnp.linalg.matrix_power(m, 0))(m), np.linalg.matrix_power(m, 0))
    np.testing.assert_allclose(cjit.jit(lambda m: cnp.linalg.matrix_power(m, -2))(m), np.linalg.matrix_power(m, -2),
                               rtol=1e-9)
    for ordv in ("fro", 1, -1, np.inf, -np.inf):
        np.testing.assert_allclose(cjit.jit(lambda m: cnp.linalg.matrix_norm(m, ord=ordv))(m),
                                   np.linalg.norm(m, ord=ordv, axis=(-2, -1)), rtol=1e-12)
    for ordv in (2, 1, np.inf, -np.inf, 0, 3):
        np.testing.assert_allclose(cjit.jit(lambda m: cnp.linalg.vector_norm(m, ord=ordv, axis=-1))(m),
                                   np.linalg.norm(m, ord=ordv, axis=-1), rtol=1e-12)
    np.testing.assert_allclose(cjit.jit(lambda m: cnp.linalg.trace(m))(m), np.trace(m, axis1=-2, axis2=-1))
    np.testing.assert_allclose(cjit.jit(cnp.linalg.norm)(m[0]), np.linalg.norm(m[0]))
    for ordv in (2, -2, "nuc"):
        np.testing.assert_allclose(cjit.jit(lambda m: cnp.linalg.matrix_norm(m, ord=ordv))(m),
                                   np.linalg.norm(m, ord=ordv, axis=(-2, -1)), rtol=1e-12)
    np.testing.assert_allclose(cjit.jit(cnp.linalg.pinv)(m), np.linalg.pinv(m), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_lu_based_solve_inv_det_slogdet_are_numpys(dtype):
    a = RNG.standard_normal((3, 5, 5)).astype(dtype)
    b, v = RNG.standard_normal((3, 5, 2)).astype(dtype), RNG.standard_normal(5).astype(dtype)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == np.float64 else dict(rtol=2e-3, atol=1e-4)
    np.testing.assert_allclose(cjit.jit(cnp.linalg.solve)(a, b), np.linalg.solve(a, b), **tol)
    np.testing.assert_allclose(cjit.jit(cnp.linalg.solve)(a[0], v), np.linalg.solve(a[0], v), **tol)
    np.testing.assert_allclose(cjit.jit(cnp.linalg.inv)(a), np.linalg.inv(a), **tol)
    np.testing.assert_allclose(cjit.jit(cnp.linalg.det)(a), np.linalg.det(a), **tol)
    sign, logdet = cjit.jit(lambda a: tuple(cnp.linalg.slogdet(a)))(a)
    ws, wl = np.linalg.slogdet(a)
    np.testing.assert_array_equal(sign, ws)
    np.testing.assert_allclose(logdet, wl, **tol)
    r = cnp.linalg.slogdet(a[0])
    assert r.sign == ws[0] and np.isclose(r.logabsdet, wl[0], rtol=1e-4)
    # a permutation needing every swap, and a singular matrix
    p = np.eye(4)[[3, 2, 0, 1]]
    np.testing.assert_allclose(cjit.jit(cnp.linalg.det)(p), np.linalg.det(p))
    assert cjit.jit(cnp.linalg.det)(np.ones((3, 3))) == 0


def test_lu_gradients_forward_mode_and_vmap():
    a, b = RNG.standard_normal((3, 5, 5)), RNG.standard_normal((5, 2))

    def f(xp):
        return lambda a: (xp.linalg.det(a[0]) + xp.sum(xp.linalg.solve(a[1], b) ** 2) + xp.sum(xp.linalg.inv(a[2]))
                          + xp.linalg.slogdet(a[1])[1])
    np.testing.assert_allclose(cjit.jit(cjit.grad(f(cnp)))(a), fd_grad(f(np), a), rtol=1e-5, atol=1e-7)
    da = RNG.standard_normal((5, 5))
    _, t = cjit.jvp(cnp.linalg.det, (a[0],), (da,))
    np.testing.assert_allclose(t, (np.linalg.det(a[0] + 1e-6 * da) - np.linalg.det(a[0] - 1e-6 * da)) / 2e-6,
                               rtol=1e-6)
    np.testing.assert_allclose(cjit.vmap(cnp.linalg.inv)(a), np.linalg.inv(a), rtol=1e-10)
    # second order: the Hessian of log|det| is -A^-T (x) A^-1 (as a bilinear form)
    x = np.eye(3) + 0.2 * RNG.standard_normal((3, 3))
    h = cjit.hessian(lambda v: cnp.linalg.slogdet(v.reshape(3, 3))[1])(x.ravel())
    ai = np.linalg.inv(x)
    want = -np.einsum("jk,li->ijkl", ai, ai).reshape(9, 9)   # d2/dA_ij dA_kl = -(A^-1)_jk (A^-1)_li
    np.testing.assert_allclose(h, want, rtol=1e-7, atol=1e-9)
