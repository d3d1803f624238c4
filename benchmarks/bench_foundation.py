"""Per-call time of a cached tiny jitted function and of a fused 8-op
elementwise chain (10^6 and 10^7 float32), cjit vs NumPy vs JAX (when
installed), measured side by side in one run.  Prints medians.

    python benchmarks/bench_foundation.py
"""
import time

import numpy as np

import cjit
import cjit.numpy as cnp

try:
    import jax
    import jax.numpy as jnp
except ImportError:
    jax = None


def median_us(fn, repeats, inner=1):
    fn()  # warm: compile, caches
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return float(np.median(samples)) * 1e6


def chain(np_like):
    def f(x, y):
        a = x * y + 1.0
        b = np_like.tanh(a) * 0.5
        c = np_like.exp(-b * b)
        return np_like.maximum(c - 0.25, 0.0) / (1.0 + x * x)
    return f


def main():
    rows = []
    x_tiny = np.float32(1.5) * np.ones(4, np.float32)
    tiny_cj = cjit.jit(lambda x: x + 1)
    cases = [("tiny call x+1 (4 floats)", median_us(lambda: tiny_cj(x_tiny), 200, 100),
              median_us(lambda: x_tiny + 1, 200, 100),
              median_us(lambda: jax.jit(lambda x: x + 1)(x_tiny).block_until_ready(), 50, 20) if jax else None)]
    if jax:
        tiny_jax = jax.jit(lambda x: x + 1)
        xj = jnp.asarray(x_tiny)
        cases[0] = cases[0][:3] + (median_us(lambda: tiny_jax(xj).block_until_ready(), 200, 100),)
    rng = np.random.default_rng(0)
    for n in (10**6, 10**7):
        x = rng.standard_normal(n, dtype=np.float32)
        y = rng.standard_normal(n, dtype=np.float32)
        f_cj = cjit.jit(chain(cnp))
        f_np = chain(np)
        got, want = f_cj(x, y), f_np(x, y)
        assert np.allclose(got, want, rtol=1e-5, atol=1e-6), "cjit and NumPy disagree"
        reps = 30 if n == 10**6 else 10
        t_j = None
        if jax:
            f_jx = jax.jit(chain(jnp))
            xj, yj = jnp.asarray(x), jnp.asarray(y)
            t_j = median_us(lambda: f_jx(xj, yj).block_until_ready(), reps)
        cases.append((f"8-op chain, {n:.0e} float32", median_us(lambda: f_cj(x, y), reps),
                      median_us(lambda: f_np(x, y), reps), t_j))
    print(f"{'workload':34s} {'cjit us':>10s} {'numpy us':>10s} {'jax us':>10s} {'numpy/cjit':>11s} {'jax/cjit':>9s}")
    for name, c, n, j in cases:
        js = f"{j:10.1f}" if j is not None else f"{'absent':>10s}"
        jr = f"{j / c:9.2f}" if j is not None else f"{'-':>9s}"
        print(f"{name:34s} {c:10.1f} {n:10.1f} {js} {n / c:11.2f} {jr}")


if __name__ == "__main__":
    main()
