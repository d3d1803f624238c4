"""Differential fuzzing of complex programs: random straight-line programs
over complex64/complex128 inputs (and real ones mixed in), built from the
complex op set, run by cjit (jit and eager) and by NumPy; and the gradient
of a real loss of each program against central differences with JAX's
convention.  Each program prints as source that runs with xp = numpy or
xp = cjit.numpy, as test_fuzz.py's do.  Budget: CJIT_FUZZ_EXAMPLES scales
it as for test_fuzz.py."""
import os

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, note, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_ENV = os.environ.get("CJIT_FUZZ_EXAMPLES")
_SETTINGS = dict(deadline=None, derandomize=_ENV is None, database=None, print_blob=True,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _examples(n):
    return n if _ENV is None else max(1, int(int(_ENV) * n / 200))


# (template, arity): every template keeps values moderate on moderate inputs
_UNARY = ["xp.exp({0} * 0.5)", "xp.sin({0})", "xp.cos({0})", "xp.tanh({0})", "xp.sqrt({0})",
          "xp.log({0} + 3.5)", "xp.conj({0})", "-{0}", "xp.square({0}) * 0.25",
          "{0} / ({0} * {0} + 2.0)", "xp.sinh({0} * 0.5)", "xp.cosh({0} * 0.5)",
          "xp.expm1({0} * 0.5)", "xp.log1p({0} * 0.2)", "{0} ** 3 * 0.1", "xp.reciprocal({0} + 4.0)",
          "xp.abs({0}) * (1 + 0j)", "xp.angle({0}) + {0}", "xp.real({0}) * {0}", "xp.imag({0}) + {0}",
          "{0} * 1j", "xp.sum({0}, axis=-1, keepdims=True) * 0.1 + {0}", "xp.flip({0}, -1)",
          "xp.cumsum({0}, axis=-1) * 0.2", "xp.mean({0}) + {0}", "{0}.T.T", "xp.where(xp.real({0}) > 0, {0}, 2j)"]
_BINARY = ["{0} + {1}", "{0} - {1}", "{0} * {1}", "{0} / ({1} + 4.0)", "({0} @ xp.swapaxes({1}, -1, -2)) @ {0} * 0.1",
           "{0} * xp.conj({1})", "xp.exp({0} * 0.3) * {1}"]


@st.composite
def programs(draw):
    cols = draw(st.sampled_from([1, 3, 4]))
    rows = draw(st.sampled_from([1, 2, 5]))
    dtype = draw(st.sampled_from(["complex64", "complex128"]))
    n_in = draw(st.integers(1, 3))
    real_in = draw(st.booleans())
    names = [f"a{i}" for i in range(n_in)]
    lines = []
    vals = list(names)
    for k in range(draw(st.integers(1, 6))):
        if len(vals) > 1 and draw(st.booleans()):
            t = draw(st.sampled_from(_BINARY))
            x, y = draw(st.sampled_from(vals)), draw(st.sampled_from(vals))
            expr = t.format(x, y)
        else:
            expr = draw(st.sampled_from(_UNARY)).format(draw(st.sampled_from(vals)))
        lines.append(f"v{k} = {expr}")
        vals.append(f"v{k}")
    out = vals[-1]
    src = "def prog(xp, " + ", ".join(names) + "):\n    " + "\n    ".join(lines) + \
        f"\n    return {out}\n"
    return src, n_in, (rows, cols), dtype, real_in


def _inputs(n_in, shape, dtype, real_in, seed):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_in):
        x = rng.uniform(-1.5, 1.5, shape) + 1j * rng.uniform(-1.5, 1.5, shape)
        if real_in and i == n_in - 1:
            out.append(x.real.astype(np.float32 if dtype == "complex64" else np.float64))
        else:
            out.append(x.astype(dtype))
    return out


def _load(src):
    ns = {}
    exec(src, ns)
    return ns["prog"]


def _close(got, want, dtype):
    rtol = 2e-4 if dtype == "complex64" else 1e-10
    assert np.asarray(got).shape == np.asarray(want).shape
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


@settings(max_examples=_examples(60), **_SETTINGS)
@given(programs(), st.integers(0, 2**31))
def test_fuzz_complex_programs_match_numpy(case, seed):
    src, n_in, shape, dtype, real_in = case
    note(src)
    prog = _load(src)
    args = _inputs(n_in, shape, dtype, real_in, seed)
    with np.errstate(all="ignore"):
        want = prog(np, *[a.astype(np.complex128) if a.dtype.kind == "c" else a.astype(np.float64)
                          for a in args])
    hypothesis.assume(np.all(np.isfinite(want)))
    got = cjit.jit(lambda *a: prog(cnp, *a))(*args)
    _close(got, want, dtype)
    _close(prog(cnp, *args), want, dtype)     # eager, one compiled op at a time


@settings(max_examples=_examples(20), **_SETTINGS)
@given(programs(), st.integers(0, 2**31))
def test_fuzz_complex_gradients_match_finite_differences(case, seed):
    src, n_in, shape, _, real_in = case
    note(src)
    prog = _load(src)
    args = _inputs(n_in, shape, "complex128", False, seed)

    def loss(xp, z, *rest):
        r = prog(xp, z, *rest)
        return xp.sum(xp.real(r) * 0.7 + xp.imag(r) * 0.3)

    with np.errstate(all="ignore"):
        base = loss(np, *args)
    hypothesis.assume(np.isfinite(base))
    g = cjit.jit(cjit.grad(lambda z, *rest: loss(cnp, z, *rest)))(*args)
    z, rest = args[0], args[1:]
    eps = 1e-6
    fd = np.zeros_like(z)
    for i in np.ndindex(z.shape):
        e = np.zeros_like(z)
        e[i] = eps
        dx = (loss(np, z + e, *rest) - loss(np, z - e, *rest)) / (2 * eps)
        dy = (loss(np, z + 1j * e, *rest) - loss(np, z - 1j * e, *rest)) / (2 * eps)
        fd[i] = dx - 1j * dy
    scale = max(1.0, float(np.abs(fd).max()))
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-5 * scale)


@pytest.mark.parametrize("template", _UNARY + _BINARY)
def test_every_template_matches_numpy(template):
    """Each op of the generator once, so none goes untested whatever the
    fuzzer draws."""
    src = f"def prog(xp, a0, a1):\n    return {template.format('a0', 'a1')}\n"
    prog = _load(src)
    for dtype in ("complex64", "complex128"):
        args = _inputs(2, (3, 4), dtype, False, 11)
        want = prog(np, *[a.astype(np.complex128) for a in args])
        _close(cjit.jit(lambda *a: prog(cnp, *a))(*args), want, dtype)
