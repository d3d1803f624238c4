"""Every elementwise unary primitive, from its record (csrc/ops_unary.def,
read through _cjit.op_table()), so that a new record is tested the moment it
exists: its values and dtypes against NumPy in every dtype (special values
included), its derivative against central differences with forward and
reverse mode agreeing exactly, and vmap against the op itself.  Generated
by Hypothesis, derandomized: the same cases every run."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import cjit
import cjit.lax as lax
import cjit.numpy as cnp
from cjit import _cjit
from cjit._trace_state import current_trace

RECORDS = [r for r in _cjit.op_table() if "dtypes" in r]
NAMES = [r["name"] for r in RECORDS]
# those with a float result on a float operand: the ones a derivative can be asked of
SMOOTH = [r for r in RECORDS if r["dtypes"] in ("float", "same", "nobool", "round")]
BY_NAME = {r["name"]: r for r in RECORDS}
# NumPy's function of a record without a public name of its own
NUMPY_OF = {"log_libc": "log"}
DTYPES = ["bool", "int32", "int64", "uint8", "uint32", "float32", "float64"]
N = 6
ULPS = 4     # cjit's math is within 1.5 ulp of the exact value, libm's within about 2

SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
VALUE_EXAMPLES, GRAD_EXAMPLES, VMAP_EXAMPLES = 200, 120, 40


def prim(name):
    """The primitive itself, not cjit.numpy's function (whose NumPy rules on
    bool and int may differ from the record's)."""
    return lambda x: current_trace().apply(name, x)


_JITS = {}


def jitted(kind, name):
    """The op (kind "op"), its tangent for the tangent 1 ("jvp") or its
    gradient summed ("grad"), jitted once per op."""
    if (kind, name) not in _JITS:
        f = prim(name)
        fn = {"op": f,
              "jvp": lambda x: cjit.jvp(f, (x,), (cnp.ones_like(x),))[1],
              "grad": cjit.grad(lambda x: cnp.sum(f(x) * 1.0))}[kind]
        _JITS[kind, name] = cjit.jit(fn)
    return _JITS[kind, name]


def run(name, x, kind="op"):
    return np.asarray(jitted(kind, name)(x))


def reference(rec):
    return getattr(np, rec["numpy"] or NUMPY_OF[rec["name"]])


def values(dt):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return st.booleans()
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return st.integers(int(info.min), int(info.max))
    special = st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 8.0, -27.0,
                               float(np.finfo(dt).tiny), float(np.finfo(dt).max)])
    return st.one_of(special, st.floats(width=8 * dt.itemsize, allow_nan=True, allow_infinity=True),
                     st.floats(-4.0, 4.0, width=8 * dt.itemsize))


@st.composite
def cases(draw):
    rec = draw(st.sampled_from(RECORDS))
    dt = draw(st.sampled_from(DTYPES))
    x = np.array(draw(st.lists(values(dt), min_size=N, max_size=N)), dtype=dt)
    return rec, x


def ulp_close(got, want):
    """Equal nan positions, equal infinities and signs of zero results aside,
    and at most ULPS units in the last place of the larger of the two."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(w)), (got, want)
    ok = ~np.isnan(w)
    assert np.array_equal(np.isinf(g[ok]), np.isinf(w[ok])) and np.all(g[np.isinf(w)] == w[np.isinf(w)]), (got, want)
    fin = ok & ~np.isinf(w)
    big = np.maximum(np.abs(got[fin]), np.abs(want[fin])).astype(got.dtype)
    tol = ULPS * np.spacing(big).astype(np.float64)
    assert np.all(np.abs(g[fin] - w[fin]) <= tol), (got, want)


@settings(max_examples=VALUE_EXAMPLES, **SETTINGS)
@given(cases())
def test_values_and_dtypes_match_numpy(case):
    rec, x = case
    name, rule, fl = rec["name"], rec["dtypes"], x.dtype.kind == "f"
    if (rule == "nobool" and x.dtype == np.bool_) or (rule == "bits" and fl):
        with pytest.raises(TypeError, match=name):
            run(name, x)
        return
    got = run(name, x)
    want_dtype = {"float": x.dtype if fl else np.dtype(np.float64), "test": np.dtype(np.bool_),
                  "logic": np.dtype(np.bool_)}.get(rule, x.dtype)
    assert got.dtype == want_dtype and got.shape == x.shape, (name, x.dtype, got.dtype)
    if rule == "round" and not fl:
        want = x
    elif rule == "logic":
        want = np.logical_not(x)
    else:
        with np.errstate(all="ignore"):
            want = reference(rec)(x.astype(want_dtype) if rule == "float" else x)
    if got.dtype.kind == "f":
        ulp_close(got, want)
    else:
        assert np.array_equal(got, want), (name, x, got, want)


@settings(max_examples=GRAD_EXAMPLES, **SETTINGS)
@given(st.sampled_from(SMOOTH), st.floats(0.25, 3.0), st.booleans())
def test_derivative_matches_central_differences(rec, a, negative):
    """Away from 0 (where abs, sign, reciprocal and cbrt are not smooth),
    on either side; a point outside the op's domain (log of a negative) is
    skipped."""
    name = rec["name"]
    x = np.array([-a if negative else a], np.float64)
    fx = run(name, x)
    h = 1e-6 * max(1.0, a)
    lo, hi = run(name, x - h), run(name, x + h)
    assume(np.all(np.isfinite(fx)) and np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)))
    if not rec["derivative"]:
        assume(np.array_equal(lo, hi))      # not across a step of floor or ceil
    tangent, cotangent = run(name, x, "jvp"), run(name, x, "grad")
    if not rec["derivative"]:
        assert np.all(tangent == 0) and np.all(cotangent == 0), (name, x, tangent, cotangent)
        return
    fd = (hi.astype(np.float64) - lo) / (2 * h)
    assert np.array_equal(tangent, cotangent), (name, x, tangent, cotangent)
    np.testing.assert_allclose(tangent, fd, rtol=1e-5, atol=1e-7, err_msg=f"{name} at {x}")


@settings(max_examples=VMAP_EXAMPLES, **SETTINGS)
@given(cases())
def test_vmap_is_the_op_on_each_row(case):
    rec, x = case
    name, rule, fl = rec["name"], rec["dtypes"], x.dtype.kind == "f"
    assume(not ((rule == "nobool" and x.dtype == np.bool_) or (rule == "bits" and fl)))
    rows = x.reshape(2, N // 2)
    got = np.asarray(cjit.jit(cjit.vmap(prim(name)))(rows))
    want = np.stack([run(name, r) for r in rows])
    np.testing.assert_array_equal(got, want)


# written by hand in numpy/_elementwise.py: NumPy's rules on bool and int operands
OWN = {"negative", "abs", "sign", "reciprocal", "logical_not", "bitwise_not"}


def test_python_functions_come_from_the_records():
    """cjit.numpy and cjit.lax have a function for every record's name, the
    plain ones documented by the record, and lax's is numpy's."""
    assert {"exp", "log1p", "floor", "bitwise_not"} <= set(NAMES)
    for rec in RECORDS:
        if rec["numpy"]:
            fn = getattr(cnp, rec["numpy"])
            assert rec["numpy"] in cnp.__all__
            if rec["numpy"] not in OWN:
                assert f"`{rec['name']}`" in fn.__doc__ and rec["doc"][1:] in fn.__doc__, fn.__doc__
        if rec["lax"]:
            assert getattr(lax, rec["lax"]) is getattr(cnp, rec["numpy"])
            assert rec["lax"] in lax.__all__
