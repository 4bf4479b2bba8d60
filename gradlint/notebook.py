"""Jupyter notebooks (``.ipynb``): their code cells as one Python script, and back.

The code cells are joined in order (names defined in one cell are known in the next), each
followed by a boundary comment line, so that a fix can be split back into its cells. IPython
syntax is masked line for line, never a syntax error: ``%magic`` and ``!shell`` lines become
``pass`` (``x = !ls`` becomes ``x = None``; the lines a trailing backslash continues it onto
become blank), a trailing ``?``/``??`` (help) is dropped, and a cell
that starts with a cell magic other than ``%%time``/``%%timeit``/``%%capture`` (``%%bash``,
``%%html``, ...) is not Python at all: all of it is masked. Masked lines are restored when a fixed
script is split back, and only the cells whose code changed get a new ``source``; everything else
(outputs, metadata, cell ids, key order, indentation, the trailing newline) is written as read.

Findings name the cell (its 1-based position among all the notebook's cells) and the line in
the cell; machine formats that point into the file itself (SARIF, GitHub, GitLab) use the line of
the ``.ipynb`` JSON that holds that source line (``raw_line``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["Notebook", "NotebookError", "load", "is_notebook"]

BOUNDARY = "# gradlint: end of cell"
_PY_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})
_LINE_MAGIC = re.compile(r"^(\s*)(%|!)")
_ASSIGNED_MAGIC = re.compile(r"^(\s*[\w.,\s\[\]()]+?\s*=\s*)(%|!)")
_HELP = re.compile(r"^(\s*)([\w.]+)\s*\?\??\s*$|^(\s*)\?\??([\w.]+)\s*$")


class NotebookError(ValueError):
    """Not a notebook we can read (invalid JSON, not nbformat 4)."""


def is_notebook(path: Optional[str]) -> bool:
    return bool(path) and str(path).endswith(".ipynb")


@dataclass
class _Cell:
    index: int  # 1-based position among all cells
    first: int  # the script line of the cell's first line (1-based)
    lines: List[str]  # the cell's source lines, as read (without line endings)
    shown: List[str]  # the same lines with IPython syntax masked (what is linted)
    masked: Dict[int, str] = field(default_factory=dict)  # cell line (0-based) -> original


@dataclass
class Notebook:
    raw: str
    data: Dict[str, Any]
    cells: List[_Cell]
    script: str
    python: bool = True

    # -- positions ----------------------------------------------------------------------------
    def locate(self, line: int) -> Tuple[int, int]:
        """``(cell, line in cell)`` of a script line (``(0, line)`` for a boundary line)."""
        for cell in reversed(self.cells):
            if line >= cell.first:
                offset = line - cell.first
                if offset < max(len(cell.lines), 1):
                    return cell.index, offset + 1
                return cell.index, max(len(cell.lines), 1)
        return 0, line

    def raw_line(self, cell_index: int, line_in_cell: int) -> int:
        """The line of the ``.ipynb`` file that holds that source line (1 when unknown)."""
        return self._raw_lines().get((cell_index, line_in_cell), 1)

    def _raw_lines(self) -> Dict[Tuple[int, int], int]:
        cached = getattr(self, "_raw_cache", None)
        if cached is not None:
            return cached
        out: Dict[Tuple[int, int], int] = {}
        raw_lines = self.raw.splitlines()
        pos = 0
        for cell in self.cells:
            for i, text in enumerate(cell.lines):
                needle = json.dumps(text + ("\n" if i < len(cell.lines) - 1 else ""), ensure_ascii=False)[:-1]
                for j in range(pos, len(raw_lines)):
                    if needle in raw_lines[j]:
                        out[(cell.index, i + 1)] = j + 1
                        pos = j
                        break
        self._raw_cache = out  # type: ignore[attr-defined]
        return out

    # -- writing back -------------------------------------------------------------------------
    def with_script(self, fixed: str) -> str:
        """The notebook's JSON with the code cells replaced by ``fixed`` (a fixed version of
        ``self.script``), formatted as read."""
        parts = fixed.split("\n" + BOUNDARY + "\n")
        if fixed.endswith("\n" + BOUNDARY + "\n"):
            parts = parts[:-1] if parts and parts[-1] == "" else parts
        if len(parts) != len(self.cells):
            raise NotebookError("a fix changed the cell boundaries")
        cells = self.data.get("cells", [])
        for cell, text in zip(self.cells, parts):
            lines = text.split("\n")
            if lines == cell.shown:
                continue
            # put the masked IPython lines back where the fix moved them
            moved = _index_map(cell.shown, lines)
            for i, original in cell.masked.items():
                j = moved.get(i)
                if j is not None:
                    lines[j] = original
            entry = cells[cell.index - 1]
            if isinstance(entry.get("source"), list):
                entry["source"] = [ln + "\n" for ln in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
            else:
                entry["source"] = "\n".join(lines)
        return _dumps(self.data, self.raw)


def _index_map(old: List[str], new: List[str]) -> Dict[int, int]:
    """Old line index -> new line index, for the lines a fix left as they were."""
    import difflib

    out: Dict[int, int] = {}
    for tag, i1, i2, j1, _ in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                out[i1 + k] = j1 + k
    return out


def _indent(raw: str) -> Optional[int]:
    m = re.search(r"\n( +)\"", raw)
    return len(m.group(1)) if m else None


def _dumps(data: Dict[str, Any], raw: str) -> str:
    text = json.dumps(data, indent=_indent(raw), ensure_ascii=False)
    if "\\u" in raw and not re.search(r"[^\x00-\x7f]", raw):
        text = json.dumps(data, indent=_indent(raw), ensure_ascii=True)
    return text + ("\n" if raw.endswith("\n") else "")


def _source_lines(cell: Dict[str, Any]) -> List[str]:
    src = cell.get("source", "")
    if isinstance(src, list):
        src = "".join(str(s) for s in src)
    return str(src).replace("\r\n", "\n").split("\n")


def _mask(lines: List[str]) -> Dict[int, str]:
    """Replace IPython syntax in ``lines`` (in place) by Python of the same line count."""
    masked: Dict[int, str] = {}
    if lines and lines[0].lstrip().startswith("%%"):
        name = lines[0].lstrip()[2:].split(None, 1)[0] if lines[0].strip() != "%%" else ""
        masked[0] = lines[0]
        lines[0] = "pass"
        if name not in _PY_CELL_MAGICS:
            for i in range(1, len(lines)):
                masked[i] = lines[i]
                lines[i] = "pass" if lines[i].strip() else ""
            return masked
    for i, text in enumerate(lines):
        if i in masked:
            continue
        m = _LINE_MAGIC.match(text)
        if m:
            masked[i] = text
            lines[i] = m.group(1) + "pass"
            _mask_continuation(lines, i, masked)
            continue
        m = _ASSIGNED_MAGIC.match(text)
        if m and not text.lstrip().startswith("#"):
            masked[i] = text
            lines[i] = m.group(1) + "None"
            _mask_continuation(lines, i, masked)
            continue
        m = _HELP.match(text)
        stripped = text.strip()
        if m or (stripped.endswith("?") and "#" not in stripped and not stripped.startswith(("'", '"'))):
            masked[i] = text  # IPython help: `name?`, `obj.attr??`, `torch.*Tensor?`
            lines[i] = text[: len(text) - len(text.lstrip())] + "pass"
    return masked


def _mask_continuation(lines: List[str], i: int, masked: Dict[int, str]) -> None:
    """A ``!cmd ... \\`` or ``%magic ... \\`` line goes on in the next lines (IPython joins them
    into one command): they are part of it, masked as blank lines."""
    while masked[i].rstrip("\r\n").endswith("\\") and i + 1 < len(lines):
        i += 1
        masked[i] = lines[i]
        lines[i] = ""


def load(data: bytes) -> Notebook:
    """Parse a notebook's bytes. Raises NotebookError."""
    try:
        raw = data.decode("utf-8-sig")
        nb = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise NotebookError(f"not a valid notebook (JSON): {exc}") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise NotebookError("not a valid notebook: no list of cells (nbformat 4 is read)")
    meta = nb.get("metadata") if isinstance(nb.get("metadata"), dict) else {}
    language = ((meta.get("kernelspec") or {}).get("language") or (meta.get("language_info") or {}).get("name")
                or "python")
    cells: List[_Cell] = []
    out: List[str] = []
    line = 1
    for index, cell in enumerate(nb["cells"], start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        lines = _source_lines(cell)
        shown = list(lines)
        masked = _mask(shown)
        cells.append(_Cell(index, line, lines, shown, masked))
        out.extend(shown)
        out.append(BOUNDARY)
        line += len(shown) + 1
    script = "\n".join(out) + ("\n" if out else "")
    return Notebook(raw, nb, cells, script, python=str(language).lower().startswith("python"))
