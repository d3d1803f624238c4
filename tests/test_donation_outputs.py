"""Outputs in donated arguments (donate_argnums), issue 15 item 1.

An output of the same shape and dtype as a donated argument lives in the
argument's memory: written over it in place when the kernel that writes
the output is the argument's last reader and reads it only where it
writes, or after the argument's last read otherwise.  The call returns a
new array over that memory; the donated array is consumed (read-only, and
refused by later cjit calls).  Every result is held against the same
function without donation: bit for bit, except that a BLAS gemm split into
other blocks of rows may sum in another order (decision 155), so a program
with one is held to that rounding, and bit for bit again with the BLAS off;
every plan is held against the bytes the runtime measures during the call."""
import gc
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import cjit
import cjit.numpy as cnp
from cjit import tree_util
from gemm_order import assert_equal_up_to_gemm_order, blas_off, blas_stages

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, os.path.join(HERE, "..", "benchmarks"))
import train_mlp as T  # noqa: E402
import workloads as W  # noqa: E402

rng = np.random.default_rng(15)


def copies(tree):
    return tree_util.tree_map(np.copy, tree)


def leaves(tree):
    return tree_util.tree_leaves(tree)


def measured_peak(fn, *args):
    """Bytes the runtime holds at the peak of one call, above what it held
    before; returns (peak, result)."""
    gc.collect()
    base = cjit.memory_stats()["bytes_in_use"]
    cjit.reset_peak_memory_stats()
    out = fn(*args)
    return cjit.memory_stats()["peak_bytes_in_use"] - base, out


def assert_same_results(got, want, exact):
    """Leaves of two plans of one program: bit for bit when `exact`, else
    within the rounding of reordered gemm sums."""
    got_leaves, want_leaves = leaves(got), leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        if exact:
            assert g.tobytes() == w.tobytes()   # bit for bit
        else:
            assert_equal_up_to_gemm_order(g, w)


def check_bit_equal_without_blas(f, args, donate):
    """With every matmul run by cjit's own kernels, donating changes no
    bit of the results."""
    with blas_off():
        want = cjit.jit(f)(*copies(args))
        got = cjit.jit(f, donate_argnums=donate)(*copies(args))
    assert_same_results(got, want, exact=True)


def check_against_plain(f, args, donate, same_memory=None):
    """Runs f with `donate` and without on copies of args: the same results
    (bit for bit, or as plans that split their BLAS gemms differently and
    then bit for bit with the BLAS off), the measured peak equal to the
    plan, the timeline's maximum too, and (when given) which outputs share
    memory with which donated argument: {output index: argument index}.
    Returns the two analyses and the donated call's results."""
    plain_f = cjit.jit(f)
    donated_f = cjit.jit(f, donate_argnums=donate)
    want = plain_f(*copies(args))
    compiled = donated_f.lower(*args).compile()
    plain_compiled = plain_f.lower(*args).compile()
    ma = compiled.memory_analysis()
    assert compiled.memory_timeline().peak_bytes == ma.peak_memory_in_bytes
    donated_f(*copies(args))   # compile outside the measurement
    call_args = copies(args)
    peak, got = measured_peak(donated_f, *call_args)
    assert peak == ma.peak_memory_in_bytes
    with_blas = blas_stages(compiled) + blas_stages(plain_compiled) > 0
    assert_same_results(got, want, exact=not with_blas)
    if with_blas:
        check_bit_equal_without_blas(f, args, donate)
    got_leaves = leaves(got)
    for g in got_leaves:
        assert type(g) is cjit.Array and not g.flags.writeable and g.flags.c_contiguous
    if same_memory is not None:
        for k, g in enumerate(got_leaves):
            owners = [i for i in range(len(call_args))
                      if isinstance(call_args[i], np.ndarray) and np.shares_memory(g, call_args[i])]
            assert owners == ([same_memory[k]] if k in same_memory else []), (k, owners)
    return plain_compiled.memory_analysis(), ma, got


# ---- where outputs live ------------------------------------------------------

def test_elementwise_output_written_over_donated_argument():
    x = rng.standard_normal((300, 40))
    plain, ma, got = check_against_plain(lambda x: cnp.exp(x) + 1, (x,), 0, {0: 0})
    assert plain.alias_size_in_bytes == 0 and plain.output_size_in_bytes == x.nbytes
    assert ma.alias_size_in_bytes == x.nbytes
    assert ma.output_size_in_bytes == 0
    assert ma.peak_memory_in_bytes == plain.peak_memory_in_bytes - x.nbytes
    text = cjit.jit(lambda x: cnp.exp(x) + 1, donate_argnums=0).lower(x).compile().as_text()
    (line,) = [ln for ln in text.splitlines() if "output[0]" in ln]
    assert "in buf0's bytes at offset 0 (donated)" in line


def test_output_after_the_last_read():
    # the second matmul writes the output; a's last reader is the first
    a, w = rng.standard_normal((64, 48)), rng.standard_normal((48, 48)) * 0.1
    f = lambda a, w: cnp.tanh(a @ w) @ w
    plain, ma, _ = check_against_plain(f, (a, w), 0, {0: 0})
    assert ma.alias_size_in_bytes == a.nbytes and ma.output_size_in_bytes == 0
    assert ma.peak_memory_in_bytes == plain.peak_memory_in_bytes - a.nbytes


def test_reduction_result_after_the_last_read():
    # acc is read first (its sum), the output is written after a reduction
    acc, x = rng.standard_normal(50), rng.standard_normal((200, 50))
    f = lambda acc, x: x.sum(axis=0) * acc.sum()
    plain, ma, _ = check_against_plain(f, (acc, x), 0, {0: 0})
    assert ma.alias_size_in_bytes == acc.nbytes and ma.output_size_in_bytes == 0


def test_later_layer_output_in_donated_input():
    # a small residual network: the input is read by the first layer and the
    # residual add, the output of the last layer lives in it
    x = rng.standard_normal((32, 16))
    ws = [rng.standard_normal((16, 16)) * 0.2 for _ in range(3)]

    def net(x, *ws):
        h = x
        for w in ws:
            h = cnp.tanh(h @ w) + h
        return h
    plain, ma, _ = check_against_plain(net, (x, *ws), 0, {0: 0})
    assert ma.output_size_in_bytes == 0 and ma.alias_size_in_bytes == x.nbytes


@pytest.mark.parametrize("case", ["dtype", "shape", "size"])
def test_outputs_that_cannot_alias_stay_separate(case):
    x = rng.standard_normal((6, 4)).astype(np.float32)
    f = {"dtype": lambda x: x.astype(np.float64) * 2,        # same shape, other dtype
         "shape": lambda x: (x * 2).reshape(4, 6),            # same bytes, other shape
         "size": lambda x: x.sum(axis=0) + 1}[case]           # smaller
    plain, ma, got = check_against_plain(f, (x,), 0, {})
    assert ma.output_size_in_bytes == plain.output_size_in_bytes == got.nbytes
    assert ma.peak_memory_in_bytes == plain.peak_memory_in_bytes


def test_two_outputs_wanting_one_donor():
    x = rng.standard_normal((100, 30))
    plain, ma, got = check_against_plain(lambda x: (x + 1, x * 2), (x,), 0)
    sharing = [np.shares_memory(g, h) for g in got for h in got if g is not h]
    assert not any(sharing)
    assert ma.alias_size_in_bytes == x.nbytes
    assert ma.output_size_in_bytes == x.nbytes     # one of the two has bytes of its own
    assert ma.peak_memory_in_bytes == plain.peak_memory_in_bytes - x.nbytes


def test_two_donors_two_outputs_in_their_own_slots():
    # each output goes to the donated argument in its own position when it can
    p, m = rng.standard_normal((20, 10)), rng.standard_normal((20, 10))
    f = lambda p, m, g: (p - 0.1 * (0.9 * m + g), 0.9 * m + g)
    check_against_plain(f, (p, m, rng.standard_normal((20, 10))), (0, 1), {0: 0, 1: 1})


def test_identity_output_is_the_donated_memory():
    x, y = rng.standard_normal((40, 7)), rng.standard_normal((40, 7))
    before = x.copy()
    plain, ma, got = check_against_plain(lambda x, y: (x, y + 1), (x, y), 0, {0: 0})
    assert np.array_equal(got[0], before)
    assert ma.output_size_in_bytes == y.nbytes and ma.alias_size_in_bytes == x.nbytes
    f = cjit.jit(lambda x: x, donate_argnums=0)
    a = x.copy()
    r = f(a)
    assert np.shares_memory(r, a) and np.array_equal(r, before)


def test_donated_view_result_keeps_the_base_alive():
    big = rng.standard_normal(1000)
    want = cjit.jit(lambda x: cnp.exp(x) + 1)(big[100:600])
    f = cjit.jit(lambda x: cnp.exp(x) + 1, donate_argnums=0)
    view = big[100:600]
    r = f(view)
    assert np.shares_memory(r, big) and np.array_equal(r, want)
    assert not view.flags.writeable and big.flags.writeable   # only the donated view is consumed
    del view, big
    gc.collect()
    assert np.array_equal(r, want)     # the memory is still held by the result


def test_donated_python_scalar_result_is_its_own():
    # on the C fast path a Python float arrives as bytes in the call's key,
    # which a result must not keep
    f = cjit.jit(lambda s: s * 2.0 + 1.0, donate_argnums=0)
    r1 = f(1.0)
    r2 = f(2.0)
    r3 = f(3.0)
    assert (float(r1), float(r2), float(r3)) == (3.0, 5.0, 7.0)


def test_refused_donation_result_lives_in_the_private_copy():
    x = rng.standard_normal((50, 8))
    frozen = x.copy()
    frozen.setflags(write=False)
    f = cjit.jit(lambda x: cnp.tanh(x) * 3, donate_argnums=0)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        r = f(frozen)
    assert len([w for w in record if "cannot be reused" in str(w.message)]) == 1
    assert np.array_equal(frozen, x) and not np.shares_memory(r, frozen)
    assert r.tobytes() == cjit.jit(lambda x: cnp.tanh(x) * 3)(x).tobytes()
    assert type(r) is cjit.Array


def test_non_contiguous_donated_argument_is_copied_and_left_alone():
    base = rng.standard_normal((40, 20))
    strided = base[:, ::2]
    before = strided.copy()
    r = cjit.jit(lambda x: x * 2, donate_argnums=0)(strided)
    assert np.array_equal(r, before * 2)
    assert strided.flags.writeable and np.array_equal(strided, before)


# ---- refused donations -------------------------------------------------------------

def test_donated_argument_also_closed_over_is_refused():
    g = rng.standard_normal((10, 10))
    f = cjit.jit(lambda x: x * 2.0 + g, donate_argnums=0)
    with pytest.raises(ValueError, match=r"argument 0 .* donated .* closed-over array 0"):
        f(g)
    with pytest.raises(ValueError, match=r"closed-over array"):
        f(g[:])                     # a view of it too
    assert g.flags.writeable        # nothing ran, nothing was consumed
    np.testing.assert_array_equal(f(g.copy()), g * 2.0 + g)
    np.testing.assert_array_equal(f(g.copy()), g * 2.0 + g)   # cached call (C fast path)


def test_donated_argument_passed_twice_is_refused_and_not_consumed():
    f = cjit.jit(lambda a, b: (a + b, a * b), donate_argnums=0)
    x = rng.standard_normal((5, 5))
    for _ in range(2):              # first call and cached call
        with pytest.raises(ValueError, match=r"donated .* shares memory"):
            f(x, x)
    assert x.flags.writeable
    y = x.copy()
    s, p = f(x, y)
    np.testing.assert_array_equal(s, y + y)
    np.testing.assert_array_equal(p, y * y)


# ---- use after donation ------------------------------------------------------------

@pytest.mark.parametrize("path", ["jit", "compiled"])
def test_use_after_donation_raises(path):
    x = rng.standard_normal((30, 30))
    f = cjit.jit(lambda x: cnp.sin(x) + 1, donate_argnums=0)
    if path == "compiled":
        f = f.lower(x).compile()
    other = cjit.jit(lambda x: x * 2)
    for call in range(2):           # first call (slow path) and cached call (fast path)
        a = x.copy()
        r = f(a)
        assert r.tobytes() == (cjit.jit(lambda x: cnp.sin(x) + 1)(x)).tobytes()
        assert not a.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            a[0, 0] = 1.0
        with pytest.raises(RuntimeError, match=r"argument 0 .* consumed"):
            f(a)
        with pytest.raises(RuntimeError, match=r"consumed"):
            other(a)                # any cjit call, donating or not
        # the result is the array to go on with
        r2 = f(r)
        assert r2.tobytes() == (cjit.jit(lambda x: cnp.sin(cnp.sin(x) + 1) + 1)(x)).tobytes()


def test_training_loop_donating_results():
    # results are donated again step after step: no warning, no copy, and
    # each result's base is one capsule, however many steps ran
    f = cjit.jit(lambda p, g: (p - 0.5 * g, p.sum()), donate_argnums=0)
    plain = cjit.jit(lambda p, g: (p - 0.5 * g, p.sum()))
    p = rng.standard_normal(1000)
    q = p.copy()
    g = rng.standard_normal(1000) * 0.01
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for step in range(20):
            old, at = p, p.ctypes.data
            p, s = f(p, g)
            q, t = plain(q, g)
            assert p.ctypes.data == at and p.tobytes() == q.tobytes() and s == t
            # from the second step on the donated array is a cjit.Array: deleted, as JAX's
            assert old.is_deleted() if step else not old.flags.writeable
    assert not isinstance(p.base, np.ndarray) and type(p.base).__name__ == "PyCapsule"


class _FakeDeviceBuffer:
    """Stands in for a DeviceBuffer, so that the Python side of donated
    cjit.Arrays runs without a GPU."""

    def __init__(self, host):
        self._host = host
        self.shape = host.shape
        self.dtype = host.dtype
        self.nbytes = host.nbytes

    def to_host(self):
        return self._host.copy()

    def synchronize(self):
        pass


@pytest.mark.parametrize("path", ["jit", "compiled"])
def test_donated_cjit_array_is_deleted(path):
    from cjit._devices import DeviceArray as Array, Device
    host = rng.standard_normal((8, 8))
    arr = Array._wrap(_FakeDeviceBuffer(host), Device("cuda", 0))
    f = cjit.jit(lambda a, b: a * 2 + b, donate_argnums=0)
    if path == "compiled":
        f = f.lower(host, host).compile()
    keep = Array._wrap(_FakeDeviceBuffer(host), Device("cuda", 0))
    r = f(arr, keep)
    np.testing.assert_array_equal(r, host * 3)
    assert arr.is_deleted() and not keep.is_deleted()
    assert arr.shape == (8, 8) and arr.nbytes == host.nbytes and "deleted" in repr(arr)
    for use in (lambda: np.asarray(arr), arr.block_until_ready, lambda: f(arr, keep)):
        with pytest.raises(RuntimeError, match="cjit.Array has been deleted"):
            use()


# ---- the training step -------------------------------------------------------------

def _digits_step_args():
    params = T.init_params()
    state = T.adam_init(params)
    r = np.random.default_rng(3)
    x = r.random((T.BATCH, T.SIZES[0])).astype(np.float32)
    y = r.integers(0, T.SIZES[-1], T.BATCH)
    # a state after a few steps, so that m and v are not zeros
    step = cjit.jit(T.train_step._fun)
    for _ in range(3):
        params, state, _ = step(params, state, x, y)
    return params, state, x, y


def ran_on_two_threads(test):
    """The plans of the digits and MLP steps below are checked byte for byte
    as they are on 2 threads (block storage has a block per thread, and the
    peak moves with it): on any other pool, run the test again in a process
    with CJIT_NUM_THREADS=2.  True when it did (and passed)."""
    if cjit._cjit.num_threads() == 2:
        return False
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        os.path.abspath(__file__) + "::" + test.__name__],
                       capture_output=True, text=True, timeout=600, env=dict(os.environ, CJIT_NUM_THREADS="2"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return True


def test_digits_train_step_with_donated_state_at_a_lower_peak():
    if ran_on_two_threads(test_digits_train_step_with_donated_state_at_a_lower_peak):
        return
    params, state, x, y = _digits_step_args()
    size = sum(a.nbytes for a in leaves((params, state)))
    plain, ma, got = check_against_plain(T.train_step._fun, (params, state, x, y), (0, 1))
    # every new parameter and optimizer leaf lives in its old one: only the
    # loss has bytes of its own
    assert ma.alias_size_in_bytes == size
    assert ma.output_size_in_bytes == 4 and plain.output_size_in_bytes == size + 4
    assert ma.argument_size_in_bytes == plain.argument_size_in_bytes
    # so the peak drops by the state less what the donated arena has above
    # the plain one
    assert (plain.peak_memory_in_bytes - ma.peak_memory_in_bytes
            == size - (ma.temp_size_in_bytes - plain.temp_size_in_bytes))
    B, H, C = T.BATCH, T.SIZES[1], T.SIZES[-1]
    act = B * H * 4                           # float32 [64, 128]
    # The plain arena peaks where the backward pass starts: both hidden
    # activations, the gradient reaching the last hidden layer, the logits'
    # gradient.  Every weight gradient is computed straight into an output.
    assert plain.temp_size_in_bytes == 3 * act + B * C * 4
    # With donation no byte of a donated argument is ever free, so each
    # weight gradient needs bytes of its own.  Each update joins the group of
    # the gemm making its gradient (memorder.c, cj_order_join_update), so the
    # gradient is group-local and lives in one block of rows per thread
    # (blockmem.c); blocks of at most 4 KiB live in the group driver's stack
    # frame, not the arena, and widen while that holds.  Adam's scalar bias
    # correction is recomputed in each update, before its loop, not stored.
    # So the donated arena holds no more than the plain one at its peak,
    # and the peak drops by the whole state: the goal.
    compiled = cjit.jit(T.train_step._fun, donate_argnums=(0, 1)).lower(params, state, x, y).compile()
    plan = compiled._exe.memory_plan()
    (g3,) = [b for b in plan["buffers"] if b["kind"] == "temp" and b["shape"] == (H, C)]
    assert g3["size"] == 0 and g3["array_bytes"] == H * C * 4
    assert 2 <= g3["block_rows"] < H and g3["stack_bytes"] == (g3["block_rows"] * C * 4 + 63) // 64 * 64 <= 4096
    (g2,) = [b for b in plan["buffers"] if b["kind"] == "temp" and b["shape"] == (H, H)]
    assert g2["size"] == 0 and g2["stack_bytes"] == g2["block_rows"] * H * 4 <= 4096
    assert not [b for b in plan["buffers"] if b["kind"] == "temp" and b["shape"] == () and b["op"] == "div"]
    tl = compiled.memory_timeline()
    temps = sorted(b.size for b in tl.peak_live if b.kind == "temp" and b.size)
    assert temps == sorted([act, act, act, B * C * 4])
    assert ma.temp_size_in_bytes == plain.temp_size_in_bytes
    assert plain.peak_memory_in_bytes - ma.peak_memory_in_bytes == size
    # without block storage (CJIT_PASSES=-blocks) the largest gradient,
    # the [128, 128] one, is whole at its gemm beside three activations and
    # the second bias's gradient: the arena before block storage
    r = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import sys; sys.path[:0] = %r
        import cjit
        from test_donation_outputs import _digits_step_args
        import train_mlp as T
        params, state, x, y = _digits_step_args()
        c = cjit.jit(T.train_step._fun, donate_argnums=(0, 1)).lower(params, state, x, y).compile()
        print(c.memory_analysis().temp_size_in_bytes)
    """ % [HERE, os.path.join(HERE, "..", "examples")])], capture_output=True, text=True, timeout=300,
        env=dict(os.environ, CJIT_PASSES="-blocks"))
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == H * H * 4 + 3 * act + H * 4
    # the results of the donated call sit in the donated arrays' memory
    args = copies((params, state, x, y))
    out = cjit.jit(T.train_step._fun, donate_argnums=(0, 1))(*args)
    for new, old in zip(leaves(out[:2]), leaves(args[:2])):
        assert np.shares_memory(new, old)


def _digits_loop(params, state, x, y, donate):
    """Five steps of the digits training loop; the losses and the state."""
    step = cjit.jit(T.train_step._fun, donate_argnums=donate)
    p, s = copies(params), copies(state)
    losses = []
    for i in range(5):
        xb, yb = x[::-1] if i % 2 else x, y[::-1] if i % 2 else y
        p, s, loss = step(p, s, xb, yb)
        losses.append(loss)
    return losses, p, s


@pytest.mark.parametrize("blas", [True, False])
def test_digits_training_loop_equal_to_plain(blas):
    # the donated loop runs the plain loop's sums, except in its BLAS gemms
    # (row blocks: decision 155); with cjit's own matmuls, bit for bit
    params, state, x, y = _digits_step_args()
    if blas:
        plain, donated = (_digits_loop(params, state, x, y, d) for d in ((), (0, 1)))
    else:
        with blas_off():
            plain, donated = (_digits_loop(params, state, x, y, d) for d in ((), (0, 1)))
    assert_same_results(donated, plain, exact=not blas)


def test_benchmark_mlp_step_with_donated_params():
    if ran_on_two_threads(test_benchmark_mlp_step_with_donated_params):
        return
    p, x, y = W.mlp_data()
    step = W.mlp_train_step(cnp, cjit.nn, cjit.value_and_grad)
    plain, ma, _ = check_against_plain(step, (p, x, y), 0)
    size = sum(a.nbytes for a in p.values())
    assert ma.alias_size_in_bytes == size and ma.output_size_in_bytes == 4
    # The goal holds here: the peak drops by the whole parameter
    # tree.  Unlike the digits step, this net keeps each layer's
    # pre-activation (for GELU's derivative) apart from its output, so the
    # activation a weight's gradient reads dies at that matmul.  Each of the
    # two large weights' updates joins the gemm making its gradient, which
    # then lives in blocks of rows (blockmem.c), and so does each hidden
    # layer's delta with its GELU derivative; the peak is at the last
    # layer's weight gradient: four activations, the logits' gradient and
    # that [512, 10] gradient, whole (its update must follow the matmul that
    # reads the old weight).  The plain arena's peak holds five activations.
    assert plain.peak_memory_in_bytes - ma.peak_memory_in_bytes >= size
    act = x.shape[0] * p["w1"].shape[0] * 4
    assert plain.temp_size_in_bytes == 5 * act + x.shape[0] * p["w2"].shape[1] * 4
    assert ma.temp_size_in_bytes == 4 * act + x.shape[0] * p["w2"].shape[1] * 4 + p["w2"].nbytes


# ---- passes off ------------------------------------------------------------------

def test_passes_off_still_correct_and_consumes():
    # every pass off: no output is placed in an argument (each temporary and
    # output has bytes of its own), results unchanged, donated arrays still
    # consumed, so the meaning of donation does not depend on the passes
    r = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import numpy as np, cjit, cjit.numpy as cnp
        x = np.linspace(-1, 1, 600).reshape(20, 30)
        w = np.linspace(0, 1, 900).reshape(30, 30) * 0.1
        fs = [lambda x, w: cnp.exp(x) + 1, lambda x, w: cnp.tanh(x @ w) @ w,
              lambda x, w: (x, x + 1), lambda x, w: (x + 1, x * 2), lambda x, w: x.sum(axis=0) * w[0]]
        for f in fs:
            want = cjit.jit(f)(x.copy(), w)
            d = cjit.jit(f, donate_argnums=0)
            c = d.lower(x, w).compile()
            ma = c.memory_analysis()
            assert ma.alias_size_in_bytes == 0, ma
            assert c.memory_timeline().peak_bytes == ma.peak_memory_in_bytes
            a = x.copy()
            got = d(a, w)
            assert not a.flags.writeable
            got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
            for g, v in zip(got, want):
                assert g.tobytes() == v.tobytes()
                assert not np.shares_memory(g, a)
            try:
                d(a, w)
            except RuntimeError as e:
                assert "consumed" in str(e)
            else:
                raise AssertionError("a consumed argument was accepted")
        print("ok")
    """)], capture_output=True, text=True, timeout=300,
        env=dict(os.environ, CJIT_PASSES="-cse,-fuse,-group,-memplan"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


# ---- random programs -------------------------------------------------------------

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, note, settings  # noqa: E402

from test_fuzz import _SETTINGS, programs, smooth_programs  # noqa: E402


def _copy_inputs(inputs):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in inputs]


def _bit_equal_donating_all(f, inputs):
    donate = tuple(i for i, a in enumerate(inputs) if isinstance(a, np.ndarray))
    plain = cjit.jit(f)
    want = plain(*_copy_inputs(inputs))
    d = cjit.jit(f, donate_argnums=donate)
    compiled = d.lower(*inputs).compile()
    ma = compiled.memory_analysis()
    d(*_copy_inputs(inputs))
    peak, got = measured_peak(d, *_copy_inputs(inputs))
    assert peak == ma.peak_memory_in_bytes
    with_blas = blas_stages(compiled) + blas_stages(plain.lower(*inputs).compile()) > 0
    assert_same_results(got, want, exact=not with_blas)
    if with_blas:
        with blas_off():
            want = cjit.jit(f)(*_copy_inputs(inputs))
            got = cjit.jit(f, donate_argnums=donate)(*_copy_inputs(inputs))
        assert_same_results(got, want, exact=True)
    return ma


@settings(max_examples=40, **_SETTINGS)
@given(programs())
def test_random_programs_donating_every_input(prog):
    note(prog.source)
    _bit_equal_donating_all(prog.function(cnp, cjit.nn), prog.inputs)


@settings(max_examples=15, **_SETTINGS)
@given(smooth_programs())
def test_random_sgd_steps_donating_every_input(prog):
    # new values = old - 0.1 * gradient: outputs of the inputs' shapes, the
    # updates movable by the order for donation
    note(prog.source)
    f = prog.function(cnp, cjit.nn)

    def loss(*a):
        total = 0.0
        for o in f(*a):
            total = total + cnp.sum(o)
        return total

    n = len(prog.inputs)
    grad = cjit.grad(loss, argnums=tuple(range(n)))

    def step(*a):
        return [x - 0.1 * g for x, g in zip(a, grad(*a))]
    # (not every output can take its input: new_a = a - b, new_b = b - a in
    # two kernels need one more buffer, as a swap does)
    _bit_equal_donating_all(step, prog.inputs)
