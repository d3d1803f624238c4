"""Key paths of pytrees (JAX's `tree_flatten_with_path` family).

A key path is a tuple of key entries, one per node on the way from the
root to a leaf: `SequenceKey(i)` inside a tuple or list, `DictKey(k)` inside
a dict, OrderedDict or defaultdict, `GetAttrKey(name)` inside a namedtuple
or a registered dataclass, and for other registered classes the keys their
`flatten_with_keys` gives, or `FlattenedIndexKey(i)` (the i-th child) when
they were registered without keys.

The walk here mirrors cjit._tree's (same leaf order, same treedef); it is
separate because jit's hot path has no use for the keys.
"""
from __future__ import annotations

from collections import OrderedDict

from . import _tree

__all__ = ["SequenceKey", "DictKey", "GetAttrKey", "FlattenedIndexKey", "keystr",
           "flatten_with_path", "register_keys"]


class _Key:
    __slots__ = ()
    _field = ""

    def __eq__(self, other):
        return type(other) is type(self) and getattr(self, self._field) == getattr(other, self._field)

    def __hash__(self):
        return hash((type(self).__name__, getattr(self, self._field)))

    def __repr__(self):
        return f"{type(self).__name__}({self._field}={getattr(self, self._field)!r})"


class SequenceKey(_Key):
    """The index of a child of a tuple or list: prints as ``[0]``."""
    __slots__ = ("idx",)
    _field = "idx"

    def __init__(self, idx):
        self.idx = idx

    def __str__(self):
        return f"[{self.idx!r}]"


class DictKey(_Key):
    """The key of a child of a dict: prints as ``['a']``."""
    __slots__ = ("key",)
    _field = "key"

    def __init__(self, key):
        self.key = key

    def __str__(self):
        return f"[{self.key!r}]"


class GetAttrKey(_Key):
    """The attribute name of a child (namedtuples, dataclasses): ``.name``."""
    __slots__ = ("name",)
    _field = "name"

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f".{self.name}"


class FlattenedIndexKey(_Key):
    """The position of a child among a registered class's flattened
    children, when the class was registered without keys."""
    __slots__ = ("key",)
    _field = "key"

    def __init__(self, key):
        self.key = key

    def __str__(self):
        return f"[<flat index {self.key}>]"


def _simple(k):
    if isinstance(k, SequenceKey):
        return str(k.idx)
    if isinstance(k, (DictKey, FlattenedIndexKey)):
        return str(k.key)
    if isinstance(k, GetAttrKey):
        return str(k.name)
    return str(k)


def keystr(keys, *, simple=False, separator=""):
    """A key path as text: ``"['a'][0].b"`` (each entry's ``str``, joined by
    ``separator``); ``simple=True`` drops the brackets, dots and quotes
    (``"a/0/b"`` with ``separator="/"``)."""
    if not isinstance(keys, tuple):
        raise TypeError(f"cjit.tree_util.keystr: expected a key path (a tuple of keys), got "
                        f"{type(keys).__name__}")
    return separator.join(_simple(k) if simple else str(k) for k in keys)


# type -> flatten_with_keys(x) -> ([(key, child)], aux), for classes
# registered with keys (register_pytree_with_keys, register_dataclass).
_with_keys = {}


def register_keys(nodetype, flatten_with_keys):
    _with_keys[nodetype] = flatten_with_keys


def _flatten_defaultdict_keys(d):
    children, aux = _tree._registry[type(d)][0](d)
    return [(DictKey(k), c) for k, c in zip(aux[1], children)], aux


register_keys(_tree.defaultdict, _flatten_defaultdict_keys)


def _keyed_children(x):
    """([(key, child)], node type or None) for a node; None for a leaf."""
    t = type(x)
    if t is tuple or t is list:
        return [(SequenceKey(i), c) for i, c in enumerate(x)]
    if t is dict:
        return [(DictKey(k), x[k]) for k in _tree._sorted_keys(x)]
    if t is OrderedDict:
        return [(DictKey(k), v) for k, v in x.items()]
    fns = _tree._registry.get(t)
    if fns is not None:
        wk = _with_keys.get(t)
        if wk is not None:
            pairs, _ = wk(x)
            return [(k, c) for k, c in pairs]
        children, _ = fns[0](x)
        return [(FlattenedIndexKey(i), c) for i, c in enumerate(children)]
    if isinstance(x, tuple) and hasattr(t, "_fields"):
        return [(GetAttrKey(n), c) for n, c in zip(t._fields, x)]
    return None


def flatten_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    """([(key path, leaf)], treedef).  `is_leaf(x)` (or `is_leaf(path, x)`
    with is_leaf_takes_path) true makes that subtree a leaf.  Complex
    values are leaves, as for every user-facing walk."""
    out = []
    answers = []    # every is_leaf answer, in walk order, replayed for the treedef

    def leaf_here(path, x):
        if _tree.is_complex(x):
            r = True
        elif is_leaf is None:
            r = False
        else:
            r = bool(is_leaf(path, x) if is_leaf_takes_path else is_leaf(x))
        answers.append(r)
        return r

    def walk(path, x):
        if leaf_here(path, x):
            out.append((path, x))
            return
        if x is None:
            return
        kids = _keyed_children(x)
        if kids is None:
            out.append((path, x))
            return
        for k, c in kids:
            walk(path + (k,), c)

    walk((), tree)
    # cjit._tree's walk asks its predicate of the same subtrees in the same
    # order, so it gets the answers given here
    replay = iter(answers)
    leaves, treedef = _tree.flatten(tree, lambda x: next(replay))
    return out, treedef
