"""cjit.lax's operation names against NumPy (and jax.lax when installed):
the conventions where lax differs from NumPy, dot_general, map and
associative_scan (with pytrees and gradients)."""
import numpy as np
import pytest

import cjit
import cjit.lax as lax
import cjit.numpy as cnp

RNG = np.random.default_rng(11)


def test_integer_division_and_remainder_round_toward_zero():
    x = np.array([-7, 7, -7, 7, 6, -6], np.int32)
    y = np.array([2, 2, -2, -2, 3, 3], np.int32)
    for got in (lax.div(x, y), cjit.jit(lax.div)(x, y)):
        np.testing.assert_array_equal(got, (np.trunc(x / y)).astype(np.int32))
    np.testing.assert_array_equal(lax.rem(x, y), np.fmod(x, y))
    np.testing.assert_allclose(lax.div(1.0, np.array([4.0])), [0.25])


def test_elementwise_spellings():
    x = RNG.uniform(0.1, 0.9, 9)
    pairs = [(lax.rsqrt(x), 1 / np.sqrt(x)), (lax.clamp(0.3, x, 0.6), np.clip(x, 0.3, 0.6)),
             (lax.integer_pow(x, 5), x ** 5), (lax.integer_pow(x, -2), x ** -2.0),
             (lax.logistic(x), 1 / (1 + np.exp(-x))), (lax.erf_inv(lax.erf(x)), x),
             (lax.round(np.array([0.5, 1.5, -0.5, 2.5])), [1.0, 2.0, -1.0, 3.0]),
             (lax.round(np.array([0.5, 1.5, -0.5, 2.5]), 1), [0.0, 2.0, -0.0, 2.0]),
             (lax.shift_right_logical(np.array([-8, 8], np.int32), 1), [2147483644, 4])]
    for got, want in pairs:
        np.testing.assert_allclose(got, want, rtol=1e-12)
    g = cjit.grad(lambda v: lax.integer_pow(v, 3).sum())(x)
    np.testing.assert_allclose(g, 3 * x ** 2, rtol=1e-13)


def test_shape_spellings():
    a = RNG.standard_normal((2, 3, 4))
    np.testing.assert_array_equal(lax.broadcast_in_dim(a[0, :, 0], (2, 3, 4), (1,)),
                                  np.broadcast_to(a[0, :, 0][None, :, None], (2, 3, 4)))
    np.testing.assert_array_equal(lax.broadcast_in_dim(a[0], (4, 5, 3), (2, 0)),
                                  np.broadcast_to(a[0].T[:, None, :], (4, 5, 3)))
    np.testing.assert_array_equal(lax.broadcast(a[0], (5,)), np.broadcast_to(a[0], (5, 3, 4)))
    np.testing.assert_array_equal(lax.slice(a, (0, 1, 0), (2, 3, 4), (1, 1, 2)), a[:, 1:3, ::2])
    np.testing.assert_array_equal(lax.slice_in_dim(a, 1, 4, 2, axis=2), a[:, :, 1:4:2])
    np.testing.assert_array_equal(lax.index_in_dim(a, 2, axis=1, keepdims=False), a[:, 2])
    np.testing.assert_array_equal(lax.pad(a[0, 0], -1.0, [(2, -1, 0)]),
                                  np.concatenate([[-1, -1], a[0, 0, :3]]))
    with pytest.raises(NotImplementedError, match="interior"):
        lax.pad(a[0, 0], 0.0, [(0, 0, 1)])
    np.testing.assert_array_equal(lax.rev(a, (0, 2)), a[::-1, :, ::-1])
    np.testing.assert_array_equal(lax.reshape(a, (4, 6), dimensions=(2, 0, 1)),
                                  a.transpose(2, 0, 1).reshape(4, 6))
    np.testing.assert_array_equal(lax.iota(np.int32, 4), np.arange(4, dtype=np.int32))
    np.testing.assert_array_equal(lax.reduce_max(a, (0, 2)), a.max(axis=(0, 2)))
    np.testing.assert_array_equal(lax.argmax(a, 1, np.int32), a.argmax(1).astype(np.int32))


@pytest.mark.parametrize("dims", [
    (((2,), (1,)), ((0,), (0,))),          # batched matmul
    (((1,), (0,)), ((), ())),              # contraction over one dim
    (((1, 2), (2, 1)), ((), ())),          # two contracted dims
    (((), ()), ((0,), (0,))),              # batch only: an outer product per batch
])
def test_dot_general_matches_einsum(dims):
    shapes = {0: ((2, 3, 4), (2, 4, 5)), 1: ((3, 4, 2), (4, 6)), 2: ((2, 3, 4), (5, 4, 3)),
              3: ((2, 3), (2, 4))}
    idx = [(((2,), (1,)), ((0,), (0,))), (((1,), (0,)), ((), ())), (((1, 2), (2, 1)), ((), ())),
           (((), ()), ((0,), (0,)))].index(dims)
    a, b = (RNG.standard_normal(s) for s in shapes[idx])
    want = {0: lambda: np.einsum("bij,bjk->bik", a, b), 1: lambda: np.einsum("ijk,jl->ikl", a, b),
            2: lambda: np.einsum("ijk,lkj->il", a, b), 3: lambda: np.einsum("bi,bj->bij", a, b)}[idx]()
    got = cjit.jit(lambda p, q: lax.dot_general(p, q, dims))(a, b)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    try:
        np.testing.assert_allclose(got, jax.lax.dot_general(a, b, dims), rtol=1e-12)
    finally:
        jax.config.update("jax_enable_x64", False)


def test_map_is_one_scan():
    xs = RNG.standard_normal((6, 3))
    got = cjit.jit(lambda v: lax.map(lambda r: cnp.tanh(r).sum(), v))(xs)
    np.testing.assert_allclose(got, np.tanh(xs).sum(1), rtol=1e-13)
    text = cjit.jit(lambda v: lax.map(lambda r: r * 2, v)).lower(xs).as_text()
    assert "scan" in text


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13])
@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan(n, reverse):
    x = RNG.standard_normal((n, 2))
    want = np.cumsum(x[::-1], 0)[::-1] if reverse else np.cumsum(x, 0)
    got = cjit.jit(lambda v: lax.associative_scan(cnp.add, v, reverse=reverse))(x)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    # a linear recurrence h_t = a_t h_{t-1} + b_t as a pytree scan over (a, b)
    a, b = RNG.uniform(0.5, 1.0, n), RNG.standard_normal(n)

    def compose(left, right):
        return (left[0] * right[0], right[0] * left[1] + right[1])

    _, h = lax.associative_scan(compose, (a, b))
    ref, acc = [], 0.0
    for t in range(n):
        acc = a[t] * acc + b[t]
        ref.append(acc)
    np.testing.assert_allclose(h, ref, rtol=1e-12)
    g = cjit.grad(lambda v: lax.cummax(v, axis=0).sum())(x[:, 0])
    running = np.maximum.accumulate(x[:, 0])
    want_g = np.array([np.sum(running == x[i, 0]) if running.tolist().count(x[i, 0]) else 0
                       for i in range(n)], dtype=float)
    np.testing.assert_allclose(g, want_g)
