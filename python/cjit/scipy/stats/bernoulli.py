"""The Bernoulli distribution (as jax.scipy.stats.bernoulli)."""
from __future__ import annotations

from ... import numpy as cnp
from ...numpy import _op
from .. import special
from ._common import floats, neg_inf_where

__all__ = ["logpmf", "pmf", "cdf"]


@_op("k", "p", "loc")
def logpmf(k, p, loc=0):
    k, p, loc = floats("bernoulli.logpmf", k, p, loc)
    k = k - loc
    r = special.xlogy(k, p) + special.xlog1py(1.0 - k, -p)
    return neg_inf_where(cnp.logical_and(k != 0, k != 1), r)


@_op("k", "p", "loc")
def pmf(k, p, loc=0):
    return cnp.exp(logpmf(k, p, loc))


@_op("k", "p", "loc")
def cdf(k, p, loc=0):
    k, p, loc = floats("bernoulli.cdf", k, p, loc)
    k = k - loc
    return cnp.where(k < 0, 0.0, cnp.where(k < 1, 1.0 - p, 1.0))
