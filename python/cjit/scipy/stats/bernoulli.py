"""The Bernoulli distribution (as jax.scipy.stats.bernoulli)."""
from __future__ import annotations

from .. import special
from ._common import floats, neg_inf_where
from ...numpy._core import _op
from ...numpy._elementwise import exp, logical_and, where

__all__ = ["logpmf", "pmf", "cdf"]


@_op("k", "p", "loc")
def logpmf(k, p, loc=0):
    k, p, loc = floats("bernoulli.logpmf", k, p, loc)
    k = k - loc
    r = special.xlogy(k, p) + special.xlog1py(1.0 - k, -p)
    return neg_inf_where(logical_and(k != 0, k != 1), r)


@_op("k", "p", "loc")
def pmf(k, p, loc=0):
    return exp(logpmf(k, p, loc))


@_op("k", "p", "loc")
def cdf(k, p, loc=0):
    k, p, loc = floats("bernoulli.cdf", k, p, loc)
    k = k - loc
    return where(k < 0, 0.0, where(k < 1, 1.0 - p, 1.0))
