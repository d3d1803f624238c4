"""cjit.scipy.special against Python's math module (glibc, within an ulp or
two), SciPy, closed forms and finite differences."""
import math

import numpy as np
import pytest
import scipy.special as sc

import cjit
import cjit.scipy.special as cs


def ulps(got, ref):
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    return np.abs(got - ref) / np.spacing(np.abs(ref).astype(ref.dtype))


def mapped(f, xs):
    return np.array([f(float(v)) for v in xs])


GRID = np.concatenate([np.linspace(-6, 6, 1201), np.geomspace(1e-300, 6, 300),
                       -np.geomspace(1e-300, 6, 300)])


def test_erf_float64_within_3_ulp_of_math_erf():
    assert ulps(cs.erf(GRID), mapped(math.erf, GRID)).max() <= 3


def test_erfc_keeps_relative_accuracy_in_the_tail():
    x = np.concatenate([np.linspace(-6, 26.5, 3000), np.geomspace(1e-300, 26.5, 300)])
    got, ref = cs.erfc(x), mapped(math.erfc, x)
    assert ref.min() > np.finfo(np.float64).tiny     # normal numbers: ulps are relative
    assert ulps(got, ref).max() <= 5


def test_float32_within_one_ulp_of_the_rounded_float64_value():
    x = np.linspace(-5, 5, 2001).astype(np.float32)
    for f, ref in ((cs.erf, math.erf), (cs.erfc, math.erfc)):
        got = f(x)
        assert got.dtype == np.float32
        want = mapped(ref, x).astype(np.float32)
        assert (np.abs(got.view(np.int32) - want.view(np.int32)) <= 1).all()


def test_ndtr_and_log_ndtr_against_scipy_and_in_the_far_tail():
    x = np.linspace(-37, 8, 2000)
    # scipy rounds x / sqrt(2) before erfc, which costs it up to ~x^2 ulp in the tail
    assert np.allclose(cs.ndtr(x), sc.ndtr(x), rtol=2e-16 * 37 ** 2, atol=0)
    y = np.linspace(-12, 12, 1201)
    ref = np.where(y < 0, sc.log_ndtr(y), np.log1p(-sc.ndtr(-y)))
    np.testing.assert_allclose(cs.log_ndtr(y), ref, rtol=1e-15 * 12 ** 2)
    far = np.array([-1e3, -1e10, -1e100])
    # log ndtr(x) = -x^2/2 - log(-x sqrt(2 pi)) + log(1 - 1/x^2 + ...)
    approx = -far ** 2 / 2 - np.log(-far * math.sqrt(2 * math.pi)) + np.log1p(-1 / far ** 2)
    assert np.allclose(cs.log_ndtr(far), approx, rtol=1e-15, atol=0)


def test_log_ndtr_high_tail_is_log1p_of_minus_the_small_sf():
    x = np.array([5.0, 10.0, 20.0, 37.0])
    h = sc.ndtr(-x)
    assert np.allclose(cs.log_ndtr(x), -h - h * h / 2, rtol=1e-15 * 37 ** 2, atol=0)


def test_gammaln_positive_within_3_ulp_of_scipy_away_from_its_zeros():
    # (math.lgamma is up to 15 ulp off near 2.6 and loses the relative accuracy
    # near 1 and 2: see the next test)
    x = np.concatenate([np.linspace(2.6, 40, 2000), np.linspace(0.01, 0.5, 300),
                        np.geomspace(1e-300, 0.5, 200), np.geomspace(40, 1e300, 300)])
    assert ulps(cs.gammaln(x), sc.gammaln(x)).max() <= 3


ZETA = [None, None, math.pi ** 2 / 6, 1.2020569031595942, math.pi ** 4 / 90,
        1.0369277551433699, math.pi ** 6 / 945]
EULER = 0.5772156649015329


def test_gammaln_relative_accuracy_next_to_its_zeros_at_1_and_2():
    # log Gamma(1 + t) = -gamma t + sum_k (-1)^k zeta(k) t^k / k; Gamma(2 + t) = (1 + t) Gamma(1 + t)
    t = np.concatenate([np.geomspace(1e-15, 1e-4, 60), -np.geomspace(1e-15, 1e-4, 60)])
    t = t[np.abs(t) >= 2 ** -40]

    def series(t):
        return -EULER * t + sum((-1) ** k * ZETA[k] * t ** k / k for k in range(2, 7))

    t1 = (1.0 + t) - 1.0           # offsets that 1 + t represents exactly
    assert ulps(cs.gammaln(1.0 + t1), series(t1)).max() <= 4
    t2 = (2.0 + t) - 2.0
    assert ulps(cs.gammaln(2.0 + t2), series(t2) + np.log1p(t2)).max() <= 4
    # math.lgamma loses the relative accuracy there
    assert ulps(mapped(math.lgamma, 1.0 + t1), series(t1)).max() > 1e6


def test_gammaln_negative_and_special_values_as_scipy():
    x = -np.concatenate([np.linspace(0.013, 30.3, 1000), np.geomspace(1e-300, 1e15, 200)])
    x = x[x != np.round(x)]
    ref = mapped(math.lgamma, x)
    # absolute accuracy near the zeros of log|Gamma| on the negative axis
    assert (np.abs(cs.gammaln(x) - ref) <= 8 * np.spacing(np.maximum(np.abs(ref), 1.0))).all()
    sp = np.array([0.0, -0.0, -1.0, -7.0, -np.inf, np.inf, np.nan])
    np.testing.assert_array_equal(cs.gammaln(sp), sc.gammaln(sp))


def test_digamma_against_scipy():
    x = np.concatenate([np.linspace(0.01, 40, 2000), np.geomspace(1e-300, 1e300, 300)])
    assert ulps(cs.digamma(x), sc.psi(x)).max() <= 4
    # the positive zero keeps relative accuracy
    root = 1.4616321449683622
    xs = root + np.arange(-50, 51) * 2.0 ** -52
    got = cs.digamma(xs)
    slope = sc.polygamma(1, root)
    near = (xs - root) * slope - 9.549995429965697e-17 * slope
    assert np.allclose(got, near, rtol=1e-6, atol=1e-300)
    xn = -np.linspace(0.013, 20.3, 800)
    assert (np.abs(cs.digamma(xn) - sc.psi(xn)) <= 1e-13 * np.maximum(np.abs(sc.psi(xn)), 1)).all()
    sp = np.array([0.0, -0.0, -1.0, -np.inf, np.inf, np.nan])
    np.testing.assert_array_equal(cs.digamma(sp), sc.psi(sp))


def test_erfinv_and_ndtri_against_scipy_and_round_trips():
    y = np.concatenate([np.linspace(-0.999999, 0.999999, 2001), 1 - np.geomspace(1e-16, 0.2, 200)])
    assert ulps(cs.erfinv(y), sc.erfinv(y)).max() <= 6
    p = np.concatenate([np.geomspace(1e-320, 0.5, 1000), np.linspace(1e-3, 1 - 1e-3, 999)])
    assert ulps(cs.ndtri(p), sc.ndtri(p)).max() <= 6
    x = np.linspace(-30, 0, 400)      # (above 0 p = ndtr(x) keeps too few bits of x)
    p = sc.ndtr(x)
    # the round trip's condition number is about x^2
    assert (np.abs(cs.ndtr(cs.ndtri(p)) - p) <= 8e-16 * np.maximum(1, x * x) * p).all()
    np.testing.assert_array_equal(cs.erfinv(np.array([1.0, -1.0, 1.5, -2.0, 0.0, np.nan])),
                                  [np.inf, -np.inf, np.nan, np.nan, 0.0, np.nan])
    np.testing.assert_array_equal(cs.ndtri(np.array([0.0, 1.0, -0.1, 1.1, 0.5, np.nan])),
                                  [-np.inf, np.inf, np.nan, np.nan, 0.0, np.nan])


def test_special_values_of_the_error_functions():
    sp = np.array([0.0, np.inf, -np.inf, np.nan, 30.0, -30.0])
    np.testing.assert_array_equal(cs.erf(sp), [0, 1, -1, np.nan, 1, -1])
    np.testing.assert_array_equal(cs.erfc(sp), [1, 0, 2, np.nan, 0, 2])
    np.testing.assert_array_equal(cs.ndtr(np.array([np.inf, -np.inf, 0.0])), [1, 0, 0.5])
    np.testing.assert_array_equal(cs.log_ndtr(np.array([np.inf, -np.inf])), [0, -np.inf])


def test_integer_inputs_give_float64_and_jit_matches_eager():
    assert cs.gammaln(np.arange(1, 5)).dtype == np.float64
    x = np.linspace(-3, 3, 7)
    f = cjit.jit(lambda v: (cs.erf(v), cs.gammaln(v + 4), cs.ndtri(cs.ndtr(v))))
    a, b, c = f(x)
    np.testing.assert_array_equal(a, cs.erf(x))
    np.testing.assert_array_equal(b, cs.gammaln(x + 4))


# ---------------------------------------------------------------- gradients

def _grad(f, x):
    return cjit.jit(cjit.grad(lambda v: f(v).sum()))(x)


def test_gradients_match_the_closed_forms():
    x = np.concatenate([np.linspace(-5, 5, 401), [0.0]])
    np.testing.assert_allclose(_grad(cs.erf, x), 2 / math.sqrt(math.pi) * np.exp(-x * x),
                               rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(_grad(cs.erfc, x), -2 / math.sqrt(math.pi) * np.exp(-x * x),
                               rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(_grad(cs.ndtr, x), np.exp(-x * x / 2) / math.sqrt(2 * math.pi),
                               rtol=1e-13, atol=1e-300)
    xl = np.linspace(-30, 8, 400)
    np.testing.assert_allclose(_grad(cs.log_ndtr, xl),
                               np.exp(-xl * xl / 2 - sc.log_ndtr(xl)) / math.sqrt(2 * math.pi),
                               rtol=1e-12)
    xg = np.concatenate([np.linspace(0.05, 30, 600), -np.linspace(0.05, 9.95, 200) - 0.013])
    np.testing.assert_allclose(_grad(cs.gammaln, xg), sc.psi(xg), rtol=1e-12, atol=1e-13)
    xd = np.linspace(0.05, 30, 600)
    np.testing.assert_allclose(_grad(cs.digamma, xd), sc.polygamma(1, xd), rtol=1e-11)
    y = np.linspace(-0.999, 0.999, 500)
    np.testing.assert_allclose(_grad(cs.erfinv, y),
                               math.sqrt(math.pi) / 2 * np.exp(sc.erfinv(y) ** 2), rtol=1e-12)
    p = np.linspace(1e-6, 1 - 1e-6, 500)
    np.testing.assert_allclose(_grad(cs.ndtri, p),
                               math.sqrt(2 * math.pi) * np.exp(sc.ndtri(p) ** 2 / 2), rtol=1e-11)


@pytest.mark.parametrize("name", ["erf", "erfc", "ndtr", "log_ndtr", "gammaln", "digamma",
                                  "erfinv", "ndtri"])
def test_gradients_match_central_differences(name):
    f = getattr(cs, name)
    x = {"erfinv": np.linspace(-0.9, 0.9, 37), "ndtri": np.linspace(0.05, 0.95, 37)}.get(
        name, np.linspace(0.3, 6.1, 37) if name in ("gammaln", "digamma")
        else np.linspace(-4, 4, 37))
    h = 1e-6
    fd = (f(x + h) - f(x - h)) / (2 * h)
    np.testing.assert_allclose(_grad(f, x), fd, rtol=1e-7, atol=1e-9)


def test_untaken_branches_leave_no_nan_in_gradients():
    x = np.array([-40.0, -27.0, 0.0, 1e-300, 27.0, 40.0, 1e10])
    for f in (cs.erf, cs.erfc, cs.ndtr, cs.log_ndtr):
        assert np.isfinite(_grad(f, x)).all()
    assert np.isfinite(_grad(cs.gammaln, np.array([1e-10, 0.5, 1.0, 2.0, 9.99, 10.0, 1e300,
                                                   -0.5, -1e-10]))).all()
