"""A dropout MLP train step: cjit against JAX, the same program in each.

    python benchmarks/bench_dropout.py [--rounds N]

The step splits its key, draws a Bernoulli mask for each hidden layer
inside the jitted function, and takes an SGD step on the masked network's
loss.  cjit's random numbers are jax.random's bits, so the two frameworks
drop the same units: the check before timing compares their losses and
updated weights after three steps.  cjit evaluates each mask inside the
kernel that applies it (the mask never goes through memory); the table
gives median milliseconds per step over interleaved rounds, float32.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import median_ms  # noqa: E402

import cjit  # noqa: E402
import cjit.numpy as cnp  # noqa: E402
import cjit.random as cr  # noqa: E402

CASES = [  # (batch, layer sizes, keep probability)
    (128, [784, 512, 512, 10], 0.8),
    (256, [784, 1024, 10], 0.5),
]


def make_step(m, random, value_and_grad, keep):
    def loss(params, key, x, y):
        h = x
        keys = random.split(key, len(params) - 1)
        for (w, b), k in zip(params[:-1], keys):
            h = m.maximum(h @ w + b, 0.0)
            h = m.where(random.bernoulli(k, np.float32(keep), h.shape), h / keep, 0.0)
        w, b = params[-1]
        z = h @ w + b
        z = z - z.max(axis=1, keepdims=True)
        logp = z - m.log(m.exp(z).sum(axis=1, keepdims=True))
        return -(logp * y).sum() / x.shape[0]

    def step(params, key, x, y):
        key, sub = random.split(key)
        val, g = value_and_grad(loss)(params, sub, x, y)
        new = [(w - 0.05 * gw, b - 0.05 * gb) for (w, b), (gw, gb) in zip(params, g)]
        return new, key, val
    return step


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
    print("| batch | layers | keep | cjit ms | JAX ms | JAX / cjit |")
    print("|---|---|---|---|---|---|")
    for batch, sizes, keep in CASES:
        params = [((rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32), np.zeros(n, np.float32))
                  for m, n in zip(sizes[:-1], sizes[1:])]
        x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
        y = np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], batch)]
        f = cjit.jit(make_step(cnp, cr, cjit.value_and_grad, keep))
        key = cr.key(0)
        fns = {"cjit": lambda: f(params, key, x, y)}
        if jax is not None:
            jf = jax.jit(make_step(jnp, jax.random, jax.value_and_grad, keep))
            jp = jax.tree_util.tree_map(jnp.asarray, params)
            jx, jy = jnp.asarray(x), jnp.asarray(y)
            # three steps each: the same masks, so the same losses and weights
            cp, ck, jpp, jk = params, cr.key(0), jp, jax.random.key(0)
            for _ in range(3):
                cp, ck, cl = f(cp, ck, x, y)
                jpp, jk, jl = jf(jpp, jk, jx, jy)
                np.testing.assert_allclose(cl, float(jl), rtol=2e-4)
            np.testing.assert_allclose(cp[0][0], np.asarray(jpp[0][0]), rtol=1e-3, atol=1e-5)
            jkey = jax.random.key(0)
            fns["jax"] = lambda: jax.block_until_ready(jf(jp, jkey, jx, jy))
        times = {k: [] for k in fns}
        for _ in range(args.rounds):
            for k, fn in fns.items():
                times[k].append(median_ms(fn, repeats=5))
        med = {k: float(np.median(v)) for k, v in times.items()}
        j = med.get("jax", float("nan"))
        print(f"| {batch} | {'x'.join(map(str, sizes))} | {keep} | {med['cjit']:.3f} | {j:.3f} | "
              f"{j / med['cjit']:.2f}x |")


if __name__ == "__main__":
    main()
