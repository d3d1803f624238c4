"""JAX's top-level names that ported programs use: check_grads, grad's
holomorphic= and allow_int=, jacobian, linear_transpose, custom_gradient,
closure_convert, block_until_ready, device_get, eval_shape, disable_jit,
ensure_compile_time_eval, debug.print/callback, pure_callback, named_scope
and the device counts.  Values are checked against NumPy or by hand."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cjit
import cjit.numpy as cnp
from cjit.test_util import check_grads


# ---- check_grads -------------------------------------------------------------------

def test_check_grads_passes_for_correct_derivatives():
    x = np.array([0.3, -1.2, 2.0])
    check_grads(lambda a, b: cnp.sum(cnp.sin(a) * b ** 2), (x, x[::-1].copy()), order=2)
    check_grads(lambda a: {"t": cnp.tanh(a), "e": cnp.exp(a[:2])}, (x,), order=1,
                modes=("rev",))
    check_grads(cnp.log1p, (np.float32(0.5),), order=1, modes="fwd")


def _wrong_jvp_function():
    @cjit.custom_jvp
    def f(x):
        return cnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return cnp.sin(x), 1.1 * cnp.cos(x) * t     # 10% off
    return f


@pytest.mark.parametrize("modes", [("fwd",), ("rev",)])
def test_check_grads_fails_for_a_wrong_custom_jvp(modes):
    f = _wrong_jvp_function()
    with pytest.raises(AssertionError):
        check_grads(f, (np.array([0.4, 1.0]),), order=1, modes=modes)


def test_check_grads_fails_where_a_custom_jvp_is_wrong_on_some_inputs():
    @cjit.custom_jvp
    def f(x):
        return x ** 3

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return x ** 3, 3 * x * cnp.abs(x) * t       # right for x > 0 only
    x = (np.array([0.5, 0.8]),)
    check_grads(f, x, order=1)                      # first order: right where x > 0
    with pytest.raises(AssertionError):
        check_grads(f, (np.array([-0.5, 0.8]),), order=1)


def test_check_grads_tolerances_and_modes():
    f = _wrong_jvp_function()
    check_grads(f, (np.array([0.4, 1.0]),), order=1, atol=0.2, rtol=0.2)   # loose enough
    with pytest.raises(ValueError, match="modes"):
        check_grads(cnp.sin, (1.0,), order=1, modes=("sideways",))


# ---- grad(holomorphic=, allow_int=), jacobian, linear_transpose ---------------------------

def test_grad_holomorphic_is_the_complex_derivative():
    z = np.complex128(0.7 - 1.3j)
    g = cjit.grad(lambda z: z ** 3 + cnp.exp(z), holomorphic=True)(z)
    np.testing.assert_allclose(g, 3 * z ** 2 + np.exp(z), rtol=1e-14)
    gj = cjit.jit(cjit.grad(lambda z: z * z, holomorphic=True))(z)
    np.testing.assert_allclose(gj, 2 * z, rtol=1e-15)
    v, g2 = cjit.value_and_grad(lambda z: cnp.sum(cnp.sin(z)), holomorphic=True)(
        np.array([1 + 1j, 2 - 0.5j]))
    np.testing.assert_allclose(v, np.sum(np.sin([1 + 1j, 2 - 0.5j])), rtol=1e-14)
    np.testing.assert_allclose(g2, np.cos([1 + 1j, 2 - 0.5j]), rtol=1e-14)
    hg = cjit.grad(lambda z: cnp.sum(cnp.cos(z)), holomorphic=True)
    hg(np.array([1j, 2.0 + 0j]))
    before = cjit.cache_info()["compiles"]
    np.testing.assert_allclose(hg(np.array([0.5j, 1.0 + 0j])), -np.sin([0.5j, 1.0 + 0j]),
                               rtol=1e-14)
    assert cjit.cache_info()["compiles"] == before          # cached, as plain grad
    with pytest.raises(TypeError, match="complex"):
        cjit.grad(lambda x: x * 2, holomorphic=True)(1.0)
    with pytest.raises(TypeError, match="holomorphic=True"):
        cjit.grad(lambda z: z * z)(z)


def test_grad_allow_int_gives_float0_zeros():
    float0 = np.dtype([("float0", np.void, 0)])
    gx, gn = cjit.grad(lambda x, n: cnp.sum(x ** n), argnums=(0, 1), allow_int=True)(
        np.array([1.0, 2.0]), 3)
    np.testing.assert_allclose(gx, 3 * np.array([1.0, 2.0]) ** 2, rtol=1e-15)
    assert gn.dtype == float0 and gn.shape == ()
    g = cjit.grad(lambda p: cnp.sum(p["w"] * p["i"]), allow_int=True)(
        {"w": np.array([1.5, 2.5, 3.5]), "i": np.arange(3)})
    np.testing.assert_array_equal(g["w"], [0.0, 1.0, 2.0])
    assert g["i"].dtype == float0 and g["i"].shape == (3,)
    with pytest.raises(TypeError, match="float"):
        cjit.grad(lambda x, n: x * n, argnums=1)(1.0, 3)        # without allow_int: refused


def test_jacobian_is_jacrev():
    x = np.array([0.1, 0.5, -0.3])
    np.testing.assert_allclose(cjit.jacobian(cnp.sin)(x), np.diag(np.cos(x)), rtol=1e-15)
    A = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(cjit.jacobian(lambda v: A @ v)(x), A, rtol=0)


def test_linear_transpose_is_the_matrix_transpose():
    A = np.array([[1.0, 2.0, 0.0], [0.5, -1.0, 3.0]])
    t = cjit.linear_transpose(lambda v: A @ v, cjit.ShapeDtypeStruct((3,), "float64"))
    (ct,) = t(np.array([1.0, 2.0]))
    np.testing.assert_allclose(ct, A.T @ np.array([1.0, 2.0]), rtol=1e-15)
    t2 = cjit.linear_transpose(lambda x, y: 2 * x + y[::-1], np.zeros(3), np.zeros(3))
    a, b = t2(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(a, [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(b, [3.0, 2.0, 1.0])
    with pytest.raises(TypeError, match="cotangent"):
        t2((np.ones(3),))


def test_custom_gradient_replaces_the_derivative():
    @cjit.custom_gradient
    def clip_grad(x):
        return cnp.sin(x), lambda g: (cnp.clip(g * cnp.cos(x), -0.5, 0.5),)
    x = np.array([0.1, 2.0, -3.0])
    np.testing.assert_allclose(clip_grad(x), np.sin(x), rtol=1e-15)
    g = cjit.grad(lambda x: cnp.sum(3.0 * clip_grad(x)))(x)
    np.testing.assert_allclose(g, np.clip(3.0 * np.cos(x), -0.5, 0.5), rtol=1e-15)
    g2 = cjit.jit(cjit.grad(lambda x: cnp.sum(clip_grad(x))))(x)
    np.testing.assert_allclose(g2, np.clip(np.cos(x), -0.5, 0.5), rtol=1e-15)


def test_closure_convert():
    f = lambda x: x * 2 + 1                        # noqa: E731
    conv, consts = cjit.closure_convert(f, 1.0)
    assert consts == [] and conv(3.0, *consts) == 7.0

    def outer(y):
        def inner(x):
            return x * y
        return cjit.closure_convert(inner, y)
    with pytest.raises(NotImplementedError, match="closes over traced values"):
        cjit.jit(outer)(np.ones(2))


# ---- devices, block_until_ready, device_get, eval_shape ------------------------------------

def test_backend_and_device_counts():
    assert cjit.default_backend() == "cpu"
    assert cjit.device_count() == 1 == cjit.local_device_count()
    assert cjit.local_devices() == [cjit.devices("cpu")[0]]
    assert cjit.device_count("cpu") == 1
    with pytest.raises(ValueError, match="process"):
        cjit.local_devices(process_index=1)


def test_block_until_ready_and_device_get():
    out = cjit.jit(lambda x: {"a": x * 2, "b": (x, None)})(np.arange(3.0))
    assert cjit.block_until_ready(out) is out
    got = cjit.device_get(out)
    np.testing.assert_array_equal(got["a"], [0.0, 2.0, 4.0])
    assert got["b"][1] is None and isinstance(got["a"], np.ndarray)
    assert cjit.device_get(3.5) == 3.5
    with pytest.raises(cjit.errors.ConcretizationError):
        cjit.jit(lambda x: cjit.device_get(x))(1.0)


def test_eval_shape_traces_only():
    calls = []

    def f(x, y):
        calls.append(1)
        return {"p": x @ y, "s": cnp.sum(x, axis=0).astype(cnp.int32)}
    before = cjit.cache_info()
    out = cjit.eval_shape(f, cjit.ShapeDtypeStruct((2, 3), "float32"), np.ones((3, 5), np.float32))
    assert (out["p"].shape, out["p"].dtype) == ((2, 5), np.float32)
    assert (out["s"].shape, out["s"].dtype) == ((3,), np.int32)
    assert isinstance(out["p"], cjit.ShapeDtypeStruct) and calls == [1]
    assert cjit.cache_info()["compiles"] == before["compiles"]       # nothing compiled

    def inside(x):
        s = cjit.eval_shape(lambda a: a[:, None] * 2, x)
        return x + s.shape[1]
    np.testing.assert_array_equal(cjit.jit(inside)(np.zeros(4)), np.ones(4))


# ---- disable_jit, ensure_compile_time_eval, named_scope -----------------------------------

def test_disable_jit_runs_python_control_flow_on_values():
    @cjit.jit
    def f(x):
        if cnp.sum(x) > 0:                          # a value in an `if`
            return x * 2
        return -x
    with cjit.disable_jit():
        np.testing.assert_array_equal(f(np.ones(2)), [2.0, 2.0])
        np.testing.assert_array_equal(f(-np.ones(2)), [1.0, 1.0])
        assert cjit.lax.fori_loop(0, 3, lambda i, c: c + i, 0) == 3
    with pytest.raises(cjit.errors.ConcretizationError):
        f(np.ones(2))                                   # jitted again after the block


def test_ensure_compile_time_eval_computes_concrete_values_inside_jit():
    @cjit.jit
    def f(x):
        with cjit.ensure_compile_time_eval():
            n = cnp.sum(cnp.arange(5))                  # concrete: 10
            k = int(n) // 2                             # usable as a Python int
            y = x * k + n                               # traced operand: still traced
        return y[:k - 3]
    np.testing.assert_array_equal(f(np.ones(4)), [15.0, 15.0])


def test_named_scope_changes_nothing():
    with cjit.named_scope("layer1"):
        v = cjit.jit(lambda x: x + 1)(1.0)
    assert v == 2.0
    with pytest.raises(TypeError, match="string"):
        with cjit.named_scope(3):
            pass


# ---- debug.print, debug.callback, pure_callback -----------------------------------------

def test_debug_print_formats_concrete_values(capsys):
    cjit.debug.print("x={x} y={0:.2f}", 1.23456, x=np.array([1, 2]))
    cjit.debug.print(ordered=True)("two-call {}", 5)
    with cjit.disable_jit():
        cjit.jit(lambda v: cjit.debug.print("in jit {}", v))(np.float64(0.5))
    assert capsys.readouterr().out == "x=[1 2] y=1.23\ntwo-call 5\nin jit 0.5\n"


def test_debug_print_of_a_traced_value_says_what_is_missing():
    with pytest.raises(NotImplementedError, match="no run-time host callbacks"):
        cjit.jit(lambda v: cjit.debug.print("{}", v))(1.0)


def test_debug_callback_and_pure_callback():
    seen = []
    cjit.debug.callback(lambda a, b: seen.append(a + b), 1, b=2)
    assert seen == [3]
    out = cjit.pure_callback(lambda x: np.sinh(x), cjit.ShapeDtypeStruct((3,), np.float64),
                             np.arange(3.0))
    np.testing.assert_array_equal(out, np.sinh(np.arange(3.0)))
    with pytest.raises(RuntimeError, match="float32"):
        cjit.pure_callback(lambda x: x, cjit.ShapeDtypeStruct((3,), np.float32), np.ones(3))
    with pytest.raises(NotImplementedError, match="pure_callback"):
        cjit.jit(lambda x: cjit.pure_callback(np.sin, x, x))(np.ones(2))
    with pytest.raises(NotImplementedError, match="debug.callback"):
        cjit.jit(lambda x: cjit.debug.callback(print, x))(np.ones(2))


# ---- generated: check_grads over random smooth compositions ----------------------------------

_UNARY = {"sin": (cnp.sin, np.cos), "tanh": (cnp.tanh, lambda x: 1 - np.tanh(x) ** 2),
          "exp": (cnp.exp, np.exp), "square": (lambda x: x * x, lambda x: 2 * x)}


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(sorted(_UNARY)), st.sampled_from(sorted(_UNARY)),
       st.lists(st.floats(-1.5, 1.5), min_size=1, max_size=4),
       st.floats(0.02, 0.5))
def test_generated_check_grads_accepts_right_and_rejects_wrong_jvps(a, b, xs, err):
    """check_grads passes a composition with the right custom_jvp and fails
    it when the jvp is off by a factor (1 + err), err >= 2%."""
    (fa, da), (fb, db) = _UNARY[a], _UNARY[b]
    x = np.array(xs)

    def make(scale):
        @cjit.custom_jvp
        def g(v):
            return fb(fa(v))

        @g.defjvp
        def g_jvp(p, t):
            (v,), (tv,) = p, t
            inner = fa(v)
            # the chain rule by hand (da, db act on NumPy or traced values through cnp)
            d = _deriv(b, inner) * _deriv(a, v)
            return fb(inner), scale * d * tv
        return g

    check_grads(make(1.0), (x,), order=1)
    assume_nonzero = np.abs(da(x) * db(np.asarray(_UNARY[a][0](x)))).max() > 0.05
    if assume_nonzero:
        with pytest.raises(AssertionError):
            check_grads(make(1.0 + err), (x,), order=1)


def _deriv(name, v):
    return {"sin": cnp.cos, "tanh": lambda x: 1 - cnp.tanh(x) ** 2, "exp": cnp.exp,
            "square": lambda x: 2 * x}[name](v)
