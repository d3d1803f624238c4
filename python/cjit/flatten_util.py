"""cjit.flatten_util: a pytree as one flat vector, as ``jax.flatten_util``.

    flat, unravel = ravel_pytree(params)    # flat: 1-d, unravel(flat) == params

Works eagerly on NumPy arrays and on traced values inside jit and grad (it
is made of cjit.numpy calls), so ``ravel_pytree`` can sit inside a
differentiated function, as in autograd's ``flatten``.
"""
import math

import numpy as np

from . import tree_util
from .numpy._creation import asarray
from .numpy._elementwise import astype
from .numpy._manipulation import concatenate, ravel, reshape

__all__ = ["ravel_pytree"]


def _shape_dtype(leaf):
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return tuple(leaf.shape), np.dtype(leaf.dtype)
    a = np.asarray(leaf)
    return a.shape, a.dtype


def ravel_pytree(pytree):
    """``(flat, unravel)``: the leaves of ``pytree`` raveled and concatenated
    in tree_leaves order, cast to their common dtype (NumPy's promotion),
    and the function that cuts such a vector back into the tree, each leaf
    with its own shape and dtype.  ``unravel`` raises ValueError on a vector
    of the wrong shape."""
    leaves, treedef = tree_util.tree_flatten(pytree)
    facts = [_shape_dtype(x) for x in leaves]
    sizes = [math.prod(s) for s, _ in facts]
    total = sum(sizes)
    dtype = np.result_type(*[d for _, d in facts]) if facts else np.dtype(np.float64)
    if leaves:
        flat = concatenate([ravel(astype(asarray(x), dtype)) for x in leaves])
    else:
        flat = np.zeros(0, dtype)

    def unravel(vector):
        shape = tuple(getattr(vector, "shape", np.shape(vector)))
        if shape != (total,):
            raise ValueError(f"cjit.flatten_util.ravel_pytree: unravel expects a vector of shape "
                             f"({total},), got {shape}")
        parts, start = [], 0
        for (leaf_shape, leaf_dtype), n in zip(facts, sizes):
            piece = reshape(vector[start:start + n], leaf_shape)
            if np.dtype(piece.dtype) != leaf_dtype:
                piece = astype(piece, leaf_dtype)
            parts.append(piece)
            start += n
        return tree_util.tree_unflatten(treedef, parts)

    return flat, unravel
