"""jit and Jitted: a function compiled per abstract signature, its
cache, its slow path (trace, compile, cache) and its GPU variant."""
from __future__ import annotations

import functools
import sys
import threading

from . import _cjit
from . import _tree
from ._budget import _fit_memory_budget
from ._concrete import abstract_call
from ._cache import _all_jitted, _CacheDict, _count, _Entry, _stats
from ._devices import DeviceArray, _check_device
from ._dtypes import _aval_str, x64_enabled
from ._signature import (_abstract_leaves, _argnums, _ArgSpec, _convert_leaves, _fun_name,
                         _Inline, _LeafError, _output_tracer)
from ._stages import Lowered
from ._trace_state import _K_DISABLE_JIT, _env_flag, _pop_trace, _push_trace, current_trace


def jit(fun=None, *, static_argnums=None, static_argnames=None, donate_argnums=None, device=None):
    """Compiles `fun` for the abstract signature of its arguments.

    Usable bare (`@jit`) or with options (`@jit(static_argnums=1)`).  Returns
    a `Jitted`: calling it traces `fun` on a cache miss, compiles the graph
    and runs it; later calls with the same shapes, dtypes and static values
    run the cached code.
    """
    dev = _check_device(device, "jit")
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames, donate_argnums=donate_argnums,
                                 device=device)
    if not callable(fun):
        raise TypeError(f"cjit.jit: expected a callable, got {type(fun).__name__}")
    cls = Jitted if dev.platform == "cpu" else _CudaJitted
    return cls(fun, static_argnums=static_argnums, static_argnames=static_argnames,
               donate_argnums=donate_argnums, device=dev)


def _out_kind(out_treedef):
    """How the C fast path returns the output list: (kind, rebuild), see
    JitBase._fast_put."""
    node = out_treedef._node
    if isinstance(node, int):
        if node == _tree._LEAF:
            return 0, None
    elif node[0] in (_tree._TUPLE, _tree._LIST) and \
            all(isinstance(k, int) and k == _tree._LEAF for k in node[1]):
        return (1 if node[0] == _tree._TUPLE else 2), None
    return 3, functools.partial(_tree.unflatten, out_treedef)


class Jitted(_cjit.JitBase):
    """A function compiled per abstract signature; see `cjit.jit`.

    Calls go first to the C fast path (JitBase, csrc/py_jit.c): for
    arguments of the common kinds and no static arguments, a cache hit runs
    without Python code.  Everything else comes to `_call_slow`."""

    def __init__(self, fun, *, static_argnums=None, static_argnames=None, donate_argnums=None,
                 device=None, _internal=False):
        self._fun = fun
        self._spec = spec = _ArgSpec(fun, static_argnums, static_argnames)
        self._donate_argnums = _argnums(donate_argnums, "donate_argnums")
        spec.check_argnums(self._donate_argnums, "donate_argnums", fun)
        both = sorted({spec.normalized(i) for i in self._donate_argnums}
                      & {spec.normalized(i) for i in spec.static_argnums})
        if both:
            raise ValueError(f"cjit.jit: argument {spec.positional_name(both[0])!r} "
                             f"(position {both[0]}) of {_fun_name(fun)} is in both "
                             f"static_argnums and donate_argnums; a static argument is part of "
                             f"the cache key, not a buffer, so it cannot be donated")
        self._options = dict(static_argnums=static_argnums, static_argnames=static_argnames,
                             donate_argnums=donate_argnums, device=device, _internal=_internal)
        self._device = device
        self._internal = _internal    # eager-op jits ignore CJIT_DISABLE_JIT
        self._fast_configure(not self._spec.has_statics, _internal)
        self._cache = _CacheDict(self)   # bounded: see set_cache_limits
        self._lock = threading.RLock()
        self._hits = 0
        self._misses = 0
        self._last_key = None
        self._name = _fun_name(fun)
        functools.update_wrapper(self, fun, updated=())
        _all_jitted.add(self)

    def __repr__(self):
        return f"<cjit.Jitted {self._name}>"

    def __copy__(self):
        """A new jitted function of the same Python function and options,
        with a cache of its own (its first call compiles)."""
        return type(self)(self._fun, **self._options)

    def __deepcopy__(self, memo):
        # The Python function is shared, as copy.deepcopy shares functions.
        return self.__copy__()

    def __get__(self, obj, objtype=None):
        # Decorating a method: bind `self` as the first (dynamic) argument.
        if obj is None:
            return self
        return functools.partial(self, obj)

    @property
    def static_argnums(self):
        return self._spec.static_argnums

    @property
    def static_argnames(self):
        return tuple(sorted(self._spec.static_argnames))

    @property
    def donate_argnums(self):
        return self._donate_argnums

    def _call_slow(self, _fkey, /, *args, **kwargs):
        """A call the C fast path did not serve.  _fkey: the signature
        bytes of the arguments when the fast path could serve the next call
        like this one (then the entry is handed to it), else None."""
        trace = current_trace()
        if trace is not None:
            # jit inside jit (or a jitted function called while tracing):
            # trace the body into the enclosing graph, its values abstract
            # even where grad outside jit knows the enclosing trace's.
            if self._internal:
                return self._fun(*args, **kwargs)
            return abstract_call(trace, self._fun, args, kwargs)
        if not self._internal and _env_flag(_K_DISABLE_JIT):
            return self._fun(*args, **kwargs)
        spec = self._spec
        dyn_args, dyn_kwargs, statics, call = spec.split(args, kwargs)
        leaves, node = _tree.flatten_args(dyn_args, dyn_kwargs)
        try:
            arrays, avals = _convert_leaves(leaves)
        except _Inline:
            # A Tracer with no trace in progress here: a leaked one (or
            # another thread's).  Calling the function reports it.
            return self._fun(*args, **kwargs)
        except _LeafError as e:
            raise e.exc_type(e.message.format(arg=self._arg_desc(
                spec.leaf_name(_tree.treedef_of(node), e.index, call[0])))) from None
        key = (node, statics, tuple(avals), x64_enabled())
        entry = self._cache.get(key)
        if entry is None:
            with self._lock:
                entry = self._cache.get(key)
                if entry is None:
                    entry = self._compile(key, call, avals)
                else:
                    self._hits += 1
                    _stats["hits"] += 1
        else:
            # Unlocked: under the GIL a lost update needs a thread switch
            # inside `+=`, and these counters are statistics.
            self._hits += 1
            _stats["hits"] += 1
        if _fkey is not None and type(entry.exe) is _cjit.Executable:
            self._fast_put(_fkey, entry.exe, *_out_kind(entry.out_treedef))
        outs = entry.exe(arrays)
        if self._donate_argnums:
            self._consume_donated(leaves, _tree.treedef_of(node), call[0])
        return _tree.unflatten(entry.out_treedef, outs)

    def _consume_donated(self, leaves, treedef, dyn_positions):
        """After a call: the cjit.Arrays among the donated arguments are
        deleted, as JAX deletes donated arrays (their host copy was what the
        call used).  Donated NumPy arrays were consumed in C (py_exec.c:
        read-only, and refused by later calls)."""
        if not any(type(x) is DeviceArray for x in leaves):
            return
        for i in self._donated_leaves(treedef, dyn_positions):
            if type(leaves[i]) is DeviceArray:
                leaves[i].delete()

    # -- the slow path ------------------------------------------------------

    def _arg_desc(self, name):
        return f"'{name}' of {self._name}"

    def _trace(self, treedef, call, avals, budget=None, candidate=None):
        """Traces the function on abstract arguments; returns (C Lowered,
        output treedef, [(shape, dtype)] per output leaf).  `budget`: the
        memory_budget search this retrace tries `candidate` for (the trace
        carries both into C; its finish measures the plan into `budget`)."""
        trace = _cjit.Trace(budget=budget, candidate=candidate)
        _push_trace(trace)
        try:
            params = [trace.param(shape, dt.name, weak) for dt, shape, weak in avals]
            dyn_args, dyn_kwargs = _tree.unflatten(treedef, params)
            args, kwargs = _ArgSpec.merge(dyn_args, dyn_kwargs, call)
            result = self._fun(*args, **kwargs)
            out_leaves, out_treedef = _tree.flatten(result)

            def describe_at(i):
                return lambda: repr(_tree.format_keypath(_tree.leaf_keypaths(out_treedef)[i],
                                                         "result"))

            outs = [_output_tracer(trace, x, describe_at(i)) for i, x in enumerate(out_leaves)]
            out_avals = [(tuple(t.shape), t.dtype) for t in outs]
            lowered = trace.finish(outs)
        except BaseException:
            # finish() may itself have raised after ending the trace; either
            # way the trace must end and the original error must surface.
            try:
                trace.finish_error()
            except Exception:
                pass
            raise
        finally:
            _pop_trace()
        asked = lowered.memory_budget   # grad(memory_budget=) ran in this trace: search
        if asked is not None:
            return _fit_memory_budget(self, treedef, call, avals, asked, lowered, out_treedef, out_avals)
        return lowered, out_treedef, out_avals

    def _compile(self, key, call, avals):
        """Traces, compiles and caches one entry (the caller holds the lock).
        The cache is only touched once everything succeeded."""
        self._misses += 1
        _count("misses")
        if _env_flag("CJIT_LOG_COMPILES"):
            reason = self._miss_reason(key, call[0])
            print(f"cjit: compiling {self._name}: {reason}", file=sys.stderr, flush=True)
        treedef = _tree.treedef_of(key[0])
        lowered, out_treedef, _ = self._trace(treedef, call, avals)
        exe = self._executable(lowered, self._donated_leaves(treedef, call[0]))
        _count("compiles")
        entry = _Entry(exe, out_treedef)
        self._cache[key] = entry
        self._last_key = key
        return entry

    def _executable(self, lowered, donate=()):
        """Compiles a C Lowered for this function's device (the CPU here;
        _CudaJitted overrides it).  `donate`: parameter slots (flat leaf
        indices) whose buffers the memory plan may reuse."""
        from . import _disk_cache   # loaded by cjit's import unless CJIT_CACHE=0
        return _disk_cache.compile(lowered, donate, self._name)   # CJIT_CACHE=0: lowered.compile

    def _donated_leaves(self, treedef, dyn_positions):
        """Flat leaf indices of the arguments in donate_argnums."""
        if not self._donate_argnums:
            return ()
        donate = set(self._donate_argnums)
        out = []
        for i, path in enumerate(_tree.leaf_keypaths(treedef)):
            if not path or path[0][1] != 0 or len(path) < 2:
                continue   # keyword arguments are not donated (as in JAX)
            j = path[1][1]
            pos = dyn_positions[j] if dyn_positions is not None else j
            if pos in donate:
                out.append(i)
        return tuple(out)

    def _miss_reason(self, key, dyn_positions):
        last = self._last_key
        if last is None:
            return "first call" if not self._cache else "cache miss"
        node, statics, avals, x64 = key
        onode, ostatics, oavals, ox64 = last
        spec = self._spec
        if x64 != ox64:
            return f"jax_enable_x64 changed: {ox64} -> {x64}"
        if node != onode:
            return (f"argument structure changed: {_tree.treedef_of(onode)} -> "
                    f"{_tree.treedef_of(node)}")
        if statics != ostatics:
            old = {w: v for w, _, v in ostatics}
            new = {w: v for w, _, v in statics}
            for w in sorted(set(old) | set(new), key=str):
                if w not in old or w not in new or old[w] != new[w] or \
                        type(old[w]) is not type(new[w]):
                    o = repr(old[w]) if w in old else "(not given)"
                    n = repr(new[w]) if w in new else "(not given)"
                    return f"static argument {spec.static_name(w)!r} changed: {o} -> {n}"
            return "static arguments changed"
        for i, (a, b) in enumerate(zip(oavals, avals)):
            if a != b:
                name = spec.leaf_name(_tree.treedef_of(node), i, dyn_positions)
                return f"argument '{name}' changed: {_aval_str(a)} -> {_aval_str(b)}"
        return "cache miss"

    # -- introspection -------------------------------------------------------

    def lower(self, *args, **kwargs):
        """Traces only.  Arguments may be arrays, scalars or ShapeDtypeStruct."""
        spec = self._spec
        dyn_args, dyn_kwargs, statics, call = spec.split(args, kwargs)
        leaves, treedef = _tree.flatten((dyn_args, dyn_kwargs))
        try:
            avals = _abstract_leaves(leaves)
        except _Inline:
            raise TypeError("cjit: Jitted.lower() was given a traced value; call it outside "
                            "jit") from None
        except _LeafError as e:
            raise e.exc_type(e.message.format(
                arg=self._arg_desc(spec.leaf_name(treedef, e.index, call[0])))) from None
        lowered, out_treedef, out_avals = self._trace(treedef, call, avals)
        return Lowered(lowered, self, treedef, statics, tuple(avals), call[0], out_treedef,
                       out_avals)

    def eval_shape(self, *args, **kwargs):
        """ShapeDtypeStructs of the outputs (traces, compiles nothing)."""
        low = self.lower(*args, **kwargs)
        return low.out_info

    def cache_info(self):
        return {"hits": self._hits + self._fast_hits, "misses": self._misses,
                "entries": len(self._cache)}

    def clear_cache(self):
        """Drops this function's cached executables.  Their machine code is
        freed when the last reference goes: at once, unless a call is
        running one (that call holds it and finishes normally) or a
        Compiled holds it.  Nothing is released under a running call."""
        with self._lock:
            self._fast_clear()
            self._cache.clear()
            self._last_key = None


# Calls of Jitted skip the argument tuple (Python 3.12 does this by itself).
_cjit._enable_vectorcall(Jitted)


class _CudaExecutable:
    """A compiled function on a GPU: the kernels of a C Lowered, lowered
    and loaded as PTX on the device (no CPU code is made), with the plan's
    text, memory and cost analyses.  Called with a list of NumPy arrays or
    cjit.Arrays; returns cjit.Arrays."""

    __slots__ = ("_prog", "_device")

    def __init__(self, lowered, device):
        self._device = device
        self._prog = _cjit.CudaProgram(lowered, device.id)

    def __call__(self, arrays):
        args = [a._live_buf() if type(a) is DeviceArray else a for a in arrays]
        dev = self._device
        return [DeviceArray._wrap(b, dev) for b in self._prog(args)]

    def as_text(self):
        return self._prog.as_text()

    def memory_analysis(self):
        return self._prog.memory_analysis()

    def memory_plan(self):
        return self._prog.memory_plan()

    def cost_analysis(self):
        return self._prog.cost_analysis()

    @property
    def code_bytes(self):
        return self._prog.ptx_bytes

    def ptx(self):
        return self._prog.ptx()

    def release(self):
        self._prog.release()


class _CudaJitted(Jitted):
    """jit(..., device="cuda"): the same tracing and cache; arguments may be
    cjit.Arrays (used in place) or host values (copied to the device at each
    call); results are cjit.Arrays."""

    def _executable(self, lowered, donate=()):
        return _CudaExecutable(lowered, self._device)

    def _consume_donated(self, leaves, treedef, dyn_positions):
        """Donation is not used on the GPU yet (the plan is compiled without
        it), so donated cjit.Arrays stay as they are."""

    def __call__(self, *args, **kwargs):
        trace = current_trace()
        if trace is not None:
            return abstract_call(trace, self._fun, args, kwargs)
        spec = self._spec
        dyn_args, dyn_kwargs, statics, call = spec.split(args, kwargs)
        leaves, node = _tree.flatten_args(dyn_args, dyn_kwargs)
        on_device = [i for i, x in enumerate(leaves) if type(x) is DeviceArray]
        host = list(leaves)
        for i in on_device:
            host[i] = 0   # placeholder, replaced below
        try:
            arrays, avals = _convert_leaves(host)
        except _Inline:
            return self._fun(*args, **kwargs)
        except _LeafError as e:
            raise e.exc_type(e.message.format(arg=self._arg_desc(
                spec.leaf_name(_tree.treedef_of(node), e.index, call[0])))) from None
        for i in on_device:
            x = leaves[i]
            arrays[i] = x
            avals[i] = (x.dtype, x.shape, False)
        key = (node, statics, tuple(avals), x64_enabled())
        with self._lock:
            entry = self._cache.get(key)
            if entry is None:
                entry = self._compile(key, call, avals)
            else:
                self._hits += 1
                _count("hits")
        return _tree.unflatten(entry.out_treedef, entry.exe(arrays))
