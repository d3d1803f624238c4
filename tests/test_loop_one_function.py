"""A small loop body runs as one generated function per iteration
(csrc/body_fn.c): the compiled text marks such bodies "(one function per
run)", runtime_stats()["loop_one_function_runs"] counts the body runs it
made, and the results are bitwise those of the group-by-group path
(CJIT_LOOP_ONE_FUNCTION=0), compiled or loaded from the disk cache.

Every check runs cjit in subprocesses, since the variable is read when a
body is compiled or loaded."""
import json
import os
import subprocess
import sys

import pytest

PROGRAMS = r"""
import json, os
import numpy as np
import cjit, cjit.numpy as cnp
from cjit import _cjit, lax

A = np.array([[0.0, 1.0], [-1.0, -0.1]], np.float32)
y0 = np.array([1.0, 0.0], np.float32)
rng = np.random.default_rng(3)
W = (rng.standard_normal((64, 64)) * 0.2).astype(np.float32)
xs = rng.standard_normal((50, 64)).astype(np.float32)
big = rng.standard_normal((300, 300)).astype(np.float32)
V = (rng.standard_normal((3, 3)) * 0.5).astype(np.float32)
xs3 = rng.standard_normal((60, 3)).astype(np.float32)

def rk4(A, y0):
    dt = 0.001
    def f(y):
        return A @ y - 0.1 * y * y * y
    def step(i, y):
        k1 = f(y)
        k2 = f(y + dt / 2 * k1)
        k3 = f(y + dt / 2 * k2)
        k4 = f(y + dt * k3)
        return y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return lax.fori_loop(0, 300, step, y0)

def rnn(W, xs):  # a 64x64 matvec, tanh and a sum per step: big enough for the general path
    def step(h, x):
        h = cnp.tanh(W @ h + x)
        return h, cnp.sum(h * h)
    return lax.scan(step, cnp.zeros(64, cnp.float32), xs)

def tiny_rows(V, xs3):  # a 3x3 product, tanh and a sum per step, rows in and out
    def step(h, x):
        h = cnp.tanh(V @ h + x)
        return h, cnp.sum(h * h)
    return lax.scan(step, cnp.zeros(3, cnp.float32), xs3)

def short(y):  # trip counts 1 to 5: an iteration's binding by parity from the fourth on
    out = []
    for n in range(1, 6):
        out += list(lax.fori_loop(0, n, lambda i, c: (c[0] * 1.5 + c[1].astype(cnp.float32), c[1] * 3 + i), (y, 1)))
    return tuple(out)

def backwards(y):  # a reversed scan of carries only: the index runs down
    return lax.scan(lambda c, _: (c * 0.5 + 1.0, None), y, None, length=7, reverse=True)[0]

def traced(y, n):  # a fori_loop to a traced bound: a while loop, its slots bound by place
    return lax.fori_loop(0, n, lambda i, v: v * 0.99 + 0.5 + i.astype(cnp.float32), y)

def counting(x):  # condition and body: 8 and 7 runs
    return lax.while_loop(lambda c: c[0] < 7, lambda c: (c[0] + 1, c[1] * 1.5 + 0.25), (0, x))

def branches(i, x):
    return lax.switch(i, [lambda v: v * 2.0, lambda v: cnp.sin(v) + v, lambda v: v - 1.0], x)

def ints(n0):
    return lax.fori_loop(0, 40, lambda i, n: n * 3 + i, n0)

def large(b):  # 90,000 points a step: the general path
    return lax.fori_loop(0, 3, lambda i, v: v * 0.5 + 1.0, b)

def nested(y):  # the outer body holds a loop; the inner one is small
    return lax.fori_loop(0, 5, lambda i, v: lax.fori_loop(0, 4, lambda j, u: u * 0.75 + 1.0, v) + 0.5, y)

cases = [("rk4", rk4, (A, y0)), ("rnn", rnn, (W, xs)), ("tiny_rows", tiny_rows, (V, xs3)), ("while", counting, (np.float32(0.5),)),
         ("switch", branches, (np.int32(1), np.float32(0.7))), ("ints", ints, (np.int32(2),)),
         ("large", large, (big,)), ("nested", nested, (y0,)), ("short", short, (y0,)),
         ("backwards", backwards, (y0,)), ("traced", traced, (y0, np.int32(25)))]
out = {}
for name, fn, args in cases:
    f = cjit.jit(fn)
    s0 = _cjit.runtime_stats()
    res = f(*args)
    s1 = _cjit.runtime_stats()
    text = f.lower(*args).compile().as_text()
    leaves = res if isinstance(res, tuple) else (res,)
    out[name] = {"hex": [np.asarray(v).tobytes().hex() for v in leaves],
                 "runs": s1["loop_one_function_runs"] - s0["loop_one_function_runs"],
                 "marked": text.count("(one function per run)"),
                 "loads": s1["loads"] - s0["loads"]}
print("RESULT " + json.dumps(out))
"""


def run_programs(tmp_path, one_function=True, cache=False):
    env = dict(os.environ)
    env["CJIT_CACHE"] = "1" if cache else "0"
    env["CJIT_CACHE_DIR"] = str(tmp_path / "cache")
    env.pop("CJIT_LOOP_ONE_FUNCTION", None)
    if not one_function:
        env["CJIT_LOOP_ONE_FUNCTION"] = "0"
    out = subprocess.run([sys.executable, "-c", PROGRAMS], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


# body runs each program makes through one function: rk4 300 steps, rnn none
# (64-element kernels), tiny_rows 60, while 8 condition and 7 body runs,
# switch one branch, ints 40, large none, nested 5 x 4 inner bodies (the
# outer body holds a loop), short 1 + 2 + 3 + 4 + 5, backwards 7, traced 26
# condition and 25 body runs
EXPECTED_RUNS = {"rk4": 300, "rnn": 0, "tiny_rows": 60, "while": 15, "switch": 1, "ints": 40, "large": 0,
                 "nested": 20, "short": 15, "backwards": 7, "traced": 51}
# bodies marked in the compiled text: switch has three branches; nested marks the inner body only
EXPECTED_MARKED = {"rk4": 1, "rnn": 0, "tiny_rows": 1, "while": 2, "switch": 3, "ints": 1, "large": 0, "nested": 1,
                   "short": 5, "backwards": 1, "traced": 2}


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("one_function")
    return run_programs(tmp / "a"), run_programs(tmp / "b", one_function=False)


def test_small_bodies_run_as_one_function(both):
    one, _ = both
    assert {k: v["runs"] for k, v in one.items()} == EXPECTED_RUNS
    assert {k: v["marked"] for k, v in one.items()} == EXPECTED_MARKED


def test_the_general_path_when_asked(both):
    _, general = both
    assert all(v["runs"] == 0 and v["marked"] == 0 for v in general.values())


def test_results_are_bitwise_the_general_paths(both):
    one, general = both
    for name in one:
        assert one[name]["hex"] == general[name]["hex"], name


def test_rk4_matches_numpy(both):
    import numpy as np
    one, _ = both
    A = np.array([[0.0, 1.0], [-1.0, -0.1]], np.float32)
    y = np.array([1.0, 0.0], np.float32)
    dt = np.float32(0.001)
    f = lambda y: A @ y - np.float32(0.1) * y * y * y  # noqa: E731
    for _ in range(300):
        k1 = f(y)
        k2 = f(y + dt / 2 * k1)
        k3 = f(y + dt / 2 * k2)
        k4 = f(y + dt * k3)
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    got = np.frombuffer(bytes.fromhex(one["rk4"]["hex"][0]), np.float32)
    np.testing.assert_allclose(got, y, rtol=1e-5, atol=1e-6)


def test_bodies_loaded_from_the_disk_cache_run_as_one_function(tmp_path, both):
    one, _ = both
    first = run_programs(tmp_path, cache=True)
    second = run_programs(tmp_path, cache=True)
    assert all(v["loads"] == 0 for v in first.values())
    assert all(v["loads"] >= 1 for v in second.values())
    for name in one:
        assert second[name]["hex"] == one[name]["hex"], name
        assert second[name]["runs"] == EXPECTED_RUNS[name], name
        assert second[name]["marked"] == EXPECTED_MARKED[name], name


def test_short_and_reversed_loops_match_numpy(both):
    import numpy as np
    one, _ = both
    y0 = np.array([1.0, 0.0], np.float32)
    hexes = one["short"]["hex"]
    for n in range(1, 6):
        v, k = y0, np.int32(1)
        for i in range(n):
            v, k = v * np.float32(1.5) + np.float32(k), k * np.int32(3) + np.int32(i)
        got_v = np.frombuffer(bytes.fromhex(hexes[2 * (n - 1)]), np.float32)
        got_k = np.frombuffer(bytes.fromhex(hexes[2 * (n - 1) + 1]), np.int32)
        np.testing.assert_allclose(got_v, v, rtol=1e-6)
        assert got_k[0] == k, (n, got_k, k)
    v = y0
    for _ in range(7):
        v = v * np.float32(0.5) + np.float32(1.0)
    np.testing.assert_allclose(np.frombuffer(bytes.fromhex(one["backwards"]["hex"][0]), np.float32), v, rtol=1e-6)
    v = y0
    for i in range(25):
        v = v * np.float32(0.99) + np.float32(0.5) + np.float32(i)
    np.testing.assert_allclose(np.frombuffer(bytes.fromhex(one["traced"]["hex"][0]), np.float32), v, rtol=1e-5)
