"""Configuration: ``[tool.gradlint]`` in the nearest ``pyproject.toml`` or ``gradlint.toml``,
``--config``, validation of every key, per-file-ignores, exclude / extend-exclude, per-rule
severity, and how command-line options combine with the file.

The CLI tests run ``gradlint check -j 1`` in-process with the test's ``tmp_path`` as the
current directory; a few test ``gradlint.config`` directly.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from gradlint.cli import main
from gradlint.config import DEFAULT_EXCLUDE, ConfigError, Settings, find_config, load_settings
from gradlint.discovery import discover
from gradlint.rule import Severity, registry

BAD = "import torch\nx = torch.ones(3, requires_grad=True)\nx.add_(1)\n"  # GL101 at 3:1
WARN = (  # GL201 at 6:1, a warning
    "import torch\n"
    "import torch.nn as nn\n"
    "layer = nn.Linear(3, 2)\n"
    "x = torch.ones(1, 3)\n"
    "out = layer(x)\n"
    "out.numpy()\n"
)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # click < 8.2
    except TypeError:
        return CliRunner()


def check(*args: str):
    return _runner().invoke(main, ["check", "-j", "1", *args], catch_exceptions=False)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def pyproject(directory: Path, body: str) -> Path:
    return write(directory / "pyproject.toml", "[project]\nname = 'x'\n\n[tool.gradlint]\n" + body)


def reported(result):
    """(path, code) of every finding line, paths with forward slashes."""
    out = []
    for line in result.stdout.splitlines():
        if ": GL" in line:
            path, rest = line.split(":", 1)
            out.append((path.replace(os.sep, "/"), rest.split()[1]))
    return out


def config_error(result, *needles: str) -> str:
    assert result.exit_code == 2, result.stdout
    assert result.stdout == ""
    err = result.stderr
    assert len(err.splitlines()) == 1, err
    assert err.startswith("gradlint: error: ")
    assert "Traceback" not in err
    for n in needles:
        assert n in err, err
    return err


@pytest.fixture
def both(tmp_path):
    write(tmp_path / "bad.py", BAD)
    write(tmp_path / "warn.py", WARN)
    return ("bad.py", "warn.py")


# ------------------------------------------------------------------------------ finding a file
def test_pyproject_in_cwd(tmp_path, both):
    pyproject(tmp_path, 'select = ["GL201"]\n')
    assert reported(check(*both)) == [("warn.py", "GL201")]


def test_pyproject_in_a_parent_directory(tmp_path):
    pyproject(tmp_path, 'ignore = ["GL101"]\n')
    sub = tmp_path / "src" / "pkg"
    write(sub / "bad.py", BAD)
    os.chdir(sub)
    r = check("bad.py")
    assert r.exit_code == 0 and reported(r) == []


def test_pyproject_without_our_table_is_passed_over(tmp_path):
    pyproject(tmp_path, 'ignore = ["GL101"]\n')
    sub = tmp_path / "sub"
    write(sub / "pyproject.toml", "[project]\nname = 'inner'\n[tool.other]\nx = 1\n")
    write(sub / "bad.py", BAD)
    os.chdir(sub)
    assert check("bad.py").exit_code == 0  # the outer [tool.gradlint] applies
    assert find_config(sub) == tmp_path / "pyproject.toml"


def test_nearest_config_wins(tmp_path):
    pyproject(tmp_path, 'ignore = ["GL101"]\n')
    sub = tmp_path / "sub"
    pyproject(sub, 'ignore = ["GL201"]\n')
    write(sub / "bad.py", BAD)
    os.chdir(sub)
    assert reported(check("bad.py")) == [("bad.py", "GL101")]


def test_no_config_means_defaults(tmp_path, both):
    assert reported(check(*both)) == [("bad.py", "GL101"), ("warn.py", "GL201")]


def test_gradlint_toml_top_level_keys(tmp_path, both):
    write(tmp_path / "gradlint.toml", 'select = ["GL1"]\n')
    assert reported(check(*both)) == [("bad.py", "GL101")]


def test_gradlint_toml_with_tool_table(tmp_path, both):
    write(tmp_path / "gradlint.toml", '[tool.gradlint]\nselect = ["GL2"]\n')
    assert reported(check(*both)) == [("warn.py", "GL201")]


def test_gradlint_toml_beats_pyproject_in_the_same_directory(tmp_path, both):
    pyproject(tmp_path, 'select = ["GL1"]\n')
    write(tmp_path / "gradlint.toml", 'select = ["GL2"]\n')
    assert reported(check(*both)) == [("warn.py", "GL201")]


def test_config_option(tmp_path, both):
    write(tmp_path / "conf" / "mine.toml", 'select = ["GL201"]\n')
    pyproject(tmp_path, 'select = ["GL101"]\n')  # not read: --config wins
    assert reported(check("--config", "conf/mine.toml", *both)) == [("warn.py", "GL201")]


def test_config_option_pyproject(tmp_path, both):
    pyproject(tmp_path / "elsewhere", 'ignore = ["GL101"]\n')
    assert reported(check("--config", str(tmp_path / "elsewhere" / "pyproject.toml"), *both)) == [
        ("warn.py", "GL201")
    ]


def test_config_option_missing_file(tmp_path, both):
    config_error(check("--config", "nope.toml", *both), "nope.toml")


def test_load_settings_unknown_key(tmp_path):
    with pytest.raises(ConfigError, match="unknown key `colour`"):
        load_settings(write(tmp_path / "g.toml", "colour = true\n"))


# ---------------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "body, needles",
    [
        ("bogus = 1\n", ["unknown key", "`bogus`"]),
        ("line-length = 88\n", ["`line-length`"]),
        ("select = 3\n", ["`select`"]),
        ('select = ["GL101", 3]\n', ["`select`"]),
        ("ignore = {GL101 = true}\n", ["`ignore`"]),
        ("extend-select = 1.5\n", ["`extend-select`"]),
        ("exclude = 3\n", ["`exclude`"]),
        ("extend-exclude = [1]\n", ["`extend-exclude`"]),
        ('fail-on = "fatal"\n', ["`fail-on`", "fatal"]),
        ("fail-on = 3\n", ["`fail-on`"]),
        ('per-file-ignores = ["GL101"]\n', ["`per-file-ignores`"]),
        ('per-file-ignores = {"tests/*" = 3}\n', ["per-file-ignores", "tests/*"]),
        ('per-file-ignores = {"tests/*" = ["GL999"]}\n', ["per-file-ignores", "GL999"]),
        ('severity = "warning"\n', ["`severity`"]),
        ('severity = {GL101 = "info"}\n', ["GL101", "info"]),
        ("severity = {GL101 = 1}\n", ["GL101"]),
        ('severity = {GL999 = "warning"}\n', ["GL999"]),
        ('select = ["GL999"]\n', ["`select`", "GL999"]),
        ('ignore = ["nonsense"]\n', ["`ignore`", "nonsense"]),
        ('extend-select = ["GL9"]\n', ["`extend-select`", "GL9"]),
    ],
)
def test_bad_config_is_a_one_line_error(tmp_path, both, body, needles):
    path = pyproject(tmp_path, body)
    config_error(check(*both), str(path), *needles)


def test_bad_config_in_gradlint_toml_names_the_file(tmp_path, both):
    path = write(tmp_path / "gradlint.toml", "select = 3\n")
    config_error(check(*both), str(path), "`select`")


def test_invalid_toml(tmp_path, both):
    write(tmp_path / "gradlint.toml", "select = [\n")
    config_error(check(*both), "gradlint.toml", "invalid TOML")


def test_invalid_toml_in_a_pyproject_meant_for_us_is_reported(tmp_path, both):
    write(tmp_path / "pyproject.toml", "[tool.gradlint\nselect = ['GL101']\n")
    config_error(check(*both), "pyproject.toml", "invalid TOML")


def test_tool_gradlint_not_a_table(tmp_path, both):
    write(tmp_path / "pyproject.toml", "[tool]\ngradlint = 3\n")
    config_error(check(*both), "must be a table")


def test_empty_table_is_fine(tmp_path, both):
    pyproject(tmp_path, "")
    assert reported(check(*both)) == [("bad.py", "GL101"), ("warn.py", "GL201")]


def test_string_instead_of_list_is_accepted(tmp_path, both):
    pyproject(tmp_path, 'select = "GL201"\n')
    assert reported(check(*both)) == [("warn.py", "GL201")]


# ----------------------------------------------------------------------- selection and fail-on
def test_ignore_and_extend_select_in_config(tmp_path, both):
    pyproject(tmp_path, 'select = ["GL1"]\nextend-select = ["GL201"]\nignore = ["GL101"]\n')
    assert reported(check(*both)) == [("warn.py", "GL201")]


def test_cli_select_replaces_config_select(tmp_path, both):
    pyproject(tmp_path, 'select = ["GL101"]\n')
    assert reported(check("--select", "GL201", *both)) == [("warn.py", "GL201")]


def test_cli_ignore_adds_to_config_ignore(tmp_path, both):
    pyproject(tmp_path, 'ignore = ["GL101"]\n')
    r = check("--ignore", "GL201", *both)
    assert reported(r) == [] and r.exit_code == 0


def test_fail_on_error_in_config(tmp_path):
    write(tmp_path / "warn.py", WARN)
    pyproject(tmp_path, 'fail-on = "error"\n')
    r = check("warn.py")
    assert r.exit_code == 0
    assert reported(r) == [("warn.py", "GL201")]
    write(tmp_path / "bad.py", BAD)
    assert check("warn.py", "bad.py").exit_code == 1


def test_cli_fail_on_overrides_config(tmp_path):
    write(tmp_path / "warn.py", WARN)
    pyproject(tmp_path, 'fail-on = "error"\n')
    assert check("--fail-on", "warning", "warn.py").exit_code == 1


def test_exit_zero_beats_config(tmp_path):
    write(tmp_path / "bad.py", BAD)
    pyproject(tmp_path, 'fail-on = "warning"\n')
    assert check("--exit-zero", "bad.py").exit_code == 0


# --------------------------------------------------------------------------------- severity
def test_severity_override(tmp_path):
    write(tmp_path / "bad.py", BAD)
    pyproject(tmp_path, 'severity = {GL101 = "warning"}\n')
    r = check("bad.py")
    assert r.stdout.splitlines()[-1] == "Found 0 errors, 1 warning in 1 file."
    assert r.exit_code == 1  # warnings still fail by default
    r = check("--format", "json", "bad.py")
    assert [f["severity"] for f in json.loads(r.stdout)] == ["warning"]
    r = check("--format", "github", "bad.py")
    assert r.stdout.startswith("::warning file=bad.py,")


def test_severity_override_with_fail_on_error(tmp_path):
    write(tmp_path / "bad.py", BAD)
    pyproject(tmp_path, 'severity = {gl101 = "Warning"}\nfail-on = "error"\n')
    r = check("bad.py")
    assert r.exit_code == 0
    assert reported(r) == [("bad.py", "GL101")]


def test_severity_override_upgrades_a_warning(tmp_path):
    write(tmp_path / "warn.py", WARN)
    pyproject(tmp_path, 'severity = {GL201 = "error"}\nfail-on = "error"\n')
    r = check("warn.py")
    assert r.exit_code == 1
    assert r.stdout.splitlines()[-1] == "Found 1 error, 0 warnings in 1 file."


def test_severity_override_applies_to_stdin(tmp_path):
    pyproject(tmp_path, 'severity = {GL101 = "warning"}\n')
    r = _runner().invoke(main, ["check", "-", "--stdin-filename", "x.py", "--format", "json"],
                         input=BAD.encode())
    assert [f["severity"] for f in json.loads(r.stdout)] == ["warning"]


# ------------------------------------------------------------------------- per-file-ignores
def test_per_file_ignores(tmp_path):
    pyproject(tmp_path, 'per-file-ignores = {"tests/*" = ["GL101"]}\n')
    write(tmp_path / "tests" / "test_a.py", BAD + "y = torch.ones(2, requires_grad=True)\ny.numpy()\n")
    write(tmp_path / "src" / "a.py", BAD)
    r = check()
    assert reported(r) == [("src/a.py", "GL101"), ("tests/test_a.py", "GL201")]
    # the same when the files are named explicitly, or with ./ in front
    assert reported(check("tests/test_a.py", "./src/a.py")) == [
        ("./src/a.py", "GL101"), ("tests/test_a.py", "GL201")
    ]


def test_per_file_ignores_relative_to_the_config_from_a_subdirectory(tmp_path):
    pyproject(tmp_path, 'per-file-ignores = {"tests/*" = ["GL1"], "*_gen.py" = ["ALL"]}\n')
    write(tmp_path / "tests" / "test_a.py", BAD)
    write(tmp_path / "src" / "model_gen.py", BAD)
    write(tmp_path / "src" / "tests" / "b.py", BAD)  # src/tests/ is not tests/
    os.chdir(tmp_path / "tests")
    assert check("test_a.py").exit_code == 0
    os.chdir(tmp_path / "src")
    assert reported(check(".")) == [("tests/b.py", "GL101")]


def test_per_file_ignores_applies_to_stdin_filename(tmp_path):
    pyproject(tmp_path, 'per-file-ignores = {"tests/*" = ["GL101"]}\n')
    r = _runner().invoke(main, ["check", "-", "--stdin-filename", "tests/t.py"], input=BAD.encode())
    assert r.exit_code == 0
    r = _runner().invoke(main, ["check", "-", "--stdin-filename", "src/t.py"], input=BAD.encode())
    assert r.exit_code == 1


def test_per_file_ignores_double_star(tmp_path):
    pyproject(tmp_path, 'per-file-ignores = {"**/legacy/**" = ["GL101"]}\n')
    write(tmp_path / "legacy" / "a.py", BAD)
    write(tmp_path / "pkg" / "legacy" / "deep" / "b.py", BAD)
    write(tmp_path / "pkg" / "c.py", BAD)
    assert reported(check()) == [("pkg/c.py", "GL101")]


# ---------------------------------------------------------------------------------- exclude
def test_extend_exclude(tmp_path):
    pyproject(tmp_path, 'extend-exclude = ["vendor", "gen/*.py", "*_pb2.py"]\n')
    for p in ("vendor/v.py", "pkg/vendor/v.py", "gen/g.py", "pkg/gen/keep.py", "pkg/api_pb2.py",
              "pkg/a.py", "build/b.py"):
        write(tmp_path / p, BAD)
    r = check()
    # a pattern with "/" is relative to the config root; build/ stays excluded: extend-exclude
    # adds to the defaults
    assert reported(r) == [("pkg/a.py", "GL101"), ("pkg/gen/keep.py", "GL101")]


def test_exclude_replaces_the_defaults(tmp_path):
    pyproject(tmp_path, 'exclude = ["vendor"]\n')
    write(tmp_path / "vendor" / "v.py", BAD)
    write(tmp_path / "build" / "b.py", BAD)
    assert reported(check()) == [("build/b.py", "GL101")]


def test_exclude_applies_to_explicit_files(tmp_path):
    pyproject(tmp_path, 'extend-exclude = ["vendor", "gen/*.py", "*_pb2.py"]\n')
    for p in ("vendor/x/v.py", "gen/g.py", "pkg/api_pb2.py", "pkg/a.py"):
        write(tmp_path / p, BAD)
    # as a pre-commit hook would call it
    r = check("vendor/x/v.py", "gen/g.py", "pkg/api_pb2.py", "pkg/a.py")
    assert reported(r) == [("pkg/a.py", "GL101")]
    r = check("vendor/x/v.py")
    assert r.exit_code == 0 and r.stdout == "All checks passed (0 files checked).\n"


def test_exclude_from_a_subdirectory(tmp_path):
    pyproject(tmp_path, 'extend-exclude = ["pkg/skip"]\n')
    write(tmp_path / "pkg" / "skip" / "s.py", BAD)
    write(tmp_path / "pkg" / "a.py", BAD)
    os.chdir(tmp_path / "pkg")
    assert reported(check()) == [("a.py", "GL101")]
    assert reported(check("skip/s.py", "a.py")) == [("a.py", "GL101")]


def test_exclude_above_the_config_root_does_not_count(tmp_path):
    # the project itself lives in a directory named like a default exclude
    proj = tmp_path / "build" / "proj"
    pyproject(proj, "")
    write(proj / "a.py", BAD)
    os.chdir(proj)
    assert reported(check()) == [("a.py", "GL101")]
    assert reported(check("a.py")) == [("a.py", "GL101")]
    assert reported(check(str(proj / "a.py"))) == [(str(proj / "a.py").replace(os.sep, "/"), "GL101")]


# ------------------------------------------------------------------------------ the API itself
def test_settings_defaults(tmp_path):
    codes = Settings().selected_codes()
    assert {"GL000", "GL101", "GL201", "GL203"} <= codes
    assert list(DEFAULT_EXCLUDE)[:2] == [".git", ".hg"]


def test_settings_selected_codes():
    s = Settings(select=["GL1", "GL201"], ignore=["GL101"], extend_select=["GL203"])
    assert s.selected_codes() == frozenset({"GL201", "GL203"} | {c for c in registry() if c.startswith("GL1") and c != "GL101"})
    assert Settings(select=["ALL"]).selected_codes() == frozenset(registry())
    with pytest.raises(ConfigError):
        Settings(select=["GL999"]).selected_codes()


def test_settings_codes_for(tmp_path):
    s = Settings(root=tmp_path, per_file_ignores={"tests/*": ["GL1"], "conftest.py": ["GL201"]})
    sel = frozenset({"GL101", "GL201"})
    assert s.codes_for(str(tmp_path / "tests" / "t.py"), sel) == frozenset({"GL201"})
    assert s.codes_for(str(tmp_path / "a" / "conftest.py"), sel) == frozenset({"GL101"})
    assert s.codes_for(str(tmp_path / "src" / "t.py"), sel) == sel


def test_settings_is_excluded(tmp_path):
    s = Settings(root=tmp_path, exclude=["build", "*.egg-info"], extend_exclude=["./docs/conf.py", "data/"])
    assert s.is_excluded(str(tmp_path / "build"))
    assert s.is_excluded(str(tmp_path / "x.egg-info"))
    assert s.is_excluded(str(tmp_path / "docs" / "conf.py"))
    assert s.is_excluded(str(tmp_path / "data"))
    assert not s.is_excluded(str(tmp_path / "src" / "conf.py"))
    assert not s.is_excluded(str(tmp_path / "builder"))


def test_discover_order_and_missing_path(tmp_path):
    for p in ("b/z.py", "b/a.py", "a.py", "c.pyi", "d.txt", "e.ipynb"):
        write(tmp_path / p, "")
    s = Settings(root=tmp_path)
    assert [Path(p).as_posix() for p in discover(["."], s)] == ["a.py", "e.ipynb", "b/a.py", "b/z.py"]
    with pytest.raises(ConfigError, match="path not found: nope"):
        discover(["a.py", "nope"], s)


def test_severity_table_parsed(tmp_path):
    path = write(tmp_path / "gradlint.toml", 'severity = {gl101 = "WARNING", GL201 = "error"}\n')
    s = load_settings(path)
    assert s.severity == {"GL101": Severity.WARNING, "GL201": Severity.ERROR}
    assert s.root == tmp_path.resolve() and s.source == path
