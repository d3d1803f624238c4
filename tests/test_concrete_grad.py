"""grad and its relatives called outside jit on values: Python control flow
(if, while, bool, int, float, item, value-dependent indices and sizes) on
the values being differentiated, as in JAX.  Under jit the values stay
abstract and the same code raises ConcretizationError.

Every expected value is derived by hand (or by central differences)."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cjit
import cjit.numpy as cnp
from cjit import _concrete
from cjit.errors import ConcretizationError, TracerLeakError


def jax_doc_f(x):
    # JAX's control-flow docs: "ok" under grad, not under jit
    if x < 3:
        return 3. * x ** 2
    return -4 * x


def test_if_on_the_differentiated_value():
    g = cjit.grad(jax_doc_f)
    assert float(g(2.)) == 12.0
    assert float(g(4.)) == -4.0


def test_same_grad_object_follows_each_calls_branch():
    g = cjit.grad(jax_doc_f)
    for x in [2., 4., 2.5, 3., 1., 7., 2.]:
        want = 6. * x if x < 3 else -4.
        assert float(g(x)) == want, x
    # float32 and float64 inputs: each call's own branch too
    for x in [np.float32(1.5), np.float32(5.0), 1.5, 5.0]:
        want = 6. * float(x) if x < 3 else -4.
        assert float(g(x)) == pytest.approx(want, rel=1e-6)


def test_while_loop_on_a_value():
    def f(x):
        y = x
        while y < 10.:
            y = y * 2.
        return y
    g = cjit.grad(f)
    # x = 1: 1 -> 16 is y = 16 x; x = 3: 3 -> 12 is 4 x; x = 20: no iteration
    assert float(g(1.)) == 16.
    assert float(g(3.)) == 4.
    assert float(g(20.)) == 1.


def test_item_int_and_float():
    def f(x):
        c = x.item()                  # a Python float: a constant for the gradient
        if c > 0:
            return x * c + float(x) * x
        return x ** 3 * int(cnp.floor(x))
    g = cjit.grad(f)
    assert float(g(2.)) == 4.0        # c + float(x): both constants
    # x = -1.5: floor -2, d/dx (-2 x**3) = -6 x**2 = -13.5
    assert float(g(-1.5)) == -13.5


def test_value_dependent_python_int_index_and_size():
    def f(x):
        i = int(cnp.argmax(x))        # a Python int from a value
        k = int(cnp.sum(x > 0))       # a value-dependent slice size
        return x[i] ** 3 + cnp.sum(x[:k] ** 2)
    g = cjit.grad(f)
    x = np.array([0.5, 2.0, -1.0, 1.0])
    want = np.zeros(4)                          # 2 x on the first k = 3, 3 x**2 at argmax
    want[:3] = 2 * x[:3]
    want[1] += 3 * x[1] ** 2
    np.testing.assert_allclose(g(x), want, rtol=1e-15)
    x2 = np.array([3.0, -2.0, -1.0, -4.0])
    want2 = np.array([2 * 3.0 + 3 * 9.0, 0, 0, 0])
    np.testing.assert_allclose(g(x2), want2, rtol=1e-15)


def test_hessian_of_a_piecewise_function():
    def f(x):
        if cnp.sum(x) > 0:
            return cnp.sum(x ** 3)
        return cnp.sum(cnp.sin(x))
    h = cjit.hessian(f)
    x = np.array([1.0, 2.0, -0.5])
    np.testing.assert_allclose(h(x), np.diag(6 * x), rtol=1e-14)
    y = np.array([-1.0, 0.3, -0.5])
    np.testing.assert_allclose(h(y), np.diag(-np.sin(y)), rtol=1e-14)
    # scalar: 6x on one side, -4 on the other
    h1 = cjit.hessian(lambda x: x ** 3 if x > 0 else -2. * x ** 2)
    assert float(h1(2.)) == 12.
    assert float(h1(-2.)) == -4.


def piece(x):
    if cnp.sum(x) > 0:
        return cnp.sin(x)
    return x ** 2


def test_jvp_with_branches():
    t = np.array([1.0, -2.0])
    x = np.array([0.5, 1.0])
    y, ty = cjit.jvp(piece, (x,), (t,))
    np.testing.assert_allclose(y, np.sin(x), rtol=1e-15)
    np.testing.assert_allclose(ty, np.cos(x) * t, rtol=1e-15)
    x = -x
    y, ty = cjit.jvp(piece, (x,), (t,))
    np.testing.assert_allclose(y, x ** 2, rtol=1e-15)
    np.testing.assert_allclose(ty, 2 * x * t, rtol=1e-15)


def test_vjp_with_branches():
    ct = np.array([3.0, 0.5])
    for x, want_y, want_g in [(np.array([0.5, 1.0]), np.sin, lambda x: np.cos(x) * ct),
                              (np.array([-0.5, -1.0]), np.square, lambda x: 2 * x * ct)]:
        y, fn = cjit.vjp(piece, x)
        np.testing.assert_allclose(y, want_y(x), rtol=1e-15)
        (g,) = fn(ct)
        np.testing.assert_allclose(g, want_g(x), rtol=1e-15)


def test_jacfwd_and_jacrev_with_branches():
    for x in (np.array([0.5, 1.0]), np.array([-0.5, -1.0])):
        want = np.diag(np.cos(x)) if x.sum() > 0 else np.diag(2 * x)
        np.testing.assert_allclose(cjit.jacfwd(piece)(x), want, rtol=1e-15)
        np.testing.assert_allclose(cjit.jacrev(piece)(x), want, rtol=1e-15)


def test_value_and_grad_with_has_aux():
    def f(x, scale):
        if x > 1.:
            return scale * x ** 2, {"branch": 1, "x": x}
        return scale * cnp.exp(x), {"branch": 0, "x": x}
    vg = cjit.value_and_grad(f, has_aux=True)
    (v, aux), g = vg(2., 3.)
    assert (float(v), float(g), int(aux["branch"]), float(aux["x"])) == (12., 12., 1, 2.)
    (v, aux), g = vg(0.5, 3.)
    assert float(v) == pytest.approx(3 * math.exp(0.5), rel=1e-15)
    assert float(g) == pytest.approx(3 * math.exp(0.5), rel=1e-15)
    assert int(aux["branch"]) == 0


def test_grad_of_grad_with_control_flow():
    f = lambda x: x ** 3 if x > 0 else x ** 2       # noqa: E731
    gg = cjit.grad(cjit.grad(f))
    assert float(gg(2.)) == 12.
    assert float(gg(-2.)) == 2.
    ggg = cjit.grad(cjit.grad(cjit.grad(f)))
    assert float(ggg(2.)) == 6.


def test_other_arguments_and_argnums():
    def f(w, b, n):
        acc = 0.
        for i in range(n):                    # n: a Python int, concrete as in JAX
            if w[i] > b:
                acc = acc + w[i] ** 2 * b
        return acc
    g = cjit.grad(f, argnums=(0, 1))
    w = np.array([1.0, -1.0, 3.0])
    gw, gb = g(w, 0.5, 3)
    np.testing.assert_allclose(gw, [2 * 1.0 * 0.5, 0.0, 2 * 3.0 * 0.5], rtol=1e-15)
    assert float(gb) == 1.0 + 9.0
    gw, gb = g(w, 2.0, 2)                     # only w[0] and w[1] read; neither exceeds 2
    np.testing.assert_array_equal(gw, [0.0, 0.0, 0.0])
    assert float(gb) == 0.0


def test_under_jit_the_values_stay_abstract():
    with pytest.raises(ConcretizationError, match="bool"):
        cjit.jit(cjit.grad(jax_doc_f))(2.)
    with pytest.raises(ConcretizationError, match="bool"):
        cjit.jit(cjit.grad(cjit.grad(jax_doc_f)))(2.)
    with pytest.raises(ConcretizationError, match="bool"):
        cjit.jit(cjit.hessian(jax_doc_f))(2.)
    with pytest.raises(ConcretizationError, match="bool"):
        cjit.jit(lambda x: cjit.jvp(jax_doc_f, (x,), (1.,)))(2.)
    # a jitted function called by the differentiated one is abstract inside (as in JAX) ...
    with pytest.raises(ConcretizationError, match="bool"):
        cjit.grad(cjit.jit(jax_doc_f))(2.)
    # ... and its results are values again outside it
    sq = cjit.jit(lambda x: x * x)
    g = cjit.grad(lambda x: sq(x) if sq(x) > 4. else -x)
    assert (float(g(3.)), float(g(1.))) == (6., -1.)


def test_bodies_traced_on_placeholders_stay_abstract():
    # vmap's per-example values, lax bodies' operands: abstract, as in JAX
    with pytest.raises(ConcretizationError, match="bool"):
        cjit.grad(lambda x: cnp.sum(cjit.vmap(lambda y: y if y > 0 else -y)(x)))(np.ones(3))
    with pytest.raises(ConcretizationError, match="bool"):
        cjit.grad(lambda x: cjit.lax.cond(x > 0, lambda v: v if v > 1 else -v,
                                          lambda v: v, x))(2.)
    # a value outside the body is known even when the body closes over it
    g = cjit.grad(lambda x: cnp.sum(cjit.vmap(lambda y: y * x if x > 0 else y)(np.arange(3.))))
    assert (float(g(1.)), float(g(-1.))) == (3., 0.)


def test_the_common_case_stays_on_the_compiled_route():
    before = _concrete.counts()
    g = cjit.grad(lambda x: cnp.sum(cnp.sin(x) ** 2))
    for _ in range(3):
        g(np.arange(3.))
    assert g._cjit_concrete.route is None
    assert _concrete.counts() == before
    assert g._cjit_compiled.cache_info()["misses"] == 1


def test_nothing_leaks():
    kept = []

    def f(x):
        kept.append(x)
        return x ** 2 if x > 0 else x
    assert float(cjit.grad(f)(3.)) == 6.
    leaked = kept[-1]
    assert leaked.trace.finished and leaked.trace.concrete is None   # the evaluator is gone
    with pytest.raises(TracerLeakError):
        bool(leaked)
    with pytest.raises(TracerLeakError):
        leaked + 1


def test_numpy_conversion_stays_an_error():
    # np.asarray would compute on the value untraced and drop its gradient: an
    # error even where the value is known (JAX's TracerArrayConversionError)
    with pytest.raises(ConcretizationError, match="NumPy array"):
        cjit.grad(lambda x: x * np.asarray(x) if x > 0 else x)(2.)


# ---- generated: random piecewise functions ------------------------------------------

# (name, f, f') on cjit.numpy values and on floats
_MENU = [
    ("sin", cnp.sin, math.cos),
    ("cos", cnp.cos, lambda x: -math.sin(x)),
    ("exp", lambda x: cnp.exp(0.3 * x), lambda x: 0.3 * math.exp(0.3 * x)),
    ("sq", lambda x: x * x, lambda x: 2 * x),
    ("cube", lambda x: x ** 3, lambda x: 3 * x * x),
    ("tanh", cnp.tanh, lambda x: 1 - math.tanh(x) ** 2),
    ("log1p", lambda x: cnp.log1p(x * x), lambda x: 2 * x / (1 + x * x)),
]
_MENU_F = {"sin": math.sin, "cos": math.cos, "exp": lambda x: math.exp(0.3 * x),
           "sq": lambda x: x * x, "cube": lambda x: x ** 3, "tanh": math.tanh,
           "log1p": lambda x: math.log1p(x * x)}

_CASES = {"n": 0}


@st.composite
def piecewise(draw):
    n = draw(st.integers(1, 3))
    cuts = sorted(draw(st.lists(st.floats(-3, 3), min_size=n, max_size=n)))
    pieces = [(draw(st.sampled_from(range(len(_MENU)))), draw(st.floats(-2, 2)))
              for _ in range(n + 1)]
    xs = draw(st.lists(st.floats(-4, 4), min_size=1, max_size=3))
    use_while = draw(st.booleans())
    return cuts, pieces, xs, use_while


@settings(max_examples=30, deadline=None)
@given(piecewise())
def test_generated_piecewise_grad_matches_derivatives(case):
    cuts, pieces, xs, use_while = case

    def region(x):
        if use_while:                          # the region found by a while loop
            k = 0
            while k < len(cuts) and x >= cuts[k]:
                k += 1
            return k
        for k, c in enumerate(cuts):           # by an if chain
            if x < c:
                return k
        return len(cuts)

    def f(x):
        k = region(x)
        i, a = pieces[k]
        return a * _MENU[i][1](x) + x

    g = cjit.grad(f)
    for x in xs:
        if any(abs(x - c) < 1e-3 for c in cuts):
            continue                           # away from the thresholds
        _CASES["n"] += 1
        i, a = pieces[region(x)]
        want = a * _MENU[i][2](x) + 1
        got = float(g(x))
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12), (x, cuts, pieces)
        # central differences of the same branch's formula, h small against the gap
        h = 1e-6

        def fd(y):
            return a * _MENU_F[_MENU[i][0]](y) + y
        assert got == pytest.approx((fd(x + h) - fd(x - h)) / (2 * h), rel=1e-6, abs=1e-6)
        # and of f itself through cjit's forward pass, which takes the same branch at x +- h
        fx = (float(f(x + h)) - float(f(x - h))) / (2 * h)
        assert got == pytest.approx(fx, rel=1e-6, abs=1e-6)


def test_tolist_stays_an_error():
    # as in JAX (ConcretizationTypeError): only item() gives a value
    with pytest.raises(ConcretizationError, match="tolist"):
        cjit.grad(lambda x: x * x.tolist() if x > 0 else x)(2.)


_JAX_CASES = [
    ("doc", jax_doc_f, [2., 4.]),
    ("while", lambda x: _doubling(x), [1., 3., 20.]),
    ("item", lambda x: x * x.item() if x > 0 else x ** 3, [2., -1.5]),
    ("nested", lambda x: x ** 3 if x > 0 else x ** 2, [2., -2.]),
]


def _doubling(x):
    while x < 10.:
        x = x * 2.
    return x


@pytest.mark.parametrize("name,f,xs", _JAX_CASES, ids=[c[0] for c in _JAX_CASES])
def test_against_jax(name, f, xs):
    jax = pytest.importorskip("jax")
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)    # restored: other tests rely on JAX's default
    try:
        for x in xs:
            assert float(cjit.grad(f)(x)) == float(jax.grad(f)(x))
            assert float(cjit.hessian(f)(x)) == float(jax.hessian(f)(x))
    finally:
        jax.config.update("jax_enable_x64", before)
