"""End to end, as a user runs it from the installed package: the ``gradlint`` command's runtime
mode finds a real bug in a script, and ``pytest --gradlint`` finds one in a test. (Under
``.ci/run`` the package is the built wheel installed into a fresh environment; the conftest stops
the run if the checkout's sources shadow it.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

BIN = Path(sys.executable).parent
BUGGY = textwrap.dedent("""\
    import torch


    def train():
        model = torch.nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        total = 0.0
        for _ in range(3):
            loss = model(torch.ones(2, 3)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss
        return total


    train()
    """)


def _command() -> list:
    exe = BIN / ("gradlint.exe" if os.name == "nt" else "gradlint")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "gradlint"]


def test_gradlint_run_finds_a_real_bug(tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text(BUGGY)
    out = tmp_path / "findings.json"
    done = subprocess.run([*_command(), "run", "--format", "json", "--output", str(out), str(script)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stdout + done.stderr  # the program's own exit status
    findings = json.loads(out.read_text())
    assert [(f["code"], f["line"]) for f in findings] == [("GL501", 13)], findings


def test_pytest_gradlint_finds_a_real_bug(tmp_path: Path):
    (tmp_path / "test_train.py").write_text(BUGGY.replace("\n\ntrain()\n", "\n\ndef test_train():\n    train()\n"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--gradlint", "--gradlint-strict"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert "GL501" in done.stdout, done.stdout + done.stderr
    assert done.returncode != 0, done.stdout
