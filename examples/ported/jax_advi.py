"""Port of jax-ml/jax examples/advi.py to cjit.

Status: blocked; runs with edits.
First missing feature: ``cjit.random`` (``random.key(t)``, ``split``,
``normal`` inside the jitted objective).  Also missing: ``cjit.vmap`` (the
ELBO is vmapped over sample keys, the contour grid over points) and
``jax.scipy.stats.norm``.
Changes:
- the standard-normal draws are made with NumPy outside the jitted
  objective (seeded by the step ``t``, as the original seeds its key) and
  passed in; the reparameterised sample is ``mean + exp(log_std) * noise``
  as before;
- vmap -> samples laid out as columns, shape (D, num_samples), so that the
  unchanged ``funnel_log_density`` (which reads ``params[0]`` and
  ``params[1]``) evaluates all samples at once;
- ``norm.logpdf`` -> a Gaussian log-density written here;
- plotting dropped; ``mesh_eval`` kept (jit with static_argnums, linspace,
  meshgrid, stack) on the same column layout; ``X.ravel()`` ->
  ``jnp.ravel(X)`` (a traced value has no ``.ravel()`` method).
Model (Neal's funnel), objective (negative Monte Carlo ELBO with 40
samples) and optimizer (momentum, step 0.1, mass 0.9) are the original's.
"""
import math

import numpy

from cjit import jit, grad                      # was: from jax import jit, grad, vmap; from jax import random
from cjit.example_libraries import optimizers
import cjit.numpy as jnp

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def norm_logpdf(x, loc=0.0, scale=1.0):         # was: jax.scipy.stats.norm.logpdf
    z = (x - loc) / scale
    return -0.5 * z * z - jnp.log(scale) - _LOG_SQRT_2PI


def diag_gaussian_sample(noise, mean, log_std):
    """Samples as columns: noise has shape (D, n).  was: one sample from an rng."""
    return mean[:, None] + jnp.exp(log_std)[:, None] * noise


def diag_gaussian_logpdf(x, mean, log_std):
    """Log-density of each column of x.  was: vmap(norm.logpdf) on one point."""
    return jnp.sum(norm_logpdf(x, mean[:, None], jnp.exp(log_std)[:, None]), axis=0)


def elbo(logprob, noise, mean, log_std):
    sample = diag_gaussian_sample(noise, mean, log_std)
    return logprob(sample) - diag_gaussian_logpdf(sample, mean, log_std)


def batch_elbo(logprob, noise, params):
    return jnp.mean(elbo(logprob, noise, *params))


@jit(static_argnums=(0, 1, 2, 4))
def _mesh_eval(func, x_limits, y_limits, params, num_ticks):
    x = jnp.linspace(*x_limits, num=num_ticks)
    y = jnp.linspace(*y_limits, num=num_ticks)
    X, Y = jnp.meshgrid(x, y)
    # was: jnp.stack([X.ravel(), Y.ravel()]).T, then vmap over rows (Tracer has no .ravel())
    xy_cols = jnp.stack([jnp.ravel(X), jnp.ravel(Y)])
    zs = func(xy_cols, params)
    return X, Y, zs.reshape(X.shape)


def mesh_eval(func, x_limits, y_limits, params, num_ticks=101):
    return _mesh_eval(func, x_limits, y_limits, params, num_ticks)


def funnel_log_density(params):
    return norm_logpdf(params[0], 0, jnp.exp(params[1])) + norm_logpdf(params[1], 0, 1.35)


def draw_noise(t, num_samples, D=2):
    """was: random.split(random.key(t), num_samples), one normal per key."""
    return numpy.random.default_rng(t).standard_normal((D, num_samples))


@jit
def objective(params, noise):
    return -batch_elbo(funnel_log_density, noise, params)


target_dist = lambda x, _: jnp.exp(funnel_log_density(x))
approx_dist = lambda x, params: jnp.exp(diag_gaussian_logpdf(x, *params))


def main(num_samples=40, num_steps=100, verbose=True):
    D = 2
    init_params = (jnp.zeros(D), jnp.zeros(D))
    opt_init, opt_update, get_params = optimizers.momentum(step_size=0.1, mass=0.9)
    opt_state = opt_init(init_params)

    @jit
    def update(i, opt_state, noise):
        params = get_params(opt_state)
        return opt_update(i, grad(objective)(params, noise), opt_state)

    bounds = []
    for t in range(num_steps):
        noise = draw_noise(t, num_samples, D)
        opt_state = update(t, opt_state, noise)
        params = get_params(opt_state)
        bounds.append(-float(objective(params, noise)))
        if verbose and t % 10 == 0:
            print(f"Iteration {t} lower bound {bounds[-1]}")
    return get_params(opt_state), bounds


if __name__ == "__main__":
    main()
