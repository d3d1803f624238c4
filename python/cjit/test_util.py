"""cjit.test_util.check_grads: JAX's check of derivatives against finite
differences.

Each check looks along one random direction (NumPy's RandomState(0), as
JAX's), so it costs a few evaluations whatever the sizes:

- "fwd": jvp(f, args, t) against the central difference
  (f(args + eps t) - f(args - eps t)) / (2 eps);
- "rev": the vjp of a random cotangent c, through the inner product:
  <vjp(c), t> must equal <c, central difference along t>.

order=2 checks the derivatives of those derivatives (the jvp function and
the vjp function, checked the same way), and so on.  Default tolerances per
dtype: 2e-3 (float32) and 1e-5 (float64), absolute and relative; eps 1e-4.
A mismatch is an AssertionError naming the check.
"""
from __future__ import annotations

import functools

import numpy as np

from . import tree_util
from ._autodiff import vjp
from ._forward import jvp

__all__ = ["check_grads", "check_jvp", "check_vjp"]

EPS = 1e-4
_DEFAULT_TOL = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 2e-3,
                np.dtype(np.float64): 1e-5, np.dtype(np.complex64): 2e-3,
                np.dtype(np.complex128): 1e-5}


def _tol(tol, dtype):
    if tol is None:
        return _DEFAULT_TOL.get(np.dtype(dtype), 1e-5)
    if isinstance(tol, dict):
        merged = dict(_DEFAULT_TOL)
        merged.update({np.dtype(k): v for k, v in tol.items()})
        return merged.get(np.dtype(dtype), 1e-5)
    return tol


def _arr(x):
    return np.asarray(x)


def _close(xs, ys, atol, rtol, what):
    xl, xd = tree_util.tree_flatten(xs)
    yl, yd = tree_util.tree_flatten(ys)
    if xd != yd:
        raise AssertionError(f"check_grads: {what}: structures differ: {xd} vs {yd}")
    for x, y in zip(xl, yl):
        x, y = _arr(x), _arr(y)
        dt = np.result_type(x.dtype, y.dtype)
        np.testing.assert_allclose(x.astype(np.complex128 if dt.kind == "c" else np.float64),
                                   y.astype(np.complex128 if dt.kind == "c" else np.float64),
                                   atol=_tol(atol, dt), rtol=_tol(rtol, dt),
                                   err_msg=f"check_grads: {what}")


def _rand_like(rng, x):
    a = _arr(x)
    dt = a.dtype if a.dtype.kind in "fc" else np.dtype(np.float64)
    r = np.asarray(rng.randn(*a.shape), dtype=dt)
    if dt.kind == "c":
        r = r + dt.type(1j) * np.asarray(rng.randn(*a.shape), dtype=dt)
    return r.item() if isinstance(x, (float, complex)) else r


def _axpy(a, xs, ys):
    """ys + a * xs, leaf by leaf, keeping each leaf of ys's dtype."""
    return tree_util.tree_map(
        lambda x, y: (_arr(y) + a * _arr(x)).astype(_arr(y).dtype)
        if not isinstance(y, (float, complex)) else y + a * x, xs, ys)


def _numerical_jvp(f, args, tangents, eps):
    hi = f(*_axpy(eps, tangents, args))
    lo = f(*_axpy(-eps, tangents, args))
    return tree_util.tree_map(lambda h, l: (_arr(h) - _arr(l)) * (0.5 / eps), hi, lo)


def _inner(xs, ys):
    terms = [np.sum(_arr(x).astype(np.complex128) * _arr(y).astype(np.complex128))
             for x, y in zip(tree_util.tree_leaves(xs), tree_util.tree_leaves(ys))]
    return sum(terms, np.complex128(0))


def check_jvp(f, f_jvp, args, atol=None, rtol=None, eps=EPS, err_msg=""):
    rng = np.random.RandomState(0)
    tangent = tree_util.tree_map(functools.partial(_rand_like, rng), args)
    out, t_out = f_jvp(args, tangent)
    _close(out, f(*args), atol, rtol, f"{err_msg} primal")
    _close(t_out, _numerical_jvp(f, args, tangent, eps), atol, rtol, f"{err_msg} tangent")


def check_vjp(f, f_vjp, args, atol=None, rtol=None, eps=EPS, err_msg=""):
    rng = np.random.RandomState(0)
    out, vjp_fn = f_vjp(*args)
    _close(out, f(*args), atol, rtol, f"{err_msg} primal")
    tangent = tree_util.tree_map(functools.partial(_rand_like, rng), args)
    t_out = _numerical_jvp(f, args, tangent, eps)
    cot = tree_util.tree_map(functools.partial(_rand_like, rng), out)
    ct_in = tree_util.tree_map(np.conj, vjp_fn(tree_util.tree_map(np.conj, cot)))
    got, want = _inner(tangent, ct_in), _inner(t_out, cot)
    dt = np.result_type(*[_arr(x).dtype for x in tree_util.tree_leaves(args)] or [np.float64])
    np.testing.assert_allclose(got, want, atol=_tol(atol, dt), rtol=_tol(rtol, dt),
                               err_msg=f"check_grads: {err_msg} cotangent projection")


def check_grads(f, args, order, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """Checks f's derivatives at args up to `order`, in `modes` ("fwd",
    "rev"), against finite differences; AssertionError on a mismatch."""
    args = tuple(args)
    eps = eps or EPS
    if isinstance(modes, str):
        modes = (modes,)
    bad = [m for m in modes if m not in ("fwd", "rev")]
    if bad:
        raise ValueError(f"cjit.test_util.check_grads: modes must be 'fwd' and/or 'rev', got "
                         f"{bad}")

    def run(f, args, order, msg):
        if "fwd" in modes:
            m = f"JVP of {msg}" if msg else "JVP"
            check_jvp(f, functools.partial(jvp, f), args, atol, rtol, eps, m)
            if order > 1:
                run(functools.partial(jvp, f), (args, args), order - 1, m)
        if "rev" in modes:
            m = f"VJP of {msg}" if msg else "VJP"
            check_vjp(f, functools.partial(vjp, f), args, atol, rtol, eps, m)
            if order > 1:
                def f_vjp(*a):
                    out, fn = vjp(f, *a)
                    return fn(out)
                run(f_vjp, args, order - 1, m)

    run(f, args, order, "")
