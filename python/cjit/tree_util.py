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
import dataclasses as _dataclasses
import functools as _functools

from . import _keypath, _tree
from ._keypath import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey, keystr
from ._tree import PyTreeDef

__all__ = [
    "PyTreeDef", "tree_map", "tree_leaves", "tree_flatten", "tree_unflatten", "tree_structure",
    "tree_reduce", "tree_all", "tree_transpose", "register_pytree_node",
    "register_pytree_node_class", "treedef_is_leaf", "treedef_children", "all_leaves",
    "tree_flatten_with_path", "tree_leaves_with_path", "tree_map_with_path", "tree_broadcast",
    "tree_reduce_associative", "keystr", "DictKey", "SequenceKey", "GetAttrKey",
    "FlattenedIndexKey", "register_dataclass", "register_pytree_with_keys",
    "register_pytree_with_keys_class", "Partial",
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
    """Turns a tree of structure outer(inner(leaves)) into inner(outer(leaves)).
    ``inner_treedef=None`` takes the structure of the first inner tree."""
    if not isinstance(outer_treedef, PyTreeDef) or \
            not (inner_treedef is None or isinstance(inner_treedef, PyTreeDef)):
        raise TypeError("cjit.tree_util.tree_transpose: outer_treedef and inner_treedef must be "
                        "PyTreeDefs (inner_treedef may be None)")
    inners = _tree.flatten_up_to(outer_treedef, pytree_to_transpose)
    if inner_treedef is None:
        if not inners:
            raise ValueError("cjit.tree_util.tree_transpose: inner_treedef=None needs an outer "
                             "structure with at least one leaf to infer it from")
        inner_treedef = tree_structure(inners[0])
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


def tree_reduce_associative(operation, tree, *, identity=_NO_INITIALIZER, is_leaf=None):
    """Reduces the leaves with an associative ``operation``, pairing
    neighbours level by level (a balanced tree of calls); ``identity`` is the
    result for a tree without leaves (which is otherwise a TypeError)."""
    leaves = _tree.tree_leaves(tree, _leaf_pred(is_leaf))
    if not leaves:
        if identity is _NO_INITIALIZER:
            raise TypeError("cjit.tree_util.tree_reduce_associative: a tree without leaves "
                            "needs an identity")
        return identity
    while len(leaves) > 1:
        nxt = [operation(leaves[i], leaves[i + 1]) for i in range(0, len(leaves) - 1, 2)]
        if len(leaves) % 2:
            nxt.append(leaves[-1])
        leaves = nxt
    return leaves[0]


def tree_broadcast(prefix_tree, full_tree, is_leaf=None):
    """``prefix_tree`` (a prefix of ``full_tree``'s structure) with each of
    its leaves repeated over the leaves of ``full_tree``'s subtree there."""
    leaves, prefix_def = _tree.flatten(prefix_tree, _leaf_pred(is_leaf))
    subtrees = _tree.flatten_up_to(prefix_def, full_tree)
    return _tree.unflatten(prefix_def, [tree_map(lambda _, v=v: v, sub, is_leaf=is_leaf)
                                        for v, sub in zip(leaves, subtrees)])


# ---- key paths ------------------------------------------------------------------

def tree_flatten_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    """``([(key_path, leaf)], treedef)``: each leaf with the tuple of keys
    leading to it (``SequenceKey``, ``DictKey``, ``GetAttrKey``,
    ``FlattenedIndexKey``); ``keystr`` prints one as ``['a'][0].b``."""
    return _keypath.flatten_with_path(tree, is_leaf, is_leaf_takes_path)


def tree_leaves_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    """``[(key_path, leaf)]`` in leaf order."""
    return _keypath.flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_map_with_path(f, tree, *rest, is_leaf=None, is_leaf_takes_path=False):
    """``f(key_path, leaf, *others)`` leaf by leaf, as ``tree_map``."""
    pairs, td = _keypath.flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    others = [_tree.flatten_up_to(td, r) for r in rest]
    return _tree.unflatten(td, [f(p, x, *ys) for (p, x), *ys in zip(pairs, *others)])


def register_pytree_with_keys(nodetype, flatten_with_keys, unflatten_func, flatten_func=None):
    """``register_pytree_node`` with keys: ``flatten_with_keys(x)`` returns
    ``([(key, child)], aux_data)``; ``flatten_func`` (without keys) is derived
    from it when not given."""
    if not callable(flatten_with_keys):
        raise TypeError("cjit.tree_util.register_pytree_with_keys needs a callable "
                        "flatten_with_keys")
    if flatten_func is None:
        def flatten_func(x):
            pairs, aux = flatten_with_keys(x)
            return [c for _, c in pairs], aux
    _tree.register_node(nodetype, flatten_func, unflatten_func)
    _keypath.register_keys(nodetype, flatten_with_keys)


def register_pytree_with_keys_class(cls):
    """Class decorator: registers ``cls`` with ``x.tree_flatten_with_keys()``,
    ``cls.tree_unflatten(aux_data, children)`` and, when defined,
    ``x.tree_flatten()``; returns ``cls``."""
    if not isinstance(cls, type):
        raise TypeError(f"cjit.tree_util.register_pytree_with_keys_class decorates a class, "
                        f"got {cls!r}")
    for name in ("tree_flatten_with_keys", "tree_unflatten"):
        if not callable(getattr(cls, name, None)):
            raise TypeError(f"cjit.tree_util.register_pytree_with_keys_class: {cls.__name__} "
                            f"has no {name} method")
    flat = cls.tree_flatten if callable(getattr(cls, "tree_flatten", None)) else None
    register_pytree_with_keys(cls, cls.tree_flatten_with_keys, cls.tree_unflatten, flat)
    return cls


def register_dataclass(nodetype, data_fields=None, meta_fields=None, drop_fields=()):
    """Registers a dataclass-like class: ``data_fields`` are its children
    (keys ``GetAttrKey(name)``), ``meta_fields`` its auxiliary data (static
    under ``jit``: a tuple of their values, part of the cache key).  For a
    dataclass both may be omitted: fields with ``metadata={"static": True}``
    are meta fields, the others data.  Rebuilds with ``nodetype(**fields)``;
    returns ``nodetype`` (usable as a decorator)."""
    if not isinstance(nodetype, type):
        raise TypeError(f"cjit.tree_util.register_dataclass: expected a class, got {nodetype!r}")
    if (data_fields is None) != (meta_fields is None):
        raise TypeError("cjit.tree_util.register_dataclass: data_fields and meta_fields must both "
                        f"be given when either is; got data_fields={data_fields!r}, "
                        f"meta_fields={meta_fields!r}")
    is_dc = _dataclasses.is_dataclass(nodetype)
    if data_fields is None:
        if not is_dc:
            raise TypeError("cjit.tree_util.register_dataclass: data_fields and meta_fields are "
                            f"needed for {nodetype.__name__}, which is not a dataclass")
        fields = [f for f in _dataclasses.fields(nodetype) if f.name not in drop_fields]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)
    if is_dc:
        init = {f.name for f in _dataclasses.fields(nodetype) if f.init} - set(drop_fields)
        given = set(data_fields) | set(meta_fields)
        if given != init:
            raise ValueError(
                f"cjit.tree_util.register_dataclass({nodetype.__name__}): data_fields and "
                f"meta_fields must name every init field of the dataclass and only those; "
                f"missing {sorted(init - given)}, unexpected {sorted(given - init)} (put fields "
                f"to leave out in drop_fields)")
    both = set(data_fields) & set(meta_fields)
    if both:
        raise ValueError(f"cjit.tree_util.register_dataclass({nodetype.__name__}): fields "
                         f"{sorted(both)} are in both data_fields and meta_fields")

    def flatten_with_keys(x):
        return ([(GetAttrKey(n), getattr(x, n)) for n in data_fields],
                tuple(getattr(x, n) for n in meta_fields))

    def flatten(x):
        return [getattr(x, n) for n in data_fields], tuple(getattr(x, n) for n in meta_fields)

    def unflatten(meta, children):
        kw = dict(zip(meta_fields, meta))
        kw.update(zip(data_fields, children))
        return nodetype(**kw)

    register_pytree_with_keys(nodetype, flatten_with_keys, unflatten, flatten)
    return nodetype


class Partial(_functools.partial):
    """``functools.partial`` that is a pytree: its positional and keyword
    arguments are children (so arrays among them are traced, differentiated,
    batched), the function is auxiliary data.  A ``Partial`` can be passed
    to and returned from jitted functions."""

    def __new__(cls, func, *args, **kw):
        if not callable(func):
            raise TypeError(f"cjit.tree_util.Partial: the first argument must be callable, got "
                            f"{type(func).__name__}")
        return super().__new__(cls, func, *args, **kw)


_tree.register_node(Partial, lambda p: ((p.args, p.keywords), p.func),
                    lambda func, ch: Partial(func, *ch[0], **ch[1]))
