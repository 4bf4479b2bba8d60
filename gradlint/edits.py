"""Edits for rules: a rule offers a fix while the tree is walked, before any position is known,
so it states its edits relative to nodes::

    from gradlint.edits import insert_before, replace
    self.report(node, fix=Fix((replace(node.value, "x + 1"),), safe=False, description="..."))

Once positions are computed (``gradlint.positions``), ``resolve_fix`` turns them into character
offsets into the decoded source; a ``Finding.fix`` only ever holds plain offset ``Edit``s, which
reporters (SARIF) and the fixer (``gradlint.fix``) use.

In an edit's text ``\\n`` stands for a line break: it becomes the file's own line ending. With
``reindent=True`` every line of the text after the first is also prefixed with the indentation
of the line where the node starts, and each leading group of four spaces becomes one indentation
unit of the file (a tab in a tab-indented file): the text is written as if the node's line had
no indentation and the file indented by four spaces.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, List, Optional, Tuple

from gradlint.rule import Edit, Fix

_BREAK = re.compile(r"\r\n|\r|\n")


# ------------------------------------------------------------------------ edits for rules
@dataclass(frozen=True)
class NodeEdit(Edit):
    """An edit stated relative to a libcst node; ``start``/``end`` are unset (-1) until
    ``resolve_fix`` turns it into a plain ``Edit``. ``where``: ``replace`` the node's code,
    insert ``before`` it or ``after`` it. With ``end_node`` the edit spans from the node's start
    (``replace``) or end (``after``) to the end of ``end_node``."""

    node: Any = field(default=None, compare=False, repr=False)
    where: str = "replace"
    reindent: bool = False
    end_node: Any = field(default=None, compare=False, repr=False)


def replace(node: Any, text: str, *, reindent: bool = False) -> NodeEdit:
    """Replace the code of ``node`` (without its surrounding whitespace and comments)."""
    return NodeEdit(-1, -1, text, node, "replace", reindent)


def insert_before(node: Any, text: str, *, reindent: bool = False) -> NodeEdit:
    return NodeEdit(-1, -1, text, node, "before", reindent)


def insert_after(node: Any, text: str, *, reindent: bool = False) -> NodeEdit:
    return NodeEdit(-1, -1, text, node, "after", reindent)


def replace_span(start: Any, end: Any, text: str, *, after_start: bool = False) -> NodeEdit:
    """Replace the code from the start of node ``start`` (its end, with ``after_start``) to the
    end of node ``end``: ``replace_span(call.func.value, call, "", after_start=True)`` deletes
    ``.cuda()`` from ``torch.randn(3).cuda()``."""
    return NodeEdit(-1, -1, text, start, "after" if after_start else "replace", False, end)


def count_comments(node: Any) -> int:
    """The comments inside ``node``: a fix that regenerates part of it must not drop one."""
    count, stack = 0, [node]
    while stack:
        n = stack.pop()
        if type(n).__name__ == "Comment":
            count += 1
        stack.extend(n.children)
    return count


# ------------------------------------------------------------------------ offsets
@lru_cache(maxsize=4)
def line_starts(text: str) -> Tuple[int, ...]:
    """Offset of the first character of each line (``\\r\\n``, ``\\r`` and ``\\n`` end a line,
    as for Python's tokenizer and libcst); index 0 is line 1."""
    return (0,) + tuple(m.end() for m in _BREAK.finditer(text))


def offset(text: str, line: int, column: int) -> int:
    """The character offset of 1-based ``line`` and 0-based ``column`` (libcst's convention:
    columns count code points, a tab is one)."""
    starts = line_starts(text)
    if not 1 <= line <= len(starts):
        raise ValueError(f"line {line} out of range (1..{len(starts)})")
    return starts[line - 1] + column


def position_of(text: str, off: int) -> Tuple[int, int]:
    """The inverse of ``offset``: (1-based line, 0-based column)."""
    starts = line_starts(text)
    i = bisect.bisect_right(starts, off) - 1
    return i + 1, off - starts[i]


def node_range(positions: Any, node: Any, text: str) -> Optional[Tuple[int, int]]:
    """``[start, end)`` character offsets of ``node`` from a resolved ``PositionProvider``
    mapping (libcst ``CodeRange``s), or None when the node has no position."""
    rng = positions.get(node)
    if rng is None:
        return None
    return offset(text, rng.start.line, rng.start.column), offset(text, rng.end.line, rng.end.column)


def _indent_of_line(text: str, off: int) -> str:
    line, _ = position_of(text, off)
    start = line_starts(text)[line - 1]
    m = re.match(r"[ \t\f]*", text[start:off])
    return m.group(0) if m else ""


def _reindent(body: str, indent: str, unit: str) -> str:
    lines = body.split("\n")
    out = [lines[0]]
    for line in lines[1:]:
        if not line:
            out.append(line)
            continue
        stripped = line.lstrip(" ")
        levels, extra = divmod(len(line) - len(stripped), 4)
        out.append(indent + unit * levels + " " * extra + stripped)
    return "\n".join(out)


def resolve_fix(fix: Fix, positions: Any, text: str, module: Any = None) -> Optional[Fix]:
    """``fix`` with every ``NodeEdit`` turned into an offset ``Edit`` into ``text``; None when a
    node has no position (the fix is then dropped, the finding stays)."""
    newline = getattr(module, "default_newline", None) or _detect_newline(text)
    unit = getattr(module, "default_indent", None) or "    "
    edits: List[Edit] = []
    for e in fix.edits:
        if isinstance(e, NodeEdit):
            try:
                rng = node_range(positions, e.node, text)
            except ValueError:
                rng = None
            if rng is None:
                return None
            start, end = rng
            if e.where == "before":
                end = start
            elif e.where == "after":
                start = end
            if e.end_node is not None:
                try:
                    last = node_range(positions, e.end_node, text)
                except ValueError:
                    last = None
                if last is None or last[1] < start:
                    return None
                end = last[1]
            body = e.text
            if e.reindent:
                body = _reindent(body.replace("\r\n", "\n"), _indent_of_line(text, rng[0]), unit)
            edits.append(Edit(start, end, _BREAK.sub(lambda _m: newline, body)))
        else:
            edits.append(Edit(e.start, e.end, e.text))
    return Fix(tuple(edits), safe=fix.safe, description=fix.description)


def _detect_newline(text: str) -> str:
    m = _BREAK.search(text)
    return m.group(0) if m else "\n"
