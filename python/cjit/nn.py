"""cjit.nn: activation functions and friends, built from cjit.numpy.

Each works on traced values inside jit and eagerly on arrays outside it
(an eager call compiles one small kernel per signature, as cjit.numpy).
"""
from __future__ import annotations

from ._dtypes import default_float, requested_dtype

import math

from ._dtypes import canonical_dtype
from ._stable import _float, _stable_max, logsumexp, sigmoid
from .numpy._core import _lift, _norm_axes, _op, _operand, _reshape_t
from .numpy._elementwise import (add, clip, divide, exp, expm1, greater, greater_equal, isnan,
                                 less_equal, log, maximum, minimum, multiply, negative, sqrt,
                                 square, subtract, tanh, where)
from .numpy._manipulation import split
from .numpy._math import logaddexp
from .numpy._reductions import mean as mean_, sum as sum_

__all__ = ["relu", "sigmoid", "softmax", "log_softmax", "logsumexp", "gelu", "one_hot",
           "softplus", "log_sigmoid", "silu", "swish", "elu", "selu", "celu", "leaky_relu",
           "relu6", "hard_tanh", "standardize", "glu", "hard_sigmoid", "hard_silu", "hard_swish",
           "mish", "squareplus", "sparse_plus", "normalize", "initializers"]


@_op("x")
def relu(x):
    """max(x, 0), elementwise (nan stays nan).  Its gradient is 1 where
    x > 0 and 0 elsewhere, at 0 too, as JAX's (maximum's tie rule would
    give 0.5 there)."""
    x = _lift(_operand(x, "relu"))
    if x.dtype.kind not in "f":
        return maximum(x, 0)
    return where(greater(x, 0), x, where(isnan(x), x, 0))


@_op("x")
def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along axis (an int or a tuple), with the max
    subtracted first."""
    x = _float(x, "softmax")
    axes = _norm_axes(axis, x.ndim)
    e = exp(subtract(x, _stable_max(x, axes, keep_inf=True)))
    return divide(e, sum_(e, axis=axes, keepdims=True))


@_op("x")
def log_softmax(x, axis=-1):
    """x - logsumexp(x) along axis, computed stably."""
    x = _float(x, "log_softmax")
    axes = _norm_axes(axis, x.ndim)
    s = subtract(x, _stable_max(x, axes, keep_inf=True))
    return subtract(s, log(sum_(exp(s), axis=axes, keepdims=True)))


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@_op("x")
def gelu(x, approximate=True):
    """Gaussian error linear unit, tanh form:
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).  approximate=False
    (the erf form) raises NotImplementedError until cjit has erf."""
    if not approximate:
        raise NotImplementedError("cjit.nn.gelu(approximate=False) needs erf, which cjit does "
                                  "not have yet; use approximate=True (the tanh form)")
    x = _float(x, "gelu")
    inner = multiply(add(x, multiply(0.044715, multiply(x, multiply(x, x)))),
                         _SQRT_2_OVER_PI)
    return multiply(multiply(x, 0.5), add(tanh(inner), 1.0))


@_op("x")
def one_hot(x, num_classes, *, dtype=None, axis=-1):
    """An array with a new axis of length num_classes that is 1 where the
    index equals x and 0 elsewhere (out-of-range indices give all zeros)."""
    dt = default_float() if dtype is None else canonical_dtype(requested_dtype(dtype, "one_hot"))
    num_classes = int(num_classes)
    if num_classes < 0:
        raise ValueError(f"cjit.nn.one_hot: num_classes must be >= 0, got {num_classes}")
    x = _lift(_operand(x, "one_hot"))
    out_ndim = x.ndim + 1
    ax = axis + out_ndim if axis < 0 else axis
    if not 0 <= ax < out_ndim:
        raise ValueError(f"cjit.nn.one_hot: axis {axis} out of range for a result of rank "
                         f"{out_ndim}")
    shape = tuple(x.shape)
    out_shape = shape[:ax] + (num_classes,) + shape[ax:]
    xk = _reshape_t(x, shape[:ax] + (1,) + shape[ax:])
    t = x.trace
    idx = t.apply("iota", shape=out_shape, axis=ax, dtype="int64")
    hit = t.apply("eq", xk, idx)
    return t.apply("cast", hit, dtype=dt.name)


@_op("x")
def softplus(x):
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), without overflow."""
    x = _float(x, "softplus")
    return logaddexp(x, 0.0)


@_op("x")
def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x)."""
    x = _float(x, "log_sigmoid")
    return negative(logaddexp(negative(x), 0.0))


@_op("x")
def silu(x):
    """x * sigmoid(x) (also called swish)."""
    x = _float(x, "silu")
    return multiply(x, sigmoid._cjit_impl(x))


swish = silu


def _elu_core(x, alpha):
    # expm1 of a non-positive input only: the branch not taken stays finite
    neg = expm1(minimum(x, 0.0))
    return where(greater(x, 0), x, multiply(alpha, neg))


@_op("x")
def elu(x, alpha=1.0):
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""
    return _elu_core(_float(x, "elu"), float(alpha))


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@_op("x")
def selu(x):
    """scale * elu(x, alpha) with the self-normalizing constants."""
    return multiply(_elu_core(_float(x, "selu"), _SELU_ALPHA), _SELU_SCALE)


@_op("x")
def celu(x, alpha=1.0):
    """max(x, 0) + min(0, alpha * (exp(x / alpha) - 1))."""
    x = _float(x, "celu")
    alpha = float(alpha)
    return where(greater(x, 0), x,
                     multiply(alpha, expm1(divide(minimum(x, 0.0), alpha))))


@_op("x")
def leaky_relu(x, negative_slope=0.01):
    """x for x >= 0, negative_slope * x otherwise."""
    x = _float(x, "leaky_relu")
    return where(greater_equal(x, 0), x, multiply(x, float(negative_slope)))


@_op("x")
def relu6(x):
    """min(max(x, 0), 6)."""
    return minimum(relu._cjit_impl(x), 6)


@_op("x")
def hard_tanh(x):
    """x clipped to [-1, 1]."""
    return clip(_float(x, "hard_tanh"), -1.0, 1.0)


@_op("x")
def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5):
    """(x - mean) / sqrt(variance + epsilon) along axis (mean and variance
    computed when not given)."""
    x = _float(x, "standardize")
    axes = _norm_axes(axis, x.ndim)
    if mean is None:
        mean = mean_(x, axis=axes, keepdims=True)
    if variance is None:
        d = subtract(x, mean)
        variance = mean_(multiply(d, d), axis=axes, keepdims=True)
    return divide(subtract(x, mean), sqrt(add(variance, float(epsilon))))


@_op("x")
def glu(x, axis=-1):
    """Gated linear unit: a * sigmoid(b) for x split in halves a, b along axis."""
    x = _lift(_operand(x, "glu"))
    a, b = split(x, 2, axis=axis)
    return multiply(a, sigmoid._cjit_impl(b))


@_op("x")
def hard_sigmoid(x):
    """relu6(x + 3) / 6."""
    x = _float(x, "hard_sigmoid")
    return divide(clip(add(x, 3.0), 0.0, 6.0), 6.0)


@_op("x")
def hard_silu(x):
    """x * hard_sigmoid(x) (also called hard_swish)."""
    x = _float(x, "hard_silu")
    return multiply(x, hard_sigmoid._cjit_impl(x))


hard_swish = hard_silu


@_op("x")
def mish(x):
    """x * tanh(softplus(x))."""
    x = _float(x, "mish")
    return multiply(x, tanh(softplus._cjit_impl(x)))


@_op("x")
def squareplus(x, b=4.0):
    """(x + sqrt(x**2 + b)) / 2, a smooth relu."""
    x = _float(x, "squareplus")
    return divide(add(x, sqrt(add(multiply(x, x), float(b)))), 2.0)


@_op("x")
def sparse_plus(x):
    """0 for x <= -1, (x + 1)**2 / 4 for |x| < 1, x for x >= 1."""
    x = _float(x, "sparse_plus")
    mid = divide(square(add(x, 1.0)), 4.0)
    return where(less_equal(x, -1.0), 0.0, where(greater_equal(x, 1.0), x, mid))


def normalize(x, axis=-1, mean=None, variance=None, epsilon=1e-5):
    """The old name of standardize."""
    return standardize(x, axis, mean, variance, epsilon)


from . import _initializers as initializers  # noqa: E402  (cjit.nn.initializers)
