"""Runs JAX's documentation pages and example programs on JAX and on cjit, and compares.

    .venv/bin/python scripts/port_check/run.py [--modes default,x64] [--pages a,b]
        [--examples a,b | --examples none] [--out build/port_check] [--reuse]
        [--table FILE] [--details FILE]

Needs JAX installed next to cjit (``pip install jax==0.10.2 jaxlib==0.10.2``):
not part of ``make test``; ``make port-check`` runs it.  For each page
(sources.PAGES, copied in pages/) its code cells run in order as one program,
in a subprocess, once with JAX and once with cjit through the import swap
(swap.py), in JAX's default mode and with x64 (``JAX_ENABLE_X64=1`` and
``CJIT_ENABLE_X64=1``).  The raw records (one JSON line per cell) go to
OUT/MODE/PAGE.BACKEND.jsonl; the comparison (compare.py) to a markdown table
(--table) and a list of every cell that differs (--details).  ``--reuse``
compares the records already in OUT without running anything again.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import cells as cells_mod  # noqa: E402
import compare  # noqa: E402
import report  # noqa: E402
import sources  # noqa: E402

MODES = {"default": {}, "x64": {"JAX_ENABLE_X64": "1", "CJIT_ENABLE_X64": "1"}}


def child_env(mode, out):
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_ENABLE_X64", "CJIT_ENABLE_X64", "CJIT_DISABLE_JIT", "JAX_DISABLE_JIT")}
    env.update(MODES[mode])
    env.update(JAX_PLATFORMS="cpu", PYTHONHASHSEED="0", TF_CPP_MIN_LOG_LEVEL="3",
               CJIT_CACHE_DIR=os.path.join(out, "cjit-cache"), PYTHONDONTWRITEBYTECODE="1")
    return env


def run_child(backend, mode, out, name, args, timeout, cell_timeout):
    """Runs child.py; returns (records by cell index, note about how it ended)."""
    path = os.path.join(out, mode, f"{name}.{backend}.jsonl")
    workdir = os.path.join(out, "work", mode, f"{name}.{backend}")
    os.makedirs(workdir, exist_ok=True)
    if os.path.exists(path):
        os.remove(path)
    cmd = [sys.executable, os.path.join(HERE, "child.py"), "--backend", backend,
           "--out", path, "--cell-timeout", str(cell_timeout)] + args
    start = time.monotonic()
    note = ""
    try:
        proc = subprocess.run(cmd, cwd=workdir, env=child_env(mode, out), timeout=timeout,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or [""])[-1]
            note = f"process exited with {proc.returncode}: {last[-200:]}"
    except subprocess.TimeoutExpired:
        note = f"page time-out after {timeout} s"
    with open(os.path.join(out, mode, f"{name}.{backend}.meta.json"), "w") as f:
        json.dump({"seconds": round(time.monotonic() - start, 1), "note": note}, f)
    return load(out, mode, name, backend)


def load(out, mode, name, backend):
    path = os.path.join(out, mode, f"{name}.{backend}.jsonl")
    recs = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                rec = json.loads(line)
                recs[rec["index"]] = rec
    meta_path = os.path.join(out, mode, f"{name}.{backend}.meta.json")
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {"note": "not run"}
    return recs, meta


def page_cells(name):
    with open(os.path.join(HERE, "pages", name + ".md")) as f:
        return cells_mod.extract_cells(f.read())


def check_page(name, mode, out, opts):
    cells = page_cells(name)
    cells_path = os.path.join(out, mode, f"{name}.cells.json")
    with open(cells_path, "w") as f:
        json.dump(cells, f)
    runs = {}
    for backend in ("jax", "cjit"):
        if opts.reuse:
            runs[backend] = load(out, mode, name, backend)
        else:
            runs[backend] = run_child(backend, mode, out, name, ["--cells", cells_path],
                                      opts.page_timeout, opts.cell_timeout)
    rtol = compare.RTOL[mode]
    results = []
    for cell in cells:
        res = compare.compare_cell(runs["jax"][0].get(cell["index"]),
                                   runs["cjit"][0].get(cell["index"]), rtol)
        res.update(index=cell["index"], line=cell["line"])
        results.append(res)
    return {"name": name, "kind": "page", "cells": cells, "results": results,
            "jax": runs["jax"], "cjit": runs["cjit"]}


def check_example(name, mode, out, opts):
    path, _rev, skip = sources.EXAMPLES[name]
    if skip:
        return {"name": name, "kind": "example", "skip": skip}
    program = os.path.join(HERE, "pages", "examples", name + ".py")
    args = ["--program", program, "--stubs", os.path.join(HERE, "stubs")]
    runs = {}
    for backend in ("jax", "cjit"):
        if opts.reuse:
            runs[backend] = load(out, mode, name, backend)
        else:
            runs[backend] = run_child(backend, mode, out, name, args,
                                      opts.example_timeout, opts.example_timeout)
    res = compare.compare_cell(runs["jax"][0].get(0), runs["cjit"][0].get(0), compare.RTOL[mode])
    res.update(index=0, line=1)
    return {"name": name, "kind": "example", "results": [res], "jax": runs["jax"],
            "cjit": runs["cjit"]}


def cjit_commit():
    """The commit of the cjit the children import (its checkout's HEAD; '+'
    when its python/ or csrc/ differ from it)."""
    import importlib.util
    spec = importlib.util.find_spec("cjit")
    where = os.path.dirname(spec.origin) if spec and spec.origin else ROOT

    def git(*args):
        return subprocess.run(["git", "-C", where] + list(args), capture_output=True, text=True,
                              check=True).stdout.strip()
    try:
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", ":/python", ":/csrc")
        return git("rev-parse", "--short", "HEAD") + ("+" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modes", default="default,x64")
    ap.add_argument("--pages", default="all", help="comma-separated names, 'all' or 'none'")
    ap.add_argument("--examples", default="all", help="comma-separated names, 'all' or 'none'")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "port_check"))
    ap.add_argument("--page-timeout", type=int, default=600)
    ap.add_argument("--cell-timeout", type=int, default=180)
    ap.add_argument("--example-timeout", type=int, default=300)
    ap.add_argument("--reuse", action="store_true", help="compare the records already in --out")
    ap.add_argument("--table", help="write the markdown table here (default OUT/table.md)")
    ap.add_argument("--details", help="write every differing cell here (default OUT/details.md)")
    ap.add_argument("--summary", help="write the counts as JSON here (default OUT/summary.json)")
    opts = ap.parse_args()
    opts.out = os.path.abspath(opts.out)

    def pick(arg, names):
        if arg == "all":
            return list(names)
        if arg == "none":
            return []
        chosen = arg.split(",")
        unknown = [n for n in chosen if n not in names]
        if unknown:
            ap.error(f"unknown name(s) {unknown}; known: {sorted(names)}")
        return chosen

    pages = pick(opts.pages, sources.PAGES)
    examples = pick(opts.examples, sources.EXAMPLES)
    modes = opts.modes.split(",")
    checked = {}
    for mode in modes:
        os.makedirs(os.path.join(opts.out, mode), exist_ok=True)
        checked[mode] = []
        for name in pages:
            checked[mode].append(check_page(name, mode, opts.out, opts))
            print(report.one_line(checked[mode][-1], mode), flush=True)
        for name in examples:
            checked[mode].append(check_example(name, mode, opts.out, opts))
            print(report.one_line(checked[mode][-1], mode), flush=True)
    from importlib.metadata import version   # JAX itself is only imported by the children
    header = {"date": datetime.date.today().isoformat(), "commit": cjit_commit(),
              "jax": version("jax"), "jax_commit": sources.JAX_COMMIT}
    table = opts.table or os.path.join(opts.out, "table.md")
    details = opts.details or os.path.join(opts.out, "details.md")
    summary = opts.summary or os.path.join(opts.out, "summary.json")
    for path in (table, details, summary):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(summary, "w") as f:
        json.dump(report.summary(checked, header), f, indent=1)
    with open(table, "w") as f:
        f.write(report.table(checked, header))
    with open(details, "w") as f:
        f.write(report.details(checked, header))
    print(f"wrote {table} and {details}")


if __name__ == "__main__":
    main()
