"""Which part of its input a Cholesky factorization reads, as JAX's:
``jnp.linalg.cholesky`` factors (x + x^H) / 2 (JAX's symmetrize_input=True),
``jax.scipy.linalg.cholesky`` reads one triangle as SciPy's does (the upper
one by default).  The two agree on Hermitian input; they differed from
cjit's on anything else (cjit read the lower triangle everywhere), and so
did the holomorphic gradient of the complex factor (docs'
complex-differentiation.md).  References: NumPy and SciPy.  Also: complex
numbers nested in lists (that page's ``jnp.array([[5., 2.+3j, 5j], ...])``)."""
import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings, strategies as st

import cjit
import cjit.numpy as cnp
import cjit.scipy.linalg as csl


def _herm(x):
    return (x + np.conj(np.swapaxes(x, -1, -2))) / 2


def _spd(rng, n, complex_):
    a = rng.standard_normal((n, n)) + (1j * rng.standard_normal((n, n)) if complex_ else 0)
    return a @ np.conj(a.T) + n * np.eye(n)


@pytest.mark.parametrize("complex_", [False, True])
def test_non_hermitian_input_is_symmetrized_as_jax(complex_):
    rng = np.random.default_rng(0)
    a = _spd(rng, 4, complex_)
    x = a + np.triu(rng.standard_normal((4, 4)), 1)   # the upper triangle disagrees
    np.testing.assert_allclose(cnp.linalg.cholesky(x), np.linalg.cholesky(_herm(x)), rtol=1e-12)
    np.testing.assert_allclose(cnp.linalg.cholesky(x, symmetrize_input=False),
                               np.linalg.cholesky(x), rtol=1e-12)   # NumPy reads the lower triangle
    np.testing.assert_allclose(csl.cholesky(x, lower=True), scipy.linalg.cholesky(x, lower=True),
                               rtol=1e-12)
    np.testing.assert_allclose(csl.cholesky(x), scipy.linalg.cholesky(x), rtol=1e-12)


def test_complex_holomorphic_gradient_is_hermitian_as_jax():
    # complex-differentiation.md's cell; JAX 0.10.2 prints (complex64) a
    # Hermitian gradient, where cjit gave twice its lower triangle
    with cjit.enable_x64(False):
        A = cnp.array([[5., 2. + 3j, 5j], [2. - 3j, 7., 1. + 7j], [-5j, 1. - 7j, 12.]])
        assert A.dtype == np.complex64

        def f(X):
            L = cnp.linalg.cholesky(X)
            return cnp.sum((L - cnp.sin(L)) ** 2)
        g = np.asarray(cjit.grad(f, holomorphic=True)(A))
    jax_says = np.array([[-0.75341904 + 0.j, -3.0509028 - 10.940545j, 5.9896846 + 3.5423026j],
                         [-3.0509028 + 10.940545j, -8.904491 + 0.j, -5.1351523 - 6.559373j],
                         [5.9896846 - 3.5423026j, -5.1351523 + 6.559373j, 0.01320427 + 0.j]])
    np.testing.assert_allclose(g, jax_says, rtol=2e-5, atol=2e-5)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 5), seed=st.integers(0, 2**32 - 1), complex_=st.booleans(),
       which=st.sampled_from(["numpy", "numpy-upper", "scipy-lower", "scipy-upper"]),
       noise=st.floats(0, 0.5))
def test_cholesky_reads_what_jax_reads(n, seed, complex_, which, noise):
    rng = np.random.default_rng(seed)
    a = _spd(rng, n, complex_)
    x = a + noise * rng.standard_normal((n, n))      # not Hermitian
    if which == "numpy":
        got, want = cnp.linalg.cholesky(x), np.linalg.cholesky(_herm(x))
    elif which == "numpy-upper":
        got, want = cnp.linalg.cholesky(x, upper=True), np.conj(np.linalg.cholesky(_herm(x)).T)
    elif which == "scipy-lower":
        got, want = csl.cholesky(x, lower=True), scipy.linalg.cholesky(x, lower=True)
    else:
        got, want = csl.cholesky(x), scipy.linalg.cholesky(x)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # the gradient of a function of jnp.linalg.cholesky's factor is Hermitian,
    # and is the derivative along Hermitian directions
    if which == "numpy":
        w = rng.standard_normal((n, n))

        def f(m):
            L = cnp.linalg.cholesky(m)
            return cnp.sum(cnp.real(L) * w) + cnp.sum(cnp.imag(L) ** 2)

        def f_np(m):
            L = np.linalg.cholesky(_herm(m))
            return np.sum(L.real * w) + np.sum(L.imag ** 2)
        if not complex_:
            g = np.asarray(cjit.grad(f)(x))
            np.testing.assert_allclose(g, g.T, rtol=1e-12, atol=1e-12)
            d = _herm(rng.standard_normal((n, n)))
            h = 1e-6
            fd = (f_np(x + h * d) - f_np(x - h * d)) / (2 * h)
            assert np.isclose(np.sum(g * d), fd, rtol=1e-5, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 3), cols=st.integers(1, 3), depth=st.integers(1, 3),
       x64=st.booleans(), data=st.data())
def test_nested_lists_with_complex_numbers(rows, cols, depth, x64, data):
    """jnp.array / asarray of nested lists anywhere holding a Python complex:
    complex128 with x64, complex64 without (JAX's), NumPy's values."""
    shape = (rows, cols, 2)[:depth]
    size = int(np.prod(shape))
    vals = data.draw(st.lists(st.one_of(st.floats(-5, 5), st.integers(-5, 5),
                                        st.complex_numbers(max_magnitude=5)),
                              min_size=size, max_size=size))
    where = data.draw(st.integers(0, size - 1))
    vals[where] = complex(vals[where]) + 1j
    nested = np.empty(size, dtype=object)
    nested[:] = vals
    nested = nested.reshape(shape).tolist()
    want = np.array(nested)
    with cjit.enable_x64(x64):
        for fn in (cnp.array, cnp.asarray):
            got = fn(nested)
            assert got.dtype == (np.complex128 if x64 else np.complex64)
            np.testing.assert_allclose(got, want.astype(got.dtype), rtol=1e-6 if not x64 else 0)
