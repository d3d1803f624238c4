"""Peak memory and time of canonical programs: cjit (its exact plan, and the
peak measured by cjit.memory_stats around one call), NumPy eager (which
materializes every intermediate; peak measured with tracemalloc, which
NumPy reports its allocations to) and JAX (XLA's memory_analysis of the
compiled function) when installed.  Side by side, one run, medians.

    python benchmarks/bench_memory.py
"""
import gc
import tracemalloc

import numpy as np

from timing import median_ms

import cjit
import cjit.nn
import cjit.numpy as cnp

try:
    import jax
    import jax.numpy as jnp
except ImportError:
    jax = None

N, M = 4096, 1024


def programs(xp, nn):
    def chain(x):
        y = x * 2.0 + 1.0
        y = xp.tanh(y) - 0.5
        y = y * y + x
        y = xp.exp(-y) / (1.0 + x * x)
        return xp.maximum(y, 0.1)

    def dot_sum(x, y):
        return (x * y).sum(axis=-1)

    def softmax(x):
        e = xp.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def layer_norm(x):
        m = x.mean(axis=-1, keepdims=True)
        v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
        return (x - m) / xp.sqrt(v + 1e-5)

    def mlp(x, w1, w2, w3):
        return xp.tanh(xp.tanh(x @ w1) @ w2) @ w3

    return {"10-op chain": chain, "(x*y).sum(-1)": dot_sum, "row softmax": softmax,
            "layer norm": layer_norm, "MLP forward": mlp}


def numpy_peak(fn, args):
    gc.collect()
    tracemalloc.start()
    out = fn(*args)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del out
    return peak + sum(a.nbytes for a in args)   # arguments count, as in the plans


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, M), dtype=np.float32)
    y = rng.standard_normal((N, M), dtype=np.float32)
    w1 = (rng.standard_normal((M, 512)) / 32).astype(np.float32)
    w2 = (rng.standard_normal((512, 512)) / 24).astype(np.float32)
    w3 = (rng.standard_normal((512, 10)) / 24).astype(np.float32)
    args = {"10-op chain": (x,), "(x*y).sum(-1)": (x, y), "row softmax": (x,), "layer norm": (x,),
            "MLP forward": (x, w1, w2, w3)}
    cj, npf = programs(cnp, cjit.nn), programs(np, None)
    jx = programs(jnp, None) if jax else None
    print(f"{'program':16s} {'kernels':>7s} {'cjit plan':>11s} {'cjit meas.':>11s} {'numpy':>11s} "
          f"{'jax':>11s} {'cjit ms':>8s} {'numpy ms':>9s} {'jax ms':>8s}")
    rows = []
    for name, a in args.items():
        f = cjit.jit(cj[name])
        ma = f.lower(*a).compile().memory_analysis()
        f(*a)
        gc.collect()
        base = cjit.memory_stats()["bytes_in_use"]
        cjit.reset_peak_memory_stats()
        out = f(*a)
        measured = cjit.memory_stats()["peak_bytes_in_use"] - base
        del out
        np_peak = numpy_peak(npf[name], a)
        t_cj = median_ms(lambda: f(*a))
        t_np = median_ms(lambda: npf[name](*a))
        j_peak = t_j = None
        if jax:
            ja = [jnp.asarray(v) for v in a]
            jf = jax.jit(jx[name])
            m = jf.lower(*ja).compile().memory_analysis()
            j_peak = m.temp_size_in_bytes + m.argument_size_in_bytes + m.output_size_in_bytes
            t_j = median_ms(lambda: jax.block_until_ready(jf(*ja)))
        mib = lambda v: "absent" if v is None else f"{v / 2**20:.1f} MiB"
        ms = lambda v: "absent" if v is None else f"{v:.2f}"
        print(f"{name:16s} {ma.num_kernels:7d} {mib(ma.peak_memory_in_bytes):>11s} {mib(measured):>11s} "
              f"{mib(np_peak):>11s} {mib(j_peak):>11s} {ms(t_cj):>8s} {ms(t_np):>9s} {ms(t_j):>8s}",
              flush=True)
        rows.append(name)


if __name__ == "__main__":
    main()
