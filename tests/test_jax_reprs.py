"""What cjit prints where JAX's documentation shows JAX's output: PyTreeDef
and typed PRNG keys.  The exact strings below are the ones jax 0.10.2
prints for the same values (docs/key-concepts.md, custom_pytrees.md,
random-numbers.md); the generated test checks PyTreeDef's format on random
trees against a formatter written from those rules, on the Python objects
themselves (not through cjit's flatten)."""
import collections
import dataclasses
from typing import NamedTuple

import numpy as np
from hypothesis import given, settings, strategies as st

import cjit
import cjit.random as cr
import cjit.tree_util as tu


class Params(NamedTuple):
    a: int
    b: float


NT = collections.namedtuple("NT", "x y")


@tu.register_pytree_node_class
class Box:
    def __init__(self, v, tag):
        self.v, self.tag = v, tag

    def tree_flatten(self):
        return (self.v,), self.tag

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(children[0], aux)


@tu.register_dataclass
@dataclasses.dataclass
class DC:
    u: object
    w: object = dataclasses.field(metadata=dict(static=True), default=3)


def test_treedef_reprs_are_jax_s():
    cases = [
        (Params(1, 2.0), "PyTreeDef(CustomNode(namedtuple[Params], [*, *]))"),
        (NT(1, (2, 3)), "PyTreeDef(CustomNode(namedtuple[NT], [*, (*, *)]))"),
        (collections.OrderedDict(b=1, a=2), "PyTreeDef(CustomNode(OrderedDict[('b', 'a')], [*, *]))"),
        (collections.defaultdict(list, {"a": 1}),
         "PyTreeDef(CustomNode(defaultdict[(<class 'list'>, ('a',))], [*]))"),
        (Box(1, "tag"), "PyTreeDef(CustomNode(Box[tag], [*]))"),
        (Box(1, None), "PyTreeDef(CustomNode(Box[None], [*]))"),
        (DC(1), "PyTreeDef(CustomNode(DC[(3,)], [*]))"),
        (None, "PyTreeDef(None)"), ((None,), "PyTreeDef((None,))"), ([1, None], "PyTreeDef([*, None])"),
        ({"a": (1,)}, "PyTreeDef({'a': (*,)})"), (1, "PyTreeDef(*)"), ((), "PyTreeDef(())"),
    ]
    for tree, want in cases:
        assert str(cjit.tree.structure(tree)) == want
        assert repr(tu.tree_structure(tree)) == want


def test_typed_key_reprs_are_jax_s():
    k = cr.key(42)
    assert repr(k) == str(k) == "Array((), dtype=key<fry>) overlaying:\n[ 0 42]"
    ks = cr.split(k, 3)
    assert repr(ks) == ("Array((3,), dtype=key<fry>) overlaying:\n[[1832780943  270669613]\n"
                        " [  64467757 2916123636]\n [2465931498  255383827]]")
    assert ks.size == 3 and k.size == 1
    assert repr(cr.split(k, 0)) == "Array((0,), dtype=key<fry>) overlaying:\n[]"


@settings(max_examples=30, deadline=None)
@given(shape=st.sampled_from([(), (1,), (3,), (2, 2), (0,), (2, 0, 3)]), seed=st.integers(0, 2**31 - 1))
def test_typed_key_repr_layout(shape, seed):
    """JAX's layout for any shape: the key shape and dtype, then the uint32
    words (shape + (2,)) as NumPy's str() prints them."""
    n = int(np.prod(shape, dtype=np.int64))
    keys = cr.split(cr.key(seed), n)
    keys = cr.wrap_key_data(np.asarray(cr.key_data(keys)).reshape(shape + (2,)))
    words = np.asarray(cr.key_data(keys))
    assert repr(keys) == f"Array({shape}, dtype=key<fry>) overlaying:\n{words}"
    assert keys.size == n and keys.shape == shape


# -- generated pytrees -----------------------------------------------------------

class Point(NamedTuple):
    x: object
    y: object


def _jax_format(t):
    """PyTreeDef's text as JAX writes it, from the object."""
    if t is None:
        return "None"
    if type(t) is tuple:
        kids = [_jax_format(c) for c in t]
        return "(" + ", ".join(kids) + ("," if len(kids) == 1 else "") + ")"
    if type(t) is list:
        return "[" + ", ".join(_jax_format(c) for c in t) + "]"
    if type(t) is dict:
        return "{" + ", ".join(f"{k!r}: {_jax_format(t[k])}" for k in sorted(t)) + "}"
    if type(t) is collections.OrderedDict:
        return (f"CustomNode(OrderedDict[{tuple(t)}], ["
                + ", ".join(_jax_format(v) for v in t.values()) + "])")
    if type(t) is Point:
        return "CustomNode(namedtuple[Point], [" + ", ".join(_jax_format(c) for c in t) + "])"
    if type(t) is Box:
        return f"CustomNode(Box[{t.tag}], [{_jax_format(t.v)}])"
    return "*"


def _trees():
    leaves = st.one_of(st.integers(-5, 5), st.floats(-1, 1), st.just(np.float32(1.5)))
    keys = st.text(alphabet="abcxyz ", min_size=1, max_size=3)

    def extend(children):
        return st.one_of(
            st.none(),
            st.lists(children, max_size=3).map(tuple),
            st.lists(children, max_size=3),
            st.dictionaries(keys, children, max_size=3),
            st.dictionaries(keys, children, max_size=3).map(collections.OrderedDict),
            st.tuples(children, children).map(lambda p: Point(*p)),
            st.tuples(children, st.sampled_from(["t", "relu", None, 7])).map(lambda p: Box(*p)),
        )
    return st.recursive(st.one_of(leaves, st.none()), extend, max_leaves=8)


@settings(max_examples=60, deadline=None)
@given(tree=_trees())
def test_treedef_repr_matches_jax_format(tree):
    td = cjit.tree.structure(tree)
    assert str(td) == f"PyTreeDef({_jax_format(tree)})"
    assert str(td).count("*") == td.num_leaves == len(cjit.tree.leaves(tree))
