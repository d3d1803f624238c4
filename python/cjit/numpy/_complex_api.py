"""cjit.numpy's functions on complex arguments (see _complex.py).

Every public function of cjit.numpy is wrapped (`install`): a call with no
complex argument (and no complex `dtype=`) goes straight to the function;
a call with one goes to the complex implementation of that name, and a
function that has none raises NotImplementedError naming itself.  Outside
a trace, a complex call runs its implementation under an internal jit, as
the real functions' eager calls do.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import _tree
from ..api import current_trace
from .._cjit import Tracer
from . import _complex as C
from ._complex import ComplexTracer, as_complex, bilinear, linear, make, parts


def _cnp():
    from .. import numpy as cnp
    return cnp


# ---------------------------------------------------------------------------
# complex values at the edges: the real pair (cjit/_tree.py)

def _split(x):
    """(real pair, dtype name) of a complex value."""
    if type(x) is ComplexTracer:
        return _cnp().stack([x.re, x.im], axis=-1), x.dtype.name
    if type(x) is complex:
        return np.array([x.real, x.imag]), "complex128"
    a = np.asarray(x)
    if a.dtype not in (C._C64, C._C128):
        return a, a.dtype.name     # refused where leaves are checked, with the argument's name
    shape = a.shape
    a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("="))   # 0-d becomes 1-d here
    return a.view(C.part_dtype(a.dtype)).reshape(shape + (2,)), a.dtype.name


def _join(dtype_name, pair):
    """The complex value of a real pair: a ComplexTracer in a trace, a NumPy
    array (a view of the pair's bytes) for a result."""
    if pair is None:
        return None
    if isinstance(pair, Tracer):
        return ComplexTracer(pair[..., 0], pair[..., 1])
    if type(pair) is ComplexTracer:
        return pair
    a = np.asarray(pair)
    dt = np.dtype(dtype_name)
    shape = a.shape[:-1]
    a = np.ascontiguousarray(a, dtype=C.part_dtype(dt))
    return a.view(dt).reshape(shape)


_tree.set_complex_hooks(ComplexTracer, _split, _join)


def conj_pairs(treedef, leaves, negate):
    """leaves with the imaginary half of every complex pair negated:
    JAX's convention for cotangents of complex values (a gradient is the
    conjugate of the real pair's gradient).  negate(leaf) negates a pair's
    second half."""
    mask = _tree.complex_leaf_mask(treedef)
    return [negate(x) if m and x is not None else x for x, m in zip(leaves, mask)]


def negate_imag(pair):
    """A real pair with its imaginary half negated."""
    if isinstance(pair, Tracer):
        return pair * np.array([1.0, -1.0], dtype=pair.dtype)
    a = np.asarray(pair)
    return a * np.array([1.0, -1.0], dtype=a.dtype)


# ---------------------------------------------------------------------------
# dispatch

_IMPLS = {}          # name -> complex implementation
_NO_EAGER_JIT = set()  # implementations that handle eager calls themselves
# positional index of a dtype parameter, for creation functions
_DTYPE_POS = {"astype": 1, "zeros": 1, "ones": 1, "empty": 1, "full": 2, "asarray": 1, "array": 1,
              "zeros_like": 1, "ones_like": 1, "empty_like": 1, "full_like": 2, "eye": 3,
              "identity": 1}


def impl(*names, eager_jit=True):
    def deco(f):
        for n in names:
            _IMPLS[n] = f
            if not eager_jit:
                _NO_EAGER_JIT.add(n)
        return f
    return deco


def _seq_has_complex(seq, is_c):
    """Whether a (nested) list or tuple holds a complex value."""
    for b in seq:
        if is_c(b):
            return True
        t = type(b)
        if (t is list or t is tuple) and _seq_has_complex(b, is_c):
            return True
    return False


def _any_complex(name, args, kwargs):
    is_c = _tree.is_complex
    for a in args:
        if is_c(a):
            return True
        t = type(a)
        if (t is list or t is tuple) and _seq_has_complex(a, is_c):
            return True
    for v in kwargs.values():
        if is_c(v):
            return True
    if name == "result_type":      # its arguments may be dtypes
        return any(is_c(a) or (isinstance(a, (type, np.dtype, str)) and C.is_complex_dtype(a))
                   for a in args)
    dt = kwargs.get("dtype")
    pos = _DTYPE_POS.get(name)
    if dt is None and pos is not None and len(args) > pos:
        dt = args[pos]
    if dt is None:
        return False
    if isinstance(dt, str):
        return dt.startswith("complex")
    return C.is_complex_dtype(dt)


def _wrap(name, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not _any_complex(name, args, kwargs):
            return fn(*args, **kwargs)
        f = _IMPLS.get(name)
        if f is None:
            raise NotImplementedError(
                f"cjit.numpy.{name}: complex arguments are not supported yet (complex numbers "
                f"work with arithmetic, the elementwise functions of complex analysis, sums, "
                f"products of matrices, the FFTs, part of linalg and the shape functions; "
                f"docs/API.md lists them)")
        if name in _NO_EAGER_JIT or current_trace() is not None or _has_traced(args, kwargs):
            return f(*args, **kwargs)
        return _eager(name, f, args, kwargs)
    wrapper._cjit_complex_wrapped = True
    return wrapper


def _has_traced(args, kwargs):
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, (Tracer, ComplexTracer)):
            return True
        if type(a) in (list, tuple) and any(isinstance(b, (Tracer, ComplexTracer)) for b in a):
            return True
    return False


# Functions that take complex arguments as they are: those that ask for a
# dtype, and those that answer outside jit only, with NumPy's own result
# (_eager_only.py), which holds for complex arrays as well
_AS_THEY_ARE = frozenset({"finfo", "iinfo", "can_cast", "isdtype", "issubdtype", "dtype",
                          "nonzero", "argwhere", "flatnonzero", "unique", "unique_all",
                          "unique_counts", "unique_inverse", "unique_values"})


def install(namespace, names):
    """Wraps the functions `names` of a module's namespace in place."""
    for n in names:
        if n in _AS_THEY_ARE:
            continue
        fn = namespace.get(n)
        if callable(fn) and not isinstance(fn, type) and not getattr(fn, "_cjit_complex_wrapped",
                                                                      False):
            namespace[n] = _wrap(n, fn)


# ---------------------------------------------------------------------------
# eager calls: the implementation under an internal jit per static signature

_eager_jits = {}


def _dynamic(v):
    t = type(v)
    if t is np.ndarray or isinstance(v, np.generic) or t is complex:
        return True
    return (t is list or t is tuple) and len(v) > 0 and all(
        type(b) is np.ndarray or isinstance(b, (np.generic, complex)) for b in v)


# parameters whose concrete array values are static (shapes depend on them)
_STATIC_ARRAYS = {"repeat": (1, "repeats")}


def _eager(name, f, args, kwargs):
    from ..api import Jitted
    if name in _STATIC_ARRAYS:
        pos, kw = _STATIC_ARRAYS[name]
        if len(args) > pos and isinstance(args[pos], np.ndarray):
            args = args[:pos] + (args[pos].tolist(),) + args[pos + 1:]
        if isinstance(kwargs.get(kw), np.ndarray):
            kwargs = dict(kwargs, **{kw: kwargs[kw].tolist()})
    dyn, skel = [], []
    for a in args:
        if _dynamic(a):
            skel.append(("dyn", len(dyn), type(a) is list))
            dyn.append(list(a) if type(a) in (list, tuple) else a)
        else:
            skel.append(("static", a))
    kw = []
    for k in sorted(kwargs):
        v = kwargs[k]
        if _dynamic(v):
            kw.append((k, ("dyn", len(dyn), type(v) is list)))
            dyn.append(list(v) if type(v) in (list, tuple) else v)
        else:
            kw.append((k, ("static", v)))
    key = (name, tuple(skel), tuple(kw))

    def fetch(slot, values):
        return values[slot[1]] if slot[0] == "dyn" else slot[1]

    def run(*values):
        a = [fetch(s, values) for s in skel]
        k = {n: fetch(s, values) for n, s in kw}
        return f(*a, **k)

    try:
        j = _eager_jits.get(key)
    except TypeError:            # an unhashable static argument: no caching
        j, key = None, None
    if j is None:
        j = Jitted(run, _internal=True)
        j._name = f"cjit.numpy.{name}"
        if key is not None:
            if len(_eager_jits) > 512:
                _eager_jits.clear()
            _eager_jits[key] = j
    return j(*dyn)


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
impl("power", "pow")(lambda x1, x2, /, *a, **k: C.power(x1, x2))
def complex_matmul(x1, x2):
    """x1 @ x2.  Two complex matrices (or stacks of them) are one real
    matmul of twice the size: [re | im] interleaved, [m, 2k], times the
    [2k, 2n] matrix whose 2x2 blocks are [[br, bi], [-bi, br]], gives the
    product's interleaved pair, [m, 2n].  One BLAS call with the flops of
    the four real products (which are what mixed and 1-D operands get)."""
    c = _cnp()
    a, b = parts(x1), parts(x2)
    if a[1] is None or b[1] is None or np.ndim(a[0]) < 2 or np.ndim(b[0]) < 2:
        return bilinear(lambda p, q: c.matmul(p, q), x1, x2)
    za, zb = as_complex(x1), as_complex(x2)
    m, k = za.shape[-2:]
    k2, n = zb.shape[-2:]
    if k != k2:
        return bilinear(lambda p, q: c.matmul(p, q), x1, x2)   # the real matmul's error
    lead_a, lead_b = za.shape[:-2], zb.shape[:-2]
    a2 = c.reshape(c.stack([za.re, za.im], axis=-1), lead_a + (m, 2 * k))
    rows = c.stack([c.stack([zb.re, zb.im], axis=-1), c.stack([-zb.im, zb.re], axis=-1)], axis=-3)
    b2 = c.reshape(rows, lead_b + (2 * k, 2 * n))
    prod = c.matmul(a2, b2)
    pair = c.reshape(prod, tuple(prod.shape[:-1]) + (n, 2))
    return make(pair[..., 0], pair[..., 1])


impl("matmul")(lambda x1, x2, /, *a, **k: complex_matmul(x1, x2))
impl("negative")(lambda x, /, *a, **k: -as_complex(x))
impl("positive")(lambda x, /, *a, **k: as_complex(x))
impl("conj", "conjugate")(lambda x, /, *a, **k: as_complex(x).conj())
impl("absolute", "abs")(lambda x, /, *a, **k: C.absolute(x))
impl("angle")(lambda z, deg=False: C.angle(z, deg))
for _n in ("exp", "log", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "square",
           "reciprocal", "isnan", "isinf", "isfinite"):
    impl(_n)(functools.partial(lambda fn, x, /, *a, **k: fn(x), getattr(C, _n)))


@impl("real")
def _real(x, /):
    return parts(x)[0] if not isinstance(x, np.ndarray) else _cnp().asarray(np.real(x))


@impl("imag")
def _imag(x, /):
    return parts(x)[1]


# log, log1p, tan, tanh, expm1, sign, reciprocal: _complex_elementary.py
from . import _complex_elementary as E  # noqa: E402

for _n, _f in (("expm1", E.cexpm1), ("log1p", E.clog1p), ("sign", E.csign)):
    impl(_n)(functools.partial(lambda fn, x, /, *a, **k: fn(x), _f))

_INV_LN10 = 1.0 / math.log(10.0)   # Python floats: weak, so complex64 stays complex64
_INV_LN2 = 1.0 / math.log(2.0)


@impl("log10")
def _log10(x, /):
    w = C.log(x)
    return make(w.re * _INV_LN10, w.im * _INV_LN10)


@impl("log2")
def _log2(x, /):
    w = C.log(x)
    return make(w.re * _INV_LN2, w.im * _INV_LN2)


@impl("where")
def _where(condition, x=None, y=None, /):
    if x is None or y is None:
        raise ValueError("cjit.numpy.where: complex arguments need both x and y")
    return C.where(condition, x, y)


@impl("isclose")
def _isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    c = _cnp()
    d = C.absolute(C.binop("sub", a, b))
    close = d <= atol + rtol * C.absolute(b)
    if equal_nan:
        close = close | (C.isnan(as_complex(a)) & C.isnan(as_complex(b)))
    return close & c.logical_not(C.isinf(as_complex(a)) | C.isinf(as_complex(b))) | \
        (C.binop("eq", a, b) & C.isinf(as_complex(a)))


@impl("allclose")
def _allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return _cnp().all(_isclose(a, b, rtol, atol, equal_nan))


@impl("astype")
def _astype(x, dtype, /, copy=True, *, device=None):
    c = _cnp()
    dt = np.dtype(dtype)
    xr, xi = parts(x)
    if dt.kind == "b":          # nonzero, as NumPy's cast of a complex to bool
        return C.binop("ne", x, 0.0)
    if dt.kind != "c":          # the real part, as NumPy (which warns) and JAX do
        return c.astype(xr, dt)
    pd = C.part_dtype(dt)
    return make(c.astype(xr, pd), c.astype(0.0 * c.asarray(xr) if xi is None else xi, pd))


astype = _astype


# sums, means, reshapes, slices: the same on both parts
_LINEAR = ("sum", "mean", "cumsum", "cumulative_sum", "reshape", "transpose", "permute_dims", "swapaxes",
           "moveaxis", "expand_dims", "squeeze", "broadcast_to", "ravel", "flip", "fliplr",
           "flipud", "roll", "rot90", "diagonal", "diag", "tril", "triu", "repeat", "tile",
           "matrix_transpose", "trace", "diff", "copy", "take", "take_along_axis")
for _n in _LINEAR:
    impl(_n)(functools.partial(lambda name, x, /, *a, **k: linear(getattr(_cnp(), name), x, *a, **k),
                               _n))


@impl("repeat")
def _repeat(x, repeats, axis=None):
    return linear(lambda v: _cnp().repeat(v, repeats, axis=axis), x)


def _pieces(name):
    """split, unstack, ...: the same pieces of both parts, paired up."""
    def f(x, *a, **k):
        c = _cnp()
        z = as_complex(x)
        fn = getattr(c, name)
        res = [make(r, i) for r, i in zip(fn(z.re, *a, **k), fn(z.im, *a, **k))]
        return tuple(res) if name == "unstack" else res
    return f


for _n in ("split", "array_split", "hsplit", "vsplit", "dsplit", "unstack"):
    impl(_n)(_pieces(_n))


@impl("meshgrid")
def _meshgrid(*xi, **kwargs):
    c = _cnp()
    zs = [as_complex(x) for x in xi]
    return [make(r, i) for r, i in zip(c.meshgrid(*[z.re for z in zs], **kwargs),
                                       c.meshgrid(*[z.im for z in zs], **kwargs))]


@impl("broadcast_arrays")
def _broadcast_arrays(*arrays):
    c = _cnp()
    shape = c.broadcast_shapes(*[_shape(a) for a in arrays])
    return [C.linear(lambda v: c.broadcast_to(v, shape), a) if _tree.is_complex(a)
            else c.broadcast_to(a, shape) for a in arrays]


@impl("eye", "identity", eager_jit=False)
def _eye(N, M=None, k=0, dtype=None, *args, **kwargs):
    c = _cnp()
    if dtype is None:
        dtype = kwargs.pop("dtype")
    dt = np.dtype(dtype)
    kwargs.pop("dtype", None)
    if current_trace() is None:
        return np.eye(N, M, k, dtype=dt)
    pd = C.part_dtype(dt)
    re = c.eye(N, M, k, dtype=pd)
    return make(re, re * 0)


@impl("all")
def _all(x, *a, **k):
    return _cnp().all(C.binop("ne", x, 0.0), *a, **k)


@impl("any")
def _any(x, *a, **k):
    return _cnp().any(C.binop("ne", x, 0.0), *a, **k)


@impl("round", "around")
def _round(x, decimals=0, out=None):
    return linear(lambda v: _cnp().round(v, decimals), x)


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
    return _cnp().count_nonzero(C.binop("ne", x, 0.0), *a, **k)


# The inverse functions, on their principal branches (NumPy's cuts):
# _complex_inverse.py
from ._complex_inverse import cacos as _acos, cacosh as _acosh, casin as _asin  # noqa: E402
from ._complex_inverse import casinh as _asinh, catan as _atan, catanh as _atanh  # noqa: E402

for _names, _f in ((("arcsinh", "asinh"), _asinh), (("arcsin", "asin"), _asin),
                   (("arccos", "acos"), _acos), (("arctanh", "atanh"), _atanh),
                   (("arctan", "atan"), _atan), (("arccosh", "acosh"), _acosh)):
    impl(*_names)(functools.partial(lambda fn, x, /, *a, **k: fn(x), _f))


def _sequence(name):
    def f(arrays, *a, **k):
        c = _cnp()
        zs = [as_complex(z) for z in arrays]
        fn = getattr(c, name)
        return make(fn([z.re for z in zs], *a, **k), fn([z.im for z in zs], *a, **k))
    return f


for _n in ("concatenate", "concat", "stack", "hstack", "vstack", "column_stack", "dstack"):
    impl(_n)(_sequence(_n))


@impl("append")
def _append(arr, values, axis=None):
    c = _cnp()
    a, v = as_complex(arr), as_complex(values)
    return make(c.append(a.re, v.re, axis), c.append(a.im, v.im, axis))


def _bilinear_fn(name, conj_first=False):
    def f(a, b, *args, **k):
        fn = getattr(_cnp(), name)
        if conj_first:
            a = as_complex(a).conj()
        return bilinear(lambda p, q: fn(p, q, *args, **k), a, b)
    return f


for _n in ("dot", "inner", "outer", "tensordot", "kron", "cross"):
    impl(_n)(_bilinear_fn(_n))
impl("vecdot")(_bilinear_fn("vecdot", conj_first=True))


@impl("vdot")
def _vdot(a, b):
    return bilinear(lambda p, q: _cnp().vdot(p, q), as_complex(a).conj(), b)


@impl("einsum")
def _einsum(subscripts, *operands, **kwargs):
    c = _cnp()
    if len(operands) == 1:
        return linear(lambda x: c.einsum(subscripts, x, **kwargs), operands[0])
    if len(operands) != 2:
        raise NotImplementedError("cjit.numpy.einsum: complex operands with more than two "
                                  "operands are not supported yet; contract them in pairs")
    return bilinear(lambda p, q: c.einsum(subscripts, p, q, **kwargs), *operands)


@impl("var")
def _var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, *,
         correction=None, mean=None):
    c = _cnp()
    z = as_complex(a)
    d = C.binop("sub", z, c.mean(z, axis=axis, keepdims=True))
    sq = d.re * d.re + d.im * d.im
    ddof = correction if correction is not None else ddof
    n = c.size(sq) if axis is None else int(np.prod([z.shape[i] for i in np.atleast_1d(axis)]))
    return c.sum(sq, axis=axis, keepdims=keepdims) / max(n - ddof, 0)


@impl("std")
def _std(a, *args, **kwargs):
    return _cnp().sqrt(_var(a, *args, **kwargs))


def _creation(name, dtype_pos):
    """zeros/ones/full/empty (and their _like) with a complex dtype."""
    def f(*args, **kwargs):
        c = _cnp()
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
            return c.full(shape, value, dtype=dt)
        fr, fi = parts(value) if not isinstance(value, (int, float)) else (value, 0.0)
        pd = C.part_dtype(dt)
        return make(c.astype(c.broadcast_to(c.asarray(fr), shape), pd),
                    c.astype(c.broadcast_to(c.asarray(fi), shape), pd))
    return f


for _n, _p in (("zeros", 1), ("ones", 1), ("empty", 1), ("full", 2), ("zeros_like", 1),
               ("ones_like", 1), ("empty_like", 1), ("full_like", 2)):
    impl(_n, eager_jit=False)(_creation(_n, _p))


@impl("asarray", eager_jit=False)
def _asarray(a, dtype=None, order=None, *, copy=None, device=None):
    return _complex_array(a, dtype, copy)


@impl("array", eager_jit=False)
def _array(object, dtype=None, copy=True, order="K", ndmin=0):
    return _complex_array(object, dtype, copy)


def _complex_array(a, dtype, copy):
    """asarray/array where a complex value is involved; copy as NumPy's
    outside a trace (a traced value is immutable: a trace ignores it)."""
    c = _cnp()
    if isinstance(a, ComplexTracer):
        return a if dtype is None else _astype(a, dtype)
    if isinstance(a, Tracer):
        return _astype(a, dtype)
    if type(a) in (list, tuple) and _has_traced([a], {}):
        zs = [as_complex(z) if not isinstance(z, (list, tuple)) else _complex_array(z, None, None)
              for z in a]
        r = make(c.stack([z.re for z in zs]), c.stack([z.im for z in zs]))
        return r if dtype is None else _astype(r, dtype)
    outside = current_trace() is None
    from .._dtypes import canonicalize_dtype, requested_dtype
    dtype = requested_dtype(dtype, "asarray")     # complex128 asked for with x64 off: warned, narrowed
    arr = np.asarray(a, dtype=dtype, copy=copy if outside else None)
    if dtype is None and canonicalize_dtype(arr.dtype) != arr.dtype:
        arr = arr.astype(canonicalize_dtype(arr.dtype))   # x64 off: complex64, as JAX (no warning)
    if outside:
        return arr
    if arr.dtype.kind != "c":
        return c.asarray(arr)
    return make(c.asarray(np.ascontiguousarray(arr.real)), c.asarray(np.ascontiguousarray(arr.imag)))


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


@impl("result_type", eager_jit=False)
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
        elif isinstance(x, (type, np.dtype, str)) and C.is_complex_dtype(x):
            reals.append(C.part_dtype(x))
        else:
            reals.append(x)
    r = _cnp().result_type(*reals)
    return C.complex_dtype_of(r) if r.kind == "f" else np.dtype(np.complex128)


# ---------------------------------------------------------------------------
# Tracer operators with a complex operand (the C Tracer calls this)

_OPS = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "pow": "pow",
        "matmul": "matmul", "eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt",
        "ge": "ge"}


def tracer_binop(opname, a, b):
    op = _OPS.get(opname)
    if op is None:
        raise TypeError(f"cjit.numpy: the operation '{opname}' is not defined for complex numbers")
    return C.binop(op, a, b)


# ---------------------------------------------------------------------------
# products of many, and cjit.numpy.linalg

@impl("prod")
def _prod(a, axis=None, dtype=None, out=None, keepdims=False, *args, **kwargs):
    """A product along axes as a tree of pairwise complex products (each
    level halves the axis; an odd element waits for the next level)."""
    c = _cnp()
    z = as_complex(a)
    nd = len(z.shape)
    axes = tuple(range(nd)) if axis is None else tuple(a_ % nd for a_ in np.atleast_1d(axis))
    keep = [d for d in range(nd) if d not in axes]
    z = C.linear(lambda v: c.transpose(v, keep + list(axes)), z)
    lead = tuple(z.shape[:len(keep)])
    n = int(np.prod(z.shape[len(keep):], dtype=np.int64))
    z = C.linear(lambda v: c.reshape(v, lead + (n,)), z)
    if n == 0:
        r = make(c.ones(lead, dtype=z.re.dtype), c.zeros(lead, dtype=z.re.dtype))
    else:
        while z.shape[-1] > 1:
            m = z.shape[-1]
            pairs = C.binop("mul", z[..., 0:m - 1:2], z[..., 1:m:2])
            z = make(c.concatenate([pairs.re, z.re[..., m - 1:]], axis=-1),
                     c.concatenate([pairs.im, z.im[..., m - 1:]], axis=-1)) if m % 2 else pairs
        r = z[..., 0]
    if keepdims:
        r = C.linear(lambda v: c.reshape(v, tuple(1 if d in axes else s
                                                  for d, s in enumerate(a.shape))), r)
    return r


# cjit.numpy.linalg on complex arguments registers itself here
from . import _complex_linalg  # noqa: E402,F401
