"""The stable sigmoid and logsumexp that cjit.nn and cjit.scipy.special
share (cjit.nn.sigmoid is scipy's expit, cjit.nn.logsumexp the core of
cjit.scipy.special.logsumexp), below both: the max subtracted first, no
exp that can overflow."""
from __future__ import annotations

from ._dtypes import default_float
from .numpy._core import _lift, _norm_axes, _op, _operand, _reshape_t
from .numpy._elementwise import (add, astype, divide, exp, greater, greater_equal, isfinite, log,
                                 negative, stop_gradient, subtract, where)
from .numpy._reductions import max as max_, sum as sum_

__all__ = ["sigmoid", "logsumexp"]


@_op("x")
def sigmoid(x):
    """1 / (1 + exp(-x)), computed without overflow: with e = exp(-|x|),
    1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0.  -|x| is taken as a
    select, not abs, so that the gradient at 0 is 1/4 (abs has slope 0
    there)."""
    x = _lift(_operand(x, "sigmoid"))
    e = exp(where(greater_equal(x, 0), negative(x), x))
    d = add(e, 1.0)
    return where(greater_equal(x, 0), divide(1.0, d), divide(e, d))


def _stable_max(x, axes, keep_inf=False):
    """The max over axes (kept as size-1 dims), with infinities replaced by 0
    so that x - max never computes inf - inf.  keep_inf keeps a max of +inf:
    softmax and log_softmax of a row holding +inf are nan everywhere in the
    row (as JAX's and SciPy's softmax), and x - inf makes them so."""
    m = max_(x, axis=axes, keepdims=True)
    finite = isfinite(m)
    if keep_inf:
        finite = finite | greater(m, 0.0)
    # the shift cancels out of every result, so its gradient is not needed
    return stop_gradient(where(finite, m, 0.0))


def _float(x, who):
    x = _lift(_operand(x, who))
    if x.dtype.kind != "f":
        x = astype(x, default_float())
    return x


@_op("a")
def logsumexp(a, axis=None, keepdims=False):
    """log(sum(exp(a))) over axis (None: all), with the max subtracted first."""
    x = _float(a, "logsumexp")
    axes = _norm_axes(axis, x.ndim)
    m = _stable_max(x, axes)
    s = sum_(exp(subtract(x, m)), axis=axes, keepdims=True)
    r = add(log(s), m)
    if not keepdims:
        r = _reshape_t(r, tuple(d for i, d in enumerate(x.shape) if i not in axes))
    return r
