"""The dtypes cjit supports and ShapeDtypeStruct, the abstract array."""
from __future__ import annotations

import operator

import numpy as np


# In the order of the C core's cj_dtype (csrc/cj.h)
_SUPPORTED_DTYPES = tuple(np.dtype(n) for n in ("bool", "int32", "int64", "float32", "float64", "uint32",
                                                "int8", "int16", "uint8", "uint16", "uint64"))
_SUPPORTED = frozenset(_SUPPORTED_DTYPES)
_BOOL, _I32, _I64, _F32, _F64, _U32, _I8, _I16, _U8, _U16, _U64 = _SUPPORTED_DTYPES
_SUPPORTED_NAMES = "bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64"
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def canonical_dtype(dtype, what="dtype"):
    """np.dtype for a supported dtype given as a dtype, type or string;
    TypeError for anything else."""
    if isinstance(dtype, np.dtype) and dtype in _SUPPORTED:
        return dtype
    prefix = "" if what.startswith("cjit") else "cjit: "
    try:
        dt = np.dtype(dtype)
    except Exception:
        raise TypeError(f"{prefix}{what} {dtype!r} is not a dtype; supported dtypes are "
                        f"{_SUPPORTED_NAMES}") from None
    if dt not in _SUPPORTED:
        native = dt.newbyteorder("=") if dt.byteorder not in ("=", "|") else dt
        if native in _SUPPORTED:
            return native
        raise TypeError(f"{prefix}{what} {dt} is not supported; supported dtypes are "
                        f"{_SUPPORTED_NAMES}")
    return dt


def _aval_str(aval):
    dt, shape, weak = aval
    s = f"{dt.name}[{','.join(str(d) for d in shape)}]"
    return s + " (weak)" if weak else s


class ShapeDtypeStruct:
    """An abstract array: shape and dtype, no data (for Jitted.lower)."""

    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape, dtype, weak_type=False):
        if isinstance(shape, int):
            shape = (shape,)
        try:
            # operator.index, as NumPy: 2.5 or "2" is not a dimension
            shape = tuple(operator.index(d) for d in shape)
        except TypeError:
            raise TypeError(f"cjit.ShapeDtypeStruct: shape must be a tuple of ints, "
                            f"got {shape!r}") from None
        if any(d < 0 for d in shape):
            raise ValueError(f"cjit.ShapeDtypeStruct: negative dimension in {shape}")
        self.shape = shape
        self.dtype = canonical_dtype(dtype)
        self.weak_type = bool(weak_type)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __repr__(self):
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name})"

    def __eq__(self, other):
        if not isinstance(other, ShapeDtypeStruct):
            return NotImplemented
        return (self.shape, self.dtype, self.weak_type) == \
            (other.shape, other.dtype, other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))
