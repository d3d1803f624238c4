"""Runs one page's cells (or one example program) in this process, as a notebook would.

    python child.py --backend {jax,cjit} --cells CELLS.json --out OUT.jsonl
    python child.py --backend {jax,cjit} --program FILE.py --out OUT.jsonl [--stubs DIR]

With ``--backend cjit`` the import swap (swap.py) is installed first.  The
cells share one namespace.  For each cell one JSON line is appended to OUT
(and flushed, so a page killed by its time-out keeps what it did): what it
printed, the repr of its last expression (as a notebook displays it, unless
the cell ends with ';'), the warnings it gave, and the exception it raised.
"""
import argparse
import ast
import builtins
import contextlib
import io
import json
import os
import signal
import sys
import time
import traceback
import types
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
# the checkout's root, left out of recorded messages (they name files relative to it)
ROOT = os.path.dirname(os.path.dirname(HERE)) + os.sep


class CellTimeout(BaseException):
    """Raised in a cell that runs past --cell-timeout (not an Exception: a
    cell's own ``except Exception`` must not swallow it)."""


def _on_alarm(signum, frame):
    raise CellTimeout()


class _Anything(types.ModuleType):
    """A stand-in for matplotlib: every attribute, call and item is itself."""

    def __init__(self, name="stub"):
        super().__init__(name)
        self.__path__ = []

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything(name)

    def __call__(self, *a, **k):
        return _Anything()

    def __getitem__(self, key):
        return _Anything()

    def __iter__(self):
        return iter([_Anything(), _Anything()])


def stub_plotting():
    for name in ("matplotlib", "matplotlib.pyplot", "matplotlib.cm", "matplotlib.colors"):
        sys.modules[name] = _Anything(name)


def _exc_record(exc):
    cls = type(exc)
    msg = str(exc).strip().replace(ROOT, "")
    first = msg.split("\n", 1)[0]
    return {"exc_type": cls.__name__, "exc_module": cls.__module__,
            "exc_msg": first[:400], "exc_full": msg[:2000],
            "traceback": "".join(traceback.format_exception(exc)).replace(ROOT, "")[-3000:]}


def _split_last_expr(source):
    """(body, last expression) compiled for exec/eval; the expression is None
    when the cell does not end in one or ends with ';' (a notebook shows nothing)."""
    tree = ast.parse(source)
    shown = (tree.body and isinstance(tree.body[-1], ast.Expr)
             and not source.rstrip().endswith(";"))
    if not shown:
        return compile(tree, "<cell>", "exec"), None
    last = ast.Expression(tree.body[-1].value)
    tree.body = tree.body[:-1]
    return compile(tree, "<cell>", "exec"), compile(last, "<cell>", "eval")


def run_cell(source, namespace, cell_timeout):
    out, err = io.StringIO(), io.StringIO()
    rec = {"status": "ok", "display": None}
    start = time.monotonic()
    signal.alarm(cell_timeout)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                body, last = _split_last_expr(source)
                exec(body, namespace)
                if last is not None:
                    value = eval(last, namespace)
                    if value is not None:
                        rec["display"] = repr(value)
        except CellTimeout:
            rec["status"] = "timeout"
        except SystemExit as exc:
            if exc.code not in (None, 0):
                rec.update(status="raised", **_exc_record(exc))
        except BaseException as exc:  # noqa: BLE001 - every failure is a result
            rec.update(status="raised", **_exc_record(exc))
        finally:
            signal.alarm(0)
    rec["seconds"] = round(time.monotonic() - start, 3)
    rec["stdout"] = out.getvalue()
    rec["stderr"] = err.getvalue()[-4000:]
    seen = []
    for w in caught:
        text = f"{w.category.__name__}: {str(w.message).splitlines()[0] if str(w.message) else ''}"
        if text not in seen:
            seen.append(text)
    rec["warnings"] = seen[:8]
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=("jax", "cjit"), required=True)
    ap.add_argument("--cells")
    ap.add_argument("--program")
    ap.add_argument("--stubs", help="a folder put first on sys.path (stand-in datasets)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--cell-timeout", type=int, default=120)
    args = ap.parse_args()

    sys.path.insert(0, HERE)
    if args.stubs:
        sys.path.insert(0, args.stubs)
    if args.backend == "cjit":
        import swap
        swap.install()
    stub_plotting()
    # Programs that draw from NumPy's global state unseeded get the same draws
    # in both runs: seeded after `import jax` (JAX's import draws from it).
    import importlib
    import numpy as np
    importlib.import_module("jax")
    np.random.seed(0)
    signal.signal(signal.SIGALRM, _on_alarm)

    if args.cells:
        with open(args.cells) as f:
            cells = json.load(f)
        namespace = {"__name__": "__main__", "__builtins__": builtins}
    else:
        path = os.path.abspath(args.program)
        cells = [{"index": 0, "source": None}]
        sys.argv = [path]
    with open(args.out, "a") as sink:
        for cell in cells:
            if cell["source"] is None:
                rec = run_cell(f"import runpy\n_ = runpy.run_path({path!r}, run_name='__main__')",
                               {"__name__": "__port_check__", "__builtins__": builtins},
                               args.cell_timeout)
            else:
                rec = run_cell(cell["source"], namespace, args.cell_timeout)
            rec["index"] = cell["index"]
            sink.write(json.dumps(rec) + "\n")
            sink.flush()


if __name__ == "__main__":
    main()
