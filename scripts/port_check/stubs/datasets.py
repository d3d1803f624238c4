"""spmd_mnist_classifier_fromscratch imports ``datasets`` at top level."""
from examples.datasets import mnist, mnist_raw  # noqa: F401
