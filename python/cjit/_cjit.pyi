"""The C extension `cjit._cjit`: the contract between csrc/py_*.c and the
Python layer (api.py, numpy.py, nn.py).  Users never import it directly.

Everything numerical happens in C.  Python decides *what* to trace (pytrees,
static arguments, the cache); C records, checks, compiles and runs.
"""
from typing import Any, Callable, Optional, Sequence
import numpy as np

# ---- exceptions (re-exported by cjit.errors) ---------------------------
class ConcretizationError(TypeError): ...   # bool()/int()/float()/index on a Tracer
class TracerLeakError(TypeError): ...       # a Tracer used after its Trace finished
class MemoryBudgetError(ValueError): ...    # memory_budget cannot be met
class CompileError(RuntimeError): ...       # LLVM or a pass failed (a cjit bug)

def _set_package_dir(path: str) -> None:
    """Frames whose file starts with `path` are skipped when a node takes
    the user's source `file:line`.  Called once by cjit/__init__.py."""

# ---- tracing ------------------------------------------------------------
class Trace:
    """One graph being recorded.  Not thread-safe; one per trace."""
    def __init__(self) -> None: ...
    def param(self, shape: tuple[int, ...], dtype: str, weak: bool = False) -> "Tracer":
        """Adds the next positional parameter (slot 0, 1, ...)."""
    def array(self, a: np.ndarray) -> "Tracer":
        """A closed-over array: a hidden argument kept by reference (the Trace
        and the executables compiled from it hold a reference to `a`; a
        non-contiguous `a` is copied once).  The same array object twice gives
        the same node."""
    def apply(self, op: str, *args: Any, **attrs: Any) -> "Tracer":
        """Appends one primitive (names below).  args may be Tracers of this
        trace, Python bool/int/float (weak constants), NumPy scalars (strong
        constants) or NumPy arrays (-> self.array).  Broadcasting and NEP 50
        promotion are applied for elementwise ops.  Shape/dtype errors raise
        TypeError/ValueError naming the op, shapes, dtypes and the user's
        file:line."""
    def finish(self, outputs: Sequence["Tracer"]) -> "Lowered":
        """Ends the trace: every Tracer of it now raises TracerLeakError when
        used.  Returns the graph with these outputs (after simplification)."""
    def mark(self) -> int:
        """The id the next node will get: nodes before it are constants for
        a vjp started here."""
    def vjp(self, outputs: Sequence["Tracer"], cotangents: Sequence["Tracer"],
            wrt: Sequence["Tracer"], first: int) -> list["Tracer"]:
        """Appends the reverse-mode gradient (csrc/autodiff.c): for each wrt
        node, sum over outputs of cotangent . d output / d wrt, differentiating
        only through nodes with ids >= first."""
    def finish_error(self) -> None:
        """Ends the trace without outputs (tracing raised)."""
    def snapshot(self, outputs: Sequence["Tracer"]) -> "Lowered":
        """A Lowered of a copy of the graph so far with these outputs; the
        trace goes on (evaluating a value while tracing, _concrete.py)."""
    def depends(self, value: "Tracer", sources: Sequence["Tracer"]) -> bool:
        """Whether value reads any of sources, directly or not."""
    concrete: Optional[Callable[["Tracer"], Any]]
    """None (values are abstract), or an evaluator: bool(), int(), float(),
    __index__ and item() of this trace's values call it with the Tracer and
    use the NumPy array it returns (None: abstract after all).  Cleared when
    the trace finishes."""

# Primitive names accepted by Trace.apply, with their attributes:
#   unary: the elementwise unary primitives: op_table()'s entries of kind
#          "unary" (csrc/ops_unary.def: neg abs sign exp log sqrt ...), and
#          stop_gradient
#   cast(x, dtype="float32")
#   binary (broadcast + promote): add sub mul div floordiv pow maximum minimum
#          logical_and logical_or eq ne lt le gt ge
#   select(cond, x, y)                     (broadcast; x, y promoted)
#   broadcast(x, shape=(..))               NumPy broadcast_to
#   reshape(x, shape=(..))                 no -1 here: resolved by the caller
#   transpose(x, perm=(..))
#   slice(x, start=(..), stop=(..), step=(..))  one entry per dim, normalized
#          like slice.indices(n) (stop may be -1 for negative steps)
#   concatenate(*xs, axis=int)             same dtype required (caller casts)
#   reduce_sum/reduce_prod/reduce_max/reduce_min(x, axes=(..))  axes removed
#   matmul(x, y)                           NumPy matmul semantics, ranks >= 1
#   iota(shape=(..), axis=int, dtype="int64")
#   constant(value=<bool|int|float>, dtype="float32", shape=(..), weak=False)
#   name(x, name="str")                    identity, for checkpoint_name

class Tracer:
    """A traced value.  Supports + - * / // ** @ (and reflected), unary - and
    abs(), comparisons (elementwise, returning Tracers), indexing through
    cjit.numpy's indexing helper, and the methods sum mean max min astype
    reshape transpose (forwarded to cjit.numpy).  __bool__, __int__,
    __float__, __index__ raise ConcretizationError.  __array_ufunc__
    (cjit.numpy._tracer_array_ufunc) runs `ndarray <op> tracer` as the
    Tracer's own operator and makes other NumPy ufuncs raise TypeError."""
    shape: tuple[int, ...]
    dtype: np.dtype
    ndim: int
    size: int
    weak: bool          # a weakly typed (Python scalar) value
    T: "Tracer"
    trace: Trace        # the Trace it belongs to

class Lowered:
    nparams: int
    narrays: int
    noutputs: int
    arrays: list[np.ndarray]     # the closed-over arrays, in slot order
    def as_text(self) -> str: ...
    def compile(self) -> "Executable":
        """Runs the pass pipeline (CJIT_PASSES honoured) and LLVM.  Raises
        CompileError on failure; nothing is cached by C."""

class Executable:
    nparams: int
    noutputs: int
    code_bytes: int
    out_shapes: list[tuple[int, ...]]
    out_dtypes: list[np.dtype]
    def __call__(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        """args: one C-contiguous ndarray per parameter, of exactly the
        traced dtype and shape (the caller converts; C checks and raises
        TypeError on mismatch).  Returns fresh arrays, one per output.  The
        GIL is released while kernels run."""
    def as_text(self) -> str: ...
    def memory_analysis(self) -> dict:
        """argument_size_in_bytes, output_size_in_bytes, alias_size_in_bytes,
        temp_size_in_bytes, peak_memory_in_bytes, num_kernels, peak_live
        (list of dicts: size, op, source)."""
    def memory_plan(self) -> dict:
        """buffers: one dict per plan buffer (id, kind, size, offset,
        alias_of or None, first_use, last_use, slot, op, source, shape,
        dtype); groups: per group in run order, [(label, source)] per
        stage; arena_bytes.  Compiled.memory_timeline sums it."""
    @classmethod
    def live_count(cls) -> int:        # Executables still holding their code
        ...
    def cost_analysis(self) -> dict:   # flops, bytes_accessed
        ...
    def release(self) -> None:
        """Frees the machine code now, or when the running calls end; calling
        afterwards raises RuntimeError.  (clear_caches does not call it: it
        drops references, so calls in flight finish.)"""

def user_location() -> str: ...   # "file:line" of the innermost frame outside the cjit package
def op_table() -> tuple[dict, ...]: ...   # per op of csrc/ops.def: name, kind, arity, doc (+ a unary record's dtypes, derivative, numpy, lax)
def register_tracer_functions(fns: dict) -> None: ...   # what Tracer methods forward to (cjit.numpy, at import)
def runtime_stats() -> dict:       # compiles, code_bytes, bytes_in_use, peak_bytes_in_use
    ...
def reset_peak_memory_stats() -> None: ...
def _env_warnings() -> list[str]:  # what is wrong with CJIT_NUM_THREADS (import cjit warns)
    ...
def blas_library() -> str:         # OpenBLAS's config (names the core) and [file], or 'none (why)'
    ...
def _set_blas_enabled(on: bool) -> bool: ...   # new compiles use BLAS or not; the previous setting
def _hold_compiles(on: bool) -> bool: ...   # tests of Ctrl-C in a compile: compiles wait before LLVM until cancelled or released
def _compiles_held() -> int: ...   # compile threads waiting at that hold now
def _set_small_gemm_enabled(on: bool) -> bool: ...   # new compiles run matmuls with few rows with cjit's own kernel or not; the previous setting
def _set_blas_path(path: str) -> bool:         # the library after CJIT_BLAS (False once loaded)
    ...
def _blas_warnings() -> list[str]:  # loads the BLAS; a core older than the CPU (import cjit warns)
    ...
def _blas_core_warning(config: str, library: str, cpu_has_avx2: bool) -> str: ...  # '' when fine
