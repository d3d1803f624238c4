"""GPU check: cjit's CUDA backend against NumPy (correctness) and JAX (speed).

    python benchmarks/gpu_check.py [--quick]

1. The op matrix: every elementwise op over the dtypes, reductions over
   each axis, matmul, shape ops, run on the GPU and compared with NumPy.
2. Control flow: cjit.lax programs (a scan with xs and ys, a reverse
   scan, fori_loop, while_loop, cond and switch, nested scans, a scan's
   gradient), run on the GPU (the host drives the loop) and compared with
   the same programs on the CPU.
3. Timings on the same GPU: an elementwise chain, row softmax, matmul, and
   an MLP train step when cjit.grad works, against jax.jit when JAX (with a
   GPU) is installed.  Each time is the median of several runs of a
   call followed by block_until_ready().

Exits 0 with a message on a machine without an NVIDIA GPU or driver.
Finishes in well under 5 minutes (a time budget cuts the timing loops).
"""
import sys
import time

import numpy as np

import cjit
# float64 rows (and NumPy's float64 references) need cjit's 64-bit mode, as
# JAX's do; without it 64-bit inputs become 32-bit (docs/API.md, section 2)
cjit.config.update("jax_enable_x64", True)
import cjit.numpy as cnp
from cjit import lax

BUDGET_S = 240
T0 = time.perf_counter()
QUICK = "--quick" in sys.argv
DEVICE = "cuda"   # "cpu" checks this script itself on a machine without a GPU


def no_gpu_exit():
    n, why = cjit._cjit.cuda_status()
    if n == 0:
        print(f"gpu_check: no CUDA device ({why}); nothing to check.")
        sys.exit(0)
    name, cc = cjit._cjit.cuda_device_info(0)
    print(f"gpu_check: {name}, compute capability {cc[0]}.{cc[1]}, {n} device(s)")


# ---------------------------------------------------------------------------
# 1. the op matrix

DTYPES = ["bool", "int32", "int64", "float32", "float64"]
UNARY = ["negative", "abs", "sign", "exp", "expm1", "log", "log1p", "sqrt", "square",
         "reciprocal", "tanh", "sin", "cos", "logical_not", "isnan", "isfinite", "floor", "ceil"]
BINARY = ["add", "subtract", "multiply", "divide", "floor_divide", "power", "maximum", "minimum",
          "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
          "logical_or"]
REDUCE = ["sum", "prod", "max", "min", "mean", "var", "argmax", "argmin"]


def sample(shape, dt, seed, positive=False):
    r = np.random.default_rng(seed)
    if dt == "bool":
        return r.random(shape) < 0.5
    if dt.startswith("int"):
        lo = 1 if positive else -5
        return r.integers(lo, 6, shape).astype(dt)
    x = r.standard_normal(shape).astype(dt)
    return np.abs(x) + 0.5 if positive else x


def cases():
    """(label, cjit fn, numpy fn, args)."""
    out = []
    for name in UNARY:
        for dt in DTYPES:
            if name == "reciprocal" and dt.startswith("int"):
                continue   # SPEC: floats only (NumPy's is 1 // x)
            pos = name in ("log", "log1p", "sqrt", "reciprocal")
            out.append((f"{name}[{dt}]", getattr(cnp, name), getattr(np, name),
                        (sample((300, 257), dt, 1, pos),)))
    for name in BINARY:
        for dt in DTYPES:
            pos = name in ("divide", "floor_divide", "power")
            y = sample((300, 257), dt, 2, pos)
            if name == "power" and dt.startswith("int"):
                y = np.minimum(y, 3)
            out.append((f"{name}[{dt}]", getattr(cnp, name), getattr(np, name),
                        (sample((300, 257), dt, 1, name == "power"), y)))
    for name in REDUCE:
        for dt in ("int32", "float32", "float64"):
            for axis in (None, 0, 1, 2):
                out.append((f"{name}[{dt}, axis={axis}]",
                            (lambda f, a: lambda x: f(x, axis=a))(getattr(cnp, name), axis),
                            (lambda f, a: lambda x: f(x, axis=a))(getattr(np, name), axis),
                            (sample((33, 65, 129), dt, 3),)))
    for dt in ("int32", "float32", "float64"):
        out.append((f"matmul[{dt}]", cnp.matmul, np.matmul,
                    (sample((130, 70), dt, 4), sample((70, 90), dt, 5))))
        out.append((f"transpose+concat[{dt}]",
                    lambda x: cnp.concatenate([cnp.transpose(x), x[:, ::-1].T], axis=0),
                    lambda x: np.concatenate([np.transpose(x), x[:, ::-1].T], axis=0),
                    (sample((40, 50), dt, 6),)))
    return out


def close(got, want):
    want = np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{got.dtype}{got.shape} vs {want.dtype}{want.shape}"
    if want.dtype.kind == "f":
        tol = 1e-4 if want.dtype == np.float32 else 1e-10
        ok = np.allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    else:
        ok = np.array_equal(got, want)
    return None if ok else f"max abs diff {np.max(np.abs(got.astype(float) - want.astype(float)))}"


def report(title, total, bad, against):
    """Prints how many of `total` checks matched and each mismatch; True when all did."""
    print(f"\n{title}: {total - len(bad)}/{total} match {against}")
    for label, why in bad:
        print(f"  MISMATCH {label}: {why}")
    return not bad


def op_matrix():
    rows, bad = 0, []
    for label, fn, ref, args in cases():
        try:
            with np.errstate(all="ignore"):
                want = np.asarray(ref(*args))
        except TypeError:
            continue   # NumPy refuses this dtype; so does cjit
        if want.dtype.name not in DTYPES:
            continue   # e.g. exp(bool) is float16 in NumPy
        rows += 1
        try:
            got = np.asarray(cjit.jit(fn, device=DEVICE)(*args))
            why = close(got, want)
        except Exception as e:  # noqa: BLE001 - every failure is listed
            why = f"{type(e).__name__}: {e}"
        if why:
            bad.append((label, why))
    return report("op matrix", rows, bad, "NumPy")


# ---------------------------------------------------------------------------
# 2. control flow against the CPU

def loop_programs():
    """name: (fn, args): each with a loop region, its bodies run by the host."""
    def rnn(h, xs, w):
        def body(h, x):
            h = cnp.tanh(h @ w + x)
            return h, h.sum()
        return lax.scan(body, h, xs)

    def reverse(h, xs, w):
        return lax.scan(lambda c, x: (c * 0.5 + x, c @ w), h, xs, reverse=True)

    def fori(h, xs, w):
        return lax.fori_loop(0, 9, lambda i, c: cnp.tanh(c @ w) + xs[i % 5], h)

    def newton(h, xs, w):
        a = cnp.abs(h) + 1.0
        return lax.while_loop(lambda s: cnp.abs(s * s - a).max() > 1e-5, lambda s: 0.5 * (s + a / s), a)

    def branches(h, xs, w):
        i = (cnp.abs(h).sum() * 7).astype(cnp.int32) % 3
        a = lax.switch(i, [lambda v: v + 1, lambda v: v @ w, lambda v: cnp.sin(v)], h)
        return lax.cond(a.sum() > 0, lambda v: v * 2, lambda v: v - xs.sum(axis=0), a)

    def nested(h, xs, w):
        def outer(c, x):
            d, _ = lax.scan(lambda d, y: (cnp.tanh(d @ w + y * x), None), c, xs)
            return d, d.max()
        return lax.scan(outer, h, xs)

    def grad(h, xs, w):
        return cjit.grad(lambda h, w: rnn(h, xs, w)[1].sum(), argnums=(0, 1))(h, w)

    r = np.random.default_rng(7)
    args = (r.standard_normal((16, 32)).astype(np.float32), r.standard_normal((5, 16, 32)).astype(np.float32),
            (r.standard_normal((32, 32)) * 0.2).astype(np.float32))
    return {f.__name__: (f, args) for f in (rnn, reverse, fori, newton, branches, nested, grad)}


def loop_checks():
    bad = []
    progs = loop_programs()
    for name, (fn, args) in progs.items():
        try:
            want = cjit.jit(fn)(*args)
            got = cjit.jit(fn, device=DEVICE)(*cjit.device_put(args, DEVICE))
            leaves_w = want if isinstance(want, (tuple, list)) else [want]
            leaves_g = got if isinstance(got, (tuple, list)) else [got]
            why = next((w for w in (close(np.asarray(g), np.asarray(v)) for g, v in zip(leaves_g, leaves_w)) if w),
                       None)
        except Exception as e:  # noqa: BLE001 - every failure is listed
            why = f"{type(e).__name__}: {e}"
        if why:
            bad.append((name, why))
    return report("control flow", len(progs), bad, "the CPU")


# ---------------------------------------------------------------------------
# 3. timings against JAX

def median_time(fn, args, reps):
    out = fn(*args)
    block(out)
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        block(fn(*args))
        ts.append(time.perf_counter() - t)
        if time.perf_counter() - T0 > BUDGET_S:
            break
    return float(np.median(ts))


def block(out):
    leaves = out if isinstance(out, (tuple, list)) else [out]
    for x in leaves:
        if hasattr(x, "block_until_ready"):
            x.block_until_ready()


def load_jax():
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None, None, "JAX not installed"
    try:
        gpus = jax.devices("gpu")
    except RuntimeError as e:
        return None, None, f"JAX has no GPU ({e})"
    return jax, jnp, gpus[0]


def programs(xp):
    def chain(x, y):
        return xp.tanh(x * 2.0 + y) * xp.exp(-x) - xp.sqrt(xp.abs(y)) / (1.0 + x * x)

    def softmax(x):
        e = xp.exp(x - xp.max(x, axis=1, keepdims=True))
        return e / xp.sum(e, axis=1, keepdims=True)

    def matmul(a, b):
        return a @ b
    return {"chain": chain, "softmax": softmax, "matmul": matmul}


def train_step_fns():
    """(cjit step, jax step builder) for a 2-layer MLP with SGD, or None."""
    if not hasattr(cjit, "grad"):
        return None

    def make(xp, grad):
        def loss(p, x, y):
            h = xp.maximum(x @ p[0] + p[1], 0.0)
            o = h @ p[2] + p[3]
            return xp.mean((o - y) ** 2)

        def step(p, x, y):
            g = grad(loss)(p, x, y)
            return [w - 0.01 * gw for w, gw in zip(p, g)]
        return step
    return make


def timings():
    jax, jnp, jdev = load_jax()
    if jax is None:
        print(f"\ntimings: {jdev}; cjit only")
    r = np.random.default_rng(0)
    f32 = lambda *s: r.standard_normal(s).astype(np.float32)  # noqa: E731
    n = 1024 if QUICK else 4096
    inputs = {"chain": (f32(n, n), f32(n, n)), "softmax": (f32(n, n),),
              "matmul": (f32(n // 2, n // 2), f32(n // 2, n // 2))}
    cj = programs(cnp)
    jx = programs(jnp) if jax is not None else None
    rows = []
    for name, args in inputs.items():
        dargs = cjit.device_put(args, "cuda")
        t_c = median_time(cjit.jit(cj[name], device="cuda"), dargs, 10)
        t_j = None
        if jx is not None:
            jargs = [jax.device_put(a, jdev) for a in args]
            t_j = median_time(jax.jit(jx[name]), jargs, 10)
        rows.append((name, "x".join(str(d) for d in args[0].shape), t_c, t_j))
    make = train_step_fns()
    if make is None:
        rows.append(("train step", "-", None, None))
    else:
        p = [f32(784, 256) * 0.05, np.zeros(256, np.float32), f32(256, 10) * 0.05,
             np.zeros(10, np.float32)]
        x, y = f32(512, 784), f32(512, 10)
        try:
            step = cjit.jit(make(cnp, cjit.grad), device="cuda")
            t_c = median_time(step, cjit.device_put((p, x, y), "cuda"), 10)
        except Exception as e:  # noqa: BLE001 - reported, the rest still runs
            print(f"train step on cjit failed: {type(e).__name__}: {e}")
            t_c = None
        t_j = None
        if jax is not None:
            jstep = jax.jit(make(jnp, jax.grad))
            t_j = median_time(jstep, [jax.device_put(v, jdev) for v in (p, x, y)], 10)
        rows.append(("MLP train step", "512x784", t_c, t_j))
    print(f"\n{'program':<16}{'shape':>12}{'cjit ms':>12}{'jax ms':>12}{'jax/cjit':>10}")
    for name, shape, t_c, t_j in rows:
        fmt = lambda t: f"{t * 1e3:12.3f}" if t is not None else f"{'n/a':>12}"  # noqa: E731
        ratio = f"{t_j / t_c:10.2f}" if t_c and t_j else f"{'':>10}"
        print(f"{name:<16}{shape:>12}{fmt(t_c)}{fmt(t_j)}{ratio}")


def main():
    no_gpu_exit()
    ok = op_matrix()
    ok = loop_checks() and ok
    timings()
    print(f"\ngpu_check: done in {time.perf_counter() - T0:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
