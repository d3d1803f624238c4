"""memory_budget through cjit.lax.scan: the budget search splits a scan into
nested scans so the backward pass keeps every k-th carry and recomputes the
segments between them.  The plan is exact (measured == planned), the
budget is met, and the gradient is the unsplit one."""
import gc

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp
from cjit import lax

H, N = 64, 10_000
RNG = np.random.default_rng(0)
W = RNG.standard_normal((H, H)) * 0.3 / np.sqrt(H)
U = RNG.standard_normal((1, H))
XS = RNG.standard_normal((N, 1))


def rnn_loss(W, U, xs):
    def step(h, x):
        h = cnp.tanh(h @ W + x @ U)
        return h, cnp.sum(h)
    h, ys = lax.scan(step, cnp.zeros(H), xs)
    return cnp.sum(ys) + cnp.sum(h * h)


def measured_peak(fn, *args):
    fn(*args)
    gc.collect()
    base = cjit.memory_stats()["bytes_in_use"]
    cjit.reset_peak_memory_stats()
    out = fn(*args)
    return cjit.memory_stats()["peak_bytes_in_use"] - base, out


def gradient_within(loss, budget, *args):
    """The gradient under memory_budget=budget, after checking that the plan
    fits the budget and that the run's measured peak is the plan's."""
    fit = cjit.jit(cjit.grad(loss, argnums=(0, 1), memory_budget=budget))
    planned = fit.lower(*args).compile().memory_analysis().peak_memory_in_bytes
    assert planned <= budget
    measured, got = measured_peak(fit, *args)
    assert measured == planned
    return got


def test_a_budget_far_below_storing_every_step_is_met_exactly():
    full = cjit.jit(cjit.grad(rnn_loss, argnums=(0, 1)))
    peak = full.lower(W, U, XS).compile().memory_analysis().peak_memory_in_bytes
    # storing every step's carry dominates: 10,000 x 64 float64
    assert peak > N * H * 8
    got = gradient_within(rnn_loss, peak // 8, W, U, XS)
    want = full(W, U, XS)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


def test_a_budget_below_the_floor_names_it():
    f = cjit.jit(cjit.grad(rnn_loss, argnums=(0, 1), memory_budget=20_000))
    with pytest.raises(cjit.errors.MemoryBudgetError, match="floor of [0-9]+ bytes"):
        f.lower(W, U, XS)


@pytest.mark.parametrize("n", [997, 1000])      # a prime length leaves a tail scan
@pytest.mark.parametrize("reverse", [False, True])
def test_split_scans_agree_with_the_plain_one(n, reverse):
    """The index a fori_loop body sees, reverse order, a tail segment, and
    the stacked ys all survive the split (forced here, as a search does)."""
    from cjit import _budget
    xs = XS[:n]

    def loss(W, xs):
        def body(i, h):
            return cnp.tanh(h @ W + xs[0, 0] * 0.1 + i * 1e-3)
        h = lax.fori_loop(0, n, body, cnp.ones(H) * 0.1)
        h2, ys = lax.scan(lambda c, x: (cnp.sin(c + x), c[0] * x[0]), h, xs, reverse=reverse)
        return cnp.sum(ys * cnp.arange(n)) + cnp.sum(h2)

    g = cjit.jit(cjit.value_and_grad(loss))
    want = g(W, xs)
    for levels in (2, 3):
        lowered = _budget.lower_following(cjit.jit(cjit.value_and_grad(loss)), "scans", levels, None, W, xs)
        assert lowered.as_text().count("scan") > g.lower(W, xs).as_text().count("scan")
        got = lowered.compile()(W, xs)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-10)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-8, atol=1e-10)


def test_stacked_outputs_nobody_reads_are_dropped():
    """The backward scan stacks a cotangent per float xs; for data that is
    not differentiated nobody reads it, so it is neither computed nor
    given memory (simplify drops the scan's unread ys)."""
    xs = RNG.standard_normal((2000, 256))
    P = RNG.standard_normal((256, 8)) * 0.1

    def loss(P, xs):
        h, _ = lax.scan(lambda c, x: (cnp.tanh(c + x @ P), None), cnp.zeros(8), xs)
        return cnp.sum(h)
    m = cjit.jit(cjit.grad(loss)).lower(P, xs).compile().memory_analysis()
    assert m.temp_size_in_bytes < xs.nbytes // 4
    eps, d = 1e-6, np.zeros_like(P)
    d[3, 2] = eps
    fd = (cjit.jit(loss)(P + d, xs) - cjit.jit(loss)(P - d, xs)) / (2 * eps)
    np.testing.assert_allclose(cjit.jit(cjit.grad(loss))(P, xs)[3, 2], fd, rtol=1e-5)


def test_a_thousand_step_batched_rnn_at_a_tenth_of_the_full_peak():
    """The issue's case: a float32 tanh RNN over 1,000 steps (a batch of 16,
    hidden 64) under a budget of 1/10 of storing every step.  The weights
    are read by the split scans where they are, not copied, and so is the
    input sequence, which the split only reshapes."""
    n, batch, hidden = 1000, 16, 64
    r = np.random.default_rng(5)
    w = (r.standard_normal((hidden, hidden)) * 0.3 / np.sqrt(hidden)).astype(np.float32)
    u = r.standard_normal((1, hidden)).astype(np.float32)
    xs = r.standard_normal((n, batch, 1)).astype(np.float32)

    def loss(w, u, xs):
        def step(h, x):
            h = cnp.tanh(h @ w + x @ u)
            return h, cnp.sum(h)
        h, ys = lax.scan(step, cnp.zeros((batch, hidden), np.float32), xs)
        return cnp.sum(ys) + cnp.sum(h * h)
    full = cjit.jit(cjit.grad(loss, argnums=(0, 1)))
    peak = full.lower(w, u, xs).compile().memory_analysis().peak_memory_in_bytes
    assert peak > n * batch * hidden * 4       # every step's carry is kept
    got = gradient_within(loss, peak // 10, w, u, xs)
    # against a NumPy loop: the forward pass, then backpropagation through time
    hs = [np.zeros((batch, hidden), np.float64)]
    for t in range(n):
        hs.append(np.tanh(hs[-1] @ w + xs[t] @ u))
    gw, gu = np.zeros((hidden, hidden)), np.zeros((1, hidden))
    dh = 2 * hs[-1]
    for t in range(n, 0, -1):
        dz = (dh + 1.0) * (1 - hs[t] ** 2)
        gw += hs[t - 1].T @ dz
        gu += xs[t - 1].T @ dz
        dh = dz @ w.T
    np.testing.assert_allclose(got[0], gw, rtol=2e-3, atol=2e-3 * np.abs(gw).max())
    np.testing.assert_allclose(got[1], gu, rtol=2e-3, atol=2e-3 * np.abs(gu).max())
