"""Fusion and the memory plan: exact kernel counts and byte figures of
canonical programs, the measured peak against the planned one, in-place
updates, donation, closed-over arrays by reference, and the passes switched
off (results must not change)."""
import gc
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import cjit
import cjit.nn
import cjit.numpy as cnp


def analysis(f, *args, **jit_kw):
    return cjit.jit(f, **jit_kw).lower(*args).compile().memory_analysis()


def measured_peak(fn, *args):
    """Peak bytes the runtime holds during one call (outputs included),
    above what was in use before it."""
    gc.collect()
    base = cjit.memory_stats()["bytes_in_use"]
    cjit.reset_peak_memory_stats()
    out = fn(*args)
    peak = cjit.memory_stats()["peak_bytes_in_use"] - base
    del out
    return peak


def chain10(x):
    y = x * 2.0 + 1.0
    y = cnp.tanh(y) - 0.5
    y = y * y + x
    y = cnp.exp(-y) / (1.0 + x * x)
    return cnp.maximum(y, 0.1)


def softmax(x):
    return cjit.nn.softmax(x, axis=-1)


def layer_norm(x):
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    return (x - m) / cnp.sqrt(v + 1e-5)


rng = np.random.default_rng(0)
X = rng.standard_normal((256, 384)).astype(np.float32)
Y = rng.standard_normal((256, 384)).astype(np.float32)


def test_elementwise_chain_is_one_kernel_without_temporaries():
    ma = analysis(chain10, X)
    assert ma.num_kernels == 1
    assert ma.temp_size_in_bytes == 0
    assert ma.argument_size_in_bytes == X.nbytes
    assert ma.output_size_in_bytes == X.nbytes
    assert ma.peak_memory_in_bytes == 2 * X.nbytes


def test_product_sum_is_one_kernel():
    ma = analysis(lambda x, y: (x * y).sum(), X, Y)
    assert ma.num_kernels == 1
    assert ma.temp_size_in_bytes == 0
    ma = analysis(lambda x, y: (x * y).sum(axis=-1), X, Y)
    assert ma.num_kernels == 1 and ma.temp_size_in_bytes == 0


@pytest.mark.parametrize("f", [softmax, cjit.nn.log_softmax, layer_norm], ids=["softmax", "log_softmax",
                                                                               "layer_norm"])
def test_row_normalizations_in_one_pass_with_row_sized_temporaries(f):
    n = X.shape[0]
    ma = analysis(f, X)
    assert ma.num_kernels <= 2
    # O(N): a few per-row scalars, each rounded up to the arena's 64-byte alignment
    assert ma.temp_size_in_bytes <= 4 * (n * 4 + 64)
    want = {softmax: lambda a: np.exp(a - a.max(-1, keepdims=True)) /
            np.exp(a - a.max(-1, keepdims=True)).sum(-1, keepdims=True),
            layer_norm: lambda a: (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5)}
    if f in want:
        np.testing.assert_allclose(cjit.jit(f)(X), want[f](X), rtol=2e-5, atol=2e-6)


def mlp_forward(x, w1, w2, w3, w4):
    h = cnp.tanh(x @ w1)
    h = cnp.tanh(h @ w2)
    h = cnp.tanh(h @ w3)
    return h @ w4


def test_mlp_forward_keeps_at_most_two_activations():
    x = rng.standard_normal((128, 64))
    ws = [rng.standard_normal(s) * 0.1 for s in [(64, 96), (96, 96), (96, 96), (96, 10)]]
    ma = analysis(mlp_forward, x, *ws)
    activation = 128 * 96 * 8
    assert ma.temp_size_in_bytes <= 2 * activation
    temps = [b for b in ma.peak_live if b.kind == "temp"]
    assert sum(b.size for b in temps) <= 2 * activation
    h = np.tanh(np.tanh(np.tanh(x @ ws[0]) @ ws[1]) @ ws[2])
    np.testing.assert_allclose(cjit.jit(mlp_forward)(x, *ws), h @ ws[3], rtol=1e-12, atol=1e-12)


def test_in_place_update_shares_bytes():
    # tanh(x @ w) writes over the matmul's temporary: one activation, not two
    x, w, v = rng.standard_normal((64, 32)), rng.standard_normal((32, 48)), rng.standard_normal((48, 8))
    ma = analysis(lambda x, w, v: cnp.tanh(x @ w) @ v, x, w, v)
    assert ma.temp_size_in_bytes == 64 * 48 * 8
    text = cjit.jit(lambda x, w, v: cnp.tanh(x @ w) @ v).lower(x, w, v).compile().as_text()
    assert "in place" in text


def test_donated_argument_is_reused():
    x = rng.standard_normal((200, 200))
    w = rng.standard_normal((200, 200))

    def f(x, w):
        return cnp.tanh(cnp.exp(x) @ w).sum(axis=0)

    plain = analysis(f, x, w)
    donated = analysis(f, x, w, donate_argnums=0)
    assert plain.alias_size_in_bytes == 0
    assert donated.alias_size_in_bytes == x.nbytes
    assert donated.temp_size_in_bytes == plain.temp_size_in_bytes - x.nbytes
    want = np.tanh(np.exp(x) @ w).sum(axis=0)
    got = cjit.jit(f, donate_argnums=0)(x.copy(), w)
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("name", ["chain", "sum", "softmax", "layer_norm", "mlp", "donated"])
def test_measured_peak_equals_planned_peak(name):
    x = rng.standard_normal((128, 64))
    ws = [rng.standard_normal(s) * 0.1 for s in [(64, 96), (96, 96), (96, 96), (96, 10)]]
    cases = {
        "chain": (cjit.jit(chain10), (X,)),
        "sum": (cjit.jit(lambda a, b: (a * b).sum(axis=0)), (X, Y)),
        "softmax": (cjit.jit(softmax), (X,)),
        "layer_norm": (cjit.jit(layer_norm), (X,)),
        "mlp": (cjit.jit(mlp_forward), (x, *ws)),
        "donated": (cjit.jit(lambda a, w: cnp.tanh(cnp.exp(a) @ w).sum(axis=0), donate_argnums=0),
                    (rng.standard_normal((96, 96)), ws[1])),
    }
    fn, args = cases[name]
    planned = fn.lower(*args).compile().memory_analysis().peak_memory_in_bytes
    fn(*[a.copy() for a in args])  # compile outside the measurement (a donated argument is consumed)
    assert measured_peak(fn, *args) == planned


def test_peak_live_names_ops_and_source_lines():
    ma = analysis(lambda x, w: cnp.tanh(x @ w).sum(axis=1), X, Y.T.copy())
    ops = {b.op for b in ma.peak_live}
    assert "param" in ops
    for b in ma.peak_live:
        assert b.size > 0 and ":" in b.source


def test_as_text_shows_kernels_and_plan():
    text = cjit.jit(softmax).lower(X).compile().as_text()
    assert "kernel 0" in text and "stages" in text
    assert "reduce_max" in text and "reduce_sum" in text
    assert "offset" in text and "peak" in text


def test_cost_analysis_counts_matmul_flops():
    a, b = rng.standard_normal((16, 32)), rng.standard_normal((32, 8))
    cost = cjit.jit(lambda a, b: a @ b).lower(a, b).compile().cost_analysis()
    assert cost["flops"] == 2 * 16 * 32 * 8
    assert cost["bytes_accessed"] == a.nbytes + b.nbytes + 16 * 8 * 8


def test_closed_over_array_is_not_copied():
    """Jitting many functions over one 200 MB array keeps one copy of it."""
    code = textwrap.dedent("""
        import numpy as np, cjit, cjit.numpy as cnp
        def rss():
            with open('/proc/self/statm') as f:
                return int(f.read().split()[1]) * 4096
        big = np.ones(25_000_000)          # 200 MB
        x = np.ones(4)
        start = rss()
        fns = []
        for i in range(6):
            f = cjit.jit(lambda x, i=i: x * i + cnp.sum(big))
            assert float(f(x)[0]) == 25_000_000.0 + i
            fns.append(f)
        grown = rss() - start
        print(grown)
        # six functions over it: any copy would add 200 MB; allow less than one
        # (sanitizer builds inflate RSS by tens of MB)
        assert grown < 150_000_000, grown
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("passes", ["-fuse", "-memplan", "-group", "-cse", "-cse,-fuse,-group,-memplan"])
def test_passes_off_change_nothing(passes):
    code = textwrap.dedent("""
        import numpy as np, cjit, cjit.numpy as cnp, cjit.nn
        rng = np.random.default_rng(1)
        x = rng.standard_normal((32, 48)); w = rng.standard_normal((48, 16))
        def f(x, w):
            h = cnp.tanh(x @ w)
            s = cjit.nn.softmax(h, axis=-1)
            return (s * 2 - 1).sum(axis=0), cjit.nn.log_softmax(x)[::2, 1:5], cnp.concatenate([x, x * x], axis=1)
        print(repr([a.tolist() for a in cjit.jit(f)(x, w)]))
        print(cjit.jit(f).lower(x, w).compile().memory_analysis().num_kernels)
    """)
    env = dict(os.environ)
    outs = {}
    for setting in ("", passes):
        env["CJIT_PASSES"] = setting
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        outs[setting] = r.stdout.split("\n")
    # equal up to the order of floating-point sums
    for a, b in zip(eval(outs[""][0]), eval(outs[passes][0])):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-12, atol=1e-12)
    if "fuse" in passes:
        assert int(outs[passes][1]) > int(outs[""][1])


def test_several_outputs_of_one_loop_are_one_kernel():
    x = X.astype(np.float64)
    ma = analysis(lambda a: (a * 2, a + 1, cnp.tanh(a)), x)
    assert ma.num_kernels == 1 and ma.temp_size_in_bytes == 0
    ma = analysis(lambda a: (a * 2, a.sum(axis=-1), cnp.exp(a).max(axis=-1)), x)
    assert ma.num_kernels == 1 and ma.temp_size_in_bytes == 0
    outs = cjit.jit(lambda a: (a * 2, a.sum(axis=-1), cnp.exp(a).max(axis=-1)))(x)
    for got, want in zip(outs, (x * 2, x.sum(-1), np.exp(x).max(-1))):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_matmul_epilogue_is_fused():
    x, w, b = rng.standard_normal((64, 32)), rng.standard_normal((32, 48)), rng.standard_normal(48)
    f = lambda x, w, b: cnp.maximum(x @ w + b, 0.0)
    ma = analysis(f, x, w, b)
    assert ma.num_kernels == 1
    assert ma.temp_size_in_bytes == 0      # the product is computed in the output array
    np.testing.assert_allclose(cjit.jit(f)(x, w, b), np.maximum(x @ w + b, 0), rtol=1e-12)


def test_donated_argument_passed_twice_is_refused():
    # its bytes may hold temporaries while the other argument still reads them
    f = cjit.jit(lambda a, b: cnp.tanh(a * 2.0) + b.sum(), donate_argnums=0)
    x = np.arange(12.0).reshape(3, 4)
    with pytest.raises(ValueError, match=r"donated .* shares memory"):
        f(x, x)
    with pytest.raises(ValueError, match=r"donated .* shares memory"):
        f(x, x[1:])
    # distinct arrays are fine, and a failed call leaves the cache usable
    y = x.copy()
    np.testing.assert_allclose(f(x.copy(), y), np.tanh(x * 2.0) + y.sum())
    np.testing.assert_allclose(f(x.copy(), y), np.tanh(x * 2.0) + y.sum())
    # the check is made on cached calls (the C fast path) and on Compiled too
    with pytest.raises(ValueError, match=r"argument 0 .* donated .* shares memory with argument 1"):
        f(x, x)
    compiled = f.lower(x, y).compile()
    with pytest.raises(ValueError, match=r"donated .* shares memory"):
        compiled(y, y)
    np.testing.assert_allclose(compiled(x.copy(), y), np.tanh(x * 2.0) + y.sum())


# ---- donation of memory the caller does not own for writing ----------------

def _donating():
    """A function whose plan puts a temporary in its donated argument x
    (alias_size_in_bytes == x.nbytes), and NumPy's answer."""
    w = np.random.default_rng(5).standard_normal((4, 4))
    f = lambda x: cnp.tanh(cnp.exp(x.reshape(250, 4)) @ w).sum(axis=0)
    want = lambda x: np.tanh(np.exp(np.asarray(x).reshape(250, 4)) @ w).sum(axis=0)
    return cjit.jit(f, donate_argnums=0), want


def _values():
    return np.linspace(-1.0, 1.0, 1000)


def _donation_warnings(record):
    return [w for w in record if issubclass(w.category, UserWarning)
            and "donated" in str(w.message) and "cannot be reused" in str(w.message)]


def test_owned_donated_argument_is_still_reused():
    f, want = _donating()
    x = _values()
    assert f.lower(x).compile().memory_analysis().alias_size_in_bytes == x.nbytes
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = f(x.copy())                     # first call
        y = x.copy()
        np.testing.assert_allclose(f(y), want(x), rtol=1e-12)   # cached call (C fast path)
        assert not np.array_equal(y, x)       # its bytes held a temporary
        v = np.concatenate([x, x])[:1000]      # a view of NumPy-owned memory
        f(v)
        assert not np.array_equal(v, x)
        out = cjit.jit(lambda a: a * 1.0)(x)   # a cjit output (its own block)
        f(out)
        assert out.is_deleted()               # a donated cjit.Array is deleted, as JAX's
    np.testing.assert_allclose(got, want(x), rtol=1e-12)
    assert _donation_warnings(record) == []


@pytest.mark.parametrize("path", ["jit", "compiled"])
def test_read_only_donated_arguments_are_not_written(path, tmp_path):
    f, want = _donating()
    x = _values()
    if path == "compiled":
        f = f.lower(x).compile()
    file = tmp_path / "x.npy"
    np.save(file, x)
    data = x.tobytes()
    readonly = x.copy()
    readonly.setflags(write=False)
    view_of_readonly = x.copy()
    view = view_of_readonly[:]
    view_of_readonly.setflags(write=False)   # the view stays writeable, its base is not
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(2):                    # the first call and a cached one
            frozen = np.frombuffer(data, dtype=np.float64)   # over an immutable bytes object
            np.testing.assert_allclose(f(frozen), want(x), rtol=1e-12)
            assert data == x.tobytes()
            mm = np.load(file, mmap_mode="r+")  # a writeable memory-mapped file
            np.testing.assert_allclose(f(mm), want(x), rtol=1e-12)
            del mm
            assert np.array_equal(np.load(file), x)
            np.testing.assert_allclose(f(readonly), want(x), rtol=1e-12)
            assert np.array_equal(readonly, x)
            np.testing.assert_allclose(f(view), want(x), rtol=1e-12)
            assert np.array_equal(view, x)
    found = _donation_warnings(record)
    assert len(found) == 1, [str(w.message) for w in record]   # once per compiled signature
    assert "argument 0" in str(found[0].message)
    if path == "jit":
        assert found[0].filename == __file__  # points at the caller, not at cjit


def test_donated_read_only_memory_map_does_not_crash(tmp_path):
    # Was: SIGSEGV, the plan wrote a temporary into the read-only mapping.
    file = tmp_path / "x.npy"
    x = _values()
    np.save(file, x)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import warnings
        import numpy as np, cjit, cjit.numpy as cnp
        w = np.random.default_rng(5).standard_normal((4, 4))
        f = cjit.jit(lambda x: cnp.tanh(cnp.exp(x.reshape(250, 4)) @ w).sum(axis=0),
                     donate_argnums=0)
        m = np.load({str(file)!r}, mmap_mode="r")
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            a, b = f(m), f(m)
        want = np.tanh(np.exp(np.asarray(m).reshape(250, 4)) @ w).sum(axis=0)
        np.testing.assert_allclose(a, want, rtol=1e-12)
        np.testing.assert_allclose(b, want, rtol=1e-12)
        print(len(record), "warning")
    """)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1 warning"
    assert np.array_equal(np.load(file), x)
