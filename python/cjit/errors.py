"""The exceptions cjit raises (defined in the C extension, named here).

- ConcretizationError (a TypeError): a concrete value was needed from a
  traced one: `if x > 0:`, int(x), float(x), using x as an index...
  Make the argument static (static_argnums) or use cjit.numpy.where.
- TracerLeakError (a TypeError): a traced value was used after the trace
  that made it ended (e.g. stored in a global inside a jitted function).
- MemoryBudgetError (a ValueError): no choice of what to save meets a
  grad's memory_budget; the message names the smallest reachable peak.
- CompileError (a RuntimeError): LLVM or a compiler pass failed; a cjit bug.
"""
from ._cjit import CompileError, ConcretizationError, MemoryBudgetError, TracerLeakError

__all__ = ["ConcretizationError", "TracerLeakError", "MemoryBudgetError", "CompileError"]
