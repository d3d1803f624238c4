"""The Python modules' structure (scripts/cycles.py, docs/ARCHITECTURE.md
"Layers"): no import cycle, internal modules import from the module that
defines a name, the math functions cjit has twice in one module (complex
support registered per function in one place: test_complex_registry.py)."""
import ast
import os
import sys

import numpy as np
from hypothesis import given, settings, strategies as st

import cjit

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import cycles  # noqa: E402

PKG = os.path.join(ROOT, "python", "cjit")


# ---------------------------------------------------------------------------
# the real package

def test_no_import_cycle_among_cjit_modules():
    assert cycles.check_python() == []


def test_every_known_cycle_is_still_a_cycle():
    """A KNOWN_PYTHON entry that no longer is a cycle must be dropped."""
    mods, edges, _ = cycles.python_graph()
    found = [c for c in cycles.strongly_connected(sorted(mods), edges) if len(c) > 1]
    for k in cycles.KNOWN_PYTHON:
        assert any(c <= k for c in found), k


def test_internal_modules_import_from_the_defining_module():
    """Only cjit/__init__ gathers: no cjit module imports cjit.api, the
    cjit package or the cjit.numpy and cjit.lax namespaces (the example
    libraries are clients of the public API, as JAX's are)."""
    mods, edges, where = cycles.python_graph()
    gathering = {"cjit", "cjit.api", "cjit.numpy", "cjit.lax", "cjit.scipy"}
    bad = [(m, t, where[(m, t)]) for m in mods for t in edges[m] & gathering
           if m != "cjit" and not m.startswith("cjit.example_libraries")]
    assert bad == []


def test_c_report_runs_and_names_units():
    units, edges, _ = cycles.c_graph()
    assert "graph" in units and "autodiff" in units
    assert "graph" in edges["autodiff"]          # autodiff.c calls the graph builders


# ---------------------------------------------------------------------------
# the checker on generated packages

def _write_package(tmp, n, imports):
    """Package `pkg` of modules m0..m{n-1} (m0 is its __init__ when `init`
    is asked for); imports: (src, dst, form) triples."""
    pkg = tmp / "pkg"
    pkg.mkdir()
    (pkg / "sub").mkdir()
    paths = {}
    for i in range(n):
        # odd modules live in the subpackage, to exercise `..` and absolute names
        paths[i] = (pkg / "sub" / f"m{i}.py", f"pkg.sub.m{i}") if i % 2 else (pkg / f"m{i}.py", f"pkg.m{i}")
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    body = {i: ["import sys\n"] for i in range(n)}
    for src, dst, form in imports:
        dpath, dname = paths[dst]
        in_sub_src, in_sub_dst = src % 2 == 1, dst % 2 == 1
        rel = ("." if in_sub_src == in_sub_dst else (".." if in_sub_src else "."))
        rel_mod = rel + ("sub." if (in_sub_dst and not in_sub_src) else "")
        if form == "from_module":          # from .mX import name
            line = f"from {rel_mod}m{dst} import VALUE\n"
        elif form == "from_package":       # from . import mX
            pk = rel + ("sub" if (in_sub_dst and not in_sub_src) else "")
            line = f"from {pk} import m{dst}\n"
        elif form == "absolute":
            line = f"import {dname}\n"
        else:                              # sys.modules lookup
            line = f"X = sys.modules['{dname}']\n"
        if form != "sys_modules" and (src + dst) % 3 == 0:   # some imports inside a function
            line = "def f():\n    " + line
        body[src].append(line)
    for i in range(n):
        body[i].append("VALUE = 1\n")
        paths[i][0].write_text("".join(body[i]))
    return pkg, {i: paths[i][1] for i in range(n)}


def _reach_sccs(n, imports):
    reach = [[False] * n for _ in range(n)]
    for s, d, _ in imports:
        if s != d:
            reach[s][d] = True
    for k in range(n):
        for i in range(n):
            if reach[i][k]:
                for j in range(n):
                    if reach[k][j]:
                        reach[i][j] = True
    comps = set()
    for i in range(n):
        comp = frozenset([i] + [j for j in range(n) if reach[i][j] and reach[j][i]])
        if len(comp) > 1:
            comps.add(comp)
    return comps


_IMPORTS = st.integers(2, 7).flatmap(lambda n: st.tuples(
    st.just(n),
    st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1),
                       st.sampled_from(["from_module", "from_package", "absolute", "sys_modules"])),
             max_size=12)))


@settings(max_examples=40, deadline=None)
@given(_IMPORTS)
def test_checker_finds_exactly_the_cycles_of_generated_packages(tmp_path_factory, case):
    """40 generated packages per run: every import form, at module level or
    inside a function, in and across a subpackage; the checker's cycles are
    the strongly connected components of the imports as written."""
    n, imports = case
    pkg, names = _write_package(tmp_path_factory.mktemp("p"), n, imports)
    mods, edges, _ = cycles.python_graph(str(pkg), "pkg")
    got = {frozenset(c) for c in cycles.strongly_connected(sorted(mods), edges) if len(c) > 1}
    expected = {frozenset(names[i] for i in c) for c in _reach_sccs(n, imports)}
    assert got == expected
    assert (cycles.check_python(pkg_dir=str(pkg), pkg="pkg", known=[]) != []) == bool(expected)


# ---------------------------------------------------------------------------
# the math functions cjit has twice live in _xla_math.py

# function names (without a leading _ or c and a trailing 32/64) that have a
# home and may have their copy in _xla_math.py only
_HOMES = {"erf": {"scipy/special.py"}, "erfinv": {"scipy/special.py"},
          "log1p": {"numpy/_elementwise.py"}, "log": {"numpy/_elementwise.py"},
          "fma": set(), "sigmoid": {"_stable.py"}, "logsumexp": {"_stable.py", "scipy/special.py"},
          "softplus": {"nn.py"}, "elu": {"nn.py"}, "selu": {"nn.py"}, "leaky_relu": {"nn.py"}}


def _defined_functions(path):
    tree = ast.parse(open(path).read())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            yield node.name
        elif isinstance(node, ast.Assign) and isinstance(node.value, (ast.Call, ast.Lambda)):
            # name = np.vectorize(math.erf) and the like (not an alias: name = nn.softplus)
            for t in node.targets:
                if isinstance(t, ast.Name):
                    yield t.id


def _stem(name):
    name = name.lstrip("_")
    for end in ("32", "64", "_libm", "_as_xla"):
        if name.endswith(end):
            name = name[:-len(end)]
    return name


def test_math_copies_live_in_xla_math():
    found = []
    for d, _, files in os.walk(PKG):
        for f in files:
            if not f.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(d, f), PKG).replace(os.sep, "/")
            for name in _defined_functions(os.path.join(d, f)):
                stem = _stem(name)
                if stem in _HOMES and rel not in _HOMES[stem] | {"_xla_math.py"}:
                    found.append((rel, name))
    assert found == []


def test_xla_math_lists_the_reason_of_each_copy():
    from cjit import _xla_math
    doc = _xla_math.__doc__
    for name in ("fma", "xla_log", "_log1p32", "erfinv32", "erf32", "erf_libm"):
        assert name in doc and hasattr(_xla_math, name), name


def test_defjvps_without_rules_gives_zero_tangents():
    """custom_jvp.defjvps with every rule None: zero tangents of the outputs'
    shapes and dtypes (made without cjit.numpy since _custom.py stands below it)."""
    f = cjit.custom_jvp(lambda x, y: (x * y, x + 1.0))
    f.defjvps(None, None)
    out, tan = cjit.jvp(f, (np.float32(2.0), np.float32(3.0)), (np.float32(1.0), np.float32(1.0)))
    np.testing.assert_allclose([np.asarray(o) for o in out], [6.0, 3.0])
    for t in tan:
        assert np.asarray(t).dtype == np.float32 and float(np.asarray(t)) == 0.0
