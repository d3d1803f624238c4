"""cjit vs NumPy vs JAX on the CPU, measured side by side in one run.

    python benchmarks/run.py [--quick] [--only SUBSTR]

Every workload runs for each framework in interleaved rounds (cjit, NumPy,
JAX, cjit, NumPy, JAX, ...), so that a change in the machine's state during
the run (frequency, other load) hits all three alike; each row reports the
median of its rounds.  The same run measures the machine's copy bandwidth
(np.copyto of a large array, on one thread and on every core), and each
memory-bound row shows the fraction of it that its kernels reach.

A second table times programs users write (benchmarks/workloads.py: one
source per model for all three frameworks, NumPy's gradients by hand),
each checked against NumPy before it is timed, and their geometric mean.

Writes benchmarks/results.md (the tables) and benchmarks/results.png (a
plot, when matplotlib is installed).  A framework that is not installed is
marked "absent".
"""
import os
import sys

# NumPy's matmul must use the machine's best BLAS kernel: these variables,
# when set (as on some CI images), pin OpenBLAS to a slow generic one.  They
# are dropped for this process only, before NumPy is imported.
for _var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(_var, None)
# After a call, NumPy's threaded OpenBLAS keeps its threads spinning on the
# cores for a while; the next framework's threads then run on a busy core,
# and a 2-thread matmul takes as long as a 1-thread one.  A short timeout
# (OpenBLAS's minimum) puts them to sleep at once; NumPy's own times do not
# change (measured: 1024^3 float32, 11.5 ms either way).
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
# The "first call (compile)" rows time compiles: the persistent compile cache
# would serve them from disk after the first run (its own benchmark is
# benchmarks/bench_disk_cache.py), so it is off here.
os.environ["CJIT_CACHE"] = "0"

import argparse  # noqa: E402
import concurrent.futures  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import cjit  # noqa: E402
from bench_foundation import chain  # noqa: E402  (the 8-op chain, one definition)
import workloads as W  # noqa: E402  (the programs users write)
import cjit.nn  # noqa: E402
import cjit.numpy as cnp  # noqa: E402
from cjit import _cjit  # noqa: E402

try:
    import jax  # noqa: E402
    import jax.numpy as jnp  # noqa: E402
    import jax.nn  # noqa: E402
    jax.config.update("jax_platforms", "cpu")
except Exception:  # not installed, or broken: the rows say "absent"
    jax = None
    jnp = None

FRAMEWORKS = ("cjit", "numpy", "jax")


# ---------------------------------------------------------------------------
# timing

def _sample(fn, inner):
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def _calibrate(fn, target_s):
    """How many calls make one sample of about target_s seconds."""
    t = _sample(fn, 1)
    if t <= 0:
        return 1000
    return max(1, min(100000, int(target_s / t)))


def measure(impls, rounds, target_s):
    """impls: {framework: callable or None}.  Interleaved rounds; returns
    {framework: median seconds per call (None when absent)}."""
    live = {k: f for k, f in impls.items() if f is not None}
    inner = {}
    for k, f in live.items():
        f()   # warm: compile, caches, page faults
        f()
        inner[k] = _calibrate(f, target_s)
    samples = {k: [] for k in live}
    for _ in range(rounds):
        for k, f in live.items():
            samples[k].append(_sample(f, inner[k]))
    return {k: (statistics.median(samples[k]) if k in samples else None) for k in impls}


def copy_bandwidth(nbytes=1 << 28):
    """Bytes moved per second (read + write) by np.copyto of a large array,
    on one thread and on every core (numpy releases the GIL while copying);
    returns (one thread, all cores)."""
    src = np.ones(nbytes // 4, np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    one = min(_sample(lambda: np.copyto(dst, src), 1) for _ in range(5))
    ncpu = os.cpu_count() or 1
    parts = np.array_split(np.arange(src.size), ncpu)
    bounds = [(p[0], p[-1] + 1) for p in parts if p.size]
    pool = concurrent.futures.ThreadPoolExecutor(len(bounds))

    def par():
        list(pool.map(lambda b: np.copyto(dst[b[0]:b[1]], src[b[0]:b[1]]), bounds))
    par()
    many = min(_sample(par, 1) for _ in range(5))
    pool.shutdown()
    return 2 * nbytes / one, 2 * nbytes / many


# ---------------------------------------------------------------------------
# workloads: each returns (impls, bytes moved by one call or None, note)

def block(x):
    return x.block_until_ready() if hasattr(x, "block_until_ready") else x


def jaxed(f, *args):
    """A jax.jit of f on device copies of args, blocking on the result."""
    if jax is None:
        return None
    g = jax.jit(f)
    dargs = [jax.device_put(a) for a in args]

    def run():
        return jax.block_until_ready(g(*dargs))
    return run


def softmax(m):
    def f(x):
        e = m.exp(x - m.max(x, axis=-1, keepdims=True))
        return e / m.sum(e, axis=-1, keepdims=True)
    return f


def layer_norm(m):
    def f(x, g, b):
        mu = m.mean(x, axis=-1, keepdims=True)
        d = x - mu
        var = m.mean(d * d, axis=-1, keepdims=True)
        return d / m.sqrt(var + 1e-5) * g + b
    return f


def check(got, want, what, rtol=1e-4, atol=1e-5):
    got, want = np.asarray(got), np.asarray(want)
    if not np.allclose(got, want, rtol=rtol, atol=atol):
        err = np.max(np.abs(got.astype(np.float64) - want))
        raise AssertionError(f"{what}: cjit and NumPy disagree (max abs error {err:.3g})")


def wl_tiny():
    x = np.full(4, 1.5, np.float32)
    f = cjit.jit(lambda x: x + 1)
    return {"cjit": lambda: f(x), "numpy": lambda: x + 1,
            "jax": jaxed(lambda x: x + 1, x)}, None


def wl_chain(n):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    f = cjit.jit(chain(cnp))
    g = chain(np)
    check(f(x, y), g(x, y), "chain")
    return {"cjit": lambda: f(x, y), "numpy": lambda: g(x, y),
            "jax": jaxed(chain(jnp) if jnp else None, x, y)}, 12 * n


def wl_axpy(n):
    """A memory-bound loop (x * y + 1): what fraction of the copy bandwidth
    a kernel reaches when the arithmetic costs nothing."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    f = cjit.jit(lambda a, b: a * b + 1.0)
    check(f(x, y), x * y + 1.0, "axpy")
    return {"cjit": lambda: f(x, y), "numpy": lambda: x * y + 1.0,
            "jax": jaxed(lambda a, b: a * b + 1.0, x, y)}, 12 * n


def wl_softmax():
    x = np.random.default_rng(1).standard_normal((4096, 1024), dtype=np.float32)
    f = cjit.jit(softmax(cnp))
    g = softmax(np)
    check(f(x), g(x), "softmax")
    return {"cjit": lambda: f(x), "numpy": lambda: g(x),
            "jax": jaxed(softmax(jnp) if jnp else None, x)}, 2 * x.nbytes


def wl_layer_norm():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4096, 1024), dtype=np.float32)
    gam = rng.standard_normal(1024, dtype=np.float32)
    bet = rng.standard_normal(1024, dtype=np.float32)
    f = cjit.jit(layer_norm(cnp))
    g = layer_norm(np)
    check(f(x, gam, bet), g(x, gam, bet), "layer norm", rtol=1e-3, atol=1e-4)
    return {"cjit": lambda: f(x, gam, bet), "numpy": lambda: g(x, gam, bet),
            "jax": jaxed(layer_norm(jnp) if jnp else None, x, gam, bet)}, 2 * x.nbytes


def wl_matmul(n):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    f = cjit.jit(lambda a, b: a @ b)
    check(f(a, b), a @ b, "matmul", rtol=1e-3, atol=1e-3 * np.sqrt(n))
    return {"cjit": lambda: f(a, b), "numpy": lambda: a @ b,
            "jax": jaxed(lambda a, b: a @ b, a, b)}, None


# --- MLP train step ----------------------------------------------------------

MLP = dict(batch=256, d_in=784, hidden=512, d_out=10, lr=0.01)


def mlp_data():
    rng = np.random.default_rng(4)
    b, i, h, o = MLP["batch"], MLP["d_in"], MLP["hidden"], MLP["d_out"]
    params = {"w1": (rng.standard_normal((i, h)) / np.sqrt(i)).astype(np.float32),
              "b1": np.zeros(h, np.float32),
              "w2": (rng.standard_normal((h, o)) / np.sqrt(h)).astype(np.float32),
              "b2": np.zeros(o, np.float32)}
    x = rng.standard_normal((b, i), dtype=np.float32)
    y = rng.standard_normal((b, o), dtype=np.float32)
    return params, x, y


def mlp_loss(m):
    def loss(p, x, y):
        h = m.maximum(x @ p["w1"] + p["b1"], 0.0)
        d = h @ p["w2"] + p["b2"] - y
        return m.mean(d * d)
    return loss


def make_train_step(value_and_grad, jit, m):
    loss = mlp_loss(m)
    lr = MLP["lr"]

    def step(p, x, y):
        v, g = value_and_grad(loss)(p, x, y)
        return v, {k: p[k] - lr * g[k] for k in p}
    return jit(step)


def numpy_train_step(p, x, y):
    """The same step with the gradient written out by hand."""
    z = x @ p["w1"] + p["b1"]
    h = np.maximum(z, 0.0)
    d = h @ p["w2"] + p["b2"] - y
    v = np.mean(d * d)
    gd = d * np.float32(2.0 / d.size)
    gw2 = h.T @ gd
    gb2 = gd.sum(0)
    gz = (gd @ p["w2"].T) * (z > 0)
    gw1 = x.T @ gz
    gb1 = gz.sum(0)
    lr = np.float32(MLP["lr"])
    g = {"w1": gw1, "b1": gb1, "w2": gw2, "b2": gb2}
    return v, {k: p[k] - lr * g[k] for k in p}


def cjit_has_grad():
    try:
        f = cjit.value_and_grad(lambda x: cnp.sum(x * x))
        f(np.ones(3, np.float32))
        return True
    except Exception:
        return False


def wl_train():
    if not cjit_has_grad():
        return None, None
    params, x, y = mlp_data()
    step = make_train_step(cjit.value_and_grad, cjit.jit, cnp)
    v, newp = step(params, x, y)
    v_np, newp_np = numpy_train_step(params, x, y)
    check(v, v_np, "train step loss", rtol=1e-3, atol=1e-4)
    for k in params:
        check(newp[k], newp_np[k], f"train step {k}", rtol=1e-3, atol=1e-4)
    impls = {"cjit": lambda: step(params, x, y), "numpy": lambda: numpy_train_step(params, x, y),
             "jax": None}
    if jax is not None:
        jstep = make_train_step(jax.value_and_grad, jax.jit, jnp)
        jp = jax.device_put(params)
        jx, jy = jax.device_put(x), jax.device_put(y)
        impls["jax"] = lambda: jax.block_until_ready(jstep(jp, jx, jy))
    return impls, None


# --- programs users write (benchmarks/workloads.py) --------------------------

class Framework:
    """What a model needs from a framework: a NumPy-like module, the
    activations, jit and the gradient transforms."""
    def __init__(self, m, nn, jit, grad, value_and_grad):
        self.m, self.nn, self.jit = m, nn, jit
        self.grad, self.value_and_grad = grad, value_and_grad


CJIT = Framework(cnp, cjit.nn, cjit.jit, cjit.grad, cjit.value_and_grad)
JAX = Framework(jnp, jax.nn, jax.jit, jax.grad, jax.value_and_grad) if jax is not None else None
NUMPY = Framework(np, W.NUMPY_NN, None, None, None)


def _leaves(tree):
    """The arrays of a result (tuples, lists and dicts, dict keys sorted)."""
    if isinstance(tree, dict):
        return [x for k in sorted(tree) for x in _leaves(tree[k])]
    if isinstance(tree, (tuple, list)):
        return [x for t in tree for x in _leaves(t)]
    return [np.asarray(tree)]


def disagreements(name, got, want, rtol):
    """Lines naming each result of `got` that differs from `want` by more
    than rtol relative to the largest magnitude of that result (a normwise
    test: gradients have entries near zero where an elementwise one would
    fail on rounding alone), or whose shape or dtype differs."""
    bad = []
    g, w = _leaves(got), _leaves(want)
    if len(g) != len(w):
        return [f"{name}: {len(g)} results, NumPy has {len(w)}"]
    for i, (a, b) in enumerate(zip(g, w)):
        if a.shape != b.shape or a.dtype != b.dtype:
            bad.append(f"{name}: result {i} is {a.dtype}{list(a.shape)}, "
                       f"NumPy's {b.dtype}{list(b.shape)}")
            continue
        scale = float(np.max(np.abs(b))) if b.size else 0.0
        err = float(np.max(np.abs(a.astype(np.float64) - b))) if b.size else 0.0
        if not err <= rtol * max(scale, 1e-30):
            bad.append(f"{name}: result {i} differs from NumPy's by {err:.3g} "
                       f"(largest magnitude {scale:.3g}, tolerance {rtol:g} of it)")
    return bad


def kernel_count(jitted, args):
    """Kernels and temporary bytes of cjit's compiled plan for args."""
    text = jitted.lower(*args).compile().as_text()
    kernels = sum(1 for line in text.splitlines() if line.startswith("kernel "))
    temps = 0
    for line in text.splitlines():
        if line.startswith("memory:") and "temporaries" in line:
            temps = int(line.split("temporaries")[1].split()[0])
    return kernels, temps


def user_program(name, build, args, numpy_fn=None, rtol=1e-4):
    """impls for one program: build(fw) is the function to jit for a
    Framework; numpy_fn (default: build(NUMPY)) is NumPy's version, the
    reference that cjit's and JAX's results are checked against before
    timing.  Returns (impls, note, kernels)."""
    numpy_fn = numpy_fn or build(NUMPY)
    want = numpy_fn(*args)
    cj = cjit.jit(build(CJIT))
    bad = disagreements(f"{name} (cjit)", cj(*args), want, rtol)
    impls = {"cjit": lambda: cj(*args), "numpy": lambda: numpy_fn(*args), "jax": None}
    if JAX is not None:
        jf = jax.jit(build(JAX))
        jargs = jax.device_put(args)
        bad += disagreements(f"{name} (JAX)", jf(*jargs), want, rtol)
        impls["jax"] = lambda: jax.block_until_ready(jf(*jargs))
    for line in bad:
        print(f"RESULTS DISAGREE: {line}", flush=True)
    return impls, ("results disagree" if bad else ""), kernel_count(cj, args)


def vg_of(loss):
    """build(fw) for value_and_grad(loss) with respect to argument 0."""
    return lambda fw: fw.value_and_grad(loss(fw.m, fw.nn))


def user_programs():
    """(name, make) for each program; make() returns user_program's triple."""
    p_mlp, x_mlp, y_mlp = W.mlp_data()
    return [
        ("GELU MLP train step (256x784x512x512x10)",
         lambda: user_program("GELU MLP train step",
                              lambda fw: W.mlp_train_step(fw.m, fw.nn, fw.value_and_grad),
                              (p_mlp, x_mlp, y_mlp), W.mlp_train_step_numpy)),
        ("transformer block forward (8x128x256, 4 heads)",
         lambda: user_program("transformer forward", lambda fw: W.tb_forward(fw.m, fw.nn),
                              W.tb_data())),
        ("transformer block value+grad",
         lambda: user_program("transformer grad", vg_of(W.tb_loss), W.tb_data(),
                              W.tb_value_and_grad_numpy)),
        ("RNN tanh 32 steps forward (64x128)",
         lambda: user_program("RNN forward", lambda fw: W.rnn_loss(fw.m, fw.nn), W.rnn_data())),
        ("RNN tanh 32 steps value+grad",
         lambda: user_program("RNN grad", vg_of(W.rnn_loss), W.rnn_data(),
                              W.rnn_value_and_grad_numpy)),
        ("swish/softplus/log-sigmoid, 1e6 f32",
         lambda: user_program("activation chain", lambda fw: W.act_chain(fw.m, fw.nn),
                              W.act_data())),
        ("swish/softplus/log-sigmoid grad, 1e6 f32",
         lambda: user_program("activation chain grad",
                              lambda fw: fw.grad(W.act_chain_loss(fw.m, fw.nn)),
                              W.act_data(), W.act_chain_grad_numpy)),
        ("logistic regression + L2 loss (10000x100)",
         lambda: user_program("logistic regression", lambda fw: W.logreg_loss(fw.m, fw.nn),
                              W.logreg_data())),
        ("logistic regression + L2 value+grad",
         lambda: user_program("logistic regression grad", vg_of(W.logreg_loss),
                              W.logreg_data(), W.logreg_value_and_grad_numpy)),
        ("k-means step (10000x32, 16 centers)",
         lambda: user_program("k-means step", lambda fw: W.kmeans_step(fw.m, fw.nn),
                              W.kmeans_data())),
    ]


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return float(np.exp(np.mean(np.log(xs)))) if xs else None


# --- first-call compile time --------------------------------------------------

def representative(m):
    """A small model forward: matmul, bias, gelu-like tanh, softmax, mean."""
    def f(x, w, b):
        h = x @ w + b
        h = 0.5 * h * (1.0 + m.tanh(0.79788456 * (h + 0.044715 * h * h * h)))
        e = m.exp(h - m.max(h, axis=-1, keepdims=True))
        s = e / m.sum(e, axis=-1, keepdims=True)
        return m.mean(s * h, axis=0)
    return f


def compile_time(kind, trials):
    """{framework: median first-call seconds} (compile + one run), NumPy: None.
    Also returns cjit's split of where the first call went, when the core
    reports it."""
    rng = np.random.default_rng(5)
    if kind == "model":
        args = [rng.standard_normal((64, 128), dtype=np.float32),
                rng.standard_normal((128, 256), dtype=np.float32),
                rng.standard_normal(256, dtype=np.float32)]

        def make_cj():
            return cjit.jit(representative(cnp))

        def make_jx():
            return jax.jit(representative(jnp))
    else:
        if not cjit_has_grad():
            return None, None
        params, x, y = mlp_data()
        args = [params, x, y]

        def make_cj():
            return make_train_step(cjit.value_and_grad, cjit.jit, cnp)

        def make_jx():
            return make_train_step(jax.value_and_grad, jax.jit, jnp)

    def timed(make, conv):
        times = []
        for _ in range(trials):
            f = make()
            a = conv(args)
            t0 = time.perf_counter()
            r = f(*a)
            if conv is not _same:
                jax.block_until_ready(r)
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    before = phase_stats()
    t_cj = timed(make_cj, _same)
    after = phase_stats()
    split = None
    if before is not None and after is not None:
        split = {k: (after[k] - before[k]) / trials for k in after}
    t_jx = timed(make_jx, lambda a: jax.device_put(a)) if jax is not None else None
    return {"cjit": t_cj, "numpy": None, "jax": t_jx}, split


def _same(a):
    return a


PHASES = ("trace", "simplify", "fuse", "group", "memplan", "codegen", "optimize", "emit", "link")


def phase_stats():
    """Seconds spent in each compile phase so far (the core's counters), or
    None when this build does not count them."""
    s = _cjit.runtime_stats()
    out = {}
    for p in PHASES:
        k = f"compile_ns_{p}"
        if k not in s:
            if p == "trace":
                continue
            return None
        out[p] = s[k] * 1e-9
    from cjit import api
    if hasattr(api, "_trace_seconds"):
        out["trace"] = api._trace_seconds()
    return out


# ---------------------------------------------------------------------------
# report

def fmt_time(s):
    if s is None:
        return "absent"
    if s < 1e-3:
        return f"{s * 1e6:.2f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def ratio(a, b):
    """How many times faster cjit (b) is than a: a / b."""
    if a is None or b is None or b <= 0:
        return "-"
    return f"{a / b:.2f}x"


def blas_info():
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed (pip install threadpoolctl to see NumPy's BLAS)"
    rows = []
    for d in threadpool_info():
        if d.get("user_api") == "blas" and "numpy" in d.get("filepath", ""):
            rows.append(f"{d.get('internal_api')} {d.get('version')} kernel "
                        f"{d.get('architecture')}, {d.get('num_threads')} threads")
    return "; ".join(rows) or "no BLAS found by threadpoolctl"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds (a smoke test)")
    ap.add_argument("--only", default=None, help="run the workloads whose name contains this")
    ap.add_argument("--out", default=HERE, help="folder for results.md and results.png")
    opts = ap.parse_args()
    os.makedirs(opts.out, exist_ok=True)
    rounds = 3 if opts.quick else 11
    target = 0.01 if opts.quick else 0.05

    bw1, bwn = copy_bandwidth()
    bw = max(bw1, bwn)
    print(f"cpu: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"cjit threads: {_threads()}")
    print(f"copy bandwidth (np.copyto, read+write): {bw1 / 1e9:.1f} GB/s on one thread, "
          f"{bwn / 1e9:.1f} GB/s on {os.cpu_count()} threads")
    print(f"numpy {np.__version__} BLAS: {blas_info()}")
    print(f"cjit BLAS: {_cjit.blas_library()}")
    print(f"jax: {jax.__version__ if jax else 'absent'}")

    workloads = [
        ("cached call, x+1 on 4 float32", wl_tiny),
        ("8-op chain, 1e5 float32", lambda: wl_chain(10**5)),
        ("8-op chain, 1e6 float32", lambda: wl_chain(10**6)),
        ("8-op chain, 1e7 float32", lambda: wl_chain(10**7)),
        ("x*y+1 (memory bound), 1e7 float32", lambda: wl_axpy(10**7)),
        ("softmax rows (4096, 1024) f32", wl_softmax),
        ("layer norm (4096, 1024) f32", wl_layer_norm),
        ("matmul 256 f32", lambda: wl_matmul(256)),
        ("matmul 1024 f32", lambda: wl_matmul(1024)),
        ("matmul 2048 f32", lambda: wl_matmul(2048)),
        ("MLP train step (256x784x512x10)", wl_train),
    ]
    rows = []
    for name, make in workloads:
        if opts.only and opts.only not in name:
            continue
        impls, nbytes = make()
        if impls is None:
            rows.append((name, {k: None for k in FRAMEWORKS}, None, "cjit.grad absent"))
            print(f"{name:36s} skipped (cjit.value_and_grad not available)")
            continue
        t = measure(impls, rounds, target)
        frac = f"{nbytes / t['cjit'] / bw * 100:.0f}%" if nbytes and t["cjit"] else ""
        rows.append((name, t, frac, ""))
        print(f"{name:36s} cjit {fmt_time(t['cjit']):>10s}  numpy {fmt_time(t['numpy']):>10s}  "
              f"jax {fmt_time(t['jax']):>10s}  numpy/cjit {ratio(t['numpy'], t['cjit']):>7s}  "
              f"jax/cjit {ratio(t['jax'], t['cjit']):>7s}  {frac}", flush=True)
        impls.clear()

    users = []
    for name, make in user_programs():
        if opts.only and opts.only not in name:
            continue
        impls, note, (kernels, temps) = make()
        t = measure(impls, rounds, target)
        users.append((name, t, note, kernels, temps))
        print(f"{name:36s} cjit {fmt_time(t['cjit']):>10s}  numpy {fmt_time(t['numpy']):>10s}  "
              f"jax {fmt_time(t['jax']):>10s}  numpy/cjit {ratio(t['numpy'], t['cjit']):>7s}  "
              f"jax/cjit {ratio(t['jax'], t['cjit']):>7s}  {kernels} kernels  {note}", flush=True)
        impls.clear()
    if users:
        gm = {k: geomean([u[1][k] / u[1]["cjit"] for u in users
                          if u[1][k] is not None and u[1]["cjit"]])
              for k in ("numpy", "jax")}
        print(f"geometric mean over {len(users)} programs: numpy/cjit "
              f"{gm['numpy'] or float('nan'):.2f}x  jax/cjit {gm['jax'] or float('nan'):.2f}x")
    else:
        gm = None

    splits = []
    trials = 3 if opts.quick else 7
    for kind, name in (("model", "first call (compile): small model"),
                       ("train", "first call (compile): MLP train step")):
        if opts.only and opts.only not in name:
            continue
        t, split = compile_time(kind, trials)
        if t is None:
            rows.append((name, {k: None for k in FRAMEWORKS}, None, "cjit.grad absent"))
            continue
        rows.append((name, t, "", ""))
        print(f"{name:36s} cjit {fmt_time(t['cjit']):>10s}  jax {fmt_time(t['jax']):>10s}  "
              f"jax/cjit {ratio(t['jax'], t['cjit']):>7s}", flush=True)
        if split:
            splits.append((name, split))
            print("    split: " + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in split.items()))

    write_markdown(os.path.join(opts.out, "results.md"), rows, users, gm, splits, bw1, bwn)
    write_plot(os.path.join(opts.out, "results.png"), rows, users, gm)


def _threads():
    f = getattr(_cjit, "num_threads", None)
    return f() if f else 1


def write_markdown(path, rows, users, gm, splits, bw1, bwn):
    lines = ["# cjit vs NumPy vs JAX (CPU)", "",
             "Written by `make bench` (benchmarks/run.py); medians of interleaved rounds.",
             "Ratios are other/cjit: above 1 means cjit is faster.", "",
             f"- machine: {platform.machine()}, {os.cpu_count()} cores, cjit threads: "
             f"{_threads()}",
             f"- copy bandwidth (np.copyto, read+write): {bw1 / 1e9:.1f} GB/s on one thread, "
             f"{bwn / 1e9:.1f} GB/s on all cores",
             f"- NumPy {np.__version__}, BLAS: {blas_info()}",
             f"- JAX: {jax.__version__ if jax else 'absent'}", "",
             "| workload | cjit | NumPy | JAX | NumPy/cjit | JAX/cjit | cjit % of copy bw |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, t, frac, note in rows:
        if note:
            lines.append(f"| {name} | {note} | | | | | |")
            continue
        numpy_s = fmt_time(t["numpy"]) if t["numpy"] is not None or "first call" not in name \
            else "n/a"
        lines.append(f"| {name} | {fmt_time(t['cjit'])} | {numpy_s} | {fmt_time(t['jax'])} | "
                     f"{ratio(t['numpy'], t['cjit'])} | {ratio(t['jax'], t['cjit'])} | "
                     f"{frac or ''} |")
    if users:
        lines += ["", "## Programs users write", "",
                  "Each program is one source (benchmarks/workloads.py) run as cjit, JAX and "
                  "NumPy; NumPy's gradients are backprop written by hand. Before timing, cjit's "
                  "and JAX's results are checked against NumPy's (every output within 1e-4 of "
                  "its largest magnitude). Kernels and temporaries are those of cjit's compiled "
                  "plan (`Compiled.as_text()`).", "",
                  "| program | cjit | NumPy | JAX | NumPy/cjit | JAX/cjit | cjit kernels | "
                  "cjit temporaries |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for name, t, note, kernels, temps in users:
            label = f"{name} ({note})" if note else name
            lines.append(f"| {label} | {fmt_time(t['cjit'])} | {fmt_time(t['numpy'])} | "
                         f"{fmt_time(t['jax'])} | {ratio(t['numpy'], t['cjit'])} | "
                         f"{ratio(t['jax'], t['cjit'])} | {kernels} | {temps / 2**20:.1f} MiB |")
        if gm:
            cell = {k: (f"{gm[k]:.2f}x" if gm[k] else "-") for k in gm}
            lines.append(f"| **geometric mean** | | | | **{cell['numpy']}** | "
                         f"**{cell['jax']}** | | |")
    if splits:
        lines += ["", "Where cjit's first call goes (mean per compile):", ""]
        lines += ["| function | " + " | ".join(PHASES) + " |",
                  "|---|" + "---:|" * len(PHASES)]
        for name, split in splits:
            lines.append(f"| {name} | " + " | ".join(
                f"{split.get(p, 0) * 1e3:.2f} ms" for p in PHASES) + " |")
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print(f"wrote {path}")


def write_plot(path, rows, users=(), gm=None):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return
    names, vs_np, vs_jx = [], [], []
    for name, t, _, note in rows:
        if note or t["cjit"] is None:
            continue
        names.append(name)
        vs_np.append(t["numpy"] / t["cjit"] if t["numpy"] else np.nan)
        vs_jx.append(t["jax"] / t["cjit"] if t["jax"] else np.nan)
    for name, t, note, _, _ in users:
        if t["cjit"] is None:
            continue
        names.append(name)
        vs_np.append(t["numpy"] / t["cjit"] if t["numpy"] else np.nan)
        vs_jx.append(t["jax"] / t["cjit"] if t["jax"] else np.nan)
    if gm:
        names.append("geometric mean, programs users write")
        vs_np.append(gm["numpy"] or np.nan)
        vs_jx.append(gm["jax"] or np.nan)
    y = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(names) + 1.5))
    ax.barh(y - 0.2, vs_np, 0.4, label="NumPy time / cjit time")
    ax.barh(y + 0.2, vs_jx, 0.4, label="JAX time / cjit time")
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_yticks(y)
    ax.set_yticklabels(names)
    ax.invert_yaxis()
    ax.set_xlabel("speedup of cjit (log scale; > 1: cjit faster)")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
