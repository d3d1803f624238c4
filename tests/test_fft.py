"""cjit.numpy.fft: the real-valued helpers against numpy.fft, traced and
eager (the transforms are tested in test_complex_fft.py)."""
import numpy as np
import pytest

import cjit
import cjit.numpy as cnp


@pytest.mark.parametrize("n", [1, 2, 5, 8, 13])
@pytest.mark.parametrize("d", [1.0, 0.25])
def test_frequencies_match_numpy(n, d):
    np.testing.assert_allclose(cnp.fft.fftfreq(n, d=d), np.fft.fftfreq(n, d=d), rtol=1e-15)
    np.testing.assert_allclose(cnp.fft.rfftfreq(n, d=d), np.fft.rfftfreq(n, d=d), rtol=1e-15)
    got = cnp.fft.fftfreq(n, d=d, dtype=cnp.float32)
    assert got.dtype == np.float32
    # under jit the frequencies are a constant of the trace
    f = cjit.jit(lambda x: x * cnp.fft.fftfreq(n, d=d))
    np.testing.assert_allclose(f(np.ones(n)), np.fft.fftfreq(n, d=d), rtol=1e-15)


@pytest.mark.parametrize("shape", [(7,), (4, 5), (3, 1, 6)])
@pytest.mark.parametrize("axes", [None, 0, -1, (0, -1)])
def test_shifts_match_numpy_and_invert(shape, axes):
    x = np.random.default_rng(0).standard_normal(shape)
    for mine, ref in ((cnp.fft.fftshift, np.fft.fftshift), (cnp.fft.ifftshift, np.fft.ifftshift)):
        assert np.array_equal(mine(x, axes=axes), ref(x, axes=axes))
        assert np.array_equal(cjit.jit(lambda v: mine(v, axes=axes))(x), ref(x, axes=axes))
    back = cjit.jit(lambda v: cnp.fft.ifftshift(cnp.fft.fftshift(v, axes=axes), axes=axes))(x)
    assert np.array_equal(back, x)


def test_shift_gradient_is_the_inverse_shift():
    w = np.arange(5.0)
    g = cjit.grad(lambda x: (cnp.fft.ifftshift(x) * w).sum())(np.ones(5))
    np.testing.assert_array_equal(g, np.fft.fftshift(w))


def test_bad_frequency_arguments():
    with pytest.raises(ValueError, match="fftfreq: n must be a positive integer"):
        cnp.fft.fftfreq(0)
    with pytest.raises(ValueError, match="rfftfreq: dtype must be a real floating dtype"):
        cnp.fft.rfftfreq(4, dtype=cnp.int32)
