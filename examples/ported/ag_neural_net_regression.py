"""Port of HIPS/autograd examples/neural_net_regression.py to cjit.

Status: blocked by a missing module; runs with small edits.
First missing feature: ``scipy.stats.norm`` (``cjit.scipy.stats``).
Changes: imports; ``norm.logpdf`` -> the Gaussian log-density of the
black_box_svi port; ``autograd.misc.flatten`` -> ``cjit.flatten_util.
ravel_pytree``; ``adam`` -> the stand-in in _autograd_compat; plots dropped.
Model (tanh MLP 1-4-4-1), objective (Gaussian likelihood plus a Gaussian
prior on the weights) and Adam (step 0.01) are the original's.
"""
import cjit.numpy as np                         # was: import autograd.numpy as np
import numpy.random as npr                      # was: import autograd.numpy.random as npr
from cjit import grad                           # was: from autograd import grad
from cjit.flatten_util import ravel_pytree      # was: from autograd.misc import flatten

from _autograd_compat import adam               # was: from autograd.misc.optimizers import adam
from ag_black_box_svi import norm_logpdf        # was: from autograd.scipy.stats import norm


def init_random_params(scale, layer_sizes, rs=None):
    rs = rs if rs is not None else npr.RandomState(0)
    return [(rs.randn(insize, outsize) * scale, rs.randn(outsize) * scale)
            for insize, outsize in zip(layer_sizes[:-1], layer_sizes[1:])]


def nn_predict(params, inputs, nonlinearity=np.tanh):
    for W, b in params:
        outputs = np.dot(inputs, W) + b
        inputs = nonlinearity(outputs)
    return outputs


def log_gaussian(params, scale):
    flat_params, _ = ravel_pytree(params)
    return np.sum(norm_logpdf(flat_params, 0, scale))


def logprob(weights, inputs, targets, noise_scale=0.1):
    predictions = nn_predict(weights, inputs)
    return np.sum(norm_logpdf(predictions, targets, noise_scale))


def build_toy_dataset(n_data=80, noise_std=0.1):
    rs = npr.RandomState(0)
    inputs = np.concatenate([np.linspace(0, 3, num=n_data // 2),
                             np.linspace(6, 8, num=n_data // 2)])
    targets = np.cos(inputs) + rs.randn(n_data) * noise_std
    inputs = (inputs - 4.0) / 2.0
    return inputs[:, np.newaxis], targets[:, np.newaxis] / 2.0


def main(init_scale=0.1, weight_prior_variance=10.0, num_iters=1000, step_size=0.01,
         verbose=True):
    init_params = init_random_params(init_scale, layer_sizes=[1, 4, 4, 1])
    inputs, targets = build_toy_dataset()

    def objective(weights, t):
        return -logprob(weights, inputs, targets) - log_gaussian(weights, weight_prior_variance)

    values = []

    def callback(params, t, g):
        values.append(float(objective(params, t)))
        if verbose and t % 100 == 0:
            print(f"Iteration {t} log likelihood {-values[-1]}")

    params = adam(grad(objective), init_params, step_size=step_size, num_iters=num_iters,
                  callback=callback)
    return params, values, objective, init_params


if __name__ == "__main__":
    main()
