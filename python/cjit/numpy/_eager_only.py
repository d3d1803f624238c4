"""Functions whose result shape depends on the data (nonzero, unique_*):
outside jit they answer with NumPy's own result; inside a trace they raise
NotImplementedError saying why."""
from __future__ import annotations

import numpy as np

from .._dtypes import default_int
from .._dtypes import canonical_dtype
from .._trace_state import current_trace
from .._cjit import Tracer
from ._complex_dispatch import complex_aware

__all__ = ["nonzero", "argwhere", "flatnonzero", "unique", "unique_all", "unique_counts",
           "unique_inverse", "unique_values"]


def _concrete(who, why, *xs):
    if current_trace() is not None or any(isinstance(x, Tracer) for x in xs):
        raise NotImplementedError(f"cjit.numpy.{who} cannot be traced: {why}; call it outside "
                                  f"jit, on concrete arrays")
    out = []
    for x in xs:
        a = np.asarray(x)
        if a.dtype not in (np.complex64, np.complex128):
            canonical_dtype(a.dtype, f"cjit.numpy.{who}: dtype")
        out.append(a)
    return out


_SHAPE = "its result's shape depends on the values"


def nonzero(a):
    """The indices of the nonzero elements, one int64 array per axis."""
    (a,) = _concrete("nonzero", _SHAPE, a)
    if a.ndim == 0:
        raise ValueError("cjit.numpy.nonzero: not defined for 0-d arrays (the array API's rule)")
    return tuple(i.astype(default_int()) for i in np.nonzero(a))


def argwhere(a):
    (a,) = _concrete("argwhere", _SHAPE, a)
    return np.argwhere(a).astype(default_int())


def flatnonzero(a):
    (a,) = _concrete("flatnonzero", _SHAPE, a)
    return np.flatnonzero(a).astype(default_int())


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True):
    (ar,) = _concrete("unique", _SHAPE, ar)
    return np.unique(ar, return_index, return_inverse, return_counts, axis, equal_nan=equal_nan)


def unique_all(x):
    (x,) = _concrete("unique_all", _SHAPE, x)
    return np.unique_all(x)


def unique_counts(x):
    (x,) = _concrete("unique_counts", _SHAPE, x)
    return np.unique_counts(x)


def unique_inverse(x):
    (x,) = _concrete("unique_inverse", _SHAPE, x)
    return np.unique_inverse(x)


def unique_values(x):
    (x,) = _concrete("unique_values", _SHAPE, x)
    return np.unique_values(x)


# complex arguments: the registry's implementation, or NotImplementedError
# (_complex_dispatch.py; the implementations are registered in _complex_api.py)
complex_aware(globals(), __all__)
