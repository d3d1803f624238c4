"""What grad, jvp, the Jacobians and vmap share: the float dtypes that have
derivatives, argnums checking, and turning an argument's leaf into a node
of the trace."""
from __future__ import annotations

import numpy as np

from . import _cjit

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
