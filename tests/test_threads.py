"""Many threads at once: jitted functions whose first calls race to compile,
the same executable run concurrently, and eager ops from several threads."""
import threading

import numpy as np

import cjit
import cjit.nn
import cjit.numpy as cnp

from conftest import assert_close, rand

NTHREADS = 8


def run_threads(target, n=NTHREADS):
    """Starts n threads that wait on one barrier and then call target(i);
    re-raises the first exception any of them raised."""
    barrier = threading.Barrier(n)
    errors = []
    results = [None] * n

    def body(i):
        try:
            barrier.wait()
            results[i] = target(i)
        except BaseException as e:          # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]
    return results


def _f(x, y):
    return cnp.tanh(x * y + 1.0).sum(axis=-1) + cnp.max(x, axis=-1), x @ y.T


def _ref(x, y):
    return np.tanh(x * y + 1.0).sum(axis=-1) + np.max(x, axis=-1), x @ y.T


def test_first_calls_race_same_shape():
    jf = cjit.jit(_f)
    xs = [rand((5, 6), "float64", seed=i) for i in range(NTHREADS)]
    ys = [rand((5, 6), "float64", seed=100 + i) for i in range(NTHREADS)]

    def call(i):
        out = []
        for _ in range(10):
            out.append(jf(xs[i], ys[i]))
        return out

    results = run_threads(call)
    for i, outs in enumerate(results):
        want = _ref(xs[i], ys[i])
        for got in outs:
            assert_close(got[0], want[0])
            assert_close(got[1], want[1])
    assert jf.cache_info()["entries"] == 1
    ci = jf.cache_info()
    assert ci["hits"] + ci["misses"] == NTHREADS * 10


def test_first_calls_race_different_shapes():
    jf = cjit.jit(_f)
    shapes = [(1 + i % 4, 3 + i % 3) for i in range(NTHREADS)]
    dtypes = ["float32" if i % 2 else "float64" for i in range(NTHREADS)]
    xs = [rand(s, d, seed=i) for i, (s, d) in enumerate(zip(shapes, dtypes))]
    ys = [rand(s, d, seed=50 + i) for i, (s, d) in enumerate(zip(shapes, dtypes))]

    def call(i):
        return [jf(xs[i], ys[i]) for _ in range(5)]

    results = run_threads(call)
    for i, outs in enumerate(results):
        want = _ref(xs[i], ys[i])
        for got in outs:
            assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
            assert_close(got[1], want[1], rtol=1e-5, atol=1e-5)
    distinct = len(set(zip(shapes, dtypes)))
    assert jf.cache_info()["entries"] == distinct


def test_different_functions_compile_concurrently():
    # each thread has its own function, so every first call compiles at once
    fns = [cjit.jit(lambda x, k=k: cnp.exp(x) * k + cnp.sum(x * x)) for k in range(NTHREADS)]
    x = rand((33,), "float32", seed=1)

    def call(i):
        return [fns[i](x) for _ in range(3)]

    results = run_threads(call)
    for k, outs in enumerate(results):
        want = np.exp(x) * k + np.sum(x * x)
        for got in outs:
            assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_large_arrays_concurrently():
    # big enough for the runtime to split kernels over its own workers
    jf = cjit.jit(lambda a, b: (cnp.sqrt(a * a + b * b), (a * b).sum()))
    xs = [rand((200_000,), "float64", seed=i) for i in range(4)]

    def call(i):
        a, b = xs[i % 4], xs[(i + 1) % 4]
        return [jf(a, b) for _ in range(3)]

    results = run_threads(call)
    for i, outs in enumerate(results):
        a, b = xs[i % 4], xs[(i + 1) % 4]
        for got in outs:
            assert_close(got[0], np.sqrt(a * a + b * b))
            assert_close(got[1], (a * b).sum(), rtol=1e-10, atol=1e-9)


def test_eager_calls_from_threads():
    def call(i):
        rng = np.random.default_rng(i)
        for it in range(40):
            x = rng.uniform(-2, 2, size=(3, 4 + it % 3)).astype(np.float32 if i % 2 else np.float64)
            y = rng.uniform(-2, 2, size=x.shape[-1:]).astype(x.dtype)
            assert_close(cnp.exp(x), np.exp(x), rtol=4e-6, atol=1e-7)
            assert_close(cnp.add(x, y), x + y)
            assert_close(cnp.sum(x, axis=0), x.sum(axis=0), rtol=1e-5, atol=1e-6)
            assert_close(cnp.matmul(x, x.T), x @ x.T, rtol=1e-5, atol=1e-5)
            assert_close(cjit.nn.relu(x), np.maximum(x, 0))
            assert_close(cnp.where(x > 0, x, y), np.where(x > 0, x, y))
        return True

    assert all(run_threads(call))


def test_trace_in_one_thread_while_another_runs():
    # tracing state is per thread: a trace in progress in one thread must not
    # capture the eager ops of another
    slow = threading.Event()
    go = threading.Event()

    def f(x):
        y = x + 1
        go.set()
        if not slow.wait(timeout=30):
            raise RuntimeError("an eager op in another thread was blocked by this trace")
        return y * 2

    jf = cjit.jit(f)
    out = {}

    def tracer_thread():
        out["jit"] = jf(np.ones(3))

    def eager_thread():
        go.wait(timeout=30)
        out["eager"] = cnp.multiply(np.full(3, 4.0), 2.0)
        slow.set()

    t1 = threading.Thread(target=tracer_thread)
    t2 = threading.Thread(target=eager_thread)
    t1.start()
    t2.start()
    t1.join(60)
    t2.join(60)
    assert type(out["eager"]) is cjit.Array
    assert_close(out["eager"], np.full(3, 8.0))
    assert_close(out["jit"], np.full(3, 4.0))


def test_clear_caches_while_others_call():
    jf = cjit.jit(lambda x: x * 3 - 1)
    x = np.arange(10.0)

    def call(i):
        for _ in range(20):
            if i == 0:
                cjit.clear_caches()
            assert_close(jf(x), x * 3 - 1)
        return True

    assert all(run_threads(call, 4))


def test_many_threads_mixed_signatures_compile_and_hit():
    # 16 threads, each walking its own order through a shared set of
    # signatures (shapes, dtypes, pytree structures, static values, kwargs,
    # eager ops): first calls compile concurrently while other threads
    # already hit the entries; every result is checked.
    jf = cjit.jit(lambda t, n, scale=1.0: {"s": (t[0] * n).sum(axis=-1) * scale,
                                           "m": t[1] @ t[1].T},
                  static_argnums=1)
    shapes = [(2, 3), (4, 5), (1, 7), (3, 3)]
    dtypes = ["float32", "float64"]
    sigs = [(s, d, n) for s in shapes for d in dtypes for n in (1, 2)]
    data = {(s, d): (rand(s, d, seed=hash((s, d)) % 1000), rand(s, d, seed=7)) for s in shapes
            for d in dtypes}

    def call(i):
        rng = np.random.default_rng(i)
        for it in range(40):
            s, d, n = sigs[rng.integers(len(sigs))]
            a, b = data[(s, d)]
            tree = (a, b) if it % 2 else [a, b]
            scale = 0.5 if it % 3 else 2.0
            out = jf(tree, n, scale=scale)
            tol = 1e-5 if d == "float32" else 1e-12
            assert_close(out["s"], (a * n).sum(axis=-1) * np.asarray(scale, d), rtol=tol,
                         atol=tol)
            assert_close(out["m"], b @ b.T, rtol=tol, atol=tol)
            if it % 5 == 0:
                assert_close(cnp.tanh(a) + n, np.tanh(a) + n, rtol=4e-6, atol=1e-6)
        return True

    assert all(run_threads(call, 16))
    # one entry per (shape, dtype, static n, tree kind): never duplicated by the races
    assert jf.cache_info()["entries"] <= len(sigs) * 2
