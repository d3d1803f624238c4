"""cjit.nn.initializers: JAX's parameter initializers.  Each factory returns
init(key, shape, dtype) drawing with cjit.random, so for the same key, shape
and dtype the values are JAX's (the arithmetic after the draw is the same)."""
from __future__ import annotations

from ._dtypes import canonicalize_dtype, default_float

import sys

import numpy as np

from . import random as _random

__all__ = ["zeros", "ones", "constant", "uniform", "normal", "truncated_normal",
           "variance_scaling", "glorot_uniform", "glorot_normal", "xavier_uniform",
           "xavier_normal", "he_uniform", "he_normal", "kaiming_uniform", "kaiming_normal",
           "lecun_uniform", "lecun_normal"]

# the standard deviation of a standard normal truncated to [-2, 2]
_TRUNCATED_STD = 0.87962566103423978


def _dtype(dtype):
    # the mode's default float; float64 given with x64 off is float32 (JAX's initializers)
    return canonicalize_dtype(default_float() if dtype is None else dtype)


def zeros(key, shape, dtype=None):
    """All zeros (key unused)."""
    return np.zeros(tuple(shape), _dtype(dtype))


def ones(key, shape, dtype=None):
    """All ones (key unused)."""
    return np.ones(tuple(shape), _dtype(dtype))


def constant(value, dtype=None):
    """init filling with value."""
    def init(key, shape, dtype=dtype):
        return np.full(tuple(shape), value, _dtype(dtype))
    return init


def uniform(scale=1e-2, dtype=None):
    """Uniform in [0, scale)."""
    def init(key, shape, dtype=dtype):
        dt = _dtype(dtype)
        return _random.uniform(key, tuple(shape), dt) * np.array(scale, dt)
    return init


def normal(stddev=1e-2, dtype=None):
    """Normal with mean 0 and standard deviation stddev."""
    def init(key, shape, dtype=dtype):
        dt = _dtype(dtype)
        return _random.normal(key, tuple(shape), dt) * np.array(stddev, dt)
    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    """A normal truncated to [lower, upper] standard deviations, times stddev."""
    def init(key, shape, dtype=dtype):
        dt = _dtype(dtype)
        return _random.truncated_normal(key, lower, upper, tuple(shape), dt) * np.array(stddev, dt)
    return init


def _fans(shape, in_axis, out_axis, batch_axis):
    """fan_in and fan_out of a weight shape: the in and out dims times the
    receptive field (every other dim but the batch ones)."""
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    rank = len(shape)
    in_axes = [a % rank for a in np.atleast_1d(in_axis)]
    out_axes = [a % rank for a in np.atleast_1d(out_axis)]
    batch = [a % rank for a in np.atleast_1d(batch_axis)] if batch_axis != () else []
    receptive = int(np.prod([d for i, d in enumerate(shape) if i not in in_axes + out_axes + batch]))
    fan_in = int(np.prod([shape[a] for a in in_axes])) * receptive
    fan_out = int(np.prod([shape[a] for a in out_axes])) * receptive
    return fan_in, fan_out


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(),
                     dtype=None):
    """Values of variance scale / n, n the fan in, the fan out or their mean
    (mode 'fan_in', 'fan_out', 'fan_avg'), drawn from a truncated normal, a
    normal or a uniform distribution."""
    if mode not in ("fan_in", "fan_out", "fan_avg"):
        raise ValueError(f"cjit.nn.initializers.variance_scaling: mode {mode!r} is not "
                         "'fan_in', 'fan_out' or 'fan_avg'")
    if distribution not in ("truncated_normal", "normal", "uniform"):
        raise ValueError(f"cjit.nn.initializers.variance_scaling: distribution {distribution!r} "
                         "is not 'truncated_normal', 'normal' or 'uniform'")

    def init(key, shape, dtype=dtype):
        shape = tuple(int(d) for d in shape)
        dt = _dtype(dtype)
        fan_in, fan_out = _fans(shape, in_axis, out_axis, batch_axis)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[mode]
        variance = np.array(scale / n, dt)
        if distribution == "truncated_normal":
            std = np.array(np.sqrt(variance) / np.array(_TRUNCATED_STD, dt), dt)
            return _random.truncated_normal(key, -2.0, 2.0, shape, dt) * std
        if distribution == "normal":
            return _random.normal(key, shape, dt) * np.sqrt(variance)
        return _random.uniform(key, shape, dt, -1.0, 1.0) * np.sqrt(3 * variance)
    return init


def glorot_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis, batch_axis, dtype)


def glorot_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


def he_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def he_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


def lecun_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def lecun_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal

# `import cjit.nn.initializers` finds this module
sys.modules.setdefault("cjit.nn.initializers", sys.modules[__name__])
