"""Cell-by-cell comparison of a JAX run and a cjit run of the same program.

What a cell shows (its stdout, then its last expression's repr) is split into
tokens: numbers, and the text between them with blanks removed (NumPy pads
columns to the widest number, so blanks follow the values).  Two outputs match
when the text tokens are equal and each pair of numbers is equal within the
mode's tolerance (``number_close``).  Before that, JAX's array repr is
normalised to NumPy's (``normalise``): the cell is then counted as matching,
with a note that the repr differs (cjit's concrete results are NumPy arrays).

A cell where both raise matches (the pages raise on purpose); where only one
raises it does not.  Every mismatch gets a short reason (``classify``).
"""
import math
import re

# Numbers as NumPy and Python print them; not digits inside names (float32, x1).
_NUM = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?j?(?![\w.])"
                  r"|(?<![\w.])-?(?:nan|inf)(?!\w)")
# Wall-clock times the examples print ("in 0.53 sec", "(1.234 sec)").
_TIMES = re.compile(r"\d+\.\d+\s*sec\b")

RTOL = {"default": 1e-5, "x64": 1e-12}


def normalise(text):
    """(text, changed): JAX's Array repr written as NumPy writes it."""
    new = text.replace("Array(", "array(")
    new = new.replace(", weak_type=True", "")
    # NumPy leaves out its default dtypes; JAX always names them.
    new = re.sub(r",\s*dtype=(float64|int64|bool|complex128)\)", ")", new)
    # NumPy 2.2+ names the shape of an array it prints with '...'; JAX does not.
    new = re.sub(r",\s*shape=\([\d, ]*\)", "", new)
    return _volatile(new), _volatile(new) != _volatile(text)


def _volatile(text):
    """Wall-clock times and object addresses, which differ between any two runs."""
    text = _TIMES.sub("<time> sec", text)
    return re.sub(r"\b0x[0-9a-f]{6,}\b", "0x<address>", text)


def tokens(text):
    """[(kind, printed, line)] with kind 'num' or 'text'.  The text between two
    numbers is one token whatever blanks and line breaks it holds (NumPy
    wraps lines where the widths of the numbers say)."""
    out = []
    pos = 0
    for m in _NUM.finditer(text):
        chunk = re.sub(r"\s+", "", text[pos:m.start()])
        if chunk:
            out.append(("text", chunk, text.count("\n", 0, m.start())))
        out.append(("num", m.group(0), text.count("\n", 0, m.start())))
        pos = m.end()
    chunk = re.sub(r"\s+", "", text[pos:])
    if chunk:
        out.append(("text", chunk, text.count("\n")))
    return out


def _value(s):
    s = s.rstrip("j")
    return float(s.replace("+", "")) if "nan" not in s else math.nan


def _last_place(s):
    """One unit in the last printed digit of a float literal, or 0 for an int."""
    m = re.match(r"[-+]?\d*\.(\d*)(?:[eE]([-+]?\d+))?j?$", s)
    if not m:
        return 0.0
    return 10.0 ** (-len(m.group(1)) + int(m.group(2) or 0))


def number_close(a, b, rtol, scale=0.0):
    """Printed numbers a and b agree: equal, or within rtol of the larger (or of
    the line's largest magnitude, ``scale``), or one unit apart in the last
    printed digit (a rounding boundary).  Integers must be equal."""
    if a.endswith("j") != b.endswith("j"):
        return False
    x, y = _value(a), _value(b)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if x == y:
        return True
    if math.isinf(x) or math.isinf(y):
        return False
    if _last_place(a) == 0.0 and _last_place(b) == 0.0:
        return False
    diff = abs(x - y)
    if diff <= rtol * max(abs(x), abs(y), scale):
        return True
    unit = max(_last_place(a), _last_place(b))
    return diff <= unit * 1.000001


def _scales(toks):
    by_line = {}
    for kind, s, line in toks:
        if kind == "num":
            v = abs(_value(s))
            if not math.isnan(v) and not math.isinf(v):
                by_line[line] = max(by_line.get(line, 0.0), v)
    return by_line


def _rel(a, b):
    x, y = _value(a), _value(b)
    if math.isnan(x) or math.isnan(y) or math.isinf(x) or math.isinf(y):
        return math.inf
    big = max(abs(x), abs(y))
    return abs(x - y) / big if big > 0 else 0.0


def compare_text(jax_text, cjit_text, rtol):
    """None when they match, else a dict describing the first difference.  For
    numbers, also the largest relative difference of the numbers that differ
    (while the text around them stays equal)."""
    ta, tb = tokens(jax_text), tokens(cjit_text)
    sa = _scales(ta)
    first = None
    for i, (a, b) in enumerate(zip(ta, tb)):
        if a[0] != b[0] or (a[0] == "text" and a[1] != b[1]):
            text = {"kind": "text", "jax": _around(ta, i), "cjit": _around(tb, i)}
            if first is None:
                return text
            first["then"] = text
            return first
        if a[0] == "num" and not number_close(a[1], b[1], rtol, sa.get(a[2], 0.0)):
            rel = _rel(a[1], b[1])
            if first is None:
                first = {"kind": "number", "jax": a[1], "cjit": b[1], "rel": rel,
                         "max_rel": rel, "count": 0, "context": _around(ta, i)}
            first["max_rel"] = max(first["max_rel"], rel)
            first["count"] += 1
    if first is None and len(ta) != len(tb):
        i = min(len(ta), len(tb))
        return {"kind": "text", "jax": _around(ta, i), "cjit": _around(tb, i)}
    return first


def _around(toks, i, width=6):
    part = toks[max(0, i - 2): i + width]
    text = ""
    for k, t in enumerate(part):
        if k and t[0] == "num" and part[k - 1][0] == "num":
            text += " "
        text += t[1]
    return text[:100] or "(nothing)"


def shown(rec):
    """What a notebook shows for a cell: stdout, then 'Out:' and the repr."""
    text = rec.get("stdout") or ""
    if rec.get("display") is not None:
        text += "\nOut: " + rec["display"]
    return text


def compare_cell(jrec, crec, rtol):
    """A dict: status ('match', 'differ', 'both-raise', 'cjit-raises',
    'cjit-no-raise', 'jax-fails', 'missing'), reason, notes."""
    if crec is None:
        return {"status": "missing", "reason": "not reached (time-out or crash)"}
    if jrec is None:
        return {"status": "jax-fails", "reason": "JAX run did not reach this cell"}
    j_bad = jrec["status"] != "ok"
    c_bad = crec["status"] != "ok"
    if jrec["status"] == "timeout":
        return {"status": "jax-fails", "reason": "JAX run timed out"}
    if crec["status"] == "timeout":
        return {"status": "cjit-raises", "reason": "cjit timed out"}
    notes = []
    jtext, jchanged = normalise(shown(jrec))
    ctext, _ = normalise(shown(crec))
    if j_bad and c_bad:
        if jrec["exc_type"] != crec["exc_type"]:
            notes.append(f"JAX raises {jrec['exc_type']}, cjit {crec['exc_type']}")
        return {"status": "both-raise", "reason": "", "notes": notes}
    if c_bad:
        return {"status": "cjit-raises",
                "reason": f"{crec['exc_type']}: {crec['exc_msg']}"[:240]}
    if j_bad:
        return {"status": "cjit-no-raise",
                "reason": f"cjit does not raise (JAX: {jrec['exc_type']}: {jrec['exc_msg']})"[:240]}
    if jchanged:
        notes.append("Array repr normalised")
    diff = compare_text(jtext, ctext, rtol)
    if diff is None:
        return {"status": "match", "reason": "", "notes": notes}
    return {"status": "differ", "reason": classify(diff, jtext, ctext), "diff": diff, "notes": notes}


def classify(diff, jtext, ctext):
    """A short reason for a difference in what two runs printed."""
    if diff["kind"] == "number":
        text = (f"number: JAX {diff['jax']}, cjit {diff['cjit']} (rel {diff['rel']:.1e}) "
                f"in '{diff['context'][:50]}'")
        if diff["count"] > 1:
            text += f"; {diff['count']} numbers differ, by up to rel {diff['max_rel']:.1e}"
        if "then" in diff:
            text += f"; then text: JAX '{diff['then']['jax'][:40]}', cjit '{diff['then']['cjit'][:40]}'"
        return text
    j, c = diff["jax"], diff["cjit"]
    for pattern, what in (("Tracer", "tracer repr"), ("lambda;", "jaxpr text"),
                          ("PyTreeDef", "treedef repr"), ("Device", "device repr"),
                          ("key<", "typed key repr")):
        if pattern in j:
            return f"{what}: JAX '{j[:60]}', cjit '{c[:60]}'"
    return f"text: JAX '{j[:60]}', cjit '{c[:60]}'"
