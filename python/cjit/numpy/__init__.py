"""cjit.numpy: NumPy's functions on traced values, and eagerly on arrays.

Every function follows NumPy's signature and semantics for the dtypes cjit
supports (bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64,
complex64, complex128).  Dispatch:

- if an argument is a traced value (a Tracer), or a trace is in progress on
  this thread, the call records primitives into that trace;
- otherwise the call is *eager*: the same function runs under an internal
  jit (one per function, static parameters such as `axis` in its cache key),
  so an eager call compiles one small kernel per op signature, caches it,
  and returns NumPy arrays.  Creation functions (zeros, arange, ...) simply
  return NumPy arrays when called eagerly.

Known differences from NumPy: results are always arrays (0-d arrays where
NumPy returns scalars); math functions on bool inputs return float64 (NumPy:
float16); `reciprocal` accepts floats only.
"""
from __future__ import annotations

import math

import numpy as np

from .._cjit import Tracer as _Tracer
from .._trace_state import user_location as _user_location

from ._core import (  # noqa: F401  (cjit.nn and the C layer use these)
    _lift, _norm_axes, _norm_axis, _op, _operand, _reshape_t, _result_type)
from ._elementwise import *  # noqa: F401,F403
from ._elementwise import stop_gradient  # noqa: F401
from . import _elementwise  # noqa: E402  (its _UNARY: the op table's unary primitives)
from ._reductions import *  # noqa: F401,F403
from ._linalg import *  # noqa: F401,F403
from ._manipulation import *  # noqa: F401,F403
from ._creation import *  # noqa: F401,F403
from ._math import *  # noqa: F401,F403
from ._manipulation import _broadcast_shapes  # noqa: F401
from ._einsum import *  # noqa: F401,F403
from ._eager_only import *  # noqa: F401,F403
from ._interop import *  # noqa: F401,F403
from ._info import *  # noqa: F401,F403
from ._info import __array_namespace_info__  # noqa: F401
from ._reductions import all, any  # noqa: F401  (shadow the builtins on purpose)
from ._math import round, pow, divmod  # noqa: F401  (shadow the builtins on purpose)
from ._nanfunctions import *  # noqa: F401,F403,E402
from ._comparison import *  # noqa: F401,F403,E402
from ._polynomial import *  # noqa: F401,F403,E402
from ._selection import *  # noqa: F401,F403,E402
from ._selection import copy  # noqa: F401,E402  (shadows the module name on purpose)
from ._vectorize import *  # noqa: F401,F403,E402
from ._index_tricks import *  # noqa: F401,F403,E402
from ._gather import take, take_along_axis, _at, _getitem  # noqa: F401,E402
from ._sorting import *  # noqa: F401,F403,E402
from . import fft  # noqa: F401,E402  (the array API's fft extension)
from . import linalg  # noqa: F401,E402  (the array API's linalg extension)
from ._indexing import _iter, _len  # noqa: F401


__all__ = [
    # elementwise (and every elementwise unary primitive's name, from the op table: below)
    "add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "power", "negative",
    "abs", "absolute", "sign", "square", "reciprocal", "maximum", "minimum", "clip", "where",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
    "logical_or", "logical_not", "astype",
    # reductions
    "sum", "mean", "max", "min", "amax", "amin", "prod", "argmax", "argmin", "var",
    # linear algebra
    "matmul", "dot", "transpose",
    # shapes
    "reshape", "expand_dims", "squeeze", "broadcast_to", "concatenate", "stack", "ravel",
    "shape", "ndim", "size",
    # creation
    "zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "arange", "asarray", "array",
    # dtypes and constants
    "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32",
    "float64",
    "complex64", "complex128", "dtype", "pi", "e", "inf", "nan", "newaxis",
]

__all__ += [r["numpy"] for r in _elementwise._UNARY if r["numpy"] not in __all__]

bool_ = np.bool_
int32 = np.int32
int64 = np.int64
uint32 = np.uint32
uint64 = np.uint64
int8 = np.int8
int16 = np.int16
uint8 = np.uint8
uint16 = np.uint16
float32 = np.float32
float64 = np.float64
dtype = np.dtype
pi = math.pi
e = math.e
inf = math.inf
nan = math.nan
newaxis = None
bool = np.bool_   # the array API's name (shadows the builtin in this namespace only)
__array_api_version__ = "2023.12"

complex64 = np.complex64
complex128 = np.complex128
complexfloating = np.complexfloating

# Complex arguments: every public function checks for them where it is
# defined (_complex_dispatch.py) and sends them to the complex implementation
# registered for it, here (cjit.numpy's) and in _complex_linalg.py (linalg's).
from . import _complex_api, _complex_linalg  # noqa: E402,F401
from ._complex import tracer_binop as _complex_binop  # noqa: E402,F401

# ---------------------------------------------------------------------------
# NumPy ufuncs on traced values (Tracer.__array_ufunc__ forwards here)

# The ufuncs behind Python's operators: `ndarray + tracer` calls np.add,
# which must run as the Tracer's own (reflected) operator.
_OPERATOR_UFUNCS = {
    "add": ("__add__", "__radd__"), "subtract": ("__sub__", "__rsub__"),
    "multiply": ("__mul__", "__rmul__"), "divide": ("__truediv__", "__rtruediv__"),
    "floor_divide": ("__floordiv__", "__rfloordiv__"), "power": ("__pow__", "__rpow__"),
    "matmul": ("__matmul__", "__rmatmul__"), "bitwise_and": ("__and__", "__rand__"),
    "bitwise_or": ("__or__", "__ror__"), "bitwise_xor": ("__xor__", "__rxor__"),
    "less": ("__lt__", "__gt__"), "less_equal": ("__le__", "__ge__"),
    "greater": ("__gt__", "__lt__"), "greater_equal": ("__ge__", "__le__"),
    "equal": ("__eq__", "__eq__"), "not_equal": ("__ne__", "__ne__"),
}


def _tracer_array_ufunc(self, ufunc, method, *inputs, **kwargs):
    """Tracer.__array_ufunc__: a binary operator's ufunc with a NumPy operand
    on the left runs the Tracer's operator (an in-place `a += t` rebinds `a`
    to the traced result, as before); any other NumPy ufunc raises TypeError
    naming the cjit.numpy function to call instead."""
    name = getattr(ufunc, "__name__", str(ufunc))
    out = kwargs.pop("out", None)
    pair = _OPERATOR_UFUNCS.get(name)
    if (pair is not None and method == "__call__" and not kwargs and len(inputs) == 2
            and (out is None or (len(out) == 1 and out[0] is inputs[0]))):
        a, b = inputs
        r = getattr(a, pair[0])(b) if isinstance(a, _Tracer) else getattr(b, pair[1])(a)
        if r is not NotImplemented:
            return r
    called = f"numpy.{name}" + ("" if method == "__call__" else f".{method}")
    traced = ", ".join(f"{t.dtype.name}[{','.join(map(str, t.shape))}]"
                       for t in inputs if isinstance(t, _Tracer))
    fn = globals().get(name)
    if method == "__call__" and callable(fn) and not name.startswith("_"):
        hint = f"use cjit.numpy.{name} instead (import cjit.numpy as cnp; cnp.{name}(...))"
    elif method == "__call__":
        hint = f"cjit.numpy has no {name}: write it with cjit.numpy functions"
    else:
        hint = "use the cjit.numpy function that computes it instead (cnp.sum for " \
               "numpy.add.reduce, say)"
    raise TypeError(f"cjit: {called} was called on a traced value ({traced}) at "
                    f"{_user_location()}: NumPy functions need concrete arrays, which do not "
                    f"exist while tracing; {hint}")


# What the C Tracer's methods and operators forward to (csrc/py_tracer.c):
# registered here, so that C never looks cjit.numpy up by name.
from .. import _cjit  # noqa: E402
_cjit.register_tracer_functions({
    name: globals()[name] for name in (
        "_getitem", "_iter", "reshape", "transpose", "squeeze", "sum", "mean", "max", "min", "prod",
        "argmax", "argmin", "var", "astype", "clip", "dot", "remainder", "divmod", "_tracer_array_ufunc",
        "all", "any", "cumsum", "cumprod", "std", "ravel", "round", "swapaxes", "take", "repeat",
        "diagonal", "copy", "conj", "conjugate", "sort", "argsort", "searchsorted", "nonzero",
        "ptp", "real", "imag", "matrix_transpose", "_at", "_complex_binop")})

# cjit.Array's operators and methods (python/cjit/_array.py) are these functions
from .. import _array  # noqa: E402
ndarray = _array.Array      # JAX's jnp.ndarray: the array type, for annotations and isinstance
_array.register({name: globals()[name] for name in (
    *_array.METHODS, "_getitem", "_at", "transpose", "matrix_transpose", "real", "imag",
    "reshape", "ravel", "add", "subtract", "multiply", "true_divide", "floor_divide", "remainder",
    "divmod", "power", "matmul", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
    "right_shift", "less", "less_equal", "greater", "greater_equal", "equal", "not_equal",
    "negative", "positive", "abs", "invert") if name in globals()})
