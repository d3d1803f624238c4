"""Shared helpers of cjit.scipy.stats: operands promoted to one float dtype
(NumPy 2's rules, integers and bools to float64), z = (x - loc) / scale."""
from __future__ import annotations

import math

import numpy as np

from ...numpy._core import _common
from ...numpy._core import _lift, _operand
from ...numpy._elementwise import astype, where

LOG_2PI = math.log(2.0 * math.pi)


def floats(who, *xs):
    """The operands as Tracers of one floating dtype."""
    xs = _common([_operand(x, who) for x in xs], who)
    if xs[0].dtype.kind != "f":
        xs = [astype(x, "float64") for x in xs]
    return xs


def standardized(who, x, loc, scale):
    """(z, scale) with z = (x - loc) / scale, all of one float dtype."""
    x, loc, scale = floats(who, x, loc, scale)
    return (x - loc) / scale, scale


def lift(x, who):
    return _lift(_operand(x, who))


def neg_inf_where(cond, value):
    """-inf where cond, value elsewhere."""
    return where(cond, -math.inf, value)


__all__ = ["floats", "standardized", "lift", "neg_inf_where", "LOG_2PI", "np"]
