"""Port of HIPS/autograd examples/neural_net.py to cjit.

Status: runs with small edits.
Changes:
- imports (autograd -> cjit);
- ``autograd.misc.flatten`` -> ``cjit.flatten_util.ravel_pytree`` (added for
  this port; JAX's name for the same thing);
- ``autograd.misc.optimizers.adam`` -> the stand-in in _autograd_compat
  (same update rule, through cjit.example_libraries.optimizers.adam);
- the objective took the iteration number and sliced the training set
  with ``iter % num_batches``.  cjit's grad traces every argument, and a
  traced int cannot pick a Python slice (``Tracer % int`` is not even
  defined), so the batch is sliced outside and passed in;
- MNIST -> the 8x8 digits (64 inputs).
Model (tanh MLP, log-softmax), loss (L2-penalised log posterior) and
optimizer (Adam, step 0.001) are the original's.
"""
import numpy

import cjit.numpy as np                         # was: import autograd.numpy as np
import numpy.random as npr                      # was: import autograd.numpy.random as npr
from cjit import grad                           # was: from autograd import grad
from cjit.flatten_util import ravel_pytree      # was: from autograd.misc.flatten import flatten
from cjit.scipy.special import logsumexp        # was: from autograd.scipy.special import logsumexp

from _autograd_compat import adam               # was: from autograd.misc.optimizers import adam
import _data


def init_random_params(scale, layer_sizes, rs=None):
    """A (weights, biases) pair per layer."""
    rs = rs if rs is not None else npr.RandomState(0)
    return [(scale * rs.randn(m, n), scale * rs.randn(n))
            for m, n in zip(layer_sizes[:-1], layer_sizes[1:])]


def neural_net_predict(params, inputs):
    """Class log-probabilities of a tanh network for an (N, D) input."""
    for W, b in params:
        outputs = np.dot(inputs, W) + b
        inputs = np.tanh(outputs)
    return outputs - logsumexp(outputs, axis=1, keepdims=True)


def l2_norm(params):
    flattened, _ = ravel_pytree(params)
    return np.dot(flattened, flattened)


def log_posterior(params, inputs, targets, L2_reg):
    log_prior = -L2_reg * l2_norm(params)
    log_lik = np.sum(neural_net_predict(params, inputs) * targets)
    return log_prior + log_lik


def accuracy(params, inputs, targets):
    target_class = np.argmax(targets, axis=1)
    predicted_class = np.argmax(neural_net_predict(params, inputs), axis=1)
    return np.mean(predicted_class == target_class)


def main(layer_sizes=(64, 200, 100, 10), L2_reg=1.0, param_scale=0.1, batch_size=256,
         num_epochs=5, step_size=0.001, data=None, verbose=True):
    train_images, train_labels, test_images, test_labels = data or _data.digits()
    init_params = init_random_params(param_scale, list(layer_sizes))
    num_batches = int(numpy.ceil(len(train_images) / batch_size))

    def batch_indices(it):
        idx = it % num_batches
        return slice(idx * batch_size, (idx + 1) * batch_size)

    # was: objective(params, iter) slicing the data with iter inside the traced function
    def objective(params, inputs, targets):
        return -log_posterior(params, inputs, targets, L2_reg)

    objective_grad_on_batch = grad(objective)

    def objective_grad(params, it):
        idx = batch_indices(it)
        return objective_grad_on_batch(params, train_images[idx], train_labels[idx])

    history = []

    def print_perf(params, it, gradient):
        if it % num_batches == 0:
            train_acc = float(accuracy(params, train_images, train_labels))
            test_acc = float(accuracy(params, test_images, test_labels))
            history.append((it, train_acc, test_acc,
                            float(objective(params, train_images, train_labels))))
            if verbose:
                print(f"{it // num_batches:15}|{train_acc:20}|{test_acc:20}")

    if verbose:
        print("     Epoch     |    Train accuracy  |       Test accuracy  ")
    params = adam(objective_grad, init_params, step_size=step_size,
                  num_iters=num_epochs * num_batches, callback=print_perf)
    return params, history, objective


if __name__ == "__main__":
    main()
