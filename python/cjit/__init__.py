"""cjit: a JIT compiler for numerical Python (LLVM on the CPU).

    import cjit
    import cjit.numpy as cnp

    @cjit.jit
    def f(x, y):
        return cnp.tanh(x @ y).sum(axis=1)

The public contract is SPEC.md; names follow JAX where JAX has the idea.
"""
import os as _os

from . import _cjit
from . import _blas

_cjit._set_package_dir(_os.path.dirname(_os.path.abspath(__file__)))
# a bad CJIT_NUM_THREADS (warned, the default used); a BLAS older than the processor
for _msg in _cjit._env_warnings() + _blas.setup():
    import warnings as _warnings
    _warnings.warn(_msg, RuntimeWarning, stacklevel=2)
    del _msg

from . import errors  # noqa: E402
from ._cache import (cache_info, clear_caches, memory_stats, reset_peak_memory_stats,  # noqa: E402
                     set_cache_limits)
from ._array import Array  # noqa: E402
from ._devices import Device, device_put, devices  # noqa: E402
from ._dtypes import ShapeDtypeStruct  # noqa: E402
from ._jitted import Jitted, jit  # noqa: E402
from ._memory import MemoryAnalysis  # noqa: E402
from ._plot import plot_memory  # noqa: E402
from ._policies import checkpoint_name, checkpoint_policies  # noqa: E402
from ._stages import Compiled, Lowered  # noqa: E402
from . import api  # noqa: E402,F401  (cjit.api: these names and more, gathered for users)
from ._autodiff import grad, value_and_grad, vjp  # noqa: E402
from ._forward import hessian, jacfwd, jacrev, jvp, linearize  # noqa: E402
from ._everyday import (block_until_ready, default_backend, device_count,  # noqa: E402
                        device_get, disable_jit, ensure_compile_time_eval, eval_shape,
                        local_device_count, local_devices, named_scope, pure_callback)
from ._vmap import vmap  # noqa: E402
from ._grad_extras import closure_convert, custom_gradient, jacobian, linear_transpose  # noqa: E402
from ._custom import custom_jvp, custom_vjp  # noqa: E402
from ._remat import checkpoint, remat, saved_residuals  # noqa: E402
from ._inspect import make_jaxpr  # noqa: E402
from ._config import config, enable_x64  # noqa: E402
from . import numpy  # noqa: E402
from .numpy import stop_gradient  # noqa: E402
from . import nn  # noqa: E402
from . import tree_util  # noqa: E402
from . import tree  # noqa: E402
from . import debug  # noqa: E402
from . import test_util  # noqa: E402
from . import scipy  # noqa: E402
from . import random  # noqa: E402
from . import lax  # noqa: E402
from . import experimental  # noqa: E402
if _os.environ.get("CJIT_CACHE", "1").strip().lower() not in ("", "0", "false", "no", "off"):
    # the persistent cache's modules (sqlite3, hashlib: 3-10 ms of loading
    # shared libraries) load with cjit, not inside the first call, as JAX's do
    from . import _disk_cache  # noqa: E402,F401

__version__ = "0.1.0"

__all__ = [
    "jit", "grad", "value_and_grad", "vjp", "jvp", "linearize", "jacfwd", "jacrev", "hessian", "vmap", "custom_vjp", "custom_jvp", "make_jaxpr", "config", "checkpoint", "remat", "checkpoint_name",
    "checkpoint_policies", "saved_residuals", "stop_gradient", "clear_caches", "cache_info", "set_cache_limits",
    "memory_stats", "plot_memory",
    "reset_peak_memory_stats", "devices", "device_put", "ShapeDtypeStruct", "Array", "Device",
    "Jitted", "Lowered", "Compiled", "MemoryAnalysis", "errors", "numpy", "nn", "tree_util", "scipy", "random",
    "tree", "debug", "block_until_ready", "default_backend", "device_count", "device_get",
    "disable_jit", "ensure_compile_time_eval", "eval_shape", "local_device_count", "local_devices",
    "named_scope", "pure_callback", "jacobian", "linear_transpose", "custom_gradient",
    "closure_convert", "test_util", "enable_x64", "experimental",
]
