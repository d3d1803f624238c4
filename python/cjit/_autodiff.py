"""cjit.grad, cjit.value_and_grad and cjit.vjp.

The gradient is built by the C core (csrc/autodiff.c) as ordinary graph
nodes appended to the trace in progress, so it is fused, planned and
compiled like any other computation, and transformations nest:

- inside a trace (``jit(grad(f))``, ``grad(grad(f))``, ``grad`` of a
  function that calls a jitted one), the function is traced into the
  current graph and its gradient appended there;
- called on concrete arrays, the transformation runs through an internal
  ``jit`` of itself, so a repeated call hits the compile cache.

Each differentiated input gets a fresh identity node; only nodes recorded
after it are differentiated, so values computed outside the function (or by
an enclosing ``grad``) are constants for this one.
"""
import functools
import threading
import weakref

import numpy as np

from . import _cjit, _tree, tree_util
from ._cjit import Tracer
from .errors import ConcretizationError
from ._concrete import call_on_values, replayed
from ._transform_util import FLOATS, argnums_tuple, leaf_node
from ._jitted import Jitted
from ._signature import _output_tracer
from ._trace_state import current_trace



def _fun_name(fun):
    return getattr(fun, "__name__", type(fun).__name__)


def _differentiable_inputs(trace, args, argnums, who):
    """Replaces args[i] for i in argnums by fresh identity nodes; returns
    (new args, first node id, [(treedef, [proxies])] per argnum)."""
    args = list(args)
    for i in argnums:
        if not -len(args) <= i < len(args):
            raise TypeError(f"{who}: argnums {i} is out of range for a call with {len(args)} "
                            "positional arguments")
    converted = []
    for i in argnums:
        leaves, treedef = _tree.flatten(args[i])
        nodes = [leaf_node(trace, x, who + ": cannot differentiate with respect to a value of type {type}") for x in leaves]
        for j, t in enumerate(nodes):
            if t.dtype not in FLOATS:
                path = _tree.format_keypath(_tree.leaf_keypaths(treedef)[j], f"argument {i}")
                raise TypeError(f"{who} requires float inputs, but {path} has dtype {t.dtype.name}; "
                                "differentiate with respect to float32 or float64 values "
                                "(or leave the argument out of argnums)")
        converted.append((i, treedef, nodes))
    # everything recorded from here on is differentiated
    first = trace.mark()
    parts = []
    for i, treedef, nodes in converted:
        proxies = [trace.apply("name", t, name="") for t in nodes]
        args[i] = _tree.unflatten(treedef, proxies)
        parts.append((treedef, proxies))
    return args, first, parts


def _scalar_output(trace, out, who):
    if isinstance(out, (bool, int, float, np.generic, np.ndarray)) and np.ndim(out) == 0:
        out = trace.apply("constant", value=float(out), dtype="float64", shape=())
    if _tree.is_complex(out):
        raise TypeError(f"{who} requires a real-valued output, got dtype {out.dtype}; take "
                        f"the real part, the absolute value or a norm (or pass holomorphic=True "
                        f"for a holomorphic function of complex inputs)")
    if not isinstance(out, _cjit.Tracer):
        raise TypeError(f"{who} requires the function to return a scalar array, "
                        f"got {type(out).__name__}")
    if out.shape != ():
        raise TypeError(f"{who} requires a scalar output (shape ()), got shape {out.shape} "
                        f"of dtype {out.dtype.name}; use cjit.vjp for non-scalar outputs")
    if out.dtype not in FLOATS:
        raise TypeError(f"{who} requires a float output, got dtype {out.dtype.name}")
    return out


def _split_aux(result, has_aux, who):
    """(output, aux) of what the differentiated function returned."""
    if not has_aux:
        return result, None
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise TypeError(f"{who} with has_aux=True requires the function to return a pair "
                        f"(output, auxiliary data), got {type(result).__name__}")
    return result[0], result[1]


def _value_and_grad_traced(fun, argnums, single, has_aux, who, args, kwargs, memory_budget=None):
    trace = current_trace()
    args, first, parts = _differentiable_inputs(trace, args, argnums, who)
    result = fun(*args, **kwargs)
    result, aux = _split_aux(result, has_aux, who)
    out = _scalar_output(trace, result, who)
    one = trace.apply("constant", value=1.0, dtype=out.dtype.name, shape=())
    wrt = [p for _, proxies in parts for p in proxies]
    # grad's vjp: the trace carries memory_budget to its jit, and a retrace
    # of the budget's search follows the candidate it carries
    grads = _conj_complex(parts, trace.vjp([out], [one], wrt, first, None, memory_budget or 0))
    trees, k = [], 0
    for treedef, proxies in parts:
        trees.append(_tree.unflatten(treedef, grads[k:k + len(proxies)]))
        k += len(proxies)
    g = trees[0] if single else tuple(trees)
    return ((out, aux), g) if has_aux else (out, g)


def _check_budget(memory_budget, who):
    if memory_budget is None:
        return None
    if isinstance(memory_budget, bool) or not isinstance(memory_budget, (int, np.integer)) \
            or memory_budget <= 0:
        raise TypeError(f"{who}: memory_budget must be a positive number of bytes, "
                        f"got {memory_budget!r}")
    return int(memory_budget)


def _options(who, holomorphic, allow_int, reduce_axes, memory_budget):
    if reduce_axes not in ((), None, []):
        raise NotImplementedError(f"{who}: reduce_axes is not supported (JAX has removed it "
                                  f"too)")
    if holomorphic and allow_int:
        raise TypeError(f"{who}: holomorphic=True and allow_int=True cannot be combined")
    if holomorphic and memory_budget is not None:
        raise TypeError(f"{who}: memory_budget= is not supported with holomorphic=True")


def value_and_grad(fun=None, argnums=0, has_aux=False, holomorphic=False, allow_int=False,
                   reduce_axes=(), *, memory_budget=None):
    """Returns a function computing ``(fun(*args), gradient)``, or
    ``((value, aux), gradient)`` with ``has_aux``.  The gradient has the
    structure of ``args[argnums]`` (a tuple of them for a tuple of argnums).
    ``holomorphic=True``: complex inputs and output, the gradient is f'(z);
    ``allow_int=True``: integer inputs get float0 zeros (allow_int_value_and_grad)."""
    if fun is None:
        return functools.partial(value_and_grad, argnums=argnums, has_aux=has_aux,
                                 holomorphic=holomorphic, allow_int=allow_int,
                                 memory_budget=memory_budget)
    who = "cjit.value_and_grad"
    _options(who, holomorphic, allow_int, reduce_axes, memory_budget)
    budget = _check_budget(memory_budget, who)
    if holomorphic:
        return holomorphic_value_and_grad(fun, argnums, has_aux, who)
    if allow_int:
        return allow_int_value_and_grad(fun, argnums, has_aux, who, budget)
    nums, single = argnums_tuple(argnums, who)

    def traced(*args, **kwargs):
        return _value_and_grad_traced(fun, nums, single, has_aux, who, args, kwargs, budget)

    return _traced_or_compiled(fun, traced, nums)


def grad(fun=None, argnums=0, has_aux=False, holomorphic=False, allow_int=False, reduce_axes=(),
         *, memory_budget=None):
    """Returns a function computing the gradient of scalar-valued ``fun``
    with respect to ``args[argnums]`` (and ``aux`` too with ``has_aux``);
    ``holomorphic`` and ``allow_int`` as in value_and_grad."""
    if fun is None:
        return functools.partial(grad, argnums=argnums, has_aux=has_aux, holomorphic=holomorphic,
                                 allow_int=allow_int, memory_budget=memory_budget)
    who = "cjit.grad"
    _options(who, holomorphic, allow_int, reduce_axes, memory_budget)
    budget = _check_budget(memory_budget, who)
    if holomorphic or allow_int:
        vg = (holomorphic_value_and_grad(fun, argnums, has_aux, who) if holomorphic
              else allow_int_value_and_grad(fun, argnums, has_aux, who, budget))

        @functools.wraps(fun)
        def g_only(*args, **kwargs):
            value, g = vg(*args, **kwargs)
            return (g, value[1]) if has_aux else g
        return g_only
    nums, single = argnums_tuple(argnums, who)

    def traced(*args, **kwargs):
        (value, g) = _value_and_grad_traced(fun, nums, single, has_aux, who, args, kwargs, budget)
        return (g, value[1]) if has_aux else g

    return _traced_or_compiled(fun, traced, nums)


def _traced_or_compiled(fun, traced, argnums):
    """The user-facing function: traces into the trace in progress (inside
    jit or another grad), and on concrete values runs an internal jit of
    itself, so that repeated calls hit the compile cache.

    Outside jit, every argument is concrete, as in JAX: a trace that needs
    a value (a slice bound, an `if`) raises ConcretizationError, and the
    call is then retried with the other arguments' scalars static (see
    _ConcreteCalls), and if that is not enough, on the values themselves
    (_concrete.call_on_values: traced again per call, Python control flow
    decided by this call's values).  The route that worked is remembered
    and taken directly from then on."""
    functools.update_wrapper(traced, fun)
    compiled = Jitted(traced, _internal=True)
    concrete = _ConcreteCalls(traced, argnums)

    def on_values(args, kwargs):
        return call_on_values(traced, args, kwargs, concrete.argnums)

    @functools.wraps(fun)
    def transformed(*args, **kwargs):
        if current_trace() is not None:
            return traced(*args, **kwargs)
        if concrete.route == "values":
            return on_values(args, kwargs)
        if concrete.route == "static":
            try:
                return concrete(args, kwargs)
            except ConcretizationError:
                pass         # these values need more than static scalars
            result = on_values(args, kwargs)
            concrete.route = "values"
            return result
        try:
            return compiled(*args, **kwargs)
        except TypeError as e:
            # ConcretizationError (a TypeError): a value that is concrete in
            # JAX was traced; another TypeError: jit refused a leaf that
            # JAX would pass through untraced (a string, a function).
            concretization = isinstance(e, ConcretizationError)
            if not concretization and not concrete.can_help(args, kwargs, False):
                raise
        if concrete.can_help(args, kwargs, concretization):
            try:
                result = concrete(args, kwargs)
                concrete.route = "static"
                return result
            except ConcretizationError:
                pass
        result = on_values(args, kwargs)
        concrete.route = "values"
        return result

    transformed._cjit_compiled = compiled
    transformed._cjit_concrete = concrete
    return transformed


class _StaticArgs:
    """The arguments of a call that are not differentiated, as a static
    (hashable) jit argument: the structure, and per leaf either a concrete
    value (scalars and hashable objects; keyed by type and value, floats by
    their bits) or a slot for a dynamic leaf (arrays of rank >= 1)."""

    __slots__ = ("positions", "node", "values", "key", "_hash")

    def __init__(self, positions, node, values, key):
        self.positions = positions   # the positional indices of the other arguments
        self.node = node
        self.values = values         # per leaf: a value, or _DYNAMIC
        self.key = key
        self._hash = hash(key)

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return type(other) is _StaticArgs and self.key == other.key

    def __repr__(self):
        return "<arguments outside argnums>"


_DYNAMIC = object()


def _static_leaf(x):
    """(key, value) for a leaf made concrete, or None to keep it dynamic."""
    t = type(x)
    if t is bool or t is int:
        return (t, x), x
    if t is float:
        return (t, np.float64(x).view(np.int64).item()), x   # bits: nan hits, -0.0 != 0.0
    if isinstance(x, np.generic):
        return (x.dtype.str, x.tobytes()), x
    if isinstance(x, np.ndarray):
        if x.ndim != 0:
            return None
        v = np.array(x, copy=True)       # the caller may change theirs later
        v.setflags(write=False)
        return (x.dtype.str, v.tobytes()), v
    if isinstance(x, _cjit.Tracer) or hasattr(x, "__array__"):
        return None
    try:
        hash(x)
    except TypeError:
        return None
    return (t, x), x


def _is_opaque(x):
    """A leaf jit does not accept but a static key can hold (str, a function)."""
    if isinstance(x, (bool, int, float, complex, np.generic, np.ndarray, _cjit.Tracer)) or \
            hasattr(x, "__array__"):
        return False
    return _static_leaf(x) is not None


class _ConcreteCalls:
    """grad/value_and_grad of concrete values with the other arguments'
    scalars static: one internal jit keyed by their values."""

    def __init__(self, traced, argnums):
        self.traced = traced
        self.argnums = argnums
        self.route = None      # None: the compiled route; "static" or "values" (see above)
        self._jitted = None

    def _diff_positions(self, nargs):
        out = []
        for i in self.argnums:
            if not -nargs <= i < nargs:
                return None
            out.append(i % nargs)
        return out

    def can_help(self, args, kwargs, concretization):
        """Whether a retry with concrete other arguments could succeed where
        the traced call raised: there are other arguments, and for an error
        other than ConcretizationError one of their leaves is an object jit
        does not take (hashable, neither a number nor an array)."""
        diff = self._diff_positions(len(args))
        if diff is None:
            return False
        positions = [j for j in range(len(args)) if j not in diff]
        if not positions and not kwargs:
            return False
        leaves = _tree.tree_leaves(([args[j] for j in positions], kwargs))
        if concretization:   # a retry needs something to make static
            return any(_static_leaf(x) is not None for x in leaves)
        return any(_is_opaque(x) for x in leaves)

    def __call__(self, args, kwargs):
        diff = self._diff_positions(len(args))
        if diff is None:   # the traced function reports the bad argnums
            return self.traced(*args, **kwargs)
        positions = tuple(j for j in range(len(args)) if j not in diff)
        leaves, node = _tree.flatten_node(([args[j] for j in positions], kwargs))
        values, keys, dyn = [], [], []
        for x in leaves:
            s = _static_leaf(x)
            if s is None:
                values.append(_DYNAMIC)
                keys.append(None)
                dyn.append(x)
            else:
                keys.append(s[0])
                values.append(s[1])
        static = _StaticArgs(positions, node, tuple(values), (len(args), positions, node,
                                                              tuple(keys)))
        if self._jitted is None:
            self._jitted = Jitted(self._run, static_argnums=(2,), _internal=True)
        return self._jitted(tuple(args[i] for i in diff), dyn, static)

    def _run(self, diff_args, dyn, static):
        it = iter(dyn)
        leaves = [next(it) if v is _DYNAMIC else v for v in static.values]
        others, kwargs = _tree.unflatten(_tree.treedef_of(static.node), leaves)
        nargs = static.key[0]
        args = [None] * nargs
        for j, a in zip(static.positions, others):
            args[j] = a
        for i, a in zip(self._diff_positions(nargs), diff_args):
            args[i] = a
        return self.traced(*args, **kwargs)


def _check_cotangent(out_leaves, out_treedef, ct, who):
    ct_leaves, ct_treedef = _tree.flatten(ct)
    if ct_treedef != out_treedef:
        raise TypeError(f"{who}: the cotangent must have the structure of the output "
                        f"{out_treedef}, got {ct_treedef}")
    for o, c in zip(out_leaves, ct_leaves):
        shape = tuple(np.shape(c)) if not isinstance(c, _cjit.Tracer) else tuple(c.shape)
        dtype = c.dtype if hasattr(c, "dtype") else np.asarray(c).dtype
        if shape != tuple(o.shape):
            raise TypeError(f"{who}: cotangent of shape {shape} for an output of shape "
                            f"{tuple(o.shape)} (dtype {np.dtype(o.dtype).name}); they must match")
        # an output that is not float carries no gradient: its cotangent is ignored
        if (np.dtype(o.dtype) in FLOATS and np.dtype(dtype) not in FLOATS
                and not isinstance(c, (int, float))):
            raise TypeError(f"{who}: the cotangent of a float output must be a float array or a "
                            f"Python scalar, got dtype {np.dtype(dtype).name} for an output of "
                            f"dtype {np.dtype(o.dtype).name}")
    return ct_leaves


def _conj_leaves(treedef, leaves):
    """Complex values are differentiated as pairs of reals; JAX's
    convention for their cotangents (and gradients) is the conjugate of
    the pair's: the imaginary half is negated on the way in and out."""
    mask = _tree.complex_leaf_mask(treedef)
    if not any(mask):
        return leaves
    return [_negate_imag(x) if m and x is not None else x for x, m in zip(leaves, mask)]


def _negate_imag(pair):
    """A real pair (a complex value's parts, interleaved in a last axis of
    2) with its imaginary half negated."""
    if isinstance(pair, _cjit.Tracer):
        return pair * np.array([1.0, -1.0], dtype=pair.dtype)
    a = np.asarray(pair)
    return a * np.array([1.0, -1.0], dtype=a.dtype)


def _conj_complex(parts, grads):
    """grads (in the order of parts' proxies) with complex inputs' conjugated."""
    out, k = [], 0
    for treedef, proxies in parts:
        out.extend(_conj_leaves(treedef, list(grads[k:k + len(proxies)])))
        k += len(proxies)
    return out


def _vjp_traced(fun, primals, has_aux, who):
    trace = current_trace()
    args, first, parts = _differentiable_inputs(trace, primals, tuple(range(len(primals))), who)
    result = fun(*args)
    result, aux = _split_aux(result, has_aux, who)
    out_leaves, out_treedef = _tree.flatten(result)
    # outputs that do not depend on the inputs (NumPy arrays, scalars) become
    # constants of the trace: their cotangents give zero gradients, as in JAX
    outs = [_output_tracer(trace, x, functools.partial(
                lambda i: repr(_tree.format_keypath(_tree.leaf_keypaths(out_treedef)[i],
                                                    "result")), i))
            for i, x in enumerate(out_leaves)]
    out = _tree.unflatten(out_treedef, outs)

    def vjp_fn(cotangent):
        ct_leaves = _check_cotangent(outs, out_treedef, cotangent, who)
        cts = []
        for o, c in zip(outs, ct_leaves):
            if not isinstance(c, _cjit.Tracer):
                c = trace.array(np.asarray(c)) if isinstance(c, np.ndarray) else \
                    trace.apply("constant", value=float(c), dtype=o.dtype.name, shape=())
            if c.dtype != o.dtype:
                c = trace.apply("cast", c, dtype=o.dtype.name)
            cts.append(c)
        cts = _conj_leaves(out_treedef, cts)
        floats = [(o, c) for o, c in zip(outs, cts) if o.dtype in FLOATS]
        wrt = [p for _, proxies in parts for p in proxies]
        grads = _conj_complex(parts, trace.vjp([o for o, _ in floats], [c for _, c in floats],
                                               wrt, first))
        trees, k = [], 0
        for treedef, proxies in parts:
            trees.append(_tree.unflatten(treedef, grads[k:k + len(proxies)]))
            k += len(proxies)
        return tuple(trees)

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


# Eager vjp's compiled functions, per (function, has_aux), so that repeated
# calls hit the compile cache.  Keyed weakly by the function; the jitted
# functions reach it through a weak reference too (a strong one from the
# value would keep the key alive forever).
_eager_vjp_cache = weakref.WeakKeyDictionary()
_eager_vjp_lock = threading.Lock()


def _eager_vjp_jits(fun, has_aux, who):
    """(forward, backward) internal Jitteds for an eager vjp of fun."""
    def make(call_fun):
        def forward(*ps):
            return call_fun()(*ps)

        def backward(ps, ct):
            traced = _vjp_traced(call_fun(), ps, has_aux, who)
            return traced[1](ct)
        return Jitted(forward, _internal=True), Jitted(backward, _internal=True)

    try:
        ref = weakref.ref(fun)
    except TypeError:       # not weakly referenceable: compiled per call
        return make(lambda: fun)
    with _eager_vjp_lock:
        try:
            per_fun = _eager_vjp_cache.setdefault(fun, {})
        except TypeError:   # unhashable callable
            return make(lambda: fun)
        pair = per_fun.get(has_aux)
        if pair is None:
            pair = per_fun[has_aux] = make(ref)
    return pair


def _eager_vjp_route(fun):
    """A list, per function, that holds True once its vjp needed values
    (later calls go to the values directly); a fresh one when fun cannot be
    a weak key."""
    with _eager_vjp_lock:
        try:
            return _eager_vjp_cache.setdefault(fun, {}).setdefault("values", [])
        except TypeError:
            return []


def _vjp_inside_trace(fun, primals, ct, has_aux, who):
    """vjp_fn(ct) of a function whose Python control flow needed its values,
    called inside a trace (``jit(vjp_fn)``, where JAX's vjp_fn is a linear
    function of its residuals): the forward is run once more on the values,
    recording what it asked, then traced into the enclosing trace with the
    primals as constants and those answers, so that it takes the same
    branches; the backward pass is appended there."""
    decisions = []
    call_on_values(fun, primals, {}, tuple(range(len(primals))), record=decisions)
    traced = replayed(current_trace(), decisions, _vjp_traced, fun, primals, has_aux, who)
    return traced[1](ct)


def vjp(fun, *primals, has_aux=False):
    """Returns ``(fun(*primals), vjp_fn)`` (plus ``aux`` with ``has_aux``);
    ``vjp_fn(cotangent)`` returns a tuple with one gradient per primal."""
    who = "cjit.vjp"
    if current_trace() is not None:
        return _vjp_traced(fun, primals, has_aux, who)

    # On concrete values: the forward runs compiled now, and each vjp_fn
    # call runs one compiled function that recomputes the forward and
    # appends the backward (cached per function and signature).  Python
    # control flow on the primals: both run on the values (_concrete.py).
    forward, backward_compiled = _eager_vjp_jits(fun, bool(has_aux), who)
    on_values = _eager_vjp_route(fun)
    result = None
    if not on_values:
        try:
            result = forward(*primals)
        except ConcretizationError:
            on_values[:] = [True]
    if on_values:
        result = call_on_values(fun, primals, {}, tuple(range(len(primals))))

        def backward_compiled(ps, ct):
            if current_trace() is not None:
                return _vjp_inside_trace(fun, ps, ct, has_aux, who)
            return call_on_values(lambda p, c: _vjp_traced(fun, p, has_aux, who)[1](c),
                                  (ps, ct), {}, (0, 1))
    out, aux = (result if has_aux else (result, None))
    out_leaves, out_treedef = _tree.flatten(out)

    def vjp_fn(cotangent):
        assert fun is not None   # holds fun, so the cached backward lives as long as vjp_fn
        outs = [np.asarray(o) for o in out_leaves]
        ct_leaves = _check_cotangent(outs, out_treedef, cotangent, who)
        # Python scalars become arrays of the output's dtype here: traced, they
        # would be int64 or weak values that the check above already allowed
        ct_leaves = [np.asarray(c, dtype=o.dtype) if isinstance(c, (int, float)) else c
                     for o, c in zip(outs, ct_leaves)]
        return backward_compiled(tuple(primals), _tree.unflatten(out_treedef, ct_leaves))

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


# ---------------------------------------------------------------------------
# grad's holomorphic= and allow_int= options
#
# - holomorphic=True: inputs and the scalar output are complex; the result
#   is f'(z), which is the vjp of the cotangent 1 (cjit's vjp, as JAX's, does
#   not conjugate a holomorphic function's derivative).
# - allow_int=True: integer and bool inputs among the differentiated ones get
#   zero gradients of JAX's float0 dtype (NumPy's void dtype of 0 bytes);
#   the float leaves are differentiated as usual.

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
    return _traced_or_compiled(fun, vg, nums)


def allow_int_value_and_grad(fun, argnums, has_aux, who, memory_budget):
    """value_and_grad(fun, allow_int=True): float0 zeros for int leaves."""
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
