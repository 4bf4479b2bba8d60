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


def _interactive_signals() -> None:
    """In the child before it runs gradlint: Ctrl-C as a terminal gives it. A test run started in
    the background by a non-interactive shell (`bash .ci/run &`) ignores SIGINT, and an ignored
    disposition is inherited across exec: Python then installs no KeyboardInterrupt handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(args, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gradlint", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, text=True,
                            preexec_fn=_interactive_signals, **kw)


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

    def lint_bytes(display, data, options, project=None):
        if b"CRASH-HERE" in data:
            os.kill(os.getpid(), signal.SIGSEGV)  # what a crash in native code does
        return _lint(display, data, options, project)

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


OLD_PLUGGY_SUITE = textwrap.dedent("""\
    import pytest
    torch = pytest.importorskip("torch")

    def test_plain():
        assert 1 + 1 == 2

    def test_non_leaf_grad():
        x = torch.ones(3, requires_grad=True)
        y = x * 2
        y.sum().backward()
        assert y.grad is None

    def test_expects_the_error():
        x = torch.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf Variable"):
            x.add_(1)
""")


def test_pytest_plugin_with_pluggy_older_than_1_2(tmp_path):
    """Installing gradlint must not break pytest where pluggy < 1.2 (no `wrapper=True`)."""
    root = Path(__file__).resolve().parent.parent
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True,
                   capture_output=True, timeout=300)
    py = str(venv / "bin" / "python")
    pins = subprocess.run([py, "-m", "pip", "install", "-q", "pytest==7.4.4", "pluggy==1.0.0"],
                          capture_output=True, text=True, timeout=600)
    if pins.returncode != 0:
        pytest.skip(f"cannot install pytest 7.4 / pluggy 1.0 here: {pins.stderr[-300:]}")
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "-e", str(root)], check=True,
                   capture_output=True, timeout=600)
    version = subprocess.run([py, "-c", "import pluggy; print(pluggy.__version__)"], capture_output=True,
                             text=True).stdout.strip()
    assert version == "1.0.0"
    (tmp_path / "test_suite.py").write_text(OLD_PLUGGY_SUITE)
    # only gradlint's plugin (loaded as its entry point would load it): other plugins installed
    # next to the system's newer pytest may not support pytest 7
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    plugin = ["-p", "gradlint.runtime.pytest_plugin"]
    off = subprocess.run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, "test_suite.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert off.returncode == 0 and "3 passed" in off.stdout, off.stdout + off.stderr
    strict = subprocess.run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, "-W", "ignore",
                             "--gradlint-strict", "test_suite.py"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=600, env=env)
    # the non-leaf .grad read fails the test under --gradlint-strict; the test that expects
    # torch's error (pytest.raises) does not
    assert "1 failed, 2 passed" in strict.stdout, strict.stdout + strict.stderr
    assert "GradlintFindings" in strict.stdout and "test_non_leaf_grad" in strict.stdout


AS_ANOTHER_USER = """
import os, sys
import gradlint.cli, gradlint.engine, gradlint.discovery, gradlint.config, gradlint.report
import gradlint.report.concise
from gradlint.rule import registry, visit_rules
registry(); visit_rules()
import libcst, gradlint.model.walk, gradlint.index, gradlint.positions, gradlint.edits, gradlint.cache, hashlib
import bisect, difflib, functools, linecache
if os.getuid() == 0:  # root reads everything: drop to nobody (modules are imported already)
    os.setgid(65534)
    os.setuid(65534)
sys.argv = ["gradlint", *sys.argv[1:]]
gradlint.cli.main()
"""


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_unreadable_paths_are_findings_never_a_silent_pass(tmp_path):
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "a.py").write_text("import torch\n")
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "f.py").write_text("import torch\n")
    (tmp_path / "proj" / "ok.py").write_text("import torch\nx = 1\n")
    (tmp_path / "secret").chmod(0)
    (tmp_path / "proj" / "f.py").chmod(0)
    tmp_path.chmod(0o755)

    def run(*paths):
        return subprocess.run([sys.executable, "-c", AS_ANOTHER_USER, "check", "--no-cache", "-j", "1",
                               "--format", "concise", *paths], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)

    try:
        for paths, expected in [(["secret"], "secret:1:1: GL000 cannot read directory: Permission denied"),
                                (["secret/a.py"], "secret/a.py:1:1: GL000 cannot read file: Permission denied"),
                                (["proj"], "proj/f.py:1:1: GL000 cannot read file: Permission denied"),
                                (["proj/f.py"], "proj/f.py:1:1: GL000 cannot read file: Permission denied"),
                                (["."], "secret:1:1: GL000 cannot read directory: Permission denied")]:
            proc = run(*paths)
            assert proc.returncode == 1, (paths, proc.stdout, proc.stderr)
            assert expected in proc.stdout, (paths, proc.stdout)
            assert "All checks passed" not in proc.stdout
        proc = run("--ignore", "GL000", "secret")  # GL000 off: still never a silent pass
        assert proc.returncode == 2 and proc.stderr.strip() == (
            "gradlint: error: secret: cannot read directory: Permission denied"), proc.stderr
    finally:
        (tmp_path / "secret").chmod(0o755)
        (tmp_path / "proj" / "f.py").chmod(0o644)


def test_an_empty_path_is_an_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gradlint", "check", ""], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.strip() == "gradlint: error: empty path ''"


def test_default_jobs_follow_the_usable_cpus():
    from gradlint.cli import usable_cpus

    n = usable_cpus()
    assert 1 <= n <= (os.cpu_count() or 1)
    if hasattr(os, "sched_getaffinity"):
        assert n <= len(os.sched_getaffinity(0))


def test_pre_commit_hooks_run_serially():
    hooks = (Path(__file__).resolve().parent.parent / ".pre-commit-hooks.yaml").read_text()
    assert hooks.count("require_serial: true") == hooks.count("- id:")


FIXABLE = "import torch\nw = torch.randn(3, requires_grad=True)\nw += 1\n"


def _fix(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gradlint", "check", "--no-cache", "--fix", "--unsafe-fixes",
                           str(path)], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not hasattr(os, "chown") or os.getuid() != 0, reason="needs root to own a file as another user")
def test_fix_keeps_owner_group_and_mode(tmp_path):
    f = tmp_path / "train.py"
    f.write_text(FIXABLE)
    os.chown(f, 65534, 65534)
    f.chmod(0o640)
    _fix(f)
    assert f.read_text() != FIXABLE, "nothing was fixed"
    st = f.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (65534, 65534, 0o640)


@pytest.mark.skipif(not hasattr(os, "link"), reason="hard links")
def test_fix_keeps_hard_links(tmp_path):
    f = tmp_path / "train.py"
    f.write_text(FIXABLE)
    other = tmp_path / "link.py"
    os.link(f, other)
    _fix(f)
    assert f.read_text() != FIXABLE, "nothing was fixed"
    assert other.read_text() == f.read_text()
    assert os.stat(f).st_ino == os.stat(other).st_ino
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".gradlint-tmp")]


# ------------------------------------------------------------------------------ smaller ones
BAD = "import torch\nw = torch.ones(3, requires_grad=True)\nw.add_(1)\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_report_that_cannot_be_written_is_a_one_line_error(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "gradlint", "check", "--no-cache", str(tmp_path)],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "gradlint: error: cannot write the report to stdout: No space left on device"
    proc = subprocess.run([sys.executable, "-m", "gradlint", "check", "--no-cache", "--output-file", "/dev/full",
                           str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_select_on_the_command_line_wins_over_the_config_ignore(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "gradlint.toml").write_text('ignore = ["GL101"]\n')
    quiet = subprocess.run([sys.executable, "-m", "gradlint", "check", "--no-cache", "bad.py"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert quiet.returncode == 0, quiet.stdout
    chosen = subprocess.run([sys.executable, "-m", "gradlint", "check", "--no-cache", "--select", "GL101", "bad.py"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert chosen.returncode == 1 and "GL101" in chosen.stdout, chosen.stdout


def test_flake8_plugin_honours_skip_file():
    from gradlint.flake8 import Plugin

    lines = ("# gradlint: skip-file\n" + BAD).splitlines(keepends=True)
    assert list(Plugin(None, lines, "x.py").run()) == []
    assert list(Plugin(None, BAD.splitlines(keepends=True), "x.py").run())


def test_usage_errors_are_one_line():
    proc = subprocess.run([sys.executable, "-m", "gradlint", "check", "--no-such-option"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("gradlint: error: No such option")


RUN_AND_OS_EXIT = textwrap.dedent("""\
    import os
    import torch
    w = torch.ones(3, requires_grad=True)
    y = w * 2
    y.grad
    os._exit(3)
""")


def test_run_reports_before_os_exit_and_honours_the_format(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "prog.py"
    script.write_text(RUN_AND_OS_EXIT)
    proc = subprocess.run([sys.executable, "-W", "ignore", "-m", "gradlint", "run", str(script)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3
    assert "prog.py:5:1: GL303" in proc.stderr, proc.stderr
    proc = subprocess.run([sys.executable, "-W", "ignore", "-m", "gradlint", "run", "--format", "json", str(script)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3 and '"code": "GL303"' in proc.stderr, proc.stderr


def test_the_docs_url_is_one_setting(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    env = dict(os.environ, GRADLINT_DOCS_URL="https://docs.example.org/gradlint/rules.html")
    proc = subprocess.run([sys.executable, "-m", "gradlint", "check", "--format", "json", "--cache-dir",
                           str(tmp_path / "cache"), "bad.py"], cwd=tmp_path, capture_output=True, text=True,
                          env=env, timeout=60)
    assert '"url": "https://docs.example.org/gradlint/rules.html#gl101-inplace-on-leaf"' in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "gradlint", "check", "--format", "json", "--cache-dir",
                           str(tmp_path / "cache"), "bad.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env={k: v for k, v in os.environ.items() if k != "GRADLINT_DOCS_URL"})
    assert "docs.example.org" not in proc.stdout  # the cached result is not reused for another base
    assert '"url": ""' in proc.stdout  # unset: no link (none points at a site that is not this project's)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="symlinks")
def test_a_symlink_loop_in_a_walk_is_one_gl000_and_the_run_goes_on(tmp_path):
    """A real symlink loop met while walking a directory (``bad.py -> bad.py``, and two folders
    pointing at each other): one GL000 for that path; the other files are linted."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "ok.py").write_text("import torch\nw = torch.ones(3, requires_grad=True)\nw.add_(1)\n")
    os.symlink("bad.py", proj / "bad.py")
    os.symlink("d2", proj / "d1")
    os.symlink("d1", proj / "d2")
    proc = subprocess.run([sys.executable, "-m", "gradlint", "check", "--no-cache", "."], cwd=proj,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    lines = sorted(proc.stdout.splitlines()[:-1])
    assert len(lines) == 2 and lines[0].startswith("bad.py:1:1: GL000 cannot read file") and \
        lines[1].startswith("ok.py:3:1: GL101"), proc.stdout + proc.stderr


def test_a_pyproject_that_is_not_utf8_is_a_one_line_error(tmp_path):
    (tmp_path / "pyproject.toml").write_bytes(b'[tool.gradlint]\nselect = ["GL1\xff"]\n')
    (tmp_path / "a.py").write_text("import torch\n")
    proc = subprocess.run([sys.executable, "-m", "gradlint", "check", "--no-cache", "a.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("gradlint: error: cannot read ") and "pyproject.toml" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr


def test_stdin_makes_no_cache_directory(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gradlint", "check", "-"], cwd=tmp_path, input="import torch\n",
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_linting_collects_garbage_rarely_and_gives_the_thresholds_back(tmp_path, monkeypatch):
    """The run lints with few cyclic collections (the index keeps the project's trees; the
    default thresholds cost ~40% of a cold run) and leaves the caller's process as it was: the
    flake8 and pytest plugins lint inside another program."""
    import gc

    from gradlint import engine
    from gradlint.rule import registry

    seen = []
    real = engine._lint_batch
    monkeypatch.setattr(engine, "_lint_batch", lambda tasks: seen.append(gc.get_threshold()) or real(tasks))
    f = tmp_path / "m.py"
    f.write_text("import torch\nw = torch.zeros(3, requires_grad=True)\nw.add_(1)\n")
    before = gc.get_threshold()
    findings = engine.lint_tasks([engine.Task(str(f), str(f), engine.Options(codes=frozenset(registry())))], jobs=1)
    assert [x.code for x in findings] == ["GL101"]
    assert seen == [engine.LINT_GC_THRESHOLD]
    assert gc.get_threshold() == before


# Invalid syntax that Python's parser rejects: libcst's native parser rejects each too, so a file
# is given to ast.parse first only where it may hold what libcst accepts or crashes on (brackets
# nested very deep, very long lines); gradlint.engine._python_parse_first
INVALID_SYNTAX_PROBES = [
    "def f(a=1, b): pass\n", "f(**a, *b)\n", "del f()\n", "f() = 1\n", "a + 1 = 2\n", "(a, b) += 1\n",
    "def f(*): pass\n", "f(x for x in y, 1)\n", "x: int = 1 = 2\n", "import a as b.c\n",
    "[x for x in y] = 1\n", "True = 1\n", "None += 1\n", "a = 1 if b\n", "0777\n", "1__0\n",
    "print 'x'\n", "f'{'\n", "with a as f(): pass\n",
    "def f(**k, a): pass\n", "f(*a=1)\n", "x = (yield) = 1\n", "if x:\npass\n", "x = [1, 2\n",
]


@pytest.mark.parametrize("probe", INVALID_SYNTAX_PROBES)
def test_invalid_syntax_is_a_finding_without_pythons_parser_first(probe):
    from gradlint.engine import Options, _python_parse_first, lint_text
    from gradlint.rule import registry

    text = "import torch\n" + probe
    with pytest.raises(SyntaxError):
        compile(text, "probe.py", "exec", flags=0x400, dont_inherit=True)  # ast.PyCF_ONLY_AST
    assert not _python_parse_first(text)
    findings = lint_text("probe.py", text, Options(codes=frozenset(registry())))
    assert [f.code for f in findings] == ["GL000"], findings


def test_deep_brackets_and_long_lines_go_to_pythons_parser_first():
    from gradlint.engine import _python_parse_first

    assert _python_parse_first("x = " + "(" * 150 + "1" + ")" * 150 + "\n")
    assert _python_parse_first("x = " + "not " * 600 + "1\n")
    assert not _python_parse_first("x = f(g(h([1, {2: (3,)}])))\ns = '((('\n")
