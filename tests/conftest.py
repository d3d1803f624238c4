"""Shared helpers for the cjit test suite.

Every test compares cjit against NumPy.  The helpers here keep the
comparisons uniform: `assert_close` checks dtype, shape, NaN positions and
values with a tolerance chosen by dtype; `rand` makes reproducible inputs
of any supported dtype; `layouts` turns a contiguous array into the
non-contiguous views that cjit must accept.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

# The persistent compile cache (cjit/_disk_cache.py) is on by default for
# users, and off in this suite: many tests count compiles, LLVM modules or
# compile time, which a warm disk cache would change from one run to the
# next.  Subprocesses inherit this.  Its directory is a temporary one of the
# session's, so that nothing here ever writes to the user's ~/.cache; the
# disk cache's own tests (test_disk_cache.py) turn it on with a directory of
# their own.
os.environ["CJIT_CACHE"] = "0"
# Most tests compare with NumPy in float64: the suite runs with x64 on
# (JAX's jax_enable_x64), set before cjit is imported so that subprocesses
# inherit it.  tests/test_x64_mode.py checks the default mode (x64 off) in
# subprocesses without it and under cjit.enable_x64(False).
os.environ["CJIT_ENABLE_X64"] = "1"
_SESSION_CACHE_DIR = tempfile.mkdtemp(prefix="cjit-test-cache-")
os.environ["CJIT_CACHE_DIR"] = _SESSION_CACHE_DIR

import numpy as np
import pytest

import cjit


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_SESSION_CACHE_DIR, ignore_errors=True)

DTYPES = ["bool", "int32", "int64", "float32", "float64"]
INT_DTYPES = ["int32", "int64"]
FLOAT_DTYPES = ["float32", "float64"]
NUMERIC_DTYPES = INT_DTYPES + FLOAT_DTYPES

# Default tolerances per dtype.  float32 results of a few flops are within a
# few ulps; float64 results of the same within ~1e-12 relative.  Integer and
# boolean results must be exact.
_DEFAULT_TOL = {
    np.dtype("float32"): (2e-6, 1e-6),
    np.dtype("float64"): (1e-12, 1e-14),
}


def _as_array(x):
    if isinstance(x, np.ndarray):
        return x
    # cjit.Array (GPU) or NumPy scalars: np.asarray copies to the host.
    return np.asarray(x)


def assert_close(got, want, dtype=None, rtol=None, atol=None, check_dtype=True):
    """Asserts that `got` (a cjit result) matches `want` (NumPy's result).

    - `got` must be a NumPy array (cjit results on the CPU are cjit.Arrays,
      an ndarray subclass), of the same shape and, unless check_dtype is False, the same
      dtype as `want` (or as `dtype` when given).
    - NaNs must be at the same positions; infinities must match exactly.
    - Floats compare with rtol/atol defaulting by dtype; ints and bools are
      exact.
    """
    assert isinstance(got, np.ndarray), (
        f"expected a numpy.ndarray, got {type(got).__name__}: {got!r}")
    got = np.asarray(got)     # a cjit.Array's operators are cjit's: compare with NumPy's
    want = np.asarray(_as_array(want))
    expect_dtype = np.dtype(dtype) if dtype is not None else want.dtype
    if check_dtype:
        assert got.dtype == expect_dtype, (
            f"dtype: got {got.dtype}, want {expect_dtype}")
    assert got.shape == want.shape, f"shape: got {got.shape}, want {want.shape}"
    if got.size == 0:
        return
    kind = np.dtype(expect_dtype).kind
    if kind in "biu" and got.dtype.kind in "biu":
        if not np.array_equal(got, want):
            bad = np.argwhere(got != want)
            idx = tuple(bad[0]) if bad.size else ()
            raise AssertionError(
                f"integer/bool mismatch at {len(bad)} positions; first {idx}: "
                f"got {got[idx]!r}, want {want[idx]!r}\ngot={got!r}\nwant={want!r}")
        return
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    gn, wn = np.isnan(g), np.isnan(w)
    if not np.array_equal(gn, wn):
        idx = tuple(np.argwhere(gn != wn)[0])
        raise AssertionError(
            f"NaN positions differ; first at {idx}: got {g[idx]!r}, want {w[idx]!r}")
    ok = ~wn
    gi, wi = np.isinf(g) & ok, np.isinf(w) & ok
    if not np.array_equal(gi, wi) or not np.array_equal(g[wi], w[wi]):
        idx = tuple(np.argwhere((gi != wi) | (wi & (g != w)))[0])
        raise AssertionError(
            f"infinities differ; first at {idx}: got {g[idx]!r}, want {w[idx]!r}")
    fin = ok & ~wi
    drt, dat = _DEFAULT_TOL.get(np.dtype(expect_dtype), (2e-6, 1e-6))
    rtol = drt if rtol is None else rtol
    atol = dat if atol is None else atol
    err = np.abs(g[fin] - w[fin])
    lim = atol + rtol * np.abs(w[fin])
    if np.any(err > lim):
        i = int(np.argmax(err - lim))
        raise AssertionError(
            f"values differ (rtol={rtol}, atol={atol}): {int(np.sum(err > lim))} of "
            f"{err.size} out of tolerance; worst: got {g[fin][i]!r}, want "
            f"{w[fin][i]!r} (abs err {err[i]:.3g}, rel {err[i] / max(abs(w[fin][i]), 1e-300):.3g})")


def rand(shape, dtype, seed=0, low=None, high=None):
    """A reproducible random array of `shape` and `dtype`.

    Floats are uniform in [low, high) (default [-3, 3)); ints uniform in
    [low, high) (default [-9, 10)); bools fair coins.
    """
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        lo = -9 if low is None else low
        hi = 10 if high is None else high
        return rng.integers(lo, hi, size=shape).astype(dt)
    lo = -3.0 if low is None else low
    hi = 3.0 if high is None else high
    return rng.uniform(lo, hi, size=shape).astype(dt)


def rand_nonzero(shape, dtype, seed=0):
    """Like rand but never zero (divisors)."""
    x = rand(shape, dtype, seed)
    if np.dtype(dtype) == np.bool_:
        return np.ones(shape, bool)
    x = np.where(x == 0, np.ones((), dtype), x).astype(dtype)
    return x


def layouts(x):
    """Non-contiguous views with the same values pattern as `x` (2-D, at
    least 4 rows): name -> view.  Each view must be used as is."""
    return {
        "transposed": x.T,
        "strided": x[::2],
        "negative": x[::-1, ::-1],
    }


def run_python(code, env_extra=None, timeout=120):
    """Runs `code` in a fresh interpreter (so that environment variables
    read once at import time take effect).  Returns CompletedProcess."""
    env = dict(os.environ)
    env.pop("CJIT_LOG_COMPILES", None)
    env.pop("CJIT_DISABLE_JIT", None)
    env.pop("CJIT_PASSES", None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                          capture_output=True, text=True, env=env, timeout=timeout)


@pytest.fixture
def fresh_caches():
    """Drops every compiled executable before and after the test, so that
    process-wide counters start from a known state."""
    cjit.clear_caches()
    yield
    cjit.clear_caches()


@pytest.fixture(autouse=True)
def _quiet_numpy():
    # The NumPy references compute log(0), 0/0 and friends on purpose.
    with np.errstate(all="ignore"):
        yield

