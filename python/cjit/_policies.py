"""Checkpoint policies and checkpoint_name (checkpoint, remat and
saved_residuals live in _remat.py; grad, value_and_grad and vjp in
_autodiff.py)."""
from __future__ import annotations

from . import _tree
from ._cjit import Tracer


def checkpoint_name(x, name):
    """Names a value for the name-based checkpoint policies; the identity
    otherwise (also on concrete arrays)."""
    if not isinstance(name, str):
        raise TypeError(f"cjit.checkpoint_name: name must be a str, got {type(name).__name__}")

    def tag(v):
        if isinstance(v, Tracer):
            return v.trace.apply("name", v, name=name)
        return v
    return _tree.tree_map(tag, x)


class _Policy:
    """A checkpoint policy: which values of a region the backward keeps."""

    __slots__ = ("kind", "names")

    def __init__(self, kind, names=()):
        self.kind = kind
        self.names = tuple(names)

    def __repr__(self):
        if self.names:
            return f"checkpoint_policies.{self.kind}({', '.join(map(repr, self.names))})"
        return f"checkpoint_policies.{self.kind}"

    def __eq__(self, other):
        return isinstance(other, _Policy) and (self.kind, self.names) == (other.kind, other.names)

    def __hash__(self):
        return hash((self.kind, self.names))


def _names_policy(kind, names):
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"cjit.checkpoint_policies.{kind}: names must be str, got {n!r}")
    return _Policy(kind, names)


class checkpoint_policies:
    """The policies of SPEC section 5: which values of a checkpointed region
    the backward pass keeps (the rest is recomputed)."""

    everything_saveable = _Policy("everything_saveable")
    nothing_saveable = _Policy("nothing_saveable")
    dots_saveable = _Policy("dots_saveable")

    @staticmethod
    def save_only_these_names(*names):
        return _names_policy("save_only_these_names", names)

    @staticmethod
    def save_anything_except_these_names(*names):
        return _names_policy("save_anything_except_these_names", names)

    def __init__(self):
        raise TypeError("cjit.checkpoint_policies is a namespace")
