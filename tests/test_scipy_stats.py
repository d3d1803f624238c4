"""cjit.scipy.stats against scipy.stats, and gradients against closed forms."""
import math

import numpy as np
import pytest
import scipy.stats as ss

import cjit
import cjit.scipy.stats as cst

X = np.linspace(-3, 5, 33)
CONTINUOUS = [("norm", ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")),
              ("expon", ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")),
              ("laplace", ("logpdf", "pdf", "cdf")),
              ("logistic", ("logpdf", "pdf", "cdf", "sf")),
              ("uniform", ("logpdf", "pdf", "cdf"))]


@pytest.mark.parametrize("name,fns", CONTINUOUS)
def test_location_scale_families_match_scipy(name, fns):
    for fn in fns:
        got = getattr(getattr(cst, name), fn)(X, 0.5, 2.0)
        want = getattr(getattr(ss, name), fn)(X, 0.5, 2.0)
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300, err_msg=f"{name}.{fn}")


@pytest.mark.parametrize("name", ["norm", "expon", "laplace", "logistic", "uniform"])
def test_ppf_matches_scipy(name):
    q = np.linspace(0.001, 0.999, 41)
    np.testing.assert_allclose(getattr(cst, name).ppf(q, 0.5, 2.0),
                               getattr(ss, name).ppf(q, 0.5, 2.0), rtol=1e-13, atol=1e-14)


def test_shape_parameter_families_match_scipy():
    np.testing.assert_allclose(cst.t.logpdf(X, 3.5, 0.5, 2.0), ss.t.logpdf(X, 3.5, 0.5, 2.0),
                               rtol=1e-13)
    xp = np.linspace(0.6, 9, 20)
    np.testing.assert_allclose(cst.gamma.logpdf(xp, 2.5, 0.5, 2.0),
                               ss.gamma.logpdf(xp, 2.5, 0.5, 2.0), rtol=1e-13)
    assert cst.gamma.logpdf(np.array([0.0]), 2.5, 0.5)[0] == -np.inf
    xb = np.linspace(-0.5, 1.5, 21)
    np.testing.assert_allclose(cst.beta.logpdf(xb, 2.5, 1.5), ss.beta.logpdf(xb, 2.5, 1.5),
                               rtol=4e-13)
    k = np.array([-1.0, 0, 1, 2, 3.5, 7, 30])
    np.testing.assert_allclose(cst.poisson.logpmf(k, 3.2), ss.poisson.logpmf(k, 3.2), rtol=1e-13)
    np.testing.assert_allclose(cst.poisson.pmf(k, 3.2), ss.poisson.pmf(k, 3.2), rtol=1e-13)
    kb = np.array([-1.0, 0, 1, 2])
    np.testing.assert_allclose(cst.bernoulli.logpmf(kb, 0.3), ss.bernoulli.logpmf(kb, 0.3),
                               rtol=1e-15)
    np.testing.assert_allclose(cst.bernoulli.cdf(kb, 0.3), ss.bernoulli.cdf(kb, 0.3))


def test_norm_tails_and_float32():
    x = np.array([-40.0, -10.0, 10.0, 40.0])
    np.testing.assert_allclose(cst.norm.logcdf(x), ss.norm.logcdf(x), rtol=1e-13)
    np.testing.assert_allclose(cst.norm.logsf(x), ss.norm.logsf(x), rtol=1e-13)
    r = cst.norm.logpdf(X.astype(np.float32), 0.5, 2.0)
    assert r.dtype == np.float32
    np.testing.assert_allclose(r, ss.norm.logpdf(X, 0.5, 2.0), rtol=1e-6)


def _mvn_case():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4, 4))
    return rng.normal(size=(6, 4)), rng.normal(size=4), a @ a.T + np.eye(4)


def test_multivariate_normal_full_diagonal_and_scalar_covariances():
    x, mu, cov = _mvn_case()
    for c in (cov, np.diag(cov), 2.5):
        np.testing.assert_allclose(cst.multivariate_normal.logpdf(x, mu, c),
                                   ss.multivariate_normal.logpdf(x, mu, c), rtol=1e-13)
        np.testing.assert_allclose(cst.multivariate_normal.pdf(x, mu, c),
                                   ss.multivariate_normal.pdf(x, mu, c), rtol=1e-12)
    np.testing.assert_allclose(
        cjit.jit(lambda v, m: cst.multivariate_normal.logpdf(v, m, cov))(x, mu),
        ss.multivariate_normal.logpdf(x, mu, cov), rtol=1e-13)


def test_multivariate_normal_gradient_in_the_mean():
    x, mu, cov = _mvn_case()
    g = cjit.grad(lambda m: cst.multivariate_normal.logpdf(x, m, cov).sum())(mu)
    np.testing.assert_allclose(g, np.linalg.solve(cov, (x - mu).sum(0)), rtol=1e-12)
    d = np.diag(cov)
    g = cjit.grad(lambda v: cst.multivariate_normal.logpdf(x, mu, v).sum())(d)
    want = 0.5 * (((x - mu) ** 2) / d ** 2 - 1 / d).sum(0)
    np.testing.assert_allclose(g, want, rtol=1e-12)


def test_multivariate_normal_with_a_traced_full_covariance():
    """cjit has a Cholesky factorization: a traced covariance is factored in
    the program (JAX's way) and matches SciPy, batched points included; its
    gradient in the covariance matches -(S^-1 - S^-1 d d^T S^-1) / 2 summed."""
    x, mu, cov = _mvn_case()
    f = cjit.jit(lambda v, m, c: cst.multivariate_normal.logpdf(v, m, c))
    np.testing.assert_allclose(f(x, mu, cov), ss.multivariate_normal.logpdf(x, mu, cov), rtol=1e-13)
    np.testing.assert_allclose(f(x[0], mu, cov), ss.multivariate_normal.logpdf(x[0], mu, cov), rtol=1e-13)
    xb = x.reshape(2, 3, 4)
    np.testing.assert_allclose(f(xb, mu, cov), ss.multivariate_normal.logpdf(xb, mu, cov), rtol=1e-13)
    np.testing.assert_allclose(cjit.jit(lambda c: cst.multivariate_normal.pdf(x, mu, c))(cov),
                               ss.multivariate_normal.pdf(x, mu, cov), rtol=1e-12)
    g = cjit.grad(lambda c: cst.multivariate_normal.logpdf(x, mu, c).sum())(cov)
    inv = np.linalg.inv(cov)
    d = x - mu
    want = sum(-0.5 * (inv - inv @ np.outer(r, r) @ inv) for r in d)
    # only the lower triangle is read (as JAX's cholesky): compare the symmetric part
    np.testing.assert_allclose(np.tril(g + g.T - np.diag(np.diag(g))), np.tril(2 * want - np.diag(np.diag(want))),
                               rtol=1e-10, atol=1e-12)
    assert np.isnan(f(x, mu, -cov)).all()
    with pytest.raises(ValueError, match="4x4"):
        f(x, mu, cov[:3, :3])


def test_multivariate_normal_refuses_what_it_cannot_do():
    x, mu, cov = _mvn_case()
    with pytest.raises(ValueError, match="not positive definite"):
        cst.multivariate_normal.logpdf(x, mu, -cov)
    with pytest.raises(ValueError, match="dimensions"):
        cst.multivariate_normal.logpdf(x, mu[:3], cov[:3, :3])
    with pytest.raises(NotImplementedError, match="allow_singular"):
        cst.multivariate_normal.logpdf(x, mu, cov, allow_singular=True)


def test_gradients_of_norm_and_t():
    x = np.linspace(-4, 4, 17)
    g = cjit.grad(lambda v: cst.norm.logcdf(v).sum())(x)
    np.testing.assert_allclose(g, ss.norm.pdf(x) / ss.norm.cdf(x), rtol=1e-12)
    g = cjit.grad(lambda v: cst.t.logpdf(x, v).sum())(3.5)
    h = 1e-6
    fd = (ss.t.logpdf(x, 3.5 + h).sum() - ss.t.logpdf(x, 3.5 - h).sum()) / (2 * h)
    assert math.isclose(float(g), fd, rel_tol=1e-7)
