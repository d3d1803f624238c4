"""Port of jax-ml/jax examples/mnist_classifier.py to cjit.

Status: runs with one small edit.
Changes: imports (jax -> cjit, jax.example_libraries -> cjit.example_libraries);
``random.key(0)`` -> the int seed ``0`` (cjit has no ``cjit.random``; cjit's
stax takes an int seed or a numpy Generator as its rng); MNIST -> the 8x8
digits.  Model (Dense-Relu-Dense-Relu-Dense-LogSoftmax), loss
(cross-entropy) and optimizer (momentum 0.9, step 0.001) are the original's.
"""
import itertools
import time

import cjit.numpy as jnp                        # was: import jax.numpy as jnp
from cjit import jit, grad                      # was: from jax import jit, grad, random
from cjit.example_libraries import optimizers
from cjit.example_libraries import stax
from cjit.example_libraries.stax import Dense, Relu, LogSoftmax

import _data


def loss(params, batch):
    inputs, targets = batch
    preds = predict(params, inputs)
    return -jnp.mean(jnp.sum(preds * targets, axis=1))


def accuracy(params, batch):
    inputs, targets = batch
    target_class = jnp.argmax(targets, axis=1)
    predicted_class = jnp.argmax(predict(params, inputs), axis=1)
    return jnp.mean(predicted_class == target_class)


init_random_params, predict = stax.serial(
    Dense(1024), Relu,
    Dense(1024), Relu,
    Dense(10), LogSoftmax)


def main(step_size=0.001, num_epochs=10, batch_size=128, momentum_mass=0.9, data=None,
         verbose=True):
    rng = 0                                     # was: random.key(0)
    train_images, train_labels, test_images, test_labels = data or _data.digits()
    num_batches = -(-train_images.shape[0] // batch_size)
    batches = _data.batches(train_images, train_labels, batch_size)

    opt_init, opt_update, get_params = optimizers.momentum(step_size, mass=momentum_mass)

    @jit
    def update(i, opt_state, batch):
        params = get_params(opt_state)
        return opt_update(i, grad(loss)(params, batch), opt_state)

    _, init_params = init_random_params(rng, (-1, train_images.shape[1]))
    opt_state = opt_init(init_params)
    itercount = itertools.count()
    history = []
    for epoch in range(num_epochs):
        start = time.time()
        for _ in range(num_batches):
            opt_state = update(next(itercount), opt_state, next(batches))
        params = get_params(opt_state)
        train_acc = accuracy(params, (train_images, train_labels))
        test_acc = accuracy(params, (test_images, test_labels))
        history.append((float(train_acc), float(test_acc)))
        if verbose:
            print(f"Epoch {epoch} in {time.time() - start:0.2f} sec")
            print(f"Training set accuracy {train_acc}")
            print(f"Test set accuracy {test_acc}")
    return get_params(opt_state), history


if __name__ == "__main__":
    main()
