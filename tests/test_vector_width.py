"""The vector width compiled loops ask LLVM for (codegen.c's
decide_vector_width): 512 bits on processors with AVX-512F, nothing
elsewhere, CJIT_LLVM_VECTOR_WIDTH to choose.  The choice is made once per
process, so each case runs in a subprocess of its own, and is read from
the kernel functions' attributes in the IR that CJIT_DUMP writes."""
import glob
import os
import re
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent("""
    import numpy as np
    import cjit, cjit.numpy as cnp
    try:
        out = cjit.jit(lambda x: cnp.exp(x) * 2.0)(np.ones(1000, np.float32))
        print("ran", float(out[0]))
    except ValueError as e:
        print("ValueError:", e)
""")


def _run(tmp_path, width):
    env = dict(os.environ, CJIT_CACHE="0", CJIT_DUMP=str(tmp_path))
    env.pop("CJIT_LLVM_VECTOR_WIDTH", None)
    if width is not None:
        env["CJIT_LLVM_VECTOR_WIDTH"] = width
    r = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    ir = "".join(open(p).read() for p in glob.glob(os.path.join(tmp_path, "*.raw.ll")))
    return r.stdout, set(re.findall(r'"prefer-vector-width"="(\d+)"', ir))


def _host_has_avx512f():
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return None
    return re.search(r"^flags\s*:.*\bavx512f\b", flags, re.M) is not None


def test_default_is_512_exactly_where_avx512f_is(tmp_path):
    out, widths = _run(tmp_path, None)
    assert out.startswith("ran 5.43"), out
    has = _host_has_avx512f()
    if has is not None:   # /proc/cpuinfo is Linux's; LLVM reads the same CPUID bits
        assert widths == ({"512"} if has else set())


def test_the_variable_chooses_and_empty_leaves_it_to_llvm(tmp_path):
    for width in ("128", "256", "512"):
        d = tmp_path / width
        d.mkdir()
        out, widths = _run(d, width)
        assert out.startswith("ran 5.43") and widths == {width}, (width, out, widths)
    d = tmp_path / "empty"
    d.mkdir()
    out, widths = _run(d, "")
    assert out.startswith("ran 5.43") and widths == set()


def test_a_bad_width_is_a_clear_error(tmp_path):
    out, _ = _run(tmp_path, "300")
    assert "ValueError: CJIT_LLVM_VECTOR_WIDTH=300" in out and "128, 256 or 512" in out
