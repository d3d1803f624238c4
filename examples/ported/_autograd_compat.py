"""The one piece of autograd's library API that the ported autograd examples
use and cjit does not have under that name: the ``adam`` driver of
``autograd.misc.optimizers``.

autograd's ``adam(grad, x0, callback, num_iters, step_size, b1, b2, eps)``
calls ``grad(x, i)`` and ``callback(x, i, g)`` each step and applies Adam
with bias correction.  This stand-in runs the same update rule through
``cjit.example_libraries.optimizers.adam`` (JAX's, which is the same rule),
over any pytree of parameters.
"""
from cjit.example_libraries import optimizers


def adam(grad, x0, callback=None, num_iters=100, step_size=0.001, b1=0.9, b2=0.999, eps=1e-8):
    opt_init, opt_update, get_params = optimizers.adam(step_size, b1, b2, eps)
    state = opt_init(x0)
    for i in range(num_iters):
        x = get_params(state)
        g = grad(x, i)
        if callback is not None:
            callback(x, i, g)
        state = opt_update(i, g, state)
    return get_params(state)
