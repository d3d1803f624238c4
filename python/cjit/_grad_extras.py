"""grad's holomorphic= and allow_int= options, jacobian, linear_transpose,
custom_gradient and closure_convert: JAX's names, built on cjit's vjp,
value_and_grad and custom_vjp.

- holomorphic=True: inputs and the scalar output are complex; the result
  is f'(z), which is the vjp of the cotangent 1 (cjit's vjp, as JAX's, does
  not conjugate a holomorphic function's derivative).
- allow_int=True: integer and bool inputs among the differentiated ones get
  zero gradients of JAX's float0 dtype (NumPy's void dtype of 0 bytes);
  the float leaves are differentiated as usual.
"""
from __future__ import annotations

import functools

import numpy as np

from . import _tree, tree_util
from ._cjit import Tracer
from ._transform_util import argnums_tuple

# JAX's float0: the tangent type of integer and bool values (no data).
float0 = np.dtype([("float0", np.void, 0)])


def _dtype_of(x):
    if isinstance(x, Tracer) or (hasattr(x, "dtype") and hasattr(x, "shape")):
        return np.dtype(x.dtype)   # traced values (complex ones too), arrays
    if isinstance(x, bool):
        return np.dtype(bool)
    if isinstance(x, int):
        return np.dtype(np.int64)
    if isinstance(x, float):
        return np.dtype(np.float64)
    if isinstance(x, complex):
        return np.dtype(np.complex128)
    return np.asarray(x).dtype


def _float0_zeros(x):
    return np.zeros(np.shape(x), float0)


def _splice(args, nums, values):
    a = list(args)
    for i, v in zip(nums, values):
        a[i] = v
    return a


def holomorphic_value_and_grad(fun, argnums, has_aux, who):
    """value_and_grad(fun, holomorphic=True): (value, f'(z)) per argnum."""
    from ._autodiff import vjp
    nums, single = argnums_tuple(argnums, who)

    def vg(*args, **kwargs):
        for i in nums:
            if not -len(args) <= i < len(args):
                raise TypeError(f"{who}: argnums {i} is out of range for a call with "
                                f"{len(args)} positional arguments")
            for x in tree_util.tree_leaves(args[i]):
                if _dtype_of(x).kind != "c":
                    raise TypeError(f"{who} with holomorphic=True requires inputs with complex "
                                    f"dtype, but argument {i} has a leaf of dtype "
                                    f"{_dtype_of(x).name}")

        def part(*diff):
            return fun(*_splice(args, nums, diff), **kwargs)
        res = vjp(part, *[args[i] for i in nums], has_aux=has_aux)
        out, f_vjp = res[0], res[1]
        if np.shape(out) != () or _dtype_of(out).kind != "c":
            raise TypeError(f"{who} with holomorphic=True requires a complex scalar output, "
                            f"got {_dtype_of(out).name}{list(np.shape(out))}")
        g = f_vjp(np.ones((), _dtype_of(out)))
        g = g[0] if single else tuple(g)
        return ((out, res[2]), g) if has_aux else (out, g)
    # on concrete values: one cached internal jit, as plain grad
    from ._autodiff import _traced_or_compiled
    return _traced_or_compiled(fun, vg, nums)


def allow_int_value_and_grad(fun, argnums, has_aux, who, memory_budget):
    """value_and_grad(fun, allow_int=True): float0 zeros for int leaves."""
    from ._autodiff import value_and_grad
    nums, single = argnums_tuple(argnums, who)
    inner_fns = {}   # one differentiated function per (structures, int masks)

    def inner_for(key):
        f = inner_fns.get(key)
        if f is None:
            treedefs, masks = key

            def inner(floats, ints, args, kwargs):
                fi, ii = iter(floats), iter(ints)
                trees = [_tree.unflatten(td, [next(ii) if m else next(fi) for m in mask])
                         for td, mask in zip(treedefs, masks)]
                return fun(*_splice(args, nums, trees), **kwargs)
            f = inner_fns[key] = value_and_grad(inner, 0, has_aux, memory_budget=memory_budget)
        return f

    def vg(*args, **kwargs):
        for i in nums:
            if not -len(args) <= i < len(args):
                raise TypeError(f"{who}: argnums {i} is out of range for a call with "
                                f"{len(args)} positional arguments")
        flat = [tree_util.tree_flatten(args[i]) for i in nums]
        masks = tuple(tuple(_dtype_of(x).kind in "biu" for x in leaves) for leaves, _ in flat)
        floats = tuple(x for (leaves, _), m in zip(flat, masks) for x, k in zip(leaves, m) if not k)
        ints = tuple(x for (leaves, _), m in zip(flat, masks) for x, k in zip(leaves, m) if k)
        rest = tuple(None if i in nums or i - len(args) in nums else a for i, a in enumerate(args))
        if floats:
            value, gf = inner_for((tuple(td for _, td in flat), masks))(floats, ints, rest, kwargs)
        else:   # nothing to differentiate: the value alone
            value = fun(*args, **kwargs)
            gf = ()
        gi = iter(gf)
        trees = []
        for (leaves, td), mask in zip(flat, masks):
            trees.append(tree_util.tree_unflatten(
                td, [_float0_zeros(x) if m else next(gi) for x, m in zip(leaves, mask)]))
        return value, (trees[0] if single else tuple(trees))
    return vg


def jacobian(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    """JAX's jacobian: jacrev."""
    from ._forward import jacrev
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
    from ._autodiff import vjp

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
    from ._custom import custom_vjp

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
