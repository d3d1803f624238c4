"""Pytrees: nested tuples, lists, dicts and None around leaves.

`flatten(tree)` returns the leaves in order and a `PyTreeDef` that records
the structure; `unflatten(treedef, leaves)` rebuilds the tree.  Dicts are
walked in sorted key order (so {'b': 1, 'a': 2} and {'a': 2, 'b': 1} have
the same treedef); `OrderedDict`s are nodes of their own, walked in their
order (as in JAX, where their order is part of the structure); `None` is a
node with no leaves; named tuples are nodes that rebuild as their own type.
Everything else is a leaf.

This sits on the call path of every jitted call, so the walk is a plain
recursion over exact types and the structure is a nested tuple whose hash
is computed once.
"""
from __future__ import annotations

from collections import OrderedDict

__all__ = ["PyTreeDef", "flatten", "flatten_node", "flatten_args", "treedef_of", "unflatten",
           "leaf_keypaths", "format_keypath", "tree_map", "tree_leaves"]

# Node encodings inside the structure tuple.  A leaf and None are plain
# ints; containers are tuples whose first item says which container.
_LEAF = 0
_NONE = 1
_TUPLE = 2
_LIST = 3
_DICT = 4
_NAMEDTUPLE = 5
_ODICT = 6


def _sorted_keys(d):
    try:
        return sorted(d)
    except TypeError:
        kinds = sorted({type(k).__name__ for k in d})
        raise TypeError(
            "cjit: dict keys in a pytree must be sortable (they are walked in sorted "
            f"order); got keys of types {', '.join(kinds)}") from None


def _flat(x, leaves):
    t = type(x)
    if t is tuple:
        return (_TUPLE, _flat_children(x, leaves))
    if t is list:
        return (_LIST, _flat_children(x, leaves))
    if t is dict:
        keys = _sorted_keys(x)
        return (_DICT, tuple(keys), _flat_children([x[k] for k in keys], leaves))
    if x is None:
        return _NONE
    if t is OrderedDict:
        keys = tuple(x)
        return (_ODICT, keys, _flat_children([x[k] for k in keys], leaves))
    if isinstance(x, tuple) and hasattr(t, "_fields"):
        return (_NAMEDTUPLE, t, _flat_children(x, leaves))
    leaves.append(x)
    return _LEAF


def _flat_children(xs, leaves):
    # The common child is a leaf (an array): handled inline, without a call.
    out = []
    for c in xs:
        t = type(c)
        if t is tuple or t is list or t is dict or c is None or isinstance(c, tuple) or \
                t is OrderedDict:
            out.append(_flat(c, leaves))
        else:
            leaves.append(c)
            out.append(_LEAF)
    return tuple(out)


class PyTreeDef:
    """The structure of a pytree: hashable, comparable, printable."""

    __slots__ = ("_node", "num_leaves", "_hash")

    def __init__(self, node, num_leaves):
        self._node = node
        self.num_leaves = num_leaves
        self._hash = hash(node)

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        return self._hash == other._hash and self._node == other._node

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __repr__(self):
        return f"PyTreeDef({_node_str(self._node)})"

    __str__ = __repr__

    def children(self):
        """The treedefs of the root's children (empty for a leaf or None)."""
        node = self._node
        if isinstance(node, int):
            return []
        kids = node[-1]
        return [PyTreeDef(k, _count(k)) for k in kids]

    def unflatten(self, leaves):
        return unflatten(self, leaves)


def _count(node):
    if node == _LEAF and isinstance(node, int):
        return 1
    if isinstance(node, int):
        return 0
    return sum(_count(k) for k in node[-1])


def _node_str(node):
    if isinstance(node, int):
        return "*" if node == _LEAF else "None"
    kind = node[0]
    kids = [_node_str(k) for k in node[-1]]
    if kind == _TUPLE:
        return "(" + ", ".join(kids) + ("," if len(kids) == 1 else "") + ")"
    if kind == _LIST:
        return "[" + ", ".join(kids) + "]"
    if kind == _DICT:
        return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(node[1], kids)) + "}"
    if kind == _ODICT:
        return "OrderedDict({" + ", ".join(f"{k!r}: {v}" for k, v in zip(node[1], kids)) + "})"
    return f"{node[1].__name__}(" + ", ".join(kids) + ")"


def flatten(tree):
    """Returns (leaves, treedef)."""
    leaves = []
    node = _flat(tree, leaves)
    return leaves, treedef_of(node, len(leaves))


def flatten_node(tree):
    """Returns (leaves, node): the structure as a plain hashable tuple, which
    is cheaper to hash and compare than a PyTreeDef (for cache keys)."""
    leaves = []
    node = _flat(tree, leaves)
    return leaves, node


_EMPTY_DICT_NODE = (_DICT, (), ())


def flatten_args(args, kwargs):
    """flatten_node((args, kwargs)) for a tuple and a dict, minus two calls
    (this is the first thing every jitted call does)."""
    leaves = []
    a = (_TUPLE, _flat_children(args, leaves))
    k = _flat(kwargs, leaves) if kwargs else _EMPTY_DICT_NODE
    return leaves, (_TUPLE, (a, k))


_INTERNED = {}


def treedef_of(node, num_leaves=None):
    """The PyTreeDef of a node from flatten_node (one object per structure)."""
    td = _INTERNED.get(node)
    if td is None:
        if len(_INTERNED) > 4096:
            _INTERNED.clear()
        td = PyTreeDef(node, _count(node) if num_leaves is None else num_leaves)
        _INTERNED[node] = td
    return td


def tree_leaves(tree):
    leaves = []
    _flat(tree, leaves)
    return leaves


def _build(node, it):
    if isinstance(node, int):
        return next(it) if node == _LEAF else None
    kind = node[0]
    if kind == _TUPLE:
        return tuple([_build(k, it) for k in node[1]])
    if kind == _LIST:
        return [_build(k, it) for k in node[1]]
    if kind == _DICT:
        return {key: _build(k, it) for key, k in zip(node[1], node[2])}
    if kind == _ODICT:
        return OrderedDict([(key, _build(k, it)) for key, k in zip(node[1], node[2])])
    return node[1](*[_build(k, it) for k in node[2]])


def unflatten(treedef, leaves):
    """Rebuilds the tree of `treedef` with `leaves` (a sequence) in order."""
    if len(leaves) != treedef.num_leaves:
        raise ValueError(
            f"cjit: {treedef} has {treedef.num_leaves} leaves, got {len(leaves)}")
    node = treedef._node
    if node == _LEAF and isinstance(node, int):
        return leaves[0]
    return _build(node, iter(leaves))


def tree_map(f, tree):
    leaves, td = flatten(tree)
    return unflatten(td, [f(x) for x in leaves])


def _paths(node, prefix, out):
    if isinstance(node, int):
        if node == _LEAF:
            out.append(prefix)
        return
    kind = node[0]
    if kind == _DICT or kind == _ODICT:
        for key, k in zip(node[1], node[2]):
            _paths(k, prefix + (("key", key),), out)
    elif kind == _NAMEDTUPLE:
        for name, k in zip(node[1]._fields, node[2]):
            _paths(k, prefix + (("attr", name),), out)
    else:
        for i, k in enumerate(node[1]):
            _paths(k, prefix + (("index", i),), out)


def leaf_keypaths(treedef):
    """One key path per leaf: a tuple of (kind, key) with kind 'index',
    'key' or 'attr'.  Slow; used for error messages only."""
    out = []
    _paths(treedef._node, (), out)
    return out


def format_keypath(path, root=""):
    """`root` followed by the path in Python syntax: params['w1'][0]."""
    s = root
    for kind, key in path:
        if kind == "attr":
            s += "." + key
        elif kind == "key":
            s += f"[{key!r}]"
        else:
            s += f"[{key}]"
    return s
