"""cjit.numpy.from_dlpack.  Arrays of other libraries as cjit arguments and
operands (anything with `__dlpack__`, a jax.Array, a torch CPU tensor, ...,
seen through DLPack, sharing its memory, and anything else with `__array__`,
copied by NumPy) are _signature.foreign_array's: cjit reads such arguments
and never writes them (a donated one that is read-only is copied first, as
for any read-only array)."""
from __future__ import annotations

import numpy as np

from .._array import wrap

from .._dtypes import canonical_dtype
from .._trace_state import current_trace
from ._complex_dispatch import complex_aware

__all__ = ["from_dlpack"]


def from_dlpack(x, /, *, device=None, copy=None):
    """A NumPy array viewing a DLPack-capable object's memory (copy=True
    copies; copy=False raises where sharing is impossible), as NumPy's;
    outside jit only.  The result is a valid cjit argument."""
    if current_trace() is not None:
        raise NotImplementedError("cjit.numpy.from_dlpack: call it outside jit, and pass the "
                                  "result (or the object itself) as an argument")
    if device is not None and str(device) not in ("cpu", "TFRT_CPU_0") and \
            getattr(device, "platform", "cpu") != "cpu":
        raise ValueError(f"cjit.numpy.from_dlpack: device={device!r}: only the CPU is supported")
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"cjit.numpy.from_dlpack: {type(x).__name__} does not implement "
                        f"__dlpack__")
    a = np.from_dlpack(x, copy=copy)
    canonical_dtype(a.dtype, "cjit.numpy.from_dlpack: dtype")
    return wrap(a)      # a read-only cjit.Array over the same memory, as JAX's shares it


# complex arguments: the registry's implementation, or NotImplementedError
# (_complex_dispatch.py; the implementations are registered in _complex_api.py)
complex_aware(globals(), __all__)
