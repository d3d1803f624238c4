"""Small libraries on top of cjit, with the API of ``jax.example_libraries``.

- ``optimizers``: first-order optimizers over pytrees, as
  ``(init_fun, update_fun, get_params)`` triples.
- ``stax``: neural network layers as ``(init_fun, apply_fun)`` pairs.
"""
from . import optimizers, stax

__all__ = ["optimizers", "stax"]
