"""int8, int16, uint8 and uint16: arguments, promotion (NumPy 2's table),
wrapping arithmetic, casts, reductions and bit operations against NumPy,
traced and eager."""
import itertools

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp

NARROW = ["int8", "int16", "uint8", "uint16"]
ALL = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "float32", "float64"]


def values(dtype, seed=0, n=64):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    v = rng.integers(info.min, info.max, size=n, endpoint=True, dtype=np.int64)
    v[:4] = [info.min, info.max, 0, 1]          # the edges, where wrapping shows
    return v.astype(dtype)


@pytest.mark.parametrize("a,b", list(itertools.product(NARROW, ALL)))
def test_promotion_is_numpys(a, b):
    x = np.ones(3, a)
    y = np.ones(3, b)
    got = cjit.jit(lambda p, q: p + q)(x, y)
    assert got.dtype == np.result_type(x, y), (a, b, got.dtype)
    assert cnp.result_type(a, b) == np.result_type(a, b)


@pytest.mark.parametrize("dtype", NARROW)
@pytest.mark.parametrize("eager", [False, True])
def test_arithmetic_wraps_as_numpy(dtype, eager):
    x, y = values(dtype, 1), values(dtype, 2)
    y = np.where(y == 0, np.array(1, dtype), y)
    ops = {
        "add": lambda p, q: p + q, "sub": lambda p, q: p - q, "mul": lambda p, q: p * q,
        "floordiv": lambda p, q: p // q, "mod": lambda p, q: p % q, "max": cnp.maximum,
        "and": lambda p, q: p & q, "or": lambda p, q: p | q, "xor": lambda p, q: p ^ q,
        "lt": lambda p, q: p < q, "eq": lambda p, q: p == q,
    }
    refs = {"max": np.maximum}
    for name, f in ops.items():
        ref = refs.get(name, f)
        with np.errstate(all="ignore"):
            want = ref(x, y)
        got = f(x, y) if eager and name == "max" else cjit.jit(f)(x, y)
        assert got.dtype == want.dtype and np.array_equal(got, want), (dtype, name)


@pytest.mark.parametrize("dtype", NARROW)
def test_unary_shifts_and_weak_scalars(dtype):
    x = values(dtype, 3)
    with np.errstate(all="ignore"):
        cases = [(lambda a: -a, lambda a: -a), (cnp.abs, np.abs), (cnp.sign, np.sign),
                 (lambda a: a >> 3, lambda a: a >> 3), (lambda a: a << 2, lambda a: a << 2),
                 (lambda a: a + 1, lambda a: a + 1), (lambda a: a * 3, lambda a: a * 3),
                 (lambda a: ~a, lambda a: ~a), (lambda a: a ** 2, lambda a: a ** 2)]
        for f, ref in cases:
            got, want = cjit.jit(f)(x), ref(x)
            assert got.dtype == want.dtype and np.array_equal(got, want), dtype
    # NumPy 2 refuses a Python int the dtype cannot hold
    with pytest.raises((ValueError, OverflowError), match="out of bounds"):
        cjit.jit(lambda a: a + 70000)(x)


@pytest.mark.parametrize("dtype", NARROW)
def test_casts_both_ways(dtype):
    x = values(dtype, 4)
    for to in ALL:
        got = cjit.jit(lambda a: a.astype(to))(x)
        assert got.dtype == np.dtype(to) and np.array_equal(got, x.astype(to)), (dtype, to)
    # from float: in range as NumPy; out of range wraps as x86's NumPy does
    f = np.array([-1.0, 3.7, -3.7, 100.0, 300.0, -129.0], np.float64)
    with np.errstate(all="ignore"):
        want = f.astype(dtype)
    got = cjit.jit(lambda a: a.astype(dtype))(f)
    assert np.array_equal(got, want), (got, want)


@pytest.mark.parametrize("dtype", NARROW)
def test_reductions(dtype):
    x = values(dtype, 5).reshape(8, 8)
    for name in ("sum", "prod", "max", "min"):
        got = cjit.jit(lambda a: getattr(cnp, name)(a, axis=1))(x)
        want = getattr(np, name)(x, axis=1)
        # NumPy sums and multiplies the signed in int64, the unsigned in uint64
        assert got.dtype == want.dtype and np.array_equal(got, want), (dtype, name)
    got = cjit.jit(lambda a: cnp.argmax(a, axis=0))(x)
    assert np.array_equal(got, np.argmax(x, axis=0))


@pytest.mark.parametrize("dtype", NARROW)
def test_math_and_gradient_through_a_cast(dtype):
    x = values(dtype, 6)
    got = cjit.jit(lambda a: cnp.exp(a.astype(np.float32) / 100))(x)
    np.testing.assert_allclose(got, np.exp(x.astype(np.float32) / 100), rtol=1e-6)
    # a gradient with respect to a float weight through an integer input
    g = cjit.grad(lambda w, a: (w * a).sum())(np.float32(2.0), x)
    assert np.isclose(g, x.astype(np.float64).sum(), rtol=1e-6)


def test_iinfo_and_names():
    for name in NARROW:
        assert getattr(cnp, name) == np.dtype(name).type
        assert cnp.iinfo(getattr(cnp, name)).max == np.iinfo(name).max
    assert cnp.zeros(3, dtype=cnp.uint8).dtype == np.uint8
    assert cjit.jit(lambda a: cnp.zeros_like(a, dtype=cnp.int16))(np.ones(2)).dtype == np.int16


@pytest.mark.parametrize("dtype", NARROW + ["bool", "uint32"])
def test_sums_of_0d_and_running_sums_are_int64(dtype):
    # int64 for bool and the signed, uint64 for the unsigned: NumPy's dtypes
    a = np.array(3, dtype)
    b = np.arange(6).astype(dtype)
    assert cnp.sum(a).dtype == np.sum(a).dtype and cnp.sum(a) == np.sum(a)
    assert cnp.sum(a).dtype == (np.uint64 if np.dtype(dtype).kind == "u" else np.int64)
    got = cjit.jit(lambda v: cnp.cumsum(v))(b)
    want = np.cumsum(b)
    assert got.dtype == want.dtype and np.array_equal(got, want)
