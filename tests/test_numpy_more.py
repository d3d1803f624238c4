"""NumPy names built by composition (nan-reductions, average, isclose and
friends, polynomials and 1-D convolutions, interp, digitize, select,
piecewise, frexp/ldexp/nextafter, vectorize, apply_along_axis, r_/c_,
rot90) against NumPy, traced and eager, with gradients where they have
them."""
import warnings

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp

RNG = np.random.default_rng(7)


def with_nans(shape, frac=0.3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    x[rng.random(shape) < frac] = np.nan
    return x


def both(f, *args):
    """f eagerly and under jit; both results."""
    return f(*args), cjit.jit(f)(*args)


@pytest.mark.parametrize("name", ["nansum", "nanprod", "nanmean", "nanvar", "nanstd", "nanmax",
                                  "nanmin", "nanargmax", "nanargmin"])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_nan_reductions(name, axis):
    if name.startswith("nanarg") and isinstance(axis, tuple):
        return
    x = with_nans((5, 4))
    if not name.startswith("nanarg"):
        x[:, 2] = np.nan   # all-nan slices: nan results (NumPy warns; its nanargmax raises)
        x[1] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = getattr(np, name)(x, axis=axis)
    for got in both(lambda v: getattr(cnp, name)(v, axis=axis), x):
        np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)
        assert np.shape(got) == np.shape(want)


def test_nan_reductions_on_ints_and_keepdims():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    for name in ("nansum", "nanmean", "nanmax", "nanvar"):
        got = getattr(cnp, name)(a, axis=1, keepdims=True)
        want = getattr(np, name)(a, axis=1, keepdims=True)
        np.testing.assert_allclose(got, want, rtol=1e-12)
        assert got.shape == want.shape


def test_nanmean_gradient_ignores_nans():
    x = with_nans((6,), seed=3)
    ok = ~np.isnan(x)
    g = cjit.grad(lambda v: cnp.nanmean(v) * 3.0)(x)
    np.testing.assert_allclose(g[ok], 3.0 / ok.sum(), rtol=1e-12)
    assert np.all(g[~ok] == 0)
    # through a product the nans come back, as in JAX (0 * d(nan) is nan)
    g = cjit.grad(lambda v: cnp.nanmean(v * v))(x)
    np.testing.assert_allclose(g[ok], 2 * x[ok] / ok.sum(), rtol=1e-12)


@pytest.mark.parametrize("weights", [None, "full", "axis"])
def test_average(weights):
    a = RNG.standard_normal((4, 5))
    w = {None: None, "full": RNG.random((4, 5)), "axis": RNG.random(5)}[weights]
    axis = 1 if weights == "axis" else 0
    want, wsum = np.average(a, axis=axis, weights=w, returned=True)
    for got in both(lambda v: cnp.average(v, axis=axis, weights=w, returned=True), a):
        np.testing.assert_allclose(got[0], want, rtol=1e-12)
        np.testing.assert_allclose(got[1], wsum, rtol=1e-12)


def test_isclose_allclose_array_equal():
    a = np.array([1.0, np.nan, np.inf, -np.inf, 1e-9, 2.0])
    b = np.array([1.0 + 1e-9, np.nan, np.inf, np.inf, 0.0, 2.1])
    for eq in (False, True):
        for got in both(lambda p, q: cnp.isclose(p, q, equal_nan=eq), a, b):
            assert np.array_equal(got, np.isclose(a, b, equal_nan=eq))
        assert bool(cnp.allclose(a[:1], b[:1])) and not bool(cnp.allclose(a, b, equal_nan=eq))
    assert bool(cnp.array_equal(a, a, equal_nan=True)) and not bool(cnp.array_equal(a, a))
    assert not bool(cnp.array_equal(a, a[:3]))
    assert bool(cnp.array_equiv(np.ones((2, 3)), np.ones(3)))
    assert not bool(cnp.array_equiv(np.ones((2, 3)), np.ones(2)))
    assert bool(cjit.jit(lambda p: cnp.array_equal(p, p * 1))(np.arange(4)))


def test_polyval_vander_and_gradient():
    p = np.array([2.0, -1.0, 0.5, 3.0])
    x = RNG.standard_normal(7)
    for got in both(cnp.polyval, p, x):
        np.testing.assert_allclose(got, np.polyval(p, x), rtol=1e-12)
    for inc in (False, True):
        np.testing.assert_allclose(cnp.vander(x, 4, increasing=inc), np.vander(x, 4, increasing=inc),
                                   rtol=1e-12)
    g = cjit.grad(lambda v: cnp.polyval(p, v).sum())(x)
    np.testing.assert_allclose(g, np.polyval(np.polyder(p), x), rtol=1e-12)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("n,m", [(7, 3), (3, 7), (5, 5), (6, 1), (4, 2)])
def test_convolve_correlate(mode, n, m):
    a, v = RNG.standard_normal(n), RNG.standard_normal(m)
    for got in both(lambda p, q: cnp.convolve(p, q, mode), a, v):
        np.testing.assert_allclose(got, np.convolve(a, v, mode), rtol=1e-12, atol=1e-14)
    for got in both(lambda p, q: cnp.correlate(p, q, mode), a, v):
        np.testing.assert_allclose(got, np.correlate(a, v, mode), rtol=1e-12, atol=1e-14)
    # the gradient of <w, conv(a, v)> with respect to a is a correlation
    w = RNG.standard_normal(np.convolve(a, v, mode).shape)
    g = cjit.grad(lambda p: (cnp.convolve(p, v, mode) * w).sum())(a)
    eps = 1e-6
    fd = np.array([((np.convolve(a + eps * e, v, mode) - np.convolve(a - eps * e, v, mode)) * w).sum()
                   / (2 * eps) for e in np.eye(n)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_interp_and_digitize():
    xp = np.array([0.0, 1.0, 1.5, 4.0])
    fp = np.array([1.0, 3.0, -1.0, 2.0])
    x = np.array([-1.0, 0.0, 0.3, 1.0, 1.2, 1.5, 3.9, 4.0, 5.0])
    for got in both(lambda v: cnp.interp(v, xp, fp), x):
        np.testing.assert_allclose(got, np.interp(x, xp, fp), rtol=1e-12)
    np.testing.assert_allclose(cnp.interp(x, xp, fp, left=-9, right=9),
                               np.interp(x, xp, fp, left=-9, right=9), rtol=1e-12)
    for bins in (xp, xp[::-1]):
        for right in (False, True):
            for got in both(lambda v: cnp.digitize(v, bins, right=right), x):
                assert np.array_equal(got, np.digitize(x, bins, right=right)), (bins, right)


def test_select_and_piecewise():
    x = np.linspace(-2, 2, 9)
    conds = [x < -1, x > 1]
    want = np.select(conds, [x * 2, x ** 2], default=-5.0)
    for got in both(lambda v: cnp.select([v < -1, v > 1], [v * 2, v ** 2], default=-5.0), x):
        np.testing.assert_allclose(got, want)
    fl = [lambda v: -v, lambda v: v * 10, 7.0]
    want = np.piecewise(x, conds, fl)
    for got in both(lambda v: cnp.piecewise(v, [v < -1, v > 1], fl), x):
        np.testing.assert_allclose(got, want)
    with pytest.raises(ValueError, match="as many"):
        cnp.select([x < 0], [x, x])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_frexp_ldexp_nextafter(dtype):
    tiny = np.finfo(dtype).tiny
    x = np.array([0.0, -0.0, 1.0, -3.5, 1e-3, 123456.0, np.inf, -np.inf, np.nan, tiny / 8,
                  -tiny * 3], dtype)
    m, e = cnp.frexp(x)
    wm, we = np.frexp(x)
    np.testing.assert_array_equal(m, wm)
    np.testing.assert_array_equal(e[np.isfinite(x)], we[np.isfinite(x)])
    ints = np.array([0, 3, -2, 10, -1, 5, 1, 1, 1, 2, 4], np.int32)
    np.testing.assert_array_equal(cnp.ldexp(x, ints), np.ldexp(x, ints))
    to = np.array([1, -1, 2, 0, 0, np.inf, 0, 0, 0, 1, 0], dtype)
    np.testing.assert_array_equal(cjit.jit(cnp.nextafter)(x, to), np.nextafter(x, to))


def test_vectorize_and_apply_along_axis():
    def scalar_fn(a, b, k):
        return cnp.where(a > b, a * k, b - k)

    vf = cnp.vectorize(scalar_fn, excluded={2})
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal(4)
    want = np.where(a > b, a * 2.0, b - 2.0)
    np.testing.assert_allclose(vf(a, b, 2.0), want)
    np.testing.assert_allclose(cjit.jit(lambda p, q: vf(p, q, 2.0))(a, b), want)
    m = RNG.standard_normal((3, 5, 2))
    for axis in (0, 1, 2):
        got = cnp.apply_along_axis(lambda r: (r * r).sum(), axis, m)
        np.testing.assert_allclose(got, np.apply_along_axis(lambda r: (r * r).sum(), axis, m))
        got = cnp.apply_along_axis(lambda r: cnp.stack([r.min(), r.max()]), axis, m)
        np.testing.assert_allclose(got, np.apply_along_axis(lambda r: np.stack([r.min(), r.max()]),
                                                            axis, m))


def test_r_c_and_rot90():
    a, b = np.arange(3.0), np.ones(2)
    np.testing.assert_array_equal(cnp.r_[a, 0:4, b, 7], np.r_[a, 0:4, b, 7])
    np.testing.assert_allclose(cnp.r_[0:1:5j], np.r_[0:1:5j])
    np.testing.assert_array_equal(cnp.c_[a, a * 2], np.c_[a, a * 2])
    got = cjit.jit(lambda v: cnp.r_[v, 0:2, v * 2])(a)
    np.testing.assert_array_equal(got, np.r_[a, 0:2, a * 2])
    m = np.arange(24.0).reshape(2, 3, 4)
    for k in range(-1, 5):
        for axes in ((0, 1), (1, 2), (2, 0)):
            for got in both(lambda v: cnp.rot90(v, k, axes), m):
                np.testing.assert_array_equal(got, np.rot90(m, k, axes))
