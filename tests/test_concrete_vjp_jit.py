"""jit of the vjp_fn of a function whose Python control flow reads its
values (docs/notebooks/autodiff_cookbook.md, "Python control flow"): JAX's
vjp_fn is a linear function of its residuals, so ``jit(f_vjp)(ct)`` works;
cjit traces the forward again inside the jit, taking the branches the values
took (they are recorded on the values, then replayed).  References are the
derivatives written out with NumPy."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cjit
import cjit.numpy as cnp


def _cookbook_f(x):
    try:
        if x < 3:
            return 2 * x ** 3
        else:
            raise ValueError
    except ValueError:
        return cnp.pi * x


@pytest.mark.parametrize("x0, slope", [(4.0, np.pi), (2.0, 6 * 2.0 ** 2)])
def test_jit_of_vjp_fn_with_python_branches(x0, slope):
    y, f_vjp = cjit.vjp(_cookbook_f, x0)
    # was: TypeError "Trace: cotangent 0 is not a traced value of this trace"
    (g,) = cjit.jit(f_vjp)(1.0)
    assert np.isclose(float(g), slope, rtol=1e-12)
    (g,) = cjit.jit(f_vjp)(2.5)
    assert np.isclose(float(g), 2.5 * slope, rtol=1e-12)
    # and inside a larger jitted function, with a traced cotangent
    h = cjit.jit(lambda c: f_vjp(c * 2.0)[0] + c)(3.0)
    assert np.isclose(float(h), 6.0 * slope + 3.0, rtol=1e-12)


def test_branches_on_a_later_value_in_jit():
    def f(x, w):
        s = 0.0
        for i in range(3):
            if cnp.sum(x * i) > 1.0:
                s = s + cnp.sum(cnp.sin(x * w))
            else:
                s = s - cnp.sum(x ** 2)
        return s, x * 2

    x0, w0 = np.array([0.3, 0.4]), np.array([1.0, 2.0])
    _, f_vjp = cjit.vjp(f, x0, w0)
    gx, gw = cjit.jit(f_vjp)((1.5, np.ones(2)))
    # branches: i=0 and i=1 (sum 0.7) subtract, i=2 (sum 1.4) adds
    want_x = 1.5 * (-2 * 2 * x0 + w0 * np.cos(x0 * w0)) + 2.0
    want_w = 1.5 * x0 * np.cos(x0 * w0)
    np.testing.assert_allclose(gx, want_x, rtol=1e-12)
    np.testing.assert_allclose(gw, want_w, rtol=1e-12)


@settings(max_examples=25, deadline=None)
@given(x0=st.lists(st.floats(-2, 2), min_size=3, max_size=3),
       thresholds=st.lists(st.floats(-3, 3), min_size=2, max_size=2),
       ct=st.floats(-2, 2), powers=st.lists(st.integers(1, 3), min_size=2, max_size=2))
def test_jit_vjp_fn_equals_the_branch_derivative(x0, thresholds, ct, powers):
    """f takes one of four polynomial or trigonometric pieces after two
    value tests; jit(vjp_fn)(ct) must be ct times the derivative of the piece
    the values chose, and equal vjp_fn(ct) run on the values."""
    x0 = np.array(x0)
    t1, t2 = thresholds
    p, q = powers

    def f(x):
        if cnp.sum(x) > t1:
            if cnp.max(x) > t2:
                return cnp.sum(x ** p)
            return cnp.sum(cnp.sin(x) * q)
        if cnp.min(x) > t2:
            return cnp.sum(cnp.exp(x / 4))
        return cnp.sum(x ** q) * 0.5

    if x0.sum() > t1:
        want = p * x0 ** (p - 1) if x0.max() > t2 else q * np.cos(x0)
    else:
        want = np.exp(x0 / 4) / 4 if x0.min() > t2 else 0.5 * q * x0 ** (q - 1)
    _, f_vjp = cjit.vjp(f, x0)
    (eager,) = f_vjp(ct)
    (jitted,) = cjit.jit(f_vjp)(ct)
    np.testing.assert_allclose(jitted, ct * want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(jitted, eager, rtol=1e-12, atol=1e-12)
