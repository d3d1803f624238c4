"""Results that went through a BLAS gemm.

A BLAS gemm over a block of rows need not sum each element's K products in
the order a gemm over all the rows does: the library picks its kernel per
call shape and per processor (OPENBLAS_CORETYPE).  So a plan that splits a
gemm differently (row blocks under donation, another thread count) gives
that gemm's elements within the rounding of a reordered sum, and every
other kernel bit for bit (docs/API.md, decision 155).  Tests hold a plan
to exactly that: equal bits when no stage is a BLAS call, else the bound,
and equal bits again with the BLAS off.

A module of its own, without conftest's side effects (it turns the disk
cache off), so that the scripts tests run in subprocesses can import it."""
import numpy as np

import cjit

def blas_stages(compiled):
    """How many stages of a compiled function are BLAS calls."""
    return compiled.as_text().count("(BLAS gemm)")


class blas_off:
    """New compiles inside run every matmul with cjit's own kernels (loop
    nests, small gemm, matvec), whose sums do not depend on the rows a
    call covers."""

    def __enter__(self):
        self._was = cjit._cjit._set_blas_enabled(False)
        return self

    def __exit__(self, *exc):
        cjit._cjit._set_blas_enabled(self._was)
        return False


def gemm_reorder_bound(a, b):
    """The most two float computations of a @ b that add each element's K
    products in different orders can differ by, elementwise: each is within
    gamma_K * (|a| @ |b|) of the exact product (gamma_K = K u / (1 - K u),
    u the unit roundoff of the operands' dtype; Higham, Accuracy and
    Stability, 3.5), so they are within twice that of each other."""
    a, b = np.asarray(a), np.asarray(b)
    u = np.finfo(np.result_type(a, b)).eps / 2
    k = a.shape[-1]
    gamma = k * u / (1 - k * u)
    return 2 * gamma * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))


# Whole programs (a train step, a loop of them) carry a gemm's reordering
# through their other ops; they are held to this many units of the
# dtype's precision times the largest magnitude of the leaf, and to the
# same relative size elementwise.
REORDER_ULPS = {np.dtype("float32"): 2048, np.dtype("float64"): 2048}


def assert_equal_up_to_gemm_order(got, want):
    """got and want (leaves of two plans of one program) agree as plans
    that differ only in how their BLAS gemms are split: integers and bools
    exactly, floats within REORDER_ULPS."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if not np.issubdtype(want.dtype, np.floating):
        assert got.tobytes() == want.tobytes()
        return
    tol = REORDER_ULPS[want.dtype] * np.finfo(want.dtype).eps
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)
