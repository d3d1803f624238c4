"""Matmuls with few rows run by cjit's own register-tiled kernel
(csrc/gemm_small.c): which products take it, and that it computes what
NumPy computes for every shape class (row and column tails, transposes,
batches, float32 and float64, rows split between threads)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp
from cjit import _cjit

HAVE_BLAS = not _cjit.blas_library().startswith("none")
needs_blas = pytest.mark.skipif(not HAVE_BLAS, reason="no BLAS library: " + _cjit.blas_library())

rng = np.random.default_rng(11)


def rand(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def path_of(f, *args):
    """Which path runs the one matmul of f: "small", "blas" or "loops"."""
    text = cjit.jit(f).lower(*args).compile().as_text()
    small, blas = text.count("(small gemm)"), text.count("(BLAS gemm)")
    assert small + blas <= 1, text
    return "small" if small else "blas" if blas else "loops"


def assert_matches_numpy(got, ref):
    # each element is a dot product of K terms summed in order: its error is
    # at most ~K ulps of the sum of |terms|, far below these bounds
    tol = 1e-5 if ref.dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * max(1.0, float(np.abs(ref).max())))


AB = lambda x, y: x @ y          # noqa: E731
ATB = lambda x, y: x.T @ y       # noqa: E731
BATCH_T = lambda x, y: cnp.transpose(x, (0, 2, 1)) @ y  # noqa: E731

# (name, f, A's stored shape, B's stored shape, numpy reference)
CASES = [
    ("6 rows: one whole tile", AB, (6, 64), (64, 32)),
    ("7 rows: a tile and one row", AB, (7, 33), (33, 45)),
    ("12 rows: two tiles", AB, (12, 40), (40, 37)),
    ("11 rows: rests of 4 and 1", AB, (11, 40), (40, 37)),
    ("9 rows: rests of 2 and 1", AB, (9, 50), (50, 64)),
    ("12 rows, N = 2 (single columns only)", AB, (12, 600), (600, 2)),
    ("2 rows, N one vector plus 3", AB, (2, 256), (256, 11)),
    ("5 rows, K = 1", AB, (5, 1), (1, 1500)),
    ("A transposed", ATB, (70, 9), (70, 48)),
    ("row slice of A, column slice of B", lambda x, y: x[1:9] @ y[:, 3:61], (10, 64), (64, 70)),
    ("batched", AB, (3, 5, 40), (3, 40, 33)),
    ("batched, B broadcast", AB, (2, 3, 4, 30), (30, 50)),
    ("batched, A transposed", BATCH_T, (4, 30, 8), (4, 30, 36)),
]


@needs_blas
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_small_kernel_matches_numpy(case, dtype):
    name, f, sa, sb = case
    a, b = rand(*sa, dtype=dtype), rand(*sb, dtype=dtype)
    assert path_of(f, a, b) == "small"
    got = np.asarray(cjit.jit(f)(a, b))
    ref = f(a, b) if f is not BATCH_T else np.transpose(a, (0, 2, 1)) @ b
    assert got.dtype == ref.dtype and got.shape == ref.shape
    assert_matches_numpy(got, ref)


@needs_blas
def test_small_kernel_with_an_epilogue_and_in_a_gradient():
    x, w, bias = rand(8, 64), rand(64, 48), rand(48)

    def loss(w, bias, x):
        return (cnp.tanh(x @ w + bias) ** 2).sum()

    assert path_of(lambda x, w: cnp.tanh(x @ w + bias), x, w) == "small"
    gw, gb = cjit.jit(cjit.grad(loss, argnums=(0, 1)))(w, bias, x)
    h = np.tanh(x @ w + bias)
    d = 2 * h * (1 - h * h)
    assert_matches_numpy(np.asarray(gw), x.T @ d)
    assert_matches_numpy(np.asarray(gb), d.sum(0))


@needs_blas
@pytest.mark.parametrize("dtype, rows, path", [
    (np.float32, 2, "small"), (np.float32, 16, "small"), (np.float32, 17, "blas"),
    (np.float64, 12, "small"), (np.float64, 13, "blas"),
])
def test_the_size_rule_picks_the_path(dtype, rows, path):
    a, b = rand(rows, 128, dtype=dtype), rand(128, 64, dtype=dtype)
    assert path_of(AB, a, b) == path


@needs_blas
def test_what_stays_with_blas_or_the_loops():
    # B read transposed (no unit stride along N): BLAS.  With fusion off
    # (CJIT_PASSES=-fuse) the transpose is a copy of its own, and the
    # matmul reads a plain B
    text = cjit.jit(lambda x, y: x @ y.T).lower(rand(8, 128), rand(64, 128)).compile().as_text()
    if text.count("stage ") == 1:
        assert "(BLAS gemm)" in text, text
    else:
        assert "transpose" in text and "(small gemm)" in text, text
    # one row: gemv; one column: cjit's matvec kernel (matvec.c) up to
    # 128 KiB of A, gemv past it
    assert path_of(AB, rand(1, 128), rand(128, 64)) == "blas"
    assert "(matvec)" in cjit.jit(AB).lower(rand(8, 4096), rand(4096, 1)).compile().as_text()
    assert path_of(AB, rand(8, 8192), rand(8192, 1)) == "blas"
    # B too small to be worth it (K N < 1024), or too large to stay in cache
    assert path_of(AB, rand(16, 31), rand(31, 32)) == "blas"
    assert path_of(AB, rand(8, 16, 33), rand(8, 33, 30)) == "blas"
    assert path_of(AB, rand(3, 32), rand(32, 32)) == "loops"  # too little work for either
    assert path_of(AB, rand(8, 784, dtype=np.float64), rand(784, 128, dtype=np.float64)) == "blas"
    # and the switch for tests and benchmarks
    was = _cjit._set_small_gemm_enabled(False)
    try:
        assert was is True
        assert path_of(AB, rand(8, 128), rand(128, 64)) == "blas"
    finally:
        _cjit._set_small_gemm_enabled(was)


@needs_blas
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_kernel_agrees_with_blas_and_the_loops(dtype):
    a, b = rand(11, 300, dtype=dtype), rand(300, 77, dtype=dtype)
    small = np.asarray(cjit.jit(AB)(a, b))
    outs = []
    for blas, small_on in ((True, False), (False, False)):
        was_b, was_s = _cjit._set_blas_enabled(blas), _cjit._set_small_gemm_enabled(small_on)
        try:
            cjit.clear_caches()
            outs.append(np.asarray(cjit.jit(AB)(a, b)))
        finally:
            _cjit._set_blas_enabled(was_b)
            _cjit._set_small_gemm_enabled(was_s)
            cjit.clear_caches()
    for o in outs:
        assert_matches_numpy(small, o)


SPLIT_SCRIPT = r"""
import numpy as np, cjit
rng = np.random.default_rng(3)
# 15 rows of 8192 columns (float32: 16 rows at most): enough points for the thread pool to split the
# rows, so each thread runs a range that is not a whole number of tiles
a = rng.standard_normal((15, 16)).astype(np.float32)
b = rng.standard_normal((16, 8192)).astype(np.float32)
f = cjit.jit(lambda x, y: x @ y)
assert "(small gemm)" in f.lower(a, b).compile().as_text()
got = np.asarray(f(a, b))
ref = a.astype(np.float64) @ b.astype(np.float64)
err = float(np.abs(got - ref).max())
assert err < 1e-4, err
print("ok")
"""


@needs_blas
@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_rows_split_between_threads(threads):
    env = dict(os.environ, CJIT_NUM_THREADS=threads)
    r = subprocess.run([sys.executable, "-c", SPLIT_SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
