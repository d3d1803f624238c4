"""cjit.tree: JAX's short names for the pytree functions (``jax.tree``).

Each is the ``cjit.tree_util`` function of the longer name:
``cjit.tree.map`` is ``tree_util.tree_map``, ``cjit.tree.leaves_with_path``
is ``tree_util.tree_leaves_with_path``, and so on.
"""
from .tree_util import (tree_all as all, tree_broadcast as broadcast,  # noqa: A004
                        tree_flatten as flatten, tree_flatten_with_path as flatten_with_path,
                        tree_leaves as leaves, tree_leaves_with_path as leaves_with_path,
                        tree_map as map, tree_map_with_path as map_with_path,
                        tree_reduce as reduce, tree_reduce_associative as reduce_associative,
                        tree_structure as structure, tree_transpose as transpose,
                        tree_unflatten as unflatten)

__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path", "map",
           "map_with_path", "reduce", "reduce_associative", "structure", "transpose", "unflatten"]
