"""cjit.lax loops against JAX: a tanh RNN's forward pass and gradient with
scan, RK4 integration with fori_loop, and compile time against trip count.

    python benchmarks/bench_lax.py [--steps N] [--hidden H]

Both sides compile once (jit); the tables give the median time per call
(float32), after checking that the two agree.  JAX is optional: without it
only cjit's column is filled.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import median_ms  # noqa: E402

import cjit  # noqa: E402
import cjit.numpy as cnp  # noqa: E402
from cjit import lax  # noqa: E402


def rnn_loss(m, scan):
    def loss(W, U, b, h0, xs):
        def step(h, x):
            h = m.tanh(W @ h + U @ x + b)
            return h, h
        h, hs = scan(step, h0, xs)
        return m.sum(hs * hs) / xs.shape[0] + m.sum(h)
    return loss


def rk4_final(m, fori):
    def run(A, y0):
        dt = 0.001

        def f(y):
            return A @ y - 0.1 * y * y * y

        def step(i, y):
            k1 = f(y)
            k2 = f(y + dt / 2 * k1)
            k3 = f(y + dt / 2 * k2)
            k4 = f(y + dt * k3)
            return y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return fori(0, 2000, step, y0)
    return run


def args_rnn(n, hidden, inp=32, seed=0):
    r = np.random.default_rng(seed)
    return [(r.standard_normal((hidden, hidden)) * 0.3 / np.sqrt(hidden / 16)).astype(np.float32),
            (r.standard_normal((hidden, inp)) * 0.3).astype(np.float32),
            (r.standard_normal(hidden) * 0.1).astype(np.float32),
            np.zeros(hidden, np.float32),
            r.standard_normal((n, inp)).astype(np.float32)]


def compile_seconds(make, args):
    """A cold compile: a new jit, with the persistent cache off (a hit there
    would time a lookup, not a compile)."""
    old = os.environ.get("CJIT_CACHE")
    os.environ["CJIT_CACHE"] = "0"
    try:
        t0 = time.perf_counter()
        make().lower(*args).compile()
        return time.perf_counter() - t0
    finally:
        if old is None:
            del os.environ["CJIT_CACHE"]
        else:
            os.environ["CJIT_CACHE"] = old


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--hidden", type=int, default=64)
    a = ap.parse_args()
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        jax = None
    rows = []
    args = args_rnn(a.steps, a.hidden)
    c_fwd = cjit.jit(rnn_loss(cnp, lax.scan))
    c_grad = cjit.jit(cjit.value_and_grad(rnn_loss(cnp, lax.scan), argnums=(0, 1, 2)))
    A = np.array([[0.0, 1.0], [-1.0, -0.1]], np.float32)
    y0 = np.array([1.0, 0.0], np.float32)
    c_rk4 = cjit.jit(rk4_final(cnp, lax.fori_loop))
    cases = [("RNN forward", c_fwd, args), ("RNN value_and_grad", c_grad, args), ("RK4 (2000 steps)", c_rk4, (A, y0))]
    if jax is not None:
        j_fwd = jax.jit(rnn_loss(jnp, jax.lax.scan))
        j_grad = jax.jit(jax.value_and_grad(rnn_loss(jnp, jax.lax.scan), argnums=(0, 1, 2)))
        j_rk4 = jax.jit(rk4_final(jnp, jax.lax.fori_loop))
        for (name, c, ar), j in zip(cases, (j_fwd, j_grad, j_rk4)):
            for x, y in zip(jax.tree_util.tree_leaves(c(*ar)), jax.tree_util.tree_leaves(j(*ar))):
                np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=2e-3, atol=2e-3, err_msg=name)
    for name, c, ar in cases:
        tc = median_ms(lambda: c(*ar))
        tj = None
        if jax is not None:
            j = {"RNN forward": j_fwd, "RNN value_and_grad": j_grad}.get(name, j_rk4 if jax else None)
            tj = median_ms(lambda: jax.block_until_ready(j(*ar)))
        rows.append((name, tc, tj))
    print(f"| float32, {a.steps} steps, hidden {a.hidden} | cjit ms | JAX ms | JAX / cjit |")
    print("|---|---|---|---|")
    for name, tc, tj in rows:
        print(f"| {name} | {tc:.3f} | {tj:.3f} | {tj / tc:.2f}x |" if tj else f"| {name} | {tc:.3f} | - | - |")
    print()
    print("| compile (s) | 10 steps | 10,000 steps | ratio |")
    print("|---|---|---|---|")
    for name, mk in (("cjit RNN value_and_grad",
                      lambda: cjit.jit(cjit.value_and_grad(rnn_loss(cnp, lax.scan), argnums=(0, 1, 2)))),
                     ("cjit RK4 (fori_loop, traced n)",
                      lambda: cjit.jit(lambda A, y0, n: lax.fori_loop(0, n, lambda i, y: y + 0.001 * (A @ y), y0)))):
        ts = []
        for n in (10, 10_000):
            ar = args_rnn(n, a.hidden) if "RNN" in name else (A, y0, n)
            ts.append(min(compile_seconds(mk, ar) for _ in range(3)))
        print(f"| {name} | {ts[0]:.3f} | {ts[1]:.3f} | {ts[1] / ts[0]:.2f} |")


if __name__ == "__main__":
    main()
