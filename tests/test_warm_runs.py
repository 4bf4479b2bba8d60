"""A fully cached run imports neither libcst nor any rule module and starts no worker; huge files
are parsed by one worker at a time."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

BAD = "import torch\nw = torch.ones(3, requires_grad=True)\nw.add_(1)\n"

PROBE = textwrap.dedent("""\
    import sys
    from gradlint.cli import main
    sys.argv = ["gradlint", "check", "-j", "2", "--cache-dir", sys.argv[1], sys.argv[2]]
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    heavy = sorted(m for m in sys.modules if m == "libcst" or m.startswith("gradlint.rules.")
                   or m.startswith("gradlint.model"))
    sys.stderr.write(f"HEAVY={heavy} CODE={code}\\n")
""")


def test_a_fully_cached_run_imports_no_rule_and_no_libcst(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(40):  # more than the in-process threshold: a cold run uses the pool
        (src / f"m{i}.py").write_text(BAD + "\n".join(f"x{k} = torch.zeros({k})" for k in range(40)) + "\n")
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    cache = tmp_path / "cache"
    runs = [subprocess.run([sys.executable, str(probe), str(cache), str(src)], capture_output=True, text=True,
                           timeout=300) for _ in range(2)]
    cold, warm = runs
    assert "libcst" in cold.stderr and "CODE=1" in cold.stderr, cold.stderr
    assert "HEAVY=[] CODE=1" in warm.stderr, warm.stderr
    assert cold.stdout == warm.stdout and warm.stdout.count("GL101") == 40


def test_huge_files_take_the_shared_lock(monkeypatch):
    from gradlint import engine

    events = []

    class Lock:
        def __enter__(self):
            events.append("acquire")

        def __exit__(self, *exc):
            events.append("release")

    monkeypatch.setattr(engine, "_BIG_LOCK", Lock())
    options = engine.Options(codes=frozenset({"GL101"}))
    engine._lint_one("small.py", BAD.encode(), options)
    assert events == []
    big = (BAD + "# " + "x" * engine.BIG_FILE_BYTES + "\n").encode()
    findings = engine._lint_one("big.py", big, options)
    assert events == ["acquire", "release"] and [f.code for f in findings] == ["GL101"]
