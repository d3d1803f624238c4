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
- otherwise a few candidate sets of values to recompute (_CANDIDATES).
"""
from __future__ import annotations

import functools
import threading

from . import _cjit


_remat_tls = threading.local()   # .force: forward node ids to recompute, .chain: a chain schedule
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


def forced_scan_levels():
    """Into how many nested levels a budget search wants each cjit.lax.scan
    split (1: none); see lax._scan_segmented."""
    return getattr(_remat_tls, "scan_levels", 1)


def take_forced_chain(first):
    """The chain schedule a budget search wants the next vjp to follow, as
    Trace.vjp takes it, or None; given to one vjp only (the first whose
    differentiated nodes start at or before the chain)."""
    chain = getattr(_remat_tls, "chain", None)
    if chain is None or first > chain[0][1]:
        return None
    _remat_tls.chain = None
    return chain


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


def _trace_with(jitted, treedef, call, avals, force=None, chain=None, scan_levels=1):
    """Retraces with `force` recomputed (a list of node ids), `chain`
    followed, or every scan split into `scan_levels` nested scans; returns
    (lowered, out_treedef, out_avals)."""
    _remat_tls.force = force if force is not None else []
    _remat_tls.chain = chain
    _remat_tls.scan_levels = scan_levels
    try:
        return jitted._trace(treedef, call, avals)
    finally:
        _remat_tls.force = None
        _remat_tls.chain = None
        _remat_tls.scan_levels = 1


def _fit_chain(jitted, treedef, call, avals, budget, bounds):
    """Binomial checkpointing over the chain `bounds`: (result, floor), the
    traced result of the largest slot count whose peak fits (then the least
    one of equal recomputation), or None with the floor's peak."""
    n = len(bounds) - 1
    tried = {}
    donate = jitted._donated_leaves(treedef, call[0])

    def at(c):
        if c not in tried:
            keep, stores = revolve_schedule(n, c)
            result = _trace_with(jitted, treedef, call, avals, chain=(bounds, keep, stores))
            tried[c] = (result[0].plan_peak(donate), result)
        return tried[c]

    floor = at(0)[0]
    if floor > budget:
        return None, floor
    lo, hi = 0, max(n - 2, 0)       # at(lo) fits; find the largest c that fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if at(mid)[0] <= budget:
            lo = mid
        else:
            hi = mid - 1
    cost = revolve_cost(n, lo)
    least = lo
    while least > 0 and revolve_cost(n, least - 1) == cost:
        least -= 1
    if least != lo and at(least)[0] <= budget:
        lo = least
    return at(lo)[1], floor


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
    keeping, so that the exact plan's peak fits `budget`; the plan is the
    oracle, so the answer is known before anything runs.  Binomial
    checkpointing over the forward chain when there is one, else (or when
    that cannot fit) the candidates of _candidates.  Raises
    MemoryBudgetError naming the floor: the least peak cjit can reach.
    Every peak is the one compile() makes: with the jitted function's
    donated arguments."""
    donate = jitted._donated_leaves(treedef, call[0])
    peak = lowered.plan_peak(donate)
    if peak <= budget:
        return lowered, out_treedef, out_avals
    least = peak
    bounds = lowered.forward_chain()
    if len(bounds) >= 3:
        result, floor = _fit_chain(jitted, treedef, call, avals, budget, bounds)
        if result is not None:
            return result
        least = min(least, floor)
    if lowered.has_control_flow:
        # scans: keep every k-th carry and recompute the segments, on 2, 3, 4 levels
        for levels in (2, 3, 4):
            result = _trace_with(jitted, treedef, call, avals, scan_levels=levels)
            p = result[0].plan_peak(donate)
            if p <= budget:
                return result
            least = min(least, p)
    for force in _candidates(lowered.forward_values()):
        result = _trace_with(jitted, treedef, call, avals, force=force)
        p = result[0].plan_peak(donate)
        if p <= budget:
            return result
        least = min(least, p)
    raise _cjit.MemoryBudgetError(
        f"{jitted._name}: memory_budget={budget} bytes is below the floor of {least} bytes, the "
        f"smallest peak cjit can reach (weights, their gradients, one layer's working set and the "
        f"checkpoints the schedule needs; saving everything: {peak})")
