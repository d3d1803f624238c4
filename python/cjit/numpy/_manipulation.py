"""cjit.numpy's shape functions: reshape, squeeze, concatenate, stack, ..."""
from __future__ import annotations

import numpy as np

from .._dtypes import canonical_dtype
from .._cjit import Tracer
from ._complex_dispatch import complex_aware
from ._core import (_cast, _common, _error, _lift, _norm_axes, _norm_axis, _op, _operand,
                    _reshape_t, _resolve_shape, _shape_arg, _shape_of)

__all__ = ["concat", "unstack", "flip", "fliplr", "flipud", "roll", "moveaxis", "swapaxes",
    "permute_dims", "matrix_transpose", "repeat", "tile", "broadcast_shapes", "broadcast_arrays",
    "split", "array_split", "hsplit", "vsplit", "dsplit", "atleast_1d", "atleast_2d",
    "atleast_3d", "hstack", "vstack", "row_stack", "dstack", "column_stack", "append", "pad",
    "diff", "reshape", "ravel", "expand_dims", "squeeze", "broadcast_to", "concatenate", "stack",
    "shape", "ndim", "size"]


@_op("a")
def reshape(a, shape, order="C", *, copy=None):
    """Same elements in row-major order, new shape (one entry may be -1).
    copy= is the array API's: traced values are immutable, so a reshape is
    never a view anyone could write through and any value is accepted."""
    if order != "C":
        raise NotImplementedError(f"cjit.numpy.reshape: order={order!r}; only 'C' is supported")
    x = _lift(_operand(a, "reshape"))
    return _reshape_t(x, _resolve_shape(x, shape))


@_op("a")
def ravel(a, order="C"):
    """The flattened array (row-major)."""
    if order != "C":
        raise NotImplementedError(f"cjit.numpy.ravel: order={order!r}; only 'C' is supported")
    x = _lift(_operand(a, "ravel"))
    return _reshape_t(x, (x.size,))


@_op("a")
def expand_dims(a, axis):
    """Inserts length-1 axes at the positions `axis` (int or tuple) of the result."""
    x = _lift(_operand(a, "expand_dims"))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out_ndim = x.ndim + len(axes)
    norm = [_norm_axis(ax, out_ndim) for ax in axes]
    if len(set(norm)) != len(norm):
        raise _error(ValueError, "expand_dims", f"repeated axis in {tuple(axes)}", x)
    it = iter(x.shape)
    shape = tuple(1 if i in norm else next(it) for i in range(out_ndim))
    return _reshape_t(x, shape)


@_op("a")
def squeeze(a, axis=None):
    """Removes length-1 axes (all of them, or those in `axis`)."""
    x = _lift(_operand(a, "squeeze"))
    if axis is None:
        shape = tuple(d for d in x.shape if d != 1)
    else:
        axes = _norm_axes(axis, x.ndim)
        for ax in axes:
            if x.shape[ax] != 1:
                raise _error(ValueError, "squeeze", f"cannot select axis {ax} to squeeze out: it "
                             f"has size {x.shape[ax]}, not one", x)
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    return _reshape_t(x, shape)


@_op("array")
def broadcast_to(array, shape):
    """NumPy broadcast_to."""
    x = _lift(_operand(array, "broadcast_to"))
    shape = _shape_arg(shape, "broadcast_to")
    if tuple(x.shape) == shape:
        return x
    return x.trace.apply("broadcast", x, shape=shape)


def _seq_arg(arrays, who):
    if isinstance(arrays, (Tracer, np.ndarray)):
        x = _lift(arrays, who)
        if x.ndim == 0:
            raise TypeError(f"cjit.numpy.{who}: expected a sequence of arrays, got a 0-d array")
        return [x[i] for i in range(x.shape[0])]
    if not isinstance(arrays, (list, tuple)):
        raise TypeError(f"cjit.numpy.{who}: expected a sequence of arrays, got "
                        f"{type(arrays).__name__}")
    return [_operand(x, who) for x in arrays]


@_op(seq=("arrays",))
def concatenate(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    """Joins arrays along an existing axis (axis=None: flattens them first)."""
    if out is not None:
        raise TypeError("cjit.numpy.concatenate: out= is not supported")
    xs = _seq_arg(arrays, "concatenate")
    if not xs:
        raise _error(ValueError, "concatenate", "need at least one array to concatenate")
    if dtype is not None:
        dt = canonical_dtype(dtype)
        xs = [_cast(x, dt) for x in xs]
    else:
        xs = _common(xs, "concatenate")
    if axis is None:
        xs = [_reshape_t(x, (x.size,)) for x in xs]
        ax = 0
    else:
        nd = xs[0].ndim
        if nd == 0:
            raise _error(ValueError, "concatenate", "zero-dimensional arrays cannot be "
                         "concatenated", *xs)
        for i, x in enumerate(xs):
            if x.ndim != nd:
                raise _error(ValueError, "concatenate",
                             f"all the input arrays must have the same number of dimensions, but "
                             f"the array at index 0 has {nd} dimension(s) and the array at index "
                             f"{i} has {x.ndim} dimension(s)", *xs)
        ax = _norm_axis(axis, nd)
    if len(xs) == 1:
        return xs[0]
    return xs[0].trace.apply("concatenate", *xs, axis=ax)


@_op(seq=("arrays",))
def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    """Joins arrays of one shape along a new axis."""
    if out is not None:
        raise TypeError("cjit.numpy.stack: out= is not supported")
    xs = _seq_arg(arrays, "stack")
    if not xs:
        raise _error(ValueError, "stack", "need at least one array to stack")
    shapes = {_shape_of(x) for x in xs}
    if len(shapes) != 1:
        raise _error(ValueError, "stack", "all input arrays must have the same shape", *xs)
    shape = shapes.pop()
    ax = _norm_axis(axis, len(shape) + 1)
    new_shape = shape[:ax] + (1,) + shape[ax:]
    xs = [_reshape_t(_lift(x, "stack"), new_shape) for x in xs]
    return concatenate(xs, axis=ax, dtype=dtype)


def shape(a):
    """The shape of a (works on traced values)."""
    return _shape_of(a)


def ndim(a):
    return len(_shape_of(a))


def size(a, axis=None):
    s = _shape_of(a)
    if axis is not None:
        return s[_norm_axis(axis, len(s))]
    n = 1
    for d in s:
        n *= d
    return n


# ---------------------------------------------------------------------------
# more shape functions (the array API's and NumPy's), all from slice,
# reshape, transpose, broadcast and concatenate

def _slice_axis(x, ax, start, stop, step=1):
    """x[..., start:stop:step, ...] along axis ax (bounds already valid)."""
    n = x.shape[ax]
    if start == 0 and stop == n and step == 1:
        return x
    starts = [0] * x.ndim
    stops = list(x.shape)
    steps = [1] * x.ndim
    length = len(range(start, stop, step))
    if length == 0:
        start, stop, step = 0, 0, 1
    starts[ax], stops[ax], steps[ax] = start, stop, step
    return x.trace.apply("slice", x, start=tuple(starts), stop=tuple(stops), step=tuple(steps))


def _concat_t(xs, ax):
    if len(xs) == 1:
        return xs[0]
    return xs[0].trace.apply("concatenate", *xs, axis=ax)


def concat(arrays, /, *, axis=0):
    """The array API's concatenate."""
    return concatenate(arrays, axis=axis)


@_op("x")
def unstack(x, axis=0):
    """The slices of x along axis, as a tuple."""
    x = _lift(_operand(x, "unstack"))
    ax = _norm_axis(axis, x.ndim)
    shape = tuple(d for i, d in enumerate(x.shape) if i != ax)
    return tuple(_reshape_t(_slice_axis(x, ax, i, i + 1), shape) for i in range(x.shape[ax]))


@_op("m")
def flip(m, axis=None):
    """Reverses the order of elements along axis (None: all axes)."""
    x = _lift(_operand(m, "flip"))
    for ax in _norm_axes(axis, x.ndim):
        n = x.shape[ax]
        if n > 1:
            x = _slice_axis(x, ax, n - 1, -1, -1)
    return x


def fliplr(m):
    return flip(m, 1)


def flipud(m):
    return flip(m, 0)


@_op("a")
def roll(a, shift, axis=None):
    """Elements shifted by `shift` along axis, wrapping around (axis None:
    of the flattened array, reshaped back)."""
    x = _lift(_operand(a, "roll"))
    if axis is None:
        flat = _reshape_t(x, (x.size,))
        return _reshape_t(roll._cjit_impl(flat, shift, 0), tuple(x.shape))
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    if len(shifts) == 1 and len(axes) > 1:
        shifts = shifts * len(axes)
    if len(axes) == 1 and len(shifts) > 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise _error(ValueError, "roll", "shift and axis must have the same length", x)
    for s, ax in zip(shifts, axes):
        ax = _norm_axis(ax, x.ndim)
        n = x.shape[ax]
        if n == 0:
            continue
        s = int(s) % n
        if s:
            x = _concat_t([_slice_axis(x, ax, n - s, n), _slice_axis(x, ax, 0, n - s)], ax)
    return x


@_op("a")
def moveaxis(a, source, destination):
    """Moves axes to new positions, the others keeping their order."""
    x = _lift(_operand(a, "moveaxis"))
    src = [_norm_axis(s, x.ndim) for s in (source if isinstance(source, (tuple, list))
                                            else (source,))]
    dst = [_norm_axis(d, x.ndim) for d in (destination if isinstance(destination, (tuple, list))
                                            else (destination,))]
    if len(src) != len(dst):
        raise _error(ValueError, "moveaxis", "source and destination must have the same "
                     "number of elements", x)
    order = [i for i in range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return _transpose_t(x, tuple(order))


def _transpose_t(x, perm):
    if tuple(perm) == tuple(range(x.ndim)):
        return x
    return x.trace.apply("transpose", x, perm=tuple(perm))


@_op("a")
def swapaxes(a, axis1, axis2):
    """Interchanges two axes."""
    x = _lift(_operand(a, "swapaxes"))
    i, j = _norm_axis(axis1, x.ndim), _norm_axis(axis2, x.ndim)
    perm = list(range(x.ndim))
    perm[i], perm[j] = perm[j], perm[i]
    return _transpose_t(x, perm)


@_op("x")
def permute_dims(x, axes):
    """The array API's transpose with an explicit permutation."""
    x = _lift(_operand(x, "permute_dims"))
    perm = tuple(_norm_axis(a, x.ndim) for a in axes)
    if sorted(perm) != list(range(x.ndim)):
        raise _error(ValueError, "permute_dims", f"axes {tuple(axes)} are not a permutation", x)
    return _transpose_t(x, perm)


@_op("x")
def matrix_transpose(x):
    """Swaps the last two axes."""
    x = _lift(_operand(x, "matrix_transpose"))
    if x.ndim < 2:
        raise _error(ValueError, "matrix_transpose", "needs at least 2 dimensions", x)
    perm = list(range(x.ndim))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return _transpose_t(x, perm)


@_op("a")
def repeat(a, repeats, axis=None):
    """Each element repeated `repeats` times along axis (None: of the
    flattened array); repeats is a concrete int or sequence of ints."""
    x = _lift(_operand(a, "repeat"))
    if axis is None:
        x = _reshape_t(x, (x.size,))
        ax = 0
    else:
        ax = _norm_axis(axis, x.ndim)
    n = x.shape[ax]
    reps = repeats
    if isinstance(reps, (tuple, list)) and len(reps) == 1:
        reps = reps[0]
    if isinstance(reps, (tuple, list)):
        if len(reps) != n:
            raise _error(ValueError, "repeat", f"{len(reps)} repeats for an axis of length {n}",
                         x)
        parts = []
        for i, r in enumerate(reps):
            r = int(r)
            if r < 0:
                raise _error(ValueError, "repeat", "negative repeats", x)
            if r:
                p = _slice_axis(x, ax, i, i + 1)
                shape = list(p.shape)
                shape[ax] = r
                parts.append(_bcast_t(p, tuple(shape)))
        if not parts:
            return _slice_axis(x, ax, 0, 0)
        return _concat_t(parts, ax)
    r = int(reps)
    if r < 0:
        raise _error(ValueError, "repeat", "negative repeats", x)
    shape = tuple(x.shape)
    y = _reshape_t(x, shape[:ax + 1] + (1,) + shape[ax + 1:])
    y = _bcast_t(y, shape[:ax + 1] + (r,) + shape[ax + 1:])
    return _reshape_t(y, shape[:ax] + (n * r,) + shape[ax + 1:])


def _bcast_t(x, shape):
    if tuple(x.shape) == tuple(shape):
        return x
    return x.trace.apply("broadcast", x, shape=tuple(shape))


@_op("A")
def tile(A, reps):
    """A repeated reps times along each axis."""
    x = _lift(_operand(A, "tile"))
    reps = (int(reps),) if not isinstance(reps, (tuple, list)) else tuple(int(r) for r in reps)
    nd = max(x.ndim, len(reps))
    reps = (1,) * (nd - len(reps)) + reps
    shape = (1,) * (nd - x.ndim) + tuple(x.shape)
    x = _reshape_t(x, shape)
    # (r0, d0, r1, d1, ...) broadcast, then merged pairwise
    inter = tuple(v for r, d in zip(reps, shape) for v in (1, d))
    y = _reshape_t(x, inter)
    y = _bcast_t(y, tuple(v for r, d in zip(reps, shape) for v in (r, d)))
    return _reshape_t(y, tuple(r * d for r, d in zip(reps, shape)))


def _broadcast_shapes(shapes, who, ops=()):
    n = max((len(s) for s in shapes), default=0)
    out = [1] * n
    for s in shapes:
        s = (1,) * (n - len(s)) + tuple(s)
        for i, d in enumerate(s):
            if d != out[i] and d != 1 and out[i] != 1:
                raise _error(ValueError, who, "shape mismatch: objects cannot be broadcast to a "
                             "single shape", *ops)
            if d != 1:
                out[i] = d
    return tuple(out)


def broadcast_shapes(*shapes):
    """The shape the given shapes broadcast to."""
    return _broadcast_shapes([tuple(s) for s in shapes], "broadcast_shapes")


@_op(seq=("arrays",))
def _broadcast_arrays(arrays):
    xs = [_lift(_operand(a, "broadcast_arrays"), "broadcast_arrays") for a in arrays]
    shape = _broadcast_shapes([x.shape for x in xs], "broadcast_arrays", xs)
    return tuple(_bcast_t(_reshape_t(x, (1,) * (len(shape) - x.ndim) + tuple(x.shape)), shape)
                 for x in xs)


def broadcast_arrays(*arrays):
    """The arrays broadcast against each other, as a list (the array API
    2023.12's type; JAX's too)."""
    return list(_broadcast_arrays(list(arrays)))


def _split_points(n, indices_or_sections, who, even):
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError(f"cjit.numpy.{who}: number sections must be larger than 0")
        if even and n % k:
            raise ValueError("array split does not result in an equal division")
        q, r = divmod(n, k)
        sizes = [q + 1] * r + [q] * (k - r)
        pts, acc = [], 0
        for s in sizes[:-1]:
            acc += s
            pts.append(acc)
        return pts
    return [int(i) for i in indices_or_sections]


@_op("ary")
def _split(ary, indices_or_sections, axis, even, who):
    x = _lift(_operand(ary, who))
    ax = _norm_axis(axis, x.ndim)
    n = x.shape[ax]
    pts = _split_points(n, indices_or_sections, who, even)
    bounds = [0] + pts + [n]
    out = []
    for b, e in zip(bounds[:-1], bounds[1:]):
        b = min(max(b + n if b < 0 else b, 0), n)
        e = min(max(e + n if e < 0 else e, 0), n)
        out.append(_slice_axis(x, ax, b, max(b, e)))
    return out


def split(ary, indices_or_sections, axis=0):
    """Sub-arrays split at the given indices, or into equal sections."""
    return _split(ary, indices_or_sections if isinstance(indices_or_sections, int)
                  else tuple(indices_or_sections), axis, True, "split")


def array_split(ary, indices_or_sections, axis=0):
    """split, allowing sections of unequal size."""
    return _split(ary, indices_or_sections if isinstance(indices_or_sections, int)
                  else tuple(indices_or_sections), axis, False, "array_split")


def hsplit(ary, indices_or_sections):
    return split(ary, indices_or_sections, axis=1 if len(_shape_of(ary)) > 1 else 0)


def vsplit(ary, indices_or_sections):
    return split(ary, indices_or_sections, axis=0)


def dsplit(ary, indices_or_sections):
    return split(ary, indices_or_sections, axis=2)


def _atleast(x, n):
    x = _lift(_operand(x, "atleast"), "atleast")
    if x.ndim >= n:
        return x
    if n == 1:
        return _reshape_t(x, (1,))
    if n == 2:
        return _reshape_t(x, (1,) * (2 - x.ndim) + tuple(x.shape))
    s = tuple(x.shape)
    return _reshape_t(x, {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}[x.ndim])


def _atleast_fn(n):
    @_op(seq=("arys",))
    def impl(arys):
        r = [_atleast(a, n) for a in arys]
        return r[0] if len(r) == 1 else tuple(r)
    impl.__name__ = f"atleast_{n}d"

    def atleast(*arys):
        return impl(list(arys))
    atleast.__name__ = atleast.__qualname__ = f"atleast_{n}d"
    atleast.__doc__ = f"The inputs as arrays of at least {n} dimension(s)."
    return atleast


atleast_1d, atleast_2d, atleast_3d = _atleast_fn(1), _atleast_fn(2), _atleast_fn(3)


@_op(seq=("tup",))
def hstack(tup, *, dtype=None):
    """Joins along axis 1 (axis 0 for 1-D inputs)."""
    xs = [_atleast(a, 1) for a in tup]
    return concatenate._cjit_impl(xs, axis=0 if xs[0].ndim == 1 else 1, dtype=dtype)


@_op(seq=("tup",))
def vstack(tup, *, dtype=None):
    """Joins along axis 0, 1-D inputs as rows."""
    return concatenate._cjit_impl([_atleast(a, 2) for a in tup], axis=0, dtype=dtype)


row_stack = vstack


@_op(seq=("tup",))
def dstack(tup):
    """Joins along axis 2 (inputs made at least 3-D)."""
    return concatenate._cjit_impl([_atleast(a, 3) for a in tup], axis=2)


@_op(seq=("tup",))
def column_stack(tup):
    """1-D inputs as columns, 2-D inputs as they are, joined along axis 1."""
    xs = []
    for a in tup:
        x = _lift(_operand(a, "column_stack"), "column_stack")
        xs.append(_reshape_t(x, (x.size, 1)) if x.ndim < 2 else x)
    return concatenate._cjit_impl(xs, axis=1)


@_op("arr", "values")
def append(arr, values, axis=None):
    """arr with values appended along axis (None: both flattened)."""
    if axis is None:
        a = _lift(_operand(arr, "append"), "append")
        v = _lift(_operand(values, "append"), "append")
        return concatenate._cjit_impl([_reshape_t(a, (a.size,)), _reshape_t(v, (v.size,))])
    return concatenate._cjit_impl([arr, values], axis=axis)


def _pad_widths(pad_width, nd, who):
    pw = np.asarray(pad_width, dtype=np.int64)
    if pw.ndim == 0:
        pw = np.full((nd, 2), int(pw))
    elif pw.shape == (1,):
        pw = np.full((nd, 2), int(pw[0]))
    elif pw.shape == (2,):
        pw = np.tile(pw, (nd, 1))
    elif pw.shape == (1, 2):
        pw = np.tile(pw[0], (nd, 1))
    if pw.shape != (nd, 2) or (pw < 0).any():
        raise ValueError(f"cjit.numpy.{who}: pad_width {pad_width!r} does not fit {nd} dims")
    return [(int(a), int(b)) for a, b in pw]


@_op("array")
def pad(array, pad_width, mode="constant", constant_values=0, **kwargs):
    """Pads with a constant (mode 'constant') or by repeating the edge values
    (mode 'edge'); pad widths are concrete."""
    if mode not in ("constant", "edge"):
        raise NotImplementedError(f"cjit.numpy.pad: mode={mode!r}; 'constant' and 'edge' are "
                                  f"supported")
    x = _lift(_operand(array, "pad"))
    t = x.trace
    if mode == "constant" and not isinstance(constant_values, (bool, int, float, np.generic)):
        cv = np.asarray(constant_values) if not isinstance(constant_values, Tracer) else None
        if cv is None or cv.ndim != 0:
            raise NotImplementedError("cjit.numpy.pad: constant_values must be one scalar")
        constant_values = cv.item()
    for ax, (before, after) in enumerate(_pad_widths(pad_width, x.ndim, "pad")):
        parts = []
        for width, at_start in ((before, True), (after, False)):
            if width == 0:
                parts.append(None)
                continue
            shape = list(x.shape)
            shape[ax] = width
            if mode == "constant":
                v = t.apply("constant", value=constant_values, dtype=x.dtype.name,
                            shape=tuple(shape), weak=False) if x.dtype.kind != "f" else \
                    t.apply("constant", value=float(constant_values), dtype=x.dtype.name,
                            shape=tuple(shape), weak=False)
            else:
                n = x.shape[ax]
                if n == 0:
                    raise ValueError("cjit.numpy.pad: can't extend empty axis using mode 'edge'")
                edge = _slice_axis(x, ax, 0, 1) if at_start else _slice_axis(x, ax, n - 1, n)
                v = _bcast_t(edge, tuple(shape))
            parts.append(v)
        xs = [p for p in (parts[0], x, parts[1]) if p is not None]
        x = _concat_t(xs, ax)
    return x


@_op("a", "prepend", "append")
def diff(a, n=1, axis=-1, prepend=None, append=None):
    """n-th discrete difference along axis (bools: not-equal, as NumPy)."""
    x = _lift(_operand(a, "diff"))
    ax = _norm_axis(axis, x.ndim)
    extra = []
    for v, first in ((prepend, True), (append, False)):
        if v is None:
            continue
        v = _lift(_operand(v, "diff"), "diff")
        if v.ndim == 0:
            shape = list(x.shape)
            shape[ax] = 1
            v = _bcast_t(v, tuple(shape))
        extra.append((v, first))
    if extra:
        pre = [v for v, f in extra if f]
        post = [v for v, f in extra if not f]
        x = concatenate._cjit_impl(pre + [x] + post, axis=ax)
    t = x.trace
    for _ in range(int(n)):
        m = x.shape[ax]
        if m == 0:
            break
        hi, lo = _slice_axis(x, ax, 1, m), _slice_axis(x, ax, 0, m - 1)
        x = t.apply("ne", hi, lo) if x.dtype == np.dtype(bool) else t.apply("sub", hi, lo)
    return x


# complex arguments: the registry's implementation, or NotImplementedError
# (_complex_dispatch.py; the implementations are registered in _complex_api.py)
complex_aware(globals(), __all__)
