"""The real-bug benchmark: cases reduced from public bug reports, scored per category.

``python -m bench.realbugs --help`` for the options; ``bench/realbugs/README.md`` for the format.
This module only reads the cases and runs tools as subprocesses: it never imports torch itself
(``--verify`` and ``--runtime`` run the cases in child processes).
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases")
NEGATIVES = os.path.join(HERE, "negatives")

# Each category and the rule that claims it (None: no rule yet; the README says why or what next).
CATEGORIES: Dict[str, Optional[str]] = {
    "inplace-on-leaf": "GL101",
    "inplace-on-saved": "GL102",
    "inplace-through-data": "GL103",
    "inplace-on-detached": "GL104",
    "numpy-roundtrip": "GL201",
    "scalar-roundtrip": "GL202",
    "detach-new-leaf": "GL203",
    "tensor-copy-construct": "GL204",
    "loss-rewrap": "GL205",
    "non-leaf-parameter": "GL301",
    "requires-grad-non-leaf": "GL302",
    "non-leaf-grad-read": "GL303",
    "parameter-rebound": "GL304",
    "backward-without-graph": "GL305",
    "state-dict-alias": "GL401",
    "grad-alias": "GL402",
    "deepcopy-non-leaf": "GL403",
    "graph-kept-alive": "GL501",
    "backward-twice": "GL502",
    "missing-zero-grad": "GL601",
    "unregistered-submodule": "GL602",
    "module-in-forward": "GL603",
    "optimizer-stale-params": "GL604",
    "function-mutates-grad-output": "GL701",
    "function-mutates-input": "GL702",
    "inference-tensor": "GL703",
    "nondifferentiable-op": "GL305",
    "clip-before-backward": "GL605",
    "clip-after-step": "GL605",
    "grad-mode-leak": "GL306",
    "function-backward-arity": "GL704",
    "non-full-backward-hook": "GL705",
}

_HEADER = re.compile(r"^#\s*(Source|Category|Expect)\s*:\s*(.*?)\s*$")
_BUG = re.compile(r"#\s*BUG\s*:\s*([A-Za-z0-9_-]+)")
_EXPECT = re.compile(r"^(raises|warns)\s+([A-Za-z_][\w.]*)\s*:\s*(.+)$|^(silent)\s*:\s*(.+)$|^(ok)\s*$")


@dataclasses.dataclass
class Case:
    path: str
    kind: str  # "bug", "fixed" or "negative"
    sources: List[str]
    category: str
    expect: str  # "raises", "warns", "silent", "ok"
    exc: str = ""  # exception or warning class
    text: str = ""  # message substring or what goes wrong
    bug_lines: List[Tuple[int, str]] = dataclasses.field(default_factory=list)
    problems: List[str] = dataclasses.field(default_factory=list)

    @property
    def name(self) -> str:
        return os.path.splitext(os.path.basename(self.path))[0]

    @property
    def number(self) -> str:
        return self.name.split("_", 1)[0]


def parse_case(path: str, kind: str) -> Case:
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    sources: List[str] = []
    fields: Dict[str, str] = {}
    for line in lines:
        if not line.startswith("#"):
            break
        m = _HEADER.match(line)
        if m:
            if m.group(1) == "Source":
                sources.append(m.group(2))
            else:
                fields[m.group(1)] = m.group(2)
    case = Case(path, kind, sources, fields.get("Category", ""), "")
    for i, line in enumerate(lines, 1):
        m = _BUG.search(line)
        if m:
            case.bug_lines.append((i, m.group(1)))
    e = _EXPECT.match(fields.get("Expect", ""))
    if not e:
        case.problems.append(f"bad or missing '# Expect:' ({fields.get('Expect', '')!r})")
    elif e.group(1):
        case.expect, case.exc, case.text = e.group(1), e.group(2), e.group(3)
    elif e.group(4):
        case.expect, case.text = "silent", e.group(5)
    else:
        case.expect = "ok"
    if not sources:
        case.problems.append("no '# Source:' line")
    if not case.category:
        case.problems.append("no '# Category:' line")
    if kind == "bug":
        if not case.bug_lines:
            case.problems.append("no '# BUG:' marker")
        if case.expect == "ok":
            case.problems.append("a bug case cannot expect 'ok'")
    else:
        if case.bug_lines:
            case.problems.append("a fixed twin or negative carries a '# BUG:' marker")
        if case.expect != "ok":
            case.problems.append("a fixed twin or negative must expect 'ok'")
    return case


def load(only: Optional[List[str]] = None) -> List[Case]:
    """Every case, fixed twin and negative, sorted by file name; ``only``: numbers or name
    prefixes to keep."""
    out: List[Case] = []
    for folder, default in ((CASES, "bug"), (NEGATIVES, "negative")):
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".py") or not name[:3].isdigit():
                continue
            stem = name[:-3]
            if only and not any(stem.startswith(o) for o in only):
                continue
            kind = "fixed" if default == "bug" and stem.endswith("_fixed") else default
            out.append(parse_case(os.path.join(folder, name), kind))
    return out
