"""Values read by several consumers of one loop stay in registers: an
elementwise DAG over one shape, however shared, is one kernel with no
temporaries (fuse.c, choose_roots), and a value whose consumers are in
different kernels is recomputed or stored as before."""
import numpy as np
import pytest

import cjit
import cjit.numpy as cnp


def analysis(f, *args):
    c = cjit.jit(f).lower(*args).compile()
    return c, c.memory_analysis()


def repeated_bump(y, n=10):
    for _ in range(n):
        y = cnp.exp(-y * y) + y
    return y * 0.25 - 1


def swish_softplus(x):
    s = x / (1 + cnp.exp(-x))                      # swish reads x twice
    sp = cnp.log1p(cnp.exp(-cnp.abs(s))) + cnp.maximum(s, 0)   # softplus reads s twice
    return sp * s - cnp.tanh(sp) * x               # both read again


def numpy_swish_softplus(x):
    s = x / (1 + np.exp(-x))
    sp = np.log1p(np.exp(-np.abs(s))) + np.maximum(s, 0)
    return sp * s - np.tanh(sp) * x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_shared_chain_is_one_kernel_without_temporaries(dtype):
    x = np.random.default_rng(0).standard_normal(100_000).astype(dtype)
    c, m = analysis(repeated_bump, x)
    assert m.num_kernels == 1
    assert m.temp_size_in_bytes == 0
    assert m.peak_memory_in_bytes == 2 * x.nbytes
    want = x.copy()
    for _ in range(10):
        want = np.exp(-want * want) + want
    want = want * dtype(0.25) - 1
    np.testing.assert_allclose(c(x), want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)


def test_values_shared_across_a_dag_are_computed_once():
    x = np.linspace(-4, 4, 50_000)
    c, m = analysis(swish_softplus, x)
    assert m.num_kernels == 1 and m.temp_size_in_bytes == 0
    # each op of the program appears once in the fused loop body
    label = c.as_text().split("stage 0: ")[1].split()[0].split("+")
    assert label.count("exp") == 2 and label.count("tanh") == 1 and label.count("log1p") == 1
    np.testing.assert_allclose(c(x), numpy_swish_softplus(x), rtol=1e-12, atol=1e-12)


def test_consumers_in_different_kernels_still_recompute_or_store():
    # exp(x - max) is read by the row sum and by the quotient: two kernels
    # (one group), recomputed in each rather than stored
    x = np.random.default_rng(1).standard_normal((64, 256))
    def softmax(x):
        e = cnp.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    c, m = analysis(softmax, x)
    assert m.num_kernels == 1 and m.temp_size_in_bytes < x.nbytes
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(c(x), e / e.sum(axis=1, keepdims=True), rtol=1e-12)
    # a long chain read by two reductions is stored once, not computed twice
    def two_sums(x):
        y = repeated_bump(x, 4)
        return y.sum(axis=0), (y * y).sum(axis=1)
    c, m = analysis(two_sums, x)
    assert m.temp_size_in_bytes >= x.nbytes
    assert c.as_text().count("exp") == 4


def test_shared_values_with_passes_off_give_the_same_results(monkeypatch):
    x = np.linspace(-3, 3, 4096)
    fused = cjit.jit(swish_softplus)(x)
    monkeypatch.setenv("CJIT_PASSES", "-fuse")
    plain = cjit.jit(swish_softplus)(x)
    np.testing.assert_array_equal(fused, plain)


def test_gradient_of_a_shared_chain():
    x = np.linspace(-2, 2, 1000)
    g = cjit.jit(cjit.grad(lambda x: repeated_bump(x, 5).sum()))(x)
    eps = 1e-6
    fd = (np.asarray(cjit.jit(lambda x: repeated_bump(x, 5))(x + eps))
          - np.asarray(cjit.jit(lambda x: repeated_bump(x, 5))(x - eps))) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


# ---- multi-output kernels ----------------------------------------------------
# Several values of one shape computed from shared inputs are stored by one
# kernel: what they share is computed once (fuse.c, set_merge).

def stages(c):
    return [line.split("stage ", 1)[1] for line in c.as_text().splitlines() if "stage " in line]


def test_outputs_sharing_a_value_are_one_kernel_computing_it_once():
    x = np.random.default_rng(2).standard_normal((300, 200))
    f = lambda x: (cnp.exp(x) + 1, cnp.exp(x) * 2, cnp.tanh(cnp.exp(x)))  # noqa: E731
    c, m = analysis(f, x)
    st = stages(c)
    assert len(st) == 1 and m.num_kernels == 1 and m.temp_size_in_bytes == 0
    assert st[0].split()[1].split("+").count("exp") == 1
    assert "-> buf1, buf2, buf3" in st[0]  # three stores
    a, b, t = c(x)
    e = np.exp(x)
    np.testing.assert_allclose(a, e + 1, rtol=1e-13)
    np.testing.assert_allclose(b, e * 2, rtol=1e-13)
    np.testing.assert_allclose(t, np.tanh(e), rtol=1e-13)


def test_a_costly_shared_value_is_not_stored():
    # read by three outputs, this chain used to be stored (a full-size
    # temporary): recomputing it three times costs too much
    x = np.linspace(-2, 2, 40_000, dtype=np.float32)
    def f(x):
        t = cnp.tanh(x) * cnp.exp(-x * x) + cnp.sin(x) * cnp.log1p(x * x)
        return t + 1, t * t, cnp.sqrt(cnp.abs(t))
    c, m = analysis(f, x)
    assert m.num_kernels == 1 and m.temp_size_in_bytes == 0
    assert m.peak_memory_in_bytes == 4 * x.nbytes
    label = stages(c)[0].split()[1].split("+")
    assert label.count("tanh") == 1 and label.count("sin") == 1
    t = np.tanh(x) * np.exp(-x * x) + np.sin(x) * np.log1p(x * x)
    for got, want in zip(c(x), (t + 1, t * t, np.sqrt(np.abs(t)))):
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


def test_an_output_read_by_another_output_is_kept_in_a_register():
    x = np.random.default_rng(3).standard_normal(10_000)
    def f(x):
        y = cnp.exp(x)
        return y, y * y - 1, cnp.log1p(y)
    c, m = analysis(f, x)
    st = stages(c)
    assert len(st) == 1 and "reads: buf0" in c.as_text() and m.temp_size_in_bytes == 0
    # the second and third values do not load the first: it is the same expression
    assert c.as_text().split("reads:")[1].split("\n")[0].split() == ["buf0"]
    y, a, b = c(x)
    np.testing.assert_allclose(y, np.exp(x), rtol=1e-14)
    # y*y - 1 cancels near y = 1, where a fused multiply-add (taken on CPUs
    # that have it) is more exact than NumPy's two roundings: an absolute bound
    np.testing.assert_allclose(a, np.exp(x) ** 2 - 1, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(b, np.log1p(np.exp(x)), rtol=1e-13)


def test_kernels_that_must_run_between_stay_apart():
    # z needs the sum of y, so y and z cannot be one loop
    x = np.random.default_rng(4).standard_normal((50, 40))
    def f(x):
        y = cnp.exp(x)
        return y, y * y.sum() + 1
    c, _ = analysis(f, x)
    assert len(stages(c)) == 3
    y, z = c(x)
    np.testing.assert_allclose(z, np.exp(x) * np.exp(x).sum() + 1, rtol=1e-12)
    # a value read transposed by another output is stored and loaded, not merged
    def g(x):
        y = cnp.tanh(x) * 3
        return y, y.T + y
    sq = x[:40]
    c, _ = analysis(g, sq)
    assert len(stages(c)) == 2
    y = np.tanh(sq) * 3
    np.testing.assert_allclose(c(sq)[1], y.T + y, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.bool_])
def test_multi_output_kernels_against_numpy(dtype):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((64, 33)) * 4).astype(dtype)
    y = (rng.standard_normal((64, 33)) * 4).astype(dtype)
    if dtype == np.bool_:
        f = lambda np_, x, y: (x & y, (x & y) | x, ~(x & y))  # noqa: E731
    elif dtype == np.int32:
        f = lambda np_, x, y: (x * y + 1, (x * y) // 3 - x, np_.maximum(x * y, y))  # noqa: E731
    else:
        f = lambda np_, x, y: (np_.sin(x * y), np_.sin(x * y) * x - y, np_.exp(-np_.sin(x * y)))  # noqa: E731
    c = cjit.jit(lambda x, y: f(cnp, x, y)).lower(x, y).compile()
    assert len(stages(c)) == 1
    for got, want in zip(c(x, y), f(np, x, y)):
        assert got.dtype == want.dtype
        tol = 2e-6 if dtype == np.float32 else 1e-13  # sin(x*y)*x - y cancels: an absolute term too
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 10)


def test_multi_output_kernels_in_place_and_in_gradients():
    # a gradient has many values of one shape read by several others; every
    # result agrees with the passes off, and the measured peak is the plan's
    x = np.random.default_rng(6).standard_normal(5000)
    def loss(x):
        a = cnp.tanh(x) * cnp.exp(-x)
        return (a * a + cnp.sin(a)).sum()
    g = cjit.jit(cjit.value_and_grad(loss))
    c = g.lower(x).compile()
    cjit.reset_peak_memory_stats()
    base = cjit.memory_stats()["bytes_in_use"]
    v, d = c(x)
    assert cjit.memory_stats()["peak_bytes_in_use"] - base <= c.memory_analysis().peak_memory_in_bytes
    a = np.tanh(x) * np.exp(-x)
    da = 2 * a + np.cos(a)
    want = da * ((1 - np.tanh(x) ** 2) * np.exp(-x) - a)
    np.testing.assert_allclose(d, want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(v, (a * a + np.sin(a)).sum(), rtol=1e-12)
