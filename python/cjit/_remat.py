"""Gradient checkpointing: cjit.checkpoint (alias cjit.remat) and
cjit.saved_residuals.

Policy and mechanism are apart.  A region opened by ``checkpoint`` tags the
nodes traced inside it with its policy; when a backward pass is built
(csrc/autodiff.c), a value the policy does not keep is recomputed from the
region's inputs just before its first use, as a copy that CSE may not fold
back into the forward value.  Outside a differentiated computation a
checkpointed function behaves exactly like the function itself.
"""
import functools

import numpy as np

from . import _cjit, _tree
from ._autodiff import grad
from ._jitted import Jitted
from ._policies import _Policy, checkpoint_policies
from ._trace_state import current_trace


def _policy_code(policy):
    """(name, names) of a policy, as Trace.region_begin takes them."""
    if policy is None:
        policy = checkpoint_policies.nothing_saveable
    if not isinstance(policy, _Policy):
        raise TypeError("cjit.checkpoint: policy must be one of cjit.checkpoint_policies, "
                        f"got {policy!r}")
    return policy.kind, list(policy.names)   # the C layer knows the policies by these names


def checkpoint(fun=None, *, policy=None, static_argnums=(), prevent_cse=True):
    """Marks ``fun`` as a checkpointed region: inside a differentiated
    computation its intermediate values are not kept for the backward pass
    unless ``policy`` says so; they are recomputed from the region's inputs.
    ``static_argnums`` are accepted for compatibility (arguments are passed
    through unchanged either way); ``prevent_cse`` is always in effect."""
    if fun is None:
        return functools.partial(checkpoint, policy=policy, static_argnums=static_argnums,
                                 prevent_cse=prevent_cse)
    if not callable(fun):
        raise TypeError(f"cjit.checkpoint: expected a callable, got {type(fun).__name__}")
    policy_name, names = _policy_code(policy)

    @functools.wraps(fun)
    def checkpointed(*args, **kwargs):
        trace = current_trace()
        if trace is None:
            return fun(*args, **kwargs)
        region = trace.region_begin(policy_name, names)
        try:
            return fun(*args, **kwargs)
        finally:
            trace.region_end(region)

    return checkpointed


remat = checkpoint


class Residual:
    """One value the backward pass keeps from the forward pass."""

    __slots__ = ("shape", "dtype", "source", "op")

    def __init__(self, shape, dtype, source, op):
        self.shape, self.dtype, self.source, self.op = tuple(shape), np.dtype(dtype), source, op

    def __repr__(self):
        return f"Residual({self.dtype.name}{list(self.shape)} from {self.op} at {self.source})"


def saved_residuals(fun, *args, argnums=0, **kwargs):
    """Lists what the gradient of scalar-valued ``fun`` keeps from its
    forward pass for these arguments: each value's shape, dtype, the op that
    made it and its source ``file:line``.  Differentiated arguments that
    the backward pass reads appear too, as op ``name`` at the call's line."""
    g = grad(fun, argnums=argnums)
    inner = Jitted(lambda *a, **k: g(*a, **k), _internal=True)
    lowered = inner.lower(*args, **kwargs)
    return [Residual(shape, dtype, source, op)
            for _, shape, dtype, source, op in lowered._lowered.residuals()]
