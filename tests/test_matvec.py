"""Matrix-vector products run by cjit's own vectorized kernel
(csrc/matvec.c): which products take it, and that it computes what NumPy
computes for both of A's layouts, every tail of rows and of K, float32 and
float64, inside fused groups and inside loop bodies."""
import numpy as np
import pytest

import cjit
import cjit.numpy as cnp
from cjit import lax

rng = np.random.default_rng(5)


def rand(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def text_of(f, *args):
    return cjit.jit(f).lower(*args).compile().as_text()


def assert_close(got, ref):
    """got (float32 or float64) against a float64 reference."""
    tol = 1e-5 if got.dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * max(1.0, float(np.abs(ref).max(initial=0.0))))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [1, 3, 4, 7, 9, 33, 64])
@pytest.mark.parametrize("k", [1, 3, 4, 8, 9, 17, 64])
def test_row_major_matches_numpy(m, k, dtype):
    a, x = rand(m, k, dtype=dtype), rand(k, dtype=dtype)
    f = lambda a, x: a @ x  # noqa: E731
    if m > 1 and k > 1:  # (one row or one term may collapse into a plain reduction or product)
        assert text_of(f, a, x).count("(matvec)") == 1
    assert_close(np.asarray(cjit.jit(f)(a, x)), a.astype(np.float64) @ x.astype(np.float64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [8, 9, 31, 32, 33, 70])
@pytest.mark.parametrize("k", [1, 5, 64])
def test_transposed_matches_numpy(m, k, dtype):
    # a.T @ x reads a along the rows of C (a backward pass's W.T @ g)
    a, x = rand(k, m, dtype=dtype), rand(k, dtype=dtype)
    f = lambda a, x: a.T @ x  # noqa: E731
    if k > 1:
        assert text_of(f, a, x).count("(matvec)") == 1
    assert_close(np.asarray(cjit.jit(f)(a, x)), a.T.astype(np.float64) @ x.astype(np.float64))


def test_which_products_take_it():
    # a column of a matrix as b (strided along K), and a 2-d b with one column
    a, xs = rand(16, 12), rand(12, 3)
    assert text_of(lambda a, xs: a @ xs[:, 1], a, xs).count("(matvec)") == 1
    assert text_of(lambda a, xs: a @ xs[:, 1:2], a, xs).count("(matvec)") == 1
    # not: a product with columns, an integer product, A strided both ways,
    # and an A of more than 128 KiB (BLAS takes it)
    assert "(matvec)" not in text_of(lambda a, b: a @ b, a, rand(12, 4))
    ai = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert "(matvec)" not in text_of(lambda a, x: a @ x, ai, np.arange(4, dtype=np.int32))
    assert "(matvec)" not in text_of(lambda a, x: a[:, ::2] @ x, rand(8, 24), rand(12))
    assert "(matvec)" not in text_of(lambda a, x: a @ x, rand(256, 256), rand(256))
    assert "(matvec)" in text_of(lambda a, x: a @ x, rand(128, 256), rand(256))


def test_strided_operands_match_numpy():
    a, xs = rand(16, 12), rand(12, 3)
    f = cjit.jit(lambda a, xs: a @ xs[:, 1] + 1.0)
    assert_close(np.asarray(f(a, xs)), a.astype(np.float64) @ xs[:, 1].astype(np.float64) + 1.0)
    # C strided: a product into a column of a stacked result
    g = cjit.jit(lambda a, b, x: cnp.stack([a @ x, b.T @ x], axis=1))
    b = rand(12, 16)
    ref = np.stack([a.astype(np.float64) @ xs[:, 0], b.T.astype(np.float64) @ xs[:, 0]], axis=1)
    assert_close(np.asarray(g(a, b, xs[:, 0].copy())), ref)


def test_fused_with_its_epilogue():
    # the product is a stage of a group (rows in blocks) with the tanh after it
    w, u, h, x, b = rand(64, 64), rand(64, 32), rand(64), rand(32), rand(64)
    f = cjit.jit(lambda w, u, h, x, b: cnp.tanh(w @ h + u @ x + b))
    ref = np.tanh(w.astype(np.float64) @ h + u.astype(np.float64) @ x + b)
    np.testing.assert_allclose(np.asarray(f(w, u, h, x, b)), ref, rtol=2e-5, atol=2e-5)


def test_rnn_body_runs_matvecs_and_matches_numpy():
    n, hidden, inp = 50, 64, 32
    w, u, b = rand(hidden, hidden) * 0.1, rand(hidden, inp) * 0.1, rand(hidden) * 0.1
    h0, xs = np.zeros(hidden, np.float32), rand(n, inp)

    def loss(w, u, b, h0, xs):
        def step(h, x):
            h = cnp.tanh(w @ h + u @ x + b)
            return h, h
        h, hs = lax.scan(step, h0, xs)
        return cnp.sum(hs * hs) + cnp.sum(h)

    # both products of the forward body, and the backward body's w.T @ g
    text = text_of(cjit.value_and_grad(loss, argnums=(0,)), w, u, b, h0, xs)
    assert text.count("(matvec)") == 5, text
    hs, h = [], h0.astype(np.float64)
    for x in xs:
        h = np.tanh(w.astype(np.float64) @ h + u.astype(np.float64) @ x + b)
        hs.append(h)
    ref = float(np.sum(np.square(hs)) + np.sum(h))
    val, (gw,) = cjit.jit(cjit.value_and_grad(loss, argnums=(0,)))(w, u, b, h0, xs)
    assert abs(float(val) - ref) <= 1e-4 * abs(ref)
    # the gradient against central differences in float64
    w64 = w.astype(np.float64)

    def loss64(w):
        h, total = np.zeros(hidden), 0.0
        for x in xs:
            h = np.tanh(w @ h + u.astype(np.float64) @ x + b)
            total += np.sum(h * h)
        return total + np.sum(h)

    for (i, j) in [(0, 0), (5, 17), (63, 2)]:
        e = np.zeros_like(w64)
        e[i, j] = 1e-6
        fd = (loss64(w64 + e) - loss64(w64 - e)) / 2e-6
        assert abs(float(np.asarray(gw)[i, j]) - fd) <= 1e-3 * max(1.0, abs(fd)), (i, j)
