"""cjit.tree_util: pytrees, with JAX's names and semantics.

A pytree is a nest of tuples, lists, dicts, OrderedDicts, defaultdicts,
namedtuples, None and registered classes; everything else is a leaf.

- Leaves come in a fixed order: sequences in order, dicts (and
  defaultdicts) in sorted key order, OrderedDicts in their own order,
  namedtuples field by field, registered classes in the order of the
  children their flatten function returns.
- None is a node with no children (an empty subtree), not a leaf:
  ``tree_leaves([1, None, 2]) == [1, 2]``, and ``tree_map`` leaves it in
  place.  Pass ``is_leaf=lambda x: x is None`` to treat it as a leaf.
- Registered classes take part everywhere cjit walks pytrees: arguments and
  results of ``cjit.jit``, the differentiated arguments and the gradients of
  ``grad``/``value_and_grad``/``vjp``.

This module is a view of the machinery that ``jit`` uses (cjit._tree):
one registry, one flatten, one PyTreeDef.
"""
import functools as _functools

from . import _tree
from ._tree import PyTreeDef

__all__ = [
    "PyTreeDef", "tree_map", "tree_leaves", "tree_flatten", "tree_unflatten", "tree_structure",
    "tree_reduce", "tree_all", "tree_transpose", "register_pytree_node",
    "register_pytree_node_class", "treedef_is_leaf", "treedef_children", "all_leaves",
]


def _leaf_pred(is_leaf):
    """The user's predicate, with complex values as leaves: cjit walks them
    as pairs of real arrays internally (cjit._tree), a user sees arrays."""
    if is_leaf is None:
        return _tree.is_complex
    return lambda x: _tree.is_complex(x) or is_leaf(x)


def tree_flatten(tree, is_leaf=None):
    """Returns ``(leaves, treedef)``.  ``is_leaf(subtree)``, when given, is
    asked of every subtree before looking inside it; true makes it a leaf."""
    return _tree.flatten(tree, _leaf_pred(is_leaf))


def tree_unflatten(treedef, leaves):
    """Rebuilds a tree of structure ``treedef`` from an iterable of leaves."""
    if not isinstance(treedef, PyTreeDef):
        raise TypeError(f"cjit.tree_util.tree_unflatten: expected a PyTreeDef, got "
                        f"{type(treedef).__name__}")
    return _tree.unflatten(treedef, list(leaves))


def tree_leaves(tree, is_leaf=None):
    """The leaves of ``tree`` in order (None contributes none)."""
    return _tree.tree_leaves(tree, _leaf_pred(is_leaf))


def tree_structure(tree, is_leaf=None):
    """The PyTreeDef of ``tree``."""
    return _tree.flatten(tree, _leaf_pred(is_leaf))[1]


def tree_map(f, tree, *rest, is_leaf=None):
    """``f`` applied leaf by leaf: ``f(x, *ys)`` where ``x`` is a leaf of
    ``tree`` and ``ys`` are the subtrees of ``rest`` at the same place.
    Each tree in ``rest`` has the structure of ``tree``, or has it as a
    prefix (its subtree at a leaf of ``tree`` is passed whole); anything
    else is a ValueError naming the first place they differ."""
    return _tree.tree_map(f, tree, *rest, is_leaf=_leaf_pred(is_leaf))


_NO_INITIALIZER = object()


def tree_reduce(function, tree, initializer=_NO_INITIALIZER, is_leaf=None):
    """``functools.reduce(function, tree_leaves(tree))``, with an optional
    initializer.  A tree without leaves and no initializer is a TypeError,
    as ``functools.reduce`` of an empty sequence."""
    leaves = _tree.tree_leaves(tree, _leaf_pred(is_leaf))
    if initializer is _NO_INITIALIZER:
        return _functools.reduce(function, leaves)
    return _functools.reduce(function, leaves, initializer)


def tree_all(tree, *, is_leaf=None):
    """True when every leaf is truthy (and for a tree without leaves)."""
    return all(_tree.tree_leaves(tree, _leaf_pred(is_leaf)))


def tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose):
    """Turns a tree of structure outer(inner(leaves)) into inner(outer(leaves))."""
    if not isinstance(outer_treedef, PyTreeDef) or not isinstance(inner_treedef, PyTreeDef):
        raise TypeError("cjit.tree_util.tree_transpose: outer_treedef and inner_treedef must be "
                        "PyTreeDefs")
    inners = _tree.flatten_up_to(outer_treedef, pytree_to_transpose)
    columns = [_tree.flatten_up_to(inner_treedef, t) for t in inners]
    n_in = inner_treedef.num_leaves
    regrouped = [_tree.unflatten(outer_treedef, [col[j] for col in columns]) for j in range(n_in)]
    return _tree.unflatten(inner_treedef, regrouped)


def register_pytree_node(nodetype, flatten_func, unflatten_func):
    """Makes instances of ``nodetype`` (that exact class) pytree nodes.

    ``flatten_func(x)`` returns ``(children, aux_data)``: an iterable of
    child subtrees and hashable, comparable data that, with the children,
    rebuild ``x``; ``unflatten_func(aux_data, children)`` rebuilds it.
    ``aux_data`` is part of the structure (and so of ``jit``'s cache key):
    instances with different ``aux_data`` have different treedefs.
    Registering a class twice, or a built-in node type, is a ValueError."""
    _tree.register_node(nodetype, flatten_func, unflatten_func)


def register_pytree_node_class(cls):
    """Class decorator: registers ``cls`` with ``x.tree_flatten()`` and
    ``cls.tree_unflatten(aux_data, children)``; returns ``cls``."""
    if not isinstance(cls, type):
        raise TypeError(f"cjit.tree_util.register_pytree_node_class decorates a class, got "
                        f"{cls!r}")
    for name in ("tree_flatten", "tree_unflatten"):
        if not callable(getattr(cls, name, None)):
            raise TypeError(f"cjit.tree_util.register_pytree_node_class: {cls.__name__} has no "
                            f"{name} method")
    _tree.register_node(cls, cls.tree_flatten, cls.tree_unflatten)
    return cls


def treedef_is_leaf(treedef):
    """True for the structure of a single leaf (or of None, as in JAX)."""
    return treedef.num_nodes == 1


def treedef_children(treedef):
    """The treedefs of the root's children."""
    return treedef.children()


def all_leaves(iterable, is_leaf=None):
    """True when every element of ``iterable`` is a leaf (None is not)."""
    def one(x):
        node = _tree.flatten(x, _leaf_pred(is_leaf))[1]._node
        return type(node) is int and node == _tree._LEAF
    return all(one(x) for x in iterable)
