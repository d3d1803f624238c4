"""Small matmuls: cjit's gemm path (OpenBLAS), cjit's own kernel for small
products, cjit's generic loop nest (BLAS off), NumPy and JAX, float32 and
float64, with the operand layouts gradients use (A^T B, A B^T); then a deep
narrow MLP train step, cjit against JAX.

Medians of interleaved rounds: each round times every contender once
(a batch of calls, per-call time), so that a slow spell of the machine
hits all of them alike.  --clock cpu (the default) counts the process's CPU
time, not wall time: on a shared machine, run everything on one thread
(CJIT_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1, XLA_FLAGS as below, taskset -c N)
and the time other processes take the core no longer counts.

    CJIT_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
    XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \
    taskset -c 1 python benchmarks/bench_small_matmul.py [--rounds 15] [--clock wall] [--mlp-only]

Run it with the JAX venv's python to include JAX (it imports cjit from
PYTHONPATH); CJIT_NUM_THREADS and taskset choose the threads.
"""
import argparse
import os
import time

import numpy as np

import cjit
# float64 rows (and NumPy's float64 references) need cjit's 64-bit mode, as
# JAX's do; without it 64-bit inputs become 32-bit (docs/API.md, section 2)
cjit.config.update("jax_enable_x64", True)
import cjit.numpy as cnp
from cjit import _cjit

try:
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
except ImportError:
    jax = None

SHAPES = [(256, 64, 64), (64, 64, 64), (128, 128, 128), (32, 784, 128), (256, 64, 10), (256, 10, 64),
          (8, 256, 256), (1024, 64, 64)]
# few rows: where cjit's own kernel (csrc/gemm_small.c) can run them
SMALL_M_SHAPES = [(2, 256, 256), (4, 256, 256), (8, 256, 256), (12, 256, 256), (16, 256, 256), (32, 256, 256),
                  (4, 64, 64), (8, 64, 64), (16, 64, 64), (8, 784, 128), (16, 32, 32), (8, 64, 10)]

# name -> (function of (a, b), how a and b are stored for an (M, K, N) product)
LAYOUTS = {
    "A B": (lambda a, b: a @ b, lambda M, K, N: ((M, K), (K, N))),
    "A^T B": (lambda a, b: a.T @ b, lambda M, K, N: ((K, M), (K, N))),
    "A B^T": (lambda a, b: a @ b.T, lambda M, K, N: ((M, K), (N, K))),
}


def compiled(f, args, mode):
    """f compiled by cjit with matmuls on `mode`: "gemm" (BLAS), "small"
    (cjit's small-matmul kernel, where the size rule picks it), "loops"
    (BLAS off: the generic loop nest)."""
    blas_was = _cjit._set_blas_enabled(mode != "loops")
    small_was = _cjit._set_small_gemm_enabled(mode == "small") if hasattr(_cjit, "_set_small_gemm_enabled") else None
    try:
        c = cjit.jit(lambda *xs: f(*xs)).lower(*args).compile()
    finally:
        _cjit._set_blas_enabled(blas_was)
        if small_was is not None:
            _cjit._set_small_gemm_enabled(small_was)
    return c


CLOCK = time.process_time


def per_call_us(fn, target_s=0.02):
    """Calls per batch so that a batch takes about target_s."""
    fn()
    t0 = CLOCK()
    n = 0
    while CLOCK() - t0 < target_s / 4:
        fn()
        n += 1
    return max(1, n * 4)


def race(contenders, rounds):
    """Median per-call microseconds of each contender, rounds interleaved."""
    reps = {name: per_call_us(fn) for name, fn in contenders.items()}
    times = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            n = reps[name]
            t0 = CLOCK()
            for _ in range(n):
                fn()
            times[name].append((CLOCK() - t0) / n * 1e6)
    return {name: float(np.median(t)) for name, t in times.items()}


def bench_matmuls(rounds, dtypes, shapes, layouts):
    rng = np.random.default_rng(0)
    small = hasattr(_cjit, "_set_small_gemm_enabled")
    cols = ["numpy", "cjit gemm"] + (["cjit small"] if small else []) + ["cjit loops"] + (["jax"] if jax else [])
    print(f"{'dtype':8} {'M,K,N':14} {'layout':6} " + " ".join(f"{c:>11}" for c in cols) + "   (us per call)")
    rows = []
    for dt in dtypes:
        for M, K, N in shapes:
            for lname in layouts:
                f, store = LAYOUTS[lname]
                sa, sb = store(M, K, N)
                a = rng.standard_normal(sa).astype(dt)
                b = rng.standard_normal(sb).astype(dt)
                ref = f(a, b)
                con = {"numpy": lambda: f(a, b)}
                for mode in ("gemm", "small", "loops") if small else ("gemm", "loops"):
                    c = compiled(f, (a, b), mode)
                    got = np.asarray(c(a, b))
                    tol = 1e-4 if dt == np.float32 else 1e-10
                    assert np.allclose(got, ref, rtol=tol, atol=tol * np.abs(ref).max()), (mode, M, K, N, lname)
                    con["cjit " + mode] = (lambda c=c: c(a, b))
                if jax:
                    ja, jb = jnp.asarray(a), jnp.asarray(b)
                    jf = jax.jit(f)
                    con["jax"] = lambda: jf(ja, jb).block_until_ready()
                t = race(con, rounds)
                print(f"{np.dtype(dt).name:8} {f'{M},{K},{N}':14} {lname:6} " +
                      " ".join(f"{t[c]:11.1f}" for c in cols), flush=True)
                rows.append((np.dtype(dt).name, (M, K, N), lname, t))
    return rows


def mlp(np_like, depth, act):
    def loss(params, x):
        h = x
        for w, b in params:
            h = act(h @ w + b)
        return (h * h).mean()
    return loss


def bench_mlp(rounds, batch=256, width=64, depth=8):
    rng = np.random.default_rng(1)
    params = [((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32),
               np.zeros(width, np.float32)) for _ in range(depth)]
    x = rng.standard_normal((batch, width)).astype(np.float32)
    lr = 0.01

    def make_step(np_like, value_and_grad):
        vg = value_and_grad(mlp(np_like, depth, np_like.tanh))

        def step(params, x):
            l, g = vg(params, x)
            return l, [(w - lr * gw, b - lr * gb) for (w, b), (gw, gb) in zip(params, g)]
        return step

    con = {}
    results = {}
    for mode in ("gemm", "small", "loops") if hasattr(_cjit, "_set_small_gemm_enabled") else ("gemm", "loops"):
        was = _cjit._set_blas_enabled(mode != "loops")
        sw = _cjit._set_small_gemm_enabled(mode == "small") if hasattr(_cjit, "_set_small_gemm_enabled") else None
        try:
            c = cjit.jit(make_step(cnp, cjit.value_and_grad)).lower(params, x).compile()
        finally:
            _cjit._set_blas_enabled(was)
            if sw is not None:
                _cjit._set_small_gemm_enabled(sw)
        results[mode] = c(params, x)
        con["cjit " + mode] = (lambda c=c: c(params, x))
    if jax:
        jax.config.update("jax_enable_x64", False)
        js = jax.jit(make_step(jnp, jax.value_and_grad))
        jp = jax.tree_util.tree_map(jnp.asarray, params)
        jx = jnp.asarray(x)
        jl, _ = js(jp, jx)
        assert abs(float(jl) - float(results["gemm"][0])) < 1e-4 * abs(float(jl)) + 1e-6
        con["jax"] = lambda: jax.block_until_ready(js(jp, jx))
    t = race(con, rounds)
    print(f"MLP train step (batch {batch}, {depth} x {width}, tanh, float32): " +
          ", ".join(f"{k} {v:.1f} us" for k, v in t.items()), flush=True)
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--mlp-only", action="store_true")
    ap.add_argument("--no-mlp", action="store_true")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--shapes", choices=("issue", "few-rows", "all"), default="all")
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    print(f"clock {args.clock}, cjit threads {_cjit.num_threads() if hasattr(_cjit, 'num_threads') else '?'}, "
          f"CJIT_NUM_THREADS={os.environ.get('CJIT_NUM_THREADS')}, BLAS: {_cjit.blas_library()}")
    if not args.mlp_only:
        shapes = {"issue": SHAPES, "few-rows": SMALL_M_SHAPES, "all": SHAPES + SMALL_M_SHAPES}[args.shapes]
        bench_matmuls(args.rounds, [np.dtype(d).type for d in args.dtypes.split(",")], shapes,
                      args.layouts.split(","))
    if not args.no_mlp:
        bench_mlp(args.rounds)


if __name__ == "__main__":
    main()
