"""The exponential distribution (as jax.scipy.stats.expon)."""
from __future__ import annotations

from ._common import floats, neg_inf_where, standardized
from ...numpy._core import _op
from ...numpy._elementwise import exp, expm1, log, log1p, maximum

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]


@_op("x", "loc", "scale")
def logpdf(x, loc=0, scale=1):
    z, scale = standardized("expon.logpdf", x, loc, scale)
    return neg_inf_where(z < 0, -z - log(scale))


@_op("x", "loc", "scale")
def pdf(x, loc=0, scale=1):
    return exp(logpdf(x, loc, scale))


@_op("x", "loc", "scale")
def cdf(x, loc=0, scale=1):
    z, _ = standardized("expon.cdf", x, loc, scale)
    return -expm1(-maximum(z, 0.0))


@_op("x", "loc", "scale")
def logcdf(x, loc=0, scale=1):
    return log(cdf(x, loc, scale))


@_op("x", "loc", "scale")
def sf(x, loc=0, scale=1):
    return exp(logsf(x, loc, scale))


@_op("x", "loc", "scale")
def logsf(x, loc=0, scale=1):
    z, _ = standardized("expon.logsf", x, loc, scale)
    return -maximum(z, 0.0)


@_op("q", "loc", "scale")
def ppf(q, loc=0, scale=1):
    q, loc, scale = floats("expon.ppf", q, loc, scale)
    return loc - scale * log1p(-q)
