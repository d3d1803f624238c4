"""The compile pipeline as one list (csrc/pipeline.c) and memory_budget as
an object carried on the trace (csrc/py_budget.c).

- The list's order is the one docs/ARCHITECTURE.md shows, and every use
  runs a prefix of it with the compile's own options: as_text shows the
  graph the compile's simplify step leaves, memory_budget's oracle
  (Lowered.plan_peak) the peak the compile's plan has, donation included.
- memory_budget's search lives on the traces it makes: a trace made while
  another is traced (eval_shape, a nested lower) neither takes the search's
  candidate nor loses its own budget, and a candidate costs no call into C
  beyond its trace's own.

Generated: random MLP and scan programs with random donation (the oracle
and as_text against the compile), and random budgeted programs with a
nested trace at random places (the search as without it)."""
import collections
import os
import re
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cjit
import cjit.numpy as cnp
from cjit import _cjit, lax

DOCS = Path(__file__).resolve().parent.parent / "docs" / "ARCHITECTURE.md"


def _mlp(depth):
    def loss(params, x):
        h = x
        for w in params[:depth]:
            h = cnp.tanh(h @ w)
        return (h * h).sum()
    return loss


def _params(depth, width, seed=0):
    rng = np.random.default_rng(seed)
    params = [(rng.standard_normal((width, width)) / (2 * np.sqrt(width))).astype(np.float32)
              for _ in range(depth)]
    x = rng.standard_normal((8, width)).astype(np.float32)
    return params, x


# ---- the list --------------------------------------------------------------


def test_the_list_is_the_one_the_docs_show():
    steps = _cjit.pipeline()
    names = [name for name, _, _ in steps]
    assert names == ["trace", "autodiff", "simplify", "fuse", "library", "loops", "group", "memplan",
                     "collapse", "codegen", "link", "run"]
    assert {name: when for name, _, when in steps}["trace"] == "traced"
    assert steps[-1][2] == "call" and all(w == "compile" for _, _, w in steps[2:-1])
    # CJIT_PASSES's names are the list's switches
    assert {name: off for name, off, _ in steps if off} == {
        "simplify": "cse", "fuse": "fuse", "group": "group", "memplan": "memplan"}
    # the flow section of ARCHITECTURE.md lists the same steps in the same order
    text = DOCS.read_text()
    flow = text[text.index("## The flow of one compile"):text.index("## Files")]
    block = flow[flow.index("```") + 3:]
    block = block[:block.index("```")]
    shown = re.findall(r"^\s+(\w+)\s{2,}", block, re.M)
    assert [s for s in shown if s in names] == names


def test_as_text_is_the_graph_the_compile_simplified(tmp_path, monkeypatch):
    monkeypatch.setenv("CJIT_DUMP", str(tmp_path))

    def f(x, w):
        cnp.exp(x)                  # read by nothing: simplify drops it
        y = cnp.tanh(x @ w)
        return y - y.sum(axis=1, keepdims=True)
    rng = np.random.default_rng(1)
    low = cjit.jit(f).lower(rng.standard_normal((6, 4)), rng.standard_normal((4, 4)))
    low.compile()
    (dump,) = tmp_path.glob("compile*.graph.txt")
    assert dump.read_text().startswith(low.as_text() + "\n")
    assert "exp" not in low.as_text()


def test_the_oracle_is_the_compiles_peak_with_its_donation():
    params, x = _params(4, 32)
    step = cjit.jit(lambda p, x: [w - 0.01 * g for w, g in zip(p, cjit.grad(_mlp(4))(p, x))],
                    donate_argnums=0)
    low = step.lower(params, x)
    donate = step._donated_leaves(low._in_treedef, low._dyn_positions)
    assert low._lowered.plan_peak(donate) == low.compile().memory_analysis().peak_memory_in_bytes
    assert low._lowered.plan_peak(donate) < low._lowered.plan_peak()


# ---- memory_budget on the trace ----------------------------------------------


def _floor_budget(loss, args):
    """The least peak the search reaches for grad(loss): a budget at it
    makes the search try several candidates and succeed."""
    plain = cjit.jit(cjit.grad(loss)).lower(*args)._lowered.plan_peak()
    with pytest.raises(cjit.errors.MemoryBudgetError) as e:
        cjit.jit(cjit.grad(loss, memory_budget=1)).lower(*args)
    return plain, int(re.search(r"floor of (\d+) bytes", str(e.value)).group(1))


def test_a_trace_made_while_tracing_leaves_the_search_alone():
    """The search's chain schedule went to the first vjp on the thread: a
    gradient's eval_shape inside the budgeted function took it, and the
    budget the function meets alone was refused."""
    loss = _mlp(8)
    params, x = _params(8, 32)
    plain, floor = _floor_budget(loss, (params, x))
    assert floor < plain
    shapes = [cjit.ShapeDtypeStruct(p.shape, p.dtype) for p in params]

    def outer(params, x):
        cjit.eval_shape(cjit.grad(loss), shapes, cjit.ShapeDtypeStruct(x.shape, x.dtype))
        return cjit.grad(loss, memory_budget=floor)(params, x)
    alone = cjit.jit(cjit.grad(loss, memory_budget=floor))
    nested = cjit.jit(outer)
    assert nested.lower(params, x)._lowered.plan_peak() == alone.lower(params, x)._lowered.plan_peak() \
        == floor
    np.testing.assert_array_equal(np.asarray(nested(params, x)[0]), np.asarray(alone(params, x)[0]))


def test_a_budget_asked_in_a_nested_lower_is_searched_there():
    """A nested lower's own memory_budget was skipped while an outer search
    retraced (it took the outer's forced values for its own)."""
    loss = _mlp(6)
    params, x = _params(6, 32, seed=2)
    plain, floor = _floor_budget(loss, (params, x))
    inner_peaks = []

    def outer(params, x):
        low = cjit.jit(cjit.grad(loss, memory_budget=floor)).lower(
            [cjit.ShapeDtypeStruct(p.shape, p.dtype) for p in params],
            cjit.ShapeDtypeStruct(x.shape, x.dtype))
        inner_peaks.append(low._lowered.plan_peak())
        return cjit.grad(loss, memory_budget=floor)(params, x)
    cjit.jit(outer).lower(params, x)
    assert len(inner_peaks) >= 2 and max(inner_peaks) <= floor


def _calls_into_c(fun):
    counts = collections.Counter()

    def prof(frame, event, arg):
        if event == "c_call":
            owner = getattr(arg, "__self__", None)
            mods = (getattr(arg, "__module__", None) or "", type(owner).__module__ if owner is not None else "")
            if any(m.startswith("cjit._cjit") for m in mods):
                counts[getattr(arg, "__qualname__", arg.__name__)] += 1
    sys.setprofile(prof)
    try:
        fun()
    except cjit.errors.MemoryBudgetError:
        pass
    finally:
        sys.setprofile(None)
    return counts


def test_a_candidate_costs_no_call_into_c_beyond_its_trace():
    """The search was 2 calls into C per candidate (plan_peak, force_remat)
    besides the trace: the candidate now travels with Trace(), its peak
    with Trace.finish."""
    loss = _mlp(8)
    params, x = _params(8, 32)
    plain = _calls_into_c(lambda: cjit.jit(cjit.grad(loss)).lower(params, x))
    _, floor = _floor_budget(loss, (params, x))
    for budget in (floor, floor - 1024):     # met after a few tries; refused after every family
        calls = _calls_into_c(lambda: cjit.jit(cjit.grad(loss, memory_budget=budget)).lower(params, x))
        traces = calls["Trace.finish"]
        assert traces >= 3
        # start, forward_chain, forward_values: once per compile
        assert sum(calls.values()) <= traces * sum(plain.values()) + 3, calls


# ---- generated ------------------------------------------------------------------


@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(depth=st.integers(1, 4), width=st.sampled_from([8, 24]), scan=st.booleans(),
       donate=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_generated_the_oracle_and_as_text_are_the_compiles(depth, width, scan, donate, seed):
    """The class: a use of the pipeline building its options apart from the
    compile's (the oracle without the donation, as_text without its
    passes) answers for a plan the compile never makes."""
    params, x = _params(depth, width, seed)
    loss = _mlp(depth)
    if scan:
        def loss(params, x, inner=loss):  # noqa: F811 - the scanned variant
            h, _ = lax.scan(lambda c, w: (cnp.tanh(c @ w), None), x, cnp.stack(params))
            return (h * h).sum() + inner(params, x)

    def step(params, x):
        return [w - 0.01 * g for w, g in zip(params, cjit.grad(loss)(params, x))]
    f = cjit.jit(step, donate_argnums=0 if donate else None)
    low = f.lower(params, x)
    leaves = f._donated_leaves(low._in_treedef, low._dyn_positions)
    assert bool(leaves) == donate
    with tempfile.TemporaryDirectory() as dump:
        os.environ["CJIT_DUMP"] = dump
        try:
            compiled = low.compile()
        finally:
            del os.environ["CJIT_DUMP"]
        graphs = sorted(Path(dump).glob("compile*.graph.txt"), key=lambda p: int(p.name[7:-10]))
        # the outer graph first (its codegen step), then the loop bodies' (its link step)
        assert graphs[0].read_text().startswith(low.as_text() + "\n")
    assert low._lowered.plan_peak(leaves) == compiled.memory_analysis().peak_memory_in_bytes


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(depth=st.integers(3, 6), slack=st.sampled_from([0, 512, 4096]),
       nested=st.sampled_from(["eval_shape", "lower", "budgeted lower"]), before=st.booleans())
def test_generated_a_nested_trace_changes_no_search(depth, slack, nested, before):
    """The class: search state kept outside the trace (a global keyed by
    the trace, thread-local candidates) reaches another trace made on the
    same thread while the search retraces."""
    loss = _mlp(depth)
    params, x = _params(depth, 16, seed=depth)
    plain, floor = _floor_budget(loss, (params, x))
    budget = min(floor + slack, plain)
    shapes = ([cjit.ShapeDtypeStruct(p.shape, p.dtype) for p in params],
              cjit.ShapeDtypeStruct(x.shape, x.dtype))
    inner_peaks = []

    def side():
        if nested == "eval_shape":
            cjit.eval_shape(cjit.grad(loss), *shapes)
        else:
            g = cjit.grad(loss, memory_budget=budget) if nested == "budgeted lower" else cjit.grad(loss)
            inner_peaks.append(cjit.jit(g).lower(*shapes)._lowered.plan_peak())

    def outer(params, x):
        if before:
            side()
        g = cjit.grad(loss, memory_budget=budget)(params, x)
        if not before:
            side()
        return g
    alone = cjit.jit(cjit.grad(loss, memory_budget=budget)).lower(params, x)._lowered.plan_peak()
    assert cjit.jit(outer).lower(params, x)._lowered.plan_peak() == alone <= budget
    if nested == "budgeted lower":
        assert inner_peaks and set(inner_peaks) == {alone}
    elif nested == "lower":
        assert inner_peaks and set(inner_peaks) == {plain}
