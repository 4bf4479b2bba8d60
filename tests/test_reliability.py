"""Reliability with the real mechanisms: signals sent to a real parallel run, real pathological
files, a real worker crash (SIGSEGV), a main process killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

BODY = textwrap.dedent("""\
    import torch
    import torch.nn as nn


    class Net{i}(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            h = self.fc(x).sigmoid()
            return h * 2


    def train{i}(model, data, optimizer):
        for x, y in data:
            optimizer.zero_grad()
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            optimizer.step()
        return loss.item()
""")


def _tree(root: Path, files: int = 400, repeat: int = 12) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for n in range(files):
        (root / f"m{n}.py").write_text("\n".join(BODY.format(i=f"{n}_{k}") for k in range(repeat)))
    return root


def _session_processes(sid: int) -> list:
    """PIDs of live (not zombie) processes in session ``sid``."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        state, session = fields[0], int(fields[3])
        if session == sid and state != "Z":
            out.append(int(entry))
    return out


def _start(args, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gradlint", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, text=True, **kw)


def _wait_for_workers(proc: subprocess.Popen, n: int = 3, timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if len(_session_processes(proc.pid)) >= n:
            time.sleep(0.5)  # the workers are busy with their first batches
            return
        if proc.poll() is not None:
            pytest.fail(f"the run ended before its workers started: {proc.communicate()}")
        time.sleep(0.05)
    pytest.fail("no worker processes started")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("signals", [[signal.SIGTERM], [signal.SIGINT], [signal.SIGINT, signal.SIGINT]],
                         ids=["SIGTERM", "SIGINT", "SIGINT-twice"])
def test_signal_stops_a_parallel_run_within_a_second(tmp_path, signals):
    tree = _tree(tmp_path / "src")
    proc = _start(["check", "--no-cache", "-j", "2", str(tree)])
    _wait_for_workers(proc)
    start = time.time()
    for sig in signals:
        proc.send_signal(sig)
        time.sleep(0.05)
    try:
        out, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("the run did not stop")
    elapsed = time.time() - start
    assert elapsed < 1.5, elapsed
    assert proc.returncode == 2, (proc.returncode, err)
    assert err.strip().splitlines() == [f"gradlint: error: interrupted ({signals[0].name}); no report"], err
    assert out == ""
    time.sleep(0.2)
    assert _session_processes(proc.pid) == [], "a worker outlived the run"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_workers_exit_when_the_main_process_is_killed(tmp_path):
    tree = _tree(tmp_path / "src")
    proc = _start(["check", "--no-cache", "-j", "2", str(tree)])
    _wait_for_workers(proc)
    proc.kill()  # SIGKILL: no handler runs in the main process
    proc.communicate()
    deadline = time.time() + 5
    while _session_processes(proc.pid) and time.time() < deadline:
        time.sleep(0.1)
    left = _session_processes(proc.pid)
    if left:
        os.killpg(proc.pid, signal.SIGKILL)
    assert not left, "orphaned workers"


def test_pathological_files_are_findings_and_the_run_goes_on(tmp_path):
    (tmp_path / "deep1500.py").write_text("import torch\nx = " + "(" * 1500 + "1" + ")" * 1500 + "\n")
    (tmp_path / "deep300.py").write_text("import torch\nx = " + "[" * 300 + "1" + "]" * 300 + "\n")
    (tmp_path / "sum5000.py").write_text("import torch\nx = " + " + ".join(["a"] * 5000) + "\n")
    (tmp_path / "bad.py").write_text("import torch\nw = torch.ones(3, requires_grad=True)\nw.add_(1)\n")
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "gradlint", "check", "--no-cache", "--format", "concise",
                           str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert time.time() - start < 20
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert any("deep1500.py" in ln and "GL000" in ln and "too many nested" in ln for ln in lines), lines
    assert any("deep300.py" in ln and "GL000" in ln for ln in lines), lines
    assert any("sum5000.py" in ln and "GL001" in ln and "5,000 operands" in ln for ln in lines), lines
    assert any("bad.py:3:1: GL101" in ln for ln in lines), lines


CRASHING = textwrap.dedent("""\
    import os, signal, sys
    import gradlint.engine as engine

    _lint = engine.lint_bytes

    def lint_bytes(display, data, options):
        if b"CRASH-HERE" in data:
            os.kill(os.getpid(), signal.SIGSEGV)  # what a crash in native code does
        return _lint(display, data, options)

    engine.lint_bytes = lint_bytes
    from gradlint.cli import main
    sys.argv = ["gradlint", *sys.argv[1:]]
    main()
""")


def test_a_worker_crash_is_isolated_to_its_file(tmp_path):
    tree = _tree(tmp_path / "src", files=60, repeat=4)
    (tree / "crash.py").write_text("import torch\n# CRASH-HERE\n")
    (tree / "bad.py").write_text("import torch\nw = torch.ones(3, requires_grad=True)\nw.add_(1)\n")
    runner = tmp_path / "run_crashing.py"
    runner.write_text(CRASHING)
    proc = subprocess.run([sys.executable, str(runner), "check", "--no-cache", "-j", "2", "--format", "concise",
                           str(tree)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    crash = [ln for ln in lines if "crash.py" in ln]
    assert len(crash) == 1 and "GL001" in crash[0] and "died" in crash[0], lines
    assert any("bad.py:3:1: GL101" in ln for ln in lines), lines
    assert "Found" in proc.stdout and "Traceback" not in proc.stderr
