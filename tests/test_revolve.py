"""memory_budget's binomial checkpointing (Revolve) over a forward chain:
every budget from the floor to the unconstrained peak is met, measured
peaks equal the plan, gradients are bitwise those of the unscheduled
gradient, and budgets below the floor are refused naming it.  The
schedule's cost is held against Griewank's closed form."""
import gc
import re
from math import comb

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp
from cjit import _budget

WIDTH, BATCH = 16, 32


def mlp_loss(params, x):
    h = x
    for w, b in params:
        h = cnp.tanh(h @ w + b)
    return (h * h).mean()


def make(depth, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, WIDTH)).astype(np.float32)
    params = [((rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32),
               (rng.standard_normal(WIDTH) * 0.1).astype(np.float32)) for _ in range(depth)]
    return params, x


def floor_of(params, x):
    """The floor, as the refusal of a 1-byte budget names it."""
    with pytest.raises(cjit.errors.MemoryBudgetError) as info:
        cjit.jit(cjit.grad(mlp_loss, memory_budget=1)).lower(params, x)
    return int(re.search(r"floor of (\d+) bytes", str(info.value)).group(1))


def sweep(params, x):
    peak = cjit.jit(cjit.grad(mlp_loss)).lower(params, x).compile() \
        .memory_analysis().peak_memory_in_bytes
    floor = floor_of(params, x)
    assert floor < peak
    return floor, peak, [floor + (peak - floor) * k // 9 for k in range(10)]


def measured_peak(f, *args):
    f(*args)
    gc.collect()
    base = cjit.memory_stats()["bytes_in_use"]
    cjit.reset_peak_memory_stats()
    out = f(*args)
    return cjit.memory_stats()["peak_bytes_in_use"] - base, out


def assert_bitwise(got, want):
    for (gw, gb), (ww, wb) in zip(got, want):
        assert np.array_equal(gw, ww) and np.array_equal(gb, wb)


@pytest.mark.parametrize("depth", [8, 32])
def test_every_budget_of_the_sweep_is_met_measured_and_bitwise(depth):
    params, x = make(depth)
    want = cjit.jit(cjit.grad(mlp_loss))(params, x)
    floor, peak, budgets = sweep(params, x)
    planned_peaks = []
    for budget in budgets:
        f = cjit.jit(cjit.grad(mlp_loss, memory_budget=budget))
        planned = f.lower(params, x).compile().memory_analysis().peak_memory_in_bytes
        assert planned <= budget
        measured, got = measured_peak(f, params, x)
        assert measured == planned
        assert_bitwise(got, want)
        planned_peaks.append(planned)
    assert planned_peaks[0] == floor and planned_peaks[-1] == peak
    # more memory never buys a higher peak than the budget before it allowed
    assert planned_peaks == sorted(planned_peaks)


def test_depth_64_sweep_is_met_by_the_plan_and_one_budget_measured():
    # every budget through the exact plan (the oracle compile uses); one
    # compiled and measured (compiling the floor's schedule of a depth-64
    # chain takes half a minute)
    params, x = make(64)
    floor, peak, budgets = sweep(params, x)
    for budget in budgets:
        lowered = cjit.jit(cjit.grad(mlp_loss, memory_budget=budget)).lower(params, x)
        assert lowered._lowered.plan_peak() <= budget
    f = cjit.jit(cjit.grad(mlp_loss, memory_budget=budgets[4]))
    planned = f.lower(params, x).compile().memory_analysis().peak_memory_in_bytes
    assert planned <= budgets[4]
    measured, got = measured_peak(f, params, x)
    assert measured == planned
    assert_bitwise(got, cjit.jit(cjit.grad(mlp_loss))(params, x))


def test_below_the_floor_is_refused_naming_the_floor():
    params, x = make(8)
    floor = floor_of(params, x)
    f = cjit.jit(cjit.grad(mlp_loss, memory_budget=floor - 1))
    with pytest.raises(cjit.errors.MemoryBudgetError) as info:
        f(params, x)
    assert f"floor of {floor} bytes" in str(info.value)
    assert f"memory_budget={floor - 1}" in str(info.value)
    assert f.cache_info()["entries"] == 0
    ma = cjit.jit(cjit.grad(mlp_loss, memory_budget=floor)).lower(params, x).compile().memory_analysis()
    assert ma.peak_memory_in_bytes == floor


def test_the_floor_is_weights_gradients_and_four_activations():
    # what the floor is made of, in this model: the arguments (weights and
    # the batch), the gradients (outputs), and the arena holding the held
    # ends of the chain, the cotangent and one layer's working set
    params, x = make(32)
    floor = floor_of(params, x)
    weights = sum(w.nbytes + b.nbytes for w, b in params)
    activation = BATCH * WIDTH * 4
    assert floor == weights + x.nbytes + weights + 4 * activation


def test_the_chain_is_the_activations_from_the_batch_on():
    params, x = make(8)
    lowered = cjit.jit(cjit.grad(mlp_loss)).lower(params, x)._lowered
    chain = lowered.forward_chain()
    # forward_values numbers the traced graph's computed values as the chain
    # does (as_text shows the simplified graph, numbered anew)
    computed = dict(lowered.forward_values())
    assert chain[0] not in computed                 # the batch, a parameter
    assert [computed.get(i) for i in chain[1:]] == ["tanh"] * 8


def test_a_graph_without_a_chain_still_uses_the_candidates():
    # two branches live side by side: no single value crosses the forward pass
    def loss(w, x):
        a, b = x, x * 2.0
        for _ in range(6):
            a, b = cnp.tanh(a @ w + b), cnp.tanh(b @ w - a)
        return (a * b).mean()
    rng = np.random.default_rng(1)
    w = rng.standard_normal((WIDTH, WIDTH)).astype(np.float32) / 4
    x = rng.standard_normal((BATCH, WIDTH)).astype(np.float32)
    assert len(cjit.jit(cjit.grad(loss)).lower(w, x)._lowered.forward_chain()) < 3   # no layers
    peak = cjit.jit(cjit.grad(loss)).lower(w, x).compile().memory_analysis().peak_memory_in_bytes
    with pytest.raises(cjit.errors.MemoryBudgetError) as info:
        cjit.jit(cjit.grad(loss, memory_budget=1)).lower(w, x)
    least = int(re.search(r"floor of (\d+) bytes", str(info.value)).group(1))
    assert least < peak
    f = cjit.jit(cjit.grad(loss, memory_budget=least))
    assert f.lower(w, x).compile().memory_analysis().peak_memory_in_bytes == least
    assert np.array_equal(f(w, x), cjit.jit(cjit.grad(loss))(w, x))


def griewank_advances(steps, snapshots):
    """Griewank's minimal number of forward steps to reverse `steps` steps
    with `snapshots` checkpoints (the start's included): r*l - C(s+r, r-1),
    r the least repetition number with C(s+r, s) >= l."""
    r = 0
    while comb(snapshots + r, snapshots) < steps:
        r += 1
    return r * steps - comb(snapshots + r, r - 1) if r else 0


def test_schedule_costs_match_griewanks_closed_form():
    T = _budget._revolve_tables(40)[0]
    for steps in range(1, 41):
        for slots in range(0, 39):
            assert T[steps][slots] == griewank_advances(steps, slots + 1), (steps, slots)


def simulate(n, keep, stores):
    """Runs a schedule: (advances, most positions held at once), checking
    that each layer finds its input held."""
    held = {p for p in range(n + 1) if keep[p]}
    advances, most, k = 0, 0, 0
    for i in range(n, 0, -1):
        held = {p for p in held if p <= i}
        while k < len(stores) and stores[k][0] == i:
            m = stores[k][1]
            advances += m - max(p for p in held if p < m)
            held.add(m)
            k += 1
        assert i - 1 in held
        most = max(most, len(held))
    assert k == len(stores)
    return advances, most


@pytest.mark.parametrize("n", [2, 3, 8, 31, 63])
def test_schedules_do_what_their_cost_says(n):
    for slots in sorted({0, 1, 2, 3, n // 2, max(n - 2, 0)}):
        keep, stores = _budget.revolve_schedule(n, slots)
        advances, most = simulate(n, keep, stores)
        assert advances == _budget.revolve_cost(n, slots)
        # the slots, the chain's start, the layer's two ends
        assert most <= slots + 3
    assert _budget.revolve_cost(n, 0) == n * (n - 1) // 2 - (n - 1)   # the forward pass keeps n-1


def test_identity_of_a_shared_weight_is_not_copied():
    # a weight read by many layers (an RNN's): its gradient's identity node
    # is read through, not stored in a temporary by a copy kernel
    def loss(w, x):
        h = x
        for _ in range(8):
            h = cnp.tanh(h @ w)
        return (h * h).mean()
    rng = np.random.default_rng(2)
    w = rng.standard_normal((WIDTH, WIDTH)).astype(np.float32) / 4
    x = rng.standard_normal((BATCH, WIDTH)).astype(np.float32)
    text = cjit.jit(cjit.grad(loss)).lower(w, x).compile().as_text()
    assert ": copy " not in text


def test_trace_vjp_refuses_a_chain_that_does_not_fit():
    from cjit.api import current_trace

    def f(x):
        tr = current_trace()
        first = tr.mark()
        y = cnp.tanh(cnp.tanh(x * 2.0))
        s = (y * y).sum()
        one = tr.apply("constant", value=1.0, dtype="float64", shape=())
        end = tr.mark()
        for bad in [([first, end + 5], [True, True], []),            # past the forward pass
                    ([first, first + 2, first + 1], [True] * 3, []),  # not increasing
                    ([first, first + 1, first + 2], [True] * 3, [(2, 2)])]:   # a store not below its layer
            with pytest.raises(ValueError, match="chain schedule does not fit"):
                tr.vjp([s], [one], [x], first, bad)
        for bad in ["nope", ([first], [True], []), ([first, end - 1], [True], []),
                    ([first, end - 1], [True, True], [(1,)])]:
            with pytest.raises((TypeError, ValueError)):
                tr.vjp([s], [one], [x], first, bad)
        return s

    assert cjit.jit(f)(np.ones(3)) == pytest.approx(3 * np.tanh(np.tanh(2.0)) ** 2)
