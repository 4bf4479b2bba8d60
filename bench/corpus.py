"""Precision on real code: ``python -m bench.corpus SCAN_DIR [--ledger CSV] [--jobs N] [--json]``.

Lints every project of ``bench/corpus.toml`` (public PyTorch projects nobody here has read, at a
pinned commit) with the default rule set, and compares the findings with a hand-triaged ledger
(``bench/corpus-ledger.csv``; columns ``project,path,line,code,verdict,reason``, verdict one of
``true``/``false``/``unclear``; a finding matches a row on project, path, code and line). Prints
the corpus size, the findings not in the ledger (to triage), the ledger rows no longer found, and
the precision per rule and for the error-level findings in total: true / (true + false), with
unclear and untriaged counted apart. GL000/GL001 (a file that does not parse, gradlint failing)
are listed per rule but left out of the error-level total: they are no claim about autograd.
Always exits 0 (2 on a usage error or when gradlint itself cannot run).

Getting the corpus: SCAN_DIR holds one directory per project, ``<owner>+<name>/``, with the
project's ``.py`` files at the commit named in corpus.toml, in the repository's layout (no
symlinks, no other files). For example, for each ``[[project]]``::

    git clone --filter=blob:none https://github.com/OWNER/NAME /tmp/src/OWNER+NAME
    git -C /tmp/src/OWNER+NAME checkout COMMIT
    cd /tmp/src/OWNER+NAME && git ls-files -z -s '*.py' | grep -zv '^120000' | cut -zf2 \\
        | xargs -0 cp --parents -t SCAN_DIR/OWNER+NAME

(or ``git archive COMMIT | tar -x -C SCAN_DIR/OWNER+NAME`` and then delete every file that is
not ``.py``, and every symlink). The ``files`` and ``lines`` of corpus.toml count those files and
their newline-terminated lines; a project whose directory is missing is reported and skipped.

Stdlib only; never imports torch. gradlint (as installed: ``pip install -e .``) runs in a
subprocess, ``python -m gradlint.cli check DIR --format json --no-cache --exit-zero -j N
--config EMPTY`` in a scratch directory: the empty configuration file gives the default rules
and excludes, whatever the projects' own settings, and nothing in a project shadows an import.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from typing import Dict, List, Tuple

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11: the same parser, as gradlint itself uses it
    import tomli as tomllib  # type: ignore[no-redef]

HERE = os.path.dirname(os.path.abspath(__file__))
VERDICTS = ("true", "false", "unclear")
NOT_AUTOGRAD = ("GL000", "GL001")
Key = Tuple[str, str, str, int]  # project, path, code, line


def load_projects(path: str) -> List[dict]:
    with open(path, "rb") as fh:
        projects = tomllib.load(fh).get("project", [])
    for p in projects:
        p["dir"] = p["name"].replace("/", "+", 1)
    return projects


def load_ledger(path: str) -> Dict[Key, dict]:
    rows: Dict[Key, dict] = {}
    if not os.path.exists(path):
        return rows
    with open(path, newline="", encoding="utf-8") as fh:
        for n, row in enumerate(csv.DictReader(fh), start=2):
            if row["verdict"] not in VERDICTS:
                raise SystemExit(f"{path}:{n}: verdict must be one of {', '.join(VERDICTS)}")
            rows[(row["project"], row["path"], row["code"], int(row["line"]))] = row
    return rows


def lint(project_dir: str, config: str, jobs: int) -> List[dict]:
    """Findings of the installed gradlint on one project, paths relative to the project. It runs
    in the (empty) directory of the config, so that nothing in the project shadows its imports."""
    cmd = [sys.executable, "-m", "gradlint.cli", "check", project_dir, "--format", "json",
           "--no-cache", "--exit-zero", "-j", str(jobs), "--config", config]
    proc = subprocess.run(cmd, cwd=os.path.dirname(config), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"gradlint failed on {project_dir} (exit {proc.returncode}): "
                         f"{proc.stderr.strip()[-500:]}")
    findings = json.loads(proc.stdout or "[]")
    for f in findings:
        full = os.path.join(os.path.dirname(config), f["path"])  # absolute paths stay as they are
        f["path"] = os.path.relpath(os.path.realpath(full), os.path.realpath(project_dir)).replace(os.sep, "/")
    return findings


def precision(true: int, false: int) -> str:
    return f"{true / (true + false):.0%}" if true + false else "-"


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.corpus", description=__doc__.split("\n")[0])
    ap.add_argument("scan_dir", help="directory holding one <owner>+<name>/ per project")
    ap.add_argument("--corpus", default=os.path.join(HERE, "corpus.toml"))
    ap.add_argument("--ledger", default=os.path.join(HERE, "corpus-ledger.csv"))
    ap.add_argument("--jobs", "-j", type=int, default=2)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = ap.parse_args(argv)

    projects = load_projects(args.corpus)
    ledger = load_ledger(args.ledger)
    found: Dict[Key, dict] = {}
    missing: List[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "gradlint.toml")
        open(config, "w").close()  # empty: the default selection and excludes
        for p in projects:
            pdir = os.path.join(args.scan_dir, p["dir"])
            if not os.path.isdir(pdir):
                missing.append(p["name"])
                continue
            for f in lint(pdir, config, args.jobs):
                found[(p["name"], f["path"], f["code"], f["line"])] = f

    scanned = [p for p in projects if p["name"] not in missing]
    new = sorted(k for k in found if k not in ledger)
    gone = sorted(k for k in ledger if k not in found)
    per_rule: Dict[str, Counter] = defaultdict(Counter)
    total: Counter = Counter()
    for key, f in found.items():
        verdict = ledger[key]["verdict"] if key in ledger else "untriaged"
        per_rule[key[2]][verdict] += 1
        if f["severity"] == "error" and key[2] not in NOT_AUTOGRAD:
            total[verdict] += 1

    report = {
        "corpus": {"projects": len(scanned), "files": sum(p["files"] for p in scanned),
                   "lines": sum(p["lines"] for p in scanned), "missing": missing},
        "new": [{"project": k[0], "path": k[1], "line": k[3], "code": k[2],
                 "message": found[k]["message"]} for k in new],
        "gone": [dict(ledger[k]) for k in gone],
        "precision": {code: dict(c, precision=precision(c["true"], c["false"]))
                      for code, c in sorted(per_rule.items())},
        "error_total": dict(total, precision=precision(total["true"], total["false"])),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0

    c = report["corpus"]
    print(f"corpus: {c['projects']} projects, {c['files']} files, {c['lines']} lines")
    for name in missing:
        print(f"  missing (not scanned): {name}")
    print(f"\nnew findings, not in the ledger ({len(new)}):")
    for k in new:
        print(f"  {k[0]}  {k[1]}:{k[3]}  {k[2]}  {found[k]['message']}")
    print(f"\nledger rows no longer found ({len(gone)}):")
    for k in gone:
        print(f"  {k[0]}  {k[1]}:{k[3]}  {k[2]}  ({ledger[k]['verdict']}: {ledger[k]['reason']})")
    print("\n| rule | findings | true | false | unclear | untriaged | precision |")
    print("|---|---|---|---|---|---|---|")
    rows = list(sorted(per_rule.items())) + [("error-level total (GL1xx-GL7xx)", total)]
    for code, cnt in rows:
        n = sum(cnt[v] for v in VERDICTS + ("untriaged",))
        print(f"| {code} | {n} | {cnt['true']} | {cnt['false']} | {cnt['unclear']} | "
              f"{cnt['untriaged']} | {precision(cnt['true'], cnt['false'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
