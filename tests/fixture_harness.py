"""Reads the rule fixtures: their inline expectations and their runnable examples."""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
MARKER = re.compile(r"#\s*(error|warning):\s*(GL\d{3}(?:\s*,\s*GL\d{3})*)")


def fixture_files() -> List[Path]:
    return sorted(FIXTURES.glob("GL*.py"))


def expectations(path: Path) -> Set[Tuple[int, str, str]]:
    """{(line, code, severity)} from the inline markers."""
    out = set()
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for m in MARKER.finditer(line):
            for code in re.split(r"\s*,\s*", m.group(2)):
                out.add((i, code, m.group(1)))
    return out


@dataclass
class Example:
    path: Path
    name: str
    first: int
    last: int

    @property
    def id(self) -> str:
        return f"{self.path.stem}::{self.name}"


def examples(path: Path, prefixes: Tuple[str, ...] = ("bad_", "good_")) -> List[Example]:
    """Top-level functions (and, with prefixes=("_",), helper functions and classes)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name.startswith(prefixes):
            if isinstance(node, ast.ClassDef) and prefixes != ("_",):
                continue
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            out.append(Example(path, node.name, first, node.end_lineno or node.lineno))
    return out


def helpers_used(path: Path, example: Example) -> List[Example]:
    """The helpers (``_name`` functions/classes) that ``example`` mentions: a bad example may
    exercise a marker placed in one (e.g. a module's forward())."""
    lines = path.read_text(encoding="utf-8").splitlines()[example.first - 1 : example.last]
    text = "\n".join(lines)
    return [h for h in examples(path, ("_",)) if re.search(rf"\b{re.escape(h.name)}\b", text)]


# What torch does differently before a version, in a comment right above an example (above its
# decorators), e.g. `# before torch 2.13: raises TypeError "received an invalid combination"`:
# on an older torch the example's @raises is this one instead.
BEFORE = re.compile(r'#\s*before torch (\d+)\.(\d+):\s*raises (\w+) "([^"]*)"')


def declared(example: Example, spec: dict) -> dict:
    """``spec`` (the example's decorators) with the ``# before torch X.Y:`` comments above the
    example applied for the running torch."""
    import builtins

    import torch

    running = tuple(int(p) for p in re.findall(r"\d+", torch.__version__)[:2])
    lines = example.path.read_text(encoding="utf-8").splitlines()
    i = example.first - 2
    while i >= 0 and lines[i].lstrip().startswith("#"):
        m = BEFORE.search(lines[i])
        if m and running < (int(m.group(1)), int(m.group(2))):
            spec = {**spec, "raises": (getattr(builtins, m.group(3)), m.group(4))}
        i -= 1
    return spec


_modules: Dict[Path, object] = {}


def load(path: Path) -> object:
    if path not in _modules:
        spec = importlib.util.spec_from_file_location(f"gradlint_fixture_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        assert spec.loader is not None
        spec.loader.exec_module(mod)
        _modules[path] = mod
    return _modules[path]


# ------------------------------------------------------------------------------ devices
# Every example runs on the CPU, and on CUDA too when a GPU is present or GRADLINT_TEST_DEVICE=cuda
# (then without a GPU the CUDA runs fail: asked for explicitly). An example runs on a device with
# that device as torch's default (``torch.set_default_device``): the examples are written without
# a device, so the same code runs on each. A fixture names the examples that are facts about CPU
# tensors in a module-level ``CPU_ONLY = {"example_name": "reason"}`` ("*": the whole file).


def test_devices() -> List[str]:
    import os

    import torch

    wanted = os.environ.get("GRADLINT_TEST_DEVICE", "").strip().lower()
    out = ["cpu"]
    if wanted == "cuda" or (wanted in ("", "auto") and torch.cuda.is_available()):
        out.append("cuda")
    return out


test_devices.__test__ = False  # type: ignore[attr-defined]  (not a test: pytest collects test_*)


def cpu_only(path: Path) -> Dict[str, str]:
    """The fixture's ``CPU_ONLY`` declaration, read without importing it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "CPU_ONLY" for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, dict) and all(isinstance(v, str) and v for v in value.values()), path
            return value
    return {}


def device_reason(example: Example, device: str) -> str:
    """Why ``example`` does not run on ``device`` ("" when it does)."""
    if device == "cpu":
        return ""
    only = cpu_only(example.path)
    return only.get(example.name) or only.get("*", "")


class on_device:
    """``with on_device("cuda"):`` torch's default device for the block (restored after)."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.prev = None

    def __enter__(self) -> "on_device":
        if self.device != "cpu":
            import torch

            self.prev = torch.get_default_device() if hasattr(torch, "get_default_device") else torch.device("cpu")
            torch.set_default_device(self.device)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.prev is not None:
            import torch

            torch.set_default_device(self.prev)
