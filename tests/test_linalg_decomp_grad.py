"""Derivatives of QR, eigh and the SVD against central finite differences
(float64), in both modes, batched, under jit and vmap; and pinv,
matrix_rank and lstsq against NumPy.  The losses are free of the factors'
sign freedom: functions of eigen / singular values, V f(w) V^T and
U f(s) Vt products, and |R|^2-type sums."""
import numpy as np
import pytest

import cjit
import cjit.numpy as cnp
import cjit.scipy.linalg as csl

rng = np.random.default_rng(11)


def _t(x):
    return cnp.swapaxes(x, -1, -2)


def _sym(a):
    return (a + _t(a)) / 2


def _fd_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (float(f(x + d)) - float(f(x - d))) / (2 * eps)
    return g


def _weights(shape):
    return np.cos(np.arange(int(np.prod(shape))).reshape(shape))


# name: (scalar loss of a, input shapes it is checked at)
LOSSES = {
    "eigvalsh": (lambda a: cnp.sum(cnp.linalg.eigvalsh(_sym(a)) ** 3), [(4, 4), (2, 3, 3)]),
    "eigh_vectors": (lambda a: (lambda w, v: cnp.sum(((v * cnp.sin(w)[..., None, :]) @ _t(v)) * _weights(a.shape)))(
        *cnp.linalg.eigh(_sym(a))), [(4, 4), (2, 3, 3)]),
    "eigh_v_only": (lambda a: (lambda v: cnp.sum((v[..., :, :2] @ _t(v[..., :, :2])) * _weights(a.shape)))(
        cnp.linalg.eigh(_sym(a))[1]), [(4, 4)]),
    "svdvals": (lambda a: cnp.sum(cnp.sin(cnp.linalg.svdvals(a))), [(5, 3), (3, 5), (4, 4), (2, 4, 3)]),
    "svd_usv": (lambda a: (lambda u, s, vt: cnp.sum(((u * cnp.log(s)[..., None, :]) @ vt) * _weights(a.shape)))(
        *cnp.linalg.svd(a, full_matrices=False)), [(5, 3), (3, 5), (4, 4), (2, 3, 4)]),
    "svd_u_only": (lambda a: (lambda u: cnp.sum((u[..., :, :2] @ _t(u[..., :, :2])) * _weights(u.shape[:-1] * 2)))(
        cnp.linalg.svd(a, full_matrices=False)[0]), [(5, 3), (3, 5)]),
    "svd_vt_only": (lambda a: (lambda vt: cnp.sum((_t(vt[..., :2, :]) @ vt[..., :2, :]) *
                                                 _weights((a.shape[-1], a.shape[-1]))))(
        cnp.linalg.svd(a, full_matrices=False)[2]), [(5, 3), (3, 5)]),
    "qr_r": (lambda a: cnp.sum((_t(cnp.linalg.qr(a).R) @ cnp.linalg.qr(a).R) * _weights((a.shape[-1],) * 2)),
             [(5, 3), (4, 4), (2, 4, 3), (3, 5), (2, 3, 5)]),
    "qr_q": (lambda a: (lambda q: cnp.sum((q @ _t(q)) * _weights(q.shape[:-1] + (q.shape[-2],))))(cnp.linalg.qr(a).Q),
             [(5, 3), (2, 4, 3), (3, 5)]),
    "qr_both": (lambda a: (lambda q, r: cnp.sum((q * cnp.abs(cnp.diagonal(r, axis1=-2, axis2=-1))[..., None, :]) ** 2 *
                                             _weights(q.shape)))(*cnp.linalg.qr(a)), [(5, 3), (4, 4)]),
    "qr_complete": (lambda a: cnp.sum(cnp.linalg.qr(a, mode="complete").R ** 2 * _weights(a.shape)), [(4, 4), (3, 5)]),
    "qr_product": (lambda a: (lambda q, r: cnp.sum((q @ r) ** 2 * cnp.cos(a)))(*cnp.linalg.qr(a)), [(5, 3), (3, 5)]),
    "pinv": (lambda a: cnp.sum(cnp.sin(cnp.linalg.pinv(a))), [(5, 3), (3, 5), (2, 4, 4)]),
    "matrix_norm_2_nuc": (lambda a: cnp.sum(cnp.linalg.matrix_norm(a, ord=2)) + cnp.sum(cnp.linalg.matrix_norm(a, ord="nuc")),
                          [(4, 3)]),
}
CASES = [(name, shape) for name, (_, shapes) in LOSSES.items() for shape in shapes]


@pytest.mark.parametrize("name,shape", CASES)
def test_grad_matches_finite_differences(name, shape):
    f = LOSSES[name][0]
    a = rng.standard_normal(shape)
    want = _fd_grad(f, a)
    np.testing.assert_allclose(np.asarray(cjit.grad(f)(a)), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(cjit.jit(cjit.grad(f))(a)), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,shape", CASES)
def test_jvp_matches_finite_differences_and_is_the_transpose_of_vjp(name, shape):
    f = LOSSES[name][0]
    a, v = rng.standard_normal(shape), rng.standard_normal(shape)
    eps = 1e-6
    out, tan = cjit.jvp(f, (a,), (v,))
    fd = (float(f(a + eps * v)) - float(f(a - eps * v))) / (2 * eps)
    assert abs(float(tan) - fd) <= 1e-5 * max(1.0, abs(fd))
    # <vjp(u), v> == <u, jvp(v)> for a random cotangent u of the scalar
    u = float(rng.standard_normal())
    _, vjp_fn = cjit.vjp(f, a)
    (g,) = vjp_fn(u)
    lhs, rhs = float(np.sum(np.asarray(g) * v)), u * float(tan)
    assert abs(lhs - rhs) <= 1e-10 * max(1.0, abs(lhs))


def _factor_products(a):
    """Sign-free matrices from every factor: V f(w) V^T, U f(s) Vt, Q Q^T and R^T R."""
    w, v = cnp.linalg.eigh(_sym(a[..., :3, :3]))
    u, s, vt = cnp.linalg.svd(a, full_matrices=False)
    q, r = cnp.linalg.qr(a)
    return (v * cnp.exp(w)[..., None, :]) @ _t(v), (u * s[..., None, :] ** 2) @ vt, q @ _t(q), _t(r) @ r


def test_jvp_of_every_factor_matches_finite_differences():
    a, v = rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 5, 3))
    eps = 1e-6
    _, tans = cjit.jvp(_factor_products, (a,), (v,))
    hi, lo = _factor_products(a + eps * v), _factor_products(a - eps * v)
    for t, h, l in zip(tans, hi, lo):
        np.testing.assert_allclose(np.asarray(t), (np.asarray(h) - np.asarray(l)) / (2 * eps), rtol=1e-5, atol=1e-6)


def test_second_order_eigvalsh_and_svdvals():
    """Hessians: the gradient's own finite differences."""
    a = rng.standard_normal((3, 3))
    for f in (lambda x: cnp.sum(cnp.linalg.eigvalsh(_sym(x)) ** 3), lambda x: cnp.sum(cnp.linalg.svdvals(x) ** 3)):
        g = cjit.grad(f)
        v = rng.standard_normal(a.shape)
        eps = 1e-5
        want = (np.asarray(g(a + eps * v)) - np.asarray(g(a - eps * v))) / (2 * eps)
        _, got = cjit.jvp(g, (a,), (v,))
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
        h = np.asarray(cjit.hessian(f)(a)).reshape(9, 9)
        np.testing.assert_allclose(h, h.T, atol=1e-8)


@pytest.mark.parametrize("name", ["eigh_vectors", "svd_usv", "qr_both", "pinv"])
def test_vmap_of_the_gradient_is_a_loop_of_gradients(name):
    f = LOSSES[name][0]
    shape = (4, 4)
    a = rng.standard_normal((3,) + shape)
    got = np.asarray(cjit.vmap(cjit.grad(f))(a))
    want = np.stack([np.asarray(cjit.grad(f)(x)) for x in a])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(want[1], _fd_grad(f, a[1]), rtol=1e-5, atol=1e-6)


def test_float32_gradients_keep_the_dtype():
    a = rng.standard_normal((4, 3)).astype(np.float32)
    for f in (LOSSES["svd_usv"][0], LOSSES["qr_r"][0], lambda x: LOSSES["eigvalsh"][0](x[:3])):
        g = np.asarray(cjit.grad(f)(a))
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, _fd_grad(f, a.astype(np.float64)), rtol=2e-2, atol=2e-3)


def test_eigh_gradient_is_symmetric_and_of_the_symmetric_part():
    """At a symmetric input, the gradient is that of a function of the
    symmetric part (as cholesky's, decision 123): symmetric itself."""
    a = rng.standard_normal((4, 4))
    a = a + a.T
    g = np.asarray(cjit.grad(lambda x: cnp.sum(cnp.linalg.eigvalsh(x) ** 3))(a))
    np.testing.assert_allclose(g, g.T, atol=1e-12)
    want = _fd_grad(lambda x: cnp.sum(cnp.linalg.eigvalsh(_sym(x)) ** 3), a)
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("which", ["eigvalsh", "eigh_w", "eigh_v", "scipy"])
def test_eigh_value_and_gradient_agree_on_a_nonsymmetric_input(which):
    """Both are of (a + a^T) / 2, as JAX's default symmetrize_input=True:
    the gradient is the finite differences of the value itself (before, the
    value read one triangle and the gradient was the symmetric part's)."""
    a = rng.standard_normal((4, 4))
    f = {"eigvalsh": lambda x: cnp.sum(cnp.linalg.eigvalsh(x) ** 3),
         "eigh_w": lambda x: cnp.sum(cnp.sin(cnp.linalg.eigh(x, UPLO="U")[0])),
         "eigh_v": lambda x: (lambda w, v: cnp.sum((v * w[None, :]) @ _t(v) * _weights((4, 4))))(
             *cnp.linalg.eigh(x)),
         "scipy": lambda x: cnp.sum(csl.eigh(x, lower=False, eigvals_only=True) ** 2)}[which]
    np.testing.assert_allclose(np.asarray(cjit.grad(f)(a)), _fd_grad(f, a), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(cnp.linalg.eigvalsh(a)), np.linalg.eigvalsh((a + a.T) / 2), rtol=1e-12)


def test_eigh_without_symmetrizing_reads_one_triangle():
    a = rng.standard_normal((4, 4))
    for uplo in ("L", "U"):
        np.testing.assert_allclose(np.asarray(cnp.linalg.eigvalsh(a, UPLO=uplo, symmetrize_input=False)),
                                   np.linalg.eigvalsh(a, UPLO=uplo), atol=1e-12)
        np.testing.assert_allclose(np.asarray(cnp.linalg.eigh(a, UPLO=uplo, symmetrize_input=False)[0]),
                                   np.linalg.eigvalsh(a, UPLO=uplo), atol=1e-12)


def test_results_without_a_rule_are_refused_with_the_shape():
    a = rng.standard_normal((4, 3))
    with pytest.raises(ValueError, match=r"svd: has no gradient for U or Vt with full_matrices=True.*\(4 x 3\)"):
        cjit.grad(lambda x: cnp.sum(cnp.linalg.svd(x)[0] ** 3))(a)
    with pytest.raises(ValueError, match=r"qr: has no derivative for mode='complete' of a matrix with more rows.*"
                                         r"\(4 x 3\)"):
        cjit.jvp(lambda x: cnp.linalg.qr(x, mode="complete").R, (a,), (a,))
    with pytest.raises(ValueError, match=r"qr: has no gradient for mode='complete'"):
        cjit.grad(lambda x: cnp.sum(cnp.linalg.qr(x, mode="complete").Q ** 3))(a)
    # s of a full SVD, and a square full one, do differentiate
    sq = rng.standard_normal((3, 3))
    f = lambda x: cnp.sum(cnp.linalg.svd(x)[1] ** 3) + cnp.sum(cnp.linalg.svd(x)[0] @ cnp.linalg.svd(x)[2])  # noqa: E731
    np.testing.assert_allclose(np.asarray(cjit.grad(f)(sq)), _fd_grad(f, sq), rtol=1e-5, atol=1e-6)


# ---- pinv, matrix_rank, lstsq --------------------------------------------------

def _low_rank(m, n, r):
    return rng.standard_normal((m, r)) @ rng.standard_normal((r, n))


MATRICES = [rng.standard_normal((5, 3)), rng.standard_normal((3, 5)), rng.standard_normal((4, 4)),
            _low_rank(6, 4, 2), _low_rank(3, 5, 1), np.zeros((3, 2)), rng.standard_normal((2, 3, 4))]


@pytest.mark.parametrize("i", range(len(MATRICES)))
def test_pinv_and_matrix_rank_are_numpys(i):
    a = MATRICES[i]
    np.testing.assert_allclose(np.asarray(cnp.linalg.pinv(a)), np.linalg.pinv(a), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.asarray(cjit.jit(cnp.linalg.pinv)(a)), np.linalg.pinv(a), rtol=1e-9, atol=1e-12)
    r = np.asarray(cnp.linalg.matrix_rank(a))
    assert r.dtype == np.int64
    np.testing.assert_array_equal(r, np.linalg.matrix_rank(a))


def test_pinv_and_matrix_rank_keywords():
    a = np.diag([4.0, 1.0, 1e-3])
    for rtol in (1e-2, 1e-4, np.array(1e-2)):
        np.testing.assert_allclose(np.asarray(cnp.linalg.pinv(a, rtol=rtol)), np.linalg.pinv(a, rtol=rtol), atol=1e-12)
        assert int(cnp.linalg.matrix_rank(a, rtol=rtol)) == np.linalg.matrix_rank(a, rtol=rtol)
    np.testing.assert_allclose(np.asarray(cnp.linalg.pinv(a, 1e-2)), np.linalg.pinv(a, 1e-2), atol=1e-12)
    assert int(cnp.linalg.matrix_rank(a, tol=0.5)) == np.linalg.matrix_rank(a, tol=0.5) == 2
    # per-matrix rtol over the batch
    b = np.stack([a, 2 * a])
    np.testing.assert_allclose(np.asarray(cnp.linalg.pinv(b, rtol=np.array([1e-2, 1e-4]))),
                               np.stack([np.linalg.pinv(a, rtol=1e-2), np.linalg.pinv(2 * a, rtol=1e-4)]), atol=1e-12)
    s = _low_rank(4, 4, 2)
    s = s @ s.T - 3 * np.outer(np.ones(4), np.ones(4))  # symmetric, indefinite
    np.testing.assert_allclose(np.asarray(cnp.linalg.pinv(s, hermitian=True)), np.linalg.pinv(s, hermitian=True),
                               rtol=1e-9, atol=1e-12)
    assert int(cnp.linalg.matrix_rank(s, hermitian=True)) == np.linalg.matrix_rank(s, hermitian=True)
    assert int(cnp.linalg.matrix_rank(np.array([0.0, 2.0]))) == 1 and int(cnp.linalg.matrix_rank(np.zeros(3))) == 0
    with pytest.raises(ValueError, match="rcond or rtol"):
        cnp.linalg.pinv(a, 1e-2, rtol=1e-2)


def test_pinv_gradient_at_a_rank_deficient_matrix():
    """JAX's rule holds where the rank is locally constant; a perturbation along
    a low-rank direction keeps it."""
    x, y = rng.standard_normal((5, 2)), rng.standard_normal((2, 3))
    a = x @ y
    w = _weights((3, 5))
    f = lambda x_: cnp.sum(cnp.linalg.pinv(x_ @ y) * w)  # noqa: E731
    np.testing.assert_allclose(np.asarray(cjit.grad(f)(x)), _fd_grad(f, x), rtol=1e-5, atol=1e-6)
    assert np.all(np.isfinite(np.asarray(cjit.grad(lambda m: cnp.sum(cnp.linalg.pinv(m) * w))(a))))


@pytest.mark.parametrize("shape,rank,bshape", [((6, 3), 3, (6,)), ((6, 3), 3, (6, 2)), ((6, 4), 2, (6, 2)),
                                               ((3, 5), 3, (3,)), ((4, 4), 4, (4, 3))])
def test_lstsq_is_numpys(shape, rank, bshape):
    a = _low_rank(shape[0], shape[1], rank)
    b = rng.standard_normal(bshape)
    x, res, rk, s = cnp.linalg.lstsq(a, b)
    nx, nres, nrk, ns = np.linalg.lstsq(a, b)
    np.testing.assert_allclose(np.asarray(x), nx, rtol=1e-9, atol=1e-11)
    assert int(rk) == nrk
    np.testing.assert_allclose(np.asarray(s), ns, rtol=1e-10, atol=1e-12)
    if rank == shape[1] and shape[0] > shape[1]:
        np.testing.assert_allclose(np.asarray(res), nres, rtol=1e-9)
    elif shape[0] <= shape[1]:
        assert np.asarray(res).shape == nres.shape == (0,)
    jx = cjit.jit(lambda a_, b_: cnp.linalg.lstsq(a_, b_, rcond=None)[0])(a, b)
    np.testing.assert_allclose(np.asarray(jx), nx, rtol=1e-9, atol=1e-11)


def test_lstsq_rcond_gradient_and_errors():
    a = np.diag([3.0, 1.0, 1e-4])
    b = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(np.asarray(cnp.linalg.lstsq(a, b, rcond=1e-3)[0]), np.linalg.lstsq(a, b, rcond=1e-3)[0])
    assert int(cnp.linalg.lstsq(a, b, rcond=1e-3)[2]) == 2
    m, c = rng.standard_normal((6, 3)), rng.standard_normal(6)
    f = lambda m_: cnp.sum(cnp.linalg.lstsq(m_, c)[0] ** 2)  # noqa: E731
    np.testing.assert_allclose(np.asarray(cjit.grad(f)(m)), _fd_grad(f, m), rtol=1e-5, atol=1e-6)
    with pytest.raises(np.linalg.LinAlgError, match="lstsq"):
        cnp.linalg.lstsq(m, rng.standard_normal(5))


def test_scipy_qr_eigh_svd_conventions():
    import scipy.linalg as sl
    a = rng.standard_normal((5, 3))
    for mode in ("full", "economic", "r"):
        got, want = csl.qr(a, mode=mode), sl.qr(a, mode=mode)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.abs(np.asarray(g)), np.abs(w), atol=1e-12)
    s = a.T @ a
    np.testing.assert_allclose(np.asarray(csl.eigh(s, eigvals_only=True)), sl.eigh(s, eigvals_only=True), rtol=1e-12)
    # as JAX's, the input is symmetrized: (a + a^T) / 2, whichever triangle `lower` names
    t = np.triu(s)
    for lower in (True, False):
        w, v = csl.eigh(t, lower=lower)
        np.testing.assert_allclose(np.asarray(w), sl.eigh((t + t.T) / 2)[0], rtol=1e-12)
        np.testing.assert_allclose(np.abs(np.asarray(v)), np.abs(sl.eigh((t + t.T) / 2)[1]), atol=1e-10)
    u, sv, vh = csl.svd(a)
    assert np.asarray(u).shape == (5, 5) and np.asarray(vh).shape == (3, 3)
    np.testing.assert_allclose(np.asarray(csl.svd(a, compute_uv=False)), sl.svd(a, compute_uv=False), rtol=1e-12)
    f = lambda x: cnp.sum(csl.svd(x, full_matrices=False)[1] ** 2)  # noqa: E731
    np.testing.assert_allclose(np.asarray(cjit.grad(f)(a)), 2 * a, rtol=1e-10)
    with pytest.raises(NotImplementedError, match="pivoting"):
        csl.qr(a, pivoting=True)


def test_bad_input_names_the_function_and_shape():
    with pytest.raises(np.linalg.LinAlgError, match=r"linalg.pinv: needs matrices.*float64\[3\]"):
        cnp.linalg.pinv(np.ones(3))
    with pytest.raises(np.linalg.LinAlgError, match=r"linalg.pinv: needs square.*float64\[2,3\]"):
        cnp.linalg.pinv(np.ones((2, 3)), hermitian=True)
    with pytest.raises(ValueError, match=r"pinv: rtol of shape \(4,\) does not broadcast to the batch shape \(2,\)"):
        cnp.linalg.pinv(np.ones((2, 3, 3)), rtol=np.ones(4))
    with pytest.raises(np.linalg.LinAlgError, match=r"linalg.lstsq: needs a \(M, N\).*float64\[2,3,3\]"):
        cnp.linalg.lstsq(np.ones((2, 3, 3)), np.ones(3))


def test_float32_pinv_lstsq_keep_the_dtype():
    a = rng.standard_normal((5, 3)).astype(np.float32)
    p = np.asarray(cnp.linalg.pinv(a))
    assert p.dtype == np.float32
    np.testing.assert_allclose(p, np.linalg.pinv(a), rtol=1e-4, atol=1e-5)
    x, res, rk, s = cnp.linalg.lstsq(a, np.ones(5, np.float32))
    assert np.asarray(x).dtype == np.asarray(res).dtype == np.asarray(s).dtype == np.float32
    assert int(rk) == 3 and int(cnp.linalg.matrix_rank(a)) == np.linalg.matrix_rank(a)
