"""Arrays of other libraries (__dlpack__, __array__) as jit arguments and
cjit.numpy operands."""
import warnings

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp

jnp = pytest.importorskip("jax.numpy")


def test_jax_arrays_as_jit_arguments_and_numpy_operands():
    a = jnp.arange(6.0).reshape(2, 3)          # float32 (jax's default)
    f = cjit.jit(lambda x, y: x * 2 + y)
    r = f(a, np.ones(3, np.float32))
    assert r.dtype == np.float32
    np.testing.assert_array_equal(r, np.arange(6.0).reshape(2, 3) * 2 + 1)
    np.testing.assert_array_equal(cnp.add(a, a), 2 * np.asarray(a))
    np.testing.assert_allclose(cnp.sin(a), np.sin(np.asarray(a)), rtol=1e-6)
    g = cjit.jit(lambda x: cnp.sum(x * cnp.asarray(a)))      # closed over
    assert float(g(np.ones((2, 3), np.float32))) == 15.0
    np.testing.assert_array_equal(cjit.grad(lambda x: (x * x).sum())(a), 2 * np.asarray(a))


def test_a_jax_argument_hits_the_cache_like_a_numpy_one():
    traces = []

    def fun(x):
        traces.append(1)
        return x + 1
    f = cjit.jit(fun)
    f(jnp.zeros(3))
    f(jnp.ones(3))
    np.testing.assert_array_equal(f(np.zeros(3, np.float32)), [1, 1, 1])
    assert len(traces) == 1


def test_objects_with_only_array_are_copied():
    class Wrapped:
        def __array__(self, dtype=None, copy=None):
            return np.arange(3)
    np.testing.assert_array_equal(cjit.jit(lambda x: x * 2)(Wrapped()), [0, 2, 4])


def test_unsupported_foreign_dtype_names_the_argument():
    with pytest.raises(TypeError, match=r"argument 'x'.*bfloat16"):
        cjit.jit(lambda x: x)(jnp.zeros(3, jnp.bfloat16))


def test_donating_a_jax_array_leaves_it_unchanged():
    a = jnp.arange(4.0)
    h = cjit.jit(lambda x: x + 1, donate_argnums=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = h(a)
    np.testing.assert_array_equal(r, [1, 2, 3, 4])
    np.testing.assert_array_equal(np.asarray(a), [0, 1, 2, 3])


def test_from_dlpack_shares_memory():
    a = np.arange(5.0)
    b = cnp.from_dlpack(a)
    assert np.shares_memory(a, b)
    c = cnp.from_dlpack(jnp.arange(3.0))
    np.testing.assert_array_equal(c, [0, 1, 2])
    with pytest.raises(TypeError, match="__dlpack__"):
        cnp.from_dlpack([1, 2])
    with pytest.raises(NotImplementedError):
        cjit.jit(lambda x: cnp.from_dlpack(x))(a)


def test_a_failing_array_protocol_is_a_clean_type_error():
    class Broken:
        def __array__(self, dtype=None, copy=None):
            raise RuntimeError("no {data}")
    with pytest.raises(TypeError, match=r"argument 'x' of <lambda> of type Broken could not be read as an array "
                       r"\(RuntimeError: no \{data\}\)"):
        cjit.jit(lambda x: x)(Broken())


def test_scipy_special_accepts_jax_arrays():
    import cjit.scipy.special as cs
    import scipy.special as sc
    x = jnp.linspace(-2.0, 2.0, 9)
    np.testing.assert_allclose(cs.erf(x), sc.erf(np.asarray(x, np.float64)), rtol=2e-7)
