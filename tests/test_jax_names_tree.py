"""JAX's pytree names that ported programs use: the cjit.tree module, key
paths (tree_flatten_with_path and friends, keystr, the key classes),
register_dataclass, register_pytree_with_keys(_class), Partial, and a
generated test over random nested pytrees."""
import collections
import dataclasses
import functools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cjit
import cjit.numpy as cnp
from cjit import tree_util as tu

Pt = collections.namedtuple("Pt", "x y")


@tu.register_dataclass
@dataclasses.dataclass
class Layer:
    w: object
    b: object
    act: str = dataclasses.field(default="tanh", metadata={"static": True})


@tu.register_pytree_with_keys_class
class Named:
    """Registered with keys: children under DictKey('lo') and GetAttrKey('hi')."""

    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi

    def tree_flatten_with_keys(self):
        return [(tu.DictKey("lo"), self.lo), (tu.GetAttrKey("hi"), self.hi)], None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


class Plain:
    """Registered without keys: its children get FlattenedIndexKey."""

    def __init__(self, a, b):
        self.a, self.b = a, b


tu.register_pytree_node(Plain, lambda p: ((p.a, p.b), "tag"), lambda aux, ch: Plain(*ch))


# ---- cjit.tree: the short names ---------------------------------------------------

def test_tree_module_names_are_the_tree_util_functions():
    names = {"map": "tree_map", "leaves": "tree_leaves", "structure": "tree_structure",
             "flatten": "tree_flatten", "unflatten": "tree_unflatten", "reduce": "tree_reduce",
             "all": "tree_all", "transpose": "tree_transpose", "broadcast": "tree_broadcast",
             "flatten_with_path": "tree_flatten_with_path", "map_with_path": "tree_map_with_path",
             "leaves_with_path": "tree_leaves_with_path"}
    for short, long in names.items():
        assert getattr(cjit.tree, short) is getattr(tu, long), short


def test_tree_module_behaviour():
    t = {"b": [1, 2], "a": (3, None)}
    assert cjit.tree.leaves(t) == [3, 1, 2]
    assert cjit.tree.map(lambda x, y: x * 10 + y, t, {"b": [1, 1], "a": (2, None)}) == \
        {"a": (32, None), "b": [11, 21]}
    leaves, td = cjit.tree.flatten(t)
    assert cjit.tree.unflatten(td, [7, 8, 9]) == {"a": (7, None), "b": [8, 9]}
    assert str(cjit.tree.structure(t)) == "PyTreeDef({'a': (*, None), 'b': [*, *]})"
    assert cjit.tree.reduce(lambda a, b: a * b, t) == 6
    assert cjit.tree.reduce(lambda a, b: a + b, [], 5) == 5
    assert cjit.tree.all([1, (True, 2)]) and not cjit.tree.all([1, (0, 2)])
    assert cjit.tree.all([None, {}])                         # no leaves: True


def test_transpose_with_and_without_inner_treedef():
    outer = cjit.tree.structure([0, 0, 0])
    inner = cjit.tree.structure({"a": 0, "b": 0})
    tree = [{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"a": 5, "b": 6}]
    want = {"a": [1, 3, 5], "b": [2, 4, 6]}
    assert cjit.tree.transpose(outer, inner, tree) == want
    assert cjit.tree.transpose(outer, None, tree) == want   # inner inferred from the first


def test_broadcast_repeats_prefix_leaves_over_subtrees():
    assert cjit.tree.broadcast([1, {"a": 2}], [(7, 8), {"a": [9, None, 9]}]) == \
        [(1, 1), {"a": [2, None, 2]}]
    assert cjit.tree.broadcast(5, {"x": 1, "y": (2, 3)}) == {"x": 5, "y": (5, 5)}
    with pytest.raises(ValueError, match="tree structures do not match"):
        cjit.tree.broadcast([1, 2], (1, 2))


def test_reduce_associative_is_a_balanced_reduction():
    calls = []

    def op(a, b):
        calls.append((a, b))
        return a + b
    assert tu.tree_reduce_associative(op, [1, 2, 3, 4, 5]) == 15
    assert calls[:2] == [(1, 2), (3, 4)]                    # neighbours first
    assert tu.tree_reduce_associative(op, [], identity=0) == 0
    with pytest.raises(TypeError):
        tu.tree_reduce_associative(op, [])


# ---- key paths: the exact strings JAX documents ------------------------------------

def test_keystr_of_nested_containers():
    tree = {"a": [1, Pt(2, 3)], "b": None, "c": collections.OrderedDict(z=4),
            "d": collections.defaultdict(list, {"q": 5}), 7: (6,)}
    tree = {k: v for k, v in tree.items() if k != 7}
    got = [(tu.keystr(p), x) for p, x in tu.tree_leaves_with_path(tree)]
    assert got == [("['a'][0]", 1), ("['a'][1].x", 2), ("['a'][1].y", 3), ("['c']['z']", 4),
                   ("['d']['q']", 5)]
    p = tu.tree_leaves_with_path(tree)[1][0]
    assert p == (tu.DictKey("a"), tu.SequenceKey(1), tu.GetAttrKey("x"))
    assert tu.keystr(p, simple=True, separator="/") == "a/1/x"
    assert tu.keystr(()) == ""
    assert tu.keystr((tu.DictKey(3), tu.DictKey("s"))) == "[3]['s']"


def test_key_classes_fields_repr_eq_hash():
    assert tu.DictKey("a").key == "a" and tu.SequenceKey(2).idx == 2
    assert tu.GetAttrKey("w").name == "w" and tu.FlattenedIndexKey(1).key == 1
    assert repr(tu.DictKey("a")) == "DictKey(key='a')"
    assert repr(tu.SequenceKey(0)) == "SequenceKey(idx=0)"
    assert repr(tu.GetAttrKey("x")) == "GetAttrKey(name='x')"
    assert repr(tu.FlattenedIndexKey(0)) == "FlattenedIndexKey(key=0)"
    assert str(tu.FlattenedIndexKey(3)) == "[<flat index 3>]"
    assert tu.DictKey("a") == tu.DictKey("a") != tu.DictKey("b")
    assert tu.DictKey(0) != tu.SequenceKey(0)
    assert len({tu.DictKey("a"), tu.DictKey("a"), tu.GetAttrKey("a")}) == 2


def test_paths_of_registered_classes():
    tree = [Plain(1, 2), Named(3, 4), Layer(5, 6)]
    got = [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(tree)]
    assert got == ["[0][<flat index 0>]", "[0][<flat index 1>]", "[1]['lo']", "[1].hi",
                   "[2].w", "[2].b"]
    assert [x for _, x in tu.tree_leaves_with_path(tree)] == [1, 2, 3, 4, 5, 6]


def test_flatten_with_path_of_a_leaf_and_of_none():
    assert tu.tree_flatten_with_path(1)[0] == [((), 1)]
    assert tu.tree_leaves_with_path(None) == []
    assert tu.tree_leaves_with_path([None, 1], is_leaf=lambda x: x is None) == \
        [((tu.SequenceKey(0),), None), ((tu.SequenceKey(1),), 1)]


def test_is_leaf_takes_path():
    tree = {"keep": [1, 2], "walk": [3, 4]}
    pairs, td = tu.tree_flatten_with_path(
        tree, is_leaf=lambda p, x: p == (tu.DictKey("keep"),), is_leaf_takes_path=True)
    assert [x for _, x in pairs] == [[1, 2], 3, 4]
    assert td.num_leaves == 3
    assert tu.tree_unflatten(td, ["K", 30, 40]) == {"keep": "K", "walk": [30, 40]}


def test_map_with_path():
    out = tu.tree_map_with_path(lambda p, x, y: f"{tu.keystr(p)}={x + y}",
                                {"a": 1, "b": [2, Pt(3, 4)]}, {"a": 10, "b": [20, Pt(30, 40)]})
    assert out == {"a": "['a']=11", "b": ["['b'][0]=22", Pt("['b'][1].x=33", "['b'][1].y=44")]}
    assert cjit.tree.map_with_path(lambda p, x: len(p), [[1], 2]) == [[2], 1]


def test_complex_values_are_leaves_with_paths():
    pairs = tu.tree_leaves_with_path({"z": 1 + 2j, "a": np.array([1j])})
    assert [tu.keystr(p) for p, _ in pairs] == ["['a']", "['z']"]
    assert pairs[1][1] == 1 + 2j


# ---- register_dataclass, register_pytree_with_keys, Partial --------------------------

def test_register_dataclass_structure_and_rebuild():
    leaves, td = tu.tree_flatten(Layer(1.0, 2.0, "relu"))
    assert leaves == [1.0, 2.0]
    assert str(td) == "PyTreeDef(CustomNode(Layer[('relu',)], [*, *]))"
    assert tu.tree_unflatten(td, [3, 4]) == Layer(3, 4, "relu")
    assert tu.tree_structure(Layer(0, 0, "relu")) != tu.tree_structure(Layer(0, 0, "tanh"))


def test_register_dataclass_explicit_fields_and_errors():
    @dataclasses.dataclass
    class S:
        x: object
        n: int
        scratch: object = None

    tu.register_dataclass(S, data_fields=["x"], meta_fields=["n"], drop_fields=["scratch"])
    assert tu.tree_leaves(S(np.float64(1.5), 3)) == [1.5]
    assert tu.tree_map(lambda v: v * 2, S(1.5, 3)) == S(3.0, 3)

    @dataclasses.dataclass
    class T:
        x: object
        y: object
    with pytest.raises(ValueError, match=r"missing \['y'\]"):
        tu.register_dataclass(T, data_fields=["x"], meta_fields=[])
    with pytest.raises(TypeError, match="both"):
        tu.register_dataclass(T, data_fields=["x", "y"])
    with pytest.raises(TypeError, match="not a dataclass"):
        tu.register_dataclass(type("NotDC", (), {}))


def test_registered_classes_inside_jit_grad_vmap():
    layer = Layer(np.array([1.0, 2.0]), np.array([0.5, -1.0]), "tanh")

    def f(l, x):
        y = l.w * x + l.b
        return cnp.sum(cnp.tanh(y) if l.act == "tanh" else y)

    x = np.array([0.3, 0.7])
    want = np.sum(np.tanh(layer.w * x + layer.b))
    np.testing.assert_allclose(cjit.jit(f)(layer, x), want, rtol=1e-14)
    g = cjit.grad(f)(layer, x)
    assert type(g) is Layer and g.act == "tanh"
    sech2 = 1 - np.tanh(layer.w * x + layer.b) ** 2
    np.testing.assert_allclose(g.w, sech2 * x, rtol=1e-13)
    np.testing.assert_allclose(g.b, sech2, rtol=1e-13)
    out = cjit.vmap(lambda n: n.lo * n.hi)(Named(np.arange(3.0), np.full(3, 2.0)))
    np.testing.assert_array_equal(out, [0.0, 2.0, 4.0])
    back = cjit.jit(lambda n: Named(n.hi, n.lo))(Named(np.ones(2), np.zeros(2)))
    assert type(back) is Named
    np.testing.assert_array_equal(back.lo, [0.0, 0.0])


def test_partial_is_a_pytree_through_jit_and_grad():
    scale = tu.Partial(lambda a, x: a * x, np.array([3.0, 4.0]))
    assert isinstance(scale, functools.partial)
    leaves, td = tu.tree_flatten(scale)
    assert len(leaves) == 1 and np.array_equal(leaves[0], [3.0, 4.0])
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(scale)] == ["[<flat index 0>][0]"]
    np.testing.assert_array_equal(cjit.jit(lambda p, x: p(x))(scale, np.ones(2)), [3.0, 4.0])
    made = cjit.jit(lambda a: tu.Partial(cnp.multiply, a))(np.array([1.0, 2.0]))
    assert isinstance(made, tu.Partial)
    np.testing.assert_array_equal(made(3.0), [3.0, 6.0])
    g = cjit.grad(lambda p: cnp.sum(p(np.array([5.0, 6.0]))))(scale)
    np.testing.assert_array_equal(g.args[0], [5.0, 6.0])
    kw = tu.Partial(lambda x, *, k: x + k, k=np.array(1.0))
    assert tu.tree_leaves(kw) == [1.0] and kw(2.0) == 3.0
    with pytest.raises(TypeError, match="callable"):
        tu.Partial(3)


def test_register_pytree_with_keys_derives_flatten():
    class KV:
        def __init__(self, d):
            self.d = d
    tu.register_pytree_with_keys(
        KV, lambda kv: ([(tu.DictKey(k), kv.d[k]) for k in sorted(kv.d)], tuple(sorted(kv.d))),
        lambda keys, ch: KV(dict(zip(keys, ch))))
    t = KV({"b": 2, "a": 1})
    assert tu.tree_leaves(t) == [1, 2]
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(t)] == ["['a']", "['b']"]
    assert tu.tree_map(lambda x: -x, t).d == {"a": -1, "b": -2}


def test_keystr_against_jax():
    jtu = pytest.importorskip("jax.tree_util")
    tree = {"a": [1, Pt(2, 3)], "c": collections.OrderedDict(z=4), "e": (None, 5)}
    ours = [(tu.keystr(p), x) for p, x in tu.tree_leaves_with_path(tree)]
    theirs = [(jtu.keystr(p), x) for p, x in jtu.tree_leaves_with_path(tree)]
    assert ours == theirs


# ---- generated: random nested pytrees ------------------------------------------------

def _trees():
    leaf = st.one_of(st.integers(-5, 5), st.floats(-2, 2, allow_nan=False), st.just("s"))
    keys = st.text("abcxyz", min_size=1, max_size=3)

    def nodes(children):
        return st.one_of(
            st.lists(children, max_size=3),
            st.lists(children, max_size=3).map(tuple),
            st.dictionaries(keys, children, max_size=3),
            st.tuples(children, children).map(lambda xy: Pt(*xy)),
            st.tuples(children, children).map(lambda ab: Plain(*ab)),
            st.tuples(children, children).map(lambda ab: Named(*ab)),
            st.tuples(children, children).map(lambda wb: Layer(*wb)),
            st.dictionaries(keys, children, max_size=2).map(collections.OrderedDict),
        )
    return st.recursive(st.one_of(leaf, st.none()), nodes, max_leaves=12)


def _same(a, b):
    """Structural equality that also compares the registered classes."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (Plain, Named)):
        return _same(list(vars(a).values()), list(vars(b).values()))
    if isinstance(a, Layer):
        return a.act == b.act and _same(a.w, b.w) and _same(a.b, b.b)
    if isinstance(a, collections.OrderedDict) and list(a) != list(b):
        return False
    if isinstance(a, dict):
        return set(a) == set(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _follow(tree, path):
    """The subtree a key path names, followed by hand from its keys."""
    for k in path:
        if isinstance(k, tu.SequenceKey):
            tree = tree[k.idx]
        elif isinstance(k, tu.DictKey):
            tree = tree.lo if isinstance(tree, Named) else tree[k.key]
        elif isinstance(k, tu.GetAttrKey):
            tree = getattr(tree, k.name)
        else:
            tree = (tree.a, tree.b)[k.key]
    return tree


@settings(max_examples=60, deadline=None)
@given(_trees())
def test_generated_trees_round_trip_and_paths_agree(tree):
    leaves, td = tu.tree_flatten(tree)
    assert _same(tu.tree_unflatten(td, leaves), tree)
    pairs, td2 = tu.tree_flatten_with_path(tree)
    assert td2 == td
    assert [x for _, x in pairs] == leaves
    assert tu.tree_leaves_with_path(tree) == pairs
    assert cjit.tree.leaves(tree) == leaves
    strings = [tu.keystr(p) for p, _ in pairs]
    assert len(set(strings)) == len(strings)                # distinct leaves, distinct paths
    for (p, x), s in zip(pairs, strings):
        assert _follow(tree, p) is x                        # the path leads to the leaf
        assert s == "".join(str(k) for k in p)
    mapped = tu.tree_map_with_path(lambda p, x: tu.keystr(p), tree)
    assert tu.tree_leaves(mapped) == strings
    assert tu.tree_structure(mapped) == td
