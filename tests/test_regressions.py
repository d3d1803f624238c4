"""Bugs found by the hardening work (fuzzing, bad input, sanitizers), each
kept as the plain program that showed it.  The test name says what broke."""
import numpy as np
import pytest

import cjit
import cjit.numpy as cnp


def _unaligned_f64(n):
    """A C-contiguous float64 array that is not 8-byte aligned (a view into
    a byte buffer at offset 1), holding 0.0, 1.0, ..."""
    buf = np.zeros(8 * n + 1, np.uint8)
    x = buf[1:].view(np.float64)
    x[:] = np.arange(n)
    assert x.flags.c_contiguous and not x.flags.aligned
    return x


def test_unaligned_contiguous_argument_is_accepted():
    # Was: TypeError "expected a C-contiguous float64[4] array ... (not
    # C-contiguous and aligned)": only non-contiguous arrays were copied.
    x = _unaligned_f64(4)
    assert np.array_equal(cjit.jit(lambda a: a * 2 + 1)(x), np.arange(4.0) * 2 + 1)
    assert np.array_equal(cjit.jit(lambda a: a + 1)(x.reshape(2, 2)),
                          np.arange(4.0).reshape(2, 2) + 1)


def test_unaligned_argument_with_static_args_eager_and_compiled():
    x = _unaligned_f64(3)
    want = np.arange(3.0) + 2
    assert np.array_equal(cjit.jit(lambda a, n: a + n, static_argnums=1)(x, 2), want)
    assert np.array_equal(cnp.add(x, 2), want)
    c = cjit.jit(lambda a: a + 2).lower(np.ones(3)).compile()
    assert np.array_equal(c(x), want)
    # closed over
    assert np.array_equal(cjit.jit(lambda a: a + x)(np.full(3, 2.0)), want)


def test_shape_dtype_struct_rejects_float_dims():
    # Was: ShapeDtypeStruct((2.5,), f32) silently became shape (2,).
    with pytest.raises(TypeError):
        cjit.ShapeDtypeStruct((2.5,), np.float32)
    with pytest.raises(TypeError):
        cjit.ShapeDtypeStruct(("3",), np.float32)
    assert cjit.ShapeDtypeStruct((np.int64(3), 2), np.float32).shape == (3, 2)


def test_donate_argnums_must_be_ints():
    # Was: donate_argnums="a" accepted (as the tuple ('a',)).
    with pytest.raises(TypeError):
        cjit.jit(lambda x: x, donate_argnums="a")
    with pytest.raises(TypeError):
        cjit.jit(lambda x: x, donate_argnums=(0.5,))
    assert np.array_equal(cjit.jit(lambda x: x + 1, donate_argnums=0)(np.ones(2)), np.full(2, 2.0))
