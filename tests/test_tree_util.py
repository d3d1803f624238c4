"""cjit.tree_util: JAX's pytree semantics (leaf order, None, dicts, namedtuples,
registered classes), the same machinery under jit/grad/vjp, and the C fast
path falling back correctly for registered classes.  Where JAX is installed
the structures are also compared with jax.tree_util's."""
import collections
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp
from cjit import tree_util as tu


# ---- classes registered once for the whole module ------------------------------

@tu.register_pytree_node_class
class Point:
    """Two children and a hashable tag (aux data)."""

    def __init__(self, x, y, tag="p"):
        self.x, self.y, self.tag = x, y, tag

    def tree_flatten(self):
        return (self.x, self.y), self.tag

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, tag=aux)


class Box:
    """Registered with register_pytree_node; children in reverse field order."""

    def __init__(self, a, b):
        self.a, self.b = a, b


tu.register_pytree_node(Box, lambda bx: ((bx.b, bx.a), None), lambda aux, ch: Box(ch[1], ch[0]))


class Tagged:
    """Unhashable aux data (a list): fine for tree_map, not for jit."""

    def __init__(self, v, names):
        self.v, self.names = v, names


tu.register_pytree_node(Tagged, lambda t: ((t.v,), list(t.names)), lambda aux, ch: Tagged(ch[0], aux))

Pair = collections.namedtuple("Pair", "first second")


# ---- leaf order and structure ---------------------------------------------------

def test_leaf_order_sequences_and_sorted_dict_keys():
    tree = [1, None, (2, {"b": 3, "a": 4}), {"z": [5], "m": 6}]
    assert tu.tree_leaves(tree) == [1, 2, 4, 3, 6, 5]
    leaves, td = tu.tree_flatten(tree)
    assert leaves == [1, 2, 4, 3, 6, 5]
    assert td.num_leaves == 6
    assert str(td) == "PyTreeDef([*, None, (*, {'a': *, 'b': *}), {'m': *, 'z': [*]}])"
    back = tu.tree_unflatten(td, leaves)
    assert back == tree and list(back[3]) == ["m", "z"]   # rebuilt in sorted key order


def test_dict_insertion_order_is_not_structure_but_ordereddict_order_is():
    assert tu.tree_structure({"b": 1, "a": 2}) == tu.tree_structure({"a": 0, "b": 0})
    o1 = collections.OrderedDict([("b", 1), ("a", 2)])
    o2 = collections.OrderedDict([("a", 1), ("b", 2)])
    assert tu.tree_leaves(o1) == [1, 2]
    assert tu.tree_structure(o1) != tu.tree_structure(o2)
    assert tu.tree_structure(o1) != tu.tree_structure(dict(o1))
    assert type(tu.tree_map(lambda x: x, o1)) is collections.OrderedDict


def test_none_is_an_empty_subtree():
    assert tu.tree_leaves(None) == []
    assert tu.tree_leaves([None, (None,), {"a": None}]) == []
    td = tu.tree_structure(None)
    assert td.num_leaves == 0 and td.num_nodes == 1 and str(td) == "PyTreeDef(None)"
    assert tu.tree_map(lambda x: x + 1, [1, None, {"a": None, "b": 2}]) == [2, None, {"a": None, "b": 3}]
    # is_leaf can make None a leaf
    assert tu.tree_leaves([None, 1], is_leaf=lambda x: x is None) == [None, 1]
    assert tu.tree_map(lambda x: 0 if x is None else x, [None, 1],
                       is_leaf=lambda x: x is None) == [0, 1]


def test_is_leaf_stops_descent():
    tree = {"a": (1, 2), "b": [3, (4, 5)]}
    leaves = tu.tree_leaves(tree, is_leaf=lambda x: isinstance(x, tuple))
    assert leaves == [(1, 2), 3, (4, 5)]
    assert tu.tree_structure(tree, is_leaf=lambda x: isinstance(x, tuple)).num_leaves == 3


def test_namedtuple_round_trip():
    p = Pair(1, (2, 3))
    leaves, td = tu.tree_flatten(p)
    assert leaves == [1, 2, 3]
    back = tu.tree_unflatten(td, [10, 20, 30])
    assert type(back) is Pair and back == Pair(10, (20, 30))
    assert td != tu.tree_structure((1, (2, 3)))
    assert td.num_nodes == 5


def test_defaultdict_keeps_its_factory():
    d = collections.defaultdict(list, {"b": 1, "a": 2})
    assert tu.tree_leaves(d) == [2, 1]
    out = tu.tree_map(lambda x: x * 10, d)
    assert type(out) is collections.defaultdict and out.default_factory is list
    assert dict(out) == {"a": 20, "b": 10}
    assert tu.tree_structure(d) != tu.tree_structure(dict(d))


def test_registered_classes_round_trip():
    p = Point(np.ones(2), [3.0, None], tag="q")
    leaves, td = tu.tree_flatten(p)
    assert len(leaves) == 2 and leaves[1] == 3.0
    assert str(td) == "PyTreeDef(CustomNode(Point[q], [*, [*, None]]))"   # JAX prints str() of the aux data
    back = tu.tree_unflatten(td, [5, 6])
    assert type(back) is Point and back.x == 5 and back.y == [6, None] and back.tag == "q"
    # aux data is part of the structure
    assert tu.tree_structure(Point(1, 2, "a")) != tu.tree_structure(Point(1, 2, "b"))
    assert tu.tree_structure(Point(1, 2, "a")) == tu.tree_structure(Point(7, 8, "a"))
    # children come in the order flatten gives them
    b = Box("A", "B")
    assert tu.tree_leaves(b) == ["B", "A"]
    b2 = tu.tree_map(str.lower, b)
    assert type(b2) is Box and (b2.a, b2.b) == ("a", "b")
    # nested inside builtin containers and each other
    t = {"k": [Box(Point(1, 2), 3)]}
    assert tu.tree_leaves(t) == [3, 1, 2]
    assert tu.tree_map(lambda x: -x, t)["k"][0].a.y == -2


def test_unhashable_aux_flattens_but_cannot_be_hashed():
    t = Tagged(1.0, ["a"])
    out = tu.tree_map(lambda x: x * 2, t)
    assert out.v == 2.0 and out.names == ["a"]
    td = tu.tree_structure(t)
    assert td == tu.tree_structure(Tagged(3.0, ["a"]))
    with pytest.raises(TypeError, match="auxiliary data of pytree node Tagged is not hashable"):
        hash(td)


def test_tree_map_several_trees_and_prefixes():
    assert tu.tree_map(lambda x, y: x + y, [1, (2, 3)], [10, (20, 30)]) == [11, (22, 33)]
    # the first tree is a prefix: the others' subtrees at its leaves come whole
    assert tu.tree_map(lambda x, y: (x, y), [1, 2], [(3, 4), {"a": 5}]) == [(1, (3, 4)), (2, {"a": 5})]
    assert tu.tree_map(lambda x, y: x * y, Point(1, 2), Point(3, 4)).y == 8
    with pytest.raises(ValueError, match=r"tree\[1\].*expected None"):
        tu.tree_map(lambda x, y: x, [1, None], [2, 3])
    with pytest.raises(ValueError, match="keys"):
        tu.tree_map(lambda x, y: x, {"a": 1}, {"b": 1})
    with pytest.raises(ValueError, match="length"):
        tu.tree_map(lambda x, y: x, (1, 2), (1, 2, 3))
    with pytest.raises(ValueError, match="auxiliary data"):
        tu.tree_map(lambda x, y: x, Point(1, 2, "a"), Point(1, 2, "b"))
    with pytest.raises(ValueError, match="expected a Pair"):
        tu.tree_map(lambda x, y: x, Pair(1, 2), (1, 2))


def test_reduce_all_transpose_and_treedef_helpers():
    import operator
    assert tu.tree_reduce(operator.add, [1, (2, 3), None]) == 6
    assert tu.tree_reduce(operator.add, [], 7) == 7
    with pytest.raises(TypeError):
        tu.tree_reduce(operator.add, [])
    assert tu.tree_all([True, (1, None)]) and tu.tree_all([])
    assert not tu.tree_all({"a": True, "b": 0})
    outer, inner = tu.tree_structure([0, 0]), tu.tree_structure((0, 0, 0))
    assert tu.tree_transpose(outer, inner, [(1, 2, 3), (4, 5, 6)]) == ([1, 4], [2, 5], [3, 6])
    assert tu.all_leaves([1, np.ones(2)]) and not tu.all_leaves([1, None])
    assert tu.treedef_is_leaf(tu.tree_structure(1)) and tu.treedef_is_leaf(tu.tree_structure(None))
    assert not tu.treedef_is_leaf(tu.tree_structure((1,)))
    kids = tu.treedef_children(tu.tree_structure([1, (2,)]))
    assert kids == [tu.tree_structure(0), tu.tree_structure((0,))]
    td = tu.tree_structure([1, 2])
    assert td.unflatten(iter([3, 4])) == [3, 4]
    assert td.flatten_up_to([(1,), 2]) == [(1,), 2]


def test_bad_uses_raise_clearly():
    with pytest.raises(ValueError, match="has 2 leaves, got 1"):
        tu.tree_unflatten(tu.tree_structure([1, 2]), [1])
    with pytest.raises(TypeError, match="PyTreeDef"):
        tu.tree_unflatten([1, 2], [1, 2])
    for t in (tuple, list, dict, type(None), collections.OrderedDict, Point):
        with pytest.raises(ValueError, match="already registered"):
            tu.register_pytree_node(t, lambda x: ((), None), lambda a, c: None)
    with pytest.raises(TypeError, match="needs a class"):
        tu.register_pytree_node("Point", lambda x: ((), None), lambda a, c: None)
    with pytest.raises(TypeError, match="tree_flatten"):
        tu.register_pytree_node_class(type("NoMethods", (), {}))
    with pytest.raises(TypeError, match="sortable"):
        tu.tree_leaves({1: 1, "a": 2})


# ---- the same machinery under jit, grad, vjp -----------------------------------

def test_jit_registered_class_argument_hits_the_cache():
    @cjit.jit
    def f(p, s):
        return p.x * s + p.y

    x, y = np.arange(4.0), np.full(4, 0.5)
    want = x * 3.0 + y
    for _ in range(2):
        np.testing.assert_array_equal(f(Point(x, y), 3.0), want)
    # registered classes take the Python path (the C walk declines them),
    # which found the entry the first call compiled
    assert f.cache_info() == {"hits": 1, "misses": 1, "entries": 1}
    assert f._fast_entries == 0 and f._fast_hits == 0
    # a new aux value is a new structure: a new entry
    np.testing.assert_array_equal(f(Point(x, y, tag="other"), 3.0), want)
    assert f.cache_info()["misses"] == 2


def test_jit_registered_class_output_on_the_fast_path():
    @cjit.jit
    def f(a, b):
        return {"p": Point(a + b, (a * b, None), tag="out"), "n": Pair(a, b)}

    a, b = np.arange(3.0), np.ones(3)
    for _ in range(3):
        out = f(a, b)
        assert type(out["p"]) is Point and out["p"].tag == "out"
        np.testing.assert_array_equal(out["p"].x, a + b)
        np.testing.assert_array_equal(out["p"].y[0], a * b)
        assert out["p"].y[1] is None
        assert type(out["n"]) is Pair
    # plain array arguments: the C fast path serves the hits and rebuilds the classes
    assert f.cache_info() == {"hits": 2, "misses": 1, "entries": 1}
    assert f._fast_hits == 2


def test_fast_path_does_not_confuse_a_class_with_its_leaves():
    @cjit.jit
    def f(t):
        if isinstance(t, Point):
            return t.x - t.y
        if isinstance(t, Pair):
            return t.first * t.second
        return t[0] + t[1]

    a, b = np.full(2, 3.0), np.full(2, 2.0)
    for _ in range(2):
        np.testing.assert_array_equal(f((a, b)), a + b)
        np.testing.assert_array_equal(f(Point(a, b)), a - b)
        np.testing.assert_array_equal(f(Pair(a, b)), a * b)
    assert f.cache_info() == {"hits": 3, "misses": 3, "entries": 3}
    assert f._fast_hits == 1   # only the plain tuple takes the C path


def test_jit_rejects_unhashable_aux_clearly():
    f = cjit.jit(lambda t: t.v * 2)
    with pytest.raises(TypeError, match="Tagged is not hashable"):
        f(Tagged(np.ones(2), ["a"]))


def test_jit_error_names_a_registered_class_child():
    f = cjit.jit(lambda p: p.x)
    with pytest.raises(TypeError, match=r"p\[1\]"):   # Point's child 1 (y) is a str
        f(Point(np.ones(2), "no"))


def test_grad_value_and_grad_vjp_with_registered_classes():
    def loss(p, x):
        return cnp.sum((p.x * x + p.y[0]) ** 2)

    x = np.array([1.0, 2.0, -1.0])
    p = Point(np.array([0.5, -1.0, 2.0]), [np.array(0.25), None], tag="w")
    r = p.x * x + p.y[0]
    for g in (cjit.grad(loss)(p, x), cjit.jit(cjit.grad(loss))(p, x), cjit.grad(loss)(p, x)):
        assert type(g) is Point and g.tag == "w" and g.y[1] is None
        np.testing.assert_allclose(g.x, 2 * r * x, rtol=1e-12)
        np.testing.assert_allclose(g.y[0], np.sum(2 * r), rtol=1e-12)
    v, g = cjit.value_and_grad(loss)(p, x)
    np.testing.assert_allclose(v, np.sum(r ** 2), rtol=1e-12)
    assert type(g) is Point
    out, f_vjp = cjit.vjp(lambda q: Box(q.x * 2, q.y[0]), p)
    assert type(out) is Box
    (gp,) = f_vjp(Box(np.ones(3), np.array(1.0)))
    assert type(gp) is Point
    np.testing.assert_allclose(gp.x, np.full(3, 2.0))
    np.testing.assert_allclose(gp.y[0], 1.0)


def test_public_module_is_the_machinery_jit_uses():
    # one registry: a class registered through tree_util is a node for jit's flatten
    assert cjit.api._tree.tree_leaves(Point(1, 2)) == [1, 2]
    assert tu.PyTreeDef is cjit._tree.PyTreeDef
    # and jit's structure objects are tree_util's
    leaves, node = cjit._tree.flatten_args((Point(1, 2),), {})
    assert cjit._tree.treedef_of(node) == tu.tree_structure(((Point(0, 0),), {}))


# ---- arguments outside argnums stay concrete outside jit ------------------------

def test_grad_other_arguments_are_concrete_outside_jit():
    w = np.arange(5.0)
    g = cjit.grad(lambda w, i: cnp.sum(w[i:i + 2] ** 2))
    for i in (1, 3, 1, np.int64(2), np.array(0)):
        want = np.zeros(5)
        want[int(i):int(i) + 2] = 2 * w[int(i):int(i) + 2]
        np.testing.assert_array_equal(g(w, i), want)
    # one entry per distinct value: 1 and 3 and np.int64(2) and array(0);
    # the repeated 1 is a hit
    info = g._cjit_concrete._jitted.cache_info()
    assert info == {"hits": 1, "misses": 4, "entries": 4}


def test_value_and_grad_concrete_kwargs_and_objects():
    w = np.array([1.0, -2.0, 3.0])

    def f(w, x, *, mode, act=None):
        y = w * x if act is None else act(w * x)
        return cnp.sum(y) if mode == "sum" else cnp.max(y)

    vg = cjit.value_and_grad(f)
    v, g = vg(w, np.ones(3), mode="sum")
    np.testing.assert_allclose(v, 2.0)
    np.testing.assert_allclose(g, np.ones(3))
    v, g = vg(w, np.ones(3), mode="max", act=cnp.tanh)
    np.testing.assert_allclose(v, np.tanh(3.0))
    np.testing.assert_allclose(g, [0, 0, 1 - np.tanh(3.0) ** 2], atol=1e-15)
    # a float used in Python control flow, with has_aux
    h = cjit.grad(lambda w, t: (cnp.sum(w * 2) if t > 0.5 else cnp.sum(w), t), has_aux=True)
    g, aux = h(w, 0.75)
    np.testing.assert_allclose(g, np.full(3, 2.0))
    assert aux == 0.75
    g, _ = h(w, 0.25)
    np.testing.assert_allclose(g, np.ones(3))


def test_string_and_slice_bound_together():
    # the first trace fails on the string (jit refuses it), the retry makes
    # both the string and the int static
    g = cjit.grad(lambda w, mode, i: cnp.sum(w[i:] ** 2) * (2.0 if mode == "double" else 1.0))
    w = np.arange(4.0)
    np.testing.assert_array_equal(g(w, "double", 2), [0, 0, 8, 12])
    np.testing.assert_array_equal(g(w, "single", 1), [0, 2, 4, 6])
    with pytest.raises(TypeError, match="has type set"):   # unhashable: cannot be made static
        g(w, {"double"}, 1)


def test_arrays_outside_argnums_stay_dynamic_on_the_concrete_route():
    g = cjit.grad(lambda w, x, i: cnp.sum(w[i:] * x[i:]))
    w = np.ones(4)
    for k in range(3):
        x = np.arange(4.0) + k
        want = np.where(np.arange(4) >= 1, x, 0.0)
        np.testing.assert_array_equal(g(w, x, 1), want)
    # x changes but i does not: one compile
    assert g._cjit_concrete._jitted.cache_info()["misses"] == 1


def test_traced_integer_slice_bound_still_raises_inside_jit():
    g = cjit.grad(lambda w, i: cnp.sum(w[i:i + 2] ** 2))
    with pytest.raises(cjit.errors.ConcretizationError, match="__index__"):
        cjit.jit(g)(np.arange(5.0), 1)
    np.testing.assert_array_equal(cjit.jit(g, static_argnums=1)(np.arange(5.0), 1),
                                  [0, 2, 4, 0, 0])


def test_concretization_of_the_differentiated_argument_uses_its_value():
    # outside jit, as in JAX, the differentiated argument's value decides the branch
    g = cjit.grad(lambda w, i: cnp.sum(w) if w[0] > 0 else cnp.sum(w * i))
    np.testing.assert_array_equal(g(np.ones(3), 2), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(g(-np.ones(3), 2), [2.0, 2.0, 2.0])
    assert g._cjit_concrete.route == "values"
    with pytest.raises(cjit.errors.ConcretizationError, match="bool"):
        cjit.jit(g)(np.ones(3), 1)


# ---- optional: the same structures as jax.tree_util -----------------------------

_JAX_CASES = textwrap.dedent("""
    import collections, json, sys
    from {mod} import tree_util as tu
    Pair = collections.namedtuple("Pair", "first second")
    cases = [
        [1, None, (2, {{"b": 3, "a": 4}}), {{"z": [5], "m": 6}}],
        {{"b": (1, None), "a": [2]}},
        None, 7, (), [(), [None]],
        Pair(1, (2, 3)),
        collections.OrderedDict([("b", 1), ("a", 2)]),
    ]
    out = []
    for c in cases:
        td = tu.tree_structure(c)
        out.append([tu.tree_leaves(c), td.num_leaves, td.num_nodes,
                    tu.tree_leaves(c, is_leaf=lambda x: x is None),
                    tu.tree_map(lambda x: x * 2, c) == tu.tree_unflatten(td, [2 * v for v in tu.tree_leaves(c)])])
    json.dump(out, sys.stdout)
""")


def _jax_python():
    try:
        import jax  # noqa: F401
        return sys.executable
    except ImportError:
        return os.environ.get("CJIT_JAX_PYTHON")


def test_structures_match_jax_tree_util_when_installed():
    py = _jax_python()
    if not py:
        pytest.skip("jax is not importable (set CJIT_JAX_PYTHON to a Python that has it)")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    ref = subprocess.run([py, "-c", _JAX_CASES.format(mod="jax")], capture_output=True,
                         text=True, env=env, timeout=300)
    assert ref.returncode == 0, ref.stderr
    ours = subprocess.run([sys.executable, "-c", _JAX_CASES.format(mod="cjit")],
                          capture_output=True, text=True, timeout=300)
    assert ours.returncode == 0, ours.stderr
    assert json.loads(ours.stdout) == json.loads(ref.stdout)
