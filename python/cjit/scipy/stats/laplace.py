"""The Laplace distribution (as jax.scipy.stats.laplace)."""
from __future__ import annotations

import math

from ... import numpy as cnp
from ...numpy import _op
from ._common import floats, standardized

__all__ = ["logpdf", "pdf", "cdf", "ppf"]


@_op("x", "loc", "scale")
def logpdf(x, loc=0, scale=1):
    z, scale = standardized("laplace.logpdf", x, loc, scale)
    return -cnp.abs(z) - cnp.log(scale) - math.log(2.0)


@_op("x", "loc", "scale")
def pdf(x, loc=0, scale=1):
    return cnp.exp(logpdf(x, loc, scale))


@_op("x", "loc", "scale")
def cdf(x, loc=0, scale=1):
    z, _ = standardized("laplace.cdf", x, loc, scale)
    neg = z < 0
    h = 0.5 * cnp.exp(cnp.where(neg, z, -z))
    return cnp.where(neg, h, 1.0 - h)


@_op("q", "loc", "scale")
def ppf(q, loc=0, scale=1):
    q, loc, scale = floats("laplace.ppf", q, loc, scale)
    low = q < 0.5
    z = cnp.where(low, cnp.log(2.0 * q), -cnp.log(2.0 - 2.0 * q))
    return loc + scale * z
