"""Findings at the cause carry the symptom as a related location, through the CLI and the cache."""

import json
import subprocess
import sys
import textwrap

SRC = textwrap.dedent('''\
    import torch

    x = torch.ones(3, requires_grad=True)
    h = x.sigmoid()
    l1 = (h * 2).sum()
    l2 = (h * 3).sum()
    l1.backward()
    l2.backward()
''')


def _json(tmp_path, *extra):
    p = subprocess.run([sys.executable, "-m", "gradlint.cli", "check", "--format", "json", "--cache-dir",
                        str(tmp_path / "cache"), *extra, "a.py"], cwd=tmp_path, capture_output=True, text=True)
    return json.loads(p.stdout)


def test_gl502_at_the_freeing_backward_with_the_symptom_related(tmp_path):
    (tmp_path / "a.py").write_text(SRC)
    cold = _json(tmp_path)
    warm = _json(tmp_path)  # from the cache
    assert cold == warm
    (f,) = cold
    assert (f["code"], f["line"]) == ("GL502", 7)
    assert [(r["line"], r["message"].split(":")[0]) for r in f["related"]] == [
        (8, "the later backward() that goes through the freed part again"),
        (4, "the part both graphs share is computed here"),
    ]
