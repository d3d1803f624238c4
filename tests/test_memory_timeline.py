"""Compiled.memory_timeline(), cjit.plot_memory, memory_stats()'s code
counters and Jitted.clear_cache.

The timeline is held against the plan it reads: its maximum is
memory_analysis()'s peak to the byte, on random programs (the fuzz
generators of test_fuzz.py), their gradients with and without checkpoint,
donated arguments, the benchmark models, and with the memory planner off;
and its per-kernel figures add up from what each kernel allocates and
frees."""
import gc
import os
import sys

import numpy as np
import pytest

import cjit
import cjit.nn
import cjit.numpy as cnp
from cjit import checkpoint_policies as cp

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, note, settings  # noqa: E402

from test_fuzz import _SETTINGS, _env, programs, smooth_programs  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import workloads as W  # noqa: E402

_ALIGN = 64   # memplan.c's CJ_ARENA_ALIGN


def check_timeline(c):
    """Everything a timeline must satisfy against its own plan; returns it."""
    t = c.memory_timeline()
    m = c.memory_analysis()
    assert t.peak_bytes == m.peak_memory_in_bytes
    assert len(t) == m.num_kernels
    if len(t) == 0:
        assert t.peak_index is None
        return t
    top = t[t.peak_index]
    assert top.live_bytes == t.peak_bytes
    assert all((s.live_bytes, s.temp_bytes) <= (top.live_bytes, top.temp_bytes) for s in t)
    assert all((s.live_bytes, s.temp_bytes) < (top.live_bytes, top.temp_bytes)
               for s in t.steps[:t.peak_index])
    seen_alloc, seen_free = set(), set()
    temps = 0
    for i, s in enumerate(t):
        assert s.index == i and s.label and s.source and s.stages
        assert s.argument_bytes == m.argument_size_in_bytes
        assert s.output_bytes == m.output_size_in_bytes
        assert s.gap_bytes >= 0
        assert s.live_bytes == s.argument_bytes + s.output_bytes + s.temp_bytes + s.gap_bytes
        assert s.argument_bytes + s.output_bytes + s.temp_bytes + s.gap_bytes <= t.peak_bytes
        # what is live now: what was live before, less what the kernel
        # before freed, plus what this one allocates (aliases add nothing)
        temps += sum(b.size for b in s.allocates if b.alias_of is None)
        assert s.temp_bytes == temps, (i, s)
        temps -= sum(b.size for b in s.frees if b.alias_of is None)
        for b in s.allocates:
            assert b.kind == "temp" and b.id not in seen_alloc
            seen_alloc.add(b.id)
        for b in s.frees:
            assert b.id in seen_alloc and b.id not in seen_free
            seen_free.add(b.id)
        assert [b.size for b in s.allocates] == sorted((b.size for b in s.allocates), reverse=True)
    assert temps == 0 and seen_free == seen_alloc
    # the temporaries at the peak fit in the arena, which is no bigger than
    # their sum plus one alignment's slack each, unless the placement left holes
    k = t[t.peak_index]
    assert k.temp_bytes + k.gap_bytes == m.temp_size_in_bytes
    assert sum(b.size for b in t.peak_live) == \
        k.argument_bytes + k.output_bytes + k.temp_bytes
    return t


# ---------------------------------------------------------------------------
# the peak, exactly, on many programs

@settings(max_examples=40, **_SETTINGS)
@given(programs())
def test_timeline_peak_is_the_plan_on_random_programs(prog):
    note(prog.source)
    f = prog.function(cnp, cjit.nn)
    for donate in ((), tuple(range(len(prog.inputs)))):
        check_timeline(cjit.jit(f, donate_argnums=donate).lower(*prog.inputs).compile())


@settings(max_examples=15, **_SETTINGS)
@given(smooth_programs())
def test_timeline_peak_is_the_plan_on_random_gradients(prog):
    note(prog.source)
    f = prog.function(cnp, cjit.nn)

    def loss(*a):
        total = 0.0
        for o in f(*a):
            total = total + cnp.sum(o)
        return total

    for g in (cjit.grad(loss), cjit.grad(cjit.checkpoint(loss)),
              cjit.grad(cjit.checkpoint(loss, policy=cp.dots_saveable))):
        check_timeline(cjit.jit(g).lower(*prog.inputs).compile())
        check_timeline(cjit.jit(g, donate_argnums=0).lower(*prog.inputs).compile())


@settings(max_examples=10, **_SETTINGS)
@given(programs(max_steps=5))
def test_timeline_peak_is_the_plan_with_passes_off(prog):
    note(prog.source)
    f = prog.function(cnp, cjit.nn)
    for passes in ("-memplan", "-cse,-fuse,-group,-memplan"):
        with _env("CJIT_PASSES", passes):
            check_timeline(cjit.jit(f).lower(*prog.inputs).compile())


def _models():
    p, x, y = W.mlp_data()
    loss = W.mlp_loss(cnp, cjit.nn)
    step = W.mlp_train_step(cnp, cjit.nn, cjit.value_and_grad)
    yield "mlp step", cjit.jit(step), (p, x, y)
    yield "mlp step donated", cjit.jit(step, donate_argnums=0), (p, x, y)
    yield "mlp checkpoint", cjit.jit(cjit.grad(cjit.checkpoint(loss))), (p, x, y)
    yield "mlp dots_saveable", cjit.jit(cjit.grad(
        cjit.checkpoint(loss, policy=cp.dots_saveable))), (p, x, y)
    rp, xs, h0 = W.rnn_data()
    yield "rnn grad", cjit.jit(cjit.grad(W.rnn_loss(cnp, cjit.nn))), (rp, xs, h0)
    (ax,) = W.act_data(10 ** 4)
    yield "act grad donated", cjit.jit(cjit.grad(W.act_chain_loss(cnp, cjit.nn)),
                                       donate_argnums=0), (ax,)
    lp, X, ly = W.logreg_data()
    yield "logreg", cjit.jit(cjit.value_and_grad(W.logreg_loss(cnp, cjit.nn))), (lp, X, ly)
    kx, kc = W.kmeans_data()
    yield "kmeans donated", cjit.jit(W.kmeans_step(cnp, cjit.nn), donate_argnums=1), (kx, kc)


def test_timeline_peak_is_the_plan_on_the_benchmark_models():
    for name, f, args in _models():
        t = check_timeline(f.lower(*args).compile())
        assert len(t) > 0, name


def test_timeline_peak_is_the_plan_under_a_memory_budget():
    def loss(ps, x):
        h = x
        for w in ps:
            h = cnp.tanh(h @ w)
        return cnp.sum(h * h)

    rng = np.random.default_rng(0)
    ps = [rng.standard_normal((32, 32)).astype(np.float32) / 6 for _ in range(12)]
    x = rng.standard_normal((64, 32)).astype(np.float32)
    none = check_timeline(cjit.jit(cjit.grad(loss)).lower(ps, x).compile())
    budget = none.peak_bytes - 1     # something must be recomputed
    fitted = check_timeline(cjit.jit(cjit.grad(loss, memory_budget=budget)).lower(ps, x).compile())
    assert fitted.peak_bytes <= budget < none.peak_bytes


# ---------------------------------------------------------------------------
# what each kernel says

def test_timeline_names_the_users_lines_and_buffers():
    def f(x, w):
        h = x @ w                      # line A
        return cnp.tanh(h).sum(axis=0) + cnp.exp(h).max(axis=0)

    line = f.__code__.co_firstlineno + 1
    c = cjit.jit(f).lower(np.ones((64, 32)), np.ones((32, 16))).compile()
    t = check_timeline(c)
    here = os.path.abspath(__file__)
    assert t[0].label.startswith("matmul")
    assert t[0].source.split(", ")[0] == f"{here}:{line}"
    # the matmul's result: allocated by the first kernel, 64*16 float64s
    made = [b for s in t for b in s.allocates if b.op == "matmul"]
    assert len(made) == 1 and made[0].size == 64 * 16 * 8
    assert made[0].shape == (64, 16) and made[0].dtype == "float64"
    assert made[0].source == f"{here}:{line}"
    freed_at = [s.index for s in t if made[0] in s.frees]
    assert len(freed_at) == 1
    # the text has one line per kernel and marks the peak
    text = t.as_text()
    assert f"peak {t.peak_bytes:,} bytes" in text
    assert "+8,192 bytes float64[64, 16] temp from matmul" in text


def test_timeline_of_a_chain_rises_and_falls():
    # the gradient of a chain keeps every layer's activation: the live
    # temporaries grow through the forward pass and shrink in the backward
    def loss(ps, x):
        h = x
        for w in ps:
            h = cnp.tanh(h @ w)
        return cnp.sum(h * h)

    ps = [np.full((16, 16), 0.05, np.float32) for _ in range(6)]
    x = np.ones((32, 16), np.float32)
    t = check_timeline(cjit.jit(cjit.grad(loss)).lower(ps, x).compile())
    temps = [s.temp_bytes for s in t]
    top = temps.index(max(temps))
    assert 0 < top < len(t) - 1
    assert temps[0] < temps[top] and temps[-1] < temps[top]
    assert len(t.peak_live) >= 6


def test_in_place_and_donated_buffers_add_nothing():
    # exp(x) is computed over the donated x in place, and tanh over a
    # matmul's result: neither adds bytes (test_memory's examples)
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((100, 100)), rng.standard_normal((100, 100))

    def f(x, w):
        return cnp.tanh(cnp.exp(x) @ w).sum(axis=0)

    plain = check_timeline(cjit.jit(f).lower(x, w).compile())
    c = cjit.jit(f, donate_argnums=0).lower(x, w).compile()
    donated = check_timeline(c)
    assert c.memory_analysis().alias_size_in_bytes == x.nbytes
    assert donated.peak_bytes == plain.peak_bytes - x.nbytes
    exp_buf = [b for s in donated for b in s.allocates if b.op == "exp"]
    assert len(exp_buf) == 1 and exp_buf[0].size == x.nbytes
    (x_buf,) = [b for b in donated.peak_live if b.kind == "param" and b.id == exp_buf[0].alias_of]
    assert x_buf.size == x.nbytes
    # tanh(x @ w) written over the matmul's result, then read by a matmul
    v = rng.standard_normal((100, 8))
    t = check_timeline(cjit.jit(lambda x, w, v: cnp.tanh(x @ w) @ v).lower(x, w, v).compile())
    tanh_buf = [b for s in t for b in s.allocates if b.op == "tanh"]
    matmul_buf = [b for s in t for b in s.allocates if b.op == "matmul"]
    assert len(tanh_buf) == 1 and tanh_buf[0].alias_of == matmul_buf[0].id
    assert t[t.peak_index].temp_bytes == x.nbytes      # one activation, not two


def test_timeline_of_a_function_without_kernels():
    # returning an argument unchanged still makes a copy kernel, or none:
    # either way the figures are the plan's
    for f in (lambda x: x, lambda x: (x, x * 1)):
        check_timeline(cjit.jit(f).lower(np.ones(5)).compile())


def test_timeline_after_release_raises():
    c = cjit.jit(lambda x: x + 1).lower(np.ones(3)).compile()
    c._exe.release()
    with pytest.raises(RuntimeError, match="release"):
        c.memory_timeline()


# ---------------------------------------------------------------------------
# plot_memory

def _png(path):
    data = path.read_bytes()
    return len(data) > 1000 and data[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_memory_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")

    def loss(ps, x):
        h = x
        for w in ps:
            h = cnp.tanh(h @ w)
        return cnp.sum(h * h)

    ps = [np.full((16, 16), 0.05, np.float32) for _ in range(4)]
    x = np.ones((32, 16), np.float32)
    c = cjit.jit(cjit.grad(loss)).lower(ps, x).compile()
    one = tmp_path / "one.png"
    assert cjit.plot_memory(c, one) is None
    assert _png(one)
    both = tmp_path / "both.png"
    cjit.plot_memory({"none": c, "checkpoint": cjit.jit(cjit.grad(cjit.checkpoint(loss)))
                      .lower(ps, x).compile()}, str(both), title="schedules", top=2)
    assert _png(both)
    pairs = tmp_path / "pairs.png"
    cjit.plot_memory([("timeline", c.memory_timeline())], pairs)
    assert _png(pairs)
    tiny = tmp_path / "tiny.png"
    cjit.plot_memory(cjit.jit(lambda v: v + 1).lower(np.ones(2)).compile(), tiny)
    assert _png(tiny)


def test_plot_memory_bad_input(tmp_path):
    pytest.importorskip("matplotlib")
    with pytest.raises(TypeError, match="Compiled"):
        cjit.plot_memory(cjit.jit(lambda v: v), tmp_path / "x.png")
    with pytest.raises(TypeError, match="pairs"):
        cjit.plot_memory([1, 2], tmp_path / "x.png")
    with pytest.raises(ValueError, match="nothing to plot"):
        cjit.plot_memory({}, tmp_path / "x.png")
    c = cjit.jit(lambda v: v + 1).lower(np.ones(2)).compile()
    with pytest.raises(ValueError, match="top"):
        cjit.plot_memory(c, tmp_path / "x.png", top=-1)
    assert not (tmp_path / "x.png").exists()


def test_plot_memory_without_matplotlib(monkeypatch, tmp_path):
    # an import of matplotlib fails as when it is not installed
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    c = cjit.jit(lambda v: v + 1).lower(np.ones(2)).compile()
    with pytest.raises(ImportError, match=r"matplotlib.*pip install matplotlib"):
        cjit.plot_memory(c, tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()
    assert len(c.memory_timeline()) >= 1     # the numbers need no matplotlib


# ---------------------------------------------------------------------------
# memory_stats: code bytes and live executables; Jitted.clear_cache

def _settle():
    gc.collect()
    return cjit.memory_stats()


def test_memory_stats_counts_code_and_executables(fresh_caches):
    before = _settle()
    for key in ("bytes_in_use", "peak_bytes_in_use", "code_bytes", "live_executables"):
        assert isinstance(before[key], int), key
    jfs = [cjit.jit(lambda x, k=k: x * k + 1.5) for k in range(3)]
    exes = []
    for jf in jfs:
        jf(np.ones(7))
        exes.append(next(iter(jf._cache.values())).exe)
    after = _settle()
    assert after["live_executables"] == before["live_executables"] + 3
    assert after["code_bytes"] == before["code_bytes"] + sum(e.code_bytes for e in exes)
    # a Compiled holds its executable after the cache let go of it
    held = jfs[0].lower(np.ones(7)).compile()
    assert _settle()["live_executables"] == after["live_executables"] + 1
    del exes
    for jf in jfs:
        jf.clear_cache()
    dropped = _settle()
    assert dropped["live_executables"] == before["live_executables"] + 1
    assert dropped["code_bytes"] == before["code_bytes"] + held.code_bytes
    held._exe.release()
    assert _settle()["live_executables"] == before["live_executables"]
    assert _settle()["code_bytes"] == before["code_bytes"]


def test_clear_cache_recompiles_that_function_only(fresh_caches):
    f = cjit.jit(lambda x: x * 2 - 1)
    g = cjit.jit(lambda x: x * 3 - 1)
    x = np.arange(4.0)
    f(x), g(x), f(x), g(x)     # the second calls are fast-path hits
    assert f._fast_entries == 1 and g._fast_entries == 1
    compiles = cjit.cache_info()["compiles"]
    live = _settle()["live_executables"]
    f.clear_cache()
    assert f._fast_entries == 0 and f.cache_info()["entries"] == 0
    assert g._fast_entries == 1 and g.cache_info()["entries"] == 1
    assert _settle()["live_executables"] == live - 1
    assert np.array_equal(g(x), x * 3 - 1)
    assert cjit.cache_info()["compiles"] == compiles          # g's entry stayed
    assert np.array_equal(f(x), x * 2 - 1)
    assert cjit.cache_info()["compiles"] == compiles + 1      # f compiled again
    assert _settle()["live_executables"] == live
    assert f.cache_info()["misses"] == 2 and g.cache_info()["misses"] == 1


_N_GPUS, _NO_GPU_WHY = cjit._cjit.cuda_status()


@pytest.mark.skipif(_N_GPUS == 0, reason=f"no CUDA device: {_NO_GPU_WHY}")
def test_timeline_of_a_gpu_function_is_its_plan():
    f = cjit.jit(lambda x, w: cnp.tanh(x @ w).sum(axis=0), device="cuda")
    c = f.lower(np.ones((64, 32), np.float32), np.ones((32, 16), np.float32)).compile()
    check_timeline(c)
