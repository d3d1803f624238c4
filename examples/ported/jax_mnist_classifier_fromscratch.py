"""Port of jax-ml/jax examples/mnist_classifier_fromscratch.py to cjit.

Status: runs unchanged (import swap only).
Changes: imports (jax -> cjit, jax.scipy.special -> cjit.scipy.special);
MNIST -> the 8x8 digits (no network here), so the first layer has 64 inputs.
Model, loss and optimizer are the original's: a tanh MLP with a
log-softmax output, mean cross-entropy, plain SGD in one jitted update.
"""
import time

import numpy.random as npr

from cjit import jit, grad                      # was: from jax import jit, grad
from cjit.scipy.special import logsumexp        # was: jax.scipy.special
import cjit.numpy as jnp                        # was: import jax.numpy as jnp

import _data


def init_random_params(scale, layer_sizes, rng=npr.RandomState(0)):
    return [(scale * rng.randn(m, n), scale * rng.randn(n))
            for m, n in zip(layer_sizes[:-1], layer_sizes[1:])]


def predict(params, inputs):
    activations = inputs
    for w, b in params[:-1]:
        activations = jnp.tanh(jnp.dot(activations, w) + b)
    final_w, final_b = params[-1]
    logits = jnp.dot(activations, final_w) + final_b
    return logits - logsumexp(logits, axis=1, keepdims=True)


def loss(params, batch):
    inputs, targets = batch
    return -jnp.mean(jnp.sum(predict(params, inputs) * targets, axis=1))


def accuracy(params, batch):
    inputs, targets = batch
    target_class = jnp.argmax(targets, axis=1)
    predicted_class = jnp.argmax(predict(params, inputs), axis=1)
    return jnp.mean(predicted_class == target_class)


def make_update(step_size):
    @jit
    def update(params, batch):
        grads = grad(loss)(params, batch)
        return [(w - step_size * dw, b - step_size * db)
                for (w, b), (dw, db) in zip(params, grads)]
    return update


def main(layer_sizes=(64, 1024, 1024, 10), param_scale=0.1, step_size=0.001, num_epochs=10,
         batch_size=128, data=None, verbose=True):
    train_images, train_labels, test_images, test_labels = data or _data.digits()
    num_batches = -(-train_images.shape[0] // batch_size)
    batches = _data.batches(train_images, train_labels, batch_size)
    update = make_update(step_size)
    params = init_random_params(param_scale, list(layer_sizes), npr.RandomState(0))
    for epoch in range(num_epochs):
        start = time.time()
        for _ in range(num_batches):
            params = update(params, next(batches))
        train_acc = accuracy(params, (train_images, train_labels))
        test_acc = accuracy(params, (test_images, test_labels))
        if verbose:
            print(f"Epoch {epoch} in {time.time() - start:0.2f} sec")
            print(f"Training set accuracy {train_acc}")
            print(f"Test set accuracy {test_acc}")
    return params


if __name__ == "__main__":
    main()
