"""First-order optimizers over pytrees, with the API of
``jax.example_libraries.optimizers``.

An optimizer is a triple ``(init_fun, update_fun, get_params)``::

    opt_init, opt_update, get_params = optimizers.adam(1e-3)
    opt_state = opt_init(params)              # params: any pytree of arrays

    @cjit.jit
    def step(i, opt_state, batch):
        g = cjit.grad(loss)(get_params(opt_state), batch)
        return opt_update(i, g, opt_state)

``opt_state`` is an ``OptimizerState``, a registered pytree node, so it is a
valid ``jit`` argument and result (its structure is part of the cache key,
its arrays are the leaves).  The step ``i`` may be a Python int or a traced
integer; step sizes are numbers or schedules ``i -> step size``.

Each optimizer is written for one array (``init(x0) -> state``,
``update(i, g, state) -> state``, ``get_params(state) -> x``) and lifted to
pytrees by the ``optimizer`` decorator: the state of each parameter leaf is
a pytree of its own.
"""
import collections
import functools

import numpy as np

from .. import numpy as cnp
from .. import tree_util

__all__ = [
    "Optimizer", "OptimizerState", "optimizer", "sgd", "momentum", "nesterov", "adagrad", "rmsprop",
    "rmsprop_momentum", "adam", "adamax", "constant", "exponential_decay", "inverse_time_decay",
    "polynomial_decay", "piecewise_constant", "make_schedule", "l2_norm", "clip_grads",
    "JoinPoint", "unpack_optimizer_state", "pack_optimizer_state",
]

Optimizer = collections.namedtuple("Optimizer", ["init_fn", "update_fn", "params_fn"])

# packed_state: a tuple with one list of leaves per parameter leaf;
# tree_def: the parameters' structure; subtree_defs: each leaf's state structure.
OptimizerState = collections.namedtuple("OptimizerState",
                                        ["packed_state", "tree_def", "subtree_defs"])

# The arrays are the children; the structures are auxiliary data (hashable
# PyTreeDefs), so a jitted step keys its cache by them.
tree_util.register_pytree_node(
    OptimizerState,
    lambda s: ((s.packed_state,), (s.tree_def, s.subtree_defs)),
    lambda aux, children: OptimizerState(children[0], aux[0], aux[1]))


def optimizer(opt_maker):
    """Lifts an optimizer over single arrays to one over pytrees."""

    @functools.wraps(opt_maker)
    def tree_opt_maker(*args, **kwargs):
        init, update, get_params = opt_maker(*args, **kwargs)

        @functools.wraps(init)
        def tree_init(x0_tree):
            x0_flat, tree = tree_util.tree_flatten(x0_tree)
            flat_states = [tree_util.tree_flatten(init(x0)) for x0 in x0_flat]
            return OptimizerState(tuple(leaves for leaves, _ in flat_states), tree,
                                  tuple(td for _, td in flat_states))

        @functools.wraps(update)
        def tree_update(i, grad_tree, opt_state):
            packed, tree, subtrees = opt_state
            grad_flat, tree2 = tree_util.tree_flatten(grad_tree)
            if tree2 != tree:
                raise TypeError(
                    f"optimizer update: the gradient's structure {tree2} differs from the "
                    f"parameters' structure {tree} that the optimizer state was made for")
            new_packed, new_subtrees = [], []
            for g, leaves, sub in zip(grad_flat, packed, subtrees):
                state = tree_util.tree_unflatten(sub, leaves)
                new_leaves, sub2 = tree_util.tree_flatten(update(i, g, state))
                if sub2 != sub:
                    raise TypeError(
                        f"optimizer update: the update changed a parameter's state structure "
                        f"from {sub} to {sub2}")
                new_packed.append(new_leaves)
                new_subtrees.append(sub2)
            return OptimizerState(tuple(new_packed), tree, tuple(new_subtrees))

        @functools.wraps(get_params)
        def tree_get_params(opt_state):
            packed, tree, subtrees = opt_state
            params = [get_params(tree_util.tree_unflatten(sub, leaves))
                      for leaves, sub in zip(packed, subtrees)]
            return tree_util.tree_unflatten(tree, params)

        return Optimizer(tree_init, tree_update, tree_get_params)

    return tree_opt_maker


def _dtype(x):
    return getattr(x, "dtype", np.dtype(np.float64))   # a Python float parameter: float64


def _rate(step_size, i, dtype):
    """step_size(i) in the parameters' dtype when it is an array, so that a
    schedule computed in float64 (from an int64 step, say) does not turn
    float32 parameters into float64; a Python number stays weakly typed."""
    s = step_size(i)
    if type(s) is int or type(s) is float:   # not np.float64, a float subclass
        return s
    return cnp.asarray(s, dtype=dtype)


def _power(b, n, dtype):
    """b ** n in `dtype` (the parameters' dtype, as JAX keeps it), whatever
    the integer type of the step n (a NumPy int64 would promote float32)."""
    return cnp.asarray(cnp.power(cnp.asarray(b, dtype=dtype), n), dtype=dtype)


# ---- optimizers -----------------------------------------------------------------

@optimizer
def sgd(step_size):
    """Stochastic gradient descent: x <- x - step_size(i) * g."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0

    def update(i, g, x):
        return x - _rate(step_size, i, _dtype(x)) * g

    def get_params(x):
        return x

    return Optimizer(init, update, get_params)


@optimizer
def momentum(step_size, mass):
    """Heavy-ball momentum: v <- mass * v + g; x <- x - step_size(i) * v."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, cnp.zeros_like(x0)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - _rate(step_size, i, _dtype(x)) * velocity, velocity

    def get_params(state):
        return state[0]

    return Optimizer(init, update, get_params)


@optimizer
def nesterov(step_size, mass):
    """Nesterov momentum: v <- mass * v + g; x <- x - step_size(i) * (mass * v + g)."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, cnp.zeros_like(x0)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - _rate(step_size, i, _dtype(x)) * (mass * velocity + g), velocity

    def get_params(state):
        return state[0]

    return Optimizer(init, update, get_params)


@optimizer
def adagrad(step_size, momentum=0.9):
    """Adagrad (Duchi et al., 2011) with momentum on the scaled gradient."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, cnp.zeros_like(x0), cnp.zeros_like(x0)

    def update(i, g, state):
        x, g_sq, m = state
        g_sq = g_sq + cnp.square(g)
        # where g_sq is 0 (a gradient that was always 0) the scaled gradient is 0
        g_sq_inv_sqrt = cnp.where(g_sq > 0, 1.0 / cnp.sqrt(cnp.where(g_sq > 0, g_sq, 1.0)), 0.0)
        m = (1.0 - momentum) * (g * g_sq_inv_sqrt) + momentum * m
        return x - _rate(step_size, i, _dtype(x)) * m, g_sq, m

    def get_params(state):
        return state[0]

    return Optimizer(init, update, get_params)


@optimizer
def rmsprop(step_size, gamma=0.9, eps=1e-8):
    """RMSProp (Tieleman and Hinton, 2012)."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, cnp.zeros_like(x0)

    def update(i, g, state):
        x, avg_sq_grad = state
        avg_sq_grad = avg_sq_grad * gamma + cnp.square(g) * (1.0 - gamma)
        return x - _rate(step_size, i, _dtype(x)) * g / cnp.sqrt(avg_sq_grad + eps), avg_sq_grad

    def get_params(state):
        return state[0]

    return Optimizer(init, update, get_params)


@optimizer
def rmsprop_momentum(step_size, gamma=0.9, eps=1e-8, momentum=0.9):
    """RMSProp with momentum on the scaled step."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, cnp.zeros_like(x0), cnp.zeros_like(x0)

    def update(i, g, state):
        x, avg_sq_grad, mom = state
        avg_sq_grad = avg_sq_grad * gamma + cnp.square(g) * (1.0 - gamma)
        mom = momentum * mom + _rate(step_size, i, _dtype(x)) * g / cnp.sqrt(avg_sq_grad + eps)
        return x - mom, avg_sq_grad, mom

    def get_params(state):
        return state[0]

    return Optimizer(init, update, get_params)


@optimizer
def adam(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """Adam (Kingma and Ba, 2015), with bias-corrected moments:

    m <- (1 - b1) g + b1 m;  v <- (1 - b2) g^2 + b2 v
    x <- x - step_size(i) * (m / (1 - b1^(i+1))) / (sqrt(v / (1 - b2^(i+1))) + eps)
    """
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, cnp.zeros_like(x0), cnp.zeros_like(x0)

    def update(i, g, state):
        x, m, v = state
        m = (1.0 - b1) * g + b1 * m
        v = (1.0 - b2) * cnp.square(g) + b2 * v
        mhat = m / (1.0 - _power(b1, i + 1, m.dtype))
        vhat = v / (1.0 - _power(b2, i + 1, m.dtype))
        return x - _rate(step_size, i, _dtype(x)) * mhat / (cnp.sqrt(vhat) + eps), m, v

    def get_params(state):
        return state[0]

    return Optimizer(init, update, get_params)


@optimizer
def adamax(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """AdaMax, Adam's infinity-norm variant (Kingma and Ba, 2015, section 7)."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, cnp.zeros_like(x0), cnp.zeros_like(x0)

    def update(i, g, state):
        x, m, u = state
        m = (1.0 - b1) * g + b1 * m
        u = cnp.maximum(b2 * u, cnp.abs(g))
        return (x - (_rate(step_size, i, _dtype(x)) / (1.0 - _power(b1, i + 1, m.dtype))) * m
                / (u + eps), m, u)

    def get_params(state):
        return state[0]

    return Optimizer(init, update, get_params)


# ---- step-size schedules -----------------------------------------------------------

def constant(step_size):
    def schedule(i):
        return step_size
    return schedule


def exponential_decay(step_size, decay_steps, decay_rate):
    """step_size * decay_rate ** (i / decay_steps)."""
    def schedule(i):
        return step_size * decay_rate ** (i / decay_steps)
    return schedule


def inverse_time_decay(step_size, decay_steps, decay_rate, staircase=False):
    """step_size / (1 + decay_rate * i / decay_steps), with i / decay_steps
    rounded down when ``staircase``."""
    if staircase:
        def schedule(i):
            return step_size / (1 + decay_rate * cnp.floor(i / decay_steps))
    else:
        def schedule(i):
            return step_size / (1 + decay_rate * i / decay_steps)
    return schedule


def polynomial_decay(step_size, decay_steps, final_step_size, power=1.0):
    """From step_size to final_step_size over decay_steps, then constant."""
    def schedule(step_num):
        step_num = cnp.minimum(step_num, decay_steps)
        step_mult = (1 - step_num / decay_steps) ** power
        return step_mult * (step_size - final_step_size) + final_step_size
    return schedule


def piecewise_constant(boundaries, values):
    """values[k] for boundaries[k-1] < i <= boundaries[k] (values[0] up to
    and including boundaries[0], values[-1] after boundaries[-1])."""
    boundaries = np.array(boundaries)
    values = np.array(values)
    if boundaries.ndim != 1 or values.ndim != 1:
        raise ValueError("piecewise_constant: boundaries and values must be sequences")
    if not values.shape[0] == boundaries.shape[0] + 1:
        raise ValueError("piecewise_constant: values must have one more entry than boundaries "
                         f"(got {values.shape[0]} values and {boundaries.shape[0]} boundaries)")

    def schedule(i):
        # a chain of selects rather than values[count(i > boundaries)]: the
        # index is traced under jit, and a select needs no gather
        out = values[0]
        for b, v in zip(boundaries.tolist(), values[1:].tolist()):
            out = cnp.where(i > b, v, out)
        return out
    return schedule


def make_schedule(scalar_or_schedule):
    """A schedule from a callable (itself) or a number (constant)."""
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if np.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError(f"step size must be a number or a schedule (a callable), got "
                    f"{type(scalar_or_schedule).__name__}")


# ---- utilities ------------------------------------------------------------------------

def l2_norm(tree):
    """The l2 norm of all the leaves of a pytree together."""
    leaves = tree_util.tree_leaves(tree)
    total = 0.0
    for x in leaves:
        total = total + cnp.sum(cnp.square(x))
    return cnp.sqrt(total)


def clip_grads(grad_tree, max_norm):
    """Scales the gradients down so that their joint l2 norm is at most max_norm."""
    norm = l2_norm(grad_tree)

    def normalize(g):
        return cnp.where(norm < max_norm, g, g * (max_norm / norm))

    return tree_util.tree_map(normalize, grad_tree)


class JoinPoint:
    """Marks where one parameter's state subtree sits in an unpacked state
    (a leaf, so the parameters' structure stays visible)."""

    def __init__(self, subtree):
        self.subtree = subtree

    def __repr__(self):
        return f"JoinPoint({self.subtree!r})"


def unpack_optimizer_state(opt_state):
    """An OptimizerState as a pytree with the parameters' structure whose
    leaves are JoinPoints holding each parameter's state (for saving)."""
    packed, tree_def, subtree_defs = opt_state
    subtrees = [tree_util.tree_unflatten(sub, leaves) for leaves, sub in zip(packed, subtree_defs)]
    return tree_util.tree_unflatten(tree_def, [JoinPoint(s) for s in subtrees])


def pack_optimizer_state(marked_pytree):
    """The inverse of unpack_optimizer_state."""
    sentinels, tree_def = tree_util.tree_flatten(marked_pytree)
    if not all(isinstance(s, JoinPoint) for s in sentinels):
        raise TypeError("pack_optimizer_state: every leaf must be a JoinPoint (what "
                        "unpack_optimizer_state returns)")
    flat = [tree_util.tree_flatten(s.subtree) for s in sentinels]
    return OptimizerState(tuple(leaves for leaves, _ in flat), tree_def,
                          tuple(td for _, td in flat))
