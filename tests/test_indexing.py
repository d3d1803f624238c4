"""Indexing at integer arrays (the gather and scatter ops): x[idx] in its
NumPy forms, take, take_along_axis and x.at[...] against NumPy; gradients
against np.add.at and finite differences; fusion, exact memory plans and
the error messages."""
import gc

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp

RNG = np.random.default_rng(3)
X = RNG.standard_normal((4, 5, 6))
I = np.array([3, -1, 0, 2, 3])
J = np.array([[1], [4]])

GETITEM = {
    "x[i]": lambda x, i, j: x[i],
    "x[:, j]": lambda x, i, j: x[:, j],
    "x[i, 2]": lambda x, i, j: x[i, 2],
    "x[1:3, j, ::2]": lambda x, i, j: x[1:3, j, ::2],
    "x[i, :, i]": lambda x, i, j: x[i, :, i],
    "x[:, j, i[:1]]": lambda x, i, j: x[:, j, i[:1]],
    "x[..., i]": lambda x, i, j: x[..., i],
    "x[i, j]": lambda x, i, j: x[i, j],
    "x[list]": lambda x, i, j: x[[0, 2, 2]],
    "x[mask]": lambda x, i, j: x[np.array([True, False, True, True])],
}


@pytest.mark.parametrize("name", sorted(GETITEM))
@pytest.mark.parametrize("traced", [False, True])
def test_getitem_with_arrays_is_numpy(name, traced):
    f = GETITEM[name]
    g = cjit.jit(f) if traced else cjit.jit(lambda x: f(x, I, J))
    got = g(X, I, J) if traced and name not in ("x[list]", "x[mask]") else cjit.jit(lambda x: f(x, I, J))(X)
    want = f(X, I, J)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_take_and_take_along_axis():
    np.testing.assert_array_equal(cjit.jit(lambda x, i: cnp.take(x, i, axis=1))(X, I), np.take(X, I, axis=1))
    np.testing.assert_array_equal(cjit.jit(lambda x, i: cnp.take(x, i))(X, I), np.take(X, I))
    np.testing.assert_array_equal(cjit.jit(lambda x: cnp.take(x, [7, -9], axis=2, mode="clip"))(X),
                                  np.take(X, [7, -9], axis=2, mode="clip"))
    np.testing.assert_array_equal(cjit.jit(lambda x: cnp.take(x, [7, -9], axis=2, mode="wrap"))(X),
                                  np.take(X, [7, -9], axis=2, mode="wrap"))
    order = np.argsort(X, axis=2)
    for ax in (0, 1, 2):
        o = np.argsort(X, axis=ax)
        np.testing.assert_array_equal(cjit.jit(lambda x, o: cnp.take_along_axis(x, o, axis=ax))(X, o),
                                      np.take_along_axis(X, o, axis=ax))
    part = order[:, :1, :]   # broadcast over axis 1
    np.testing.assert_array_equal(cjit.jit(lambda x, o: cnp.take_along_axis(x, o, axis=2))(X, part[:, :, :2]),
                                  np.take_along_axis(X, np.broadcast_to(part[:, :, :2], (4, 1, 2)), axis=2))


def test_traced_indices_out_of_range_are_clamped():
    f = cjit.jit(lambda x, i: x[i])
    i = np.array([9, -9, -1])
    np.testing.assert_array_equal(f(X, i), X[[3, 0, 3]])


def _numpy_at(x, key, how, v):
    y = x.copy()
    if how == "set":
        y[key] = v
    else:
        {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}[how].at(y, key, v)
    return y


@pytest.mark.parametrize("how", ["set", "add", "multiply", "min", "max"])
@pytest.mark.parametrize("key", [(np.array([0, 2]),), (slice(None), np.array([4, 1, 1])), (1, slice(1, 3)),
                                 (np.array([0, 3]), np.array([1, 2]))], ids=["rows", "cols-dup", "basic", "pairs"])
def test_at_updates_are_numpy(how, key):
    if how == "set" and key[-1].__class__ is np.ndarray and len(set(key[-1].tolist())) < len(key[-1]):
        key = (slice(None), np.array([4, 1, 0]))   # set with repeats has no single answer
    sel = X[key]
    v = RNG.standard_normal(sel.shape)
    got = cjit.jit(lambda x, v: getattr(x.at[key], how)(v))(X, v)
    np.testing.assert_allclose(got, _numpy_at(X, key, how, v), rtol=1e-14)
    assert np.array_equal(cjit.jit(lambda x: x.at[key].get())(X), sel)


def test_at_out_of_range_updates_are_dropped():
    i = np.array([1, 7, -8])   # only 1 is in range (traced: no IndexError)
    got = cjit.jit(lambda x, i: x.at[i].add(1.0))(X, i)
    want = X.copy()
    want[1] += 1
    np.testing.assert_array_equal(got, want)
    got = cjit.jit(lambda x, i: x.at[i].set(0.0, mode="clip"))(X, i)
    want = X.copy()
    want[[1, 3, 0]] = 0
    np.testing.assert_array_equal(got, want)


def test_gradients_of_gather_and_updates():
    E = RNG.standard_normal((6, 3))
    t = np.array([1, 5, 1, -1])
    g = cjit.jit(cjit.grad(lambda E, t: (cnp.sin(E[t]) ** 2).sum()))(E, t)
    want = np.zeros_like(E)
    np.add.at(want, t, 2 * np.sin(E[t]) * np.cos(E[t]))
    np.testing.assert_allclose(g, want, rtol=1e-12)

    def loss(x, v):
        y = x.at[:, np.array([0, 2, 2])].add(v * v).at[1].multiply(x[0])
        return cnp.sum(cnp.tanh(y) * cnp.arange(18.0).reshape(6, 3))
    x, v = RNG.standard_normal((6, 3)), RNG.standard_normal((6, 3))
    gx, gv = cjit.grad(loss, argnums=(0, 1))(x, v)
    f = cjit.jit(loss)
    for arg, gr in ((0, gx), (1, gv)):
        fd = np.zeros((6, 3))
        for k in range(18):
            d = np.zeros(18)
            d[k] = 1e-6
            d = d.reshape(6, 3)
            a = [x, v]
            b = [x, v]
            a[arg] = a[arg] + d
            b[arg] = b[arg] - d
            fd.flat[k] = (f(*a) - f(*b)) / 2e-6
        np.testing.assert_allclose(gr, fd, rtol=1e-6, atol=1e-8)


def test_embedding_lookup_fuses_and_its_plan_is_exact():
    E = RNG.standard_normal((1000, 64)).astype(np.float32)
    t = RNG.integers(0, 1000, 5000)
    f = cjit.jit(lambda E, t: cnp.tanh(E[t]).sum(axis=1))
    c = f.lower(E, t).compile()
    m = c.memory_analysis()
    assert m.num_kernels == 1 and m.temp_size_in_bytes == 0
    np.testing.assert_allclose(c(E, t), np.tanh(E[t]).sum(axis=1), rtol=1e-5, atol=1e-5)
    g = cjit.jit(cjit.grad(lambda E, t: (cnp.tanh(E[t]) ** 2).sum()))
    planned = g.lower(E, t).compile().memory_analysis().peak_memory_in_bytes
    g(E, t)
    gc.collect()
    base = cjit.memory_stats()["bytes_in_use"]
    cjit.reset_peak_memory_stats()
    out = g(E, t)
    assert cjit.memory_stats()["peak_bytes_in_use"] - base == planned
    want = np.zeros_like(E)
    th = np.tanh(E[t])
    np.add.at(want, t, 2 * th * (1 - th * th))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_per_example_lookups_under_vmap():
    E = RNG.standard_normal((10, 4))
    T = RNG.integers(-10, 10, (3, 7))
    got = cjit.vmap(lambda t: cnp.asarray(E)[t].sum(0))(T)   # a NumPy array cannot take a traced index (as in JAX)
    np.testing.assert_allclose(got, np.stack([E[t].sum(0) for t in T]))
    Eb = RNG.standard_normal((3, 10, 4))
    got = cjit.vmap(lambda e, t: e.at[t].add(1.0))(Eb, T)
    want = Eb.copy()
    for b in range(3):
        np.add.at(want[b], T[b], 1.0)
    np.testing.assert_allclose(got, want)


def test_concrete_indices_out_of_range_are_clamped_as_jax_does():
    # decision 260: a concrete index out of range reads the nearest element,
    # as a traced one does (JAX's gather); numpy would raise IndexError
    n = X.shape[0]
    np.testing.assert_array_equal(cjit.jit(lambda x: x[np.array([0, n + 3, -n - 2])])(X),
                                  X[[0, n - 1, 0]])
    np.testing.assert_array_equal(cjit.jit(lambda x: x[n + 5])(X), X[n - 1])


def test_bad_indices_raise_clear_errors():
    with pytest.raises(IndexError, match="integer"):
        cjit.jit(lambda x: x[np.array([0.5])])(X)
    with pytest.raises(NotImplementedError, match="boolean mask"):
        cjit.jit(lambda x: x[x[:, 0, 0] > 0])(X)
    with pytest.raises(IndexError, match="too many indices"):
        cjit.jit(lambda x, i: x[i, i, i, i])(X, I)
    # the cache is not poisoned
    np.testing.assert_array_equal(cjit.jit(lambda x, i: x[i])(X, I), X[I])


def test_results_do_not_depend_on_the_passes(monkeypatch):
    f = lambda x, i: (x.at[i].add(x[i] * 2) ** 2).sum(axis=2)[:, 1:]  # noqa: E731
    want = cjit.jit(f)(X, I)
    monkeypatch.setenv("CJIT_PASSES", "-cse,-fuse,-group,-memplan")
    np.testing.assert_allclose(cjit.jit(f)(X, I), want, rtol=1e-14)


def test_dynamic_slices_in_a_loop():
    """lax.dynamic_slice and dynamic_update_slice at traced starts (clamped
    to fit, as lax does), inside fori_loop: mini-batches of a dataset."""
    from cjit import lax
    data = RNG.standard_normal((12, 3))

    def batch_sums(data):
        def body(i, acc):
            b = lax.dynamic_slice(data, (i * 4, 0), (4, 3))
            return lax.dynamic_update_slice(acc, b.sum(0, keepdims=True), (i, 0))
        return lax.fori_loop(0, 3, body, cnp.zeros((3, 3)))
    np.testing.assert_allclose(cjit.jit(batch_sums)(data), data.reshape(3, 4, 3).sum(1), rtol=1e-14)
    f = cjit.jit(lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 3)))
    for i, j in [(1, 2), (4, 5), (-1, 0)]:   # a negative start counts from the end first
        a, b = min(max(i % 12, 0), 10), min(max(j % 3, 0), 0)
        np.testing.assert_array_equal(f(data, i, j), data[a:a + 2, b:b + 3])
    g = cjit.grad(lambda x, i: (lax.dynamic_slice_in_dim(x, i, 2) ** 2).sum())(data, 5)
    want = np.zeros_like(data)
    want[5:7] = 2 * data[5:7]
    np.testing.assert_allclose(g, want)


def test_edges_empty_and_scalar_indices():
    x = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(cjit.jit(lambda x, i: x[i])(x, np.int64(2)), x[2])   # a traced int
    assert cjit.jit(lambda x, i: x[i, 1])(x, 2) == x[2, 1]   # a Python int argument is traced too
    np.testing.assert_array_equal(cjit.jit(lambda x, i: x[i])(x, np.int64(-1)), x[-1])
    empty = np.array([], dtype=np.int64)
    assert cjit.jit(lambda x: x[empty])(x).shape == (0, 4)
    np.testing.assert_array_equal(cjit.jit(lambda x: x.at[empty].add(1.0))(x), x)
    np.testing.assert_array_equal(cjit.jit(lambda x: x.at[np.array([True, False, True])].set(0.0))(x),
                                  np.where(np.array([True, False, True])[:, None], 0.0, x))
    assert cjit.jit(lambda x: cnp.sort(x[:, :0]))(x).shape == (3, 0)
