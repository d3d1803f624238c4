"""Neural network layers with the API of ``jax.example_libraries.stax``.

A layer is a pair ``(init_fun, apply_fun)``:

- ``init_fun(rng, input_shape) -> (output_shape, params)``
- ``apply_fun(params, inputs, **kwargs) -> outputs``

and combinators (``serial``, ``parallel``) build layers out of layers::

    init_fun, predict = stax.serial(stax.Dense(64), stax.Relu, stax.Dense(10), stax.LogSoftmax)
    out_shape, params = init_fun(0, (-1, 784))     # rng: see "Random keys" below
    logits = predict(params, x)

Random keys.  The ``rng`` given to an ``init_fun`` or, as ``rng=``, to an
``apply_fun`` is a ``cjit.random`` key (``random.key(0)`` or
``random.PRNGKey(0)``), as in JAX: it is split with ``cjit.random.split``
as JAX's stax splits it (``serial``'s init: ``rng, layer_rng = split(rng)``
before each layer; its apply and ``parallel``: one ``split(rng, n)``), so
the same key gives the same parameters and masks, and the initializers draw with
``cjit.random`` (JAX's bits), and ``Dropout`` draws its mask inside the
traced function, fused into the layer that reads it.  ``init_fun`` also
takes a NumPy random source, an ``int`` seed or a
``numpy.random.Generator``: splitting it spawns independent NumPy
generators (``SeedSequence.spawn``); an int seed gives the same parameters
every time, a Generator fresh ones at each call; the values are NumPy's.
"""
import functools
import operator

import numpy as np

from .._dtypes import canonicalize_dtype

from .. import nn as _nn
from .. import numpy as cnp

__all__ = [
    "serial", "parallel", "shape_dependent", "Dense", "Relu", "Tanh", "Sigmoid", "Elu", "LeakyRelu",
    "Selu", "Softplus", "Gelu", "Exp", "LogSoftmax", "Softmax", "Flatten", "Identity", "FanOut",
    "FanInSum", "FanInConcat", "Dropout", "elementwise", "glorot_normal", "normal", "zeros",
    "ones", "relu", "sigmoid", "elu", "leaky_relu", "selu", "softplus", "gelu", "log_softmax",
    "logsoftmax", "softmax",
]


# ---- random keys: cjit.random's, or NumPy's for init_fun --------------------------------

def _cjit_random():
    """cjit.random (kept as a function: the initializers ask it lazily)."""
    from .. import random
    return random


def _is_cjit_key(rng):
    random = _cjit_random()
    if isinstance(rng, random.PRNGKeyArray):
        return True
    dt = getattr(rng, "dtype", None)
    shape = getattr(rng, "shape", None)
    return dt == np.uint32 and shape is not None and len(shape) >= 1 and shape[-1] == 2


def _is_numpy_key(rng):
    return isinstance(rng, np.random.Generator) or \
        (isinstance(rng, (int, np.integer)) and not isinstance(rng, bool))


def _bad_key(rng):
    return TypeError(
        f"stax: rng must be a cjit.random key, or for init_fun an int seed or a "
        f"numpy.random.Generator, got {type(rng).__name__}")


def split(rng, num=2):
    """`num` independent keys from `rng` (a list)."""
    if isinstance(rng, np.random.Generator):
        return rng.spawn(num)
    if _is_numpy_key(rng):
        return [np.random.default_rng(s) for s in np.random.SeedSequence(int(rng)).spawn(num)]
    if not _is_cjit_key(rng):
        raise _bad_key(rng)
    return list(_cjit_random().split(rng, num))


def _generator(rng):
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(np.random.SeedSequence(int(rng)))


# ---- initializers (jax.nn.initializers' defaults that stax uses) ----------------------

def _truncated_normal_np(gen, shape, lower=-2.0, upper=2.0):
    """Standard normal samples conditioned on [lower, upper] (rejection)."""
    out = gen.standard_normal(shape)
    bad = (out < lower) | (out > upper)
    while bad.any():
        out[bad] = gen.standard_normal(int(bad.sum()))
        bad = (out < lower) | (out > upper)
    return out


def glorot_normal(in_axis=-2, out_axis=-1, dtype=np.float64):
    """Glorot (Xavier) normal: a normal truncated at two standard deviations,
    scaled to variance 2 / (fan_in + fan_out), as jax.nn.initializers'."""
    # The standard deviation of a standard normal truncated to [-2, 2].
    trunc_std = 0.87962566103423978

    def init(key, shape, dtype=dtype):
        dtype = canonicalize_dtype(dtype)   # x64 off: float32, as JAX's
        shape = tuple(int(d) for d in shape)
        if len(shape) < 2:
            raise ValueError(f"glorot_normal needs a shape of rank 2 or more, got {shape}")
        receptive = int(np.prod([d for i, d in enumerate(shape)
                                 if i not in (in_axis % len(shape), out_axis % len(shape))]))
        fan_in = shape[in_axis] * receptive
        fan_out = shape[out_axis] * receptive
        std = np.sqrt(2.0 / (fan_in + fan_out)) / trunc_std
        if _is_numpy_key(key):
            return (_truncated_normal_np(_generator(key), shape) * std).astype(dtype)
        if not _is_cjit_key(key):
            raise _bad_key(key)
        return _cjit_random().truncated_normal(key, -2.0, 2.0, shape, dtype) * np.array(std, dtype)
    return init


def normal(stddev=1e-2, dtype=np.float64):
    """Normal with mean 0 and standard deviation `stddev`."""
    def init(key, shape, dtype=dtype):
        dtype = canonicalize_dtype(dtype)   # x64 off: float32, as JAX's
        shape = tuple(int(d) for d in shape)
        if _is_numpy_key(key):
            return (_generator(key).standard_normal(shape) * stddev).astype(dtype)
        if not _is_cjit_key(key):
            raise _bad_key(key)
        return _cjit_random().normal(key, shape, dtype) * np.array(stddev, dtype)
    return init


def zeros(key, shape, dtype=np.float64):
    return np.zeros(tuple(int(d) for d in shape), canonicalize_dtype(dtype))


def ones(key, shape, dtype=np.float64):
    return np.ones(tuple(int(d) for d in shape), canonicalize_dtype(dtype))


# ---- activations ------------------------------------------------------------------------

relu = _nn.relu
sigmoid = _nn.sigmoid
gelu = _nn.gelu
softmax = _nn.softmax
log_softmax = logsoftmax = _nn.log_softmax


# elu, leaky_relu, selu and softplus are cjit.nn's, as JAX's stax takes jax.nn's
elu = _nn.elu
leaky_relu = _nn.leaky_relu
selu = _nn.selu
softplus = _nn.softplus


# ---- layers -------------------------------------------------------------------------------

def Dense(out_dim, W_init=glorot_normal(), b_init=normal()):
    """Fully connected: inputs @ W + b, W of shape (input_shape[-1], out_dim)."""
    def init_fun(rng, input_shape):
        output_shape = tuple(input_shape[:-1]) + (out_dim,)
        k1, k2 = split(rng)
        return output_shape, (W_init(k1, (input_shape[-1], out_dim)), b_init(k2, (out_dim,)))

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return cnp.matmul(inputs, W) + b

    return init_fun, apply_fun


def elementwise(fun, **fun_kwargs):
    """A layer without parameters applying `fun` to its input."""
    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        return fun(inputs, **fun_kwargs)

    return init_fun, apply_fun


Tanh = elementwise(cnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(cnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)


def _flatten_layer():
    def init_fun(rng, input_shape):
        return (input_shape[0], functools.reduce(operator.mul, input_shape[1:], 1)), ()

    def apply_fun(params, inputs, **kwargs):
        return cnp.reshape(inputs, (inputs.shape[0], -1))

    return init_fun, apply_fun


Flatten = _flatten_layer()   # a layer, not a function that makes one (as in JAX)


def _identity_layer():
    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        return inputs

    return init_fun, apply_fun


Identity = _identity_layer()


def FanOut(num):
    """Copies its input to `num` outputs (a list)."""
    def init_fun(rng, input_shape):
        return [input_shape] * num, ()

    def apply_fun(params, inputs, **kwargs):
        return [inputs] * num

    return init_fun, apply_fun


def _fan_in_sum_layer():
    def init_fun(rng, input_shape):
        return input_shape[0], ()

    def apply_fun(params, inputs, **kwargs):
        return functools.reduce(operator.add, inputs)

    return init_fun, apply_fun


FanInSum = _fan_in_sum_layer()


def FanInConcat(axis=-1):
    """Concatenates its inputs along `axis`."""
    def init_fun(rng, input_shape):
        ax = axis % len(input_shape[0])
        concat_size = sum(shape[ax] for shape in input_shape)
        out_shape = tuple(input_shape[0][:ax]) + (concat_size,) + tuple(input_shape[0][ax + 1:])
        return out_shape, ()

    def apply_fun(params, inputs, **kwargs):
        return cnp.concatenate(inputs, axis)

    return init_fun, apply_fun


def Dropout(rate, mode="train"):
    """Keeps each input with probability `rate` (JAX's convention: `rate` is
    the probability to keep, not to drop) and scales kept ones by 1/rate;
    ``apply_fun(params, inputs, rng=key)``.  Any mode but 'train' is the
    identity."""
    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        if mode != "train":
            return inputs
        rng = kwargs.get("rng", None)
        if rng is None:
            raise ValueError("stax.Dropout in mode='train' needs a key: apply_fun(params, "
                             "inputs, rng=key), as in JAX")
        keep = _cjit_random().bernoulli(rng, rate, inputs.shape)
        return cnp.where(keep, inputs / rate, 0.0)

    return init_fun, apply_fun


# ---- combinators ------------------------------------------------------------------------------

def serial(*layers):
    """Layers applied one after the other.  Params: a list, one entry per layer."""
    nlayers = len(layers)
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng, input_shape):
        # one split per layer, the first key carried on, as JAX's serial: the
        # same key gives the same parameters
        params = []
        for init in init_funs:
            rng, layer_rng = split(rng)
            input_shape, param = init(layer_rng, input_shape)
            params.append(param)
        return input_shape, params

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.pop("rng", None)
        rngs = _apply_keys(rng, nlayers)
        for fun, param, r in zip(apply_funs, params, rngs):
            inputs = fun(param, inputs, rng=r, **kwargs)
        return inputs

    return init_fun, apply_fun


def parallel(*layers):
    """Layers applied to the matching entries of a sequence of inputs.
    Params: a tuple, one entry per layer."""
    nlayers = len(layers)
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng, input_shape):
        rngs = split(rng, nlayers)
        pairs = [init(r, shape) for init, r, shape in zip(init_funs, rngs, input_shape)]
        return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.pop("rng", None)
        rngs = _apply_keys(rng, nlayers)
        return [f(p, x, rng=r, **kwargs) for f, p, x, r in zip(apply_funs, params, inputs, rngs)]

    return init_fun, apply_fun


def _apply_keys(rng, n):
    """Per-layer keys for an apply_fun: the layers' own splits, or None each."""
    if rng is None:
        return (None,) * n
    return split(rng, n)


def shape_dependent(make_layer):
    """A layer built by `make_layer(input_shape)` at init time; its apply
    rebuilds it from the inputs' shape."""
    def init_fun(rng, input_shape):
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params, inputs, **kwargs):
        return make_layer(inputs.shape)[1](params, inputs, **kwargs)

    return init_fun, apply_fun
