"""cjit.debug: JAX's `jax.debug.print` and `jax.debug.callback`.

cjit has no run-time host callbacks (a compiled function cannot call back
into Python), so both run at once on concrete values (outside jit, inside
`cjit.disable_jit()`, or on values that are constants while tracing, in
which case they run once, when the function is traced) and raise
NotImplementedError, saying so, for a traced value.
"""
from __future__ import annotations

from ._everyday import refuse_traced

__all__ = ["print", "callback"]

_print = print


def print(fmt=None, *args, ordered=False, partitioned=False, skip_format_check=False,  # noqa: A001
          **kwargs):
    """Prints fmt.format(*args, **kwargs) (str.format's syntax: "x = {x}",
    "{0:.3f}"); arrays print as NumPy prints them.  `print(ordered=True)`
    without fmt returns the printing function (JAX's two-call form)."""
    if fmt is None:
        return lambda fmt, *a, **k: print(fmt, *a, **k)
    if not isinstance(fmt, str):
        raise TypeError(f"cjit.debug.print: fmt must be a string, got {type(fmt).__name__}")
    refuse_traced("debug.print", (args, kwargs))
    _print(fmt.format(*args, **kwargs))


def callback(callback=None, *args, ordered=False, partitioned=False, **kwargs):
    """callback(*args, **kwargs) for its side effects; returns None.
    `callback(ordered=True)` without the function returns the calling
    function (JAX's two-call form)."""
    if callback is None:
        return lambda f, *a, **k: globals()["callback"](f, *a, **k)
    if not callable(callback):
        raise TypeError(f"cjit.debug.callback: expected a function, got "
                        f"{type(callback).__name__}")
    refuse_traced("debug.callback", (args, kwargs))
    callback(*args, **kwargs)
