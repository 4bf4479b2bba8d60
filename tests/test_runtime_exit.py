"""Runtime mode never reassures falsely and survives the ways jobs end: what stops a program before
it starts is one line and exit status 2; a program that stops early is not called free of misuse;
SIGTERM (a scheduler's time limit) writes the findings so far, then ends the process by the
signal; a notebook of another language is skipped; without torch, one line and exit status 2.
Each with the real mechanism (a real signal, a real environment without torch)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")


def run(*args: str, cwd: Path, **kw) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
    return subprocess.run([sys.executable, "-m", "gradlint", "run", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, **kw)


def test_a_script_that_does_not_compile_is_one_line_and_exit_2(tmp_path: Path):
    (tmp_path / "bad.py").write_text("import torch\ndef f(:\n    pass\n")
    r = run("bad.py", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == "gradlint: error: cannot run bad.py: SyntaxError: invalid syntax (line 2)\n"


def test_a_missing_module_is_one_line_and_exit_2(tmp_path: Path):
    r = run("-m", "no_such_module_here", cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "no_such_module_here" in r.stderr
    assert "no autograd misuse" not in r.stderr


def test_an_unreadable_notebook_is_one_line_and_exit_2(tmp_path: Path):
    (tmp_path / "nb.ipynb").write_text("{not json")
    r = run("nb.ipynb", cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and r.stderr.startswith("gradlint: error: ")


def test_a_notebook_of_another_language_is_skipped(tmp_path: Path):
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": "a", "metadata": {}, "outputs": [],
                     "source": ["x <- 1\n"]}],
          "metadata": {"kernelspec": {"language": "R", "name": "ir", "display_name": "R"}},
          "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "r.ipynb").write_text(json.dumps(nb))
    r = run("r.ipynb", cwd=tmp_path)
    assert r.returncode == 0 and "not a Python notebook" in r.stderr and "Traceback" not in r.stderr


def test_a_program_that_stops_early_is_not_called_clean(tmp_path: Path):
    (tmp_path / "p.py").write_text("import torch\nimport no_such_module_at_all\n")
    plain = subprocess.run([sys.executable, "p.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    r = run("p.py", cwd=tmp_path)
    assert r.returncode == plain.returncode == 1
    assert "no autograd misuse observed at runtime." not in r.stderr
    assert "stopped early (ModuleNotFoundError: No module named 'no_such_module_at_all')" in r.stderr


@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or os.name == "nt", reason="POSIX signals")
def test_sigterm_writes_the_findings_so_far_then_ends_by_the_signal(tmp_path: Path):
    (tmp_path / "train.py").write_text(
        "import time, torch\n"
        "total = 0\n"
        "w = torch.ones(3, requires_grad=True)\n"
        "for i in range(3):\n"
        "    loss = (w * 2).sum()\n"
        "    loss.backward()\n"
        "    total += loss\n"
        "print('ready', flush=True)\n"
        "time.sleep(120)\n")
    out = tmp_path / "findings.json"
    proc = subprocess.Popen([sys.executable, "-m", "gradlint", "run", "--format", "json", "--output", str(out),
                             "train.py"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGTERM, err
    findings = json.loads(out.read_text())
    assert [(f["code"], f["line"]) for f in findings] == [("GL501", 7)]


def test_without_torch_run_is_one_line_and_exit_2(tmp_path: Path):
    """A real environment without torch: the installed gradlint (its wheel, built here), click and
    libcst only."""
    pytest.importorskip("build")
    root = Path(__file__).resolve().parent.parent
    wheel_dir = tmp_path / "dist"
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(wheel_dir),
                           str(root)], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        pytest.skip("cannot build the wheel here: " + done.stderr[-300:])
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
    py = str(venv / "bin" / "python")
    (wheel,) = wheel_dir.glob("*.whl")
    inst = subprocess.run([py, "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True, timeout=600)
    if inst.returncode != 0:
        pytest.skip("cannot install the wheel's dependencies here: " + inst.stderr[-300:])
    assert subprocess.run([py, "-c", "import torch"], capture_output=True).returncode != 0
    (tmp_path / "t.py").write_text("print('hi')\n")
    r = subprocess.run([str(venv / "bin" / "gradlint"), "run", "t.py"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == "gradlint: error: `gradlint run` needs torch, which is not installed here (pip install torch)\n"
    # static mode works there
    (tmp_path / "s.py").write_text("import torch\nw = torch.ones(3, requires_grad=True)\nw.add_(1)\n")
    r = subprocess.run([str(venv / "bin" / "gradlint"), "check", "--no-cache", "s.py"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "GL101" in r.stdout
