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


# ---- which library: the scipy-openblas32 wheel, overrides, the core it chose ----

def run_python(code, **env_changes):
    """Runs code in a fresh interpreter with CJIT_BLAS and OPENBLAS_CORETYPE
    unset unless given; returns its stdout (it must succeed)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CJIT_BLAS", "OPENBLAS_CORETYPE")}
    env.update(env_changes)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def library_file(description):
    """The file named in blas_library()'s "config [file]"."""
    assert description.endswith("]") and " [" in description, description
    return description[description.rindex(" [") + 2:-1]


def cpu_has_avx2():
    try:
        with open("/proc/cpuinfo") as fh:
            return any(line.startswith("flags") and " avx2" in line for line in fh)
    except OSError:
        return False


AVX2 = cpu_has_avx2()

MATMUL_CHECK = (
    "x = np.arange(96 * 80, dtype=np.float32).reshape(96, 80) / 1000\n"
    "y = np.cos(np.arange(80 * 72, dtype=np.float32)).reshape(80, 72)\n"
    "f = cjit.jit(lambda a, b: a @ b @ b.T)\n"
    "assert f.lower(x, y).compile().as_text().count('(BLAS gemm)') == 2\n"
    "np.testing.assert_allclose(np.asarray(f(x, y)), x @ y @ y.T, rtol=1e-4, atol=1e-3)\n")


def test_default_library_is_the_scipy_openblas32_wheel():
    # scripts/setup_env.sh installs the wheel: it is found without CJIT_BLAS,
    # where the package itself says its library is, and it is threaded
    out = run_python(
        "import os, numpy as np, cjit, scipy_openblas32 as s\n"
        "from cjit import _cjit\n"
        + MATMUL_CHECK +
        "print(_cjit.blas_library())\n"
        "print(os.path.join(s.get_lib_dir(), s.get_library(fullname=True)))\n")
    description, expected = out.strip().splitlines()
    path = library_file(description)
    assert "scipy_openblas32" in path, description
    assert os.path.realpath(path) == os.path.realpath(expected)
    assert description.startswith("OpenBLAS 0.3."), description
    assert "one call at a time" not in description   # the threaded build


def test_cjit_blas_overrides_the_wheel(tmp_path):
    # a copy of the wheel's library under another name: CJIT_BLAS picks it
    import scipy_openblas32
    src = os.path.join(scipy_openblas32.get_lib_dir(), scipy_openblas32.get_library(fullname=True))
    copy = tmp_path / "libmy_openblas.so"
    copy.write_bytes(open(src, "rb").read())
    out = run_python("import numpy as np, cjit\nfrom cjit import _cjit\n" + MATMUL_CHECK +
                     "print(_cjit.blas_library())\n", CJIT_BLAS=str(copy))
    assert library_file(out.strip()) == str(copy), out


@pytest.mark.skipif(not AVX2, reason="the check concerns processors with AVX2")
def test_the_core_suits_this_processor():
    # The library's core must not be older than the processor, unless
    # OPENBLAS_CORETYPE forced one (make test-portability does): then the
    # warning must say so exactly when the core predates AVX2 on a
    # processor that has it.
    description = _cjit.blas_library()
    config = description[:description.rindex(" [")]
    has_avx2 = " avx2 " in _cpu_flags()
    if not os.environ.get("OPENBLAS_CORETYPE"):
        assert _cjit._blas_core_warning(config, "lib", has_avx2) == "", description
        assert _cjit._blas_warnings() == []
    else:
        old_core = _cjit._blas_core_warning(config, "lib", has_avx2) != ""
        assert len(_cjit._blas_warnings()) == int(old_core), description


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            return " " + next(line for line in f if line.startswith("flags")).split(":", 1)[1] + " "
    except (OSError, StopIteration):
        return " "


def test_core_warning_names_a_core_older_than_the_processor():
    old = ["OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Prescott MAX_THREADS=64",
           "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Core2 MAX_THREADS=64",
           "OpenBLAS 0.3.34 DYNAMIC_ARCH NO_AFFINITY Nehalem MAX_THREADS=64",
           "OpenBLAS 0.3.34 DYNAMIC_ARCH NO_AFFINITY Sandybridge MAX_THREADS=64",
           "OpenBLAS 0.3.34 DYNAMIC_ARCH NO_AFFINITY Katmai MAX_THREADS=64",
           "OpenBLAS 0.3.10 GENERIC MAX_THREADS=8", "OpenBLAS 0.3.20 Barcelona"]
    for config in old:
        msg = _cjit._blas_core_warning(config, "/x/libopenblas.so.0", True)
        core = [w for w in config.split() if w.lower() in msg.lower().split("'s ")[1].split()[0].lower()]
        assert "/x/libopenblas.so.0" in msg and config in msg and core, (config, msg)
        assert _cjit._blas_core_warning(config, "/x/libopenblas.so.0", False) == ""
    fine = ["OpenBLAS 0.3.34.481.3 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64",
            "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64",
            "OpenBLAS 0.3.34 DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64",
            "OpenBLAS 0.3.34 DYNAMIC_ARCH SapphireRapids MAX_THREADS=64",
            "OpenBLAS 0.3.34 NEOVERSEN1 MAX_THREADS=64",
            "OpenBLAS 0.3.34 Prescottish Core2x", ""]     # whole words only
    for config in fine:
        assert _cjit._blas_core_warning(config, "lib", True) == "", config


CATCH_IMPORT_WARNINGS = (
    "import warnings\n"
    "with warnings.catch_warnings(record=True) as caught:\n"
    "    warnings.simplefilter('always')\n"
    "    import numpy as np, cjit\n"
    "from cjit import _cjit\n"
    "print(repr([str(w.message) for w in caught if w.category is RuntimeWarning]))\n"
    "print(_cjit.blas_library())\n")


@pytest.mark.skipif(not AVX2, reason="the check concerns processors with AVX2")
def test_import_warns_when_openblas_runs_an_old_core():
    # OPENBLAS_CORETYPE forces the wheel onto pre-AVX2 kernels, as a
    # misdetection would: import cjit warns once, naming the core
    out = run_python(CATCH_IMPORT_WARNINGS + MATMUL_CHECK, OPENBLAS_CORETYPE="Nehalem")
    warned, description = out.strip().splitlines()
    warned = eval(warned)
    assert len(warned) == 1 and "Nehalem kernels" in warned[0], out
    assert library_file(description) in warned[0]
    assert run_python(CATCH_IMPORT_WARNINGS).splitlines()[0] == "[]"


# A BLAS with the plain CBLAS names (as the system's OpenBLAS has) whose
# config names an old core, and which says it is a sequential build.
FAKE_BLAS = r"""
#define GEMM(name, T)                                                                          \
    void name(int order, int ta, int tb, int M, int N, int K, T alpha, const T *A, int lda,    \
              const T *B, int ldb, T beta, T *C, int ldc) {                                    \
        __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);                                       \
        if (order != 101) return;                                                              \
        for (int i = 0; i < M; i++)                                                            \
            for (int j = 0; j < N; j++) {                                                      \
                T s = 0;                                                                       \
                for (int p = 0; p < K; p++)                                                    \
                    s += (ta == 111 ? A[i * lda + p] : A[p * lda + i]) *                       \
                         (tb == 111 ? B[p * ldb + j] : B[j * ldb + p]);                        \
                C[i * ldc + j] = alpha * s + (beta == 0 ? 0 : beta * C[i * ldc + j]);          \
            }                                                                                  \
    }
static long calls;
long fake_calls(void) { return calls; }
GEMM(cblas_sgemm, float)
GEMM(cblas_dgemm, double)
int openblas_get_parallel(void) { return 0; }
char *openblas_get_config(void) { return "OpenBLAS 0.0-fake DYNAMIC_ARCH Prescott MAX_THREADS=1"; }
"""


def test_plain_names_and_a_sequential_build(tmp_path):
    # the unprefixed spelling is found; a sequential build takes turns; an
    # old core is warned about at import (on an AVX2 processor)
    src, lib = tmp_path / "fake.c", tmp_path / "libfakeblas.so"
    src.write_text(FAKE_BLAS)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(lib), str(src)], check=True)
    out = run_python(
        CATCH_IMPORT_WARNINGS + MATMUL_CHECK +
        "import ctypes\n"
        f"calls = ctypes.CDLL({str(lib)!r}).fake_calls()\n"   # the same handle: cjit's calls
        "assert calls >= 2, calls\n"
        "g = cjit.jit(lambda a, b: a @ b)\n"
        "first = np.asarray(g(x, y))\n"
        "for _ in range(50):\n"
        "    np.testing.assert_array_equal(np.asarray(g(x, y)), first)\n",
        CJIT_BLAS=str(lib), CJIT_NUM_THREADS="2")
    warned, description = out.strip().splitlines()[:2]
    assert description == f"OpenBLAS 0.0-fake DYNAMIC_ARCH Prescott MAX_THREADS=1 [{lib}] " \
                          "(sequential build: one call at a time)"
    assert ("Prescott kernels" in warned) == AVX2, warned


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matrix_vector_products_as_gemv(dtype):
    # One column (N = 1) or one row (M = 1) goes to gemv, not gemm (which
    # packs the whole matrix); every transpose combination against NumPy.
    rng = np.random.default_rng(5)
    A = rng.standard_normal((300, 100)).astype(dtype)
    col = rng.standard_normal((100, 1)).astype(dtype)
    row = rng.standard_normal((1, 300)).astype(dtype)
    vec = rng.standard_normal(100).astype(dtype)
    cases = [
        (lambda A, v: A @ v, (A, vec)),                 # 1-d vector: N = 1
        (lambda A, c: A @ c, (A, col)),
        (lambda A, r: r @ A, (A, row)),                 # M = 1
        (lambda A, c: (A.T @ A[:, :1]).T, (A, col)),    # trans A, N = 1
        (lambda A, c: c.T @ A.T, (A, col)),             # M = 1, trans B
        (lambda A, r: A @ r[:, :100].T, (A, row)),      # trans B, N = 1
    ]
    tol = 1e-4 if dtype == np.float32 else 1e-12
    for f, args in cases:
        got = cjit.jit(f)(*args)
        np.testing.assert_allclose(got, f(*args), rtol=tol, atol=tol * 10)
