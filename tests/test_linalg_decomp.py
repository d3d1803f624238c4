"""QR, the symmetric eigensolver and the SVD (LAPACK call kernels): values
checked through reconstructions and orthogonality (the factors are defined
up to signs) and against NumPy's eigenvalues and singular values."""
import numpy as np
import pytest

import cjit
import cjit.numpy as cnp

rng = np.random.default_rng(7)
SHAPES = [(5, 3), (3, 5), (4, 4), (2, 4, 3), (2, 3, 4)]


def _t(x):
    return np.swapaxes(x, -1, -2)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", ["reduced", "complete"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_qr_reconstructs(shape, mode, dtype):
    a = rng.standard_normal(shape).astype(dtype)
    q, r = (np.asarray(v) for v in cnp.linalg.qr(a, mode=mode))
    nq, nr = np.linalg.qr(a, mode=mode)
    assert q.shape == nq.shape and r.shape == nr.shape and q.dtype == a.dtype
    tol = 1e-4 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(q @ r, a, atol=tol)
    np.testing.assert_allclose(_t(q) @ q, np.broadcast_to(np.eye(q.shape[-1]), _t(q).shape[:-1] + (q.shape[-1],)),
                               atol=tol)
    assert np.all(np.abs(np.tril(r, -1)) == 0)
    np.testing.assert_allclose(np.abs(r), np.abs(nr), atol=tol * 10)


def test_qr_mode_r_and_jit():
    a = rng.standard_normal((6, 4))
    r = np.asarray(cnp.linalg.qr(a, mode="r"))
    np.testing.assert_allclose(np.abs(r), np.abs(np.linalg.qr(a, mode="r")), atol=1e-12)
    f = cjit.jit(lambda x: cnp.linalg.qr(x).Q @ cnp.linalg.qr(x).R)
    np.testing.assert_allclose(np.asarray(f(a)), a, atol=1e-12)
    with pytest.raises(ValueError, match="mode"):
        cnp.linalg.qr(a, mode="raw")
    with pytest.raises(np.linalg.LinAlgError):
        cnp.linalg.qr(np.ones(3))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_eigh_matches_numpy(dtype):
    s = rng.standard_normal((3, 5, 5))
    s = (s + _t(s)).astype(dtype)
    w, v = (np.asarray(x) for x in cnp.linalg.eigh(s))
    tol = 1e-4 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(w, np.linalg.eigvalsh(s), atol=tol)
    assert np.all(np.diff(w, axis=-1) >= 0)
    np.testing.assert_allclose(v @ (w[..., None] * _t(v)), s, atol=tol * 10)
    np.testing.assert_allclose(_t(v) @ v, np.broadcast_to(np.eye(5), s.shape), atol=tol)
    np.testing.assert_allclose(np.asarray(cnp.linalg.eigvalsh(s)), w, atol=tol)


def test_eigh_symmetrizes_like_jax_or_reads_a_triangle_like_numpy():
    a = rng.standard_normal((4, 4))
    for uplo in ("L", "U"):
        np.testing.assert_allclose(np.asarray(cnp.linalg.eigvalsh(a, UPLO=uplo)), np.linalg.eigvalsh((a + a.T) / 2),
                                   atol=1e-12)
        np.testing.assert_allclose(np.asarray(cnp.linalg.eigvalsh(a, UPLO=uplo, symmetrize_input=False)),
                                   np.linalg.eigvalsh(a, UPLO=uplo), atol=1e-12)
    with pytest.raises(np.linalg.LinAlgError):
        cnp.linalg.eigh(np.ones((3, 4)))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("full", [True, False])
def test_svd_reconstructs(shape, full):
    a = rng.standard_normal(shape)
    u, s, vt = (np.asarray(x) for x in cnp.linalg.svd(a, full_matrices=full))
    nu, ns, nvt = np.linalg.svd(a, full_matrices=full)
    assert u.shape == nu.shape and s.shape == ns.shape and vt.shape == nvt.shape
    np.testing.assert_allclose(s, ns, atol=1e-12)
    k = s.shape[-1]
    np.testing.assert_allclose((u[..., :, :k] * s[..., None, :]) @ vt[..., :k, :], a, atol=1e-12)
    np.testing.assert_allclose(_t(u) @ u, np.broadcast_to(np.eye(u.shape[-1]), _t(u).shape[:-1] + (u.shape[-1],)),
                               atol=1e-12)
    np.testing.assert_allclose(np.asarray(cnp.linalg.svd(a, compute_uv=False)), ns, atol=1e-12)
    np.testing.assert_allclose(np.asarray(cnp.linalg.svdvals(a)), ns, atol=1e-12)


def test_vmap_of_factorizations():
    a = rng.standard_normal((3, 4, 4))
    s = a + _t(a)
    got = np.asarray(cjit.vmap(cnp.linalg.svdvals)(a))
    np.testing.assert_allclose(got, np.linalg.svd(a, compute_uv=False), atol=1e-12)
    np.testing.assert_allclose(np.asarray(cjit.vmap(cnp.linalg.eigvalsh)(s)), np.linalg.eigvalsh(s), atol=1e-12)
