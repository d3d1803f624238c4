"""Markdown for port_check's results: the page table and the list of differences."""

MATCHING = ("match", "both-raise")


def counts(page):
    res = page["results"]
    return {
        "cells": len(res),
        "jax_ok": sum(1 for r, i in _recs(page, "jax") if r and r["status"] == "ok"),
        "jax_raises": sum(1 for r, i in _recs(page, "jax") if r and r["status"] != "ok"),
        "cjit_ok": sum(1 for r, i in _recs(page, "cjit") if r and r["status"] == "ok"),
        "match": sum(1 for r in res if r["status"] in MATCHING),
        "normalised": sum(1 for r in res if r["status"] == "match"
                          and "Array repr normalised" in r.get("notes", [])),
    }


def _recs(page, backend):
    recs = page[backend][0]
    return [(recs.get(r["index"]), r["index"]) for r in page["results"]]


def first_difference(page):
    for r in page["results"]:
        if r["status"] not in MATCHING:
            where = f"cell {r['index'] + 1} (line {r['line']})" if page["kind"] == "page" else ""
            return (where + ": " if where else "") + _escape(r["reason"])
    return "—"


def _escape(text):
    return text.replace("|", "\\|").replace("\n", " ")


def _run_note(page):
    notes = [f"{b}: {page[b][1]['note']}" for b in ("jax", "cjit") if page[b][1].get("note")]
    return "; ".join(notes)


def one_line(page, mode):
    if page.get("skip"):
        return f"[{mode}] {page['name']}: skipped ({page['skip']})"
    c = counts(page)
    note = _run_note(page)
    return (f"[{mode}] {page['name']}: {c['match']}/{c['cells']} cells match"
            f" (cjit ran {c['cjit_ok']}, JAX ran {c['jax_ok']})"
            + (f" [{note}]" if note else ""))


def table(checked, header):
    modes = list(checked)
    out = [f"Measured {header['date']} on cjit {header['commit']} against JAX {header['jax']} "
           f"(CPU), pages and examples from jax-ml/jax {header['jax_commit'][:10]} "
           f"(`scripts/port_check/run.py`).", ""]
    out.append("A cell *matches* when cjit prints what JAX prints (numbers within rtol "
               + ", ".join(f"{compare_rtol(m):g} in {m}" for m in modes)
               + ", or one unit in the last printed digit), or when both raise. "
               "\"repr\" counts the matching cells whose JAX output shows `Array(...)` where "
               "cjit shows NumPy's `array(...)`.")
    out.append("")
    pages = [p for p in checked[modes[0]] if p["kind"] == "page"]
    head = "| page | cells | JAX raises |"
    for m in modes:
        head += f" cjit ran ({m}) | match ({m}) | repr ({m}) |"
    out += [head + f" first difference ({modes[0]}) |",
            "|---|---:|---:|" + "---:|---:|---:|" * len(modes) + "---|"]
    totals = {}
    for page in pages:
        c0 = counts(page)
        row = f"| {page['name']} | {c0['cells']} | {c0['jax_raises']} |"
        for m in modes:
            p = _find(checked[m], page["name"])
            c = counts(p)
            row += f" {c['cjit_ok']} | {c['match']} | {c['normalised']} |"
            for k in ("cells", "match", "cjit_ok", "normalised"):
                totals[(m, k)] = totals.get((m, k), 0) + c[k]
        row += f" {first_difference(page)} |"
        note = _run_note(page)
        out.append(row[:-2] + (f" ({_escape(note)})" if note else "") + " |")
    row = f"| **all** | {totals.get((modes[0], 'cells'), 0)} | |"
    for m in modes:
        row += f" {totals.get((m, 'cjit_ok'), 0)} | **{totals.get((m, 'match'), 0)}** | {totals.get((m, 'normalised'), 0)} |"
    out += [row + " |", ""]
    examples = [p for p in checked[modes[0]] if p["kind"] == "example"]
    if examples:
        out += ["Example programs (each run whole, its printed output compared; "
                "MNIST replaced by an offline stand-in, see `stubs/examples/datasets.py`):", ""]
        out += ["| program |" + "".join(f" {m} |" for m in modes) + " first difference |",
                "|---|" + "---|" * len(modes) + "---|"]
        for ex in examples:
            if ex.get("skip"):
                out.append(f"| {ex['name']} |" + " skipped |" * len(modes) + f" {ex['skip']} |")
                continue
            row = f"| {ex['name']} |"
            firsts = []
            for m in modes:
                p = _find(checked[m], ex["name"])
                r = p["results"][0]
                row += f" {_example_status(r)} |"
                if r["status"] not in MATCHING:
                    firsts.append(f"{m}: {_escape(r['reason'])}")
            out.append(row + f" {'; '.join(firsts) or '—'} |")
        out.append("")
    return "\n".join(out)


def _example_status(r):
    """match, or how far apart the printed numbers are when only numbers differ."""
    if r["status"] in MATCHING:
        return "match"
    d = r.get("diff") or {}
    if r["status"] == "differ" and d.get("kind") == "number":
        return f"numbers differ (rel <= {d['max_rel']:.1g})" + (", and text" if "then" in d else "")
    return r["status"]


def compare_rtol(mode):
    import compare
    return compare.RTOL[mode]


def _find(pages, name):
    return next(p for p in pages if p["name"] == name)


def details(checked, header):
    out = [f"# port_check: every cell that differs ({header['date']}, cjit {header['commit']}, "
           f"JAX {header['jax']})", ""]
    for mode, pages in checked.items():
        out += [f"## {mode}", ""]
        for page in pages:
            if page.get("skip"):
                continue
            lines = []
            for r in page["results"]:
                notes = [n for n in r.get("notes", []) if n != "Array repr normalised"]
                if r["status"] in MATCHING and not notes:
                    continue
                where = f"cell {r['index'] + 1} (line {r['line']})"
                text = f"- {where}: **{r['status']}** {_escape(r.get('reason', ''))}"
                if notes:
                    text += " — " + "; ".join(notes)
                lines.append(text)
            if lines:
                c = counts(page)
                out += [f"### {page['name']} ({c['match']}/{c['cells']})", ""] + lines + [""]
    return "\n".join(out)


def summary(checked, header):
    """Counts per page and mode, for comparing two runs (JSON-ready)."""
    out = {"header": header, "modes": {}}
    for mode, pages in checked.items():
        rows = out["modes"][mode] = {}
        for page in pages:
            if page.get("skip"):
                rows[page["name"]] = {"skipped": page["skip"]}
                continue
            c = counts(page)
            c["first_difference"] = first_difference(page)
            c["statuses"] = [r["status"] for r in page["results"]]
            rows[page["name"]] = c
    return out
