"""cjit.vmap, cjit.jvp and the Jacobians, op by op, against references
nobody here wrote: NumPy applied per example (vmap), central finite
differences and the transpose identity <vjp(u), v> == <u, jvp(v)> (jvp).

OPS lists a function per op of csrc/ops.def, written once against a
module `m` so that the same code runs as NumPy (the reference) and as
cjit.numpy; test_every_op_is_listed checks the list against the op table.
"""
import subprocess
import sys

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp
from conftest import assert_close

RNG = np.random.default_rng(17)


def _pos(x):
    return np.abs(x) + 0.5


def _sg(m, x):
    return cjit.stop_gradient(x) * x if m is cnp else x * x


def _name(m, x):
    return cjit.checkpoint_name(x, "v") * 2.0 if m is cnp else x * 2.0


def _i32(x):
    return (x * 8.0).astype("int32")


def _u32(x):
    return (abs(x) * 1000.0).astype("uint32")


def _rotl7(m, u):
    """u rotated left by 7 bits (uint32): cjit's rotate_left op, NumPy's shifts."""
    if m is cnp:
        return cnp._core._apply("rotate_left", u, np.uint32(7))
    return (u << np.uint32(7)) | (u >> np.uint32(25))


def _f32_bits(m, x):
    """The bits of float32(x) as int32: cjit's bitcast op, NumPy's view."""
    if m is cnp:
        return cnp._core._apply("bitcast", x.astype("float32"), dtype="int32")
    return x.astype(np.float32).view(np.int32)


def _fma(m, x, y, z):
    """x * y + z: cjit's fma op (one rounding); NumPy's two roundings, which
    agree to the tolerance here."""
    if m is cnp:
        return cnp._core._apply("fma", x, y, z)
    return x * y + z


def _log_libc(m, x):
    """log: cjit's log_libc op (the C library's log); NumPy's log."""
    if m is cnp:
        return cnp._core._apply("log_libc", x)
    return np.log(x)


def _trisolve(m, a, b):
    """x with tril(a) x = b: cjit's triangular_solve op; NumPy's solve."""
    if m is cnp:
        from cjit.scipy.linalg import solve_triangular
        return solve_triangular(a, b, lower=True)
    return np.linalg.solve(np.tril(a), b)


def _lu_packed(m, a):
    """LU's packed factors: cjit's lu op; SciPy's lu_factor (its row swaps
    are LAPACK's too)."""
    if m is cnp:
        return cnp._core._apply("lu", a)
    import scipy.linalg
    return scipy.linalg.lu_factor(a)[0]


def _lu_perm(m, a):
    """The row order: cjit's lu_pivots op; the swaps of SciPy's lu_factor applied."""
    if m is cnp:
        return cnp._core._apply("lu_pivots", a)
    import scipy.linalg
    piv = scipy.linalg.lu_factor(a)[1]
    p = np.arange(a.shape[-1])
    for i, j in enumerate(piv):
        p[i], p[j] = p[j], p[i]
    return p


_IDX = np.array([2, 0, 3, 3, -1])   # repeats, and one from the end


def _at(m, x, u, how):
    """x.at[:, _IDX].<how>(u): cjit's scatter ops; NumPy's ufunc.at."""
    if m is cnp:
        return getattr(x.at[:, _IDX], how)(u)
    y = x.copy()
    ufunc = {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}[how]
    ufunc.at(y, (slice(None), _IDX), u)
    return y


# name: (function of (module, *args), shapes of the args, domain fix, differentiable)
OPS = {
    "cholesky": (lambda m, x: m.linalg.cholesky(x @ x.T + 3.0 * m.eye(3)), [(3, 3)], None, True),
    "triangular_solve": (lambda m, a, b: _trisolve(m, a + 3.0 * m.eye(3), b), [(3, 3), (3, 2)], None, True),
    "lu": (lambda m, x: _lu_packed(m, x + 3.0 * m.eye(3)), [(3, 3)], None, True),
    "lu_pivots": (lambda m, x: _lu_perm(m, x), [(3, 3)], None, False),
    # factorizations: results free of the factors' signs, every factor read
    "qr": (lambda m, x: m.sum(abs(m.linalg.qr(x)[1])) + m.linalg.qr(x)[0] @ m.linalg.qr(x)[1], [(4, 3)], None, True),
    "eigh": (lambda m, x: (lambda w, v: (v * m.sin(w)) @ v.T)(*m.linalg.eigh(x + x.T)), [(3, 3)], None, True),
    "svd": (lambda m, x: (lambda u, s, vt: (u * m.sin(s)) @ vt)(*m.linalg.svd(x, full_matrices=False)), [(4, 3)],
            None, True),
    "argsort": (lambda m, x: m.argsort(x, axis=-1, kind="stable"), [(3, 4)], None, False),
    "gather": (lambda m, x: m.take(x, _IDX, axis=1) * x[:, :1], [(3, 4)], None, True),
    "scatter_add": (lambda m, x, u: _at(m, x, u, "add"), [(3, 4), (3, 5)], None, True),
    "scatter_mul": (lambda m, x, u: _at(m, x, u, "multiply"), [(3, 4), (3, 5)], None, True),
    "scatter_min": (lambda m, x, u: _at(m, x, u, "min"), [(3, 4), (3, 5)], None, True),
    "scatter_max": (lambda m, x, u: _at(m, x, u, "max"), [(3, 4), (3, 5)], None, True),
    "neg": (lambda m, x: -x, [(3, 4)], None, True),
    "abs": (lambda m, x: m.abs(x), [(3, 4)], None, True),
    "sign": (lambda m, x: m.sign(x) * x, [(3, 4)], None, True),
    "exp": (lambda m, x: m.exp(x), [(3, 4)], None, True),
    "expm1": (lambda m, x: m.expm1(x), [(3, 4)], None, True),
    "log": (lambda m, x: m.log(x), [(3, 4)], _pos, True),
    "log1p": (lambda m, x: m.log1p(x), [(3, 4)], _pos, True),
    "log_libc": (_log_libc, [(3, 4)], _pos, True),
    "sqrt": (lambda m, x: m.sqrt(x), [(3, 4)], _pos, True),
    "reciprocal": (lambda m, x: 1.0 / x, [(3, 4)], _pos, True),
    "tanh": (lambda m, x: m.tanh(x), [(3, 4)], None, True),
    "sin": (lambda m, x: m.sin(x), [(3, 4)], None, True),
    "cos": (lambda m, x: m.cos(x), [(3, 4)], None, True),
    "floor": (lambda m, x: m.floor(x) + x, [(3, 4)], None, True),
    "ceil": (lambda m, x: m.ceil(x) * x, [(3, 4)], None, True),
    "logical_not": (lambda m, x: m.where(m.logical_not(x > 0), x, 2.0 * x), [(3, 4)], None, True),
    "isnan": (lambda m, x: m.where(m.isnan(x), 0.0, x), [(3, 4)], None, True),
    "isfinite": (lambda m, x: m.where(m.isfinite(x), x, 0.0), [(3, 4)], None, True),
    "cast": (lambda m, x: x.astype(np.float32).astype(np.float64) * 2.0, [(3, 4)], None, True),
    "name": (_name, [(3, 4)], None, True),
    "stop_gradient": (_sg, [(3, 4)], None, False),
    "add": (lambda m, x, y: x + y, [(3, 4), (3, 4)], None, True),
    "sub": (lambda m, x, y: x - y, [(3, 4), (4,)], None, True),
    "mul": (lambda m, x, y: x * y, [(3, 4), (3, 1)], None, True),
    "div": (lambda m, x, y: x / y, [(3, 4), (3, 4)], _pos, True),
    "floordiv": (lambda m, x, y: (x // y) * x, [(3, 4), (3, 4)], _pos, True),
    "pow": (lambda m, x, y: x ** y, [(3, 4), (3, 4)], _pos, True),
    "maximum": (lambda m, x, y: m.maximum(x, y), [(3, 4), (3, 4)], None, True),
    "minimum": (lambda m, x, y: m.minimum(x, y), [(3, 4), (3, 4)], None, True),
    "logical_and": (lambda m, x, y: m.where(m.logical_and(x > 0, y > 0), x, y), [(3, 4), (3, 4)], None, True),
    "logical_or": (lambda m, x, y: m.where(m.logical_or(x > 0, y > 0), x, y), [(3, 4), (3, 4)], None, True),
    "eq": (lambda m, x, y: m.where(x == y, 1.0, x), [(3, 4), (3, 4)], None, True),
    "ne": (lambda m, x, y: m.where(x != y, x, 1.0), [(3, 4), (3, 4)], None, True),
    "lt": (lambda m, x, y: m.where(x < y, x, y * 2.0), [(3, 4), (3, 4)], None, True),
    "le": (lambda m, x, y: m.where(x <= y, x * 3.0, y), [(3, 4), (3, 4)], None, True),
    "gt": (lambda m, x, y: m.where(x > y, x, -y), [(3, 4), (3, 4)], None, True),
    "ge": (lambda m, x, y: m.where(x >= y, x * y, y), [(3, 4), (3, 4)], None, True),
    "select": (lambda m, x, y: m.where(x > 0.1, x, y), [(3, 4), (4,)], None, True),
    "fma": (_fma, [(3, 4), (3, 1), (4,)], None, True),
    "broadcast": (lambda m, x: m.broadcast_to(x, (2, 3, 4)), [(3, 1)], None, True),
    "reshape": (lambda m, x: m.reshape(x, (2, 6)), [(3, 4)], None, True),
    "transpose": (lambda m, x: m.transpose(x), [(3, 4)], None, True),
    "slice": (lambda m, x: x[::-2, 1:3], [(3, 4)], None, True),
    "concatenate": (lambda m, x, y: m.concatenate([x, y, x], axis=1), [(3, 4), (3, 2)], None, True),
    "reduce_sum": (lambda m, x: m.sum(x, axis=1), [(3, 4)], None, True),
    "reduce_prod": (lambda m, x: m.prod(x, axis=0), [(3, 4)], None, True),
    "reduce_max": (lambda m, x: m.max(x, axis=1), [(3, 4)], None, True),
    "reduce_min": (lambda m, x: m.min(x), [(3, 4)], None, True),
    "matmul": (lambda m, x, y: x @ y, [(3, 4), (4, 2)], None, True),
    "matmul_vec": (lambda m, x, y: x @ y, [(4,), (4, 3)], None, True),
    "matmul_outer": (lambda m, x, y: x @ y, [(3, 1), (1, 4)], None, True),
    "matmul_bool": (lambda m, x, y: m.where((x > 0) @ (y > 0), x @ y, 0.0), [(3, 1), (1, 4)], None, True),
    "matmul_batched": (lambda m, x, y: x @ y, [(2, 3, 4), (2, 4, 5)], None, True),
    "iota": (lambda m, x: x * m.arange(4.0), [(3, 4)], None, True),
    "constant": (lambda m, x: x + m.ones((3, 4)), [(3, 4)], None, True),
    # integer bit ops, their results choosing between float values
    "bitwise_and": (lambda m, x, y: m.where(m.bitwise_and(_i32(x), _i32(y)) % 2 == 1, x, y), [(3, 4), (3, 4)], None, False),
    "bitwise_or": (lambda m, x, y: m.where(m.bitwise_or(_i32(x), _i32(y)) % 4 == 1, x, y), [(3, 4), (3, 4)], None, False),
    "bitwise_xor": (lambda m, x, y: m.where(m.bitwise_xor(_i32(x), _i32(y)) % 2 == 1, x, y), [(3, 4), (3, 4)], None, False),
    "bitwise_not": (lambda m, x: m.where(m.bitwise_not(_i32(x)) % 2 == 1, x, -x), [(3, 4)], None, False),
    "shift_left": (lambda m, x, y: m.where(m.left_shift(_i32(x), 3) % 16 == 8, x, y), [(3, 4), (3, 4)], None, False),
    "shift_right_arithmetic": (lambda m, x: m.where(m.right_shift(_i32(x), 2) % 2 == 1, x, -x), [(3, 4)], None, False),
    "shift_right_logical": (lambda m, x: m.where(m.right_shift(_u32(x), 2) % 2 == 1, x, -x), [(3, 4)], None, False),
    "rotate_left": (lambda m, x: m.where(_rotl7(m, _u32(x)) % 2 == 1, x, -x), [(3, 4)], None, False),
    "bitcast": (lambda m, x: m.where(_f32_bits(m, x) % 2 == 1, x, -x), [(3, 4)], None, False),
}


def test_every_op_is_listed():
    """Each op of the table (the C test checks each has rules) is exercised here."""
    text = open(__file__.replace("tests/test_vmap_jvp.py", "csrc/ops.def")).read()
    import re
    ops = re.findall(r'^OP\(\w+,\s*\w+,\s*"(\w+)"', text, re.M)
    # regions: control flow (scan, while, cond, result) in tests/test_lax.py, custom
    # derivatives in tests/test_custom_derivatives.py
    regions = ("param", "array", "scan", "while", "cond", "result", "custom")
    missing = [o for o in ops if o not in OPS and o not in regions]
    assert not missing, missing


def _args(name, batch=None, dtype=np.float64):
    _, shapes, fix, _ = OPS[name]
    out = []
    for s in shapes:
        s = ((batch,) if batch else ()) + s
        x = RNG.standard_normal(s)
        out.append((fix(x) if fix else x).astype(dtype))
    return out


# ---- vmap ----------------------------------------------------------------

def _stacked(fn, args, axes, size):
    rows = []
    for b in range(size):
        ex = [a if ax is None else np.take(a, b, axis=ax) for a, ax in zip(args, axes)]
        with np.errstate(all="ignore"):
            rows.append(fn(np, *ex))
    return np.stack(rows)


@pytest.mark.parametrize("name", sorted(OPS))
def test_vmap_matches_numpy_stack(name):
    fn = OPS[name][0]
    nargs = len(OPS[name][1])
    size = 5
    # every operand mapped, then each mapped alone, and a mapped axis that is not 0
    combos = [(0,) * nargs] + ([tuple(0 if j == i else None for j in range(nargs)) for i in range(nargs)]
                               if nargs > 1 else []) + [(1,) * nargs]
    for axes in combos:
        args = _args(name)
        full = []
        for a, ax in zip(args, axes):
            if ax is None:
                full.append(a)
            else:
                stacked = np.stack([a * (1 + 0.1 * k) for k in range(size)])
                if name in ("log", "log_libc", "log1p", "sqrt", "reciprocal", "div", "floordiv", "pow"):
                    stacked = np.abs(stacked) + 0.5
                full.append(np.moveaxis(stacked, 0, ax) if ax < stacked.ndim else stacked)
        if any(ax is not None and ax >= a.ndim for a, ax in zip(full, axes)):
            continue
        want = _stacked(fn, full, axes, size)
        got = cjit.vmap(lambda *a: fn(cnp, *a), in_axes=axes)(*full)
        assert_close(got, want, rtol=1e-12, atol=1e-12)
        jitted = cjit.jit(cjit.vmap(lambda *a: fn(cnp, *a), in_axes=axes))(*full)
        assert_close(jitted, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["exp", "add", "matmul", "reduce_sum", "concatenate", "slice"])
def test_nested_vmap_matches_numpy(name):
    fn = OPS[name][0]
    args = [np.stack([np.stack([a * (1 + i + 0.1 * j) for j in range(3)]) for i in range(2)])
            for a in _args(name)]
    got = cjit.vmap(cjit.vmap(lambda *a: fn(cnp, *a)))(*args)
    want = np.stack([np.stack([fn(np, *[a[i, j] for a in args]) for j in range(3)]) for i in range(2)])
    assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_vmap_of_elementwise_is_one_kernel(monkeypatch):
    monkeypatch.delenv("CJIT_PASSES", raising=False)   # fusion on, whatever the run's passes
    def f(x, y):
        return cnp.tanh(x * y + 1.0) * 2.0 - y
    x = RNG.standard_normal((64, 32))
    y = RNG.standard_normal(32)
    import re

    def kernels(c):
        return len(re.findall(r"^kernel \d+:", c.as_text(), re.M))
    compiled = cjit.jit(cjit.vmap(f, in_axes=(0, None))).lower(x, y).compile()
    assert kernels(compiled) == 1
    assert kernels(cjit.jit(f).lower(x[0], y).compile()) == 1
    mem = compiled.memory_analysis()
    assert mem.temp_size_in_bytes == 0
    assert_close(compiled(x, y), np.tanh(x * y + 1.0) * 2.0 - y, rtol=1e-12)


def test_vmap_pytrees_out_axes_axis_size_and_closures():
    xs = RNG.standard_normal((4, 3))
    w = RNG.standard_normal(3)

    def f(p, x):
        return {"a": p["w"] * x, "b": cnp.sum(x)}, p["c"]
    got, c = cjit.vmap(f, in_axes=({"w": None, "c": None}, 0), out_axes=({"a": 1, "b": 0}, None))(
        {"w": w, "c": 2.0}, xs)
    assert_close(got["a"], (w * xs).T, rtol=1e-14)
    assert_close(got["b"], xs.sum(1), rtol=1e-14)
    assert float(c) == 2.0
    # no mapped argument: axis_size gives the batch, outputs are broadcast
    got = cjit.vmap(lambda: cnp.ones(3), in_axes=(), axis_size=5)()
    assert got.shape == (5, 3)

    # a closure over the caller's traced value, under jit
    @cjit.jit
    def g(v, xs):
        return cjit.vmap(lambda x: x * v + cnp.sum(v))(xs)
    assert_close(g(w, xs), xs * w + w.sum(), rtol=1e-14)
    # keyword arguments are mapped over axis 0
    assert_close(cjit.vmap(lambda x, y: x - y)(xs, y=xs * 2), -xs, rtol=1e-14)


def test_vmap_errors_name_the_sizes_and_the_line():
    f = cjit.vmap(lambda x, y: x + y)
    with pytest.raises(ValueError, match=r"inconsistent sizes.*size 3.*size 4.*test_vmap_jvp.py"):
        f(np.ones((3, 2)), np.ones((4, 2)))
    with pytest.raises(ValueError, match=r"in_axes 2 .*rank-2"):
        cjit.vmap(lambda x: x, in_axes=2)(np.ones((3, 2)))
    with pytest.raises(ValueError, match="rank-0"):
        cjit.vmap(lambda x: x)(1.0)
    with pytest.raises(ValueError, match="2 entries"):
        cjit.vmap(lambda x: x, in_axes=(0, 0))(np.ones(3))
    with pytest.raises(TypeError, match="in_axes must be ints"):
        cjit.vmap(lambda x: x, in_axes="a")
    with pytest.raises(ValueError, match="axis_size"):
        cjit.vmap(lambda x: x, in_axes=None)(np.ones(3))
    with pytest.raises(ValueError, match="out_axes is None"):
        cjit.vmap(lambda x: x, out_axes=None)(np.ones(3))
    with pytest.raises(ValueError, match="inconsistent sizes.*axis_size 4"):
        cjit.vmap(lambda x: x, axis_size=4)(np.ones(3))
    with pytest.raises(ValueError, match="past cjit's limit"):
        cjit.vmap(lambda x: cnp.reshape(x, x.shape + (1,)))(np.ones((1,) * 16))
    # the cache was not poisoned: a good call afterwards works
    assert_close(f(np.ones((3, 2)), np.ones((3, 2))), np.full((3, 2), 2.0))


# ---- jvp -----------------------------------------------------------------

def _diff_args(name):
    args = _args(name)
    if name in ("abs", "maximum", "minimum", "reduce_max", "reduce_min", "sign", "floor", "ceil",
                "floordiv"):
        # keep away from kinks and ties, where finite differences are meaningless
        args = [a + np.arange(a.size).reshape(a.shape) * (0.37 if i == 0 else -0.21)
                for i, a in enumerate(args)]
    return args


@pytest.mark.parametrize("name", sorted(n for n in OPS if OPS[n][3]))
def test_jvp_matches_finite_differences_and_vjp(name):
    fn = lambda *a: fn0(cnp, *a)   # noqa: E731
    fn0 = OPS[name][0]
    args = _diff_args(name)
    vs = [RNG.standard_normal(a.shape) for a in args]
    out, tan = cjit.jvp(fn, tuple(args), tuple(vs))
    assert_close(out, fn0(np, *args), rtol=1e-12, atol=1e-12)
    eps, rtol = (1e-3, 1e-3) if name == "cast" else (1e-6, 1e-5)   # cast: float32's rounding
    with np.errstate(all="ignore"):
        hi = fn0(np, *[a + eps * v for a, v in zip(args, vs)])
        lo = fn0(np, *[a - eps * v for a, v in zip(args, vs)])
    # cast: a central difference of float32 values carries about ulp / eps = 1.2e-7 / 1e-3 of rounding
    # error per unit of magnitude, whatever the tangent's own size
    assert_close(tan, (hi - lo) / (2 * eps), rtol=rtol, atol=3e-4 if name == "cast" else 1e-6)
    # the transpose identity with vjp, on random directions
    u = RNG.standard_normal(np.shape(out))
    _, vjp_fn = cjit.vjp(fn, *args)
    grads = vjp_fn(u)
    lhs = sum(float(np.sum(g * v)) for g, v in zip(grads, vs))
    rhs = float(np.sum(u * tan))
    tol = 1e-6 if name == "cast" else 1e-10    # both pass a float32 rounding
    assert abs(lhs - rhs) <= tol * max(1.0, abs(lhs))


def test_jvp_of_stop_gradient_and_int_outputs():
    x = RNG.standard_normal(4)
    _, t = cjit.jvp(lambda x: cjit.stop_gradient(x) * x, (x,), (np.ones(4),))
    assert_close(t, x, rtol=1e-15)
    (o, i), (t, ti) = cjit.jvp(lambda x: (x * 2.0, cnp.floor(x).astype(np.int32)), (x,), (np.ones(4),))
    assert_close(t, np.full(4, 2.0))
    assert ti.dtype == np.int32 and not ti.any()


def test_jvp_float32_keeps_dtype():
    x = RNG.standard_normal(5).astype(np.float32)
    o, t = cjit.jvp(lambda x: cnp.tanh(x) * 3.0, (x,), (np.ones(5, np.float32),))
    assert o.dtype == np.float32 and t.dtype == np.float32
    assert_close(t, (3 * (1 - np.tanh(x.astype(np.float64)) ** 2)).astype(np.float32), rtol=1e-5)


def test_jvp_pytrees_and_errors():
    p = {"a": RNG.standard_normal(3), "b": (2.0,)}
    out, t = cjit.jvp(lambda p: p["a"] * p["b"][0], (p,), ({"a": np.ones(3), "b": (1.0,)},))
    assert_close(t, 2.0 + p["a"], rtol=1e-14)
    with pytest.raises(ValueError, match="shape"):
        cjit.jvp(lambda x: x, (np.ones(3),), (np.ones(2),))
    with pytest.raises(TypeError, match="structure"):
        cjit.jvp(lambda x: x, (np.ones(3),), ([np.ones(3)],))


def test_grad_of_jvp_and_jvp_of_grad():
    x = RNG.standard_normal(4)
    v = RNG.standard_normal(4)

    def f(x):
        return cnp.sum(cnp.sin(x) * x)
    # d/dx <grad f, v> = H v, both ways
    hv_fwd = cjit.jvp(cjit.grad(f), (x,), (v,))[1]
    hv_rev = cjit.grad(lambda x: cjit.jvp(f, (x,), (v,))[1])(x)
    h_diag = 2 * np.cos(x) - x * np.sin(x)
    assert_close(hv_fwd, h_diag * v, rtol=1e-12)
    assert_close(hv_rev, h_diag * v, rtol=1e-12)
    assert_close(cjit.jit(lambda x: cjit.jvp(cjit.grad(f), (x,), (v,))[1])(x), h_diag * v, rtol=1e-12)


def test_linearize():
    x = RNG.standard_normal(3)
    out, f_jvp = cjit.linearize(lambda x: cnp.exp(x) * x, x)
    assert_close(out, np.exp(x) * x, rtol=1e-14)
    v = RNG.standard_normal(3)
    assert_close(f_jvp(v), (np.exp(x) * x + np.exp(x)) * v, rtol=1e-13)


# ---- Jacobians -----------------------------------------------------------

def _fd_jacobian(f, x, eps=1e-6):
    cols = []
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = eps
        e = e.reshape(x.shape)
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps))
    return np.stack(cols, axis=-1).reshape(np.shape(f(x)) + x.shape)


def test_jacfwd_and_jacrev_match_finite_differences():
    x = RNG.standard_normal((2, 3))

    def f(x):
        return cnp.tanh(x @ x.T) * cnp.sum(x, axis=1)

    def fn(x):
        return np.tanh(x @ x.T) * np.sum(x, axis=1)
    want = _fd_jacobian(fn, x)
    assert_close(cjit.jacfwd(f)(x), want, rtol=1e-6, atol=1e-8)
    assert_close(cjit.jacrev(f)(x), want, rtol=1e-6, atol=1e-8)
    assert_close(cjit.jit(cjit.jacrev(f))(x), want, rtol=1e-6, atol=1e-8)
    # pytrees in and out, tuple argnums
    jf = cjit.jacfwd(lambda a, b: {"s": a * b, "t": cnp.sum(a)}, argnums=(0, 1))(x[0], x[1])
    jr = cjit.jacrev(lambda a, b: {"s": a * b, "t": cnp.sum(a)}, argnums=(0, 1))(x[0], x[1])
    for j in (jf, jr):
        assert_close(j["s"][0], np.diag(x[1]), atol=1e-14)
        assert_close(j["s"][1], np.diag(x[0]), atol=1e-14)
        assert_close(j["t"][0], np.ones(3), atol=1e-14)
        assert_close(j["t"][1], np.zeros(3), atol=1e-14)


def test_hessian_matches_finite_differences_of_the_gradient():
    x = RNG.standard_normal(4)

    def f(x):
        return cnp.sum(cnp.sin(x) * x ** 2) + cnp.prod(x) + cnp.sum(x) ** 3
    g = cjit.jit(cjit.grad(f))
    want = _fd_jacobian(lambda x: np.asarray(g(x)), x, eps=1e-5)
    got = cjit.hessian(f)(x)
    assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert_close(got, got.T, rtol=1e-12, atol=1e-12)


# ---- per-example gradients -----------------------------------------------

def _mlp_params(rng, sizes, dtype):
    return [(rng.standard_normal((m, n)).astype(dtype) / np.sqrt(m), np.zeros(n, dtype))
            for m, n in zip(sizes[:-1], sizes[1:])]


def _loss(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = cnp.tanh(h @ w + b)
    w, b = params[-1]
    logits = h @ w + b
    return cnp.sum((logits - y) ** 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_per_example_gradients_equal_a_loop_of_grads(dtype):
    rng = np.random.default_rng(3)
    params = _mlp_params(rng, [6, 8, 8, 3], dtype)
    xs = rng.standard_normal((10, 6)).astype(dtype)
    ys = rng.standard_normal((10, 3)).astype(dtype)
    per_example = cjit.jit(cjit.vmap(cjit.grad(_loss), in_axes=(None, 0, 0)))(params, xs, ys)
    loop = [cjit.grad(_loss)(params, xs[i], ys[i]) for i in range(10)]
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for layer in range(3):
        for k in range(2):
            want = np.stack([g[layer][k] for g in loop])
            assert per_example[layer][k].shape == (10,) + params[layer][k].shape
            assert_close(per_example[layer][k], want, rtol=tol, atol=tol)


def test_grad_of_vmap():
    rng = np.random.default_rng(4)
    params = _mlp_params(rng, [4, 5, 2], np.float64)
    xs = rng.standard_normal((7, 4))
    ys = rng.standard_normal((7, 2))

    def batch_loss(params):
        return cnp.sum(cjit.vmap(_loss, in_axes=(None, 0, 0))(params, xs, ys))
    got = cjit.grad(batch_loss)(params)
    want = cjit.grad(lambda p: _loss(p, xs, ys))(params)
    for (gw, gb), (ww, wb) in zip(got, want):
        assert_close(gw, ww, rtol=1e-12)
        assert_close(gb, wb, rtol=1e-12, atol=1e-14)


def test_vmap_with_checkpoint_inside():
    xs = RNG.standard_normal((3, 4))

    def f(x):
        return cnp.sum(cjit.checkpoint(lambda x: cnp.sin(cnp.sin(x)))(x))
    got = cjit.vmap(cjit.grad(f))(xs)
    assert_close(got, np.cos(np.sin(xs)) * np.cos(xs), rtol=1e-13)


def test_vmap_error_runs_in_a_fresh_process_without_crashing():
    """Bad input gets an exception, not a crash, even for a value at the rank limit (16)."""
    code = ("import numpy as np, cjit\n"
            "try:\n"
            "    cjit.vmap(lambda x: x.reshape(x.shape + (1,)) * 2.0)(np.ones((1,) * 16))\n"
            "except ValueError as e:\n"
            "    print('ok', 'limit' in str(e))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok True"


@pytest.mark.parametrize("fn", [lambda x, y: cnp.maximum(x, y), lambda x, y: cnp.minimum(x, y),
                                lambda x, y: cnp.max(cnp.concatenate([x, y])) * x])
def test_jvp_at_ties_is_the_transpose_of_vjp(fn):
    x = np.array([1.0, 2.0, 3.0])
    y = x.copy()             # every element tied
    vs = (RNG.standard_normal(3), RNG.standard_normal(3))
    out, tan = cjit.jvp(fn, (x, y), vs)
    u = RNG.standard_normal(np.shape(out))
    grads = cjit.vjp(fn, x, y)[1](u)
    lhs = sum(float(np.sum(g * v)) for g, v in zip(grads, vs))
    assert abs(lhs - float(np.sum(u * tan))) <= 1e-12 * max(1.0, abs(lhs))


def test_batched_outer_products_are_not_matmuls_and_unbatched_weights_fold_into_rows():
    xs = RNG.standard_normal((8, 5, 1))
    ys = RNG.standard_normal((8, 1, 4))
    outer = cjit.jit(cjit.vmap(lambda x, y: x @ y)).lower(xs, ys).compile()
    assert "matmul" not in outer.as_text()
    assert_close(outer(xs, ys), xs @ ys, rtol=1e-14)
    w = RNG.standard_normal((3, 4))
    a = RNG.standard_normal((8, 5, 3))
    folded = cjit.jit(cjit.vmap(lambda a: a @ w)).lower(a).as_text()
    assert "float64[40,3]" in folded and "float64[40,4]" in folded
    assert_close(cjit.vmap(lambda a: a @ w)(a), a @ w, rtol=1e-13)
