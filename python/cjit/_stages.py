"""The stages of a jitted function for one signature: Lowered (traced)
and Compiled (machine code)."""
from __future__ import annotations

from . import _tree
from ._cache import _count
from ._dtypes import ShapeDtypeStruct, _aval_str
from ._memory import MemoryAnalysis, memory_timeline
from ._signature import _convert_leaves, _Inline, _LeafError


class Lowered:
    """A traced graph, not compiled yet (see Jitted.lower)."""

    def __init__(self, lowered, jitted, in_treedef, statics, in_avals, dyn_positions, out_treedef,
                 out_avals):
        self._out_avals = out_avals
        self._lowered = lowered
        self._jitted = jitted
        self._in_treedef = in_treedef
        self._statics = statics
        self._in_avals = in_avals
        self._dyn_positions = dyn_positions
        self._out_treedef = out_treedef

    def as_text(self):
        return self._lowered.as_text()

    @property
    def in_avals(self):
        return [ShapeDtypeStruct(s, d, w) for d, s, w in self._in_avals]

    @property
    def out_info(self):
        """ShapeDtypeStructs of the outputs, in the output pytree."""
        infos = [ShapeDtypeStruct(s, d) for s, d in self._out_avals]
        return _tree.unflatten(self._out_treedef, infos)

    def compile(self):
        exe = self._jitted._executable(
            self._lowered, self._jitted._donated_leaves(self._in_treedef, self._dyn_positions))
        _count("compiles")
        return Compiled(exe, self)

    def __repr__(self):
        return f"<cjit.Lowered {self._jitted._name}>"


class Compiled:
    """A compiled function for one abstract signature (see Lowered.compile)."""

    def __init__(self, exe, lowered):
        self._exe = exe
        self._low = lowered

    def _signature_error(self, msg):
        return TypeError(f"cjit: Compiled {self._low._jitted._name} called with a different "
                         f"signature than it was lowered for: {msg}")

    def __call__(self, *args, **kwargs):
        low = self._low
        spec = low._jitted._spec
        leaves, treedef = _tree.flatten((args, kwargs))
        dyn_positions = low._dyn_positions
        if treedef != low._in_treedef:
            # Called with the static arguments too, as the Jitted was.
            dyn_args, dyn_kwargs, statics, call = spec.split(args, kwargs)
            dyn_positions = call[0]
            if statics and statics != low._statics:
                raise self._signature_error(
                    f"static arguments {[(spec.static_name(w), v) for w, _, v in statics]} "
                    f"differ from {[(spec.static_name(w), v) for w, _, v in low._statics]}")
            leaves, treedef = _tree.flatten((dyn_args, dyn_kwargs))
            if treedef != low._in_treedef:
                raise self._signature_error(
                    f"argument structure {treedef} differs from {low._in_treedef}")
        try:
            arrays, avals = _convert_leaves(leaves)
        except _Inline:
            raise TypeError("cjit: a Compiled function cannot be called on traced values; "
                            "call the Jitted instead") from None
        except _LeafError as e:
            raise e.exc_type(e.message.format(
                arg=low._jitted._arg_desc(spec.leaf_name(treedef, e.index, dyn_positions)))) \
                from None
        for i, (a, b) in enumerate(zip(avals, low._in_avals)):
            if a[0] != b[0] or a[1] != b[1]:
                name = spec.leaf_name(treedef, i, dyn_positions)
                raise self._signature_error(
                    f"argument '{name}' is {_aval_str(a)}, lowered for {_aval_str(b)}")
        outs = self._exe(arrays)
        if low._jitted._donate_argnums:   # donated cjit.Arrays are deleted
            low._jitted._consume_donated(leaves, treedef, dyn_positions)
        return _tree.unflatten(low._out_treedef, outs)

    def as_text(self):
        return self._exe.as_text()

    def memory_analysis(self):
        return MemoryAnalysis(self._exe.memory_analysis())

    def memory_timeline(self):
        """The bytes live at each kernel in run order (arguments, outputs,
        temporaries), each kernel's ops and source line, and the buffers it
        allocates and frees: a MemoryTimeline, whose peak_bytes equals
        memory_analysis().peak_memory_in_bytes.  cjit.plot_memory draws it."""
        return memory_timeline(self._exe)

    def cost_analysis(self):
        return dict(self._exe.cost_analysis())

    @property
    def code_bytes(self):
        return self._exe.code_bytes

    def __repr__(self):
        return f"<cjit.Compiled {self._low._jitted._name}>"
