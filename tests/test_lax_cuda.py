"""cjit.lax control flow on the CUDA backend.

Without a GPU:
- PTX: programs with scans (carries, xs, ys, reverse), fori_loop,
  while_loop, cond and switch, nested loops and a scan's gradient give PTX
  that `ptxas -arch=sm_90` accepts, with each body's kernels named after
  the loop kernel ("cj_cuda_k<k>_b<j>_k<i>") and no function for the loop
  kernel itself;
- the host's loop (cuda_loops.c) against test_cuda.py's fake driver, which
  runs no kernel but counts launches, downloads and device copies: a scan
  launches its body once per iteration, a while loop downloads its
  condition once per iteration, a cond its branch index once.
With a GPU, the programs run there and are compared with the CPU.
"""
import re
import textwrap

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp
from cjit import _cjit, lax

from test_cuda import N_GPUS, NO_GPU_WHY, _run_python, assemble, fake_driver  # noqa: F401 (a fixture)


def _scan_carry_xs_ys(c0, xs):
    def body(c, x):
        c = c * 0.5 + cnp.sin(x).sum()
        return c, c * x
    return lax.scan(body, c0, xs)


def _scan_reverse(c0, xs):
    def body(c, x):
        return c + x, (c * 2.0).sum()
    return lax.scan(body, c0, xs, reverse=True)


def _fori(c0, xs):
    return lax.fori_loop(0, 7, lambda i, c: c * 0.9 + xs[i % 4], c0)


def _while(c0, xs):
    def cond(s):
        return s[1] < 10

    def body(s):
        return s[0] * 1.5 + xs[0], s[1] + 1
    return lax.while_loop(cond, body, (c0, 0))[0]


def _cond(c0, xs):
    return lax.cond(c0.sum() > 0, lambda a: cnp.exp(a) + xs[1], lambda a: a - xs.sum(axis=0), c0)


def _switch(c0, xs):
    index = (cnp.abs(c0).sum() * 3).astype(cnp.int32) % 3
    return lax.switch(index, [lambda a: a + 1, lambda a: a * xs[2], lambda a: cnp.tanh(a)], c0)


def _nested(c0, xs):
    def outer(c, x):
        def inner(d, y):
            return d * 0.5 + y * x, d.sum()
        d, ys = lax.scan(inner, c, xs)
        return d + ys.mean(), d
    return lax.scan(outer, c0, xs)


def _scan_grad(c0, xs):
    def loss(c, xs):
        def body(h, x):
            h = cnp.tanh(h * 0.7 + x)
            return h, (h * h).sum()
        h, ys = lax.scan(body, c, xs)
        return h.sum() + ys.sum()
    return cjit.grad(loss, argnums=(0, 1))(c0, xs)


# name: (function, loop kernels' body counts expected in the PTX, as
# regular expressions on entry names)
PROGRAMS = {
    "scan_carry_xs_ys": (_scan_carry_xs_ys, [r"_k\d+_b0_k\d+"]),
    "scan_reverse": (_scan_reverse, [r"_k\d+_b0_k\d+"]),
    "fori_loop": (_fori, [r"_k\d+_b0_k\d+"]),
    "while_loop": (_while, [r"_k\d+_b0_k\d+", r"_k\d+_b1_k\d+"]),
    "cond": (_cond, [r"_k\d+_b0_k\d+", r"_k\d+_b1_k\d+"]),
    "switch": (_switch, [r"_k\d+_b0_k\d+", r"_k\d+_b1_k\d+", r"_k\d+_b2_k\d+"]),
    "nested_scans": (_nested, [r"_k\d+_b0_k\d+_b0_k\d+"]),
    "scan_grad": (_scan_grad, [r"_k\d+_b0_k\d+"]),
}


def _args(dtype=np.float32):
    rng = np.random.default_rng(0)
    return (rng.standard_normal(3).astype(dtype), rng.standard_normal((5, 3)).astype(dtype))


def _loop_kernels(text):
    """Indices of the outer plan's loop kernels in as_text (a scan, while
    or cond kernel: it lists its bodies or branches)."""
    out, kernel = [], None
    for line in text.splitlines():
        if line.startswith("kernel "):
            kernel = int(line.split()[1].rstrip(":"))
        elif line.startswith(("      body ", "      branch ")) and kernel is not None and kernel not in out:
            out.append(kernel)
    return out


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_loop_ptx(name, tmp_path):
    fn, body_patterns = PROGRAMS[name]
    low = cjit.jit(fn).lower(*_args())._lowered
    ptx = _cjit.ptx(low)
    assert ".target sm_90" in ptx and ".extern" not in ptx
    entries = re.findall(r"\.entry (\w+)\(", ptx)
    assert len(entries) == len(set(entries))
    for pattern in body_patterns:
        assert any(re.fullmatch("cj_cuda" + pattern + "(_init)?", e) for e in entries), (pattern, entries)
    loops = _loop_kernels(low.compile().as_text())
    assert loops, "no loop kernel in the plan"
    for k in loops:   # the loop kernel itself has no device code
        assert f"cj_cuda_k{k}" not in entries
    assemble(ptx, tmp_path, name)


def test_loop_ptx_arch_sm80(tmp_path):
    low = cjit.jit(_nested).lower(*_args(np.float64))._lowered
    ptx = _cjit.ptx(low, arch="sm_80")
    assert ".target sm_80" in ptx and "_b0_k" in ptx


# ---------------------------------------------------------------------------
# the host's loop against the fake driver (test_cuda.py): counts, not values

_LOOP_PROBE = """
    import ctypes, numpy as np, cjit, cjit.numpy as cnp
    from cjit import lax
    lib = ctypes.CDLL(LIB)

    def count(fn, *args):
        l0, r0, c0 = lib.fake_launches(), lib.fake_reads(), lib.fake_copies()
        out = cjit.jit(fn, device="cuda")(*args)
        return lib.fake_launches() - l0, lib.fake_reads() - r0, lib.fake_copies() - c0

    x = np.ones(4, np.float32)
    xs = np.ones((6, 4), np.float32)
    one = lambda c: c * 2.0 + 1.0           # one kernel
    print("body", *count(one, x))
    print("scan6", *count(lambda c, xs: lax.scan(lambda c, r: (one(c) + r, None), c, xs)[0], x, xs))
    print("scan0", *count(lambda c: lax.scan(lambda c, r: (one(c), None), c, None, length=0)[0], x))
    print("nested", *count(lambda c, xs: lax.scan(
        lambda c, r: (lax.scan(lambda d, s: (one(d) + s, None), c, xs)[0], None), c, xs)[0], x, xs))
    # memory reads as zeros: the condition is false at once (one download)
    print("while", *count(lambda c: lax.while_loop(lambda c: c[0] > 0, one, c), x))
    two = lambda c: one(c) - c.sum()        # a sum (its identity fill, then it), then one kernel
    print("cond0", *count(lambda i, c: lax.switch(i, [one, two], c), np.int32(0), x))
    print("cond1", *count(lambda i, c: lax.switch(i, [one, two], c), np.int32(1), x))
    print("cond9", *count(lambda i, c: lax.switch(i, [one, two], c), np.int32(9), x))
    cjit.clear_caches()
    import gc; gc.collect()
    print("live", lib.fake_live())
"""


def test_host_loop_against_fake_driver(fake_driver):
    code = "LIB = %r\n" % fake_driver[0] + textwrap.dedent(_LOOP_PROBE)
    out = _run_python(code, {"CJIT_CUDA_LIBRARY": fake_driver[0], "FAKE_MODE": "host"})
    got = {line.split()[0]: [int(v) for v in line.split()[1:]] for line in out.splitlines()}
    body = got["body"][0]
    assert body >= 1 and got["body"][1:] == [0, 0]
    scan6, scan0, nested = got["scan6"], got["scan0"], got["nested"]
    # six launches of the body, no download, no copy (the last iteration
    # writes the result's own buffer)
    assert scan6[1:] == [0, 0] and scan6[0] % 6 == 0 and scan6[0] >= 6, out
    assert scan0 == [0, 0, 1], out                  # the carry copied through
    assert nested[1] == 0 and nested[0] % 36 == 0 and nested[0] >= 36, out
    assert got["while"][1] == 1, out                # the condition, downloaded once
    assert got["while"][2] == 1, out                # the carry copied into the result
    assert got["cond0"][1] == 1 and got["cond1"][1] == 1, out
    assert got["cond1"][0] > got["cond0"][0], out   # branch 1 has more kernels: it ran
    assert got["cond9"] == got["cond1"], out        # the index clamped to the last branch
    assert got["live"] == [0], "device memory leaked"


_CTRL_C_PROBE = """
    import ctypes, os, signal, threading, time, numpy as np, cjit
    from cjit import lax
    lib = ctypes.CDLL(LIB)
    f = cjit.jit(lambda c: lax.while_loop(lambda c: c[0] > 0, lambda c: c * 2.0 + 1.0, c), device="cuda")
    x = np.ones(4, np.float32)
    f.lower(x).compile()

    def interrupt_the_loop():
        # an event, not a delay: the loop runs once the driver serves reads
        while lib.fake_reads() <= 10:
            time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGINT)

    watchdog = threading.Timer(300, lambda: os._exit(3))    # a loop Ctrl-C does not stop
    watchdog.daemon = True
    watchdog.start()
    try:
        threading.Thread(target=interrupt_the_loop, daemon=True).start()
        f(x)
        print("finished")
    except KeyboardInterrupt:
        print("interrupted", lib.fake_reads() > 10)
    cjit.clear_caches()
    import gc; gc.collect()
    print("live", lib.fake_live())
"""


def test_ctrl_c_stops_a_while_loop_on_the_gpu(fake_driver):
    # every byte of fake device memory is 1: the condition is true forever
    code = "LIB = %r\n" % fake_driver[0] + textwrap.dedent(_CTRL_C_PROBE)
    out = _run_python(code, {"CJIT_CUDA_LIBRARY": fake_driver[0], "FAKE_MODE": "host", "FAKE_FILL": "1"})
    assert out.splitlines() == ["interrupted True", "live 0"], out


# ---------------------------------------------------------------------------
# with a GPU: the programs against the CPU

gpu = pytest.mark.skipif(N_GPUS == 0, reason=f"no CUDA device: {NO_GPU_WHY}")


def _leaves(r):
    return list(r) if isinstance(r, (tuple, list)) else [r]


@gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_loops_on_gpu(dtype):
    """Every program above on the GPU against the CPU; one test per dtype,
    so that a machine without a GPU shows two skips."""
    failures = []
    for name, (fn, _) in sorted(PROGRAMS.items()):
        args = _args(dtype)
        try:
            want = _leaves(cjit.jit(fn)(*args))
            got = _leaves(cjit.jit(fn, device="cuda")(*cjit.device_put(args, "cuda")))
            tol = 1e-4 if dtype == np.float32 else 1e-10
            for g, w in zip(got, want):
                np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)
        except Exception as e:   # noqa: BLE001 - collected and reported below
            failures.append(f"{name}: {type(e).__name__}: {e}")
    assert not failures, "\n".join(failures)


@gpu
def test_long_while_loop_on_gpu():
    """A while loop of many iterations (a download each) and a scan whose
    carries end in the spare: both against the CPU."""
    def newton(a):
        return lax.while_loop(lambda s: cnp.abs(s * s - a).max() > 1e-12,
                              lambda s: 0.5 * (s + a / s), a)
    a = np.linspace(1.0, 50.0, 1000)
    np.testing.assert_allclose(np.asarray(cjit.jit(newton, device="cuda")(a)), np.sqrt(a), rtol=1e-12)

    def odd(c, xs):
        return lax.scan(lambda c, x: (c * 0.5 + x, c), c, xs)
    c, xs = np.ones(8), np.arange(56.0).reshape(7, 8)
    for g, w in zip(cjit.jit(odd, device="cuda")(c, xs), cjit.jit(odd)(c, xs)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12)
