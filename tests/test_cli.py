"""The ``gradlint`` command line: output formats, exit statuses, rule selection, suppressions,
stdin, bad input, discovery, parallel runs and the ``rule``/``rules``/``--version`` commands.

Most tests drive the click command in-process with ``CliRunner`` (with ``-j 1``, so no worker
processes start); a few run ``python -m gradlint`` in a subprocess, end to end. Every test runs
in its own ``tmp_path`` as the current directory, so no configuration file around the checkout
leaks in.
"""

from __future__ import annotations

import re
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from gradlint import __version__
from gradlint.cli import main
from gradlint.suppress import ALL, apply_noqa, is_skipped, noqa_map

# GL101 at 3:1 (error)
BAD = "import torch\nx = torch.ones(3, requires_grad=True)\nx.add_(1)\n"
# GL201 at 6:1, a warning: the tensor comes from calling a module
WARN = (
    "import torch\n"
    "import torch.nn as nn\n"
    "layer = nn.Linear(3, 2)\n"
    "x = torch.ones(1, 3)\n"
    "out = layer(x)\n"
    "out.numpy()\n"
)
CLEAN = "import torch\nx = torch.ones(3)\ny = x + 1\n"
SYNTAX = "def f(:\n    pass\n"  # no torch: the engine's pre-filter path



@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # click < 8.2
    except TypeError:
        return CliRunner()  # click >= 8.2 keeps stdout and stderr apart


def cli(*args: str, input=None):
    return _runner().invoke(main, list(args), input=input, catch_exceptions=False)


def check(*args: str, input=None):
    """``gradlint check -j 1 ARGS`` in-process."""
    return cli("check", "-j", "1", *args, input=input)


def write(path: Path, text) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def run_module(*args: str, cwd: Path, input: bytes = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("NO_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "gradlint", *args], cwd=cwd, input=input, capture_output=True,
        env=env, timeout=120,
    )


def lines(text: str):
    return text.splitlines()


# ------------------------------------------------------------------ concise output, exit status
def test_concise_finding_and_summary(tmp_path):
    write(tmp_path / "bad.py", BAD)
    r = check("bad.py")
    assert r.exit_code == 1
    out = lines(r.stdout)
    assert out[0].startswith("bad.py:3:1: GL101 ")
    assert "in-place" in out[0]
    assert out[-1] == "Found 1 error, 0 warnings in 1 file."
    assert len(out) == 2
    assert r.stderr == ""


def test_errors_and_warnings_counted_over_files(tmp_path):
    write(tmp_path / "bad.py", BAD)
    write(tmp_path / "warn.py", WARN)
    write(tmp_path / "clean.py", CLEAN)
    r = check("bad.py", "warn.py", "clean.py")
    assert r.exit_code == 1
    out = lines(r.stdout)
    assert out[:2] == [out[0], out[1]]
    assert out[0].startswith("bad.py:3:1: GL101 ")
    assert out[1].startswith("warn.py:6:1: GL201 ")
    assert out[-1] == "Found 1 error, 1 warning in 2 files."


def test_no_findings_exit_0(tmp_path):
    write(tmp_path / "clean.py", CLEAN)
    write(tmp_path / "other.py", "print('no torch here')\n")
    r = check("clean.py", "other.py")
    assert r.exit_code == 0
    assert r.stdout == "All checks passed (2 files checked).\n"


def test_default_path_is_cwd(tmp_path):
    write(tmp_path / "pkg" / "bad.py", BAD)
    r = check()
    assert r.exit_code == 1
    assert r.stdout.startswith(os.path.join("pkg", "bad.py") + ":3:1: GL101 ")


def test_exit_zero(tmp_path):
    write(tmp_path / "bad.py", BAD)
    r = check("--exit-zero", "bad.py")
    assert r.exit_code == 0
    assert "GL101" in r.stdout


def test_warning_alone_fails_by_default(tmp_path):
    write(tmp_path / "warn.py", WARN)
    r = check("warn.py")
    assert r.exit_code == 1
    assert lines(r.stdout)[-1] == "Found 0 errors, 1 warning in 1 file."


def test_fail_on_error_with_only_warnings(tmp_path):
    write(tmp_path / "warn.py", WARN)
    r = check("--fail-on", "error", "warn.py")
    assert r.exit_code == 0
    assert "GL201" in r.stdout  # still reported


def test_fail_on_error_with_an_error(tmp_path):
    write(tmp_path / "warn.py", WARN)
    write(tmp_path / "bad.py", BAD)
    assert check("--fail-on", "error", "warn.py", "bad.py").exit_code == 1


def test_fail_on_bad_value_is_a_usage_error(tmp_path):
    write(tmp_path / "bad.py", BAD)
    assert check("--fail-on", "fatal", "bad.py").exit_code == 2


# ------------------------------------------------------------------------------------ formats
def test_format_json(tmp_path):
    write(tmp_path / "bad.py", BAD)
    write(tmp_path / "warn.py", WARN)
    r = check("--format", "json", "bad.py", "warn.py")
    assert r.exit_code == 1
    data = json.loads(r.stdout)
    assert isinstance(data, list) and len(data) == 2
    keys = {"path", "line", "column", "end_line", "end_column", "code", "name", "severity",
            "message", "hint", "fixable", "url"}
    for item in data:
        assert keys <= set(item)
    first, second = data
    assert (first["path"], first["line"], first["column"], first["code"]) == ("bad.py", 3, 1, "GL101")
    assert first["severity"] == "error" and first["name"] == "inplace-on-leaf"
    assert (second["path"], second["code"], second["severity"]) == ("warn.py", "GL201", "warning")
    assert first["end_line"] == 3 and first["end_column"] > first["column"]


def test_format_json_no_findings_is_an_empty_list(tmp_path):
    write(tmp_path / "clean.py", CLEAN)
    r = check("--format", "json", "clean.py")
    assert r.exit_code == 0
    assert json.loads(r.stdout) == []


def test_format_json_ignores_quiet_and_statistics(tmp_path):
    write(tmp_path / "bad.py", BAD)
    r = check("--format", "json", "--quiet", "--statistics", "bad.py")
    assert len(json.loads(r.stdout)) == 1


def test_format_sarif(tmp_path):
    write(tmp_path / "bad.py", BAD)
    write(tmp_path / "warn.py", WARN)
    r = check("--format", "sarif", "bad.py", "warn.py")
    assert r.exit_code == 1
    log = json.loads(r.stdout)
    assert log["version"] == "2.1.0"
    (run,) = log["runs"]
    assert run["tool"]["driver"]["name"] == "gradlint"
    assert {d["id"] for d in run["tool"]["driver"]["rules"]} == {"GL101", "GL201"}
    results = run["results"]
    assert [res["ruleId"] for res in results] == ["GL101", "GL201"]
    assert [res["level"] for res in results] == ["error", "warning"]
    region = results[0]["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (3, 1)


def test_format_sarif_no_findings(tmp_path):
    write(tmp_path / "clean.py", CLEAN)
    r = check("--format", "sarif", "clean.py")
    assert r.exit_code == 0
    assert json.loads(r.stdout)["runs"][0]["results"] == []


def test_format_github(tmp_path):
    write(tmp_path / "bad.py", BAD)
    write(tmp_path / "warn.py", WARN)
    r = check("--format", "github", "bad.py", "warn.py")
    assert r.exit_code == 1
    out = lines(r.stdout)
    assert len(out) == 2  # no summary line
    assert out[0].startswith("::error file=bad.py,line=3,col=1,")
    assert "title=gradlint (GL101)::" in out[0]
    assert out[1].startswith("::warning file=warn.py,line=6,col=1,")


def test_format_github_no_findings_prints_nothing(tmp_path):
    write(tmp_path / "clean.py", CLEAN)
    r = check("--format", "github", "clean.py")
    assert r.exit_code == 0 and r.stdout == ""


def test_format_full_shows_source_caret_and_hint(tmp_path):
    write(tmp_path / "bad.py", BAD)
    r = check("--format", "full", "bad.py")
    assert r.exit_code == 1
    out = lines(r.stdout)
    assert out[0].startswith("bad.py:3:1: GL101 ")
    assert out[1] == "3 | x.add_(1)"
    assert out[2] == "  | ^^^^^^^^^"
    assert out[3].startswith("  = hint: ")
    assert out[-1] == "Found 1 error, 0 warnings in 1 file."


def test_show_source_with_concise(tmp_path):
    write(tmp_path / "bad.py", BAD)
    r = check("--show-source", "bad.py")
    assert "3 | x.add_(1)" in lines(r.stdout)
    assert "  | ^^^^^^^^^" in lines(r.stdout)


def test_statistics(tmp_path):
    write(tmp_path / "a.py", BAD)
    write(tmp_path / "b.py", BAD)
    write(tmp_path / "warn.py", WARN)
    r = check("--statistics", "a.py", "b.py", "warn.py")
    out = lines(r.stdout)
    assert out[-1] == "Found 2 errors, 1 warning in 3 files."
    stats = out[3:-1]
    assert len(stats) == 2
    assert stats[0].split() == ["2", "GL101", "inplace-on-leaf", "[error]"]
    assert stats[1].split() == ["1", "GL201", "numpy-on-graph-tensor", "[warning]"]


def test_quiet_drops_the_summary(tmp_path):
    write(tmp_path / "bad.py", BAD)
    r = check("--quiet", "bad.py")
    assert r.exit_code == 1
    assert lines(r.stdout) == [lines(r.stdout)[0]]
    assert "Found" not in r.stdout
    write(tmp_path / "clean.py", CLEAN)
    r = check("-q", "clean.py")
    assert r.exit_code == 0 and r.stdout == ""


def test_no_colour_when_not_a_tty(tmp_path):
    write(tmp_path / "bad.py", BAD)
    assert "\x1b[" not in check("--format", "full", "bad.py").stdout


def test_unknown_format_is_a_usage_error(tmp_path):
    write(tmp_path / "bad.py", BAD)
    assert check("--format", "xml", "bad.py").exit_code == 2


# --------------------------------------------------------------------------------- selection
@pytest.fixture
def both(tmp_path):
    write(tmp_path / "bad.py", BAD)
    write(tmp_path / "warn.py", WARN)
    return ("bad.py", "warn.py")


def codes_of(result):
    return [line.split()[1] for line in lines(result.stdout) if ": GL" in line]


def test_select_code(both):
    assert codes_of(check("--select", "GL201", *both)) == ["GL201"]


def test_select_prefix(both):
    assert codes_of(check("--select", "GL1", *both)) == ["GL101"]


def test_select_all(both):
    assert codes_of(check("--select", "ALL", *both)) == ["GL101", "GL201"]


def test_select_comma_separated_and_lowercase(both):
    assert codes_of(check("--select", "gl101, GL201", *both)) == ["GL101", "GL201"]


def test_select_repeated(both):
    assert codes_of(check("--select", "GL101", "--select", "GL201", *both)) == ["GL101", "GL201"]


def test_ignore_code_and_prefix(both):
    assert codes_of(check("--ignore", "GL101", *both)) == ["GL201"]
    r = check("--ignore", "GL1,GL2", *both)
    assert codes_of(r) == [] and r.exit_code == 0


def test_ignore_wins_over_select(both):
    assert codes_of(check("--select", "ALL", "--ignore", "GL2", *both)) == ["GL101"]


def test_extend_select(both):
    assert codes_of(check("--select", "GL101", "--extend-select", "GL201", *both)) == ["GL101", "GL201"]


@pytest.mark.parametrize("option", ["--select", "--ignore", "--extend-select"])
def test_unknown_code_is_a_one_line_error(both, option):
    r = check(option, "GL999", *both)
    assert r.exit_code == 2
    assert r.stdout == ""
    err = lines(r.stderr)
    assert len(err) == 1
    assert err[0].startswith("gradlint: error: ")
    assert "GL999" in err[0]
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("selector", ["foo", "GL10001", "GL-1", "E501"])
def test_malformed_selector(both, selector):
    r = check("--select", selector, *both)
    assert r.exit_code == 2
    assert lines(r.stderr)[0].startswith("gradlint: error: ")


def test_syntax_error_rule_can_be_ignored(tmp_path):
    write(tmp_path / "syn.py", SYNTAX)
    r = check("--ignore", "GL000", "syn.py")
    assert r.exit_code == 0


# ------------------------------------------------------------------------------- suppressions
def test_noqa_forms(tmp_path):
    src = textwrap.dedent(
        """\
        import torch
        a = torch.ones(3, requires_grad=True)
        b = torch.ones(3, requires_grad=True)
        c = torch.ones(3, requires_grad=True)
        d = torch.ones(3, requires_grad=True)
        e = torch.ones(3, requires_grad=True)
        f = torch.ones(3, requires_grad=True)
        a.add_(1)  # noqa
        b.add_(1)  # noqa: GL101
        c.add_(1)  # noqa: GL201
        d.add_(1)  # NOQA:GL201,GL101
        e.add_(1)  # noqa: GL203 GL101 -- explained
        f.add_(1)
        """
    )
    write(tmp_path / "nq.py", src)
    r = check("nq.py")
    out = [line for line in lines(r.stdout) if ": GL" in line]
    assert [line.split(":")[1] for line in out] == ["10", "13"]
    assert all(" GL101 " in line for line in out)


def test_noqa_other_code_does_not_suppress(tmp_path):
    write(tmp_path / "nq.py", BAD.replace("x.add_(1)", "x.add_(1)  # noqa: GL201"))
    assert check("nq.py").stdout.startswith("nq.py:3:1: GL101 ")


def test_noqa_inside_a_string_does_not_count(tmp_path):
    write(tmp_path / "nq.py", BAD.replace("x.add_(1)", "s = '# noqa'; x.add_(1)"))
    assert "GL101" in check("nq.py").stdout


def test_noqa_on_first_line_of_multiline_statement(tmp_path):
    src = textwrap.dedent(
        """\
        import torch
        x = torch.ones(3, requires_grad=True)
        y = torch.ones(3, requires_grad=True)
        z = (  # noqa: GL101
            x.add_(
                1)
        )
        w = (
            y.add_(1)
        )
        """
    )
    write(tmp_path / "ml.py", src)
    r = check("ml.py")
    found = [line for line in lines(r.stdout) if ": GL" in line]
    assert len(found) == 1 and found[0].startswith("ml.py:9:5: GL101 ")


def test_noqa_on_compound_statement_header_does_not_cover_its_body(tmp_path):
    src = textwrap.dedent(
        """\
        import torch
        a = torch.ones(3, requires_grad=True)
        if a.sum() > 0:  # noqa
            a.add_(1)
        """
    )
    write(tmp_path / "cmp.py", src)
    assert check("cmp.py").stdout.startswith("cmp.py:4:5: GL101 ")


def test_skip_file(tmp_path):
    write(tmp_path / "skip.py", "# gradlint: skip-file\n" + BAD)
    write(tmp_path / "skip2.py", '"""Docstring."""\n\n#gradlint:skip-file\n' + BAD)
    r = check("skip.py", "skip2.py")
    assert r.exit_code == 0
    assert r.stdout == "All checks passed (2 files checked).\n"


def test_skip_file_far_down_does_not_count(tmp_path):
    write(tmp_path / "late.py", BAD + "\n" * 40 + "# gradlint: skip-file\n")
    assert check("late.py").exit_code == 1


def test_noqa_map_unit():
    text = "a  # noqa\nb  # noqa: gl101,GL201\nc = '# noqa'\nd  # noqa:  GL101\n"
    table = noqa_map(text)
    assert table[1] is ALL
    assert table[2] == frozenset({"GL101", "GL201"})
    assert 3 not in table
    assert table[4] == frozenset({"GL101"})  # extra spaces do not widen it to a bare noqa


def test_noqa_map_keeps_comments_before_a_tokenizer_error():
    table = noqa_map("x = 1  # noqa: GL101\ny = (\n")  # the unclosed paren is a TokenError
    assert table.get(1) == frozenset({"GL101"})


def test_apply_noqa_and_is_skipped_units():
    from gradlint.rule import Finding, Severity

    def f(line, code, stmt=0):
        return Finding("p.py", line, 1, line, 2, code, "n", Severity.ERROR, "m", statement_line=stmt)

    text = "a\nb  # noqa: GL101\nc\n"
    kept = apply_noqa([f(2, "GL101"), f(2, "GL201"), f(3, "GL101", stmt=2), f(1, "GL101")], text)
    assert [(k.line, k.code) for k in kept] == [(2, "GL201"), (1, "GL101")]
    assert is_skipped(b"# gradlint: skip-file\n")
    assert not is_skipped(b"x = 1\n")


# --------------------------------------------------------------------------------------- stdin
def test_stdin_with_filename(tmp_path):
    r = check("-", "--stdin-filename", "foo.py", input=BAD.encode())
    assert r.exit_code == 1
    assert r.stdout.startswith("foo.py:3:1: GL101 ")
    assert lines(r.stdout)[-1] == "Found 1 error, 0 warnings in 1 file."


def test_stdin_without_filename(tmp_path):
    r = check("-", input=BAD.encode())
    assert r.stdout.startswith("-:3:1: GL101 ")


def test_stdin_filename_alone_reads_stdin(tmp_path):
    write(tmp_path / "other.py", BAD)  # not linted: stdin is
    r = check("--stdin-filename", "foo.py", input=CLEAN.encode())
    assert r.exit_code == 0
    assert r.stdout == "All checks passed (1 file checked).\n"


def test_stdin_clean_and_skip_file():
    assert check("-", input=CLEAN.encode()).exit_code == 0
    assert check("-", input=("# gradlint: skip-file\n" + BAD).encode()).exit_code == 0


def test_stdin_syntax_error():
    r = check("-", "--stdin-filename", "foo.py", input=b"import torch\nx = (\n")
    assert r.exit_code == 1
    assert " GL000 " in r.stdout and r.stdout.startswith("foo.py:")


def test_stdin_cannot_be_combined_with_paths(tmp_path):
    write(tmp_path / "bad.py", BAD)
    r = check("-", "bad.py", input=BAD.encode())
    assert r.exit_code == 2
    assert r.stderr.startswith("gradlint: error: ")


# ----------------------------------------------------------------------------------- bad input
def test_syntax_error_is_gl000_and_other_files_still_linted(tmp_path):
    write(tmp_path / "a_syn.py", "import torch\nx = torch.ones(3\ny = 2\n")
    write(tmp_path / "b_bad.py", BAD)
    r = check("a_syn.py", "b_bad.py")
    assert r.exit_code == 1
    out = lines(r.stdout)
    syn = out[0].split(":")
    assert syn[0] == "a_syn.py" and int(syn[1]) >= 1 and " GL000 " in out[0]
    assert out[1].startswith("b_bad.py:3:1: GL101 ")
    assert out[-1] == "Found 2 errors, 0 warnings in 2 files."


def test_syntax_error_without_torch_is_still_gl000(tmp_path):
    write(tmp_path / "syn.py", SYNTAX)
    r = check("syn.py")
    assert r.exit_code == 1
    assert r.stdout.startswith("syn.py:1:")
    assert " GL000 " in lines(r.stdout)[0]


def test_syntax_error_line_number(tmp_path):
    write(tmp_path / "syn.py", "x = 1\ny = 2\nz = = 3\n")
    assert check("syn.py").stdout.startswith("syn.py:3:")


@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xfe\x00bad\n",
        b"# -*- coding: utf-8 -*-\nimport torch\ns = '\xe9t\xe9'\n",  # latin-1 under a utf-8 cookie
        b"import torch\ns = '\xe9'\n",  # latin-1, no cookie (UTF-8 by default)
        b"# -*- coding: no-such-codec -*-\nimport torch\n",
    ],
    ids=["garbage", "latin1-with-cookie", "latin1-no-cookie", "unknown-codec"],
)
def test_undecodable_file_is_gl000(tmp_path, data):
    write(tmp_path / "enc.py", data)
    write(tmp_path / "z_bad.py", BAD)
    r = check("enc.py", "z_bad.py")
    assert r.exit_code == 1
    out = lines(r.stdout)
    assert re.match(r"enc\.py:\d+:\d+: GL000 cannot decode file", out[0]), out[0]
    assert out[1].startswith("z_bad.py:3:1: GL101 ")
    assert r.stderr == ""


def test_bom_and_latin1_cookie_are_fine(tmp_path):
    write(tmp_path / "bom.py", b"\xef\xbb\xbf" + BAD.encode())
    write(tmp_path / "lat.py", b"# -*- coding: latin-1 -*-\n" + BAD.encode() + b"s = '\xe9'\n")
    r = check("bom.py", "lat.py")
    assert [line.split(": ")[0] for line in lines(r.stdout)[:2]] == ["bom.py:3:1", "lat.py:4:1"]


def test_empty_file(tmp_path):
    write(tmp_path / "empty.py", "")
    assert check("empty.py").exit_code == 0


def test_missing_path(tmp_path):
    write(tmp_path / "bad.py", BAD)
    r = check("bad.py", "nope.py")
    assert r.exit_code == 2
    assert r.stdout == ""
    assert r.stderr == "gradlint: error: path not found: nope.py\n"


# ----------------------------------------------------------------------------------- discovery
def test_discovery_skips_default_excluded_dirs(tmp_path):
    for d in (".git", ".venv", "venv", "build", "dist", "__pycache__", ".tox", "pkg.egg-info",
              "node_modules", "src/__pycache__", "src/build"):
        write(tmp_path / d / "bad.py", BAD)
    write(tmp_path / "src" / "bad.py", BAD)
    write(tmp_path / "src" / "stub.pyi", BAD)  # a stub holds no executable code: not linted
    write(tmp_path / "src" / "notes.txt", BAD)
    write(tmp_path / "src" / "script", BAD)  # no .py: not linted
    r = check(".")
    paths = sorted({line.split(":")[0] for line in lines(r.stdout) if ": GL" in line})
    assert paths == [os.path.join("src", "bad.py")]
    assert lines(r.stdout)[-1].endswith("in 1 file.")


def test_discovery_dedupes_and_counts_files(tmp_path):
    write(tmp_path / "src" / "a.py", BAD)
    write(tmp_path / "src" / "b.py", CLEAN)
    r = check("src", "src/a.py", os.path.join(".", "src"))
    assert len([line for line in lines(r.stdout) if ": GL" in line]) == 1
    r = check("--exit-zero", "src/b.py", "src")
    assert r.stdout.count("GL101") == 1
    assert check("src/b.py").stdout == "All checks passed (1 file checked).\n"


def test_explicit_file_in_a_default_excluded_dir_is_skipped(tmp_path):
    write(tmp_path / "build" / "gen.py", BAD)
    write(tmp_path / "src" / "a.py", BAD)
    r = check("build/gen.py", "src/a.py")
    assert "build" not in r.stdout
    assert r.stdout.startswith("src/a.py:3:1: GL101 ")


# ------------------------------------------------------------------------------------ parallel
def _many(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    for i in range(10):
        sub = proj / f"pkg{i % 3}"
        write(sub / f"m{i}.py", BAD if i % 2 else WARN)
    write(proj / "pkg1" / "broken.py", "import torch\ndef f(:\n")
    write(proj / "pkg2" / "clean.py", CLEAN)
    write(proj / "pkg0" / "nq.py", BAD.replace("x.add_(1)", "x.add_(1)  # noqa"))
    return proj


def test_jobs_same_output_in_process(tmp_path):
    proj = _many(tmp_path)
    one = cli("check", "-j", "1", "--statistics", str(proj.name))
    two = cli("check", "-j", "2", "--statistics", str(proj.name))
    assert one.exit_code == two.exit_code == 1
    assert one.stdout == two.stdout
    assert one.stdout.count("GL101") >= 5
    assert lines(one.stdout)[-1] == "Found 6 errors, 5 warnings in 11 files."


def test_jobs_must_be_positive(tmp_path):
    write(tmp_path / "bad.py", BAD)
    assert cli("check", "-j", "0", "bad.py").exit_code == 2


def test_jobs_same_output_end_to_end(tmp_path):
    proj = _many(tmp_path)
    outs = []
    for j in ("1", "2"):
        p = run_module("check", "-j", j, "proj", cwd=tmp_path)
        assert p.returncode == 1, p.stderr
        assert p.stderr == b""
        outs.append(p.stdout)
    assert outs[0] == outs[1]
    text = outs[0].decode()
    assert text.splitlines()[-1] == "Found 6 errors, 5 warnings in 11 files."  # nq.py is clean
    assert "broken.py:" in text and " GL000 " in text


# ------------------------------------------------------------------------ rule, rules, version
def test_rule_docs():
    r = cli("rule", "GL101")
    assert r.exit_code == 0
    assert r.stdout.startswith("# GL101 inplace-on-leaf")
    assert "## What it does" in r.stdout
    assert "Severity: error" in r.stdout


def test_rule_by_lowercase_code_and_name():
    assert "## What it does" in cli("rule", "gl201").stdout
    assert cli("rule", "inplace-on-leaf").stdout.startswith("# GL101 ")


def test_rule_unknown():
    r = cli("rule", "GL999")
    assert r.exit_code == 2
    assert r.stderr.startswith("gradlint: error: ") and "GL999" in r.stderr
    assert len(lines(r.stderr)) == 1


def test_rules_lists_every_rule():
    r = cli("rules")
    assert r.exit_code == 0
    listed = [line.split()[0] for line in lines(r.stdout)]
    for code in ("GL000", "GL101", "GL201", "GL203"):
        assert code in listed


def test_rules_json_and_markdown():
    data = json.loads(cli("rules", "--format", "json").stdout)
    assert {"GL101", "GL201", "GL203"} <= {d["code"] for d in data}
    md = cli("rules", "--format", "markdown").stdout
    assert md.startswith("| code |")
    assert "[GL101]" in md and "`inplace-on-leaf`" in md


def test_version():
    r = cli("--version")
    assert r.exit_code == 0
    assert r.stdout == f"gradlint {__version__}\n"
    assert __version__ == "0.1.0"


def test_help():
    r = cli("check", "--help")
    assert r.exit_code == 0
    for opt in ("--select", "--ignore", "--extend-select", "--format", "--exit-zero", "--fail-on",
                "--stdin-filename", "--statistics", "--show-source", "--config"):
        assert opt in r.stdout


def test_unknown_command_is_a_usage_error():
    assert cli("chek").exit_code == 2


# -------------------------------------------------------------------------------- end to end
def test_end_to_end_check(tmp_path):
    write(tmp_path / "bad.py", BAD)
    p = run_module("check", "bad.py", cwd=tmp_path)
    assert p.returncode == 1
    out = p.stdout.decode().splitlines()
    assert out[0].startswith("bad.py:3:1: GL101 ")
    assert out[-1] == "Found 1 error, 0 warnings in 1 file."
    assert p.stderr == b""


def test_end_to_end_stdin(tmp_path):
    p = run_module("check", "-", "--stdin-filename", "foo.py", cwd=tmp_path, input=BAD.encode())
    assert p.returncode == 1
    assert p.stdout.decode().startswith("foo.py:3:1: GL101 ")


def test_end_to_end_errors_are_one_line(tmp_path):
    p = run_module("check", "missing.py", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stdout == b""
    assert p.stderr.decode() == "gradlint: error: path not found: missing.py\n"
    write(tmp_path / "bad.py", BAD)
    p = run_module("check", "--select", "GL999", "bad.py", cwd=tmp_path)
    assert p.returncode == 2
    err = p.stderr.decode()
    assert err.startswith("gradlint: error: ") and len(err.splitlines()) == 1
    assert "Traceback" not in err


def test_end_to_end_undecodable_no_traceback(tmp_path):
    write(tmp_path / "enc.py", b"\xff\xfe\x00bad")
    p = run_module("check", "enc.py", cwd=tmp_path)
    assert p.returncode == 1
    assert p.stdout.decode().startswith("enc.py:1:1: GL000 ")
    assert p.stderr == b""


def test_end_to_end_version(tmp_path):
    p = run_module("--version", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.decode() == "gradlint 0.1.0\n"


def test_cli_never_imports_torch(tmp_path):
    write(tmp_path / "bad.py", BAD)
    write(tmp_path / "warn.py", WARN)
    code = textwrap.dedent(
        """\
        import sys
        import gradlint.cli
        assert "torch" not in sys.modules, "import gradlint.cli imported torch"
        from click.testing import CliRunner
        r = CliRunner().invoke(gradlint.cli.main, ["check", "-j", "1", "bad.py", "warn.py"])
        assert r.exit_code == 1, r.output
        assert "GL101" in r.output and "GL201" in r.output, r.output
        for fmt in ("full", "json", "github", "sarif"):
            r = CliRunner().invoke(gradlint.cli.main, ["check", "-j", "1", "--format", fmt, "bad.py"])
            assert r.exit_code == 1, r.output
        r = CliRunner().invoke(gradlint.cli.main, ["rules"])
        assert r.exit_code == 0
        bad = [m for m in sys.modules if m == "torch" or m.startswith("torch.")]
        assert not bad, bad
        print("ok")
        """
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout.decode().strip() == "ok"
