"""cjit.numpy.vectorize and apply_along_axis: Python functions of one
element (or one 1-D slice) mapped over arrays with cjit.vmap, so the whole
map is one traced graph rather than a Python loop."""
from __future__ import annotations

import functools

import numpy as np

from .._cjit import Tracer
from .._trace_state import current_trace
from ._complex_dispatch import complex_aware
from ._core import _lift, _operand
from ._manipulation import broadcast_arrays, moveaxis
from .._jitted import jit
from .._vmap import vmap

__all__ = ["vectorize", "apply_along_axis"]


def _vmap():
    return vmap


def _eager(fun, arrays):
    """fun(*arrays) under a fresh jit when no trace is running and every
    array is concrete (an eager call); None when fun should trace inline."""
    if current_trace() is not None or any(isinstance(a, Tracer) for a in arrays):
        return None
    return jit(fun)(*arrays)


def _map_flat(fun, arrays):
    """fun mapped over the elements of same-shape arrays: flattened, vmapped
    once, and each output reshaped back."""
    shape = tuple(arrays[0].shape)
    n = int(np.prod(shape, dtype=np.int64))
    flat = [a.reshape((n,)) for a in arrays]
    out = _vmap()(fun)(*flat)
    if isinstance(out, tuple):
        return tuple(o.reshape(shape + tuple(o.shape[1:])) for o in out)
    return out.reshape(shape + tuple(out.shape[1:]))


class vectorize:
    """NumPy's vectorize: pyfunc(*scalars) broadcast over array arguments.
    Arguments named in `excluded` (positions or names) are passed as they
    are.  `signature=` (generalized ufuncs) is not supported."""

    def __init__(self, pyfunc=None, otypes=None, doc=None, excluded=None, cache=False,
                 signature=None):
        if signature is not None:
            raise NotImplementedError("cjit.numpy.vectorize: signature= is not supported; "
                                      "use cjit.vmap for functions of sub-arrays")
        self.pyfunc = pyfunc
        self.otypes = otypes
        self.excluded = set(excluded or ())
        functools.update_wrapper(self, pyfunc)

    def __call__(self, *args, **kwargs):
        mapped = [i for i in range(len(args)) if i not in self.excluded]
        names = [k for k in kwargs if k not in self.excluded]
        raw = [args[i] for i in mapped] + [kwargs[k] for k in names]
        if not raw:
            return self.pyfunc(*args, **kwargs)
        done = _eager(lambda *vals: self._traced(args, kwargs, mapped, names, vals), raw)
        return done if done is not None else self._traced(args, kwargs, mapped, names, raw)

    def _traced(self, args, kwargs, mapped, names, raw):
        values = list(broadcast_arrays(*[_lift(_operand(v, "vectorize")) for v in raw]))

        def one(*elems):
            call_args = list(args)
            for i, e in zip(mapped, elems):
                call_args[i] = e
            call_kwargs = dict(kwargs)
            for k, e in zip(names, elems[len(mapped):]):
                call_kwargs[k] = e
            return self.pyfunc(*call_args, **call_kwargs)

        out = _map_flat(one, values)
        if self.otypes:
            types = [np.dtype(t) for t in self.otypes]
            if isinstance(out, tuple):
                out = tuple(o.astype(t) for o, t in zip(out, types))
            else:
                out = out.astype(types[0])
        return out


def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """func1d applied to every 1-D slice of arr along axis; the slice's axis
    is replaced by func1d's output dims, as NumPy."""
    done = _eager(lambda v: apply_along_axis(func1d, axis, v, *args, **kwargs), [arr])
    if done is not None:
        return done
    a = _lift(_operand(arr, "apply_along_axis"))
    ax = int(axis) % a.ndim if a.ndim else 0
    moved = moveaxis(a, ax, -1)
    lead = tuple(moved.shape[:-1])
    n = int(np.prod(lead, dtype=np.int64))
    rows = moved.reshape((n, moved.shape[-1]))
    out = _vmap()(lambda row: func1d(row, *args, **kwargs))(rows)
    out = out.reshape(lead + tuple(out.shape[1:]))
    k = out.ndim - len(lead)   # func1d's output dims go where axis was
    perm = list(range(len(lead)))
    perm[ax:ax] = list(range(len(lead), len(lead) + k))
    return out.transpose(perm) if k else out


# complex arguments: the registry's implementation, or NotImplementedError
# (_complex_dispatch.py; the implementations are registered in _complex_api.py)
complex_aware(globals(), __all__)
