"""cjit.nn's smaller activations against their NumPy formulas (values and
finite-difference gradients) and cjit.nn.initializers against the variance
each promises (and JAX's values when JAX is installed)."""
import numpy as np
import pytest

import cjit
import cjit.nn as nn
import cjit.random as cr

X = np.linspace(-4.3, 4.4, 37)   # no kink (-3, -1, 1, 3) hit exactly
SOFTPLUS = np.logaddexp(X, 0)

ACTIVATIONS = {
    "hard_sigmoid": np.clip(X + 3, 0, 6) / 6,
    "hard_silu": X * np.clip(X + 3, 0, 6) / 6,
    "mish": X * np.tanh(SOFTPLUS),
    "squareplus": (X + np.sqrt(X * X + 4)) / 2,
    "sparse_plus": np.where(X <= -1, 0, np.where(X >= 1, X, (X + 1) ** 2 / 4)),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_values_and_gradients(name):
    f = getattr(nn, name)
    np.testing.assert_allclose(f(X), ACTIVATIONS[name], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(cjit.jit(f)(X.astype(np.float32)), ACTIVATIONS[name], rtol=2e-6,
                               atol=1e-6)
    g = cjit.grad(lambda v: f(v).sum())(X)
    eps = 1e-6
    fd = (f(X + eps) - f(X - eps)) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_aliases():
    assert nn.hard_swish is nn.hard_silu
    np.testing.assert_allclose(nn.normalize(X[None]),
                               nn.standardize(X[None]))


@pytest.mark.parametrize("name,scale,mode", [
    ("glorot_normal", 1.0, "fan_avg"), ("glorot_uniform", 1.0, "fan_avg"),
    ("he_normal", 2.0, "fan_in"), ("he_uniform", 2.0, "fan_in"),
    ("lecun_normal", 1.0, "fan_in"), ("lecun_uniform", 1.0, "fan_in")])
def test_variance_scaling_meets_its_variance(name, scale, mode):
    shape = (3, 3, 64, 96)   # a conv kernel: receptive field 9
    fan_in, fan_out = 9 * 64, 9 * 96
    n = {"fan_in": fan_in, "fan_avg": (fan_in + fan_out) / 2}[mode]
    w = getattr(nn.initializers, name)()(cr.PRNGKey(3), shape, np.float64)
    assert w.shape == shape and w.dtype == np.float64
    # the sample variance of 55,296 draws is within 3% of scale / n
    assert abs(w.var() / (scale / n) - 1) < 0.03, (w.var(), scale / n)
    assert abs(w.mean()) < 0.01 * np.sqrt(scale / n)
    if "uniform" in name:
        assert np.abs(w).max() <= np.sqrt(3 * scale / n)
    else:   # truncated at two standard deviations of the untruncated normal
        assert np.abs(w).max() <= 2 * np.sqrt(scale / n) / 0.87962566103423978


def test_simple_initializers_and_errors():
    k = cr.PRNGKey(0)
    assert np.array_equal(nn.initializers.zeros(k, (2, 3)), np.zeros((2, 3)))
    assert np.array_equal(nn.initializers.constant(1.5, np.float32)(k, (2,)), np.full(2, 1.5, np.float32))
    u = nn.initializers.uniform(0.5)(k, (1000,))
    assert u.min() >= 0 and u.max() < 0.5
    assert abs(nn.initializers.normal(2.0)(k, (20000,)).std() / 2.0 - 1) < 0.03
    with pytest.raises(ValueError, match="mode"):
        nn.initializers.variance_scaling(1.0, "fan_max", "normal")
    import cjit.nn.initializers as by_import
    assert by_import is nn.initializers


@pytest.mark.parametrize("name", ["glorot_normal", "glorot_uniform", "he_normal", "he_uniform",
                                  "lecun_normal", "lecun_uniform"])
def test_same_values_as_jax(name):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    try:
        want = np.asarray(getattr(jax.nn.initializers, name)()(jax.random.PRNGKey(5), (40, 30),
                                                               np.float64))
    finally:
        jax.config.update("jax_enable_x64", False)
    got = getattr(nn.initializers, name)()(cr.PRNGKey(5), (40, 30), np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
