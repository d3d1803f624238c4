"""Accuracy and speed of float sums: cjit vs NumPy (and JAX when installed).

Relative errors are against math.fsum of the inputs (exact, rounded once to
float64).  Times are medians.

    python benchmarks/bench_sum.py
"""
import itertools
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import median_ms  # noqa: E402

import cjit  # noqa: E402
# float64 rows (and NumPy's float64 references) need cjit's 64-bit mode, as
# JAX's do; without it 64-bit inputs become 32-bit (docs/API.md, section 2)
cjit.config.update("jax_enable_x64", True)

try:
    import jax
    import jax.numpy as jnp
except ImportError:
    jax = None


def rel_err(got, exact):
    return abs(float(got) - exact) / abs(exact)


def main():
    rng = np.random.default_rng(0)
    n = 10**7
    inputs = [("sum 1e7 x 0.1 float32", np.full(n, 0.1, np.float32)),
              ("sum 1e7 uniform float32", rng.random(n, dtype=np.float32)),
              ("sum 1e7 1000+uniform f32", rng.random(n, dtype=np.float32) + np.float32(1000)),
              ("sum 1e7 1000+uniform f64", rng.random(n) + 1000.0)]
    print(f"{'workload':28s} {'cjit ms':>8s} {'numpy ms':>9s} {'jax ms':>8s} "
          f"{'cjit err':>10s} {'numpy err':>10s} {'jax err':>10s}")
    for name, x in inputs:
        exact = math.fsum(itertools.chain.from_iterable(p.tolist() for p in np.array_split(x, 64)))
        f_cj = cjit.jit(lambda v: v.sum())
        t_c, t_n = median_ms(lambda: f_cj(x), 15), median_ms(lambda: x.sum(), 15)
        e_c, e_n = rel_err(f_cj(x), exact), rel_err(x.sum(), exact)
        t_j = e_j = None
        if jax:
            f_jx = jax.jit(lambda v: v.sum())
            xj = jnp.asarray(x)
            t_j = median_ms(lambda: f_jx(xj).block_until_ready(), 15)
            e_j = rel_err(f_jx(xj), exact)
        tj = f"{t_j:8.2f}" if t_j is not None else f"{'absent':>8s}"
        ej = f"{e_j:10.2e}" if e_j is not None else f"{'-':>10s}"
        print(f"{name:28s} {t_c:8.2f} {t_n:9.2f} {tj} {e_c:10.2e} {e_n:10.2e} {ej}")
    x = rng.standard_normal((4096, 1024), dtype=np.float32)
    for name, fc, fn in [("row sum (4096, 1024) f32", lambda v: v.sum(axis=1), lambda v: v.sum(axis=1)),
                         ("column sum (4096, 1024) f32", lambda v: v.sum(axis=0), lambda v: v.sum(axis=0)),
                         ("row sum (1024, 4096) f32", lambda v: v.sum(axis=1), lambda v: v.sum(axis=1))]:
        xx = x.reshape(1024, 4096) if "(1024, 4096)" in name else x
        f_cj = cjit.jit(fc)
        print(f"{name:28s} {median_ms(lambda: f_cj(xx), 30):8.3f} {median_ms(lambda: fn(xx), 30):9.3f}")


if __name__ == "__main__":
    main()
