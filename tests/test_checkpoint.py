"""Gradient checkpointing: cjit.checkpoint with its policies, memory_budget,
saved_residuals, and what the compiled plan says about saved and
recomputed values.  Memory figures come from memory_analysis() (exact) and
are held against memory_stats() measured around a call."""
import gc

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp
from cjit import checkpoint_policies as cp

rng = np.random.default_rng(0)


def layer(h, w1, w2):
    return cnp.tanh(cnp.tanh(h @ w1) @ w2)


def make_params(depth, width=16):
    return [(rng.standard_normal((width, width)) * 0.3, rng.standard_normal((width, width)) * 0.3)
            for _ in range(depth)]


def make_loss(mode="none", policy=None, segment=4):
    """A deep MLP loss; mode: none, each (checkpoint per layer), segments."""
    def loss(params, x):
        h = x
        if mode == "segments":
            for s in range(0, len(params), segment):
                def run(h, ps=params[s:s + segment]):
                    for w1, w2 in ps:
                        h = layer(h, w1, w2)
                    return h
                h = cjit.checkpoint(run, policy=policy)(h)
        else:
            for w1, w2 in params:
                h = cjit.checkpoint(layer, policy=policy)(h, w1, w2) if mode == "each" else layer(h, w1, w2)
        return (h * h).mean()
    return loss


def analysis(f, *args):
    return cjit.jit(f).lower(*args).compile().memory_analysis()


def close(a, b, rtol=1e-12):
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            np.testing.assert_allclose(u, v, rtol=rtol, atol=1e-14)


X = rng.standard_normal((512, 16))
P8 = make_params(8)


@pytest.mark.parametrize("policy", [None, cp.everything_saveable, cp.nothing_saveable, cp.dots_saveable],
                         ids=["default", "everything", "nothing", "dots"])
@pytest.mark.parametrize("mode", ["each", "segments"])
def test_gradients_agree_with_and_without_checkpointing(mode, policy):
    want = cjit.jit(cjit.grad(make_loss()))(P8, X)
    got = cjit.jit(cjit.grad(make_loss(mode, policy)))(P8, X)
    close(got, want)


def test_checkpoint_outside_differentiation_is_the_function():
    f = cjit.checkpoint(lambda a: cnp.sin(a) * 2)
    np.testing.assert_allclose(f(np.arange(3.0)), np.sin(np.arange(3.0)) * 2)
    np.testing.assert_allclose(cjit.jit(f)(np.arange(3.0)), np.sin(np.arange(3.0)) * 2)
    assert cjit.remat is cjit.checkpoint


def test_value_and_grad_through_checkpoint_regions():
    v0, g0 = cjit.jit(cjit.value_and_grad(make_loss()))(P8, X)
    v1, g1 = cjit.jit(cjit.value_and_grad(make_loss("each")))(P8, X)
    np.testing.assert_allclose(v0, v1, rtol=1e-14)
    close(g0, g1)


def test_grad_of_grad_through_checkpoint():
    f = lambda x: cjit.checkpoint(lambda y: cnp.sin(y) * y ** 3)(x)
    x = 1.3
    want = -np.sin(x) * x ** 3 + 6 * x ** 2 * np.cos(x) + 6 * x * np.sin(x)
    np.testing.assert_allclose(cjit.grad(cjit.grad(f))(x), want, rtol=1e-12)


def test_checkpoint_per_layer_lowers_the_peak():
    none = analysis(cjit.grad(make_loss()), P8, X)
    each = analysis(cjit.grad(make_loss("each")), P8, X)
    assert each.peak_memory_in_bytes < none.peak_memory_in_bytes
    assert each.temp_size_in_bytes < none.temp_size_in_bytes


def test_everything_saveable_changes_nothing():
    none = analysis(cjit.grad(make_loss()), P8, X)
    kept = analysis(cjit.grad(make_loss("each", cp.everything_saveable)), P8, X)
    assert kept.peak_memory_in_bytes == none.peak_memory_in_bytes


def plan_peak(f, *args):
    """The peak of the plan compile() would make, without running LLVM
    (the oracle memory_budget uses; test_plan_peak_is_the_compiled_peak
    holds the two together)."""
    return cjit.jit(f).lower(*args)._lowered.plan_peak()


def test_plan_peak_is_the_compiled_peak():
    f = cjit.grad(make_loss("segments"))
    assert plan_peak(f, P8, X) == analysis(f, P8, X).peak_memory_in_bytes


def test_sqrt_schedule_grows_sublinearly():
    x = rng.standard_normal((1024, 8))
    peaks = {}
    for depth in (16, 64):
        params = make_params(depth, width=8)
        seg = int(round(depth ** 0.5))
        peaks[depth] = plan_peak(cjit.grad(make_loss("segments", segment=seg)), params, x)
    plain16 = plan_peak(cjit.grad(make_loss()), make_params(16, width=8), x)
    plain64 = plan_peak(cjit.grad(make_loss()), make_params(64, width=8), x)
    assert plain64 > 3.5 * plain16          # without checkpointing: linear in depth
    assert peaks[64] < 3 * peaks[16]         # sqrt(depth) segments: well under 4x


def test_names_policies():
    def loss(params, x):
        h = x
        for w1, w2 in params:
            def lay(h, w1=w1, w2=w2):
                a = cjit.checkpoint_name(cnp.tanh(h @ w1), "inner")
                return cnp.tanh(a @ w2)
            h = cjit.checkpoint(lay, policy=policy)(h)
        return (h * h).mean()

    P4 = P8[:4]
    want = cjit.jit(cjit.grad(make_loss()))(P4, X)
    temps = {}
    for name, policy in [("only", cp.save_only_these_names("inner")),
                         ("except", cp.save_anything_except_these_names("inner")),
                         ("nothing", cp.nothing_saveable)]:
        close(cjit.jit(cjit.grad(loss))(P4, X), want)
        temps[name] = plan_peak(cjit.grad(loss), P4, X)
    # keeping the named inner activations costs more than recomputing them,
    # and keeping everything but them costs at least as much again
    assert temps["only"] > temps["nothing"]
    assert temps["except"] >= temps["only"]
    # the named value itself is kept, not recomputed: fewer recomputed tanh
    recomputed = {}
    for name, policy in [("only", cp.save_only_these_names("inner")), ("nothing", cp.nothing_saveable)]:
        text = cjit.jit(cjit.grad(loss)).lower(P4, X).as_text()
        recomputed[name] = sum(1 for line in text.splitlines() if "tanh(" in line and "recomputed" in line)
    assert recomputed["only"] < recomputed["nothing"]


def test_memory_budget_feasible_is_met():
    none = analysis(cjit.grad(make_loss()), P8, X)
    budget = none.argument_size_in_bytes + none.output_size_in_bytes + none.temp_size_in_bytes // 2
    f = cjit.grad(make_loss(), memory_budget=budget)
    ma = analysis(f, P8, X)
    assert ma.peak_memory_in_bytes <= budget
    close(cjit.jit(f)(P8, X), cjit.jit(cjit.grad(make_loss()))(P8, X))
    # also without an enclosing jit
    close(f(P8, X), cjit.jit(cjit.grad(make_loss()))(P8, X))


def test_memory_budget_that_fits_already_changes_nothing():
    none = analysis(cjit.grad(make_loss()), P8, X)
    ma = analysis(cjit.grad(make_loss(), memory_budget=none.peak_memory_in_bytes), P8, X)
    assert ma.peak_memory_in_bytes == none.peak_memory_in_bytes


def test_memory_budget_impossible_raises_with_the_minimum():
    f = cjit.jit(cjit.grad(make_loss(), memory_budget=1000))
    with pytest.raises(cjit.errors.MemoryBudgetError) as info:
        f(P8, X)
    assert isinstance(info.value, ValueError)
    assert "smallest peak" in str(info.value) and "1000" in str(info.value)
    assert f.cache_info()["entries"] == 0
    # the next good call works
    close(cjit.jit(cjit.grad(make_loss()))(P8, X), cjit.jit(cjit.grad(make_loss("each")))(P8, X))


def test_memory_budget_must_be_positive_bytes():
    with pytest.raises(TypeError):
        cjit.grad(make_loss(), memory_budget=-5)
    with pytest.raises(TypeError):
        cjit.value_and_grad(make_loss(), memory_budget="1MB")


@pytest.mark.parametrize("mode", ["each", "segments", "budget"])
def test_measured_peak_equals_plan_for_checkpointed_gradients(mode):
    if mode == "budget":
        none = analysis(cjit.grad(make_loss()), P8, X)
        f = cjit.jit(cjit.grad(make_loss(), memory_budget=none.peak_memory_in_bytes * 3 // 4))
    else:
        f = cjit.jit(cjit.grad(make_loss(mode)))
    planned = f.lower(P8, X).compile().memory_analysis().peak_memory_in_bytes
    f(P8, X)
    gc.collect()
    base = cjit.memory_stats()["bytes_in_use"]
    cjit.reset_peak_memory_stats()
    out = f(P8, X)
    assert cjit.memory_stats()["peak_bytes_in_use"] - base == planned
    del out


def test_saved_residuals_lists_what_is_kept():
    plain = cjit.saved_residuals(make_loss(), P8, X)
    each = cjit.saved_residuals(make_loss("each"), P8, X)
    assert 0 < len(each) < len(plain)
    for r in each:
        assert r.dtype == np.float64
        assert len(r.shape) == 2
        assert "test_checkpoint.py:" in r.source or r.op == "name"


def test_as_text_marks_saved_and_recomputed():
    text = cjit.jit(cjit.grad(make_loss("each"))).lower(P8, X).compile().as_text()
    assert "recomputed for the backward pass" in text
    assert "saved for the backward pass" in text
    graph = cjit.jit(cjit.grad(make_loss("each"))).lower(P8, X).as_text()
    assert "recomputed" in graph
    plain = cjit.jit(cjit.grad(make_loss())).lower(P8, X).compile().as_text()
    assert "recomputed" not in plain


def test_recompute_cost_shows_in_cost_analysis():
    none = cjit.jit(cjit.grad(make_loss())).lower(P8, X).compile().cost_analysis()
    each = cjit.jit(cjit.grad(make_loss("each"))).lower(P8, X).compile().cost_analysis()
    assert each["flops"] > none["flops"]


def test_bad_policy_is_a_type_error():
    with pytest.raises(TypeError):
        cjit.checkpoint(lambda x: x, policy="nothing")
