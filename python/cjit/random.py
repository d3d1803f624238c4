"""cjit.random: JAX's counter-based random numbers.

A key is two uint32 words.  Every random value is Threefry-2x32 (20 rounds)
of the key and the value's flat index, as `jax.random` computes it with
`jax_threefry_partitionable` (JAX's default since 0.5): element i of a
draw of shape s hashes the 64-bit counter i, split in a high and a low
word, and a 32-bit draw is the xor of the two output words.  So each
element depends on its index alone, and the hash is composed here from
cjit's integer ops (add, xor, rotate, shifts, bit casts): it is evaluated
inside the fused kernel that consumes it, and a dropout mask never goes
through memory.  For the same key, shape and dtype, `bits`, `uniform`,
`randint`, `bernoulli`, `normal`, `truncated_normal`, `gumbel`,
`categorical`, `permutation` and `choice` give JAX's bits exactly (normal
and truncated_normal through cjit/_xla_math.py, XLA's erfinv rounded as
XLA's CPU backend rounds it; gumbel through XLA's log from there too).

Keys come in JAX's two forms: `key(seed)` returns a typed key (a
`PRNGKeyArray`, a registered pytree holding the uint32 words), and
`PRNGKey(seed)` a raw uint32 array of shape (2,).  Every function takes
either and returns keys of the kind it was given.  Both are valid `jit`
arguments, and `key`/`fold_in` accept traced integers.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from ._cjit import Tracer
from ._dtypes import default_float, requested_dtype, x64_enabled
from ._lax_ops import top_k
from ._xla_math import erf32, erf_libm, erfinv_as_xla, fma, xla_log
from .numpy._core import _lift, _op
from .tree_util import register_pytree_node_class
from .numpy._creation import zeros
from .numpy._elementwise import clip, log, logical_and, maximum, where
from .numpy._gather import take
from .numpy._manipulation import reshape, stack
from .numpy._math import isinf
from .numpy._reductions import argmax, cumsum
from .numpy._sorting import argsort, searchsorted
from .scipy.special import erf

__all__ = ["PRNGKeyArray", "key", "PRNGKey", "key_data", "wrap_key_data", "split", "fold_in", "bits",
           "uniform", "normal", "bernoulli", "randint", "categorical", "gumbel", "permutation",
           "truncated_normal", "choice"]

_U32 = np.dtype(np.uint32)
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA          # Threefry's key schedule constant


# ---------------------------------------------------------------------------
# keys

@register_pytree_node_class
class PRNGKeyArray:
    """Typed PRNG keys: an array of keys of shape `shape`, stored as uint32
    words of shape (*shape, 2) (`key_data`)."""

    __slots__ = ("_data",)

    def __init__(self, data):
        self._data = data

    @property
    def shape(self):
        return tuple(self._data.shape[:-1])

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def dtype(self):
        return "key<fry>"

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a single PRNG key")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __getitem__(self, idx):
        if not self.shape:
            raise IndexError("a single PRNG key cannot be indexed")
        if not isinstance(idx, tuple):
            idx = (idx,)
        return PRNGKeyArray(self._data[idx + (slice(None),)])

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def __repr__(self):
        if isinstance(self._data, Tracer):
            return f"PRNGKeyArray(shape={self.shape}, data={self._data!r})"
        # JAX's: the shape and dtype, then the uint32 words as NumPy prints them
        return f"Array({self.shape}, dtype={self.dtype}) overlaying:\n{np.asarray(self._data)}"

    __str__ = __repr__

    def tree_flatten(self):
        return (self._data,), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(children[0])


def key_data(keys):
    """The uint32 words of typed keys (raw keys are returned as they are)."""
    return keys._data if isinstance(keys, PRNGKeyArray) else keys


def wrap_key_data(data):
    """Typed keys holding the uint32 words `data` (shape (..., 2))."""
    data = _as_words(data, "wrap_key_data")
    return PRNGKeyArray(data)


def _as_words(data, who):
    if not isinstance(data, Tracer):
        data = np.asarray(data)
    if data.dtype != _U32 or len(data.shape) == 0 or data.shape[-1] != 2:
        raise TypeError(f"cjit.random.{who}: a key is a typed key from cjit.random.key or a uint32 "
                        f"array of shape (..., 2) from PRNGKey, got {data.dtype}{list(data.shape)}")
    return data


def _unwrap(k, who, single=True):
    """(the uint32 words of key k, whether k was a typed key)."""
    typed = isinstance(k, PRNGKeyArray)
    data = _as_words(k._data if typed else k, who)
    if single and len(data.shape) != 1:
        raise TypeError(f"cjit.random.{who}: takes a single key, got keys of shape "
                        f"{tuple(data.shape[:-1])}; index them or loop over them")
    return data, typed


def _wrap(data, typed):
    return PRNGKeyArray(data) if typed else data


def _seed_words(seed):
    """The key of an integer seed: its 64 bits as two uint32 words (a
    32-bit seed's high word is 0), as JAX's threefry_seed."""
    if isinstance(seed, Tracer):
        return _seed_words_traced(seed)
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer, np.ndarray)):
        raise TypeError(f"cjit.random.key: the seed must be an integer, got {type(seed).__name__}")
    s = np.asarray(seed)
    if s.shape != () or s.dtype.kind not in "iu":
        raise TypeError(f"cjit.random.key: the seed must be a scalar integer, got {s.dtype}{list(s.shape)}")
    if isinstance(seed, int) and not -(1 << 63) <= seed < (1 << 64):
        raise OverflowError(f"cjit.random.key: seed {seed} does not fit in 64 bits")
    v = int(s)
    if s.dtype.itemsize <= 4 or not x64_enabled():
        # x64 off, JAX takes the seed as int32: its high word is 0
        v &= 0xFFFFFFFF
    v &= (1 << 64) - 1
    return np.array([v >> 32, v & 0xFFFFFFFF], dtype=np.uint32)


@_op("seed")
def _seed_words_traced(seed):
    seed = _lift(seed)
    if seed.shape != () or seed.dtype.kind not in "iu":
        raise TypeError(f"cjit.random.key: the seed must be a scalar integer, got "
                        f"{seed.dtype}{list(seed.shape)}")
    low = seed.astype(np.uint32)
    if seed.dtype.itemsize == 8:
        high = seed.trace.apply("shift_right_logical", seed, 32).astype(np.uint32)
    else:
        high = zeros((), np.uint32)
    return stack([high, low])


def key(seed):
    """A typed PRNG key from an integer seed (a Python int, a NumPy
    integer or a traced integer scalar)."""
    return PRNGKeyArray(_seed_words(seed))


def PRNGKey(seed):
    """A raw PRNG key: uint32 words of shape (2,)."""
    return _seed_words(seed)


# ---------------------------------------------------------------------------
# the generator

def _threefry(k0, k1, x0, x1):
    """Threefry-2x32 with 20 rounds of the counters (x0, x1) under the key
    (k0, k1); uint32 values that broadcast together."""
    t = x1.trace
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(_PARITY))
    x0 = x0 + ks[0]
    x1 = x1 + ks[1]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = t.apply("rotate_left", x1, np.uint32(r)) ^ x0
        # the key injection after every four rounds
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + (ks[(i + 2) % 3] + np.uint32(i + 1))
    return x0, x1


def _counter(t, shape):
    """The flat (row-major) index of every element of `shape`, as uint32:
    the low word of JAX's 64-bit counter (the high word is 0)."""
    n = math.prod(shape)
    if n >= 1 << 32:
        raise NotImplementedError(f"cjit.random: a draw of {n} values (2**32 or more) needs 64-bit "
                                  f"counters, which cjit does not have yet")
    if not shape:
        return zeros((), np.uint32)
    idx = None
    stride = 1
    for d in range(len(shape) - 1, -1, -1):
        term = t.apply("iota", shape=shape, axis=d, dtype="uint32")
        if stride != 1:
            term = term * np.uint32(stride)
        idx = term if idx is None else idx + term
        stride *= shape[d]
    return idx


def _words(data, shape):
    """Both Threefry output words for every element of `shape`."""
    data = _lift(data)
    k0, k1 = data[0], data[1]
    return _threefry(k0, k1, zeros((), np.uint32), _counter(data.trace, shape))


def _bits32(data, shape):
    w0, w1 = _words(data, shape)
    return w0 ^ w1


# ---------------------------------------------------------------------------
# keys from keys

@_op("data")
def _split_impl(data, shape):
    w0, w1 = _words(data, shape)
    return stack([w0, w1], axis=len(shape))


def split(key, num=2):
    """`num` new keys (an int or a shape) from one key."""
    data, typed = _unwrap(key, "split")
    shape = _shape(num, "split")
    return _wrap(_split_impl(data, shape), typed)


@_op("data", "value")
def _fold_in_impl(data, value):
    data, value = _lift(data), _lift(value)
    y0, y1 = _threefry(data[0], data[1], zeros((), np.uint32), value.astype(np.uint32))
    return stack([y0, y1])


def fold_in(key, data):
    """A new key from `key` and an integer (traced or not), taken modulo
    2**32 as JAX takes it."""
    words, typed = _unwrap(key, "fold_in")
    if isinstance(data, Tracer):
        if data.shape != () or data.dtype.kind not in "iub":
            raise TypeError(f"cjit.random.fold_in: data must be an integer scalar, got "
                            f"{data.dtype}{list(data.shape)}")
        value = data
    else:
        if isinstance(data, (float, np.floating)) or np.ndim(data) != 0:
            raise TypeError(f"cjit.random.fold_in: data must be an integer scalar, got {data!r}")
        value = np.uint32(operator.index(data) & 0xFFFFFFFF)
    return _wrap(_fold_in_impl(words, value), typed)


# ---------------------------------------------------------------------------
# samplers

def _shape(shape, who):
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        shape = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"cjit.random.{who}: shape must be an int or a tuple of ints, got {shape!r}") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"cjit.random.{who}: negative dimension in shape {shape}")
    return shape


def _float_dtype(dtype, who):
    # the mode's default float; float64 asked for with x64 off: float32, warned
    dt = np.dtype(default_float() if dtype is None else requested_dtype(dtype, f"random.{who}"))
    if dt.kind != "f" or dt.itemsize not in (4, 8):
        raise TypeError(f"cjit.random.{who}: dtype must be float32 or float64, got {dt}")
    return dt.name


@_op("data")
def _bits_impl(data, shape):
    return _bits32(data, shape)


def bits(key, shape=(), dtype=None):
    """Uniformly random uint32 values (JAX's `random.bits`; its uint64 bits,
    drawn from two words each, are not offered yet)."""
    data, _ = _unwrap(key, "bits")
    if dtype is not None and np.dtype(dtype) != _U32:
        raise TypeError(f"cjit.random.bits: dtype must be uint32, got {np.dtype(dtype)}")
    return _bits_impl(data, _shape(shape, "bits"))


def _unit(data, shape, dtype):
    """Uniform values in [0, 1): the top mantissa bits of a random word
    under the exponent of 1.0, minus 1 (JAX's construction)."""
    t = _lift(data).trace
    if dtype == "float32":
        word = (_bits32(data, shape) >> np.uint32(9)) | np.uint32(0x3F800000)
        return t.apply("bitcast", word, dtype="float32") - np.float32(1.0)
    # float64: the 64-bit word is (w0 << 32) | w1; its top 52 bits are
    # (w0 << 20) | (w1 >> 12), built in int64 (cjit has no uint64)
    w0, w1 = _words(data, shape)
    hi = w0.astype(np.int64)
    lo = (w1 >> np.uint32(12)).astype(np.int64)
    word = t.apply("shift_left", hi, np.int64(20)) | lo | np.int64(0x3FF0000000000000)
    return t.apply("bitcast", word, dtype="float64") - 1.0


def _scale(u, minval, maxval, dtype):
    """u in [0, 1) to [minval, maxval), never below minval (JAX's)."""
    lo, hi = _lift(minval).astype(dtype), _lift(maxval).astype(dtype)
    return maximum(lo, fma(u, hi - lo, lo))    # one rounding, as XLA contracts it


@_op("data", "minval", "maxval")
def _uniform_impl(data, shape, dtype, minval, maxval):
    return _scale(_unit(data, shape, dtype), minval, maxval, dtype)


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Uniform values in [minval, maxval) (float64 unless dtype says
    float32: cjit's default float, JAX's with x64)."""
    data, _ = _unwrap(key, "uniform")
    return _uniform_impl(data, _shape(shape, "uniform"), _float_dtype(dtype, "uniform"),
                         _arg(minval), _arg(maxval))


def _arg(v):
    return v if isinstance(v, (Tracer, np.ndarray)) else np.asarray(v)


@_op("data")
def _normal_impl(data, shape, dtype):
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    u = _scale(_unit(data, shape, dtype), lo, np.array(1.0, dtype), dtype)
    return np.array(np.sqrt(2), dtype) * erfinv_as_xla(u)


def normal(key, shape=(), dtype=None):
    """Standard normal values: sqrt(2) erfinv(u) of u uniform in (-1, 1)."""
    data, _ = _unwrap(key, "normal")
    return _normal_impl(data, _shape(shape, "normal"), _float_dtype(dtype, "normal"))


@_op("data", "lower", "upper", "a", "b")
def _truncated_normal_impl(data, shape, dtype, lower, upper, a, b):
    sqrt2 = np.array(np.sqrt(2), dtype)
    lower, upper = _lift(lower).astype(dtype), _lift(upper).astype(dtype)
    if a is None and dtype == "float32":   # XLA's float32 erf, in the graph
        a, b = erf32(lower * _RSQRT2[dtype]), erf32(upper * _RSQRT2[dtype])
    elif a is None:   # traced float64 bounds
        a, b = erf(lower * _RSQRT2[dtype]), erf(upper * _RSQRT2[dtype])
    u = _scale(_unit(data, shape, dtype), a, b, dtype)
    out = sqrt2 * erfinv_as_xla(u)
    # rounding may reach a bound: keep to the open interval, as JAX
    return clip(out, _next(lower, 1), _next(upper, -1))


def _next(x, direction):
    """nextafter(x, direction * inf) through the bits: one step of the
    integer image of x (0 steps to the smallest subnormal, infinities stay)."""
    t = x.trace
    it = "int32" if x.dtype == np.float32 else "int64"
    b = t.apply("bitcast", x, dtype=it)
    away = x > 0 if direction > 0 else x < 0       # the magnitude grows
    r = t.apply("bitcast", where(away, b + 1, b - 1), dtype=x.dtype.name)
    tiny = np.array(direction * np.finfo(x.dtype).smallest_subnormal, x.dtype)
    return where(x == 0, tiny, where(isinf(x), x, r))


# XLA rewrites JAX's bound / sqrt(2) as bound * (1 / sqrt(2)), the reciprocal
# rounded in the dtype; the bounds' erf follows it to keep JAX's bits
_RSQRT2 = {dt: np.array(1, dt) / np.sqrt(2, dtype=dt) for dt in ("float32", "float64")}


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Normal values conditioned on lower < x < upper: sqrt(2) erfinv(u) of
    u uniform in [erf(lower / sqrt 2), erf(upper / sqrt 2)).  float64 bounds
    that are not traced have their erf computed here by the C library's erf
    (which XLA's CPU backend calls too); float32 bounds by XLA's float32
    polynomial, in the graph."""
    data, _ = _unwrap(key, "truncated_normal")
    lower, upper = _arg(lower), _arg(upper)
    if shape is None:
        shape = np.broadcast_shapes(tuple(lower.shape), tuple(upper.shape))
    dt = _float_dtype(dtype, "truncated_normal")
    a = b = None
    if dt == "float64" and not isinstance(lower, Tracer) and not isinstance(upper, Tracer):
        a = erf_libm(lower.astype(dt) * _RSQRT2[dt]).astype(dt)
        b = erf_libm(upper.astype(dt) * _RSQRT2[dt]).astype(dt)
    return _truncated_normal_impl(data, _shape(shape, "truncated_normal"), dt, lower, upper, a, b)


@_op("data", "p")
def _bernoulli_impl(data, shape, p):
    p = _lift(p)
    return _unit(data, shape, p.dtype.name) < p


def bernoulli(key, p=0.5, shape=None):
    """True with probability p (uniform draws of p's float dtype below p)."""
    data, _ = _unwrap(key, "bernoulli")
    p = _arg(p)
    if p.dtype.kind != "f":
        raise TypeError(f"cjit.random.bernoulli: p must have a float dtype, got {p.dtype}")
    shape = tuple(p.shape) if shape is None else _shape(shape, "bernoulli")
    return _bernoulli_impl(data, shape, p)


def _urem(x, y):
    return x - (x // y) * y


@_op("data", "minval", "maxval")
def _randint_impl(data, shape, dtype, minval, maxval):
    info = np.iinfo(dtype)
    minval, maxval = _lift(minval), _lift(maxval)
    # bounds clipped to the dtype; a maxval past its top still reaches it
    out_of_range = maxval > info.max
    lo = clip(minval, max(info.min, np.iinfo(minval.dtype).min), info.max).astype(dtype)
    hi = clip(maxval, max(info.min, np.iinfo(maxval.dtype).min), info.max).astype(dtype)
    keys = _split_impl._cjit_impl(data, (2,))
    higher, lower = _bits32(keys[0], shape), _bits32(keys[1], shape)
    span = (hi - lo).astype(np.uint32)
    span = where(hi <= lo, np.uint32(1), span)
    span = where(logical_and(out_of_range, hi > lo), span + np.uint32(1), span)
    # (higher * 2**32 + lower) mod span, in 32-bit pieces
    multiplier = _urem(np.uint32(1 << 16), span)
    multiplier = _urem(multiplier * multiplier, span)
    offset = _urem(_urem(higher, span) * multiplier + _urem(lower, span), span)
    return lo + offset.astype(dtype)


def randint(key, shape, minval, maxval, dtype=np.int32):
    """Integers uniform in [minval, maxval) of dtype int32 (JAX's default
    int without x64) or uint32."""
    data, _ = _unwrap(key, "randint")
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.int32), _U32):
        raise TypeError(f"cjit.random.randint: dtype must be int32 or uint32, got {dt} (64-bit integers "
                        f"need 64-bit random bits, which cjit does not have yet)")
    minval, maxval = _int_arg(minval, "minval"), _int_arg(maxval, "maxval")
    return _randint_impl(data, _shape(shape, "randint"), dt.name, minval, maxval)


def _int_arg(v, name):
    if isinstance(v, Tracer):
        return v if v.dtype.kind in "iu" else v.astype(np.int64)
    a = np.asarray(v)
    if a.dtype.kind == "b" or a.dtype.kind not in "iuf":
        raise TypeError(f"cjit.random.randint: {name} must be an integer, got {a.dtype}")
    return a.astype(np.int64) if a.dtype.kind == "f" or isinstance(v, int) else a


@_op("data")
def _gumbel_impl(data, shape, dtype):
    tiny = np.finfo(dtype).tiny
    u = _scale(_unit(data, shape, dtype), np.array(tiny, dtype), np.array(1.0, dtype), dtype)
    # the logs as XLA's CPU backend computes them (cjit's own log is within
    # 1 ulp of them, but not bit-equal on about a sixth of the draws)
    return -xla_log(-xla_log(u))


def gumbel(key, shape=(), dtype=None):
    """Standard Gumbel values, -log(-log(u)) of u uniform in [tiny, 1), with
    XLA's log (cjit/_xla_math.py), so the draws have jax.random's bits."""
    data, _ = _unwrap(key, "gumbel")
    return _gumbel_impl(data, _shape(shape, "gumbel"), _float_dtype(dtype, "gumbel"))


@_op("data", "logits")
def _categorical_impl(data, logits, axis, shape):
    logits = _lift(logits)
    batch = tuple(d for i, d in enumerate(logits.shape) if i != axis)
    prefix = shape[:len(shape) - len(batch)]
    full = list(shape[len(shape) - len(batch):])
    full.insert(axis, logits.shape[axis])
    g = _gumbel_impl._cjit_impl(data, (*prefix, *full), logits.dtype.name)
    expanded = reshape(logits, (1,) * len(prefix) + tuple(logits.shape))
    return argmax(g + expanded, axis=len(prefix) + axis)


def categorical(key, logits, axis=-1, shape=None):
    """Indices drawn with probabilities softmax(logits) along axis (the
    Gumbel-max trick, as JAX)."""
    data, _ = _unwrap(key, "categorical")
    logits = _arg(logits)
    if logits.dtype.kind != "f":
        raise TypeError(f"cjit.random.categorical: logits must be floats, got {logits.dtype}")
    nd = len(logits.shape)
    if not -nd <= axis < nd:
        raise ValueError(f"cjit.random.categorical: axis {axis} is out of bounds for logits of "
                         f"dimension {nd}")
    axis = axis % nd
    batch = tuple(d for i, d in enumerate(logits.shape) if i != axis)
    shape = batch if shape is None else _shape(shape, "categorical")
    if shape[len(shape) - len(batch):] != batch or len(shape) < len(batch):
        raise ValueError(f"cjit.random.categorical: shape {shape} must end with the logits' batch "
                         f"shape {batch}")
    return _categorical_impl(data, logits, axis, shape)


def permutation(key, x, axis=0, independent=False):
    """A random permutation of range(x) (an int) or of x's entries along
    axis: JAX's shuffle (ceil(3 ln n / ln(2**32 - 1)) rounds of a stable sort
    by random uint32 keys), traced or not."""
    data, _ = _unwrap(key, "permutation")
    if independent:
        raise NotImplementedError("cjit.random.permutation: independent=True is not supported")
    if isinstance(x, (int, np.integer)):
        arr = np.arange(x)
        axis = 0
    else:
        arr = x if isinstance(x, Tracer) else np.asarray(x)
        if arr.ndim == 0:
            raise TypeError("cjit.random.permutation: x must be an int or an array of at least one "
                            "dimension")
        axis = axis % arr.ndim
    n = arr.shape[axis]
    rounds = int(np.ceil(3 * np.log(max(1, n)) / np.log(np.iinfo(np.uint32).max)))
    k = data
    for _ in range(rounds):
        both = _split_impl(k, (2,))
        k, sub = both[0], both[1]
        arr = take(arr, argsort(_bits_impl(sub, (n,))), axis=axis)
    return arr


def choice(key, a, shape=(), replace=True, p=None, axis=0):
    """Draws from a (an int n stands for arange(n)) along axis, JAX's way:
    uniform indices by randint; with p, the first index whose cumulative
    probability reaches a uniform draw (with replacement) or the top
    len(shape) entries of Gumbel noise plus log p (without); without p and
    without replacement, a prefix of a permutation."""
    _unwrap(key, "choice")
    shape = _shape(shape, "choice")
    arr = a if isinstance(a, Tracer) else np.asarray(a)
    if arr.ndim == 0:
        if isinstance(a, Tracer):
            raise TypeError("cjit.random.choice: a must be an array or a concrete int, not a traced scalar "
                            "(the population size fixes the shapes)")
        n = operator.index(a)
    else:
        axis = operator.index(axis) % arr.ndim
        n = arr.shape[axis]
    draws = math.prod(shape)
    if draws == 0:
        return zeros(shape, dtype=arr.dtype)
    if n <= 0:
        raise ValueError("cjit.random.choice: a must be greater than 0 unless no samples are taken")
    if not replace and draws > n:
        raise ValueError(f"cjit.random.choice: cannot take a larger sample (size {draws}) than the "
                         f"population (size {n}) when replace=False")
    if p is None and replace:
        ind = randint(key, shape, 0, n)
    elif p is None:
        ind = permutation(key, n)[:draws]
    else:
        p = p if isinstance(p, Tracer) else np.asarray(p)
        if not np.issubdtype(p.dtype, np.floating):
            p = p.astype(np.float64)
        if tuple(p.shape) != (n,):
            raise ValueError(f"cjit.random.choice: p must be None or a 1-D vector of a.shape[axis] = {n} "
                             f"entries; p has shape {tuple(p.shape)}")
        if replace:
            cum = cumsum(p)
            r = cum[-1] * (1 - uniform(key, shape, dtype=cum.dtype.name))
            ind = searchsorted(cum, r)
        else:
            g = gumbel(key, (n,), dtype=p.dtype.name) + log(p)
            ind = top_k(g, draws)[1]
    if arr.ndim == 0:
        return reshape(ind, shape)
    out = take(arr, reshape(ind, (-1,)), axis=axis)
    return reshape(out, tuple(arr.shape[:axis]) + shape + tuple(arr.shape[axis + 1:]))

