"""The normal distribution (as jax.scipy.stats.norm)."""
from __future__ import annotations

from .. import special
from ._common import LOG_2PI, floats, standardized
from ...numpy._core import _op
from ...numpy._elementwise import exp, log

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


@_op("x", "loc", "scale")
def logpdf(x, loc=0, scale=1):
    z, scale = standardized("norm.logpdf", x, loc, scale)
    return -0.5 * (z * z) - log(scale) - 0.5 * LOG_2PI


@_op("x", "loc", "scale")
def pdf(x, loc=0, scale=1):
    return exp(logpdf(x, loc, scale))


@_op("x", "loc", "scale")
def cdf(x, loc=0, scale=1):
    z, _ = standardized("norm.cdf", x, loc, scale)
    return special.ndtr(z)


@_op("x", "loc", "scale")
def logcdf(x, loc=0, scale=1):
    z, _ = standardized("norm.logcdf", x, loc, scale)
    return special.log_ndtr(z)


@_op("x", "loc", "scale")
def sf(x, loc=0, scale=1):
    z, _ = standardized("norm.sf", x, loc, scale)
    return special.ndtr(-z)


@_op("x", "loc", "scale")
def logsf(x, loc=0, scale=1):
    z, _ = standardized("norm.logsf", x, loc, scale)
    return special.log_ndtr(-z)


@_op("q", "loc", "scale")
def ppf(q, loc=0, scale=1):
    q, loc, scale = floats("norm.ppf", q, loc, scale)
    return loc + scale * special.ndtri(q)


@_op("q", "loc", "scale")
def isf(q, loc=0, scale=1):
    q, loc, scale = floats("norm.isf", q, loc, scale)
    return loc - scale * special.ndtri(q)
