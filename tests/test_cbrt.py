"""cbrt, an elementwise unary primitive (csrc/ops_unary.def, cmath.c's
cj_math_cbrt): NumPy's cbrt and JAX's jnp.cbrt / lax.cbrt.  Real for
negative inputs, exact for perfect cubes (subnormal ones too), within an ulp
of NumPy everywhere, with the gradient 1 / (3 cbrt(x)^2)."""
from fractions import Fraction

import numpy as np
import pytest

import cjit
import cjit.lax as lax
import cjit.numpy as cnp
from cjit import _cjit

from conftest import assert_close

CBRT = cjit.jit(cnp.cbrt)


def test_cbrt_is_a_primitive_of_the_op_table():
    rec = [r for r in _cjit.op_table() if r["name"] == "cbrt"]
    assert rec and rec[0]["kind"] == "unary" and rec[0]["numpy"] == "cbrt" and rec[0]["lax"] == "cbrt"
    text = CBRT.lower(np.ones(3)).as_text()
    assert "cbrt(" in text and "pow(" not in text, text
    assert lax.cbrt is cnp.cbrt and "cbrt" in cnp.__all__ and "cbrt" in lax.__all__


@pytest.mark.parametrize("dtype, lo, hi", [("float64", -358, 341), ("float32", -49, 42)])
def test_perfect_cubes_are_exact(dtype, lo, hi):
    """k^3 for every integer k with an exact cube, and 2^(3j) down to the
    smallest subnormal cube, both signs."""
    ft = np.dtype(dtype).type
    k = np.arange(1, 1001 if dtype == "float64" else 201, dtype=dtype)
    j = np.arange(lo, hi + 1)
    roots = np.concatenate([k, np.ldexp(ft(1), j), k * ft(0.125)]).astype(dtype)
    cubes = roots * roots * roots
    r64 = roots.astype(np.float64)
    assert np.array_equal(cubes.astype(np.float64), r64 * r64 * r64)     # every cube is exact in the dtype
    for sign in (1, -1):
        got = np.asarray(CBRT(sign * cubes))
        assert got.dtype == dtype
        bad = np.flatnonzero(got != sign * roots)
        assert bad.size == 0, f"cbrt({sign * cubes[bad[:4]]}) = {got[bad[:4]]}, want {sign * roots[bad[:4]]}"


def test_special_values_and_signs():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -8.0, -1e-310, 1e308], np.float64)
    got = np.asarray(CBRT(x))
    want = np.cbrt(x)
    assert np.array_equal(np.signbit(got), np.signbit(want)) and np.array_equal(np.isnan(got), np.isnan(want))
    assert_close(got, want, rtol=2.3e-16, atol=0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rounded_to_half_an_ulp(dtype):
    """Log-uniform magnitudes over the whole range, subnormals included,
    checked in exact rational arithmetic (no libm: NumPy's float32 cbrt is
    off by up to 2 ulps, cbrt(27) = 2.9999998, glibc's double one by 3):
    y is within 0.501 ulp of the cube root of x when (y - d)^3 <= x <=
    (y + d)^3 for d = 0.501 ulp of y."""
    rng = np.random.default_rng(7)
    fi = np.finfo(dtype)
    n = 4000
    e = rng.uniform(np.log2(float(fi.smallest_subnormal)), np.log2(float(fi.max)), n)
    x = np.concatenate([np.exp2(e), rng.uniform(0, 10, n)]) * rng.choice([-1.0, 1.0], 2 * n)
    x = x.astype(dtype)
    got = np.asarray(CBRT(x))
    for xi, yi in zip(x.tolist(), got.astype(dtype).tolist()):
        a, y = abs(Fraction(xi)), abs(Fraction(yi))
        d = Fraction(float(np.spacing(np.abs(np.array(yi, dtype))))) * Fraction(501, 1000)
        assert (y - d) ** 3 <= a <= (y + d) ** 3 and (yi < 0) == (xi < 0), (xi, yi)


def test_integers_compute_in_float():
    x = np.array([-27, 0, 8, 1000], np.int32)
    got = np.asarray(CBRT(x))
    assert got.dtype == np.float64 and np.array_equal(got, [-3.0, 0.0, 2.0, 10.0])


def test_gradient_is_one_over_three_cbrt_squared():
    x = np.array([8.0, -27.0, 0.001, 5.0, -1e6])
    c = np.cbrt(x)
    want = 1.0 / (3.0 * c * c)
    g = np.asarray(cjit.jit(cjit.vmap(cjit.grad(cnp.cbrt)))(x))
    t = np.asarray(cjit.jit(lambda x: cjit.jvp(cnp.cbrt, (x,), (cnp.ones_like(x),))[1])(x))
    assert_close(g, want, rtol=1e-15, atol=0)
    assert np.array_equal(g, t)
    assert g[0] == 1.0 / 12.0 and g[1] == 1.0 / 27.0
    # second derivative: -2 / (9 x cbrt(x)^2), through the record's derivative expression
    h = np.asarray(cjit.jit(cjit.vmap(cjit.grad(cjit.grad(cnp.cbrt))))(x))
    assert_close(h, -2.0 / (9.0 * x * c * c), rtol=1e-14, atol=0)
