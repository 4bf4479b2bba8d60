"""Jupyter notebooks: linted cell by cell (magics masked), reported with the cell in every format,
fixed in place without losing an output, cached, run under the monitor, and through pre-commit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _cell(source, kind="code", outputs=None, cid=None):
    cell = {"cell_type": kind, "id": cid or f"c{abs(hash(str(source))) % 10**6}", "metadata": {"tags": ["x"]},
            "source": source}
    if kind == "code":
        cell["execution_count"] = 1
        cell["outputs"] = outputs or []
    return cell


OUTPUT = [{"output_type": "stream", "name": "stdout", "text": ["loss 0.25\n"]},
          {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo=", "text/plain": ["<Figure>"]},
           "metadata": {}}]

NOTEBOOK = {
    "cells": [
        _cell(["# Training\n", "A notebook with bugs in several cells."], kind="markdown", cid="md"),
        _cell(["%matplotlib inline\n", "%load_ext autoreload\n", "import torch\n",
               "w = torch.randn(3, requires_grad=True)\n", "torch.*Tensor?"], cid="setup"),
        _cell(["!pip install nothing\n", "loss = (w * 2).sum()\n", "loss.backward()\n",
               "w -= 0.1 * w.grad\n", "w?"], outputs=OUTPUT, cid="step"),
        _cell(["%%bash\n", "echo this is not python (\n"], cid="shell"),
        _cell(["files = !ls\n", "y = w * 3\n", "y.sum().backward()\n", "print(y.grad)"], cid="read"),
        _cell(["z = w * 4\n", "print(z.grad)  # noqa: GL303"], cid="noqa"),
    ],
    "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                 "language_info": {"name": "python"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


def _write(path: Path, nb=NOTEBOOK, indent=1) -> str:
    text = json.dumps(nb, indent=indent, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    return text


def _gradlint(*args, cwd):
    return subprocess.run([sys.executable, "-m", "gradlint", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_findings_name_cell_and_line(tmp_path):
    _write(tmp_path / "train.ipynb")
    p = _gradlint("check", "--no-cache", "--format", "concise", ".", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    lines = [ln for ln in p.stdout.splitlines() if ": GL" in ln]
    assert lines == [
        "train.ipynb:cell 3:4:1: GL101 in-place `-=` on `w`, a leaf tensor that requires grad: torch raises "
        "RuntimeError here",
        "train.ipynb:cell 5:4:7: GL303 `.grad` of a computed (non-leaf) tensor is always None: autograd fills "
        "`.grad` only for leaves",
    ], p.stdout  # magics, shell lines, help and the %%bash cell are no GL000; noqa works in a cell


def test_shell_and_magic_lines_continued_with_a_backslash(tmp_path):
    """IPython joins `!cmd ... \\` with the lines after it into one command (peft's notebooks run
    training scripts so): those lines are part of it, not indented Python (a GL000 before)."""
    nb = dict(NOTEBOOK, cells=[
        _cell(["import torch\n", "w = torch.randn(3, requires_grad=True)\n"], cid="a"),
        _cell(["! python train.py \\\n", "    --lr 0.1 \\\n", "    --epochs 2\n", "%env A=1 \\\n", "  B=2\n",
               "w += 1\n"], cid="b"),
    ])
    _write(tmp_path / "run.ipynb", nb)
    p = _gradlint("check", "--no-cache", "--format", "concise", ".", cwd=tmp_path)
    lines = [ln for ln in p.stdout.splitlines() if ": GL" in ln]
    assert len(lines) == 1 and lines[0].startswith("run.ipynb:cell 2:6:1: GL101"), p.stdout


def test_machine_formats_carry_the_cell_and_the_file_line(tmp_path):
    raw = _write(tmp_path / "train.ipynb")
    raw_lines = raw.splitlines()
    js = json.loads(_gradlint("check", "--no-cache", "--format", "json", "train.ipynb", cwd=tmp_path).stdout)
    findings = js if isinstance(js, list) else js.get("findings", js)
    assert [(f["code"], f["cell"], f["line"]) for f in findings] == [("GL101", 3, 4), ("GL303", 5, 4)]
    sarif = json.loads(_gradlint("check", "--no-cache", "--format", "sarif", "train.ipynb", cwd=tmp_path).stdout)
    regions = [r["locations"][0]["physicalLocation"]["region"] for r in sarif["runs"][0]["results"]]
    assert "w -= 0.1 * w.grad" in raw_lines[regions[0]["startLine"] - 1]
    assert "print(y.grad)" in raw_lines[regions[1]["startLine"] - 1]
    gh = _gradlint("check", "--no-cache", "--format", "github", "train.ipynb", cwd=tmp_path).stdout
    line = int(gh.split("line=", 1)[1].split(",", 1)[0])
    assert "w -= 0.1 * w.grad" in raw_lines[line - 1]


def test_fix_writes_the_cells_back_keeping_everything_else(tmp_path):
    for indent in (1, 2):
        nb_path = tmp_path / f"train{indent}.ipynb"
        raw = _write(nb_path, indent=indent)
        p = _gradlint("check", "--no-cache", "--fix", "--unsafe-fixes", nb_path.name, cwd=tmp_path)
        assert "Fixed" in p.stderr, p.stderr
        new = nb_path.read_text(encoding="utf-8")
        assert new.endswith("\n") and new != raw
        before, after = json.loads(raw), json.loads(new)
        assert list(after) == list(before)  # key order
        for a, b in zip(before["cells"], after["cells"]):
            assert {k: v for k, v in a.items() if k != "source"} == {k: v for k, v in b.items() if k != "source"}
        changed = [b["id"] for a, b in zip(before["cells"], after["cells"]) if a["source"] != b["source"]]
        assert changed == ["step"]
        step = after["cells"][2]["source"]
        assert step[0] == "!pip install nothing\n" and step[-1] == "w?"  # IPython lines restored
        assert "with torch.no_grad():\n" in step
        assert after["cells"][2]["outputs"] == OUTPUT
        # the rewrite is formatted as the file was: only the changed source lines differ
        assert json.dumps(after, indent=indent, ensure_ascii=False) + "\n" == new
        again = _gradlint("check", "--no-cache", "--fix", "--unsafe-fixes", nb_path.name, cwd=tmp_path)
        assert nb_path.read_text(encoding="utf-8") == new, again.stderr  # idempotent


def test_malformed_notebook_is_one_gl000(tmp_path):
    (tmp_path / "broken.ipynb").write_text('{"cells": [', encoding="utf-8")
    (tmp_path / "other.ipynb").write_text('{"not": "a notebook"}', encoding="utf-8")
    p = _gradlint("check", "--no-cache", "--format", "concise", ".", cwd=tmp_path)
    assert p.returncode == 1
    lines = [ln for ln in p.stdout.splitlines() if ": GL" in ln]
    assert len(lines) == 2 and all("GL000" in ln and "notebook" in ln for ln in lines), lines


def test_cache_and_skip_file(tmp_path):
    _write(tmp_path / "train.ipynb")
    first = _gradlint("check", "--cache-dir", str(tmp_path / "cache"), "train.ipynb", cwd=tmp_path).stdout
    second = _gradlint("check", "--cache-dir", str(tmp_path / "cache"), "train.ipynb", cwd=tmp_path).stdout
    assert first == second and "cell 3:4:1" in second
    nb = json.loads(json.dumps(NOTEBOOK))
    nb["cells"][1]["source"] = ["# gradlint: skip-file\n"] + nb["cells"][1]["source"]
    _write(tmp_path / "skipped.ipynb", nb)
    assert "skipped.ipynb" not in _gradlint("check", "--no-cache", "skipped.ipynb", cwd=tmp_path).stdout


def test_non_python_kernel_is_not_linted(tmp_path):
    nb = json.loads(json.dumps(NOTEBOOK))
    nb["metadata"] = {"kernelspec": {"language": "R", "name": "ir"}}
    _write(tmp_path / "r.ipynb", nb)
    assert _gradlint("check", "--no-cache", "r.ipynb", cwd=tmp_path).returncode == 0


def test_stub_files_are_not_linted(tmp_path):
    (tmp_path / "m.pyi").write_text("import torch\nw = torch.ones(3, requires_grad=True)\nw.add_(1)\n")
    p = _gradlint("check", "--no-cache", ".", cwd=tmp_path)
    assert p.returncode == 0 and "0 files checked" in p.stdout


def test_run_a_notebook_under_the_monitor(tmp_path):
    pytest.importorskip("torch")
    nb = json.loads(json.dumps(NOTEBOOK))
    del nb["cells"][3]  # the %%bash cell would not run without IPython either
    _write(tmp_path / "train.ipynb", nb)
    p = subprocess.run([sys.executable, "-W", "ignore", "-m", "gradlint", "run", "train.ipynb"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1  # torch raises at the in-place update, as in Jupyter
    assert "IPython lines (magics, shell commands) skipped in train.ipynb" in p.stderr
    assert "train.ipynb:cell 3:4:1: GL101" in p.stderr, p.stderr


def test_pre_commit_hooks_cover_notebooks():
    text = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert text.count("types_or: [python, jupyter]") == text.count("- id:")
