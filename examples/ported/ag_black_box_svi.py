"""Port of HIPS/autograd examples/black_box_svi.py to cjit.

Status: blocked by a missing module; runs with edits.
First missing feature: ``scipy.stats.norm`` (``cjit.scipy.stats`` does not
exist).  A second, silent problem: the objective draws its Monte Carlo
samples with ``rs.randn`` inside the differentiated function.  autograd
runs that draw at every call; cjit traces the function once and caches it,
so the draw made during the trace becomes a constant and every later
gradient reuses the same samples, with no error.
Changes:
- imports; ``norm.logpdf`` -> a three-line Gaussian log-density here;
- the samples are drawn outside the traced function (from the same
  RandomState, one draw per objective or gradient call, as in the original)
  and passed in as an argument;
- ``autograd.misc.optimizers.adam`` -> the stand-in in _autograd_compat;
- plots dropped.
The variational family (diagonal Gaussian, reparameterised), the objective
(negative ELBO with the exact entropy) and Adam (step 0.1) are the original's.
"""
import math

import cjit.numpy as np                         # was: import autograd.numpy as np
import numpy.random as npr                      # was: import autograd.numpy.random as npr
from cjit import grad                           # was: from autograd import grad

from _autograd_compat import adam               # was: from autograd.misc.optimizers import adam

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def norm_logpdf(x, loc=0.0, scale=1.0):         # was: from autograd.scipy.stats import norm
    z = (x - loc) / scale
    return -0.5 * z * z - np.log(scale) - _LOG_SQRT_2PI


def black_box_variational_inference(logprob, D, num_samples):
    """Stochastic variational inference with reparameterised gradients
    (Ranganath et al. 2014; Kingma & Welling's trick)."""

    def unpack_params(params):
        return params[:D], params[D:]

    def gaussian_entropy(log_std):
        return 0.5 * D * (1.0 + np.log(2 * np.pi)) + np.sum(log_std)

    rs = npr.RandomState(0)

    # was: the samples drawn here, inside the function that grad traces
    def objective_given_noise(params, noise, t):
        mean, log_std = unpack_params(params)
        samples = noise * np.exp(log_std) + mean
        lower_bound = gaussian_entropy(log_std) + np.mean(logprob(samples, t))
        return -lower_bound

    noise_grad = grad(objective_given_noise)

    def variational_objective(params, t):
        return objective_given_noise(params, rs.randn(num_samples, D), t)

    def gradient(params, t):
        return noise_grad(params, rs.randn(num_samples, D), t)

    return variational_objective, gradient, unpack_params


def log_density(x, t):
    """Neal's funnel in two dimensions."""
    mu, log_sigma = x[:, 0], x[:, 1]
    sigma_density = norm_logpdf(log_sigma, 0, 1.35)
    mu_density = norm_logpdf(mu, 0, np.exp(log_sigma))
    return sigma_density + mu_density


def main(num_samples=2000, num_iters=2000, step_size=0.1, verbose=True):
    D = 2
    objective, gradient, unpack_params = black_box_variational_inference(
        log_density, D, num_samples=num_samples)
    bounds = []

    def callback(params, t, g):
        bounds.append(-float(objective(params, t)))
        if verbose and t % 100 == 0:
            print(f"Iteration {t} lower bound {bounds[-1]}")

    init_var_params = np.concatenate([-1 * np.ones(D), -5 * np.ones(D)])
    params = adam(gradient, init_var_params, step_size=step_size, num_iters=num_iters,
                  callback=callback)
    return params, bounds, (objective, gradient, unpack_params)


if __name__ == "__main__":
    main()
