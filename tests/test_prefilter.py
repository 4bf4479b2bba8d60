"""The engine's pre-filter (files that contain none of ``engine.PREFILTER_TOKENS``: ``torch``,
and the duck-typed ``parameters``, ``buffers``, ``state_dict``, ``backward``, skip the libcst
parse and the walk) never hides a finding.

- On every fixture, findings are identical with the pre-filter on and off.
- Every fixture with each token spelled differently (same length, so positions do not move)
  has no finding but GL000 even with the pre-filter off: no rule can fire without them.
- Files without torch that use a model, an optimizer or a loss passed in are still linted.
- On a sample of the installed torch package's files that do not contain ``torch`` (the files
  where a pre-filter on ``torch`` alone would change something), findings are identical with
  it on and off.
  ``python -m bench.run --prefilter-check`` makes the same comparison on the whole tree.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

import gradlint.engine as engine
from gradlint.engine import Options, lint_bytes
from gradlint.rule import registry

from conftest import FIXTURES

ALL = frozenset(registry())
ON, OFF = Options(codes=ALL), Options(codes=ALL, prefilter=False)
FIXTURE_FILES = sorted(FIXTURES.rglob("*.py"))


def full(findings):
    return [(f.to_dict(), f.source_line, f.statement_line) for f in findings]


def _hide_tokens(data: bytes) -> bytes:
    """Each pre-filter token with its case swapped (same length: positions do not move; still
    valid Python; names are case-sensitive, so the model no longer recognises them)."""
    for tok in engine.PREFILTER_TOKENS:
        data = data.replace(tok.encode(), tok.swapcase().encode())
    return data


# Files that never mention torch but are linted all the same: the duck-typed triggers (values
# passed in from another module), each found by a rule when this was written.
NO_TORCH = {
    "GL101": "def f(model):\n    for p in model.parameters():\n        p.add_(0.1)\n",
    "GL401": "def f(model, opt, data):\n    best = model.state_dict()\n    for x in data:\n"
             "        opt.step()\n    return best\n",
    "GL401 buffers": "def f(model, opt, data):\n    old = list(model.buffers())\n    for x in data:\n"
                     "        opt.step()\n    return old\n",
    "GL601": "def train(model, optimizer, loader):\n    for x, y in loader:\n        loss = model(x)\n"
             "        loss.backward()\n        optimizer.step()\n",
}


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_fixture_same_findings_with_prefilter_off(path):
    data = path.read_bytes()
    on = lint_bytes(str(path), data, ON)
    assert full(on) == full(lint_bytes(str(path), data, OFF))


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_fixture_without_the_tokens_has_no_findings(path):
    """With every pre-filter token hidden, no rule fires even with the pre-filter off: so the
    pre-filter (which skips exactly such files) hides nothing."""
    data = path.read_bytes()
    assert b"torch" in data
    mutant = _hide_tokens(data)
    on = lint_bytes(str(path), mutant, ON)
    off = lint_bytes(str(path), mutant, OFF)
    assert [f for f in off if f.code != "GL000"] == []
    assert full(on) == full(off)


@pytest.mark.parametrize("case", sorted(NO_TORCH))
def test_duck_typed_findings_without_torch_are_not_hidden(case):
    data = NO_TORCH[case].encode()
    assert b"torch" not in data
    on = lint_bytes("t.py", data, ON)
    # (whether the rule fires on the snippet is the rule's business; that the pre-filter does
    # not change the answer is this test's)
    assert full(on) == full(lint_bytes("t.py", data, OFF))
    assert lint_bytes("t.py", _hide_tokens(data), OFF) == []


def test_prefilter_skips_the_parse(monkeypatch):
    import libcst

    def fail(*a, **k):
        raise AssertionError("parsed")

    monkeypatch.setattr(libcst, "parse_module", fail)
    assert lint_bytes("a.py", b"import numpy as np\nx = np.ones(3)\n", ON) == []
    bad = lint_bytes("b.py", b"def f(:\n  pass\n", ON)
    assert [f.code for f in bad] == ["GL000"]
    with pytest.raises(AssertionError):
        lint_bytes("a.py", b"import numpy as np\n", OFF)


def _torch_sample(n: int = 100):
    spec = importlib.util.find_spec("torch")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return []
    root = list(spec.submodule_search_locations)[0]
    without = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith((".py", ".pyi")):
                full_path = os.path.join(dirpath, name)
                try:
                    with open(full_path, "rb") as fh:
                        data = fh.read()
                except OSError:
                    continue
                if b"torch" not in data and len(data) < 200_000:
                    without.append((full_path, data))
    step = max(1, len(without) // n)
    return without[::step][:n]


def test_torch_sample_same_findings_with_prefilter_off():
    sample = _torch_sample()
    if not sample:
        pytest.skip("torch is not installed")
    assert len(sample) >= 20
    for path, data in sample:
        assert full(lint_bytes(path, data, ON)) == full(lint_bytes(path, data, OFF)), path
