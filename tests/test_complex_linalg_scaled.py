"""Complex qr, det and slogdet of matrices whose entries are far from 1
(their columns scaled by powers of two): no square of an entry may overflow
or underflow on the way.  Scaling column j by 2**k_j leaves Q as it is,
scales R's column j by 2**k_j and det by 2**sum(k_j): checked against
NumPy on the unscaled matrix (powers of two scale exactly)."""
import math

import numpy as np
import pytest

import cjit.numpy as cnp

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, note, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _crandn(rng, m, n):
    return rng.standard_normal((m, n)) + 1j * rng.standard_normal((m, n))


def _close(got, want, rtol):
    got, want = np.asarray(got), np.asarray(want)
    assert np.all(np.isfinite(got)), got
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())


@pytest.mark.parametrize("k", [-600, -530, 515, 600])
def test_qr_det_slogdet_of_huge_and_tiny_entries(k):
    """Entries near 2**600 (1e180) or 2**-600: were nan (|x|^2 overflowed or
    underflowed in the norms, pivots and divisions)."""
    a = _crandn(np.random.default_rng(0), 3, 3)
    s = 2.0 ** k
    q, r = cnp.linalg.qr(a * s)
    nq, nr = np.linalg.qr(a)
    _close(q, nq, 1e-12)
    _close(np.asarray(r) / s, nr, 1e-12)
    sign, logabs = cnp.linalg.slogdet(a * s)
    want = np.linalg.slogdet(a)
    _close(sign, want.sign, 1e-12)
    assert math.isclose(float(logabs), want.logabsdet + 3 * k * math.log(2), rel_tol=1e-13)
    if abs(3 * k) < 1000:
        _close(np.asarray(cnp.linalg.det(a * s)) / 2.0 ** (3 * k), np.linalg.det(a), 1e-12)
    s2 = 2.0 ** (k // 3)    # det itself in range
    _close(np.asarray(cnp.linalg.det(a * s2)) / 2.0 ** (3 * (k // 3)), np.linalg.det(a), 1e-12)


# 40 examples per run: one of qr / det / slogdet each
@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(data=st.data(), which=st.sampled_from(["qr", "det", "slogdet"]), m=st.integers(1, 4),
       n=st.integers(1, 4), seed=st.integers(0, 2 ** 16))
def test_column_scaled_complex_factorizations(data, which, m, n, seed):
    if which != "qr":
        m = n
    # one scale for the whole matrix, or one per column
    spread = data.draw(st.booleans())
    lim = 960 if which != "det" else 1000 // n - 2
    if spread:
        ks = data.draw(st.lists(st.integers(-lim, lim), min_size=n, max_size=n))
        if which == "det":
            ks = [k // n for k in ks]
    else:
        ks = [data.draw(st.integers(-lim, lim))] * n
    note(f"{which} {m}x{n} ks={ks}")
    a = _crandn(np.random.default_rng(seed), m, n)
    scale = np.array([2.0 ** k for k in ks])
    b = a * scale[None, :]
    if which == "qr":
        q, r = cnp.linalg.qr(b)
        nq, nr = np.linalg.qr(a)
        _close(q, nq, 1e-10)
        _close(np.asarray(r) / scale[None, :], nr, 1e-10)
    elif which == "det":
        got = np.asarray(cnp.linalg.det(b)) / 2.0 ** sum(ks)
        _close(got, np.linalg.det(a), 1e-10)
    else:
        sign, logabs = cnp.linalg.slogdet(b)
        want = np.linalg.slogdet(a)
        _close(sign, want.sign, 1e-10)
        assert math.isclose(float(logabs), want.logabsdet + sum(ks) * math.log(2), rel_tol=1e-12,
                            abs_tol=1e-10)
