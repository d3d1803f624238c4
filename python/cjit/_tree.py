"""Pytrees: nested tuples, lists, dicts, None and registered classes around leaves.

This is the one pytree machinery of cjit: `jit`, `grad`/`vjp` and the
public `cjit.tree_util` all use it.

`flatten(tree)` returns the leaves in order and a `PyTreeDef` that records
the structure; `unflatten(treedef, leaves)` rebuilds the tree.  Dicts are
walked in sorted key order (so {'b': 1, 'a': 2} and {'a': 2, 'b': 1} have
the same treedef); `OrderedDict`s are nodes of their own, walked in their
order (as in JAX, where their order is part of the structure); `None` is a
node with no leaves; named tuples are nodes that rebuild as their own type;
classes registered with `register_node` (and `defaultdict`) are nodes whose
children and auxiliary data their flatten function gives.  Everything else
is a leaf.

This sits on the call path of every jitted call, so the walk is a plain
recursion over exact types and the structure is a nested tuple (hashable,
so it keys the compile cache directly).
"""
from __future__ import annotations

from collections import OrderedDict, defaultdict

import numpy as _np

from ._array import Array as _Array

__all__ = ["PyTreeDef", "flatten", "flatten_node", "flatten_args", "treedef_of", "unflatten",
           "leaf_keypaths", "format_keypath", "tree_map", "tree_leaves", "register_node",
           "flatten_up_to"]

# Node encodings inside the structure tuple.  A leaf and None are plain
# ints; containers are tuples whose first item says which container and
# whose last item is the tuple of the children's nodes.
_LEAF = 0
_NONE = 1
_TUPLE = 2
_LIST = 3
_DICT = 4
_NAMEDTUPLE = 5
_ODICT = 6
_CUSTOM = 7     # (_CUSTOM, class, _Aux, children): a registered class

# Complex values (a NumPy complex array or number, a Python complex, a
# traced complex array) are nodes of class ComplexPair for cjit's own walks:
# their one child is the real pair (shape + (2,), parts interleaved), which
# is how complex values cross jit, grad, vmap and the lax control flow
# (cjit/numpy/_complex.py).  To a user (cjit.tree_util) they are leaves.
class ComplexPair:
    """The node class of a complex value (never instantiated)."""


# types that are always complex; cjit.numpy adds ComplexTracer
_COMPLEX_TYPES = {complex, _np.complex64, _np.complex128}
_complex_tracer = None  # ComplexTracer (set by cjit.numpy)
_complex_split = None   # complex value -> its real pair (set by cjit.numpy)
_complex_join = None    # (dtype name, real pair) -> the complex value


def set_complex_hooks(tracer_type, split, join):
    global _complex_split, _complex_join, _complex_tracer
    _COMPLEX_TYPES.add(tracer_type)
    _complex_tracer = tracer_type
    _complex_split, _complex_join = split, join


def is_complex_tracer(x):
    """Is x a traced complex value (cjit.numpy's ComplexTracer)?"""
    return _complex_tracer is not None and type(x) is _complex_tracer


def is_complex(x):
    t = type(x)
    return t in _COMPLEX_TYPES or ((t is _np.ndarray or t is _Array) and x.dtype.kind == "c")


def _flat_complex(x, leaves):
    pair, dtype_name = _complex_split(x)
    leaves.append(pair)
    return (_CUSTOM, ComplexPair, _Aux(ComplexPair, dtype_name), (_LEAF,))


def complex_leaf_mask(treedef):
    """[bool] per leaf of treedef: is it the real pair of a complex value?"""
    out = []

    def walk(node, in_pair):
        if isinstance(node, int):
            if node == _LEAF:
                out.append(in_pair)
            return
        pair = node[0] == _CUSTOM and node[1] is ComplexPair
        for k in node[-1]:
            walk(k, pair)
    walk(treedef._node, False)
    return out


# Registered classes: type -> (flatten(x) -> (children, aux), unflatten(aux, children) -> x).
# Looked up by exact type, as JAX does (a subclass is registered on its own).
_registry = {}


class _Aux:
    """A registered node's auxiliary data inside a structure tuple.

    Equal when the data are equal.  Hashing it (which the compile cache
    does) needs hashable data, as JAX requires; a tree_map or a flatten
    alone does not."""

    __slots__ = ("cls", "value")

    def __init__(self, cls, value):
        self.cls = cls
        self.value = value

    def __eq__(self, other):
        if type(other) is not _Aux or self.cls is not other.cls:
            return False
        if self.value is other.value:
            return True
        try:
            return bool(self.value == other.value)
        except Exception as e:   # e.g. arrays in the data: == gives an array
            raise TypeError(
                f"cjit: the auxiliary data of pytree node {self.cls.__name__} could not be "
                f"compared ({type(e).__name__}: {e}); registered classes must return hashable, "
                f"comparable auxiliary data from their flatten function (put arrays in the "
                f"children instead)") from None

    def __hash__(self):
        try:
            return hash((self.cls, self.value))
        except TypeError:
            raise TypeError(
                f"cjit: the auxiliary data of pytree node {self.cls.__name__} is not hashable "
                f"({type(self.value).__name__}); registered classes must return hashable "
                f"auxiliary data from their flatten function to be used as jit arguments or "
                f"results, or as a PyTreeDef key (a tuple instead of a list, say)") from None

    def __repr__(self):
        return repr(self.value)


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
    fns = _registry.get(t)
    if fns is not None:
        children, aux = fns[0](x)
        return (_CUSTOM, t, _Aux(t, aux), _flat_children(children, leaves))
    if t is OrderedDict:
        keys = tuple(x)
        return (_ODICT, keys, _flat_children([x[k] for k in keys], leaves))
    if isinstance(x, tuple) and hasattr(t, "_fields"):
        return (_NAMEDTUPLE, t, _flat_children(x, leaves))
    if t in _COMPLEX_TYPES or ((t is _np.ndarray or t is _Array) and x.dtype.kind == "c"):
        return _flat_complex(x, leaves)
    leaves.append(x)
    return _LEAF


def _flat_children(xs, leaves):
    # The common child is a leaf (an array): handled inline, without a call.
    out = []
    for c in xs:
        t = type(c)
        if t is tuple or t is list or t is dict or c is None or isinstance(c, tuple) or \
                t is OrderedDict or t in _registry:
            out.append(_flat(c, leaves))
        elif t in _COMPLEX_TYPES or ((t is _np.ndarray or t is _Array) and c.dtype.kind == "c"):
            out.append(_flat_complex(c, leaves))
        else:
            leaves.append(c)
            out.append(_LEAF)
    return tuple(out)


def _flat_pred(x, leaves, is_leaf):
    """_flat with a user predicate that can make any subtree a leaf."""
    if is_leaf(x):
        leaves.append(x)
        return _LEAF
    t = type(x)
    if t is tuple:
        return (_TUPLE, tuple(_flat_pred(c, leaves, is_leaf) for c in x))
    if t is list:
        return (_LIST, tuple(_flat_pred(c, leaves, is_leaf) for c in x))
    if t is dict:
        keys = _sorted_keys(x)
        return (_DICT, tuple(keys), tuple(_flat_pred(x[k], leaves, is_leaf) for k in keys))
    if x is None:
        return _NONE
    fns = _registry.get(t)
    if fns is not None:
        children, aux = fns[0](x)
        return (_CUSTOM, t, _Aux(t, aux), tuple(_flat_pred(c, leaves, is_leaf) for c in children))
    if t is OrderedDict:
        keys = tuple(x)
        return (_ODICT, keys, tuple(_flat_pred(x[k], leaves, is_leaf) for k in keys))
    if isinstance(x, tuple) and hasattr(t, "_fields"):
        return (_NAMEDTUPLE, t, tuple(_flat_pred(c, leaves, is_leaf) for c in x))
    if t in _COMPLEX_TYPES or ((t is _np.ndarray or t is _Array) and x.dtype.kind == "c"):
        return _flat_complex(x, leaves)
    leaves.append(x)
    return _LEAF


class PyTreeDef:
    """The structure of a pytree: comparable, printable, and hashable when
    every registered node's auxiliary data is."""

    __slots__ = ("_node", "num_leaves", "_hash")

    def __init__(self, node, num_leaves):
        self._node = node
        self.num_leaves = num_leaves
        self._hash = None

    def __hash__(self):
        h = self._hash
        if h is None:
            h = self._hash = hash(self._node)
        return h

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        if self._hash is not None and other._hash is not None and self._hash != other._hash:
            return False
        return self.num_leaves == other.num_leaves and self._node == other._node

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __repr__(self):
        return f"PyTreeDef({_node_str(self._node)})"

    __str__ = __repr__

    @property
    def num_nodes(self):
        """Nodes in the tree, leaves and None included (as JAX counts)."""
        return _count_nodes(self._node)

    def children(self):
        """The treedefs of the root's children (empty for a leaf or None)."""
        node = self._node
        if isinstance(node, int):
            return []
        return [PyTreeDef(k, _count(k)) for k in node[-1]]

    def unflatten(self, leaves):
        return unflatten(self, list(leaves))

    def flatten_up_to(self, tree):
        return flatten_up_to(self, tree)


def _count(node):
    if isinstance(node, int):
        return 1 if node == _LEAF else 0
    return sum(_count(k) for k in node[-1])


def _count_nodes(node):
    if isinstance(node, int):
        return 1
    return 1 + sum(_count_nodes(k) for k in node[-1])


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
    # JAX prints the nodes it has no syntax for as CustomNode(name[aux data], [children]),
    # with str() of the auxiliary data: namedtuple[Point], OrderedDict[('b', 'a')].
    if kind == _ODICT:
        name, aux = "OrderedDict", str(tuple(node[1]))
    elif kind == _CUSTOM:
        name, aux = node[1].__name__, str(node[2].value)
    else:
        name, aux = "namedtuple", node[1].__name__
    return f"CustomNode({name}[{aux}], [" + ", ".join(kids) + "])"


def flatten(tree, is_leaf=None):
    """Returns (leaves, treedef).  `is_leaf(subtree)` true makes that
    subtree a leaf (it is asked before looking inside)."""
    leaves = []
    node = _flat(tree, leaves) if is_leaf is None else _flat_pred(tree, leaves, is_leaf)
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
    """The PyTreeDef of a node from flatten_node (one object per structure;
    a structure with unhashable auxiliary data gets a fresh one)."""
    try:
        td = _INTERNED.get(node)
    except TypeError:
        return PyTreeDef(node, _count(node) if num_leaves is None else num_leaves)
    if td is None:
        if len(_INTERNED) > 4096:
            _INTERNED.clear()
        td = PyTreeDef(node, _count(node) if num_leaves is None else num_leaves)
        td._hash = hash(node)
        _INTERNED[node] = td
    return td


def tree_leaves(tree, is_leaf=None):
    leaves = []
    if is_leaf is None:
        _flat(tree, leaves)
    else:
        _flat_pred(tree, leaves, is_leaf)
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
    if kind == _CUSTOM:
        if node[1] is ComplexPair:
            return _complex_join(node[2].value, next(it))
        return _registry[node[1]][1](node[2].value, tuple([_build(k, it) for k in node[3]]))
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


def tree_map(f, tree, *rest, is_leaf=None):
    leaves, td = flatten(tree, is_leaf)
    if not rest:
        return unflatten(td, [f(x) for x in leaves])
    others = [flatten_up_to(td, r) for r in rest]
    return unflatten(td, [f(*xs) for xs in zip(leaves, *others)])


# ---- flattening another tree up to a structure (tree_map's extra trees) ----

def _kind_name(node):
    if isinstance(node, int):
        return "a leaf" if node == _LEAF else "None"
    kind = node[0]
    if kind in (_NAMEDTUPLE, _CUSTOM):
        return f"a {node[1].__name__}"
    return {_TUPLE: "a tuple", _LIST: "a list", _DICT: "a dict",
            _ODICT: "an OrderedDict"}[kind]


def _mismatch(path, node, x, detail=""):
    where = format_keypath(path, "tree")
    raise ValueError(f"cjit: tree structures do not match at {where}: expected "
                     f"{_kind_name(node)} ({_node_str(node)}), got {type(x).__name__}"
                     f"{detail}")


def _up_to(node, x, out, path):
    if isinstance(node, int):
        if node == _LEAF:
            out.append(x)
        elif x is not None:
            _mismatch(path, node, x)
        return
    kind = node[0]
    if kind == _TUPLE or kind == _LIST:
        if type(x) is not (tuple if kind == _TUPLE else list):
            _mismatch(path, node, x)
        kids = node[1]
        if len(x) != len(kids):
            _mismatch(path, node, x, f" of length {len(x)}")
        for i, (k, c) in enumerate(zip(kids, x)):
            _up_to(k, c, out, path + (("index", i),))
        return
    if kind == _DICT or kind == _ODICT:
        if type(x) is not (dict if kind == _DICT else OrderedDict):
            _mismatch(path, node, x)
        keys = tuple(_sorted_keys(x)) if kind == _DICT else tuple(x)
        if keys != node[1]:
            _mismatch(path, node, x, f" with keys {list(keys)}")
        for key, k in zip(keys, node[2]):
            _up_to(k, x[key], out, path + (("key", key),))
        return
    if kind == _NAMEDTUPLE:
        if type(x) is not node[1]:
            _mismatch(path, node, x)
        for name, k, c in zip(node[1]._fields, node[2], x):
            _up_to(k, c, out, path + (("attr", name),))
        return
    if node[1] is ComplexPair:
        if not is_complex(x):
            _mismatch(path, node, x)
        _flat_complex(x, out)
        return
    # a registered class: same class, equal auxiliary data, as many children
    if type(x) is not node[1]:
        _mismatch(path, node, x)
    children, aux = _registry[node[1]][0](x)
    children = list(children)
    if _Aux(node[1], aux) != node[2] or len(children) != len(node[3]):
        _mismatch(path, node, x, f" with auxiliary data {aux!r} and {len(children)} children")
    for i, (k, c) in enumerate(zip(node[3], children)):
        _up_to(k, c, out, path + (("index", i),))


def flatten_up_to(treedef, tree):
    """The subtrees of `tree` at the leaves of `treedef` (whose structure
    must be a prefix of tree's); ValueError naming the first mismatch."""
    out = []
    _up_to(treedef._node, tree, out, ())
    return out


# ---- registration ---------------------------------------------------------

_BUILTIN_NODES = (tuple, list, dict, type(None), OrderedDict)


def register_node(nodetype, flatten_func, unflatten_func):
    """Makes `nodetype` a pytree node: flatten_func(x) -> (children, aux),
    unflatten_func(aux, children) -> x."""
    if not isinstance(nodetype, type):
        raise TypeError(f"cjit: register_pytree_node needs a class, got {nodetype!r}")
    if not callable(flatten_func) or not callable(unflatten_func):
        raise TypeError("cjit: register_pytree_node needs callable flatten and unflatten "
                        "functions")
    if nodetype in _BUILTIN_NODES or nodetype in _registry:
        raise ValueError(f"cjit: {nodetype.__name__} is already registered as a pytree node")
    _registry[nodetype] = (flatten_func, unflatten_func)


def _flatten_defaultdict(d):
    keys = tuple(_sorted_keys(d))
    return [d[k] for k in keys], (d.default_factory, keys)


def _unflatten_defaultdict(aux, children):
    factory, keys = aux
    return defaultdict(factory, zip(keys, children))


register_node(defaultdict, _flatten_defaultdict, _unflatten_defaultdict)


# ---- key paths (error messages) --------------------------------------------

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
        for i, k in enumerate(node[-1]):
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
