"""Block storage of group-local temporaries (csrc/blockmem.c).

A temporary that one kernel group writes and reads, and nothing else
touches, takes one block of rows per thread instead of the whole array
when the plan has donated arguments; a block of at most 4 KiB lives in the
group driver's stack frame instead of the arena.  Checked here: the planned
bytes (threads x one aligned block, or none and the block's stack bytes),
the arena and the measured peak equal to the plan, results equal to the
unblocked plan (CJIT_PASSES=-blocks, -group) and close to NumPy, a plan
from the disk cache made for fewer threads than the pool has, and
CJIT_PASSES with passes off.  Equal means bit for bit, except where a BLAS
gemm runs on blocks of rows: a BLAS kernel may add a block's products in
another order than the whole matrix's (decision 155), so there the results
are held to the bound of a reordered sum, and bit for bit with the BLAS
off."""
import os
import subprocess
import sys
import textwrap

import numpy as np

import cjit
import cjit.numpy as cnp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from test_donation_outputs import check_against_plain, copies, measured_peak  # noqa: E402
from gemm_order import blas_off, gemm_reorder_bound  # noqa: E402

rng = np.random.default_rng(147)
THREADS = cjit._cjit.num_threads()


def aligned(n):
    return (n + 63) // 64 * 64


def plan_of(f, args, donate):
    c = cjit.jit(f, donate_argnums=donate).lower(*args).compile()
    return c, c._exe.memory_plan()


def blocked(plan):
    return [b for b in plan["buffers"] if b.get("block_rows") is not None]


def run_with_passes(passes, code):
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, CJIT_PASSES=passes, PYTHONPATH=HERE))
    assert r.returncode == 0, r.stderr
    return r.stdout


# ---- a gemm-led group: the weight update reads the gradient --------------------

def sgd(w, a, d):
    return w - 0.125 * (a.T @ d)


def sgd_within_gemm_rounding(got, ref, w, a, d):
    """Whether two results of sgd differ by no more than their gemms'
    reordered sums allow: 0.125 times the gemm's bound, and the final
    subtraction's rounding (half a unit in the last place each)."""
    got, ref = got.astype(np.float64), ref.astype(np.float64)
    bound = 0.125 * gemm_reorder_bound(a.T, d) + np.spacing(np.maximum(np.abs(got), np.abs(ref)).astype(np.float32))
    return bool(np.all(np.abs(got - ref) <= bound))


def sgd_args(n=1024):
    # n = 1024: a gradient row of 4 KiB, so a block (two rows) lives in the arena
    return (rng.standard_normal((256, n)).astype(np.float32),
            rng.standard_normal((64, 256)).astype(np.float32),
            rng.standard_normal((64, n)).astype(np.float32))


def test_gemm_gradient_in_blocks_of_two_rows():
    w, a, d = sgd_args()
    plain, ma, got = check_against_plain(sgd, (w, a, d), 0, {0: 0})
    c, plan = plan_of(sgd, (w, a, d), 0)
    (g,) = blocked(plan)
    # the gradient [256, 1024] float32: two rows per thread, not 1 MiB
    assert g["shape"] == (256, 1024) and g["array_bytes"] == 256 * 1024 * 4
    assert g["block_rows"] == 2 and g["stack_bytes"] == 0
    assert g["size"] == THREADS * aligned(2 * 1024 * 4)
    # it is the arena; the output lives in w; nothing else is held
    assert ma.temp_size_in_bytes == g["size"]
    assert ma.output_size_in_bytes == 0
    assert ma.peak_memory_in_bytes == w.nbytes + a.nbytes + d.nbytes + g["size"]
    # without donation the gradient is computed straight into the output
    assert plain.temp_size_in_bytes == 0
    want = w.astype(np.float64) - 0.125 * (a.T.astype(np.float64) @ d)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_small_gemm_blocks_on_the_stack():
    # a gradient row of 768 bytes: blocks of two rows (1,536 bytes) and then
    # four (3,072) fit the 4 KiB a block may take on the stack, eight do not
    # (the arena's peak would grow), so the block is four rows in the
    # driver's frame and the plan holds nothing but the arguments
    w, a, d = sgd_args(192)
    plain, ma, got = check_against_plain(sgd, (w, a, d), 0, {0: 0})
    c, plan = plan_of(sgd, (w, a, d), 0)
    (g,) = blocked(plan)
    assert g["shape"] == (256, 192) and g["block_rows"] == 4
    assert g["size"] == 0 and g["stack_bytes"] == aligned(4 * 192 * 4)
    assert ma.temp_size_in_bytes == 0 and ma.output_size_in_bytes == 0
    assert ma.peak_memory_in_bytes == w.nbytes + a.nbytes + d.nbytes
    unblocked = unblocked_sgd(w, a, d)
    assert sgd_within_gemm_rounding(got, unblocked, w, a, d)
    np.testing.assert_allclose(got, w - 0.125 * (a.T.astype(np.float64) @ d), rtol=1e-5, atol=1e-5)


def unblocked_sgd(w, a, d, blas=True):
    """sgd with donation in a process with block storage off."""
    out = os.path.join(tmpdir(), "unblocked.npy")
    code = """
        import numpy as np, cjit, test_block_storage as t
        w, a, d = (np.load(f) for f in %r)
        c, plan = t.plan_of(t.sgd, (w, a, d), 0)
        assert not t.blocked(plan)
        np.save(%r, cjit.jit(t.sgd, donate_argnums=0)(w.copy(), a, d))
    """ % (save((w, a, d)), out)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, CJIT_PASSES="-blocks", PYTHONPATH=HERE, **({} if blas else {"CJIT_BLAS": "0"})))
    assert r.returncode == 0 and r.stdout == "", r.stderr
    return np.load(out)


def test_gemm_blocks_equal_the_unblocked_plan():
    # with the BLAS, to the rounding of the gemm's reordered sums
    w, a, d = sgd_args()
    got = cjit.jit(sgd, donate_argnums=0)(w.copy(), a, d)
    assert sgd_within_gemm_rounding(got, unblocked_sgd(w, a, d), w, a, d)
    # with cjit's own matmul (a loop nest in blocks of rows), bit for bit
    with blas_off():
        c, plan = plan_of(sgd, (w, a, d), 0)
        assert blocked(plan)
        got = cjit.jit(sgd, donate_argnums=0)(w.copy(), a, d)
    assert got.tobytes() == unblocked_sgd(w, a, d, blas=False).tobytes()


def test_the_bound_catches_a_wrong_sum():
    # the comparison above can fail: one product dropped from one element
    w, a, d = sgd_args()
    got = cjit.jit(sgd, donate_argnums=0)(w.copy(), a, d)
    wrong = np.array(got)
    wrong[7, 9] += np.float32(0.125) * a[3, 7] * d[3, 9]
    assert sgd_within_gemm_rounding(got, got, w, a, d)
    assert not sgd_within_gemm_rounding(wrong, got, w, a, d)


def test_no_joined_groups_without_the_group_pass():
    w, a, d = sgd_args()
    run_with_passes("-group", """
        import sys, numpy as np, cjit, test_block_storage as t
        sys.path.insert(0, t.HERE + "/../examples")
        import train_mlp as T
        from test_donation_outputs import _digits_step_args
        params, state, x, y = _digits_step_args()
        for f, args in ((t.sgd, tuple(np.load(f) for f in %r)), (T.train_step._fun, (params, state, x, y))):
            c, plan = t.plan_of(f, args, (0, 1) if f is not t.sgd else 0)
            assert all(len(g) == 1 for g in plan["groups"]), plan["groups"]
            assert not t.blocked(plan)
    """ % (save((w, a, d)),))


def test_loop_nest_matmul_group_without_blas():
    # CJIT_BLAS=0: the matmul is a loop nest leading a group of row stages,
    # whose blocks are no larger than the runtime's chunks (4 a thread):
    # 256 rows on 2 threads, chunks and blocks of 32 rows
    w, a, d = sgd_args()
    out = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import os, numpy as np, cjit, test_block_storage as t
        from test_donation_outputs import measured_peak
        w, a, d = (np.load(f) for f in %r)
        os.environ["CJIT_PASSES"] = "-blocks"
        want = cjit.jit(t.sgd, donate_argnums=0)(w.copy(), a, d)
        del os.environ["CJIT_PASSES"]
        c, plan = t.plan_of(t.sgd, (w, a, d), 0)
        (g,) = t.blocked(plan)
        assert (g["block_rows"], g["size"]) == (32, 2 * 32 * 1024 * 4), g
        assert c.memory_analysis().temp_size_in_bytes == g["size"]
        f = cjit.jit(t.sgd, donate_argnums=0)
        f(w.copy(), a, d)
        peak, got = measured_peak(f, w.copy(), a, d)
        assert peak == c.memory_analysis().peak_memory_in_bytes
        assert got.tobytes() == want.tobytes()
        np.testing.assert_allclose(got, w - 0.125 * (a.T.astype(np.float64) @ d), rtol=1e-5, atol=1e-5)
        print("ok")
    """ % (save((w, a, d)),))], capture_output=True, text=True, timeout=300,
        env=dict(os.environ, CJIT_BLAS="0", CJIT_NUM_THREADS="2", PYTHONPATH=HERE))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


# ---- a group of row stages: softmax's row temporaries --------------------------

def softmax(x):
    e = cnp.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_row_temporaries_in_blocks():
    x = rng.standard_normal((4096, 256)).astype(np.float32)
    plain, ma, got = check_against_plain(softmax, (x,), 0, {0: 0})
    c, plan = plan_of(softmax, (x,), 0)
    bufs = blocked(plan)
    assert bufs, plan["buffers"]
    for b in bufs:
        # a (4096,) row maximum or sum: one block of the group's rows, small
        # enough for the driver's stack frame
        assert b["shape"] == (4096,) and b["block_rows"] < 4096
        assert b["size"] == 0 and b["stack_bytes"] == aligned(b["block_rows"] * 4)
    assert ma.temp_size_in_bytes == 0 < plain.temp_size_in_bytes
    want = np.exp(x - x.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_row_blocks_equal_ungrouped_run_bit_for_bit():
    x = rng.standard_normal((4096, 256)).astype(np.float32)
    got = cjit.jit(softmax, donate_argnums=0)(x.copy())
    for passes in ("-group", "-blocks", "-cse,-fuse,-group,-memplan"):
        run_with_passes(passes, """
            import numpy as np, cjit, test_block_storage as t
            x = np.load(%r)
            c, plan = t.plan_of(t.softmax, (x,), 0)
            assert not t.blocked(plan)
            np.save(%r, cjit.jit(t.softmax, donate_argnums=0)(x.copy()))
        """ % (save((x,))[0], os.path.join(tmpdir(), "ref.npy")))
        ref = np.load(os.path.join(tmpdir(), "ref.npy"))
        if passes == "-cse,-fuse,-group,-memplan":   # other kernels: rounding differs
            np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-9)
        else:                                        # the same kernels, whole arrays
            assert got.tobytes() == ref.tobytes(), passes


def test_measured_peak_equals_plan_for_repeated_calls():
    # the blocks are reused call after call; the measured peak is the plan's
    w, a, d = sgd_args()
    f = cjit.jit(sgd, donate_argnums=0)
    ma = f.lower(w, a, d).compile().memory_analysis()
    cur = w.copy()
    for _ in range(3):
        before = cur.copy()
        peak, cur = measured_peak(f, cur, a, d)
        assert peak == ma.peak_memory_in_bytes
        assert sgd_within_gemm_rounding(cur, cjit.jit(sgd)(before, a, d), before, a, d)


# ---- the disk cache: a plan made for fewer threads than the pool has ------------

def test_cached_plan_for_one_thread_runs_on_more(tmp_path):
    w, a, d = sgd_args()
    files = save((w, a, d))
    code = """
        import numpy as np, cjit, test_block_storage as t
        from test_donation_outputs import measured_peak
        w, a, d = (np.load(f) for f in %r)
        f = cjit.jit(t.sgd, donate_argnums=0)
        ma = f.lower(w, a, d).compile().memory_analysis()
        f(w.copy(), a, d)
        peak, out = measured_peak(f, w.copy(), a, d)
        assert peak == ma.peak_memory_in_bytes, (peak, ma)
        print(ma.temp_size_in_bytes, cjit._cjit.num_threads(),
              t.sgd_within_gemm_rounding(out, cjit.jit(t.sgd)(w, a, d), w, a, d))
    """ % (files,)
    env = dict(os.environ, CJIT_CACHE="1", CJIT_CACHE_DIR=str(tmp_path), PYTHONPATH=HERE)
    outs = []
    for threads in ("1", "2"):
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                           timeout=300, env=dict(env, CJIT_NUM_THREADS=threads))
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout.split())
    # the second process used the first one's plan: one block, on 2 threads
    assert outs[0] == [str(aligned(2 * 1024 * 4)), "1", "True"]
    assert outs[1] == [str(aligned(2 * 1024 * 4)), "2", "True"]


# ---- helpers ------------------------------------------------------------------

_TMP = []


def tmpdir():
    if not _TMP:
        import tempfile
        _TMP.append(tempfile.mkdtemp(prefix="cjit_blocks_"))
    return _TMP[0]


def save(arrays):
    names = []
    for i, x in enumerate(arrays):
        names.append(os.path.join(tmpdir(), "in%d.npy" % i))
        np.save(names[-1], x)
    return names
