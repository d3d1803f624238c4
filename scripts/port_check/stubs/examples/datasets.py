"""Offline stand-in for jax's examples/datasets.py (which downloads MNIST).

The same functions and shapes, from scikit-learn's 8x8 digits: each image
scaled from 0..16 to 0..255, centred in a 28x28 frame of zeros; the last 297
images are the test set.  Without scikit-learn, a seeded synthetic ten-class
set of the same shape.  Both runs of an example (JAX and cjit) read the same
data, so only the library differs.
"""
import numpy as np


def _digits():
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        gen = np.random.default_rng(0)
        centres = gen.uniform(0, 16, (10, 64))
        labels = gen.integers(0, 10, 1797)
        images = np.clip(centres[labels] + 4 * gen.standard_normal((1797, 64)), 0, 16)
        return images, labels
    d = load_digits()
    return d.data, d.target


def mnist_raw():
    images, labels = _digits()
    small = np.rint(images.reshape(-1, 8, 8) * (255 / 16)).astype(np.uint8)
    frames = np.zeros((small.shape[0], 28, 28), np.uint8)
    frames[:, 10:18, 10:18] = small
    labels = labels.astype(np.uint8)
    return frames[:-297], labels[:-297], frames[-297:], labels[-297:]


def _partial_flatten(x):
    return np.reshape(x, (x.shape[0], -1))


def _one_hot(x, k, dtype=np.float32):
    return np.array(x[:, None] == np.arange(k), dtype)


def mnist(permute_train=False):
    train_images, train_labels, test_images, test_labels = mnist_raw()
    train_images = _partial_flatten(train_images) / np.float32(255.)
    test_images = _partial_flatten(test_images) / np.float32(255.)
    train_labels = _one_hot(train_labels, 10)
    test_labels = _one_hot(test_labels, 10)
    if permute_train:
        perm = np.random.RandomState(0).permutation(train_images.shape[0])
        train_images, train_labels = train_images[perm], train_labels[perm]
    return train_images, train_labels, test_images, test_labels
