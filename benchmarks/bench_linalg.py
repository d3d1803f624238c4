"""Linear algebra against NumPy and JAX (float64, medians): Cholesky, a
solve, a determinant, and the gradient of a Gaussian log density (a
Cholesky, a triangular solve and their derivatives).

    python benchmarks/bench_linalg.py"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import median_ms  # noqa: E402

import cjit  # noqa: E402
# float64 rows (and NumPy's float64 references) need cjit's 64-bit mode, as
# JAX's do; without it 64-bit inputs become 32-bit (docs/API.md, section 2)
cjit.config.update("jax_enable_x64", True)
import cjit.numpy as cnp  # noqa: E402
from cjit.scipy import linalg as cl  # noqa: E402

N, K, B = 256, 16, 8


def main():
    rng = np.random.default_rng(0)
    m = rng.standard_normal((B, N, N))
    spd = m @ np.swapaxes(m, -1, -2) + N * np.eye(N)
    b = rng.standard_normal((B, N, K))
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_platforms", "cpu")
        import jax.numpy as jnp
        import jax.scipy.linalg as jsl
    except ImportError:
        jax = None

    def logpdf(xp, sl):
        def f(cov, x):
            L = xp.linalg.cholesky(cov)
            z = sl.solve_triangular(L, x, lower=True)
            return -0.5 * xp.sum(z * z) - x.shape[-1] * xp.sum(xp.log(xp.diagonal(L, axis1=-2, axis2=-1)))
        return f
    cases = [
        ("cholesky", cjit.jit(cnp.linalg.cholesky), (spd,), lambda: np.linalg.cholesky(spd),
         (lambda: jax.jit(jnp.linalg.cholesky)) if jax else None),
        ("solve", cjit.jit(cnp.linalg.solve), (m, b), lambda: np.linalg.solve(m, b),
         (lambda: jax.jit(jnp.linalg.solve)) if jax else None),
        ("det", cjit.jit(cnp.linalg.det), (m,), lambda: np.linalg.det(m),
         (lambda: jax.jit(jnp.linalg.det)) if jax else None),
        ("grad of a Gaussian log density", cjit.jit(cjit.grad(logpdf(cnp, cl))), (spd, b), None,
         (lambda: jax.jit(jax.grad(logpdf(jnp, jsl)))) if jax else None),
    ]
    print(f"| float64, {B} matrices of {N}x{N} (b: {K} columns) | cjit ms | NumPy ms | JAX ms | JAX / cjit |")
    print("|---|---|---|---|---|")
    for name, c, args, n, j in cases:
        cm = median_ms(lambda: c(*args))
        nm = median_ms(n) if n else None
        jm = None
        if j:
            jf = j()
            jargs = tuple(jnp.asarray(a) for a in args)
            np.testing.assert_allclose(np.asarray(jf(*jargs)), c(*args), rtol=1e-6, atol=1e-8)
            jm = median_ms(lambda: jax.block_until_ready(jf(*jargs)))
        print(f"| {name} | {cm:.2f} | {'-' if nm is None else f'{nm:.2f}'} | "
              f"{'-' if jm is None else f'{jm:.2f}'} | {'-' if jm is None else f'{jm / cm:.2f}x'} |")


if __name__ == "__main__":
    main()
