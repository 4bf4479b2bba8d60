"""The supported torch range, measured: ``python -m bench.torch_matrix [VERSION ...]``.

For each torch version (default: ``VERSIONS``) it makes a fresh virtual environment, installs that
torch from the package index, the gradlint wheel built from this checkout and what the tests
need, and runs the tests that execute torch: every fixture example on torch (``test_fixtures``:
bad examples raise/warn/compute the wrong value as declared, good ones compute the right value),
the runtime monitor on every example (``test_runtime``) and on correct idioms
(``test_runtime_idioms``), and the end-to-end run of the installed package
(``test_installed``). Prints a Markdown table: version, passed, failed, skipped, and the failed
tests by name (``--failures``). Environments are kept under ``--store`` (default: a folder in the
system's temporary directory), so a second run of a version reuses them.

torch wheels of other versions are large (a CUDA build on Linux: about 0.5-1 GB plus its NVIDIA
libraries); on this project's machines the package index serves them at 20 MB/s or so.
A pip configuration that caps torch (``constraint = ...``) is ignored for these environments
(``PIP_CONSTRAINT`` pointed at an empty file: an empty value does not override the configuration
file), since each asks for one exact version.

Never imported by the tests; stdlib only.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from typing import Dict, List, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the oldest supported (see README: torch.overrides.TorchFunctionMode as a context manager, the
# global optimizer hooks and torch.autograd.graph.saved_tensors_hooks), a middle one, the pinned
# CI version and the current release
VERSIONS = ("2.4.1", "2.11.0", "2.13.0", "2.15.0")
TESTS = ("tests/test_fixtures.py", "tests/test_runtime.py", "tests/test_runtime_idioms.py",
         "tests/test_installed.py")
EXTRA = ("pytest>=7", "numpy>=1.22", "click>=8.0", "libcst>=1.0")


def _env() -> Dict[str, str]:
    env = dict(os.environ)
    env["PIP_CONSTRAINT"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PYTHONSAFEPATH"] = "1"
    return env


def _run(cmd: List[str], **kw) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
    return subprocess.run(cmd, env=_env(), capture_output=True, text=True, **kw)


def build_wheel(out: str) -> str:
    done = _run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", out, REPO])
    if done.returncode != 0:
        raise SystemExit("building the wheel failed:\n" + done.stdout[-2000:] + done.stderr[-2000:])
    (wheel,) = glob.glob(os.path.join(out, "*.whl"))
    return wheel


def environment(store: str, version: str, wheel: str) -> Tuple[str, str]:
    """(python of the version's environment, "" or what went wrong)."""
    venv = os.path.join(store, f"torch-{version}")
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        done = _run([sys.executable, "-m", "venv", venv])
        if done.returncode != 0:
            return py, done.stderr.strip()[-300:]
    have = _run([py, "-c", "import torch; print(torch.__version__)"])
    if have.returncode != 0 or not have.stdout.strip().startswith(version):
        done = _run([py, "-m", "pip", "install", "-q", f"torch=={version}"], timeout=3600)
        if done.returncode != 0:
            return py, "pip install torch failed: " + (done.stderr.strip().splitlines() or [""])[-1][:300]
    done = _run([py, "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps", wheel])
    if done.returncode == 0:
        done = _run([py, "-m", "pip", "install", "-q", *EXTRA])
    if done.returncode != 0:
        return py, "pip install gradlint failed: " + (done.stderr.strip().splitlines() or [""])[-1][:300]
    return py, ""


def run_tests(py: str, tests: List[str], report: str, timeout: int) -> Tuple[Dict[str, int], List[str], str]:
    cmd = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *tests]
    try:
        done = subprocess.run(cmd, cwd=REPO, env=dict(_env(), GRADLINT_TEST_INSTALLED="1"), capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {}, [], f"timed out after {timeout} s"
    if not os.path.exists(report):
        return {}, [], (done.stdout + done.stderr).strip()[-500:]
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    failed: List[str] = []
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            counts["failed"] += 1
            failed.append(name)
        elif case.find("skipped") is not None:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return counts, failed, ""


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.torch_matrix", description=__doc__.split("\n\n")[0])
    ap.add_argument("versions", nargs="*", default=list(VERSIONS))
    ap.add_argument("--store", default=os.path.join(tempfile.gettempdir(), "gradlint-torch-matrix"))
    ap.add_argument("--tests", action="append", help=f"test files to run (default: {' '.join(TESTS)})")
    ap.add_argument("--failures", action="store_true", help="list the failed tests of each version")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds for one version's tests")
    args = ap.parse_args(argv)
    os.makedirs(args.store, exist_ok=True)
    out = tempfile.mkdtemp(prefix="gradlint-wheel-")
    try:
        wheel = build_wheel(out)
        rows = []
        for version in args.versions:
            py, problem = environment(args.store, version, wheel)
            if problem:
                rows.append((version, {}, [], problem))
                print(f"torch {version}: {problem}", file=sys.stderr)
                continue
            report = os.path.join(out, f"report-{version}.xml")
            counts, failed, problem = run_tests(py, list(args.tests or TESTS), report, args.timeout)
            rows.append((version, counts, failed, problem))
            print(f"torch {version}: {counts} {problem}", file=sys.stderr)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print("| torch | passed | failed | skipped | note |\n|---|---:|---:|---:|---|")
    for version, counts, failed, problem in rows:
        print(f"| {version} | {counts.get('passed', '-')} | {counts.get('failed', '-')} | "
              f"{counts.get('skipped', '-')} | {problem or ''} |")
    if args.failures:
        for version, _, failed, _ in rows:
            if failed:
                print(f"\n### torch {version}: {len(failed)} failed\n")
                for name in failed:
                    print(f"- `{re.sub(r'[|]', '/', name)}`")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
