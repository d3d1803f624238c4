"""jit and its companions: the Python side of tracing and caching.

Python decides *what* to trace: it splits static from dynamic arguments,
flattens pytrees, converts leaves to arrays and keys the cache by the
abstract signature (treedef, static values, dtype/shape/weak per leaf).
C (cjit._cjit) records the graph, compiles it and runs it.

This module gathers the names of the modules that do each job, so that
`cjit.api.X` keeps working for every name it ever had:

    _dtypes       supported dtypes, ShapeDtypeStruct
    _trace_state  the trace in progress, environment flags, user_location
    _signature    arguments -> arrays and avals, static arguments, outputs
    _cache        counters, the LRU over all caches, cache_info, memory_stats
    _devices      Device, devices, device_put, Array
    _jitted       jit, Jitted (and its GPU variant)
    _stages       Lowered, Compiled
    _memory       MemoryAnalysis, MemoryTimeline (Compiled.memory_timeline)
    _plot         plot_memory
    _budget       memory_budget's search
    _policies     checkpoint_name, checkpoint_policies
"""
from __future__ import annotations

from . import _tree  # noqa: F401
from ._budget import _fit_memory_budget  # noqa: F401
from ._cache import (_all_jitted, _cache_limits, _CacheDict, _count, _Entry,  # noqa: F401
                     _jit_hits, _lru, _lru_bytes, _lru_evict, _lru_lock, _stats, _stats_lock,
                     cache_info, clear_caches, memory_stats, reset_peak_memory_stats,
                     set_cache_limits)
from ._array import Array  # noqa: F401
from ._devices import _CPU, Device, _check_device, device_put, devices  # noqa: F401
from ._dtypes import (_BOOL, _F32, _F64, _I32, _I64, _INT64_MAX, _INT64_MIN,  # noqa: F401
                      _SUPPORTED, _SUPPORTED_DTYPES, _SUPPORTED_NAMES, ShapeDtypeStruct,
                      _aval_str, canonical_dtype)
from ._jitted import _CudaExecutable, _CudaJitted, Jitted, _out_kind, jit  # noqa: F401
from ._policies import (_names_policy, _Policy, checkpoint_name,  # noqa: F401
                        checkpoint_policies)
from ._signature import (_abstract_leaves, _argnums, _ArgSpec, _convert_leaf_slow,  # noqa: F401
                         _convert_leaves, _FloatKey, _fun_name, _Inline,
                         _is_dataclass_instance, _LeafError, _NO_STATICS, _output_tracer,
                         _static_key, _tracer_desc, _unhashable_part)
from ._memory import _BufferInfo, KernelMemory, MemoryAnalysis, MemoryTimeline  # noqa: F401
from ._plot import plot_memory  # noqa: F401
from ._stages import Compiled, Lowered  # noqa: F401
from ._trace_state import (_K_DISABLE_JIT, _env_flag, _pop_trace,  # noqa: F401
                           _push_trace, current_trace, user_location)

__all__ = [
    "jit", "Jitted", "Lowered", "Compiled", "MemoryAnalysis", "MemoryTimeline", "KernelMemory",
    "plot_memory", "ShapeDtypeStruct",
    "checkpoint_name", "checkpoint_policies", "clear_caches", "cache_info", "set_cache_limits",
    "memory_stats", "reset_peak_memory_stats", "devices", "device_put", "Device", "Array",
]
