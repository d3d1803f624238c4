"""How executables are compiled (jit_cpu.c, codegen.c): modules compiled
side by side on threads, and loop hints, checked through CJIT_DUMP's IR and
against a one-thread compile."""
import glob
import os
import re
import subprocess
import sys
import textwrap

import numpy as np

SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import cjit, cjit.numpy as cnp

    def step(w1, w2, x, y):
        def loss(w1, w2):
            h = cnp.tanh(x @ w1)
            z = h @ w2
            e = cnp.exp(z - z.max(axis=1, keepdims=True))
            p = e / e.sum(axis=1, keepdims=True)
            return -(cnp.log(p) * y).sum() / x.shape[0] + 0.01 * (w1 * w1).sum()
        g1, g2 = cjit.grad(loss, argnums=(0, 1))(w1, w2)
        return w1 - 0.1 * g1, w2 - 0.1 * g2, cnp.exp(x).mean(), cnp.sin(x).sum(axis=0)

    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((64, 32), (32, 10), (128, 64), (128, 10))]
    out = cjit.jit(step)(*args)
    small = cjit.jit(lambda a: a + 1)(args[0])
    np.savez(sys.argv[1], *[np.asarray(o) for o in out], np.asarray(small))
""")


def compile_in_subprocess(tmp_path, threads, tag):
    dump = tmp_path / f"dump{tag}"
    out = tmp_path / f"out{tag}.npz"
    env = dict(os.environ, CJIT_NUM_THREADS=str(threads), CJIT_DUMP=str(dump))
    subprocess.run([sys.executable, "-c", SCRIPT, str(out)], check=True, env=env, timeout=300)
    return dump, np.load(out)


def kernel_definitions(path):
    with open(path) as fh:
        return re.findall(r"^define [^@]*@(cj\d+_[kg]\d+(?:_init)?)\(", fh.read(), re.M)


def modules(dump, executable):
    return sorted(os.path.basename(p) for p in glob.glob(str(dump / f"{executable}.*.raw.ll")))


def test_modules_compiled_side_by_side_match_one_module(tmp_path):
    dump1, one = compile_in_subprocess(tmp_path, 1, "1")
    dump2, two = compile_in_subprocess(tmp_path, 2, "2")
    # one thread: one module, whose vectorized kernels compile as one piece and
    # its small kernels (under 4096 points: the loss, the updates of w1 and
    # w2) as another with the short pass list (".s0"); x + 1 on 2048 numbers
    # is one small piece
    assert modules(dump1, "cj1") == ["cj1.0.raw.ll", "cj1.0.s0.raw.ll"]
    assert modules(dump1, "cj2") == ["cj2.0.s0.raw.ll"]
    # two threads: the kernels, small ones included, are split over two modules
    mods2 = modules(dump2, "cj1")
    assert {m.split(".")[1] for m in mods2} == {"0", "1"}, mods2
    assert any(".s" in m for m in mods2) and any(".s" not in m for m in mods2), mods2
    assert modules(dump2, "cj2") == ["cj2.0.s0.raw.ll"]
    # every function is defined exactly once, and the same set either way
    split = [kernel_definitions(dump2 / m) for m in mods2]
    assert all(split)
    every = sum(split, [])
    assert sorted(every) == sorted(set(every))
    assert sorted(every) == sorted(sum((kernel_definitions(dump1 / m) for m in modules(dump1, "cj1")), []))
    # small kernels stay scalar loops, the others are vectorized
    small = "".join(open(dump2 / m.replace(".raw.", ".opt.")).read() for m in mods2 if ".s" in m)
    big = "".join(open(dump2 / m.replace(".raw.", ".opt.")).read() for m in mods2 if ".s" not in m)
    assert "x float>" not in small and "x double>" not in small
    assert "x float>" in big
    # and the code computes the same: kernels are bitwise independent of how
    # they were compiled (the matmuls here are BLAS calls or loops alike)
    for name in one.files:
        np.testing.assert_allclose(two[name], one[name], rtol=1e-6, atol=1e-6, err_msg=name)


def test_long_math_loops_are_interleaved(tmp_path):
    dump, _ = compile_in_subprocess(tmp_path, 1, "i")
    step_ir = open(dump / "cj1.0.raw.ll").read()
    small_ir = open(dump / "cj2.0.s0.raw.ll").read()
    hint = '!{!"llvm.loop.interleave.count", i32 2}'
    assert hint in step_ir                 # tanh, exp, log, sin loops
    assert "llvm.loop" not in small_ir     # x + 1: the vectorizer decides


SCOPES = textwrap.dedent("""
    import sys
    import numpy as np
    import cjit, cjit.numpy as cnp
    x = np.ones((256, 100), np.float32); w = np.ones((100, 64), np.float32); b = np.ones(64, np.float32)
    cjit.jit(lambda a, c: a * c + 1)(x, x)          # cj1: three buffers, three storages
    cjit.jit(lambda x, w, b: cnp.tanh(x @ w + b))(x, w, b)   # cj2: the epilogue works in place
    print(cjit.jit(lambda x, w, b: cnp.tanh(x @ w + b)).lower(x, w, b).compile().as_text())
""")


def function_ir(path, name):
    text = open(path).read()
    start = text.index(f"@{name}(")
    return text[start:text.index("\n}\n", start)]


def test_kernels_tell_llvm_which_buffers_cannot_overlap(tmp_path):
    dump = tmp_path / "dump"
    env = dict(os.environ, CJIT_NUM_THREADS="1", CJIT_DUMP=str(dump))
    out = subprocess.run([sys.executable, "-c", SCOPES], check=True, env=env, timeout=300,
                         capture_output=True, text=True).stdout
    # a * c + 1: each of the three accesses has a scope of its own, so the
    # vectorized loop needs no run-time overlap checks
    ir = function_ir(dump / "cj1.0.raw.ll", "cj1_k0")
    assert len(set(re.findall(r"!alias\.scope (![0-9]+)", ir))) == 3
    assert "memcheck" not in open(dump / "cj1.0.opt.ll").read()
    # tanh(x @ w + b): the matmul's result lives in the output's bytes (the
    # plan says so), so those two share a scope and only the bias differs
    assert "in buf4's bytes at offset 0 (in place)" in out, out
    ir = function_ir(dump / "cj2.0.raw.ll", "cj2_k1")
    assert len(re.findall(r"!alias\.scope", ir)) == 3          # two loads and a store
    assert len(set(re.findall(r"!alias\.scope (![0-9]+)", ir))) == 2


def test_optimizer_never_aborts_on_a_clipped_pow():
    # Found by the fuzz tests: instcombine named in a pass list checks that
    # one run reaches a fixpoint and aborts the process when it does not;
    # this program's pow made it run twice.  Run apart, as an abort would
    # take the test process with it.
    code = textwrap.dedent("""
        import numpy as np, cjit, cjit.numpy as cnp
        a = np.arange(-3, 3, dtype=np.int32).reshape(1, 2, 3, 1)
        c = cnp.clip
        got = np.asarray(cjit.jit(lambda a: cnp.abs(c(a.astype(np.float64), -2.0, 2.5)
                                                 ** c(a.astype(np.float64), -2.0, 2.5)))(a))
        x = np.clip(a.astype(np.float64), -2.0, 2.5)
        np.testing.assert_allclose(got, np.abs(x ** x), rtol=1e-13)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


INPLACE = textwrap.dedent("""
    import sys
    import numpy as np
    import cjit, cjit.numpy as cnp
    def chain(x):
        for _ in range(100):
            x = cnp.sin(x) + 1     # cut into pieces of about 25 (fuse.c), each updating the last in place
        return x
    x = np.linspace(-3, 3, 100000).astype(np.float32)
    c = cjit.jit(chain).lower(x).compile()
    print(c.as_text())
    got = c(x)
    want = x.copy()
    for _ in range(100):
        want = np.sin(want) + np.float32(1)
    print("max error", float(np.max(np.abs(got - want))))
""")


def test_in_place_kernels_vectorize_without_overlap_checks(tmp_path):
    # Was: an in-place stage loaded x and stored y through two pointers to
    # the same bytes, so the vectorizer guarded its loop with a distance
    # check that always failed, and the scalar loop ran (7x slower).
    dump = tmp_path / "dump"
    env = dict(os.environ, CJIT_NUM_THREADS="1", CJIT_DUMP=str(dump))
    out = subprocess.run([sys.executable, "-c", INPLACE], check=True, env=env, timeout=300,
                         capture_output=True, text=True).stdout
    in_place = re.findall(r"buf(\d+) temp \S+ \d+ bytes in buf(\d+)'s bytes at offset 0 \(in place\)", out)
    assert in_place, out
    opt = open(dump / "cj1.0.opt.ll").read()
    stages = re.findall(r"^define [^@]*@(cj1_k\d+)\(", opt, re.M)
    assert len(stages) == len(re.findall(r"stage \d+: ", out)) >= 3
    for name in stages:
        ir = function_ir(dump / "cj1.0.opt.ll", name)
        assert "memcheck" not in ir and "diff.check" not in ir, name
        assert re.search(r"load <\d+ x float>", ir), name
    assert float(out.split()[-1]) < 1e-4


def test_kernels_with_many_elementary_functions_call_them(tmp_path):
    # A piece of 25 sin calls the vectorized library function instead of
    # inlining 13 copies (mathlib.c); a kernel with a few keeps them inline.
    dump = tmp_path / "dump"
    env = dict(os.environ, CJIT_NUM_THREADS="1", CJIT_DUMP=str(dump))
    subprocess.run([sys.executable, "-c", INPLACE], check=True, env=env, timeout=300, capture_output=True)
    opt = open(dump / "cj1.0.opt.ll").read()
    assert re.search(r"call <\d+ x float> @cj_m_sin_f32_v\d+\(", opt)
    library = open(dump / "cj_mathlib.raw.ll").read()
    assert re.search(r"^define [^@]*@cj_m_sin_f32\(", library, re.M)
    # the step of the first test has at most 4 per kernel: all inline
    step_dump, _ = compile_in_subprocess(tmp_path, 1, "m")
    assert "@cj_m_" not in open(step_dump / "cj1.0.opt.ll").read()


def test_lowered_text_is_the_graph_that_is_compiled(monkeypatch):
    import cjit
    # Lowered.as_text() shows cj_lower's graph: CJIT_PASSES=-cse keeps the
    # two identical products that CSE would merge
    f = cjit.jit(lambda x: x * 2.0 + x * 2.0)
    x = np.ones(4)
    merged = f.lower(x).as_text().count("= mul(")
    monkeypatch.setenv("CJIT_PASSES", "-cse")
    kept = cjit.jit(lambda x: x * 2.0 + x * 2.0).lower(x).as_text().count("= mul(")
    assert (merged, kept) == (1, 2)
