#!/usr/bin/env python3
"""The bits of 2/pi used by the Payne-Hanek reduction in csrc/cmath_trig.c.

pi comes from Machin's formula pi/4 = 4 atan(1/5) - atan(1/239), summed
with Python integers in fixed point (each term truncated; the error of the
sum is far below the 64 guard bits, and the check at the end confirms
the bits against a second computation with more guard bits).

Run:  python3 tests/c/two_over_pi.py      (prints the C table)
The Python tests import this file too: two_over_pi_bits(n) and
reduce_exact(x), an exact reduction of a float modulo pi/2 that they use
as a reference.
"""
import math
from fractions import Fraction

# words of the table in cmath_trig.c: word 0 is zero padding (bits -63..0),
# word w >= 1 holds the fraction bits 64 (w - 1) + 1 ... 64 w of 2/pi
TABLE_WORDS = 20


def _atan_inv(n, scale):
    """atan(1/n) * scale, truncated; n > 1."""
    total, term, k, sign = 0, scale // n, 1, 1
    n2 = n * n
    while term:
        total += sign * (term // k)
        term //= n2
        k += 2
        sign = -sign
    return total


def pi_fixed(bits, guard=64):
    """floor(pi * 2**bits) (exact for bits up to many thousands)."""
    scale = 1 << (bits + guard)
    p = 4 * (4 * _atan_inv(5, scale) - _atan_inv(239, scale))
    return p >> guard


def two_over_pi_bits(nbits, guard=64):
    """floor(2/pi * 2**nbits): the first nbits fraction bits of 2/pi."""
    p = pi_fixed(nbits + guard, guard)           # pi * 2**(nbits + guard)
    return (2 << (2 * (nbits + guard))) // p >> guard


def table_words(nwords=TABLE_WORDS):
    bits = two_over_pi_bits(64 * (nwords - 1))
    words = [0]
    for w in range(nwords - 1):
        shift = 64 * (nwords - 2 - w)
        words.append((bits >> shift) & ((1 << 64) - 1))
    return words


def reduce_exact(x, nbits=1400):
    """For a finite float x: (k mod 4, f) with x * 2/pi = k + f exactly up
    to 2**-(nbits - 1100) relative, |f| <= 1/2, f a Fraction."""
    t = Fraction(x) * Fraction(two_over_pi_bits(nbits), 1 << nbits)
    k = round(t)
    return k % 4, t - k


def sin_cos_exact(x, prec=320):
    """(sin x, cos x) of a finite float x as Fractions, to about 2**-prec
    absolute: exact reduction x = (k + f) pi/2, then Taylor series of
    r = f pi/2 (|r| <= pi/4) in fixed point with Python integers."""
    q, f = reduce_exact(x)
    one = 1 << prec
    r = (f * pi_fixed(prec + 8) / 2).__floor__() >> 8          # r * 2**prec
    r2 = r * r >> prec
    s, c = 0, 0
    term, n = r, 1                  # r^n / n!
    while term:
        s += term
        term = -term * r2 // ((n + 1) * (n + 2)) >> prec
        n += 2
    term, n = one, 0
    while term:
        c += term
        term = -term * r2 // ((n + 1) * (n + 2)) >> prec
        n += 2
    s, c = Fraction(s, one), Fraction(c, one)
    return [(s, c), (c, -s), (-s, -c), (-c, s)][q]


def _best_multiplier(beta, n):
    """The last continued-fraction denominator q < n of beta (0 < beta < 1):
    the M < n that brings M beta closest to an integer."""
    h0, h1, k0, k1 = 1, 0, 0, 1
    x, best = beta, 1
    while True:
        a = x.numerator // x.denominator
        h0, h1 = a * h0 + h1, h0
        k0, k1 = a * k0 + k1, k0
        if k0 >= n:
            return best
        best = k0
        if x == a:
            return best
        x = 1 / (x - a)


def hard_cases(mant, emin, emax):
    """For each exponent e in [emin, emax]: (M, e, d) with x = M 2^(e - mant + 1)
    a float of mant bits (2^(mant-1) <= M < 2^mant) whose x 2/pi is close
    to an integer, d = that distance (the closest such x of the exponent,
    or a small multiple of it when the best M is below 2^(mant - 1))."""
    t = Fraction(two_over_pi_bits(1400), 1 << 1400)
    out = []
    for e in range(emin, emax + 1):
        beta = (t * Fraction(2) ** (e - mant + 1)) % 1
        q = _best_multiplier(beta, 1 << mant)
        m = q * -(-(1 << (mant - 1)) // q)          # into [2^(mant-1), 2^mant)
        if m >= 1 << mant:
            m = q
            while m < 1 << (mant - 1):
                m *= 2
        v = m * beta
        out.append((m, e, abs(v - round(v))))
    return out


def _check():
    a = two_over_pi_bits(1300)
    b = two_over_pi_bits(1300, guard=200)
    assert a == b, "guard bits too few"
    # 2/pi = 0.63661977236758134308 ...
    assert abs(Fraction(a, 1 << 1300) - Fraction(63661977236758134308, 10**20)) < Fraction(1, 10**19)


if __name__ == "__main__":
    import sys
    _check()
    if "--hard" in sys.argv:
        # the hardest arguments for the C tests: {M, e} of the 24 exponents
        # whose x 2/pi comes closest to an integer
        for name, mant, emin, emax in (("HARD_F32", 24, 0, 127), ("HARD_F64", 53, 0, 1023)):
            cases = sorted(hard_cases(mant, emin, emax), key=lambda c: c[2])[:24]
            print("/* %s: log2 of the distances %.1f ... %.1f */" % (
                name, math.log2(cases[0][2]), math.log2(cases[-1][2])))
            print("static const struct { double m; int e; } %s[] = {" % name)
            for i in range(0, len(cases), 3):
                print("    " + " ".join("{%d.0, %d}," % (m, e) for m, e, _ in cases[i:i + 3]))
            print("};")
        sys.exit(0)
    w = table_words()
    print("static const uint64_t TWO_OVER_PI_BITS[%d] = {" % len(w))
    for i in range(0, len(w), 3):
        print("    " + " ".join("0x%016xULL," % v for v in w[i:i + 3]))
    print("};")
