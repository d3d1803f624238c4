"""cjit.numpy.fft's transforms against numpy.fft: every length class the
implementation distinguishes (the DFT matrix, the four-step split, Bluestein
for large primes), both complex dtypes, norms, padding and cutting, several
axes, and gradients against finite differences."""
import numpy as np
import pytest

import cjit
import cjit.numpy as cnp

RNG = np.random.default_rng(7)


def crandn(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def close(got, want, dtype):
    scale = max(1.0, float(np.abs(want).max()))
    tol = 2e-5 if np.dtype(dtype) in (np.complex64, np.float32) else 1e-12
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape
    err = float(np.abs(got - want).max()) / scale
    assert err < tol, err


# 1 and 64: the DFT matrix; 65, 96, 1000, 4096: four-step splits; 67, 251:
# primes done directly; 1009: a prime through Bluestein's chirp
@pytest.mark.parametrize("n", [1, 2, 7, 64, 65, 67, 96, 251, 1000, 1009, 4096])
def test_fft_and_ifft_match_numpy(n):
    x = crandn(3, n)
    close(cnp.fft.fft(x), np.fft.fft(x), x.dtype)
    close(cnp.fft.ifft(x), np.fft.ifft(x), x.dtype)
    close(cjit.jit(lambda v: cnp.fft.ifft(cnp.fft.fft(v)))(x), x, x.dtype)


@pytest.mark.parametrize("dtype,want", [(np.complex64, np.complex64), (np.complex128, np.complex128),
                                        (np.float32, np.complex64), (np.float64, np.complex128),
                                        (np.int32, np.complex128)])
def test_result_dtypes(dtype, want):
    x = (RNG.standard_normal(12) * 4).astype(dtype)
    got = cnp.fft.fft(x)
    assert got.dtype == want
    close(got, np.fft.fft(x).astype(want), want)


@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
@pytest.mark.parametrize("n", [None, 5, 20])
def test_norms_lengths_and_axes(norm, n):
    x = crandn(6, 9, 4)
    for axis in (0, 1, -1):
        close(cnp.fft.fft(x, n=n, axis=axis, norm=norm), np.fft.fft(x, n=n, axis=axis, norm=norm),
              x.dtype)
        close(cnp.fft.ifft(x, n=n, axis=axis, norm=norm),
              np.fft.ifft(x, n=n, axis=axis, norm=norm), x.dtype)


def test_float32_stays_single_precision_for_every_norm():
    x = crandn(4, 8, dtype=np.complex64)
    for norm in (None, "ortho", "forward"):
        for fn in ("fft", "ifft"):
            got = getattr(cnp.fft, fn)(x, norm=norm)
            close(got, getattr(np.fft, fn)(x, norm=norm).astype(np.complex64), np.complex64)


def test_real_transforms_match_numpy():
    x = RNG.standard_normal((5, 30))
    close(cnp.fft.rfft(x), np.fft.rfft(x), np.complex128)
    close(cnp.fft.rfft(x, n=17, axis=0), np.fft.rfft(x, n=17, axis=0), np.complex128)
    h = np.fft.rfft(x)
    for n in (None, 58, 59, 10):
        close(cnp.fft.irfft(h, n=n), np.fft.irfft(h, n=n), np.float64)
    close(cnp.fft.hfft(h[0], 30), np.fft.hfft(h[0], 30), np.float64)
    close(cnp.fft.ihfft(x[0]), np.fft.ihfft(x[0]), np.complex128)


def test_n_dimensional_transforms_match_numpy():
    x = crandn(4, 6, 10)
    r = x.real.copy()
    close(cnp.fft.fftn(x), np.fft.fftn(x), x.dtype)
    close(cnp.fft.ifftn(x, axes=(0, 2)), np.fft.ifftn(x, axes=(0, 2)), x.dtype)
    close(cnp.fft.fft2(x), np.fft.fft2(x), x.dtype)
    close(cnp.fft.fftn(x, s=(3, 12), axes=(0, 1)), np.fft.fftn(x, s=(3, 12), axes=(0, 1)), x.dtype)
    close(cnp.fft.rfftn(r), np.fft.rfftn(r), np.complex128)
    close(cnp.fft.irfftn(np.fft.rfftn(r), s=r.shape), r, np.float64)
    close(cnp.fft.rfft2(r), np.fft.rfft2(r), np.complex128)
    close(cnp.fft.irfft2(np.fft.rfft2(r)), np.fft.irfft2(np.fft.rfft2(r)), np.float64)


def test_transform_of_a_traced_real_signal_fuses_into_a_jitted_loss():
    t = np.linspace(0, 1, 128, endpoint=False)
    sig = np.sin(2 * np.pi * 5 * t) + 0.5 * np.cos(2 * np.pi * 12 * t)

    def power(a):
        spec = cnp.fft.rfft(a * sig)
        return (cnp.abs(spec) ** 2).sum()

    a = np.float64(1.5)
    want = (np.abs(np.fft.rfft(a * sig)) ** 2).sum()
    np.testing.assert_allclose(cjit.jit(power)(a), want, rtol=1e-12)
    g = cjit.grad(power)(a)
    np.testing.assert_allclose(g, 2 * want / a, rtol=1e-10)


@pytest.mark.parametrize("n", [8, 65, 1009])
def test_gradient_through_fft_matches_finite_differences(n):
    x = RNG.standard_normal(n)
    w = RNG.standard_normal(n // 2 + 1)

    def loss(v):
        return (cnp.abs(cnp.fft.rfft(v)) * w).sum()

    g = cjit.jit(cjit.grad(loss))(x)
    eps = 1e-6
    for i in RNG.choice(n, size=min(n, 6), replace=False):
        e = np.zeros(n)
        e[i] = eps
        fd = (loss(x + e) - loss(x - e)) / (2 * eps)
        np.testing.assert_allclose(g[i], fd, rtol=1e-5, atol=1e-7)


def test_gradient_with_respect_to_a_complex_input_is_jax_convention():
    # f(z) = sum |fft(z)|^2 = n sum |z|^2 (Parseval): JAX's gradient is the
    # conjugate of the real pair's, 2 n conj(z)
    z = crandn(16)
    g = cjit.grad(lambda v: (cnp.abs(cnp.fft.fft(v)) ** 2).sum())(z)
    np.testing.assert_allclose(g, 2 * 16 * np.conj(z), rtol=1e-10)


def test_bad_arguments():
    with pytest.raises(ValueError, match="fft.fft: invalid number of points 0"):
        cnp.fft.fft(np.ones(4), n=0)
    with pytest.raises(ValueError, match="fft.fft: norm must be"):
        cnp.fft.fft(np.ones(4), norm="sideways")
    with pytest.raises(ValueError, match="axis 3 is out of range"):
        cnp.fft.fft(np.ones((2, 2)), axis=3)
    with pytest.raises(TypeError, match="fft.rfft: the input must be real"):
        cnp.fft.rfft(np.ones(4, np.complex64))
