"""The C core's structure, checked from what the compiler made.

    python scripts/structure.py OBJDIR

OBJDIR (default build/obj-default, the build's) holds, in it or below it,
one object file per csrc/*.c.  A file depends on
another when its object uses a global symbol the other's object defines
(`nm`).  The checks:

- link cycles: the strongly connected components of that graph with more
  than one file.  Each is a set of files no one can read (or test) apart,
  and fails the check unless KNOWN below lists it (it lists none now);
- target-free passes: no file of the target-free pipeline (graph, builders,
  transformations, lowering passes) includes an LLVM header.

Prints the layers (files by their depth in the dependency graph) and exits 1
when a check fails."""
import os
import re
import subprocess
import sys

CSRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "csrc")

# Cycles not yet broken (docs/ARCHITECTURE.md, "Layers"): each entry is the
# set of files of one cycle; a cycle must be a subset of one of them.
KNOWN = []   # every cycle found has been broken (docs/ARCHITECTURE.md, "Layers")

# The target-free pipeline: these never see LLVM.
TARGET_FREE = re.compile(r"^(graph.*|ops|simplify|fuse.*|group|memplan|memorder|lower|plan|autodiff|jvp.*|"
                         r"batching|regions.*|custom|loops|stats|cj)$")


def symbols(obj):
    out = subprocess.run(["nm", "--defined-only", "-g", obj], capture_output=True, text=True, check=True).stdout
    defined = {line.split()[-1] for line in out.splitlines() if line.strip()}
    out = subprocess.run(["nm", "-u", obj], capture_output=True, text=True, check=True).stdout
    used = {line.split()[-1] for line in out.splitlines() if line.strip()}
    return defined, used


def strongly_connected(nodes, edges):
    """Tarjan's algorithm with an explicit stack (no recursion); components
    in reverse topological order (a component after every component it uses)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.add(w)
                        if w == v:
                            break
                    out.append(comp)
    return out


def main(objdir):
    objs = {f[:-2]: os.path.join(d, f) for d, _, fs in os.walk(objdir) for f in fs if f.endswith(".o")}
    sources = {f[:-2] for f in os.listdir(CSRC) if f.endswith(".c")}
    missing = sorted(sources - set(objs))
    if missing:
        print(f"structure: no object for {', '.join(missing)} in {objdir}", file=sys.stderr)
        return 1
    defs, uses = {}, {}
    for name in sorted(sources):
        defs[name], uses[name] = symbols(objs[name])
    owner = {s: name for name, ds in defs.items() for s in ds}
    edges = {n: {owner[s] for s in uses[n] if s in owner and owner[s] != n} for n in sources}
    failed = False

    cycles = [c for c in strongly_connected(sorted(sources), edges) if len(c) > 1]
    for c in sorted(cycles, key=len, reverse=True):
        known = any(c <= k for k in KNOWN)
        print(f"{'known' if known else 'NEW'} link cycle of {len(c)} files: {' '.join(sorted(c))}")
        failed |= not known

    for name in sorted(sources):
        if not TARGET_FREE.match(name):
            continue
        headers = [os.path.join(CSRC, name + ".c")] + [os.path.join(CSRC, h) for h in os.listdir(CSRC)
                                                      if h.endswith(".h") and h[:-2] == name]
        for h in headers:
            text = open(h).read()
            if re.search(r"#\s*include\s*<llvm", text):
                print(f"structure: {os.path.basename(h)} is a target-free pass but includes an LLVM header")
                failed = True

    # layers: a file's depth is one more than the deepest file it uses
    # (cycles collapsed to one node), computed without recursion
    comp_of = {}
    for i, c in enumerate(strongly_connected(sorted(sources), edges)):
        for n in c:
            comp_of[n] = i
    depth = {}
    order = sorted(sources)
    changed = True
    while changed:
        changed = False
        for n in order:
            d = 1 + max((depth.get(m, 0) for m in edges[n] if comp_of[m] != comp_of[n]), default=-1)
            d = max(d, max((depth.get(m, 0) for m in edges[n] if comp_of[m] == comp_of[n]), default=0))
            if depth.get(n) != d:
                depth[n], changed = d, True
    layers = {}
    for n, d in depth.items():
        layers.setdefault(d, []).append(n)
    for d in sorted(layers):
        print(f"layer {d}: {' '.join(sorted(layers[d]))}")
    print(f"structure: {len(cycles)} link cycle(s), {'FAILED' if failed else 'ok'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "build/obj-default"))
