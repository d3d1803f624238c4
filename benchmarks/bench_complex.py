"""Complex programs: cjit against NumPy and JAX, the same program in each.

    python benchmarks/bench_complex.py [--rounds N]

Rows: an elementwise complex chain (one fused kernel in cjit), a complex
matmul, a batch of FFTs along the last axis, and the gradient of a real
loss of a complex signal (a filter applied in the frequency domain).
complex64 throughout; medians of interleaved rounds in milliseconds.
Results are checked against NumPy before timing.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import median_ms  # noqa: E402

import cjit  # noqa: E402
import cjit.numpy as cnp  # noqa: E402


def chain(m, z, w):
    return m.exp(z * w + 1j) * z - w / (z + 2)


def spectral_loss(m, fft, z, h):
    spec = fft.fft(z, axis=-1) * h
    return (m.abs(fft.ifft(spec, axis=-1)) ** 2).mean()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)

    def crandn(*s):
        return (rng.standard_normal(s) + 1j * rng.standard_normal(s)).astype(np.complex64)

    z, w = crandn(1 << 20), crandn(1 << 20)
    a, b = crandn(256, 256), crandn(256, 256)
    sig = crandn(64, 4096)
    h = crandn(4096)
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        jax = None

    cases = [
        ("elementwise chain, 2^20", cjit.jit(lambda u, v: chain(cnp, u, v)), (z, w),
         lambda: chain(np, z, w),
         (lambda: jax.jit(lambda u, v: chain(jnp, u, v))) if jax else None),
        ("matmul 256", cjit.jit(lambda u, v: u @ v), (a, b), lambda: a @ b,
         (lambda: jax.jit(lambda u, v: u @ v)) if jax else None),
        ("fft 64 x 4096", cjit.jit(lambda s: cnp.fft.fft(s, axis=-1)), (sig,),
         lambda: np.fft.fft(sig, axis=-1),
         (lambda: jax.jit(lambda s: jnp.fft.fft(s, axis=-1))) if jax else None),
        ("grad of a spectral filter loss", cjit.jit(cjit.grad(
            lambda s: spectral_loss(cnp, cnp.fft, s, h))), (sig,), None,
         (lambda: jax.jit(jax.grad(lambda s: spectral_loss(jnp, jnp.fft, s, h)))) if jax else None),
    ]
    print("| program | cjit ms | NumPy ms | JAX ms |")
    print("|---|---:|---:|---:|")
    for name, cfun, cargs, npfun, jmake in cases:
        out = np.asarray(cfun(*cargs))
        if npfun is not None:
            want = npfun()
            err = np.abs(out - want).max() / max(1.0, np.abs(want).max())
            assert err < 1e-3, (name, err)
        jfun = jmake() if jmake else None
        if jfun is not None:
            jout = np.asarray(jfun(*cargs))
            err = np.abs(out - jout).max() / max(1.0, np.abs(jout).max())
            assert err < 1e-3, (name, err)
        times = {"c": [], "n": [], "j": []}
        for _ in range(args.rounds):
            times["c"].append(median_ms(lambda: cfun(*cargs), 3))
            if npfun is not None:
                times["n"].append(median_ms(npfun, 3))
            if jfun is not None:
                times["j"].append(median_ms(lambda: jfun(*cargs).block_until_ready(), 3))
        med = {k: (f"{np.median(v):.2f}" if v else "-") for k, v in times.items()}
        print(f"| {name} | {med['c']} | {med['n']} | {med['j']} |", flush=True)


if __name__ == "__main__":
    main()
