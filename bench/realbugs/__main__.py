"""``python -m bench.realbugs``: score tools on the real-bug benchmark (see README.md here).

    python -m bench.realbugs                   # gradlint static
    python -m bench.realbugs --runtime         # + gradlint run (the monitor), and the union
    python -m bench.realbugs --tool torchfix --tool torch-preflight
    python -m bench.realbugs --cases           # one row per case: which tool found it
    python -m bench.realbugs --verify          # does every case behave as labelled on torch?
    python -m bench.realbugs --sources         # the source list
    python -m bench.realbugs --only 012 --only 040   # a subset (numbers or name prefixes)
    python -m bench.realbugs --split           # the split cases (several files): single-file vs split
    python -m bench.realbugs --split --verify  # does every split case behave as labelled on torch?

A case is found when a finding lies within 2 lines of one of its ``# BUG`` lines; any finding
in a fixed twin or a negative is a false positive (counted once per file). For a split case the
finding must be in the same file as the ``# BUG`` line; any finding in any file of a fixed twin is
a false positive (counted once per twin).
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import sys
from typing import Dict, List, Sequence, Tuple

from bench.realbugs import CATEGORIES, Case, SplitCase, load, load_split
from bench.realbugs import tools

WINDOW = 2


def found(case: Case, hits: Sequence[Tuple[int, str]]) -> bool:
    return any(abs(line - b) <= WINDOW for line, _ in hits for b, _ in case.bug_lines)


def placement(case: Case, hits: Sequence[Tuple[int, str]]) -> str:
    """Where the tool put its finding for a bug: "at" the marked line (the line to change),
    "near" (within 2 lines: found, but not at the line), "further" (a finding in the file, none
    within 2 lines: a miss, often a finding at the symptom), or "none"."""
    marked = {b for b, _ in case.bug_lines}
    if any(line in marked for line, _ in hits):
        return "at"
    if found(case, hits):
        return "near"
    return "further" if hits else "none"


def render_placement(cases: Sequence[Case], results: Dict[str, tools.Findings]) -> str:
    """The placement column (issue 22): of the bugs each tool reports, how many at the line to
    change."""
    lines = ["Placement of the findings on bugs (at the marked line / within 2 lines / only further "
             "away / no finding in the file):", "",
             "| tool | at the marked line | within 2 | further | none | found at the marked line |",
             "|---|---:|---:|---:|---:|---:|"]
    for t, fs in results.items():
        count = collections.Counter(placement(c, fs.get(c.path, [])) for c in cases if c.kind == "bug")
        found_n = count["at"] + count["near"]
        lines.append(f"| {t} | {count['at']} | {count['near']} | {count['further']} | {count['none']} | "
                     f"{_pct(count['at'], found_n)} |")
    return "\n".join(lines)


def score(cases: Sequence[Case], results: Dict[str, tools.Findings]) -> Dict[str, Dict[str, List[int]]]:
    """{category: {tool: [found, bugs, fp_files, clean_files]}} plus a "total" row."""
    table: Dict[str, Dict[str, List[int]]] = collections.defaultdict(
        lambda: {t: [0, 0, 0, 0] for t in results})
    for case in cases:
        for tool, findings in results.items():
            hits = findings.get(case.path, [])
            for key in (case.category, "total"):
                row = table[key][tool]
                if case.kind == "bug":
                    row[1] += 1
                    row[0] += found(case, hits)
                else:
                    row[3] += 1
                    row[2] += bool(hits)
    return table


def _pct(a: int, b: int) -> str:
    return f"{a}/{b} ({100 * a / b:.0f}%)" if b else "-"


def render(cases: Sequence[Case], table: Dict[str, Dict[str, List[int]]], tool_names: List[str]) -> str:
    n_bug = sum(c.kind == "bug" for c in cases)
    n_fixed = sum(c.kind == "fixed" for c in cases)
    n_neg = sum(c.kind == "negative" for c in cases)
    sources = {s for c in cases if c.kind == "bug" for s in c.sources}
    lines = [f"Real-bug benchmark, {datetime.date.today().isoformat()}: {n_bug} bugs from "
             f"{len(sources)} distinct sources, {n_fixed} fixed twins, {n_neg} negatives.", "",
             "Recall (bugs found within 2 lines of the BUG line) and false positives (fixed twins "
             "and negatives with any finding):", ""]
    head = "| category | rule | " + " | ".join(f"{t} recall | {t} FP" for t in tool_names) + " |"
    lines += [head, "|" + "---|" * (2 + 2 * len(tool_names))]
    cats = sorted((k for k in table if k != "total"), key=lambda k: (CATEGORIES.get(k) is None,
                                                                     CATEGORIES.get(k) or "", k))
    for key in cats + ["total"]:
        rule = CATEGORIES.get(key) or ("" if key == "total" else "none")
        cells = []
        for t in tool_names:
            f, b, fp, clean = table[key][t]
            cells += [_pct(f, b), f"{fp}/{clean}" if clean else "-"]
        name = "**total**" if key == "total" else key
        lines.append(f"| {name} | {rule} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def per_case(cases: Sequence[Case], results: Dict[str, tools.Findings]) -> str:
    rows = ["| file | category | " + " | ".join(results) + " |", "|" + "---|" * (2 + len(results))]
    for c in cases:
        cells = []
        for t, fs in results.items():
            hits = fs.get(c.path, [])
            if c.kind == "bug":
                where = placement(c, hits)
                cells.append({"at": "found", "near": "found (within 2)"}.get(where)
                             or ("miss" + (f" ({len(hits)} elsewhere)" if hits else "")))
            else:
                cells.append("FP " + ",".join(f"{code}@{ln}" for ln, code in hits) if hits else "clean")
        rows.append(f"| {c.name} | {c.category} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _report_verify(cases: Sequence[Case], jobs: int) -> int:
    problems = tools.verify(cases, jobs)
    bad = {p: v for p, v in problems.items() if v}
    for c in cases:
        status = "ok" if not problems[c.path] else "FAIL: " + "; ".join(problems[c.path])
        print(f"{c.name}: {status}")
    print(f"{len(cases) - len(bad)} behave as labelled, {len(bad)} do not.")
    return 1 if bad else 0


def found_split(case: SplitCase, hits: tools.Findings) -> bool:
    """Found: a finding within 2 lines of a ``# BUG`` line in the same file."""
    return any(abs(line - b) <= WINDOW for path, b, _ in case.bug_sites for line, _ in hits.get(path, []))


def _fp_cell(case: SplitCase, hits: tools.Findings) -> str:
    where = [f"{code}@{os.path.relpath(p, case.path)}:{ln}" for p, fs in sorted(hits.items()) for ln, code in fs]
    return ("FP " + ",".join(where)) if where else "clean"


def run_split(split: Sequence[SplitCase], jobs: int, show_cases: bool, json_out: str = "") -> int:
    """Score gradlint static on the split cases and, side by side, on their single-file originals."""
    originals = {c.path: c.original for c in split}
    single_cases = [c for c in load() if c.path in set(originals.values())]
    single = tools.gradlint_static(single_cases, jobs)
    by_path = {c.path: c for c in single_cases}
    split_hits = tools.gradlint_static_split(split, jobs)
    if json_out:
        with open(json_out, "w", encoding="utf-8") as fh:
            json.dump({"single-file": {os.path.relpath(p, tools.REPO): v for p, v in single.items()},
                       "split": {os.path.relpath(d, tools.REPO): {os.path.relpath(p, d): v for p, v in r.items()}
                                 for d, r in split_hits.items()}}, fh, indent=1)
    bugs = [c for c in split if c.kind == "bug"]
    twins = [c for c in split if c.kind == "fixed"]
    # per category: [cases, single found, split found, twins, single FP, split FP]
    table: Dict[str, List[int]] = collections.defaultdict(lambda: [0] * 6)
    rows = ["| split case | category | layout | files | single-file | split | fixed twin (single-file) | fixed twin (split) |",
            "|---|---|---|---:|---|---|---|---|"]
    twin_of = {c.name: c for c in twins}
    for c in bugs:
        orig = by_path.get(c.original)
        s_found = bool(orig) and found(orig, single.get(c.original, []))
        p_found = found_split(c, split_hits[c.path])
        for key in (c.category, "total"):
            table[key][0] += 1
            table[key][1] += s_found
            table[key][2] += p_found
        t = twin_of.get(c.name + "_fixed")
        t_single = t_split = "-"
        if t is not None:
            t_hits = single.get(t.original, [])
            t_single = ("FP " + ",".join(f"{code}@{ln}" for ln, code in t_hits)) if t_hits else "clean"
            t_split = _fp_cell(t, split_hits[t.path])
            for key in (c.category, "total"):
                table[key][3] += 1
                table[key][4] += bool(t_hits)
                table[key][5] += t_split != "clean"
        rows.append(f"| {c.name} | {c.category} | {c.layout} | {len(c.files)} | "
                    f"{'found' if s_found else 'miss'} | {'found' if p_found else 'miss'} | {t_single} | {t_split} |")
    if show_cases:
        print("\n".join(rows))
        print()
    print(f"Split real-bug benchmark, {datetime.date.today().isoformat()}: {len(bugs)} split cases "
          f"({sum('package' in c.layout for c in bugs)} as packages), {len(twins)} fixed twins, "
          f"{sum(len(c.files) for c in split)} files.")
    print()
    print("Recall of gradlint static on the single-file originals (cases/) and on the split layout "
          "(a finding within 2 lines of a BUG line, same file), and false positives on the fixed twins:")
    print()
    print("| category | rule | cases | single-file found | split found | single-file FP on twins | split FP on twins |")
    print("|---|---|---:|---|---|---|---|")
    cats = sorted((k for k in table if k != "total"), key=lambda k: (CATEGORIES.get(k) is None,
                                                                     CATEGORIES.get(k) or "", k))
    for key in cats + ["total"]:
        n, sf, pf, nt, sfp, pfp = table[key]
        name = "**total**" if key == "total" else key
        rule = CATEGORIES.get(key) or ("" if key == "total" else "none")
        print(f"| {name} | {rule} | {n} | {_pct(sf, n)} | {_pct(pf, n)} | {sfp}/{nt} | {pfp}/{nt} |")
    n, sf, pf, nt, sfp, pfp = table["total"]
    print()
    print(f"single-file found {sf}/{n}, split found {pf}/{n}, split FP on twins {pfp}/{nt} "
          f"(single-file FP on twins {sfp}/{nt})")
    return 0


def main(argv: Sequence[str] = ()) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.realbugs", description=__doc__.split("\n")[0])
    ap.add_argument("--runtime", action="store_true", help="also score the runtime monitor (gradlint run)")
    ap.add_argument("--tool", action="append", default=[], choices=["torchfix", "torch-preflight"])
    ap.add_argument("--only", action="append", default=[], help="case numbers or name prefixes")
    ap.add_argument("--cases", action="store_true", help="print one row per case")
    ap.add_argument("--verify", action="store_true", help="run every case on torch and check its label")
    ap.add_argument("--sources", action="store_true", help="print the source list")
    ap.add_argument("--split", action="store_true",
                    help="the split cases (bench/realbugs-split/): score gradlint static on them next to their "
                         "single-file originals, or with --verify run them on torch")
    ap.add_argument("--json", metavar="FILE", help="write the raw findings per tool to FILE")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(list(argv) or None)

    if args.split:
        if args.runtime or args.tool or args.sources:
            ap.error("--split goes with --verify, --cases, --only, --json and -j only")
        split = load_split(args.only or None)
        if not split:
            print("no split cases", file=sys.stderr)
            return 2
        if args.verify:
            return _report_verify(split, args.jobs)
        return run_split(split, args.jobs, args.cases, args.json or "")

    cases = load(args.only or None)
    if not cases:
        print("no cases", file=sys.stderr)
        return 2
    if args.sources:
        print("| case | category | torch behaviour | source |\n|---|---|---|---|")
        for c in cases:
            if c.kind == "bug":
                what = f"{c.expect} {c.exc}: {c.text}".replace(" :", ":").replace("|", "\\|")
                print(f"| {c.name} | {c.category} | {what} | {' '.join(c.sources)} |")
        return 0
    if args.verify:
        return _report_verify(cases, args.jobs)

    results: Dict[str, tools.Findings] = {"static": tools.gradlint_static(cases, args.jobs)}
    if args.runtime:
        results["runtime"] = tools.gradlint_runtime(cases, args.jobs)
        results["union"] = {p: results["static"].get(p, []) + results["runtime"].get(p, [])
                            for p in {c.path for c in cases}}
    for t in args.tool:
        results[t] = tools.peer(t, cases, args.jobs)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({t: {os.path.relpath(p, tools.REPO): v for p, v in r.items()} for t, r in results.items()},
                      fh, indent=1)
    if args.cases:
        print(per_case(cases, results))
        print()
    print(render(cases, score(cases, results), list(results)))
    print()
    print(render_placement(cases, results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
