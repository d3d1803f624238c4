"""Passes by test file from array-api-tests' JSON reports (pytest-json-report).

    python scripts/array_api_table.py build/array-api-cjit.numpy.json [build/array-api-numpy.json]

One column per report: passed / total per file, then the totals.  With two
reports, also the share of the tests the second passes that the first passes
too (issue 18's measure: cjit.numpy against NumPy in the same suite)."""
import collections
import json
import sys


def outcomes(path):
    with open(path) as f:
        report = json.load(f)
    return {t["nodeid"]: t["outcome"] for t in report["tests"]}


def main(paths):
    runs = [outcomes(p) for p in paths]
    files = sorted({n.split("::")[0] for r in runs for n in r})
    names = [p.rsplit("array-api-", 1)[-1].removesuffix(".json") for p in paths]
    print(f"{'test file':44}" + "".join(f"{n:>16}" for n in names))
    totals = [collections.Counter() for _ in runs]
    for f in files:
        row = f"{f.split('/')[-1]:44}"
        for r, tot in zip(runs, totals):
            mine = [o for n, o in r.items() if n.split("::")[0] == f]
            p = sum(o == "passed" for o in mine)
            tot["passed"] += p
            tot["total"] += len(mine)
            row += f"{p:>9} / {len(mine):<4}"
        print(row)
    print(f"{'total':44}" + "".join(f"{t['passed']:>9} / {t['total']:<4}" for t in totals))
    if len(runs) == 2:
        ref = {n for n, o in runs[1].items() if o == "passed"}
        both = sum(1 for n in ref if runs[0].get(n) == "passed")
        print(f"\n{names[0]} passes {both} of the {len(ref)} tests {names[1]} passes "
              f"({100.0 * both / max(len(ref), 1):.1f}%)")


if __name__ == "__main__":
    main(sys.argv[1:])
