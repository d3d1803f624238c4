"""API hardening (issue 12): results that differed from NumPy/JAX, clear
races, eager vjp caching, environment and argument checks, messages.
Each test names what was wrong before its fix."""
import copy
import collections
import dataclasses
import sys
import threading

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp

from conftest import assert_close, run_python


# ---------------------------------------------------------------------------
# item 6: smaller wrong results

@pytest.mark.parametrize("name", ["sum", "prod"])
@pytest.mark.parametrize("dtype", ["int32", "bool", "int64", "float32"])
@pytest.mark.parametrize("src", ["int32", "int64", "bool", "float64"])
def test_sum_prod_dtype_is_the_requested_one(name, dtype, src):
    # Was: dtype=int32 and dtype=bool gave int64.
    x = np.array([[3, -2, 7], [0, 5, 1 << 20]]).astype(src)
    if src == "float64":
        x = x * 0.5
    for axis in (None, 0, 1):
        want = getattr(np, name)(x, axis=axis, dtype=dtype)
        got = getattr(cnp, name)(x, axis=axis, dtype=dtype)
        assert_close(np.asarray(got), np.asarray(want))
        traced = cjit.jit(lambda a: getattr(cnp, name)(a, axis=axis, dtype=dtype))(x)
        assert_close(np.asarray(traced), np.asarray(want))


def test_sum_prod_int32_wraps_as_numpy():
    x = np.array([1 << 30, 1 << 30, 1 << 30, 7], np.int32)
    assert_close(np.asarray(cnp.sum(x, dtype=np.int32)), np.sum(x, dtype=np.int32))
    assert_close(np.asarray(cnp.prod(x[:3], dtype=np.int32)), np.prod(x[:3], dtype=np.int32))


def test_sign_of_negative_zero_is_positive_zero():
    # Was: sign(-0.0) was -0.0 (NumPy and the array API: 0.0).
    for dt in (np.float32, np.float64):
        x = np.array([-0.0, 0.0, -3.0, 2.0, np.nan, -np.inf], dt)
        got = cnp.sign(x)
        want = np.sign(x)
        assert_close(got, want)
        assert np.array_equal(np.signbit(got), np.signbit(want))
        g = cjit.jit(cnp.sign)(x)
        assert np.array_equal(np.signbit(g), np.signbit(want))
    assert not np.signbit(cnp.sign(-0.0))


def test_asarray_copy():
    # Was: asarray(x, copy=True) returned x itself.
    a = np.arange(3.0)
    b = cnp.asarray(a, copy=True)
    assert b is not a and not np.shares_memory(a, b)
    assert np.array_equal(b, a)
    assert cnp.asarray(a) is a
    assert cnp.asarray(a, copy=False) is a
    with pytest.raises(ValueError):
        cnp.asarray(a, dtype=np.float32, copy=False)   # as NumPy: a copy would be needed
    assert np.array_equal(cjit.jit(lambda x: cnp.asarray(x, copy=True) + 1)(a), a + 1)


def _fd_hessian(g, x, eps=1e-6):
    cols = []
    for j in range(x.size):
        e = np.zeros_like(x)
        e[j] = eps
        cols.append((g(x + e) - g(x - e)) / (2 * eps))
    return np.stack(cols, 1)


@pytest.mark.parametrize("x", [[0.0, 2.0, 3.0], [2.0, 0.0, 3.0, -1.5], [0.0, 0.0, 3.0],
                               [0.0, 0.0, 0.0], [1.5, 2.0, 3.0]])
def test_prod_hessian_at_zeros_is_symmetric(x):
    # Was: the gradient's derivative with respect to a zero element was 0, so
    # the Hessian at [0, a, b] had a zero column (and was not symmetric).
    x = np.array(x)
    n = x.size
    g = cjit.grad(lambda v: cnp.prod(v))
    hess = cjit.jit(lambda v: cnp.stack(
        [cjit.grad(lambda w: cjit.grad(lambda u: cnp.prod(u))(w)[i])(v) for i in range(n)]))
    h = hess(x)
    assert np.array_equal(h, h.T)
    assert_close(h, _fd_hessian(g, x), atol=1e-6, rtol=1e-6)
    # exact: d2 prod / dxi dxj = product of the elements other than i and j
    for i in range(n):
        for j in range(n):
            want = 0.0 if i == j else np.prod(np.delete(x, [i, j]))
            assert h[i, j] == want
    # the gradient itself is unchanged: the product of the others
    assert np.array_equal(g(x), np.array([np.prod(np.delete(x, i)) for i in range(n)]))


def test_prod_hessian_along_an_axis():
    x = np.array([[0.0, 2.0, 3.0], [1.0, 4.0, 0.5]])
    g = cjit.grad(lambda v: cnp.prod(v, axis=1).sum())
    fd = _fd_hessian(lambda v: g(v.reshape(2, 3)).ravel(), x.ravel())
    hess = cjit.jit(lambda v: cnp.stack([cjit.grad(lambda w: cnp.reshape(g(w), (6,))[i])(v).reshape(6)
                                         for i in range(6)]))
    h = hess(x)
    assert np.array_equal(h, h.T)
    assert_close(h, fd, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("fun, ct", [
    (lambda x: np.ones(3), np.ones(3)),
    (lambda x: 2.0, 1.0),
    (lambda x: (x * 2, np.ones(2, np.float32)), (np.ones(3), np.ones(2, np.float32))),
    (lambda x: cnp.ones(4), np.ones(4)),
    (lambda x: np.arange(3), np.ones(3)),
])
def test_vjp_of_an_output_independent_of_the_input(fun, ct):
    # Was: TypeError (only 0-d arrays convert to Python scalars) when an
    # output was a NumPy array; JAX gives zero gradients.
    for dt in (np.float32, np.float64):
        x = np.arange(3, dtype=dt)
        out, vjp_fn = cjit.vjp(fun, x)
        (gx,) = vjp_fn(ct)
        want = np.full(3, 2.0, dt) if isinstance(out, tuple) else np.zeros(3, dt)
        assert_close(gx, want)
        (gj,) = cjit.jit(lambda v, c: cjit.vjp(fun, v)[1](c))(x, ct)
        assert_close(gj, want)


# ---------------------------------------------------------------------------
# item 7: clearing caches while other threads call

@pytest.mark.parametrize("clear", ["clear_caches", "clear_cache"])
def test_clear_racing_with_calls(clear):
    # Was: RuntimeError "executable was released by cjit.clear_caches()" in a
    # calling thread that ran an entry (just compiled, or just looked up) after
    # another thread cleared and released it.  A call in flight holds its
    # executable, so it must finish with the right result.
    jf = cjit.jit(lambda x, y: x * 3 - y)
    xs = [np.arange(float(n)) for n in (1, 2, 3, 5, 8)]
    stop = threading.Event()
    errors = []
    done = [0]

    def caller(seed):
        rng = np.random.default_rng(seed)
        try:
            for it in range(150):
                x = xs[rng.integers(len(xs))]
                assert np.array_equal(jf(x, 1.0), x * 3 - 1.0)
                assert np.array_equal(cnp.multiply(x, 2.0), x * 2.0)
                done[0] += 1
        except BaseException as e:      # noqa: B902 - reported below
            errors.append(e)

    def clearer():
        try:
            while not stop.is_set():
                cjit.clear_caches() if clear == "clear_caches" else jf.clear_cache()
        except BaseException as e:      # noqa: B902
            errors.append(e)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(3)]
    cl = threading.Thread(target=clearer)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)     # switch threads often: the windows are short
    try:
        cl.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        stop.set()
        cl.join()
        sys.setswitchinterval(old)
    assert not errors, repr(errors[0])
    assert done[0] == 3 * 150
    # the caches still work afterwards
    assert np.array_equal(jf(xs[2], 1.0), xs[2] * 3 - 1.0)


def test_clear_cache_frees_code_once_calls_end():
    # Clearing drops the cache's reference; the machine code goes when the
    # last holder (a running call, a Compiled) lets go.
    jf = cjit.jit(lambda x: x + 1)
    jf(np.ones(3))
    info = jf.cache_info()
    assert info["entries"] == 1
    jf.clear_cache()
    assert jf.cache_info()["entries"] == 0
    assert np.array_equal(jf(np.ones(3)), np.full(3, 2.0))
    assert jf.cache_info()["misses"] == 2


def test_released_executable_message():
    # Was: "released by cjit.clear_caches()" also for an explicit release().
    c = cjit.jit(lambda x: x + 1).lower(np.ones(3)).compile()
    c._exe.release()
    with pytest.raises(RuntimeError, match=r"release\(\)") as e:
        c(np.ones(3))
    assert "clear_caches" not in str(e.value)


# ---------------------------------------------------------------------------
# item 12: eager vjp compiles once per function and signature

def test_eager_vjp_hits_the_cache():
    # Was: every eager cjit.vjp call made two new internal jits and compiled
    # both (forward and backward), about 8.5 ms each, even for the same
    # function and shapes.
    def f(x, y):
        return cnp.tanh(x) * y
    x, y = np.linspace(-1, 1, 5), np.arange(5.0)
    c0 = cjit.cache_info()["compiles"]
    out, vjp_fn = cjit.vjp(f, x, y)
    gx, gy = vjp_fn(np.ones(5))
    assert cjit.cache_info()["compiles"] - c0 == 2        # forward, backward
    for i in range(5):
        out, vjp_fn = cjit.vjp(f, x + i, y)
        gx, gy = vjp_fn(np.ones(5))
        assert_close(gx, (1 - np.tanh(x + i) ** 2) * y)
        assert_close(gy, np.tanh(x + i))
    assert cjit.cache_info()["compiles"] - c0 == 2
    # a new signature compiles again, once per part
    cjit.vjp(f, x[:3], y[:3])[1](np.ones(3))
    assert cjit.cache_info()["compiles"] - c0 == 4
    # has_aux is a separate pair of functions
    def g(x):
        return cnp.sin(x), x * 2
    for _ in range(3):
        out, vjp_fn, aux = cjit.vjp(g, x, has_aux=True)
        assert_close(vjp_fn(np.ones(5))[0], np.cos(x))
        assert_close(aux, x * 2)
    assert cjit.cache_info()["compiles"] - c0 == 6


def test_eager_vjp_cache_does_not_keep_the_function_alive():
    import gc
    import weakref

    def f(x):
        return x * 3.0
    out, vjp_fn = cjit.vjp(f, np.ones(2))
    ref = weakref.ref(f)
    del f
    gc.collect()
    assert ref() is not None                          # vjp_fn still needs it
    assert_close(vjp_fn(np.ones(2))[0], np.full(2, 3.0))
    del vjp_fn, out
    gc.collect()
    assert ref() is None
