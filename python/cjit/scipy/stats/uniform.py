"""The uniform distribution on [loc, loc + scale] (as jax.scipy.stats.uniform)."""
from __future__ import annotations

import math

from ._common import floats
from ...numpy._core import _op
from ...numpy._elementwise import clip, exp, log, logical_and, where

__all__ = ["logpdf", "pdf", "cdf", "ppf"]


@_op("x", "loc", "scale")
def logpdf(x, loc=0, scale=1):
    x, loc, scale = floats("uniform.logpdf", x, loc, scale)
    inside = logical_and(x >= loc, x <= loc + scale)
    return where(inside, -log(scale), -math.inf)


@_op("x", "loc", "scale")
def pdf(x, loc=0, scale=1):
    return exp(logpdf(x, loc, scale))


@_op("x", "loc", "scale")
def cdf(x, loc=0, scale=1):
    x, loc, scale = floats("uniform.cdf", x, loc, scale)
    return clip((x - loc) / scale, 0.0, 1.0)


@_op("q", "loc", "scale")
def ppf(q, loc=0, scale=1):
    q, loc, scale = floats("uniform.ppf", q, loc, scale)
    inside = logical_and(q >= 0.0, q <= 1.0)
    return where(inside, loc + scale * q, math.nan)
