"""cjit.scipy.stats: distributions' densities and distribution functions on
traced values (as jax.scipy.stats), built on cjit.scipy.special."""
from . import (bernoulli, beta, expon, gamma, laplace, logistic,  # noqa: F401
               multivariate_normal, norm, poisson, t, uniform)

__all__ = ["bernoulli", "beta", "expon", "gamma", "laplace", "logistic", "multivariate_normal",
           "norm", "poisson", "t", "uniform"]
