"""Port of HIPS/autograd examples/tanh.py to cjit.

Status: runs with one small edit.
Changes: imports; ``autograd.elementwise_grad`` (not a JAX name; cjit has
no vmap to build it the JAX way) -> a one-line stand-in, the gradient of
the sum, which is the same vector-Jacobian product with a vector of ones
for an elementwise function.  The plot is dropped; the four nested
derivatives are computed as in the original.
"""
import cjit
import cjit.numpy as np                         # was: import autograd.numpy as np


def egrad(fun):                                 # was: from autograd import elementwise_grad as egrad
    return cjit.grad(lambda x: np.sum(fun(x)))


def tanh(x):
    return (1.0 - np.exp(-2 * x)) / (1.0 + np.exp(-(2 * x)))


def derivatives(x, order=4):
    """[tanh(x), tanh'(x), ..., the order-th derivative], each at every x."""
    out, f = [tanh(x)], tanh
    for _ in range(order):
        f = egrad(f)
        out.append(f(x))
    return out


def main(verbose=True):
    x = np.linspace(-7, 7, 700)
    curves = derivatives(x)
    if verbose:
        for k, c in enumerate(curves):
            print(f"derivative {k}: min {float(c.min()):+.4f} max {float(c.max()):+.4f}")
    return x, curves


if __name__ == "__main__":
    main()
