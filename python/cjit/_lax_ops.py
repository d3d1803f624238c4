"""jax.lax's operation names (cjit.lax re-exports them): thin spellings of
cjit.numpy and cjit.scipy.special, with lax's conventions where they differ
from NumPy's (`div` and `rem` round toward zero, `clamp(min, x, max)`,
explicit dimensions everywhere), plus `dot_general`, `map` (a scan without
a carry) and `associative_scan` (the log-depth parallel prefix)."""
from __future__ import annotations

import builtins

import numpy as np

from . import _cjit, _tree
from ._control import scan
from ._trace_state import current_trace
from .numpy import _complex
from ._cjit import Tracer
from .scipy import special as _special
from .numpy._creation import (arange, asarray, full as full_, full_like as full_like_, ones_like,
                              zeros_like)
from .numpy import _elementwise as _ew, _math as _m
from .numpy._einsum import einsum
from .numpy._elementwise import (abs as abs_, add as add_, astype, bitwise_not as bitwise_not_,
                                 ceil as ceil_, clip,
                                 cos as cos_, divide, equal, exp as exp_, expm1 as expm1_,
                                 floor as floor_, floor_divide, greater, greater_equal, isfinite,
                                 less, less_equal, log as log_, log1p as log1p_, logical_and,
                                 maximum, minimum, multiply, negative, not_equal, power,
                                 reciprocal, sign as sign_, sin as sin_, sqrt as sqrt_,
                                 square as square_, subtract, tanh as tanh_, where)
from .numpy._gather import take, take_along_axis
from .numpy._linalg import dot as dot_, transpose as transpose_
from .numpy._manipulation import (broadcast_to, concatenate as concatenate_,
                                  expand_dims as expand_dims_, flip, pad as pad_,
                                  reshape as reshape_, squeeze as squeeze_, stack)
from .numpy._math import (arccos, arccosh, arcsin, arcsinh, arctan, arctan2, arctanh,
                          bitwise_and as bitwise_and_,
                          bitwise_or as bitwise_or_, bitwise_xor as bitwise_xor_,
                          conj as conj_, cosh as cosh_, exp2 as exp2_, fmod, imag as imag_,
                          left_shift, logaddexp, real as real_, remainder, right_shift,
                          round as round_, sinh as sinh_, tan as tan_)
from .numpy._reductions import (all as all_, any as any_, argmax as argmax_, argmin as argmin_,
                                cumprod as cumprod_, cumsum as cumsum_, max as max_, min as min_,
                                prod, sum as sum_)
from .numpy._selection import nextafter as nextafter_
from .numpy._sorting import argsort, sort as sort_

# (and first, every elementwise unary primitive's lax name, from the op table: below)
__all__ = [
    "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
    "bitwise_or", "bitwise_xor", "clamp", "cosh", "digamma",
    "div", "eq", "erf", "erfc", "erf_inv", "exp2", "ge", "gt",
    "integer_pow", "le", "lgamma", "logistic", "lt", "max", "min",
    "mul", "ne", "nextafter", "pow", "rem", "round", "rsqrt", "sinh",
    "square", "sub", "tan", "shift_left", "shift_right_logical", "shift_right_arithmetic",
    "convert_element_type", "reshape", "broadcast", "broadcast_in_dim", "expand_dims", "squeeze",
    "transpose", "concatenate", "slice", "slice_in_dim", "index_in_dim", "pad", "rev", "iota",
    "full", "full_like", "reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and",
    "reduce_or", "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "dot",
    "dot_general", "map", "associative_scan", "dynamic_slice", "dynamic_slice_in_dim",
    "dynamic_index_in_dim", "dynamic_update_slice", "dynamic_update_slice_in_dim",
    "dynamic_update_index_in_dim", "sort", "sort_key_val", "top_k", "complex", "real", "imag",
    "conj",
]

# ---- elementwise ------------------------------------------------------------------

# the elementwise unary primitives (csrc/ops_unary.def): lax's name for
# cjit.numpy's function, which _elementwise.py makes from the same table
_UNARY = [r for r in _cjit.op_table() if r["kind"] == "unary" and r.get("lax")]
for _r in _UNARY:
    globals()[_r["lax"]] = getattr(_ew, _r["numpy"], None) or getattr(_m, _r["numpy"])
__all__ = [r["lax"] for r in _UNARY] + [n for n in __all__ if n not in {r["lax"] for r in _UNARY}]
del _r

abs = abs_
acos, acosh, asin, asinh = arccos, arccosh, arcsin, arcsinh
atan, atan2, atanh = arctan, arctan2, arctanh
add, sub, mul, neg, pow = add_, subtract, multiply, negative, power
bitwise_and, bitwise_or, bitwise_xor, bitwise_not = (bitwise_and_, bitwise_or_,
                                                     bitwise_xor_, bitwise_not_)
ceil, floor, cos, cosh, sin, sinh, tan, tanh = (ceil_, floor_, cos_, cosh_, sin_, sinh_,
                                                tan_, tanh_)
exp, exp2, expm1, log, log1p = exp_, exp2_, expm1_, log_, log1p_
sqrt, square, sign, nextafter = sqrt_, square_, sign_, nextafter_
eq, ne, lt, le, gt, ge = (equal, not_equal, less, less_equal, greater,
                          greater_equal)
max, min = maximum, minimum
is_finite = isfinite
shift_left, shift_right_arithmetic = left_shift, right_shift
erf, erfc, erf_inv = _special.erf, _special.erfc, _special.erfinv
lgamma, digamma, logistic = _special.gammaln, _special.digamma, _special.expit


def shift_right_logical(x, y):
    """x >> y filling with zeros, for signed x too (through the unsigned
    dtype of the same width)."""
    x = asarray(x) if not hasattr(x, "dtype") else x
    dt = np.dtype(x.dtype)
    if dt.kind != "i":
        return right_shift(x, y)
    unsigned = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
    u = _bitcast(x, unsigned)
    return _bitcast(right_shift(u, astype(y, unsigned)), dt)


def _bitcast(x, dtype):
    t = current_trace()
    if t is None:
        return np.asarray(x).view(dtype)
    return t.apply("bitcast", x, dtype=np.dtype(dtype).name)


def rsqrt(x):
    """1 / sqrt(x)."""
    return reciprocal(sqrt_(x))


def round(x, rounding_method=0):
    """Rounded to the nearest integer: halves away from zero (lax's default,
    rounding_method 0) or to even (1, NumPy's)."""
    if int(getattr(rounding_method, "value", rounding_method)) == 1:
        return round_(x)
    return where(greater_equal(x, 0), floor_(add_(x, 0.5)),
                     ceil_(subtract(x, 0.5)))


def clamp(min, x, max):
    """x limited to [min, max] (lax's argument order)."""
    return minimum(maximum(x, min), max)


def div(x, y):
    """x / y; on integers rounded toward zero (C's division, not NumPy's
    floor division)."""
    dt = np.result_type(getattr(x, "dtype", type(x)), getattr(y, "dtype", type(y)))
    if dt.kind in "iu":
        q = floor_divide(x, y)
        # floor and truncation differ where the remainder is nonzero and the signs differ
        fix = logical_and(not_equal(remainder(x, y), 0),
                              less(multiply(sign_(x), sign_(y)), 0))
        return where(fix, add_(q, 1), q)
    return divide(x, y)


def rem(x, y):
    """The remainder with the sign of x (C's fmod), as lax.rem."""
    return fmod(x, y)


def integer_pow(x, y):
    """x ** y for a static int y, by repeated multiplication."""
    y = int(y)
    if y == 0:
        return ones_like(x)
    base = x if y > 0 else reciprocal(x)
    result, n = None, builtins.abs(y)
    while n:
        if n & 1:
            result = base if result is None else multiply(result, base)
        n >>= 1
        if n:
            base = multiply(base, base)
    return result


def convert_element_type(operand, new_dtype):
    return astype(operand, new_dtype)


# ---- shapes -----------------------------------------------------------------------

def reshape(operand, new_sizes, dimensions=None):
    """operand (transposed by `dimensions` first, if given) reshaped."""
    if dimensions is not None:
        operand = transpose_(operand, tuple(dimensions))
    return reshape_(operand, tuple(new_sizes))


def broadcast(operand, sizes):
    """operand with new leading dims of the given sizes."""
    shape = tuple(sizes) + tuple(np.shape(operand))
    return broadcast_to(operand, shape)


def broadcast_in_dim(operand, shape, broadcast_dimensions):
    """operand's dim i placed at output dim broadcast_dimensions[i], the
    other output dims broadcast."""
    in_shape = tuple(np.shape(operand))
    if len(broadcast_dimensions) != len(in_shape):
        raise ValueError(f"cjit.lax.broadcast_in_dim: {len(broadcast_dimensions)} "
                         f"broadcast_dimensions for an operand of rank {len(in_shape)}")
    dims = list(broadcast_dimensions)
    if dims != sorted(dims):
        order = sorted(range(len(dims)), key=lambda i: dims[i])
        operand = transpose_(operand, tuple(order))
        in_shape = tuple(in_shape[i] for i in order)
        dims = sorted(dims)
    mid = [1] * len(shape)
    for d, size in zip(dims, in_shape):
        mid[d] = size
    return broadcast_to(reshape_(operand, tuple(mid)), tuple(shape))


def expand_dims(x, dimensions):
    return expand_dims_(x, tuple(dimensions))


def squeeze(array, dimensions):
    return squeeze_(array, tuple(dimensions))


def transpose(operand, permutation):
    return transpose_(operand, tuple(permutation))


def concatenate(operands, dimension):
    return concatenate_(list(operands), axis=dimension)


def slice(operand, start_indices, limit_indices, strides=None):
    """operand[start:limit:stride] along every dim (static bounds)."""
    strides = strides or (1,) * len(start_indices)
    key = tuple(builtins.slice(s, e, st) for s, e, st in zip(start_indices, limit_indices, strides))
    return operand[key]


def slice_in_dim(operand, start_index, limit_index, stride=1, axis=0):
    nd = np.ndim(operand)
    key = [builtins.slice(None)] * nd
    key[axis % nd] = builtins.slice(start_index, limit_index, stride)
    return operand[tuple(key)]


def index_in_dim(operand, index, axis=0, keepdims=True):
    nd = np.ndim(operand)
    key = [builtins.slice(None)] * nd
    key[axis % nd] = builtins.slice(index, index + 1) if keepdims else index
    return operand[tuple(key)]


# ---- sorting (the argsort op) -------------------------------------------------------

def sort(operand, dimension=-1, is_stable=True, num_keys=1):
    """Sorted along `dimension` (always stable); a tuple of operands is
    sorted by its first num_keys, the others carried along."""
    if not isinstance(operand, (tuple, list)):
        return sort_(operand, axis=dimension)
    ops = [asarray(o) for o in operand]
    if num_keys < 1 or num_keys > len(ops):
        raise ValueError(f"cjit.lax.sort: num_keys must be in [1, {len(ops)}], got {num_keys}")
    order = argsort(ops[num_keys - 1], axis=dimension)
    for k in range(num_keys - 2, -1, -1):   # earlier keys sort last (stable), so they decide first
        keyed = take_along_axis(ops[k], order, axis=dimension)
        order = take_along_axis(order, argsort(keyed, axis=dimension), axis=dimension)
    return tuple(take_along_axis(o, order, axis=dimension) for o in ops)


def sort_key_val(keys, values, dimension=-1, is_stable=True):
    return sort((keys, values), dimension, is_stable, 1)


def top_k(operand, k):
    """(the k largest values along the last axis, largest first; their
    int32 indices), ties taken in index order, as lax.top_k."""
    x = asarray(operand)
    if not 0 <= k <= np.shape(x)[-1]:
        raise ValueError(f"cjit.lax.top_k: k={k} is out of range for a last axis of {np.shape(x)[-1]}")
    idx = argsort(x, axis=-1, descending=True)[..., :k]
    return take_along_axis(x, idx, axis=-1), idx.astype("int32")


# ---- slices at traced positions (gathers and scatters) ----------------------------

def _starts(operand, start_indices, sizes, who, allow_negative_indices=True):
    """Each start as lax takes it: a negative one counts from the end of its
    dim once (a signed one, with allow_negative_indices), then it is clamped
    so that the slice fits.  A Python int, or an int64 traced scalar."""
    shape = np.shape(operand)
    if len(start_indices) != len(shape) or len(sizes) != len(shape):
        raise TypeError(f"cjit.lax.{who}: need one start and one size per dimension of an operand of "
                        f"shape {tuple(shape)}")
    out = []
    if isinstance(allow_negative_indices, bool):
        allow_negative_indices = [allow_negative_indices] * len(shape)
    for s, k, n, neg in zip(start_indices, sizes, shape, allow_negative_indices):
        if not 0 <= k <= n:
            raise TypeError(f"cjit.lax.{who}: slice size {k} does not fit a dimension of {n}")
        if np.dtype(s.dtype if hasattr(s, "dtype") else type(s)).kind not in "iu" or np.ndim(s):
            raise TypeError(f"cjit.lax.{who}: each start index must be an integer scalar, got {s!r}")
        if not isinstance(s, Tracer):   # concrete: a Python int
            s = int(s)
            if s < 0 and not neg:
                raise ValueError(f"cjit.lax.{who}: index {s} is out of bounds for a dimension of {n} with "
                                 f"allow_negative_indices=False")
            out.append(builtins.min(builtins.max(s + n if s < 0 else s, 0), n - k))
            continue
        s = asarray(s)
        signed = np.dtype(s.dtype).kind == "i"
        if np.dtype(s.dtype) == np.uint64:   # capped first: 2**63 and up must not turn negative
            s = minimum(s, n)
        s = s.astype("int64")
        if neg and signed:
            s = where(s < 0, s + n, s)
        out.append(clip(s, 0, n - k))
    return out


def dynamic_slice(operand, start_indices, slice_sizes, *, allow_negative_indices=True):
    """operand[start:start+size] along every dim, the starts traced or not
    (a negative start counts from the end, then each is clamped so that the
    slice fits, as lax does)."""
    starts = _starts(operand, start_indices, slice_sizes, "dynamic_slice", allow_negative_indices)
    x = asarray(operand)
    for d, (s, k) in enumerate(zip(starts, slice_sizes)):
        if isinstance(s, int):
            x = slice_in_dim(x, s, s + k, axis=d)
        else:
            x = take(x, s + arange(k), axis=d)
    return x


def dynamic_slice_in_dim(operand, start_index, slice_size, axis=0):
    nd = np.ndim(operand)
    starts = [0] * nd
    sizes = list(np.shape(operand))
    starts[axis % nd], sizes[axis % nd] = start_index, slice_size
    return dynamic_slice(operand, starts, sizes)


def dynamic_index_in_dim(operand, index, axis=0, keepdims=True):
    r = dynamic_slice_in_dim(operand, index, 1, axis)
    return r if keepdims else squeeze_(r, axis % np.ndim(operand))


def dynamic_update_slice(operand, update, start_indices, *, allow_negative_indices=True):
    """operand with update written at start_indices (a negative one counts
    from the end, then each is clamped so that it fits, as lax does): a
    scatter when a start is traced."""
    sizes = np.shape(update)
    starts = _starts(operand, start_indices, sizes, "dynamic_update_slice", allow_negative_indices)
    x = asarray(operand)
    nd = len(sizes)
    if builtins.all(isinstance(s, int) for s in starts):
        key = tuple(builtins.slice(s, s + k) for s, k in zip(starts, sizes))
        if not isinstance(x, Tracer):   # outside a trace: a NumPy copy
            out = np.array(x)
            out[key] = np.asarray(update)
            return out
    else:   # an open mesh of per-dim index arrays, as np.ix_ builds
        key = tuple(reshape_(s + arange(k),
                                (1,) * d + (k,) + (1,) * (nd - d - 1))
                    for d, (s, k) in enumerate(zip(starts, sizes)))
    return x.at[key].set(asarray(update).astype(x.dtype))


def dynamic_update_slice_in_dim(operand, update, start_index, axis):
    nd = np.ndim(operand)
    starts = [0] * nd
    starts[axis % nd] = start_index
    return dynamic_update_slice(operand, update, starts)


def dynamic_update_index_in_dim(operand, update, index, axis):
    nd = np.ndim(operand)
    if np.ndim(update) == nd - 1:
        update = expand_dims_(asarray(update), axis % nd)
    return dynamic_update_slice_in_dim(operand, update, index, axis)


def pad(operand, padding_value, padding_config):
    """Edge padding (lo, hi, interior) per dim; negative lo/hi crop.
    Interior padding is not supported."""
    cfg = [tuple(c) for c in padding_config]
    if any(c[2] for c in cfg):
        raise NotImplementedError("cjit.lax.pad: interior padding is not supported")
    crop = tuple(builtins.slice(-lo if lo < 0 else 0, (n + hi) if hi < 0 else None)
                 for (lo, hi, _), n in zip(cfg, np.shape(operand)))
    operand = operand[crop]
    widths = tuple((builtins.max(lo, 0), builtins.max(hi, 0)) for lo, hi, _ in cfg)
    return pad_(operand, widths, constant_values=padding_value)


def rev(operand, dimensions):
    return flip(operand, tuple(dimensions)) if dimensions else operand


def iota(dtype, size):
    return arange(size, dtype=dtype)


def full(shape, fill_value, dtype=None):
    return full_(tuple(shape) if not isinstance(shape, int) else (shape,), fill_value, dtype)


def full_like(x, fill_value, dtype=None, shape=None):
    return full_like_(x, fill_value, dtype=dtype, shape=shape)


# ---- reductions and scans -------------------------------------------------------------

def reduce_sum(operand, axes):
    return sum_(operand, axis=tuple(axes))


def reduce_prod(operand, axes):
    return prod(operand, axis=tuple(axes))


def reduce_max(operand, axes):
    return max_(operand, axis=tuple(axes))


def reduce_min(operand, axes):
    return min_(operand, axis=tuple(axes))


def reduce_and(operand, axes):
    return all_(operand, axis=tuple(axes))


def reduce_or(operand, axes):
    return any_(operand, axis=tuple(axes))


def argmax(operand, axis, index_dtype):
    return astype(argmax_(operand, axis=axis), index_dtype)


def argmin(operand, axis, index_dtype):
    return astype(argmin_(operand, axis=axis), index_dtype)


def _cum(combine, operand, axis, reverse):
    return associative_scan(combine, operand, reverse=reverse, axis=axis)


def cumsum(operand, axis=0, reverse=False):
    if not reverse:
        return cumsum_(operand, axis=axis)
    return flip(cumsum_(flip(operand, axis), axis=axis), axis)


def cumprod(operand, axis=0, reverse=False):
    if not reverse:
        return cumprod_(operand, axis=axis)
    return flip(cumprod_(flip(operand, axis), axis=axis), axis)


def cummax(operand, axis=0, reverse=False):
    return _cum(maximum, operand, axis, reverse)


def cummin(operand, axis=0, reverse=False):
    return _cum(minimum, operand, axis, reverse)


def cumlogsumexp(operand, axis=0, reverse=False):
    return _cum(logaddexp, operand, axis, reverse)


# ---- contractions -------------------------------------------------------------------------

def dot(lhs, rhs, precision=None, preferred_element_type=None):
    r = dot_(lhs, rhs)
    return r if preferred_element_type is None else astype(r, preferred_element_type)


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """The contraction ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)):
    output dims are the batch dims, then lhs's free dims, then rhs's (lax's
    order), computed as one einsum."""
    (lc, rc), (lb, rb) = dimension_numbers
    ln, rn = np.ndim(lhs), np.ndim(rhs)
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise ValueError("cjit.lax.dot_general: contracting and batch dimensions must pair up")
    letters = iter(_LETTERS)
    ls, rs = [None] * ln, [None] * rn
    for a, b in list(zip(lb, rb)) + list(zip(lc, rc)):
        ls[a] = rs[b] = next(letters)
    for i in range(ln):
        ls[i] = ls[i] or next(letters)
    for i in range(rn):
        rs[i] = rs[i] or next(letters)
    out = [ls[a] for a in lb] + [ls[i] for i in range(ln) if i not in lb and i not in lc] + \
          [rs[i] for i in range(rn) if i not in rb and i not in rc]
    r = einsum(f"{''.join(ls)},{''.join(rs)}->{''.join(out)}", lhs, rhs)
    return r if preferred_element_type is None else astype(r, preferred_element_type)


# ---- map and associative_scan ---------------------------------------------------------

def map(f, xs, *, batch_size=None):
    """[f(x) for x in xs] stacked, as one scan (the body traced once)."""
    if batch_size is not None:
        raise NotImplementedError("cjit.lax.map: batch_size= is not supported")
    _, ys = scan(lambda carry, x: (carry, f(x)), None, xs)
    return ys


def _take_axis(x, start, stop, step, axis):
    key = [builtins.slice(None)] * np.ndim(x)
    key[axis] = builtins.slice(start, stop, step)
    return x[tuple(key)]


def _interleave(evens, odds, axis):
    """e0, o0, e1, o1, ... along axis (evens may have one more)."""
    n_e, n_o = np.shape(evens)[axis], np.shape(odds)[axis]
    if n_e > n_o:
        odds_full = concatenate_([odds, zeros_like(_take_axis(evens, 0, 1, 1, axis))],
                                    axis=axis)
    else:
        odds_full = odds
    both = stack([evens, odds_full], axis=axis + 1)
    shape = list(np.shape(evens))
    shape[axis] = 2 * n_e
    merged = reshape_(both, tuple(shape))
    return _take_axis(merged, 0, n_e + n_o, 1, axis)


def associative_scan(fn, elems, reverse=False, axis=0):
    """Inclusive prefix of an associative fn over axis in O(log n) rounds of
    elementwise work (the Blelloch-style odd/even recursion, as lax's)."""
    leaves, treedef = _tree.flatten(elems)
    if not leaves:
        raise ValueError("cjit.lax.associative_scan: elems has no arrays")
    nd = np.ndim(leaves[0])
    axis = axis % nd
    n = np.shape(leaves[0])[axis]
    if any(np.shape(x)[axis] != n for x in leaves):
        raise ValueError("cjit.lax.associative_scan: every array of elems needs the same length "
                         "along axis")

    def combine(a, b):
        out = fn(_tree.unflatten(treedef, a), _tree.unflatten(treedef, b))
        return _tree.tree_leaves(out)

    def scan_leaves(xs):
        length = np.shape(xs[0])[axis]
        if length < 2:
            return xs
        # pairs reduced, the odd positions' prefix found recursively
        reduced = combine([_take_axis(x, 0, length - 1, 2, axis) for x in xs],
                          [_take_axis(x, 1, None, 2, axis) for x in xs])
        odd = scan_leaves(reduced)
        if length % 2 == 0:
            even = combine([_take_axis(x, 0, -1, 1, axis) for x in odd],
                           [_take_axis(x, 2, None, 2, axis) for x in xs])
        else:
            even = combine([_take_axis(x, 0, None, 1, axis) for x in odd],
                           [_take_axis(x, 2, None, 2, axis) for x in xs])
        even = [concatenate_([_take_axis(x, 0, 1, 1, axis), e], axis=axis)
                for x, e in zip(xs, even)]
        return [_interleave(e, o, axis) for e, o in zip(even, odd)]

    if reverse:
        leaves = [flip(x, axis) for x in leaves]
    out = scan_leaves(leaves)
    if reverse:
        out = [flip(x, axis) for x in out]
    return _tree.unflatten(treedef, out)



# ---- complex numbers (cjit.numpy's pairs of real values) -----------------

def complex(x, y):
    """x + i y of two real arrays of one float dtype (float32 gives
    complex64, float64 complex128), as jax.lax.complex."""
    x, y = asarray(x), asarray(y)
    if np.dtype(x.dtype) != np.dtype(y.dtype) or np.dtype(x.dtype).kind != "f":
        raise TypeError(f"cjit.lax.complex: the parts must be float arrays of one dtype, got "
                        f"{np.dtype(x.dtype).name} and {np.dtype(y.dtype).name}")
    if current_trace() is None and not isinstance(x, _cjit.Tracer) and not isinstance(y, _cjit.Tracer):
        return (np.asarray(x) + 1j * np.asarray(y)).astype(_complex.complex_dtype_of(x.dtype))
    return _complex.make(x, y)


def real(x):
    """The real part of a complex array."""
    return real_(x)


def imag(x):
    """The imaginary part of a complex array."""
    return imag_(x)


def conj(x):
    """The complex conjugate."""
    return conj_(x)
