"""memory_budget: choose what the backward pass recomputes so that the
exact plan's peak fits the budget asked for.

Two families, the plan's peak (Lowered.plan_peak) the oracle for both:

- binomial checkpointing (Revolve; Griewank & Walther) over the forward
  chain, when the gradient has one (Lowered.forward_chain: values that alone
  cross their point of the forward pass, a deep MLP's activations).  With c
  checkpoint slots, `revolve_schedule` finds the schedule of least
  recomputation (a dynamic program over the split points, recursive: a
  recomputed stretch stores checkpoints of its own and frees them after
  use); the search picks the largest c whose peak fits.  c = 0 (recompute
  every layer from the chain's start, holding one value at a time) is the
  floor: weights, their gradients, the chain's ends and one layer's
  working set.
- scans (cjit.lax): each one split into 2, 3 or 4 nested scans, so that
  the backward pass keeps every k-th carry and recomputes the segments
  between them (lax._scan_segmented);
- otherwise a few candidate sets of values to recompute (_candidates).

The search's state is one object, _cjit.MemoryBudget (csrc/py_budget.c):
grad(memory_budget=N) asks it of the trace it runs in, the Lowered carries
it to the jitted function, and each retrace carries it back into C
(Trace(budget=b)): the retrace's vjp follows the candidate proposed here,
its Trace.finish measures the plan with the compile's own options (the
jitted function's donated arguments) and keeps the best plan so far.  This
module only chooses the candidates and their order.
"""
from __future__ import annotations

import functools

from . import _cjit


# ---- binomial checkpointing ------------------------------------------------
#
# Positions 0..n of the chain hold its values; layer i computes position i
# from position i-1.  Reversing layer i (its backward pass) reads positions
# i-1 and i, and recomputes the layer's inner values from position i-1.
# Costs count layer evaluations the backward pass adds ("advances").
#
# T[l][c]: reverse l layers above a held position, the top one's value at
#   hand, with c free checkpoint slots: choose the first position m to
#   advance to; m = l-1 is the value layer l reads anyway (no slot), a lower
#   m takes a slot while the layers above it are reversed:
#     T[1][c] = 0,  T[l][c] = min_m  m + T[l-m][c - (m < l-1)] + T[m][c].
# F[l][c]: the same on the forward pass, where advancing costs nothing: keep
#   nothing (T[l][c]), keep position l-1 (T[l-1][c]), or keep m < l-1 in a
#   slot: F[l-m][c-1] + T[m][c].
# With c = 0 this is l(l-1)/2 advances; once c reaches l-2, none.


@functools.lru_cache(maxsize=16)
def _revolve_tables(n):
    """(T, T's best m, F, F's choice) for chains of up to n layers and
    0..max(n-2, 0) slots; F's choice: -1 keep nothing, 0 keep l-1, m > 0
    keep m."""
    cmax = max(n - 2, 0)
    T = [[0] * (cmax + 1) for _ in range(n + 1)]
    Tm = [[0] * (cmax + 1) for _ in range(n + 1)]
    F = [[0] * (cmax + 1) for _ in range(n + 1)]
    Fm = [[0] * (cmax + 1) for _ in range(n + 1)]
    for c in range(cmax + 1):
        for l in range(2, n + 1):
            best, arg = (l - 1) + T[l - 1][c], l - 1
            if c >= 1:
                for m in range(1, l - 1):
                    v = m + T[l - m][c - 1] + T[m][c]
                    if v < best:
                        best, arg = v, m
            T[l][c], Tm[l][c] = best, arg
            fbest, farg = T[l][c], -1
            if T[l - 1][c] <= fbest:
                fbest, farg = T[l - 1][c], 0
            if c >= 1:
                for m in range(1, l - 1):
                    v = F[l - m][c - 1] + T[m][c]
                    if v < fbest:
                        fbest, farg = v, m
            F[l][c], Fm[l][c] = fbest, farg
    return T, Tm, F, Fm


def revolve_cost(n, c):
    """The layer evaluations the backward pass of an n-layer chain adds
    with c checkpoint slots under the best binomial schedule."""
    if n < 2:
        return 0
    _, _, F, _ = _revolve_tables(n)
    return F[n][min(c, n - 2)]


def revolve_schedule(n, c):
    """The binomial schedule of least recomputation for n layers and c
    slots: (keep, stores) as Trace.vjp's chain takes them, keep a flag per
    position (kept by the forward pass), stores the (layer, position) pairs
    recomputed before each layer's backward pass, layers decreasing."""
    keep = [False] * (n + 1)
    keep[0] = keep[n] = True
    stores = []
    if n < 2:
        return keep, stores
    T, Tm, F, Fm = _revolve_tables(n)
    c = min(c, n - 2)

    def rev(j, i, c):     # reverse layers j+1..i: j held, i at hand, advances cost
        while i - j > 1:
            m = Tm[i - j][c]
            stores.append((i, j + m))
            if m == i - j - 1:          # the value layer i reads: no slot
                i -= 1
                continue
            rev(j + m, i, c - 1)
            i = j + m

    def sweep(j, i, c):   # the same while the forward pass computes j..i
        if i - j <= 1:
            return
        m = Fm[i - j][c]
        if m < 0:
            rev(j, i, c)
        elif m == 0:
            keep[i - 1] = True
            rev(j, i - 1, c)
        else:
            keep[j + m] = True
            sweep(j + m, i, c - 1)
            rev(j, j + m, c)

    sweep(0, n, c)
    stores.sort(key=lambda s: (-s[0], s[1]))   # layer by layer down, positions up
    return keep, stores


def _retrace(jitted, treedef, call, avals, budget, kind, param, cost, payload=None):
    """Traces again following one candidate, which the trace hands to
    `budget` (Trace(budget, candidate)); returns the plan's peak, which
    Trace.finish measured into `budget`."""
    jitted._trace(treedef, call, avals, budget, (kind, param, cost, payload))
    return budget.last_peak


def lower_following(jitted, kind, param, payload, *args, **kwargs):
    """jitted.lower(*args, **kwargs) traced as a budget search's candidate
    is (kind, param, payload as Trace(candidate=) takes them), whatever the
    budget: for tests of the candidates themselves."""
    from . import _tree
    from ._signature import _abstract_leaves
    from ._stages import Lowered
    dyn_args, dyn_kwargs, statics, call = jitted._spec.split(args, kwargs)
    leaves, treedef = _tree.flatten((dyn_args, dyn_kwargs))
    avals = _abstract_leaves(leaves)
    plain, _, _ = jitted._trace(treedef, call, avals)
    budget = _cjit.MemoryBudget(1 << 62)
    budget.start(plain, ())
    lowered, out_treedef, out_avals = jitted._trace(treedef, call, avals, budget, (kind, param, 0, payload))
    return Lowered(lowered, jitted, treedef, statics, tuple(avals), call[0], out_treedef, out_avals)


def _fit_chain(jitted, treedef, call, avals, budget, bounds):
    """Binomial checkpointing over the chain `bounds`: True when a slot
    count fits (budget.best is then the largest count whose peak fits, or
    the least one of equal recomputation), else False (the floor, c = 0,
    does not fit)."""
    n = len(bounds) - 1
    peaks = {}

    def at(c):
        if c not in peaks:
            keep, stores = revolve_schedule(n, c)
            # the best fitting try: least recomputation, then fewest slots
            peaks[c] = _retrace(jitted, treedef, call, avals, budget, "chain", c,
                                revolve_cost(n, c) * (n + 1) + c, (bounds, keep, stores))
        return peaks[c]

    limit = budget.budget
    if at(0) > limit:
        return False
    lo, hi = 0, max(n - 2, 0)       # at(lo) fits; find the largest c that fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if at(mid) <= limit:
            lo = mid
        else:
            hi = mid - 1
    cost = revolve_cost(n, lo)
    least = lo
    while least > 0 and revolve_cost(n, least - 1) == cost:
        least -= 1
    at(least)
    return True


def _candidates(values):
    """The recompute sets tried for graphs without a chain, in order of
    growing recomputation: all but the matmul results (like dots_saveable);
    all but every s-th computed forward value (Chen et al.'s sqrt(n)
    segments at s ~ sqrt(n)); everything."""
    n = len(values)
    out = [[nid for nid, op in values if op != "matmul"]]
    for s in sorted({2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, max(2, int(round(n ** 0.5)))}):
        if s < n:
            out.append([nid for i, (nid, _) in enumerate(values) if (i + 1) % s != 0])
    out.append([nid for nid, _ in values])
    return out


def _fit_memory_budget(jitted, treedef, call, avals, budget, lowered, out_treedef, out_avals):
    """Chooses which forward values the backward pass recomputes instead of
    keeping, so that the exact plan's peak fits `budget` (the MemoryBudget
    that `lowered`'s trace asked for); the plan is the oracle, so the answer
    is known before anything runs.  Binomial checkpointing over the forward
    chain when there is one, else (or when that cannot fit) split scans,
    then the candidates of _candidates.  Raises MemoryBudgetError naming
    the floor: the least peak cjit can reach.  Every peak is the one
    compile() makes: with the jitted function's donated arguments."""
    if budget.start(lowered, jitted._donated_leaves(treedef, call[0])):
        return lowered, out_treedef, out_avals
    limit = budget.budget
    bounds = lowered.forward_chain()
    if len(bounds) >= 3 and _fit_chain(jitted, treedef, call, avals, budget, bounds):
        return budget.best, out_treedef, out_avals
    if lowered.has_control_flow:
        # scans: keep every k-th carry and recompute the segments, on 2, 3, 4 levels
        for levels in (2, 3, 4):
            if _retrace(jitted, treedef, call, avals, budget, "scans", levels, levels) <= limit:
                return budget.best, out_treedef, out_avals
    for i, force in enumerate(_candidates(lowered.forward_values())):
        if _retrace(jitted, treedef, call, avals, budget, "recompute", i, 8 + i, force) <= limit:
            return budget.best, out_treedef, out_avals
    raise _cjit.MemoryBudgetError(
        f"{jitted._name}: memory_budget={limit} bytes is below the floor of {budget.least} "
        f"bytes, the smallest peak cjit can reach (weights, their gradients, one layer's working set "
        f"and the checkpoints the schedule needs; saving everything: {budget.peak})")
