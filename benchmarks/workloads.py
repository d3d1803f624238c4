"""Programs users write, for benchmarks/run.py: each model is written once
against a NumPy-like module `m` and an activation namespace `nn`, so that
the same source runs as cjit (cjit.numpy, cjit.nn), JAX (jax.numpy, jax.nn)
and NumPy (numpy, NUMPY_NN below).  Gradients in NumPy are backprop written
out by hand (the *_grad functions), in float32 like the rest.

Shapes (issue 13, "a benchmark of programs users write"):
- GELU MLP train step: 256x784 -> 512 -> 512 -> 10, softmax cross-entropy,
  SGD update;
- transformer block: pre-norm, 4-head attention with softmax, residuals,
  GELU MLP (width 4x), batch 8, seq 128, width 256;
- RNN: tanh cell unrolled 32 steps, batch 64, input and hidden 128;
- activation chain: swish, softplus and log-sigmoid sharing exp(-|x|), 1e6;
- logistic regression with L2, 10000x100;
- k-means step: 10000 points x 32 dims, 16 centers.
"""
import math
import types

import numpy as np

F32 = np.float32
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


# ---------------------------------------------------------------------------
# NumPy's activations (cjit.nn and jax.nn provide their own)

def _np_sigmoid(x):
    e = np.exp(np.where(x >= 0, -x, x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _np_gelu(x):
    return 0.5 * x * (1 + np.tanh(F32(SQRT_2_OVER_PI) * (x + F32(0.044715) * x * x * x)))


def _np_gelu_grad(x):
    """d gelu / dx for the tanh form."""
    c = F32(SQRT_2_OVER_PI)
    t = np.tanh(c * (x + F32(0.044715) * x * x * x))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + F32(3 * 0.044715) * x * x)


def _np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _np_log_softmax(x, axis=-1):
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def _np_one_hot(i, k, dtype):
    return np.eye(k, dtype=dtype)[i]


NUMPY_NN = types.SimpleNamespace(sigmoid=_np_sigmoid, gelu=_np_gelu, softmax=_np_softmax,
                                 log_softmax=_np_log_softmax, one_hot=_np_one_hot)


def normal(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(F32)


# ---------------------------------------------------------------------------
# GELU MLP train step

MLP = dict(batch=256, sizes=(784, 512, 512, 10), lr=0.01)


def mlp_data():
    rng = np.random.default_rng(10)
    sizes = MLP["sizes"]
    p = {}
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        p[f"w{i}"] = normal(rng, (a, b), 1 / math.sqrt(a))
        p[f"b{i}"] = np.zeros(b, F32)
    x = normal(rng, (MLP["batch"], sizes[0]))
    y = np.eye(sizes[-1], dtype=F32)[rng.integers(0, sizes[-1], MLP["batch"])]
    return p, x, y


def mlp_loss(m, nn):
    n = len(MLP["sizes"]) - 1

    def loss(p, x, y):
        h = x
        for i in range(n - 1):
            h = nn.gelu(h @ p[f"w{i}"] + p[f"b{i}"])
        logits = h @ p[f"w{n - 1}"] + p[f"b{n - 1}"]
        return -m.mean(m.sum(y * nn.log_softmax(logits), axis=-1))
    return loss


def mlp_train_step(m, nn, value_and_grad):
    loss = mlp_loss(m, nn)
    lr = MLP["lr"]

    def step(p, x, y):
        v, g = value_and_grad(loss)(p, x, y)
        return v, {k: p[k] - lr * g[k] for k in p}
    return step


def mlp_train_step_numpy(p, x, y):
    n = len(MLP["sizes"]) - 1
    hs, zs = [x], []
    for i in range(n - 1):
        zs.append(hs[-1] @ p[f"w{i}"] + p[f"b{i}"])
        hs.append(_np_gelu(zs[-1]))
    logits = hs[-1] @ p[f"w{n - 1}"] + p[f"b{n - 1}"]
    ls = _np_log_softmax(logits)
    v = -np.mean(np.sum(y * ls, axis=-1))
    g = {}
    dz = (np.exp(ls) - y) / F32(x.shape[0])
    for i in reversed(range(n)):
        g[f"w{i}"] = hs[i].T @ dz
        g[f"b{i}"] = dz.sum(0)
        if i:
            dz = (dz @ p[f"w{i}"].T) * _np_gelu_grad(zs[i - 1])
    lr = F32(MLP["lr"])
    return v, {k: p[k] - lr * g[k] for k in p}


# ---------------------------------------------------------------------------
# transformer block

TB = dict(batch=8, seq=128, width=256, heads=4, ffn=1024)


def tb_data():
    rng = np.random.default_rng(11)
    d, f = TB["width"], TB["ffn"]
    p = {"g1": np.ones(d, F32), "b1": np.zeros(d, F32),
         "wq": normal(rng, (d, d), 1 / math.sqrt(d)), "wk": normal(rng, (d, d), 1 / math.sqrt(d)),
         "wv": normal(rng, (d, d), 1 / math.sqrt(d)), "wo": normal(rng, (d, d), 1 / math.sqrt(d)),
         "g2": np.ones(d, F32), "b2": np.zeros(d, F32),
         "w1": normal(rng, (d, f), 1 / math.sqrt(d)), "c1": np.zeros(f, F32),
         "w2": normal(rng, (f, d), 1 / math.sqrt(f)), "c2": np.zeros(d, F32)}
    x = normal(rng, (TB["batch"], TB["seq"], d))
    return p, x


def _layer_norm(m, x, g, b):
    mu = m.mean(x, axis=-1, keepdims=True)
    d = x - mu
    var = m.mean(d * d, axis=-1, keepdims=True)
    return d / m.sqrt(var + 1e-5) * g + b


def tb_forward(m, nn):
    bsz, s, d, h = TB["batch"], TB["seq"], TB["width"], TB["heads"]
    dh = d // h
    scale = 1.0 / math.sqrt(dh)

    def heads(t):    # (B, S, D) -> (B, H, S, dh)
        return m.transpose(m.reshape(t, (bsz, s, h, dh)), (0, 2, 1, 3))

    def block(p, x):
        a = _layer_norm(m, x, p["g1"], p["b1"])
        q, k, v = heads(a @ p["wq"]), heads(a @ p["wk"]), heads(a @ p["wv"])
        att = nn.softmax((q @ m.transpose(k, (0, 1, 3, 2))) * scale, axis=-1)
        o = m.reshape(m.transpose(att @ v, (0, 2, 1, 3)), (bsz, s, d))
        x = x + o @ p["wo"]
        u = _layer_norm(m, x, p["g2"], p["b2"])
        return x + nn.gelu(u @ p["w1"] + p["c1"]) @ p["w2"] + p["c2"]
    return block


def tb_loss(m, nn):
    block = tb_forward(m, nn)

    def loss(p, x):
        y = block(p, x)
        return m.mean(y * y)
    return loss


def _np_ln_fwd(x, g, b):
    mu = x.mean(-1, keepdims=True)
    d = x - mu
    r = 1 / np.sqrt((d * d).mean(-1, keepdims=True) + F32(1e-5))
    xh = d * r
    return xh * g + b, (xh, r)


def _np_ln_bwd(dy, g, saved):
    """Gradients of layer norm: (dx, dg, db), g and b broadcast over rows."""
    xh, r = saved
    lead = tuple(range(dy.ndim - 1))
    dg = (dy * xh).sum(lead)
    db = dy.sum(lead)
    dxh = dy * g
    dx = r * (dxh - dxh.mean(-1, keepdims=True) - xh * (dxh * xh).mean(-1, keepdims=True))
    return dx, dg, db


def tb_value_and_grad_numpy(p, x):
    bsz, s, d, h = TB["batch"], TB["seq"], TB["width"], TB["heads"]
    dh = d // h
    scale = F32(1.0 / math.sqrt(dh))

    def heads(t):
        return t.reshape(bsz, s, h, dh).transpose(0, 2, 1, 3)

    def merge(t):
        return t.transpose(0, 2, 1, 3).reshape(bsz, s, d)

    def flat(t):
        return t.reshape(-1, t.shape[-1])

    a, ln1 = _np_ln_fwd(x, p["g1"], p["b1"])
    q, k, v = heads(a @ p["wq"]), heads(a @ p["wk"]), heads(a @ p["wv"])
    att = _np_softmax((q @ k.transpose(0, 1, 3, 2)) * scale)
    o = merge(att @ v)
    x1 = x + o @ p["wo"]
    u, ln2 = _np_ln_fwd(x1, p["g2"], p["b2"])
    z = u @ p["w1"] + p["c1"]
    gz = _np_gelu(z)
    y = x1 + gz @ p["w2"] + p["c2"]
    val = np.mean(y * y)

    g = {}
    dy = y * F32(2.0 / y.size)
    g["c2"] = dy.sum((0, 1))
    g["w2"] = flat(gz).T @ flat(dy)
    dz = (dy @ p["w2"].T) * _np_gelu_grad(z)
    g["c1"] = dz.sum((0, 1))
    g["w1"] = flat(u).T @ flat(dz)
    dx1, g["g2"], g["b2"] = _np_ln_bwd(dz @ p["w1"].T, p["g2"], ln2)
    dx1 = dx1 + dy
    g["wo"] = flat(o).T @ flat(dx1)
    do = heads(dx1 @ p["wo"].T)
    datt = do @ v.transpose(0, 1, 3, 2)
    dv = att.transpose(0, 1, 3, 2) @ do
    ds = att * (datt - (datt * att).sum(-1, keepdims=True)) * scale
    dq = ds @ k
    dk = ds.transpose(0, 1, 3, 2) @ q
    fa = flat(a)
    g["wq"] = fa.T @ flat(merge(dq))
    g["wk"] = fa.T @ flat(merge(dk))
    g["wv"] = fa.T @ flat(merge(dv))
    da = merge(dq) @ p["wq"].T + merge(dk) @ p["wk"].T + merge(dv) @ p["wv"].T
    _, g["g1"], g["b1"] = _np_ln_bwd(da, p["g1"], ln1)
    return val, g


# ---------------------------------------------------------------------------
# RNN

RNN = dict(steps=32, batch=64, d_in=128, hidden=128)


def rnn_data():
    rng = np.random.default_rng(12)
    i, hd = RNN["d_in"], RNN["hidden"]
    p = {"wx": normal(rng, (i, hd), 1 / math.sqrt(i)),
         "wh": normal(rng, (hd, hd), 1 / math.sqrt(hd)),
         "b": np.zeros(hd, F32)}
    xs = normal(rng, (RNN["steps"], RNN["batch"], i))
    h0 = np.zeros((RNN["batch"], hd), F32)
    return p, xs, h0


def rnn_loss(m, nn):
    steps = RNN["steps"]

    def loss(p, xs, h0):
        h = h0
        for t in range(steps):
            h = m.tanh(xs[t] @ p["wx"] + h @ p["wh"] + p["b"])
        return m.mean(h * h)
    return loss


def rnn_value_and_grad_numpy(p, xs, h0):
    hs = [h0]
    for t in range(RNN["steps"]):
        hs.append(np.tanh(xs[t] @ p["wx"] + hs[-1] @ p["wh"] + p["b"]))
    h = hs[-1]
    val = np.mean(h * h)
    g = {k: np.zeros_like(v) for k, v in p.items()}
    dh = h * F32(2.0 / h.size)
    for t in reversed(range(RNN["steps"])):
        dz = dh * (1 - hs[t + 1] * hs[t + 1])
        g["wx"] += xs[t].T @ dz
        g["wh"] += hs[t].T @ dz
        g["b"] += dz.sum(0)
        dh = dz @ p["wh"].T
    return val, g


# ---------------------------------------------------------------------------
# swish / softplus / log-sigmoid with shared values

def act_chain(m, nn):
    """Written as a user would without library helpers: one exp(-|x|) and
    one log1p of it feed the sigmoid, softplus and log-sigmoid.  -|x| is a
    select, so the gradient at 0 is right."""
    def f(x):
        pos = x >= 0
        e = m.exp(m.where(pos, -x, x))                 # exp(-|x|)
        sig = m.where(pos, 1 / (1 + e), e / (1 + e))   # sigmoid
        l1p = m.log1p(e)
        softplus = m.maximum(x, 0.0) + l1p
        log_sigmoid = m.minimum(x, 0.0) - l1p
        swish = x * sig
        return swish * log_sigmoid + softplus
    return f


def act_chain_loss(m, nn):
    f = act_chain(m, nn)
    return lambda x: m.sum(f(x))


def act_chain_grad_numpy(x):
    """d/dx of swish * log_sigmoid + softplus, elementwise."""
    pos = x >= 0
    e = np.exp(np.where(pos, -x, x))
    sig = np.where(pos, 1 / (1 + e), e / (1 + e))
    l1p = np.log1p(e)
    log_sigmoid = np.minimum(x, 0) - l1p
    swish = x * sig
    dswish = sig + swish * (1 - sig)
    return dswish * log_sigmoid + swish * (1 - sig) + sig


def act_data(n=10**6):
    return (normal(np.random.default_rng(13), n, 3.0),)


# ---------------------------------------------------------------------------
# logistic regression with L2

LOGREG = dict(n=10000, d=100, l2=1e-3)


def logreg_data():
    rng = np.random.default_rng(14)
    n, d = LOGREG["n"], LOGREG["d"]
    X = normal(rng, (n, d))
    w_true = normal(rng, d)
    y = (X @ w_true + normal(rng, n) > 0).astype(F32)
    p = {"w": normal(rng, d, 0.1), "b": np.zeros((), F32)}
    return p, X, y


def logreg_loss(m, nn):
    lam = LOGREG["l2"]

    def loss(p, X, y):
        z = X @ p["w"] + p["b"]
        # binary cross-entropy from logits: softplus(z) - y z
        e = m.exp(m.where(z >= 0, -z, z))
        nll = m.maximum(z, 0.0) + m.log1p(e) - y * z
        return m.mean(nll) + lam * m.sum(p["w"] * p["w"])
    return loss


def logreg_value_and_grad_numpy(p, X, y):
    z = X @ p["w"] + p["b"]
    e = np.exp(np.where(z >= 0, -z, z))
    val = np.mean(np.maximum(z, 0) + np.log1p(e) - y * z) + \
        F32(LOGREG["l2"]) * np.sum(p["w"] * p["w"])
    dz = (_np_sigmoid(z) - y) / F32(z.size)
    return val, {"w": X.T @ dz + F32(2 * LOGREG["l2"]) * p["w"], "b": dz.sum()}


# ---------------------------------------------------------------------------
# k-means assignment step

KMEANS = dict(n=10000, d=32, k=16)


def kmeans_data():
    rng = np.random.default_rng(15)
    n, d, k = KMEANS["n"], KMEANS["d"], KMEANS["k"]
    centers = normal(rng, (k, d), 4.0)
    x = centers[rng.integers(0, k, n)] + normal(rng, (n, d))
    c0 = x[rng.choice(n, k, replace=False)].copy()
    return x, c0


def kmeans_step(m, nn):
    """Squared distances of every point to every center, the nearest
    center, new centers as means of their points (a one-hot matmul); a
    center with no points stays.  Returns (centers, inertia)."""
    def step(x, c):
        d2 = m.sum(x * x, axis=1, keepdims=True) - 2.0 * (x @ c.T) + m.sum(c * c, axis=1)
        nearest = m.argmin(d2, axis=1)
        member = nn.one_hot(nearest, c.shape[0], dtype=x.dtype)
        counts = m.sum(member, axis=0)
        sums = member.T @ x
        new_c = m.where(counts[:, None] > 0, sums / m.maximum(counts, 1.0)[:, None], c)
        return new_c, m.sum(m.min(d2, axis=1))
    return step
