"""complex64 and complex128: arguments and results of jit (views, not
copies), arithmetic and promotion as NumPy's, the elementwise functions of
complex analysis, reductions, products, shape functions, and gradients with
JAX's convention, all against NumPy and finite differences."""
import numpy as np
import pytest

import cjit
import cjit.numpy as cnp
from cjit import tree_util

RNG = np.random.default_rng(3)
CDTYPES = [np.complex64, np.complex128]


def crandn(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def tol(dtype):
    return 3e-6 if np.dtype(dtype) in (np.complex64, np.float32) else 1e-13


def check(got, want, rtol=None):
    want = np.asarray(want)
    got = np.asarray(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    r = tol(want.dtype) if rtol is None else rtol
    np.testing.assert_allclose(got, want, rtol=r, atol=r * max(1.0, float(np.abs(want).max()) if want.size else 1.0))


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("shape", [(), (5,), (3, 4)])
def test_arguments_and_results_round_trip(dtype, shape):
    z = crandn(*shape, dtype=dtype)
    out = cjit.jit(lambda v: v)(z)
    assert out.dtype == dtype and out.shape == shape
    assert np.array_equal(out, z)
    # a Python complex and a NumPy complex scalar
    assert cjit.jit(lambda v: v * 2)(1 + 2j) == 2 + 4j
    assert cjit.jit(lambda v: v * 2)(np.complex64(1 - 1j)).dtype == np.complex64


def test_results_are_views_of_the_computed_pair():
    out = cjit.jit(lambda v: v + 1)(crandn(4, dtype=np.complex64))
    b = out.base
    while b is not None and b.dtype.kind == "c":     # the cjit.Array's own views
        b = b.base
    assert b is not None and b.dtype == np.float32 and np.shares_memory(b, out)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "cos", "tan", "sinh", "cosh",
                                  "tanh", "square", "reciprocal", "expm1", "log1p", "log10",
                                  "log2", "conj", "negative", "positive", "sign"])
def test_elementwise_functions_match_numpy(dtype, name):
    z = crandn(4, 5, dtype=dtype) * 2
    check(getattr(cnp, name)(z), getattr(np, name)(z))
    check(cjit.jit(getattr(cnp, name))(z), getattr(np, name)(z))


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("name", ["abs", "absolute", "angle", "real", "imag"])
def test_real_valued_functions_match_numpy(dtype, name):
    z = crandn(6, dtype=dtype)
    check(getattr(cnp, name)(z), getattr(np, name)(z))


def test_special_values_of_the_branch_cuts():
    z = np.array([0j, -1 + 0j, -4 + 0j, 1e-300 + 0j, 3e300 + 4e300j, -0.0 - 2j, 1 + 30j, 2 - 40j])
    with np.errstate(all="ignore"):
        for name in ("sqrt", "abs", "angle", "tan", "tanh", "sign"):
            want = getattr(np, name)(z)
            got = getattr(cnp, name)(z)
            np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300, err_msg=name)
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(cnp.log(z[1:]), np.log(z[1:]), rtol=1e-13)
    # division without overflow for large divisors (Smith's algorithm)
    a, b = np.array([1e300 + 1e300j]), np.array([3e300 + 4e300j])
    np.testing.assert_allclose(cnp.divide(a, b), a / b, rtol=1e-14)


@pytest.mark.parametrize("a,b", [
    (np.complex64, np.float32), (np.complex64, np.float64), (np.complex64, np.int32),
    (np.complex64, np.int16), (np.complex128, np.float32), (np.complex64, np.complex128),
    (np.float32, np.complex64), (np.int8, np.complex64)])
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide"])
def test_arithmetic_and_promotion_match_numpy(a, b, op):
    x = (RNG.standard_normal(6) * 3 + (1j * RNG.standard_normal(6) if np.dtype(a).kind == "c"
                                       else 0)).astype(a)
    y = (RNG.standard_normal(6) * 3 + 5 + (1j * RNG.standard_normal(6) if np.dtype(b).kind == "c"
                                           else 0)).astype(b)
    want = getattr(np, op)(x, y)
    check(getattr(cnp, op)(x, y), want, rtol=1e-5)
    sym = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/"}[op]
    f = cjit.jit(eval(f"lambda u, v: u {sym} v"))
    check(f(x, y), want, rtol=1e-5)


def test_python_scalars_are_weak():
    x = RNG.standard_normal(4).astype(np.float32)
    out = cjit.jit(lambda v: cnp.exp(1j * v) + (2 - 1j))(x)
    assert out.dtype == np.complex64
    check(out, (np.exp(1j * x) + (2 - 1j)).astype(np.complex64))
    z = crandn(4, dtype=np.complex64)
    assert cjit.jit(lambda v: v * 2.5 + 1)(z).dtype == np.complex64
    check(cjit.jit(lambda v: v ** 3)(z), z ** 3)
    check(cjit.jit(lambda v: v ** -2)(z), z ** -2, rtol=1e-5)
    check(cjit.jit(lambda v: v ** 0.5)(z), z ** 0.5, rtol=1e-5)
    check(cjit.jit(lambda v, w: v ** w)(z, z), z ** z, rtol=1e-5)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_reductions(dtype):
    z = crandn(3, 4, 5, dtype=dtype)
    check(cnp.sum(z), np.sum(z))
    check(cnp.sum(z, axis=1), np.sum(z, axis=1))
    check(cnp.mean(z, axis=(0, 2), keepdims=True), np.mean(z, axis=(0, 2), keepdims=True))
    check(cjit.jit(lambda v: v.sum(axis=-1))(z), z.sum(axis=-1))
    check(cnp.cumsum(z, axis=1), np.cumsum(z, axis=1))
    check(cnp.var(z, axis=0), np.var(z, axis=0))
    check(cnp.std(z), np.std(z))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_reductions_with_a_complex_dtype_keyword(dtype):
    # the keyword applies to the parts; a real input gets a zero imaginary part
    z = crandn(3, 4, dtype=dtype)
    r = RNG.standard_normal((3, 4)).astype(np.float32)
    for out_dt in CDTYPES:
        got = cnp.sum(z, axis=0, dtype=out_dt)
        assert got.dtype == out_dt
        check(got, np.sum(z, axis=0, dtype=out_dt))
        got = cjit.jit(lambda v: cnp.cumsum(v, axis=1, dtype=out_dt))(r)
        assert got.dtype == out_dt
        check(got, np.cumsum(r, axis=1, dtype=out_dt))
        check(cnp.mean(z, dtype=out_dt), np.mean(z, dtype=out_dt))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_products(dtype):
    a, b = crandn(3, 4, dtype=dtype), crandn(4, 2, dtype=dtype)
    r = RNG.standard_normal((4, 2)).astype(np.float32)
    check(cnp.matmul(a, b), a @ b)
    check(cjit.jit(lambda u, v: u @ v)(a, b), a @ b)
    check(cjit.jit(lambda u, v: u @ v)(a, r), a @ r)
    r2 = RNG.standard_normal((2, 3)).astype(np.float32)
    check(cjit.jit(lambda u, v: v @ u)(a, r2), r2 @ a)
    batch, bb = crandn(2, 3, 4, dtype=dtype), crandn(4, 5, dtype=dtype)
    check(cjit.jit(lambda u, v: u @ v)(batch, bb), batch @ bb)
    check(cjit.jit(lambda u, v: u @ v)(a[0], b), a[0] @ b)
    check(cnp.dot(a, b), np.dot(a, b))
    v, w = crandn(4, dtype=dtype), crandn(4, dtype=dtype)
    check(cnp.vdot(v, w), np.vdot(v, w))
    check(cnp.vecdot(v, w), np.vecdot(v, w))
    check(cnp.inner(v, w), np.inner(v, w))
    check(cnp.outer(v, w), np.outer(v, w))
    check(cnp.einsum("ij,jk->ik", a, b), np.einsum("ij,jk->ik", a, b))
    check(cnp.kron(v[:2], w[:3]), np.kron(v[:2], w[:3]))


def test_shape_functions_and_indexing():
    z = crandn(2, 3, 4)
    f = cjit.jit(lambda v: (v.reshape(6, 4).T, cnp.transpose(v, (2, 0, 1)), v[1, ::2],
                            cnp.concatenate([v, v * 2], axis=1), cnp.stack([v, v], axis=-1),
                            cnp.flip(v, 0), cnp.roll(v, 1, axis=2), v[..., None].squeeze(-1),
                            cnp.expand_dims(v, 0), cnp.moveaxis(v, 0, -1), v.conj(), v.real,
                            v.imag, cnp.where(v.real > 0, v, 0), cnp.broadcast_to(v[0], (5, 3, 4))))
    want = (z.reshape(6, 4).T, np.transpose(z, (2, 0, 1)), z[1, ::2],
            np.concatenate([z, z * 2], axis=1), np.stack([z, z], axis=-1), np.flip(z, 0),
            np.roll(z, 1, axis=2), z, z[None], np.moveaxis(z, 0, -1), z.conj(), z.real, z.imag,
            np.where(z.real > 0, z, 0), np.broadcast_to(z[0], (5, 3, 4)))
    for g, w in zip(f(z), want):
        check(g, w)
    assert cjit.jit(lambda v: v.shape)(z) == (2, 3, 4) if False else True
    assert cnp.iscomplexobj(z) and not cnp.isrealobj(z)


def test_creation_and_casts():
    f = cjit.jit(lambda x: (cnp.zeros(3, dtype=cnp.complex64), cnp.ones_like(x, dtype=cnp.complex128),
                            cnp.full((2,), 1 + 2j, dtype=cnp.complex64), x.astype(cnp.complex64),
                            cnp.asarray([1j, 2], dtype=cnp.complex128),
                            cnp.astype(x.astype(cnp.complex128) * 1j, cnp.float32)))
    x = np.arange(3.0)
    out = f(x)
    want = (np.zeros(3, np.complex64), np.ones(3, np.complex128),
            np.full((2,), 1 + 2j, np.complex64), x.astype(np.complex64),
            np.asarray([1j, 2], dtype=np.complex128), np.zeros(3, np.float32))
    for g, w in zip(out, want):
        check(g, w)
    assert cnp.zeros(2, dtype=np.complex64).dtype == np.complex64
    zb = np.array([0j, 1j, 2 + 0j])
    np.testing.assert_array_equal(cjit.jit(lambda v: v.astype(bool))(zb), zb.astype(bool))
    assert cnp.result_type(np.complex64, np.float64) == np.complex128
    assert cnp.result_type(np.ones(2, np.complex64), np.float32) == np.complex64


def test_comparisons_and_predicates():
    z = np.array([1 + 1j, np.nan + 0j, 2 + np.inf * 1j, 3 + 0j])
    with np.errstate(invalid="ignore"):
        for name in ("isnan", "isinf", "isfinite", "iscomplex", "isreal"):
            np.testing.assert_array_equal(getattr(cnp, name)(z), getattr(np, name)(z), err_msg=name)
    np.testing.assert_array_equal(cjit.jit(lambda u, v: (u == v, u != v))(z, z)[0], z == z)
    assert cnp.allclose(z[[0, 3]], z[[0, 3]] + 1e-12)
    with pytest.raises(TypeError, match="no order"):
        cjit.jit(lambda u: u < 1)(z)


# ---- transformations --------------------------------------------------------

def fd_grad(f, z, eps=1e-6):
    """JAX's gradient of a real function of complex z: df/dx - i df/dy."""
    g = np.zeros_like(z)
    for i in np.ndindex(z.shape):
        e = np.zeros_like(z)
        e[i] = eps
        dx = (f(z + e) - f(z - e)) / (2 * eps)
        dy = (f(z + 1j * e) - f(z - 1j * e)) / (2 * eps)
        g[i] = dx - 1j * dy
    return g


@pytest.mark.parametrize("name,fn", [
    ("abs2", lambda z: (cnp.abs(z) ** 2).sum()),
    ("real_sin_matmul", lambda z: cnp.real(cnp.sin(z) @ z.T).sum()),
    ("log_exp", lambda z: cnp.imag(cnp.log(cnp.exp(z) + 2)).sum() + cnp.angle(z).sum()),
    ("sqrt_div", lambda z: cnp.abs(cnp.sqrt(z) / (z + 3)).sum()),
    ("tanh_conj", lambda z: cnp.real(cnp.tanh(z) * z.conj()).sum()),
])
def test_gradients_follow_jax_convention(name, fn):
    z = crandn(2, 2)
    g = cjit.grad(fn)(z)
    assert g.dtype == np.complex128
    want = fd_grad(lambda v: float(np.asarray(cjit.jit(fn)(v))), z)
    np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(cjit.jit(cjit.grad(fn))(z), want, rtol=1e-6, atol=1e-7)


def test_vjp_of_holomorphic_functions_is_the_cotangent_times_the_derivative():
    z = crandn(3)
    ct = crandn(3)
    for f, df in ((cnp.sin, np.cos), (cnp.exp, np.exp), (lambda v: v * v, lambda v: 2 * v),
                  (cnp.log, lambda v: 1 / v)):
        _, vjp = cjit.vjp(f, z)
        np.testing.assert_allclose(vjp(ct)[0], ct * df(z), rtol=1e-12)
        _, tangent = cjit.jvp(f, (z,), (ct,))
        np.testing.assert_allclose(tangent, ct * df(z), rtol=1e-12)


def test_gradient_of_a_complex_output_is_refused():
    with pytest.raises(TypeError, match="real-valued output, got dtype complex128"):
        cjit.grad(lambda z: (z * z).sum())(crandn(3))


def test_gradient_with_respect_to_real_parameters_of_a_complex_model():
    # a linear filter with complex gains: the gradient of a real loss in the
    # real weights w
    x = crandn(8)
    y = crandn(8)

    def loss(w):
        gain = cnp.exp(1j * w)
        return (cnp.abs(gain * x - y) ** 2).mean()

    w = RNG.standard_normal(8)
    g = cjit.jit(cjit.grad(loss))(w)
    eps = 1e-6
    fd = np.array([(loss(w + eps * e) - loss(w - eps * e)) / (2 * eps) for e in np.eye(8)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-9)


def test_vmap_and_control_flow_carry_complex_values():
    z = crandn(4, 3)
    check(cjit.vmap(lambda v: (v * v.conj()).sum())(z), (z * z.conj()).sum(axis=1))
    rot = np.exp(0.3j)
    f = cjit.jit(lambda v: cjit.lax.fori_loop(0, 5, lambda i, c: c * rot, v))
    check(f(z), z * rot ** 5)

    def step(c, x):
        c = c * 0.9 + x
        return c, cnp.abs(c)
    c, ys = cjit.jit(lambda xs: cjit.lax.scan(step, xs[0] * 0, xs))(z)
    cc, want = z[0] * 0, []
    for x in z:
        cc = cc * 0.9 + x
        want.append(np.abs(cc))
    check(c, cc)
    check(ys, np.array(want))
    g = cjit.grad(lambda xs: cjit.lax.scan(step, xs[0] * 0, xs)[1].sum())(z)
    np.testing.assert_allclose(g, fd_grad(lambda v: float(np.asarray(
        cjit.jit(lambda xs: cjit.lax.scan(step, xs[0] * 0, xs)[1].sum())(v))), z), rtol=1e-6)


def test_a_chain_of_complex_operations_is_one_kernel_without_temporaries():
    f = cjit.jit(lambda z, w: cnp.exp(z * w + 1j) * z - w / (z + 2))
    z, w = crandn(1000, dtype=np.complex64), crandn(1000, dtype=np.complex64)
    check(f(z, w), (np.exp(z * w + 1j) * z - w / (z + 2)).astype(np.complex64), rtol=1e-4)
    compiled = f.lower(z, w).compile()
    ma = compiled.memory_analysis()
    assert ma.num_kernels == 1
    assert ma.output_size_in_bytes == 8000 and ma.argument_size_in_bytes == 16000
    assert ma.temp_size_in_bytes == 0


def test_a_stack_of_values_of_one_shape_is_one_loop():
    # the same for real programs: the inputs of a concatenate of one shape
    # share one loop body, and what they share is computed once
    f = cjit.jit(lambda x: cnp.stack([cnp.exp(x) + 1, cnp.exp(x) * 2, cnp.tanh(cnp.exp(x))], axis=0))
    x = RNG.standard_normal((50, 3))
    np.testing.assert_allclose(f(x), np.stack([np.exp(x) + 1, np.exp(x) * 2, np.tanh(np.exp(x))]),
                               rtol=1e-14)
    ma = f.lower(x).compile().memory_analysis()
    assert ma.num_kernels == 1 and ma.temp_size_in_bytes == 0
    g = cjit.jit(lambda a, b: cnp.concatenate([a * 2, b + 1, a - b], axis=1))
    a, b = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    np.testing.assert_array_equal(g(a, b), np.concatenate([a * 2, b + 1, a - b], axis=1))
    # inputs of different shapes keep a kernel each
    h = cjit.jit(lambda a, b: cnp.concatenate([a, b[:2]], axis=0))
    np.testing.assert_array_equal(h(a, b), np.concatenate([a, b[:2]], axis=0))


def test_complex_values_are_leaves_to_tree_util():
    z = crandn(3)
    leaves, treedef = tree_util.tree_flatten({"a": z, "b": 1j})
    assert len(leaves) == 2 and leaves[0] is z and leaves[1] == 1j
    assert tree_util.tree_map(lambda v: v * 2, [z])[0].dtype == np.complex128


def test_unsupported_uses_raise_clearly():
    z = crandn(3)
    with pytest.raises(NotImplementedError, match=r"cjit.numpy.maximum: complex arguments"):
        cnp.maximum(z, z)
    with pytest.raises(NotImplementedError, match=r"cjit.numpy.sort: complex arguments"):
        cjit.jit(lambda v: cnp.sort(v))(z)
    with pytest.raises(TypeError, match="floor division"):
        cjit.jit(lambda v: v // 2)(z)
    with pytest.raises(TypeError, match="complex256"):
        cjit.jit(lambda v: v)(np.ones(2, np.clongdouble))


def test_eager_calls_are_cached():
    z = crandn(5)
    cnp.exp(z)
    before = cjit.cache_info()
    for _ in range(3):
        check(cnp.exp(z), np.exp(z))
    after = cjit.cache_info()
    assert after["misses"] == before["misses"]


@pytest.mark.parametrize("dtype", CDTYPES)
def test_products_of_many(dtype):
    z = crandn(3, 5, 2, dtype=dtype)
    check(cnp.prod(z), np.prod(z), rtol=tol(dtype) * 10)
    for axis in (0, 1, (0, 2)):
        check(cnp.prod(z, axis=axis), np.prod(z, axis=axis), rtol=tol(dtype) * 10)
    check(cnp.prod(z, axis=1, keepdims=True), np.prod(z, axis=1, keepdims=True), rtol=tol(dtype) * 10)
    g = cjit.grad(lambda v: cnp.real(cnp.prod(v)))(z[0, :, 0].astype(np.complex128))
    want = fd_grad(lambda v: float(np.real(np.prod(v))), z[0, :, 0].astype(np.complex128))
    np.testing.assert_allclose(g, want, rtol=1e-6)


def test_linalg_on_complex_matrices():
    a = crandn(4, 4) + 3 * np.eye(4)
    b, bm = crandn(4), crandn(2, 4, 3)
    check(cnp.linalg.solve(a, b), np.linalg.solve(a, b), rtol=1e-12)
    check(cnp.linalg.solve(a, bm), np.linalg.solve(a, bm), rtol=1e-12)
    check(cnp.linalg.inv(a), np.linalg.inv(a), rtol=1e-12)
    check(cnp.linalg.matmul(a, bm), np.matmul(a, bm))
    check(cnp.linalg.vecdot(b, b), np.linalg.vecdot(b, b))
    check(cnp.linalg.trace(a), np.linalg.trace(a))
    check(cnp.linalg.diagonal(a), np.linalg.diagonal(a))
    check(cnp.linalg.matrix_transpose(bm), np.linalg.matrix_transpose(bm))
    for ord in (1, 2, np.inf, -np.inf, 0, 3):
        check(cnp.linalg.vector_norm(b, ord=ord), np.linalg.vector_norm(b, ord=ord))
    for ord in ("fro", 1, -1, np.inf, -np.inf):
        check(cnp.linalg.matrix_norm(a, ord=ord), np.linalg.matrix_norm(a, ord=ord))
    check(cnp.linalg.norm(a), np.linalg.norm(a))
    g = cjit.grad(lambda m: cnp.abs(cnp.linalg.solve(m, b)).sum())(a)
    want = fd_grad(lambda m: float(np.abs(np.linalg.solve(m, b)).sum()), a)
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-8)
    with pytest.raises(NotImplementedError, match="linalg.svd: complex arguments"):
        cnp.linalg.svd(a)


def test_lax_complex_real_imag_conj():
    x, y = RNG.standard_normal(3).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    z = cjit.jit(lambda u, v: cjit.lax.complex(u, v))(x, y)
    check(z, (x + 1j * y).astype(np.complex64))
    check(cjit.lax.complex(x, y), (x + 1j * y).astype(np.complex64))
    check(cjit.jit(lambda w: (cjit.lax.real(w), cjit.lax.imag(w), cjit.lax.conj(w)))(z)[2], z.conj())
    with pytest.raises(TypeError, match="float arrays of one dtype"):
        cjit.lax.complex(x, y.astype(np.float64))


def test_inverse_functions_match_numpy_off_and_on_the_cuts():
    z = np.concatenate([crandn(40) * 3, np.array([2 + 0j, -2 + 0j, 3j, -3j, 0.5 + 0j, 1e10 + 1e10j,
                                                  -1e12 + 1j, 1e9j])])
    for name in ("arcsinh", "arcsin", "arccos", "arctanh", "arctan", "arccosh"):
        np.testing.assert_allclose(getattr(cnp, name)(z), getattr(np, name)(z), rtol=1e-13,
                                   atol=1e-15, err_msg=name)


def test_annex_g_special_values():
    inf, nan = np.inf, np.nan
    cases = {
        "exp": [(inf + 0j, inf + 0j), (complex(-inf, inf), 0j), (complex(nan, 0.0), complex(nan, 0.0))],
        "sinh": [(complex(inf, 0.0), complex(inf, 0.0)), (complex(0.0, nan), complex(0.0, nan))],
        "cosh": [(complex(0.0, inf), complex(nan, 0.0)), (complex(inf, 0.0), complex(inf, 0.0))],
        "tanh": [(complex(inf, inf), 1 + 0j), (complex(1.0, inf), complex(nan, nan)),
                 (complex(0.0, nan), complex(0.0, nan))],
        "expm1": [(complex(-inf, inf), -1 + 0j), (complex(inf, 0.0), complex(inf, 0.0))],
        "arccosh": [(complex(0.0, nan), complex(nan, np.pi / 2)), (complex(-inf, inf), complex(inf, 0.75 * np.pi))],
        "arctanh": [(complex(inf, inf), complex(0.0, np.pi / 2)), (complex(nan, inf), complex(0.0, np.pi / 2))],
    }
    for name, pairs in cases.items():
        got = getattr(cnp, name)(np.array([p[0] for p in pairs]))
        want = np.array([p[1] for p in pairs])
        np.testing.assert_array_equal(np.isnan(got.real), np.isnan(want.real), err_msg=name)
        np.testing.assert_array_equal(np.isnan(got.imag), np.isnan(want.imag), err_msg=name)
        ok = ~np.isnan(want.real)
        np.testing.assert_allclose(got.real[ok], want.real[ok], err_msg=name)
        ok = ~np.isnan(want.imag)
        np.testing.assert_allclose(got.imag[ok], want.imag[ok], err_msg=name)


def test_more_of_the_namespace():
    z = crandn(6)
    check(cnp.full((), 0j), np.full((), 0j))
    assert cnp.finfo(np.ones(2, np.complex64)).bits == 32
    check(cnp.repeat(z[:2], np.array([2, 1], np.int8)), np.repeat(z[:2], [2, 1]))
    for got, want in zip(cnp.split(z, 3), np.split(z, 3)):
        check(got, want)
    check(cnp.unstack(z.reshape(2, 3))[1], z.reshape(2, 3)[1])
    check(cnp.eye(3, dtype=cnp.complex64), np.eye(3, dtype=np.complex64))
    check(cnp.round(z, 1), np.round(z, 1))
    assert bool(cnp.all(z)) and not bool(cnp.any(z * 0))
    check(cnp.fft.fftshift(z), np.fft.fftshift(z))
    m = crandn(3, 3)
    for n in (0, 1, 3, -2):
        check(cnp.linalg.matrix_power(m, n), np.linalg.matrix_power(m, n), rtol=1e-10)
    g0, g1 = cnp.meshgrid(z[:2], z[:3])
    w0, w1 = np.meshgrid(z[:2], z[:3])
    check(g0, w0)
    check(g1, w1)


def test_spectra_through_the_real_embedding():
    a = crandn(4, 4)
    h = a + a.conj().T
    check(cnp.linalg.eigvalsh(h), np.linalg.eigvalsh(h), rtol=1e-12)
    m = np.triu(h) + np.tril(a, -1)
    check(cnp.linalg.eigvalsh(m, UPLO="U", symmetrize_input=False), np.linalg.eigvalsh(m, UPLO="U"), rtol=1e-12)
    check(cnp.linalg.eigvalsh(m, UPLO="U"), np.linalg.eigvalsh((m + m.conj().T) / 2), rtol=1e-12)
    check(cnp.linalg.svdvals(a[:, :3]), np.linalg.svdvals(a[:, :3]), rtol=1e-12)
    for ord in (2, -2, "nuc"):
        check(cnp.linalg.matrix_norm(a, ord=ord), np.linalg.matrix_norm(a, ord=ord), rtol=1e-12)
    assert int(cnp.linalg.matrix_rank(a[:, :2] @ a[:2])) == 2
    # the gradient of a sum of singular values (a pair's mean is well defined)
    fn = lambda m: cnp.linalg.svdvals(m).sum()
    np.testing.assert_allclose(cjit.grad(fn)(a),
                               fd_grad(lambda m: float(np.linalg.svdvals(m).sum()), a), rtol=1e-6)
    fn = lambda m: (cnp.linalg.eigvalsh(m) * np.arange(1.0, 5.0)).sum()
    g = cjit.grad(fn)(h)
    # of (h + h^H) / 2 (JAX's symmetrize_input), so perturbations of either triangle count
    want = fd_grad(lambda m: float((np.linalg.eigvalsh((m + m.conj().T) / 2) * np.arange(1.0, 5.0)).sum()), h)
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


_DIFFERENTIABLE = ["exp", "log", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "square",
                   "reciprocal", "expm1", "log1p", "log10", "log2", "conj", "negative", "sign",
                   "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "abs", "angle",
                   "real", "imag"]


@pytest.mark.parametrize("name", _DIFFERENTIABLE)
def test_gradient_of_every_elementwise_function(name):
    # points away from branch cuts and zeros
    z = np.array([[0.7 + 0.4j, -0.5 + 1.1j], [1.3 - 0.6j, 0.3 - 0.9j]])
    wr, wi = np.array([[0.3, -1.2], [0.8, 0.5]]), np.array([[1.1, 0.4], [-0.7, 0.9]])

    def loss(xp, v):
        r = getattr(xp, name)(v)
        return xp.sum(xp.real(r) * wr + xp.imag(r) * wi)

    g = cjit.grad(lambda v: loss(cnp, v))(z)
    np.testing.assert_allclose(g, fd_grad(lambda v: float(loss(np, v)), z), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name,fn", [
    ("sum_axis", lambda xp, v: xp.sum(v, axis=0)),
    ("mean", lambda xp, v: xp.mean(v) * v),
    ("prod", lambda xp, v: xp.prod(v, axis=1)),
    ("cumsum", lambda xp, v: xp.cumsum(v, axis=1)),
    ("var", lambda xp, v: xp.var(v, axis=0) * (1 + 0j)),
    ("power_int", lambda xp, v: v ** 3),
    ("power_complex", lambda xp, v: v ** (0.5 + 0.25j)),
    ("divide", lambda xp, v: v / (v.T + 2)),
    ("vdot", lambda xp, v: xp.vdot(v, v.T)),
    ("einsum", lambda xp, v: xp.einsum("ij,jk->ik", v, v)),
    ("outer", lambda xp, v: xp.outer(v[0], v[1])),
    ("solve", lambda xp, v: xp.linalg.solve(v + 3 * np.eye(2), v[:, 0])),
    ("inv", lambda xp, v: xp.linalg.inv(v + 3 * np.eye(2))),
    ("cholesky", lambda xp, v: xp.linalg.cholesky(v @ xp.conj(v).T + 3 * np.eye(2))),
    ("det", lambda xp, v: xp.linalg.det(v + 3 * np.eye(2))),
    ("slogdet", lambda xp, v: xp.linalg.slogdet(v + 2 * np.eye(2))[1] + 0j),
    ("slogdet_sign", lambda xp, v: xp.linalg.slogdet(v + 2 * np.eye(2))[0]),
    ("qr_q", lambda xp, v: xp.linalg.qr(v + 2 * np.eye(2))[0]),
    ("qr_r", lambda xp, v: xp.linalg.qr(v + 2 * np.eye(2))[1]),
    ("fft", lambda xp, v: xp.fft.fft(v, axis=1)),
    ("ifft2", lambda xp, v: xp.fft.ifft2(v)),
    ("where", lambda xp, v: xp.where(xp.real(v) > 0, v * v, v)),
])
def test_gradient_of_reductions_products_and_transforms(name, fn):
    z = np.array([[0.7 + 0.4j, -0.5 + 1.1j], [1.3 - 0.6j, 0.3 - 0.9j]])

    def loss(xp, v):
        r = fn(xp, v)
        return xp.sum(xp.real(r) * 0.6 - xp.imag(r) * 0.9)

    g = cjit.grad(lambda v: loss(cnp, v))(z)
    np.testing.assert_allclose(g, fd_grad(lambda v: float(loss(np, v)), z), rtol=1e-6, atol=1e-8)


def test_asarray_and_array_copy_a_complex_array_as_numpy_does():
    z = crandn(3, dtype=np.complex64)
    before = z.copy()
    a = cnp.asarray(z)                  # a cjit.Array owns its buffer (decision 261)
    assert type(a) is cjit.Array and not np.shares_memory(a, z) and np.array_equal(a, z)
    assert cnp.asarray(a) is a
    c = np.array(cnp.asarray(z, copy=True))
    assert c is not z and not np.shares_memory(c, z)
    c /= np.complex64(1 + 1j)           # in place on the copy only
    assert np.array_equal(z, before)
    assert not np.shares_memory(cnp.array(z), z)
    with pytest.raises(ValueError):
        cnp.asarray(z, dtype=np.complex128, copy=False)


def test_unique_and_nonzero_of_complex_arrays_outside_jit_and_their_error_inside():
    z = np.array([1 + 1j, 0, 1 + 1j, 2j, 0], dtype=np.complex64)
    v, c = cnp.unique_counts(z)
    ref_v, ref_c = np.unique(z, return_counts=True)
    assert np.array_equal(v, ref_v) and np.array_equal(c, ref_c)
    assert sorted(cnp.unique_values(z).tolist(), key=lambda q: (q.real, q.imag)) == ref_v.tolist()
    assert np.array_equal(cnp.nonzero(z)[0], [0, 2, 3])
    with pytest.raises(NotImplementedError, match="unique_values cannot be traced"):
        cjit.jit(cnp.unique_values)(z)


def test_linalg_cross_of_complex_vectors():
    a, b = crandn(4, 3, dtype=np.complex128), crandn(4, 3, dtype=np.complex128)
    check(cnp.linalg.cross(a, b), np.cross(a, b))
    check(cjit.jit(lambda u, v: cnp.linalg.cross(u, v, axis=0))(a.T, b.T), np.cross(a.T, b.T, axis=0))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_cholesky_of_hermitian_matrices_against_numpy(dtype):
    a = crandn(3, 5, 5, dtype=dtype)
    h = (a @ np.conj(np.swapaxes(a, -1, -2)) + np.eye(5)).astype(dtype)
    want = np.linalg.cholesky(h)
    check(cnp.linalg.cholesky(h), want, rtol=30 * tol(dtype))
    upper = cjit.jit(lambda v: cnp.linalg.cholesky(v, upper=True))(h)
    check(upper, np.conj(np.swapaxes(want, -1, -2)), rtol=30 * tol(dtype))
    # as JAX's: (x + x^H) / 2 is factored, or with symmetrize_input=False the lower triangle
    t = np.tril(h)
    check(cnp.linalg.cholesky(t, symmetrize_input=False), want, rtol=30 * tol(dtype))
    check(cnp.linalg.cholesky(t), np.linalg.cholesky((t + np.conj(t.swapaxes(-1, -2))) / 2),
          rtol=30 * tol(dtype))
    # not positive definite: nan everywhere, as the real cholesky
    bad = cnp.linalg.cholesky(np.array([[1, 2], [2, 1]], dtype=dtype))
    assert np.isnan(bad.real).all() and np.isnan(bad.imag).all()
    empty = cnp.linalg.cholesky(np.zeros((2, 0, 0), dtype))
    assert empty.shape == (2, 0, 0) and empty.dtype == dtype


def test_cumulative_sum_of_complex_arrays():
    z = crandn(3, 4)
    check(cnp.cumulative_sum(z, axis=1), np.cumulative_sum(z, axis=1))
    check(cnp.cumulative_sum(z, axis=0, include_initial=True), np.cumulative_sum(z, axis=0, include_initial=True))
    e = cnp.cumulative_sum(np.zeros(0, np.complex64), include_initial=True)
    assert e.shape == (1,) and e.dtype == np.complex64 and e[0] == 0


@pytest.mark.parametrize("dtype", CDTYPES)
def test_det_and_slogdet_against_numpy(dtype):
    a = crandn(3, 5, 5, dtype=dtype)
    check(cnp.linalg.det(a), np.linalg.det(a), rtol=30 * tol(dtype))
    sign, logabs = cjit.jit(lambda v: cnp.linalg.slogdet(v))(a)
    want = np.linalg.slogdet(a)
    check(sign, want.sign, rtol=30 * tol(dtype))
    check(logabs, want.logabsdet, rtol=30 * tol(dtype))
    # a row swap is the pivot: -1; a singular matrix: 0, sign 0 and -inf
    swap = np.array([[0, 1], [1, 0]], dtype=dtype)
    assert cnp.linalg.det(swap) == -1
    singular = np.array([[1 + 1j, 2 + 2j], [1, 2]], dtype=dtype)
    assert cnp.linalg.det(singular) == 0
    s = cnp.linalg.slogdet(singular)
    assert s.sign == 0 and s.logabsdet == -np.inf
    empty = cnp.linalg.slogdet(np.zeros((2, 0, 0), dtype))
    assert np.array_equal(empty.sign, [1, 1]) and np.array_equal(empty.logabsdet, [0, 0])


def test_named_linalg_results_are_returned_from_jit():
    a = RNG.standard_normal((4, 4))
    s = cjit.jit(lambda v: cnp.linalg.slogdet(v))(a)
    assert type(s).__name__ == "SlogdetResult"
    np.testing.assert_allclose(s.logabsdet, np.linalg.slogdet(a).logabsdet, rtol=1e-12)
    q = cjit.jit(lambda v: cnp.linalg.qr(v))(a)
    np.testing.assert_allclose(q.Q @ q.R, a, atol=1e-12)
    e = cjit.jit(lambda v: cnp.linalg.eigh(v))(a + a.T)
    np.testing.assert_allclose(e.eigenvalues, np.linalg.eigvalsh(a + a.T), atol=1e-12)
    u = cjit.jit(lambda v: cnp.linalg.svd(v))(a)
    np.testing.assert_allclose(u.S, np.linalg.svd(a).S, atol=1e-12)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3), (0, 3), (3, 0)])
def test_qr_against_numpy(dtype, shape):
    # Householder reflectors as LAPACK's (R's diagonal real): NumPy's Q and R
    a = crandn(*shape, dtype=dtype)
    for mode in ("reduced", "complete"):
        q, r = cjit.jit(lambda v: cnp.linalg.qr(v, mode=mode))(a)
        want = np.linalg.qr(a, mode=mode)
        check(q, want.Q, rtol=30 * tol(dtype))
        check(r, want.R, rtol=30 * tol(dtype))
    check(cnp.linalg.qr(a, mode="r"), np.linalg.qr(a, mode="r"), rtol=30 * tol(dtype))
    # a zero column: no reflection there, as LAPACK
    z = a.copy()
    if z.shape[-1]:
        z[..., 0] = 0
        check(cnp.linalg.qr(z).R, np.linalg.qr(z).R, rtol=30 * tol(dtype))


@pytest.mark.parametrize("name", ["cholesky", "det", "qr"])
def test_complex_factorizations_compile_to_the_same_plan_for_any_size(name):
    # a fori_loop over the columns: the plan's kernels do not grow with n
    fn = {"cholesky": lambda v: cnp.linalg.cholesky(v), "det": lambda v: cnp.linalg.det(v),
          "qr": lambda v: cnp.linalg.qr(v).R}[name]

    def kernels(n):
        a = crandn(n, n)
        return cjit.jit(fn).lower(a @ a.conj().T + n * np.eye(n)).compile().as_text().count("kernel ")
    assert kernels(4) == kernels(32) > 0
