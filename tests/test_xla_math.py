"""The two ops that exist to round as XLA's CPU backend rounds: fma (x * y + z
rounded once) and log_libc (the C library's log), and the erf/erfinv built
from them for cjit.random (python/cjit/_xla_math.py).  References: exact
rational arithmetic, Python's math module (the C library) and SciPy; JAX's
own bits when JAX is installed."""
import math
from fractions import Fraction

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp
from cjit import _xla_math

RNG = np.random.default_rng(20261203)


def _fma(x, y, z):
    return cnp._core._apply("fma", x, y, z)


def _round32(q):
    """The float32 nearest the rational q, ties to even (a correct rounding
    that does not go through float64)."""
    f = np.float32(float(q))
    below, above = np.nextafter(f, np.float32(-np.inf)), np.nextafter(f, np.float32(np.inf))
    best = min((abs(Fraction(float(c)) - q), int(np.array(c).view(np.uint32)) & 1, c) for c in (below, f, above))
    return best[2]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fma_rounds_once(dtype):
    n = 4000
    x, y = RNG.standard_normal(n).astype(dtype), RNG.standard_normal(n).astype(dtype)
    # z cancels most of the product, so the product's rounding shows in the result
    z = (-(x.astype(np.float64) * y.astype(np.float64))).astype(dtype) * dtype(1 + 1e-3)
    got = cjit.jit(_fma)(x, y, z)
    assert got.dtype == dtype
    exact = [Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)) for a, b, c in zip(x, y, z)]
    want = np.array([float(q) for q in exact]) if dtype == np.float64 else np.array([_round32(q) for q in exact])
    assert np.array_equal(got, want.astype(dtype))
    # two roundings differ from one on many of these points
    assert np.count_nonzero(x * y + z != got) > n // 10


def test_fma_where_the_product_alone_rounds_to_the_addend():
    x, y = np.float64(1 + 2.0 ** -30), np.float64(1 - 2.0 ** -30)      # x y = 1 - 2^-60 exactly
    assert x * y - 1.0 == 0.0
    assert cjit.jit(_fma)(x, y, np.float64(-1.0)) == -(2.0 ** -60)


def test_fma_broadcasts_promotes_and_refuses_bad_shapes():
    f = cjit.jit(lambda x, y: _fma(x, y, 1))
    out = f(np.ones((3, 1), np.float32), np.arange(4, dtype=np.float32))
    assert out.shape == (3, 4) and out.dtype == np.float32
    assert np.array_equal(out, np.broadcast_to(np.arange(4) + 1.0, (3, 4)))
    ints = cjit.jit(lambda x: _fma(x, x, x))(np.arange(3, dtype=np.int32))
    assert ints.dtype == np.float64 and np.array_equal(ints, [0.0, 2.0, 6.0])
    with pytest.raises(ValueError, match=r"fma.*\(2,\).*\(3,\)"):
        cjit.jit(lambda x, y: _fma(x, y, x))(np.ones(2), np.ones(3))


def test_fma_gradient():
    x, y, z = RNG.standard_normal((3, 5))
    g = cjit.grad(lambda x, y, z: cnp.sum(cnp.sin(_fma(x, y, z))), argnums=(0, 1, 2))(x, y, z)
    c = np.cos(x * y + z)
    for got, want in zip(g, (c * y, c * x, c)):
        np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log_libc_is_the_c_librarys_log(dtype):
    x = np.concatenate([RNG.uniform(1e-3, 4, 3000), np.geomspace(1e-300 if dtype == np.float64 else 1e-37,
                                                                     1e300 if dtype == np.float64 else 1e37, 500),
                        [1.0, 0.0, -1.0, np.inf, np.nan]]).astype(dtype)
    got = cjit.jit(lambda v: cnp._core._apply("log_libc", v))(x)
    assert got.dtype == dtype
    with np.errstate(all="ignore"):
        if dtype == np.float64:
            want = np.array([math.log(v) if v > 0 else (-np.inf if v == 0 else np.nan) for v in x.tolist()])
        else:   # logf: the float32 entry point of the same library
            import ctypes
            import ctypes.util
            logf = ctypes.CDLL(ctypes.util.find_library("m")).logf
            logf.restype, logf.argtypes = ctypes.c_float, [ctypes.c_float]
            want = np.array([logf(v) for v in x.tolist()], np.float32)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    assert same.all(), x[~same][:5]
    g = cjit.grad(lambda v: cnp.sum(cnp._core._apply("log_libc", v)))(x[:100].astype(np.float64))
    np.testing.assert_allclose(g, 1.0 / x[:100].astype(np.float64), rtol=1e-12)


@pytest.mark.parametrize("dtype, ulps", [(np.float32, 2), (np.float64, 16)])
def test_erfinv_and_erf_against_scipy(dtype, ulps):
    """XLA's erfinv is as accurate as its input's rounding allows, within a
    few ulp (float64 loses most, about 7, where its log1p changes formula
    at |x| = 0.644): the error is measured against the condition number
    |u erfinv'(u) / erfinv(u)|, which grows without bound as |u| -> 1."""
    special = pytest.importorskip("scipy.special")
    eps = np.finfo(dtype).eps
    u = np.concatenate([RNG.uniform(-1, 1, 20000), 1 - RNG.uniform(0, 1e-3, 2000),
                        [0.0, 0.5, -0.999999, 1.0, -1.0]]).astype(dtype)
    fn = _xla_math.erfinv32 if dtype == np.float32 else _xla_math.erfinv64
    got = np.asarray(cjit.jit(fn)(u)).astype(np.float64)
    y = special.erfinv(u.astype(np.float64))
    odd = ~np.isfinite(y) | (y == 0)
    assert np.array_equal(got[odd], y[odd])
    u, y, got = u[~odd], y[~odd], got[~odd]
    cond = np.abs(u) * np.sqrt(np.pi) / 2 * np.exp(y * y) / np.abs(y)
    assert np.all(np.abs(got - y) <= ulps * eps * np.abs(y) * (1 + cond))
    if dtype == np.float32:
        x = RNG.uniform(-5, 5, 20000).astype(np.float32)
        np.testing.assert_allclose(cjit.jit(_xla_math.erf32)(x), special.erf(x.astype(np.float64)),
                                   rtol=4 * eps, atol=4 * eps)


def test_erfinv32_has_xlas_bits_on_every_draw():
    """Every u a float32 normal draw passes to erfinv (2^23 values): the same
    bits as JAX's erf_inv."""
    jax = pytest.importorskip("jax")
    k = np.arange(2 ** 23, dtype=np.uint32)
    f = (k | np.uint32(0x3F800000)).view(np.float32) - np.float32(1)
    lo = np.nextafter(np.float32(-1), np.float32(0))
    u = np.maximum(lo, f * np.float32(2) + lo)
    want = np.asarray(jax.jit(jax.lax.erf_inv)(u))
    got = np.asarray(cjit.jit(_xla_math.erfinv32)(u))
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
