"""The persistent compile cache with control flow: graphs holding
cjit.lax.scan / while_loop / cond / switch and custom_vjp bodies are stored
with every body's plan and object code, so a second process runs them
without compiling; changing only a body changes the key; damaged entries
are survived.

As in test_disk_cache.py, every test runs cjit in subprocesses with
CJIT_CACHE=1 and a cache directory of its own."""
import json
import os
import sqlite3

import numpy as np
import pytest

from test_disk_cache import _flip_middle, _garbage_with_good_checksum, _rewrite_blob, _truncate
from test_disk_cache import db_rows, result, run

# Prints the bytes (hex) of every result, the compile split and the cache
# counters, after calling each of the program's jitted functions once.
REPORT = r"""
s1 = _cjit.runtime_stats()
out = {"stats": {k: s1[k] - s0[k] for k in s1 if k.startswith("compile") or k == "loads"},
       "info": cjit.cache_info(),
       "hex": [np.asarray(v).tobytes().hex() for v in results],
       "dtypes": [str(np.asarray(v).dtype) for v in results],
       "shapes": [list(np.asarray(v).shape) for v in results]}
print("RESULT " + json.dumps(out))
"""

HEAD = r"""
import json, os, sys
import numpy as np
import cjit, cjit.numpy as cnp
from cjit import _cjit, lax
"""

# An Elman RNN over 12 steps (a scan), its loss and the loss's gradient.
RNN = HEAD + r"""
rng = np.random.default_rng(1)
W = (rng.standard_normal((16, 16)) * 0.3).astype(np.float32)
U = (rng.standard_normal((8, 16)) * 0.3).astype(np.float32)
xs = rng.standard_normal((12, 8)).astype(np.float32)

def loss(W, U, xs):
    def step(h, x):
        h = cnp.tanh(h @ W + x @ U)
        return h, cnp.sum(h * h)
    h, ys = lax.scan(step, cnp.zeros(16, cnp.float32), xs)
    return cnp.sum(h) + cnp.sum(ys)

s0 = _cjit.runtime_stats()
fwd = cjit.jit(loss)
grads = cjit.jit(cjit.grad(loss, argnums=(0, 1)))
results = [fwd(W, U, xs), *grads(W, U, xs)]
""" + REPORT

# Newton's method for square roots (a while_loop whose condition and body
# both read the operand), then a fori_loop.
NEWTON = HEAD + r"""
a = np.linspace(0.5, 40.0, 33)

def newton_sqrt(a):
    def cond(s):
        x, it = s
        return (cnp.max(cnp.abs(x * x - a)) > 1e-12 * cnp.max(a)) & (it < 60)
    def body(s):
        x, it = s
        return 0.5 * (x + a / x), it + 1
    x, it = lax.while_loop(cond, body, (a, cnp.int32(0)))
    return x, it

def powers(a):
    return lax.fori_loop(0, 5, lambda i, acc: acc * a + i, cnp.ones_like(a))

s0 = _cjit.runtime_stats()
results = [*cjit.jit(newton_sqrt)(a), cjit.jit(powers)(a)]
""" + REPORT

# A switch over three branches (its index clamped) and a cond, one graph.
BRANCHES = HEAD + r"""
x = np.linspace(-2.0, 3.0, 50).astype(np.float32)

def branchy(i, x):
    y = lax.switch(i, [lambda v: cnp.sin(v), lambda v: v * v + 1.0, lambda v: cnp.exp(-v)], x)
    z = lax.cond(cnp.sum(x) > 0, lambda v: v * 2.0, lambda v: -v, x)
    return y + z

s0 = _cjit.runtime_stats()
f = cjit.jit(branchy)
results = [f(np.int32(i), x) for i in (0, 1, 2, 7, -3)] + [f(np.int32(1), -x)]
""" + REPORT

# Regions inside regions: a scan inside a scan body, a cond and a
# custom_vjp inside it too, and the gradient through all of them.
NESTED = HEAD + r"""
rng = np.random.default_rng(2)
xs = (rng.standard_normal((4, 3, 6)) * 0.5).astype(np.float32)
W = (rng.standard_normal((6, 6)) * 0.4).astype(np.float32)

@cjit.custom_vjp
def softplus(v):
    return cnp.log1p(cnp.exp(v))
softplus.defvjp(lambda v: (cnp.log1p(cnp.exp(v)), v),
                lambda v, g: (g / (1.0 + cnp.exp(-v)),))

def model(W, xs):
    def outer(c, x):
        def inner(ci, xi):
            return ci * 0.9 + xi, cnp.sum(ci)
        ci, _ = lax.scan(inner, c, x)
        c2 = lax.cond(cnp.sum(ci) > 0, lambda v: v * 0.5, lambda v: v + 0.25, ci)
        return cnp.tanh(softplus(c2 @ W)), cnp.sum(c2)
    c, ys = lax.scan(outer, cnp.zeros(6, cnp.float32), xs)
    return cnp.sum(c) + cnp.sum(ys)

s0 = _cjit.runtime_stats()
results = [cjit.jit(model)(W, xs), cjit.jit(cjit.grad(model))(W, xs)]
""" + REPORT


def _values(out):
    return [np.frombuffer(bytes.fromhex(h), dt).reshape(s)
            for h, dt, s in zip(out["hex"], out["dtypes"], out["shapes"])]


def _cold_then_warm(code, cache_dir, nfun):
    cold = result(run(code, cache_dir))
    warm = result(run(code, cache_dir))
    assert cold["stats"]["compile_ns_emit"] > 0 and cold["info"]["disk_misses"] == nfun, cold
    # no compile at all in the second process: nothing lowered, generated, optimized or emitted
    for phase in ("simplify", "fuse", "group", "memplan", "codegen", "optimize", "emit"):
        assert warm["stats"][f"compile_ns_{phase}"] == 0, (phase, warm["stats"])
    assert warm["stats"]["loads"] == nfun and warm["stats"]["compiles"] == 0, warm["stats"]
    assert warm["info"]["disk_hits"] == nfun and warm["info"]["disk_misses"] == 0, warm["info"]
    assert warm["hex"] == cold["hex"]                  # bit for bit
    assert warm["info"]["disk_entries"] == nfun
    return _values(warm)


# -- references (NumPy, float64) ----------------------------------------------------

def _rnn_loss_np(W, U, xs):
    h = np.zeros(16)
    total = 0.0
    for x in xs:
        h = np.tanh(h @ W + x @ U)
        total += np.sum(h * h)
    return np.sum(h) + total


def _central_difference(f, args, which, index, eps=1e-5):
    plus = [a.astype(np.float64).copy() for a in args]
    minus = [a.astype(np.float64).copy() for a in args]
    plus[which][index] += eps
    minus[which][index] -= eps
    return (f(*plus) - f(*minus)) / (2 * eps)


def _nested_np(W, xs):
    c = np.zeros(6)
    total = 0.0
    for x in xs:
        ci = c
        for xi in x:
            ci = ci * 0.9 + xi
        c2 = ci * 0.5 if np.sum(ci) > 0 else ci + 0.25
        c = np.tanh(np.log1p(np.exp(c2 @ W)))
        total += np.sum(c2)
    return np.sum(c) + total


# -- a second process runs without compiling -------------------------------------

def test_scan_rnn_and_its_gradient_load_without_compiling(tmp_path):
    loss, gW, gU = _cold_then_warm(RNN, tmp_path / "c", nfun=2)
    rng = np.random.default_rng(1)
    W = (rng.standard_normal((16, 16)) * 0.3).astype(np.float32)
    U = (rng.standard_normal((8, 16)) * 0.3).astype(np.float32)
    xs = rng.standard_normal((12, 8)).astype(np.float32)
    args = (W, U, xs)
    np.testing.assert_allclose(loss, _rnn_loss_np(*map(np.float64, args)), rtol=1e-5)
    for which, g in ((0, gW), (1, gU)):
        for index in ((0, 0), (3, 7), (7, 15)):
            want = _central_difference(_rnn_loss_np, args, which, index)
            np.testing.assert_allclose(g[index], want, rtol=2e-3, atol=2e-4)


def test_while_loop_newton_and_fori_loop_load_without_compiling(tmp_path):
    root, iters, powers = _cold_then_warm(NEWTON, tmp_path / "c", nfun=2)
    a = np.linspace(0.5, 40.0, 33)
    np.testing.assert_allclose(root, np.sqrt(a), rtol=1e-13)
    assert 3 <= int(iters) < 60
    want = np.ones_like(a)
    for i in range(5):
        want = want * a + i
    np.testing.assert_allclose(powers, want, rtol=1e-14)


def test_cond_and_switch_load_without_compiling(tmp_path):
    got = _cold_then_warm(BRANCHES, tmp_path / "c", nfun=1)
    x = np.linspace(-2.0, 3.0, 50).astype(np.float32)
    branches = [np.sin, lambda v: v * v + np.float32(1), lambda v: np.exp(-v)]
    for g, (i, v) in zip(got, [(0, x), (1, x), (2, x), (2, x), (0, x), (1, -x)]):
        z = v * 2 if v.sum() > 0 else -v
        np.testing.assert_allclose(g, branches[i](v) + z, rtol=2e-6, atol=1e-6)


def test_nested_regions_and_custom_vjp_load_without_compiling(tmp_path):
    value, grad = _cold_then_warm(NESTED, tmp_path / "c", nfun=2)
    rng = np.random.default_rng(2)
    xs = (rng.standard_normal((4, 3, 6)) * 0.5).astype(np.float32)
    W = (rng.standard_normal((6, 6)) * 0.4).astype(np.float32)
    np.testing.assert_allclose(value, _nested_np(W.astype(np.float64), xs.astype(np.float64)), rtol=1e-5)
    for index in ((0, 0), (2, 5), (5, 1)):
        want = _central_difference(_nested_np, (W, xs), 0, index)
        np.testing.assert_allclose(grad[index], want, rtol=2e-3, atol=2e-4)


# -- the key covers every body ---------------------------------------------------------

BODY_KEYS = HEAD + r"""
def misses(f, *args):
    before = cjit.cache_info()["disk_misses"]
    r = cjit.jit(f)(*args)
    np.asarray(r[0] if isinstance(r, tuple) else r)
    return cjit.cache_info()["disk_misses"] - before

c1 = 0.5
c2 = float(np.nextafter(0.5, 1.0))        # one ulp away, inside the body only
xs = np.linspace(-1, 1, 24, dtype=np.float32).reshape(6, 4)
z = np.zeros(4, np.float32)

def scan_of(body):
    return lambda xs: lax.scan(body, cnp.zeros(4, cnp.float32), xs)[0]

def nested_of(inner):
    def outer(c, x):
        ci, _ = lax.scan(lambda a, b: (inner(a, b), a), c, cnp.reshape(x, (2, 2)) @ cnp.ones((2, 4), cnp.float32))
        return ci, None
    return lambda xs: lax.scan(outer, cnp.zeros(4, cnp.float32), xs)[0]

out = {}
out["first"] = misses(scan_of(lambda c, x: (c * c1 + x, None)), xs)
out["same"] = misses(scan_of(lambda c, x: (c * c1 + x, None)), xs)
out["body_constant"] = misses(scan_of(lambda c, x: (c * c2 + x, None)), xs)
out["body_op"] = misses(scan_of(lambda c, x: (c * c1 - x, None)), xs)
out["body_function"] = misses(scan_of(lambda c, x: (cnp.sin(c) * c1 + x, None)), xs)
out["nested_first"] = misses(nested_of(lambda a, b: a * c1 + b), xs)
out["nested_same"] = misses(nested_of(lambda a, b: a * c1 + b), xs)
out["nested_constant"] = misses(nested_of(lambda a, b: a * c2 + b), xs)
out["nested_op"] = misses(nested_of(lambda a, b: cnp.maximum(a * c1, b)), xs)

branch = lambda k: (lambda v: v * k)
out["cond_first"] = misses(lambda p, v: lax.cond(p > 0, branch(c1), cnp.sin, v), np.float32(1), z)
out["cond_same"] = misses(lambda p, v: lax.cond(p > 0, branch(c1), cnp.sin, v), np.float32(1), z)
out["cond_branch"] = misses(lambda p, v: lax.cond(p > 0, branch(c2), cnp.sin, v), np.float32(1), z)

def newton(stop):
    return lambda a: lax.while_loop(lambda x: cnp.max(cnp.abs(x * x - a)) > stop,
                                    lambda x: 0.5 * (x + a / x), a)
a = np.linspace(1, 4, 4)
out["while_first"] = misses(newton(1e-9), a)
out["while_cond_constant"] = misses(newton(1e-10), a)

@cjit.custom_vjp
def f1(v):
    return cnp.sin(v)
f1.defvjp(lambda v: (cnp.sin(v), v), lambda v, g: (g * cnp.cos(v),))
@cjit.custom_vjp
def f2(v):
    return cnp.sin(v)
f2.defvjp(lambda v: (cnp.sin(v), v), lambda v, g: (g * cnp.cos(v) * 2.0,))
def grad_through(f):
    return cjit.grad(lambda xs: cnp.sum(lax.scan(lambda c, x: (f(c) + x, None), z, xs)[0]))
out["custom_first"] = misses(grad_through(f1), xs)
out["custom_same"] = misses(grad_through(f1), xs)
out["custom_rule"] = misses(grad_through(f2), xs)
print("RESULT " + json.dumps(out))
"""


def test_changing_only_a_body_changes_the_key(tmp_path):
    out = result(run(BODY_KEYS, tmp_path / "c"))
    for first in ("first", "nested_first", "cond_first", "while_first", "custom_first"):
        assert out[first] == 1, (first, out)
    for same in ("same", "nested_same", "cond_same", "custom_same"):
        assert out[same] == 0, (same, out)         # a new trace of the same program: a hit
    for changed in ("body_constant", "body_op", "body_function", "nested_constant", "nested_op",
                    "cond_branch", "while_cond_constant", "custom_rule"):
        assert out[changed] == 1, (changed, out)


# -- damage ------------------------------------------------------------------------

ONE_SCAN = HEAD + r"""
xs = np.linspace(-1, 1, 40, dtype=np.float32).reshape(10, 4)
f = cjit.jit(lambda xs: lax.scan(lambda c, x: (cnp.tanh(c * 0.5 + x), cnp.sum(c)), cnp.zeros(4, cnp.float32), xs))
c, ys = f(xs)
want_c = np.zeros(4, np.float32)
want_ys = []
for x in xs:
    want_ys.append(want_c.sum())
    want_c = np.tanh(want_c * np.float32(0.5) + x)
np.testing.assert_allclose(c, want_c, rtol=1e-6, atol=1e-6)
np.testing.assert_allclose(ys, np.array(want_ys), rtol=1e-6, atol=1e-6)
print("RESULT " + json.dumps({"info": cjit.cache_info()}))
"""


@pytest.mark.parametrize("change", [_flip_middle, _truncate, _garbage_with_good_checksum])
def test_damaged_region_entry_is_deleted_and_compiled_again(tmp_path, change):
    result(run(ONE_SCAN, tmp_path / "c"))
    _rewrite_blob(tmp_path / "c", change)
    r = run(ONE_SCAN, tmp_path / "c")
    out = result(r)
    assert out["info"]["disk_misses"] == 1 and out["info"]["disk_hits"] == 0
    assert r.stderr.count("unusable") == 1, r.stderr
    healed = result(run(ONE_SCAN, tmp_path / "c"))
    assert healed["info"]["disk_hits"] == 1
    assert len(db_rows(tmp_path / "c")) == 1


def test_every_truncation_and_flip_of_a_region_entry_is_refused_or_harmless(tmp_path):
    # load_cached on every prefix of an entry with a scan whose body holds a
    # cond, and on byte changes before the first object file: never a crash.
    code = HEAD + r"""
    def body(c, x):
        c = lax.cond(cnp.sum(c) > 0, lambda v: v * 0.5, lambda v: v + 1.0, c)
        return c + x, cnp.sum(c)
    f = cjit.jit(lambda xs: lax.scan(body, cnp.zeros(4, cnp.float32), xs))
    xs = np.ones((5, 4), np.float32)
    lw = f.lower(xs)._lowered
    exe, blob = lw.compile(for_cache=True)
    refused = 0
    for n in range(len(blob)):
        try:
            lw.load_cached(blob[:n])
        except ValueError:
            refused += 1
    first_object = blob.index(b"\x7fELF")
    for i in range(8, first_object, 3):
        b = bytearray(blob)
        b[i] ^= 0xFF
        try:
            lw.load_cached(bytes(b))
        except (ValueError, RuntimeError):
            pass
    got = lw.load_cached(blob)([xs])
    want = exe([xs])
    same = all(np.asarray(g).tobytes() == np.asarray(w).tobytes() for g, w in zip(got, want))
    print("RESULT", refused == len(blob), same, blob.count(b"\x7fELF") >= 3)
    """
    r = run(code.replace("\n    ", "\n"), tmp_path / "c")
    assert r.returncode == 0, r.stderr
    assert "RESULT True True True" in r.stdout, r.stdout + r.stderr


DEEP = HEAD + r"""
sys.setrecursionlimit(20000)
depth = int(os.environ["DEPTH"])

def nest(d):
    if d == 0:
        return lambda c, x: (c * 0.5 + x, None)
    inner = nest(d - 1)
    return lambda c, x: (lax.scan(inner, c, cnp.reshape(x, (1, 4)))[0] + 1.0, None)

def nest_np(d, c, x):
    return c * np.float32(0.5) + x if d == 0 else nest_np(d - 1, c, x) + np.float32(1)

xs = np.linspace(0, 1, 8, dtype=np.float32).reshape(2, 4)
got = np.asarray(cjit.jit(lambda xs: lax.scan(nest(depth), cnp.zeros(4, cnp.float32), xs)[0])(xs))
want = np.zeros(4, np.float32)
for x in xs:
    want = nest_np(depth, want, x)
np.testing.assert_allclose(got, want, rtol=1e-6)
print("RESULT " + json.dumps({"info": cjit.cache_info()}))
"""


@pytest.mark.parametrize("depth,stored", [(5, True), (70, False)])
def test_nesting_past_the_entry_limit_runs_but_is_not_stored(tmp_path, depth, stored):
    # 64 levels at most in an entry (decision 133): deeper programs run, compiled in every process
    for attempt in range(2):
        r = run(DEEP, tmp_path / "c", {"DEPTH": str(depth)})
        info = result(r)["info"]
        assert "unusable" not in r.stderr and "Warning" not in r.stderr, r.stderr
        assert info["disk_entries"] == (1 if stored else 0), info
        assert info["disk_hits"] == (1 if stored and attempt == 1 else 0), info


LINES = HEAD + r"""
xs = np.linspace(-1, 1, 40, dtype=np.float32).reshape(10, 4)
def body(c, x):
    h = cnp.tanh(c * 0.5 + x)  # BODY LINE
    return h, cnp.sum(h)
f = cjit.jit(lambda xs: lax.scan(body, cnp.zeros(4, cnp.float32), xs))
text = f.lower(xs).compile().as_text()
print("RESULT " + json.dumps({"info": cjit.cache_info(), "text": text}))
"""


def test_a_loaded_body_shows_the_source_lines_of_the_process_that_loads_it(tmp_path):
    # decision 131: moving the code down 7 lines keeps the key; the loaded
    # body's kernels name the new lines
    line = LINES.splitlines().index(next(ln for ln in LINES.splitlines() if "BODY LINE" in ln)) + 1
    first = result(run(LINES, tmp_path / "c"))
    moved = result(run("\n" * 7 + LINES, tmp_path / "c"))
    assert first["info"]["disk_misses"] == 1 and moved["info"]["disk_hits"] == 1, moved["info"]
    assert f"<string>:{line}" in first["text"], first["text"]
    assert f"<string>:{line + 7}" in moved["text"] and f"<string>:{line}\n" not in moved["text"], moved["text"]
