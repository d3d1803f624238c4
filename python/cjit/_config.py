"""cjit.config: the spelling of JAX's configuration that ported programs use
(`jax.config.update("jax_enable_x64", True)`).  Each JAX option maps to what
cjit does; an option cjit has no counterpart for raises, naming it."""
from __future__ import annotations

import contextlib
import os

from ._dtypes import set_x64, x64_enabled


def _x64(value):
    # float32/int32 defaults when off (JAX's default), float64/int64 when on;
    # a function traced in one mode is never served in the other (the mode
    # is part of every cache key)
    set_x64(bool(value))


def _disable_jit(value):
    os.environ["CJIT_DISABLE_JIT"] = "1" if value else "0"


def _platform(value):
    names = [p.strip() for p in str(value).split(",") if p.strip()]
    if names and "cpu" not in names and "cuda" not in names and "gpu" not in names:
        raise ValueError(f"cjit.config: platform {value!r}; cjit runs on 'cpu' (and CUDA GPUs "
                         "through cjit.devices())")


def _accepted(value):
    """An option that does not change what cjit computes."""


_OPTIONS = {
    "jax_enable_x64": _x64,
    "jax_disable_jit": _disable_jit,
    "jax_platform_name": _platform,
    "jax_platforms": _platform,
    "jax_default_matmul_precision": _accepted,
    "jax_numpy_rank_promotion": _accepted,
    "jax_log_compiles": lambda v: os.environ.__setitem__("CJIT_LOG_COMPILES", "1" if v else "0"),
    "jax_persistent_cache_min_compile_time_secs": _accepted,
    "jax_compilation_cache_dir": lambda v: os.environ.__setitem__("CJIT_CACHE_DIR", str(v)),
}


class _Config:
    """cjit.config.update(name, value) and cjit.config.read(name)."""

    def __init__(self):
        self._values = {}

    def update(self, name, value):
        if name not in _OPTIONS:
            known = ", ".join(sorted(_OPTIONS))
            raise AttributeError(f"cjit.config: no option {name!r} (cjit knows {known})")
        _OPTIONS[name](value)
        if name != "jax_enable_x64":
            self._values[name] = value

    def read(self, name):
        if name not in _OPTIONS:
            raise AttributeError(f"cjit.config: no option {name!r}")
        if name == "jax_enable_x64":
            return x64_enabled()
        return self._values.get(name)

    def __getattr__(self, name):
        if name in _OPTIONS:
            return self.read(name)
        raise AttributeError(f"cjit.config has no attribute {name!r}")

    def config_with_absl(self):
        """JAX's hook for absl flags: nothing to do in cjit."""

    def parse_flags_with_absl(self):
        """JAX's hook for absl flags: nothing to do in cjit."""


config = _Config()


@contextlib.contextmanager
def enable_x64(new_val=True):
    """Within the block, jax_enable_x64 is new_val (JAX's
    jax.experimental.enable_x64); the old value comes back after it.  The
    mode is process-wide, not per thread."""
    old = set_x64(bool(new_val))
    try:
        yield
    finally:
        set_x64(old)


@contextlib.contextmanager
def disable_x64():
    """enable_x64(False) (JAX's jax.experimental.disable_x64)."""
    with enable_x64(False):
        yield
