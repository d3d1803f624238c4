"""Offline stand-ins for the datasets the ported examples download.

MNIST is replaced by scikit-learn's 8x8 digits (1797 images, 64 pixels,
10 classes) when scikit-learn is installed, and by a synthetic ten-class
problem of the same shape otherwise.  Images are float32 in [0, 1], labels
one-hot float32, as the original examples' ``datasets.mnist()`` returns.
"""
import numpy as np


def _synthetic_digits(n=1797, dim=64, classes=10, seed=0):
    gen = np.random.default_rng(seed)
    centres = gen.uniform(0.0, 1.0, (classes, dim))
    labels = gen.integers(0, classes, n)
    images = np.clip(centres[labels] + 0.25 * gen.standard_normal((n, dim)), 0.0, 1.0)
    return images, labels


def digits(num_test=297, synthetic=False):
    """(train_images, train_labels, test_images, test_labels)."""
    if synthetic:
        images, labels = _synthetic_digits()
    else:
        try:
            from sklearn.datasets import load_digits
        except ImportError:
            images, labels = _synthetic_digits()
        else:
            d = load_digits()
            images, labels = d.data / 16.0, d.target
    images = images.astype(np.float32)
    one_hot = (labels[:, None] == np.arange(10)[None, :]).astype(np.float32)
    return images[:-num_test], one_hot[:-num_test], images[-num_test:], one_hot[-num_test:]


def batches(images, labels, batch_size, seed=0):
    """An endless stream of shuffled minibatches, reshuffled each epoch."""
    rng = np.random.RandomState(seed)
    n = images.shape[0]
    num_batches = -(-n // batch_size)
    while True:
        perm = rng.permutation(n)
        for i in range(num_batches):
            idx = perm[i * batch_size:(i + 1) * batch_size]
            yield images[idx], labels[idx]
