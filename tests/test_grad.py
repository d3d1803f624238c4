"""Reverse-mode autodiff (SPEC section 1): cjit.grad, cjit.value_and_grad,
cjit.vjp and their compositions with cjit.jit.

Every differentiable function of cjit.numpy / cjit.nn and every Tracer
operator is checked against central finite differences in float64, on
random inputs kept away from kinks (|x| at 0, ties of max/min, clip
bounds), for several shapes.  A non-scalar result y = op(x) is reduced to
the scalar sum(y * w) with a fixed random w, so the whole vector-Jacobian
product is checked, not only its sum.  The finite differences evaluate the
same function compiled by cjit.jit (one compile, then cheap calls).
"""
import numpy as np
import pytest

import cjit
import cjit.nn
import cjit.numpy as cnp

from conftest import assert_close

EPS = 1e-6
RTOL, ATOL = 1e-6, 1e-7


def rnd(shape, seed=0, low=-2.0, high=2.0):
    return np.random.default_rng(seed).uniform(low, high, size=shape)


def away(x, kinks=(0.0,), margin=0.2):
    """x with every value closer than margin to a kink moved past it."""
    x = np.array(x, dtype=np.float64)
    for k in kinks:
        near = np.abs(x - k) < margin
        x = np.where(near, k + np.where(x >= k, margin, -margin) * 1.5, x)
    return x


def distinct(shape, seed=0, gap=0.05):
    """Values whose pairwise distances all exceed gap (no ties anywhere)."""
    n = int(np.prod(shape))
    v = np.arange(n) * (1.0 + gap) - n / 2.0
    return np.random.default_rng(seed).permutation(v).reshape(shape) / 4.0


def numeric_grad(f, args, argnum, eps=EPS):
    """Central differences of scalar f with respect to args[argnum]."""
    fj = cjit.jit(f)
    args = list(args)
    x = np.array(args[argnum], dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        args[argnum] = xp
        fp = float(fj(*args))
        args[argnum] = xm
        fm = float(fj(*args))
        g[i] = (fp - fm) / (2 * eps)
    return g


def projected(fn, args):
    """sum(fn(*args) * w) for a fixed random w of fn's output shape."""
    out = cjit.jit(fn).eval_shape(*args)  # traces, compiles nothing
    w = rnd(tuple(out.shape), seed=123, low=0.5, high=1.5)

    def loss(*a):
        return cnp.sum(fn(*a) * w)
    return loss


def check_grad(fn, *args, argnums=None, rtol=RTOL, atol=ATOL):
    """cjit's gradient of sum(fn(*args) * w) against finite differences,
    for each argument in argnums (default: every argument)."""
    args = [np.asarray(a, dtype=np.float64) for a in args]
    argnums = tuple(range(len(args))) if argnums is None else argnums
    loss = projected(fn, args)
    got = cjit.grad(loss, argnums=argnums)(*args)
    assert isinstance(got, tuple) and len(got) == len(argnums)
    for k, i in enumerate(argnums):
        want = numeric_grad(loss, args, i)
        assert_close(got[k], want, rtol=rtol, atol=atol)
    return got


# ---------------------------------------------------------------------------
# elementwise, one operand

SHAPES = [(), (5,), (2, 3, 2)]

UNARY = {
    # name: (function, domain of the random input)
    "negative": (cnp.negative, lambda x: x),
    "abs": (cnp.abs, away),
    "exp": (cnp.exp, lambda x: x),
    "expm1": (cnp.expm1, lambda x: x),
    "log": (cnp.log, lambda x: np.abs(x) + 0.3),
    "log1p": (cnp.log1p, lambda x: np.abs(x) - 0.7),
    "sqrt": (cnp.sqrt, lambda x: np.abs(x) + 0.3),
    "square": (cnp.square, lambda x: x),
    "reciprocal": (cnp.reciprocal, away),
    "tanh": (cnp.tanh, lambda x: x),
    "sin": (cnp.sin, lambda x: 2 * x),
    "cos": (cnp.cos, lambda x: 2 * x),
    "unary minus": (lambda x: -x, lambda x: x),
    "builtin abs": (lambda x: abs(x), away),
}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name, shape):
    fn, domain = UNARY[name]
    check_grad(fn, domain(rnd(shape, seed=len(name))))


def test_astype():
    """A float cast passes the cotangent through, cast back to the input's
    dtype; casts to int or bool cut the gradient."""
    x = rnd((3, 4), seed=2)
    w = rnd((3, 4), seed=3)
    g = cjit.grad(lambda a: cnp.sum(cnp.astype(a, "float32") * w.astype(np.float32)))(x)
    assert g.dtype == np.float64
    assert_close(g, w.astype(np.float32).astype(np.float64))
    # the cotangent goes through float32 on its way back, as in JAX
    g = cjit.grad(lambda a: cnp.sum(a.astype("float32").astype("float64") * w))(x)
    assert_close(g, w.astype(np.float32).astype(np.float64))
    g = cjit.grad(lambda a: cnp.sum(cnp.astype(a, "float64") ** 2))(x.astype(np.float32))
    assert g.dtype == np.float32
    assert_close(g, 2 * x.astype(np.float32), rtol=1e-6)
    g = cjit.grad(lambda a: cnp.sum(a.astype("int32") * a + a.astype(bool) * 1.0))(x + 0.5)
    assert_close(g, np.trunc(x + 0.5))


@pytest.mark.parametrize("name", ["exp", "log", "tanh", "sin", "square", "reciprocal"])
def test_unary_closed_form(name):
    """The rules themselves, exactly: derivative of sum(f(x))."""
    x = np.abs(rnd((7,), seed=3)) + 0.5
    want = {"exp": np.exp(x), "log": 1 / x, "tanh": 1 - np.tanh(x) ** 2, "sin": np.cos(x),
            "square": 2 * x, "reciprocal": -1 / x ** 2}[name]
    got = cjit.grad(lambda a: cnp.sum(getattr(cnp, name)(a)))(x)
    assert_close(got, want, rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------------------
# elementwise, two operands, with broadcasting

BROADCAST_SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((4,), (3, 4)), ((2, 1, 4), (3, 1)),
                    ((3, 4), ()), ((1, 4), (3, 1))]

BINARY = {
    "add": (cnp.add, None),
    "subtract": (cnp.subtract, None),
    "multiply": (cnp.multiply, None),
    "divide": (cnp.divide, "nonzero y"),
    "power": (cnp.power, "positive x"),
    "maximum": (cnp.maximum, "distinct"),
    "minimum": (cnp.minimum, "distinct"),
}
OPERATORS = {
    "+": (lambda a, b: a + b, None),
    "-": (lambda a, b: a - b, None),
    "*": (lambda a, b: a * b, None),
    "/": (lambda a, b: a / b, "nonzero y"),
    "**": (lambda a, b: a ** b, "positive x"),
}


def _binary_inputs(domain, sx, sy):
    x, y = rnd(sx, seed=1), rnd(sy, seed=2)
    if domain == "nonzero y":
        y = away(y, margin=0.4)
    elif domain == "positive x":
        x = np.abs(x) + 0.3
    elif domain == "distinct":
        y = y + 0.1 * np.sign(y - 0.05)  # move y off x's values
        x = x + 0.3 * np.round(np.sin(13 * x))  # and scatter x
    return x, y


def _binary_cases():
    cases = [(name, sx, sy) for name in BINARY for sx, sy in BROADCAST_SHAPES]
    cases += [(name, sx, sy) for name in OPERATORS for sx, sy in BROADCAST_SHAPES[1:4:2]]
    return cases


@pytest.mark.parametrize("name,sx,sy", _binary_cases(), ids=str)
def test_binary(name, sx, sy):
    fn, domain = {**BINARY, **OPERATORS}[name]
    x, y = _binary_inputs(domain, sx, sy)
    if domain == "distinct":
        xb, yb = np.broadcast_arrays(x, y)
        assert np.min(np.abs(xb - yb)) > 1e-3, "inputs too close to a tie"
    check_grad(fn, x, y)


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "**", "r+", "r-", "r*", "r/", "r**"])
def test_python_scalar_operand(op):
    """A Python scalar on either side: only the array gets a gradient."""
    x = np.abs(rnd((3, 4), seed=4)) + 0.5
    fns = {"+": lambda a: a + 1.5, "-": lambda a: a - 1.5, "*": lambda a: a * 1.5,
           "/": lambda a: a / 1.5, "**": lambda a: a ** 2.5, "r+": lambda a: 1.5 + a,
           "r-": lambda a: 1.5 - a, "r*": lambda a: 1.5 * a, "r/": lambda a: 1.5 / a,
           "r**": lambda a: 1.5 ** a}
    check_grad(fns[op], x)


def test_integer_power():
    x = rnd((2, 3), seed=5)
    check_grad(lambda a: a ** 3 + cnp.power(a, 2), x)


def test_power_edge_values():
    """Regression: d/dx x**0 is 0, also at x = 0 (as JAX; it was 0 * inf =
    nan); d/dy x**y is taken as 0 where x <= 0."""
    g = cjit.grad(lambda a: cnp.sum(a ** 0.0))(np.array([0.0, 2.0, -1.5]))
    assert_close(g, np.zeros(3))
    gx, gy = cjit.grad(lambda a, b: cnp.sum(a ** b), argnums=(0, 1))(
        np.array([0.0, 2.0, 3.0, 0.0]), np.array([0.0, 0.0, 2.0, 2.0]))
    assert_close(gx, np.array([0.0, 0.0, 6.0, 0.0]))
    assert_close(gy, np.array([0.0, np.log(2.0), 9 * np.log(3.0), 0.0]), rtol=1e-12)
    assert_close(cjit.grad(lambda a: cnp.sum(a ** 2))(np.array([0.0, -1.0])), np.array([0.0, -2.0]))


def test_square_and_multiply_self():
    """x * x uses x twice: both uses contribute."""
    x = rnd((4,), seed=6)
    got = cjit.grad(lambda a: cnp.sum(a * a * a))(x)
    assert_close(got, 3 * x ** 2, rtol=1e-12)


def test_where():
    x, y = rnd((3, 4), seed=7), rnd((4,), seed=8)
    check_grad(lambda a, b: cnp.where(a > 0.3, a * 2.0, b), x, y)
    check_grad(lambda a, b: cnp.where(b > 0, cnp.exp(a), -a), x, y)


@pytest.mark.parametrize("bounds", [(-1.0, 1.0), (None, 0.5), (-0.5, None)])
def test_clip(bounds):
    lo, hi = bounds
    kinks = tuple(b for b in bounds if b is not None)
    x = away(rnd((3, 5), seed=9), kinks=kinks, margin=0.1)
    check_grad(lambda a: cnp.clip(a, lo, hi), x)


def test_clip_array_bounds():
    x = rnd((3, 4), seed=10)
    lo = np.full((4,), -0.5) + 0.05
    hi = np.full((3, 1), 0.7) + 0.05
    x = away(away(x, kinks=(-0.45,), margin=0.05), kinks=(0.75,), margin=0.05)
    check_grad(lambda a, b, c: cnp.clip(a, b, c), x, lo, hi)


# ---------------------------------------------------------------------------
# piecewise constant functions: zero gradient

ZERO_GRAD = {
    "comparisons": lambda x: ((x > 0).astype("float64") + (x <= 0.5) + (x == x) + (x != 1.0) +
                              cnp.less(x, 0.2) + cnp.greater_equal(x, -1.0)) * 1.0,
    "argmax": lambda x: cnp.argmax(x, axis=-1).astype("float64") + cnp.argmin(x).astype(x.dtype),
    "floor": lambda x: cnp.floor(x),
    "ceil": lambda x: cnp.ceil(x),
    "sign": lambda x: cnp.sign(x),
    "floor_divide": lambda x: x // 0.7,
    "one_hot of argmax": lambda x: cjit.nn.one_hot(cnp.argmax(x, axis=1), 4),
}


@pytest.mark.parametrize("name", list(ZERO_GRAD))
def test_zero_gradient(name):
    x = away(rnd((3, 4), seed=11), kinks=(-1.0, 0.0, 1.0, 2.0, -2.0), margin=0.1)
    fn = ZERO_GRAD[name]
    g = cjit.grad(lambda a: cnp.sum(fn(a)) * 1.0)(x)
    assert_close(g, np.zeros_like(x))
    # and combined with a differentiable path, only that path counts
    g = cjit.grad(lambda a: cnp.sum(fn(a)) + 2.0 * cnp.sum(a))(x)
    assert_close(g, np.full_like(x, 2.0))


# ---------------------------------------------------------------------------
# reductions

REDUCTIONS = {
    "sum": cnp.sum, "mean": cnp.mean, "max": cnp.max, "min": cnp.min, "prod": cnp.prod,
    "var": cnp.var,
}
AXES = [None, 1, -1, (0, 2), (0, 1, 2)]


# every axis over all keepdims, but axis=(0, 1, 2) only kept (it is axis=None)
REDUCTION_CASES = [(name, axis, keep) for name in REDUCTIONS for axis in AXES
                   for keep in (False, True) if keep or axis != (0, 1, 2)]


@pytest.mark.parametrize("name,axis,keepdims", REDUCTION_CASES, ids=str)
def test_reduction(name, axis, keepdims):
    fn = REDUCTIONS[name]
    if name in ("max", "min"):
        x = distinct((2, 3, 4), seed=12)
    elif name == "prod":
        x = away(rnd((2, 3, 4), seed=12, low=-1.3, high=1.3), margin=0.5)
    else:
        x = rnd((2, 3, 4), seed=12)
    check_grad(lambda a: fn(a, axis=axis, keepdims=keepdims), x)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod"])
def test_reduction_methods(name):
    x = distinct((3, 4), seed=13) + 3.0
    if name == "prod":
        x = x / 4.0
    check_grad(lambda a: getattr(a, name)(axis=0), x)
    check_grad(lambda a: getattr(a, name)(), x)


@pytest.mark.parametrize("ddof", [0, 1])
def test_var_ddof(ddof):
    check_grad(lambda a: cnp.var(a, axis=1, ddof=ddof), rnd((3, 5), seed=14))


def test_reduction_of_scalar_and_vector():
    check_grad(lambda a: cnp.sum(a) * cnp.max(a), rnd((), seed=15))
    check_grad(lambda a: cnp.prod(a) + cnp.min(a) + cnp.mean(a), rnd((6,), seed=16) + 3.0)


def test_max_ties_are_shared_equally():
    """As JAX: a reduction's gradient is split evenly among the tied
    elements, and maximum(x, x) gives half to each operand."""
    x = np.array([1.0, 3.0, 3.0, 2.0, 3.0])
    assert_close(cjit.grad(lambda a: cnp.max(a))(x), np.array([0, 1, 1, 0, 1]) / 3.0)
    x = np.array([[2.0, -1.0, -1.0], [0.0, 5.0, 0.0]])
    assert_close(cjit.grad(lambda a: cnp.sum(cnp.min(a, axis=1)))(x),
                 np.array([[0, 0.5, 0.5], [0.5, 0, 0.5]]))
    assert_close(cjit.grad(lambda a: cnp.sum(cnp.max(a, axis=0) * np.array([1.0, 2.0, 4.0])))(x),
                 np.array([[1.0, 0, 0], [0, 2.0, 4.0]]))
    x3 = np.array([[[4.0, 4.0], [4.0, 1.0]], [[0.0, 2.0], [-1.0, 2.0]]])
    assert_close(cjit.grad(lambda a: cnp.sum(cnp.max(a, axis=(1, 2))))(x3),
                 np.array([[[1, 1], [1, 0]], [[0, 0.5], [0, 0.5]]]) / np.array([3.0, 1.0])[:, None, None])
    # the elementwise tie: half to each side
    g = cjit.grad(lambda a, b: cnp.sum(cnp.maximum(a, b)), argnums=(0, 1))(x, x.copy())
    assert_close(g[0], np.full_like(x, 0.5))
    assert_close(g[1], np.full_like(x, 0.5))
    g = cjit.grad(lambda a, b: cnp.sum(cnp.minimum(a, b)), argnums=(0, 1))(x, np.ones_like(x) * -1.0)
    assert_close(g[0], (x < -1.0) + 0.5 * (x == -1.0))
    assert_close(g[1], (x > -1.0) + 0.5 * (x == -1.0))
    # maximum(x, x) with one value: 0.5 + 0.5
    assert_close(cjit.grad(lambda a: cnp.sum(cnp.maximum(a, a)))(x), np.ones_like(x))
    # and the tie at a kink, maximum(x, 0) at 0, is the same rule
    assert_close(cjit.grad(lambda a: cnp.sum(cnp.maximum(a, 0.0)))(np.array([-1.0, 0.0, 1.0])),
                 np.array([0.0, 0.5, 1.0]))


def test_relu_and_sigmoid_at_zero():
    """Regression: relu'(0) is 0 as in JAX (it is not maximum's tie rule),
    and sigmoid'(0) is 1/4 (the stable form once went through abs, whose
    slope at 0 is 0, and gave 0)."""
    x = np.array([-1.0, 0.0, 2.0])
    assert_close(cjit.grad(lambda a: cnp.sum(cjit.nn.relu(a)))(x), np.array([0.0, 0.0, 1.0]))
    s = 1 / (1 + np.exp(-x))
    assert_close(cjit.grad(lambda a: cnp.sum(cjit.nn.sigmoid(a)))(x), s * (1 - s), rtol=1e-14)
    assert_close(cjit.grad(lambda a: cnp.sum(cjit.nn.sigmoid(a)))(x.astype(np.float32)),
                 (s * (1 - s)).astype(np.float32))
    r = cjit.nn.relu(np.array([np.nan, -0.0, -np.inf, np.inf, -3.0]))
    assert_close(r, np.array([np.nan, 0.0, 0.0, np.inf, 0.0]))
    assert_close(cjit.nn.relu(np.array([-2, 0, 3], np.int32)), np.array([0, 0, 3], np.int32))


def test_prod_with_zeros():
    """Regression: the product's gradient is the product of the other
    elements, also where an element is zero (as JAX); it was the quotient
    out / x, nan at zeros."""
    x = np.array([[2.0, 0.0, 3.0], [0.0, 4.0, 0.0], [1.0, 2.0, 5.0]])
    g = cjit.grad(lambda a: cnp.sum(cnp.prod(a, axis=1)))(x)
    assert_close(g, np.array([[0.0, 6.0, 0.0], [0.0, 0.0, 0.0], [10.0, 5.0, 2.0]]))
    g = cjit.grad(lambda a: cnp.prod(a))(np.array([0.0, 2.0, -3.0]))
    assert_close(g, np.array([-6.0, 0.0, 0.0]))
    # second derivative of x*y*z: d2/dx dy = z
    h = cjit.grad(lambda a: cjit.grad(lambda b: cnp.prod(b))(a)[0])(np.array([0.0, 2.0, -3.0]))
    assert_close(h, np.array([0.0, -3.0, 2.0]))


# ---------------------------------------------------------------------------
# matmul and dot

MATMUL_SHAPES = [
    ((4,), (4,)),
    ((3, 4), (4,)),
    ((4,), (4, 2)),
    ((3, 4), (4, 2)),
    ((2, 3, 4), (4, 2)),
    ((4,), (2, 4, 3)),
    ((2, 3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (3, 4, 2)),
    ((1, 3, 4), (2, 1, 4, 2)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=str)
def test_matmul(sa, sb):
    a, b = rnd(sa, seed=17), rnd(sb, seed=18)
    check_grad(cnp.matmul, a, b)
    check_grad(lambda x, y: x @ y, a, b)


@pytest.mark.parametrize("sa,sb", [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 2)), ((3, 4), (4, 2))],
                         ids=str)
def test_dot(sa, sb):
    check_grad(cnp.dot, rnd(sa, seed=19), rnd(sb, seed=20))


def test_matmul_same_operand_and_transpose():
    a = rnd((3, 3), seed=21)
    check_grad(lambda x: x @ x.T @ x, a)


# ---------------------------------------------------------------------------
# indexing and slicing

INDEXES = {
    "int": lambda x: x[1],
    "negative int": lambda x: x[-1],
    "slice": lambda x: x[1:3],
    "negative slice": lambda x: x[-3:-1],
    "reverse": lambda x: x[::-1],
    "step 2": lambda x: x[::2],
    "step 3 offset": lambda x: x[1::3],
    "negative step 2": lambda x: x[-1:0:-2],
    "negative step 3": lambda x: x[::-3],
    "2-D mixed": lambda x: x[1:, ::-2],
    "int and slice": lambda x: x[:, 2],
    "None": lambda x: x[None],
    "Ellipsis None": lambda x: x[..., None],
    "Ellipsis int": lambda x: x[..., -2],
    "None between": lambda x: x[:, None, 1:],
    "empty slice": lambda x: x[2:2],
    "scalar element": lambda x: x[1, -1],
    ".T": lambda x: x.T,
    "two uses": lambda x: x[0] * x[-1] + x[1:2].sum(),
}


@pytest.mark.parametrize("name", list(INDEXES))
def test_indexing(name):
    check_grad(INDEXES[name], rnd((6, 5), seed=22))


def test_strided_slice_at_max_rank():
    """Regression: the gradient of a strided slice of a rank-16 value (the
    most cjit allows) needs no rank 17 on the way."""
    x = rnd((1, 2, 1, 1, 2, 1, 2, 1, 1, 1, 2, 1, 1, 1, 1, 7), seed=60)
    check_grad(lambda a: a[..., ::3], x)
    check_grad(lambda a: a[:, ::-2, ..., 1::-1, ::-2], x)


@pytest.mark.parametrize("key", ["rev3", "strided3", "ellipsis3"])
def test_indexing_3d(key):
    fn = {"rev3": lambda x: x[::-1, 1, ::-2], "strided3": lambda x: x[:, ::2, 1::2],
          "ellipsis3": lambda x: x[1, ..., None, ::-1]}[key]
    check_grad(fn, rnd((3, 4, 5), seed=23))


# ---------------------------------------------------------------------------
# shapes

SHAPE_OPS = {
    "reshape": lambda x: cnp.reshape(x, (4, 6)),
    "reshape -1": lambda x: x.reshape(-1),
    "reshape method": lambda x: x.reshape(3, 2, 4),
    "transpose": lambda x: cnp.transpose(x),
    "transpose axes": lambda x: cnp.transpose(x, (1, 2, 0)),
    "transpose method": lambda x: x.transpose(2, 0, 1),
    "expand_dims": lambda x: cnp.expand_dims(x, 1),
    "expand_dims negative": lambda x: cnp.expand_dims(x, -1),
    "squeeze": lambda x: cnp.squeeze(x[:, :1]),
    "squeeze axis": lambda x: cnp.squeeze(x[:1], axis=0),
    "broadcast_to": lambda x: cnp.broadcast_to(x, (2, 2, 3, 4)),
    "broadcast_to inner": lambda x: cnp.broadcast_to(x[:, :1], (2, 5, 4)),
    "concatenate": lambda x: cnp.concatenate([x, 2 * x, x[:, :1]], axis=1),
    "concatenate axis 0": lambda x: cnp.concatenate([x[1:], x], axis=0),
    "concatenate axis -1": lambda x: cnp.concatenate([x, cnp.exp(x)], axis=-1),
    "stack": lambda x: cnp.stack([x, x * x]),
    "stack axis": lambda x: cnp.stack([x[0], x[1], x[0]], axis=-1),
    "ravel then reshape": lambda x: cnp.reshape(x.T, (6, 4)) * 2.0,
}


@pytest.mark.parametrize("name", list(SHAPE_OPS))
def test_shape_op(name):
    check_grad(SHAPE_OPS[name], rnd((2, 3, 4), seed=24))


def test_concatenate_two_arguments():
    check_grad(lambda a, b: cnp.concatenate([a, b, a], axis=0), rnd((2, 3), seed=25),
               rnd((1, 3), seed=26))
    check_grad(lambda a, b: cnp.stack([a, b], axis=1), rnd((2, 3), seed=25), rnd((2, 3), seed=26))


# ---------------------------------------------------------------------------
# cjit.nn

NN = {
    "softmax": lambda x: cjit.nn.softmax(x),
    "softmax axis 0": lambda x: cjit.nn.softmax(x, axis=0),
    "softmax axes": lambda x: cjit.nn.softmax(x, axis=(0, 1)),
    "log_softmax": lambda x: cjit.nn.log_softmax(x),
    "log_softmax axis 1": lambda x: cjit.nn.log_softmax(x, axis=1),
    "logsumexp": lambda x: cjit.nn.logsumexp(x),
    "logsumexp axis": lambda x: cjit.nn.logsumexp(x, axis=-1),
    "logsumexp keepdims": lambda x: cjit.nn.logsumexp(x, axis=(0, 2), keepdims=True),
    "relu": lambda x: cjit.nn.relu(x),
    "sigmoid": lambda x: cjit.nn.sigmoid(x),
    "gelu": lambda x: cjit.nn.gelu(x),
}


NN_MIN_RANK = {"logsumexp keepdims": 3, "softmax axes": 2, "log_softmax axis 1": 2}
NN_CASES = [(name, shape) for name in NN for shape in [(5,), (3, 4), (2, 3, 4)]
            if len(shape) >= NN_MIN_RANK.get(name, 1)]


@pytest.mark.parametrize("name,shape", NN_CASES, ids=str)
def test_nn(name, shape):
    x = away(rnd(shape, seed=27, low=-4, high=4)) if name == "relu" else rnd(shape, seed=27, low=-4, high=4)
    check_grad(NN[name], x)


def test_softmax_cross_entropy_closed_form():
    """d/dlogits of the mean cross-entropy is (softmax - onehot) / n."""
    logits = rnd((5, 4), seed=28, low=-3, high=3)
    labels = np.array([0, 3, 1, 1, 2])

    def loss(z, y):
        return -cnp.mean(cnp.sum(cjit.nn.log_softmax(z) * cjit.nn.one_hot(y, 4), axis=1))
    got = cjit.grad(loss)(logits, labels)
    e = np.exp(logits - logits.max(1, keepdims=True))
    p = e / e.sum(1, keepdims=True)
    assert_close(got, (p - np.eye(4)[labels]) / 5, rtol=1e-12, atol=1e-14)


def test_softmax_large_logits():
    """The stable forms keep gradients finite for large inputs."""
    x = np.array([[1000.0, 0.0, -1000.0], [3.0, 3.0, 3.0]])
    g = cjit.grad(lambda a: cnp.sum(cjit.nn.logsumexp(a, axis=1)))(x)
    assert_close(g, np.array([[1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3]]), rtol=1e-12)
    g = cjit.grad(lambda a: cnp.sum(cjit.nn.sigmoid(a)))(np.array([-800.0, 0.0, 800.0]))
    assert_close(g, np.array([0.0, 0.25, 0.0]))


# ---------------------------------------------------------------------------
# a composite function: every kind of op at once

def mlp_loss(params, x, y):
    h = cnp.tanh(x @ params["w1"] + params["b1"])
    z = h @ params["w2"] + params["b2"]
    return -cnp.mean(cnp.sum(cjit.nn.log_softmax(z) * cjit.nn.one_hot(y, 3), axis=1))


def mlp_params(seed=0, dtype=np.float64):
    r = np.random.default_rng(seed)
    return {"w1": r.normal(size=(4, 5)).astype(dtype), "b1": r.normal(size=(5,)).astype(dtype),
            "w2": r.normal(size=(5, 3)).astype(dtype), "b2": r.normal(size=(3,)).astype(dtype)}


MLP_X = rnd((6, 4), seed=30)
MLP_Y = np.array([0, 1, 2, 2, 1, 0])


def numeric_tree_grad(f, params, *rest):
    out = {}
    for k in params:
        def fk(p, *r, k=k):
            return f({**params, k: p}, *r)
        out[k] = numeric_grad(fk, [params[k], *rest], 0)
    return out


def test_mlp_dict_params():
    params = mlp_params()
    got = cjit.grad(mlp_loss)(params, MLP_X, MLP_Y)
    assert isinstance(got, dict) and sorted(got) == ["b1", "b2", "w1", "w2"]
    want = numeric_tree_grad(mlp_loss, params, MLP_X, MLP_Y)
    for k in params:
        assert_close(got[k], want[k], rtol=RTOL, atol=ATOL)


def deep_mlp_loss(params, x, y):
    for layer in params[:-1]:
        x = cnp.tanh(x @ layer["w"] + layer["b"])
    z = x @ params[-1]["w"] + params[-1]["b"]
    nll = -cnp.mean(cnp.sum(cjit.nn.log_softmax(z) * cjit.nn.one_hot(y, z.shape[1]), axis=1))
    return nll + 1e-3 * sum(cnp.sum(layer["w"] * layer["w"]) for layer in params)


def deep_mlp_grad_numpy(params, x, y):
    """The same gradient by hand, in NumPy."""
    hs = [x]
    for layer in params[:-1]:
        hs.append(np.tanh(hs[-1] @ layer["w"] + layer["b"]))
    z = hs[-1] @ params[-1]["w"] + params[-1]["b"]
    e = np.exp(z - z.max(1, keepdims=True))
    dz = (e / e.sum(1, keepdims=True) - np.eye(z.shape[1])[y]) / len(x)
    grads = [None] * len(params)
    for i in range(len(params) - 1, -1, -1):
        grads[i] = {"w": hs[i].T @ dz + 2e-3 * params[i]["w"], "b": dz.sum(0)}
        if i:
            dz = (dz @ params[i]["w"].T) * (1 - hs[i] ** 2)
    return grads


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_deep_mlp_against_numpy(dtype):
    """A training-size gradient (64 -> 128 -> 128 -> 10, batch 64, list of
    dicts), where fusion and the memory plan have real work to do; the
    gradient was once wrong there while the unfused one was right."""
    r = np.random.default_rng(61)
    sizes = (64, 128, 128, 10)
    params = [{"w": r.uniform(-0.2, 0.2, (a, b)), "b": r.normal(size=b) * 0.1}
              for a, b in zip(sizes[:-1], sizes[1:])]
    x, y = r.uniform(0, 1, (64, 64)), r.integers(0, 10, 64)
    want = deep_mlp_grad_numpy(params, x, y)
    p = [{k: v.astype(dtype) for k, v in layer.items()} for layer in params]
    got = cjit.jit(cjit.grad(deep_mlp_loss))(p, x.astype(dtype), y)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == "float64" else dict(rtol=1e-3, atol=2e-5)
    for g, w in zip(got, want):
        for k in ("w", "b"):
            assert g[k].dtype == np.dtype(dtype)
            assert_close(g[k].astype(np.float64), w[k], **tol)


# ---------------------------------------------------------------------------
# grad, value_and_grad: arguments and results

def f3(x, y, z):
    return cnp.sum(cnp.sin(x) * y) + cnp.sum(z * z * y)


X3, Y3, Z3 = rnd((3,), seed=31), rnd((3,), seed=32), rnd((3,), seed=33)


def test_argnums_int():
    assert_close(cjit.grad(f3)(X3, Y3, Z3), np.cos(X3) * Y3, rtol=1e-12)
    assert_close(cjit.grad(f3, argnums=1)(X3, Y3, Z3), np.sin(X3) + Z3 * Z3, rtol=1e-12)
    assert_close(cjit.grad(f3, argnums=-1)(X3, Y3, Z3), 2 * Z3 * Y3, rtol=1e-12)


def test_argnums_tuple():
    g = cjit.grad(f3, argnums=(0, 2))(X3, Y3, Z3)
    assert isinstance(g, tuple) and len(g) == 2
    assert_close(g[0], np.cos(X3) * Y3, rtol=1e-12)
    assert_close(g[1], 2 * Z3 * Y3, rtol=1e-12)
    g = cjit.grad(f3, argnums=(1,))(X3, Y3, Z3)
    assert isinstance(g, tuple) and len(g) == 1
    assert_close(g[0], np.sin(X3) + Z3 * Z3, rtol=1e-12)


def test_has_aux():
    def f(x):
        y = cnp.exp(x)
        return cnp.sum(y), {"y": y, "n": cnp.max(x)}
    x = rnd((4,), seed=34)
    g, aux = cjit.grad(f, has_aux=True)(x)
    assert_close(g, np.exp(x), rtol=1e-12)
    assert_close(aux["y"], np.exp(x), rtol=1e-12)
    assert_close(aux["n"], np.max(x))
    (v, aux), g = cjit.value_and_grad(f, has_aux=True)(x)
    assert_close(v, np.sum(np.exp(x)), rtol=1e-12)
    assert_close(g, np.exp(x), rtol=1e-12)
    assert_close(aux["y"], np.exp(x), rtol=1e-12)


def test_nested_pytree_params():
    params = {"layers": [{"w": rnd((2, 2), seed=35), "b": rnd((2,), seed=36)},
                         {"w": rnd((2, 1), seed=37), "b": rnd((1,), seed=38)}],
              "scale": (rnd((), seed=39), 2.0)}

    def f(p, x):
        for layer in p["layers"]:
            x = cnp.tanh(x @ layer["w"] + layer["b"])
        return cnp.sum(x) * p["scale"][0] * p["scale"][1]
    x = rnd((3, 2), seed=40)
    g = cjit.grad(f)(params, x)
    assert isinstance(g["layers"], list) and isinstance(g["scale"], tuple)
    assert g["layers"][0]["w"].shape == (2, 2) and g["scale"][0].shape == ()

    # finite differences over each leaf, through a flat view of the tree
    leaves = [params["layers"][0]["w"], params["layers"][0]["b"], params["layers"][1]["w"],
              params["layers"][1]["b"], params["scale"][0], np.float64(params["scale"][1])]
    got = [g["layers"][0]["w"], g["layers"][0]["b"], g["layers"][1]["w"], g["layers"][1]["b"],
           g["scale"][0], g["scale"][1]]

    def flat(*ls):
        p = {"layers": [{"w": ls[0], "b": ls[1]}, {"w": ls[2], "b": ls[3]}], "scale": (ls[4], ls[5])}
        return f(p, x)
    for i, leaf in enumerate(leaves):
        assert_close(np.asarray(got[i]), numeric_grad(flat, leaves, i), rtol=RTOL, atol=ATOL)


def test_python_scalar_arguments():
    def f(a, b):
        return a * a * b + cnp.sin(b)
    g = cjit.grad(f, argnums=(0, 1))(1.5, 0.5)
    assert_close(np.asarray(g[0]), np.asarray(2 * 1.5 * 0.5), rtol=1e-12)
    assert_close(np.asarray(g[1]), np.asarray(1.5 ** 2 + np.cos(0.5)), rtol=1e-12)
    # a Python scalar that is not differentiated is a constant
    g = cjit.grad(lambda x, s: cnp.sum(x * s))(np.ones(3), 2.5)
    assert_close(g, np.full(3, 2.5))
    # a function of a scalar returning a Python-built expression
    assert float(cjit.grad(lambda a: a ** 3)(2.0)) == pytest.approx(12.0)


def test_keyword_arguments_are_not_differentiated():
    def f(x, scale=1.0, *, shift):
        return cnp.sum((x * scale + shift) ** 2)
    x = rnd((3,), seed=59)
    g = cjit.grad(f)(x, 2.0, shift=np.full(3, 0.5))
    assert_close(g, 4.0 * (2.0 * x + 0.5), rtol=1e-12)
    v, g = cjit.value_and_grad(f)(x, scale=3.0, shift=1.0)
    assert_close(np.asarray(v), np.asarray(np.sum((3 * x + 1) ** 2)), rtol=1e-12)
    assert_close(g, 6.0 * (3.0 * x + 1.0), rtol=1e-12)


def test_value_and_grad():
    params = mlp_params(1)
    v, g = cjit.value_and_grad(mlp_loss)(params, MLP_X, MLP_Y)
    assert_close(np.asarray(v), np.asarray(cjit.jit(mlp_loss)(params, MLP_X, MLP_Y)), rtol=1e-12)
    g2 = cjit.grad(mlp_loss)(params, MLP_X, MLP_Y)
    for k in params:
        assert_close(g[k], g2[k], rtol=1e-12, atol=1e-15)
    v, (gx, gy) = cjit.value_and_grad(f3, argnums=(0, 1))(X3, Y3, Z3)
    assert_close(gx, np.cos(X3) * Y3, rtol=1e-12)
    assert_close(gy, np.sin(X3) + Z3 * Z3, rtol=1e-12)


def test_gradient_of_unused_argument_is_zero():
    g = cjit.grad(lambda x, y: cnp.sum(x * 2.0), argnums=(0, 1))(np.ones(3), np.ones((2, 2)))
    assert_close(g[0], np.full(3, 2.0))
    assert_close(g[1], np.zeros((2, 2)))
    g = cjit.grad(lambda x: 3.0)(np.ones(2))
    assert_close(g, np.zeros(2))


def test_gradient_dtype_follows_input():
    x32 = rnd((3,), seed=41).astype(np.float32)
    assert cjit.grad(lambda a: cnp.sum(a * a))(x32).dtype == np.float32
    g = cjit.grad(lambda a, b: cnp.sum(a * b), argnums=(0, 1))(x32, rnd((3,), seed=42))
    assert g[0].dtype == np.float32 and g[1].dtype == np.float64


def test_closure_constants_and_repeat_calls():
    w = rnd((3, 2), seed=43)
    gf = cjit.grad(lambda x: cnp.sum(cnp.tanh(x @ w)))
    x = rnd((4, 3), seed=44)
    first = gf(x)
    for _ in range(3):
        assert_close(gf(x), first, rtol=0, atol=0)
    assert_close(gf(x + 1.0), numeric_grad(lambda a: cnp.sum(cnp.tanh(a @ w)), [x + 1.0], 0),
                 rtol=RTOL, atol=ATOL)


# ---------------------------------------------------------------------------
# float32 against float64

def test_float32_close_to_float64():
    p64 = mlp_params(2)
    p32 = {k: v.astype(np.float32) for k, v in p64.items()}
    g64 = cjit.grad(mlp_loss)(p64, MLP_X, MLP_Y)
    g32 = cjit.grad(mlp_loss)(p32, MLP_X.astype(np.float32), MLP_Y)
    for k in p64:
        assert g32[k].dtype == np.float32
        assert_close(g32[k].astype(np.float64), g64[k], rtol=1e-4, atol=1e-5)
    x = rnd((4, 5), seed=45)
    for fn in (lambda a: cnp.sum(cjit.nn.softmax(a) * a), lambda a: cnp.sum(cnp.sqrt(a * a + 1.0)),
               lambda a: cnp.max(a) * cnp.var(a) + cnp.sum(cjit.nn.gelu(a))):
        assert_close(cjit.grad(fn)(x.astype(np.float32)).astype(np.float64), cjit.grad(fn)(x),
                     rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------
# vjp

def test_vjp_non_scalar_output():
    x = rnd((3, 4), seed=46)
    out, vjp_fn = cjit.vjp(lambda a: cnp.sin(a) * 2.0, x)
    assert_close(out, np.sin(x) * 2.0, rtol=1e-14)
    ct = rnd((3, 4), seed=47)
    g = vjp_fn(ct)
    assert isinstance(g, tuple) and len(g) == 1
    assert_close(g[0], 2.0 * np.cos(x) * ct, rtol=1e-12)
    # vjp_fn is reusable with other cotangents
    assert_close(vjp_fn(np.ones((3, 4)))[0], 2.0 * np.cos(x), rtol=1e-12)


def test_vjp_several_primals_and_matmul():
    a, b = rnd((3, 4), seed=48), rnd((4, 2), seed=49)
    out, vjp_fn = cjit.vjp(cnp.matmul, a, b)
    ct = rnd((3, 2), seed=50)
    ga, gb = vjp_fn(ct)
    assert_close(out, a @ b, rtol=1e-12)
    assert_close(ga, ct @ b.T, rtol=1e-12)
    assert_close(gb, a.T @ ct, rtol=1e-12)


def test_vjp_pytree_output_and_cotangent():
    def f(p):
        return {"s": cnp.sum(p["x"] * p["y"]), "t": (p["x"] * 3.0, cnp.exp(p["y"]))}
    p = {"x": rnd((3,), seed=51), "y": rnd((3,), seed=52)}
    out, vjp_fn = cjit.vjp(f, p)
    assert set(out) == {"s", "t"} and isinstance(out["t"], tuple)
    ct = {"s": 2.0, "t": (np.array([1.0, 0.0, -1.0]), np.array([0.5, 0.5, 2.0]))}
    (g,) = vjp_fn(ct)
    assert_close(g["x"], 2.0 * p["y"] + 3.0 * ct["t"][0], rtol=1e-12)
    assert_close(g["y"], 2.0 * p["x"] + np.exp(p["y"]) * ct["t"][1], rtol=1e-12)


def test_vjp_python_scalar_cotangent_and_integer_output():
    """Regression: a Python scalar cotangent works outside jit as inside
    (it used to become an int64 array and be refused), and an integer
    output's cotangent is ignored."""
    x = rnd((3,), seed=64)
    _, vjp_fn = cjit.vjp(lambda a: cnp.sum(a * a), x)
    assert_close(vjp_fn(1)[0], 2 * x, rtol=1e-14)
    assert_close(vjp_fn(2.0)[0], 4 * x, rtol=1e-14)
    assert_close(cjit.jit(lambda a: cjit.vjp(lambda b: cnp.sum(b * b), a)[1](1))(x)[0], 2 * x,
                 rtol=1e-14)
    out, vjp_fn = cjit.vjp(lambda a: (a * 2.0, cnp.argmax(a)), x)
    assert out[1] == np.argmax(x)
    assert_close(vjp_fn((np.ones(3), 0))[0], np.full(3, 2.0))
    assert_close(vjp_fn((np.ones(3), np.int64(5)))[0], np.full(3, 2.0))


def test_vjp_has_aux():
    x = rnd((3,), seed=53)
    out, vjp_fn, aux = cjit.vjp(lambda a: (a * a, cnp.sum(a)), x, has_aux=True)
    assert_close(aux, np.asarray(np.sum(x)), rtol=1e-12)
    assert_close(vjp_fn(np.ones(3))[0], 2 * x, rtol=1e-12)


def test_vjp_inside_jit():
    @cjit.jit
    def f(x, ct):
        out, vjp_fn = cjit.vjp(lambda a: cnp.tanh(a) @ a.T, x)
        (g,) = vjp_fn(ct)
        return out, g
    x, ct = rnd((3, 4), seed=54), rnd((3, 3), seed=55)
    out, g = f(x, ct)
    out2, vjp_fn = cjit.vjp(lambda a: cnp.tanh(a) @ a.T, x)
    assert_close(out, out2, rtol=1e-12)
    assert_close(g, vjp_fn(ct)[0], rtol=1e-12)
    loss = lambda a: cnp.sum((cnp.tanh(a) @ a.T) * ct)  # noqa: E731
    assert_close(g, numeric_grad(loss, [x], 0), rtol=RTOL, atol=ATOL)


def test_vjp_matches_grad():
    x = rnd((5,), seed=56)
    f = lambda a: cnp.sum(cnp.exp(a) * a)  # noqa: E731
    out, vjp_fn = cjit.vjp(f, x)
    assert_close(vjp_fn(1.0)[0], cjit.grad(f)(x), rtol=1e-14)
    assert_close(vjp_fn(np.float64(2.0))[0], 2 * cjit.grad(f)(x), rtol=1e-14)


# ---------------------------------------------------------------------------
# compositions

def scalar_fn(x):
    return cnp.sin(x) * x * x + cnp.exp(0.5 * x)


@pytest.mark.parametrize("x0", [-1.3, 0.4, 2.2])
def test_compositions_of_scalar_function(x0):
    x = np.float64(x0)
    d1 = np.cos(x) * x * x + 2 * x * np.sin(x) + 0.5 * np.exp(0.5 * x)
    d2 = -np.sin(x) * x * x + 4 * x * np.cos(x) + 2 * np.sin(x) + 0.25 * np.exp(0.5 * x)
    d3 = (-np.cos(x) * x * x - 6 * x * np.sin(x) + 6 * np.cos(x) + 0.125 * np.exp(0.5 * x))
    results = {
        "grad": cjit.grad(scalar_fn)(x),
        "jit(grad)": cjit.jit(cjit.grad(scalar_fn))(x),
        "grad(jit)": cjit.grad(cjit.jit(scalar_fn))(x),
        "jit(grad(jit))": cjit.jit(cjit.grad(cjit.jit(scalar_fn)))(x),
        "value_and_grad in jit": cjit.jit(cjit.value_and_grad(scalar_fn))(x)[1],
    }
    for name, r in results.items():
        assert float(r) == pytest.approx(d1, rel=1e-12), name
    fd = float(numeric_grad(scalar_fn, [x], 0))
    assert fd == pytest.approx(d1, rel=1e-7)
    second = {
        "grad(grad)": cjit.grad(cjit.grad(scalar_fn))(x),
        "jit(grad(grad))": cjit.jit(cjit.grad(cjit.grad(scalar_fn)))(x),
        "grad(jit(grad))": cjit.grad(cjit.jit(cjit.grad(scalar_fn)))(x),
        "grad(grad(jit))": cjit.grad(cjit.grad(cjit.jit(scalar_fn)))(x),
    }
    for name, r in second.items():
        assert float(r) == pytest.approx(d2, rel=1e-10), name
    fd2 = float(numeric_grad(cjit.grad(scalar_fn), [x], 0))
    assert fd2 == pytest.approx(d2, rel=1e-6)
    third = cjit.grad(cjit.grad(cjit.grad(scalar_fn)))(x)
    assert float(third) == pytest.approx(d3, rel=1e-9)


def test_value_and_grad_inside_jit():
    @cjit.jit
    def step(params, x, y):
        v, g = cjit.value_and_grad(mlp_loss)(params, x, y)
        return v, {k: params[k] - 0.1 * g[k] for k in params}
    params = mlp_params(3)
    v, new = step(params, MLP_X, MLP_Y)
    v2, g2 = cjit.value_and_grad(mlp_loss)(params, MLP_X, MLP_Y)
    assert_close(np.asarray(v), np.asarray(v2), rtol=1e-12)
    for k in params:
        assert_close(new[k], params[k] - 0.1 * g2[k], rtol=1e-12, atol=1e-15)
    assert step.cache_info()["misses"] == 1
    step(new, MLP_X, MLP_Y)
    assert step.cache_info()["hits"] == 1


def test_grad_of_hessian_vector_product():
    """grad(grad) on an array function: H v of sum(x^4) / 4 is 3 x^2 v."""
    x, v = rnd((4,), seed=57), rnd((4,), seed=58)

    def gv(a):
        return cnp.sum(cjit.grad(lambda b: cnp.sum(b ** 4) / 4)(a) * v)
    assert_close(cjit.grad(gv)(x), 3 * x ** 2 * v, rtol=1e-12)
    assert_close(cjit.jit(cjit.grad(gv))(x), 3 * x ** 2 * v, rtol=1e-12)


SECOND_ORDER = {
    "elementwise": lambda x: cnp.sum(cnp.tanh(x) * cnp.exp(0.3 * x) + cnp.sqrt(x * x + 1.0)),
    "quotient and power": lambda x: cnp.sum((x + 3.0) ** 2.5 / (x * x + 2.0)),
    "matmul": lambda x: cnp.sum(cnp.sin(x @ x.T) @ x),
    "slices": lambda x: cnp.sum(x[::-2] * x[1::2] * cnp.exp(x[::2, ::-1])),
    "concatenate and reshape": lambda x: cnp.sum(cnp.concatenate([x, x * x], 1).reshape(-1, 2)[:, 0] ** 3),
    "softmax": lambda x: cnp.sum(cjit.nn.softmax(x, axis=1) * x),
    "logsumexp and sigmoid": lambda x: cjit.nn.logsumexp(x) * cnp.sum(cjit.nn.sigmoid(x)),
    "prod and max": lambda x: cnp.sum(cnp.prod(x, axis=1)) + cnp.sum(cnp.max(x, axis=0) ** 2),
    "var and mean": lambda x: cnp.var(x) * cnp.mean(x * x),
    "where and clip": lambda x: cnp.sum(cnp.where(x > 0, x ** 3, cnp.clip(x, -1.0, 1.0) * x)),
}


@pytest.mark.parametrize("name", list(SECOND_ORDER))
def test_hessian_vector_products(name):
    """grad(grad) of array functions: H v against differences of the
    gradient (every rule's backward nodes have rules of their own)."""
    f = SECOND_ORDER[name]
    x = away(distinct((4, 3), seed=62), kinks=(-1.0, 0.0, 1.0), margin=0.05)
    v = rnd((4, 3), seed=63)

    def gv(a):
        return cnp.sum(cjit.grad(f)(a) * v)
    got = cjit.grad(gv)(x)
    want = numeric_grad(gv, [x], 0)
    assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_inner_grad_sees_outer_values_as_constants():
    """grad inside grad differentiates only its own function: d/dx of
    x * (d/dy (x * y)) = d/dx x * x = 2x."""
    def outer(x):
        return x * cjit.grad(lambda y: x * y)(1.0)
    assert float(cjit.grad(outer)(3.0)) == pytest.approx(6.0)


def test_memory_analysis_describes_gradient():
    params = mlp_params(4)
    fwd = cjit.jit(mlp_loss).lower(params, MLP_X, MLP_Y).compile()
    bwd = cjit.jit(cjit.grad(mlp_loss)).lower(params, MLP_X, MLP_Y).compile()
    mf, mb = fwd.memory_analysis(), bwd.memory_analysis()
    assert mb.num_kernels > mf.num_kernels
    nbytes = sum(v.nbytes for v in params.values())
    assert mb.output_size_in_bytes == nbytes          # one gradient per parameter
    assert mf.output_size_in_bytes == 8
    assert mb.argument_size_in_bytes == mf.argument_size_in_bytes
    assert mb.peak_memory_in_bytes >= mb.argument_size_in_bytes + mb.output_size_in_bytes
    assert mb.peak_memory_in_bytes == (mb.argument_size_in_bytes + mb.output_size_in_bytes
                                       + mb.temp_size_in_bytes)
    assert bwd.cost_analysis()["flops"] > fwd.cost_analysis()["flops"]
    text = bwd.as_text()
    assert "matmul" in text
    # the compiled gradient computes what grad does
    got = bwd(params, MLP_X, MLP_Y)
    want = cjit.grad(mlp_loss)(params, MLP_X, MLP_Y)
    for k in params:
        assert_close(got[k], want[k], rtol=1e-12, atol=1e-15)


# ---------------------------------------------------------------------------
# errors

def test_error_non_scalar_output():
    with pytest.raises(TypeError, match=r"scalar output.*shape \(3,\).*vjp"):
        cjit.grad(lambda x: x * 2.0)(np.ones(3))
    with pytest.raises(TypeError, match=r"scalar output"):
        cjit.value_and_grad(lambda x: x[None])(np.float64(1.0))
    with pytest.raises(TypeError, match=r"scalar output"):
        cjit.jit(cjit.grad(lambda x: x * 2.0))(np.ones((2, 2)))


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
def test_error_integer_or_bool_input(dtype):
    with pytest.raises(TypeError, match=rf"float inputs.*dtype {dtype}"):
        cjit.grad(lambda x: cnp.sum(x * 2.0))(np.ones(3, dtype))
    with pytest.raises(TypeError, match=rf"float inputs.*dtype {dtype}"):
        cjit.value_and_grad(lambda x, y: cnp.sum(x * y), argnums=1)(np.ones(3), np.ones(3, dtype))


def test_error_integer_leaf_in_pytree():
    with pytest.raises(TypeError, match=r"float inputs.*\['n'\].*int64"):
        cjit.grad(lambda p: cnp.sum(p["w"]) * 1.0)({"w": np.ones(2), "n": np.arange(2)})


def test_error_python_int_argument():
    with pytest.raises(TypeError, match=r"float inputs"):
        cjit.grad(lambda x: x * 2.0)(3)


def test_error_integer_output():
    with pytest.raises(TypeError, match=r"float output"):
        cjit.grad(lambda x: cnp.argmax(x))(np.ones(3))


def test_error_cotangent_shape():
    out, vjp_fn = cjit.vjp(lambda x: x * 2.0, np.ones((2, 3)))
    with pytest.raises(TypeError, match=r"cotangent of shape \(3, 2\).*shape \(2, 3\)"):
        vjp_fn(np.ones((3, 2)))
    with pytest.raises(TypeError, match=r"cotangent of shape \(\).*shape \(2, 3\)"):
        vjp_fn(1.0)
    with pytest.raises(TypeError, match=r"cotangent of a float output must be a float.*int32"):
        vjp_fn(np.ones((2, 3), np.int32))
    out, vjp_fn = cjit.vjp(lambda x: (x, x * 2.0), np.ones(2))
    with pytest.raises(TypeError, match=r"structure of the output"):
        vjp_fn(np.ones(2))


def test_error_bad_argnums():
    with pytest.raises(TypeError, match=r"argnums"):
        cjit.grad(lambda x: cnp.sum(x), argnums="0")(np.ones(2))
    with pytest.raises(TypeError, match=r"out of range"):
        cjit.grad(lambda x: cnp.sum(x), argnums=3)(np.ones(2))


def test_stop_gradient_is_a_constant_for_differentiation():
    x = np.random.default_rng(7).standard_normal((4, 3))
    g = cjit.grad(lambda a: (cjit.stop_gradient(a) * a).sum())(x)
    np.testing.assert_allclose(g, x, rtol=1e-15)       # d/da (c * a) with c = a held fixed
    np.testing.assert_allclose(cjit.jit(cjit.stop_gradient)(x), x)
    np.testing.assert_allclose(cnp.stop_gradient(x), x)
    # a second derivative sees it as a constant too
    h = cjit.grad(cjit.grad(lambda a: cjit.stop_gradient(a) * a ** 2))(1.5)
    np.testing.assert_allclose(h, 2 * 1.5, rtol=1e-15)


def test_softmax_gradient_needs_no_tie_counting():
    x = np.random.default_rng(8).standard_normal((16, 32))
    w = np.random.default_rng(9).standard_normal((16, 32))
    f = cjit.jit(cjit.grad(lambda a: (cjit.nn.log_softmax(a) * w).sum()))
    assert f.lower(x).compile().memory_analysis().num_kernels == 1
    s = np.exp(x - x.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    np.testing.assert_allclose(f(x), w - s * w.sum(-1, keepdims=True), rtol=1e-12, atol=1e-14)
