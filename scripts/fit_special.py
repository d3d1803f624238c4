"""Fits the polynomial tables of cjit.scipy.special (python/cjit/scipy/_coefs.py).

    python scripts/fit_special.py > python/cjit/scipy/_coefs.py

References are computed here with the decimal module at 70 digits (power
series, continued fractions, Stirling's series with exact Bernoulli numbers,
Newton's method for the inverses), so the fits do not inherit the few-ulp
errors of any float64 library.  Each piece is fitted by least squares in the
Chebyshev basis at Chebyshev points of its interval, refined once on residuals
computed in long double, converted exactly (fractions) to monomials in the
piece's local variable t = (x - mid) / half, and rounded to float64.  The
script prints the max error of the float64 Horner evaluation against the
reference on each piece to stderr."""
import sys
from decimal import Decimal as D, getcontext
from fractions import Fraction

import numpy as np
from numpy.polynomial import chebyshev as C

getcontext().prec = 70
SQRTPI = D(np.pi).sqrt() if False else D(
    "1.7724538509055160272981674833411451827975494561223871282138077898529")
PI = D("3.1415926535897932384626433832795028841971693993751058209749445923078")
SQRT2 = D(2).sqrt()


# ---------------------------------------------------------------- references

def d_erf(x):
    x = D(x); x2 = x * x
    if x == 0:
        return x
    term = s = x; n = 0
    while True:
        n += 1
        term = -term * x2 / n
        t = term / (2 * n + 1)
        s += t
        if n > 5 and abs(t) < D(10) ** -66 * abs(s):
            return 2 * s / SQRTPI


def d_erfcx(x):
    """exp(x^2) erfc(x): series below 5.5, Laplace's continued fraction above."""
    x = D(x)
    if x < D("5.5"):
        return (1 - d_erf(x)) * (x * x).exp()
    f = x
    for k in range(400, 0, -1):
        f = x + (D(k) / 2) / f
    return 1 / (f * SQRTPI)


def d_erfc(x):
    x = D(x)
    if x < 0:
        return 2 - d_erfc(-x)
    return d_erfcx(x) * (-x * x).exp()


def d_erf_any(x):
    """erf on the whole line (the series alone would need many digits past 5)."""
    x = D(x)
    if abs(x) < 5:
        return d_erf(x)
    r = 1 - d_erfc(abs(x))
    return r if x > 0 else -r


def _bernoulli(n):
    """B_0..B_n as Fractions (B_1 = -1/2)."""
    from math import comb
    B = [Fraction(1)]
    for m in range(1, n + 1):
        B.append(-sum(comb(m + 1, k) * B[k] for k in range(m)) / Fraction(m + 1))
    return B


BERN = _bernoulli(60)


def _dec(fr):
    return D(fr.numerator) / D(fr.denominator)


def d_lgamma(x):
    """log Gamma(x), x > 0: shifted to x + N >= 40, then Stirling's series."""
    x = D(x)
    N = max(0, 40 - int(x))
    z = x + N
    s = (z - D("0.5")) * z.ln() - z + (2 * PI).ln() / 2
    for k in range(1, 25):
        s += _dec(BERN[2 * k] / (2 * k * (2 * k - 1))) / z ** (2 * k - 1)
    p = D(1)
    for k in range(N):
        p *= x + k
    return s - p.ln()


def d_digamma(x):
    x = D(x)
    N = max(0, 40 - int(x))
    z = x + N
    s = z.ln() - 1 / (2 * z)
    for k in range(1, 25):
        s -= _dec(BERN[2 * k] / (2 * k)) / z ** (2 * k)
    for k in range(N):
        s -= 1 / (x + k)
    return s


def d_digamma_root():
    x = D("1.4616321449683623")
    for _ in range(6):   # Newton with the trigamma by a central difference
        h = D(10) ** -30
        x -= d_digamma(x) / ((d_digamma(x + h) - d_digamma(x - h)) / (2 * h))
    return x


def d_erfinv(y):
    """erf(s) = y by Newton from a float64 start."""
    import scipy.special as sc
    y = D(y)
    s = D(float(sc.erfinv(float(y))))
    for _ in range(4):
        s -= (d_erf(s) - y) / (2 / SQRTPI * (-s * s).exp())
    return s


def d_tail(r):
    """T(r) = -ndtri(exp(-r^2)) = sqrt(2) erfcinv(2 exp(-r^2)), by Newton on
    log erfc(s) = log(2) - r^2, s = T / sqrt(2)."""
    import scipy.special as sc
    r = D(r)
    target = 2 * (-r * r).exp()
    s = D(float(sc.erfcinv(float(target)))) if float(target) > 1e-300 else r
    for _ in range(12):   # Newton on log erfc(s) = log target
        s += (d_erfc(s).ln() - target.ln()) * SQRTPI * d_erfcx(s) / 2
    return s * SQRT2


def vec(f):
    return lambda xs: np.array([float(f(float(v))) for v in np.ravel(xs)]).reshape(np.shape(xs))


# ---------------------------------------------------------------- fitting

def _cheb_to_mono(fc):
    deg = len(fc) - 1
    T = [[1], [0, 1]]
    for k in range(2, deg + 1):
        a = [0] + [2 * v for v in T[k - 1]]
        b = T[k - 2] + [0] * (len(a) - len(T[k - 2]))
        T.append([p - q for p, q in zip(a, b)])
    mono = [Fraction(0)] * (deg + 1)
    for k in range(deg + 1):
        for j, v in enumerate(T[k]):
            mono[j] += fc[k] * v
    return mono


def fit(f, lo, hi, deg, npts=500):
    m = (lo + hi) / 2
    h = (hi - lo) / 2
    t = np.cos(np.pi * (np.arange(npts) + 0.5) / npts)
    x = m + h * t
    y = f(x)
    tl = (x.astype(np.longdouble) - np.longdouble(m)) / np.longdouble(h)
    t = tl.astype(np.float64)
    c1 = C.chebfit(t, y, deg)
    res = (y.astype(np.longdouble) - C.chebval(tl, c1.astype(np.longdouble))).astype(np.float64)
    c2 = C.chebfit(t, res, deg)
    fc = [Fraction(float(a)) + Fraction(float(b)) for a, b in zip(c1, c2)]
    return m, h, [float(v) for v in _cheb_to_mono(fc)]


def horner(coefs, t):
    r = np.full_like(t, coefs[-1])
    for c in coefs[-2::-1]:
        r = r * t + c
    return r


def report(name, f, piece, lo, hi, n=1500):
    m, h, c = piece
    x = np.linspace(lo, hi, n)
    ref = f(x)
    err = np.abs(horner(c, (x - m) / h) - ref) / np.spacing(np.abs(ref))
    print(f"{name} [{lo}, {hi}] deg {len(c) - 1}: max {err.max():.1f} ulp", file=sys.stderr)


def emit(name, pieces):
    print(f"{name} = (")
    for m, h, c in pieces:
        print(f"    ({m!r}, {h!r}, (")
        for v in c:
            print(f"        {v!r},")
        print("    )),")
    print(")\n")


def main():
    print('"""Generated by scripts/fit_special.py: (mid, half, monomial coefficients in\n'
          't = (x - mid) / half, lowest first) per piece.  Do not edit by hand."""\n')
    erfcx = vec(d_erfcx)
    # erf(x) = x + x * P(x^2) on [0, 1]
    small_f = vec(lambda u: d_erf(D(u).sqrt()) / D(u).sqrt() - 1 if u > 0 else 2 / SQRTPI - 1)
    small = fit(small_f, 0.0, 1.0, 12)
    report("erf/x-1", small_f, small, 1e-6, 1.0)
    emit("ERF_SMALL", [small])
    # erfcx(a) on [0.5, 4] in four pieces, a * erfcx(a) in v = 1/a^2 above 4
    pieces = []
    for lo, hi in ((0.5, 1.0), (1.0, 2.0), (2.0, 3.0), (3.0, 4.0)):
        p = fit(erfcx, lo, hi, 15)
        report("erfcx", erfcx, p, lo, hi)
        pieces.append(p)
    tail_f = vec(lambda v: d_erfcx(1 / D(v).sqrt()) / D(v).sqrt() if v > 0 else 1 / SQRTPI)
    p = fit(tail_f, 0.0, 1 / 16, 15)
    report("a*erfcx(1/sqrt(v))", tail_f, p, 1e-12, 1 / 16)
    pieces.append(p)
    emit("ERFCX", pieces)

    # lgamma(1 + t) / t for t in [-0.5, 0.5] and lgamma(2 + t) / t
    # (log Gamma(1 + t) / t has a singularity at t = -1: [-0.5, 0] is its own piece)
    lg1 = vec(lambda t: d_lgamma(1 + D(t)) / D(t) if t != 0 else d_digamma(1))
    lg2 = vec(lambda t: d_lgamma(2 + D(t)) / D(t) if t != 0 else d_digamma(2))
    pieces = []
    for f, lo, hi in ((lg1, -0.5, 0.0), (lg1, 0.0, 0.5), (lg2, -0.5, 0.5)):
        p = fit(f, lo, hi, 22)
        report("lgamma(k+t)/t", f, p, lo, hi)
        pieces.append(p)
    emit("LGAMMA_NEAR_1_2", pieces)

    # digamma(x) / (x - root) on [1, 2]
    root = d_digamma_root()
    hi = float(root)
    lo = float(root - D(hi))
    print(f"DIGAMMA_ROOT = ({hi!r}, {lo!r})\n")
    dg = vec(lambda x: d_digamma(x) / (D(x) - root))
    p = fit(dg, 1.0, 2.0, 20)
    report("digamma/(x-root)", dg, p, 1.0, 2.0)
    emit("DIGAMMA_1_2", [p])

    # Stirling's series: B_2k / (2k (2k-1)) and B_2k / (2k), k = 1..9
    print("LGAMMA_STIRLING = (" + ", ".join(repr(float(BERN[2 * k] / (2 * k * (2 * k - 1))))
                                            for k in range(1, 10)) + ")\n")
    print("DIGAMMA_ASYMPTOTIC = (" + ", ".join(repr(float(BERN[2 * k] / (2 * k)))
                                               for k in range(1, 10)) + ")\n")

    # erfinv(y) / y in u = y^2 on [0, 0.75^2]; T(r) in pieces above
    ei = vec(lambda u: d_erfinv(D(u).sqrt()) / D(u).sqrt() if u > 0 else SQRTPI / 2)
    pe = []
    for lo, hi in ((0.0, 0.25), (0.25, 0.5625)):
        p = fit(ei, lo, hi, 22)
        report("erfinv/y", ei, p, max(lo, 1e-8), hi)
        pe.append(p)
    emit("ERFINV_CENTRAL", pe)
    tail = vec(d_tail)
    pt = []
    for lo, hi in ((1.44, 2.4), (2.4, 4.0), (4.0, 8.0), (8.0, 16.0), (16.0, 28.0)):
        p = fit(tail, lo, hi, 22)
        report("T(r)", tail, p, lo, hi)
        pt.append(p)
    emit("NDTRI_TAIL", pt)


if __name__ == "__main__":
    main()
