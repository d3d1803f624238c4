"""The exponential distribution (as jax.scipy.stats.expon)."""
from __future__ import annotations

from ... import numpy as cnp
from ...numpy import _op
from ._common import floats, neg_inf_where, standardized

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]


@_op("x", "loc", "scale")
def logpdf(x, loc=0, scale=1):
    z, scale = standardized("expon.logpdf", x, loc, scale)
    return neg_inf_where(z < 0, -z - cnp.log(scale))


@_op("x", "loc", "scale")
def pdf(x, loc=0, scale=1):
    return cnp.exp(logpdf(x, loc, scale))


@_op("x", "loc", "scale")
def cdf(x, loc=0, scale=1):
    z, _ = standardized("expon.cdf", x, loc, scale)
    return -cnp.expm1(-cnp.maximum(z, 0.0))


@_op("x", "loc", "scale")
def logcdf(x, loc=0, scale=1):
    return cnp.log(cdf(x, loc, scale))


@_op("x", "loc", "scale")
def sf(x, loc=0, scale=1):
    return cnp.exp(logsf(x, loc, scale))


@_op("x", "loc", "scale")
def logsf(x, loc=0, scale=1):
    z, _ = standardized("expon.logsf", x, loc, scale)
    return -cnp.maximum(z, 0.0)


@_op("q", "loc", "scale")
def ppf(q, loc=0, scale=1):
    q, loc, scale = floats("expon.ppf", q, loc, scale)
    return loc - scale * cnp.log1p(-q)
