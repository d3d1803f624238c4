"""The multivariate normal distribution (as jax.scipy.stats.
multivariate_normal): logpdf and pdf.

The covariance may be a scalar (s * I), a vector (a diagonal covariance),
traced or not, or a concrete 2-D matrix (a NumPy array or nested lists): its
Cholesky factor and that factor's inverse are then computed once by NumPy at
trace time and enter the program as constants (x and mean stay
differentiable).  A traced full covariance is factored in the program
(cjit.numpy.linalg.cholesky, then a triangular solve, as JAX's); one that is
not positive definite gives nan there, as in JAX."""
from __future__ import annotations

import numpy as np

from ..._cjit import Tracer
from ..linalg import solve_triangular
from ._common import LOG_2PI, floats
from ...numpy._core import _op
from ...numpy._elementwise import astype, exp, log
from ...numpy._linalg import diagonal, matmul
from ...numpy._manipulation import broadcast_shapes, broadcast_to, reshape, shape
from ...numpy._reductions import sum as sum_
from ...numpy import linalg

__all__ = ["logpdf", "pdf"]


def logpdf(x, mean=None, cov=1, allow_singular=False):
    """log density at x (..., k) of N(mean, cov)."""
    who = "multivariate_normal.logpdf"
    if allow_singular:
        raise NotImplementedError(f"cjit.scipy.stats.{who}: allow_singular=True is not "
                                  f"supported")
    if mean is None:
        mean = 0.0
    if not isinstance(cov, Tracer):
        cov = np.asarray(cov)
        if cov.dtype.kind not in "biuf":
            raise TypeError(f"cjit.scipy.stats.{who}: cov must be numeric, got dtype "
                            f"{cov.dtype}")
    if cov.ndim > 2:
        raise ValueError(f"cjit.scipy.stats.{who}: cov must be a scalar, a vector (a diagonal "
                         f"covariance) or a matrix, got shape {tuple(cov.shape)}")
    if cov.ndim == 2:
        if isinstance(cov, Tracer):
            return _logpdf_traced_full(x, mean, cov)
        return _logpdf_full(who, x, mean, cov)
    return _logpdf_diag(x, mean, cov)


@_op("x", "mean", "var")
def _logpdf_diag(x, mean, var):
    who = "multivariate_normal.logpdf"
    x, mean, var = floats(who, x, mean, var)
    if x.ndim == 0:
        x = reshape(x, (1,))
    k = x.shape[-1]
    if var.ndim == 0:
        var = broadcast_to(var, (k,))
    elif var.shape[0] != k:
        raise ValueError(f"cjit.scipy.stats.{who}: cov has {var.shape[0]} entries but x has "
                         f"{k} dimensions")
    d = x - mean
    maha = sum_(d * d / var, axis=-1)
    logdet = sum_(log(var))
    return -0.5 * (maha + logdet + k * LOG_2PI)


def _logpdf_full(who, x, mean, cov):
    cov = np.asarray(cov, dtype=np.float64)
    k = cov.shape[0]
    if cov.shape != (k, k):
        raise ValueError(f"cjit.scipy.stats.{who}: cov must be square, got shape {cov.shape}")
    try:
        chol = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        raise ValueError(f"cjit.scipy.stats.{who}: cov is not positive definite") from None
    inv_chol_t = np.ascontiguousarray(np.linalg.inv(chol).T)
    logdet = 2.0 * float(np.sum(np.log(np.diag(chol))))
    return _logpdf_factored(x, mean, inv_chol_t, logdet)


@_op("x", "mean", "inv_chol_t", "logdet")
def _logpdf_factored(x, mean, inv_chol_t, logdet):
    who = "multivariate_normal.logpdf"
    x, mean = floats(who, x, mean)
    if x.ndim == 0:
        x = reshape(x, (1,))
    k = inv_chol_t.shape[0]
    if x.shape[-1] != k:
        raise ValueError(f"cjit.scipy.stats.{who}: cov is {k}x{k} but x has {x.shape[-1]} "
                         f"dimensions")
    d = x - mean
    y = matmul(d, astype(inv_chol_t, d.dtype))     # rows of L^-1 (x - mean)
    maha = sum_(y * y, axis=-1)
    return -0.5 * (maha + logdet + k * LOG_2PI)


@_op("x", "mean", "cov")
def _logpdf_traced_full(x, mean, cov):
    """With L = cholesky(cov): -(|L^-1 (x - mean)|^2 + 2 sum(log diag L) + k log 2 pi) / 2."""
    who = "multivariate_normal.logpdf"
    x, mean, cov = floats(who, x, mean, cov)
    if x.ndim == 0:
        x = reshape(x, (1,))
    k = x.shape[-1]
    if tuple(cov.shape) != (k, k):
        raise ValueError(f"cjit.scipy.stats.{who}: cov must be {k}x{k} for x of {k} dimensions, got "
                         f"shape {tuple(cov.shape)}")
    chol = linalg.cholesky(cov)
    d = broadcast_to(x - mean, tuple(broadcast_shapes(tuple(x.shape), tuple(shape(mean)))))
    lead = tuple(d.shape[:-1])
    cols = reshape(d, (-1, k)).T                        # one column per point
    y = solve_triangular(chol, cols, lower=True)
    maha = reshape(sum_(y * y, axis=0), lead)
    logdet = 2.0 * sum_(log(diagonal(chol)))
    return -0.5 * (maha + logdet + k * LOG_2PI)


def pdf(x, mean=None, cov=1, allow_singular=False):
    """density at x (..., k) of N(mean, cov)."""
    return exp(logpdf(x, mean, cov, allow_singular))

