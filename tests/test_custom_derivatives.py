"""cjit.custom_vjp and cjit.custom_jvp: values are the function's, the
derivatives are the rule's (checked against NumPy formulas and finite
differences), through jit, grad, jvp, the Jacobians, vmap, checkpoint and
scan; the function still fuses; bad rules raise clear errors."""
import numpy as np
import pytest

import cjit
import cjit.numpy as cnp
from cjit import lax

X = np.linspace(-2.0, 2.0, 9)


def fd_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        d = np.zeros_like(x)
        d.flat[i] = eps
        g.flat[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


# -- custom_vjp ----------------------------------------------------------------------

@cjit.custom_vjp
def clipped_sin(x):
    return cnp.sin(x)


def _clipped_fwd(x):
    return clipped_sin(x), cnp.cos(x)


def _clipped_bwd(c, g):
    return (cnp.clip(g * c, -0.1, 0.1),)


clipped_sin.defvjp(_clipped_fwd, _clipped_bwd)


def test_custom_vjp_value_is_the_function():
    np.testing.assert_allclose(clipped_sin(X), np.sin(X))
    np.testing.assert_allclose(cjit.jit(clipped_sin)(X), np.sin(X))


@pytest.mark.parametrize("jit", [False, True])
def test_custom_vjp_gradient_is_the_rule(jit):
    grad = cjit.grad(lambda x: (clipped_sin(x) * 3.0).sum())
    g = (cjit.jit(grad) if jit else grad)(X)
    np.testing.assert_allclose(g, np.clip(3 * np.cos(X), -0.1, 0.1), rtol=1e-12)


def test_custom_vjp_with_pytrees_residuals_and_none_cotangents():
    @cjit.custom_vjp
    def f(p, x):
        return {"y": p["w"] * x, "z": cnp.sum(x)}

    def fwd(p, x):
        return f(p, x), (p["w"], x)

    def bwd(res, ct):
        w, x = res
        # the true derivative in w, and None (zeros) for x
        return {"w": cnp.sum(ct["y"] * x)}, None

    f.defvjp(fwd, bwd)
    w, x = np.float64(1.5), np.arange(4.0)

    def loss(p, x):
        out = f(p, x)
        return cnp.sum(out["y"] ** 2) + out["z"]
    gp, gx = cjit.grad(loss, argnums=(0, 1))({"w": w}, x)
    np.testing.assert_allclose(gp["w"], np.sum(2 * w * x * x))
    np.testing.assert_array_equal(gx, np.zeros(4))


def test_custom_vjp_nondiff_argnums_are_static_and_passed_first():
    from functools import partial

    @partial(cjit.custom_vjp, nondiff_argnums=(0,))
    def apply(fn, x):
        return fn(x)

    def fwd(fn, x):
        return fn(x), x

    def bwd(fn, x, g):
        return (g * 10.0,)   # not fn's derivative: shows the rule is used

    apply.defvjp(fwd, bwd)
    g = cjit.jit(cjit.grad(lambda x: apply(cnp.tanh, x).sum()))(X)
    np.testing.assert_allclose(g, np.full_like(X, 10.0))


def test_custom_vjp_numerically_stable_rule_agrees_with_finite_differences():
    # log(1 + exp(x)) with a gradient that stays finite for large x
    @cjit.custom_vjp
    def softplus(x):
        return cnp.logaddexp(x, 0.0)

    softplus.defvjp(lambda x: (softplus(x), x), lambda x, g: (g / (1 + cnp.exp(-x)),))
    f = lambda x: cnp.sum(softplus(x) * cnp.cos(x))  # noqa: E731
    ref = lambda x: np.sum(np.logaddexp(x, 0.0) * np.cos(x))  # noqa: E731
    np.testing.assert_allclose(cjit.grad(f)(X), fd_grad(ref, X), rtol=1e-6, atol=1e-8)
    big = np.array([800.0, -800.0])
    np.testing.assert_allclose(cjit.grad(lambda x: softplus(x).sum())(big), [1.0, 0.0])


def test_custom_vjp_integer_argument_gets_no_cotangent():
    @cjit.custom_vjp
    def scale(x, n):
        return x * n

    scale.defvjp(lambda x, n: (scale(x, n), n), lambda n, g: (g * n * 2, None))
    n = np.array([1, 2, 3], dtype=np.int64)
    g = cjit.grad(lambda x: scale(x, n).sum())(np.ones(3))
    np.testing.assert_allclose(g, [2.0, 4.0, 6.0])


def test_custom_vjp_fuses_like_plain_code():
    f = lambda x: clipped_sin(x) * 2.0 + 1.0  # noqa: E731
    c = cjit.jit(f).lower(X).compile()
    m = c.memory_analysis()
    assert m.num_kernels == 1 and m.temp_size_in_bytes == 0
    np.testing.assert_allclose(c(X), np.sin(X) * 2 + 1)


def test_custom_vjp_under_vmap_keeps_its_rule():
    xs = X.reshape(3, 3)
    per_example = cjit.vmap(cjit.grad(lambda x: (clipped_sin(x) * 3.0).sum()))(xs)
    np.testing.assert_allclose(per_example, np.clip(3 * np.cos(xs), -0.1, 0.1))
    g = cjit.grad(lambda x: cjit.vmap(clipped_sin)(x).sum() * 3.0)(xs)
    np.testing.assert_allclose(g, np.clip(3 * np.cos(xs), -0.1, 0.1))


def test_custom_vjp_inside_checkpoint_and_scan():
    g1 = cjit.grad(lambda x: cjit.checkpoint(lambda y: clipped_sin(y) * 3.0)(x).sum())(X)
    np.testing.assert_allclose(g1, np.clip(3 * np.cos(X), -0.1, 0.1))

    def body(c, x):
        return c + clipped_sin(x), None

    g2 = cjit.jit(cjit.grad(lambda xs: lax.scan(body, 0.0, xs)[0]))(X)
    np.testing.assert_allclose(g2, np.clip(np.cos(X), -0.1, 0.1))


def test_custom_vjp_refuses_forward_mode():
    with pytest.raises(ValueError, match="custom_vjp.*forward-mode|forward-mode.*custom_vjp"):
        cjit.jvp(clipped_sin, (X,), (np.ones_like(X),))


def test_custom_vjp_bad_rules_raise_clear_errors():
    @cjit.custom_vjp
    def f(x, y):
        return x * y

    with pytest.raises(AttributeError, match="defvjp"):
        f(X, X)
    f.defvjp(lambda x, y: (f(x, y), (x, y)), lambda r, g: (g,))
    with pytest.raises(TypeError, match="one cotangent per argument"):
        cjit.grad(lambda x: f(x, x).sum())(X)
    f.defvjp(lambda x, y: (f(x, y), (x, y)), lambda r, g: (g[:2], g))
    with pytest.raises(TypeError, match="shape"):
        cjit.grad(lambda x: f(x, x).sum())(X)
    f.defvjp(lambda x, y: f(x, y), lambda r, g: (g, g))
    with pytest.raises(TypeError, match="pair"):
        cjit.grad(lambda x: f(x, x).sum())(X)
    # the cache is not poisoned: a good rule works afterwards
    f.defvjp(lambda x, y: (f(x, y), (x, y)), lambda r, g: (g * r[1], g * r[0]))
    np.testing.assert_allclose(cjit.grad(lambda x: f(x, x * 2).sum())(X), 4 * X)


# -- custom_jvp ----------------------------------------------------------------------

@cjit.custom_jvp
def softplus2(x):
    """log(1 + exp(x)), with a rule that doubles the true derivative: the
    factor 2 shows the rule (not the function's own derivative) is used."""
    return cnp.log1p(cnp.exp(x))


@softplus2.defjvp
def _softplus2_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus2(x), 2.0 * t / (1 + cnp.exp(-x))


def sig(x):
    return 1 / (1 + np.exp(-x))


def test_custom_jvp_value_jvp_and_grad_use_the_rule():
    np.testing.assert_allclose(softplus2(X), np.log1p(np.exp(X)))
    t = np.linspace(0.5, 1.5, X.size)
    y, ty = cjit.jvp(softplus2, (X,), (t,))
    np.testing.assert_allclose(y, np.log1p(np.exp(X)))
    np.testing.assert_allclose(ty, 2 * t * sig(X))
    g = cjit.jit(cjit.grad(lambda x: (softplus2(x) * cnp.cos(x)).sum()))(X)
    np.testing.assert_allclose(g, 2 * sig(X) * np.cos(X) - np.log1p(np.exp(X)) * np.sin(X), rtol=1e-12)


def test_custom_jvp_jacobians_and_hessian():
    x = X[:4]
    np.testing.assert_allclose(cjit.jacfwd(softplus2)(x), np.diag(2 * sig(x)), atol=1e-14)
    np.testing.assert_allclose(cjit.jacrev(softplus2)(x), np.diag(2 * sig(x)), atol=1e-14)
    # the Hessian differentiates the rule: d/dx 2 sig(x) = 2 sig (1 - sig)
    h = cjit.jit(cjit.hessian(lambda v: softplus2(v).sum()))(x)
    np.testing.assert_allclose(h, np.diag(2 * sig(x) * (1 - sig(x))), atol=1e-12)


def test_custom_jvp_correct_rule_agrees_with_finite_differences():
    @cjit.custom_jvp
    def f(x, y):
        return cnp.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        return f(x, y), cnp.cos(x) * y * tx + cnp.sin(x) * ty

    y = np.cos(X) + 2
    loss = lambda x, y: cnp.sum(f(x, y) ** 2)  # noqa: E731
    ref = lambda x, y: np.sum((np.sin(x) * y) ** 2)  # noqa: E731
    gx, gy = cjit.grad(loss, argnums=(0, 1))(X, y)
    np.testing.assert_allclose(gx, fd_grad(lambda v: ref(v, y), X), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gy, fd_grad(lambda v: ref(X, v), y), rtol=1e-6, atol=1e-8)


def test_custom_jvp_defjvps_and_vmap():
    @cjit.custom_jvp
    def f(x, y):
        return x * y

    f.defjvps(lambda tx, out, x, y: 3.0 * tx * y, lambda ty, out, x, y: 5.0 * ty * x)
    x, y = X, X + 1
    gx, gy = cjit.grad(lambda a, b: f(a, b).sum(), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, 3 * y)
    np.testing.assert_allclose(gy, 5 * x)
    xs = X.reshape(3, 3)
    per = cjit.vmap(cjit.grad(lambda v: softplus2(v).sum()))(xs)
    np.testing.assert_allclose(per, 2 * sig(xs))
    g = cjit.grad(lambda v: cjit.vmap(softplus2)(v).sum())(xs)
    np.testing.assert_allclose(g, 2 * sig(xs))


def test_custom_jvp_bad_rule_raises_clear_error():
    @cjit.custom_jvp
    def f(x):
        return x * 2

    with pytest.raises(AttributeError, match="defjvp"):
        cjit.grad(lambda x: f(x).sum())(X)
    f.defjvp(lambda p, t: (f(p[0]), t[0][:3]))
    with pytest.raises(TypeError, match="shape"):
        cjit.grad(lambda x: f(x).sum())(X)
