"""The persistent compile cache (python/cjit/_disk_cache.py): a second
process runs without compiling, every part of the key invalidates, damage
and hostile directories are survived, processes share it safely, and it
stays under its size limit.

Every test runs cjit in subprocesses with CJIT_CACHE=1 and a cache
directory of its own (conftest.py turns the cache off for the rest of the
suite)."""
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(os.path.dirname(HERE), "python")

# A train step: a 64-128-128-10 GELU MLP's loss, its gradient and an SGD
# update, one jitted function.  Prints its results' bytes (hex), the
# compile split and the cache counters as JSON.
TRAIN = r"""
import json, os, sys
import numpy as np
import cjit, cjit.numpy as cnp
from cjit import _cjit

rng = np.random.default_rng(0)
sizes = (64, 128, 128, 10)
p = {}
for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
    p[f"w{i}"] = (rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32)
    p[f"b{i}"] = np.zeros(b, np.float32)
x = rng.standard_normal((32, 64)).astype(np.float32)
y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 32)]

def loss(p, x, y):
    h = x
    for i in range(2):
        h = cjit.nn.gelu(h @ p[f"w{i}"] + p[f"b{i}"])
    logits = h @ p["w2"] + p["b2"]
    return -cnp.mean(cnp.sum(y * cjit.nn.log_softmax(logits), axis=-1))

@cjit.jit
def step(p, x, y):
    v, g = cjit.value_and_grad(loss)(p, x, y)
    return v, {k: p[k] - 0.01 * g[k] for k in p}

s0 = _cjit.runtime_stats()
for _ in range(3):
    v, p = step(p, x, y)
s1 = _cjit.runtime_stats()
out = {"stats": {k: s1[k] - s0[k] for k in s1 if k.startswith("compile") or k == "loads"},
       "info": cjit.cache_info(),
       "bytes": np.asarray(v).tobytes().hex() + "".join(p[k].tobytes().hex() for k in sorted(p)),
       "memory": step.lower(p, x, y).compile().memory_analysis().peak_memory_in_bytes}
print("RESULT " + json.dumps(out))
"""

# Small functions with one cache entry each, for the tests of damage,
# sharing and eviction.  Prints what train-free runs need.
SMALL = r"""
import json, os, sys
import numpy as np
import cjit, cjit.numpy as cnp
x = np.linspace(-2, 2, 3000, dtype=np.float32)
res = []
for k in range(int(os.environ.get("NFUN", "1"))):
    f = cjit.jit(lambda a, k=k: cnp.tanh(a * (k + 1)) + k)
    res.append(np.asarray(f(x)).tobytes().hex())
print("RESULT " + json.dumps({"res": res, "info": cjit.cache_info()}))
"""


def run(code, cache_dir, env=None, preexec_fn=None, timeout=240):
    e = dict(os.environ)
    for k in ("CJIT_LOG_COMPILES", "CJIT_PASSES", "CJIT_LLVM_PASSES", "CJIT_LLVM_ARGS",
              "CJIT_CACHE_MAX_BYTES", "CJIT_NUM_THREADS", "CJIT_BLAS"):
        e.pop(k, None)
    e.update({"CJIT_CACHE": "1", "CJIT_CACHE_DIR": str(cache_dir),
              "PYTHONPATH": PYTHON_DIR + os.pathsep + e.get("PYTHONPATH", "")})
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=e, timeout=timeout, preexec_fn=preexec_fn)


def result(r):
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert len(lines) == 1, r.stdout + r.stderr
    return json.loads(lines[0][len("RESULT "):])


def db_rows(cache_dir):
    conn = sqlite3.connect(os.path.join(str(cache_dir), "cache.db"))
    try:
        return conn.execute("SELECT key, nbytes, length(blob) FROM entries ORDER BY used").fetchall()
    finally:
        conn.close()


def small_reference(nfun=1):
    x = np.linspace(-2, 2, 3000, dtype=np.float32)
    return [np.tanh(x * np.float32(k + 1)) + np.float32(k) for k in range(nfun)]


def check_small(out, nfun=1):
    got = [np.frombuffer(bytes.fromhex(h), np.float32) for h in out["res"]]
    for g, w in zip(got, small_reference(nfun)):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    assert len(got) == nfun


# -- a second process runs without compiling -------------------------------------

def test_second_process_runs_the_train_step_without_compiling(tmp_path):
    cold = result(run(TRAIN, tmp_path / "c"))
    warm = result(run(TRAIN, tmp_path / "c"))
    assert cold["stats"]["compile_ns_emit"] > 0 and cold["info"]["disk_misses"] == 1
    # no LLVM compile in the second process: nothing lowered, generated, optimized or emitted
    for phase in ("simplify", "fuse", "group", "memplan", "codegen", "optimize", "emit"):
        assert warm["stats"][f"compile_ns_{phase}"] == 0, (phase, warm["stats"])
    assert warm["stats"]["loads"] == 1 and warm["stats"]["compiles"] == 0
    assert warm["info"]["disk_hits"] == 1 and warm["info"]["disk_misses"] == 0
    assert warm["bytes"] == cold["bytes"]            # bit for bit, three steps
    assert warm["memory"] == cold["memory"]          # the memory analysis came with the entry
    assert warm["info"]["disk_entries"] == 1


def test_log_compiles_says_served_from_disk(tmp_path):
    result(run(SMALL, tmp_path / "c"))
    r = run(SMALL, tmp_path / "c", {"CJIT_LOG_COMPILES": "1"})
    check_small(result(r))
    assert "served from the disk cache" in r.stderr, r.stderr


def test_on_by_default_in_xdg_cache_home(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    code = "import os; os.environ.pop('CJIT_CACHE'); os.environ.pop('CJIT_CACHE_DIR')\n" + SMALL
    out = result(run(code, tmp_path / "unused", env))
    check_small(out)
    assert out["info"]["disk_entries"] == 1
    d = tmp_path / "xdg" / "cjit"
    assert (d / "cache.db").is_file() and (os.stat(d).st_mode & 0o777) == 0o700
    assert not (tmp_path / "unused").exists()


def test_off_with_cjit_cache_0(tmp_path):
    out = result(run(SMALL, tmp_path / "c", {"CJIT_CACHE": "0"}))
    check_small(out)
    assert out["info"]["disk_misses"] == 0 and out["info"]["disk_entries"] == 0
    assert not (tmp_path / "c").exists()


def test_clear_caches_disk_and_cache_info(tmp_path):
    code = SMALL + textwrap.dedent("""
        before = cjit.cache_info()
        cjit.clear_caches(disk=True)
        after = cjit.cache_info()
        print("CLEAR", before["disk_entries"], before["disk_bytes"] > 0, after["disk_entries"],
              after["disk_bytes"])
    """)
    r = run(code, tmp_path / "c", {"NFUN": "3"})
    assert "CLEAR 3 True 0 0" in r.stdout, r.stdout + r.stderr


# -- every part of the key ---------------------------------------------------------

IN_PROCESS_KEYS = r"""
import json, numpy as np, cjit, cjit.numpy as cnp
from cjit import _disk_cache

def misses(f, *args):
    before = cjit.cache_info()["disk_misses"]
    np.asarray((f if isinstance(f, cjit.Jitted) else cjit.jit(f))(*args))
    return cjit.cache_info()["disk_misses"] - before

c1 = 0.1
c2 = float(np.nextafter(0.1, 1.0))          # one ulp away: constants are hashed bit for bit
def scale1(x): return x * c1
def scale2(x): return x * c2
x3 = np.ones(3, np.float32)
out = {}
out["first"] = misses(scale1, x3)
out["same"] = misses(scale1, x3)                          # a new Jitted, the same graph: a hit
out["constant"] = misses(scale2, x3)
out["shape"] = misses(scale1, np.ones(4, np.float32))
out["dtype"] = misses(scale1, np.ones(3, np.float64))
out["weak"] = misses(scale1, 1.0) + misses(scale1, 1.0) # a Python float: weak; then a hit
out["donation"] = misses(cjit.jit(scale1, donate_argnums=0), np.ones(3, np.float32))
out["donation_again"] = misses(cjit.jit(scale1, donate_argnums=0), np.ones(3, np.float32))
def two(x): return x * c1 + 1
out["graph"] = misses(two, x3)

real_build_id, real_target = _disk_cache._build_id, cjit._cjit._jit_target
_disk_cache._static_key.clear()
_disk_cache._build_id = lambda conn: b"another build of cjit".ljust(32)
out["build_id"] = misses(scale1, x3)
_disk_cache._build_id = real_build_id
_disk_cache._static_key.clear()
cjit._cjit._jit_target = lambda: real_target().replace("llvm ", "llvm 0")
out["llvm_target_cpu"] = misses(scale1, x3)
cjit._cjit._jit_target = real_target
_disk_cache._static_key.clear()
out["back"] = misses(scale1, x3)

# the build id is the hash of the extension's bytes, the target names LLVM and the CPU
conn = _disk_cache._conn()
out["build_id_ok"] = _disk_cache._build_id(conn).hex() == __import__("hashlib").sha256(
    open(cjit._cjit.__file__, "rb").read()).hexdigest()
out["target"] = real_target()
print("RESULT " + json.dumps(out))
"""


def test_key_graph_constants_signature_donation_build_and_target(tmp_path):
    out = result(run(IN_PROCESS_KEYS, tmp_path / "c"))
    assert out["first"] == 1 and out["same"] == 0 and out["back"] == 0
    for part in ("constant", "shape", "dtype", "donation", "graph", "build_id", "llvm_target_cpu"):
        assert out[part] == 1, (part, out)
    assert out["weak"] == 1 and out["donation_again"] == 0
    assert out["build_id_ok"] is True
    assert out["target"].startswith("llvm 19.") and out["target"].count(";") == 3, out["target"]


ENV_PROG = r"""
import json, numpy as np, cjit, cjit.numpy as cnp
a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 4096
f = cjit.jit(lambda a: cnp.tanh(a @ a) + 1)
r = np.asarray(f(a))
want = np.tanh(a.astype(np.float64) @ a.astype(np.float64)) + 1
assert np.allclose(r, want, rtol=1e-4, atol=1e-5)
print("RESULT " + json.dumps(cjit.cache_info()))
"""


@pytest.mark.parametrize("name,value,part_of_key", [
    ("CJIT_PASSES", "-fuse", True),
    ("CJIT_LLVM_PASSES", "function(sroa,instcombine<no-verify-fixpoint>)", True),
    ("CJIT_LLVM_ARGS", "-unroll-threshold=77", True),
    ("CJIT_BLAS", "none", True),           # matmuls become loops: gemm marking depends on the BLAS
    ("CJIT_NUM_THREADS", "1", False),      # changes how modules are split, not the code or the plan
])
def test_key_environment(tmp_path, name, value, part_of_key):
    base = result(run(ENV_PROG, tmp_path / "c"))
    assert base["disk_misses"] == 1
    changed = result(run(ENV_PROG, tmp_path / "c", {name: value}))
    if part_of_key:
        assert changed["disk_misses"] == 1 and changed["disk_hits"] == 0, changed
        assert changed["disk_entries"] == 2
    else:
        assert changed["disk_hits"] == 1 and changed["disk_misses"] == 0, changed
    again = result(run(ENV_PROG, tmp_path / "c"))
    assert again["disk_hits"] == 1 and again["disk_misses"] == 0


# -- damage ------------------------------------------------------------------------

def _rewrite_blob(cache_dir, change):
    conn = sqlite3.connect(os.path.join(str(cache_dir), "cache.db"))
    (key, blob, digest), = conn.execute("SELECT key, blob, sha256 FROM entries").fetchall()
    blob, digest = change(bytes(blob), digest)
    conn.execute("UPDATE entries SET blob = ?, sha256 = ? WHERE key = ?", (blob, digest, key))
    conn.commit()
    conn.close()


def _flip_middle(blob, digest):
    b = bytearray(blob)
    b[len(b) // 2] ^= 0x5A
    return bytes(b), digest


def _truncate(blob, digest):
    return blob[: len(blob) // 3], digest


def _garbage_with_good_checksum(blob, digest):
    junk = b"cjitexe\0" + bytes(range(256)) * 4     # the magic, then nonsense
    return junk, hashlib.sha256(junk).hexdigest()


@pytest.mark.parametrize("change", [_flip_middle, _truncate, _garbage_with_good_checksum])
def test_damaged_entry_is_deleted_and_compiled_again(tmp_path, change):
    result(run(SMALL, tmp_path / "c"))
    _rewrite_blob(tmp_path / "c", change)
    r = run(SMALL, tmp_path / "c")
    out = result(r)
    check_small(out)
    assert out["info"]["disk_misses"] == 1 and out["info"]["disk_hits"] == 0
    assert r.stderr.count("unusable") == 1, r.stderr
    healed = result(run(SMALL, tmp_path / "c"))       # the new entry is good
    assert healed["info"]["disk_hits"] == 1
    assert len(db_rows(tmp_path / "c")) == 1


def test_damaged_database_file_is_emptied(tmp_path):
    result(run(SMALL, tmp_path / "c"))
    with open(tmp_path / "c" / "cache.db", "r+b") as f:
        f.write(b"this is no longer an sqlite database" * 200)
    r = run(SMALL, tmp_path / "c")
    check_small(result(r))
    assert "emptied" in r.stderr, r.stderr
    assert result(run(SMALL, tmp_path / "c"))["info"]["disk_hits"] == 1


def test_every_truncation_and_flip_of_an_entry_is_refused_or_harmless(tmp_path):
    # Lowered.load_cached on every prefix of a real entry, and on single
    # byte changes before its object code: never a crash.
    code = r"""
    import numpy as np, cjit, cjit.numpy as cnp
    f = cjit.jit(lambda a, b: (cnp.exp(a) @ b).sum(axis=0))
    a = np.ones((8, 8), np.float32)
    lw = f.lower(a, a)._lowered
    exe, blob = lw.compile(for_cache=True)
    refused = 0
    for n in range(len(blob)):
        try:
            lw.load_cached(blob[:n])
        except ValueError:
            refused += 1
    loaded = 0
    for i in range(0, len(blob) // 2, 7):
        b = bytearray(blob)
        b[i] ^= 0xFF
        try:
            lw.load_cached(bytes(b))
            loaded += 1
        except (ValueError, RuntimeError):
            pass
    same = np.asarray(lw.load_cached(blob)([a, a])).tobytes() == np.asarray(exe([a, a])).tobytes()
    print("RESULT", refused == len(blob), same)
    """
    r = run(code, tmp_path / "c")
    assert r.returncode == 0, r.stderr
    assert "RESULT True True" in r.stdout, r.stdout + r.stderr


# -- directories that are not safe or not writable ------------------------------------------------

def test_loose_permissions_turn_the_disk_cache_off(tmp_path):
    d = tmp_path / "c"
    d.mkdir()
    os.chmod(d, 0o775)
    r = run(SMALL.replace("range(int(", "range(2 * int("), d)   # two compiles: one warning
    out = result(r)
    assert r.stderr.count("mode 775") == 1, r.stderr
    assert out["info"]["disk_misses"] == 0 and not (d / "cache.db").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_foreign_owner_turns_the_disk_cache_off(tmp_path):
    d = tmp_path / "c"
    d.mkdir(mode=0o700)
    os.chown(d, 54321, 54321)
    r = run(SMALL, d)
    out = result(r)
    check_small(out)
    assert r.stderr.count("belongs to another user") == 1, r.stderr
    assert not (d / "cache.db").exists()


def _make_read_only(d, on):
    """Root writes into directories of mode 500 all the same: for root the
    directory and the database are made immutable (chattr +i) instead."""
    paths = [d, os.path.join(d, "cache.db")]
    if os.geteuid() == 0:
        for p in (paths if on else reversed(paths)):
            subprocess.run(["chattr", "+i" if on else "-i", p], check=True)
    else:
        os.chmod(paths[1], 0o400 if on else 0o600)
        os.chmod(d, 0o500 if on else 0o700)


def test_read_only_directory_runs_without_storing(tmp_path):
    d = str(tmp_path / "c")
    first = result(run(SMALL, d))
    assert first["info"]["disk_entries"] == 1
    for suffix in ("-wal", "-shm"):
        assert not os.path.exists(os.path.join(d, "cache.db" + suffix))
    _make_read_only(d, True)
    try:
        r = run(SMALL.replace("range(int(", "range(1 + int("), d, {"PYTHONDONTWRITEBYTECODE": "1"})
        check_small(result(r), 2)
    finally:
        _make_read_only(d, False)
    assert len(db_rows(d)) == 1      # nothing could be stored
    assert r.stderr.count("unavailable") <= 1, r.stderr


def test_full_disk_runs_without_storing(tmp_path):
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))
    r = run(SMALL.replace("range(int(", "range(2 + int("), tmp_path / "c",
            {"PYTHONDONTWRITEBYTECODE": "1"}, preexec_fn=limit)
    out = result(r)
    check_small(out, 3)
    assert out["info"]["disk_entries"] == 0
    assert r.stderr.count("unavailable") <= 1, r.stderr


# -- many processes at once ----------------------------------------------------------------

def test_eight_processes_at_once_agree_and_leave_one_entry_per_key(tmp_path):
    d = tmp_path / "c"
    e = dict(os.environ, CJIT_CACHE="1", CJIT_CACHE_DIR=str(d), NFUN="3",
             PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = [subprocess.Popen([sys.executable, "-c", SMALL], env=e, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(8)]
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        outs.append(result(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)))
    for out in outs:
        check_small(out, 3)
        assert out["res"] == outs[0]["res"]
    rows = db_rows(d)
    assert len(rows) == 3 and len({k for k, _, _ in rows}) == 3
    assert all(nbytes == length for _, nbytes, length in rows)


# -- the size limit --------------------------------------------------------------------------

EVICT = r"""
import json, os, numpy as np, cjit, cjit.numpy as cnp
from cjit import _disk_cache
x = np.linspace(-2, 2, 3000, dtype=np.float32)
def make(k):
    return cjit.jit(lambda a: cnp.tanh(a * (k + 1)) + k)
make(0)(x)
size = cjit.cache_info()["disk_bytes"]
cjit.clear_caches(disk=True)
os.environ["CJIT_CACHE_MAX_BYTES"] = str(int(2.5 * size))
make(1)(x); make(2)(x)
hit = make(1)                  # a new Jitted: served from disk, which makes 1 recently used
hit(x)
totals = []
for k in range(3, 9):
    make(k)(x)
    totals.append(cjit.cache_info()["disk_bytes"])
keys_left = cjit.cache_info()["disk_entries"]
hits_before = cjit.cache_info()["disk_hits"]
make(8)(x)                      # the newest survived
print("RESULT " + json.dumps({"size": size, "limit": int(2.5 * size), "totals": totals,
                              "entries": keys_left,
                              "newest_hit": cjit.cache_info()["disk_hits"] - hits_before}))
"""


def test_eviction_holds_the_size_limit(tmp_path):
    out = result(run(EVICT, tmp_path / "c"))
    assert all(t <= out["limit"] for t in out["totals"]), out
    assert out["entries"] == 2 and out["newest_hit"] == 1
    assert sum(n for _, n, _ in db_rows(tmp_path / "c")) <= out["limit"]


LRU = r"""
import json, os, numpy as np, cjit, cjit.numpy as cnp
from cjit import _disk_cache
_disk_cache._TOUCH_NS = 0      # note every use (by default uses within a minute are not written)
x = np.linspace(-2, 2, 3000, dtype=np.float32)
def make(k):
    return cjit.jit(lambda a: cnp.tanh(a * (k + 1)) + k)
make(0)(x)
size = cjit.cache_info()["disk_bytes"]
cjit.clear_caches(disk=True)
os.environ["CJIT_CACHE_MAX_BYTES"] = str(int(2.5 * size))
make(1)(x); make(2)(x)
make(1)(x)                  # used again: now 2 is the least recently used
make(3)(x)                  # evicts 2
h = cjit.cache_info()["disk_hits"]
make(1)(x)
kept_1 = cjit.cache_info()["disk_hits"] - h
h = cjit.cache_info()["disk_hits"]
make(2)(x)
kept_2 = cjit.cache_info()["disk_hits"] - h
print("RESULT " + json.dumps([kept_1, kept_2]))
"""


def test_eviction_is_least_recently_used(tmp_path):
    assert result(run(LRU, tmp_path / "c")) == [1, 0]


def test_a_hit_marks_the_entry_used_by_the_end_of_the_process(tmp_path):
    result(run(SMALL, tmp_path / "c"))
    conn = sqlite3.connect(os.path.join(str(tmp_path / "c"), "cache.db"))
    conn.execute("UPDATE entries SET used = 1")
    conn.commit()
    conn.close()
    assert result(run(SMALL, tmp_path / "c"))["info"]["disk_hits"] == 1
    conn = sqlite3.connect(os.path.join(str(tmp_path / "c"), "cache.db"))
    (used,), = conn.execute("SELECT used FROM entries").fetchall()
    conn.close()
    assert used > 1


def test_an_expression_reading_one_value_twice_loads_from_disk(tmp_path):
    # x * x names one expression twice in a kernel; the entry's reader took
    # that for a reference past the expressions read so far, threw the entry
    # away and compiled again in every process (the digits demo's Adam step)
    code = """
        import json, warnings, numpy as np, cjit, cjit.numpy as cnp
        warnings.simplefilter("error")
        x = np.linspace(-1, 1, 1000)
        f = cjit.jit(lambda x: x * x + cnp.exp(x) * cnp.exp(x))
        r = f(x)
        print("RESULT " + json.dumps({"info": cjit.cache_info(), "r": r.tobytes().hex()}))
    """
    cold = result(run(code, tmp_path / "c"))
    warm = result(run(code, tmp_path / "c"))
    assert cold["info"]["disk_misses"] == 1
    assert warm["info"]["disk_hits"] == 1 and warm["info"]["disk_misses"] == 0
    assert warm["r"] == cold["r"]


# A process whose first executable came from the disk cache has made no
# target machine (jit_cpu.c makes them on the first compile): compiling
# something new afterwards, with mathlib functions, still works.
LOAD_THEN_COMPILE = r"""
import json
import numpy as np
import cjit, cjit.numpy as cnp
from cjit import _cjit
x = np.linspace(-2, 2, 3000, dtype=np.float32)
f = cjit.jit(lambda a: cnp.tanh(a * 1) + 0)
rf = np.asarray(f(x))
s0 = _cjit.runtime_stats()
g = cjit.jit(lambda a: cnp.sin(a) * cnp.exp(-a) + cnp.log1p(a * a))
rg = np.asarray(g(x))
s1 = _cjit.runtime_stats()
print("RESULT " + json.dumps({"f": rf.tobytes().hex(), "g": rg.tolist(), "info": cjit.cache_info(),
                              "emit_ns": s1["compile_ns_emit"] - s0["compile_ns_emit"]}))
"""


def test_compile_after_a_disk_load(tmp_path):
    cache = tmp_path / "c"
    first = result(run(SMALL, cache))
    assert first["info"]["disk_misses"] == 1
    r = result(run(LOAD_THEN_COMPILE, cache))
    assert r["info"]["disk_hits"] == 1 and r["info"]["disk_misses"] == 1
    assert r["f"] == first["res"][0]
    assert r["emit_ns"] > 0
    x = np.linspace(-2, 2, 3000, dtype=np.float32).astype(np.float64)
    np.testing.assert_allclose(r["g"], np.sin(x) * np.exp(-x) + np.log1p(x * x), rtol=2e-5, atol=2e-6)


# -- entries whose columns have another SQLite type than cjit writes ----------------------

# Each column set to each SQLite type it must not have (the blob as TEXT,
# INTEGER or REAL; the checksum as BLOB or INTEGER; nbytes and used as TEXT,
# REAL or BLOB), one after the other in one process: a fresh jitted function
# of the same graph looks the entry up, must delete it (counted), compile,
# store a good one, and the next fresh function must load that one.
WRONG_TYPES = r"""
import json, os, sqlite3, sys, warnings
import numpy as np
import cjit, cjit.numpy as cnp
warnings.simplefilter("ignore")
x = np.linspace(-2, 2, 3000, dtype=np.float32)
db = os.path.join(os.environ["CJIT_CACHE_DIR"], "cache.db")
def call():
    return np.asarray(cjit.jit(lambda a: cnp.tanh(a) + 1)(x)).tobytes().hex()
want = call()
cases = [("blob", "'some text'"), ("blob", "12345"), ("blob", "2.5"), ("blob", "'ab'"),
         ("sha256", "X'00ff'"), ("sha256", "7"), ("nbytes", "'many'"), ("nbytes", "1.0"),
         ("nbytes", "X'01'"), ("used", "'today'"), ("used", "3.5"), ("used", "X'02'")]
out = []
for col, value in cases:
    conn = sqlite3.connect(db)
    conn.execute(f"UPDATE entries SET {col} = {value}")
    conn.commit()
    conn.close()
    before = cjit.cache_info()
    same = call() == want
    mid = cjit.cache_info()
    again = call() == want
    after = cjit.cache_info()
    out.append([col, value, same and again, mid["disk_deleted"] - before["disk_deleted"],
                mid["disk_misses"] - before["disk_misses"], after["disk_hits"] - mid["disk_hits"]])
print("RESULT " + json.dumps(out))
"""


def test_an_entry_with_a_column_of_the_wrong_type_is_deleted_and_counted(tmp_path):
    out = result(run(WRONG_TYPES, tmp_path / "c"))
    assert len(out) == 12
    for col, value, same, deleted, missed, hit in out:
        assert (same, deleted, missed, hit) == (True, 1, 1, 1), (col, value, deleted, missed, hit)
    assert len(db_rows(tmp_path / "c")) == 1


def test_a_text_blob_warns_once_and_the_next_process_loads_the_new_entry(tmp_path):
    result(run(SMALL, tmp_path / "c"))
    conn = sqlite3.connect(os.path.join(str(tmp_path / "c"), "cache.db"))
    conn.execute("UPDATE entries SET blob = 'not bytes'")
    conn.commit()
    conn.close()
    r = run(SMALL, tmp_path / "c")
    out = result(r)
    check_small(out)
    assert out["info"]["disk_deleted"] == 1 and r.stderr.count("unusable") == 1, r.stderr
    healed = run(SMALL, tmp_path / "c")
    assert result(healed)["info"]["disk_hits"] == 1 and "unusable" not in healed.stderr
