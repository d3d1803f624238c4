"""Port of HIPS/autograd examples/rosenbrock.py to cjit.

Status: runs unchanged (import swap only).
Changes: imports (autograd -> cjit).  The function and its value-and-gradient
go to scipy.optimize.minimize (conjugate gradients) as in the original.
"""
from scipy.optimize import minimize

import cjit.numpy as np                         # was: import autograd.numpy as np
from cjit import value_and_grad                 # was: from autograd import value_and_grad


def rosenbrock(x):
    return 100 * (x[1] - x[0] ** 2) ** 2 + (1 - x[0]) ** 2


rosenbrock_with_grad = value_and_grad(rosenbrock)


def main(verbose=True):
    result = minimize(rosenbrock_with_grad, x0=np.array([0.0, 0.0]), jac=True, method="CG")
    if verbose:
        print(f"Found minimum at {result.x}")
    return result


if __name__ == "__main__":
    main()
