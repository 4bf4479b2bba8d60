"""Like concise, with each finding's source line, a caret under its span and its hint."""

from __future__ import annotations

from typing import TYPE_CHECKING, List

from gradlint.report.concise import BOLD, footer, header, paint, severity_style
from gradlint.rule import Finding

if TYPE_CHECKING:
    from gradlint.report import ReportContext


def carets(f: Finding) -> str:
    """Spaces up to the finding's column (tabs kept, so the caret lines up) then ``^`` up to
    ``end_column`` (exclusive), or to the end of the line when the span goes on; at least one."""
    src = f.source_line
    start = max(f.column, 1)
    end = f.end_column if f.end_line == f.line else len(src) + 1
    pad = "".join(c if c == "\t" else " " for c in src[: start - 1])
    pad += " " * (start - 1 - len(pad))
    return pad + "^" * max(end - start, 1)


def block(f: Finding, ctx: "ReportContext") -> List[str]:
    width = len(str(f.line))
    gutter = " " * width
    lines = [
        header(f, ctx),
        f"{f.line} |" + (f" {f.source_line}" if f.source_line else ""),  # (a notebook: the cell's line)
        f"{gutter} | {paint(carets(f), severity_style(f.severity), ctx)}",
    ]
    for line, column, message in f.related:
        lines.append(f"{gutter} {paint('= note:', BOLD, ctx)} {f.path}:{line}:{column}: {message}")
    if f.hint:
        lines.append(f"{gutter} {paint('= hint:', BOLD, ctx)} {f.hint}")
    lines.append("")
    return lines


def render(findings: List[Finding], ctx: "ReportContext") -> str:
    lines: List[str] = []
    for f in findings:
        lines.extend(block(f, ctx))
    lines.extend(footer(findings, ctx))
    return "".join(line + "\n" for line in lines)
