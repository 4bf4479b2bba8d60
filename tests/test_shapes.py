"""Every rule's fixture shows its claim in the shapes real code takes (issue 10).

Read from the fixture's source (no torch needed): ``@shape("helper"|"method"|"attribute"|
"iteration")`` on ``bad_*`` and ``good_*`` examples, and an optional module-level
``SHAPES_NOT_COVERED = {"shape": "reason"}``. Each shape needs a bad and a good example, or a
reason; a reason for a shape that is covered is stale and fails too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gradlint.testing import SHAPES

FIXTURES = sorted((Path(__file__).resolve().parent.parent / "fixtures").glob("GL*.py"))


def shapes_of(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad: dict[str, list[str]] = {s: [] for s in SHAPES}
    good: dict[str, list[str]] = {s: [] for s in SHAPES}
    not_covered: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "SHAPES_NOT_COVERED" for t in node.targets
        ):
            not_covered = ast.literal_eval(node.value)
        if not isinstance(node, ast.FunctionDef):
            continue
        side = bad if node.name.startswith("bad_") else good if node.name.startswith("good_") else None
        for dec in node.decorator_list:
            if isinstance(dec, ast.Call) and getattr(dec.func, "id", None) == "shape":
                names = [ast.literal_eval(a) for a in dec.args]
                assert side is not None, f"{path.name}:{node.lineno}: @shape on {node.name}"
                for name in names:
                    assert name in SHAPES, f"{path.name}:{node.lineno}: unknown shape {name!r}"
                    side[name].append(node.name)
    return bad, good, not_covered


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_fixture_covers_real_code_shapes(path):
    bad, good, not_covered = shapes_of(path)
    problems = []
    for s in SHAPES:
        covered = bool(bad[s]) and bool(good[s])
        if s in not_covered:
            if covered:
                problems.append(f"{s}: covered, but listed in SHAPES_NOT_COVERED (stale)")
            elif not str(not_covered[s]).strip():
                problems.append(f"{s}: SHAPES_NOT_COVERED needs a reason")
        elif not covered:
            missing = "a bad example" if not bad[s] else "a good example"
            problems.append(f"{s}: no {missing} with @shape({s!r}) and no reason in SHAPES_NOT_COVERED")
    for s in not_covered:
        if s not in SHAPES:
            problems.append(f"SHAPES_NOT_COVERED names unknown shape {s!r}")
    assert not problems, f"{path.name}: " + "; ".join(problems)
