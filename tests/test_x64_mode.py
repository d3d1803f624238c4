"""cjit's two modes, as JAX's jax_enable_x64: off (the default) computes in
32 bits (float32 and int32 defaults, 64-bit arguments narrowed, Python
scalars weak), on gives the 64-bit defaults.  The rest of the suite runs with
x64 on (conftest.py sets CJIT_ENABLE_X64=1); here the default mode is
checked in subprocesses without that variable and in this process under
cjit.enable_x64(False)."""
import os
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cjit
import cjit.numpy as cnp
import cjit.random as cr
from cjit.example_libraries import stax

from conftest import run_python

F32, F64, I32, I64, U32 = (np.dtype(n) for n in ("float32", "float64", "int32", "int64", "uint32"))
NARROW = {F64: F32, I64: I32, np.dtype("uint64"): U32}
EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def _default_env():
    """The environment of a process in the default mode (no x64 variable)."""
    return {"CJIT_ENABLE_X64": "", "JAX_ENABLE_X64": ""}


def run_default(code, **extra):
    env = _default_env()
    env.update(extra)
    r = run_python(code, env)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


# ---------------------------------------------------------------------------
# the switch

def test_default_mode_is_x64_off_in_a_fresh_process():
    out = run_default("""
        import cjit, cjit.numpy as cnp, cjit.random as cr
        print(cjit.config.jax_enable_x64, cnp.zeros(3).dtype, cnp.arange(3).dtype,
              cnp.arange(3.0).dtype, cr.normal(cr.key(0), (3,)).dtype)
    """)
    assert out == ["False", "float32", "int32", "float32", "float32"]


@pytest.mark.parametrize("var", ["CJIT_ENABLE_X64", "JAX_ENABLE_X64"])
def test_environment_variables_turn_x64_on(var):
    out = run_default("""
        import cjit, cjit.numpy as cnp
        print(cjit.config.jax_enable_x64, cnp.zeros(3).dtype, cnp.arange(3).dtype)
    """, **{var: "1"})
    assert out == ["True", "float64", "int64"]


def test_config_update_and_context_managers():
    assert cjit.config.jax_enable_x64 is True           # the suite's mode
    with cjit.enable_x64(False):
        assert cjit.config.jax_enable_x64 is False
        assert cnp.ones(2).dtype == F32
        with cjit.experimental.enable_x64():
            assert cnp.ones(2).dtype == F64
        assert cnp.ones(2).dtype == F32
    with cjit.experimental.disable_x64():
        assert cnp.ones(2).dtype == F32
    assert cnp.ones(2).dtype == F64
    cjit.config.update("jax_enable_x64", False)
    try:
        assert cjit.config.read("jax_enable_x64") is False
        assert cnp.eye(2).dtype == F32
    finally:
        cjit.config.update("jax_enable_x64", True)
    assert cnp.eye(2).dtype == F64


# ---------------------------------------------------------------------------
# default dtypes, in both modes

@pytest.mark.parametrize("x64", [False, True])
def test_creation_and_random_defaults(x64):
    f, i = (F64, I64) if x64 else (F32, I32)
    with cjit.enable_x64(x64):
        made = {
            "zeros": cnp.zeros(3), "ones": cnp.ones((2, 2)), "empty": cnp.empty(2),
            "full": cnp.full(2, 1.5), "full_int": cnp.full(2, 3), "eye": cnp.eye(3),
            "identity": cnp.identity(2), "arange_f": cnp.arange(3.0), "arange_i": cnp.arange(3),
            "linspace": cnp.linspace(0, 1, 5), "tri": cnp.tri(3),
            "asarray_f": cnp.asarray(np.arange(3.0)), "asarray_i": cnp.asarray(np.arange(3)),
            "asarray_list": cnp.asarray([1.0, 2.0]), "array_i": cnp.array([1, 2]),
            "zeros_like": cnp.zeros_like(np.ones(2)),
            "normal": cr.normal(cr.key(0), (3,)), "uniform": cr.uniform(cr.key(1), (3,)),
            "truncated_normal": cr.truncated_normal(cr.key(2), -1.0, 1.0, (3,)),
            "gumbel": cr.gumbel(cr.key(3), (3,)),
            "traced_zeros": cjit.jit(lambda: cnp.zeros(3))(),
            "traced_arange": cjit.jit(lambda: cnp.arange(4))(),
            "traced_scalar": cjit.jit(lambda: 1.5)(),
            "traced_int": cjit.jit(lambda: 7)(),
            "one_hot": cjit.nn.one_hot(np.arange(3), 3),
        }
    want = {k: (i if k in ("full_int", "arange_i", "asarray_i", "array_i", "traced_arange",
                           "traced_int") else f) for k in made}
    got = {k: np.asarray(v).dtype for k, v in made.items()}
    assert got == want


def test_float32_draws_equal_the_explicit_float32_ones():
    """x64 off, random's default is float32: the same bits as asking for
    float32 with x64 on (the draws pinned to JAX's in test_random.py)."""
    with cjit.enable_x64(False):
        a = cr.normal(cr.key(7), (50,))
        b = cr.uniform(cr.key(8), (4, 5))
    assert np.array_equal(a, cr.normal(cr.key(7), (50,), "float32"))
    assert np.array_equal(b, cr.uniform(cr.key(8), (4, 5), "float32"))


def test_seeds_are_32_bit_without_x64():
    """JAX without x64 takes an int seed as int32: its high word is 0."""
    with cjit.enable_x64(False):
        assert cr.PRNGKey(2**32 + 5).tolist() == [0, 5]
        assert cr.PRNGKey(-1).tolist() == [0, 2**32 - 1]
    assert cr.PRNGKey(2**32 + 5).tolist() == [1, 5]
    assert cr.PRNGKey(-1).tolist() == [2**32 - 1, 2**32 - 1]


def test_explicit_float64_warns_and_gives_float32():
    with cjit.enable_x64(False):
        with pytest.warns(UserWarning, match="Explicitly requested dtype float64 requested in "
                                             "zeros is not available"):
            z = cnp.zeros(3, np.float64)
        assert z.dtype == F32
        with pytest.warns(UserWarning, match="requested in astype"):
            assert cnp.astype(np.ones(2, np.float32), "float64").dtype == F32
        with pytest.warns(UserWarning, match="int64 requested in arange"):
            assert cnp.arange(3, dtype=np.int64).dtype == I32
        with pytest.warns(UserWarning, match="requested in random.normal"):
            assert cr.normal(cr.key(0), (2,), np.float64).dtype == F32
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            # Python's float and int name the default: no warning
            assert cnp.zeros(2, float).dtype == F32 and cnp.zeros(2, int).dtype == I32
            assert cnp.asarray(np.ones(2)).dtype == F32     # as JAX: narrowed silently
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cnp.zeros(3, np.float64).dtype == F64


def test_the_warning_names_the_users_line_and_not_cjits_own_requests():
    import cjit.scipy.special as sp
    with cjit.enable_x64(False):
        with pytest.warns(UserWarning, match="requested in astype") as rec:
            cjit.jit(lambda x: x.astype("float64"))(np.ones(2))
        assert rec[0].filename == __file__
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            # cjit's own int64 indices and float64 upcasts are narrowed silently
            assert cnp.searchsorted(np.arange(5.0), np.array([1.5, 3.2])).dtype == I32
            assert sp.gammaln(np.arange(1, 4)).dtype == F32
            assert cnp.median(np.arange(5)).dtype == F32
            assert cjit.jit(cnp.linalg.matrix_rank)(np.eye(3)).dtype == I32
            assert cnp.nonzero(np.arange(3))[0].dtype == I32


# ---------------------------------------------------------------------------
# arguments and promotion

@pytest.mark.parametrize("x64", [False, True])
def test_arguments_are_narrowed_without_x64(x64):
    f = cjit.jit(lambda x: x)
    with cjit.enable_x64(x64):
        for dt in ("float64", "int64", "uint64", "float32", "int32", "int8", "uint16", "bool"):
            a = np.arange(6).reshape(2, 3).astype(dt)
            for arg in (a, a.T, a[:, ::2], a.astype(np.dtype(dt).newbyteorder(">"))):
                r = f(arg)
                want = np.dtype(dt) if x64 else NARROW.get(np.dtype(dt), np.dtype(dt))
                assert r.dtype == want
                assert np.array_equal(r, np.asarray(arg).astype(want))
        assert f(np.float64(1.5)).dtype == (F64 if x64 else F32)


def test_python_scalar_arguments_are_weak_32_bit():
    g = cjit.jit(lambda x, s: x * s)
    h = cjit.jit(lambda s: s + 1)
    k = cjit.jit(lambda s: s * 3)
    x = np.arange(4, dtype=np.float32)
    with cjit.enable_x64(False):
        for _ in range(3):                    # the first call, then the C fast path
            assert g(x, 2.5).dtype == F32
            assert g(np.arange(4, dtype=np.int8), 2).dtype == np.int8
            r = h(5)
            assert r.dtype == I32 and int(r) == 6
            r = k(1.5)
            assert r.dtype == F32 and float(r) == 4.5
            assert h(-(2**31)).dtype == I32
        with pytest.raises(OverflowError, match="does not fit in int32"):
            h(2**40)
    for _ in range(2):
        r = h(2**40)
        assert r.dtype == I64 and int(r) == 2**40 + 1
        assert k(1.5).dtype == F64


def test_promotion_without_x64():
    i32 = np.arange(1, 5, dtype=np.int32)
    f32 = np.linspace(0.5, 2, 4, dtype=np.float32)
    u32 = np.arange(4, dtype=np.uint32)
    cases = {
        "i32 + 1.5": (lambda a, b, c: a + 1.5, F32),
        "i32 + f32": (lambda a, b, c: a + b, F32),
        "i32 / 2": (lambda a, b, c: a / 2, F32),
        "u32 + i32": (lambda a, b, c: c + a, I32),
        "sum(i32)": (lambda a, b, c: cnp.sum(a), I32),
        "prod(u32)": (lambda a, b, c: cnp.prod(c + 1), U32),
        "mean(i32)": (lambda a, b, c: cnp.mean(a), F32),
        "sin(i32)": (lambda a, b, c: cnp.sin(a), F32),
        "argmax": (lambda a, b, c: cnp.argmax(b), I32),
        "argsort": (lambda a, b, c: cnp.argsort(b), I32),
        "f32 ** i32": (lambda a, b, c: b ** a, F32),
        "closed-over float64": (lambda a, b, c: b * np.array([1.0, 2, 3, 4]), F32),
    }
    with cjit.enable_x64(False):
        for name, (fn, want) in cases.items():
            got = cjit.jit(fn)(i32, f32, u32)
            ref = np.asarray(fn(i32, f32, u32))
            assert got.dtype == want, name
            np.testing.assert_allclose(got, ref.astype(want), rtol=1e-6, err_msg=name)


_NARROW_OPERANDS = ["bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float32",
                    "int64", "uint64", "float64", "py_int", "py_float", "py_bool"]
_BINOPS = {"add": np.add, "multiply": np.multiply, "subtract": np.subtract,
           "true_divide": np.true_divide, "maximum": np.maximum}


def _operand(kind, seed):
    rng = np.random.default_rng(seed)
    if kind == "py_int":
        return int(rng.integers(1, 5))
    if kind == "py_float":
        return float(rng.uniform(0.5, 3))
    if kind == "py_bool":
        return bool(rng.integers(0, 2))
    if kind == "bool":
        return rng.random(5) < 0.5
    if np.dtype(kind).kind in "iu":
        return rng.integers(1, 9, size=5).astype(kind)
    return rng.uniform(0.5, 3, size=5).astype(kind)


def _narrow(x):
    """What a JAX program without x64 sees: 64-bit arrays as 32-bit ones."""
    if isinstance(x, np.ndarray):
        return x.astype(NARROW.get(x.dtype, x.dtype))
    return x


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(_NARROW_OPERANDS), st.sampled_from(_NARROW_OPERANDS),
       st.sampled_from(sorted(_BINOPS)), st.integers(0, 2**16))
def test_generated_promotions_never_make_64_bit_values(ka, kb, op, seed):
    """x64 off: for any operands (64-bit ones narrowed on entry, Python
    scalars weak), a binary op's result is NumPy 2's dtype of the narrowed
    operands with any 64-bit dtype made 32-bit, and its values NumPy's."""
    if ka.startswith("py") and kb.startswith("py"):
        kb = "float32"                                    # at least one array
    if op == "subtract" and {ka, kb} <= {"bool", "py_bool"}:
        op = "add"
    a, b = _operand(ka, seed), _operand(kb, seed + 1)
    fn = getattr(cnp, op)
    na, nb = _narrow(a), _narrow(b)
    want = np.asarray(_BINOPS[op](na, nb))
    want_dt = NARROW.get(want.dtype, want.dtype)
    with cjit.enable_x64(False):
        got = cjit.jit(fn)(a, b)
    assert got.dtype == want_dt, (ka, kb, op)
    if want_dt.kind == "f":
        np.testing.assert_allclose(got, want.astype(want_dt), rtol=2e-7 * 4)
    else:
        assert np.array_equal(got, want.astype(want_dt))


# ---------------------------------------------------------------------------
# a training step in float32

def _mlp_numpy(params, x, y, lr):
    """One SGD step of a 4 -> 6 -> 3 tanh MLP with a squared loss, in NumPy
    float32, the gradient written out by hand."""
    w1, b1, w2, b2 = params
    h = np.tanh(x @ w1 + b1)
    out = h @ w2 + b2
    n = np.float32(x.shape[0])
    loss = np.sum((out - y) ** 2) / n
    d_out = np.float32(2) * (out - y) / n
    gw2, gb2 = h.T @ d_out, d_out.sum(0)
    dh = (d_out @ w2.T) * (np.float32(1) - h * h)
    gw1, gb1 = x.T @ dh, dh.sum(0)
    lr = np.float32(lr)
    return loss, [p - lr * g for p, g in zip(params, (gw1, gb1, gw2, gb2))]


def test_mlp_train_step_in_float32_matches_numpy():
    def loss_fn(params, x, y):
        w1, b1, w2, b2 = params
        out = cnp.tanh(x @ w1 + b1) @ w2 + b2
        return cnp.sum((out - y) ** 2) / x.shape[0]

    @cjit.jit
    def step(params, x, y):
        loss, grads = cjit.value_and_grad(loss_fn)(params, x, y)
        return loss, [p - 0.1 * g for p, g in zip(params, grads)]

    rng = np.random.default_rng(0)
    params = [rng.normal(size=s) * 0.5 for s in ((4, 6), (6,), (6, 3), (3,))]   # float64
    x, y = rng.normal(size=(8, 4)), rng.normal(size=(8, 3))
    with cjit.enable_x64(False):
        loss, new = step(params, x, y)
    p32 = [p.astype(np.float32) for p in params]
    want_loss, want_new = _mlp_numpy(p32, x.astype(np.float32), y.astype(np.float32), 0.1)
    assert loss.dtype == F32 and all(p.dtype == F32 for p in new)
    np.testing.assert_allclose(loss, want_loss, rtol=2e-6)
    for g, w in zip(new, want_new):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)
    # the same step with x64 on is a float64 one
    loss64, new64 = step(params, x, y)
    assert loss64.dtype == F64 and new64[0].dtype == F64


def test_stax_parameters_are_float32_without_x64():
    init, apply = stax.serial(stax.Dense(5), stax.Relu, stax.Dense(2), stax.LogSoftmax)
    with cjit.enable_x64(False):
        _, params = init(cr.key(0), (-1, 3))
        out = apply(params, np.ones((4, 3)))
    assert [p.dtype for layer in params for p in layer] == [F32] * 4
    assert out.dtype == F32
    _, params64 = init(cr.key(0), (-1, 3))
    assert params64[0][0].dtype == F64


# ---------------------------------------------------------------------------
# caches and memory

def test_a_function_compiled_in_one_mode_is_never_served_in_the_other():
    f = cjit.jit(lambda x: x + cnp.zeros(3))
    g = cjit.jit(lambda s: cnp.arange(3) * s)
    x = np.ones(3, np.float32)
    seen = []
    for x64 in (False, True, False, True):
        with cjit.enable_x64(x64):
            for _ in range(2):                 # the second call is the fast path's
                seen.append((f(x).dtype.name, g(2).dtype.name))
    assert seen == [("float32", "int32")] * 2 + [("float64", "int64")] * 2 \
        + [("float32", "int32")] * 2 + [("float64", "int64")] * 2
    assert f.cache_info()["misses"] == 2 and g.cache_info()["misses"] == 2


def test_the_disk_cache_keeps_the_modes_apart(tmp_path):
    code = """
        import numpy as np, cjit, cjit.numpy as cnp
        from cjit import _disk_cache
        f = cjit.jit(lambda x: x * 2)        # the same graph in both modes
        print(f(np.ones(3, np.float32)).dtype, _disk_cache.info()["disk_entries"])
    """
    env = {"CJIT_CACHE": "1", "CJIT_CACHE_DIR": str(tmp_path)}
    assert run_default(code, CJIT_ENABLE_X64="1", **env) == ["float32", "1"]
    assert run_default(code, **env) == ["float32", "2"]
    assert run_default(code, **env) == ["float32", "2"]


def test_memory_analysis_counts_32_bit_bytes_without_x64():
    f = cjit.jit(lambda x: cnp.tanh(x) * 2 + cnp.ones(1000))
    x = np.ones(1000)                          # float64: narrowed without x64
    with cjit.enable_x64(False):
        m32 = f.lower(x).compile().memory_analysis()
    m64 = f.lower(x).compile().memory_analysis()
    assert m32.argument_size_in_bytes == 4000 and m64.argument_size_in_bytes == 8000
    assert m32.output_size_in_bytes == 4000 and m64.output_size_in_bytes == 8000


def test_train_mlp_example_runs_in_the_default_mode():
    r = run_python(f"import runpy, sys; sys.argv = ['train_mlp.py']; "
                   f"runpy.run_path({os.path.join(EXAMPLES, 'train_mlp.py')!r}, run_name='__main__')",
                   _default_env(), timeout=300)
    assert r.returncode == 0, r.stderr
    acc = float(r.stdout.split("final test accuracy:")[1].split()[0])
    assert acc > 0.9
    assert "arguments" in r.stdout
