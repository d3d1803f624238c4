"""Port of HIPS/autograd examples/bayesian_neural_net.py to cjit.

Status: runs with edits, through the black_box_svi port (whose Monte Carlo
samples had to move out of the traced function; see there).
Changes: imports (the svi routine from the black_box_svi port);
``autograd.misc.optimizers.adam`` -> the stand-in in _autograd_compat;
plots dropped.  The network (weights sampled per draw, applied with
``einsum("mnd,mdo->mno")``, rbf nonlinearity), the log posterior and Adam
(step 0.1) are the original's.
"""
import cjit.numpy as np                         # was: import autograd.numpy as np
import numpy.random as npr                      # was: import autograd.numpy.random as npr

from _autograd_compat import adam               # was: from autograd.misc.optimizers import adam
from ag_black_box_svi import black_box_variational_inference


def make_nn_funs(layer_sizes, L2_reg, noise_variance, nonlinearity=np.tanh):
    """A multi-layer perceptron vectorised over both the data points and
    the weight samples (one row of ``weights`` per sample)."""
    shapes = list(zip(layer_sizes[:-1], layer_sizes[1:]))
    num_weights = sum((m + 1) * n for m, n in shapes)

    def unpack_layers(weights):
        num_weight_sets = len(weights)
        for m, n in shapes:
            yield (weights[:, :m * n].reshape((num_weight_sets, m, n)),
                   weights[:, m * n:m * n + n].reshape((num_weight_sets, 1, n)))
            weights = weights[:, (m + 1) * n:]

    def predictions(weights, inputs):
        inputs = np.expand_dims(inputs, 0)
        for W, b in unpack_layers(weights):
            outputs = np.einsum("mnd,mdo->mno", inputs, W) + b
            inputs = nonlinearity(outputs)
        return outputs

    def logprob(weights, inputs, targets):
        log_prior = -L2_reg * np.sum(weights ** 2, axis=1)
        preds = predictions(weights, inputs)
        log_lik = -np.sum((preds - targets) ** 2, axis=1)[:, 0] / noise_variance
        return log_prior + log_lik

    return num_weights, predictions, logprob


def build_toy_dataset(n_data=40, noise_std=0.1):
    rs = npr.RandomState(0)
    inputs = np.concatenate([np.linspace(0, 2, num=n_data // 2),
                             np.linspace(6, 8, num=n_data // 2)])
    targets = np.cos(inputs) + rs.randn(n_data) * noise_std
    inputs = (inputs - 4.0) / 4.0
    return inputs.reshape((len(inputs), 1)), targets.reshape((len(targets), 1))


def main(layer_sizes=(1, 20, 20, 1), num_samples=20, num_iters=1000, step_size=0.1,
         verbose=True):
    rbf = lambda x: np.exp(-(x ** 2))
    num_weights, predictions, logprob = make_nn_funs(
        layer_sizes=list(layer_sizes), L2_reg=0.1, noise_variance=0.01, nonlinearity=rbf)
    inputs, targets = build_toy_dataset()
    log_posterior = lambda weights, t: logprob(weights, inputs, targets)
    objective, gradient, unpack_params = black_box_variational_inference(
        log_posterior, num_weights, num_samples=num_samples)
    bounds = []

    def callback(params, t, g):
        bounds.append(-float(objective(params, t)))
        if verbose and t % 50 == 0:
            print(f"Iteration {t} lower bound {bounds[-1]}")

    rs = npr.RandomState(0)
    init_var_params = np.concatenate([rs.randn(num_weights), -5 * np.ones(num_weights)])
    params = adam(gradient, init_var_params, step_size=step_size, num_iters=num_iters,
                  callback=callback)
    return params, bounds, (predictions, logprob, inputs, targets, num_weights)


if __name__ == "__main__":
    main()
