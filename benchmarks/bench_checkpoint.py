"""Peak memory and step time of the gradient of a deep MLP (fixed width,
depth 8 to 128) under four strategies, with JAX's jax.checkpoint on the same
model when JAX is installed:

  none      no checkpointing
  layer     cjit.checkpoint around every layer
  sqrt      cjit.checkpoint around segments of about sqrt(depth) layers
  budget    memory_budget = half of the un-checkpointed peak

cjit's peaks are its exact plans (memory_analysis); JAX's are its own
memory_analysis of the compiled gradient (an estimate by XLA).

Then the budget sweep: at each depth, ten budgets from the floor (the least
peak memory_budget can reach: weights, their gradients and the batch, plus
four activations) to the unconstrained peak; for each, the peak measured
with memory_stats() around one call, the recompute factor (layer
evaluations per layer: 1 + recomputed layers / depth) and the step time,
with JAX's best policy for that budget: the fastest of no checkpoint,
jax.checkpoint per layer (nothing_saveable, dots_saveable) and per
sqrt(depth) layers whose XLA peak fits.  Writes
benchmarks/results_checkpoint.md and benchmarks/results_checkpoint.png,
and benchmarks/results_checkpoint_timeline.png: the memory timeline of one
depth's gradient (cjit.plot_memory) under each schedule side by side.

    python benchmarks/bench_checkpoint.py [--depths 8,16,32,64,128] [--timeline-depth 16]
                                          [--sweep-depths 8,16,32,64,128]
"""
import argparse
import functools
import os

import numpy as np

from timing import median_ms

import cjit
import cjit.numpy as cnp

try:
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", False)
except ImportError:
    jax = None

WIDTH, BATCH = 64, 256


def layer(np_like):
    def f(h, w, b):
        return np_like.tanh(h @ w + b)
    return f


def make_loss(np_like, mode, checkpoint=None):
    lay = layer(np_like)

    def loss(params, x):
        h = x
        n = len(params)
        seg = max(1, int(round(n ** 0.5)))
        if mode == "layer":
            for w, b in params:
                h = checkpoint(lay)(h, w, b)
        elif mode == "sqrt":
            for s in range(0, n, seg):
                def run(h, ps=params[s:s + seg]):
                    for w, b in ps:
                        h = lay(h, w, b)
                    return h
                h = checkpoint(run)(h)
        else:
            for w, b in params:
                h = lay(h, w, b)
        return (h * h).mean()
    return loss


def run_cjit(params, x, mode):
    if mode == "budget":
        none = cjit.jit(cjit.grad(make_loss(cnp, "none"))).lower(params, x).compile()
        budget = none.memory_analysis().peak_memory_in_bytes // 2
        f = cjit.jit(cjit.grad(make_loss(cnp, "none"), memory_budget=budget))
    else:
        f = cjit.jit(cjit.grad(make_loss(cnp, mode, cjit.checkpoint)))
    try:
        peak = f.lower(params, x).compile().memory_analysis().peak_memory_in_bytes
    except cjit.errors.MemoryBudgetError as e:
        print(f"  budget {budget:,} B infeasible: {str(e).split(': ', 1)[1]}")
        return "infeasible", None
    return peak, median_ms(lambda: f(params, x))


def plot_schedules(params, x, path):
    """One PNG: the memory timeline of the gradient of one model under each
    schedule (no checkpoint, checkpoint policies, memory_budget)."""
    cp = cjit.checkpoint_policies
    loss = make_loss(cnp, "none")
    schedules = {
        "no checkpoint": cjit.jit(cjit.grad(loss)),
        "checkpoint per layer (nothing_saveable)":
            cjit.jit(cjit.grad(make_loss(cnp, "layer", cjit.checkpoint))),
        "checkpoint per layer (dots_saveable)": cjit.jit(cjit.grad(make_loss(
            cnp, "layer", functools.partial(cjit.checkpoint, policy=cp.dots_saveable)))),
        "checkpoint per sqrt(depth) layers": cjit.jit(cjit.grad(make_loss(cnp, "sqrt",
                                                                          cjit.checkpoint))),
    }
    compiled = {name: f.lower(params, x).compile() for name, f in schedules.items()}
    none_peak = compiled["no checkpoint"].memory_analysis().peak_memory_in_bytes
    for share, what in ((0.5, "half"), (0.75, "3/4")):   # the first that is met
        budget = int(none_peak * share)
        try:
            compiled[f"memory_budget = {what} of no checkpoint's peak ({budget:,} B)"] = \
                cjit.jit(cjit.grad(loss, memory_budget=budget)).lower(params, x).compile()
            break
        except cjit.errors.MemoryBudgetError as e:
            print(f"  timeline: budget {budget:,} B infeasible: {str(e).split(': ', 1)[1]}")
    for name, c in compiled.items():
        t = c.memory_timeline()
        print(f"  timeline {name:42s} {len(t):5d} kernels, peak {t.peak_bytes:>12,} B")
    try:
        cjit.plot_memory(compiled, path, title=f"gradient of a {len(params)}-layer tanh MLP "
                         f"(width {WIDTH}, batch {BATCH}, float32): bytes live per kernel")
    except ImportError as e:
        print(f"  no timeline picture: {e}")


def run_jax(params, x, mode, checkpoint=None):
    if jax is None or mode == "budget":
        return None, None
    jp = [(jnp.asarray(w), jnp.asarray(b)) for w, b in params]
    jx = jnp.asarray(x)
    f = jax.jit(jax.grad(make_loss(jnp, mode, checkpoint or jax.checkpoint)))
    compiled = f.lower(jp, jx).compile()
    try:
        m = compiled.memory_analysis()
        peak = m.temp_size_in_bytes + m.argument_size_in_bytes + m.output_size_in_bytes
    except Exception:
        peak = None
    return peak, median_ms(lambda: jax.block_until_ready(f(jp, jx)))


def floor_of(params, x):
    """The least peak memory_budget reaches, as its refusal names it."""
    try:
        cjit.jit(cjit.grad(make_loss(cnp, "none"), memory_budget=1)).lower(params, x)
    except cjit.errors.MemoryBudgetError as e:
        return int(str(e).split("floor of ")[1].split()[0])
    raise AssertionError("a 1-byte budget was met")


def measured_peak(f, *args):
    f(*args)
    base = cjit.memory_stats()["bytes_in_use"]
    cjit.reset_peak_memory_stats()
    out = f(*args)
    peak = cjit.memory_stats()["peak_bytes_in_use"] - base
    del out
    return peak


def jax_policies(params, x):
    """{policy: (XLA peak, ms)} of JAX's checkpointing choices."""
    if jax is None:
        return {}
    pol = jax.checkpoint_policies
    choices = {
        "no checkpoint": ("none", None),
        "per layer, nothing_saveable": ("layer", jax.checkpoint),
        "per layer, dots_saveable": ("layer", functools.partial(jax.checkpoint, policy=pol.dots_saveable)),
        "per sqrt(depth) layers": ("sqrt", jax.checkpoint),
    }
    return {name: run_jax(params, x, mode, ck) for name, (mode, ck) in choices.items()}


def budget_sweep(depth, params, x, jax_runs):
    """Rows (budget, planned, measured, recompute factor, ms, JAX's best)."""
    loss = make_loss(cnp, "none")
    peak = cjit.jit(cjit.grad(loss)).lower(params, x).compile().memory_analysis().peak_memory_in_bytes
    floor = floor_of(params, x)
    rows = []
    for k in range(10):
        budget = floor + (peak - floor) * k // 9
        f = cjit.jit(cjit.grad(loss, memory_budget=budget))
        try:
            lowered = f.lower(params, x)
        except cjit.errors.MemoryBudgetError:
            rows.append((budget, None, None, None, None, None))
            continue
        planned = lowered.compile().memory_analysis().peak_memory_in_bytes
        recomputed = sum(1 for line in lowered.as_text().splitlines()
                         if "= tanh(" in line and "recomputed" in line)
        measured = measured_peak(f, params, x)
        ms = median_ms(lambda: f(params, x), repeats=3 if depth >= 64 else 7)
        fits = [(t, name) for name, (p, t) in jax_runs.items() if p is not None and p <= budget]
        best = min(fits) if fits else None
        rows.append((budget, planned, measured, 1 + recomputed / depth, ms, best))
        print(f"  depth {depth:4d} budget {budget:>11,} B: planned {planned:>11,} measured {measured:>11,} "
              f"recompute x{1 + recomputed / depth:5.2f} {ms:8.2f} ms   JAX best: {best}", flush=True)
    return floor, peak, rows


def write_sweep(f, sweeps):
    f.write("\n## memory_budget sweep: ten budgets from the floor to the unconstrained peak\n\n"
            "Binomial checkpointing (Revolve) over the layers. *measured* is memory_stats()'s peak "
            "around one call (equal to the plan's); *recompute* is layer evaluations per layer; "
            "*JAX best* is the fastest JAX policy whose XLA peak fits the budget.\n\n")
    for depth, (floor, peak, rows, jax_runs) in sweeps.items():
        f.write(f"\n### depth {depth}: floor {floor / 2**20:.3f} MiB, unconstrained peak "
                f"{peak / 2**20:.3f} MiB\n\n")
        if jax_runs:
            f.write("JAX: " + "; ".join(f"{name} {p / 2**20:.2f} MiB {t:.2f} ms"
                                        for name, (p, t) in jax_runs.items() if p) + "\n\n")
        f.write("| budget | cjit measured peak | recompute | cjit step | JAX best (step, policy) |\n"
                "|---|---|---|---|---|\n")
        runs = [(p, t, name) for name, (p, t) in jax_runs.items() if p]
        least = min(runs) if runs else None
        for budget, planned, measured, factor, ms, best in rows:
            if planned is None:
                f.write(f"| {budget / 2**20:.3f} MiB | refused (MemoryBudgetError) | | | |\n")
                continue
            jb = f"{best[0]:.2f} ms, {best[1]}" if best else (
                f"none fits (least: {least[0] / 2**20:.3f} MiB, {least[2]})" if least else "absent")
            f.write(f"| {budget / 2**20:.3f} MiB | {measured / 2**20:.3f} MiB | x{factor:.2f} | "
                    f"{ms:.2f} ms | {jb} |\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--depths", default="8,16,32,64,128")
    ap.add_argument("--timeline-depth", type=int, default=16)
    ap.add_argument("--sweep-depths", default="8,16,32,64,128")
    args = ap.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    sweep_depths = [int(d) for d in args.sweep_depths.split(",") if d]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, WIDTH)).astype(np.float32)
    rows = []
    for depth in depths:
        params = [((rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32),
                   np.zeros(WIDTH, np.float32)) for _ in range(depth)]
        for mode in ("none", "layer", "sqrt", "budget"):
            cp, ct = run_cjit(params, x, mode)
            jp, jt = run_jax(params, x, mode)
            rows.append((depth, mode, cp, ct, jp, jt))
            shown = cp if isinstance(cp, int) else 0
            print(f"depth {depth:4d} {mode:7s} cjit peak {shown:>12,} B  {ct or 0:8.2f} ms   "
                  f"jax peak {jp or 0:>12,} B  {jt or 0:8.2f} ms", flush=True)

    def fmt(v, unit):
        if v == "infeasible":
            return "infeasible (MemoryBudgetError)"
        return "absent" if v is None else (f"{v / 2**20:.2f} MiB" if unit == "B" else f"{v:.2f} ms")

    sweeps = {}
    for depth in sweep_depths:
        params = [((rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32),
                   np.zeros(WIDTH, np.float32)) for _ in range(depth)]
        jax_runs = jax_policies(params, x)
        floor, peak, sweep_rows = budget_sweep(depth, params, x, jax_runs)
        sweeps[depth] = (floor, peak, sweep_rows, jax_runs)

    here = os.path.dirname(os.path.abspath(__file__))
    params = [((rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32),
               np.zeros(WIDTH, np.float32)) for _ in range(args.timeline_depth)]
    plot_schedules(params, x, os.path.join(here, "results_checkpoint_timeline.png"))
    with open(os.path.join(here, "results_checkpoint.md"), "w") as f:
        f.write(f"# Gradient checkpointing: MLP width {WIDTH}, batch {BATCH}, float32\n\n")
        f.write("| depth | strategy | cjit peak | cjit step | JAX peak | JAX step |\n|---|---|---|---|---|---|\n")
        for depth, mode, cp, ct, jp, jt in rows:
            f.write(f"| {depth} | {mode} | {fmt(cp, 'B')} | {fmt(ct, 'ms')} | {fmt(jp, 'B')} | {fmt(jt, 'ms')} |\n")
        write_sweep(f, sweeps)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
        for mode in ("none", "layer", "sqrt", "budget"):
            pts = [(d, cp, ct) for d, m, cp, ct, _, _ in rows if m == mode and isinstance(cp, int)]
            if pts:
                a1.plot([p[0] for p in pts], [p[1] / 2**20 for p in pts], "o-", label=f"cjit {mode}")
                a2.plot([p[0] for p in pts], [p[2] for p in pts], "o-", label=f"cjit {mode}")
            jpts = [(d, jp, jt) for d, m, _, _, jp, jt in rows if m == mode and jp]
            if jpts:
                a1.plot([p[0] for p in jpts], [p[1] / 2**20 for p in jpts], "x--", label=f"JAX {mode}")
                a2.plot([p[0] for p in jpts], [p[2] for p in jpts], "x--", label=f"JAX {mode}")
        a1.set(xlabel="depth", ylabel="peak MiB", xscale="log", yscale="log", title="gradient peak memory")
        a2.set(xlabel="depth", ylabel="ms per gradient", xscale="log", yscale="log", title="step time")
        a1.legend(fontsize=7)
        a2.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(here, "results_checkpoint.png"), dpi=110)
    except ImportError:
        print("matplotlib not installed: no plot")


if __name__ == "__main__":
    main()
