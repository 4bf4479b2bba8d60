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
    "optimizer-step-before-backward": "GL503",
    "missing-zero-grad": "GL601",
    "unregistered-submodule": "GL602",
    "module-in-forward": "GL603",
    "optimizer-stale-params": "GL604",
    "optimizer-misses-params": "GL607",
    "function-mutates-grad-output": "GL701",
    "function-mutates-input": "GL702",
    "inference-tensor": "GL703",
    "nondifferentiable-op": "GL305",
    "clip-before-backward": "GL605",
    "clip-after-step": "GL605",
    "grad-mode-leak": "GL306",
    "function-backward-arity": "GL704",
    "non-full-backward-hook": "GL705",
    "nonscalar-backward": "GL307",
    "int-requires-grad": "GL308",
    "misnamed-init": "GL608",
    "target-not-detached": "GL309",
    # no rule yet (bench/realbugs/README.md says why)
    "clip-scaled-grads": "GL605",
    "scaler-step-bypassed": "GL609",
    "zero-grad-in-accumulation": "GL606",
    "checkpoint-no-grad-input": None,
    "cross-loss-grad-leak": None,
    "legacy-autograd-function": "GL706",
    "ddp-unused-parameters": None,
    "hook-not-removed": "GL707",
    "frozen-by-zeroed-grad": None,
    "view-inplace-forbidden": "GL105",
    "function-backward-mutates-saved": None,
    "grad-without-create-graph": None,
    "ddp-sync-skipped": "GL610",
    "scaler-update-skipped": "GL609",
    "ddp-reentrant-checkpoint": None,
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


def _read_header(lines: List[str]) -> Tuple[List[str], Dict[str, str]]:
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
    return sources, fields


def _fill(case: Case, fields: Dict[str, str]) -> None:
    """The expectation from the header, and the checks every case, fixed twin and negative shares."""
    e = _EXPECT.match(fields.get("Expect", ""))
    if not e:
        case.problems.append(f"bad or missing '# Expect:' ({fields.get('Expect', '')!r})")
    elif e.group(1):
        case.expect, case.exc, case.text = e.group(1), e.group(2), e.group(3)
    elif e.group(4):
        case.expect, case.text = "silent", e.group(5)
    else:
        case.expect = "ok"
    if not case.sources:
        case.problems.append("no '# Source:' line")
    if not case.category:
        case.problems.append("no '# Category:' line")
    if case.kind == "bug":
        if not case.bug_lines:
            case.problems.append("no '# BUG:' marker")
        if case.expect == "ok":
            case.problems.append("a bug case cannot expect 'ok'")
    else:
        if case.bug_lines:
            case.problems.append("a fixed twin or negative carries a '# BUG:' marker")
        if case.expect != "ok":
            case.problems.append("a fixed twin or negative must expect 'ok'")


def _bug_markers(lines: List[str]) -> List[Tuple[int, str]]:
    out = []
    for i, line in enumerate(lines, 1):
        m = _BUG.search(line)
        if m:
            out.append((i, m.group(1)))
    return out


def parse_case(path: str, kind: str) -> Case:
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    sources, fields = _read_header(lines)
    case = Case(path, kind, sources, fields.get("Category", ""), "")
    case.bug_lines = _bug_markers(lines)
    _fill(case, fields)
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


# ---------------------------------------------------------------------------- split cases
SPLIT = os.path.join(os.path.dirname(HERE), "realbugs-split")


@dataclasses.dataclass
class SplitCase(Case):
    """A case laid out over several files (``bench/realbugs-split/NNN_slug/``): ``path`` is the case
    directory, ``entry`` the entry script relative to it (the ``CASE`` file), ``files`` every Python
    file relative to it, ``bug_sites`` the ``# BUG`` markers as (absolute file, line, category),
    ``original`` the single-file case in ``cases/`` it was split from."""

    entry: str = ""
    files: List[str] = dataclasses.field(default_factory=list)
    bug_sites: List[Tuple[str, int, str]] = dataclasses.field(default_factory=list)
    original: str = ""

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @property
    def layout(self) -> str:
        """modules / package, plus re-export (an ``__init__.py`` that imports from a submodule) and
        star (``import *``), read from the files."""
        kinds = []
        inits = [f for f in self.files if os.path.basename(f) == "__init__.py"]
        kinds.append("package" if inits else "modules")
        texts = {}
        for f in self.files:
            with open(os.path.join(self.path, f), encoding="utf-8") as fh:
                texts[f] = fh.read()
        if any(re.search(r"^from \.\S* import (?!\*)", texts[f], re.M) for f in inits):
            kinds.append("re-export")
        if any(re.search(r"^\s*from \S+ import \*", t, re.M) for t in texts.values()):
            kinds.append("star")
        return "+".join(kinds)


def _py_files(top: str) -> List[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__pycache__")))
        for name in sorted(filenames):
            if name.endswith(".py"):
                out.append(os.path.relpath(os.path.join(dirpath, name), top))
    return sorted(out)


def parse_split_case(directory: str, kind: str) -> SplitCase:
    """The header comes from the entry script named in ``CASE``; the ``# BUG`` markers from every file."""
    problems: List[str] = []
    entry = ""
    marker = os.path.join(directory, "CASE")
    if os.path.exists(marker):
        with open(marker, encoding="utf-8") as fh:
            entry = fh.read().strip()
    if not entry:
        problems.append("no CASE file naming the entry script")
    elif os.path.basename(entry) not in ("train.py", "main.py"):
        problems.append(f"the entry script must be train.py or main.py, not {entry}")
    files = _py_files(directory)
    lines: List[str] = []
    if entry in files:
        with open(os.path.join(directory, entry), encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    elif entry:
        problems.append(f"the entry script {entry} does not exist")
    sources, fields = _read_header(lines)
    original = os.path.join(CASES, os.path.basename(directory) + ".py")
    case = SplitCase(directory, kind, sources, fields.get("Category", ""), "", entry=entry, files=files,
                     original=original)
    case.problems.extend(problems)
    for f in files:
        with open(os.path.join(directory, f), encoding="utf-8") as fh:
            text = fh.read().splitlines()
        if f != entry and any(_read_header(text)):
            case.problems.append(f"{f}: only the entry script carries the header")
        for line, category in _bug_markers(text):
            case.bug_sites.append((os.path.join(directory, f), line, category))
    case.bug_lines = [(line, category) for _, line, category in case.bug_sites]
    if not os.path.exists(original):
        case.problems.append(f"no single-file case {os.path.relpath(original, HERE)}")
    if len(files) < 2:
        case.problems.append("a split case has at least two Python files")
    _fill(case, fields)
    return case


def load_split(only: Optional[List[str]] = None) -> List[SplitCase]:
    """Every split case and its fixed twin (``bench/realbugs-split/``), sorted by directory name."""
    out: List[SplitCase] = []
    if not os.path.isdir(SPLIT):
        return out
    for name in sorted(os.listdir(SPLIT)):
        full = os.path.join(SPLIT, name)
        if not os.path.isdir(full) or not name[:3].isdigit():
            continue
        if only and not any(name.startswith(o) for o in only):
            continue
        out.append(parse_split_case(full, "fixed" if name.endswith("_fixed") else "bug"))
    return out
