"""cjit's main job: training a neural network.

A multilayer perceptron (64 -> 128 -> 128 -> 10, tanh) learns scikit-learn's
handwritten digits (8x8 images, 10 classes).  The loss is the mean softmax
cross-entropy plus a little weight decay; its gradient comes from
cjit.value_and_grad, and the optimizer is Adam written with cjit.numpy.  One
training step (forward, backward and the Adam update of every parameter) is
a single cjit.jit function: the first call traces it, builds the gradient
in C, fuses and compiles it; every later call runs the cached machine code.

The script prints the test accuracy, the steps per second, the first-call
compile time and the compiled step's memory and cost analysis.
"""
import sys
import time

import numpy as np

import cjit
import cjit.nn
import cjit.numpy as cnp

SIZES = (64, 128, 128, 10)
BATCH = 64
EPOCHS = 25
LEARNING_RATE = 2e-3
WEIGHT_DECAY = 1e-4
BETA1, BETA2, ADAM_EPS = 0.9, 0.999, 1e-8


def load_data(seed=0):
    """Digits as float32 in [0, 1], split 80/20 into train and test; and
    what the data is, for the printout."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        print("scikit-learn is not installed (pip install scikit-learn, or run `make demo`, which "
              "installs it):\n  training on synthetic 10-class data instead of the digits, so the "
              "accuracy below says nothing about the digits", file=sys.stderr)
        rng = np.random.default_rng(seed)
        centers = rng.normal(size=(10, 64)) * 1.5
        y = rng.integers(0, 10, size=1797)
        x = centers[y] + rng.normal(size=(1797, 64))
        name = "synthetic examples"
    else:
        digits = load_digits()
        x, y = digits.data / 16.0, digits.target
        name = "digits"
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order].astype(np.float32), y[order].astype(np.int64)
    n_test = len(x) // 5
    return (x[n_test:], y[n_test:]), (x[:n_test], y[:n_test]), name


def init_params(seed=0):
    """Glorot-uniform weights, zero biases: one dict per layer."""
    rng = np.random.default_rng(seed)
    layers = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        layers.append({"w": rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32),
                       "b": np.zeros(fan_out, np.float32)})
    return layers


def predict(params, x):
    """Logits of the MLP."""
    for layer in params[:-1]:
        x = cnp.tanh(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def loss_fn(params, x, y):
    """Mean cross-entropy of the softmax against the labels, plus L2 decay."""
    logp = cjit.nn.log_softmax(predict(params, x))
    nll = -cnp.mean(cnp.sum(logp * cjit.nn.one_hot(y, SIZES[-1], dtype=logp.dtype), axis=1))
    decay = sum(cnp.sum(layer["w"] * layer["w"]) for layer in params)
    return nll + WEIGHT_DECAY * decay


def adam_init(params):
    zeros = [{k: np.zeros_like(v) for k, v in layer.items()} for layer in params]
    return {"m": zeros, "v": [{k: v.copy() for k, v in layer.items()} for layer in zeros],
            "t": np.zeros((), np.float32)}


def adam_update(params, grads, state):
    """One Adam step on every leaf of the parameter tree, in cjit.numpy."""
    t = state["t"] + 1.0
    scale = LEARNING_RATE * cnp.sqrt(1.0 - BETA2 ** t) / (1.0 - BETA1 ** t)
    new_params, new_m, new_v = [], [], []
    for p, g, m, v in zip(params, grads, state["m"], state["v"]):
        new_m.append({k: BETA1 * m[k] + (1.0 - BETA1) * g[k] for k in p})
        new_v.append({k: BETA2 * v[k] + (1.0 - BETA2) * g[k] * g[k] for k in p})
        new_params.append({k: p[k] - scale * new_m[-1][k] / (cnp.sqrt(new_v[-1][k]) + ADAM_EPS)
                           for k in p})
    return new_params, {"m": new_m, "v": new_v, "t": t}


loss_and_grad = cjit.value_and_grad(loss_fn)


@cjit.jit
def train_step(params, state, x, y):
    """Forward, backward and update: one compiled function."""
    loss, grads = loss_and_grad(params, x, y)
    params, state = adam_update(params, grads, state)
    return params, state, loss


@cjit.jit
def accuracy(params, x, y):
    return cnp.mean((cnp.argmax(predict(params, x), axis=1) == y).astype("float32"))


def main():
    (x_train, y_train), (x_test, y_test), name = load_data()
    params = init_params()
    state = adam_init(params)
    steps_per_epoch = len(x_train) // BATCH  # full batches only: one shape, one compile
    rng = np.random.default_rng(1)
    print(f"MLP {' -> '.join(map(str, SIZES))} (tanh) on {len(x_train)} training and "
          f"{len(x_test)} test {name}; Adam, batch {BATCH}, {EPOCHS} epochs of "
          f"{steps_per_epoch} steps")

    t0 = time.perf_counter()
    params, state, loss = train_step(params, state, x_train[:BATCH], y_train[:BATCH])
    first_call = time.perf_counter() - t0

    steps, t_train = 1, 0.0
    for epoch in range(EPOCHS):
        order = rng.permutation(len(x_train))
        xs, ys = x_train[order], y_train[order]
        t0 = time.perf_counter()
        for i in range(steps_per_epoch):
            sl = slice(i * BATCH, (i + 1) * BATCH)
            params, state, loss = train_step(params, state, xs[sl], ys[sl])
        t_train += time.perf_counter() - t0
        steps += steps_per_epoch
        if epoch % 5 == 4 or epoch == EPOCHS - 1:
            print(f"  epoch {epoch + 1:3d}: loss {float(loss):.4f}   "
                  f"train accuracy {float(accuracy(params, x_train, y_train)):.4f}   "
                  f"test accuracy {float(accuracy(params, x_test, y_test)):.4f}")

    test_acc = float(accuracy(params, x_test, y_test))
    print(f"final test accuracy: {test_acc:.4f} ({int(round(test_acc * len(x_test)))} of "
          f"{len(x_test)})")
    print(f"training: {steps} steps, {(steps - 1) / t_train:.0f} steps/s "
          f"({t_train / (steps - 1) * 1e6:.0f} us per step after the first)")
    print(f"first call (trace, gradient, fuse, compile, run): {first_call * 1e3:.1f} ms")
    print(f"cache: {train_step.cache_info()}")

    compiled = train_step.lower(params, state, x_train[:BATCH], y_train[:BATCH]).compile()
    mem = compiled.memory_analysis()
    print(f"compiled train step: {mem.num_kernels} kernels, arguments "
          f"{mem.argument_size_in_bytes} B, outputs {mem.output_size_in_bytes} B, temporaries "
          f"{mem.temp_size_in_bytes} B, peak {mem.peak_memory_in_bytes} B")
    print(f"cost: {compiled.cost_analysis()}")
    if test_acc < 0.95:
        print("test accuracy is below 95%", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
