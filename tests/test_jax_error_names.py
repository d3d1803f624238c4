"""JAX's exception names in cjit.errors, so that a ported ``except
jax.errors.X:`` catches what cjit raises where JAX raises X (thinking_in_jax
and Common_Gotchas_in_JAX catch NonConcreteBooleanIndexError and the
Tracer*ConversionErrors).  The names and bases are jax 0.10.2's."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cjit
import cjit.errors as ce
import cjit.numpy as cnp


def test_jax_error_names_exist_with_jax_bases():
    assert issubclass(ce.ConcretizationTypeError, TypeError)
    for name in ("TracerBoolConversionError", "TracerIntegerConversionError",
                 "TracerArrayConversionError", "UnexpectedTracerError"):
        assert issubclass(getattr(ce, name), TypeError), name
    assert issubclass(ce.TracerBoolConversionError, ce.ConcretizationTypeError)
    assert issubclass(ce.NonConcreteBooleanIndexError, IndexError)
    assert set(ce.__all__) <= set(dir(ce))


def test_traced_boolean_mask_raises_jax_s_error():
    # thinking_in_jax.md: jit(lambda x: x[x < 0]) -> NonConcreteBooleanIndexError
    with pytest.raises(ce.NonConcreteBooleanIndexError, match="boolean mask"):
        cjit.jit(lambda x: x[x < 0])(np.arange(10.0))
    with pytest.raises(NotImplementedError):     # what cjit raised before: still caught
        cjit.jit(lambda x: x[x < 0])(np.arange(10.0))


def test_leaked_tracer_is_unexpected_tracer_error():
    kept = []

    @cjit.jit
    def f(x):
        kept.append(x)
        return x
    f(1.0)
    with pytest.raises(ce.UnexpectedTracerError):
        cjit.jit(lambda y: y + kept[0])(2.0)


_CONVERSIONS = {
    "bool": (lambda t: 1 if t > 0 else 0, "TracerBoolConversionError"),
    "int": (lambda t: int(t), "TracerIntegerConversionError"),
    "index": (lambda t: [1, 2, 3][t], "TracerIntegerConversionError"),
    "float": (lambda t: float(t), "ConcretizationTypeError"),
    "asarray": (lambda t: np.asarray(t), "TracerArrayConversionError"),
}


@settings(max_examples=30, deadline=None)
@given(kind=st.sampled_from(sorted(_CONVERSIONS)), dtype=st.sampled_from(["int32", "float32", "bool"]),
       shape=st.sampled_from([(), (1,), (2, 3)]), mask_shape=st.sampled_from([(4,), (2, 2), (3, 1)]))
def test_conversions_and_masks_raise_what_jax_names(kind, dtype, shape, mask_shape):
    conv, jax_name = _CONVERSIONS[kind]
    x = np.ones(shape, "int32" if kind == "index" else dtype)
    with pytest.raises(getattr(ce, jax_name)):
        cjit.jit(lambda t: conv(t if kind == "asarray" else cnp.sum(t)))(x)
    m = np.arange(int(np.prod(mask_shape)), dtype=np.float32).reshape(mask_shape)
    with pytest.raises(ce.NonConcreteBooleanIndexError):
        cjit.jit(lambda v: v[v > 1])(m)
