"""The gamma distribution (as jax.scipy.stats.gamma): logpdf and pdf."""
from __future__ import annotations

from .. import special
from ._common import floats, neg_inf_where
from ...numpy._core import _op
from ...numpy._elementwise import exp, log, where

__all__ = ["logpdf", "pdf"]


@_op("x", "a", "loc", "scale")
def logpdf(x, a, loc=0, scale=1):
    x, a, loc, scale = floats("gamma.logpdf", x, a, loc, scale)
    z = (x - loc) / scale
    zs = where(z < 0, 1.0, z)
    r = special.xlogy(a - 1.0, zs) - zs - special.gammaln(a) - log(scale)
    return neg_inf_where(z < 0, r)


@_op("x", "a", "loc", "scale")
def pdf(x, a, loc=0, scale=1):
    return exp(logpdf(x, a, loc, scale))
