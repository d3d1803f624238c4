"""Matmul kernels handed to BLAS (csrc/blas.c): which kernels qualify, and
that every layout the library is given computes what NumPy computes, and
what cjit's own loop nests compute."""
import gc
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

rng = np.random.default_rng(7)


def rand(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def plan_text(f, *args):
    return cjit.jit(f).lower(*args).compile().as_text()


def loops_only(f, *args):
    """f compiled with BLAS switched off: cjit's own loop nests."""
    was = _cjit._set_blas_enabled(False)
    try:
        cjit.clear_caches()
        return np.asarray(cjit.jit(f)(*args))
    finally:
        _cjit._set_blas_enabled(was)
        cjit.clear_caches()


def check(f, *args, gemms):
    """f's plan has `gemms` BLAS stages and matches NumPy and the loops."""
    text = plan_text(f, *args)
    assert text.count("(BLAS gemm)") == (gemms if HAVE_BLAS else 0), text
    got = np.asarray(cjit.jit(f)(*args))
    ref = f(*args)
    tol = 2e-5 if got.dtype == np.float32 else 1e-12
    scale = max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * scale)
    np.testing.assert_allclose(loops_only(f, *args), got, rtol=tol, atol=tol * scale)
    return text


a, b = rand(96, 80), rand(80, 72)

LAYOUTS = {
    "plain": (lambda x, y: x @ y, (a, b)),
    "a transposed": (lambda x, y: x.T @ y, (rand(80, 96), b)),
    "b transposed": (lambda x, y: x @ y.T, (a, rand(72, 80))),
    "both transposed": (lambda x, y: x.T @ y.T, (rand(80, 96), rand(72, 80))),
    "row slice of a": (lambda x, y: x[8:72] @ y, (a, b)),
    "column slice of b": (lambda x, y: x @ y[:, 5:69], (a, b)),
    "float64": (lambda x, y: x @ y, (rand(64, 70, dtype=np.float64), rand(70, 66, dtype=np.float64))),
    "vector @ matrix": (lambda v, y: v @ y, (rand(4096), rand(4096, 8))),
    "matrix @ vector": (lambda x, v: x @ v, (rand(64, 4096), rand(4096))),
    "batched": (lambda x, y: x @ y, (rand(3, 40, 30), rand(3, 30, 20))),
    "batched, b broadcast": (lambda x, y: x @ y, (rand(2, 3, 40, 30), rand(30, 20))),
    "batched, transposed": (lambda x, y: cnp.transpose(x, (0, 2, 1)) @ y, (rand(4, 30, 40), rand(4, 30, 20))),
}


@needs_blas
@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_layouts_run_as_gemm(name):
    f, args = LAYOUTS[name]
    check(f, *args, gemms=1)


def test_loops_where_blas_cannot_go():
    # a strided K axis, a small product and an integer matmul stay loop nests
    check(lambda x, y: x[:, ::2] @ y, rand(64, 160), rand(80, 64), gemms=0)
    check(lambda x, y: x @ y, rand(8, 8), rand(8, 8), gemms=0)
    i, j = rng.integers(-9, 9, (64, 64)), rng.integers(-9, 9, (64, 64))
    text = plan_text(lambda x, y: x @ y, i, j)
    assert "(BLAS gemm)" not in text
    np.testing.assert_array_equal(np.asarray(cjit.jit(lambda x, y: x @ y)(i, j)), i @ j)


@needs_blas
def test_gemm_leads_its_epilogue():
    x, w, bias = rand(256, 100), rand(100, 64), rand(64)
    f = lambda x, w, b: cnp.tanh(x @ w + b)
    text = check(f, x, w, bias, gemms=1)
    compiled = cjit.jit(f).lower(x, w, bias).compile()
    assert compiled.memory_analysis().num_kernels == 1, text
    # the epilogue overwrites the matmul's result in place: no temporaries
    assert compiled.memory_analysis().temp_size_in_bytes == 0


@needs_blas
def test_gradient_matmuls_run_as_gemm():
    def loss(w, x):
        return cnp.sum(cnp.tanh(x @ w) ** 2)
    w, x = rand(50, 40), rand(120, 50)
    g = cjit.jit(cjit.grad(loss))
    text = g.lower(w, x).compile().as_text()
    assert text.count("(BLAS gemm)") == 2, text    # forward x @ w and x.T @ dh
    h = np.tanh(x @ w)
    ref = x.T @ (2 * h * (1 - h * h))
    np.testing.assert_allclose(np.asarray(g(w, x)), ref, rtol=1e-4, atol=1e-4)


@needs_blas
def test_measured_peak_equals_plan_with_gemm():
    x, w = rand(512, 256), rand(256, 128)
    f = cjit.jit(lambda x, w: cnp.exp(x @ w * 0.01).sum(axis=1))
    plan = f.lower(x, w).compile().memory_analysis()
    f(x, w)
    gc.collect()
    base = cjit.memory_stats()["bytes_in_use"]
    cjit.reset_peak_memory_stats()
    out = f(x, w)
    assert cjit.memory_stats()["peak_bytes_in_use"] - base == plan.peak_memory_in_bytes
    del out


def test_no_blas_library(tmp_path):
    # CJIT_BLAS=0: every matmul is a loop nest, and results still match
    code = (
        "import numpy as np, cjit\n"
        "from cjit import _cjit\n"
        "x = np.arange(64 * 96, dtype=np.float32).reshape(64, 96) / 1000\n"
        "f = lambda a: a @ a.T\n"
        "assert _cjit.blas_library().startswith('none'), _cjit.blas_library()\n"
        "assert '(BLAS gemm)' not in cjit.jit(f).lower(x).compile().as_text()\n"
        "np.testing.assert_allclose(np.asarray(cjit.jit(f)(x)), x @ x.T, rtol=1e-5)\n"
        "print('ok')\n")
    for setting in ("0", str(tmp_path / "no-such-blas.so")):
        env = dict(os.environ, CJIT_BLAS=setting)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


STRESS = (
    "import numpy as np, cjit\n"
    "from cjit import _cjit\n"
    "rng = np.random.default_rng(3)\n"
    "a = rng.standard_normal((512, 64)).astype(np.float32)\n"
    "b = rng.standard_normal((64, 256)).astype(np.float32)\n"
    "f = cjit.jit(lambda x, y: x @ y)\n"
    "assert '(BLAS gemm)' in f.lower(a, b).compile().as_text()\n"
    "first = np.asarray(f(a, b))\n"
    "np.testing.assert_allclose(first, a @ b, rtol=1e-4, atol=1e-4)\n"
    "for _ in range(300):\n"
    "    np.testing.assert_array_equal(np.asarray(f(a, b)), first)\n"
    "print(_cjit.blas_library())\n")


@needs_blas
def test_threads_calling_blas_at_once_get_the_same_result():
    # the pool's threads call gemm on their rows at the same time, over and
    # over: a library that shares state between calls fails this
    env = dict(os.environ, CJIT_NUM_THREADS="2")
    out = subprocess.run([sys.executable, "-c", STRESS], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr


SEQUENTIAL = "/usr/lib/x86_64-linux-gnu/openblas-serial/libopenblas.so.0"


@pytest.mark.skipif(not os.path.exists(SEQUENTIAL), reason="no sequential OpenBLAS build installed")
def test_sequential_openblas_takes_turns():
    # its calls share one packing buffer: cjit makes them take turns
    env = dict(os.environ, CJIT_NUM_THREADS="2", CJIT_BLAS=SEQUENTIAL)
    out = subprocess.run([sys.executable, "-c", STRESS], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "one call at a time" in out.stdout
