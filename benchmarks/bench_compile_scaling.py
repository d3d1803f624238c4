"""Compile time against program size: cjit vs JAX, first calls in fresh processes.

    python benchmarks/bench_compile_scaling.py [--repeat N]

Each row is a program whose graph grows with n: a chain `x = sin(x) + 1`
of n steps on 10^5 float32 (one long fused chain of transcendentals), a
chain `x = x * 0.999 + 0.001` (cheap ops), `sum` of a list of n small
arrays (n arguments folded into one chain), and `concatenate` of n small
arrays.  Every measurement is a new interpreter that imports the framework,
then times its first call (trace, compile, run), so nothing is cached; the
median of --repeat processes is reported.  Compile time should grow
linearly in n.  Writes benchmarks/results_compile_scaling.md.  JAX columns
say "absent" when JAX is not installed.
"""
import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

PROGRAMS = {
    "sin chain": ("""
def f(x):
    for _ in range(N):
        x = NP.sin(x) + 1
    return x
args = (np.linspace(0, 1, 100000).astype(np.float32),)
""", (250, 500, 1000, 2000)),
    "affine chain": ("""
def f(x):
    for _ in range(N):
        x = x * 0.999 + 0.001
    return x
args = (np.linspace(0, 1, 100000).astype(np.float32),)
""", (1000, 5000, 20000)),
    "sum of n arrays": ("""
def f(xs):
    return sum(xs)
args = ([np.full(3, float(i)) for i in range(N)],)
""", (1000, 3000, 5000)),
    "concatenate n arrays": ("""
def f(xs):
    return NP.concatenate(xs)
args = ([np.full(3, float(i)) for i in range(N)],)
""", (1000, 5000, 10000)),
}

RUNNER = """
import sys, time
import numpy as np
sys.path.insert(0, {python!r})
if {framework!r} == "cjit":
    import cjit as JIT, cjit.numpy as NP
else:
    import jax as JIT, jax.numpy as NP
N = {n}
{body}
t = time.perf_counter()
out = JIT.jit(f)(*args)
np.asarray(out)
print(time.perf_counter() - t)
"""


def have(module):
    return subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode == 0


def first_call_seconds(framework, body, n):
    code = RUNNER.format(python=os.path.join(HERE, "..", "python"), framework=framework, n=n, body=body)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        return None
    return float(proc.stdout.split()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    opts = ap.parse_args()
    frameworks = ["cjit"] + (["jax"] if have("jax") else [])
    rows = []
    for name, (body, sizes) in PROGRAMS.items():
        for n in sizes:
            row = {"program": name, "n": n}
            for fw in ("cjit", "jax"):
                if fw not in frameworks:
                    row[fw] = "absent"
                    continue
                times = [first_call_seconds(fw, body, n) for _ in range(opts.repeat)]
                times = [t for t in times if t is not None]
                row[fw] = f"{statistics.median(times):.2f} s" if times else "failed"
            print(f"{name:22s} n={n:6d}  cjit {row['cjit']:>8s}  jax {row['jax']:>8s}", flush=True)
            rows.append(row)
    lines = ["| program | n | cjit first call | JAX first call |", "|---|---:|---:|---:|"]
    lines += [f"| {r['program']} | {r['n']} | {r['cjit']} | {r['jax']} |" for r in rows]
    with open(os.path.join(HERE, "results_compile_scaling.md"), "w") as fh:
        fh.write("# First call (trace + compile + run) against program size\n\n")
        fh.write(f"Median of {opts.repeat} fresh processes each.\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
