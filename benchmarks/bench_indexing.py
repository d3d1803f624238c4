"""Indexing at integer arrays against NumPy and JAX: an embedding lookup
fused into its consumer, its gradient (a scatter-add), and x.at[idx].add.

    python benchmarks/bench_indexing.py

Medians of repeated calls (float32), after checking that the results agree."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import median_ms  # noqa: E402

import cjit  # noqa: E402
import cjit.numpy as cnp  # noqa: E402

V, D, T = 10_000, 128, 8192


def main():
    rng = np.random.default_rng(0)
    E = rng.standard_normal((V, D)).astype(np.float32)
    t = rng.integers(0, V, T)
    u = rng.standard_normal((T, D)).astype(np.float32)
    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_platforms", "cpu")
    except ImportError:
        jax = None

    def fwd(m):
        return lambda E, t: m.tanh(E[t]).sum(axis=1)

    def loss(m):
        return lambda E, t: (m.tanh(E[t]) ** 2).sum()

    def upd(E, t, u):
        return E.at[t].add(u)

    rows = []
    c_fwd, c_grad, c_upd = cjit.jit(fwd(cnp)), cjit.jit(cjit.grad(loss(cnp))), cjit.jit(upd)

    def np_grad():
        th = np.tanh(E[t])
        g = np.zeros_like(E)
        np.add.at(g, t, 2 * th * (1 - th * th))
        return g

    def np_upd():
        y = E.copy()
        np.add.at(y, t, u)
        return y
    np.testing.assert_allclose(c_fwd(E, t), np.tanh(E[t]).sum(1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(c_grad(E, t), np_grad(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(c_upd(E, t, u), np_upd(), rtol=1e-5, atol=1e-5)
    cases = [("embedding lookup + tanh + sum", lambda: c_fwd(E, t), lambda: np.tanh(E[t]).sum(1)),
             ("its gradient (scatter-add)", lambda: c_grad(E, t), np_grad),
             ("E.at[t].add(u)", lambda: c_upd(E, t, u), np_upd)]
    if jax:
        j_fwd, j_grad, j_upd = jax.jit(fwd(jnp)), jax.jit(jax.grad(loss(jnp))), jax.jit(upd)
        jE, jt, ju = jnp.asarray(E), jnp.asarray(t), jnp.asarray(u)
        np.testing.assert_allclose(np.asarray(j_grad(jE, jt)), np_grad(), rtol=1e-4, atol=1e-5)
        jax_fns = [lambda: j_fwd(jE, jt).block_until_ready(), lambda: j_grad(jE, jt).block_until_ready(),
                   lambda: j_upd(jE, jt, ju).block_until_ready()]
    for k, (name, c, n) in enumerate(cases):
        cm, nm = median_ms(c), median_ms(n)
        jm = median_ms(jax_fns[k]) if jax else None
        rows.append((name, cm, nm, jm))
    print(f"| float32, V={V}, D={D}, {T} indices | cjit ms | NumPy ms | JAX ms | JAX / cjit |")
    print("|---|---|---|---|---|")
    for name, cm, nm, jm in rows:
        j = f"{jm:.3f} | {jm / cm:.2f}x" if jm is not None else "- | -"
        print(f"| {name} | {cm:.3f} | {nm:.3f} | {j} |")


if __name__ == "__main__":
    main()
