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


# ---- NumPy's signatures ---------------------------------------------------------------

def test_helpers_take_d_and_axes_by_position():
    np.testing.assert_allclose(cnp.fft.fftfreq(7, 0.1), np.fft.fftfreq(7, 0.1), rtol=1e-15)
    np.testing.assert_allclose(cnp.fft.rfftfreq(7, 0.1), np.fft.rfftfreq(7, 0.1), rtol=1e-15)
    x = np.arange(15.0).reshape(3, 5)
    np.testing.assert_array_equal(cnp.fft.fftshift(x, 1), np.fft.fftshift(x, 1))
    np.testing.assert_array_equal(cnp.fft.ifftshift(x, (0,)), np.fft.ifftshift(x, (0,)))
    np.testing.assert_allclose(cjit.jit(lambda v: cnp.fft.fft(a=v, n=4))(x), np.fft.fft(a=x, n=4), rtol=1e-14,
                               atol=1e-13)


def test_every_fft_function_accepts_numpys_parameters_where_numpy_does():
    """For each function of numpy.fft that cjit.numpy.fft has: every NumPy
    parameter (but out= and device=) has the same name, the positional ones
    the same position, and calling with all of them by position and then all
    by keyword gives NumPy's answer."""
    import inspect
    P = inspect.Parameter
    x = np.linspace(-1, 1, 24).reshape(4, 6)
    args = {"a": x, "x": x, "n": 6, "d": 0.5, "axis": 0, "axes": (0, 1), "s": (4, 6), "norm": "ortho"}
    checked = 0
    for name in np.fft.__all__:
        if not hasattr(cnp.fft, name):
            continue
        ours, theirs = inspect.signature(getattr(cnp.fft, name)), inspect.signature(getattr(np.fft, name))
        names = [p.name for p in theirs.parameters.values() if p.name not in ("out", "device")]
        positional = [p.name for p in theirs.parameters.values()
                      if p.kind == P.POSITIONAL_OR_KEYWORD and p.name in names]
        mine = list(ours.parameters.values())
        assert [p.name for p in mine[:len(positional)]] == positional, (name, ours, theirs)
        assert all(p.kind == P.POSITIONAL_OR_KEYWORD for p in mine[:len(positional)]), (name, ours)
        if name in ("fftfreq", "rfftfreq"):
            call = {"n": 8, "d": 0.25}
        elif name in ("hfft", "irfft"):
            call = {"a": x + 0j, "n": 6, "axis": 0, "norm": "ortho"}
        else:
            call = {k: args[k] for k in names}
        want = getattr(np.fft, name)(*call.values())
        for got in (getattr(cnp.fft, name)(*call.values()), getattr(cnp.fft, name)(**call)):
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12, err_msg=name)
        checked += 1
    assert checked == 18
