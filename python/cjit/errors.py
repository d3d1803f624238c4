"""The exceptions cjit raises (defined in the C extension, named here).

- ConcretizationError (a TypeError): a concrete value was needed from a
  traced one: `if x > 0:`, int(x), float(x), using x as an index...
  Make the argument static (static_argnums) or use cjit.numpy.where.
- TracerLeakError (a TypeError): a traced value was used after the trace
  that made it ended (e.g. stored in a global inside a jitted function).
- MemoryBudgetError (a ValueError): no choice of what to save meets a
  grad's memory_budget; the message names the smallest reachable peak.
- CompileError (a RuntimeError): LLVM or a compiler pass failed; a cjit bug.
- NonConcreteBooleanIndexError (an IndexError, and a NotImplementedError as
  cjit raised before): a traced boolean mask used as an index.

JAX's names for them, so that a ported ``except jax.errors.X:`` catches what
cjit raises: ConcretizationTypeError, TracerBoolConversionError,
TracerIntegerConversionError and TracerArrayConversionError are
ConcretizationError (cjit raises one class for every conversion, so each of
these catches the others' cases too), UnexpectedTracerError is
TracerLeakError (docs/API.md, decision 224).
"""
from ._cjit import CompileError, ConcretizationError, MemoryBudgetError, TracerLeakError

ConcretizationTypeError = ConcretizationError
TracerBoolConversionError = ConcretizationError
TracerIntegerConversionError = ConcretizationError
TracerArrayConversionError = ConcretizationError
UnexpectedTracerError = TracerLeakError


class NonConcreteBooleanIndexError(IndexError, NotImplementedError):
    """A boolean mask known only when the function runs, used as an index:
    the result's shape would depend on it (use cjit.numpy.where)."""


__all__ = ["ConcretizationError", "TracerLeakError", "MemoryBudgetError", "CompileError",
           "NonConcreteBooleanIndexError", "ConcretizationTypeError", "TracerBoolConversionError",
           "TracerIntegerConversionError", "TracerArrayConversionError", "UnexpectedTracerError"]
