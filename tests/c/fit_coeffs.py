#!/usr/bin/env python3
"""Derive the polynomial coefficients used by csrc/cmath.c and cmath_trig.c.

Each polynomial is a weighted minimax fit found with the Remez exchange
algorithm in 80-digit arithmetic (mpmath), then rounded to the target
precision.  The weight turns the error of the polynomial into the relative
error it causes in the final function, so "err" below is roughly that
relative error (compare it with 2**-53 for double and 2**-24 for float).

Run:  python3 tests/c/fit_coeffs.py        (prints C initialisers)
"""
import struct
import sys

import mpmath as mp

mp.mp.dps = 50


def series(coef, t, nterms=80):
    """sum_{k < nterms} coef(k) * t**k."""
    s = mp.mpf(0)
    p = mp.mpf(1)
    for k in range(nterms):
        s += coef(k) * p
        p *= t
    return s


# ---- the functions being approximated (as series where they cancel) ----

def q_exp(r):          # (exp(r) - 1 - r) / r**2
    return series(lambda k: 1 / mp.factorial(k + 2), r, 60)


def p_log(z):          # (2 atanh(s)/s - 2) / z,  z = s**2
    return series(lambda k: mp.mpf(2) / (2 * k + 3), z)


def wt_pow(z):         # (p_log(z) - 2/3) / z
    return series(lambda k: mp.mpf(2) / (2 * k + 5), z)


def s_sin(z):          # (sin(r) - r) / r**3,  z = r**2
    return series(lambda k: (-1) ** (k + 1) / mp.factorial(2 * k + 3), z, 50)


def c_cos(z):          # (cos(r) - 1 + z/2) / z**2
    return series(lambda k: (-1) ** k / mp.factorial(2 * k + 4), z, 50)


def t_tanh(u):         # (tanh(a) - a) / a**3,  u = a**2
    if u < mp.mpf('1e-20'):
        return mp.mpf(-1) / 3
    a = mp.sqrt(u)
    return (mp.tanh(a) - a) / (a * u)


# ---- Remez ----

def remez(g, w, lo, hi, deg, iters=40, ngrid=4000):
    """Minimise max |w(t) (g(t) - p(t))| over [lo, hi] for deg-degree p."""
    n = deg + 1
    grid = [lo + (hi - lo) * (1 - mp.cos(mp.pi * i / (ngrid - 1))) / 2
            for i in range(ngrid)]
    grid = [t for t in grid if w(t) != 0]
    gv = [g(t) for t in grid]
    wv = [w(t) for t in grid]
    # initial reference: Chebyshev-spread indices into the grid
    ref = [int(round((ngrid - 1) * (1 - mp.cos(mp.pi * (j + 0.5) / (n + 1))) / 2))
           for j in range(n + 1)]
    ref = sorted(set(min(max(i, 0), len(grid) - 1) for i in ref))
    coeffs = None
    best = None
    for _ in range(iters):
        A = mp.matrix(n + 1, n + 1)
        rhs = mp.matrix(n + 1, 1)
        for row, i in enumerate(ref):
            t = grid[i]
            for c in range(n):
                A[row, c] = t ** c
            A[row, n] = (-1) ** row / wv[i]
            rhs[row] = gv[i]
        sol = mp.lu_solve(A, rhs)
        coeffs = [sol[c] for c in range(n)]
        err = [wv[i] * (gv[i] - mp.polyval(coeffs[::-1], grid[i]))
               for i in range(len(grid))]
        # one extremum per run of equal sign
        runs = []
        start = 0
        for i in range(1, len(err) + 1):
            if i == len(err) or (err[i] >= 0) != (err[start] >= 0):
                j = max(range(start, i), key=lambda k: abs(err[k]))
                runs.append(j)
                start = i
        while len(runs) > n + 1:
            if abs(err[runs[0]]) < abs(err[runs[-1]]):
                runs.pop(0)
            else:
                runs.pop()
        emax = max(abs(e) for e in err)
        if best is None or emax < best[0]:
            best = (emax, coeffs)
        if len(runs) < n + 1 or runs == ref:
            break
        ref = runs
    return best[1], best[0]


def round_to(c, single):
    if single:
        return struct.unpack('f', struct.pack('f', float(c)))[0]
    return float(c)


def max_err(g, w, lo, hi, coeffs, ngrid=6000):
    e = mp.mpf(0)
    for i in range(ngrid):
        t = lo + (hi - lo) * mp.mpf(i) / (ngrid - 1)
        if w(t) == 0:
            continue
        e = max(e, abs(w(t) * (g(t) - mp.polyval([mp.mpf(c) for c in coeffs[::-1]], t))))
    return e


FITS = [
    # name, function, weight, lo, hi, degree (double), degree (float)
    ('EXPM1_Q', q_exp, lambda r: abs(r * r / mp.expm1(r)) if r != 0 else 0,
     mp.mpf('-0.35'), mp.mpf('0.35'), 10, 5),
    # the same Q weighted for exp's relative error, float exp and tanh only
    ('EXP_Q', q_exp, lambda r: abs(r * r / mp.exp(r)),
     mp.mpf('-0.35'), mp.mpf('0.35'), None, 4),
    ('LOG_P', p_log, lambda z: z / 2, mp.mpf(0), mp.mpf('0.02944'), 6, 2),
    ('POW_WT', wt_pow, lambda z: z * z / 2, mp.mpf(0), mp.mpf('0.02944'), 6, None),
    ('SIN_S', s_sin, lambda z: z * mp.sqrt(z) / mp.sin(mp.sqrt(z)) if z else 0,
     mp.mpf(0), mp.mpf('0.79') ** 2, 6, 3),
    ('COS_C', c_cos, lambda z: z * z / mp.cos(mp.sqrt(z)),
     mp.mpf(0), mp.mpf('0.79') ** 2, 5, 3),
    ('TANH_T', t_tanh, lambda u: u * mp.sqrt(u) / mp.tanh(mp.sqrt(u)) if u else 0,
     mp.mpf(0), mp.mpf('0.625') ** 2, 11, 5),
]


def main():
    only = sys.argv[1:]
    for name, g, w, lo, hi, dd, df in FITS:
        if only and name not in only:
            continue
        for single, deg in ((False, dd), (True, df)):
            if deg is None:
                continue
            c, e = remez(g, w, lo, hi, deg)
            cr = [round_to(x, single) for x in c]
            er = max_err(g, w, lo, hi, cr)
            suffix = '_F32' if single else '_F64'
            print('/* %s%s: degree %d, fit error 2^%.1f, rounded 2^%.1f */'
                  % (name, suffix, deg, float(mp.log(e, 2)), float(mp.log(er, 2))))
            print('static const double %s%s[] = {' % (name, suffix))
            for x in cr:
                print('    %s,' % float.hex(x))
            print('};')
            sys.stdout.flush()


if __name__ == '__main__':
    main()
