"""The beta distribution (as jax.scipy.stats.beta): logpdf and pdf."""
from __future__ import annotations

from .. import special
from ._common import floats, neg_inf_where
from ...numpy._core import _op
from ...numpy._elementwise import exp, log, logical_or, where

__all__ = ["logpdf", "pdf"]


@_op("x", "a", "b", "loc", "scale")
def logpdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = floats("beta.logpdf", x, a, b, loc, scale)
    z = (x - loc) / scale
    outside = logical_or(z < 0, z > 1)
    zs = where(outside, 0.5, z)
    lbeta = special.gammaln(a) + special.gammaln(b) - special.gammaln(a + b)
    r = (special.xlogy(a - 1.0, zs) + special.xlog1py(b - 1.0, -zs) - lbeta
         - log(scale))
    return neg_inf_where(outside, r)


@_op("x", "a", "b", "loc", "scale")
def pdf(x, a, b, loc=0, scale=1):
    return exp(logpdf(x, a, b, loc, scale))
