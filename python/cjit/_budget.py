"""memory_budget: choose what the backward pass recomputes so that the
exact plan's peak fits the budget asked for."""
from __future__ import annotations

import threading

from . import _cjit


_remat_tls = threading.local()   # .force: forward node ids to recompute (a search in progress)
_budget_requests = {}            # id(trace) -> the smallest budget asked for in that trace


def request_memory_budget(trace, budget):
    """Called by grad/value_and_grad(memory_budget=N) while tracing: the
    jitted function that owns `trace` must fit its plan's peak within N."""
    key = id(trace)
    _budget_requests[key] = min(budget, _budget_requests.get(key, budget))


def take_budget_request(trace):
    """The budget asked for while `trace` ran (None when none was), removed."""
    return _budget_requests.pop(id(trace), None)


def forced_remat():
    """The forward node ids a budget search wants recomputed, or None."""
    return getattr(_remat_tls, "force", None)


def _fit_memory_budget(jitted, treedef, call, avals, budget, lowered, out_treedef, out_avals):
    """Chooses which forward values the backward pass recomputes instead of
    keeping, so that the exact plan's peak fits `budget`; the plan is the
    oracle, so the answer is known before anything runs.

    Candidates, tried in order of growing recomputation until one fits:
    keep everything; recompute all but the matmul results (cheap
    elementwise work, like dots_saveable); then keep only every s-th
    computed forward value (s = 2, 3, 4, ...) and recompute the segments in
    between from those boundaries, the schedule of Chen et al. (sqrt(n)
    segments at s ~ sqrt(n)).  Raises MemoryBudgetError naming the smallest
    peak reached."""
    peak = lowered.plan_peak()
    if peak <= budget:
        return lowered, out_treedef, out_avals
    values = lowered.forward_values()          # (node id, op), forward order
    n = len(values)
    candidates = [[nid for nid, op in values if op != "matmul"]]
    for s in sorted({2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, max(2, int(round(n ** 0.5)))}):
        if s < n:
            candidates.append([nid for i, (nid, _) in enumerate(values) if (i + 1) % s != 0])
    candidates.append([nid for nid, _ in values])   # recompute everything from the inputs
    least = peak
    for force in candidates:
        _remat_tls.force = force
        try:
            result = jitted._trace(treedef, call, avals)
        finally:
            _remat_tls.force = None
        p = result[0].plan_peak()
        if p <= budget:
            return result
        least = min(least, p)
    raise _cjit.MemoryBudgetError(
        f"{jitted._name}: no choice of saved and recomputed values fits memory_budget={budget} "
        f"bytes: the smallest peak cjit can reach is {least} bytes (saving everything: {peak})")
