"""The logistic distribution (as jax.scipy.stats.logistic)."""
from __future__ import annotations

from .. import special
from ._common import floats, standardized
from ...numpy._core import _op
from ...numpy._elementwise import exp, log, log1p, where

__all__ = ["logpdf", "pdf", "cdf", "sf", "ppf", "isf"]


@_op("x", "loc", "scale")
def logpdf(x, loc=0, scale=1):
    z, scale = standardized("logistic.logpdf", x, loc, scale)
    a = where(z < 0, -z, z)
    return -a - 2.0 * log1p(exp(-a)) - log(scale)


@_op("x", "loc", "scale")
def pdf(x, loc=0, scale=1):
    return exp(logpdf(x, loc, scale))


@_op("x", "loc", "scale")
def cdf(x, loc=0, scale=1):
    z, _ = standardized("logistic.cdf", x, loc, scale)
    return special.expit(z)


@_op("x", "loc", "scale")
def sf(x, loc=0, scale=1):
    z, _ = standardized("logistic.sf", x, loc, scale)
    return special.expit(-z)


@_op("q", "loc", "scale")
def ppf(q, loc=0, scale=1):
    q, loc, scale = floats("logistic.ppf", q, loc, scale)
    return loc + scale * special.logit(q)


@_op("q", "loc", "scale")
def isf(q, loc=0, scale=1):
    q, loc, scale = floats("logistic.isf", q, loc, scale)
    return loc - scale * special.logit(q)
