"""Every function of SPEC section 3 (cjit.numpy, cjit.nn, the Tracer
operators and methods) against NumPy, inside `cjit.jit` and eagerly.

Where a dtype is left out of a parametrization, NumPy either rejects it or
returns a dtype cjit does not support (bool -> float16 for exp, int8 for
bool // bool): those combinations are computed from NumPy itself below, so
nothing is skipped at run time.
"""
import numpy as np
import pytest

import cjit
import cjit.nn
import cjit.numpy as cnp

from conftest import (DTYPES, FLOAT_DTYPES, INT_DTYPES, NUMERIC_DTYPES,
                      assert_close, layouts, rand, rand_nonzero)

MODES = ["jit", "eager"]


def run(mode, fn, *args, **kwargs):
    """Calls fn through cjit.jit (a fresh Jitted each time) or eagerly."""
    if mode == "jit":
        return cjit.jit(fn)(*args, **kwargs)
    return fn(*args, **kwargs)


def numpy_accepts(np_fn, dtypes):
    """The dtype tuples for which NumPy computes np_fn with a result dtype
    that cjit supports."""
    ok = []
    for dts in dtypes:
        dts = dts if isinstance(dts, tuple) else (dts,)
        try:
            with np.errstate(all="ignore"):
                r = np_fn(*[np.ones(2, d) for d in dts])
        except TypeError:
            continue
        r = r if isinstance(r, tuple) else (r,)
        if all(np.asarray(v).dtype.name in DTYPES for v in r):
            ok.append(dts if len(dts) > 1 else dts[0])
    return ok


# ---------------------------------------------------------------------------
# unary elementwise

def _pos(x):
    """Positive values for log/sqrt-like functions (ints: 1..9)."""
    if x.dtype == np.bool_:
        return x
    return np.where(np.abs(x) == 0, np.ones((), x.dtype), np.abs(x)).astype(x.dtype)


def _log1p_domain(x):
    if x.dtype.kind in "iu":
        return np.abs(x)
    return (np.abs(x) - 0.9).astype(x.dtype)   # > -1


UNARY = {
    # name: (domain transform or None, extra excluded dtypes, why)
    "negative": (None, ()),
    "abs": (None, ()),
    "sign": (None, ()),
    "exp": (None, ()),
    "expm1": (None, ()),
    "log": (_pos, ()),
    "log1p": (_log1p_domain, ()),
    "sqrt": (_pos, ()),
    "square": (None, ()),
    # NumPy's reciprocal of an int is an integer division (1 // x): SPEC
    # defines reciprocal as 1 / x, which only agrees on floats.
    "reciprocal": (None, ("int32", "int64")),
    "tanh": (None, ()),
    "sin": (None, ()),
    "cos": (None, ()),
    "floor": (None, ()),
    "ceil": (None, ()),
    "logical_not": (None, ()),
    "isnan": (None, ()),
    "isfinite": (None, ()),
}

TRANSCENDENTAL = {"exp", "expm1", "log", "log1p", "tanh", "sin", "cos"}


def _unary_cases():
    cases = []
    for name, (_, excluded) in UNARY.items():
        for dt in numpy_accepts(getattr(np, name), DTYPES):
            if dt not in excluded:
                cases.append((name, dt))
    return cases


def _unary_tol(name, dtype):
    res = getattr(np, name)(np.ones(1, dtype)).dtype
    if name in TRANSCENDENTAL:
        return (4e-6, 1e-7) if res == np.float32 else (1e-13, 1e-15)
    return (None, None)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,dtype", _unary_cases())
def test_unary(name, dtype, mode):
    domain = UNARY[name][0]
    x = rand((3, 4), dtype, seed=1)
    if domain is not None:
        x = domain(x)
    if name == "reciprocal":
        x = rand_nonzero((3, 4), dtype, seed=1)
    want = getattr(np, name)(x)
    got = run(mode, lambda a: getattr(cnp, name)(a), x)
    rtol, atol = _unary_tol(name, dtype)
    assert_close(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["negative", "abs", "exp", "floor", "isnan", "sqrt"])
def test_unary_zero_size_and_0d(name, mode):
    fn = getattr(cnp, name)
    for x in (np.zeros((0, 3), np.float32), np.array(2.5, np.float64),
              np.array(-1.5, np.float32)):
        assert_close(run(mode, lambda a: fn(a), x), getattr(np, name)(x),
                     rtol=4e-6, atol=1e-7)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["int32", "float32", "float64"])
@pytest.mark.parametrize("layout", ["transposed", "strided", "negative"])
@pytest.mark.parametrize("name", ["negative", "exp", "abs"])
def test_unary_noncontiguous(name, layout, dtype, mode):
    x = layouts(rand((6, 4), dtype, seed=2))[layout]
    assert not x.flags.c_contiguous
    want = getattr(np, name)(x)
    assert_close(run(mode, lambda a: getattr(cnp, name)(a), x), want,
                 rtol=4e-6, atol=1e-7)


# ---------------------------------------------------------------------------
# transcendental accuracy on the ranges that matter and special values

def _f32_ref(np_fn, x):
    """The correctly rounded float32 result (computed in float64)."""
    return np_fn(x.astype(np.float64)).astype(np.float32)


ACCURACY = {
    # name: (float32 inputs, float64 inputs, f32 atol, f64 atol)
    "exp": (np.linspace(-80, 80, 4001), np.linspace(-700, 700, 4001), 0.0, 0.0),
    "expm1": (np.concatenate([np.linspace(-20, 20, 2001), np.geomspace(1e-8, 1, 200),
                              -np.geomspace(1e-8, 1, 200)]),
              np.concatenate([np.linspace(-40, 400, 2001), np.geomspace(1e-15, 1, 200),
                              -np.geomspace(1e-15, 1, 200)]), 0.0, 0.0),
    "log": (np.concatenate([np.geomspace(1.2e-38, 3e38, 4001), np.linspace(0.5, 2, 1001)]),
            np.concatenate([np.geomspace(1e-300, 1e300, 4001), np.linspace(0.5, 2, 1001)]),
            1e-7, 1e-16),
    "log1p": (np.concatenate([np.linspace(-0.999, 10, 2001), np.geomspace(1e-8, 1e30, 300),
                              -np.geomspace(1e-8, 0.5, 200)]),
              np.concatenate([np.linspace(-0.999, 10, 2001), np.geomspace(1e-15, 1e300, 300),
                              -np.geomspace(1e-15, 0.5, 200)]), 0.0, 0.0),
    "tanh": (np.concatenate([np.linspace(-20, 20, 4001), np.geomspace(1e-8, 1, 100)]),
             np.concatenate([np.linspace(-20, 20, 4001), np.geomspace(1e-15, 1, 100)]),
             1e-12, 1e-300),
    "sin": (np.linspace(-100, 100, 4001), np.linspace(-100, 100, 4001), 2e-6, 1e-13),
    "cos": (np.linspace(-100, 100, 4001), np.linspace(-100, 100, 4001), 2e-6, 1e-13),
    "sqrt": (np.geomspace(1.2e-38, 3e38, 2001), np.geomspace(1e-300, 1e300, 2001), 0.0, 0.0),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", sorted(ACCURACY))
def test_math_accuracy(name, dtype, mode):
    x32, x64, atol32, atol64 = ACCURACY[name]
    np_fn = getattr(np, name)
    if dtype == "float32":
        x = x32.astype(np.float32)
        want = _f32_ref(np_fn, x)
        rtol, atol = 4e-6, atol32
    else:
        x = x64.astype(np.float64)
        want = np_fn(x)
        rtol, atol = 1e-13, atol64
    got = run(mode, lambda a: getattr(cnp, name)(a), x)
    assert_close(got, want, rtol=rtol, atol=atol)


SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.0])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", ["exp", "expm1", "log", "log1p", "sqrt", "tanh", "sin",
                                  "cos", "abs", "sign", "floor", "ceil", "reciprocal",
                                  "negative", "square", "isnan", "isfinite"])
def test_special_values(name, dtype, mode):
    x = SPECIALS.astype(dtype)
    want = getattr(np, name)(x)
    got = run(mode, lambda a: getattr(cnp, name)(a), x)
    assert_close(got, want, rtol=4e-6, atol=1e-7)


@pytest.mark.parametrize("mode", MODES)
def test_log_of_subnormal_float32(mode):
    # Subnormal float32 inputs must not be flushed to zero (log would be -inf).
    x = np.array([1e-40, 1e-45, 3e-39], np.float32)
    assert_close(run(mode, lambda a: cnp.log(a), x), _f32_ref(np.log, x), rtol=4e-6)


@pytest.mark.parametrize("mode", MODES)
def test_exp_overflow_and_underflow(mode):
    x = np.array([89.0, 100.0, -104.0, -200.0, 88.7], np.float32)
    assert_close(run(mode, lambda a: cnp.exp(a), x), _f32_ref(np.exp, x),
                 rtol=4e-6, atol=1e-44)
    x = np.array([710.0, 1000.0, -746.0, -1000.0, 709.0])
    assert_close(run(mode, lambda a: cnp.exp(a), x), np.exp(x), rtol=1e-13, atol=0)


# ---------------------------------------------------------------------------
# binary elementwise

BINARY = ["add", "subtract", "multiply", "divide", "floor_divide", "power", "maximum",
          "minimum", "logical_and", "logical_or", "equal", "not_equal", "less",
          "less_equal", "greater", "greater_equal"]


def _binary_inputs(name, dtype, shape_x=(3, 4), shape_y=(3, 4), seed=3):
    kind = np.dtype(dtype).kind
    x = rand(shape_x, dtype, seed=seed)
    y = rand(shape_y, dtype, seed=seed + 1)
    if name in ("divide", "floor_divide"):
        x = rand_nonzero(shape_x, dtype, seed=seed)
        y = rand_nonzero(shape_y, dtype, seed=seed + 1)
    if name == "power":
        if kind in "iu":
            x = rand(shape_x, dtype, seed=seed, low=-3, high=4)
            y = rand(shape_y, dtype, seed=seed + 1, low=0, high=4)
        elif kind == "f":
            x = rand(shape_x, dtype, seed=seed, low=0.25, high=3.0)
            y = rand(shape_y, dtype, seed=seed + 1, low=-2.5, high=2.5)
    if name in ("equal", "not_equal", "less_equal", "greater_equal", "less", "greater",
                "maximum", "minimum"):
        # few distinct values, so that many elements compare equal
        if kind in "iu":
            x = rand(shape_x, dtype, seed=seed, low=-2, high=3)
            y = rand(shape_y, dtype, seed=seed + 1, low=-2, high=3)
        elif kind == "f":
            x = np.round(x).astype(dtype)
            y = np.round(y).astype(dtype)
    return x, y


def _binary_tol(name, dtype):
    if name == "power":
        return (4e-6, 1e-6) if dtype == "float32" else (1e-13, 1e-15)
    return (None, None)


def _binary_cases():
    cases = []
    for name in BINARY:
        for pair in numpy_accepts(getattr(np, name), [(t, t) for t in DTYPES]):
            cases.append((name, pair[0]))
    return cases


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,dtype", _binary_cases())
def test_binary(name, dtype, mode):
    x, y = _binary_inputs(name, dtype)
    want = getattr(np, name)(x, y)
    got = run(mode, lambda a, b: getattr(cnp, name)(a, b), x, y)
    rtol, atol = _binary_tol(name, dtype)
    assert_close(got, want, rtol=rtol, atol=atol)


BROADCAST_PAIRS = [((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3)), ((4, 1), (1, 3)),
                   ((0, 3), (3,))]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shapes", BROADCAST_PAIRS, ids=str)
@pytest.mark.parametrize("dtype", ["int32", "float64"])
@pytest.mark.parametrize("name", BINARY)
def test_binary_broadcast(name, dtype, shapes, mode):
    sx, sy = shapes
    x, y = _binary_inputs(name, dtype, sx, sy)
    for a, b in ((x, y), (y, x)):
        if name == "power" and np.dtype(dtype).kind in "iu":
            b = np.abs(b)
        want = getattr(np, name)(a, b)
        got = run(mode, lambda p, q: getattr(cnp, name)(p, q), a, b)
        assert_close(got, want, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layout", ["transposed", "strided", "negative"])
@pytest.mark.parametrize("dtype", ["int64", "float32"])
def test_binary_noncontiguous(layout, dtype, mode):
    x = layouts(rand((6, 4), dtype, seed=5))[layout]
    y = np.ascontiguousarray(rand(x.shape, dtype, seed=6))
    for a, b in ((x, y), (y, x), (x, x)):
        assert_close(run(mode, lambda p, q: cnp.subtract(p, q), a, b), a - b)
        assert_close(run(mode, lambda p, q: cnp.maximum(p, q), a, b), np.maximum(a, b))


@pytest.mark.parametrize("mode", MODES)
def test_floor_divide_negative_ints_floor(mode):
    # C truncates toward zero; NumPy floors.
    x = np.array([-7, 7, -7, 7, -1, 0, -9], np.int64)
    y = np.array([2, -2, -2, 2, 3, 5, 4], np.int64)
    assert_close(run(mode, lambda a, b: cnp.floor_divide(a, b), x, y), x // y)
    xf = x.astype(np.float64) + 0.5
    assert_close(run(mode, lambda a, b: cnp.floor_divide(a, b), xf, y.astype(float)),
                 xf // y.astype(float))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_maximum_minimum_nan(dtype, mode):
    x = np.array([np.nan, 1.0, np.nan, -np.inf], dtype)
    y = np.array([1.0, np.nan, np.nan, 2.0], dtype)
    assert_close(run(mode, lambda a, b: cnp.maximum(a, b), x, y), np.maximum(x, y))
    assert_close(run(mode, lambda a, b: cnp.minimum(a, b), x, y), np.minimum(x, y))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_comparisons_with_nan(dtype, mode):
    x = np.array([np.nan, 1.0, np.nan, np.inf], dtype)
    y = np.array([1.0, np.nan, np.nan, np.inf], dtype)
    for name in ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]:
        assert_close(run(mode, lambda a, b: getattr(cnp, name)(a, b), x, y),
                     getattr(np, name)(x, y))


# mixed dtypes: NEP 50 / NumPy 2 promotion for every pair
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt_x,dt_y", [(a, b) for a in DTYPES for b in DTYPES if a != b])
def test_mixed_dtype_promotion(dt_x, dt_y, mode):
    x = rand((2, 3), dt_x, seed=8)
    y = rand((2, 3), dt_y, seed=9)
    assert_close(run(mode, lambda a, b: cnp.add(a, b), x, y), np.add(x, y))
    assert_close(run(mode, lambda a, b: cnp.multiply(a, b), x, y), np.multiply(x, y))
    assert_close(run(mode, lambda a, b: cnp.less(a, b), x, y), np.less(x, y))
    yd = rand_nonzero((2, 3), dt_y, seed=9)
    assert_close(run(mode, lambda a, b: cnp.divide(a, b), x, yd), np.divide(x, yd))


# ---------------------------------------------------------------------------
# NEP 50: Python scalars are weak

@pytest.mark.parametrize("mode", MODES)
def test_nep50_weak_scalars(mode):
    f32 = rand((3,), "float32", seed=1)
    i32 = rand((3,), "int32", seed=2)
    i64 = rand_nonzero((3,), "int64", seed=3)
    b = rand((3,), "bool", seed=4)
    cases = [
        (lambda x: cnp.multiply(x, 2.0), f32, np.float32),   # stays float32
        (lambda x: cnp.add(x, 1.5), i32, np.float64),        # int + float -> float64
        (lambda x: cnp.add(x, 1), i32, np.int32),            # int + int stays int32
        (lambda x: cnp.add(x, 1), b, np.int64),              # bool + int -> int64
        (lambda x: cnp.add(x, 1.0), b, np.float64),          # bool + float -> float64
        (lambda x: cnp.multiply(x, True), i32, np.int32),
        (lambda x: cnp.divide(x, 2), i32, np.float64),       # true division -> float64
        (lambda x: cnp.add(x, np.float64(1.0)), f32, np.float64),  # NumPy scalars are strong
        (lambda x: cnp.add(x, np.int64(1)), i32, np.int64),
        (lambda x: cnp.subtract(2.0, x), f32, np.float32),
        (lambda x: cnp.maximum(x, 0), i32, np.int32),
        (lambda x: cnp.power(x, 2), f32, np.float32),
    ]
    for fn, x, want_dtype in cases:
        got = run(mode, fn, x)
        want = _numpy_twin(fn)(x)
        assert np.asarray(want).dtype == want_dtype  # the premise itself
        assert_close(got, want)


def _numpy_twin(fn):
    """The same lambda evaluated with numpy in place of cjit.numpy."""
    import types
    g = dict(fn.__globals__)
    g["cnp"] = np
    return types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)


def test_nep50_operators_in_jit():
    f32 = rand((3,), "float32", seed=1)
    i32 = rand_nonzero((3,), "int32", seed=2)
    b = rand((3,), "bool", seed=4)
    assert_close(cjit.jit(lambda x: x * 2.0)(f32), f32 * 2.0, dtype=np.float32)
    assert_close(cjit.jit(lambda x: x + 1.5)(i32), i32 + 1.5, dtype=np.float64)
    assert_close(cjit.jit(lambda x, y: x + y)(i32, f32), i32 + f32, dtype=np.float64)
    assert_close(cjit.jit(lambda x: x + 1)(b), b + 1, dtype=np.int64)
    assert_close(cjit.jit(lambda x, y: x / y)(i32, i32), i32 / i32, dtype=np.float64)
    assert_close(cjit.jit(lambda x: x / 2)(i32), i32 / 2, dtype=np.float64)
    assert_close(cjit.jit(lambda x: 1 - x)(f32), 1 - f32, dtype=np.float32)
    assert_close(cjit.jit(lambda x: x * 3)(i32), i32 * 3, dtype=np.int32)


def test_weak_scalar_arguments():
    # A Python scalar passed to a jitted function is weak too.
    f32 = rand((3,), "float32", seed=1)
    i32 = rand((3,), "int32", seed=2)
    f = cjit.jit(lambda x, s: x * s)
    assert_close(f(f32, 2.0), f32 * 2.0, dtype=np.float32)
    assert_close(f(f32, np.float64(2.0)), f32 * np.float64(2.0), dtype=np.float64)
    assert_close(f(i32, 2.5), i32 * 2.5, dtype=np.float64)
    assert_close(f(i32, 3), i32 * 3, dtype=np.int32)


# ---------------------------------------------------------------------------
# Tracer operators and methods (inside jit only: eagerly they are NumPy's)

OPERATORS = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "truediv": lambda x, y: x / y,
    "floordiv": lambda x, y: x // y,
    "pow": lambda x, y: x ** y,
    "eq": lambda x, y: x == y,
    "ne": lambda x, y: x != y,
    "lt": lambda x, y: x < y,
    "le": lambda x, y: x <= y,
    "gt": lambda x, y: x > y,
    "ge": lambda x, y: x >= y,
}


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
@pytest.mark.parametrize("op", sorted(OPERATORS))
def test_tracer_operators(op, dtype):
    fn = OPERATORS[op]
    name = {"add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide",
            "floordiv": "floor_divide", "pow": "power"}.get(op, "equal")
    x, y = _binary_inputs(name, dtype, (2, 3), (3,))
    want = fn(x, y)
    assert_close(cjit.jit(fn)(x, y), want, rtol=4e-6, atol=1e-6)
    # a Python scalar on either side (the reflected operators)
    s = 2 if dtype in INT_DTYPES else 1.5
    assert_close(cjit.jit(lambda a: fn(a, s))(x), fn(x, s), rtol=4e-6, atol=1e-6)
    xs = np.abs(y) + 1 if op in ("floordiv", "truediv", "pow") else y
    assert_close(cjit.jit(lambda a: fn(s, a))(xs), fn(s, xs), rtol=4e-6, atol=1e-6)


def test_tracer_with_numpy_array_operand():
    # NumPy defers to the Tracer (__array_ufunc__ = None): ndarray op Tracer.
    x = rand((2, 3), "float64", seed=1)
    c = rand((2, 3), "float64", seed=2)
    m = rand((3, 4), "float64", seed=3)
    assert_close(cjit.jit(lambda a: c + a)(x), c + x)
    assert_close(cjit.jit(lambda a: c - a)(x), c - x)
    assert_close(cjit.jit(lambda a: c * a)(x), c * x)
    assert_close(cjit.jit(lambda a: c < a)(x), c < x)
    assert_close(cjit.jit(lambda a: a @ m)(x), x @ m)
    assert_close(cjit.jit(lambda a: c.T @ a)(x), c.T @ x)


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
def test_tracer_unary_operators(dtype):
    x = rand((2, 3), dtype, seed=1)
    assert_close(cjit.jit(lambda a: -a)(x), -x)
    assert_close(cjit.jit(lambda a: abs(a))(x), abs(x))


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES + ["bool"])
def test_tracer_matmul_operator(dtype):
    x = rand((2, 3), dtype, seed=1)
    y = rand((3, 4), dtype, seed=2)
    assert_close(cjit.jit(lambda a, b: a @ b)(x, y), x @ y, rtol=1e-5, atol=1e-5)


def test_tracer_attributes():
    seen = {}

    def f(x):
        seen.update(shape=x.shape, dtype=x.dtype, ndim=x.ndim, size=x.size,
                    Tshape=x.T.shape)
        return x

    cjit.jit(f)(np.zeros((2, 3, 4), np.float32))
    assert seen["shape"] == (2, 3, 4)
    assert isinstance(seen["shape"], tuple)
    assert seen["dtype"] == np.float32
    assert seen["ndim"] == 3
    assert seen["size"] == 24
    assert seen["Tshape"] == (4, 3, 2)


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64"])
def test_tracer_methods(dtype):
    x = rand((2, 3, 4), dtype, seed=1)
    tol = dict(rtol=1e-5, atol=1e-5)
    assert_close(cjit.jit(lambda a: a.sum())(x), x.sum(), **tol)
    assert_close(cjit.jit(lambda a: a.sum(axis=1))(x), x.sum(axis=1), **tol)
    assert_close(cjit.jit(lambda a: a.sum(-1, keepdims=True))(x), x.sum(-1, keepdims=True), **tol)
    assert_close(cjit.jit(lambda a: a.mean(axis=(0, 2)))(x), x.mean(axis=(0, 2)), **tol)
    assert_close(cjit.jit(lambda a: a.max(axis=0))(x), x.max(axis=0))
    assert_close(cjit.jit(lambda a: a.min())(x), x.min())
    assert_close(cjit.jit(lambda a: a.astype(np.float64))(x), x.astype(np.float64))
    assert_close(cjit.jit(lambda a: a.astype("int64"))(x), x.astype("int64"))
    assert_close(cjit.jit(lambda a: a.reshape(4, 6))(x), x.reshape(4, 6))
    assert_close(cjit.jit(lambda a: a.reshape((-1, 2)))(x), x.reshape((-1, 2)))
    assert_close(cjit.jit(lambda a: a.transpose())(x), x.transpose())
    assert_close(cjit.jit(lambda a: a.transpose(1, 0, 2))(x), x.transpose(1, 0, 2))
    assert_close(cjit.jit(lambda a: a.transpose((2, 0, 1)))(x), x.transpose((2, 0, 1)))
    assert_close(cjit.jit(lambda a: a.T)(x), x.T)


# ---------------------------------------------------------------------------
# reductions

REDUCTIONS = ["sum", "mean", "max", "min", "prod", "argmax", "argmin", "var"]
AXES = [None, 0, -1, (0, 2), (-1, 1)]


def _reduction_input(name, dtype, shape=(2, 3, 4), seed=11):
    if name == "prod":
        if np.dtype(dtype).kind in "iu":
            return rand(shape, dtype, seed=seed, low=-2, high=3)
        if np.dtype(dtype).kind == "f":
            return rand(shape, dtype, seed=seed, low=0.5, high=1.5)
    return rand(shape, dtype, seed=seed)


def _reduction_cases():
    cases = []
    for name in REDUCTIONS:
        for dt in numpy_accepts(getattr(np, name), DTYPES):
            for axis in AXES:
                if name.startswith("arg") and isinstance(axis, tuple):
                    continue  # NumPy's argmax/argmin take one axis
                cases.append((name, dt, axis))
    return cases


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("name,dtype,axis", _reduction_cases(), ids=str)
def test_reduction(name, dtype, axis, keepdims, mode):
    x = _reduction_input(name, dtype)
    want = getattr(np, name)(x, axis=axis, keepdims=keepdims)
    got = run(mode, lambda a: getattr(cnp, name)(a, axis=axis, keepdims=keepdims), x)
    assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layout", ["transposed", "strided", "negative"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_reduction_noncontiguous(layout, axis, mode):
    x = layouts(rand((6, 4), "float64", seed=3))[layout]
    for name in ("sum", "max", "argmin", "mean"):
        assert_close(run(mode, lambda a: getattr(cnp, name)(a, axis=axis), x),
                     getattr(np, name)(x, axis=axis))


@pytest.mark.parametrize("mode", MODES)
def test_reduction_float32_large(mode):
    # 100k float32 values: the sum must be accurate to ~1e-5 of sum(|x|).
    x = rand((100_000,), "float32", seed=12)
    want = x.astype(np.float64).sum()
    got = run(mode, lambda a: cnp.sum(a), x)
    assert got.dtype == np.float32
    assert abs(float(got) - want) <= 1e-5 * np.abs(x).astype(np.float64).sum()
    got = run(mode, lambda a: cnp.mean(a), x)
    assert abs(float(got) - want / x.size) <= 1e-5 * np.abs(x).mean()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reduction_ties_first_index(name, mode):
    x = np.array([1, 3, 3, 0, 3, 0], np.int32)
    assert_close(run(mode, lambda a: getattr(cnp, name)(a), x), getattr(np, name)(x))
    m = np.array([[2.0, 5.0, 5.0], [1.0, 1.0, 1.0], [0.0, -1.0, -1.0], [7.0, 0.0, 7.0]])
    for axis in (None, 0, 1, -1):
        assert_close(run(mode, lambda a: getattr(cnp, name)(a, axis=axis), m),
                     getattr(np, name)(m, axis=axis))
    b = np.array([False, True, True, False])
    assert_close(run(mode, lambda a: getattr(cnp, name)(a), b), getattr(np, name)(b))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ddof", [0, 1, 2])
@pytest.mark.parametrize("dtype", ["int32", "float32", "float64"])
def test_var_ddof(dtype, ddof, mode):
    x = rand((4, 5), dtype, seed=13)
    for axis in (None, 0, 1):
        want = np.var(x, axis=axis, ddof=ddof)
        got = run(mode, lambda a: cnp.var(a, axis=axis, ddof=ddof), x)
        assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["bool", "int32", "int64"])
def test_mean_of_ints_is_float64(dtype, mode):
    x = rand((3, 5), dtype, seed=14)
    got = run(mode, lambda a: cnp.mean(a, axis=1), x)
    assert_close(got, np.mean(x, axis=1), dtype=np.float64)
    assert_close(run(mode, lambda a: cnp.mean(a), x), np.mean(x), dtype=np.float64)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_max_min_propagate_nan(dtype, mode):
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -1.0]], dtype)
    for name in ("max", "min"):
        for axis in (None, 0, 1):
            assert_close(run(mode, lambda a: getattr(cnp, name)(a, axis=axis), x),
                         getattr(np, name)(x, axis=axis))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin"])
def test_empty_reduction_without_identity_raises(name, mode):
    x = np.zeros((0, 3), np.float32)
    with pytest.raises(ValueError):
        run(mode, lambda a: getattr(cnp, name)(a), x)
    with pytest.raises(ValueError):
        run(mode, lambda a: getattr(cnp, name)(a, axis=0), x)


@pytest.mark.parametrize("mode", MODES)
def test_empty_reductions_with_identity(mode):
    x = np.zeros((0, 3), np.float32)
    assert_close(run(mode, lambda a: cnp.sum(a), x), np.sum(x))
    assert_close(run(mode, lambda a: cnp.sum(a, axis=0), x), np.sum(x, axis=0))
    assert_close(run(mode, lambda a: cnp.prod(a, axis=0), x), np.prod(x, axis=0))
    assert_close(run(mode, lambda a: cnp.max(a, axis=1), x), np.max(x, axis=1))
    assert_close(run(mode, lambda a: cnp.sum(a, axis=1, keepdims=True), x),
                 np.sum(x, axis=1, keepdims=True))


@pytest.mark.parametrize("mode", MODES)
def test_reduction_of_0d(mode):
    x = np.array(3.5, np.float64)
    for name in ("sum", "max", "mean", "argmax", "prod"):
        assert_close(run(mode, lambda a: getattr(cnp, name)(a), x), getattr(np, name)(x))


# ---------------------------------------------------------------------------
# matmul and dot

MATMUL_SHAPES = [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)), ((3, 4), (4, 5)),
                 ((2, 3, 4), (4, 5)), ((4,), (2, 4, 5)), ((2, 3, 4), (2, 4, 5)),
                 ((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (2, 4, 5)), ((2, 3, 4), (4,)),
                 ((0, 4), (4, 3)), ((3, 0), (0, 2)), ((1, 1), (1, 1)), ((17, 33), (33, 9))]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul(shapes, dtype, mode):
    x = rand(shapes[0], dtype, seed=21)
    y = rand(shapes[1], dtype, seed=22)
    want = np.matmul(x, y)
    atol = 1e-4 if dtype == "float32" else 1e-12
    assert_close(run(mode, lambda a, b: cnp.matmul(a, b), x, y), want, rtol=1e-5, atol=atol)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dts", [("int32", "float32"), ("float32", "float64"),
                                 ("bool", "int32"), ("int64", "float64"),
                                 ("int32", "int64")], ids=str)
def test_matmul_mixed_dtypes(dts, mode):
    x = rand((3, 4), dts[0], seed=23)
    y = rand((4, 2), dts[1], seed=24)
    want = np.matmul(x, y)
    assert_close(run(mode, lambda a, b: cnp.matmul(a, b), x, y), want, rtol=1e-5, atol=1e-5)
    assert_close(run(mode, lambda a, b: cnp.matmul(a, b), y.T, x.T), want.T,
                 rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layout", ["transposed", "strided", "negative"])
def test_matmul_noncontiguous(layout, mode):
    x = layouts(rand((6, 6), "float64", seed=25))[layout]
    y = rand((x.shape[1], 3), "float64", seed=26)
    assert_close(run(mode, lambda a, b: cnp.matmul(a, b), x, y), x @ y)
    assert_close(run(mode, lambda a, b: cnp.matmul(a, b), y.T, x.T), y.T @ x.T)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shapes", [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)),
                                    ((3, 4), (4, 5))], ids=str)
@pytest.mark.parametrize("dtype", ["int64", "float32", "float64"])
def test_dot(shapes, dtype, mode):
    x = rand(shapes[0], dtype, seed=27)
    y = rand(shapes[1], dtype, seed=28)
    assert_close(run(mode, lambda a, b: cnp.dot(a, b), x, y), np.dot(x, y),
                 rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shapes", [((3, 4), (5, 2)), ((4,), (5,)), ((2, 3, 4), (3, 4, 5)),
                                    ((3, 4), (3,))], ids=str)
def test_matmul_shape_mismatch(shapes, mode):
    x = np.ones(shapes[0], np.float32)
    y = np.ones(shapes[1], np.float32)
    with pytest.raises(ValueError):
        run(mode, lambda a, b: cnp.matmul(a, b), x, y)


def test_matmul_operator_shape_mismatch_in_jit():
    with pytest.raises(ValueError):
        cjit.jit(lambda a, b: a @ b)(np.ones((3, 4)), np.ones((5, 2)))


@pytest.mark.parametrize("mode", MODES)
def test_matmul_of_scalar_raises(mode):
    with pytest.raises(ValueError):
        run(mode, lambda a, b: cnp.matmul(a, b), np.array(2.0), np.ones(3))


# ---------------------------------------------------------------------------
# indexing (inside jit; eagerly indexing an ndarray is NumPy's own)

INDEXES = [
    1, -1, slice(1, 3), slice(None, None, -1), (slice(None, None, 2), 1),
    (Ellipsis, None), None, (slice(None), 0, Ellipsis), (1, 2, 3), (-1, -2),
    slice(-2, None), (slice(None), slice(None, None, -2)), slice(5, 1, -1),
    slice(2, 100), slice(3, 1), (Ellipsis, 1), (None, 1, None, slice(None, 2)),
    (slice(1, None, 2), slice(None, None, -1), slice(None, None, 3)), (0, slice(0, 0)),
]


@pytest.mark.parametrize("dtype", ["bool", "int32", "float64"])
@pytest.mark.parametrize("idx", INDEXES, ids=repr)
def test_indexing(idx, dtype):
    x = rand((4, 5, 6), dtype, seed=31)
    got = cjit.jit(lambda a: a[idx])(x)
    assert_close(got, x[idx])


def test_indexing_T_and_noncontiguous_input():
    x = rand((4, 5), "float32", seed=32)
    assert_close(cjit.jit(lambda a: a.T)(x), x.T)
    for view in layouts(rand((6, 5), "float32", seed=33)).values():
        assert_close(cjit.jit(lambda a: a[1:, ::2])(view), view[1:, ::2])
        assert_close(cjit.jit(lambda a: a[::-1, -1])(view), view[::-1, -1])


def test_indexing_then_compute():
    x = rand((4, 5), "float64", seed=34)
    assert_close(cjit.jit(lambda a: a[1:3] * a[:2] + a[-1])(x), x[1:3] * x[:2] + x[-1])


@pytest.mark.parametrize("idx,near", [(4, 3), (-5, 0), ((0, 5), (0, 4)), ((slice(None), -6), (slice(None), 0))],
                         ids=repr)
def test_index_out_of_range_reads_the_nearest_element(idx, near):
    # decision 260: JAX's clamping, not NumPy's IndexError
    x = rand((4, 5), "float32", seed=35)
    np.testing.assert_array_equal(cjit.jit(lambda a: a[idx])(x), x[near])


def test_too_many_indices():
    with pytest.raises(IndexError):
        cjit.jit(lambda a: a[0, 0, 0])(np.zeros((4, 5), np.float32))


# ---------------------------------------------------------------------------
# shapes

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["bool", "int64", "float32"])
def test_reshape(dtype, mode):
    x = rand((2, 3, 4), dtype, seed=41)
    for shape in [(24,), (4, 6), (-1,), (2, -1), (-1, 3, 2), (1, 24, 1), (4, 3, 2)]:
        assert_close(run(mode, lambda a: cnp.reshape(a, shape), x), np.reshape(x, shape))
    x0 = np.array(5.0, dtype)
    assert_close(run(mode, lambda a: cnp.reshape(a, (1, 1)), x0), np.reshape(x0, (1, 1)))
    xz = np.zeros((0, 3), dtype)
    assert_close(run(mode, lambda a: cnp.reshape(a, (3, 0)), xz), np.reshape(xz, (3, 0)))


@pytest.mark.parametrize("mode", MODES)
def test_reshape_noncontiguous(mode):
    for view in layouts(rand((6, 4), "int32", seed=42)).values():
        assert_close(run(mode, lambda a: cnp.reshape(a, (-1,)), view), view.reshape(-1))


@pytest.mark.parametrize("mode", MODES)
def test_expand_dims_squeeze(mode):
    x = rand((2, 3), "float32", seed=43)
    for axis in [0, 1, 2, -1, -3, (0, 2), (0, -1)]:
        assert_close(run(mode, lambda a: cnp.expand_dims(a, axis), x), np.expand_dims(x, axis))
    y = rand((1, 3, 1, 2, 1), "int32", seed=44)
    for axis in [None, 0, 2, -1, (0, 4)]:
        assert_close(run(mode, lambda a: cnp.squeeze(a, axis), y), np.squeeze(y, axis))
    with pytest.raises(ValueError):
        run(mode, lambda a: cnp.squeeze(a, 1), y)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shapes", [((3,), (2, 3)), ((2, 1), (2, 4)), ((), (3, 2)),
                                    ((1, 1, 3), (2, 4, 3)), ((3,), (0, 3)), ((2, 3), (2, 3))],
                         ids=str)
def test_broadcast_to(shapes, mode):
    x = rand(shapes[0], "float64", seed=45)
    assert_close(run(mode, lambda a: cnp.broadcast_to(a, shapes[1]), x),
                 np.broadcast_to(x, shapes[1]))


@pytest.mark.parametrize("mode", MODES)
def test_broadcast_to_incompatible(mode):
    with pytest.raises(ValueError):
        run(mode, lambda a: cnp.broadcast_to(a, (2, 4)), np.ones(3))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dts", [("float32", "float32"), ("int32", "float32"),
                                 ("bool", "int64"), ("int32", "int64")], ids=str)
def test_concatenate(dts, mode):
    a = rand((2, 3), dts[0], seed=46)
    b = rand((4, 3), dts[1], seed=47)
    c = rand((2, 5), dts[1], seed=48)
    assert_close(run(mode, lambda p, q: cnp.concatenate([p, q]), a, b), np.concatenate([a, b]))
    assert_close(run(mode, lambda p, q: cnp.concatenate((p, q), axis=0), a, b),
                 np.concatenate((a, b), axis=0))
    assert_close(run(mode, lambda p, q: cnp.concatenate([p, q, p], axis=-1), a, c),
                 np.concatenate([a, c, a], axis=-1))
    assert_close(run(mode, lambda p: cnp.concatenate([p], axis=1), a), np.concatenate([a], 1))
    z = np.zeros((0, 3), dts[0])
    assert_close(run(mode, lambda p, q: cnp.concatenate([p, q]), z, b), np.concatenate([z, b]))


@pytest.mark.parametrize("mode", MODES)
def test_concatenate_shape_mismatch(mode):
    with pytest.raises(ValueError):
        run(mode, lambda p, q: cnp.concatenate([p, q], axis=0), np.ones((2, 3)), np.ones((2, 4)))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_stack(axis, mode):
    a = rand((2, 3), "float32", seed=49)
    b = rand((2, 3), "int32", seed=50)
    assert_close(run(mode, lambda p, q: cnp.stack([p, q, p], axis=axis), a, b),
                 np.stack([a, b, a], axis=axis))


@pytest.mark.parametrize("mode", MODES)
def test_stack_shape_mismatch(mode):
    with pytest.raises(ValueError):
        run(mode, lambda p, q: cnp.stack([p, q]), np.ones((2, 3)), np.ones((3, 2)))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("axes", [None, (0, 1, 2), (2, 0, 1), (1, 0, 2), (-1, 0, 1)], ids=str)
def test_transpose(axes, mode):
    x = rand((2, 3, 4), "int64", seed=51)
    assert_close(run(mode, lambda a: cnp.transpose(a, axes), x), np.transpose(x, axes))
    v = x[:, ::-1, ::2]
    assert_close(run(mode, lambda a: cnp.transpose(a, axes), v), np.transpose(v, axes))


@pytest.mark.parametrize("mode", MODES)
def test_transpose_bad_axes(mode):
    with pytest.raises(ValueError):
        run(mode, lambda a: cnp.transpose(a, (0, 0, 1)), np.ones((2, 3, 4)))


# ---------------------------------------------------------------------------
# creation

CREATION = [
    ("zeros", lambda m, x: m.zeros((2, 3))),
    ("zeros_i32", lambda m, x: m.zeros((2, 3), dtype=np.int32)),
    ("zeros_bool", lambda m, x: m.zeros(4, dtype=bool)),
    ("ones", lambda m, x: m.ones((3,))),
    ("ones_f32", lambda m, x: m.ones((2, 2), np.float32)),
    ("ones_i64", lambda m, x: m.ones((0, 2), dtype="int64")),
    ("full_int", lambda m, x: m.full((2, 3), 7)),
    ("full_float", lambda m, x: m.full((2,), 2.5)),
    ("full_bool", lambda m, x: m.full((2,), True)),
    ("full_f32", lambda m, x: m.full((2, 2), 1.5, dtype=np.float32)),
    ("full_0d", lambda m, x: m.full((), 3, dtype=np.int32)),
    ("zeros_like", lambda m, x: m.zeros_like(x)),
    ("zeros_like_dtype", lambda m, x: m.zeros_like(x, dtype=np.int64)),
    ("ones_like", lambda m, x: m.ones_like(x)),
    ("ones_like_bool", lambda m, x: m.ones_like(x, dtype=bool)),
    ("full_like", lambda m, x: m.full_like(x, 3)),
    ("full_like_float", lambda m, x: m.full_like(x, 2.75)),
    ("full_like_dtype", lambda m, x: m.full_like(x, 2.75, dtype=np.float64)),
    ("arange", lambda m, x: m.arange(5)),
    ("arange_start_stop_step", lambda m, x: m.arange(2, 11, 3)),
    ("arange_negative_step", lambda m, x: m.arange(10, 0, -2)),
    ("arange_float", lambda m, x: m.arange(0.0, 1.0, 0.25)),
    ("arange_dtype", lambda m, x: m.arange(6, dtype=np.float32)),
    ("arange_empty", lambda m, x: m.arange(3, 3)),
    ("asarray_list", lambda m, x: m.asarray([1, 2, 3])),
    ("asarray_nested_float", lambda m, x: m.asarray([[1.0, 2.0], [3.0, 4.0]])),
    ("asarray_scalar_dtype", lambda m, x: m.asarray(2.5, dtype=np.float32)),
    ("asarray_array", lambda m, x: m.asarray(x)),
    ("asarray_array_dtype", lambda m, x: m.asarray(x, dtype=np.float64)),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", [c[0] for c in CREATION])
def test_creation(name, mode):
    fn = dict(CREATION)[name]
    x = rand((2, 3), "int32", seed=61)
    want = fn(np, x)
    got = run(mode, lambda a: fn(cnp, a), x)
    assert_close(got, want)


def test_creation_combined_with_traced_values():
    x = rand((3, 4), "float32", seed=62)
    f = cjit.jit(lambda a: a + cnp.arange(4) * cnp.ones((3, 1), np.float32))
    assert_close(f(x), x + np.arange(4) * np.ones((3, 1), np.float32))
    g = cjit.jit(lambda a: cnp.full_like(a, 2.0) * a + cnp.zeros_like(a))
    assert_close(g(x), np.full_like(x, 2.0) * x + np.zeros_like(x))


# ---------------------------------------------------------------------------
# clip, where, astype

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
def test_clip(dtype, mode):
    x = rand((3, 4), dtype, seed=71)
    assert_close(run(mode, lambda a: cnp.clip(a, -2, 3), x), np.clip(x, -2, 3))
    lo = rand((4,), dtype, seed=72, low=-5, high=0)
    hi = rand((3, 1), dtype, seed=73, low=0, high=5)
    assert_close(run(mode, lambda a, l, h: cnp.clip(a, l, h), x, lo, hi), np.clip(x, lo, hi))
    if dtype in FLOAT_DTYPES:
        assert_close(run(mode, lambda a: cnp.clip(a, -0.5, 0.5), x), np.clip(x, -0.5, 0.5))
        xn = np.array([np.nan, -np.inf, np.inf, 0.0], dtype)
        assert_close(run(mode, lambda a: cnp.clip(a, -1, 1), xn), np.clip(xn, -1, 1))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dts", [("float32", "float32"), ("int32", "float32"),
                                 ("int64", "int32"), ("bool", "bool"), ("float64", "int64"),
                                 ("bool", "int32")], ids=str)
def test_where(dts, mode):
    c = rand((3, 4), "bool", seed=74)
    x = rand((3, 4), dts[0], seed=75)
    y = rand((4,), dts[1], seed=76)
    assert_close(run(mode, lambda k, a, b: cnp.where(k, a, b), c, x, y), np.where(c, x, y))
    assert_close(run(mode, lambda k, a, b: cnp.where(k, a, b), c[:, :1], y, x),
                 np.where(c[:, :1], y, x))


@pytest.mark.parametrize("mode", MODES)
def test_where_scalars_and_condition_from_compare(mode):
    x = rand((3, 4), "float32", seed=77)
    assert_close(run(mode, lambda a: cnp.where(a > 0, a, 0.0), x), np.where(x > 0, x, 0.0))
    assert_close(run(mode, lambda a: cnp.where(cnp.less(a, 0), -1, 1), x),
                 np.where(np.less(x, 0), -1, 1))
    assert_close(run(mode, lambda a: cnp.where(cnp.isnan(a), 0.0, a), x),
                 np.where(np.isnan(x), 0.0, x))
    i = rand((5,), "int32", seed=78)
    # a non-bool condition means "nonzero"
    assert_close(run(mode, lambda a: cnp.where(a, a, 100), i), np.where(i, i, 100))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("to", DTYPES)
@pytest.mark.parametrize("frm", DTYPES)
def test_astype(frm, to, mode):
    x = rand((3, 5), frm, seed=79)
    if np.dtype(frm).kind == "f":
        x = np.concatenate([x, np.array([[-2.7, -0.5, 0.0, 0.5, 2.7]], frm)])
    want = x.astype(to)
    assert_close(run(mode, lambda a: cnp.astype(a, to), x), want)
    if mode == "jit":
        assert_close(cjit.jit(lambda a: a.astype(np.dtype(to)))(x), want)


def test_astype_zero_size_and_0d():
    assert_close(cjit.jit(lambda a: a.astype(np.int32))(np.zeros((0, 3))),
                 np.zeros((0, 3), np.int32))
    assert_close(cjit.jit(lambda a: a.astype(bool))(np.array(0.25)), np.array(True))


# ---------------------------------------------------------------------------
# cjit.nn, against plain NumPy

def np_softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def np_log_softmax(x, axis=-1):
    s = x - np.max(x, axis=axis, keepdims=True)
    return s - np.log(np.sum(np.exp(s), axis=axis, keepdims=True))


def np_logsumexp(x, axis=None, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    r = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    if not keepdims:
        r = np.squeeze(r, axis=axis) if axis is not None else r.reshape(())
    return r.astype(x.dtype)


def np_gelu_tanh(x):
    c = np.sqrt(2.0 / np.pi).astype(x.dtype)
    return (0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x ** 3)))).astype(x.dtype)


def _nn_tol(dtype):
    return dict(rtol=2e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
def test_relu(dtype, mode):
    x = rand((3, 4), dtype, seed=81)
    assert_close(run(mode, lambda a: cjit.nn.relu(a), x), np.maximum(x, 0).astype(dtype))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_sigmoid(dtype, mode):
    x = np.concatenate([rand((20,), dtype, seed=82, low=-30, high=30),
                        np.array([-100.0, 0.0, 100.0, -np.inf, np.inf], dtype)])
    want = (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(dtype)
    assert_close(run(mode, lambda a: cjit.nn.sigmoid(a), x), want, **_nn_tol(dtype))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_log_softmax(axis, dtype, mode):
    x = rand((3, 5), dtype, seed=83, low=-10, high=10)
    tol = _nn_tol(dtype)
    assert_close(run(mode, lambda a: cjit.nn.softmax(a, axis=axis), x),
                 np_softmax(x, axis), **tol)
    assert_close(run(mode, lambda a: cjit.nn.log_softmax(a, axis=axis), x),
                 np_log_softmax(x, axis), **tol)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax_default_axis_and_large_values(dtype, mode):
    # numerically stable: no overflow for large inputs
    x = np.array([[1000.0, 1000.0, 990.0], [-1000.0, -1001.0, -1000.0]], dtype)
    tol = _nn_tol(dtype)
    assert_close(run(mode, lambda a: cjit.nn.softmax(a), x), np_softmax(x), **tol)
    assert_close(run(mode, lambda a: cjit.nn.log_softmax(a), x), np_log_softmax(x), **tol)
    assert_close(run(mode, lambda a: cjit.nn.logsumexp(a, axis=-1), x),
                 np_logsumexp(x, axis=-1), **tol)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("axis,keepdims", [(None, False), (-1, False), (0, True), (None, True),
                                           ((0, 1), False)], ids=str)
def test_logsumexp(axis, keepdims, dtype, mode):
    x = rand((3, 4), dtype, seed=84, low=-20, high=20)
    want = np_logsumexp(x, axis=axis, keepdims=keepdims)
    got = run(mode, lambda a: cjit.nn.logsumexp(a, axis=axis, keepdims=keepdims), x)
    assert_close(got, want, **_nn_tol(dtype))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_gelu(dtype, mode):
    # cjit.nn.gelu follows jax.nn.gelu, whose default is the tanh approximation.
    x = rand((4, 6), dtype, seed=85, low=-6, high=6)
    assert_close(run(mode, lambda a: cjit.nn.gelu(a), x), np_gelu_tanh(x),
                 rtol=2e-5, atol=2e-6)
    assert_close(run(mode, lambda a: cjit.nn.gelu(a, approximate=True), x), np_gelu_tanh(x),
                 rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ldtype", INT_DTYPES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "bool"])
def test_one_hot(dtype, ldtype, mode):
    labels = np.array([0, 2, 1, 2, 3], ldtype)
    want = (labels[:, None] == np.arange(4)).astype(dtype)
    assert_close(run(mode, lambda a: cjit.nn.one_hot(a, 4, dtype=dtype), labels), want)
    lab2 = np.array([[0, 1], [3, 2]], ldtype)
    want2 = (lab2[..., None] == np.arange(5)).astype(dtype)
    assert_close(run(mode, lambda a: cjit.nn.one_hot(a, 5, dtype=dtype), lab2), want2)


@pytest.mark.parametrize("mode", MODES)
def test_one_hot_default_dtype_and_out_of_range(mode):
    labels = np.array([1, -1, 7, 0], np.int64)
    got = run(mode, lambda a: cjit.nn.one_hot(a, 3), labels)
    want = (labels[:, None] == np.arange(3))
    assert isinstance(got, np.ndarray)
    assert got.dtype.kind == "f", got.dtype      # a float dtype, as in JAX
    assert np.array_equal(got, want.astype(got.dtype))   # out of range: a zero row


def test_nn_inside_bigger_function():
    x = rand((4, 8), "float32", seed=86)
    w = rand((8, 3), "float32", seed=87)

    def f(a, b):
        h = cjit.nn.relu(a @ b)
        return cjit.nn.log_softmax(h, axis=-1).sum(), cjit.nn.sigmoid(h)

    got_a, got_b = cjit.jit(f)(x, w)
    h = np.maximum(x @ w, 0)
    assert_close(got_a, np_log_softmax(h).sum(), rtol=1e-5, atol=1e-5)
    assert_close(got_b, (1 / (1 + np.exp(-h))).astype(np.float32), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------
# eager specifics

def test_eager_returns_cjit_array_not_tracer():
    x = rand((3,), "float64", seed=91)
    for out in (cnp.exp(x), cnp.add(x, x), cnp.sum(x), cnp.matmul(x, x), cjit.nn.relu(x),
                cnp.reshape(x, (3, 1)), cnp.zeros((2,))):
        assert type(out) is cjit.Array, type(out)


def test_eager_result_is_fresh():
    x = rand((3,), "float64", seed=92)
    out = cnp.reshape(x, (3,))
    assert not np.shares_memory(out, x) and not out.flags.writeable


def test_eager_python_scalars():
    assert_close(cnp.add(np.array([1, 2], np.int32), 1), np.array([2, 3], np.int32))
    got = cnp.exp(np.float32(1.0))
    assert_close(np.asarray(got), np.exp(np.float32(1.0)), rtol=4e-6)


# ---------------------------------------------------------------------------
# bitwise and shift ops, uint32, bit casts

INT_LIKE = ["bool", "int32", "int64", "uint32"]
_WIDTH = {"int32": 32, "int64": 64, "uint32": 32}


def _ints(dtype, n=40, seed=3):
    """Values of dtype spanning its range, both ends included."""
    r = np.random.default_rng(seed)
    if dtype == "bool":
        return r.random(n) < 0.5
    info = np.iinfo(dtype)
    v = r.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    v[:4] = [info.min, info.max, 0, 1]
    return v


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt_y", INT_LIKE)
@pytest.mark.parametrize("dt_x", INT_LIKE)
@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor"])
def test_bitwise_binary(name, dt_x, dt_y, mode):
    x, y = _ints(dt_x), _ints(dt_y, seed=4)
    want = getattr(np, name)(x, y)
    got = run(mode, getattr(cnp, name), x, y)
    assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", INT_LIKE)
def test_bitwise_invert(dtype, mode):
    x = _ints(dtype)
    got = run(mode, cnp.invert, x)
    assert got.dtype == x.dtype and np.array_equal(got, np.invert(x))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["int32", "int64", "uint32"])
@pytest.mark.parametrize("name", ["left_shift", "right_shift"])
def test_shifts_every_count(name, dtype, mode):
    # every count from 0 to past the width (and negative ones for signed
    # dtypes): counts out of range shift everything out, as NumPy's
    w = _WIDTH[dtype]
    x = _ints(dtype, n=8)
    lo = 0 if dtype == "uint32" else -3
    counts = np.arange(lo, w + 4).astype(dtype)
    xs, ns = np.repeat(x, counts.size), np.tile(counts, x.size)
    want = getattr(np, name)(xs, ns)
    got = run(mode, getattr(cnp, name), xs, ns)
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_bitwise_operators_on_traced_ints():
    u, i = _ints("uint32"), _ints("int32", seed=5)
    n = np.arange(u.size, dtype=np.uint32) % 35
    f = cjit.jit(lambda a, b, n: (a & b, a | 7, 7 ^ a, ~a, ~b, a << n, a >> n, b >> 3, b << 2, a >> 31))
    want = (u & i, u | 7, 7 ^ u, ~u, ~i, u << n, u >> n, i >> 3, i << 2, u >> 31)
    for k, (g, w) in enumerate(zip(f(u, i, n), want)):
        assert g.dtype == w.dtype and np.array_equal(g, w), k
    with pytest.raises(TypeError, match="integer and bool"):
        cjit.jit(lambda a: a & 1.5)(u)
    with pytest.raises(TypeError, match="integer and bool"):
        cjit.jit(lambda a: ~a)(np.ones(2))


@pytest.mark.parametrize("mode", MODES)
def test_uint32_arithmetic_compares_and_casts(mode):
    u = np.array([0, 1, 7, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 5, 2 ** 32 - 1, 123456789], np.uint32)
    v = u[::-1].copy()
    fns = [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b,
           lambda a, b: cnp.floor_divide(a, b), lambda a, b: a < b, lambda a, b: a >= b,
           lambda a, b: cnp.maximum(a, b), lambda a, b: cnp.minimum(a, b),
           lambda a, b: a.astype(np.float32), lambda a, b: a.astype(np.float64),
           lambda a, b: a.astype(np.int64), lambda a, b: a.astype(np.int32),
           lambda a, b: cnp.max(a), lambda a, b: cnp.min(a), lambda a, b: cnp.abs(a),
           lambda a, b: cnp.sign(a), lambda a, b: a + np.int32(1), lambda a, b: a + 1,
           lambda a, b: a * 2.5]
    with np.errstate(all="ignore"):
        for k, fn in enumerate(fns):
            want, got = fn(u, v), run(mode, fn, u, v)
            want = np.asarray(want)
            assert got.dtype == want.dtype and np.array_equal(got, want), k
    # sums accumulate in uint64, as NumPy's
    s = np.asarray(run(mode, cnp.sum, u))
    assert s.dtype == np.uint64 and s == u.sum()
    f = np.array([-1.0, 0.0, 5.7, 3e9, 4294967295.0])
    assert np.array_equal(run(mode, lambda a: a.astype(np.uint32), f), f.astype(np.uint32))


def test_uint32_python_int_out_of_bounds():
    u = np.ones(3, np.uint32)
    with pytest.raises(OverflowError, match="out of bounds for uint32"):
        cjit.jit(lambda a: a + (-1))(u)
    with pytest.raises(OverflowError, match="out of bounds for uint32"):
        cjit.jit(lambda a: a + 2 ** 32)(u)


def _bitcast(x, dtype):
    return x.trace.apply("bitcast", x, dtype=dtype)


@pytest.mark.parametrize("src,dst", [("float32", "uint32"), ("float32", "int32"), ("uint32", "float32"),
                                     ("int32", "float32"), ("float64", "int64"), ("int64", "float64"),
                                     ("int32", "uint32"), ("uint32", "int32")])
def test_bitcast_is_numpy_view(src, dst):
    if src.startswith("float"):
        x = np.array([0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 1e-40 if src == "float32" else 1e-310],
                     src)
    else:
        x = _ints(src, n=10)
        if dst.startswith("float"):
            x = x[~np.isnan(x.view(dst))]   # a nan's payload may be any: compare the others
    got = cjit.jit(lambda a: _bitcast(a, dst))(x)
    assert got.dtype == np.dtype(dst) and np.array_equal(got.view(src), x, equal_nan=True)


def test_bitcast_needs_equal_widths():
    for src, dst in [("float32", "int64"), ("float64", "uint32"), ("bool", "int32"), ("int32", "bool")]:
        with pytest.raises(TypeError, match="bitcast: needs a dtype of the operand's width"):
            cjit.jit(lambda a: _bitcast(a, dst))(np.ones(2, src))


def test_bitwise_ops_leave_float_gradients_alone():
    # the integer side path contributes nothing, and the float path's
    # gradient is unchanged (2 x)
    def f(x):
        bits = _bitcast(x, "uint32")
        noise = ((bits >> 9) & 1).astype(np.float32)
        return cnp.sum(x * x + noise)
    x = np.array([0.5, -1.25, 3.0], np.float32)
    assert np.array_equal(cjit.jit(cjit.grad(f))(x), 2 * x)
