"""What grad, jvp, the Jacobians, vmap, lax's control flow and the custom
derivatives share: the float dtypes that have derivatives, argnums
checking, turning an argument's leaf into a node of the trace, the
placeholders a body is traced on, and the words of their messages."""
from __future__ import annotations

import numpy as np

from . import _cjit
from ._concrete import note_abstract
from ._trace_state import user_location

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def argnums_tuple(argnums, who):
    """(tuple of ints, whether a single int was given); TypeError otherwise."""
    if isinstance(argnums, (int, np.integer)) and not isinstance(argnums, bool):
        return (int(argnums),), True
    if isinstance(argnums, (tuple, list)) and argnums and all(
            isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in argnums):
        return tuple(int(a) for a in argnums), False
    raise TypeError(f"{who}: argnums must be an int or a non-empty tuple of ints, got {argnums!r}")


def leaf_node(trace, x, refusal):
    """A Tracer of `trace` for one leaf of an argument: a Tracer as it is, an
    array (or anything with __array__) as a trace array, a Python or NumPy
    scalar as a named scalar node.  Anything else raises TypeError with
    refusal.format(type=<the leaf's type name>)."""
    if isinstance(x, _cjit.Tracer):
        return x
    if isinstance(x, np.ndarray):
        return trace.array(x)
    if isinstance(x, (bool, int, float, np.generic)):
        return trace.apply("name", x, name="")
    if hasattr(x, "__array__"):
        return trace.array(np.asarray(x))
    raise TypeError(refusal.format(type=type(x).__name__))


def aval(t):
    """A traced value's dtype and shape, as messages write them: float32[3,4]."""
    return f"{np.dtype(t.dtype).name}{list(t.shape)}".replace(" ", "")


def at_user():
    """Where in the user's code the message is about."""
    return f"(at {user_location()})"


def placeholders(trace, templates, drop_leading=False):
    """Zeros made before the body's first node, then a `name` of each (the
    placeholders, after `first`): nothing folds a name into a constant."""
    zeros = []
    for t in templates:
        shape = tuple(t.shape[1:]) if drop_leading else tuple(t.shape)
        zeros.append(trace.apply("constant", value=0, dtype=np.dtype(t.dtype).name, shape=shape,
                                 weak=bool(t.weak) and not drop_leading))
    return zeros


def names(trace, zeros):
    """A `name` of each placeholder zero: the values a body is traced on."""
    names = [trace.apply("name", z, name="") for z in zeros]
    note_abstract(trace, names)   # a body's values have no value (grad on values, _concrete.py)
    return names
