"""Per-example gradients (vmap of grad) of an MLP: cjit against JAX.

    python benchmarks/bench_vmap.py [--rounds N]

Both compile jit(vmap(grad(loss), in_axes=(None, 0, 0))) once; the table
gives the median time per call of interleaved rounds, float32, and checks
that the two agree (and agree with a Python loop of grads) before timing.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import median_ms  # noqa: E402

import cjit  # noqa: E402
import cjit.numpy as cnp  # noqa: E402

CASES = [  # (batch, layer sizes)
    (32, [64, 128, 128, 10]),
    (128, [64, 128, 128, 10]),
    (128, [784, 256, 10]),
]


def make_loss(m):
    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = m.tanh(h @ w + b)
        w, b = params[-1]
        return m.sum((h @ w + b - y) ** 2)
    return loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_platforms", "cpu")
    except ImportError:
        jax = None
    rng = np.random.default_rng(0)
    print("| batch | layers | cjit ms | JAX ms | cjit loop of grads ms |")
    print("|---|---|---|---|---|")
    for batch, sizes in CASES:
        params = [((rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32), np.zeros(n, np.float32))
                  for m, n in zip(sizes[:-1], sizes[1:])]
        xs = rng.standard_normal((batch, sizes[0])).astype(np.float32)
        ys = rng.standard_normal((batch, sizes[-1])).astype(np.float32)
        f = cjit.jit(cjit.vmap(cjit.grad(make_loss(cnp)), in_axes=(None, 0, 0)))
        got = f(params, xs, ys)
        g1 = cjit.jit(cjit.grad(make_loss(cnp)))
        loop = [g1(params, xs[i], ys[i]) for i in range(batch)]
        np.testing.assert_allclose(got[0][0], np.stack([g[0][0] for g in loop]), rtol=1e-4, atol=1e-5)
        fns = {"cjit": lambda: f(params, xs, ys),
               "loop": lambda: [g1(params, xs[i], ys[i]) for i in range(batch)]}
        if jax is not None:
            jf = jax.jit(jax.vmap(jax.grad(make_loss(jnp)), in_axes=(None, 0, 0)))
            jp = jax.tree_util.tree_map(jnp.asarray, params)
            jx, jy = jnp.asarray(xs), jnp.asarray(ys)
            want = jf(jp, jx, jy)
            np.testing.assert_allclose(got[0][0], np.asarray(want[0][0]), rtol=1e-4, atol=1e-5)
            fns["jax"] = lambda: jax.block_until_ready(jf(jp, jx, jy))
        times = {k: [] for k in fns}
        for _ in range(args.rounds):
            for k, fn in fns.items():
                times[k].append(median_ms(fn, repeats=5))
        med = {k: float(np.median(v)) for k, v in times.items()}
        print(f"| {batch} | {'x'.join(map(str, sizes))} | {med['cjit']:.3f} | "
              f"{med.get('jax', float('nan')):.3f} | {med['loop']:.3f} |")


if __name__ == "__main__":
    main()
