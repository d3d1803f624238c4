"""The functions issue 18 added to cjit.numpy, cjit.nn and cjit.scipy.special,
composed from existing primitives: values against NumPy (traced and eager,
dtypes, broadcasting, edge values), accuracy in ulps against NumPy's libm,
and gradients against central finite differences (test_grad's check_grad)."""
import math

import numpy as np
import pytest

import cjit
import cjit.nn as nn
import cjit.numpy as cnp
import cjit.scipy.special as sp

from conftest import assert_close
from test_grad import away, check_grad, rnd

MODES = ["jit", "eager"]


def run(mode, fn, *args):
    return cjit.jit(fn)(*args) if mode == "jit" else fn(*args)


def ulps(got, want):
    """Largest error in units of the last place of `want` (finite entries);
    non-finite entries must match exactly (nan where nan)."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    fin = np.isfinite(want)
    assert np.array_equal(got[~fin], want[~fin], equal_nan=True), (got[~fin], want[~fin])
    if not fin.any():
        return 0.0
    sp_ = np.spacing(np.abs(want[fin])).astype(np.float64)
    return float(np.max(np.abs(got[fin].astype(np.float64) - want[fin].astype(np.float64)) / sp_))


def sample(dtype, seed=0):
    """Values over many scales plus the edges: zeros of both signs,
    infinities, nan, 1, and huge and tiny magnitudes."""
    rng = np.random.default_rng(seed)
    parts = [rng.standard_normal(400) * s for s in (1e-8, 1e-3, 0.3, 1.0, 3.0, 30.0, 1e5)]
    edges = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0 ** 28, 1e30, 1e-30]
    return np.concatenate(parts + [edges]).astype(dtype)


# ---------------------------------------------------------------------------
# unary math against NumPy, with a bound in ulps

# name: (NumPy function, domain transform, max ulps float64, max ulps float32)
UNARY = {
    "arctan": (np.arctan, None, 3, 3),
    "arcsin": (np.arcsin, np.tanh, 3, 4),
    "arccos": (np.arccos, np.tanh, 3, 3),
    "arcsinh": (np.arcsinh, None, 2, 2),
    "arccosh": (np.arccosh, lambda x: 1.0 + np.abs(x), 2, 2),
    "arctanh": (np.arctanh, np.tanh, 3, 3),
    "sinh": (np.sinh, lambda x: np.clip(x, -700, 700), 3, 3),
    "cosh": (np.cosh, lambda x: np.clip(x, -700, 700), 3, 3),
    "tan": (np.tan, lambda x: np.clip(x, -1e4, 1e4), 4, 4),
    "log2": (np.log2, np.abs, 2, 2),
    "log10": (np.log10, np.abs, 3, 3),
    "exp2": (np.exp2, lambda x: np.clip(x, -1000, 1000), 2, 2),
    "sinc": (np.sinc, lambda x: np.clip(x, -1e4, 1e4), 4, 4),
    "degrees": (np.degrees, None, 1, 2),
    "radians": (np.radians, None, 1, 2),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_math_against_numpy(name, dtype, mode):
    npf, dom, tol64, tol32 = UNARY[name]
    x = sample(np.float64)
    with np.errstate(all="ignore"):
        if dom is not None:
            x = dom(x)
        x = x.astype(dtype)
        want = npf(x)
    got = run(mode, getattr(cnp, name), x)
    assert ulps(got, want) <= (tol64 if dtype == "float64" else tol32)


@pytest.mark.parametrize("name", ["arctan", "arcsinh", "arctanh", "sinh", "tan", "arcsin"])
def test_odd_functions_keep_the_sign_of_zero(name):
    got = getattr(cnp, name)(np.array([0.0, -0.0]))
    assert np.array_equal(np.signbit(got), [False, True])


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
def test_unary_math_on_ints_gives_float64(dtype):
    x = np.array([0, 1, 1], dtype=dtype)
    for name in ("arctan", "sinh", "log2", "exp2", "degrees"):
        got = getattr(cnp, name)(x)
        assert got.dtype == np.float64
        assert ulps(got, getattr(np, name)(x.astype(np.float64))) <= 2


# ---------------------------------------------------------------------------
# binary math

BINARY = {
    "arctan2": (np.arctan2, 2),
    "hypot": (np.hypot, 2),
    "copysign": (np.copysign, 0),
    "fmax": (np.fmax, 0),
    "fmin": (np.fmin, 0),
    "logaddexp2": (np.logaddexp2, None),
    "logaddexp": (np.logaddexp, None),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_math_against_numpy(name, dtype, mode):
    npf, tol = BINARY[name]
    x = sample(dtype, seed=1)
    y = np.random.default_rng(2).permutation(sample(dtype, seed=3))
    with np.errstate(all="ignore"):
        want = npf(x, y)
    got = run(mode, getattr(cnp, name), x, y)
    if tol is None:
        # near a zero result the two formulas' roundings differ in relative
        # terms; the error is bounded by the operands' magnitude
        fin = np.isfinite(want)
        assert np.array_equal(got[~fin], want[~fin], equal_nan=True)
        scale = np.maximum(np.maximum(np.abs(x), np.abs(y))[fin], 1.0).astype(np.float64)
        eps = np.finfo(dtype).eps
        assert np.max(np.abs(got[fin] - want[fin]) / scale) <= 4 * eps
    else:
        assert ulps(got, want) <= tol


def test_arctan2_special_cases():
    z, inf = 0.0, np.inf
    y = np.array([z, z, -z, -z, inf, inf, -inf, 1.0, 1.0, np.nan, inf])
    x = np.array([z, -z, z, -z, inf, -inf, inf, -inf, inf, 1.0, np.nan])
    got = cnp.arctan2(y, x)
    want = np.arctan2(y, x)
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("mode", MODES)
def test_broadcasting_and_promotion(mode):
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    y = np.array([0.5, -1.0, 2.0], dtype=np.float64)
    for name in ("arctan2", "hypot", "logaddexp", "copysign", "remainder", "fmax"):
        got = run(mode, getattr(cnp, name), x, y)
        want = getattr(np, name)(x, y)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert_close(got, want)
    # a weak Python scalar keeps float32
    got = run(mode, lambda a: cnp.hypot(a, 2.0), x)
    assert got.dtype == np.float32


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_remainder_and_fmod(dtype, mode):
    a = np.array([7, -7, 7, -7, 0, 5, -5, 3], dtype=dtype)
    b = np.array([3, 3, -3, -3, 4, 0, 0, 1], dtype=dtype)
    with np.errstate(all="ignore"):
        for name in ("remainder", "fmod", "mod"):
            got = run(mode, getattr(cnp, name), a, b)
            want = getattr(np, name)(a, b)
            assert got.dtype == want.dtype and np.array_equal(got, want), name


@pytest.mark.parametrize("mode", MODES)
def test_float_remainder(mode):
    # moderate quotients (below 2^20): exact agreement with NumPy's fmod-based value
    rng = np.random.default_rng(4)
    a = rng.uniform(-1000, 1000, 500)
    b = rng.choice([-1, 1], 500) * rng.uniform(0.01, 50, 500)
    a = np.concatenate([a, [0.0, -0.0, 3.0, -3.0, 1.0, -1.0, np.inf, 5.0, -5.0, np.nan]])
    b = np.concatenate([b, [2.0, 2.0, -3.0, 3.0, np.inf, np.inf, 2.0, -np.inf, np.inf, 1.0]])
    with np.errstate(all="ignore"):
        want = np.remainder(a, b)
    got = run(mode, cnp.remainder, a, b)
    fin = np.isfinite(want)
    assert np.array_equal(got[~fin], want[~fin], equal_nan=True)
    # the product floor(a / b) * b rounds: the error is a few ulps of |a|
    scale = np.maximum(np.abs(a[fin]), np.abs(b[fin]))
    assert np.max(np.abs(got[fin] - want[fin]) / scale) <= 2 * np.finfo(np.float64).eps
    assert np.array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_rounding_and_sign_bits_exact(dtype, mode):
    x = np.concatenate([sample(dtype, seed=5),
                        np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999999999999994,
                                  -0.4, 2.0 ** 52 + 1, 2.0 ** 23 + 1], dtype=dtype),
                        -np.array([np.nan, 0.0, np.inf], dtype=dtype)])   # signed nan, -0, -inf
    for name in ("round", "trunc", "signbit", "isinf", "nan_to_num", "positive", "fix"):
        got = run(mode, getattr(cnp, name), x)
        want = getattr(np, name)(x)
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=want.dtype.kind == "f"), name
        if want.dtype.kind == "f":
            assert np.array_equal(np.signbit(got), np.signbit(want)), name
    got = run(mode, lambda a: cnp.round(a, 2), x[:100])
    assert_close(got, np.round(x[:100], 2))
    got = run(mode, lambda a: cnp.nan_to_num(a, nan=-1.0, posinf=9.0, neginf=-9.0), x)
    assert np.array_equal(got, np.nan_to_num(x, nan=-1.0, posinf=9.0, neginf=-9.0))


@pytest.mark.parametrize("mode", MODES)
def test_bool_and_shift_functions(mode):
    p = np.array([True, True, False, False])
    q = np.array([True, False, True, False])
    for name in ("logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor"):
        assert np.array_equal(run(mode, getattr(cnp, name), p, q), getattr(np, name)(p, q))
    i = np.array([0, 1, -1, 5, -6, 2 ** 40, -(2 ** 40)], dtype=np.int64)
    assert np.array_equal(run(mode, cnp.bitwise_invert, i), np.invert(i))
    n = np.array([0, 1, 3, 10, 62, 63, 2], dtype=np.int64)
    assert np.array_equal(run(mode, cnp.bitwise_right_shift, i, n), np.right_shift(i, n))
    small = np.array([0, 1, -1, 5, -6, 7, 3], dtype=np.int64)
    assert np.array_equal(run(mode, cnp.bitwise_left_shift, small, n), np.left_shift(small, n))
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        assert np.array_equal(run(mode, getattr(cnp, name), i, small), getattr(np, name)(i, small)), name
    with pytest.raises(TypeError, match="integer and bool"):
        cnp.bitwise_and(i, 1.5)


# ---------------------------------------------------------------------------
# gradients against finite differences

def _inside(lo, hi):
    return lambda x: lo + (hi - lo) * (np.tanh(x) + 1) / 2


GRAD_UNARY = {
    "arctan": lambda x: 3 * x,
    "arcsin": _inside(-0.9, 0.9),
    "arccos": _inside(-0.9, 0.9),
    "arcsinh": lambda x: 3 * x,
    "arccosh": lambda x: 1.2 + np.abs(x) * 2,
    "arctanh": _inside(-0.9, 0.9),
    "sinh": lambda x: x,
    "cosh": lambda x: x,
    "tan": _inside(-1.2, 1.2),
    "log2": lambda x: np.abs(x) + 0.3,
    "log10": lambda x: np.abs(x) + 0.3,
    "exp2": lambda x: x,
    "sinc": lambda x: x,
    "degrees": lambda x: x,
    "radians": lambda x: x,
    "positive": lambda x: x,
    "cbrt": lambda x: away(x),
    "signbit_mul": lambda x: x,
}


@pytest.mark.parametrize("name", sorted(GRAD_UNARY))
def test_unary_gradients(name):
    dom = GRAD_UNARY[name]
    x = dom(rnd((2, 5), seed=len(name)))
    if name == "signbit_mul":
        check_grad(lambda a: a * cnp.signbit(a), x)
    else:
        check_grad(getattr(cnp, name), x)


def test_gradients_at_zero_are_the_derivative():
    # the odd functions take |x| as a select: slope 1 at 0, not abs's 0
    x = np.array([0.0])
    for name, want in [("arctan", 1.0), ("arcsin", 1.0), ("arcsinh", 1.0), ("arctanh", 1.0),
                       ("sinh", 1.0), ("tan", 1.0), ("sinc", 0.0), ("cosh", 0.0)]:
        g = cjit.grad(lambda a: cnp.sum(getattr(cnp, name)(a)))(x)
        assert np.isfinite(g).all() and abs(g[0] - want) < 1e-12, name
    # branches not taken do not poison the gradient with 0 * inf
    for name, v in [("arcsinh", 1e200), ("sinh", 800.0), ("cosh", -800.0), ("arctan", 0.0),
                    ("arctan", 1e300), ("sinc", 0.0)]:
        g = cjit.grad(lambda a: cnp.sum(getattr(cnp, name)(a)))(np.array([v]))
        assert not np.isnan(g).any(), (name, v, g)


GRAD_BINARY = {
    "arctan2": (lambda x: x, lambda y: away(y)),
    "hypot": (lambda x: away(x), lambda y: away(y)),
    "logaddexp": (lambda x: x, lambda y: y),
    "logaddexp2": (lambda x: x, lambda y: y),
    "copysign": (lambda x: away(x), lambda y: away(y)),
    "remainder": (lambda x: 3 * x, lambda y: away(y, margin=0.5)),
    "fmod": (lambda x: 3 * x, lambda y: away(y, margin=0.5)),
    "fmax": (lambda x: x, lambda y: y + 0.01),
    "fmin": (lambda x: x, lambda y: y + 0.01),
    "pow": (lambda x: np.abs(x) + 0.5, lambda y: y),
}


@pytest.mark.parametrize("name", sorted(GRAD_BINARY))
def test_binary_gradients(name):
    dx, dy = GRAD_BINARY[name]
    x = dx(rnd((2, 4), seed=1))
    y = dy(rnd((4,), seed=2))
    fn = getattr(cnp, name)
    if name in ("remainder", "fmod"):
        # keep every quotient away from the integers, where they jump
        q = x / y
        x = np.where(np.abs(q - np.round(q)) < 0.1, x + 0.3 * y, x)
    check_grad(fn, x, y)


def test_logaddexp_gradient_splits_at_ties():
    gx, gy = cjit.grad(lambda a, b: cnp.sum(cnp.logaddexp(a, b)), argnums=(0, 1))(
        np.array([1.0, -np.inf]), np.array([1.0, 0.0]))
    assert np.allclose(gx, [0.5, 0.0]) and np.allclose(gy, [0.5, 1.0])


# ---------------------------------------------------------------------------
# creation, shapes, reductions, contractions: values (traced and eager)
# and gradients

X = np.arange(24.0).reshape(2, 3, 4) / 7.0 - 1.0

SHAPE_CASES = {
    "flip": (lambda a: cnp.flip(a, 1), lambda a: np.flip(a, 1)),
    "flip_all": (cnp.flip, np.flip),
    "roll": (lambda a: cnp.roll(a, 2, axis=2), lambda a: np.roll(a, 2, axis=2)),
    "roll_flat": (lambda a: cnp.roll(a, -5), lambda a: np.roll(a, -5)),
    "roll_axes": (lambda a: cnp.roll(a, (1, -1), axis=(0, 2)),
                  lambda a: np.roll(a, (1, -1), axis=(0, 2))),
    "moveaxis": (lambda a: cnp.moveaxis(a, 0, -1), lambda a: np.moveaxis(a, 0, -1)),
    "permute_dims": (lambda a: cnp.permute_dims(a, (2, 0, 1)), lambda a: a.transpose(2, 0, 1)),
    "swapaxes": (lambda a: cnp.swapaxes(a, 0, 2), lambda a: np.swapaxes(a, 0, 2)),
    "matrix_transpose": (cnp.matrix_transpose, np.matrix_transpose),
    "repeat": (lambda a: cnp.repeat(a, 2, axis=1), lambda a: np.repeat(a, 2, axis=1)),
    "repeat_seq": (lambda a: cnp.repeat(a, [1, 0, 3], axis=1),
                   lambda a: np.repeat(a, [1, 0, 3], axis=1)),
    "repeat_flat": (lambda a: cnp.repeat(a, 2), lambda a: np.repeat(a, 2)),
    "tile": (lambda a: cnp.tile(a, (2, 1, 1, 2)), lambda a: np.tile(a, (2, 1, 1, 2))),
    "hstack": (lambda a: cnp.hstack([a, a]), lambda a: np.hstack([a, a])),
    "vstack": (lambda a: cnp.vstack([a[0, 0], a[1, 1]]), lambda a: np.vstack([a[0, 0], a[1, 1]])),
    "dstack": (lambda a: cnp.dstack([a[0], a[1]]), lambda a: np.dstack([a[0], a[1]])),
    "column_stack": (lambda a: cnp.column_stack([a[0, 0], a[1, 1]]),
                     lambda a: np.column_stack([a[0, 0], a[1, 1]])),
    "concat": (lambda a: cnp.concat([a, a], axis=-1), lambda a: np.concatenate([a, a], -1)),
    "append": (lambda a: cnp.append(a, a[0]), lambda a: np.append(a, a[0])),
    "append_axis": (lambda a: cnp.append(a, a[:1], axis=0),
                    lambda a: np.append(a, a[:1], axis=0)),
    "pad": (lambda a: cnp.pad(a, ((0, 1), (2, 0), (1, 1)), constant_values=2.5),
            lambda a: np.pad(a, ((0, 1), (2, 0), (1, 1)), constant_values=2.5)),
    "pad_edge": (lambda a: cnp.pad(a, 2, mode="edge"), lambda a: np.pad(a, 2, mode="edge")),
    "diff": (lambda a: cnp.diff(a * a, n=2, axis=1), lambda a: np.diff(a * a, n=2, axis=1)),
    "diff_prepend": (lambda a: cnp.diff(a, prepend=0.0), lambda a: np.diff(a, prepend=0.0)),
    "take": (lambda a: cnp.take(a, np.array([[3, 1], [0, 0]]), axis=2),
             lambda a: np.take(a, np.array([[3, 1], [0, 0]]), axis=2)),
    "take_flat": (lambda a: cnp.take(a, [5, 3, 1, 0, 23, -1, 7, 9, 11]),
                  lambda a: np.take(a, [5, 3, 1, 0, 23, -1, 7, 9, 11])),
    "tril": (lambda a: cnp.tril(a, -1), lambda a: np.tril(a, -1)),
    "triu": (lambda a: cnp.triu(a, 1), lambda a: np.triu(a, 1)),
    "diagonal": (lambda a: cnp.diagonal(a, 1, 1, 2), lambda a: np.diagonal(a, 1, 1, 2)),
    "diagonal_neg": (lambda a: cnp.diagonal(a, -1), lambda a: np.diagonal(a, -1)),
    "trace": (lambda a: cnp.trace(a, 1, 1, 2), lambda a: np.trace(a, 1, 1, 2)),
    "diag_1d": (lambda a: cnp.diag(a[0, 0], 2), lambda a: np.diag(a[0, 0], 2)),
    "diag_1d_neg": (lambda a: cnp.diag(a[0, 0], -1), lambda a: np.diag(a[0, 0], -1)),
    "diag_2d": (lambda a: cnp.diag(a[0], 1), lambda a: np.diag(a[0], 1)),
    "cumsum": (lambda a: cnp.cumsum(a, axis=2), lambda a: np.cumsum(a, axis=2)),
    "cumsum_flat": (cnp.cumsum, np.cumsum),
    "cumprod": (lambda a: cnp.cumprod(a, axis=1), lambda a: np.cumprod(a, axis=1)),
    "cumulative_sum": (lambda a: cnp.cumulative_sum(a, axis=0, include_initial=True),
                       lambda a: np.cumulative_sum(a, axis=0, include_initial=True)),
    "std": (lambda a: cnp.std(a, axis=(0, 2), correction=1),
            lambda a: np.std(a, axis=(0, 2), ddof=1)),
    "var": (lambda a: cnp.var(a, axis=1, correction=0.5, keepdims=True),
            lambda a: np.var(a, axis=1, ddof=0.5, keepdims=True)),
    "tensordot": (lambda a: cnp.tensordot(a, a, ([1, 2], [1, 2])),
                  lambda a: np.tensordot(a, a, ([1, 2], [1, 2]))),
    "tensordot_int": (lambda a: cnp.tensordot(a, a[0].T, 1), lambda a: np.tensordot(a, a[0].T, 1)),
    "vecdot": (lambda a: cnp.vecdot(a, a[0]), lambda a: np.vecdot(a, a[0])),
    "dot_nd": (lambda a: cnp.dot(a, a[0].T[None]), lambda a: np.dot(a, a[0].T[None])),
    "inner": (lambda a: cnp.inner(a, a[1]), lambda a: np.inner(a, a[1])),
    "outer": (lambda a: cnp.outer(a[0], a[1, 0]), lambda a: np.outer(a[0], a[1, 0])),
    "kron": (lambda a: cnp.kron(a[0], a[1, :2]), lambda a: np.kron(a[0], a[1, :2])),
    "cross": (lambda a: cnp.cross(a[:, :, :3], a[0, 0, 1:]),
              lambda a: np.cross(a[:, :, :3], a[0, 0, 1:])),
    "split": (lambda a: cnp.split(a, 2, axis=2)[1], lambda a: np.split(a, 2, axis=2)[1]),
    "array_split": (lambda a: cnp.array_split(a, [1, 5], axis=2)[1],
                    lambda a: np.array_split(a, [1, 5], axis=2)[1]),
    "unstack": (lambda a: cnp.unstack(a, axis=1)[2], lambda a: a[:, 2]),
    "broadcast_arrays": (lambda a: cnp.broadcast_arrays(a, a[0, :, :1])[1],
                         lambda a: np.broadcast_arrays(a, a[0, :, :1])[1]),
    "meshgrid": (lambda a: cnp.meshgrid(a[0, 0], a[0, :, 0])[0] * cnp.meshgrid(
        a[0, 0], a[0, :, 0])[1], lambda a: np.meshgrid(a[0, 0], a[0, :, 0])[0] * np.meshgrid(
        a[0, 0], a[0, :, 0])[1]),
    "eye_linspace": (lambda a: a[0] * cnp.eye(3, 4, 1) + cnp.linspace(0, 1, 4),
                     lambda a: a[0] * np.eye(3, 4, 1) + np.linspace(0, 1, 4)),
}

EINSUM = ["ijk,kl->ijl", "ii->i", "ii", "ij->ji", "ij,j->i", "i,i", "i,j->ij", "...k,kl->...l",
          "bij,bjk->bik", "ijk->", "ijk,kl,lm->im", "ij,ij->i", "ijk", "ij,jk"]


def _einsum_operands(sub):
    rng = np.random.default_rng(len(sub))
    size = {"i": 3, "j": 3, "k": 4, "l": 5, "m": 2, "b": 2}
    ins = sub.split("->")[0].split(",")
    out = []
    for s in ins:
        shape = (2,) + tuple(size[c] for c in s[3:]) if s.startswith("...") else \
            tuple(size[c] for c in s)
        out.append(rng.uniform(-1, 1, shape))
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(SHAPE_CASES))
def test_shape_and_contraction_values(name, mode):
    fn, ref = SHAPE_CASES[name]
    assert_close(run(mode, fn, X), ref(X), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(SHAPE_CASES))
def test_shape_and_contraction_gradients(name):
    fn, _ = SHAPE_CASES[name]
    check_grad(fn, X + 0.01 * rnd(X.shape, seed=9))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sub", EINSUM)
def test_einsum_values_and_gradients(sub, mode):
    ops = _einsum_operands(sub)
    assert_close(run(mode, lambda *o: cnp.einsum(sub, *o), *ops), np.einsum(sub, *ops),
                 rtol=1e-12, atol=1e-12)
    if mode == "jit":
        check_grad(lambda *o: cnp.einsum(sub, *o), *ops)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["int32", "int64", "bool", "float32"])
def test_reductions_and_scans_by_dtype(dtype, mode):
    rng = np.random.default_rng(6)
    x = rng.integers(-3, 4, (3, 37)).astype(dtype)
    for fn, ref in [(lambda a: cnp.cumsum(a, axis=1), lambda a: np.cumsum(a, axis=1)),
                    (lambda a: cnp.all(a, axis=0), lambda a: np.all(a, axis=0)),
                    (lambda a: cnp.any(a, axis=1, keepdims=True),
                     lambda a: np.any(a, axis=1, keepdims=True)),
                    (cnp.all, np.all), (cnp.count_nonzero, np.count_nonzero)]:
        got, want = run(mode, fn, x), np.asarray(ref(x))
        assert got.dtype == want.dtype and np.array_equal(got, want)
    if dtype != "bool":
        got = run(mode, lambda a: cnp.cumprod(a[:, :9], axis=1), x)
        assert np.array_equal(got, np.cumprod(x[:, :9], axis=1))


def test_cumsum_error_grows_slowly():
    # log-step prefix sums: the error of a long float32 cumsum stays near
    # a few ulps of the running total (a sequential float32 sum drifts more)
    x = np.random.default_rng(7).uniform(0, 1, 1 << 16).astype(np.float32)
    got = cnp.cumsum(x)
    exact = np.cumsum(x.astype(np.float64))
    rel = np.max(np.abs(got - exact) / exact)
    assert rel < 2e-6, rel


def test_empty_reductions_and_edges():
    e = np.zeros((0, 3))
    assert np.array_equal(cnp.all(e, axis=0), np.all(e, axis=0))
    assert np.array_equal(cnp.any(e, axis=0), np.any(e, axis=0))
    assert cnp.cumsum(np.zeros(0)).shape == (0,)
    assert np.array_equal(cnp.any(np.array([np.nan, 0.0])), True)


def test_take_of_a_traced_index_is_a_gather():
    a = np.arange(3.0)
    assert np.array_equal(cjit.jit(lambda a, i: cnp.take(a, i))(a, np.array([2, 0])), [2.0, 0.0])
    with pytest.raises(IndexError, match="out of bounds"):
        cnp.take(np.ones(3), [3])


def test_array_api_introspection():
    assert cnp.__array_api_version__ == "2023.12"
    info = cnp.__array_namespace_info__()
    assert info.default_dtypes()["real floating"] == np.float64
    assert set(info.dtypes()) == {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
                                  "uint32", "uint64", "float32", "float64"}
    assert cnp.isdtype(cnp.float32, "real floating") and not cnp.isdtype(cnp.int32, "bool")
    assert cnp.isdtype(cnp.int64, ("bool", "integral"))
    assert cnp.result_type(cnp.int32, 1.0) == np.float64
    assert cnp.result_type(np.ones(2, np.float32), 1.0) == np.float32
    assert cnp.result_type(cnp.int32, cnp.int64) == np.int64
    assert cnp.can_cast(cnp.int32, cnp.float64) and not cnp.can_cast(cnp.float64, cnp.int32)
    assert cnp.finfo(cnp.float32).eps == np.finfo(np.float32).eps
    assert cnp.iinfo(cnp.int32).max == 2 ** 31 - 1
    assert cnp.bool is np.bool_
    for fn in (lambda: cnp.zeros(2, device="cpu"), lambda: cnp.eye(2, device=None),
               lambda: cnp.asarray([1.0], device="cpu")):
        fn()
    with pytest.raises(ValueError, match="CPU only"):
        cnp.ones(2, device="gpu")


# ---------------------------------------------------------------------------
# cjit.nn and cjit.scipy.special

def _np_sigmoid(v):
    return np.exp(-np.logaddexp(0.0, -v))


NN = {
    "softplus": lambda v: np.logaddexp(v, 0.0),
    "log_sigmoid": lambda v: -np.logaddexp(-v, 0.0),
    "silu": lambda v: v * _np_sigmoid(v),
    "elu": lambda v: np.where(v > 0, v, np.expm1(np.minimum(v, 0))),
    "selu": lambda v: 1.0507009873554805 * np.where(v > 0, v, 1.6732632423543772 *
                                                     np.expm1(np.minimum(v, 0))),
    "celu": lambda v: np.where(v > 0, v, np.expm1(np.minimum(v, 0))),
    "leaky_relu": lambda v: np.where(v >= 0, v, 0.01 * v),
    "relu6": lambda v: np.clip(v, 0, 6),
    "hard_tanh": lambda v: np.clip(v, -1, 1),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(NN))
def test_nn_values_and_gradients(name, mode):
    x = np.concatenate([np.linspace(-40, 40, 81), [np.inf, -np.inf, 0.0]])
    with np.errstate(all="ignore"):
        want = NN[name](x)
    assert_close(run(mode, getattr(nn, name), x), want, rtol=1e-14, atol=1e-300)
    if mode == "jit":
        check_grad(getattr(nn, name), away(rnd((3, 4), seed=3, low=-8, high=8), (0.0, 6.0, -1.0,
                                                                                   1.0)))


def test_nn_standardize_glu_one_hot():
    x = rnd((3, 6), seed=4)
    m = x.mean(-1, keepdims=True)
    v = x.var(-1, keepdims=True)
    assert_close(nn.standardize(x), (x - m) / np.sqrt(v + 1e-5), rtol=1e-12)
    a, b = x[:, :3], x[:, 3:]
    assert_close(nn.glu(x), a * _np_sigmoid(b), rtol=1e-12)
    check_grad(nn.standardize, x)
    check_grad(nn.glu, x)
    assert np.array_equal(nn.one_hot(np.array([0, 2]), 3), np.eye(3)[[0, 2]])


def test_scipy_special():
    x = np.array([0.0, 0.0, 1.0, 2.0, 3.0])
    y = np.array([0.0, np.nan, 2.0, 0.5, 0.0])
    want = np.array([0.0, np.nan, math.log(2.0), 2 * math.log(0.5), -np.inf])
    assert np.array_equal(sp.xlogy(x, y), want, equal_nan=True)
    want1p = np.array([0.0, np.nan, math.log1p(2.0), 2 * math.log1p(0.5), 0.0])
    assert np.array_equal(sp.xlog1py(x, y), want1p, equal_nan=True)
    p = np.array([0.1, 0.5, 0.9])
    assert_close(sp.logit(p), np.log(p / (1 - p)), rtol=1e-14)
    assert_close(sp.expit(np.array([-800.0, 0.0, 800.0])), np.array([0.0, 0.5, 1.0]))
    a = rnd((3, 4), seed=8)
    assert_close(sp.logsumexp(a, axis=1), np.log(np.exp(a).sum(1)), rtol=1e-13)
    check_grad(sp.logit, _inside(0.1, 0.9)(a))
    check_grad(lambda u, v: sp.xlogy(u, v), a, np.abs(a) + 0.5)
    check_grad(lambda u, v: sp.xlog1py(u, v), a, np.abs(a))
    # the x == 0 branch keeps the gradient with respect to y finite at y = 0
    g = cjit.grad(lambda v: cnp.sum(sp.xlogy(0.0, v)))(np.array([0.0]))
    assert np.array_equal(g, [0.0])


def test_eager_only_functions():
    x = np.array([[3.0, 0.0, 1.0], [0.0, 2.0, 1.0]])
    assert all(np.array_equal(p, q) for p, q in zip(cnp.nonzero(x), np.nonzero(x)))
    assert np.array_equal(cnp.sort(x, axis=1), np.sort(x, axis=1))
    assert np.array_equal(cnp.argsort(x[0], descending=True), [0, 2, 1])
    assert np.array_equal(cnp.unique_values(x), [0.0, 1.0, 2.0, 3.0])
    assert np.array_equal(cnp.searchsorted(np.array([1.0, 2.0, 3.0]), 2.5), 2)
    for name in ("nonzero", "unique_values"):
        with pytest.raises(NotImplementedError, match="cannot be traced"):
            cjit.jit(lambda a: getattr(cnp, name)(a))(x)
    assert cnp.reshape(x, (3, 2), copy=False).shape == (3, 2)
    assert cnp.astype(x, "float32", device="cpu").dtype == np.float32


def test_linalg_cross_along_an_axis_from_the_end_with_broadcasting():
    # the array API's axis counts from the end of the broadcast shape
    a = np.arange(18.0).reshape(2, 3, 3)
    b = np.arange(9.0).reshape(3, 3) + 1
    np.testing.assert_allclose(cnp.linalg.cross(a, b, axis=-2), np.linalg.cross(a, b, axis=-2))
    np.testing.assert_allclose(cjit.jit(lambda u, v: cnp.linalg.cross(u, v, axis=-2))(b, a),
                               np.linalg.cross(b, a, axis=-2))
    e = cnp.linalg.cross(np.zeros((0, 3, 0), np.uint8), np.zeros((3, 0), np.uint8), axis=-2)
    assert e.shape == (0, 3, 0) and e.dtype == np.uint8
