"""Port of jax-ml/jax examples/kernel_lsq.py (removed upstream in commit
c856560f0e; read from its parent) to cjit.

Status: blocked; runs with edits.
First missing feature: ``cjit.vmap`` (the Gram matrix is a vmap of a vmap
of a kernel on single points).  Also missing: ``lax.Precision`` (the
``precision=`` keyword of ``dot``) and ``make_jaxpr``.
Changes: imports; the kernels take batches (sums over the last axis) and
``gram``/``predict`` broadcast them over pairs instead of vmapping;
``precision=lax.Precision.HIGH`` dropped (cjit computes float64 dots
exactly as written); ``make_jaxpr`` -> ``jit(...).lower(...).as_text()``.
The objective (ridge-regularised kernel least squares in the dual) and the
optimizer (momentum, 10000 steps of 1e-6, mass 0.9) are the original's.
"""
from functools import partial

import numpy.random as npr

import cjit.numpy as jnp                        # was: import jax.numpy as jnp
from cjit.example_libraries import optimizers
from cjit import grad, jit                      # was: from jax import grad, jit, make_jaxpr, vmap, lax


def gram(kernel, xs):
    """a[i, j] = kernel(xs[i], xs[j]).  was: vmap(lambda x: vmap(lambda y: kernel(x, y))(xs))(xs)"""
    return kernel(xs[:, None, :], xs[None, :, :])


def minimize(f, x, num_steps=10000, step_size=0.000001, mass=0.9):
    opt_init, opt_update, get_params = optimizers.momentum(step_size, mass)

    @jit
    def update(i, opt_state):
        x = get_params(opt_state)
        return opt_update(i, grad(f)(x), opt_state)

    opt_state = opt_init(x)
    for i in range(num_steps):
        opt_state = update(i, opt_state)
    return get_params(opt_state)


def train(kernel, xs, ys, regularization=0.01, num_steps=10000):
    gram_mat = jit(partial(gram, kernel))(xs)
    n = xs.shape[0]

    def objective(v):
        risk = .5 * jnp.sum((jnp.dot(gram_mat, v) - ys) ** 2.0)
        reg = regularization * jnp.sum(v ** 2.0)
        return risk + reg

    v = minimize(objective, jnp.zeros(n), num_steps=num_steps)

    def predict(x):                             # was: a vmap of the one-point predict
        prods = kernel(x[:, None, :], xs[None, :, :])
        return jnp.sum(v * prods, axis=-1)

    return jit(predict), v, objective


# was: jnp.dot(x, y, precision=lax.Precision.HIGH) on two points
linear_kernel = lambda x, y: jnp.sum(x * y, axis=-1)
rbf_kernel = lambda x, y: jnp.exp(-jnp.sum((x - y) ** 2, axis=-1))


def main(n=100, d=20, num_steps=10000, verbose=True):
    rs = npr.RandomState(0)
    truth = rs.randn(d)
    xs = rs.randn(n, d)
    ys = jnp.dot(xs, truth)
    predict, v, objective = train(linear_kernel, xs, ys, num_steps=num_steps)
    mse = float(jnp.sum((predict(xs) - ys) ** 2.))
    if verbose:
        print('MSE:', mse)
        for name, k in (("linear_kernel", linear_kernel), ("rbf_kernel", rbf_kernel)):
            print(f"\ngraph of gram({name}):")     # was: make_jaxpr(partial(gram, kernel))(xs)
            print(jit(partial(gram, k)).lower(xs).as_text())
    return mse, v, objective, (xs, ys)


if __name__ == "__main__":
    main()
