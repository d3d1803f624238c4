"""The trace in progress on this thread, the environment flags read on
every call, and the user's source location (for messages and plans)."""
from __future__ import annotations

import os
import threading

from . import _cjit


_tls = threading.local()


def current_trace():
    """The innermost trace in progress on this thread, or None."""
    stack = getattr(_tls, "stack", None)
    return stack[-1] if stack else None


def _push_trace(trace):
    stack = getattr(_tls, "stack", None)
    if stack is None:
        stack = _tls.stack = []
    stack.append(trace)
    _cjit._trace_depth(1)   # the C fast path stands aside while any trace runs


def _pop_trace():
    _tls.stack.pop()
    _cjit._trace_depth(-1)


_FALSE = frozenset(("", "0", "false", "False", "no", "off"))
_FALSE_B = frozenset(v.encode() for v in _FALSE)
# os.environ.get costs a raised-and-caught KeyError per missing variable
# (about 1 us); the flags are read on every call, so on CPython the mapping's
# encoded dict is read directly (it is what os.environ itself reads).
_env_data = getattr(os.environ, "_data", None)
_env_encode = getattr(os.environ, "encodekey", None)
if not isinstance(_env_data, dict) or _env_encode is None:
    _env_data = None


def _env_flag(name):
    if _env_data is not None:
        v = _env_data.get(_env_encode(name))
        return v is not None and v not in _FALSE_B
    return os.environ.get(name, "0") not in _FALSE


_K_DISABLE_JIT = "CJIT_DISABLE_JIT"


def user_location():
    """'file:line' of the innermost frame outside the cjit package (the C
    layer's definition, the same one graph nodes record)."""
    return _cjit.user_location()




# ensure_compile_time_eval: the trace stack set aside while the block runs,
# so that operations on concrete values run eagerly (cjit.numpy's wrappers
# bring it back for an operation that has a traced operand).
def _hidden():
    h = getattr(_tls, "hidden", None)
    if h is None:
        h = _tls.hidden = []
    return h


def hide_traces():
    _hidden().append(getattr(_tls, "stack", None) or [])
    _tls.stack = []


def unhide_traces():
    _tls.stack = _hidden().pop()


class revealed:
    """Within a hidden block: the set-aside trace stack, for one operation
    on traced operands."""

    def __enter__(self):
        h = getattr(_tls, "hidden", None)
        self.saved = None
        if h:
            self.saved = _tls.stack
            _tls.stack = h[-1]

    def __exit__(self, *exc):
        if self.saved is not None:
            _tls.stack = self.saved
