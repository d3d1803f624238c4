"""Peak memory and step time of the gradient of a deep MLP (fixed width,
depth 8 to 128) under four strategies, with JAX's jax.checkpoint on the same
model when JAX is installed:

  none      no checkpointing
  layer     cjit.checkpoint around every layer
  sqrt      cjit.checkpoint around segments of about sqrt(depth) layers
  budget    memory_budget = half of the un-checkpointed peak

cjit's peaks are its exact plans (memory_analysis); JAX's are its own
memory_analysis of the compiled gradient (an estimate by XLA).  Writes
benchmarks/results_checkpoint.md and benchmarks/results_checkpoint.png,
and benchmarks/results_checkpoint_timeline.png: the memory timeline of one
depth's gradient (cjit.plot_memory) under each schedule side by side.

    python benchmarks/bench_checkpoint.py [--depths 8,16,32,64,128] [--timeline-depth 16]
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


def run_jax(params, x, mode):
    if jax is None or mode == "budget":
        return None, None
    jp = [(jnp.asarray(w), jnp.asarray(b)) for w, b in params]
    jx = jnp.asarray(x)
    f = jax.jit(jax.grad(make_loss(jnp, mode, jax.checkpoint)))
    compiled = f.lower(jp, jx).compile()
    try:
        m = compiled.memory_analysis()
        peak = m.temp_size_in_bytes + m.argument_size_in_bytes + m.output_size_in_bytes
    except Exception:
        peak = None
    return peak, median_ms(lambda: jax.block_until_ready(f(jp, jx)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--depths", default="8,16,32,64,128")
    ap.add_argument("--timeline-depth", type=int, default=16)
    args = ap.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
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

    here = os.path.dirname(os.path.abspath(__file__))
    params = [((rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32),
               np.zeros(WIDTH, np.float32)) for _ in range(args.timeline_depth)]
    plot_schedules(params, x, os.path.join(here, "results_checkpoint_timeline.png"))
    with open(os.path.join(here, "results_checkpoint.md"), "w") as f:
        f.write(f"# Gradient checkpointing: MLP width {WIDTH}, batch {BATCH}, float32\n\n")
        f.write("| depth | strategy | cjit peak | cjit step | JAX peak | JAX step |\n|---|---|---|---|---|---|\n")
        for depth, mode, cp, ct, jp, jt in rows:
            f.write(f"| {depth} | {mode} | {fmt(cp, 'B')} | {fmt(ct, 'ms')} | {fmt(jp, 'B')} | {fmt(jt, 'ms')} |\n")
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
