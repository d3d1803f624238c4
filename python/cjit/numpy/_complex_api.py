"""Which cjit.numpy function takes complex arguments, and how: one entry per
function in the registry of _complex_dispatch.py (cjit.numpy.linalg's are
in _complex_linalg.py).  Each public function is wrapped where it is
defined; a call with a complex argument (or a complex dtype=) goes to the
implementation registered here under its name, runs the real function
as it is (`as_is`), or raises NotImplementedError naming the function.

The implementations are written on the parts: the value and its
arithmetic are in _complex.py, the elementwise functions in
_complex_elementary.py and _complex_inverse.py, and the real functions of
cjit.numpy apply to the parts.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import _tree
from .._array import Array
from .._cjit import Tracer
from .._dtypes import canonicalize_dtype, requested_dtype
from .._trace_state import current_trace
from . import _complex as C, _complex_elementary as E, _complex_inverse as I
from ._complex import ComplexTracer, as_complex, bilinear, linear, make, parts
from ._complex_dispatch import as_is, has_traced, impl, is_complex_dtype
from ._creation import asarray, eye, full, meshgrid, ones, tril, triu, zeros
from ._einsum import einsum
from ._elementwise import astype, logical_not, sqrt
from ._gather import take, take_along_axis
from ._index_tricks import rot90
from ._info import result_type
from ._linalg import (cross, diag, diagonal, dot, inner, kron, outer, tensordot, trace, transpose,
                      vdot, vecdot)
from ._manipulation import (append, array_split, broadcast_shapes, broadcast_to, column_stack,
                            concat, concatenate, diff, dsplit, dstack, expand_dims, flip, fliplr,
                            flipud, hsplit, hstack, matrix_transpose, moveaxis, permute_dims,
                            ravel, repeat, reshape, roll, size, split, squeeze, stack, swapaxes,
                            tile, unstack, vsplit, vstack)
from ._math import round as round_
from ._reductions import (_check_reduce_args, all as all_, any as any_, count_nonzero, cumsum,
                          cumulative_sum, mean as mean_, sum as sum_)
from ._selection import copy

# Functions that take complex arguments as they are: those that ask for a
# dtype, and those that answer outside jit only, with NumPy's own result
# (_eager_only.py), which holds for complex arrays as well
as_is("finfo", "iinfo", "can_cast", "isdtype", "nonzero", "argwhere", "flatnonzero", "unique",
      "unique_all", "unique_counts", "unique_inverse", "unique_values")


# ---------------------------------------------------------------------------
# the implementations

def _binary(op):
    return lambda x1, x2, /, *a, **k: C.binop(op, x1, x2)


impl("add")(_binary("add"))
impl("subtract")(_binary("sub"))
impl("multiply")(_binary("mul"))
impl("divide", "true_divide")(_binary("div"))
impl("equal")(_binary("eq"))
impl("not_equal")(_binary("ne"))
impl("power", "pow")(lambda x1, x2, /, *a, **k: C.cpower(x1, x2))
impl("matmul")(lambda x1, x2, /, *a, **k: C.complex_matmul(x1, x2))
impl("negative")(lambda x, /, *a, **k: -as_complex(x))
impl("positive")(lambda x, /, *a, **k: as_complex(x))
impl("conj", "conjugate")(lambda x, /, *a, **k: as_complex(x).conj())
impl("absolute", "abs")(lambda x, /, *a, **k: C.cabs(x))
impl("angle")(lambda z, deg=False: E.cangle(z, deg))
for _n, _f in (("exp", C.cexp), ("log", C.clog), ("sqrt", E.csqrt), ("sin", E.csin), ("cos", E.ccos),
               ("tan", E.ctan), ("sinh", E.csinh), ("cosh", E.ccosh), ("tanh", E.ctanh),
               ("square", E.csquare), ("reciprocal", E.creciprocal), ("isnan", E.cisnan),
               ("isinf", E.cisinf), ("isfinite", E.cisfinite), ("expm1", E.cexpm1),
               ("log1p", E.clog1p), ("sign", E.csign)):
    impl(_n)(functools.partial(lambda fn, x, /, *a, **k: fn(x), _f))


@impl("real")
def _real(x, /):
    return parts(x)[0] if not isinstance(x, np.ndarray) else asarray(np.real(x))


@impl("imag")
def _imag(x, /):
    return parts(x)[1]



_INV_LN10 = 1.0 / math.log(10.0)   # Python floats: weak, so complex64 stays complex64
_INV_LN2 = 1.0 / math.log(2.0)


@impl("log10")
def _log10(x, /):
    w = C.clog(x)
    return make(w.re * _INV_LN10, w.im * _INV_LN10)


@impl("log2")
def _log2(x, /):
    w = C.clog(x)
    return make(w.re * _INV_LN2, w.im * _INV_LN2)


@impl("where")
def _where(condition, x=None, y=None, /):
    if x is None or y is None:
        raise ValueError("cjit.numpy.where: complex arguments need both x and y")
    return E.cwhere(condition, x, y)


@impl("isclose")
def _isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    d = C.cabs(C.binop("sub", a, b))
    close = d <= atol + rtol * C.cabs(b)
    if equal_nan:
        close = close | (E.cisnan(as_complex(a)) & E.cisnan(as_complex(b)))
    return close & logical_not(E.cisinf(as_complex(a)) | E.cisinf(as_complex(b))) | \
        (C.binop("eq", a, b) & E.cisinf(as_complex(a)))


@impl("allclose")
def _allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return all_(_isclose(a, b, rtol, atol, equal_nan))


impl("astype", dtype_pos=1)(lambda x, dtype, /, copy=True, *, device=None: C.castype(x, dtype))


# sums, means, reshapes, slices: the same on both parts
_LINEAR = (("sum", sum_), ("mean", mean_), ("cumsum", cumsum), ("cumulative_sum", cumulative_sum),
           ("reshape", reshape), ("transpose", transpose), ("permute_dims", permute_dims),
           ("swapaxes", swapaxes), ("moveaxis", moveaxis), ("expand_dims", expand_dims),
           ("squeeze", squeeze), ("broadcast_to", broadcast_to), ("ravel", ravel), ("flip", flip),
           ("fliplr", fliplr), ("flipud", flipud), ("roll", roll), ("rot90", rot90),
           ("diagonal", diagonal), ("diag", diag), ("tril", tril), ("triu", triu), ("tile", tile),
           ("matrix_transpose", matrix_transpose), ("trace", trace), ("diff", diff), ("copy", copy),
           ("take", take), ("take_along_axis", take_along_axis))
def _real_rest(name, args, kwargs):
    """The parameters an implementation hands on to the real function as
    they are must be real: a complex one would bring the call back to the
    implementation through the real function's own dispatch, forever."""
    for v in list(args) + [v for key, v in kwargs.items() if key != "dtype"]:
        if _tree.is_complex(v) or (type(v) in (list, tuple) and any(map(_tree.is_complex, v))):
            raise TypeError(f"cjit.numpy.{name}: only the array may be complex; a complex value "
                            f"for another parameter is not supported")


def _on_parts(name, fn):
    """fn applied to both parts."""
    def f(x, /, *a, **k):
        _real_rest(name, a, k)
        return linear(fn, x, *a, **k)
    return f


for _n, _f in _LINEAR:
    impl(_n)(_on_parts(_n, _f))


@impl("repeat", static_array=(1, "repeats"))
def _repeat(x, repeats, axis=None):
    return linear(lambda v: repeat(v, repeats, axis=axis), x)


def _pieces(name, fn):
    """split, unstack, ...: the same pieces of both parts, paired up."""
    def f(x, *a, **k):
        _real_rest(name, a, k)
        z = as_complex(x)
        res = [make(r, i) for r, i in zip(fn(z.re, *a, **k), fn(z.im, *a, **k))]
        return tuple(res) if name == "unstack" else res
    return f


for _n, _f in (("split", split), ("array_split", array_split), ("hsplit", hsplit), ("vsplit", vsplit),
               ("dsplit", dsplit), ("unstack", unstack)):
    impl(_n)(_pieces(_n, _f))


@impl("meshgrid")
def _meshgrid(*xi, **kwargs):
    zs = [as_complex(x) for x in xi]
    return [make(r, i) for r, i in zip(meshgrid(*[z.re for z in zs], **kwargs),
                                       meshgrid(*[z.im for z in zs], **kwargs))]


@impl("broadcast_arrays")
def _broadcast_arrays(*arrays):
    shape = broadcast_shapes(*[_shape(a) for a in arrays])
    return [C.linear(lambda v: broadcast_to(v, shape), a) if _tree.is_complex(a)
            else broadcast_to(a, shape) for a in arrays]


@impl("identity", eager_jit=False, dtype_pos=1)
def _identity(n, dtype=None, **kwargs):
    return _eye(n, dtype=dtype, **kwargs)


@impl("eye", eager_jit=False, dtype_pos=3)
def _eye(N, M=None, k=0, dtype=None, *args, **kwargs):
    if dtype is None:
        dtype = kwargs.pop("dtype")
    dt = np.dtype(dtype)
    kwargs.pop("dtype", None)
    if current_trace() is None:
        return np.eye(N, M, k, dtype=dt)
    pd = C.part_dtype(dt)
    re = eye(N, M, k, dtype=pd)
    return make(re, re * 0)


@impl("all")
def _all(x, *a, **k):
    _real_rest("all", a, k)
    return all_(C.binop("ne", x, 0.0), *a, **k)


@impl("any")
def _any(x, *a, **k):
    _real_rest("any", a, k)
    return any_(C.binop("ne", x, 0.0), *a, **k)


@impl("round", "around")
def _round(x, decimals=0, out=None):
    return linear(lambda v: round_(v, decimals), x)


@impl("from_dlpack", eager_jit=False)
def _from_dlpack(x, /, *, device=None, copy=None):
    if current_trace() is not None:
        raise NotImplementedError("cjit.numpy.from_dlpack: call it outside jit, and pass the "
                                  "result (or the object itself) as an argument")
    a = np.from_dlpack(x, copy=copy)
    C.part_dtype(a.dtype)
    return a


@impl("count_nonzero")
def _count_nonzero(x, *a, **k):
    _real_rest("count_nonzero", a, k)
    return count_nonzero(C.binop("ne", x, 0.0), *a, **k)


# The inverse functions, on their principal branches (NumPy's cuts):
# _complex_inverse.py
for _names, _f in ((("arcsinh", "asinh"), I.casinh), (("arcsin", "asin"), I.casin),
                   (("arccos", "acos"), I.cacos), (("arctanh", "atanh"), I.catanh),
                   (("arctan", "atan"), I.catan), (("arccosh", "acosh"), I.cacosh)):
    impl(*_names)(functools.partial(lambda fn, x, /, *a, **k: fn(x), _f))


def _sequence(fn):
    def f(arrays, *a, **k):
        _real_rest(fn.__name__, a, k)
        zs = [as_complex(z) for z in arrays]
        return make(fn([z.re for z in zs], *a, **k), fn([z.im for z in zs], *a, **k))
    return f


for _n, _f in (("concatenate", concatenate), ("concat", concat), ("stack", stack), ("hstack", hstack),
               ("vstack", vstack), ("column_stack", column_stack), ("dstack", dstack)):
    impl(_n)(_sequence(_f))


@impl("append")
def _append(arr, values, axis=None):
    a, v = as_complex(arr), as_complex(values)
    return make(append(a.re, v.re, axis), append(a.im, v.im, axis))


def _bilinear_fn(fn, conj_first=False):
    def f(a, b, *args, **k):
        _real_rest(fn.__name__, args, k)
        if conj_first:
            a = as_complex(a).conj()
        return bilinear(lambda p, q: fn(p, q, *args, **k), a, b)
    return f


for _n, _f in (("dot", dot), ("inner", inner), ("outer", outer), ("tensordot", tensordot),
               ("kron", kron), ("cross", cross)):
    impl(_n)(_bilinear_fn(_f))
impl("vecdot")(_bilinear_fn(vecdot, conj_first=True))


@impl("vdot")
def _vdot(a, b):
    return bilinear(lambda p, q: vdot(p, q), as_complex(a).conj(), b)


@impl("einsum")
def _einsum(subscripts, *operands, **kwargs):
    if len(operands) == 1:
        return linear(lambda x: einsum(subscripts, x, **kwargs), operands[0])
    if len(operands) != 2:
        raise NotImplementedError("cjit.numpy.einsum: complex operands with more than two "
                                  "operands are not supported yet; contract them in pairs")
    return bilinear(lambda p, q: einsum(subscripts, p, q, **kwargs), *operands)


@impl("var")
def _var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, *,
         correction=None, mean=None):
    _check_reduce_args("var", out, None, where)     # refused as the real var refuses them
    if mean is not None:
        raise TypeError("cjit.numpy.var: mean= is not supported")
    if correction is not None and ddof != 0:
        raise ValueError("cjit.numpy.var: pass ddof or correction, not both")
    z = as_complex(a)
    d = C.binop("sub", z, mean_(z, axis=axis, keepdims=True))
    sq = d.re * d.re + d.im * d.im
    ddof = correction if correction is not None else ddof
    n = size(sq) if axis is None else int(np.prod([z.shape[i] for i in np.atleast_1d(axis)]))
    return sum_(sq, axis=axis, keepdims=keepdims) / max(n - ddof, 0)


@impl("std")
def _std(a, *args, **kwargs):
    return sqrt(_var(a, *args, **kwargs))


def _creation(name, dtype_pos):
    """zeros/ones/full/empty (and their _like) with a complex dtype."""
    def f(*args, **kwargs):
        args = list(args)
        dt = kwargs.pop("dtype", None)
        if dt is None and len(args) > dtype_pos:
            dt = args.pop(dtype_pos)
        like = name.endswith("_like")
        proto = args[0] if like else None
        fill = None
        if name.startswith("full"):
            fill = kwargs.pop("fill_value", None) if len(args) < 2 else args.pop(1)
        if dt is None:         # the prototype's dtype, or the fill value's (complex128 for 0j)
            dt = proto.dtype if like else _result_type(fill)
        dt = np.dtype(dt)
        if like:
            shape = kwargs.pop("shape", None) or tuple(np.shape(proto) if not isinstance(
                proto, ComplexTracer) else proto.shape)
        else:
            shape = args[0] if args else kwargs.pop("shape")
        value = {"zeros": 0, "ones": 1, "empty": 0, "full": fill}[name.replace("_like", "")]
        if current_trace() is None:
            return np.full(shape, value, dtype=dt)
        if dt.kind != "c":
            return full(shape, value, dtype=dt)
        fr, fi = parts(value) if not isinstance(value, (int, float)) else (value, 0.0)
        pd = C.part_dtype(dt)
        return make(astype(broadcast_to(asarray(fr), shape), pd),
                    astype(broadcast_to(asarray(fi), shape), pd))
    return f


for _n, _p in (("zeros", 1), ("ones", 1), ("empty", 1), ("full", 2), ("zeros_like", 1),
               ("ones_like", 1), ("empty_like", 1), ("full_like", 2)):
    impl(_n, eager_jit=False, dtype_pos=_p)(_creation(_n, _p))


@impl("asarray", eager_jit=False, dtype_pos=1)
def _asarray(a, dtype=None, order=None, *, copy=None, device=None):
    return _complex_array(a, dtype, copy)


@impl("array", eager_jit=False, dtype_pos=1)
def _array(object, dtype=None, copy=True, order="K", ndmin=0):
    return _complex_array(object, dtype, copy)


def _complex_array(a, dtype, copy):
    """asarray/array where a complex value is involved; copy as NumPy's
    outside a trace (a traced value is immutable: a trace ignores it)."""
    if isinstance(a, ComplexTracer):
        return a if dtype is None else C.castype(a, dtype)
    if isinstance(a, Tracer):
        return C.castype(a, dtype)
    if type(a) in (list, tuple) and has_traced([a], {}):
        zs = [as_complex(z) if not isinstance(z, (list, tuple)) else _complex_array(z, None, None)
              for z in a]
        r = make(stack([z.re for z in zs]), stack([z.im for z in zs]))
        return r if dtype is None else C.castype(r, dtype)
    outside = current_trace() is None
    if outside and type(a) is Array and (dtype is None or a.dtype == dtype) and not copy:
        return a
    dtype = requested_dtype(dtype, "asarray")     # complex128 asked for with x64 off: warned, narrowed
    arr = np.asarray(a, dtype=dtype, copy=copy if outside else None)
    if dtype is None and canonicalize_dtype(arr.dtype) != arr.dtype:
        arr = arr.astype(canonicalize_dtype(arr.dtype))   # x64 off: complex64, as JAX (no warning)
    if outside:
        return arr
    if arr.dtype.kind != "c":
        return asarray(arr)
    return make(asarray(np.ascontiguousarray(arr.real)), asarray(np.ascontiguousarray(arr.imag)))


@impl("iscomplexobj", eager_jit=False)
def _iscomplexobj(x):
    return True


@impl("isrealobj", eager_jit=False)
def _isrealobj(x):
    return False


@impl("iscomplex")
def _iscomplex(x):
    return parts(x)[1] != 0


@impl("isreal")
def _isreal(x):
    return parts(x)[1] == 0


@impl("shape", eager_jit=False)
def _shape(a):
    return tuple(np.shape(a)) if not isinstance(a, ComplexTracer) else a.shape


@impl("ndim", eager_jit=False)
def _ndim(a):
    return len(_shape(a))


@impl("size", eager_jit=False)
def _size(a, axis=None):
    s = _shape(a)
    return int(np.prod(s)) if axis is None else s[axis]


@impl("result_type", eager_jit=False, dtype_args=True)
def _result_type(*arrays_and_dtypes):
    """NumPy's promotion with complex operands: the promotion of the parts'
    dtypes, made complex (complex64 + int32 -> float32 + int32 = float64 ->
    complex128, as NumPy)."""
    reals = []
    for x in arrays_and_dtypes:
        if type(x) is complex:
            reals.append(0.0)                      # weak, as a Python float
        elif _tree.is_complex(x):
            reals.append(np.zeros((), C.part_dtype(x.dtype)))
        elif isinstance(x, (type, np.dtype, str)) and is_complex_dtype(x):
            reals.append(C.part_dtype(x))
        else:
            reals.append(x)
    r = result_type(*reals)
    return C.complex_dtype_of(r) if r.kind == "f" else np.dtype(np.complex128)


# ---------------------------------------------------------------------------
# products of many, and cjit.numpy.linalg

@impl("prod")
def _prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """A product along axes as a tree of pairwise complex products (each
    level halves the axis; an odd element waits for the next level)."""
    _check_reduce_args("prod", out, initial, where)  # refused as the real prod refuses them
    z = as_complex(a)
    nd = len(z.shape)
    axes = tuple(range(nd)) if axis is None else tuple(a_ % nd for a_ in np.atleast_1d(axis))
    keep = [d for d in range(nd) if d not in axes]
    z = C.linear(lambda v: transpose(v, keep + list(axes)), z)
    lead = tuple(z.shape[:len(keep)])
    n = int(np.prod(z.shape[len(keep):], dtype=np.int64))
    z = C.linear(lambda v: reshape(v, lead + (n,)), z)
    if n == 0:
        r = make(ones(lead, dtype=z.re.dtype), zeros(lead, dtype=z.re.dtype))
    else:
        while z.shape[-1] > 1:
            m = z.shape[-1]
            pairs = C.binop("mul", z[..., 0:m - 1:2], z[..., 1:m:2])
            z = make(concatenate([pairs.re, z.re[..., m - 1:]], axis=-1),
                     concatenate([pairs.im, z.im[..., m - 1:]], axis=-1)) if m % 2 else pairs
        r = z[..., 0]
    if keepdims:
        r = C.linear(lambda v: reshape(v, tuple(1 if d in axes else s
                                                  for d, s in enumerate(a.shape))), r)
    return r



