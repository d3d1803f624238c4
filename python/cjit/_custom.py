"""cjit.custom_vjp and cjit.custom_jvp: functions with derivatives the user
writes, as in JAX.

Called on traced values, the function and its rule are traced once, into
the trace in progress, and cut out into one `custom` node of the C graph
(csrc/custom.c; layout in csrc/regions.h).  The node's value is the
function's (the fwd's, for custom_vjp); only grad, jvp and vmap read the
rule.  Compiling inlines the function first, so it fuses, is planned and
is checkpointed like any other code.  Called on concrete values outside
any trace, the function simply runs.

Values the function closes over (instead of taking them as arguments) get
no derivative through the rule, as in JAX: pass what must be
differentiated as an argument.
"""
from __future__ import annotations

import functools
import inspect
import threading

import numpy as np

from . import _cjit, _tree
from ._signature import _output_tracer
from ._trace_state import current_trace
from ._transform_util import aval as _aval, at_user as _where, names as _names
from ._transform_util import placeholders as _zero_templates

__all__ = ["custom_vjp", "custom_jvp"]


def _placeholders(trace, templates):
    """Values the function and rule are traced on (named zeros, which
    nothing folds into a constant), as cjit.lax's bodies are."""
    return _names(trace, _zero_templates(trace, templates))


def _tracers(trace, leaves, what):
    return [_output_tracer(trace, x, (lambda i=i: f"{what} leaf {i}")) for i, x in enumerate(leaves)]


def _zeros(trace, like):
    return trace.apply("constant", value=0, dtype=np.dtype(like.dtype).name, shape=tuple(like.shape),
                       weak=False)


def _zeros_like(x):
    """Zeros of x's shape and dtype: a constant of x's trace for a traced x,
    a NumPy array otherwise (as cjit.numpy.zeros_like gives them)."""
    if isinstance(x, _cjit.Tracer):
        return _zeros(x.trace, x)
    return np.zeros(np.shape(x), np.asarray(x).dtype)


def _fit(trace, who, what, got, like):
    """got (a leaf the rule returned) as a Tracer of like's shape and dtype:
    None is zeros, a weak scalar or another float dtype is cast, a scalar
    is broadcast; anything else raises TypeError naming both types."""
    if got is None:
        return _zeros(trace, like)
    t = _output_tracer(trace, got, lambda: what)
    shape, dt = tuple(like.shape), np.dtype(like.dtype)
    if tuple(t.shape) == () and shape != ():
        t = trace.apply("broadcast", t, shape=shape)
    if tuple(t.shape) != shape:
        raise TypeError(f"{who}: {what} has shape {_aval(t)}, but its primal is {_aval(like)}; the rule "
                        f"must return values of the primals' shapes {_where()}")
    if np.dtype(t.dtype) != dt:
        if dt.kind != "f":   # an integer primal has no derivative: whatever came is dropped
            return _zeros(trace, like)
        if np.dtype(t.dtype).kind not in "fiub" or not (t.weak or np.dtype(t.dtype).kind == "f"):
            raise TypeError(f"{who}: {what} is {_aval(t)}, but its primal is {_aval(like)} {_where()}")
        t = trace.apply("cast", t, dtype=dt.name)
    return t


_tls = threading.local()


class _Custom:
    """What custom_vjp and custom_jvp share: the wrapped function, static
    (nondiff) arguments, splitting a call's arguments, and knowing when its
    own rule is being traced: a rule usually calls the function (``return
    f(x), ...``), and that inner call is the plain function (its rule is
    the one being built)."""

    _how = "defvjp(fwd, bwd)"   # what defines the rule (the error when it is missing)

    def __call__(self, *args, **kwargs):
        if self._rule() is None:
            raise AttributeError(f"{self._name()}: no rule defined; call {self._how} first")
        args = self._bind(args, kwargs)
        trace = current_trace()
        active = getattr(_tls, "active", None)
        if active is None:
            active = _tls.active = []
        if trace is None or self in active:   # inside its own rule: the plain function
            return self.fun(*args)
        active.append(self)
        try:
            return self._traced(trace, args)
        finally:
            active.pop()

    def __init__(self, fun, nondiff_argnums=()):
        if not callable(fun):
            raise TypeError(f"{type(self).__name__}: expected a function, got {type(fun).__name__}")
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(int(i) for i in nondiff_argnums)
        try:
            self._sig = inspect.signature(fun)
        except (TypeError, ValueError):
            self._sig = None

    def __get__(self, obj, objtype=None):   # a method: bind like a function
        return self if obj is None else functools.partial(self, obj)

    def _bind(self, args, kwargs):
        if kwargs:
            if self._sig is None:
                raise TypeError(f"{self._name()}: keyword arguments need a function with a signature")
            bound = self._sig.bind(*args, **kwargs)
            bound.apply_defaults()
            args = bound.args
            if bound.kwargs:
                raise TypeError(f"{self._name()}: keyword-only arguments are not supported (as in JAX)")
        for i in self.nondiff_argnums:
            if not -len(args) <= i < len(args):
                raise ValueError(f"{self._name()}: nondiff_argnums has {i}, but the call has {len(args)} "
                                 f"arguments")
        return tuple(args)

    def _name(self):
        return f"cjit.{type(self).__name__}({getattr(self.fun, '__name__', 'function')})"

    def _split(self, args):
        """(static args by position, the differentiable args' leaves, their
        positions, a function rebuilding the full argument tuple from
        differentiable leaves)."""
        n = len(args)
        static = {i % n: args[i] for i in self.nondiff_argnums}
        diff_pos = [i for i in range(n) if i not in static]
        leaves, treedef = _tree.flatten(tuple(args[i] for i in diff_pos))

        def rebuild(new_leaves):
            diff = _tree.unflatten(treedef, new_leaves)
            full = list(args)
            for i, v in zip(diff_pos, diff):
                full[i] = v
            return tuple(full)
        return static, leaves, diff_pos, rebuild


class custom_vjp(_Custom):
    """A function with a reverse-mode derivative of the user's, as
    ``jax.custom_vjp``::

        @cjit.custom_vjp
        def f(x, y): ...
        def f_fwd(x, y): return f(x, y), residuals
        def f_bwd(residuals, g): return (x_bar, y_bar)
        f.defvjp(f_fwd, f_bwd)

    ``bwd`` returns one cotangent per (non-static) argument, each of the
    argument's structure, or None for zeros.  Arguments named in
    ``nondiff_argnums`` are static (Python values, functions): they are
    passed to ``bwd`` first.  Forward mode (jvp, jacfwd, hessian) through
    the function is refused, as in JAX."""

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.fwd = self.bwd = None

    def _rule(self):
        return self.fwd

    def defvjp(self, fwd, bwd, symbolic_zeros=False):
        if symbolic_zeros:
            raise NotImplementedError("cjit.custom_vjp.defvjp: symbolic_zeros=True is not supported; "
                                      "cotangents that are zero arrive as arrays of zeros")
        if not callable(fwd) or not callable(bwd):
            raise TypeError("cjit.custom_vjp.defvjp: fwd and bwd must be callable")
        self.fwd, self.bwd = fwd, bwd

    def _traced(self, trace, args):
        who = self._name()
        static, leaves, diff_pos, rebuild = self._split(args)
        primals = _tracers(trace, leaves, "argument")
        first = trace.mark()
        ph = _placeholders(trace, primals)
        pair = self.fwd(*rebuild(ph))
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"{who}: fwd must return a pair (output, residuals), got "
                            f"{type(pair).__name__} {_where()}")
        out_leaves, out_def = _tree.flatten(pair[0])
        res_leaves, res_def = _tree.flatten(pair[1])
        outs = _tracers(trace, out_leaves, "output")
        res = _tracers(trace, res_leaves, "residual")
        # bwd, traced on placeholders for the residuals and the cotangents
        res_ph = _placeholders(trace, res)
        ct_ph = _placeholders(trace, outs)
        statics = [static[i] for i in sorted(static)]
        cts = self.bwd(*statics, _tree.unflatten(res_def, res_ph), _tree.unflatten(out_def, ct_ph))
        if isinstance(cts, list):
            cts = tuple(cts)
        if not isinstance(cts, tuple) or len(cts) != len(diff_pos):
            got = f"a tuple of {len(cts)}" if isinstance(cts, tuple) else type(cts).__name__
            raise TypeError(f"{who}: bwd must return a tuple with one cotangent per argument "
                            f"({len(diff_pos)}), got {got} {_where()}")
        grads = []
        per_arg = [_tree.flatten(args[i])[1] for i in diff_pos]
        k = 0
        for a, (ct, td) in enumerate(zip(cts, per_arg)):
            parts = [None] * td.num_leaves if ct is None else _tree.flatten_up_to(td, ct)
            for j, c in enumerate(parts):
                grads.append(_fit(trace, who, f"the cotangent of argument {diff_pos[a]} (leaf {j})",
                                  c, primals[k]))
                k += 1
        results = _cjit.lax_region(trace, "custom_vjp", first, [(ph, outs + res), (res_ph + ct_ph, grads)],
                                   primals, len(primals), len(res), 0, False)
        return _tree.unflatten(out_def, results[:len(outs)])


class custom_jvp(_Custom):
    """A function with a forward-mode derivative of the user's, as
    ``jax.custom_jvp``::

        @cjit.custom_jvp
        def f(x): ...
        @f.defjvp
        def f_jvp(primals, tangents):
            (x,), (t,) = primals, tangents
            return f(x), t * ...

    The rule returns (primal output, tangent output) and must be linear in
    the tangents.  Reverse mode (grad) uses the rule too: its transpose is
    the VJP of the rule in the tangents, built in C.  Static arguments
    (``nondiff_argnums``) are passed to the rule first."""

    _how = "defjvp(rule)"

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.jvp = None

    def _rule(self):
        return self.jvp

    def defjvp(self, jvp, symbolic_zeros=False):
        if symbolic_zeros:
            raise NotImplementedError("cjit.custom_jvp.defjvp: symbolic_zeros=True is not supported; "
                                      "tangents that are zero arrive as arrays of zeros")
        if not callable(jvp):
            raise TypeError("cjit.custom_jvp.defjvp: the rule must be callable")
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps):
        """One rule per argument, ``jvps[i](tangent_i, primal_out, *primals)``
        (None: the argument has no derivative); the tangents add up."""
        def rule(primals, tangents):
            out = self.fun(*primals)
            total = None
            for fn, t in zip(jvps, tangents):
                if fn is None:
                    continue
                d = fn(t, out, *primals)
                total = d if total is None else _tree.tree_map(lambda u, v: u + v, total, d)
            if total is None:   # every argument without a rule: zero tangents
                total = _tree.tree_map(_zeros_like, out)
            return out, total
        self.jvp = rule

    def _traced(self, trace, args):
        who = self._name()
        static, leaves, diff_pos, rebuild = self._split(args)
        primals = _tracers(trace, leaves, "argument")
        first = trace.mark()
        ph = _placeholders(trace, primals)
        out_leaves, out_def = _tree.flatten(self.fun(*rebuild(ph)))
        outs = _tracers(trace, out_leaves, "output")
        # the rule, traced on fresh placeholders for primals and tangents
        rule_ph = _placeholders(trace, primals)
        tan_ph = _placeholders(trace, primals)
        statics = [static[i] for i in sorted(static)]
        diff_args = lambda xs: tuple(rebuild(xs)[i] for i in diff_pos)   # noqa: E731
        pair = self.jvp(*statics, diff_args(rule_ph), diff_args(tan_ph))
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"{who}: the JVP rule must return a pair (primal output, tangent output), got "
                            f"{type(pair).__name__} {_where()}")
        po_leaves, po_def = _tree.flatten(pair[0])
        if po_def != out_def:
            raise TypeError(f"{who}: the JVP rule's primal output has structure {po_def}, but the function "
                            f"returns {out_def} {_where()}")
        to_leaves = _tree.flatten_up_to(out_def, pair[1])
        rule_outs = [_fit(trace, who, f"primal output leaf {k} of the JVP rule", p, o)
                     for k, (p, o) in enumerate(zip(po_leaves, outs))]
        rule_tans = [_fit(trace, who, f"tangent output leaf {k} of the JVP rule", t, o)
                     for k, (t, o) in enumerate(zip(to_leaves, outs))]
        results = _cjit.lax_region(trace, "custom_jvp", first,
                                   [(ph, outs), (rule_ph + tan_ph, rule_outs + rule_tans)],
                                   primals, len(primals), 0, 0, False)
        return _tree.unflatten(out_def, results)
