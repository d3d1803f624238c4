"""JAX's everyday top-level names that ported programs use: devices and
backends, block_until_ready/device_get, eval_shape, disable_jit,
ensure_compile_time_eval, named_scope, pure_callback.

cjit has no run-time host callbacks: a compiled function cannot call back
into Python.  So `pure_callback` (and `cjit.debug.print`/`callback`) run
their Python function when the values are concrete (outside jit, inside
`disable_jit`, or on constants at trace time) and raise NotImplementedError,
saying so, for a traced value.
"""
from __future__ import annotations

import contextlib
import os

import numpy as np

from . import _tree, tree_util
from ._cjit import ConcretizationError, Tracer
from ._devices import DeviceArray, devices
from ._dtypes import ShapeDtypeStruct
from ._jitted import Jitted
from ._trace_state import _K_DISABLE_JIT, current_trace, hide_traces, unhide_traces

__all__ = ["default_backend", "device_count", "local_devices", "local_device_count",
           "block_until_ready", "device_get", "eval_shape", "disable_jit",
           "ensure_compile_time_eval", "named_scope", "pure_callback"]


def default_backend():
    """'cpu': where cjit runs a function unless it is jitted with
    device="cuda" (the CUDA devices are never the default)."""
    return "cpu"


def _backend_devices(backend, who):
    if backend is not None and not isinstance(backend, str):
        raise TypeError(f"cjit.{who}: backend must be a string such as 'cpu', got "
                        f"{type(backend).__name__}")
    return devices(backend or default_backend())


def device_count(backend=None):
    """The number of devices of `backend` (default: the default backend's)."""
    return len(_backend_devices(backend, "device_count"))


def local_devices(process_index=None, backend=None, host_id=None):
    """The devices of `backend` in this process (cjit is one process)."""
    for name, v in (("process_index", process_index), ("host_id", host_id)):
        if v not in (None, 0):
            raise ValueError(f"cjit.local_devices: {name}={v!r}; cjit runs in one process, "
                             f"index 0")
    return _backend_devices(backend, "local_devices")


def local_device_count(backend=None):
    return len(_backend_devices(backend, "local_device_count"))


def block_until_ready(x):
    """Waits for every array in the pytree `x` to be computed; returns `x`.
    (CPU results are complete when a call returns; GPU arrays are waited
    for.)  Leaves without a block_until_ready method pass through."""
    def wait(a):
        f = getattr(a, "block_until_ready", None)
        if callable(f) and not isinstance(a, Tracer):
            f()
        return a
    tree_util.tree_map(wait, x)
    return x


def device_get(x):
    """The pytree `x` with its device arrays copied to the host as NumPy
    arrays; NumPy arrays and other leaves come back as they are.  A traced
    value is a ConcretizationError."""
    def get(a):
        if isinstance(a, Tracer):
            raise ConcretizationError(
                f"cjit.device_get: a traced value ({a.dtype}{list(a.shape)}) has no value "
                f"yet; call device_get on the results of a jitted function, outside it")
        if type(a) is DeviceArray:
            return np.asarray(a)
        return a
    return tree_util.tree_map(get, x)


def _abstract(a):
    """A ShapeDtypeStruct for an argument leaf that is abstract already or
    only has a shape and a dtype (traced values, foreign arrays)."""
    if isinstance(a, Tracer):
        return ShapeDtypeStruct(a.shape, a.dtype, a.weak)
    if isinstance(a, (ShapeDtypeStruct, np.ndarray, np.generic, bool, int, float, complex)):
        return a
    if hasattr(a, "shape") and hasattr(a, "dtype"):
        return ShapeDtypeStruct(a.shape, a.dtype, bool(getattr(a, "weak_type", False)))
    return a


def eval_shape(fun, *args, **kwargs):
    """The shapes and dtypes of fun(*args, **kwargs), as a pytree of
    ShapeDtypeStruct, without computing anything: fun is traced on abstract
    values only.  Arguments may be arrays, scalars, ShapeDtypeStructs, traced
    values, or anything with .shape and .dtype."""
    if not callable(fun):
        raise TypeError(f"cjit.eval_shape: expected a function, got {type(fun).__name__}")
    args, kwargs = tree_util.tree_map(_abstract, (args, kwargs))
    return Jitted(fun, _internal=True).eval_shape(*args, **kwargs)


@contextlib.contextmanager
def disable_jit(disable=True):
    """Within the block, jitted functions run their Python code op by op on
    concrete values (each cjit.numpy call computes at once), so Python
    control flow on values works, and the lax loops run as Python loops.
    It sets CJIT_DISABLE_JIT for the block (and restores it after): it
    applies to the whole process, not to this thread only.  grad, vjp and
    vmap still trace their function (see docs/API.md)."""
    old = os.environ.get(_K_DISABLE_JIT)
    os.environ[_K_DISABLE_JIT] = "1" if disable else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ[_K_DISABLE_JIT]
        else:
            os.environ[_K_DISABLE_JIT] = old


@contextlib.contextmanager
def ensure_compile_time_eval():
    """Within the block, cjit.numpy operations whose operands are all
    concrete compute at once, even while a function is being traced (so
    `if cnp.sum(cnp.arange(3)) > 2:` works inside jit); operations with a
    traced operand are still traced."""
    hide_traces()
    try:
        yield
    finally:
        unhide_traces()


@contextlib.contextmanager
def named_scope(name):
    """A name for the operations of the block (JAX shows it in profiles);
    cjit records nothing, so it changes no value.  `name` must be a string."""
    if not isinstance(name, str):
        raise TypeError(f"cjit.named_scope: name must be a string, got {type(name).__name__}")
    yield


def _traced_leaves(tree):
    return [x for x in _tree.tree_leaves(tree) if isinstance(x, Tracer)]


def refuse_traced(who, tree):
    """NotImplementedError when the pytree holds traced values."""
    traced = _traced_leaves(tree)
    if traced:
        t = traced[0]
        raise NotImplementedError(
            f"cjit.{who}: called with a traced value ({t.dtype}{list(t.shape)}) inside jit, "
            f"grad or vmap; cjit has no run-time host callbacks, so Python cannot run on "
            f"values computed inside a compiled function. Call it outside the jitted "
            f"function (on its results), or inside cjit.disable_jit()")


def pure_callback(callback, result_shape_dtypes, *args, sharding=None, vmap_method=None,
                  **kwargs):
    """callback(*args, **kwargs) on concrete values; its result must have
    the structure, shapes and dtypes of result_shape_dtypes (a pytree of
    ShapeDtypeStruct or arrays), else RuntimeError, as JAX.  Traced
    arguments: NotImplementedError (cjit has no run-time host callbacks)."""
    refuse_traced("pure_callback", (args, kwargs))
    out = callback(*args, **kwargs)
    want, want_def = tree_util.tree_flatten(result_shape_dtypes)
    try:
        got = want_def.flatten_up_to(out)
    except ValueError:
        raise RuntimeError(f"cjit.pure_callback: the callback returned "
                           f"{tree_util.tree_structure(out)}, but result_shape_dtypes is "
                           f"{want_def}") from None
    res = []
    for i, (w, g) in enumerate(zip(want, got)):
        g = np.asarray(g)
        if tuple(g.shape) != tuple(w.shape) or g.dtype != np.dtype(w.dtype):
            raise RuntimeError(f"cjit.pure_callback: return value #{i} of the callback is "
                               f"{g.dtype}{list(g.shape)}; result_shape_dtypes says "
                               f"{np.dtype(w.dtype)}{list(w.shape)}")
        res.append(g)
    return tree_util.tree_unflatten(want_def, res)
