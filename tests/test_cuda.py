"""The CUDA backend.

Without a GPU this file still checks a lot:
- PTX: every op of cjit.numpy over the dtypes cjit accepts, and canonical
  programs (elementwise chain, row softmax, matmul, reductions over various
  axes, an MLP forward), each emitted through the shared codegen and
  assembled with `ptxas -arch=sm_90` when ptxas is found (CUDA_HOME/bin,
  /usr/local/cuda/bin, PATH);
- the no-GPU paths: a missing driver library, a driver that finds no GPU,
  and a driver too old, each a RuntimeError that says why;
- the host side of the runtime (devices, device_put, cjit.Array, loading
  PTX, launching every kernel with its buffers) against a fake
  libcuda.so.1 built from C below, which keeps "device memory" on the host
  and does not run kernels.
With a real GPU, the tests at the end run programs and compare with NumPy.
"""
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cjit
import cjit.nn
import cjit.numpy as cnp
from cjit import _cjit

from conftest import assert_close, rand, rand_nonzero

DTYPES = ["bool", "int32", "int64", "float32", "float64"]


def _find_ptxas():
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            p = os.path.join(root, "bin", "ptxas")
            if os.access(p, os.X_OK):
                return p
    return shutil.which("ptxas")


PTXAS = _find_ptxas()
N_GPUS, NO_GPU_WHY = _cjit.cuda_status()


def lowered_of(fn, *args):
    """The C Lowered (the traced graph) of fn for args: what _cjit.ptx and
    CudaProgram read."""
    return cjit.jit(fn).lower(*args)._lowered


def expected_entries(lowered):
    """PTX kernels the plan needs: one per kernel, plus an _init for each
    reduction (a loop dim marked r in as_text) and each scatter (it starts
    from its identity too).  Counted on the CPU's plan,
    which has the same kernels (it only marks some to run as BLAS calls)."""
    n = 0
    for line in lowered.compile().as_text().splitlines():
        if "loops [" in line:
            loops = line.split("loops [", 1)[1].split("]", 1)[0]
            n += 2 if "r" in loops or ": scatter_" in line else 1
    assert n > 0
    return n


def assemble(ptx, tmp_path, name="k"):
    """Runs ptxas on the PTX when ptxas exists; asserts it accepts it."""
    if PTXAS is None:
        return
    path = tmp_path / f"{name}.ptx"
    path.write_text(ptx)
    r = subprocess.run([PTXAS, "-arch=sm_90", "-o", os.devnull, str(path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"ptxas rejected {name}:\n{r.stderr}\n{ptx[:4000]}"


def check_ptx(fn, args, tmp_path, name="k"):
    low = lowered_of(fn, *args)
    ptx = _cjit.ptx(low)
    assert ptx.endswith("\n") and "\0" not in ptx
    assert ".target sm_90" in ptx
    assert ptx.count(".entry ") == expected_entries(low), low.as_text()
    # every function is defined in the module: no host helpers, no libm
    assert ".extern" not in ptx
    assemble(ptx, tmp_path, name)
    return ptx


# ---------------------------------------------------------------------------
# the op table: a small function per op of cjit.numpy

def _x(dt, shape=(3, 4), seed=1):
    return rand(shape, dt, seed=seed)


# every elementwise unary primitive's function (the op table, csrc/ops_unary.def), and two made of them
UNARY = sorted({r["numpy"] for r in _cjit.op_table() if r["kind"] == "unary" and r.get("numpy")}
               | {"absolute", "square"})
BINARY = ["add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "power",
          "maximum", "minimum", "equal", "not_equal", "less", "less_equal", "greater",
          "greater_equal", "logical_and", "logical_or"]

OPS = {}
for _n in UNARY:
    OPS[_n] = (lambda f: (lambda x: f(x), lambda dt: (_x(dt),)))(getattr(cnp, _n))
for _n in BINARY:
    OPS[_n] = (lambda f: (lambda x, y: f(x, y),
                          lambda dt: (_x(dt), rand_nonzero((3, 4), dt, seed=2))))(getattr(cnp, _n))
# broadcasting operands of different ranks
OPS["add_broadcast"] = (lambda x, y: cnp.add(x, y), lambda dt: (_x(dt), _x(dt, (4,), 2)))

# reductions: every axis pattern of a 3-d array for float32 (where the
# kernel shapes differ), the whole array and the middle axis for every dtype
_X3 = lambda dt: (_x(dt, (4, 5, 6)),)  # noqa: E731
_ONLY_F32 = set()
for _n in ["sum", "mean", "max", "min", "amax", "amin", "prod", "argmax", "argmin", "var"]:
    f = getattr(cnp, _n)
    for _ax in [None, 0, 1, 2, (0, 2), (1, 2)]:
        if _n in ("argmax", "argmin") and isinstance(_ax, tuple):
            continue
        OPS[f"{_n}_axis{_ax}"] = ((lambda f, ax: lambda x: f(x, axis=ax))(f, _ax), _X3)
        if _ax not in (None, 1):
            _ONLY_F32.add(f"{_n}_axis{_ax}")
    if _n not in ("argmax", "argmin"):
        OPS[f"{_n}_keepdims"] = ((lambda f: lambda x: f(x, axis=1, keepdims=True))(f), _X3)
        _ONLY_F32.add(f"{_n}_keepdims")

OPS.update({
    "clip": (lambda x: cnp.clip(x, 0, 1), lambda dt: (_x(dt),)),
    "where": (lambda c, x, y: cnp.where(c, x, y),
              lambda dt: (_x("bool"), _x(dt, seed=2), _x(dt, seed=3))),
    "astype_f32": (lambda x: cnp.astype(x, cnp.float32), lambda dt: (_x(dt),)),
    "astype_i32": (lambda x: cnp.astype(x, cnp.int32), lambda dt: (_x(dt),)),
    "astype_bool": (lambda x: cnp.astype(x, cnp.bool_), lambda dt: (_x(dt),)),
    "astype_f64": (lambda x: cnp.astype(x, cnp.float64), lambda dt: (_x(dt),)),
    "astype_i64": (lambda x: cnp.astype(x, cnp.int64), lambda dt: (_x(dt),)),
    "matmul": (lambda x, y: cnp.matmul(x, y), lambda dt: (_x(dt, (3, 4)), _x(dt, (4, 5), 2))),
    "matmul_batched": (lambda x, y: x @ y, lambda dt: (_x(dt, (2, 3, 4)), _x(dt, (4, 5), 2))),
    "matmul_vec": (lambda x, y: x @ y, lambda dt: (_x(dt, (3, 4)), _x(dt, (4,), 2))),
    "dot": (lambda x, y: cnp.dot(x, y), lambda dt: (_x(dt, (3, 4)), _x(dt, (4, 5), 2))),
    "transpose": (lambda x: cnp.transpose(x), lambda dt: (_x(dt, (3, 4, 5)),)),
    "transpose_axes": (lambda x: cnp.transpose(x, (1, 2, 0)) * 1, lambda dt: (_x(dt, (3, 4, 5)),)),
    "reshape": (lambda x: cnp.reshape(x, (4, 3)), lambda dt: (_x(dt),)),
    "reshape_of_transpose": (lambda x: cnp.reshape(cnp.transpose(x), (12,)),
                             lambda dt: (_x(dt),)),
    "ravel": (lambda x: cnp.ravel(x[:, 1:]), lambda dt: (_x(dt),)),
    "expand_dims": (lambda x: cnp.expand_dims(x, 1), lambda dt: (_x(dt),)),
    "squeeze": (lambda x: cnp.squeeze(x), lambda dt: (_x(dt, (3, 1, 4)),)),
    "broadcast_to": (lambda x: cnp.broadcast_to(x, (2, 3, 4)), lambda dt: (_x(dt),)),
    "concatenate": (lambda x, y: cnp.concatenate([x, y], axis=1),
                    lambda dt: (_x(dt), _x(dt, (3, 2), 2))),
    "stack": (lambda x, y: cnp.stack([x, y], axis=0), lambda dt: (_x(dt), _x(dt, seed=2))),
    "getitem": (lambda x: x[1:, ::-2], lambda dt: (_x(dt, (5, 6)),)),
    "shape_ndim_size": (lambda x: x * (cnp.shape(x)[0] + cnp.ndim(x) + cnp.size(x)),
                        lambda dt: (_x(dt),)),
    "zeros": (lambda x: cnp.zeros((2, 3), x.dtype) + x[0, 0], lambda dt: (_x(dt),)),
    "ones": (lambda x: cnp.ones((2, 3), x.dtype), lambda dt: (_x(dt),)),
    "full": (lambda x: cnp.full((2, 3), 7, x.dtype), lambda dt: (_x(dt),)),
    "zeros_like": (lambda x: cnp.zeros_like(x), lambda dt: (_x(dt),)),
    "ones_like": (lambda x: cnp.ones_like(x), lambda dt: (_x(dt),)),
    "full_like": (lambda x: cnp.full_like(x, 3), lambda dt: (_x(dt),)),
    "arange": (lambda x: cnp.arange(12).reshape(3, 4) + x, lambda dt: (_x(dt),)),
    "asarray": (lambda x: cnp.asarray(x) + cnp.array(1, x.dtype), lambda dt: (_x(dt),)),
})


def _accepted(name, dt):
    """Does cjit trace this op for this dtype?  (Not every op takes every
    dtype: NumPy refuses some, and cjit follows.)"""
    fn, make = OPS[name]
    try:
        cjit.jit(fn).lower(*make(dt))
    except (TypeError, ValueError):
        return False
    return True


OP_CASES = [(name, dt) for name in OPS for dt in DTYPES
            if (name not in _ONLY_F32 or dt == "float32") and _accepted(name, dt)]


def test_op_table_covers_cjit_numpy():
    """Every function of cjit.numpy appears in the table, and the table has
    cases for every dtype."""
    functions = [n for n in cnp.__all__ if callable(getattr(cnp, n)) and
                 not isinstance(getattr(cnp, n), type) and n != "dtype"]
    names = " ".join(OPS)
    missing = [n for n in functions if n not in names]
    assert not missing, f"no PTX case for {missing}"
    assert {dt for _, dt in OP_CASES} == set(DTYPES)
    assert len(OP_CASES) > 250


@pytest.mark.parametrize("name,dtype", OP_CASES)
def test_op_ptx(name, dtype, tmp_path):
    fn, make = OPS[name]
    check_ptx(fn, make(dtype), tmp_path, f"{name}_{dtype}")


# ---------------------------------------------------------------------------
# canonical programs

def _chain(x, y):
    return cnp.tanh(x * 2.0 + y) * cnp.exp(-x) - cnp.sqrt(cnp.abs(y)) / (1.0 + x * x)


def _softmax(x):
    m = cnp.max(x, axis=1, keepdims=True)
    e = cnp.exp(x - m)
    return e / cnp.sum(e, axis=1, keepdims=True)


def _mlp(x, w1, b1, w2, b2):
    h = cnp.maximum(x @ w1 + b1, 0.0)
    return cjit.nn.log_softmax(h @ w2 + b2, axis=-1) if hasattr(cjit.nn, "log_softmax") \
        else _softmax(h @ w2 + b2)


def _reductions(x):
    return (x.sum(), x.sum(axis=0), x.sum(axis=1), x.max(axis=0), cnp.mean(x * x, axis=1),
            cnp.var(x, axis=0), cnp.argmax(x, axis=1))


def _layernorm(x, g):
    mu = cnp.mean(x, axis=-1, keepdims=True)
    v = cnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / cnp.sqrt(v + 1e-5) * g


def _programs(dt):
    r = np.random.default_rng(0)
    f = lambda *s: r.standard_normal(s).astype(dt)  # noqa: E731
    return {
        "chain": (_chain, (f(256, 128), f(256, 128))),
        "softmax": (_softmax, (f(64, 300),)),
        "matmul": (lambda a, b: a @ b, (f(64, 96), f(96, 80))),
        "matmul_bias_relu": (lambda a, b, c: cnp.maximum(a @ b + c, 0), (f(33, 17), f(17, 9), f(9))),
        "reductions": (_reductions, (f(37, 53),)),
        "reduce_3d": (lambda x: (x.sum(axis=(0, 2)), x.max(axis=1), cnp.prod(x, axis=0)),
                      (f(5, 6, 7),)),
        "layernorm": (_layernorm, (f(32, 64), f(64))),
        # float sums longer than a block (512) add pairwise (codegen.c)
        "long_sums": (lambda x: (x.sum(), x.sum(axis=0), x.sum(axis=1), x[:, :600].sum(), x.T.mean(axis=0)),
                      (f(1500, 700),)),
        "mlp": (_mlp, (f(16, 32), f(32, 64), f(64), f(64, 10), f(10))),
        # one kernel storing three values that share exp(x) (multi-output)
        "multi_output": (lambda x: (cnp.exp(x) + 1, cnp.exp(x) * 2, cnp.tanh(cnp.exp(x))), (f(64, 33),)),
        # a gather fused into its consumer, and scatters (one thread: updates may collide)
        "gather_scatter": (lambda e, t: (cnp.tanh(e[t]).sum(axis=1), e.at[t].add(1.0), e.at[:, t[:3]].max(0.5)),
                           (f(50, 8), r.integers(-50, 50, 40))),
    }


PROGRAMS = [(name, dt) for dt in ("float32", "float64") for name in _programs(dt)]


@pytest.mark.parametrize("name,dtype", PROGRAMS)
def test_program_ptx(name, dtype, tmp_path):
    fn, args = _programs(dtype)[name]
    check_ptx(fn, args, tmp_path, f"{name}_{dtype}")


def test_ptx_shape_of_kernels():
    """Kernels are PTX entries with the buffers as parameters, indexed by
    ctaid/ntid/tid with a grid-stride loop; reductions get an _init."""
    ptx = _cjit.ptx(lowered_of(_softmax, np.ones((8, 16), np.float32)))
    assert ".visible .entry cj_cuda_k0(" in ptx
    assert "_init(" in ptx
    for sreg in ("%ctaid.x", "%ntid.x", "%tid.x", "%nctaid.x"):
        assert sreg in ptx
    assert "ld.global" in ptx and "st.global" in ptx


def test_ptx_arch_and_integer_power(tmp_path):
    """arch is configurable; integer power is defined in the module (the CPU
    calls a host helper, a GPU cannot)."""
    low = lowered_of(lambda x, y: x ** y, np.arange(6, dtype=np.int64), np.arange(6, dtype=np.int64))
    ptx = _cjit.ptx(low, arch="sm_80")
    assert ".target sm_80" in ptx
    assert ".extern" not in ptx   # the helper is in the module (and inlined)
    if PTXAS is not None:
        p = tmp_path / "ipow.ptx"
        p.write_text(ptx)
        r = subprocess.run([PTXAS, "-arch=sm_80", "-o", os.devnull, str(p)], capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr


def test_ptx_rejects_non_lowered():
    with pytest.raises(TypeError, match="Lowered"):
        _cjit.ptx(object())
    with pytest.raises(TypeError, match="Lowered"):
        _cjit.ptx(cjit.jit(lambda x: x + 1).lower(np.ones(3)).compile()._exe)


def test_cpu_results_unchanged_by_cuda_codegen():
    """Emitting PTX from a Lowered leaves it as it was: compiled for the CPU
    afterwards, it computes the same."""
    x = np.random.default_rng(1).standard_normal((20, 30)).astype(np.float32)
    low = lowered_of(_softmax, x)
    before = low.as_text()
    _cjit.ptx(low)
    assert low.as_text() == before
    (got,) = low.compile()([x])
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert_close(got, e / e.sum(axis=1, keepdims=True))


# ---------------------------------------------------------------------------
# no GPU: what the user sees

def _run_python(code, env_extra):
    env = dict(os.environ)
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


_NO_DEVICE_PROBE = """
    import numpy as np, cjit
    print(cjit.devices())
    for call in (lambda: cjit.jit(lambda x: x, device="cuda"),
                 lambda: cjit.device_put(np.ones(3), "cuda"),
                 lambda: cjit.devices("cuda")):
        try:
            call()
            print("no error")
        except RuntimeError as e:
            print("RuntimeError:", e)
    print(cjit.jit(lambda x: x + 1, device="cpu")(np.ones(2)))
"""


def test_no_driver_library():
    out = _run_python(_NO_DEVICE_PROBE, {"CJIT_CUDA_LIBRARY": "/nonexistent/libcuda.so.1"})
    lines = out.splitlines()
    assert lines[0] == "[CpuDevice(id=0)]"
    for line in lines[1:4]:
        assert line.startswith("RuntimeError: cjit: no CUDA device: /nonexistent/libcuda.so.1 "
                               "not found"), out
    assert lines[4] == "[2. 2.]"


def test_devices_without_gpu():
    devs = cjit.devices()
    assert devs[0] == cjit.Device("cpu", 0)
    assert len(devs) == 1 + N_GPUS
    if N_GPUS == 0:
        assert NO_GPU_WHY
        with pytest.raises(RuntimeError, match="no CUDA device"):
            cjit.jit(lambda x: x, device="cuda")
        with pytest.raises(RuntimeError, match="no CUDA device"):
            cjit.device_put(np.ones(2), "cuda:0")


def test_unknown_device_is_a_value_error():
    with pytest.raises(ValueError, match="unknown device"):
        cjit.jit(lambda x: x, device="tpu")
    with pytest.raises(TypeError, match="not constructed directly"):
        cjit.Array()


# A stand-in for libcuda.so.1.  FAKE_MODE=nodevice: cuInit fails as on a
# machine without a GPU.  FAKE_MODE=host: one "GPU" whose memory is host
# memory (zeroed; with FAKE_FILL=1 every byte 1, so that a while loop's
# downloaded condition is true forever); modules must be NUL-terminated PTX
# that declares each function asked for; launches are checked (parameter
# count from the PTX) and counted, not run; downloads and device-to-device
# copies are counted.  The build without cuLaunchKernel is a driver too old.
_FAKE_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef unsigned long long CUdeviceptr;
static int mode_host(void) { const char *m = getenv("FAKE_MODE"); return m && !strcmp(m, "host"); }
static int launches, live, reads, copies;
int cuGetErrorName(int r, const char **s) { *s = r == 100 ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_FAKE"; return 0; }
int cuGetErrorString(int r, const char **s) { *s = r == 100 ? "no CUDA-capable device is detected" : "fake"; return 0; }
int cuInit(unsigned f) { (void)f; return mode_host() ? 0 : 100; }
int cuDeviceGetCount(int *n) { *n = 1; return 0; }
int cuDeviceGet(int *d, int i) { *d = i; return 0; }
int cuDeviceGetName(char *s, int n, int d) { (void)d; snprintf(s, n, "Fake GPU"); return 0; }
int cuDeviceGetAttribute(int *v, int a, int d) { (void)d; *v = a == 75 ? 9 : a == 76 ? 0 : 4; return 0; }
int cuDevicePrimaryCtxRetain(void **c, int d) { (void)d; *c = (void *)1; return 0; }
int cuCtxSetCurrent(void *c) { return c ? 0 : 201; }
int cuCtxSynchronize(void) { return 0; }
int cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    if (!n) return 1;
    *p = (CUdeviceptr)calloc(1, n);
    if (getenv("FAKE_FILL")) memset((void *)*p, 1, n);
    live++;
    return 0;
}
int cuMemFree_v2(CUdeviceptr p) { free((void *)p); live--; return 0; }
int cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { memcpy((void *)d, s, n); return 0; }
int cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { memcpy(d, (void *)s, n); reads++; return 0; }
int cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { memmove((void *)d, (void *)s, n); copies++; return 0; }
typedef struct { char *ptx; } mod;
typedef struct { int nparams; } fun;
int cuModuleLoadDataEx(void **m, const void *img, unsigned n, int *o, void **v) {
    (void)n; (void)o; (void)v;
    const char *p = img;
    if (strncmp(p, "//", 2) || !strstr(p, ".entry")) return 218;
    mod *md = malloc(sizeof *md); md->ptx = strdup(p); *m = md; return 0;
}
int cuModuleUnload(void *m) { free(((mod *)m)->ptx); free(m); return 0; }
int cuModuleGetFunction(void **f, void *m, const char *name) {
    char key[256]; snprintf(key, sizeof key, ".entry %s(", name);
    const char *at = strstr(((mod *)m)->ptx, key);
    if (!at) return 500;
    const char *end = strchr(at, ')');
    fun *fn = malloc(sizeof *fn); fn->nparams = 0;
    for (const char *q = at; q < end; q++) if (!strncmp(q, ".param", 6)) fn->nparams++;
    *f = fn; return 0;
}
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned sh, void *st, void **params, void **extra) {
    (void)sh; (void)st; (void)extra;
    if (!gx || !bx || gy != 1 || gz != 1 || by != 1 || bz != 1 || bx > 1024) return 1;
    for (int i = 0; i < ((fun *)f)->nparams; i++) if (!params[i]) return 1;
    launches++; return 0;
}
int fake_launches(void) { return launches; }
int fake_live(void) { return live; }
int fake_reads(void) { return reads; }
int fake_copies(void) { return copies; }
"""


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the fake driver")
    d = tmp_path_factory.mktemp("fakecuda")
    src = d / "fake.c"
    src.write_text(_FAKE_DRIVER)
    full = d / "libcuda.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(full), str(src)], check=True)
    old = d / "libcuda_old.so.1"
    src_old = d / "old.c"
    src_old.write_text(_FAKE_DRIVER.replace("int cuLaunchKernel(", "int cuLaunchKernelOld("))
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(old), str(src_old)], check=True)
    return str(full), str(old)


def test_driver_without_gpu(fake_driver):
    out = _run_python(_NO_DEVICE_PROBE, {"CJIT_CUDA_LIBRARY": fake_driver[0],
                                         "FAKE_MODE": "nodevice"})
    lines = out.splitlines()
    assert lines[0] == "[CpuDevice(id=0)]"
    for line in lines[1:4]:
        assert ("RuntimeError: cjit: no CUDA device: cuInit failed: CUDA_ERROR_NO_DEVICE "
                "(no CUDA-capable device is detected)") in line, out


def test_driver_too_old(fake_driver):
    out = _run_python(_NO_DEVICE_PROBE, {"CJIT_CUDA_LIBRARY": fake_driver[1], "FAKE_MODE": "host"})
    assert "has no cuLaunchKernel (the driver is too old)" in out.splitlines()[1], out


_HOST_PROBE = """
    import ctypes, numpy as np, cjit, cjit.numpy as cnp
    from cjit import _cjit
    lib = ctypes.CDLL(LIB)
    print("devices", cjit.devices())
    print("info", _cjit.cuda_device_info(0))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = cjit.device_put(x, "cuda")
    print("array", type(a).__name__, a.shape, a.dtype, a.device, a.block_until_ready() is a)
    print("roundtrip", np.array_equal(np.asarray(a), x), np.asarray(a).flags.c_contiguous)
    tree = cjit.device_put({"w": np.ones((2, 2)), "b": [np.zeros(3, np.int32), True]}, "cuda:0")
    print("tree", sorted(tree), tree["b"][1].dtype, tree["b"][1].shape)
    print("empty", np.asarray(cjit.device_put(np.zeros((0, 3)), "cuda")).shape)
    w = np.ones((4, 5), np.float32)

    @cjit.jit(device="cuda")
    def f(x, y):
        e = cnp.exp(x - cnp.max(x, axis=1, keepdims=True))
        return {"p": e / cnp.sum(e, axis=1, keepdims=True), "m": (x @ w) ** 2 + y.sum()}

    before = lib.fake_launches()
    live = cjit.memory_stats()["live_executables"]
    r = f(a, x)                      # one argument on the device, one on the host
    print("outputs", type(r["p"]).__name__, r["p"].shape, r["p"].dtype, r["m"].shape)
    print("launched", lib.fake_launches() - before)
    print("cpu_executables", cjit.memory_stats()["live_executables"] - live)
    r2 = f(a, a)
    print("cache", f.cache_info()["entries"], f.cache_info()["hits"])
    print("cpu_on_gpu_array", cjit.jit(lambda v: v * 2)(a)[0, 1])
    c = f.lower(x, x).compile()
    print("compiled", type(c(x, x)["p"]).__name__)
    cpu = cjit.jit(f._fun).lower(x, x).compile()
    print("flops", c.cost_analysis() == cpu.cost_analysis(),
          c.memory_analysis().argument_size_in_bytes == cpu.memory_analysis().argument_size_in_bytes,
          c.as_text().count("loops [") == cpu.as_text().count("loops ["),
          c._exe.ptx().count(".entry ") >= 6)
    try:
        f(a, np.ones((3, 4), np.float64))
        f(np.ones((3, 5), np.float32), x)
    except Exception as e:
        print("error", type(e).__name__)
    del a, tree, r, r2, c, cpu
    import gc; gc.collect()
    cjit.clear_caches()
    print("live", lib.fake_live())
"""


def test_runtime_against_fake_driver(fake_driver):
    """Everything up to the kernels: devices, memory, Array, loading the
    PTX, and a launch per kernel (and per reduction's _init) with all its
    parameters."""
    code = "LIB = %r\n" % fake_driver[0] + textwrap.dedent(_HOST_PROBE)
    out = _run_python(code, {"CJIT_CUDA_LIBRARY": fake_driver[0], "FAKE_MODE": "host"})
    got = dict(line.split(" ", 1) for line in out.splitlines())
    assert got["devices"] == "[CpuDevice(id=0), CudaDevice(id=0)]"
    assert got["info"] == "('Fake GPU', (9, 0))"
    assert got["array"] == "DeviceArray (3, 4) float32 cuda:0 True"
    assert got["roundtrip"] == "True True"
    assert got["tree"] == "['b', 'w'] bool ()"
    assert got["empty"] == "(0, 3)"
    assert got["outputs"] == "DeviceArray (3, 4) float32 (3, 5)"
    # softmax: max (+init), sum (+init), divide; matmul (+init), power+add, y.sum (+init)
    assert int(got["launched"]) >= 6
    assert got["cache"] == "1 1"
    assert got["compiled"] == "DeviceArray"
    # the GPU compiles from the lowered plan only: no CPU executable is made
    assert got["cpu_executables"] == "0"
    # its plan's introspection: the CPU's costs, arguments and kernels
    assert got["flops"] == "True True True True"
    assert got["live"] == "0", "device memory leaked"


# ---------------------------------------------------------------------------
# with a GPU: results against NumPy

gpu = pytest.mark.skipif(N_GPUS == 0, reason=f"no CUDA device: {NO_GPU_WHY}")


def _leaves(r):
    return list(r) if isinstance(r, (tuple, list)) else list(r.values()) if isinstance(r, dict) \
        else [r]


@gpu
def test_ops_on_gpu():
    """Every case of the op table on the GPU against the CPU (itself tested
    against NumPy); one test, so that a machine without a GPU shows one skip."""
    failures = []
    for name, dtype in OP_CASES:
        fn, make = OPS[name]
        args = make(dtype)
        try:
            want = _leaves(cjit.jit(fn)(*args))
            got = _leaves(cjit.jit(fn, device="cuda")(*args))
            for g, w in zip(got, want):
                assert isinstance(g, cjit.Array)
                w = np.asarray(w)
                tol = {}
                if w.dtype.kind == "f":
                    tol = {"rtol": 1e-5, "atol": 1e-6} if w.dtype == np.float32 else \
                        {"rtol": 1e-12, "atol": 1e-14}
                assert_close(np.asarray(g), w, **tol)
        except Exception as e:   # noqa: BLE001 - collected and reported below
            failures.append(f"{name}[{dtype}]: {type(e).__name__}: {e}")
    assert not failures, f"{len(failures)} of {len(OP_CASES)} failed:\n" + "\n".join(failures)


@gpu
@pytest.mark.parametrize("name,dtype", PROGRAMS)
def test_program_on_gpu(name, dtype):
    fn, args = _programs(dtype)[name]
    want = cjit.jit(fn)(*args)
    dev_args = cjit.device_put(args, "cuda")
    got = cjit.jit(fn, device="cuda")(*dev_args)
    for g, w in zip(_leaves(got), _leaves(want)):
        g = np.asarray(g.block_until_ready())
        tol = 1e-4 if dtype == "float32" else 1e-10
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def test_ptx_of_complex_programs(tmp_path):
    """Complex values are pairs of reals: their kernels (the stacked parts
    stored by one loop, the matmul of interleaved pairs) are ordinary PTX."""
    z = (np.arange(12.0).reshape(3, 4) + 1j).astype(np.complex64)
    check_ptx(lambda u: cnp.exp(u * u + 1j) * u - u / (u + 2), (z,), tmp_path, "complex_chain")
    check_ptx(lambda u: cnp.abs(u @ u.T).sum(), (z,), tmp_path, "complex_matmul")
