"""sin and cos over the whole float range (cjit issue 12, item 3).

Large arguments used to be reduced with x 2/pi rounded in the working
precision, so float32 sin(5e7) came out 0.7174 (NumPy: 0.8256) and float64
broke from about 2.5e14.  Now the reduction is exact (Cody-Waite for small
|x|, Payne-Hanek above), and the results are within 1.5 ulp everywhere.

References nobody here wrote: NumPy's float64 sin/cos (for float32 inputs
they are exact far beyond float32's ulp), and for the hardest arguments an
exact reduction with Python integers (tests/c/two_over_pi.py: the bits of
2/pi from Machin's formula, then Taylor series in fixed point).
"""
import importlib.util
import math
import os
import re
from fractions import Fraction

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("two_over_pi", os.path.join(HERE, "c", "two_over_pi.py"))
two_over_pi = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(two_over_pi)

LIMIT = 1.5          # ulps, the bound csrc/cmath.c documents for sin and cos
FUNCS = {"sin": (cnp.sin, np.sin), "cos": (cnp.cos, np.cos)}


def ulp_errors(got, want, dtype):
    """|got - want| in ulps of dtype at want (exact Fractions)."""
    fi = np.finfo(dtype)
    out = np.empty(len(got))
    for i, (g, w) in enumerate(zip(got.tolist(), want)):
        e = max(math.frexp(float(w))[1] - 1, fi.minexp) if w != 0 else fi.minexp
        out[i] = float(abs(Fraction(g) - Fraction(w)) / Fraction(2) ** (e - fi.nmant))
    return out


def ulp_errors_f64ref(got, ref, dtype):
    """The same, vectorised, for a float64 reference (float32 results)."""
    fi = np.finfo(dtype)
    e = np.maximum(np.floor(np.log2(np.maximum(np.abs(ref), fi.tiny))), fi.minexp)
    return np.abs(got.astype(np.float64) - ref) / np.exp2(e - fi.nmant)


def random_bits(dtype, n, seed):
    """n random finite values of dtype with uniformly random bit patterns
    (so every exponent is about equally likely)."""
    rng = np.random.default_rng(seed)
    it = np.uint32 if dtype == np.float32 else np.uint64
    x = rng.integers(0, np.iinfo(it).max, n, dtype=it, endpoint=True).view(dtype)
    return x[np.isfinite(x)]


def log_uniform(dtype, lo, hi, n, seed):
    rng = np.random.default_rng(seed)
    mag = np.exp2(rng.uniform(lo, hi, n))
    return (mag * rng.choice([-1.0, 1.0], n)).astype(dtype)


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_reproducers_from_the_issue(name):
    f, ref = FUNCS[name]
    g = cjit.jit(f)
    # float32 5e7: was 0.7174 / 0.6967
    got = np.asarray(g(np.array([5e7, -5e7, 1e20, 3e38], np.float32)))
    want = ref(np.array([5e7, -5e7, 1e20, 3e38], np.float32).astype(np.float64))
    assert np.all(ulp_errors_f64ref(got, want, np.float32) <= LIMIT), (got, want)
    # float64 1e20, 1e22 (the classic hard one), 2.5e14 and the largest double
    xs = [1e20, -1e20, 1e22, 2.5e14, 1.7976931348623157e308]
    got = np.asarray(g(np.array(xs)))
    want = [two_over_pi.sin_cos_exact(x)[name == "cos"] for x in xs]
    assert np.all(ulp_errors(got, want, np.float64) <= LIMIT), (got, want)


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_float32_1e6_to_1e7(name):
    # Was: 15% of these off by more than 1e-3, the largest error 1.72.
    f, ref = FUNCS[name]
    x = np.random.default_rng(3).uniform(1e6, 1e7, 200_000).astype(np.float32)
    got = np.asarray(cjit.jit(f)(x))
    err = ulp_errors_f64ref(got, ref(x.astype(np.float64)), np.float32)
    assert err.max() <= LIMIT, (err.max(), x[err.argmax()])


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_float32_whole_range(name):
    f, ref = FUNCS[name]
    x = np.concatenate([random_bits(np.float32, 200_000, 4),
                        log_uniform(np.float32, -30, 127.99, 100_000, 5),
                        np.float32([np.finfo(np.float32).max, -np.finfo(np.float32).max,
                                    2.0 ** 15, 2.0 ** 45, np.nextafter(np.float32(2.0 ** 15), np.float32(0))])])
    got = np.asarray(cjit.jit(f)(x))
    err = ulp_errors_f64ref(got, ref(x.astype(np.float64)), np.float32)
    assert err.max() <= LIMIT, (err.max(), x[err.argmax()])


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_float64_whole_range(name):
    # NumPy's (glibc's) own error adds up to about one more ulp
    f, ref = FUNCS[name]
    x = np.concatenate([random_bits(np.float64, 200_000, 6),
                        log_uniform(np.float64, -30, 1023.99, 100_000, 7),
                        np.random.default_rng(8).uniform(1e14, 1e16, 50_000)])
    got = np.asarray(cjit.jit(f)(x))
    want = ref(x)
    fi = np.finfo(np.float64)
    e = np.maximum(np.floor(np.log2(np.maximum(np.abs(want), fi.tiny))), fi.minexp)
    err = np.abs(got - want) / np.exp2(e - fi.nmant)
    assert err.max() <= LIMIT + 1, (err.max(), x[err.argmax()])


def _hard_inputs(mant, emax, dtype, count=12, steps=(-2, -1, 0, 1, 3)):
    """The arguments whose x 2/pi comes closest to an integer (found by
    continued fractions), their neighbours, both signs."""
    cases = sorted(two_over_pi.hard_cases(mant, 0, emax), key=lambda c: c[2])[:count]
    xs = []
    for m, e, _ in cases:
        x = dtype(math.ldexp(m, e - mant + 1))
        for s in steps:
            y = x
            for _ in range(abs(s)):
                y = np.nextafter(y, dtype(np.inf) if s > 0 else dtype(0))
            xs += [y, -y]
    return np.array(xs, dtype)


@pytest.mark.parametrize("dtype,mant,emax", [(np.float32, 24, 127), (np.float64, 53, 1023)])
@pytest.mark.parametrize("name", ["sin", "cos"])
def test_hardest_arguments_against_exact_reduction(name, dtype, mant, emax):
    # x within 2^-61.5 (double) / 2^-29.9 (float) of a multiple of pi/2:
    # the reduced argument is tiny and every bit of 2/pi used counts.
    x = _hard_inputs(mant, emax, dtype)
    got = np.asarray(cjit.jit(FUNCS[name][0])(x))
    want = [two_over_pi.sin_cos_exact(float(v))[name == "cos"] for v in x]
    err = ulp_errors(got, want, dtype)
    assert err.max() <= LIMIT, (err.max(), x[err.argmax()])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values(dtype):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, np.finfo(dtype).tiny, -np.finfo(dtype).smallest_subnormal],
                 dtype)
    s = np.asarray(cjit.jit(cnp.sin)(x))
    c = np.asarray(cjit.jit(cnp.cos)(x))
    assert s[0] == 0 and not np.signbit(s[0])
    assert s[1] == 0 and np.signbit(s[1])            # sin(-0) = -0
    assert np.all(np.isnan(s[2:5])) and np.all(np.isnan(c[2:5]))
    assert s[5] == x[5] and s[6] == x[6]             # sin(x) = x for tiny x
    assert np.all(c[[0, 1, 5, 6]] == 1)


def test_two_over_pi_table_matches_machin():
    # the constant table in csrc/cmath_trig.c against a fresh computation of 2/pi
    src = open(os.path.join(HERE, "..", "csrc", "cmath_trig.c")).read()
    body = re.search(r"TWO_OVER_PI_BITS\[\] = \{(.*?)\};", src, re.S).group(1)
    words = [int(w, 16) for w in re.findall(r"0x([0-9a-f]{16})ULL", body)]
    assert words == two_over_pi.table_words()
    # and that computation against a known prefix of 2/pi in hex
    assert two_over_pi.two_over_pi_bits(96) == 0xA2F9836E4E441529FC2757D1


def test_mixed_vectors_take_each_lane_path():
    # a slow-path lane next to fast-path lanes in the same vector, in every
    # position, for both dtypes: each lane gets its own reduction
    jitted = {name: cjit.jit(f) for name, (f, _) in FUNCS.items()}
    for dtype in (np.float32, np.float64):
        base = np.linspace(-3, 3, 8192).astype(dtype)   # vectorized (not a small kernel)
        for pos in range(16):
            x = base.copy()
            x[pos::16] = dtype(5e7) if dtype == np.float32 else 1e20
            for name, (_, ref) in FUNCS.items():
                got = np.asarray(jitted[name](x))
                err = ulp_errors_f64ref(got.astype(np.float64), ref(x.astype(np.float64)), dtype)
                assert err.max() <= LIMIT + (1 if dtype == np.float64 else 0), (name, dtype, pos)


# float32 exp and tanh (issue 13): their own shapes, with no final nan select
# (a nan is carried by the arithmetic) and exp(2a) scaled by adding to the
# exponent bits inside tanh.  Bounds from csrc/cmath.c; without FMA hardware
# exp's last steps round twice (1.18 ulp measured).
def _host_has_fma():
    try:
        with open("/proc/cpuinfo") as f:
            return " fma" in f.read()
    except OSError:
        return True


F32_BOUND = {"exp": 1.0 if _host_has_fma() else 1.25, "tanh": 1.5}
F32_FUNCS = {"exp": (cnp.exp, np.exp), "tanh": (cnp.tanh, np.tanh)}


@pytest.mark.parametrize("name", ["exp", "tanh"])
def test_float32_exp_tanh_every_31st_float(name):
    # every 31st float32 of the range where the functions are not simply 1
    # or x (both signs; exp's subnormal results and overflow included)
    lo, hi = {"exp": (2.0 ** -26, 104.0), "tanh": (2.0 ** -14, 10.0)}[name]
    b = np.arange(np.float32(lo).view(np.int32), np.float32(hi).view(np.int32), 31, dtype=np.int32)
    x = np.concatenate([b.view(np.float32), -b.view(np.float32)])
    got = np.asarray(cjit.jit(F32_FUNCS[name][0])(x))
    with np.errstate(over="ignore"):
        ref = F32_FUNCS[name][1](x.astype(np.float64))
    fin = np.isfinite(ref.astype(np.float32))
    assert np.array_equal(got[~fin], ref[~fin].astype(np.float32))      # exp's overflow: inf
    err = ulp_errors_f64ref(got[fin], ref[fin], np.float32)
    assert err.max() <= F32_BOUND[name], (err.max(), x[fin][err.argmax()])


def test_float32_exp_tanh_special_values_in_mixed_vectors():
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1.1754944e-38,
                         88.72283, 88.72284, 89.0, 1e30, -87.33655, -103.97208, -103.98, -1e30,
                         9.0, 9.02, -9.02, 10.0, 0.625, -0.625, 0.62499994], np.float32)
    fexp, ftanh = cjit.jit(cnp.exp), cjit.jit(cnp.tanh)
    # each special at every lane position among ordinary values
    for pos in range(16):
        for v in specials:
            x = np.linspace(-3, 3, 16, dtype=np.float32)
            x[pos] = v
            for f, ref in ((fexp, np.exp), (ftanh, np.tanh)):
                got = np.asarray(f(x))
                with np.errstate(over="ignore", under="ignore"):
                    want = ref(x.astype(np.float64))
                w32 = want.astype(np.float32)
                if np.isnan(v):
                    assert np.isnan(got[pos])
                elif not np.isfinite(w32[pos]) or w32[pos] == 0 or v == 0 or abs(v) < 1e-30:
                    # inf, 0 and the sign of 0, x for tiny tanh arguments: exactly
                    assert got[pos] == w32[pos] and np.signbit(got[pos]) == np.signbit(w32[pos]), (f, v)
                ok = np.isfinite(w32) & (w32 != 0)
                assert np.all(ulp_errors_f64ref(got[ok], want[ok], np.float32) <= 1.5), (f, v, pos)
