"""The results cache (``gradlint.cache``): hits and misses, what invalidates an entry, corrupt
entries, ``--no-cache``, ``--cache-dir``, ``gradlint clean``, and findings identical with and
without the cache (fixtures, GL000, noqa, fixes) and for any ``-j``.

Every test runs in its own ``tmp_path`` as the current directory (the default cache lives there).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import gradlint.engine as engine
from gradlint import cache
from gradlint.cli import main
from gradlint.engine import Options, Task, lint_tasks
from gradlint.rule import registry

from conftest import FIXTURES

BAD = "import torch\nx = torch.ones(3, requires_grad=True)\nx.add_(1)\n"
NOQA = BAD.replace("x.add_(1)", "x.add_(1)  # noqa: GL101")
MULTILINE_NOQA = ("import torch\nx = torch.ones(3, requires_grad=True)\n"
                  "y = (  # noqa\n    x.add_(1)\n)\nz = torch.ones(2, requires_grad=True)\nz.mul_(2)\n")
SYNTAX = "def f(:\n    pass\n"  # GL000 through the pre-filter path (no torch)
SYNTAX_TORCH = "import torch\ndef f(:\n    pass\n"  # GL000 from the libcst path
CLEAN = "import torch\nx = torch.ones(3)\ny = x + 1\n"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GRADLINT_CACHE_DIR", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # click < 8.2
    except TypeError:
        return CliRunner()


def cli(*args: str, input=None):
    return _runner().invoke(main, list(args), input=input, catch_exceptions=False)


def check(*args: str):
    return cli("check", "-j", "1", *args)


def write(path: Path, text) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def lints(monkeypatch):
    """Counts the files that were really linted (cache misses)."""
    calls = []
    real = engine.lint_data

    def counting(display, data, options, project=None):
        calls.append(display)
        return real(display, data, options, project)

    monkeypatch.setattr(engine, "lint_data", counting)
    return calls


def entries(cache_dir: Path = Path(cache.DEFAULT_DIR)):
    d = cache_dir / cache.LAYOUT
    return sorted(p for p in d.iterdir() if p.suffix == ".json") if d.is_dir() else []


def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    for src in FIXTURES.rglob("*.py"):
        write(proj / src.relative_to(FIXTURES), src.read_bytes())
    write(proj / "syntax.py", SYNTAX)
    write(proj / "syntax_torch.py", SYNTAX_TORCH)
    write(proj / "noqa.py", NOQA)
    write(proj / "multiline_noqa.py", MULTILINE_NOQA)
    write(proj / "latin1.py", b"# -*- coding: latin-1 -*-\nimport torch\ns = '\xe9'\n"
                              b"x = torch.ones(3, requires_grad=True)\nx.add_(1)\n")
    write(proj / "bad_utf8.py", b"import torch\nx = '\xff'\n")
    write(proj / "clean.py", CLEAN)
    write(proj / "same_a.py", BAD)
    write(proj / "sub" / "same_b.py", BAD)  # same bytes as same_a.py: one entry, two paths
    return proj


def full(findings):
    """Everything a Finding holds, the fix included."""
    out = []
    for f in findings:
        fix = None if f.fix is None else (f.fix.edits, f.fix.safe, f.fix.description)
        out.append((f.to_dict(), f.source_line, f.statement_line, fix))
    return out


# ------------------------------------------------------------------------------ hit and miss
def test_second_run_is_served_from_the_cache(tmp_path, lints):
    write(tmp_path / "bad.py", BAD)
    write(tmp_path / "clean.py", CLEAN)
    first = check("bad.py", "clean.py")
    assert first.exit_code == 1 and " GL101 " in first.stdout
    assert sorted(lints) == ["bad.py", "clean.py"]
    assert len(entries()) == 2
    lints.clear()
    second = check("bad.py", "clean.py")
    assert lints == []  # nothing re-linted
    assert (second.exit_code, second.stdout, second.stderr) == (first.exit_code, first.stdout, first.stderr)


def test_cache_dir_has_gitignore_and_tag(tmp_path):
    write(tmp_path / "bad.py", BAD)
    check("bad.py")
    d = tmp_path / cache.DEFAULT_DIR
    assert (d / ".gitignore").read_text().splitlines()[-1] == "*"
    assert (d / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert not [p for p in (d / cache.LAYOUT).iterdir() if p.name.startswith(".tmp-")]


def test_content_change_invalidates(tmp_path, lints):
    f = write(tmp_path / "a.py", CLEAN)
    assert check("a.py").exit_code == 0
    write(f, BAD)
    lints.clear()
    r = check("a.py")
    assert lints == ["a.py"]
    assert r.exit_code == 1 and "a.py:3:1: GL101 " in r.stdout
    # touching without changing the bytes is still a hit
    os.utime(f, (1, 1))
    lints.clear()
    assert check("a.py").stdout == r.stdout and lints == []


def test_rule_selection_invalidates(tmp_path, lints):
    write(tmp_path / "a.py", BAD)
    assert check("a.py").exit_code == 1
    lints.clear()
    r = check("--ignore", "GL101", "a.py")
    assert lints == ["a.py"] and r.exit_code == 0
    lints.clear()
    check("--select", "GL1", "a.py")
    assert lints == ["a.py"]
    lints.clear()
    check("--ignore", "GL101", "a.py")  # each selection has its entry
    assert lints == []


def test_per_file_ignores_and_severity_invalidate(tmp_path, lints):
    write(tmp_path / "a.py", BAD)
    check("a.py")
    write(tmp_path / "pyproject.toml", '[tool.gradlint]\nseverity = { GL101 = "warning" }\n')
    lints.clear()
    r = check("a.py")
    assert lints == ["a.py"] and "1 warning" in r.stdout
    write(tmp_path / "pyproject.toml", '[tool.gradlint]\nper-file-ignores = { "a.py" = ["GL101"] }\n')
    lints.clear()
    r = check("a.py")
    assert lints == ["a.py"] and r.exit_code == 0


def test_code_change_invalidates(tmp_path, lints, monkeypatch):
    write(tmp_path / "a.py", BAD)
    check("a.py")
    fp = cache.code_fingerprint()
    monkeypatch.setattr(cache, "_CODE_FP", "0" * 64)  # as if gradlint/ or rules/ had changed
    lints.clear()
    check("a.py")
    assert lints == ["a.py"]
    monkeypatch.setattr(cache, "_CODE_FP", fp)
    lints.clear()
    check("a.py")
    assert lints == []


def test_code_fingerprint_covers_rules_and_engine():
    labels = [label for label, _ in cache._package_files()]
    assert "gradlint/engine.py" in labels and "gradlint/model/walk.py" in labels
    # (installed from the wheel, the rules are inside the package: gradlint/rules/)
    assert any(label.startswith(("rules/gl101", "gradlint/rules/gl101")) for label in labels)
    assert cache.code_fingerprint() == cache.code_fingerprint()


@pytest.mark.parametrize("garbage", [b"", b"{not json", b'{"findings": [{"line": 1}]}', b"[1, 2]",
                                     b'{"findings": [{"severity": "fatal"}]}', b"\xff\xfe\x00"])
def test_corrupt_entry_is_ignored(tmp_path, lints, garbage):
    write(tmp_path / "a.py", BAD)
    first = check("a.py")
    (entry,) = entries()
    entry.write_bytes(garbage)
    lints.clear()
    again = check("a.py")
    assert lints == ["a.py"]
    assert again.stdout == first.stdout and again.exit_code == 1
    assert json.loads(entry.read_text())["findings"]  # rewritten
    lints.clear()
    assert check("a.py").stdout == first.stdout and lints == []


def test_unwritable_cache_dir_is_skipped(tmp_path):
    write(tmp_path / "a.py", BAD)
    write(tmp_path / "blocker", "a file where the cache directory would be")
    r = check("--cache-dir", "blocker/c", "a.py")
    assert r.exit_code == 1 and " GL101 " in r.stdout and r.stderr == ""


def test_internal_errors_are_not_cached(tmp_path, lints, monkeypatch):
    write(tmp_path / "a.py", BAD)

    def boom(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(engine, "_run_rules", boom)
    assert " GL001 " in check("a.py").stdout
    assert entries() == []


# ------------------------------------------------------------------------------ options
def test_no_cache_neither_reads_nor_writes(tmp_path, lints):
    write(tmp_path / "a.py", BAD)
    check("--no-cache", "a.py")
    assert not (tmp_path / cache.DEFAULT_DIR).exists()
    check("a.py")
    lints.clear()
    check("--no-cache", "a.py")
    assert lints == ["a.py"]  # populated, but not read


def test_cache_dir_option_and_env(tmp_path, lints, monkeypatch):
    write(tmp_path / "a.py", BAD)
    check("--cache-dir", "elsewhere/c", "a.py")
    assert len(entries(tmp_path / "elsewhere" / "c")) == 1
    assert not (tmp_path / cache.DEFAULT_DIR).exists()
    monkeypatch.setenv("GRADLINT_CACHE_DIR", str(tmp_path / "elsewhere" / "c"))
    lints.clear()
    check("a.py")
    assert lints == []


def test_stdin_is_never_cached(tmp_path, lints):
    r = cli("check", "-j", "1", "-", "--stdin-filename", "x.py", input=BAD)
    assert r.exit_code == 1
    r = cli("check", "-j", "1", "-", input=BAD)
    assert r.exit_code == 1
    assert not (tmp_path / cache.DEFAULT_DIR).exists()


def test_same_content_two_paths(tmp_path, lints):
    """Two files with the same text in one folder share an entry; in two folders they do not
    (their imports of the project's modules resolve from their folder: other modules, other
    findings)."""
    write(tmp_path / "a.py", BAD)
    write(tmp_path / "a2.py", BAD)
    write(tmp_path / "b" / "c.py", BAD)
    first = check("a.py", "a2.py", "b/c.py")
    assert len(entries()) == 2
    lints.clear()
    second = check("b/c.py", "a2.py", "a.py")
    assert lints == [] and second.stdout == first.stdout
    assert "b/c.py:3:1: GL101" in second.stdout.replace(os.sep, "/")


# ------------------------------------------------------------------------------ clean
def test_clean_removes_the_cache(tmp_path):
    write(tmp_path / "a.py", BAD)
    write(tmp_path / "b.py", CLEAN)
    check("a.py", "b.py")
    r = cli("clean")
    assert r.exit_code == 0
    assert r.stdout.startswith(f"Removed {cache.DEFAULT_DIR} (2 entries, ")
    assert not (tmp_path / cache.DEFAULT_DIR).exists()
    r = cli("clean")
    assert r.exit_code == 0 and r.stdout == f"No cache at {cache.DEFAULT_DIR}.\n"
    # and the cache works again in the same process afterwards
    check("a.py")
    assert len(entries()) == 1


def test_clean_cache_dir_option(tmp_path):
    write(tmp_path / "a.py", BAD)
    check("--cache-dir", "c", "a.py")
    r = cli("clean", "--cache-dir", "c")
    assert r.exit_code == 0 and r.stdout.startswith("Removed c (1 entry, ")
    assert not (tmp_path / "c").exists()


def test_clean_refuses_a_directory_that_is_not_a_cache(tmp_path):
    write(tmp_path / "src" / "keep.py", CLEAN)
    r = cli("clean", "--cache-dir", "src")
    assert r.exit_code == 2
    assert "does not look like a gradlint cache" in r.stderr
    assert (tmp_path / "src" / "keep.py").exists()


# ------------------------------------------------------------------------------ identical findings
def _tasks(proj: Path, cache_dir):
    codes = frozenset(registry())
    files = sorted(str(p) for p in proj.rglob("*.py"))
    return [Task(f, f, Options(codes=codes), cache_dir) for f in files]


def test_identical_findings_with_and_without_cache(tmp_path, monkeypatch):
    proj = project(tmp_path)
    monkeypatch.setattr(engine, "IN_PROCESS_BYTES", 0)  # -j 2 really starts the pool
    reference = full(lint_tasks(_tasks(proj, None), jobs=1))
    codes = {d["code"] for d, *_ in reference}
    assert {"GL000", "GL101", "GL201"} <= codes
    assert any(fix is not None for *_, fix in reference)  # fixes survive the cache too
    assert any(stmt for _, _, stmt, _ in reference)
    for jobs_cold, jobs_warm in ((1, 1), (2, 2), (1, 2), (2, 1)):
        shutil.rmtree(tmp_path / "c", ignore_errors=True)
        cold = full(lint_tasks(_tasks(proj, str(tmp_path / "c")), jobs=jobs_cold))
        warm = full(lint_tasks(_tasks(proj, str(tmp_path / "c")), jobs=jobs_warm))
        assert cold == reference
        assert warm == reference


def test_noqa_and_gl000_through_the_cli(tmp_path, monkeypatch):
    project(tmp_path)
    monkeypatch.setattr(engine, "IN_PROCESS_BYTES", 0)
    args = ("--select", "ALL", "--format", "json", "proj")
    off = cli("check", "-j", "1", "--no-cache", *args)
    cold = cli("check", "-j", "2", *args)
    warm1 = cli("check", "-j", "1", *args)
    warm2 = cli("check", "-j", "2", *args)
    assert off.exit_code == cold.exit_code == warm1.exit_code == warm2.exit_code == 1
    assert off.stdout == cold.stdout == warm1.stdout == warm2.stdout
    rows = json.loads(off.stdout)
    paths = {r["path"].replace(os.sep, "/") for r in rows}
    assert "proj/noqa.py" not in paths and "proj/syntax.py" in paths and "proj/bad_utf8.py" in paths
    assert [r["line"] for r in rows if r["path"].endswith("multiline_noqa.py")] == [7]


def test_fix_works_from_cached_findings(tmp_path):
    src = (FIXTURES / "fixes").glob("*.input.py")
    src = sorted(src)[0]
    write(tmp_path / "a.py", src.read_bytes())
    write(tmp_path / "b.py", src.read_bytes())
    check("a.py")  # populate
    expected = cli("check", "-j", "1", "--no-cache", "--diff", "b.py")
    r = cli("check", "-j", "1", "--diff", "a.py")
    assert r.exit_code == expected.exit_code == 1
    assert r.stdout.replace("a.py", "X") == expected.stdout.replace("b.py", "X")
    assert r.stdout
