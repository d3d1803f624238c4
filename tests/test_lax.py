"""cjit.lax: scan, while_loop, fori_loop, cond, switch in the graph (not
unrolled), against NumPy loops; sizes that do not grow with the trip count;
the memory plan through a loop; eager mode; errors."""
import gc

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp
from cjit import lax


def rnn_ref(W, U, b, h0, xs):
    h, hs = h0, []
    for x in xs:
        h = np.tanh(W @ h + U @ x + b)
        hs.append(h)
    return h, np.array(hs)


def rnn(W, U, b, h0, xs):
    def step(h, x):
        h = cnp.tanh(W @ h + U @ x + b)
        return h, h
    return lax.scan(step, h0, xs)


def rnn_args(n, hidden=16, inp=8, dtype=np.float32, seed=0):
    r = np.random.default_rng(seed)
    W = (r.standard_normal((hidden, hidden)) * 0.3).astype(dtype)
    U = (r.standard_normal((hidden, inp)) * 0.3).astype(dtype)
    b = (r.standard_normal(hidden) * 0.1).astype(dtype)
    h0 = np.zeros(hidden, dtype)
    xs = r.standard_normal((n, inp)).astype(dtype)
    return W, U, b, h0, xs


# -- scan ----------------------------------------------------------------------

def test_rnn_scan_matches_numpy_loop():
    args = rnn_args(1000)
    h, hs = cjit.jit(rnn)(*args)
    hr, hsr = rnn_ref(*args)
    assert hs.shape == (1000, 16) and hs.dtype == np.float32
    np.testing.assert_allclose(h, hr, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(hs, hsr, rtol=1e-4, atol=1e-5)


def test_scan_reverse_pytrees_and_none():
    xs = {"a": np.arange(12.0).reshape(6, 2), "b": np.arange(6.0)}

    def f(c, x):
        s, n = c
        s = s + x["a"] * x["b"]
        return (s, n + 1), {"s": s, "twice": (x["b"] * 2,)}

    (s, n), ys = cjit.jit(lambda xs: lax.scan(f, (np.zeros(2), 0), xs, reverse=True))(xs)
    acc, rows = np.zeros(2), [None] * 6
    for i in reversed(range(6)):
        acc = acc + xs["a"][i] * xs["b"][i]
        rows[i] = acc
    np.testing.assert_allclose(s, acc)
    assert int(n) == 6
    np.testing.assert_allclose(ys["s"], np.array(rows))
    np.testing.assert_allclose(ys["twice"][0], xs["b"] * 2)
    # no xs: length gives the trip count; y None gives None
    c, ys = cjit.jit(lambda c: lax.scan(lambda c, _: (c * 2, None), c, None, length=5))(np.ones(3))
    np.testing.assert_allclose(c, 32 * np.ones(3))
    assert ys is None


def test_scan_length_zero_and_one():
    f = cjit.jit(lambda c, xs: lax.scan(lambda c, x: (c + x, c * x), c, xs))
    c, ys = f(np.ones(3), np.zeros((0, 3)))
    np.testing.assert_allclose(c, np.ones(3))
    assert ys.shape == (0, 3)
    c, ys = f(np.ones(3), np.full((1, 3), 2.0))
    np.testing.assert_allclose(c, 3 * np.ones(3))
    np.testing.assert_allclose(ys, [[2.0] * 3])


def test_nested_scans_close_over_outer_values():
    W = np.random.default_rng(1).standard_normal((4, 4)) * 0.3
    xs = np.random.default_rng(2).standard_normal((5, 4))

    @cjit.jit
    def f(W, xs):
        def outer(c, x):
            def inner(c2, _):
                return cnp.tanh(W @ c2 + x), None
            c, _ = lax.scan(inner, c, None, length=3)
            return c, c.sum()
        return lax.scan(outer, cnp.zeros(4), xs)

    c, ys = f(W, xs)
    cr, yr = np.zeros(4), []
    for x in xs:
        for _ in range(3):
            cr = np.tanh(W @ cr + x)
        yr.append(cr.sum())
    np.testing.assert_allclose(c, cr, rtol=1e-12)
    np.testing.assert_allclose(ys, yr, rtol=1e-12)


def test_graph_and_kernels_do_not_grow_with_the_trip_count():
    texts, kernels = [], []
    for n in (10, 10_000):
        lowered = cjit.jit(rnn).lower(*rnn_args(n))
        texts.append(lowered.as_text())
        kernels.append(lowered.compile().memory_analysis().num_kernels)
    assert len(texts[0].splitlines()) == len(texts[1].splitlines())
    assert kernels[0] == kernels[1] <= 3


def test_memory_analysis_is_exact_for_a_scan():
    fn = cjit.jit(rnn)
    args = rnn_args(2000, hidden=64, inp=32)
    planned = fn.lower(*args).compile().memory_analysis().peak_memory_in_bytes
    fn(*args)
    gc.collect()
    base = cjit.memory_stats()["bytes_in_use"]
    cjit.reset_peak_memory_stats()
    out = fn(*args)
    measured = cjit.memory_stats()["peak_bytes_in_use"] - base
    del out
    assert measured == planned
    # the stacked ys are the output: one (2000, 64) float32 array, not more
    assert planned < sum(a.nbytes for a in args) + 2 * 2000 * 64 * 4


# -- while_loop, fori_loop ---------------------------------------------------------

def test_newton_while_loop():
    @cjit.jit
    def newton(a):
        def cond(s):
            return cnp.abs(s[0] * s[0] - a) > 1e-12 * a
        return lax.while_loop(cond, lambda s: (0.5 * (s[0] + a / s[0]), s[1] + 1), (a, 0))

    for a in (2.0, 10.0, 1e6):
        x, k = newton(np.float64(a))
        np.testing.assert_allclose(x, np.sqrt(a), rtol=1e-12)
        assert 1 <= int(k) < 60


def rk4(f, y, t0, dt, n):
    def step(i, y):
        t = t0 + i * dt
        k1 = f(t, y)
        k2 = f(t + dt / 2, y + dt / 2 * k1)
        k3 = f(t + dt / 2, y + dt / 2 * k2)
        k4 = f(t + dt, y + dt * k3)
        return y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return step


def test_rk4_fori_loop_static_and_traced_bounds():
    A = np.array([[0.0, 1.0], [-1.0, -0.1]])

    def f(t, y):
        return A @ y

    @cjit.jit
    def static(y0):
        return lax.fori_loop(0, 1000, rk4(f, None, 0.0, 0.01, 1000), y0)

    @cjit.jit
    def traced(y0, n):
        return lax.fori_loop(0, n, rk4(f, None, 0.0, 0.01, 1000), y0)

    y = np.array([1.0, 0.0])
    step = rk4(lambda t, y: A @ y, None, 0.0, 0.01, 1000)
    for i in range(1000):
        y = step(i, y)
    np.testing.assert_allclose(static(np.array([1.0, 0.0])), y, rtol=1e-12)
    np.testing.assert_allclose(traced(np.array([1.0, 0.0]), 1000), y, rtol=1e-12)


def test_fori_loop_index_and_empty_range():
    f = cjit.jit(lambda x: lax.fori_loop(3, 7, lambda i, v: v * 2 + i, x))
    v = np.ones(2)
    for i in range(3, 7):
        v = v * 2 + i
    np.testing.assert_allclose(f(np.ones(2)), v)
    np.testing.assert_allclose(cjit.jit(lambda x: lax.fori_loop(5, 2, lambda i, v: v + 1, x))(np.ones(2)),
                               np.ones(2))
    g = cjit.jit(lambda x, n: lax.fori_loop(0, n, lambda i, v: v + i, x))
    assert float(g(0.0, 0)) == 0.0 and float(g(0.0, 5)) == 10.0


# -- cond, switch -------------------------------------------------------------------

def test_cond_and_switch_take_one_branch():
    f = cjit.jit(lambda p, x: lax.cond(p > 0, lambda x: x * 2, lambda x: x - 1, x))
    np.testing.assert_allclose(f(1.0, np.arange(3.0)), [0, 2, 4])
    np.testing.assert_allclose(f(-1.0, np.arange(3.0)), [-1, 0, 1])
    g = cjit.jit(lambda i, x: lax.switch(i, [lambda x: x + 1, lambda x: x * 10, lambda x: -x], x))
    x = np.arange(3.0)
    for i, want in ((-5, x + 1), (0, x + 1), (1, x * 10), (2, -x), (9, -x)):   # clamped, as JAX
        np.testing.assert_allclose(g(i, x), want)


def test_cond_in_a_jitted_loss_with_pytrees():
    @cjit.jit
    def loss(params, x):
        y = params["w"] * x
        big = lax.cond(cnp.sum(y) > 1.0, lambda y: {"v": cnp.sum(y * y)}, lambda y: {"v": cnp.sum(y) * 0.5}, y)
        return big["v"] + params["b"]

    p = {"w": np.array([1.0, 2.0]), "b": 0.25}
    assert float(loss(p, np.array([1.0, 1.0]))) == pytest.approx(1 + 4 + 0.25)
    assert float(loss(p, np.array([0.1, 0.1]))) == pytest.approx(0.15 + 0.25)


def test_only_the_taken_branch_runs():
    # the other branch would give nan; cond must not compute it into the result
    f = cjit.jit(lambda x: lax.cond(x > 0, lambda x: cnp.log(x), lambda x: x * 0.0, x))
    assert float(f(-1.0)) == 0.0
    assert float(f(np.e)) == pytest.approx(1.0)


def test_select_and_stop_gradient():
    p = np.array([True, False, True])
    a, b = np.arange(3.0), -np.arange(3.0)
    np.testing.assert_allclose(cjit.jit(lax.select)(p, a, b), np.where(p, a, b))
    g = cjit.grad(lambda x: cnp.sum(lax.stop_gradient(x) * x))(np.arange(3.0))
    np.testing.assert_allclose(g, np.arange(3.0))
    with pytest.raises(TypeError, match="one shape"):
        lax.select(p, a, np.arange(2.0))


# -- outside jit, and eager mode ---------------------------------------------------

def programs():
    args = rnn_args(50, hidden=4, inp=3, dtype=np.float64)
    yield "rnn", lambda: rnn(*args)
    yield "while", lambda: lax.while_loop(lambda s: s[0] < 100.0, lambda s: (s[0] * 1.5, s[1] + 1), (1.0, 0))
    yield "fori", lambda: lax.fori_loop(0, 10, lambda i, v: v * 0.5 + i, np.ones(3))
    yield "switch", lambda: lax.switch(2, [lambda x: x, lambda x: x + 1, lambda x: x * 3], np.ones(2))
    yield "cond", lambda: lax.cond(False, lambda x: x, lambda x: x - 1, np.ones(2))


@pytest.mark.parametrize("name,prog", list(programs()), ids=[n for n, _ in programs()])
def test_eager_mode_gives_the_same_results(name, prog, monkeypatch):
    compiled = prog()
    monkeypatch.setenv("CJIT_DISABLE_JIT", "1")
    eager = prog()
    for a, b in zip(cjit.tree_util.tree_leaves(compiled), cjit.tree_util.tree_leaves(eager)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12)


def test_unfused_passes_give_the_same_results(monkeypatch):
    args = rnn_args(100)
    want = cjit.jit(rnn)(*args)
    monkeypatch.setenv("CJIT_PASSES", "-cse,-fuse,-group,-memplan")
    got = cjit.jit(lambda *a: rnn(*a))(*args)
    for a, b in zip(want, got):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


# -- errors -------------------------------------------------------------------------

def test_a_carry_that_changes_type_is_named():
    with pytest.raises(TypeError, match=r"carry init\[1\].*float64\[3\].*float64\[\]") as e:
        cjit.jit(lambda x: lax.scan(lambda c, _: ((c[0], cnp.sum(c[1])), None), (1, x), None, length=3))(np.ones(3))
    assert "test_lax.py" in str(e.value)
    with pytest.raises(TypeError, match="int32.*float32|float32.*int32"):
        cjit.jit(lambda x: lax.fori_loop(0, 3, lambda i, v: v.astype(np.float32), x))(np.ones(3, np.int32))
    with pytest.raises(TypeError, match="structure"):
        cjit.jit(lambda x: lax.while_loop(lambda v: True, lambda v: (v, v), x))(np.ones(3))


@pytest.mark.parametrize("traced_bound", [False, True])
def test_fori_loop_names_itself_its_body_and_init_val(traced_bound):
    """fori_loop is a scan (a while_loop with a traced bound) inside, but its
    messages speak of fori_loop, body_fun and init_val, with both types."""
    def f(x, n):
        return lax.fori_loop(0, n if traced_bound else 3, lambda i, v: {"w": v["w"].astype(np.float32)}, {"w": x})
    with pytest.raises(TypeError) as e:
        cjit.jit(f)(np.ones(3, np.int32), 3)
    msg = str(e.value)
    assert msg.startswith("cjit.lax.fori_loop: body_fun changes the type of the carry init_val['w']"), msg
    assert "int32[3]" in msg and "float32[3]" in msg and "test_lax.py" in msg
    assert "scan" not in msg and "while_loop" not in msg and "init " not in msg
    with pytest.raises(TypeError, match=r"cjit.lax.fori_loop: body_fun returns a carry of structure"):
        cjit.jit(lambda x: lax.fori_loop(0, 3, lambda i, v: (v, v), x))(np.ones(3))


def test_predicates_must_be_boolean_scalars():
    with pytest.raises(TypeError, match=r"cond_fun must return a boolean scalar, got float64\[\]"):
        cjit.jit(lambda x: lax.while_loop(lambda v: cnp.sum(v), lambda v: v, x))(np.ones(3))
    with pytest.raises(TypeError, match=r"boolean scalar, got bool\[3\]"):
        cjit.jit(lambda x: lax.while_loop(lambda v: v > 0, lambda v: v, x))(np.ones(3))
    with pytest.raises(TypeError, match=r"pred must be a boolean scalar, got bool\[3\]"):
        cjit.jit(lambda x: lax.cond(x > 0, lambda x: x, lambda x: x, x))(np.ones(3))
    with pytest.raises(TypeError, match="pred must be a boolean scalar, got float64"):
        cjit.jit(lambda x: lax.cond(cnp.sum(x), lambda x: x, lambda x: x, x))(np.ones(3))


def test_branches_with_different_types():
    with pytest.raises(TypeError, match=r"different types for output") as e:
        cjit.jit(lambda x: lax.cond(True, lambda x: x, lambda x: cnp.sum(x), x))(np.ones(3))
    assert "true_fun returns float64[3]" in str(e.value) and "false_fun returns float64[]" in str(e.value)
    with pytest.raises(TypeError, match="different structures"):
        cjit.jit(lambda x: lax.switch(0, [lambda x: x, lambda x: (x, x)], x))(np.ones(3))
    # a Python scalar in one branch takes the other branch's dtype (weak type)
    f = cjit.jit(lambda x: lax.cond(x[0] > 0, lambda x: cnp.sum(x), lambda x: 0.0, x.astype(np.float32)))
    assert f(np.ones(3)).dtype == np.float32


def test_python_control_flow_on_a_traced_value_suggests_lax():
    def f(x):
        if x > 0:
            return x
        return -x
    with pytest.raises(cjit.errors.ConcretizationError, match="cjit.lax.cond") as e:
        cjit.jit(f)(1.0)
    assert "while_loop" in str(e.value)


def test_scan_argument_errors():
    with pytest.raises(ValueError, match="leading axes"):
        cjit.jit(lambda a, b: lax.scan(lambda c, x: (c, None), 0.0, (a, b)))(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="no xs"):
        cjit.jit(lambda c: lax.scan(lambda c, x: (c, None), c, None))(1.0)
    with pytest.raises(TypeError, match="pair"):
        cjit.jit(lambda c: lax.scan(lambda c, x: c, c, None, length=2))(1.0)


# -- gradients ----------------------------------------------------------------------

def rnn_loss(W, U, b, h0, xs):
    h, hs = rnn(W, U, b, h0, xs)
    return cnp.sum(hs * hs) / xs.shape[0] + cnp.sum(h)


def rnn_loss_and_grads_ref(W, U, b, h0, xs):
    """The loss and its gradients by hand-written backpropagation through
    time, in float64."""
    W, U, b, h0, xs = (a.astype(np.float64) for a in (W, U, b, h0, xs))
    n = xs.shape[0]
    hs = [h0]
    for x in xs:
        hs.append(np.tanh(W @ hs[-1] + U @ x + b))
    loss = sum(np.sum(h * h) for h in hs[1:]) / n + np.sum(hs[-1])
    dW, dU, db = np.zeros_like(W), np.zeros_like(U), np.zeros_like(b)
    dxs = np.zeros_like(xs)
    dh = np.ones_like(h0)
    for t in range(n, 0, -1):
        dh = dh + 2 * hs[t] / n
        da = dh * (1 - hs[t] ** 2)
        dW += np.outer(da, hs[t - 1])
        dU += np.outer(da, xs[t - 1])
        db += da
        dxs[t - 1] = U.T @ da
        dh = W.T @ da
    return loss, (dW, dU, db, dh, dxs)


def test_rnn_gradient_over_1000_steps_matches_backprop_through_time():
    args = rnn_args(1000)
    loss, grads = cjit.jit(cjit.value_and_grad(rnn_loss, argnums=(0, 1, 2, 3, 4)))(*args)
    ref_loss, ref = rnn_loss_and_grads_ref(*args)
    assert float(loss) == pytest.approx(ref_loss, rel=1e-4)
    for g, r, name in zip(grads, ref, "W U b h0 xs".split()):
        assert g.dtype == np.float32 and g.shape == r.shape, name
        np.testing.assert_allclose(g, r, rtol=2e-3, atol=2e-4 * np.abs(r).max(), err_msg=name)


def finite_difference(f, args, i, idx, eps=1e-6):
    a = [np.array(x, dtype=np.float64) for x in args]
    a[i][idx] += eps
    up = float(f(*a))
    a[i][idx] -= 2 * eps
    return (up - float(f(*a))) / (2 * eps)


def check_grads_fd(f, args, argnums, points=3, rtol=1e-6, atol=1e-8, seed=0):
    grads = cjit.grad(f, argnums=argnums)(*args)
    r = np.random.default_rng(seed)
    for g, i in zip(grads, argnums):
        a = np.asarray(args[i])
        for _ in range(points):
            idx = tuple(int(r.integers(0, d)) for d in a.shape)
            np.testing.assert_allclose(np.asarray(g)[idx], finite_difference(f, args, i, idx), rtol=rtol, atol=atol)


def test_rnn_gradient_matches_finite_differences_and_jit():
    args = rnn_args(60, hidden=6, inp=3, dtype=np.float64)
    check_grads_fd(rnn_loss, args, (0, 1, 2, 3, 4))
    eager = cjit.grad(rnn_loss, argnums=(0, 4))(*args)
    jitted = cjit.jit(cjit.grad(rnn_loss, argnums=(0, 4)))(*args)
    for a, b in zip(eager, jitted):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_reverse_scan_and_pytree_carries_differentiate():
    def f(w, xs):
        def step(c, x):
            a, (k, s) = c
            a = cnp.sin(a * w["scale"] + x)
            return (a, (k + 1, s + cnp.sum(a) * w["mix"])), a * k
        (a, (k, s)), ys = lax.scan(step, (cnp.zeros(3), (0, 0.0)), xs, reverse=True)
        return cnp.sum(a) + s + cnp.sum(ys * ys)
    w = {"scale": np.float64(0.7), "mix": np.float64(1.3)}
    xs = np.random.default_rng(3).standard_normal((9, 3))
    g = cjit.grad(f, argnums=(0, 1))(w, xs)

    def flat(scale, mix, xs):
        return f({"scale": scale, "mix": mix}, xs)
    args = (0.7, 1.3, xs)
    assert g[0]["scale"] == pytest.approx(finite_difference(flat, args, 0, ()), rel=1e-6)
    assert g[0]["mix"] == pytest.approx(finite_difference(flat, args, 1, ()), rel=1e-6)
    np.testing.assert_allclose(g[1][4, 1], finite_difference(flat, args, 2, (4, 1)), rtol=1e-6)


def test_nested_scan_gradient():
    def f(W, xs):
        def outer(c, x):
            c, _ = lax.scan(lambda c2, _: (cnp.tanh(W @ c2 + x), None), c, None, length=3)
            return c, cnp.sum(c * c)
        c, ys = lax.scan(outer, cnp.zeros(3), xs)
        return cnp.sum(c) + cnp.sum(ys)
    r = np.random.default_rng(4)
    check_grads_fd(f, (r.standard_normal((3, 3)) * 0.4, r.standard_normal((4, 3))), (0, 1))


def test_rk4_fori_loop_gradient():
    def final(A, y0):
        step = rk4(lambda t, y: A @ y + 0.1 * cnp.sin(y), None, 0.0, 0.05, 40)
        return cnp.sum(lax.fori_loop(0, 40, step, y0) ** 2)
    A = np.array([[0.0, 1.0], [-1.0, -0.1]])
    check_grads_fd(final, (A, np.array([1.0, 0.5])), (0, 1), points=4)


def test_cond_and_switch_gradients_are_the_taken_branch():
    def loss(w, x, i):
        y = lax.cond(cnp.sum(w * x) > 0, lambda v: cnp.sin(v) * w, lambda v: v * v, x)
        z = lax.switch(i, [lambda v: cnp.exp(v), lambda v: v * 3.0, lambda v: cnp.tanh(v) * w], y)
        return cnp.sum(z)
    w, x = np.array([0.5, -0.3]), np.array([1.0, 2.0])
    jitted = cjit.jit(cjit.grad(loss, argnums=(0, 1)), static_argnums=2)
    for xx in (x, -x):
        for i in (0, 1, 2):
            g = jitted(w, xx, i)
            for k in (0, 1):
                for j in range(2):
                    fd = finite_difference(lambda a, b: loss(a, b, i), (w, xx), k, (j,))
                    assert g[k][j] == pytest.approx(fd, rel=1e-6, abs=1e-9)


def test_while_loop_gradient_is_refused_with_advice():
    with pytest.raises(ValueError, match="while_loop.*not supported.*scan.*Python int bounds") as e:
        cjit.grad(lambda x: lax.while_loop(lambda v: v < 10.0, lambda v: v * 2.0, x))(1.0)
    assert "test_lax.py" in str(e.value)
    with pytest.raises(ValueError, match="fori_loop with traced bounds"):
        cjit.jit(cjit.grad(lambda x, n: lax.fori_loop(0, n, lambda i, v: v * 2.0, x)))(1.0, 3)
    # forward-only use under grad is fine: the loop does not touch the differentiated value
    g = cjit.grad(lambda x: x * lax.while_loop(lambda v: v < 10, lambda v: v + 1, 0))(2.0)
    assert float(g) == 10.0


def _fd_jvp(f, x, v, eps=1e-6):
    return (np.asarray(f(x + eps * v)) - np.asarray(f(x - eps * v))) / (2 * eps)


def test_forward_mode_through_scan_while_and_cond():
    rng = np.random.default_rng(8)
    w = rng.standard_normal((3, 3)) / 2
    xs = rng.standard_normal((5, 3))

    def through_scan(h0):
        h, ys = lax.scan(lambda h, x: (cnp.tanh(h @ w + x), (h * h).sum()), h0, xs)
        return h.sum() + ys.sum()

    def through_while(x):
        # the trip count depends on the value, not on the tangent
        return lax.while_loop(lambda c: c[1] < 4, lambda c: (cnp.sin(c[0]) * 1.5, c[1] + 1), (x, 0))[0]

    def through_cond(x):
        return lax.cond(x.sum() > 0, lambda v: cnp.exp(v) * v, lambda v: v ** 3, x)

    def through_fori(x):
        return lax.fori_loop(0, 6, lambda i, v: v * cnp.cos(v) + i, x)

    for f, x in ((through_scan, rng.standard_normal(3)), (through_while, rng.standard_normal(3)),
                 (through_cond, rng.standard_normal(3)), (through_cond, -np.abs(rng.standard_normal(3))),
                 (through_fori, rng.standard_normal(3))):
        v = rng.standard_normal(3)
        for jvp in (cjit.jvp, lambda f_, p, t: cjit.jit(lambda a, b: cjit.jvp(f_, (a,), (b,)))(p[0], t[0])):
            y, t = jvp(f, (x,), (v,))
            np.testing.assert_allclose(y, f(x), rtol=1e-12)
            np.testing.assert_allclose(t, _fd_jvp(f, x, v), rtol=1e-6, atol=1e-9)


def test_jacfwd_and_hessian_through_scan():
    rng = np.random.default_rng(9)
    xs = rng.standard_normal((4, 2))

    def f(p):
        c, _ = lax.scan(lambda c, x: (cnp.tanh(c * p + x), None), cnp.ones(2), xs)
        return (c * c).sum()

    p = rng.standard_normal(2)
    np.testing.assert_allclose(cjit.jacfwd(f)(p), cjit.grad(f)(p), rtol=1e-10)
    h = cjit.hessian(f)(p)
    eps = 1e-5
    fd = np.stack([(cjit.grad(f)(p + eps * e) - cjit.grad(f)(p - eps * e)) / (2 * eps) for e in np.eye(2)])
    np.testing.assert_allclose(h, fd, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(h, h.T, rtol=1e-10)


def _rnn_scan(h0, xs, w):
    def step(h, x):
        h = cnp.tanh(h @ w + x)
        return h, h.sum()
    return lax.scan(step, h0, xs)


@pytest.mark.parametrize("in_axes", [(0, 0, None), (0, None, None), (None, None, 0), (None, 1, None)])
def test_vmap_of_scan_equals_a_loop_over_examples(in_axes):
    rng = np.random.default_rng(4)
    B, T, H = 3, 6, 4
    h0, xs, w = rng.standard_normal((B, H)), rng.standard_normal((B, T, H)), rng.standard_normal((B, H, H)) / 2
    args = [h0 if in_axes[0] == 0 else h0[0], xs if in_axes[1] == 0 else xs[0],
            w if in_axes[2] == 0 else w[0]]
    if in_axes[1] == 1:
        args[1] = np.moveaxis(xs, 0, 1)     # (T, B, H): mapped over its dim 1
    for f in (cjit.vmap(_rnn_scan, in_axes=in_axes), cjit.jit(cjit.vmap(_rnn_scan, in_axes=in_axes))):
        hb, ys = f(*args)
        for b in range(B):
            ex = [a[b] if ax == 0 else (a[:, b] if ax == 1 else a) for a, ax in zip(args, in_axes)]
            h1, y1 = _rnn_scan(*ex)
            np.testing.assert_allclose(hb[b], h1, rtol=1e-13)
            np.testing.assert_allclose(ys[b], y1, rtol=1e-13)
    # one scan in the batched program, not one per example
    assert cjit.jit(cjit.vmap(_rnn_scan, in_axes=in_axes)).lower(*args).as_text().count("scan(") == 1


def test_per_example_gradients_through_scan_and_grad_of_vmap():
    rng = np.random.default_rng(5)
    B, T, H = 4, 5, 3
    h0, xs, w = rng.standard_normal((B, H)), rng.standard_normal((B, T, H)), rng.standard_normal((H, H)) / 2
    loss = lambda w, h, x: _rnn_scan(h, x, w)[1].sum()   # noqa: E731
    per = cjit.jit(cjit.vmap(cjit.grad(loss), in_axes=(None, 0, 0)))(w, h0, xs)
    for b in range(B):
        np.testing.assert_allclose(per[b], cjit.grad(loss)(w, h0[b], xs[b]), rtol=1e-12)
    total = cjit.grad(lambda w: cjit.vmap(loss, in_axes=(None, 0, 0))(w, h0, xs).sum())(w)
    np.testing.assert_allclose(total, per.sum(0), rtol=1e-12)


def test_vmap_of_fori_loop_cond_and_nested_vmap():
    rng = np.random.default_rng(6)
    xb = rng.standard_normal((3, 2))
    g = lambda x: lax.fori_loop(0, 4, lambda i, v: v * 0.5 + cnp.sin(v) + i, x)   # noqa: E731
    np.testing.assert_allclose(cjit.vmap(g)(xb), np.stack([g(x) for x in xb]), rtol=1e-14)
    c = lambda p, x: lax.cond(p > 0, lambda v: v * 2, lambda v: -v, x)   # noqa: E731
    np.testing.assert_allclose(cjit.vmap(c, in_axes=(None, 0))(1.0, xb), xb * 2)
    np.testing.assert_allclose(cjit.vmap(c, in_axes=(None, 0))(-1.0, xb), -xb)
    xbb = rng.standard_normal((2, 3, 4))
    s = lambda x: lax.scan(lambda c, r: (c * r, c), 1.0, x)   # noqa: E731
    got_c, got_y = cjit.vmap(cjit.vmap(s))(xbb)
    for i in range(2):
        for j in range(3):
            want_c, want_y = s(xbb[i, j])
            np.testing.assert_allclose(got_c[i, j], want_c, rtol=1e-14)
            np.testing.assert_allclose(got_y[i, j], want_y, rtol=1e-14)


def test_vmap_of_cond_and_switch_with_a_per_example_index():
    rng = np.random.default_rng(7)
    xb = rng.standard_normal((6, 3))
    f = lambda x: lax.cond(x.sum() > 0, lambda v: cnp.exp(v) * 2, lambda v: -v, x)   # noqa: E731
    np.testing.assert_allclose(cjit.vmap(f)(xb), np.stack([f(x) for x in xb]), rtol=1e-14)
    g = lambda i, x: lax.switch(i, [lambda v: v + 1, lambda v: v * 10, cnp.sin], x)   # noqa: E731
    ib = np.array([0, 1, 2, 1, 0, 2])
    np.testing.assert_allclose(cjit.jit(cjit.vmap(g))(ib, xb), np.stack([g(i, x) for i, x in zip(ib, xb)]),
                               rtol=1e-14)
    loss = lambda x: f(x).sum()   # noqa: E731
    np.testing.assert_allclose(cjit.vmap(cjit.grad(loss))(xb), np.stack([cjit.grad(loss)(x) for x in xb]),
                               rtol=1e-13)
    # inside a scan whose body is batched: a select per step
    h = lambda x: lax.scan(lambda c, r: (lax.cond(r > 0, lambda a: a + r, lambda a: a * 0.5, c), c), 0.0, x)  # noqa: E731
    got_c, got_y = cjit.vmap(h)(xb)
    for b in range(6):
        want_c, want_y = h(xb[b])
        np.testing.assert_allclose(got_c[b], want_c, rtol=1e-14)
        np.testing.assert_allclose(got_y[b], want_y, rtol=1e-14)


def test_vmap_of_while_loop_runs_each_example_its_own_number_of_steps():
    xb = np.array([[1.0, 2.0], [5.0, 0.0], [12.0, 1.0]])
    f = lambda x: lax.while_loop(lambda v: v.sum() < 10, lambda v: v * 1.5 + 1, x)   # noqa: E731
    np.testing.assert_array_equal(cjit.vmap(f)(xb), np.stack([f(x) for x in xb]))
    # Newton's square root: iteration counts differ per example, carries include an int
    g = lambda a: lax.while_loop(lambda c: cnp.abs(c[0] * c[0] - a) > 1e-12,   # noqa: E731
                                 lambda c: ((c[0] + a / c[0]) / 2, c[1] + 1), (a, 0))
    a = np.array([2.0, 9.0, 100.0, 1.0])
    roots, steps = cjit.jit(cjit.vmap(g))(a)
    np.testing.assert_allclose(roots, np.sqrt(a), rtol=1e-14)
    assert steps.tolist() == [int(g(v)[1]) for v in a] and len(set(steps.tolist())) > 1
    # fori_loop with a traced (per-example) trip count is a while_loop
    h = lambda n, x: lax.fori_loop(0, n, lambda i, v: v + i, x)   # noqa: E731
    n = np.array([0, 3, 5], np.int32)
    np.testing.assert_allclose(cjit.vmap(h)(n, np.ones(3)), [h(k, 1.0) for k in n])
    # a batched constant read by the condition and the body
    lim = np.array([3.0, 30.0])
    k = lambda x, m: lax.while_loop(lambda v: v < m, lambda v: v * 2 + m * 0.01, x)   # noqa: E731
    np.testing.assert_allclose(cjit.vmap(k, in_axes=(None, 0))(1.0, lim), [k(1.0, m) for m in lim])


def test_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    args = rnn_args(200, hidden=8, inp=4, dtype=np.float64)

    def jloss(W, U, b, h0, xs):
        def step(h, x):
            h = jnp.tanh(W @ h + U @ x + b)
            return h, h
        h, hs = jax.lax.scan(step, h0, xs)
        return jnp.sum(hs * hs) / xs.shape[0] + jnp.sum(h)
    want = jax.grad(jloss, argnums=(0, 1, 2, 3, 4))(*args)
    got = cjit.jit(cjit.grad(rnn_loss, argnums=(0, 1, 2, 3, 4)))(*args)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-10, atol=1e-12)


def test_rnn_example_trains():
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "examples", "rnn_scan.py")
    spec = importlib.util.spec_from_file_location("rnn_scan", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    losses = mod.main(steps=60, length=100, verbose=False)
    assert np.isfinite(losses).all()
    assert np.mean(losses[-10:]) < 0.1 * losses[0]


def test_a_body_of_100000_nodes_on_a_small_stack():
    # every walk over a body (cutting it out, copying it for the gradient,
    # lowering it) is a loop: no frame per node
    import threading

    def make(n):
        def body(c, x):
            for _ in range(n):
                c = c * 0.99999 + x
            return c, None

        def loss(c0, xs):
            c, _ = lax.scan(body, c0, xs)
            return cnp.sum(c)
        return loss

    result = []

    def work():
        try:
            # 100,000 nodes in the body; its gradient over 20,000 (the lowering of
            # long gradient chains is slow in itself, with or without loops)
            lowered = cjit.jit(make(50_000)).lower(np.ones(4), np.ones((3, 4)))
            result.append(lowered._lowered.plan_peak())
            lowered = cjit.jit(cjit.grad(make(10_000), argnums=1)).lower(np.ones(4), np.ones((3, 4)))
            result.append(lowered._lowered.plan_peak())
        except BaseException as e:   # noqa: BLE001 - reported below
            result.append(e)
    threading.stack_size(1 << 20)
    try:
        t = threading.Thread(target=work)
        t.start()
        t.join()
    finally:
        threading.stack_size(0)
    assert len(result) == 2 and all(isinstance(r, int) and r > 0 for r in result), result


def test_disk_cache_compiles_control_flow_without_storing_it(monkeypatch, tmp_path):
    monkeypatch.setenv("CJIT_CACHE", "1")
    monkeypatch.setenv("CJIT_CACHE_DIR", str(tmp_path))
    f = cjit.jit(lambda x: lax.fori_loop(0, 4, lambda i, v: v * 2.0 + i, x))
    np.testing.assert_allclose(f(np.ones(2)), [2 * 2 * 2 * 2 + 2 * 2 * 1 + 2 * 2 + 3] * 2)


def test_threads_share_one_compiled_loop():
    import threading
    f = cjit.jit(rnn)
    args = rnn_args(300)
    want = f(*args)
    errors = []

    def work():
        for _ in range(20):
            got = f(*args)
            if not all(np.array_equal(a, b) for a, b in zip(got, want)):
                errors.append("differs")
    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_cuda_compiles_control_flow_and_names_what_it_cannot():
    """Loops have PTX (tests/test_lax_cuda.py checks it with ptxas); what
    the GPU lacks inside a body (sorting) is still a clear error."""
    low = cjit.jit(rnn).lower(*rnn_args(5))._lowered
    assert "_b0_k0(" in cjit._cjit.ptx(low)

    def sort_rows(c, xs):
        return lax.scan(lambda c, x: (c + cnp.sort(x), None), c, xs)[0]
    low = cjit.jit(sort_rows).lower(np.zeros(4), np.ones((3, 4)))._lowered
    with pytest.raises(ValueError, match="argsort.*CPU only"):
        cjit._cjit.ptx(low)
