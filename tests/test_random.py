"""cjit.random: JAX's bits for the same keys (when JAX is installed),
distributions against their exact CDFs, keys through jit, and the
generator fused into its consumer."""
import math

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp
import cjit.random as cr

# ---------------------------------------------------------------------------
# keys


def test_keys_from_seeds():
    assert np.array_equal(cr.PRNGKey(0), [0, 0]) and cr.PRNGKey(0).dtype == np.uint32
    assert np.array_equal(cr.PRNGKey(42), [0, 42])
    # a Python int is a 64-bit seed (JAX with x64); a 32-bit NumPy seed has a high word of 0
    assert np.array_equal(cr.PRNGKey(2 ** 40 + 5), [256, 5])
    assert np.array_equal(cr.PRNGKey(-1), [2 ** 32 - 1, 2 ** 32 - 1])
    assert np.array_equal(cr.PRNGKey(np.int32(-1)), [0, 2 ** 32 - 1])
    k = cr.key(7)
    assert isinstance(k, cr.PRNGKeyArray) and k.shape == () and np.array_equal(cr.key_data(k), [0, 7])
    ks = cr.split(k, 3)
    assert isinstance(ks, cr.PRNGKeyArray) and ks.shape == (3,) and len(list(ks)) == 3
    assert np.array_equal(cr.key_data(ks[1]), cr.key_data(ks)[1])
    raw = cr.split(cr.PRNGKey(7), (2, 2))
    assert raw.shape == (2, 2, 2) and np.array_equal(raw.reshape(4, 2), cr.key_data(cr.split(k, 4)))


def test_bad_keys_and_arguments():
    with pytest.raises(TypeError, match="uint32 array of shape"):
        cr.uniform(np.zeros(2, np.int32))
    with pytest.raises(TypeError, match="single key"):
        cr.normal(cr.split(cr.key(0)))
    with pytest.raises(TypeError, match="seed must be an integer"):
        cr.key(1.5)
    with pytest.raises(TypeError, match="int32 or uint32"):
        cr.randint(cr.key(0), (2,), 0, 5, dtype=np.int64)
    with pytest.raises(TypeError, match="float32 or float64"):
        cr.uniform(cr.key(0), (2,), dtype=np.int32)
    with pytest.raises(NotImplementedError, match="independent"):
        cr.permutation(cr.key(0), 5, independent=True)


def test_keys_are_jit_arguments_and_accept_traced_integers():
    k = cr.key(3)
    f = cjit.jit(lambda k, x: x + cr.uniform(k, x.shape))
    x = np.zeros((4, 5))
    assert np.array_equal(f(k, x), cr.uniform(k, (4, 5)))
    raw = cr.PRNGKey(3)
    assert np.array_equal(f(raw, x), cr.uniform(raw, (4, 5)))
    # split inside jit returns typed keys out of it
    out = cjit.jit(lambda k: cr.split(k, 4))(k)
    assert isinstance(out, cr.PRNGKeyArray) and np.array_equal(cr.key_data(out), cr.key_data(cr.split(k, 4)))
    for seed in (np.int64(2 ** 40 + 9), np.int32(-5), np.uint32(2 ** 32 - 2)):
        got = cjit.jit(lambda s: cr.key_data(cr.key(s)))(seed)
        assert np.array_equal(got, cr.PRNGKey(seed)), seed
    for d in (np.int32(0), np.int32(-3), np.int64(2 ** 33 + 1), np.uint32(7)):
        got = cjit.jit(lambda k, d: cr.fold_in(k, d))(k, d)
        assert np.array_equal(cr.key_data(got), cr.key_data(cr.fold_in(k, int(d)))), d


def test_dropout_is_one_kernel_with_its_consumer():
    def layer(key, x):
        keep = cr.bernoulli(key, np.float32(0.9), x.shape)
        return cnp.maximum(cnp.where(keep, x / np.float32(0.9), np.float32(0)), 0) * 2
    x = np.random.default_rng(0).random((64, 128), dtype=np.float32)
    m = cjit.jit(layer).lower(cr.key(1), x).compile().memory_analysis()
    assert m.num_kernels == 1 and m.temp_size_in_bytes == 0
    got = cjit.jit(layer)(cr.key(1), x)
    keep = cr.bernoulli(cr.key(1), np.float32(0.9), x.shape)
    assert np.array_equal(got, np.maximum(np.where(keep, x / np.float32(0.9), 0), 0) * 2)
    # about 10% dropped (5 sigma)
    assert abs((~keep).mean() - 0.1) < 5 * math.sqrt(0.09 / x.size)


def test_random_ops_leave_gradients_alone():
    def loss(w, key):
        mask = cr.bernoulli(key, 0.5, w.shape)
        return cnp.sum(cnp.where(mask, w * w, 0.0))
    w = np.linspace(-1, 1, 12)
    k = cr.key(5)
    mask = cr.bernoulli(k, 0.5, w.shape)
    assert np.array_equal(cjit.jit(cjit.grad(loss))(w, k), np.where(mask, 2 * w, 0.0))


def test_permutation_outside_jit():
    p = cr.permutation(cr.key(0), 100)
    assert sorted(p.tolist()) == list(range(100))
    x = np.arange(12).reshape(4, 3)
    q = cr.permutation(cr.key(0), x, axis=1)
    assert np.array_equal(np.sort(q, axis=1), x)


# ---------------------------------------------------------------------------
# distributions: fixed keys, bounds from the sample size (no flakiness)

N = 200_000
KS_999 = 1.95     # Kolmogorov's distribution: P(sqrt(n) D > 1.95) = 0.001


def _ks(sample, cdf):
    x = np.sort(np.asarray(sample, np.float64))
    f = cdf(x)
    n = x.size
    return max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))


_phi = np.vectorize(lambda v: 0.5 * math.erfc(-v / math.sqrt(2)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_uniform_distribution(dtype):
    u = np.asarray(cr.uniform(cr.key(11), (N,), dtype))
    assert u.dtype == dtype and u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 5 * math.sqrt(1 / 12 / N)
    assert abs(u.var() - 1 / 12) < 5 * math.sqrt(1 / 180 / N)
    assert _ks(u, lambda x: x) < KS_999 / math.sqrt(N)
    v = np.asarray(cr.uniform(cr.key(12), (N,), dtype, minval=-3.0, maxval=5.0))
    assert v.min() >= -3 and v.max() < 5 and _ks(v, lambda x: (x + 3) / 8) < KS_999 / math.sqrt(N)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_normal_distribution(dtype):
    z = np.asarray(cr.normal(cr.key(13), (N,), dtype))
    assert z.dtype == dtype and np.all(np.isfinite(z))
    assert abs(z.mean()) < 5 / math.sqrt(N)
    assert abs(z.var() - 1) < 5 * math.sqrt(2 / N)
    assert abs(np.mean(z ** 3)) < 5 * math.sqrt(15 / N)          # skewness 0
    assert _ks(z, _phi) < KS_999 / math.sqrt(N)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_truncated_normal_distribution(dtype):
    z = np.asarray(cr.truncated_normal(cr.key(14), -1.0, 2.0, (N,), dtype))
    assert z.min() > -1 and z.max() < 2
    lo, hi = _phi(-1.0), _phi(2.0)
    assert _ks(z, lambda x: (_phi(x) - lo) / (hi - lo)) < KS_999 / math.sqrt(N)
    # traced bounds: float32 runs the same graph as for constant bounds (XLA's erf)
    traced = cjit.jit(lambda k, a, b: cr.truncated_normal(k, a, b, (1000,), dtype))
    same = np.asarray(traced(cr.key(14), np.array(-1.0, dtype), np.array(2.0, dtype)))
    if dtype == "float32":
        assert np.array_equal(same, cr.truncated_normal(cr.key(14), -1.0, 2.0, (1000,), dtype))
    else:   # cjit.scipy.special.erf in the graph, within a few ulp of the C library's
        np.testing.assert_allclose(same, cr.truncated_normal(cr.key(14), -1.0, 2.0, (1000,), dtype), rtol=1e-13)


@pytest.mark.parametrize("p", [0.05, 0.5, 0.9])
def test_bernoulli_frequency(p):
    b = np.asarray(cr.bernoulli(cr.key(15), p, (N,)))
    assert b.dtype == bool and abs(b.mean() - p) < 5 * math.sqrt(p * (1 - p) / N)


@pytest.mark.parametrize("lo,hi", [(0, 10), (-7, 3), (-2 ** 31, 2 ** 31 - 1), (5, 6)])
def test_randint_frequencies(lo, hi):
    r = np.asarray(cr.randint(cr.key(16), (N,), lo, hi))
    assert r.dtype == np.int32 and r.min() >= lo and r.max() < hi
    if hi - lo <= 10:
        counts = np.bincount(r - lo, minlength=hi - lo)
        q = 1 / (hi - lo)
        assert np.all(np.abs(counts / N - q) <= 5 * math.sqrt(q * (1 - q) / N)), counts
    else:   # a KS test on the (discrete, fine-grained) uniform
        assert _ks(r, lambda x: (np.floor(x) - lo + 1) / (hi - lo)) < KS_999 / math.sqrt(N)


def test_categorical_frequencies():
    probs = np.array([0.1, 0.2, 0.3, 0.4])
    c = np.asarray(cr.categorical(cr.key(17), np.log(probs), shape=(N,)))
    freq = np.bincount(c, minlength=4) / N
    assert np.all(np.abs(freq - probs) < 5 * np.sqrt(probs * (1 - probs) / N)), freq


def test_gumbel_distribution():
    g = np.asarray(cr.gumbel(cr.key(18), (N,)))
    assert _ks(g, lambda x: np.exp(-np.exp(-x))) < KS_999 / math.sqrt(N)


def test_split_keys_are_independent_streams():
    a, b = cr.split(cr.key(19))
    u, v = np.asarray(cr.uniform(a, (N,))), np.asarray(cr.uniform(b, (N,)))
    # correlation of independent streams: |r| below 5 / sqrt(N)
    assert abs(np.corrcoef(u, v)[0, 1]) < 5 / math.sqrt(N)


# ---------------------------------------------------------------------------
# the same bits as jax.random (optional: JAX installed)

SEEDS = [0, 1, 42, 2 ** 31 + 7, 2 ** 40 + 5]
SHAPES = [(), (5,), (3, 4), (2, 3, 5)]


@pytest.fixture(scope="module")
def jax_x64():
    jax = pytest.importorskip("jax")
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)    # float64 draws, 64-bit seeds
    try:
        yield jax
    finally:
        jax.config.update("jax_enable_x64", before)


def test_same_bits_as_jax(jax_x64):
    jr = jax_x64.random
    assert jax_x64.config.jax_threefry_partitionable
    checked = 0
    for seed in SEEDS:
        k, jk = cr.key(seed), jr.key(seed)
        assert np.array_equal(cr.key_data(k), jr.key_data(jk)), seed
        assert np.array_equal(cr.key_data(cr.split(k, 3)), jr.key_data(jr.split(jk, 3)))
        for d in (0, 7, 2 ** 31 + 3):
            assert np.array_equal(cr.key_data(cr.fold_in(k, d)), jr.key_data(jr.fold_in(jk, d)))
        for shape in SHAPES:
            assert np.array_equal(cr.bits(k, shape), jr.bits(jk, shape, dtype=np.uint32))
            for dt in ("float32", "float64"):
                assert np.array_equal(cr.uniform(k, shape, dt), jr.uniform(jk, shape, dtype=dt)), (seed, shape, dt)
                # u * (maxval - minval) + minval: one FMA in both
                assert np.array_equal(cr.uniform(k, shape, dt, minval=-2.5, maxval=4.0),
                                      jr.uniform(jk, shape, dtype=dt, minval=-2.5, maxval=4.0))
                # erfinv, erf and log rounded as XLA rounds them (cjit/_xla_math.py)
                assert np.array_equal(cr.normal(k, shape, dt), jr.normal(jk, shape, dtype=dt)), (seed, shape, dt)
                for lo, hi in ((-1.5, 2.0), (0.5, 0.6), (-10.0, 10.0)):
                    assert np.array_equal(cr.truncated_normal(k, lo, hi, shape, dt),
                                          jr.truncated_normal(jk, lo, hi, shape, dtype=dt)), (seed, shape, dt, lo)
                p = np.linspace(0.05, 0.95, int(np.prod(shape))).reshape(shape).astype(dt)
                assert np.array_equal(cr.bernoulli(k, p), jr.bernoulli(jk, p))
            for lo, hi in ((0, 10), (-100, 1000), (-2 ** 31, 2 ** 31 - 1), (3, 3)):
                assert np.array_equal(cr.randint(k, shape, lo, hi), jr.randint(jk, shape, lo, hi, dtype=np.int32))
            assert np.array_equal(cr.randint(k, shape, 0, 2 ** 32 - 1, np.uint32),
                                  jr.randint(jk, shape, 0, 2 ** 32 - 1, dtype=np.uint32))
            checked += 1
        logits = np.log(np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]]))
        assert np.array_equal(cr.categorical(k, logits), jr.categorical(jk, logits))
        assert np.array_equal(cr.categorical(k, logits, axis=0, shape=(4, 3)),
                              jr.categorical(jk, logits, axis=0, shape=(4, 3)))
        assert np.array_equal(cr.permutation(k, 50), jr.permutation(jk, 50))
    assert checked == len(SEEDS) * len(SHAPES)


def test_same_bits_as_jax_inside_jit(jax_x64):
    jr = jax_x64.random
    f = cjit.jit(lambda k: (cr.uniform(k, (6, 7), "float32"), cr.randint(k, (9,), -5, 5),
                            cr.bits(cr.fold_in(k, 3), (4,))))
    for seed in SEEDS:
        jk = jr.key(seed)
        u, r, b = f(cr.key(seed))
        assert np.array_equal(u, jr.uniform(jk, (6, 7), dtype="float32"))
        assert np.array_equal(r, jr.randint(jk, (9,), -5, 5, dtype=np.int32))
        assert np.array_equal(b, jr.bits(jr.fold_in(jk, 3), (4,), dtype=np.uint32))


# ---------------------------------------------------------------------------
# choice

P10 = np.array([0.05, 0.2, 0.1, 0.05, 0.1, 0.1, 0.1, 0.1, 0.15, 0.05])


@pytest.mark.parametrize("replace", [True, False])
def test_choice_frequencies_follow_p(replace):
    n = 20_000
    if replace:
        draws = np.asarray(cr.choice(cr.key(21), 10, (n,), p=P10))
    else:   # the first of 3 distinct draws is distributed as p; the 3 never repeat
        keys = cr.split(cr.key(21), n)
        rows = np.asarray(cjit.jit(cjit.vmap(lambda k: cr.choice(k, 10, (3,), replace=False, p=P10)))(keys))
        assert all(len(set(r)) == 3 for r in rows.tolist())
        draws = rows[:, 0]
    counts = np.bincount(draws, minlength=10)
    assert np.all(np.abs(counts - n * P10) < 5 * np.sqrt(n * P10 * (1 - P10)))


def test_choice_shapes_axes_and_errors():
    m = np.arange(12.0).reshape(3, 4)
    out = cr.choice(cr.key(3), m, (2, 5), axis=1)
    assert out.shape == (3, 2, 5) and set(np.asarray(out)[0].ravel().tolist()) <= set(m[0].tolist())
    perm = np.asarray(cr.choice(cr.key(3), 7, (7,), replace=False))
    assert sorted(perm.tolist()) == list(range(7))
    uni = np.asarray(cr.choice(cr.key(4), 5, (N // 10,)))
    assert uni.min() == 0 and uni.max() == 4
    assert cr.choice(cr.key(3), m, (0,)).shape == (0,)
    with pytest.raises(ValueError, match="larger sample"):
        cr.choice(cr.key(0), 3, (4,), replace=False)
    with pytest.raises(ValueError, match="p must be"):
        cr.choice(cr.key(0), 3, (2,), p=[0.5, 0.5])
    with pytest.raises(ValueError, match="greater than 0"):
        cr.choice(cr.key(0), 0, (2,))
    with pytest.raises(TypeError, match="traced scalar"):
        cjit.jit(lambda k, n: cr.choice(k, n, (2,)))(cr.key(0), 5)


def test_choice_same_bits_as_jax():
    """JAX without x64 (its choice of an int draws int32 indices, as cjit's)."""
    jax = pytest.importorskip("jax")
    jr = jax.random
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", False)
    try:
        m = np.arange(12.0, dtype=np.float32).reshape(3, 4)
        p = P10.astype(np.float32)
        for seed in (0, 1, 42):
            k, jk = cr.key(seed), jr.key(seed)
            for kw in ({}, {"replace": False}, {"p": p}, {"p": p, "replace": False}):
                for shape in ((), (3,), (2, 2)):
                    assert np.array_equal(cr.choice(k, 10, shape, **kw), jr.choice(jk, 10, shape, **kw)), (seed, kw)
                    a = np.arange(10, dtype=np.float32) * 1.5
                    assert np.array_equal(cr.choice(k, a, shape, **kw), jr.choice(jk, a, shape, **kw))
            q = p[:4] / p[:4].sum()
            got = cjit.jit(lambda k, m: cr.choice(k, m, (5,), p=q, axis=1))(k, m)
            assert np.array_equal(got, jr.choice(jk, m, (5,), p=q, axis=1))
    finally:
        jax.config.update("jax_enable_x64", before)


# ---------------------------------------------------------------------------
# gumbel's bits, without JAX: the logs must be XLA's (float32: its
# polynomial; float64: the C library's), not cjit's own log, which is within
# 1 ulp but differed on 192 of these 1001 float32 draws (120 float64)

# jax.random.gumbel(jax.random.key(0), (1001,), dtype) from JAX 0.10.2 (CPU,
# jax_enable_x64=True; the float32 draws are the same without x64), at these
# indices, as the bits of the values
GUMBEL_KEY0_1001 = {
    "float32": ([0, 1, 2, 7, 8, 11, 44], np.uint32,
                [0x403b1889, 0x4075499c, 0xbdc66ff7, 0x3f7d464f, 0x3f9d912a, 0xbfa6b0cf, 0x3ed501d2]),
    "float64": ([0, 8, 27, 39, 44, 69, 70], np.uint64,
                [0x3fc1a6e485559698, 0x3fddcd073b56c6a1, 0xbff781117168bcd7, 0x3feaf57114f2cac1,
                 0x3fcfc69ef8da2fd3, 0x3ffda99167a7cedd, 0x3ff3cda7e4650285]),
}


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_gumbel_draws_are_jax_bits(dt):
    idx, it, want = GUMBEL_KEY0_1001[dt]
    g = np.asarray(cr.gumbel(cr.key(0), (1001,), dt))
    assert g.dtype == dt
    assert [hex(v) for v in g[idx].view(it)] == [hex(v) for v in want]
    # inside jit (and so categorical, which adds the logits to these draws)
    gj = np.asarray(cjit.jit(lambda k: cr.gumbel(k, (1001,), dt))(cr.key(0)))
    assert np.array_equal(gj.view(it), g.view(it))


LARGE = 100_000


@pytest.mark.parametrize("x64", [True, False])
def test_large_draws_are_jax_bits(x64):
    """100k draws of every distribution the docs call bit-equal, against
    JAX with x64 (float64 draws) and without (float32 draws; seeds below
    2**32, as JAX without x64 takes 32-bit seeds)."""
    jax = pytest.importorskip("jax")
    jr = jax.random
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", x64)
    dt = "float64" if x64 else "float32"
    n = LARGE
    try:
        for seed in (3, 2 ** 31 + 11):
            k, jk = cr.key(seed), jr.key(seed)

            def same(name, got, want):
                got, want = np.asarray(got), np.asarray(want)
                if want.dtype.kind in "iu":        # JAX's default int depends on x64
                    got, want = got.astype(np.int64), want.astype(np.int64)
                assert got.shape == want.shape and got.dtype == want.dtype, (name, got.dtype, want.dtype)
                bad = ~((got == want) | (np.isnan(got) & np.isnan(want)) if got.dtype.kind == "f"
                        else got == want)
                assert not bad.any(), f"{name} {dt} seed {seed}: {bad.sum()} of {bad.size} differ"

            same("bits", cr.bits(k, (n,)), jr.bits(jk, (n,), dtype=np.uint32))
            same("uniform", cr.uniform(k, (n,), dt), jr.uniform(jk, (n,), dtype=dt))
            same("uniform(-3, 5)", cr.uniform(k, (n,), dt, -3.0, 5.0),
                 jr.uniform(jk, (n,), dtype=dt, minval=-3.0, maxval=5.0))
            same("normal", cr.normal(k, (n,), dt), jr.normal(jk, (n,), dtype=dt))
            same("truncated_normal", cr.truncated_normal(k, -1.5, 2.0, (n,), dt),
                 jr.truncated_normal(jk, -1.5, 2.0, (n,), dtype=dt))
            same("bernoulli", cr.bernoulli(k, np.asarray(0.3, dt), (n,)),
                 jr.bernoulli(jk, np.asarray(0.3, dt), (n,)))
            same("randint", cr.randint(k, (n,), -5, 1000), jr.randint(jk, (n,), -5, 1000, dtype=np.int32))
            same("gumbel", cr.gumbel(k, (n,), dt), jr.gumbel(jk, (n,), dtype=dt))
            logits = np.log(np.linspace(0.1, 1.0, 10)).astype(dt)
            same("categorical", cr.categorical(k, logits, shape=(n // 10,)),
                 jr.categorical(jk, logits, shape=(n // 10,)))
            same("permutation", cr.permutation(k, 1000), jr.permutation(jk, 1000))
            p = (np.arange(1.0, 11.0) / 55.0).astype(dt)
            same("choice p", cr.choice(k, 10, (1000,), p=p), jr.choice(jk, 10, (1000,), p=p))
    finally:
        jax.config.update("jax_enable_x64", before)
