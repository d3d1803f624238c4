"""cjit.scipy.special: logsumexp, expit, logit, xlogy, xlog1py, from
cjit.numpy's primitives (traced or eager, differentiable).

erf, erfc and gammaln are not here yet: composed from exp/log/pow their
rational approximations would need many terms per branch and careful
cancellation handling to reach float64 accuracy; they are listed as missing
(a C primitive each would be the clean way)."""
from __future__ import annotations

from .. import numpy as cnp
from ..nn import logsumexp as _logsumexp
from ..nn import sigmoid as _sigmoid
from ..numpy import _lift, _op, _operand

__all__ = ["logsumexp", "expit", "logit", "xlogy", "xlog1py"]


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """log(sum(exp(a))) over axis, stably (b= and return_sign= are not
    supported)."""
    if b is not None or return_sign:
        raise NotImplementedError("cjit.scipy.special.logsumexp: b= and return_sign= are not "
                                  "supported")
    return _logsumexp(a, axis=axis, keepdims=keepdims)


def expit(x):
    """1 / (1 + exp(-x)) (cjit.nn.sigmoid)."""
    return _sigmoid(x)


@_op("p")
def logit(p):
    """log(p / (1 - p)), as log(p) - log1p(-p)."""
    x = _lift(_operand(p, "logit"))
    if x.dtype.kind != "f":
        x = cnp.astype(x, "float64")
    return cnp.subtract(cnp.log(x), cnp.log1p(cnp.negative(x)))


def _xlog(who, x, y, f):
    x = _lift(_operand(x, who))
    y = _lift(_operand(y, who))
    if x.dtype.kind != "f":
        x = cnp.astype(x, "float64")
    if y.dtype.kind != "f":
        y = cnp.astype(y, "float64")
    # where x == 0 (and y is not nan) the result is 0 and the log's input
    # is made harmless, so that neither the value nor the gradient sees log(0)
    zero = cnp.logical_and(cnp.equal(x, 0), cnp.logical_not(cnp.isnan(y)))
    safe = cnp.where(zero, 1.0 if f is cnp.log else 0.0, y)
    return cnp.where(zero, 0.0, cnp.multiply(x, f(safe)))


@_op("x", "y")
def xlogy(x, y):
    """x * log(y), 0 where x == 0 (unless y is nan)."""
    return _xlog("xlogy", x, y, cnp.log)


@_op("x", "y")
def xlog1py(x, y):
    """x * log1p(y), 0 where x == 0 (unless y is nan)."""
    return _xlog("xlog1py", x, y, cnp.log1p)
