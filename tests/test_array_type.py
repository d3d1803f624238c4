"""cjit.Array: the array type cjit returns, with JAX's contract (immutable,
.at, block_until_ready, device, NumPy interop without copies, indexing by
traced values of closed-over arrays), and the same values eager or jitted."""
import copy
import pickle

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cjit
import cjit.numpy as cnp
from cjit import lax


@pytest.fixture(scope="module", autouse=True, params=[False, True], ids=["x64_off", "x64_on"])
def x64(request):
    """Every test in both modes (the dtypes of results depend on it)."""
    with cjit.enable_x64(request.param):
        yield request.param


def _float():
    return np.dtype("float64" if cjit.config.jax_enable_x64 else "float32")


def _int():
    return np.dtype("int64" if cjit.config.jax_enable_x64 else "int32")


def _f32(*shape):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) / 4 - 1


# ---- every way of making an array gives a cjit.Array ------------------------------

def test_results_are_cjit_arrays():
    f = cjit.jit(lambda x: (x + 1, x.sum(), x > 0))
    makers = {
        "jit": lambda: f(_f32(3, 2)),
        "eager op": lambda: cnp.exp(_f32(4)),
        "creation": lambda: (cnp.zeros(3), cnp.arange(5), cnp.eye(2), cnp.full((2,), 7)),
        "asarray": lambda: (cnp.asarray([1, 2]), cnp.array(np.ones(2))),
        "device_put": lambda: cjit.device_put({"w": np.ones(2)}),
        "random": lambda: cjit.random.normal(cjit.random.PRNGKey(0), (3,)),
        "indexing": lambda: (cnp.arange(6)[2], cnp.arange(6)[1:4], cnp.arange(6)[np.array([0, 5])]),
        "methods": lambda: (cnp.arange(6).sum(), cnp.arange(6.0).reshape(2, 3).T),
        "linalg tuple": lambda: cnp.linalg.eigh(np.eye(2)),
    }
    for name, make in makers.items():
        leaves = cjit.tree_util.tree_leaves(make())
        assert leaves, name
        for v in leaves:
            assert type(v) is cjit.Array, (name, type(v))
            assert isinstance(v, np.ndarray) and not v.flags.writeable, name


def test_isinstance_for_traced_values_and_the_numpy_name():
    seen = []

    @cjit.jit
    def f(x):
        seen.append((isinstance(x, cjit.Array), isinstance(x, cnp.ndarray)))
        return x * 2
    f(np.ones(2, np.float32))
    assert seen == [(True, True)]
    assert cnp.ndarray is cjit.Array
    assert not isinstance(np.ones(2), cjit.Array) and not isinstance(3.0, cjit.Array)
    from cjit._devices import DeviceArray
    assert issubclass(DeviceArray, cjit.Array)
    with pytest.raises(TypeError, match="not constructed directly"):
        cjit.Array(np.ones(2))


# ---- immutability ------------------------------------------------------------------

def test_item_assignment_raises_with_the_at_advice():
    x = cnp.arange(10)
    with pytest.raises(TypeError, match=r"immutable.*x\.at\[idx\]\.set\(y\)"):
        x[0] = 10
    with pytest.raises(TypeError, match="immutable"):
        del x[0]
    with pytest.raises(ValueError, match="read-only"):
        np.copyto(x, 1)
    with pytest.raises(ValueError, match="read-only"):
        np.add(x, 1, out=x)
    with pytest.raises(ValueError, match="read-only"):
        np.asarray(x)[0] = 5
    np.testing.assert_array_equal(x, np.arange(10))


def test_in_place_operators_rebind():
    x = cnp.arange(4.0)
    keep = x
    x += 1
    x *= 2
    assert x is not keep
    np.testing.assert_array_equal(keep, [0, 1, 2, 3])
    np.testing.assert_array_equal(x, [2, 4, 6, 8])
    assert x.dtype == _float() and type(x) is cjit.Array


def test_at_updates_outside_jit_match_numpy():
    base = np.arange(8, dtype=_int())
    x = cnp.asarray(base)
    idx = np.array([1, 3, 3])
    expect = base.copy()
    np.add.at(expect, idx, 5)
    np.testing.assert_array_equal(x.at[idx].add(5), expect)
    np.testing.assert_array_equal(x.at[2:5].set(0), np.r_[0, 1, 0, 0, 0, 5, 6, 7])
    np.testing.assert_array_equal(x.at[0].multiply(3), base)
    np.testing.assert_array_equal(x.at[7].max(100), np.r_[base[:7], 100])
    assert int(x.at[20].get(mode="fill", fill_value=-1)) == -1
    # an update out of range is dropped, as JAX's scatter
    np.testing.assert_array_equal(x.at[20].set(99), base)
    np.testing.assert_array_equal(x.at[np.array([0, 1])].apply(lambda v: v * 10),
                                  np.r_[0, 10, base[2:]])
    np.testing.assert_array_equal(x, base)


# ---- JAX's attributes ---------------------------------------------------------------

def test_attributes():
    x = cjit.jit(lambda a: a * 2)(_f32(2, 3))
    assert x.block_until_ready() is x and cjit.block_until_ready(x) is x
    assert x.device == cjit.devices("cpu")[0] and x.devices() == {cjit.devices("cpu")[0]}
    assert (x.shape, x.ndim, x.size, x.dtype) == ((2, 3), 2, 6, np.float32)
    np.testing.assert_array_equal(x.T, _f32(2, 3).T * 2)
    np.testing.assert_array_equal(x.mT, _f32(2, 3).T * 2)
    assert type(x.T) is cjit.Array and not x.is_deleted()
    assert repr(cnp.arange(3)) == f"Array([0, 1, 2], dtype={_int().name})"
    assert repr(cnp.ones(()) * 1.5) == f"Array(1.5, dtype={_float().name})"
    assert str(cnp.arange(3)) == "[0 1 2]"
    with pytest.raises(TypeError, match="unhashable"):
        hash(cnp.arange(3))


def test_numpy_sees_the_buffer_without_a_copy():
    x = cjit.jit(lambda a: a + 1)(_f32(5))
    v = np.asarray(x)
    assert type(v) is np.ndarray and np.shares_memory(v, x) and not v.flags.writeable
    d = np.from_dlpack(x)
    assert np.shares_memory(d, x)
    assert x.__array__().ctypes.data == x.ctypes.data
    # NumPy's own functions see plain arrays and return them, as with JAX's arrays
    s = np.sin(x)
    assert type(s) is np.ndarray
    assert type(np.concatenate([x, x])) is np.ndarray


def test_pickle_and_copy():
    x = cnp.arange(6.0).reshape(2, 3)
    y = pickle.loads(pickle.dumps(x))
    assert type(y) is cjit.Array and not y.flags.writeable
    np.testing.assert_array_equal(x, y)
    assert copy.copy(x) is x
    z = copy.deepcopy(x)
    assert type(z) is cjit.Array and not np.shares_memory(z, x)


def test_indexing_copies_so_donation_cannot_change_another_array():
    x = cnp.arange(8.0)
    row = x[2:6]
    assert not np.shares_memory(row, x)
    f = cjit.jit(lambda a: a * 0, donate_argnums=0)
    f(x)
    np.testing.assert_array_equal(row, [2, 3, 4, 5])


def test_donated_array_is_deleted():
    f = cjit.jit(lambda a: a * 2, donate_argnums=0)
    x = cnp.ones(4)
    y = f(x)
    np.testing.assert_array_equal(y, 2 * np.ones(4))
    assert x.is_deleted() and "deleted" in repr(x) and x.shape == (4,)
    for use in (lambda: f(x), lambda: x + 1, lambda: x[0], lambda: x.sum(), lambda: np.sin(x)):
        with pytest.raises(RuntimeError, match="deleted"):
            use()
    z = cnp.ones(3)
    z.delete()
    assert z.is_deleted()


# ---- closed-over arrays indexed by traced values --------------------------------------

def test_closed_over_array_indexed_by_a_traced_value():
    a = cnp.arange(10)
    assert int(cjit.jit(lambda i: a[i])(3)) == 3
    assert int(lax.fori_loop(0, 10, lambda i, x: x + a[i], 0)) == 45
    w = cnp.asarray(_f32(4, 3))
    g = cjit.grad(lambda s, i: (w[i] * s).sum())(2.0, 1)
    np.testing.assert_allclose(g, _f32(4, 3)[1].sum())


# ---- the same numbers eager and jitted (generated) ------------------------------------

_INDEX = st.one_of(
    st.integers(-14, 14),
    st.tuples(st.integers(-9, 9), st.integers(-5, 5)),
    st.builds(slice, st.one_of(st.none(), st.integers(-9, 9)),
              st.one_of(st.none(), st.integers(-9, 9)), st.sampled_from([None, 1, 2, -1])),
    st.lists(st.integers(-12, 12), min_size=1, max_size=4).map(np.array),
    st.tuples(st.just(Ellipsis), st.integers(-6, 6)),
)


@settings(max_examples=60, deadline=None)
@given(key=_INDEX)
def test_generated_concrete_indexing_equals_traced_indexing(key):
    """x[key] on a cjit.Array gives what the same indexing gives in a jitted
    function (JAX's clamping of out-of-range integers), 60 keys per run."""
    base = _f32(7, 4)
    x = cnp.asarray(base)
    if isinstance(key, np.ndarray):
        traced = cjit.jit(lambda v, k: v[k])(x, key)
    else:
        traced = cjit.jit(lambda v: v[key])(x)
    eager = x[key]
    assert type(eager) is cjit.Array and eager.dtype == traced.dtype
    np.testing.assert_array_equal(eager, traced)


_OPS = ["__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__", "__pow__",
        "__lt__", "__eq__", "__radd__", "__rsub__", "__rtruediv__", "__and__", "__lshift__"]


@settings(max_examples=60, deadline=None)
@given(op=st.sampled_from(_OPS),
       dtype=st.sampled_from(["int32", "float32", "bool", "uint8", "int64", "float64"]),
       other=st.one_of(st.integers(0, 5), st.floats(0.5, 4.0), st.sampled_from(["array"])))
def test_generated_operators_equal_jitted_operators(op, dtype, other):
    """An operator on concrete cjit.Arrays gives the dtype and values it gives
    on traced values (promotion included), 60 cases per run."""
    if dtype == "bool" and op in ("__sub__", "__rsub__", "__pow__", "__lshift__", "__floordiv__",
                                  "__mod__"):
        return
    if isinstance(other, float) and op in ("__and__", "__lshift__"):
        return
    x = cnp.asarray(np.array([1, 2, 3, 4], dtype=dtype))
    y = cnp.asarray(np.array([2, 1, 2, 3], dtype=dtype)) if other == "array" else other
    if dtype == "bool" and other == "array":
        y = cnp.asarray(np.array([True, False, True, True]))
    try:
        traced = cjit.jit(lambda a, b: getattr(a, op)(b))(x, y)
    except (TypeError, ValueError) as e:
        with pytest.raises(type(e)):
            getattr(x, op)(y)
        return
    eager = getattr(x, op)(y)
    assert type(eager) is cjit.Array
    assert eager.dtype == traced.dtype, (op, dtype, other)
    np.testing.assert_array_equal(eager, traced)
