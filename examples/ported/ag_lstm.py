"""Port of HIPS/autograd examples/lstm.py to cjit.

Status: runs with one small edit.
Changes: imports (autograd -> cjit, its helpers from the rnn port as the
original takes them from rnn.py); ``autograd.misc.optimizers.adam`` -> the
stand-in in _autograd_compat.  The model (an LSTM with change/forget/in/out
gates over one-hot characters), loss and Adam (step 0.1) are the original's.
"""
from os.path import abspath

import cjit.numpy as np                         # was: import autograd.numpy as np
import numpy.random as npr                      # was: import autograd.numpy.random as npr
from cjit import grad                           # was: from autograd import grad
from cjit.scipy.special import logsumexp        # was: from autograd.scipy.special import logsumexp

from _autograd_compat import adam               # was: from autograd.misc.optimizers import adam
from ag_rnn import build_dataset, concat_and_multiply, sigmoid


def init_lstm_params(input_size, state_size, output_size, param_scale=0.01, rs=None):
    rs = rs if rs is not None else npr.RandomState(0)

    def rp(*shape):
        return rs.randn(*shape) * param_scale

    gate_rows = input_size + state_size + 1
    return {
        "init cells": rp(1, state_size),
        "init hiddens": rp(1, state_size),
        "change": rp(gate_rows, state_size),
        "forget": rp(gate_rows, state_size),
        "ingate": rp(gate_rows, state_size),
        "outgate": rp(gate_rows, state_size),
        "predict": rp(state_size + 1, output_size),
    }


def lstm_predict(params, inputs):
    def update_lstm(input, hiddens, cells):
        change = np.tanh(concat_and_multiply(params["change"], input, hiddens))
        forget = sigmoid(concat_and_multiply(params["forget"], input, hiddens))
        ingate = sigmoid(concat_and_multiply(params["ingate"], input, hiddens))
        outgate = sigmoid(concat_and_multiply(params["outgate"], input, hiddens))
        cells = cells * forget + ingate * change
        hiddens = outgate * np.tanh(cells)
        return hiddens, cells

    def hiddens_to_output_probs(hiddens):
        output = concat_and_multiply(params["predict"], hiddens)
        return output - logsumexp(output, axis=1, keepdims=True)

    num_sequences = inputs.shape[1]
    hiddens = np.repeat(params["init hiddens"], num_sequences, axis=0)
    cells = np.repeat(params["init cells"], num_sequences, axis=0)
    output = [hiddens_to_output_probs(hiddens)]
    for input in inputs:
        hiddens, cells = update_lstm(input, hiddens, cells)
        output.append(hiddens_to_output_probs(hiddens))
    return output


def lstm_log_likelihood(params, inputs, targets):
    logprobs = lstm_predict(params, inputs)
    loglik = 0.0
    num_time_steps, num_examples, _ = inputs.shape
    for t in range(num_time_steps):
        loglik += np.sum(logprobs[t] * targets[t])
    return loglik / (num_time_steps * num_examples)


def main(num_chars=128, sequence_length=30, max_lines=60, state_size=40, num_iters=1000,
         step_size=0.1, verbose=True):
    train_inputs = build_dataset(abspath(__file__), sequence_length, num_chars, max_lines)
    init_params = init_lstm_params(input_size=num_chars, output_size=num_chars,
                                   state_size=state_size, param_scale=0.01)

    def training_loss(params, iter):
        return -lstm_log_likelihood(params, train_inputs, train_inputs)

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
