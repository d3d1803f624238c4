"""Float sums add pairwise (codegen.c, emit_pairwise_sum), so their error
grows like log(n), as NumPy's does, and not like n.

References nobody here wrote: math.fsum of the inputs (exact, then rounded
once to float64), NumPy's own error against it, and sums of small
integer-valued floats, which every order of addition gets exactly."""
import itertools
import json
import math
import os

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp

from conftest import run_python


# with passes switched off (the Makefile's second run) the plan differs,
# the results must not
DEFAULT_PASSES = not os.environ.get("CJIT_PASSES")


def exact_sum(x):
    flat = np.asarray(x, np.float64).ravel()
    return math.fsum(itertools.chain.from_iterable(part.tolist() for part in np.array_split(flat, 64)))


def assert_as_good_as_numpy(got, numpy_value, exact, dtype, what):
    """cjit's error is at most 4 times NumPy's plus two units in the last
    place of the result (both are rounded to `dtype` at the end, so NumPy's
    error can be 0 by luck)."""
    ulp = float(np.spacing(np.abs(np.asarray(exact, dtype))))
    err, np_err = abs(float(got) - exact), abs(float(numpy_value) - exact)
    assert err <= 4 * np_err + 2 * ulp, f"{what}: error {err:.3g}, NumPy's {np_err:.3g}, ulp {ulp:.3g}"


def test_float32_sum_of_ten_million_tenths():
    # the example: the naive sum gave 997297.6 (0.27% off)
    x = np.full(10**7, 0.1, np.float32)
    exact = exact_sum(x)
    got = float(cjit.jit(lambda v: v.sum())(x))
    assert abs(got - exact) <= 1e-6 * exact, got
    assert_as_good_as_numpy(got, x.sum(), exact, np.float32, "sum")
    mean = float(cjit.jit(lambda v: v.mean())(x))
    assert abs(mean - exact / x.size) <= 1e-6 * exact / x.size, mean


def test_float64_sum_of_ten_million_tenths():
    x = np.full(10**7, 0.1, np.float64)
    exact = exact_sum(x)
    got = float(cjit.jit(lambda v: v.sum())(x))
    assert abs(got - exact) <= 1e-14 * exact, got


@pytest.mark.parametrize("n, offset", [(10**6, 0.0), (3 * 10**6 + 17, 1000.0), (10**7, 1000.0)])
def test_float32_uniform_sum_and_mean_as_good_as_numpy(n, offset):
    x = np.random.default_rng(n).random(n, dtype=np.float32) + np.float32(offset)
    exact = exact_sum(x)
    assert_as_good_as_numpy(cjit.jit(lambda v: v.sum())(x), x.sum(), exact, np.float32, "sum")
    assert_as_good_as_numpy(cjit.jit(lambda v: v.mean())(x), x.mean(), exact / n, np.float32, "mean")


def test_float64_uniform_sum_as_good_as_numpy():
    n = 10**7
    x = np.random.default_rng(3).random(n) + 1000.0
    exact = exact_sum(x)
    assert_as_good_as_numpy(cjit.jit(lambda v: v.sum())(x), x.sum(), exact, np.float64, "sum")
    assert_as_good_as_numpy(cjit.jit(lambda v: v.mean())(x), x.mean(), exact / n, np.float64, "mean")


def test_reduced_loops_around_the_inner_one_join_the_pairwise_sum():
    # a slice keeps the two reduced loops apart: [3000r, 1500r]; the row
    # sums go into the same pairwise counter as the blocks of a row
    x = np.random.default_rng(5).random((3000, 2000), dtype=np.float32) + np.float32(100)
    f = cjit.jit(lambda v: v[:, :1500].sum())
    if DEFAULT_PASSES:
        assert "[3000r, 1500r]" in f.lower(x).compile().as_text()
    exact = exact_sum(x[:, :1500])
    got = float(f(x))
    assert abs(got - exact) <= 2 * float(np.spacing(np.float32(exact))), (got, exact)


def test_row_sums_inside_a_group_are_pairwise():
    # layer norm: the row mean and variance are sums inside a group, run a
    # block of rows at a time; a naive mean of 2^20 values 1000 + u was off
    # by 0.25, most of a standard deviation (0.29)
    x = np.random.default_rng(11).random((4, 1 << 20), dtype=np.float32) + np.float32(1000)

    def layer_norm(v):
        mu = v.mean(axis=-1, keepdims=True)
        d = v - mu
        return d / cnp.sqrt((d * d).mean(axis=-1, keepdims=True) + 1e-5), v.sum(axis=-1)

    f = cjit.jit(layer_norm)
    if DEFAULT_PASSES:
        assert "3 stages over 4 rows" in f.lower(x).compile().as_text()
    out, sums = f(x)
    x64 = x.astype(np.float64)
    mu = x64.mean(axis=-1, keepdims=True)
    want = (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
    assert np.max(np.abs(out - want)) <= 2e-3
    for r in range(x.shape[0]):
        assert_as_good_as_numpy(sums[r], x[r].sum(), exact_sum(x[r]), np.float32, f"row {r}")


THREADS_SCRIPT = """
    import json, sys
    import numpy as np
    import cjit
    import cjit.numpy as cnp
    from cjit import _cjit
    rng = np.random.default_rng(9)
    a = rng.random((300, 5000), dtype=np.float32) + np.float32(10)
    b = rng.random((30, 40, 700))
    cases = {
        "rows": (lambda a: a.sum(axis=1), (a,)),
        "row_means_long": (lambda a: a.reshape(30, 50000).mean(axis=1), (a,)),
        "all": (lambda a: a.sum(), (a,)),
        "columns": (lambda a: a.sum(axis=0), (a,)),
        "sliced": (lambda a: a[:, 7:4000].sum(axis=1), (a,)),
        "softmax": (lambda a: cnp.exp(a - 10) / cnp.sum(cnp.exp(a - 10), axis=-1, keepdims=True), (a,)),
        "axes_0_2": (lambda b: b.sum(axis=(0, 2)), (b,)),
        "axes_1_2": (lambda b: b.mean(axis=(1, 2)), (b,)),
    }
    out = {name: np.asarray(cjit.jit(f)(*args)).tobytes().hex() for name, (f, args) in cases.items()}
    print(json.dumps({"nthreads": _cjit.num_threads(), "out": out}))
"""


def test_sums_do_not_depend_on_the_thread_count():
    runs = {}
    for n in (1, 2):
        r = run_python(THREADS_SCRIPT, {"CJIT_NUM_THREADS": str(n)}, timeout=300)
        assert r.returncode == 0, r.stderr
        runs[n] = json.loads(r.stdout)
        assert runs[n]["nthreads"] == n
    for name, bits in runs[1]["out"].items():
        assert runs[2]["out"][name] == bits, name


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [0, 1, 2, 511, 512, 513, 1023, 1024, 1025, 4096, 512 * 7 + 5, 512 * 1000 + 1])
def test_block_boundaries_are_exact_on_integer_values(n, dtype):
    # small integers: every order of addition gives the exact sum, so a
    # point missed or added twice at a block edge shows
    x = (np.arange(n) % 7 - 2).astype(dtype)
    got = cjit.jit(lambda v: v.sum())(x)
    assert got.dtype == np.dtype(dtype)
    assert float(got) == exact_sum(x)
    rows = np.stack([x, x[::-1] * 3])
    np.testing.assert_array_equal(cjit.jit(lambda v: v.sum(axis=1))(rows), rows.astype(np.float64).sum(axis=1))


@pytest.mark.parametrize("fn", [
    lambda v: v[:, :1300].sum(),
    lambda v: v[:, 3:1400].sum(axis=1),
    lambda v: v.T.sum(),
    lambda v: v.T.sum(axis=1),
    lambda v: v.reshape(37, 3, 500).sum(axis=(0, 2)),
    lambda v: v.reshape(37, 3, 500).sum(axis=(1, 2)),
    lambda v: v[::2, ::3].sum(),
])
def test_nested_reduced_loops_are_exact_on_integer_values(fn):
    x = (np.arange(37 * 1500) % 11 - 5).astype(np.float32).reshape(37, 1500)
    got = np.asarray(cjit.jit(fn)(x))
    want = fn(x.astype(np.float64))
    np.testing.assert_array_equal(got, want.astype(np.float32))


def test_empty_and_tiny_sums():
    f = cjit.jit(lambda v: v.sum())
    assert float(f(np.zeros(0, np.float32))) == 0.0
    np.testing.assert_array_equal(cjit.jit(lambda v: v.sum(axis=1))(np.ones((5, 0), np.float32)), np.zeros(5))
    assert cjit.jit(lambda v: v.sum(axis=1))(np.ones((0, 600), np.float32)).shape == (0,)
    assert float(f(np.ones((0, 600), np.float32))) == 0.0
    assert float(f(np.array([0.1], np.float32))) == np.float32(0.1)
    assert float(f(np.array([0.1, 0.2], np.float32))) == np.float32(0.1) + np.float32(0.2)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_and_inf_propagate(dtype):
    f = cjit.jit(lambda v: v.sum())
    g = cjit.jit(lambda v: v.sum(axis=1))
    for where, values in [((3000,), (np.nan,)), ((4999,), (np.inf,)), ((10, 4000), (np.inf, -np.inf)),
                          ((0,), (-np.inf,)), ((700, 2500), (np.nan, np.inf))]:
        x = np.ones(5000, dtype)
        x[list(where)] = values
        want = x.sum()
        got = f(x)
        assert (np.isnan(got) and np.isnan(want)) or got == want, (where, values, got, want)
        rows = np.stack([x, np.ones(5000, dtype)])
        np.testing.assert_array_equal(g(rows), rows.sum(axis=1))
    big = np.full(2000, np.finfo(dtype).max / 4, dtype)
    assert float(f(big)) == float(big.sum()) == np.inf


def test_column_of_one_sums_pairwise():
    # (n, 1).sum(axis=0): the size-1 loop is dropped, so the reduced loop is
    # innermost and sums pairwise (was: one term at a time, error 5.4
    # against NumPy's 0.019 on these 800,000 values).
    x = np.random.default_rng(11).random((800000, 1)).astype(np.float32)
    exact = math.fsum(x[:, 0].astype(np.float64))
    got = float(cjit.jit(lambda v: v.sum(axis=0))(x)[0])
    ref = float(x.sum(axis=0)[0])
    assert abs(got - exact) <= 4 * abs(ref - exact) + 2 * np.spacing(np.float32(exact))
