"""The real-code shapes in the rule fixtures (issue 10): ``python -m bench.shapes``.

Prints, per rule, how many bad and good examples each shape has (``@shape(...)`` tags, see
``gradlint/testing.py``) and the written reason where a fixture lists a shape in
``SHAPES_NOT_COVERED``. ``tests/test_shapes.py`` fails when a shape has neither both examples
nor a reason.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SHAPES = ("helper", "method", "attribute", "iteration")
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def shapes_of(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad = {s: 0 for s in SHAPES}
    good = {s: 0 for s in SHAPES}
    reasons = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "SHAPES_NOT_COVERED" for t in node.targets):
            reasons = ast.literal_eval(node.value)
        if not isinstance(node, ast.FunctionDef):
            continue
        side = bad if node.name.startswith("bad_") else good if node.name.startswith("good_") else None
        for dec in node.decorator_list:
            if side is not None and isinstance(dec, ast.Call) and getattr(dec.func, "id", None) == "shape":
                for a in dec.args:
                    side[ast.literal_eval(a)] += 1
    return bad, good, reasons


def main() -> int:
    rows = ["| rule | " + " | ".join(SHAPES) + " |", "|---|" + "---|" * len(SHAPES)]
    notes = []
    covered = total = 0
    for path in sorted(FIXTURES.glob("GL*.py")):
        bad, good, reasons = shapes_of(path)
        cells = []
        for s in SHAPES:
            total += 1
            if bad[s] and good[s]:
                covered += 1
                cells.append(f"{bad[s]} bad / {good[s]} good")
            else:
                cells.append(f"{bad[s]} bad / {good[s]} good (reason)" if s in reasons else
                             f"**{bad[s]} bad / {good[s]} good**")
            if s in reasons:
                notes.append(f"- {path.stem[:5]} {s}: {reasons[s]}")
        rows.append(f"| {path.stem[:5]} | " + " | ".join(cells) + " |")
    print("\n".join(rows))
    print(f"\n{covered} of {total} (rule, shape) pairs have a bad and a good example.")
    if notes:
        print("\nShapes not covered, with the fixture's reason:\n" + "\n".join(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
