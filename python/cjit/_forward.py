"""cjit.jvp, cjit.linearize, cjit.jacfwd, cjit.jacrev and cjit.hessian.

Forward mode is built by the C core (csrc/jvp.c): the tangents are ordinary
nodes appended to the trace in progress beside the values they are
tangents of, so they fuse with them, and grad of jvp or jvp of grad need
nothing more.  The Jacobians are vmaps (csrc/batching.c) of one jvp or
one vjp over a basis, so a Jacobian is one batched computation, not a
Python loop of them.  On concrete arrays each runs through an internal
``jit`` of itself (cached per function), like ``grad``.
"""
import functools
import threading
import weakref

import numpy as np

from . import _cjit, _tree
from .errors import ConcretizationError
from ._concrete import call_on_values
from ._signature import _output_tracer
from ._trace_state import current_trace
from ._jitted import Jitted
from ._transform_util import FLOATS, argnums_tuple, leaf_node
from ._autodiff import _vjp_traced
from ._vmap import vmap



def _tangent_node(trace, primal, t, who, path):
    """The tangent t of one primal leaf as a Tracer of the primal's shape and dtype."""
    shape = tuple(t.shape) if isinstance(t, _cjit.Tracer) else np.shape(t)
    if shape != tuple(primal.shape):
        raise ValueError(f"{who}: the tangent of {path} has shape {shape}, but its primal has "
                         f"shape {tuple(primal.shape)}; they must match")
    if not isinstance(t, _cjit.Tracer):
        a = np.asarray(t)
        if a.dtype.kind not in "fiub":
            raise TypeError(f"{who}: the tangent of {path} has dtype {a.dtype.name}")
        t = trace.array(np.ascontiguousarray(a, dtype=primal.dtype))
    if t.dtype != primal.dtype:
        if primal.dtype in FLOATS and t.dtype not in FLOATS:
            raise TypeError(f"{who}: the tangent of {path} has dtype {t.dtype.name}, but its "
                            f"primal is {primal.dtype.name}; tangents of floats are floats")
        t = trace.apply("cast", t, dtype=primal.dtype.name)
    return t


def _zeros(trace, like):
    return trace.apply("constant", value=0, dtype=like.dtype.name, shape=tuple(like.shape))


def _jvp_traced(fun, primals, tangents, who, has_aux=False):
    trace = current_trace()
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(f"{who}: primals and tangents must be tuples (one entry per argument), "
                        f"got {type(primals).__name__} and {type(tangents).__name__}")
    if len(primals) != len(tangents):
        raise TypeError(f"{who}: {len(primals)} primals but {len(tangents)} tangents")
    p_leaves, p_def = _tree.flatten(tuple(primals))
    t_leaves, t_def = _tree.flatten(tuple(tangents))
    if p_def != t_def:
        raise TypeError(f"{who}: the tangents must have the structure of the primals {p_def}, "
                        f"got {t_def}")
    paths = _tree.leaf_keypaths(p_def)
    nodes = [leaf_node(trace, x, who + ": primal of type {type}; expected arrays or scalars") for x in p_leaves]
    tans = [_tangent_node(trace, n, t, who, _tree.format_keypath(paths[i], "primals"))
            for i, (n, t) in enumerate(zip(nodes, t_leaves))]
    first = trace.mark()           # everything recorded from here on has tangents
    proxies = [trace.apply("name", n, name="") for n in nodes]
    result = fun(*_tree.unflatten(p_def, proxies))
    aux = None
    if has_aux:
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            raise TypeError(f"{who} with has_aux=True requires the function to return a pair "
                            f"(output, auxiliary data), got {type(result).__name__}")
        result, aux = result
    out_leaves, out_def = _tree.flatten(result)
    outs = [_output_tracer(trace, x, functools.partial(
                lambda i: repr(_tree.format_keypath(_tree.leaf_keypaths(out_def)[i], "result")), i))
            for i, x in enumerate(out_leaves)]
    wrt = [(p, t) for p, t in zip(proxies, tans) if p.dtype in FLOATS]
    touts = trace.jvp([p for p, _ in wrt], [t for _, t in wrt], outs, first)
    touts = [t if t is not None else _zeros(trace, o) for o, t in zip(outs, touts)]
    out = (_tree.unflatten(out_def, outs), _tree.unflatten(out_def, touts))
    return out + (aux,) if has_aux else out


_eager_cache = weakref.WeakKeyDictionary()
_eager_lock = threading.Lock()


def _eager(fun, key, make):
    """An internal Jitted for `fun`, made by make() once per (fun, key)."""
    try:
        with _eager_lock:
            per_fun = _eager_cache.setdefault(fun, {})
            j = per_fun.get(key)
            if j is None:
                j = per_fun[key] = make()
            return j
    except TypeError:           # not weakly referenceable or unhashable
        return make()


def jvp(fun, primals, tangents, has_aux=False):
    """Returns ``(fun(*primals), tangent_out)``: the Jacobian of fun at
    primals times tangents, in forward mode (``aux`` too with has_aux)."""
    who = "cjit.jvp"
    if current_trace() is not None:
        return _jvp_traced(fun, primals, tangents, who, has_aux)
    ref = weakref.ref(fun) if _weakable(fun) else (lambda: fun)
    compiled = _eager(fun, ("jvp", bool(has_aux)), lambda: Jitted(
        lambda p, t: _jvp_traced(ref(), p, t, who, has_aux), _internal=True))
    on_values = _eager(fun, ("jvp-values", bool(has_aux)), lambda: [])
    if not on_values:
        try:
            return compiled(tuple(primals), tuple(tangents))
        except ConcretizationError:
            pass
    # Python control flow on the primals: traced and run on these values
    result = call_on_values(lambda p, t: _jvp_traced(fun, p, t, who, has_aux),
                            (tuple(primals), tuple(tangents)), {}, (0, 1))
    on_values[:] = [True]   # later calls go here directly
    return result


def _weakable(fun):
    try:
        weakref.ref(fun)
        return True
    except TypeError:
        return False


def linearize(fun, *primals):
    """Returns ``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` is the
    Jacobian-vector product at primals.  Each f_jvp call runs one compiled
    jvp (the forward is recomputed inside it and shares its kernels)."""
    out = fun(*primals) if current_trace() is not None else jvp(fun, primals, primals)[0]

    def f_jvp(*tangents):
        return jvp(fun, primals, tangents)[1]
    return out, f_jvp


def _basis(trace, n, shape, dtype):
    """The n x n identity as an (n, *shape) Tracer (an iota comparison, no array)."""
    rows = trace.apply("iota", shape=(n, n), axis=0, dtype="int64")
    cols = trace.apply("iota", shape=(n, n), axis=1, dtype="int64")
    eye = trace.apply("cast", trace.apply("eq", rows, cols), dtype=np.dtype(dtype).name)
    return trace.apply("reshape", eye, shape=(n,) + tuple(shape))


def _move_front_to_back(trace, x, nfront, nback):
    """(a..., b...) with len(a) == nfront -> (b..., a...)."""
    perm = tuple(range(nfront, nfront + nback)) + tuple(range(nfront))
    return trace.apply("transpose", x, perm=perm) if nfront and nback else x


def _diff_leaves(trace, args, nums, who):
    """[(argnum, treedef, [Tracer leaves])] of the differentiated arguments."""
    out = []
    for i in nums:
        if not -len(args) <= i < len(args):
            raise TypeError(f"{who}: argnums {i} is out of range for a call with {len(args)} "
                            "positional arguments")
        leaves, treedef = _tree.flatten(args[i])
        nodes = [leaf_node(trace, x, who + ": primal of type {type}; expected arrays or scalars") for x in leaves]
        for j, t in enumerate(nodes):
            if t.dtype not in FLOATS:
                path = _tree.format_keypath(_tree.leaf_keypaths(treedef)[j], f"argument {i}")
                raise TypeError(f"{who} requires float inputs, but {path} has dtype {t.dtype.name}")
        out.append((i, treedef, nodes))
    return out


def _assemble(out_def, in_parts, blocks, single):
    """The Jacobian pytree: the output's structure, each leaf holding the
    structure of the inputs (a tuple of them for a tuple of argnums)."""
    per_out = []
    for j in range(out_def.num_leaves):
        trees = []
        k = 0
        for _, treedef, nodes in in_parts:
            trees.append(_tree.unflatten(treedef, [blocks[k + m][j] for m in range(len(nodes))]))
            k += len(nodes)
        per_out.append(trees[0] if single else tuple(trees))
    return _tree.unflatten(out_def, per_out)


def _transformed(fun, traced, argnums):
    """Runs `traced` in the trace in progress, or through an internal jit of
    it; outside jit, a trace that needs a value of the arguments (Python
    control flow on them) is run on the values instead (_concrete.py), and
    later calls go there directly."""
    compiled = Jitted(traced, _internal=True)
    route = []     # ["values"] once the compiled route raised ConcretizationError

    @functools.wraps(fun)
    def call(*args, **kwargs):
        if current_trace() is not None:
            return traced(*args, **kwargs)
        if not route:
            try:
                return compiled(*args, **kwargs)
            except ConcretizationError:
                pass
        result = call_on_values(traced, args, kwargs, argnums)
        route[:] = ["values"]
        return result
    call._cjit_compiled = compiled
    return call


def jacfwd(fun, argnums=0, has_aux=False):
    """The Jacobian of fun in forward mode: one jvp per input element,
    batched by vmap.  Each output leaf gets shape ``out.shape + in.shape``."""
    who = "cjit.jacfwd"
    nums, single = argnums_tuple(argnums, who)

    def traced(*args, **kwargs):
        trace = current_trace()
        parts = _diff_leaves(trace, args, nums, who)
        flat = [n for _, _, nodes in parts for n in nodes]

        def f_flat(*leaves):
            a = list(args)
            k = 0
            for i, treedef, nodes in parts:
                a[i] = _tree.unflatten(treedef, list(leaves[k:k + len(nodes)]))
                k += len(nodes)
            return fun(*a, **kwargs)

        blocks, out_def = [], None
        for m, x in enumerate(flat):
            n = int(np.prod(x.shape, dtype=np.int64))
            basis = _basis(trace, n, x.shape, x.dtype)

            def one(t, m=m):
                tans = [t if q == m else _zeros(current_trace(), y) for q, y in enumerate(flat)]
                return _jvp_traced(f_flat, tuple(flat), tuple(tans), who, has_aux)[1]
            tout = vmap(one)(basis)
            t_leaves, out_def = _tree.flatten(tout)
            blocks.append([trace.apply("reshape", _move_front_to_back(trace, t, 1, len(t.shape) - 1),
                                       shape=tuple(t.shape[1:]) + tuple(x.shape)) for t in t_leaves])
        if out_def is None:    # no inputs: nothing to differentiate by
            raise TypeError(f"{who}: the differentiated arguments have no leaves")
        jac = _assemble(out_def, parts, blocks, single)
        return (jac, fun(*args, **kwargs)[1]) if has_aux else jac

    return _transformed(fun, traced, nums)


def jacrev(fun, argnums=0, has_aux=False):
    """The Jacobian of fun in reverse mode: one vjp per output element,
    batched by vmap.  Each output leaf gets shape ``out.shape + in.shape``."""
    who = "cjit.jacrev"
    nums, single = argnums_tuple(argnums, who)

    def traced(*args, **kwargs):
        trace = current_trace()
        parts = _diff_leaves(trace, args, nums, who)
        primals = tuple(_tree.unflatten(treedef, nodes) for _, treedef, nodes in parts)

        def f_diff(*diff):
            a = list(args)
            for (i, _, _), d in zip(parts, diff):
                a[i] = d
            return fun(*a, **kwargs)

        r = _vjp_traced(f_diff, primals, has_aux, who)
        out, vjp_fn = r[0], r[1]
        o_leaves, out_def = _tree.flatten(out)
        o_leaves = [_output_tracer(trace, x, lambda: "result") for x in o_leaves]
        for o in o_leaves:
            if o.dtype not in FLOATS:
                raise TypeError(f"{who} requires float outputs, got dtype {o.dtype.name}")
        per_out = []
        for j, o in enumerate(o_leaves):
            n = int(np.prod(o.shape, dtype=np.int64))
            basis = _basis(trace, n, o.shape, o.dtype)

            def one(ct, j=j):
                cts = [ct if q == j else _zeros(current_trace(), y) for q, y in enumerate(o_leaves)]
                grads = vjp_fn(_tree.unflatten(out_def, cts))
                return [g for g in _tree.tree_leaves(grads)]
            rows = vmap(one)(basis)
            per_out.append([trace.apply("reshape", g, shape=tuple(o.shape) + tuple(g.shape[1:]))
                            for g in rows])
        # blocks[input leaf][output leaf]
        nin = sum(len(nodes) for _, _, nodes in parts)
        blocks = [[per_out[j][m] for j in range(len(o_leaves))] for m in range(nin)]
        jac = _assemble(out_def, parts, blocks, single)
        return (jac, r[2]) if has_aux else jac

    return _transformed(fun, traced, nums)


def hessian(fun, argnums=0, has_aux=False):
    """The Hessian of scalar fun: jacfwd of jacrev (forward over reverse)."""
    return jacfwd(jacrev(fun, argnums, has_aux), argnums, has_aux)
