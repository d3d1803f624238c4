"""Student's t distribution (as jax.scipy.stats.t): logpdf and pdf."""
from __future__ import annotations

import math

from .. import special
from ._common import floats
from ...numpy._core import _op
from ...numpy._elementwise import exp, log, log1p

__all__ = ["logpdf", "pdf"]


@_op("x", "df", "loc", "scale")
def logpdf(x, df, loc=0, scale=1):
    x, df, loc, scale = floats("t.logpdf", x, df, loc, scale)
    z = (x - loc) / scale
    half = 0.5 * (df + 1.0)
    return (special.gammaln(half) - special.gammaln(0.5 * df) - 0.5 * log(df * math.pi)
            - log(scale) - half * log1p(z * z / df))


@_op("x", "df", "loc", "scale")
def pdf(x, df, loc=0, scale=1):
    return exp(logpdf(x, df, loc, scale))
