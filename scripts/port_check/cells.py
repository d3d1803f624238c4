"""Code cells of a MyST markdown page (jupytext's ```{code-cell} blocks), in order.

A cell is a dict: ``index`` (0-based among the page's code cells), ``line``
(1-based line of its fence in the page), ``tags`` (from ``:tags: [...]`` or a
``---`` YAML header) and ``source`` (the code, with IPython magics turned into
plain Python, see ``translate_magics``).  Cells tagged ``remove-cell`` still
run: a notebook runs them too, it only hides them.
"""
import re

_FENCE = re.compile(r"^(`{3,}|~{3,})\{code-cell\}")
_OPTION = re.compile(r"^:([\w-]+):\s*(.*)$")


def _parse_tags(text):
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        return [t.strip().strip("'\"") for t in text[1:-1].split(",") if t.strip()]
    return [text] if text else []


def _translate_line(line):
    """One line of cell source with a line magic made plain Python.

    ``%timeit [-n N -r R] stmt`` and ``%time stmt`` run ``stmt`` once (timings
    are not compared); other line magics (``%xmode``, ``%matplotlib``) and shell
    escapes (``!pip ...``) are dropped.  Returns None for a dropped line.
    """
    stripped = line.lstrip()
    indent = line[: len(line) - len(stripped)]
    if stripped.startswith("!"):
        return None
    if not stripped.startswith("%") or stripped.startswith("%%"):
        return line
    m = re.match(r"%(\w+)\s*(.*)$", stripped)
    if not m:
        return None
    name, rest = m.group(1), m.group(2)
    if name in ("timeit", "time"):
        # Options are "-x" or "-x VALUE" pairs before the statement.
        while True:
            opt = re.match(r"-(\w)\s*(\d+\s+)?", rest)
            if not opt or not rest.startswith("-"):
                break
            rest = rest[opt.end():]
        return indent + rest
    return None


def translate_magics(source):
    lines = source.split("\n")
    if lines and lines[0].lstrip().startswith("%%"):
        # A cell magic: %%timeit / %%time run the body once; others are dropped.
        name = lines[0].split()[0][2:]
        return "\n".join(lines[1:]) if name in ("timeit", "time", "capture") else ""
    out = [_translate_line(l) for l in lines]
    return "\n".join(l for l in out if l is not None)


def extract_cells(text):
    """The code cells of a MyST page, in order."""
    lines = text.split("\n")
    cells = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, start = m.group(1), i + 1
        i += 1
        tags = []
        if i < len(lines) and lines[i].strip() == "---":
            # A YAML option block closed by another '---'.
            i += 1
            while i < len(lines) and lines[i].strip() != "---":
                opt = re.match(r"^\s*tags:\s*(.*)$", lines[i])
                if opt:
                    tags = _parse_tags(opt.group(1))
                i += 1
            i += 1
        else:
            while i < len(lines):
                opt = _OPTION.match(lines[i])
                if not opt:
                    break
                if opt.group(1) == "tags":
                    tags = _parse_tags(opt.group(2))
                i += 1
        body = []
        while i < len(lines) and not lines[i].startswith(fence):
            body.append(lines[i])
            i += 1
        i += 1
        source = "\n".join(body).strip("\n")
        cells.append({"index": len(cells), "line": start, "tags": tags,
                      "raw": source, "source": translate_magics(source)})
    return cells
