"""From the rules' reports (a libcst node each) to findings with lines and columns.

Positions are computed only for files that have findings. A report on a node of another module
of the project (the walk followed a call into an imported helper or class: ``gradlint.index``)
is placed in that module's file, at the line to change there, with the call in the linted file
named in the message; that module's ``# noqa`` comments apply to it, and it has no fix (a fix
rewrites the linted file only).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from gradlint.rule import Finding, Rule, Severity
from gradlint.suppress import apply_noqa


def display_path(path: str, like: Optional[str] = None) -> str:
    """How a file met through an import is named in findings: relative to the current folder
    when it is below it, else absolute; absolute when ``like`` (the name of the file being
    linted, as the user gave it) is, so that one file has one name in a run's findings."""
    if like is not None and os.path.isabs(like):
        return os.path.abspath(path)
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if rel.startswith("..") else rel


class _Module:
    """One file's tree, text and (once asked) node positions."""

    __slots__ = ("display", "text", "module", "_positions", "lines")

    def __init__(self, display: str, text: str, module: Any) -> None:
        self.display, self.text, self.module = display, text, module
        self._positions: Any = None
        self.lines = text.splitlines()

    @property
    def positions(self) -> Any:
        if self._positions is None:
            from libcst.metadata import MetadataWrapper, PositionProvider

            self._positions = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
        return self._positions


def positioned(display: str, text: str, module: Any, sink: List[Tuple[Rule, Any, Dict[str, Any]]],
               overrides: Dict[str, str], scopes: Optional[Dict[str, Any]] = None) -> List[Finding]:
    root = _Module(display, text, module)
    others = [s.src for s in (scopes or {}).values() if s.src is not None and s.src.module is not None]
    foreign: Dict[str, _Module] = {}

    def of(src: Any) -> _Module:
        m = foreign.get(src.path)
        if m is None:
            m = foreign[src.path] = _Module(display_path(src.path, display), src.text, src.module)
        return m

    def locate(node: Any, hint: Any = None) -> Tuple[Optional[_Module], Any]:
        # the module the walk was in when the rule reported first (a position costs a codegen
        # of the whole module: trying each imported module in turn cost more than the walk)
        if hint is not None and hint.module is not None and hint.module is not module:
            m = of(hint)
            rng = m.positions.get(node)
            if rng is not None:
                return m, rng
        rng = root.positions.get(node)
        if rng is not None:
            return root, rng
        for src in others:
            if src is hint:
                continue
            m = of(src)
            rng = m.positions.get(node)
            if rng is not None:
                return m, rng
        return None, None

    seen = set()
    out = []
    for rule, node, extra in sink:
        key = (rule.code, id(node))
        if key in seen:
            continue
        seen.add(key)
        where, rng = locate(node, extra.get("src"))
        if where is None:
            continue
        # one finding per defect: `p.mul_(d).add_(x)` is one in-place update of `p`
        if (rule.code, where.display, rng.start.line) in seen:
            continue
        seen.add((rule.code, where.display, rng.start.line))
        stmt = extra.get("statement")
        stmt_rng = where.positions.get(stmt) if stmt is not None else None
        sev = overrides.get(rule.code)
        severity = Severity(sev) if sev else (extra.get("severity") or rule.severity)
        fix = extra.get("fix")
        if fix is not None and where is root:  # node-relative edits -> offsets into text
            from gradlint.edits import resolve_fix

            fix = resolve_fix(fix, where.positions, text, module)
        else:
            fix = None
        line = rng.start.line
        related = []
        for rnode, rmsg in extra.get("related", ()):
            r = where.positions.get(rnode)
            if r is not None and (r.start.line, r.start.column) != (rng.start.line, rng.start.column):
                related.append((r.start.line, r.start.column + 1, rmsg))
        note = extra.get("note", "")
        via = extra.get("via")
        if where is not root and via is not None:
            r = root.positions.get(via)
            if r is not None:
                note += f" (reached from {display}:{r.start.line})"
        out.append(
            Finding(
                path=where.display,
                line=line,
                column=rng.start.column + 1,
                end_line=rng.end.line,
                end_column=rng.end.column + 1,
                code=rule.code,
                name=rule.name,
                severity=severity,
                message=rule.message.format(**extra["args"]) + note,
                hint=rule.hint,
                fixable=fix is not None,
                url=rule.url(),
                source_line=where.lines[line - 1] if 0 < line <= len(where.lines) else "",
                statement_line=stmt_rng.start.line if stmt_rng is not None else 0,
                fix=fix,
                related=tuple(related),
            )
        )
    for m in foreign.values():
        out = apply_noqa(out, m.text, m.display)
    return out
