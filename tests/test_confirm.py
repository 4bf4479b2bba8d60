"""``gradlint check PATHS --confirm -- SCRIPT [ARGS...]``: static findings marked by one run of
the program (gradlint.runtime.confirm)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from gradlint.rule import Finding, Severity  # noqa: E402
from gradlint.runtime.confirm import (  # noqa: E402
    CONFIRMED, NOT_OBSERVED, NOT_REACHED, LineRecorder, confirm,
)

# (a) a bug on a line that runs (torch raises: the program ends there, uncaught)
# (b) a static finding on a line that runs but that the runtime cannot see (GL202: a number that
#     travels through a Python float)
# (c) a bug in a function that is never called
# (d) an in-place op on a leaf through a helper called with unpacked arguments (`*[p]`): the
#     static model does not follow them
SCRIPT = textwrap.dedent('''\
    import sys

    import torch


    def never_called():
        w = torch.zeros(3, requires_grad=True)
        w.add_(1)  # (c) line 8


    def bump(t):
        t.mul_(2)  # (d) line 12


    def train(model, opt, data):
        w = torch.tensor([3.0, 4.0], requires_grad=True)
        norm = float(w.norm())
        loss = (w / norm).sum()  # (b) line 18
        loss.backward()


    def main():
        model = torch.nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        train(model, opt, [torch.ones(2, 3)] * 2)
        p = torch.ones(2, requires_grad=True)
        try:
            bump(*[p])  # unpacked arguments: beyond the static model
        except Exception:  # (`except RuntimeError: pass` would declare the error expected)
            pass
        x = torch.ones(3, requires_grad=True)
        print("program output", sys.argv[1:])
        x.add_(1)  # (a) line 33


    main()
''')

EXPECTED = {8: ("GL101", NOT_REACHED), 18: ("GL202", NOT_OBSERVED), 33: ("GL101", CONFIRMED)}


def _gradlint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "gradlint", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "script.py").write_text(SCRIPT)
    return tmp_path


def test_confirm_statuses_concise(project: Path) -> None:
    p = _gradlint("check", "proj", "--no-cache", "--confirm", "--", "proj/script.py", "a", "b", cwd=project)
    lines = p.stdout.splitlines()
    for line, (code, status) in EXPECTED.items():
        assert any(x.startswith(f"proj/script.py:{line}:") and f" {code} [{status}] " in x for x in lines), p.stdout
    runtime_only = [x for x in lines if "[runtime only]" in x]
    assert len(runtime_only) == 1 and runtime_only[0].startswith("proj/script.py:12:"), p.stdout
    assert " GL101 [runtime only] " in runtime_only[0]
    assert lines[-1] == "Confirmed 1, not observed 1, not reached 1; runtime only 1.", p.stdout
    assert "Found 3 errors" in p.stdout
    # the program ran with its arguments; its stdout went to stderr, stdout holds only the report
    assert "program output ['a', 'b']" in p.stderr and "program output" not in p.stdout
    # its uncaught exception did not crash gradlint: traceback and a note on stderr, then the report
    assert "RuntimeError: a leaf Variable" in p.stderr
    assert "the program raised RuntimeError" in p.stderr
    assert "gradlint/" not in p.stderr.split("Traceback", 1)[1].split("RuntimeError")[0]
    assert p.returncode == 1


def test_confirm_json(project: Path) -> None:
    p = _gradlint("check", "proj", "--no-cache", "--format", "json", "--confirm", "--", "proj/script.py",
                  cwd=project)
    doc = json.loads(p.stdout)
    assert set(doc) == {"findings", "runtime_only", "program", "summary"}
    got = {f["line"]: (f["code"], f["confirmation"]) for f in doc["findings"]}
    assert got == EXPECTED
    assert [(f["line"], f["code"]) for f in doc["runtime_only"]] == [(12, "GL101")]
    assert doc["program"]["exit_status"] == 1 and doc["program"]["exception"].startswith("RuntimeError")
    assert doc["summary"] == {"confirmed": 1, "not_observed": 1, "not_reached": 1, "runtime_only": 1}
    assert p.returncode == 1


def test_program_exit_status_is_not_gradlints(tmp_path: Path) -> None:
    # no static finding, nothing at run time: gradlint exits 0 whatever the program's status
    (tmp_path / "clean.py").write_text("import sys\nimport torch\nx = torch.ones(2) * 2\nsys.exit(5)\n")
    p = _gradlint("check", "clean.py", "--no-cache", "--confirm", "--", "clean.py", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "exited with status 5" in p.stderr
    assert "Confirmed 0, not observed 0, not reached 0; runtime only 0." in p.stdout


def test_runtime_only_error_sets_exit_status_and_noqa_applies(tmp_path: Path) -> None:
    src = textwrap.dedent('''\
        import torch


        def bump(t):
            t.mul_(2){noqa}


        p = torch.ones(2, requires_grad=True)
        try:
            bump(*[p])  # unpacked arguments: beyond the static model
        except Exception:  # (`except RuntimeError: pass` would declare the error expected)
            pass
    ''')
    (tmp_path / "helper.py").write_text(src.format(noqa=""))
    p = _gradlint("check", "helper.py", "--no-cache", "--confirm", "--", "helper.py", cwd=tmp_path)
    assert "helper.py:5:5: GL101 [runtime only]" in p.stdout, p.stdout + p.stderr
    assert "Confirmed 0, not observed 0, not reached 0; runtime only 1." in p.stdout
    assert p.returncode == 1
    (tmp_path / "helper.py").write_text(src.format(noqa="  # noqa: GL101"))
    p = _gradlint("check", "helper.py", "--no-cache", "--confirm", "--", "helper.py", cwd=tmp_path)
    assert "runtime only 0." in p.stdout and p.returncode == 0, p.stdout + p.stderr
    # the selection applies to runtime findings too
    (tmp_path / "helper.py").write_text(src.format(noqa=""))
    p = _gradlint("check", "helper.py", "--no-cache", "--select", "GL6", "--confirm", "--", "helper.py",
                  cwd=tmp_path)
    assert "runtime only 0." in p.stdout and p.returncode == 0, p.stdout + p.stderr


def test_confirm_module(project: Path) -> None:
    (project / "proj" / "__init__.py").write_text("")
    p = _gradlint("check", "proj/script.py", "--no-cache", "--confirm-module", "proj.script", "--", "x",
                  cwd=project)
    assert "program output ['x']" in p.stderr, p.stderr
    assert p.stdout.splitlines()[-1] == "Confirmed 1, not observed 1, not reached 1; runtime only 1.", p.stdout


def test_usage_errors(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    p = _gradlint("check", "a.py", "--confirm", cwd=tmp_path)
    assert p.returncode == 2 and "needs the program after `--`" in p.stderr
    p = _gradlint("check", "a.py", "--fix", "--confirm", "--", "a.py", cwd=tmp_path)
    assert p.returncode == 2 and "--fix" in p.stderr
    p = _gradlint("check", "a.py", "--confirm", "--", "missing.py", cwd=tmp_path)
    assert p.returncode == 2 and "missing.py" in p.stderr
    # without --confirm, `--` still just ends the options
    p = _gradlint("check", "--no-cache", "--", "a.py", cwd=tmp_path)
    assert p.returncode == 0 and "All checks passed (1 file checked)." in p.stdout


# ------------------------------------------------------------------------------ units
def _f(path: str, line: int, code: str = "GL205", statement_line: int = 0, end_line: int = 0) -> Finding:
    return Finding(path=path, line=line, column=1, end_line=end_line or line, end_column=2, code=code,
                   name=code, severity=Severity.ERROR, message="m", statement_line=statement_line)


def test_matching_statement_range_and_function_fallback(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("def f():\n    a = 1\n    b = (\n        2)\n    c = 3\n\n\ndef g():\n    d = 4\n")
    p = str(src)
    static = [
        _f(p, 4, "GL101", statement_line=3),  # runtime at line 3: same statement
        _f(p, 2, "GL205"),  # runtime at line 5: same function, another line
        _f(p, 9, "GL102"),  # runtime GL102 at line 5: another function -> not confirmed
        _f(p, 9, "GL303"),  # nothing at run time, line 9 never ran
    ]
    runtime = [_f(p, 3, "GL101"), _f(p, 5, "GL205"), _f(p, 5, "GL102")]
    conf = confirm(static, runtime, {str(src.resolve()): {2, 3, 5, 9}})
    assert [s for _, s, _ in conf.statuses] == [CONFIRMED, CONFIRMED, NOT_OBSERVED, NOT_OBSERVED]
    assert [(f.code, f.line) for f in conf.runtime_only] == [("GL102", 5)]
    # the statement's first line counts as the finding's line
    conf = confirm(static, [], {str(src.resolve()): {3}})
    assert [s for _, s, _ in conf.statuses] == [NOT_OBSERVED, NOT_REACHED, NOT_REACHED, NOT_REACHED]


def test_line_recorder_traces_only_the_given_files_and_threads(tmp_path: Path) -> None:
    mod = tmp_path / "traced_mod.py"
    mod.write_text("def f():\n    x = 1\n    return x\n\n\ndef g():\n    return 2\n")
    ns: dict = {}
    exec(compile(mod.read_text(), str(mod), "exec"), ns)
    before = sys.gettrace()
    with LineRecorder([str(mod.resolve())]) as rec:
        ns["f"]()
        t = threading.Thread(target=ns["g"])
        t.start()
        t.join()
    assert sys.gettrace() is before
    assert rec.lines(str(mod.resolve())) == {2, 3, 7}
    assert list(rec.ran) == [str(mod.resolve())]  # nothing recorded for this test file
