"""The Laplace distribution (as jax.scipy.stats.laplace)."""
from __future__ import annotations

import math

from ._common import floats, standardized
from ...numpy._core import _op
from ...numpy._elementwise import abs, exp, log, where

__all__ = ["logpdf", "pdf", "cdf", "ppf"]


@_op("x", "loc", "scale")
def logpdf(x, loc=0, scale=1):
    z, scale = standardized("laplace.logpdf", x, loc, scale)
    return -abs(z) - log(scale) - math.log(2.0)


@_op("x", "loc", "scale")
def pdf(x, loc=0, scale=1):
    return exp(logpdf(x, loc, scale))


@_op("x", "loc", "scale")
def cdf(x, loc=0, scale=1):
    z, _ = standardized("laplace.cdf", x, loc, scale)
    neg = z < 0
    h = 0.5 * exp(where(neg, z, -z))
    return where(neg, h, 1.0 - h)


@_op("q", "loc", "scale")
def ppf(q, loc=0, scale=1):
    q, loc, scale = floats("laplace.ppf", q, loc, scale)
    low = q < 0.5
    z = where(low, log(2.0 * q), -log(2.0 - 2.0 * q))
    return loc + scale * z
