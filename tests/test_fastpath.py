"""The performance paths: the C fast path of a cached call (csrc/py_jit.c),
the thread pool that splits large kernels (csrc/runtime.c), the reuse of
large blocks, and the compile-phase counters.  Only exact facts are checked
here (results, counts), never time."""
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cjit
import cjit.numpy as cnp
from cjit import _cjit

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- cache_info stays exact on the fast path ---------------------------------

def test_fast_hits_are_counted_exactly():
    f = cjit.jit(lambda x, y: x * y + 1)
    x = np.arange(6, dtype=np.float32)
    before = cjit.cache_info()["hits"]
    for _ in range(10):
        np.testing.assert_array_equal(np.asarray(f(x, 2.0)), x * 2 + 1)   # NumPy's ==, not cjit's
    assert f.cache_info() == {"hits": 9, "misses": 1, "entries": 1}
    assert cjit.cache_info()["hits"] - before == 9
    assert f._fast_entries == 1


@pytest.mark.parametrize("make_args", [
    lambda x: ((x, 1.5), {}),
    lambda x: ((x,), {"y": 3}),
    lambda x: (({"b": x, "a": (x, None, [x, True])}, 2.0), {}),
    lambda x: (([x, x], np.float32(2.0)), {}),   # a NumPy scalar: the Python path
    lambda x: ((x[::2], 1.0), {}),               # not contiguous: the Python path
])
def test_pytrees_and_scalars_hit(make_args):
    def f(a, y=1.0):
        leaves = [v for v in cjit.api._tree.tree_leaves(a)
                  if np.dtype(getattr(v, "dtype", type(v))) != np.dtype(bool)]
        s = leaves[0]
        for v in leaves[1:]:
            s = s + v
        return {"s": s * y, "t": (s, s - y)}
    jf = cjit.jit(f)
    x = np.linspace(0, 1, 8, dtype=np.float32)
    args, kwargs = make_args(x)
    want = f(*args, **kwargs)
    for _ in range(4):
        got = jf(*args, **kwargs)
        np.testing.assert_allclose(got["s"], want["s"], rtol=1e-6)
        np.testing.assert_allclose(got["t"][1], want["t"][1], rtol=1e-6)
        assert isinstance(got["t"], tuple)
    assert jf.cache_info() == {"hits": 3, "misses": 1, "entries": 1}


def test_output_kinds():
    x = np.ones(3, np.float64)
    for f, check in [
        (lambda x: x + 1, lambda r: isinstance(r, np.ndarray)),
        (lambda x: (x + 1, x * 2), lambda r: type(r) is tuple and len(r) == 2),
        (lambda x: [x + 1], lambda r: type(r) is list and len(r) == 1),
        (lambda x: {"a": x, "b": (x * 3, None)}, lambda r: r["b"][1] is None),
        (lambda x: (), lambda r: r == ()),
    ]:
        jf = cjit.jit(f)
        first = jf(x)
        second = jf(x)
        assert check(first) and check(second)
        assert jf.cache_info()["hits"] == 1


def test_signature_changes_miss():
    f = cjit.jit(lambda x: x * 2)
    f(np.ones(3, np.float32))
    f(np.ones(4, np.float32))
    f(np.ones(3, np.float64))
    f(np.ones((3, 1), np.float32))
    f(2.0)
    f(2)
    f(True)
    assert f.cache_info() == {"hits": 0, "misses": 7, "entries": 7}
    assert f(True) == 2 and f(2) == 4 and f(2.0) == 4.0
    assert f.cache_info()["hits"] == 3


def test_dict_key_order_and_names():
    f = cjit.jit(lambda d: d["a"] - d["b"])
    a, b = np.ones(2), np.zeros(2)
    np.testing.assert_array_equal(f({"a": a, "b": b}), [1, 1])
    np.testing.assert_array_equal(f({"b": b, "a": a}), [1, 1])   # same signature
    assert f.cache_info() == {"hits": 1, "misses": 1, "entries": 1}
    g = cjit.jit(lambda d: sum(d.values()))
    g({"a": a, "b": b})
    g({"a": a, "c": b})   # other key: other entry
    assert g.cache_info() == {"hits": 0, "misses": 2, "entries": 2}


def test_kwargs_order_does_not_matter():
    f = cjit.jit(lambda x, y: x - y)
    x, y = np.ones(2), np.full(2, 3.0)
    np.testing.assert_array_equal(f(x=x, y=y), [-2, -2])
    np.testing.assert_array_equal(f(y=y, x=x), [-2, -2])
    assert f.cache_info() == {"hits": 1, "misses": 1, "entries": 1}


def test_static_args_counted():
    f = cjit.jit(lambda x, n: x * n, static_argnums=1)
    x = np.ones(3)
    for n in (2, 2, 3, 2):
        np.testing.assert_array_equal(f(x, n), x * n)
    assert f.cache_info() == {"hits": 2, "misses": 2, "entries": 2}


def test_clear_cache_and_clear_caches_recompile():
    f = cjit.jit(lambda x: x + 3)
    x = np.zeros(2, np.int32)
    f(x)
    f(x)
    f.clear_cache()
    assert f._fast_entries == 0
    np.testing.assert_array_equal(f(x), [3, 3])
    cjit.clear_caches()
    np.testing.assert_array_equal(f(x), [3, 3])
    np.testing.assert_array_equal(f(x), [3, 3])
    assert f.cache_info() == {"hits": 2, "misses": 3, "entries": 1}


def test_disable_jit_and_log_compiles(monkeypatch, capfd):
    calls = []

    def body(x):
        calls.append(1)
        return x + 1
    f = cjit.jit(body)
    x = np.ones(2)
    f(x)
    f(x)
    assert len(calls) == 1
    monkeypatch.setenv("CJIT_DISABLE_JIT", "1")
    np.testing.assert_array_equal(f(x), [2, 2])
    assert len(calls) == 2   # ran in Python
    monkeypatch.setenv("CJIT_DISABLE_JIT", "0")
    f(x)
    assert len(calls) == 2
    assert f.cache_info() == {"hits": 2, "misses": 1, "entries": 1}
    monkeypatch.setenv("CJIT_LOG_COMPILES", "1")
    f(np.ones(3))
    assert "compiling" in capfd.readouterr().err


def test_jitted_inside_a_trace_is_inlined():
    inner = cjit.jit(lambda x: x * 2)
    x = np.ones(3, np.float32)
    inner(x)
    inner(x)
    outer = cjit.jit(lambda x: inner(x) + 1)
    np.testing.assert_array_equal(outer(x), [3, 3, 3])
    assert inner.cache_info() == {"hits": 1, "misses": 1, "entries": 1}
    assert "mul" in outer.lower(x).as_text()


def test_errors_still_name_the_argument():
    f = cjit.jit(lambda x, y: x + y)
    f(np.ones(2), 1.0)
    with pytest.raises(TypeError, match="'y'"):
        f(np.ones(2), "a")
    with pytest.raises(OverflowError):
        f(np.ones(2), 1 << 70)
    with pytest.raises(TypeError):
        f(np.ones(2))


def test_many_threads():
    f = cjit.jit(lambda a: cnp.sum(a * a, axis=-1))
    big = np.random.default_rng(0).standard_normal((512, 256)).astype(np.float32)
    want = np.sum(big * big, axis=-1)
    errors = []

    def body():
        try:
            for _ in range(20):
                np.testing.assert_allclose(f(big), want, rtol=1e-4)
        except BaseException as e:   # noqa: BLE001
            errors.append(e)
    ts = [threading.Thread(target=body) for _ in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]
    assert f.cache_info()["hits"] + f.cache_info()["misses"] == 120


# ---- the thread pool gives the results of one thread ---------------------------

SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import cjit
    import cjit.numpy as cnp
    from cjit import _cjit
    rng = np.random.default_rng(7)
    a = rng.standard_normal((300, 513)).astype(np.float32)
    b = rng.standard_normal((513, 200)).astype(np.float32)
    v = rng.standard_normal(200003).astype(np.float64)
    i = rng.integers(-1000, 1000, size=(700, 300)).astype(np.int64)
    cases = {
        "elementwise": (lambda v: cnp.tanh(v) * cnp.exp(-v * v) + 1.0, (v,)),
        "broadcast": (lambda a: a - cnp.max(a, axis=0), (a,)),
        "row_softmax": (lambda a: cnp.exp(a) / cnp.sum(cnp.exp(a), axis=-1, keepdims=True), (a,)),
        "reduce_first": (lambda a: cnp.sum(a, axis=0), (a,)),
        "reduce_all": (lambda v: cnp.sum(v * v), (v,)),
        "reduce_mid": (lambda i: cnp.sum(i.reshape(70, 10, 300), axis=1), (i,)),
        "argmax": (lambda a: cnp.argmax(a, axis=1), (a,)),
        "matmul": (lambda a, b: a @ b, (a, b)),
        "transpose": (lambda i: i.T * 3 - 1, (i,)),
        "concat": (lambda a: cnp.concatenate([a, a * 2], axis=1), (a,)),
        "iota": (lambda i: i + cnp.arange(300), (i,)),
        "int_div": (lambda i: i // 7 + i * 5, (i,)),
    }
    out = {}
    for name, (f, args) in cases.items():
        out[name] = np.asarray(cjit.jit(f)(*args))
    np.savez(sys.argv[1], nthreads=_cjit.num_threads(), **out)
""")


def run_with_threads(tmp_path, n):
    path = str(tmp_path / f"out{n}.npz")
    env = dict(os.environ, CJIT_NUM_THREADS=str(n))
    subprocess.run([sys.executable, "-c", SCRIPT, path], check=True, env=env, timeout=300)
    return np.load(path)


def test_thread_pool_matches_one_thread(tmp_path):
    one = run_with_threads(tmp_path, 1)
    many = run_with_threads(tmp_path, 4)
    assert int(one["nthreads"]) == 1
    assert int(many["nthreads"]) == 4
    for name in one.files:
        if name == "nthreads":
            continue
        if name == "matmul" and not _cjit.blas_library().startswith("none"):
            # BLAS computes a block of rows with kernels chosen by the
            # block's size, so the last bits depend on how rows are split.
            scale = float(np.abs(one[name]).max())
            np.testing.assert_allclose(many[name], one[name], rtol=1e-5, atol=1e-5 * scale, err_msg=name)
            continue
        # Each output element is computed by one thread with the same code:
        # the results agree to the bit.
        np.testing.assert_array_equal(many[name], one[name], err_msg=name)


# ---- compile phases and block reuse ---------------------------------------------

def test_compile_phase_counters():
    s0 = _cjit.runtime_stats()
    phases = ["simplify", "fuse", "group", "memplan", "codegen", "optimize", "emit", "link"]
    for p in phases:
        assert f"compile_ns_{p}" in s0
    cjit.jit(lambda x: cnp.exp(x) * 2 + x)(np.ones(5, np.float32))
    s1 = _cjit.runtime_stats()
    assert all(s1[f"compile_ns_{p}"] >= s0[f"compile_ns_{p}"] for p in phases)
    assert sum(s1[f"compile_ns_{p}"] - s0[f"compile_ns_{p}"] for p in phases) > 0


def test_large_outputs_reused_and_counted():
    f = cjit.jit(lambda x: x * 2)
    x = np.ones(1 << 20, np.float32)   # 4 MiB: cached when freed
    base = cjit.memory_stats()["bytes_in_use"]
    for k in range(3):
        r = f(x)
        assert cjit.memory_stats()["bytes_in_use"] == base + x.nbytes
        assert r[0] == 2 and r[-1] == 2
        del r
        assert cjit.memory_stats()["bytes_in_use"] == base
    _cjit.trim_memory()


# ---- x64 off: 64-bit arrays narrowed on the fast path -----------------------------

def test_64_bit_arrays_are_narrowed_on_the_fast_path_with_x64_off():
    # Was: every call with a float64 NumPy array took the Python path (17 us
    # instead of 0.4): the C key refused 64-bit dtypes with x64 off
    with cjit.enable_x64(False):
        f = cjit.jit(lambda x, n: x * 2 + n)
        x, n = np.arange(6.0), np.arange(6, dtype=np.int64)
        keep = x.copy()
        for _ in range(4):
            r = f(x, n)
            assert r.dtype == np.float32
            np.testing.assert_array_equal(np.asarray(r), x.astype(np.float32) * 2 + n)
        assert f.cache_info() == {"hits": 3, "misses": 1, "entries": 1}
        assert f._fast_entries == 1 and np.array_equal(x, keep)
        # a true float32 argument: the same compiled entry, its own fast key
        f(x.astype(np.float32), n.astype(np.int32))
        assert f.cache_info()["entries"] == 1 and f._fast_entries == 2


@settings(max_examples=40, deadline=None)
@given(dtype=st.sampled_from(["float64", "int64", "uint64"]),
       values=st.lists(st.integers(-2**63, 2**64 - 1), min_size=1, max_size=5))
def test_generated_narrowing_on_the_fast_path_equals_the_python_path(dtype, values):
    """The C fast path's 32-bit copy of a 64-bit argument (x64 off) equals
    the Python path's conversion, wrapped integers and rounded floats
    included; 40 cases per run."""
    lo, hi = {"float64": (-2**63, 2**63), "int64": (-2**63, 2**63 - 1), "uint64": (0, 2**64 - 1)}[dtype]
    a = np.array([min(max(v, lo), hi) for v in values]).astype(dtype)
    if dtype == "float64":
        a = a * 1.0000001
    with cjit.enable_x64(False):
        f = cjit.jit(lambda v: v + 0)
        slow = f.lower(a).compile()(a)      # Compiled calls convert in Python
        f(a)
        fast = f(a)
        assert f.cache_info()["hits"] == 1
        assert fast.dtype == slow.dtype and np.asarray(fast).tobytes() == np.asarray(slow).tobytes()
