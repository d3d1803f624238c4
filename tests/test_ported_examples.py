"""The public JAX and autograd examples ported to cjit (examples/ported/).

Each program runs here at a small size, and each test checks a property of
the result against something cjit did not compute: a NumPy (or SciPy)
re-implementation of the same formula, central finite differences, a closed
form, or the loss going down.  docs/PORTED.md has the table of what each
port changed and what blocked it.
"""
import math
import os
import sys

import numpy as np
import pytest
import scipy.stats

import cjit
import cjit.numpy as cnp
from cjit import tree_util
from cjit.flatten_util import ravel_pytree

PORTED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "examples", "ported")
sys.path.insert(0, PORTED)

import _data  # noqa: E402


def _directional_check(f, params, seed=0, h=1e-6, rtol=1e-5):
    """cjit.grad(f) against a central difference of f along one random
    direction in parameter space."""
    g = cjit.grad(f)(params)
    rng = np.random.default_rng(seed)
    leaves, treedef = tree_util.tree_flatten(params)
    direction = [rng.standard_normal(np.shape(x)) for x in leaves]
    shift = lambda s: tree_util.tree_unflatten(
        treedef, [x + s * d for x, d in zip(leaves, direction)])
    fd = (float(f(shift(h))) - float(f(shift(-h)))) / (2 * h)
    analytic = sum(float(np.sum(np.asarray(gl) * d))
                   for gl, d in zip(tree_util.tree_leaves(g), direction))
    assert analytic == pytest.approx(fd, rel=rtol, abs=1e-7)


def _np_log_softmax(z):
    m = z.max(axis=1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=1, keepdims=True))


def _small_digits(n_train=200, n_test=50):
    tr_x, tr_y, te_x, te_y = _data.digits()
    return tr_x[:n_train], tr_y[:n_train], te_x[:n_test], te_y[:n_test]


# ---- jax-ml/jax examples ---------------------------------------------------------------

def test_mnist_classifier_fromscratch():
    import jax_mnist_classifier_fromscratch as m
    tr_x, tr_y, te_x, te_y = _small_digits()
    params = m.init_random_params(0.1, [64, 32, 16, 10], np.random.RandomState(0))
    # the prediction is NumPy's tanh MLP with a log-softmax output
    h = tr_x
    for w, b in params[:-1]:
        h = np.tanh(h @ w + b)
    want = _np_log_softmax(h @ params[-1][0] + params[-1][1])
    np.testing.assert_allclose(m.predict(params, tr_x), want, rtol=1e-5, atol=1e-5)
    params64 = [(w.astype(np.float64), b) for w, b in params]
    _directional_check(lambda p: m.loss(p, (tr_x[:20].astype(np.float64), tr_y[:20])),
                       params64)
    # full-batch jitted SGD steps (the original's update, at a larger step)
    # lower the loss at every step
    update = m.make_update(0.5)
    losses = [float(m.loss(params, (tr_x, tr_y)))]
    for _ in range(8):
        params = update(params, (tr_x, tr_y))
        losses.append(float(m.loss(params, (tr_x, tr_y))))
    assert all(b < a for a, b in zip(losses, losses[1:])), losses


def test_mnist_classifier_stax():
    import jax_mnist_classifier as m
    tr_x, tr_y, te_x, te_y = _small_digits(256, 64)
    _, params = m.init_random_params(0, (-1, 64))
    # Dense-Relu-Dense-Relu-Dense-LogSoftmax in NumPy from the same parameters
    (w1, b1), _, (w2, b2), _, (w3, b3), _ = params
    h = np.maximum(np.maximum(tr_x @ w1 + b1, 0) @ w2 + b2, 0)
    np.testing.assert_allclose(m.predict(params, tr_x), _np_log_softmax(h @ w3 + b3),
                               rtol=1e-4, atol=1e-5)
    final, history = m.main(step_size=0.01, num_epochs=3, batch_size=64,
                            data=(tr_x, tr_y, te_x, te_y), verbose=False)
    assert float(m.loss(final, (tr_x, tr_y))) < float(m.loss(params, (tr_x, tr_y))) - 0.2
    # accuracy is the share of argmax hits, as NumPy counts it
    pred = np.asarray(m.predict(final, tr_x)).argmax(axis=1)
    assert history[-1][0] == pytest.approx(np.mean(pred == tr_y.argmax(axis=1)), abs=1e-12)


def test_kernel_lsq():
    import jax_kernel_lsq as m
    rs = np.random.RandomState(1)
    xs = rs.randn(30, 5)
    ys = xs @ rs.randn(5)
    np.testing.assert_allclose(cjit.jit(lambda x: m.gram(m.linear_kernel, x))(xs), xs @ xs.T,
                               rtol=1e-12, atol=1e-12)
    d2 = ((xs[:, None, :] - xs[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(m.gram(m.rbf_kernel, xs), np.exp(-d2), rtol=1e-12, atol=1e-15)
    # 300 momentum steps against the same recurrence in NumPy with the
    # gradient of the objective written by hand
    steps = 300
    predict, v, objective = m.train(m.linear_kernel, xs, ys, num_steps=steps)
    K = xs @ xs.T
    x, vel = np.zeros(30), np.zeros(30)
    for _ in range(steps):
        g = K.T @ (K @ x - ys) + 2 * 0.01 * x
        vel = 0.9 * vel + g
        x = x - 1e-6 * vel
    np.testing.assert_allclose(v, x, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(predict(xs), K @ x, rtol=1e-9, atol=1e-9)
    assert float(objective(v)) < float(objective(np.zeros(30)))


def test_advi():
    import jax_advi as m
    noise = m.draw_noise(3, 40)
    params = (np.array([0.3, -0.5]), np.array([0.1, -0.2]))
    # the objective is SciPy's densities evaluated on the same samples
    mean, log_std = params
    s = mean[:, None] + np.exp(log_std)[:, None] * noise
    logp = scipy.stats.norm.logpdf(s[0], 0, np.exp(s[1])) + scipy.stats.norm.logpdf(s[1], 0, 1.35)
    logq = scipy.stats.norm.logpdf(s, mean[:, None], np.exp(log_std)[:, None]).sum(axis=0)
    assert float(m.objective(params, noise)) == pytest.approx(-np.mean(logp - logq), rel=1e-12)
    _directional_check(lambda p: m.objective(p, noise), params)
    # the contour grid (jit with static arguments, linspace, meshgrid) as NumPy makes it
    X, Y, Z = m.mesh_eval(m.approx_dist, (-2, 2), (-4, 2), params, 7)
    Xn, Yn = np.meshgrid(np.linspace(-2, 2, 7), np.linspace(-4, 2, 7))
    want = np.exp(scipy.stats.norm.logpdf(Xn, mean[0], np.exp(log_std[0]))
                  + scipy.stats.norm.logpdf(Yn, mean[1], np.exp(log_std[1])))
    np.testing.assert_allclose(Z, want, rtol=1e-12, atol=1e-300)
    # with the noise held fixed, the momentum steps lower the objective
    from cjit.example_libraries import optimizers
    opt_init, opt_update, get_params = optimizers.momentum(0.01, 0.9)
    state = opt_init(params)
    start = float(m.objective(params, noise))
    for i in range(10):
        state = opt_update(i, cjit.grad(m.objective)(get_params(state), noise), state)
    assert float(m.objective(get_params(state), noise)) < start


def _np_mlp(layers, x, last_relu=False):
    for k, (w, b) in enumerate(layers):
        x = x @ w + b
        if k < len(layers) - 1 or last_relu:
            x = np.maximum(x, 0)
    return x


def test_mnist_vae():
    import jax_mnist_vae as m
    rng = np.random.default_rng(0)
    _, enc = m.encoder_init(1, (16, 64))
    _, dec = m.decoder_init(2, (16, 10))
    images = rng.random((16, 64)) < 0.3
    noise = rng.standard_normal((16, 10))
    # the ELBO in NumPy from the same parameters
    (w1, b1), _, (w2, b2), _, _, ((wm, bm), ((ws, bs), _)) = enc
    h = _np_mlp([(w1, b1), (w2, b2)], images.astype(float), last_relu=True)
    mu, sigmasq = h @ wm + bm, np.logaddexp(0, h @ ws + bs)
    z = mu + np.sqrt(sigmasq) * noise
    (v1, c1), _, (v2, c2), _, (v3, c3) = dec
    logits = _np_mlp([(v1, c1), (v2, c2), (v3, c3)], z)
    loglik = -np.sum(np.logaddexp(0, np.where(images, -1.0, 1.0) * logits))
    kl = -0.5 * np.sum(1 + np.log(sigmasq) - mu ** 2 - sigmasq)
    got = float(m.elbo(noise, (enc, dec), images))
    assert got == pytest.approx(loglik - kl, rel=1e-5)
    # the image grid, jitted, as NumPy lays it out
    vecs = rng.random((6, 64))
    grid = cjit.jit(lambda v: m.image_grid(2, 3, v, (8, 8)))(vecs)
    ims = vecs.reshape(-1, 8, 8)
    want = np.vstack([np.hstack([ims[r * 3 + c].T for c in range(3)][::-1])
                      for r in range(2)]).T
    np.testing.assert_array_equal(grid, want)
    # the test-set ELBO rises over three short epochs
    _, history, _ = m.main(num_epochs=3, max_batches=8, verbose=False)
    assert history[2] > history[0] + 1.0


def test_mnist_vae_epoch_in_one_jit():
    """The example's own training epoch, as it is written: one jit around a
    fori_loop whose body slices its batch at a traced offset
    (lax.dynamic_slice_in_dim), splits keys, binarizes with bernoulli and
    takes the gradient.  It equals the same steps run one by one."""
    from cjit import lax, random
    from cjit.example_libraries import optimizers, stax
    enc_init, encode = stax.serial(stax.Dense(16), stax.Relu, stax.FanOut(2),
                                   stax.parallel(stax.Dense(3), stax.serial(stax.Dense(3), stax.Softplus)))
    dec_init, decode = stax.serial(stax.Dense(16), stax.Relu, stax.Dense(20))

    def elbo(rng, params, images):
        (enc, dec) = params
        mu, sigmasq = encode(enc, images)
        z = mu + cnp.sqrt(sigmasq) * random.normal(rng, mu.shape)
        logits = decode(dec, z)
        loglik = -cnp.sum(cnp.logaddexp(0.0, cnp.where(images, -1.0, 1.0) * logits))
        return loglik + 0.5 * cnp.sum(1.0 + cnp.log(sigmasq) - mu ** 2 - sigmasq)

    bs, nb = 4, 5
    images = np.random.default_rng(0).random((bs * nb, 20))
    key = random.PRNGKey(0)
    params = (enc_init(key, (bs, 20))[1], dec_init(key, (bs, 3))[1])
    opt_init, opt_update, get_params = optimizers.momentum(0.01, mass=0.9)

    def body(i, carry, images):
        rng, state = carry
        rng, elbo_rng, data_rng = random.split(rng, 3)
        batch = random.bernoulli(data_rng, lax.dynamic_slice_in_dim(images, (i % nb) * bs, bs))
        g = cjit.grad(lambda p: -elbo(elbo_rng, p, batch) / bs)(get_params(state))
        return rng, opt_update(i, g, state)

    run_epoch = cjit.jit(lambda rng, state, images: lax.fori_loop(
        0, nb, lambda i, c: body(i, c, images), (rng, state))[1])
    got = get_params(run_epoch(key, opt_init(params), images))
    step = cjit.jit(body)
    carry = (key, opt_init(params))
    for i in range(nb):
        carry = step(np.int32(i), carry, images)
    want = get_params(carry[1])
    for a, b in zip(tree_util.tree_leaves(got), tree_util.tree_leaves(want)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


# ---- HIPS/autograd examples ------------------------------------------------------------

def test_logistic_regression():
    import ag_logistic_regression as m
    weights, first, last = m.main(verbose=False)
    # the same 100 steps in NumPy with the gradient written by hand
    x, t = m.inputs, m.targets.astype(float)
    w = np.zeros(3)
    for _ in range(100):
        th = np.tanh(x @ w)
        p = 0.5 * (th + 1)
        lab = p * t + (1 - p) * (1 - t)
        w -= 0.01 * (-(((2 * t - 1) / lab) * 0.5 * (1 - th ** 2)) @ x)
    np.testing.assert_allclose(weights, w, rtol=1e-12, atol=1e-14)
    assert first == pytest.approx(4 * math.log(2), rel=1e-14)
    assert last < 0.4


def test_rosenbrock():
    import ag_rosenbrock as m
    rng = np.random.default_rng(0)
    for x in rng.uniform(-2, 2, (3, 2)):
        v, g = m.rosenbrock_with_grad(x)
        want = [-400 * x[0] * (x[1] - x[0] ** 2) - 2 * (1 - x[0]), 200 * (x[1] - x[0] ** 2)]
        assert float(v) == pytest.approx(100 * (x[1] - x[0] ** 2) ** 2 + (1 - x[0]) ** 2,
                                         rel=1e-14)
        np.testing.assert_allclose(g, want, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(m.main(verbose=False).x, [1.0, 1.0], atol=1e-4)


def test_tanh_four_derivatives():
    import ag_tanh as m
    x = np.linspace(-7, 7, 141)
    t = np.tanh(x)
    want = [t, 1 - t ** 2, -2 * t * (1 - t ** 2), (6 * t ** 2 - 2) * (1 - t ** 2),
            8 * t * (1 - t ** 2) * (2 - 3 * t ** 2)]
    for k, (got, w) in enumerate(zip(m.derivatives(x), want)):
        np.testing.assert_allclose(got, w, rtol=1e-9, atol=1e-9, err_msg=f"derivative {k}")


def test_sinusoid():
    import ag_sinusoid as m
    for v in (-3.0, 0.5, 2.0):
        assert float(m.d_fun(v)) == pytest.approx(math.cos(v), rel=1e-14, abs=1e-15)
        assert float(m.dd_fun(v)) == pytest.approx(-math.sin(v), rel=1e-14, abs=1e-15)
    # the Taylor series runs on concrete values ...
    assert abs(float(m.taylor_sine(1.0)) - math.sin(1.0)) < 0.2
    # ... and so does its grad outside jit (as in autograd and JAX): at x = 1 the
    # series stops after x - x**3/6, whose derivative is 1 - x**2/2; at x = 2 after
    # x - x**3/6 + x**5/120 - x**7/5040 (the last term is -0.025)
    assert float(cjit.grad(m.taylor_sine)(1.0)) == pytest.approx(0.5, rel=1e-14)
    d2 = 1 - 2.0 ** 2 / 2 + 2.0 ** 4 / 24 - 2.0 ** 6 / 720
    assert float(cjit.grad(m.taylor_sine)(2.0)) == pytest.approx(d2, rel=1e-13)
    # under jit the break's value is abstract: a clear error naming the line
    with pytest.raises(cjit.errors.ConcretizationError, match="ag_sinusoid.py"):
        cjit.jit(cjit.grad(m.taylor_sine))(1.0)


def test_ravel_pytree():
    tree = [(np.arange(6.0).reshape(2, 3), np.ones(3, np.float32)), {"a": np.int32(4)}]
    flat, unravel = ravel_pytree(tree)
    np.testing.assert_array_equal(flat, [0, 1, 2, 3, 4, 5, 1, 1, 1, 4])
    assert flat.dtype == np.float64
    back = unravel(flat * 2)
    np.testing.assert_array_equal(back[0][0], np.arange(6.0).reshape(2, 3) * 2)
    assert back[0][1].dtype == np.float32 and back[1]["a"].dtype == np.int32
    # inside grad: the gradient of |flat|^2 is 2 * params, leaf by leaf
    p = [np.arange(3.0), np.full((2, 2), 0.5)]
    g = cjit.grad(lambda q: cnp.sum(ravel_pytree(q)[0] ** 2))(p)
    np.testing.assert_array_equal(g[0], 2 * p[0])
    np.testing.assert_array_equal(g[1], 2 * p[1])
    with pytest.raises(ValueError, match="shape \\(10,\\)"):
        unravel(np.zeros(9))


def test_neural_net():
    import ag_neural_net as m
    tr_x, tr_y, te_x, te_y = _small_digits(512, 64)
    params = m.init_random_params(0.1, [64, 20, 10], np.random.RandomState(0))
    l2 = sum(np.sum(w ** 2) + np.sum(b ** 2) for w, b in params)
    assert float(m.l2_norm(params)) == pytest.approx(l2, rel=1e-12)
    _directional_check(lambda p: m.log_posterior(p, tr_x[:30].astype(float), tr_y[:30], 1.0),
                       params)
    _, history, _ = m.main(layer_sizes=(64, 50, 10), num_epochs=3, batch_size=128,
                           step_size=0.01, data=(tr_x, tr_y, te_x, te_y), verbose=False)
    objectives = [h[3] for h in history]
    assert objectives[-1] < objectives[0] and history[-1][1] > history[0][1] + 0.3


@pytest.mark.parametrize("name", ["ag_rnn", "ag_lstm"])
def test_rnn_and_lstm(name):
    m = __import__(name)
    trained, losses, training_loss, data = m.main(num_iters=21, sequence_length=6, max_lines=12,
                                                  state_size=8, verbose=False)
    assert losses[-1] < losses[0] - 1.0
    # the one-hot text is the file itself, one row per character
    import ag_rnn
    first_line = open(os.path.join(PORTED, name + ".py")).readline()
    assert ag_rnn.one_hot_to_string(data[:, 0, :]) == (first_line + " " * 6)[:6]
    _directional_check(lambda p: training_loss(p, 0), trained)


def test_black_box_svi():
    import ag_black_box_svi as m
    x = np.linspace(-3, 3, 7)
    np.testing.assert_allclose(m.norm_logpdf(x, 0.5, 1.35), scipy.stats.norm.logpdf(x, 0.5, 1.35),
                               rtol=1e-14)
    objective, gradient, _ = m.black_box_variational_inference(m.log_density, 2, 500)
    p = np.array([-1.0, 0.5, -1.0, -0.5])
    # fresh samples at every call, as autograd drew them: two calls differ
    g1, g2 = gradient(p, 0), gradient(p, 1)
    assert np.max(np.abs(g1 - g2)) > 1e-3
    # and each equals the gradient on the samples that call drew
    noise = np.random.RandomState(0).randn(500, 2)
    _directional_check(lambda q: m.black_box_variational_inference(
        m.log_density, 2, 500)[0](q, 0), p)
    f = lambda q: -(0.5 * 2 * (1 + np.log(2 * np.pi)) + q[2:].sum() + np.mean(
        scipy.stats.norm.logpdf((noise * np.exp(q[2:]) + q[:2])[:, 1], 0, 1.35)
        + scipy.stats.norm.logpdf((noise * np.exp(q[2:]) + q[:2])[:, 0], 0,
                                  np.exp((noise * np.exp(q[2:]) + q[:2])[:, 1]))))
    assert float(m.black_box_variational_inference(m.log_density, 2, 500)[0](p, 0)) == \
        pytest.approx(f(p), rel=1e-12)
    _, bounds, _ = m.main(num_samples=200, num_iters=300, verbose=False)
    assert np.mean(bounds[-20:]) > np.mean(bounds[:20]) + 5


def test_bayesian_neural_net():
    import ag_bayesian_neural_net as m
    num_weights, predictions, logprob = m.make_nn_funs([1, 5, 1], 0.1, 0.01, nonlinearity=cnp.tanh)
    assert num_weights == 2 * 5 + 6 * 1
    rs = np.random.RandomState(1)
    weights, inputs = rs.randn(3, num_weights), rs.randn(4, 1)
    want = []
    for w in weights:
        h = np.tanh(inputs @ w[:5].reshape(1, 5) + w[5:10])
        want.append(h @ w[10:15].reshape(5, 1) + w[15])
    np.testing.assert_allclose(predictions(weights, inputs), np.array(want), rtol=1e-12)
    targets = rs.randn(4, 1)
    _directional_check(lambda w: cnp.sum(logprob(w, inputs, targets)), weights)
    _, bounds, _ = m.main(num_samples=10, num_iters=60, verbose=False)
    assert np.mean(bounds[-10:]) > np.mean(bounds[:10])


def test_neural_net_regression():
    import ag_neural_net_regression as m
    params, values, objective, init = m.main(num_iters=200, verbose=False)
    assert values[-1] < values[0] / 4
    _directional_check(lambda p: objective(p, 0), init)
