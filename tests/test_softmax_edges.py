"""softmax, log_softmax and logsumexp at infinities and nans, against
SciPy and the rule JAX follows: a row that holds nan or +inf has a nan
softmax and log_softmax everywhere (x - max is nan where x is the inf and
the row's sum is nan), a row of -inf only has nan ones (0 / 0); logsumexp
is nan with a nan, +inf with a +inf, -inf for a row of -inf only.

Before the fix, softmax([inf, 0, 1]) was [nan, 0, 0]: the +inf max was
replaced by 0 before subtracting (to avoid inf - inf in logsumexp), so
the finite entries came out exp(x) / inf = 0."""
import numpy as np
import pytest

import cjit
import cjit.nn as cnn
import cjit.scipy.special as csp

special = pytest.importorskip("scipy.special")


def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    return tuple(a % ndim for a in (axis if isinstance(axis, tuple) else (axis,)))


def ref_softmax(x, axis, log):
    """SciPy's softmax (log_softmax), with a row that holds +inf all nan
    (SciPy's log_softmax gives -inf beside the nan there; JAX gives nan)."""
    with np.errstate(all="ignore"):
        out = (special.log_softmax if log else special.softmax)(x, axis=axis)
        has_inf = np.any(np.isposinf(x), axis=_axes(axis, x.ndim), keepdims=True)
    return np.where(has_inf, np.nan, out)


def ref_logsumexp(x, axis, keepdims):
    with np.errstate(all="ignore"):
        return special.logsumexp(x, axis=axis, keepdims=keepdims)


def check_same(got, want, dtype):
    got = np.asarray(got)
    assert got.dtype == dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got) & (got > 0), np.isinf(want) & (want > 0))
    np.testing.assert_array_equal(np.isinf(got) & (got < 0), np.isinf(want) & (want < 0))
    ok = np.isfinite(want)
    rtol = 2e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(got[ok], want[ok].astype(dtype), rtol=rtol, atol=rtol)


def test_softmax_of_a_row_with_plus_inf_is_nan_everywhere():
    x = np.array([np.inf, 0.0, 1.0])
    assert np.isnan(np.asarray(cnn.softmax(x))).all()
    assert np.isnan(np.asarray(cnn.log_softmax(x))).all()
    assert np.asarray(cnn.logsumexp(x)) == np.inf
    assert np.asarray(csp.logsumexp(x)) == np.inf
    # only the row that holds the inf
    x2 = np.array([[np.inf, 0.0, 1.0], [0.0, 1.0, 2.0]])
    got = np.asarray(cjit.jit(cnn.softmax)(x2))
    assert np.isnan(got[0]).all() and np.isfinite(got[1]).all()


def test_edges_of_one_row():
    inf, nan = np.inf, np.nan
    for row in ([-inf, 0, 1], [-inf, -inf], [inf, inf], [inf, -inf], [nan, 0], [nan, inf],
                [-inf, nan], [inf], [-inf]):
        x = np.array(row, np.float64)
        check_same(cnn.softmax(x), ref_softmax(x, -1, False), np.float64)
        check_same(cnn.log_softmax(x), ref_softmax(x, -1, True), np.float64)
        check_same(cnn.logsumexp(x), np.asarray(ref_logsumexp(x, None, False)), np.float64)


N_CASES = 48   # generated cases per run, each checked through softmax, log_softmax, both logsumexps


def test_generated_rows_with_infs_and_nans_match_scipy():
    """A seeded sweep: 4x5 arrays of both float dtypes, entries replaced by
    +inf, -inf or nan at random (some rows entirely), every axis form."""
    rng = np.random.default_rng(170)
    axes = [0, 1, -1, (0, 1)]
    for case in range(N_CASES):
        dtype = (np.float32, np.float64)[case % 2]
        x = rng.normal(0, 3, (4, 5))
        kind = rng.random((4, 5))
        p = rng.choice([0.05, 0.2, 0.5])
        x[kind < p] = np.inf
        x[(kind >= p) & (kind < 2 * p)] = -np.inf
        x[(kind >= 2 * p) & (kind < 2.5 * p)] = np.nan
        if rng.random() < 0.3:
            x[rng.integers(4)] = -np.inf       # a row of -inf only
        x = x.astype(dtype)
        axis = axes[case % 4]
        keep = bool(rng.integers(2))
        note = f"case {case}: axis={axis}\n{x!r}"
        try:
            check_same(cnn.softmax(x, axis=axis), ref_softmax(x, axis, False), dtype)
            check_same(cnn.log_softmax(x, axis=axis), ref_softmax(x, axis, True), dtype)
            want = np.asarray(ref_logsumexp(x, axis, keep))
            check_same(cnn.logsumexp(x, axis=axis, keepdims=keep), want, dtype)
            check_same(csp.logsumexp(x, axis=axis, keepdims=keep), want, dtype)
        except AssertionError as e:
            raise AssertionError(f"{note}\n{e}") from None
