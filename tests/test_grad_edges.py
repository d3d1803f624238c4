"""Derivatives where compositions of selects, max/min and clamps used to
give wrong numbers silently: second derivatives of binary functions at ties
(x1 == x2, zeros, equal magnitudes), xlogy's d/dx at x = 0, special
functions at the edges of their domains.  Expected values are closed forms
and limits, or central finite differences of the first derivative in
float64 (where the function is smooth)."""
import math

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp
import cjit.scipy.special as cs
import cjit.scipy.stats as cst

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, note, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

inf = math.inf


def d2(f, i, j, x1, x2):
    """d/dx_j of df/dx_i at (x1, x2)."""
    return float(cjit.grad(cjit.grad(f, i), j)(x1, x2))


# -- item: second derivatives at ties --------------------------------------------------

def test_hypot_second_derivatives_at_ties_and_zeros():
    # d2/dx1^2 = x2^2 / r^3, d2/dx1dx2 = -x1 x2 / r^3
    assert math.isclose(d2(cnp.hypot, 0, 0, 2.0, 2.0), 4 / 8 ** 1.5, rel_tol=1e-14)
    assert math.isclose(d2(cnp.hypot, 0, 1, 2.0, 2.0), -4 / 8 ** 1.5, rel_tol=1e-14)
    assert math.isclose(d2(cnp.hypot, 0, 0, -2.0, 2.0), 4 / 8 ** 1.5, rel_tol=1e-14)
    assert math.isclose(d2(cnp.hypot, 0, 0, 0.0, 2.0), 0.5, rel_tol=1e-14)
    assert math.isclose(d2(cnp.hypot, 1, 1, 2.0, 0.0), 0.5, rel_tol=1e-14)
    # the origin is a cone: 0, with no nan from the rule's guards
    assert [float(v) for v in cjit.grad(cnp.hypot, (0, 1))(0.0, 0.0)] == [0.0, 0.0]
    assert d2(cnp.hypot, 0, 0, 0.0, 0.0) == 0.0
    # no overflow in the slope: x / hypot from the scaled legs
    g = cjit.grad(cnp.hypot, (0, 1))(1e308, 1e308)
    assert all(math.isclose(float(v), math.sqrt(0.5), rel_tol=1e-15) for v in g)


def test_logaddexp_second_derivatives_at_ties():
    assert math.isclose(d2(cnp.logaddexp, 0, 0, 2.0, 2.0), 0.25, rel_tol=1e-14)
    assert math.isclose(d2(cnp.logaddexp, 0, 1, 2.0, 2.0), -0.25, rel_tol=1e-14)
    assert math.isclose(d2(cnp.logaddexp2, 0, 0, 0.0, 0.0), math.log(2) / 4, rel_tol=1e-14)
    assert math.isclose(d2(cnp.logaddexp2, 1, 0, 2.0, 2.0), -math.log(2) / 4, rel_tol=1e-14)
    # infinities keep their gradients: the finite side wins, equal infinities share
    for f in (cnp.logaddexp, cnp.logaddexp2):
        assert [float(v) for v in cjit.grad(f, (0, 1))(-inf, 1.0)] == [0.0, 1.0]
        assert [float(v) for v in cjit.grad(f, (0, 1))(inf, 1.0)] == [1.0, 0.0]
        assert [float(v) for v in cjit.grad(f, (0, 1))(inf, inf)] == [0.5, 0.5]


def test_pow_mixed_and_second_derivatives_at_zero_exponent():
    # d/dy (y x^(y-1)) = x^(y-1) (1 + y log x): 1/2 at (2, 0)
    assert math.isclose(d2(cnp.power, 0, 1, 2.0, 0.0), 0.5, rel_tol=1e-14)
    assert d2(cnp.power, 0, 0, 0.0, 0.0) == 0.0           # x**0.0 is constant
    assert float(cjit.grad(cjit.grad(lambda x: x ** 0.0))(0.0)) == 0.0
    assert float(cjit.grad(lambda x: x ** 0.0)(0.0)) == 0.0


# -- item: xlogy / xlog1py at x = 0 ----------------------------------------------------------

def test_xlogy_derivative_at_zero_x_and_the_distributions_built_on_it():
    assert math.isclose(float(cjit.grad(cs.xlogy)(0.0, 3.0)), math.log(3.0), rel_tol=1e-14)
    assert math.isclose(float(cjit.grad(cs.xlog1py)(0.0, 3.0)), math.log1p(3.0), rel_tol=1e-14)
    assert float(cs.xlogy(0.0, 0.0)) == 0.0
    # d/da gamma.logpdf(x, a) = log x - digamma(a): at a = 1, log 2 + euler gamma
    want = math.log(2.0) + 0.5772156649015329
    assert math.isclose(float(cjit.grad(lambda a: cst.gamma.logpdf(2.0, a))(1.0)), want, rel_tol=1e-12)
    # d/da beta.logpdf(x, a, b) = log x - digamma(a) + digamma(a + b): at a = b = 1, log 0.3 + 1
    want = math.log(0.3) + 1.0
    assert math.isclose(float(cjit.grad(lambda a: cst.beta.logpdf(0.3, a, 1.0))(1.0)), want, rel_tol=1e-12)


# -- item: special functions at the edges of their domains ------------------------------------

def _g(f, x):
    return float(cjit.grad(f)(x))


@pytest.mark.parametrize("f,x,want", [
    (cs.erf, inf, 0.0), (cs.erf, -inf, 0.0), (cs.erfc, inf, 0.0), (cs.erfc, -inf, 0.0),
    (cs.ndtr, inf, 0.0), (cs.ndtr, -inf, 0.0), (cs.log_ndtr, inf, 0.0), (cs.log_ndtr, -inf, inf),
    (cs.erfinv, 1.0, inf), (cs.erfinv, -1.0, inf), (cs.erfinv, 1.5, math.nan),
    (cs.ndtri, -0.5, math.nan), (cs.ndtri, 1.5, math.nan), (cs.ndtri, 0.0, inf), (cs.ndtri, 1.0, inf),
    (cs.digamma, 0.0, inf), (cs.digamma, -1.0, inf), (cs.digamma, -2.0, inf),
    (cs.gammaln, 0.0, math.nan), (cs.gammaln, -1.0, math.nan), (cs.gammaln, inf, inf),
])
def test_first_derivatives_at_domain_edges(f, x, want):
    got = _g(f, x)
    assert (math.isnan(got) and math.isnan(want)) or got == want, (f.__name__, x, got)


def test_second_derivatives_at_domain_edges():
    assert _g(cjit.grad(cs.erf), inf) == 0.0
    assert _g(cjit.grad(cs.ndtr), -inf) == 0.0
    assert _g(cjit.grad(cs.erfinv), 1.0) == inf
    assert _g(cjit.grad(cs.ndtri), 1.0) == inf


# -- generator (a): second derivatives of binary functions, ties included ----------------------

def _smooth(name, a, b):
    """Whether the function is smooth at (a, b) (finite differences apply)."""
    if name == "hypot" or name == "arctan2":
        return abs(a) + abs(b) > 0.3
    if name in ("maximum", "minimum"):
        return abs(a - b) > 1e-3
    if name == "power":
        return a > 0.3
    return True


BINARY = {"hypot": cnp.hypot, "logaddexp": cnp.logaddexp, "logaddexp2": cnp.logaddexp2,
          "arctan2": cnp.arctan2, "maximum": cnp.maximum, "minimum": cnp.minimum, "power": cnp.power,
          "xlogy": lambda x, y: cs.xlogy(x, 0.1 * y * y + 0.5),
          "xlog1py": lambda x, y: cs.xlog1py(x, 0.1 * y * y - 0.5)}

_GRID = [0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 1.7, 3.0]


@st.composite
def _points(draw):
    """(a, b) with ties and zeros likely: b equal to a, to -a, to 0, or free."""
    a = draw(st.one_of(st.sampled_from(_GRID), st.floats(-3.0, 3.0)))
    how = draw(st.sampled_from(["tie", "neg", "zero", "free"]))
    b = {"tie": a, "neg": -a, "zero": 0.0}.get(how)
    if b is None:
        b = draw(st.one_of(st.sampled_from(_GRID), st.floats(-3.0, 3.0)))
    return a, b


# 50 examples per run, each checking the four second derivatives
@settings(max_examples=50, deadline=None, derandomize=True, database=None)
@given(name=st.sampled_from(sorted(BINARY)), p=_points())
def test_binary_second_derivatives_match_finite_differences(name, p):
    a, b = p
    if not _smooth(name, a, b):
        return
    f = BINARY[name]
    note(f"{name}({a!r}, {b!r})")
    h = 1e-5
    for i in (0, 1):
        gi = cjit.grad(f, i)
        for j in (0, 1):
            got = float(cjit.grad(gi, j)(a, b))
            lo = [a, b]
            hi = [a, b]
            lo[j] -= h
            hi[j] += h
            want = (float(gi(*hi)) - float(gi(*lo))) / (2 * h)
            assert math.isclose(got, want, rel_tol=1e-5, abs_tol=1e-5), (name, i, j, a, b, got, want)


# -- generator (b): unary special functions, interior and edges --------------------------------

# name: (function, interior domain, [(edge, first derivative, second derivative or None)])
SPECIAL = {
    "erf": (cs.erf, (-6.0, 6.0), [(inf, 0.0, 0.0), (-inf, 0.0, 0.0)]),
    "erfc": (cs.erfc, (-6.0, 6.0), [(inf, 0.0, 0.0), (-inf, 0.0, 0.0)]),
    "ndtr": (cs.ndtr, (-8.0, 8.0), [(inf, 0.0, 0.0), (-inf, 0.0, 0.0)]),
    "log_ndtr": (cs.log_ndtr, (-30.0, 8.0), [(inf, 0.0, None), (-inf, inf, None)]),
    "erfinv": (cs.erfinv, (-0.999, 0.999), [(1.0, inf, inf), (-1.0, inf, None), (1.2, math.nan, None)]),
    "ndtri": (cs.ndtri, (1e-6, 1 - 1e-6), [(0.0, inf, None), (1.0, inf, inf), (-0.1, math.nan, None),
                                             (1.1, math.nan, None)]),
    "gammaln": (cs.gammaln, (0.05, 30.0), [(0.0, math.nan, None), (-3.0, math.nan, None), (inf, inf, None)]),
    "digamma": (cs.digamma, (0.05, 30.0), [(0.0, inf, None), (-1.0, inf, None), (-4.0, inf, None)]),
    "expit": (cs.expit, (-20.0, 20.0), [(inf, 0.0, None), (-inf, 0.0, None)]),
    "logit": (cs.logit, (0.01, 0.99), []),
}


def _same(got, want):
    if math.isnan(want):
        return math.isnan(got)
    if math.isinf(want):
        return got == want
    return math.isclose(got, want, rel_tol=2e-6, abs_tol=1e-9)


# 60 examples per run
@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(name=st.sampled_from(sorted(SPECIAL)), u=st.floats(0.0, 1.0), edge=st.integers(0, 3))
def test_special_function_derivatives(name, u, edge):
    """At an interior point: f' and f'' against central differences of f
    and f' (float64); at a domain edge: the known limits."""
    f, (lo, hi), edges = SPECIAL[name]
    g1 = cjit.grad(f)
    g2 = cjit.grad(g1)
    if edges and edge < len(edges):
        x, w1, w2 = edges[edge]
        note(f"{name} edge {x!r}")
        assert _same(float(g1(x)), w1), (name, x, float(g1(x)), w1)
        if w2 is not None:
            assert _same(float(g2(x)), w2), (name, x, float(g2(x)), w2)
        return
    x = lo + (hi - lo) * u
    h = 1e-6 * max(1.0, abs(x))
    h = min(h, (x - lo) / 2 + 1e-12, (hi - x) / 2 + 1e-12) if name in ("ndtri", "logit", "erfinv") else h
    note(f"{name} at {x!r}, h={h!r}")
    fd1 = (float(f(x + h)) - float(f(x - h))) / (2 * h)
    fd2 = (float(g1(x + h)) - float(g1(x - h))) / (2 * h)
    assert math.isclose(float(g1(x)), fd1, rel_tol=1e-5, abs_tol=1e-8), (name, x, float(g1(x)), fd1)
    assert math.isclose(float(g2(x)), fd2, rel_tol=1e-4, abs_tol=1e-6), (name, x, float(g2(x)), fd2)


# ---- slopes where a function has none, or where the composition's selects gave one ----

def test_arctan2_gradient_at_the_origin_is_nan_and_exact_elsewhere():
    # Was [1, 0] at the origin (the selects of the composition), where the
    # function has no derivative; JAX gives nan.
    g = cjit.grad(lambda y, x: cnp.arctan2(y, x), argnums=(0, 1))
    assert all(math.isnan(float(v)) for v in g(0.0, 0.0))
    assert [float(v) for v in g(1.0, 2.0)] == pytest.approx([0.4, -0.2], rel=1e-15)
    # huge legs: no overflow of x^2 + y^2
    assert [float(v) for v in g(3e200, 4e200)] == pytest.approx([1.6e-201, -1.2e-201], rel=1e-14)


def test_pow_slope_in_the_exponent_is_nan_below_zero_and_zero_at_zero():
    # Was 0 for x < 0, where x**y has no derivative in y (log of a negative
    # number); JAX gives nan.  At x == 0 it stays 0, as JAX.
    for grad in (cjit.grad, lambda f: (lambda p: cjit.jvp(f, (p,), (1.0,))[1])):
        assert math.isnan(float(grad(lambda p: cnp.power(-3.0, p))(2.0)))
        assert float(grad(lambda p: cnp.power(0.0, p))(2.0)) == 0.0
        assert float(grad(lambda p: cnp.power(2.0, p))(3.0)) == pytest.approx(8 * math.log(2), rel=1e-15)


def _arctan2_derivatives(y, x):
    """First and second derivatives of arctan2 in float64, by hand."""
    r2 = x * x + y * y
    return (np.array([x / r2, -y / r2]),
            np.array([[-2 * x * y, y * y - x * x], [y * y - x * x, 2 * x * y]]) / (r2 * r2))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.floats(-100, 100), st.floats(-100, 100), st.floats(-80, 80))
def test_generated_arctan2_derivatives_over_magnitudes(ey, ex, shift):
    # points of every quadrant whose legs differ by up to 10^100 in size,
    # against the derivatives by hand (float64, no overflow at these sizes)
    y, x = math.copysign(10.0 ** (ey / 4 + shift / 4), ey), math.copysign(10.0 ** (ex / 4 + shift / 4), ex)
    note((y, x))
    want_g, want_h = _arctan2_derivatives(y, x)
    got_g = np.array([float(v) for v in cjit.grad(lambda a, b: cnp.arctan2(a, b), argnums=(0, 1))(y, x)])
    got_h = cjit.hessian(lambda v: cnp.arctan2(v[0], v[1]))(np.array([y, x]))
    np.testing.assert_allclose(got_g, want_g, rtol=1e-13, atol=0)
    np.testing.assert_allclose(got_h, want_h, rtol=1e-12, atol=1e-300 + 1e-12 * np.abs(want_h).max())
