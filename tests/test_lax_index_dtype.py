"""dtypes of cjit.lax loop indices, carries and branch results, as JAX's.

JAX's rules (checked against jax 0.10.2 when this file was written): a
fori_loop with concrete bounds (Python or NumPy ints, 0-d arrays) gives
its body a *weak* index of the default int dtype (int64 with x64), so
``x + i`` keeps x's dtype and a Python-int carry becomes the default int;
a Python scalar carry is weak in both modes; a branch of cond/switch never
truncates another branch's float to an int.  The references here are
those rules applied with NumPy, not JAX."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cjit
import cjit.numpy as cnp
from cjit import lax

F32, F64, I32, I64 = (np.dtype(n) for n in ("float32", "float64", "int32", "int64"))


def _canonical(dt, x64):
    dt = np.dtype(dt)
    return {F64: F32, I64: I32}.get(dt, dt) if not x64 else dt


@pytest.mark.parametrize("x64", [False, True])
def test_fori_loop_index_is_the_default_int(x64):
    # docs/control-flow.md: `lax.fori_loop(0, 10, lambda i, x: x + i, 0)` is
    # Array(45, dtype=int64, weak_type=True) with x64 (it was int32)
    with cjit.enable_x64(x64):
        r = lax.fori_loop(0, 10, lambda i, x: x + i, 0)
        assert r.dtype == (I64 if x64 else I32) and int(r) == 45
        r = lax.fori_loop(np.int32(0), np.int32(10), lambda i, x: i, 0)
        assert r.dtype == (I64 if x64 else I32) and int(r) == 9
        # the index is weak: it leaves an int8 carry int8
        r = lax.fori_loop(0, 5, lambda i, x: x + i, np.int8(100))
        assert r.dtype == np.int8 and int(r) == np.int8(110)
        # two weak traced bounds (Python ints given to jit) give a weak index too
        r = cjit.jit(lambda n, a: lax.fori_loop(0, n, lambda i, x: x + i, a))(10, np.int8(0))
        assert r.dtype == np.int8 and int(r) == 45


@pytest.mark.parametrize("x64", [False, True])
def test_python_scalar_carries_stay_weak(x64):
    with cjit.enable_x64(x64):
        r = lax.while_loop(lambda c: c < 10, lambda c: c + np.int8(3), 0)
        assert r.dtype == np.int8 and int(r) == 12
        r = lax.while_loop(lambda c: c < 10, lambda c: c + np.float32(1.5), 0.5)
        assert r.dtype == F32 and float(r) == 11.0


@pytest.mark.parametrize("x64", [False, True])
def test_branches_never_truncate_a_float_to_an_int(x64):
    with cjit.enable_x64(x64):
        # two weak branches: the float one leads (was: 2.5 cast to int, giving 2)
        r = lax.switch(1, [lambda: 1, lambda: 2.5])
        assert r.dtype == (F64 if x64 else F32) and float(r) == 2.5
        # a weak float next to a strong int: JAX's TypeError, not a truncation
        with pytest.raises(TypeError, match="different types"):
            lax.cond(True, lambda: 0.5, lambda: np.int32(2))
        # promotion that keeps the value still applies (decision 220)
        r = lax.cond(False, lambda: 3, lambda: np.float32(1.5))
        assert r.dtype == F32 and float(r) == 1.5


_BOUND_KINDS = ["py", "int16", "int32", "int64", "array0d"]
_INIT_KINDS = ["py_int", "py_float", "int8", "int16", "int32", "int64", "uint8", "float32", "float64"]


def _bound(v, kind):
    if kind == "py":
        return v
    if kind == "array0d":
        return np.asarray(v, dtype=np.int32)
    return np.dtype(kind).type(v)


def _init(kind):
    if kind == "py_int":
        return 3
    if kind == "py_float":
        return 0.5
    return np.dtype(kind).type(3)


@settings(max_examples=40, deadline=None)
@given(x64=st.booleans(), lo=st.integers(0, 4), n=st.integers(0, 25),
       bound_kind=st.sampled_from(_BOUND_KINDS), init_kind=st.sampled_from(_INIT_KINDS),
       how=st.sampled_from(["eager", "jit_init", "jit_closed"]))
def test_fori_loop_dtypes_follow_jax_rules(x64, lo, n, bound_kind, init_kind, how):
    """x + i over a concrete range: the result has the carry's dtype (a
    Python int carry: the default int; a Python float: the default float)
    and the value NumPy gives in that dtype (wrapping for narrow ints)."""
    hi = lo + n
    lower, upper = _bound(lo, bound_kind), _bound(hi, bound_kind)
    init = _init(init_kind)
    with cjit.enable_x64(x64):
        body = lambda i, x: x + i  # noqa: E731
        if how == "eager":
            r = lax.fori_loop(lower, upper, body, init)
        elif how == "jit_init":
            r = cjit.jit(lambda a: lax.fori_loop(lower, upper, body, a))(init)
        else:
            r = cjit.jit(lambda: lax.fori_loop(lower, upper, body, init))()
        seen = []
        if n:
            lax.fori_loop(lower, upper, lambda i, x: (seen.append((i.dtype, i.weak)), x)[1], init)
    if init_kind == "py_int":
        want_dt = I64 if x64 else I32
    elif init_kind == "py_float":
        want_dt = F64 if x64 else F32
    else:
        want_dt = _canonical(init_kind, x64)
    assert np.dtype(r.dtype) == want_dt, (r.dtype, want_dt)
    total = sum(range(lo, hi))
    if want_dt.kind == "f":
        want = np.asarray(init, want_dt) + np.asarray(total, want_dt)
        assert float(r) == float(want)
    else:
        # modular arithmetic: the per-step wraps add up to the final wrap
        want = (int(init) + total) % (1 << (8 * want_dt.itemsize))
        assert int(np.asarray(r).astype(np.uint64)) % (1 << (8 * want_dt.itemsize)) == want
    for dt, weak in seen:   # the index the body got: a weak default int
        assert np.dtype(dt) == (I64 if x64 else I32) and weak


def test_concrete_zero_d_array_bounds_are_static():
    # JAX takes any concrete bound as static: an int16 carry survives a 0-d array bound
    r = lax.fori_loop(np.asarray(0), np.asarray(4), lambda i, x: x + i, np.int16(1))
    assert r.dtype == np.int16 and int(r) == 7
    # reverse mode goes through (a scan, not a while_loop)
    g = cjit.grad(lambda x: lax.fori_loop(np.asarray(0), np.asarray(3), lambda i, c: c * x, 1.0))(2.0)
    assert float(g) == 12.0
    assert cnp.asarray(g).dtype == F64
