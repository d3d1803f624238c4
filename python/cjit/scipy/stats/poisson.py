"""The Poisson distribution (as jax.scipy.stats.poisson)."""
from __future__ import annotations

from .. import special
from ._common import floats, neg_inf_where
from ...numpy._core import _op
from ...numpy._elementwise import exp, floor, logical_or, where

__all__ = ["logpmf", "pmf"]


@_op("k", "mu", "loc")
def logpmf(k, mu, loc=0):
    """k log(mu) - mu - log(k!), -inf off the non-negative integers."""
    k, mu, loc = floats("poisson.logpmf", k, mu, loc)
    k = k - loc
    bad = logical_or(k < 0, k != floor(k))
    ks = where(bad, 0.0, k)
    return neg_inf_where(bad, special.xlogy(ks, mu) - special.gammaln(ks + 1.0) - mu)


@_op("k", "mu", "loc")
def pmf(k, mu, loc=0):
    return exp(logpmf(k, mu, loc))
