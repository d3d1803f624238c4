"""The first call in a fresh process: with cjit's persistent compile cache
cold (empty), warm (filled by an earlier process) and off, and JAX with its
persistent compilation cache enabled (min compile time and entry size 0),
cold and warm.

Each measurement is a new interpreter that imports everything, builds the
arguments, and then times only the first call (trace, compile or cache
load, and one run; results are waited for).  Medians over --repeats
processes.  Workloads: the small model (the digits MLP's forward pass,
64-128-128-10), the digits train step (its loss, gradient and SGD update in
one jit), the benchmark suite's MLP train step (784-512-512-10) and an RNN's
train step (a 50-step lax.scan of a 64-unit tanh cell, its gradient through
the scan, and the update: control flow, whose bodies the entry also holds).

    .venv/bin/python benchmarks/bench_disk_cache.py [--repeats 5] [--no-jax] [--workloads a,b]
writes benchmarks/results_disk_cache.md."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(HERE, "..", "python")

# Runs in the child: defines `fn` and `args` for workload WORKLOAD with
# framework FW (cjit or jax), then times fn(*args) once.
CHILD = r"""
import os, sys, time, json
sys.path.insert(0, os.environ["BENCH_DIR"])
import numpy as np
import workloads as W
fw, workload = os.environ["FW"], os.environ["WORKLOAD"]
t_import = time.perf_counter()
if fw == "jax":
    import jax, jax.numpy as m, jax.nn
    from jax import lax
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_compilation_cache_dir", os.environ["JAX_CACHE"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    nn, jit, vg = jax.nn, jax.jit, jax.value_and_grad
    done = lambda r: jax.block_until_ready(r)
else:
    import cjit, cjit.numpy as m, cjit.nn as nn
    from cjit import lax
    jit, vg = cjit.jit, cjit.value_and_grad
    done = lambda r: r
import_ms = (time.perf_counter() - t_import) * 1e3

rng = np.random.default_rng(0)
def mlp_params(sizes):
    p = {}
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        p[f"w{i}"] = (rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32)
        p[f"b{i}"] = np.zeros(b, np.float32)
    return p

def digits_loss(p, x, y):
    h = x
    for i in range(2):
        h = nn.gelu(h @ p[f"w{i}"] + p[f"b{i}"])
    logits = h @ p["w2"] + p["b2"]
    return -m.mean(m.sum(y * nn.log_softmax(logits), axis=-1))

if workload == "small_model":
    p = mlp_params((64, 128, 128, 10))
    def forward(p, x):
        h = x
        for i in range(2):
            h = nn.gelu(h @ p[f"w{i}"] + p[f"b{i}"])
        return nn.softmax(h @ p["w2"] + p["b2"])
    fn, args = jit(forward), (p, rng.standard_normal((64, 64)).astype(np.float32))
elif workload == "digits_train_step":
    p = mlp_params((64, 128, 128, 10))
    def step(p, x, y):
        v, g = vg(digits_loss)(p, x, y)
        return v, {k: p[k] - 0.01 * g[k] for k in p}
    x = rng.standard_normal((64, 64)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]
    fn, args = jit(step), (p, x, y)
elif workload == "rnn_scan_train_step":
    T, B, I, H = 50, 16, 32, 64
    p = {"W": (rng.standard_normal((H, H)) / np.sqrt(H)).astype(np.float32),
         "U": (rng.standard_normal((I, H)) / np.sqrt(I)).astype(np.float32),
         "b": np.zeros(H, np.float32),
         "V": (rng.standard_normal((H, 10)) / np.sqrt(H)).astype(np.float32)}
    xs = rng.standard_normal((T, B, I)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, B)]
    def rnn_loss(p, xs, y):
        def cell(h, x):
            return m.tanh(h @ p["W"] + x @ p["U"] + p["b"]), None
        h, _ = lax.scan(cell, m.zeros((B, H), m.float32), xs)
        return -m.mean(m.sum(y * nn.log_softmax(h @ p["V"]), axis=-1))
    def step(p, xs, y):
        v, g = vg(rnn_loss)(p, xs, y)
        return v, {k: p[k] - 0.01 * g[k] for k in p}
    fn, args = jit(step), (p, xs, y)
else:
    p, x, y = W.mlp_data()
    fn, args = jit(W.mlp_train_step(m, nn, vg)), (p, x, y)

t0 = time.perf_counter()
done(fn(*args))
t1 = time.perf_counter()
out = {"ms": (t1 - t0) * 1e3, "import_ms": import_ms}
if fw == "cjit":
    out["info"] = cjit.cache_info()
print("RESULT " + json.dumps(out))
"""

WORKLOADS = ["small_model", "digits_train_step", "mlp_train_step", "rnn_scan_train_step"]


def first_call_ms(fw, workload, env):
    e = dict(os.environ, FW=fw, WORKLOAD=workload, BENCH_DIR=HERE,
             PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    e.pop("CJIT_LOG_COMPILES", None)
    e.update(env)
    r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=e,
                       timeout=600)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"{fw} {workload} failed:\n{r.stderr[-2000:]}")
    return json.loads(lines[0][len("RESULT "):])


def measure(fw, workload, repeats):
    """(cold ms, warm ms, off ms or None, import ms of the warm runs): medians.  Cold: a new empty
    cache directory each time; warm: the directory a cold run filled."""
    cold, warm, off, imp = [], [], [], []
    for _ in range(repeats):
        d = tempfile.mkdtemp(prefix="cjit-bench-cache-")
        try:
            if fw == "cjit":
                env = {"CJIT_CACHE": "1", "CJIT_CACHE_DIR": os.path.join(d, "c")}
                c = first_call_ms(fw, workload, env)
                w = first_call_ms(fw, workload, env)
                assert c["info"]["disk_misses"] == 1 and w["info"]["disk_hits"] == 1, (c, w)
                off.append(first_call_ms(fw, workload, {"CJIT_CACHE": "0"})["ms"])
            else:
                env = {"JAX_CACHE": os.path.join(d, "jax")}
                c = first_call_ms(fw, workload, env)
                w = first_call_ms(fw, workload, env)
            cold.append(c["ms"])
            warm.append(w["ms"])
            imp.append(w["import_ms"])
        finally:
            shutil.rmtree(d, ignore_errors=True)
    med = statistics.median
    return med(cold), med(warm), (med(off) if off else None), med(imp)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="comma-separated, of: " + ", ".join(WORKLOADS))
    ap.add_argument("--out", default=os.path.join(HERE, "results_disk_cache.md"))
    a = ap.parse_args()
    try:
        import jax  # noqa: F401
        have_jax = not a.no_jax
    except ImportError:
        have_jax = False
    # bytecode for cjit's modules, as a pip install leaves it (JAX's and NumPy's
    # come with theirs): with PYTHONDONTWRITEBYTECODE set, as on CI machines, an
    # editable checkout would otherwise compile every module it imports lazily
    # inside the first call
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(PYTHON_DIR, "cjit")], check=True)
    chosen = [w for w in a.workloads.split(",") if w]
    unknown = [w for w in chosen if w not in WORKLOADS]
    if unknown:
        ap.error(f"unknown workloads {unknown}; known: {WORKLOADS}")
    rows = []
    for wl in chosen:
        cc, cw, coff, ci = measure("cjit", wl, a.repeats)
        jc = jw = ji = None
        if have_jax:
            jc, jw, _, ji = measure("jax", wl, a.repeats)
        rows.append((wl, cc, cw, coff, jc, jw, ci, ji))
        print(f"{wl}: cjit cold {cc:.1f} ms, warm {cw:.1f} ms (x{cc / cw:.1f}), off {coff:.1f} ms"
              + (f"; jax cold {jc:.1f} ms, warm {jw:.1f} ms" if jc is not None else ""), flush=True)
    lines = [
        "# First call in a fresh process: persistent compile caches",
        "",
        f"`benchmarks/bench_disk_cache.py --repeats {a.repeats}`: medians of separate "
        "processes, each timing only its first call (trace, compile or cache load, one run). "
        "cjit cold: an empty cache directory (the time includes storing the entry); warm: "
        "the directory a cold process filled; off: `CJIT_CACHE=0`. JAX: "
        "`jax_compilation_cache_dir` set, min compile time and entry size 0. Both "
        "packages' modules have their bytecode compiled beforehand, as pip leaves them. "
        "Import: the warm processes' `import` of the framework (cjit loads its disk cache's "
        "sqlite3 and hashlib there, as JAX loads its cache's modules), not in the first call.",
        "",
        "| workload | cjit cold (ms) | cjit warm (ms) | warm/cold | cjit off (ms) | "
        "JAX cold (ms) | JAX warm (ms) | cjit warm / JAX warm | import cjit (ms) | import JAX (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for wl, cc, cw, coff, jc, jw, ci, ji in rows:
        j = (f"{jc:.1f} | {jw:.1f} | {cw / jw:.3f}" if jc is not None else "- | - | -")
        jimp = f"{ji:.0f}" if ji is not None else "-"
        lines.append(f"| {wl} | {cc:.1f} | {cw:.1f} | {cw / cc:.3f} | {coff:.1f} | {j} | {ci:.0f} | {jimp} |")
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", a.out)


if __name__ == "__main__":
    main()
