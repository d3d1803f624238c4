"""Sorting on the argsort op (a stable merge sort per row, csrc/sort_rt.c):
sort, argsort, searchsorted, quantile/percentile/median, lax.sort, top_k
and random.permutation inside jit, against NumPy (and JAX's bits)."""
import numpy as np
import pytest

import cjit
import cjit.numpy as cnp
from cjit import lax
from cjit import random as cr

RNG = np.random.default_rng(11)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32, np.int16, np.int8, np.uint32,
                                   np.uint16, np.uint8, np.bool_])
@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_sort_and_argsort_are_numpy_stable(dtype, axis):
    x = (RNG.standard_normal((6, 37)) * 4).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        x[1, 3] = x[4, 0] = np.nan
        x[2, :6] = 1.5   # ties keep their order
    got_i = cjit.jit(lambda x: cnp.argsort(x, axis=axis))(x)
    np.testing.assert_array_equal(got_i, np.argsort(x, axis=axis, kind="stable"))
    got = cjit.jit(lambda x: cnp.sort(x, axis=axis))(x)
    np.testing.assert_array_equal(got, np.sort(x, axis=axis, kind="stable"))
    if dtype != np.bool_:
        got_d = cjit.jit(lambda x: cnp.argsort(x, axis=-1, descending=True))(x)
        np.testing.assert_array_equal(got_d, np.argsort(-x.astype(np.float64), axis=-1, kind="stable"))


def test_long_rows_run_across_threads_and_sort_has_a_gradient():
    x = RNG.standard_normal((3000, 500))
    np.testing.assert_array_equal(cjit.jit(lambda x: cnp.sort(x * 2.0))(x), np.sort(x * 2.0))
    z = RNG.standard_normal((5, 8))
    w = np.arange(8.0)
    g = cjit.grad(lambda z: (cnp.sort(z, axis=1) * w).sum())(z)
    want = np.zeros_like(z)
    for r, o in enumerate(np.argsort(z, axis=1)):
        want[r, o] = w
    np.testing.assert_allclose(g, want)
    # under vmap, rows of each example
    np.testing.assert_array_equal(cjit.vmap(cnp.sort)(z), np.sort(z, axis=1))


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_quantiles_are_numpy(method, axis):
    z = RNG.standard_normal((6, 9))
    for q in (0.5, 0.0, 1.0, [0.1, 0.37, 0.9]):
        got = cjit.jit(lambda z: cnp.quantile(z, q, axis=axis, method=method, keepdims=True))(z)
        np.testing.assert_allclose(got, np.quantile(z, q, axis=axis, method=method, keepdims=True), rtol=1e-13)
    np.testing.assert_allclose(cjit.jit(lambda z: cnp.percentile(z, [25, 80], axis=axis, method=method))(z),
                               np.percentile(z, [25, 80], axis=axis, method=method), rtol=1e-13)


def test_median_nan_and_gradient():
    z = RNG.standard_normal((4, 7))
    np.testing.assert_allclose(cjit.jit(lambda z: cnp.median(z, axis=0))(z), np.median(z, axis=0))
    z2 = z.copy()
    z2[2, 3] = np.nan
    np.testing.assert_array_equal(cjit.jit(lambda z: cnp.median(z, axis=1))(z2), np.median(z2, axis=1))
    g = cjit.grad(lambda z: cnp.median(z[:, :6], axis=1).sum())(z)   # even count: the two middle ones
    want = np.zeros_like(z)
    for r, o in enumerate(np.argsort(z[:, :6], axis=1)):
        want[r, o[2]] = want[r, o[3]] = 0.5
    np.testing.assert_allclose(g, want)


def test_searchsorted_is_numpy():
    a = np.sort(RNG.standard_normal(30))
    a[-2:] = np.nan
    v = np.concatenate([RNG.standard_normal(9), [a[4], np.nan, -np.inf, np.inf]])
    for side in ("left", "right"):
        np.testing.assert_array_equal(cjit.jit(lambda a, v: cnp.searchsorted(a, v, side=side))(a, v),
                                      np.searchsorted(a, v, side=side))
    p = RNG.permutation(30)
    b = a[np.argsort(p)]
    sorter = np.argsort(b, kind="stable")
    np.testing.assert_array_equal(cjit.jit(lambda b, v, s: cnp.searchsorted(b, v, sorter=s))(b, v, sorter),
                                  np.searchsorted(b, v, sorter=sorter))


def test_lax_sort_top_k_and_permutation():
    x = RNG.standard_normal((4, 10))
    v, i = cjit.jit(lambda x: lax.top_k(x, 3))(x)
    np.testing.assert_array_equal(i, np.argsort(-x, axis=1, kind="stable")[:, :3])
    np.testing.assert_array_equal(v, np.take_along_axis(x, i, axis=1))
    assert i.dtype == np.int32
    k1, k2, vals = np.array([3, 1, 3, 1]), np.array([0.0, 5.0, -1.0, 2.0]), np.arange(4.0)
    got = cjit.jit(lambda a, b, c: lax.sort((a, b, c), num_keys=2))(k1, k2, vals)
    order = np.lexsort((k2, k1))
    for g, w in zip(got, (k1, k2, vals)):
        np.testing.assert_array_equal(g, w[order])
    key = cr.key(0)
    inside = cjit.jit(lambda k: cr.permutation(k, 10))(key)
    np.testing.assert_array_equal(inside, cr.permutation(key, 10))
    assert sorted(inside.tolist()) == list(range(10))
    try:
        import jax
    except ImportError:
        return
    np.testing.assert_array_equal(inside, np.asarray(jax.random.permutation(jax.random.key(0), 10)))
