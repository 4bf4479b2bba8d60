"""Running the cases: on torch (``verify``), and under each tool (findings as ``{file: [(line,
code)]}``). Every run is a subprocess in a scratch directory, so a case never writes into the
repository and a crash in one case does not stop the others."""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Sequence, Tuple

from bench.realbugs import Case, SplitCase

Findings = Dict[str, List[Tuple[int, str]]]  # absolute path -> [(line, code)]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT = 60


def _env(repo_on_path: bool = True) -> Dict[str, str]:
    env = dict(os.environ)
    # a case runs as a user runs it (`python train.py` puts the script's folder on sys.path), not
    # under the PYTHONSAFEPATH that CI sets for its own processes
    env.pop("PYTHONSAFEPATH", None)
    if repo_on_path:
        # GRADLINT_SRC: score another checkout of gradlint (e.g. a worktree of an older commit)
        env["PYTHONPATH"] = os.environ.get("GRADLINT_SRC", REPO) + os.pathsep + REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONWARNINGS"] = "default"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(cmd: Sequence[str], cwd: str, timeout: int = TIMEOUT, repo_on_path: bool = True) -> Tuple[int, str, str]:
    try:
        p = subprocess.run(cmd, cwd=cwd, env=_env(repo_on_path), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return -999, "", f"timed out after {timeout} s"
    return p.returncode, p.stdout, p.stderr


def _pool(fn, items, jobs: int):  # type: ignore[no-untyped-def]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        return list(ex.map(fn, items))


# ---------------------------------------------------------------------------- verify on torch
def verify_one(case: Case) -> List[str]:
    """What is wrong with ``case`` on torch (empty when it behaves as labelled)."""
    if isinstance(case, SplitCase):
        return verify_split_one(case)
    with tempfile.TemporaryDirectory() as tmp:
        rc, out, err = _run([sys.executable, case.path], tmp)
    return judge(case, rc, out, err)


def verify_split_one(case: SplitCase) -> List[str]:
    """Run the entry script as a user would (``python train.py`` with the case directory as the
    current directory, so Python puts it first on sys.path), in a copy of the directory so that
    a case never writes into the repository; the repository is not on PYTHONPATH."""
    if not case.entry or case.entry not in case.files:
        return list(case.problems) or ["no entry script"]
    with tempfile.TemporaryDirectory() as tmp:
        work = os.path.join(tmp, case.name)
        shutil.copytree(case.path, work, ignore=shutil.ignore_patterns("__pycache__"))
        rc, out, err = _run([sys.executable, os.path.basename(case.entry)],
                            os.path.join(work, os.path.dirname(case.entry)), repo_on_path=False)
    return judge(case, rc, out, err)


def judge(case: Case, rc: int, out: str, err: str) -> List[str]:
    """The problems of one run of ``case`` against its label (plus the problems of its files)."""
    problems = list(case.problems)
    tail = err.strip().splitlines()[-1] if err.strip() else ""
    if rc == -999:
        return problems + [err]
    if case.expect == "raises":
        if rc == 0:
            problems.append(f"expected {case.exc} but the script exited 0")
        elif not (tail.startswith(case.exc) or f".{case.exc}:" in tail) or case.text not in err:
            problems.append(f"expected {case.exc}: {case.text!r}; got: {tail[:200]}")
    elif rc != 0:
        problems.append(f"expected to run to the end; exit {rc}: {tail[:200]}")
    elif case.expect == "warns":
        if case.exc not in err or case.text not in err:
            problems.append(f"expected the warning {case.exc}: {case.text!r}; stderr: {err.strip()[:200]!r}")
    elif case.expect == "silent":
        if "EVIDENCE:" not in out:
            problems.append("a silent case must print an 'EVIDENCE:' line")
    return problems


def verify(cases: Sequence[Case], jobs: int) -> Dict[str, List[str]]:
    results = _pool(verify_one, cases, jobs)
    return {c.path: r for c, r in zip(cases, results)}


# ---------------------------------------------------------------------------- tools
def gradlint_static(cases: Sequence[Case], jobs: int) -> Findings:
    files = [c.path for c in cases]
    rc, out, err = _run([sys.executable, "-m", "gradlint.cli", "check", "--format", "json", "--no-cache",
                         "--exit-zero", "-j", str(jobs), *files], REPO, timeout=600)
    if rc != 0:
        raise SystemExit(f"gradlint check failed ({rc}): {err.strip()[-500:]}")
    found: Findings = {f: [] for f in files}
    for item in json.loads(out):
        path = os.path.abspath(os.path.join(REPO, item["path"]))
        found.setdefault(path, []).append((item["line"], item["code"]))
    return found


def gradlint_static_split(cases: Sequence[SplitCase], jobs: int) -> Dict[str, Findings]:
    """``gradlint check . `` once per case directory, run from that directory (as a user checks a
    project, and so that a project-aware gradlint can follow the imports): {case directory:
    {absolute file: [(line, code)]}}, every Python file of the case present."""
    def one(case: SplitCase) -> Findings:
        rc, out, err = _run([sys.executable, "-m", "gradlint.cli", "check", "--format", "json", "--no-cache",
                             "--exit-zero", "-j", "1", "."], case.path, timeout=300)
        if rc != 0:
            raise SystemExit(f"gradlint check failed in {case.name} ({rc}): {err.strip()[-500:]}")
        found: Findings = {os.path.join(case.path, f): [] for f in case.files}
        for item in json.loads(out):
            path = os.path.normpath(os.path.join(case.path, item["path"]))
            found.setdefault(path, []).append((item["line"], item["code"]))
        return found
    return dict(zip((c.path for c in cases), _pool(one, cases, jobs)))


def gradlint_runtime(cases: Sequence[Case], jobs: int) -> Findings:
    def one(case: Case) -> List[Tuple[int, str]]:
        with tempfile.TemporaryDirectory() as tmp:
            report = os.path.join(tmp, "report.json")
            _run([sys.executable, "-m", "gradlint.cli", "run", "--output", report, "--format", "json",
                  case.path], tmp)
            if not os.path.exists(report):
                return []
            with open(report, encoding="utf-8") as fh:
                items = json.load(fh)
        mine = os.path.realpath(case.path)
        return [(i["line"], i["code"]) for i in items
                if os.path.realpath(os.path.join(tmp, i["path"])) == mine
                or os.path.basename(i["path"]) == os.path.basename(case.path)]
    return dict(zip((c.path for c in cases), _pool(one, cases, jobs)))


_LOCATION = re.compile(r"^(?P<path>[^\s:][^:]*\.py):(?P<line>\d+)(?::\d+)?:?\s*(?P<code>[A-Z]+[0-9]*)?")
_GITHUB = re.compile(r"^::\w+ file=(?P<path>[^,]+\.py),line=(?P<line>\d+)(?:.*?title=(?P<code>[A-Z]+[0-9]+))?")


def find_peer(name: str) -> Optional[str]:
    """The peer's executable: on PATH, or in ``$GRADLINT_PEERS_BIN`` (a virtualenv's bin/)."""
    extra = os.environ.get("GRADLINT_PEERS_BIN")
    if extra and os.path.exists(os.path.join(extra, name)):
        return os.path.join(extra, name)
    return shutil.which(name)


def peer(name: str, cases: Sequence[Case], jobs: int) -> Findings:
    exe = find_peer(name)
    if exe is None:
        raise SystemExit(f"{name} is not installed (put it on PATH or set GRADLINT_PEERS_BIN)")

    def one(case: Case) -> List[Tuple[int, str]]:
        if name == "torchfix":
            cmd = [exe, "--select", "ALL", case.path]
        else:  # torch-preflight
            cmd = [exe, "check", "--format", "github", "-j", "1", case.path]
        rc, out, err = _run(cmd, os.path.dirname(case.path), timeout=120)
        hits = []
        for line in (out + "\n" + err).splitlines():
            m = _LOCATION.match(line.strip()) or _GITHUB.match(line.strip())
            if m and os.path.basename(m.group("path")) == os.path.basename(case.path):
                hits.append((int(m.group("line")), m.group("code") or name))
        return hits
    return dict(zip((c.path for c in cases), _pool(one, cases, jobs)))
