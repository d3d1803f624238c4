"""uint64, against NumPy 2: promotion, values past 2**63, casts, comparisons
with int64 and Python ints, reductions, bits, division by zero, the jit
cache, gradients (docs/API.md, decisions 141-143)."""
import itertools

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp

U64 = np.uint64
BIG = [0, 1, 7, 2**32, 2**63 - 1, 2**63, 2**63 + 1, 12345678901234567890, 2**64 - 2, 2**64 - 1]
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float32", "float64"]


def big():
    return np.array(BIG, U64)


def same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.array_equal(got, want, equal_nan=want.dtype.kind == "f"), (got, want)


def both(fn, *args):
    """fn(cnp, ...) jitted and eager, each against fn(np, ...)."""
    with np.errstate(all="ignore"):
        want = fn(np, *args)
        same(cjit.jit(lambda *a: fn(cnp, *a))(*args), want)
        same(fn(cnp, *args), want)


def test_dtype_objects_and_iinfo():
    assert cnp.uint64 is np.uint64
    info = cnp.iinfo(cnp.uint64)
    assert (info.min, info.max, info.bits) == (0, 2**64 - 1, 64)
    assert cnp.iinfo(np.ones(2, U64)).max == 2**64 - 1
    assert cnp.isdtype(cnp.uint64, "unsigned integer") and cnp.isdtype(cnp.uint64, "integral")
    assert not cnp.isdtype(cnp.uint64, "signed integer")
    assert cnp.__array_namespace_info__().dtypes()["uint64"] == np.uint64
    assert "uint64" in cnp.__array_namespace_info__().dtypes(kind="unsigned integer")
    assert cnp.zeros(3, cnp.uint64).dtype == U64
    assert cjit.jit(lambda a: a.astype(cnp.uint64))(np.ones(2)).dtype == U64


@pytest.mark.parametrize("a,b", list(itertools.combinations_with_replacement(DTYPES, 2)))
def test_promotion_table_is_numpys(a, b):
    want = np.result_type(a, b)
    assert cnp.result_type(a, b) == want
    assert cnp.result_type(b, a) == want
    x, y = np.ones(2, a), np.ones(2, b)
    if "bool" in (a, b) and a == b:
        return   # bool + bool is bool: covered by the result_type asserts
    assert cjit.jit(lambda p, q: p * q)(x, y).dtype == want
    assert cjit.jit(lambda p, q: q * p)(x, y).dtype == want


def test_promotion_with_python_scalars():
    x = big()
    for s in (1, True, 2**63, 2**64 - 1, 2.5):
        want = x + s
        same(cjit.jit(lambda a: a + s)(x), want)
        assert cnp.result_type(x, s) == np.result_type(x, s)
    # int64 arrays cannot take 2**63 in (NumPy 2: OverflowError), nor uint64 -1
    with pytest.raises(OverflowError, match="out of bounds for int64"):
        cjit.jit(lambda a: a + 2**63)(np.arange(3))
    with pytest.raises(OverflowError, match="out of bounds for uint64"):
        cjit.jit(lambda a: a - (-1))(x)
    with pytest.raises(OverflowError):
        cjit.jit(lambda a: a + 2**64)(x)   # no cjit dtype holds it
    with pytest.raises(OverflowError, match="out of bounds for uint64"):
        cnp.add(x, -1)                      # eager: the same rule


def test_values_past_2_63_round_trip():
    x = big()
    same(cjit.jit(lambda a: a)(x), x)
    same(cjit.jit(lambda a: a * 1)(x), x)
    same(cjit.jit(lambda a: a[::-1] + np.uint64(0))(x), x[::-1])
    same(cjit.jit(lambda: x * 1)(), x)                       # closed over
    same(cjit.jit(lambda a: a)(np.uint64(2**64 - 1)), np.array(2**64 - 1, U64))
    same(cjit.jit(lambda: cnp.asarray(2**63) + 0)(), np.asarray(2**63) + 0)
    same(cjit.jit(lambda: cnp.full(3, 2**64 - 1))(), np.full(3, 2**64 - 1))
    same(cjit.jit(lambda: cnp.arange(2**63, 2**63 + 5, dtype=U64))(), np.arange(2**63, 2**63 + 5, dtype=U64))
    same(cjit.jit(lambda: cnp.arange(2**63 + 5, 2**63, -2, dtype=U64))(), np.arange(2**63 + 5, 2**63, -2, dtype=U64))
    same(cjit.jit(lambda: cnp.arange(2**63, 2**63 + 3))(), np.arange(2**63, 2**63 + 3))   # float64 in NumPy
    same(cjit.jit(lambda a: cnp.concatenate([a, a]))(x), np.concatenate([x, x]))


@pytest.mark.parametrize("ft", [np.float32, np.float64])
def test_casts_to_and_from_floats(ft):
    x = big()
    both(lambda m, a: a.astype(ft), x)
    f = np.array([0, 0.5, 1.5, 2.0**32, 2.0**52 + 1, 2.0**63, 2.0**63 + 2.0**40, 1.5e19, 2.0**64 - 2**40],
                 ft)
    f = f[f < 2.0**64]   # float32 rounds the last up to 2**64, past uint64
    both(lambda m, a: a.astype(U64), f)
    # below zero a float goes through int64, as C's cast does on x86
    neg = np.array([-1.0, -2.5], ft)
    got = cjit.jit(lambda a: a.astype(U64))(neg)
    same(got, neg.astype(np.int64).astype(U64))
    # through float and back: exact where the float holds the value
    exact = np.array([0, 2**53, 2**63, 2**63 + 2**11], U64) if ft == np.float64 else \
        np.array([0, 2**24, 2**63, 2**63 + 2**40], U64)
    same(cjit.jit(lambda a: a.astype(ft).astype(U64))(exact), exact)


def test_casts_among_integers():
    x = big()
    for dt in (np.int8, np.int32, np.int64, np.uint8, np.uint32, bool):
        both(lambda m, a: a.astype(dt), x)
    both(lambda m, a: a.astype(U64), np.array([-1, 5, -2**63, 2**63 - 1], np.int64))
    both(lambda m, a: a.astype(U64), np.array([-1, 5, 127], np.int8))
    both(lambda m, a: a.astype(U64), np.array([True, False]))
    both(lambda m, a: a.astype(U64), np.array([2**32 - 1, 0], np.uint32))


def test_arithmetic():
    x = big()
    y = np.array([1, 3, 2**63, 5, 2**64 - 1, 2, 2**62, 7, 9, 2**63 + 3], U64)
    for fn in (lambda m, a, b: a + b, lambda m, a, b: a - b, lambda m, a, b: a * b,
               lambda m, a, b: a / b, lambda m, a, b: a // b, lambda m, a, b: a % b,
               lambda m, a, b: m.fmod(a, b), lambda m, a, b: m.maximum(a, b),
               lambda m, a, b: m.minimum(a, b), lambda m, a, b: a ** np.uint64(3),
               lambda m, a, b: -a, lambda m, a, b: m.abs(a), lambda m, a, b: m.sign(a),
               lambda m, a, b: m.square(b), lambda m, a, b: m.where(a > b, a, b),
               lambda m, a, b: m.clip(a, np.uint64(5), np.uint64(2**63))):
        both(fn, x, y)


def test_floor_divide_and_remainder_by_zero_give_zero():
    x, z = big(), np.zeros(len(BIG), U64)
    both(lambda m, a, b: a // b, x, z)
    both(lambda m, a, b: a % b, x, z)
    both(lambda m, a, b: m.fmod(a, b), x, z)
    assert not np.asarray(cjit.jit(lambda a, b: a // b)(x, z)).any()


def test_mixed_with_int64_is_float64():
    x = big()
    i = np.array([-1, 0, 5, 2**62, -5, 9, -2**63, 2**63 - 1, 3, -7], np.int64)
    for fn in (lambda m, a, b: a + b, lambda m, a, b: a * b, lambda m, a, b: m.maximum(a, b),
               lambda m, a, b: a / b):
        both(fn, x, i)


def test_comparisons_with_int64_and_python_ints():
    x = big()
    i = np.array([-1, 0, 5, 2**62, -5, 9, -2**63, 2**63 - 1, 3, -7], np.int64)
    for op in ("less", "less_equal", "greater", "greater_equal", "equal", "not_equal"):
        # uint64 with int64 compares through float64, as NumPy's
        both(lambda m, a, b: getattr(m, op)(a, b), x, i)
        for s in (-1, -2**63, 0, 2**63, 2**64 - 1, 12345678901234567890):
            both(lambda m, a: getattr(m, op)(a, s), x)
            both(lambda m, a: getattr(m, op)(s, a), x)
        # an int64 (or int32) array with Python ints it cannot hold: every element's answer
        for s in (2**63, 2**64 - 1):
            both(lambda m, a: getattr(m, op)(a, s), np.array([-3, 0, 2**63 - 1]))
        both(lambda m, a: getattr(m, op)(a, -2**40), np.array([-3, 0, 7], np.int32))
    with pytest.raises(OverflowError):
        cjit.jit(lambda a: a < 2**64)(x)   # past uint64: cjit holds no such int (decision 143)


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "argmax", "argmin", "cumsum",
                                  "cumprod", "mean", "ptp", "sort", "argsort"])
def test_reductions(name):
    x = big()
    both(lambda m, a: getattr(m, name)(a), x)
    both(lambda m, a: getattr(m, name)(a.reshape(2, 5), axis=1), x)
    both(lambda m, a: getattr(m, name)(a.reshape(5, 2), axis=0), x)


def test_unsigned_accumulate_in_uint64():
    u32 = np.array([4_000_000_000, 4_000_000_000, 7], np.uint32)
    for fn in (lambda m, a: m.sum(a), lambda m, a: m.prod(a), lambda m, a: m.cumsum(a),
               lambda m, a: m.cumulative_sum(a), lambda m, a: m.cumulative_sum(a, include_initial=True),
               lambda m, a: m.sum(a.astype(np.uint8)), lambda m, a: m.sum(a.astype(np.uint16)),
               lambda m, a: m.sum(a, dtype=np.uint32)):
        both(fn, u32)
    assert cnp.sum(u32).dtype == U64 and cnp.sum(u32) == 8_000_000_007
    assert cnp.sum(np.array([1, -2], np.int32)).dtype == np.int64   # the signed: int64
    assert cnp.sum(np.array([True, True])).dtype == np.int64        # bool: int64


def test_bitwise_and_shifts():
    x = big()
    m64 = np.uint64(0xFFFF0000FFFF0000)
    for fn in (lambda m, a: a & m64, lambda m, a: a | m64, lambda m, a: a ^ m64, lambda m, a: ~a,
               lambda m, a: a ^ (2**64 - 1), lambda m, a: a << np.uint64(3), lambda m, a: a >> np.uint64(3),
               lambda m, a: a >> np.uint64(63), lambda m, a: a << np.uint64(64),
               lambda m, a: a >> np.uint64(70), lambda m, a: m.bitwise_left_shift(a, 1),
               lambda m, a: m.right_shift(a, 1), lambda m, a: m.invert(a)):
        both(fn, x)
    counts = np.arange(10, dtype=U64) * 7
    both(lambda m, a, b: a << b, x, counts)
    both(lambda m, a, b: a >> b, x, counts)
    # lax's logical shift of int64 goes through uint64
    got = cjit.jit(lambda a: cjit.lax.shift_right_logical(a, np.int64(1)))(np.array([-8, 8]))
    same(got, np.array([(2**64 - 8) >> 1, 4], np.int64))


def test_indexing_and_updates():
    x = big()
    idx = np.array([9, 0, 3], U64)
    both(lambda m, a, i: a[i], x, idx)
    both(lambda m, a, i: m.take(a, i), x, idx)
    got = cjit.jit(lambda a: a.at[0].add(np.uint64(2**63)).at[9].set(np.uint64(5)))(x)
    want = x.copy()
    want[0] += np.uint64(2**63)
    want[9] = 5
    same(got, want)


def test_control_flow_and_vmap():
    x = big()
    got = cjit.jit(lambda a: cjit.lax.scan(lambda c, v: (c + v, c), np.uint64(0), a))(x)
    same(got[0], np.array(x.sum(), U64))
    same(got[1], np.concatenate([np.zeros(1, U64), np.cumsum(x)[:-1]]))
    same(cjit.lax.fori_loop(0, 3, lambda i, c: c + np.uint64(2**62), np.uint64(1)),
         np.array(3 * 2**62 + 1, U64))
    same(cjit.vmap(lambda a: a + np.uint64(2**63))(x), x + np.uint64(2**63))


def test_changing_dtype_does_not_poison_the_cache():
    f = cjit.jit(lambda a: a // 3 + (a > 2))
    vals = [2**31 - 1, 9, 0]
    for dt in (np.int64, U64, np.int64, np.uint32, U64, np.int32):
        a = np.array(vals, dt)
        with np.errstate(all="ignore"):
            same(f(a), a // 3 + (a > 2))
    assert f.cache_info()["entries"] == 4
    a = np.array([2**64 - 1, 5], U64)
    same(f(a), a // 3 + (a > 2))   # a value past int64 in the uint64 entry
    same(f(np.array([-1, 5])), np.array([-1, 5]) // 3 + (np.array([-1, 5]) > 2))


def test_gradients_refuse_uint64():
    x = np.array([1, 2**63], U64)
    with pytest.raises(TypeError, match="float inputs.*uint64"):
        cjit.grad(lambda a: cnp.sum(a * 2))(x)
    with pytest.raises(TypeError, match="float inputs.*int32"):
        cjit.grad(lambda a: cnp.sum(a * 2))(np.array([1, 2], np.int32))
    # a uint64 argument left out of argnums is fine; its cast to float carries no gradient
    g = cjit.grad(lambda f, a: cnp.sum(f * a.astype(np.float64)))(np.ones(2), x)
    same(g, x.astype(np.float64))
