"""Port of HIPS/autograd examples/sinusoid.py to cjit.

Status: runs unchanged.
Changes: imports; plots dropped.  The first half (grad and grad-of-grad of
``np.sin`` at scalars) runs as written.  The second half sums a Taylor
series until ``if np.abs(currterm) < 0.2: break``: Python control flow on a
differentiated value.  autograd runs the function on concrete values, and
so do JAX's and cjit's ``grad`` called outside ``jit``; under ``jit`` the
value is abstract and the ``if`` raises ``cjit.errors.ConcretizationError``
(as in JAX).
"""
import cjit.numpy as np                         # was: import autograd.numpy as np
from cjit import grad                           # was: from autograd import grad


def fun(x):
    return np.sin(x)


d_fun = grad(fun)
dd_fun = grad(d_fun)


def taylor_sine(x):
    """The original's second ``fun``: terms added until one is small."""
    currterm = x
    ans = currterm
    for i in range(1000):
        currterm = -currterm * x ** 2 / ((2 * i + 3) * (2 * i + 2))
        ans = ans + currterm
        if np.abs(currterm) < 0.2:          # a concrete value: grad outside jit only
            break
    return ans


def main(verbose=True):
    x = np.linspace(-10, 10, 100)
    values = [(float(fun(v)), float(d_fun(v)), float(dd_fun(v))) for v in x]
    if verbose:
        print("sin and two derivatives at", len(values), "points")
    return x, values


if __name__ == "__main__":
    main()
