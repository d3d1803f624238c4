"""Port of HIPS/autograd examples/sinusoid.py to cjit.

Status: first half runs unchanged; second half blocked.
Changes: imports; plots dropped.  The first half (grad and grad-of-grad of
``np.sin`` at scalars) runs as written.  The second half sums a Taylor
series until ``if np.abs(currterm) < 0.2: break``: Python control flow on a
differentiated value.  autograd runs the function on concrete values; cjit
traces it, so ``grad`` raises ``cjit.errors.ConcretizationError`` there (JAX
does too).  Missing: data-dependent loops (``lax.while_loop``), or an
eager, non-tracing grad.
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
        if np.abs(currterm) < 0.2:          # needs a concrete value: fails under cjit.grad
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
