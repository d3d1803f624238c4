"""A tanh RNN trained with cjit.lax.scan: predict the next value of noisy
sine waves.  The whole training step (forward scan, reverse-scan gradient,
SGD update) is one jitted function; the loop over time is a real loop in
the compiled code, so compiling does not depend on the sequence length.

    python examples/rnn_scan.py [--steps N] [--length T]
"""
import argparse

import numpy as np

import cjit
import cjit.numpy as cnp
from cjit import lax


def init(hidden, seed=0):
    r = np.random.default_rng(seed)
    return {"W": (r.standard_normal((hidden, hidden)) * 0.5 / np.sqrt(hidden)).astype(np.float32),
            "U": (r.standard_normal((hidden, 1)) * 0.5).astype(np.float32),
            "b": np.zeros(hidden, np.float32),
            "V": (r.standard_normal((1, hidden)) * 0.5 / np.sqrt(hidden)).astype(np.float32),
            "c": np.zeros(1, np.float32)}


def loss(p, xs, ys):
    """Mean squared error of the one-step-ahead predictions over a sequence."""
    def step(h, x):
        h = cnp.tanh(p["W"] @ h + p["U"] @ x + p["b"])
        return h, p["V"] @ h + p["c"]
    _, preds = lax.scan(step, cnp.zeros(p["b"].shape, np.float32), xs)
    return cnp.mean((preds - ys) ** 2)


@cjit.jit
def train_step(p, xs, ys, lr):
    value, g = cjit.value_and_grad(loss)(p, xs, ys)
    return value, cjit.tree_util.tree_map(lambda w, d: w - lr * d, p, g)


def data(length, seed):
    r = np.random.default_rng(seed)
    phase, freq = r.uniform(0, 2 * np.pi), r.uniform(0.1, 0.3)
    t = np.arange(length + 1)
    s = (np.sin(freq * t + phase) + 0.05 * r.standard_normal(length + 1)).astype(np.float32)
    return s[:-1, None], s[1:, None]


def main(steps=300, length=200, hidden=16, lr=0.1, verbose=True):
    p = init(hidden)
    losses = []
    for i in range(steps):
        xs, ys = data(length, i)
        value, p = train_step(p, xs, ys, np.float32(lr))
        losses.append(float(value))
        if verbose and (i % 50 == 0 or i == steps - 1):
            print(f"step {i:4d}  loss {value:.4f}")
    return losses


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--length", type=int, default=200)
    a = ap.parse_args()
    main(a.steps, a.length)
