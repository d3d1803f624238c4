"""Port of HIPS/autograd examples/rnn.py to cjit.

Status: runs with one small edit.
Changes: imports (autograd -> cjit); ``autograd.misc.optimizers.adam`` ->
the stand-in in _autograd_compat (same update rule).  The training text is
this file, as the original trains on its own source.  The model (a tanh RNN
over one-hot characters, unrolled in Python over the time steps), the loss
(mean log-likelihood) and Adam with step 0.1 are the original's.  The whole
unrolled loss is traced once by cjit.grad and compiled; the ``iter``
argument is traced too, which is harmless here because it is unused.
"""
from os.path import abspath

import cjit.numpy as np                         # was: import autograd.numpy as np
import numpy.random as npr                      # was: import autograd.numpy.random as npr
from cjit import grad                           # was: from autograd import grad
from cjit.scipy.special import logsumexp        # was: from autograd.scipy.special import logsumexp

from _autograd_compat import adam               # was: from autograd.misc.optimizers import adam


def sigmoid(x):
    return 0.5 * (np.tanh(x) + 1.0)


def concat_and_multiply(weights, *args):
    cat_state = np.hstack(args + (np.ones((args[0].shape[0], 1)),))
    return np.dot(cat_state, weights)


def create_rnn_params(input_size, state_size, output_size, param_scale=0.01, rs=None):
    rs = rs if rs is not None else npr.RandomState(0)
    return {
        "init hiddens": rs.randn(1, state_size) * param_scale,
        "change": rs.randn(input_size + state_size + 1, state_size) * param_scale,
        "predict": rs.randn(state_size + 1, output_size) * param_scale,
    }


def rnn_predict(params, inputs):
    def update_rnn(input, hiddens):
        return np.tanh(concat_and_multiply(params["change"], input, hiddens))

    def hiddens_to_output_probs(hiddens):
        output = concat_and_multiply(params["predict"], hiddens)
        return output - logsumexp(output, axis=1, keepdims=True)

    num_sequences = inputs.shape[1]
    hiddens = np.repeat(params["init hiddens"], num_sequences, axis=0)
    output = [hiddens_to_output_probs(hiddens)]
    for input in inputs:                        # the time steps
        hiddens = update_rnn(input, hiddens)
        output.append(hiddens_to_output_probs(hiddens))
    return output


def rnn_log_likelihood(params, inputs, targets):
    logprobs = rnn_predict(params, inputs)
    loglik = 0.0
    num_time_steps, num_examples, _ = inputs.shape
    for t in range(num_time_steps):
        loglik += np.sum(logprobs[t] * targets[t])
    return loglik / (num_time_steps * num_examples)


def string_to_one_hot(string, maxchar):
    """An ASCII string as one row of a one-of-maxchar code per character."""
    ascii = np.array([ord(c) for c in string]).T
    return np.array(ascii[:, None] == np.arange(maxchar)[None, :], dtype=int)


def one_hot_to_string(one_hot_matrix):
    return "".join([chr(np.argmax(c)) for c in one_hot_matrix])


def build_dataset(filename, sequence_length, alphabet_size, max_lines=-1):
    """The non-blank lines of a text file, each padded or cut to
    sequence_length characters, as a (time, line, alphabet) one-hot array."""
    with open(filename) as f:
        content = f.readlines()
    content = [line for line in content[:max_lines] if len(line) > 2]
    seqs = np.zeros((sequence_length, len(content), alphabet_size))
    for ix, line in enumerate(content):
        padded_line = (line + " " * sequence_length)[:sequence_length]
        seqs = seqs.at[:, ix, :].set(string_to_one_hot(padded_line, alphabet_size))   # was: seqs[:, ix, :] = ...
    return seqs


def main(num_chars=128, sequence_length=30, max_lines=60, state_size=40, num_iters=1000,
         step_size=0.1, verbose=True):
    train_inputs = build_dataset(abspath(__file__), sequence_length, num_chars, max_lines)
    init_params = create_rnn_params(input_size=num_chars, output_size=num_chars,
                                    state_size=state_size, param_scale=0.01)

    def training_loss(params, iter):
        return -rnn_log_likelihood(params, train_inputs, train_inputs)

    losses = []

    def callback(weights, iter, gradient):
        if iter % 10 == 0:
            losses.append(float(training_loss(weights, 0)))
            if verbose:
                print("Iteration", iter, "Train loss:", losses[-1])

    trained = adam(grad(training_loss), init_params, step_size=step_size, num_iters=num_iters,
                   callback=callback)
    return trained, losses, training_loss, train_inputs


if __name__ == "__main__":
    main()
