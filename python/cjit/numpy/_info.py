"""The array API standard's introspection: __array_api_version__,
__array_namespace_info__, finfo, iinfo, isdtype, can_cast, result_type,
and the dtype names."""
from __future__ import annotations

import numpy as np

from .. import _tree
from .._dtypes import canonical_dtype
from .._cjit import Tracer
from ._complex_dispatch import complex_aware
from ._core import _info, _result_type

__all__ = ["finfo", "iinfo", "isdtype", "can_cast", "result_type", "__array_namespace_info__"]

_DTYPES = {name: np.dtype(name) for name in ("bool", "int8", "int16", "int32", "int64", "uint8",
                                              "uint16", "uint32", "uint64", "float32", "float64")}


def _dtype_of(x):
    if isinstance(x, (Tracer, np.ndarray, np.generic)) or _tree.is_complex_tracer(x):
        return x.dtype
    if isinstance(x, (type, str, np.dtype)) and np.dtype(x) in (np.complex64, np.complex128):
        return np.dtype(x)
    return canonical_dtype(x)


class _FInfo:
    """A float dtype's limits as Python floats (the array API's finfo
    object; NumPy's holds NumPy scalars)."""

    def __init__(self, dt):
        f = np.finfo(dt)
        self.dtype = f.dtype
        self.bits = int(f.bits)
        self.eps, self.max, self.min = float(f.eps), float(f.max), float(f.min)
        self.smallest_normal = self.tiny = float(f.smallest_normal)
        self.resolution = float(f.resolution)
        self.precision = int(f.precision)

    def __repr__(self):
        return f"finfo(dtype={self.dtype.name}, bits={self.bits}, eps={self.eps}, max={self.max})"


def finfo(type):
    """The limits of a float dtype (or of an array's dtype), as Python floats."""
    return _FInfo(_dtype_of(type))


def iinfo(type):
    """NumPy's iinfo of an integer dtype (or of an array's dtype)."""
    return np.iinfo(_dtype_of(type))


_KINDS = {"bool": "b", "signed integer": "i", "unsigned integer": "u", "integral": "iu",
          "real floating": "f", "complex floating": "c", "numeric": "iufc"}


def isdtype(dtype, kind):
    """Whether dtype is of `kind`: a dtype, a kind name ('bool', 'signed
    integer', 'unsigned integer', 'integral', 'real floating', 'complex
    floating', 'numeric') or a tuple of them."""
    dt = np.dtype(dtype)
    if isinstance(kind, tuple):
        return any(isdtype(dt, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(f"cjit.numpy.isdtype: unknown kind {kind!r}")
        return dt.kind in _KINDS[kind]
    return dt == np.dtype(kind)


def can_cast(from_, to, casting="safe"):
    """Whether from_ (a dtype or an array) casts to `to` under `casting`."""
    return bool(np.can_cast(_dtype_of(from_), np.dtype(to), casting=casting))


def result_type(*arrays_and_dtypes):
    """The dtype NumPy 2's promotion (NEP 50: Python scalars are weak) gives."""
    infos = []
    for a in arrays_and_dtypes:
        if isinstance(a, (bool, int, float)) or isinstance(a, (Tracer, np.ndarray, np.generic)):
            infos.append(_info(a))
        else:
            infos.append((canonical_dtype(a), False))
    if not infos:
        raise ValueError("at least one array or dtype is required")
    return _result_type(*infos)[0]


class _NamespaceInfo:
    """What __array_namespace_info__() returns."""

    def capabilities(self):
        return {"boolean indexing": False, "data-dependent shapes": False,
                "max dimensions": 64}

    def default_device(self):
        return "cpu"

    def devices(self):
        return ["cpu"]

    def default_dtypes(self, *, device=None):
        return {"real floating": _DTYPES["float64"], "complex floating": None,
                "integral": _DTYPES["int64"], "indexing": _DTYPES["int64"]}

    def dtypes(self, *, device=None, kind=None):
        if kind is None:
            return dict(_DTYPES)
        return {n: d for n, d in _DTYPES.items() if isdtype(d, kind)}


def __array_namespace_info__():
    return _NamespaceInfo()


# complex arguments: the registry's implementation, or NotImplementedError
# (_complex_dispatch.py; the implementations are registered in _complex_api.py)
complex_aware(globals(), __all__)
