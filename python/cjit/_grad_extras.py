"""jacobian, linear_transpose, custom_gradient and closure_convert: JAX's
names, built on cjit's vjp, jacrev and custom_vjp (grad's holomorphic= and
allow_int= options are in _autodiff.py, which they call back)."""
from __future__ import annotations

import functools

import numpy as np

from . import tree_util
from ._autodiff import _dtype_of, vjp
from ._cjit import Tracer
from ._custom import custom_vjp
from ._forward import jacrev

def jacobian(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    """JAX's jacobian: jacrev."""
    if holomorphic or allow_int:
        raise NotImplementedError("cjit.jacobian: holomorphic= and allow_int= are not supported "
                                  "(jacrev differentiates real float inputs)")
    return jacrev(fun, argnums=argnums, has_aux=has_aux)


def linear_transpose(fun, *primals, reduce_axes=()):
    """The transpose of the linear function ``fun`` at the shapes and dtypes
    of ``primals`` (arrays or ShapeDtypeStructs): a function taking an output
    cotangent and returning a tuple with one cotangent per primal.  ``fun``
    must be linear; cjit does not check that (a function that is not gives
    its vjp at zero)."""

    def zeros(p):
        return np.zeros(np.shape(p), getattr(p, "dtype", None) or _dtype_of(p))
    example = tree_util.tree_map(zeros, primals)
    out, f_vjp = vjp(fun, *example)
    out_def = tree_util.tree_structure(out)

    def transposed(ct):
        if tree_util.tree_structure(ct) != out_def:
            raise TypeError(f"cjit.linear_transpose: the cotangent has structure "
                            f"{tree_util.tree_structure(ct)}, the function's output {out_def}")
        return tuple(f_vjp(ct))
    return transposed


def custom_gradient(fun):
    """JAX's custom_gradient: ``fun(*args)`` returns ``(value, vjp_fn)`` where
    ``vjp_fn(cotangent)`` gives the cotangents of the arguments (a tuple, or
    one value for one argument).  Built on custom_vjp: the backward pass
    calls ``fun`` again to get ``vjp_fn`` (its forward work is repeated)."""

    @custom_vjp
    def wrapped(*args):
        return fun(*args)[0]

    def fwd(*args):
        return fun(*args)[0], args

    def bwd(args, ct):
        cts = fun(*args)[1](ct)
        if not isinstance(cts, (tuple, list)):
            cts = (cts,)
        return tuple(cts)

    wrapped.defvjp(fwd, bwd)
    return functools.wraps(fun)(lambda *args: wrapped(*args))


def closure_convert(fun, *example_args):
    """``(converted, consts)`` with ``converted(*args, *consts) == fun(*args)``.
    cjit's custom_vjp/custom_jvp accept functions that close over traced
    values, so nothing needs hoisting: consts is empty.  A function whose
    closure (or defaults) holds traced values directly is refused, since
    JAX would hoist those and cjit does not."""
    cells = [c.cell_contents for c in (getattr(fun, "__closure__", None) or ())
             if _cell_full(c)]
    cells += list(getattr(fun, "__defaults__", None) or ())
    if any(isinstance(x, Tracer) for x in tree_util.tree_leaves(cells)):
        raise NotImplementedError(
            "cjit.closure_convert: the function closes over traced values; cjit does not hoist "
            "them into arguments (pass them as arguments instead)")
    n = len(example_args)

    @functools.wraps(fun)
    def converted(*args):
        return fun(*args[:n])
    return converted, []


def _cell_full(c):
    try:
        c.cell_contents
        return True
    except ValueError:
        return False
