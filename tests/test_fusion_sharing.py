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
