"""Dependency cycles among cjit's source files.

    python scripts/cycles.py                 # Python modules: report, exit 1 on a cycle
    python scripts/cycles.py --c [OBJDIR]    # C files too (reported, never enforced)
    python scripts/cycles.py --layers        # also print the Python modules by layer

Python: a node per module under python/cjit.  Module A depends on B when A
imports B anywhere in its text: at module level or inside a function, as
`import cjit.x`, `from . import x` or `from .x import y` (a name taken from a
package that is not one of its submodules is a dependency on the package's
`__init__`), and also `sys.modules["cjit.x"]` or `importlib.import_module(...)`
with a literal name.  Importing `a.b.c` runs the `__init__` of `a.b` first,
but that is not counted: a package's `__init__` is a namespace, and a module
depends on it only when it takes a name from it.  A lazy import inside a
function is still an import: only modules that are not part of cjit (JAX,
matplotlib, SciPy) may be imported late to stay optional.

C (reported only; the C files are being restructured): a node per unit, a
`.c` with its `.h` of the same name (a header without a `.c` is a unit of its
own).  Unit A depends on B when A's text, comments and strings removed, uses
a name B defines: a function (a call or its address), a typedef, a struct,
union or enum tag, an enum constant or a macro.  Prototypes in headers are
declarations, not uses.  A type or macro defined in several headers resolves
to the ones the user includes.  With OBJDIR, calls come from `nm` on the
objects instead (what the linker resolves), types still from the text.

Prints the strongly connected components with more than one node (each with
one cycle through it, as an example) and exits 1 when Python has one that
KNOWN_PYTHON does not list."""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from structure import strongly_connected  # noqa: E402  (Tarjan's, shared with the C link check)

# Python cycles not yet broken: each entry is the set of modules of one
# cycle, reported but not failing; a cycle must be a subset of one of them.
# _core._stack_nested (lifting a nested list that holds traced values)
# imports _manipulation.stack, which stands on _core: breaking it needs a
# change to _core's code (a stack of lifted operands written with _core's
# own _lift, _result_type and the concatenate op), which is another
# change's file now; every other cycle is broken.
KNOWN_PYTHON = [{"cjit.numpy._core", "cjit.numpy._manipulation"}]

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
PKG_DIR = os.path.join(ROOT, "python", "cjit")
CSRC = os.path.join(ROOT, "csrc")


# ---------------------------------------------------------------- graph helpers

def one_cycle(comp, edges):
    """A shortest cycle through the component's first node (breadth first)."""
    start = min(comp)
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges[v] & comp):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return path[::-1] + [start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return [start]


def layers(nodes, edges):
    """Depth of each node: one more than the deepest node it uses (the
    components of a cycle share one depth)."""
    comps = strongly_connected(sorted(nodes), edges)
    depth = {}
    for comp in comps:   # every component comes after the ones it uses
        d = 1 + max((depth[w] for v in comp for w in edges[v] if w not in comp), default=-1)
        for v in comp:
            depth[v] = d
    return depth


def report(kind, nodes, edges, known=()):
    cycles = [c for c in strongly_connected(sorted(nodes), edges) if len(c) > 1]
    for c in sorted(cycles, key=lambda c: (-len(c), min(c))):
        tag = "known " if any(c <= k for k in known) else ""
        print(f"{tag}{kind} cycle of {len(c)}: {' '.join(sorted(c))}")
        print(f"    e.g. {' -> '.join(one_cycle(c, edges))}")
    return cycles


# ---------------------------------------------------------------- Python

def python_modules(pkg_dir=PKG_DIR, pkg="cjit"):
    """{dotted module name: path} of every .py file (and `pkg._cjit`, the
    extension, as a leaf)."""
    mods = {}
    for d, dirs, files in os.walk(pkg_dir):
        dirs[:] = sorted(x for x in dirs if not x.startswith((".", "__")))
        rel = os.path.relpath(d, pkg_dir)
        prefix = pkg if rel == "." else pkg + "." + rel.replace(os.sep, ".")
        for f in sorted(files):
            if f.endswith(".py"):
                name = prefix if f == "__init__.py" else prefix + "." + f[:-3]
                mods[name] = os.path.join(d, f)
            elif f.endswith((".so", ".pyd")) and f.split(".")[0] == "_cjit":
                mods[prefix + "._cjit"] = os.path.join(d, f)
    return mods


def _literal_module(node):
    """The module named by `sys.modules["m"]` or `importlib.import_module("m")`."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
            and node.value.attr == "modules" and isinstance(node.slice, ast.Constant) \
            and isinstance(node.slice.value, str):
        return node.slice.value
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
        if name == "import_module":
            return node.args[0].value
    return None


def python_imports(name, path, mods):
    """(target module, line) for every import of a cjit module in the file."""
    is_pkg = os.path.basename(path) == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    out = []

    def add(target, line):
        # the longest prefix that is a module: `cjit.numpy.sum` is cjit.numpy
        parts = target.split(".")
        while parts and ".".join(parts) not in mods:
            parts.pop()
        if parts:
            out.append((".".join(parts), line))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                pkg = ".".join(base[:len(base) - node.level + 1])
                src = pkg + ("." + node.module if node.module else "")
            else:
                src = node.module
            for a in node.names:
                sub = src + "." + a.name
                add(sub if sub in mods else src, node.lineno)
        else:
            lit = _literal_module(node)
            if lit:
                add(lit, node.lineno)
    return out


def python_graph(pkg_dir=PKG_DIR, pkg="cjit"):
    mods = python_modules(pkg_dir, pkg)
    edges, where = {}, {}
    for name, path in mods.items():
        edges[name] = set()
        if not path.endswith(".py"):
            continue
        for target, line in python_imports(name, path, mods):
            if target != name:
                edges[name].add(target)
                where.setdefault((name, target), line)
    return mods, edges, where


def check_python(show_layers=False, pkg_dir=PKG_DIR, pkg="cjit", known=None):
    """The Python cycles that are not known (KNOWN_PYTHON), after printing all."""
    known = KNOWN_PYTHON if known is None else known
    mods, edges, where = python_graph(pkg_dir, pkg)
    cycles = report("Python import", mods, edges, known)
    for c in cycles:
        for v in sorted(c):
            for w in sorted(edges[v] & c):
                print(f"    {v} imports {w} (line {where[(v, w)]})")
    if show_layers:
        depth = layers(mods, edges)
        by = {}
        for v, d in depth.items():
            by.setdefault(d, []).append(v[len(pkg) + 1:] or pkg)
        for d in sorted(by):
            print(f"python layer {d}: {' '.join(sorted(by[d]))}")
    new = [c for c in cycles if not any(c <= k for k in known)]
    print(f"cycles: {len(mods)} Python modules, {sum(map(len, edges.values()))} imports, "
          f"{len(cycles)} cycle(s), {len(new)} not known")
    return new


# ---------------------------------------------------------------- C

_COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_IDENT = re.compile(r"[A-Za-z_]\w*")
_KEYWORDS = set("if while for switch return sizeof do else case goto".split())


def _strip(text):
    """Comments and string/char literals blanked (newlines kept)."""
    return _COMMENT_OR_STRING.sub(lambda m: "\n" * m.group(0).count("\n") if m.group(0)[0] == "/"
                                  else '""', text)


def _join_continuations(text):
    return text.replace("\\\n", " ")


def c_definitions(text, header):
    """(functions, static functions, types and macros) a file defines.
    `text` is already stripped of comments and strings."""
    funcs, statics, types = set(), set(), set()
    flat = _join_continuations(text)
    for m in re.finditer(r"^\s*#\s*define\s+([A-Za-z_]\w*)", flat, re.M):
        types.add(m.group(1))
    # a function definition: at the start of a line, a return type, the name,
    # the parameters (maybe over lines), then `{`
    for m in re.finditer(r"^([A-Za-z_][\w \t\*]*?)\b([A-Za-z_]\w*)\s*\(([^;{}()]|\([^;{}()]*\))*\)\s*\{",
                         flat, re.M):
        ret, name = m.group(1), m.group(2)
        if name in _KEYWORDS or ret.strip() in ("", "return", "else"):
            continue
        (statics if re.search(r"\bstatic\b", ret) and not header else funcs).add(name)
    for m in re.finditer(r"\b(?:struct|union|enum)\s+([A-Za-z_]\w*)\s*\{", flat):
        types.add(m.group(1))
    # typedef ... name;  (the body may hold braces: find the matching one)
    for m in re.finditer(r"\btypedef\b", flat):
        i, depth = m.end(), 0
        while i < len(flat):
            ch = flat[i]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == ";" and depth == 0:
                break
            i += 1
        decl = flat[m.end():i]
        tail = decl[decl.rfind("}") + 1:] if "}" in decl else decl
        fp = re.search(r"\(\s*\*\s*([A-Za-z_]\w*)\s*\)", tail)
        if fp:                      # typedef int (*name)(...)
            types.add(fp.group(1))
        elif "(" in tail:           # a function type: typedef int name(...)
            ids = _IDENT.findall(tail[:tail.index("(")])
            if ids:
                types.add(ids[-1])
        else:
            ids = _IDENT.findall(re.sub(r"\[[^\]]*\]", "", tail))
            if ids:
                types.add(ids[-1])
    # enum constants
    for m in re.finditer(r"\benum\b[^{;]*\{([^}]*)\}", flat):
        for item in m.group(1).split(","):
            ids = _IDENT.findall(item.split("=")[0])
            if ids:
                types.add(ids[0])
    return funcs, statics, types


def _without_prototypes(text):
    """A header with its top-level function declarations removed."""
    return re.sub(r"^[A-Za-z_][\w \t\*]*?\b[A-Za-z_]\w*\s*\(([^;{}()]|\([^;{}()]*\))*\)\s*;", "",
                  _join_continuations(text), flags=re.M)


def c_graph(csrc=CSRC, objdir=None):
    files = sorted(f for f in os.listdir(csrc) if f.endswith((".c", ".h", ".def")))
    unit = {}
    for f in files:
        stem = f.rsplit(".", 1)[0]
        unit[f] = stem if os.path.exists(os.path.join(csrc, stem + ".c")) else f
    raw = {f: open(os.path.join(csrc, f), encoding="utf-8", errors="replace").read() for f in files}
    texts = {f: _strip(raw[f]) for f in files}
    includes = {f: set(re.findall(r'^\s*#\s*include\s*"([^"]+)"', raw[f], re.M)) & set(files)
                for f in files}
    seen = {}
    for f in files:   # transitive includes
        todo, got = list(includes[f]), set()
        while todo:
            h = todo.pop()
            if h not in got:
                got.add(h)
                todo.extend(includes[h])
        seen[f] = got
    func_owner, type_owners, local = {}, {}, {}
    for f in files:
        funcs, statics, types = c_definitions(texts[f], not f.endswith(".c"))
        local[f] = funcs | statics | types
        for n in funcs:
            func_owner.setdefault(n, f)
        if not f.endswith(".c"):    # a .c file's types and macros are its own
            for n in types | funcs:
                type_owners.setdefault(n, set()).add(f)
    if objdir:   # calls as the linker resolves them
        func_owner = {}
        for d, _, fs in os.walk(objdir):
            for o in fs:
                if o.endswith(".o") and o[:-2] + ".c" in unit:
                    out = subprocess.run(["nm", "--defined-only", "-g", os.path.join(d, o)],
                                         capture_output=True, text=True, check=True).stdout
                    for line in out.split("\n"):
                        if line.strip():
                            func_owner.setdefault(line.split()[-1], o[:-2] + ".c")
    units = sorted(set(unit.values()))
    edges = {u: set() for u in units}
    why = {}
    for f in files:
        body = texts[f] if f.endswith(".c") else _without_prototypes(texts[f])
        mine = local[f] | {n for g in files if unit[g] == unit[f] for n in local[g]}
        for name in set(_IDENT.findall(body)) - mine:
            targets = set()
            if name in func_owner:
                targets.add(func_owner[name])
            owners = type_owners.get(name, set())
            inc = owners & seen[f]
            targets |= inc if inc else (owners if len(owners) == 1 else set())
            for t in targets:
                if unit[t] != unit[f]:
                    edges[unit[f]].add(unit[t])
                    why.setdefault((unit[f], unit[t]), name)
    return units, edges, why


def check_c(objdir=None):
    units, edges, why = c_graph(objdir=objdir)
    cycles = report("C", units, edges)
    for c in cycles:
        path = one_cycle(c, edges)
        print("    " + ", ".join(f"{a} uses {why[(a, b)]} of {b}" for a, b in zip(path, path[1:])))
    print(f"cycles: {len(units)} C units, {sum(map(len, edges.values()))} uses, "
          f"{len(cycles)} cycle(s) (reported, not enforced)")
    return cycles


def main(argv):
    show_layers = "--layers" in argv
    args = [a for a in argv if a != "--layers"]
    py_cycles = check_python(show_layers)
    if args and args[0] == "--c":
        check_c(args[1] if len(args) > 1 else None)
    return 1 if py_cycles else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
