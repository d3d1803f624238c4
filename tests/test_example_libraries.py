"""cjit.example_libraries.optimizers and stax: every update rule and schedule
against its formula in NumPy (eager and under jit), the layers against NumPy,
an MLP trained with adam under jit, and (when JAX is installed) the same
computations in jax.example_libraries."""
import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp
from cjit import tree_util
from cjit.example_libraries import optimizers, stax


# ---- optimizers: one rule at a time ------------------------------------------------

def _np_rules():
    """NumPy versions of the update rules: (make, init(x), update(i, g, state), params)."""
    lr = 0.1

    def sgd(i, g, s):
        return (s[0] - lr * g,)

    def mom(i, g, s):
        v = 0.9 * s[1] + g
        return s[0] - lr * v, v

    def nes(i, g, s):
        v = 0.9 * s[1] + g
        return s[0] - lr * (0.9 * v + g), v

    def ada(i, g, s):
        x, gsq, m = s
        gsq = gsq + g * g
        inv = np.where(gsq > 0, 1 / np.sqrt(np.where(gsq > 0, gsq, 1)), 0)
        m = 0.1 * (g * inv) + 0.9 * m
        return x - lr * m, gsq, m

    def rms(i, g, s):
        a = s[1] * 0.9 + g * g * 0.1
        return s[0] - lr * g / np.sqrt(a + 1e-8), a

    def rmsm(i, g, s):
        a = s[1] * 0.9 + g * g * 0.1
        m = 0.9 * s[2] + lr * g / np.sqrt(a + 1e-8)
        return s[0] - m, a, m

    def adam(i, g, s):
        x, m, v = s
        m = 0.1 * g + 0.9 * m
        v = 0.001 * g * g + 0.999 * v
        mhat = m / (1 - 0.9 ** (i + 1))
        vhat = v / (1 - 0.999 ** (i + 1))
        return x - lr * mhat / (np.sqrt(vhat) + 1e-8), m, v

    def amax(i, g, s):
        x, m, u = s
        m = 0.1 * g + 0.9 * m
        u = np.maximum(0.999 * u, np.abs(g))
        return x - (lr / (1 - 0.9 ** (i + 1))) * m / (u + 1e-8), m, u

    return {
        "sgd": (optimizers.sgd(lr), 1, sgd),
        "momentum": (optimizers.momentum(lr, 0.9), 2, mom),
        "nesterov": (optimizers.nesterov(lr, 0.9), 2, nes),
        "adagrad": (optimizers.adagrad(lr), 3, ada),
        "rmsprop": (optimizers.rmsprop(lr), 2, rms),
        "rmsprop_momentum": (optimizers.rmsprop_momentum(lr), 3, rmsm),
        "adam": (optimizers.adam(lr), 3, adam),
        "adamax": (optimizers.adamax(lr), 3, amax),
    }


@pytest.mark.parametrize("name", list(_np_rules()))
def test_update_rules_match_numpy_eager_and_jitted(name):
    opt, nstate, rule = _np_rules()[name]
    init, update, get_params = opt
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((3, 2)), "b": [rng.standard_normal(2), None]}
    grads = [{"w": rng.standard_normal((3, 2)), "b": [np.array([0.0, 0.5]), None]}
             for _ in range(3)]
    ref = {k: (p,) + (np.zeros_like(p),) * (nstate - 1)
           for k, p in (("w", params["w"]), ("b", params["b"][0]))}
    eager = init(params)
    jitted_update = cjit.jit(update)
    jitted = init(params)
    for i, g in enumerate(grads):
        ref = {"w": rule(i, g["w"], ref["w"]), "b": rule(i, g["b"][0], ref["b"])}
        eager = update(i, g, eager)
        jitted = jitted_update(i, g, jitted)
        for st in (eager, jitted):
            p = get_params(st)
            assert p["b"][1] is None
            np.testing.assert_allclose(p["w"], ref["w"][0], rtol=1e-13, atol=1e-15)
            np.testing.assert_allclose(p["b"][0], ref["b"][0], rtol=1e-13, atol=1e-15)
    assert isinstance(jitted, optimizers.OptimizerState)
    # the step is a weakly typed int each time: one compile
    assert jitted_update.cache_info()["misses"] == 1


@pytest.mark.parametrize("step", [3, np.int64(3), np.int32(3)])
def test_float32_parameters_stay_float32(step):
    init, update, get_params = optimizers.adam(optimizers.exponential_decay(0.1, 10, 0.5))
    st = init({"w": np.ones(4, np.float32)})
    g = {"w": np.full(4, 0.5, np.float32)}
    for st2 in (update(step, g, st), cjit.jit(update)(step, g, st)):
        p = get_params(st2)["w"]
        assert p.dtype == np.float32
        assert all(leaf.dtype == np.float32 for leaf in tree_util.tree_leaves(st2))


def test_structure_mismatch_is_a_type_error():
    init, update, _ = optimizers.sgd(0.1)
    st = init({"a": np.ones(2)})
    with pytest.raises(TypeError, match="structure"):
        update(0, {"b": np.ones(2)}, st)


# ---- schedules ---------------------------------------------------------------------------

_SCHEDULES = {
    "constant": (optimizers.constant(0.3), lambda i: 0.3),
    "exponential": (optimizers.exponential_decay(0.5, 4, 0.1), lambda i: 0.5 * 0.1 ** (i / 4)),
    "inverse_time": (optimizers.inverse_time_decay(0.5, 4, 2.0), lambda i: 0.5 / (1 + 2.0 * i / 4)),
    "inverse_time_staircase": (optimizers.inverse_time_decay(0.5, 4, 2.0, staircase=True),
                               lambda i: 0.5 / (1 + 2.0 * math.floor(i / 4))),
    "polynomial": (optimizers.polynomial_decay(0.5, 6, 0.1, power=2.0),
                   lambda i: (1 - min(i, 6) / 6) ** 2 * 0.4 + 0.1),
    # JAX's convention: values[k] while i <= boundaries[k]
    "piecewise": (optimizers.piecewise_constant([2, 5], [1.0, 0.5, 0.25]),
                  lambda i: 1.0 if i <= 2 else (0.5 if i <= 5 else 0.25)),
}


@pytest.mark.parametrize("name", list(_SCHEDULES))
def test_schedules_eager_and_traced(name):
    sched, want = _SCHEDULES[name]
    jitted = cjit.jit(lambda i: cnp.asarray(sched(i), dtype=np.float64))
    for i in range(10):
        assert float(sched(i)) == pytest.approx(want(i), rel=1e-14)
        assert float(jitted(i)) == pytest.approx(want(i), rel=1e-14)


def test_make_schedule_and_bad_piecewise():
    assert optimizers.make_schedule(0.2)(7) == 0.2
    f = optimizers.exponential_decay(1.0, 1, 0.5)
    assert optimizers.make_schedule(f) is f
    with pytest.raises(TypeError, match="step size"):
        optimizers.make_schedule(np.ones(2))
    with pytest.raises(ValueError, match="one more"):
        optimizers.piecewise_constant([1, 2], [1.0, 2.0])


# ---- utilities ---------------------------------------------------------------------------------

def test_l2_norm_and_clip_grads():
    tree = {"a": np.array([3.0, 0.0]), "b": (np.array([[4.0]]), None)}
    assert float(optimizers.l2_norm(tree)) == 5.0
    clipped = optimizers.clip_grads(tree, 1.0)
    np.testing.assert_allclose(clipped["a"], [0.6, 0.0], rtol=1e-15)
    np.testing.assert_allclose(clipped["b"][0], [[0.8]], rtol=1e-15)
    assert clipped["b"][1] is None
    same = cjit.jit(lambda t: optimizers.clip_grads(t, 10.0))(tree)
    np.testing.assert_array_equal(same["a"], tree["a"])


def test_pack_unpack_round_trip():
    init, update, get_params = optimizers.momentum(0.1, 0.9)
    st = update(0, {"w": np.ones(2), "v": [np.full(3, 2.0)]},
                init({"w": np.zeros(2), "v": [np.zeros(3)]}))
    marked = optimizers.unpack_optimizer_state(st)
    assert isinstance(marked["w"], optimizers.JoinPoint)
    x, vel = marked["v"][0].subtree
    np.testing.assert_allclose(vel, np.full(3, 2.0))
    back = optimizers.pack_optimizer_state(marked)
    assert tree_util.tree_structure(back) == tree_util.tree_structure(st)
    for a, b in zip(tree_util.tree_leaves(back), tree_util.tree_leaves(st)):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(TypeError, match="JoinPoint"):
        optimizers.pack_optimizer_state({"w": 1.0})


# ---- stax layers -------------------------------------------------------------------------------

def test_layer_shapes_and_values_against_numpy():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 4)) * 3
    x[0, :2] = [800.0, -800.0]    # softplus, sigmoid and elu at the extremes
    with np.errstate(over="ignore"):
        sigmoid = 1 / (1 + np.exp(-x))
    cases = [
        (stax.Relu, np.maximum(x, 0)),
        (stax.Tanh, np.tanh(x)),
        (stax.Sigmoid, sigmoid),
        (stax.Elu, np.where(x > 0, x, np.expm1(np.minimum(x, 0)))),
        (stax.LeakyRelu, np.where(x >= 0, x, 0.01 * x)),
        (stax.Softplus, np.logaddexp(x, 0)),
        (stax.Selu, 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(np.minimum(x, 0)))),
        (stax.Gelu, 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
        (stax.LogSoftmax, x - x.max(1, keepdims=True)
         - np.log(np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True))),
        (stax.Identity, x),
    ]
    for (init_fun, apply_fun), want in cases:
        shape, params = init_fun(0, x.shape)
        assert shape == x.shape and params == ()
        got = apply_fun(params, x)
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(stax.Exp[1]((), x[1:]), np.exp(x[1:]), rtol=1e-14)
    sm = stax.Softmax[1]((), x)
    np.testing.assert_allclose(np.sum(sm, axis=1), np.ones(5), rtol=1e-14)
    y = rng.standard_normal((2, 3, 4))
    shape, _ = stax.Flatten[0](0, y.shape)
    assert shape == (2, 12)
    np.testing.assert_array_equal(stax.Flatten[1]((), y), y.reshape(2, 12))


def test_dense_serial_parallel_fan():
    init_fun, apply_fun = stax.serial(
        stax.Dense(6), stax.FanOut(2), stax.parallel(stax.Dense(3), stax.Dense(5)),
        stax.FanInConcat(), stax.Relu)
    shape, params = init_fun(7, (-1, 4))
    assert shape == (-1, 8)
    (W0, b0), _, (p1, p2), _, _ = params
    assert W0.shape == (4, 6) and b0.shape == (6,)
    assert p1[0].shape == (6, 3) and p2[0].shape == (6, 5)
    x = np.random.default_rng(4).standard_normal((3, 4))
    h = x @ W0 + b0
    want = np.maximum(np.concatenate([h @ p1[0] + p1[1], h @ p2[0] + p2[1]], axis=1), 0)
    np.testing.assert_allclose(apply_fun(params, x), want, rtol=1e-13)
    np.testing.assert_allclose(cjit.jit(apply_fun)(params, x), want, rtol=1e-13)
    # FanInSum
    init_sum, apply_sum = stax.serial(stax.FanOut(3), stax.parallel(stax.Identity, stax.Tanh,
                                                                    stax.Identity), stax.FanInSum)
    assert init_sum(0, (2, 2))[0] == (2, 2)
    np.testing.assert_allclose(apply_sum(init_sum(0, (2, 2))[1], x[:2, :2]),
                               2 * x[:2, :2] + np.tanh(x[:2, :2]), rtol=1e-14)


def test_initializers_and_key_model():
    # an int seed gives the same parameters; a Generator fresh ones at each init
    init_fun, _ = stax.serial(stax.Dense(3), stax.Dense(2))
    a, b = init_fun(5, (1, 4))[1], init_fun(5, (1, 4))[1]
    for u, v in zip(tree_util.tree_leaves(a), tree_util.tree_leaves(b)):
        np.testing.assert_array_equal(u, v)
    g = np.random.default_rng(5)
    c, d = init_fun(g, (1, 4))[1], init_fun(g, (1, 4))[1]
    assert not np.array_equal(c[0][0], d[0][0])
    # the layers of serial get different keys
    assert not np.array_equal(a[0][1][:2], a[1][1])
    # distributions: glorot_normal has variance 2 / (fan_in + fan_out) and is
    # truncated at 2 of its normal's standard deviations; normal has stddev 1e-2
    w = stax.glorot_normal()(0, (300, 500))
    std = math.sqrt(2 / 800)
    assert abs(w.std() / std - 1) < 0.01 and abs(w.mean()) < 0.01 * std
    assert np.abs(w).max() <= 2 * std / 0.87962566103423978
    n = stax.normal()(1, (400, 400))
    assert abs(n.std() / 1e-2 - 1) < 0.01
    assert w.dtype == np.float64 and stax.normal(dtype=np.float32)(0, (2,)).dtype == np.float32
    with pytest.raises(TypeError, match="int seed or a numpy.random.Generator"):
        stax.Dense(2)[0]("key", (1, 3))


def test_dropout():
    init_fun, apply_fun = stax.Dropout(0.75, mode="test")
    x = np.arange(6.0)
    np.testing.assert_array_equal(apply_fun((), x), x)
    train = stax.Dropout(0.75)
    from cjit import random
    # kept inputs are scaled by 1/rate, the rest are 0
    key = random.PRNGKey(0)
    y = np.asarray(train[1]((), np.ones(100000), rng=key))
    kept = y != 0
    np.testing.assert_allclose(y[kept], 1 / 0.75)
    assert abs(kept.mean() - 0.75) < 0.01
    with pytest.raises(ValueError, match="rng"):
        train[1]((), x)


# ---- an MLP trained with adam under jit -------------------------------------------------------

def _data():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 4))
    y = np.eye(3)[(x[:, 0] > 0).astype(int) + (x[:, 1] > 0.5)]
    return x, y


def _numpy_grads(params, x, y):
    """Backpropagation by hand for Dense-Relu-Dense-LogSoftmax and the mean NLL."""
    (W1, b1), _, (W2, b2), _ = params
    h = x @ W1 + b1
    a = np.maximum(h, 0)
    z = a @ W2 + b2
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    dz = (p - y) / x.shape[0]       # d(-mean(sum(y * log_softmax(z))))/dz, rows of y sum to 1
    dW2, db2 = a.T @ dz, dz.sum(0)
    dh = (dz @ W2.T) * (h > 0)
    return [(x.T @ dh, dh.sum(0)), (), (dW2, db2), ()]


def test_mlp_trains_with_adam_under_jit_and_first_step_matches_numpy():
    x, y = _data()
    init_fun, predict = stax.serial(stax.Dense(16), stax.Relu, stax.Dense(3), stax.LogSoftmax)
    _, params = init_fun(0, (-1, 4))

    def loss(params, x, y):
        return -cnp.mean(cnp.sum(predict(params, x) * y, axis=1))

    opt_init, opt_update, get_params = optimizers.adam(1e-2)

    @cjit.jit
    def step(i, opt_state, x, y):
        value, g = cjit.value_and_grad(loss)(get_params(opt_state), x, y)
        return opt_update(i, g, opt_state), value

    st = opt_init(params)
    st1, l0 = step(0, st, x, y)
    # the same Adam step in NumPy
    lr, b1, b2, eps = 1e-2, 0.9, 0.999, 1e-8
    grads = _numpy_grads(params, x, y)
    got = get_params(st1)
    for p, g, q in zip(tree_util.tree_leaves(params), tree_util.tree_leaves(grads),
                       tree_util.tree_leaves(got)):
        m, v = (1 - b1) * g, (1 - b2) * g * g
        want = p - lr * (m / (1 - b1)) / (np.sqrt(v / (1 - b2)) + eps)
        np.testing.assert_allclose(q, want, rtol=1e-12, atol=1e-14)
    losses = [float(l0)]
    st = st1
    for i in range(1, 150):
        st, value = step(i, st, x, y)
        losses.append(float(value))
    assert losses[-1] < 0.2 * losses[0]
    assert all(b < a + 1e-3 for a, b in zip(losses[:20], losses[1:21]))   # descends from the start
    assert step.cache_info() == {"hits": 149, "misses": 1, "entries": 1}


# ---- optional: the same computations in jax.example_libraries ---------------------------------

_JAX_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    MOD = sys.argv[1]
    if MOD == "jax":
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as xnp
        from jax.example_libraries import optimizers, stax
        grad, jit = jax.grad, jax.jit
    else:
        import cjit, cjit.numpy as xnp
        from cjit.example_libraries import optimizers, stax
        grad, jit = cjit.grad, cjit.jit
    inp = json.load(sys.stdin)
    params = [(np.array(inp["W1"]), np.array(inp["b1"])), (), (np.array(inp["W2"]), np.array(inp["b2"])), ()]
    x, y = np.array(inp["x"]), np.array(inp["y"])
    _, predict = stax.serial(stax.Dense(5), stax.Elu, stax.Dense(3), stax.LogSoftmax)
    def loss(p, x, y):
        return -xnp.mean(xnp.sum(predict(p, x) * y, axis=1))
    out = {}
    for name, opt in [("adam", optimizers.adam(0.05)), ("rmsprop", optimizers.rmsprop(0.05)),
                      ("nesterov", optimizers.nesterov(0.05, 0.8)), ("adagrad", optimizers.adagrad(0.05)),
                      ("momentum", optimizers.momentum(optimizers.inverse_time_decay(0.05, 2, 1.0), 0.8))]:
        init, update, get = opt
        st = init(params)
        step = jit(lambda i, st: update(i, grad(loss)(get(st), x, y), st))
        for i in range(3):
            st = step(i, st)
        leaves = []
        for layer in get(st):
            for a in layer:
                leaves.append(np.asarray(a).tolist())
        out[name] = leaves
    sched = optimizers.piecewise_constant([2, 5], [1.0, 0.5, 0.25])
    out["piecewise"] = [float(sched(i)) for i in range(8)]
    out["clip"] = np.asarray(optimizers.clip_grads({"a": np.array([3.0, 4.0])}, 1.0)["a"]).tolist()
    json.dump(out, sys.stdout)
""")


def _jax_python():
    try:
        import jax  # noqa: F401
        return sys.executable
    except ImportError:
        return os.environ.get("CJIT_JAX_PYTHON")


def test_same_results_as_jax_example_libraries_when_installed():
    py = _jax_python()
    if not py:
        pytest.skip("jax is not importable (set CJIT_JAX_PYTHON to a Python that has it)")
    rng = np.random.default_rng(9)
    x, y = _data()
    inp = {"W1": rng.standard_normal((4, 5)).tolist(), "b1": rng.standard_normal(5).tolist(),
           "W2": rng.standard_normal((5, 3)).tolist(), "b2": rng.standard_normal(3).tolist(),
           "x": x[:16].tolist(), "y": y[:16].tolist()}
    runs = {}
    for mod, exe in (("jax", py), ("cjit", sys.executable)):
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        r = subprocess.run([exe, "-c", _JAX_SCRIPT, mod], input=json.dumps(inp),
                           capture_output=True, text=True, env=env, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        runs[mod] = json.loads(r.stdout)
    for key, ref in runs["jax"].items():
        got = runs["cjit"][key]
        if key in ("piecewise", "clip"):
            np.testing.assert_allclose(got, ref, rtol=1e-15)
            continue
        for a, b in zip(got, ref):
            np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-10, atol=1e-12,
                                       err_msg=key)


# ---- a dropout MLP's train step with cjit.random keys -------------------------------------------

def test_dropout_mlp_train_step_with_cjit_random_keys():
    from cjit import random
    # float32, JAX's default (and float64 draws need cjit.scipy.special.erfinv)
    f32 = dict(W_init=stax.glorot_normal(dtype=np.float32), b_init=stax.normal(dtype=np.float32))
    init_fun, predict = stax.serial(stax.Dense(16, **f32), stax.Relu, stax.Dropout(0.5), stax.Dense(3, **f32),
                                    stax.LogSoftmax)
    _, params = init_fun(random.key(0), (-1, 4))
    # the initializers draw with cjit.random: the same key gives the same parameters
    again = init_fun(random.key(0), (-1, 4))[1]
    for u, v in zip(tree_util.tree_leaves(params), tree_util.tree_leaves(again)):
        np.testing.assert_array_equal(u, v)
    (w1, b1), (w2, b2) = params[0], params[3]
    assert w1.dtype == np.float32 and np.abs(w1).max() <= 2 * math.sqrt(2 / 20) / 0.87962566103423978
    x, y = (a.astype(np.float32) for a in _data())

    def loss(p, x, y, key):
        return -cnp.mean(cnp.sum(predict(p, x, rng=key) * y, axis=1))

    step = cjit.jit(lambda p, x, y, key: cjit.value_and_grad(loss)(p, x, y, key))
    key = random.key(7)
    value, grads = step(params, x, y, key)
    # the same step in NumPy, with the mask serial gives Dropout (layer 2's key)
    mask = np.asarray(random.bernoulli(random.split(key, 5)[2], 0.5, (x.shape[0], 16)))
    assert 0.3 < mask.mean() < 0.7
    x, y, w1, b1, w2, b2 = (np.asarray(a, np.float64) for a in (x, y, w1, b1, w2, b2))
    pre = x @ w1 + b1
    h = np.where(mask, np.maximum(pre, 0) / 0.5, 0.0)
    z = h @ w2 + b2
    logp = z - z.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    want = -np.mean(np.sum(logp * y, 1))
    dz = (np.exp(logp) * y.sum(1, keepdims=True) - y) / x.shape[0]
    dh = dz @ w2.T
    dpre = np.where(mask, dh / 0.5, 0.0) * (pre > 0)
    np.testing.assert_allclose(value, want, rtol=1e-5)
    for got, ref in [(grads[3][0], h.T @ dz), (grads[3][1], dz.sum(0)), (grads[0][0], x.T @ dpre),
                     (grads[0][1], dpre.sum(0))]:
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-6)
    # another key, another mask: another gradient
    assert not np.allclose(step(params, x, y, random.key(8))[1][0][0], grads[0][0])


# ---- stax draws JAX's bits: the same key splits the same way -------------------------------------

def _net(s):
    f32 = _f32(s)
    return s.serial(s.Dense(5, **f32), s.Relu, s.Dense(3, **f32), s.Dense(2, **f32), s.Dropout(0.5))


def test_serial_init_splits_the_key_once_per_layer():
    """serial's init_fun: rng, layer_rng = split(rng) before each layer (JAX's
    order), each Dense splitting its layer key into W's and b's: checked
    through cjit.random itself."""
    from cjit import random
    init_fun, _ = _net(stax)
    _, params = init_fun(random.key(11), (2, 4))
    rng, shapes, want = random.key(11), [(4, 5), None, (5, 3), (3, 2), None], []
    for shape in shapes:
        rng, layer = random.split(rng)
        if shape is None:
            want.append(())
            continue
        k1, k2 = random.split(layer)
        want.append((random.truncated_normal(k1, -2.0, 2.0, shape, np.float32)
                     * np.float32(math.sqrt(2 / sum(shape)) / 0.87962566103423978),
                     random.normal(k2, shape[1:], np.float32) * np.float32(1e-2)))
    assert len(params) == len(want)
    for got, ref in zip(params, want):
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            assert g.dtype == np.float32
            np.testing.assert_allclose(g, r, rtol=1e-6, atol=0)


def test_stax_parameters_and_dropout_masks_match_jax():
    jax = pytest.importorskip("jax")
    from jax.example_libraries import stax as jstax
    from cjit import random
    (ci, ca), (ji, ja) = _net(stax), _net(jstax)
    _, cp = ci(random.key(3), (2, 4))
    _, jp = ji(jax.random.key(3), (2, 4))
    cl, jl = tree_util.tree_leaves(cp), jax.tree_util.tree_leaves(jp)
    assert len(cl) == len(jl) == 6
    for a, b in zip(cl, jl):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=0)
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    # Dropout's mask: bernoulli draws in the default float dtype, cjit's float64 (JAX's with x64)
    if hasattr(jax, "enable_x64"):
        with jax.enable_x64(True):
            want = np.asarray(ja(jp, x, rng=jax.random.key(4)))
        np.testing.assert_allclose(np.asarray(ca(cp, x, rng=random.key(4))), want, rtol=1e-5, atol=1e-7)
    # parallel: one split(rng, n), as JAX's
    (pi, _), (qi, _) = stax.parallel(stax.Dense(2, **_f32(stax)), stax.Dense(3, **_f32(stax))), \
        jstax.parallel(jstax.Dense(2, **_f32(jstax)), jstax.Dense(3, **_f32(jstax)))
    a = tree_util.tree_leaves(pi(random.key(5), ((1, 3), (1, 3)))[1])
    b = jax.tree_util.tree_leaves(list(qi(jax.random.key(5), ((1, 3), (1, 3))))[1])
    for u, v in zip(a, b):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-6, atol=0)


def _f32(s):
    return dict(W_init=s.glorot_normal(dtype=np.float32), b_init=s.normal(dtype=np.float32))
