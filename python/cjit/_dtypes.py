"""The dtypes cjit supports and ShapeDtypeStruct, the abstract array."""
from __future__ import annotations

import builtins
import operator
import os
import sys
import warnings

import numpy as np

from . import _cjit


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


# ---------------------------------------------------------------------------
# The two modes (JAX's jax_enable_x64).  x64 off, the default as in JAX:
# defaults are float32 and int32, 64-bit arrays entering cjit become 32-bit
# and promotion never makes up a 64-bit dtype.  The flag lives here (and in
# the C core, cj_set_x64); cjit.config, cjit.enable_x64 and the environment
# (CJIT_ENABLE_X64, else JAX_ENABLE_X64) set it through set_x64.

def _env_x64():
    for name in ("CJIT_ENABLE_X64", "JAX_ENABLE_X64"):
        v = os.environ.get(name, "").strip().lower()
        if v:           # set and not empty: CJIT_ENABLE_X64 first
            return v not in ("0", "false", "no", "off")
    return False


_x64 = [_env_x64()]
_cjit._set_x64(_x64[0])

# the 32-bit counterpart of each 64-bit dtype
_NARROW = {_I64: _I32, _U64: _U32, _F64: _F32}


def x64_enabled():
    """Whether 64-bit dtypes are on (cjit.config.jax_enable_x64)."""
    return _x64[0]


def set_x64(flag):
    """Sets the mode for promotion (C), defaults and conversions; returns the old one."""
    old = _x64[0]
    _x64[0] = bool(flag)
    _cjit._set_x64(bool(flag))
    return old


def canonicalize_dtype(dt):
    """dt, or with x64 off its 32-bit counterpart (no warning)."""
    dt = np.dtype(dt)
    if _x64[0]:
        return dt
    if dt.kind == "c":
        return np.dtype(np.complex64) if dt == np.complex128 else dt
    return _NARROW.get(dt, dt)


def default_float():
    """The default float dtype: float64 with x64 on, float32 off."""
    return _F64 if _x64[0] else _F32


def default_int():
    """The default int dtype: int64 with x64 on, int32 off."""
    return _I64 if _x64[0] else _I32


# modules a request passes through between the caller and the function asked
_PASS_THROUGH = frozenset(("cjit._dtypes", "cjit.numpy._core", "cjit._jitted", "cjit._signature",
                           "cjit._trace_state"))


def _user_stacklevel():
    """The warnings stacklevel of the code that asked requested_dtype's
    caller for a dtype, or None when that code is cjit's own."""
    f = sys._getframe(2)            # requested_dtype's caller
    home = f.f_globals.get("__name__", "")
    level = 2
    while f is not None:
        mod = f.f_globals.get("__name__", "")
        # the dispatching decorators of cjit.numpy (a function named wrapper) pass it on too
        if mod != home and mod not in _PASS_THROUGH and f.f_code.co_name != "wrapper":
            return None if mod == "cjit" or mod.startswith("cjit.") else level
        f = f.f_back
        level += 1
    return None


def requested_dtype(dtype, who):
    """The dtype a creation function or astype uses for `dtype=`: a Python
    type (float, int, complex) names the mode's default; a 64-bit dtype given
    explicitly with x64 off is narrowed with JAX's UserWarning."""
    if dtype is builtins.float:
        return default_float()
    if dtype is builtins.int:
        return default_int()
    if dtype is builtins.complex:
        return np.dtype(np.complex128 if _x64[0] else np.complex64)
    if dtype is None:
        return None
    try:
        dt = np.dtype(dtype)
    except Exception:
        return dtype        # the caller's canonical_dtype names the problem
    if not _x64[0] and (dt in _NARROW or dt == np.complex128):
        narrow = canonicalize_dtype(dt)
        level = _user_stacklevel()
        if level is None:
            return narrow       # cjit's own code asked (an internal index or upcast): no warning
        warnings.warn(f"Explicitly requested dtype {dt.name} requested in {who} is not available, "
                      f"and will be truncated to dtype {narrow.name}. To enable more dtypes, set "
                      f"the jax_enable_x64 configuration option (cjit.config.update) or the "
                      f"CJIT_ENABLE_X64 / JAX_ENABLE_X64 shell environment variable.",
                      UserWarning, stacklevel=level)
        return narrow
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
