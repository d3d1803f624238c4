"""Second derivatives through cjit.custom_vjp and cjit.custom_jvp, as JAX
gives them: reverse over reverse and forward over reverse differentiate
the rule (bwd, or the JVP rule) and, for a custom_vjp, fwd's residuals as
ordinary code.  Checked against the analytic second derivative."""
import math

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp
from cjit import lax

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, note, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# name: (f, f', f'' in NumPy, f on traced values, f' on traced values, domain)
FUNCS = {
    "sin": (np.sin, np.cos, lambda x: -np.sin(x), cnp.sin, cnp.cos, (-3.0, 3.0)),
    "exp": (np.exp, np.exp, np.exp, cnp.exp, cnp.exp, (-2.0, 2.0)),
    "sqrt": (np.sqrt, lambda x: 0.5 / np.sqrt(x), lambda x: -0.25 * x ** -1.5, cnp.sqrt,
             lambda x: 0.5 / cnp.sqrt(x), (0.2, 4.0)),
    "log": (np.log, lambda x: 1 / x, lambda x: -1 / x ** 2, cnp.log, lambda x: 1 / x, (0.2, 4.0)),
    "tanh": (np.tanh, lambda x: 1 - np.tanh(x) ** 2, lambda x: -2 * np.tanh(x) * (1 - np.tanh(x) ** 2),
             cnp.tanh, lambda x: 1 - cnp.tanh(x) ** 2, (-2.0, 2.0)),
    "cube": (lambda x: x ** 3, lambda x: 3 * x ** 2, lambda x: 6 * x, lambda x: x * x * x,
             lambda x: 3.0 * x * x, (-2.0, 2.0)),
}


def custom_vjp_of(name, residual):
    """f as a custom_vjp whose bwd is g * f'(x), computed from what fwd
    saves: x itself, the output y (sqrt's bwd g / (2 y)), or f'(x)."""
    _, _, _, f, df, _ = FUNCS[name]

    @cjit.custom_vjp
    def g(x):
        return f(x)

    if residual == "x":
        g.defvjp(lambda x: (f(x), x), lambda x, ct: (ct * df(x),))
    elif residual == "y" and name == "sqrt":
        g.defvjp(lambda x: (f(x), f(x)), lambda y, ct: (ct / (2.0 * y),))
    elif residual == "y" and name == "exp":
        g.defvjp(lambda x: (f(x), f(x)), lambda y, ct: (ct * y,))
    else:   # the derivative itself, and x: bwd's product rule needs both
        g.defvjp(lambda x: (f(x), (x, df(x))), lambda r, ct: (ct * r[1] + 0.0 * r[0],))
    return g


def custom_jvp_of(name):
    _, _, _, f, df, _ = FUNCS[name]

    @cjit.custom_jvp
    def g(x):
        return f(x)

    @g.defjvp
    def rule(primals, tangents):
        (x,), (t,) = primals, tangents
        return g(x), t * df(x)
    return g


SECOND = {
    "grad_grad": lambda g: cjit.grad(cjit.grad(g)),
    "jit_grad_grad": lambda g: cjit.jit(cjit.grad(cjit.grad(g))),
    "jacfwd_grad": lambda g: cjit.jacfwd(cjit.grad(g)),
    "hessian": lambda g: cjit.hessian(g),
    "grad_of_mean_of_vmap_grad": lambda g: cjit.grad(lambda x: cnp.mean(cjit.vmap(cjit.grad(g))(cnp.stack([x, x])))),
}


def test_reverse_over_reverse_of_sqrt_differentiates_bwd():
    """f = sqrt with bwd g / (2 y): d2/dx2 at 2 is -1/(4 2^1.5) (was 0.0:
    the residual y got no derivative)."""
    g = custom_vjp_of("sqrt", "y")
    want = -0.25 * 2.0 ** -1.5
    assert math.isclose(float(cjit.grad(cjit.grad(g))(2.0)), want, rel_tol=1e-12)
    assert math.isclose(float(cjit.jacfwd(cjit.grad(g))(2.0)), want, rel_tol=1e-12)
    assert math.isclose(float(cjit.hessian(g)(2.0)), want, rel_tol=1e-12)


def test_the_residuals_derivative_goes_through_fwd_including_its_loops():
    """fwd's residual from a while_loop: reverse mode through it is refused
    (as JAX's), naming the custom function; a residual that is x itself
    needs nothing from the loop."""
    def newton(x):
        return lax.while_loop(lambda c: c[1] < 30, lambda c: (0.5 * (c[0] + x / c[0]), c[1] + 1), (x, 0))[0]

    @cjit.custom_vjp
    def by_y(x):
        return newton(x)
    by_y.defvjp(lambda x: (newton(x), newton(x)), lambda y, ct: (ct / (2.0 * y),))
    with pytest.raises(ValueError, match=r"while_loop.*residual of the cjit.custom_vjp at .*test_custom_second"):
        cjit.grad(cjit.grad(by_y))(2.0)
    assert math.isclose(float(cjit.grad(by_y)(2.0)), 0.5 / math.sqrt(2.0), rel_tol=1e-12)

    @cjit.custom_vjp
    def by_x(x):
        return newton(x)
    by_x.defvjp(lambda x: (newton(x), x), lambda x, ct: (ct * 0.5 / cnp.sqrt(x),))
    assert math.isclose(float(cjit.grad(cjit.grad(by_x))(2.0)), -0.25 * 2.0 ** -1.5, rel_tol=1e-12)
    assert math.isclose(float(cjit.jacfwd(cjit.grad(by_x))(2.0)), -0.25 * 2.0 ** -1.5, rel_tol=1e-12)


def test_forward_mode_alone_through_a_custom_vjp_is_still_refused():
    g = custom_vjp_of("sin", "x")
    with pytest.raises(ValueError, match="custom_vjp"):
        cjit.jvp(g, (0.5,), (1.0,))


def test_second_order_uses_the_rule_not_the_function():
    """A bwd that scales the true derivative by 10 gives 10 f'' (the rule is
    differentiated), as JAX."""
    @cjit.custom_vjp
    def g(x):
        return cnp.sin(x)
    g.defvjp(lambda x: (cnp.sin(x), x), lambda x, ct: (ct * 10.0 * cnp.cos(x),))
    for second in SECOND.values():
        assert math.isclose(float(second(g)(0.5)), -10.0 * math.sin(0.5), rel_tol=1e-12)


# 60 examples per run
@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(name=st.sampled_from(sorted(FUNCS)), kind=st.sampled_from(["vjp_x", "vjp_y", "vjp_dx", "jvp"]),
       how=st.sampled_from(sorted(SECOND)), u=st.floats(0.0, 1.0))
def test_second_derivatives_through_custom_rules(name, kind, how, u):
    """Every way of taking a second derivative, through every style of rule,
    against f'' (a bwd from the output y exists for sqrt and exp only)."""
    npf, _, d2, _, _, (lo, hi) = FUNCS[name]
    x = lo + (hi - lo) * u
    if kind == "jvp":
        g = custom_jvp_of(name)
    else:
        g = custom_vjp_of(name, {"vjp_x": "x", "vjp_y": "y", "vjp_dx": "dx"}[kind])
    note(f"{name} {kind} {how} x={x!r}")
    got = float(SECOND[how](g)(x))
    want = float(d2(np.float64(x)))
    assert math.isclose(got, want, rel_tol=1e-10, abs_tol=1e-12), (got, want)
