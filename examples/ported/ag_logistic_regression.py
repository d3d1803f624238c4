"""Port of HIPS/autograd examples/logistic_regression.py to cjit.

Status: runs with one small edit.
Changes: imports (autograd -> cjit); ``autograd.test_util.check_grads``
(cjit has no test_util) -> a central-difference check written here.  The
data, model (tanh-form sigmoid), loss (negative log-likelihood) and the 100
plain gradient steps of size 0.01 are the original's; the in-place
``weights -= ...`` on the NumPy array that cjit returns works as it did.
"""
import numpy

import cjit.numpy as np                         # was: import autograd.numpy as np
from cjit import grad                           # was: from autograd import grad


def sigmoid(x):
    return 0.5 * (np.tanh(x) + 1)


def logistic_predictions(weights, inputs):
    return sigmoid(np.dot(inputs, weights))


def training_loss(weights):
    preds = logistic_predictions(weights, inputs)
    label_probabilities = preds * targets + (1 - preds) * (1 - targets)
    return -np.sum(np.log(label_probabilities))


inputs = np.array([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15], [0.52, 0.06, -1.30],
                   [0.74, -2.49, 1.39]])
targets = np.array([True, True, False, True])

training_gradient_fun = grad(training_loss)


def check_grads_fd(f, x, eps=1e-6):
    """Largest gap between grad(f)(x) and central differences of f
    (in place of autograd.test_util.check_grads)."""
    g = numpy.asarray(grad(f)(x))
    fd = numpy.zeros_like(x)
    for i in range(x.size):
        e = numpy.zeros_like(x)
        e[i] = eps
        fd[i] = (float(f(x + e)) - float(f(x - e))) / (2 * eps)
    return float(numpy.max(numpy.abs(g - fd)))


def main(num_steps=100, verbose=True):
    weights = np.array([0.0, 0.0, 0.0])
    gap = check_grads_fd(training_loss, weights)    # was: check_grads(training_loss, modes=["rev"])
    assert gap < 1e-6, gap
    first = float(training_loss(weights))
    if verbose:
        print("Initial loss:", first)
    for _ in range(num_steps):
        weights -= training_gradient_fun(weights) * 0.01
    last = float(training_loss(weights))
    if verbose:
        print("Trained loss:", last)
    return weights, first, last


if __name__ == "__main__":
    main()
