"""``path:line:col: CODE message`` per finding, then a summary line.

The helpers here (colours, header, statistics, summary) are shared with the full format.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Dict, List

from gradlint.rule import Finding, Severity

if TYPE_CHECKING:
    from gradlint.report import ReportContext

BOLD = "\x1b[1m"
RED = "\x1b[31m"
YELLOW = "\x1b[33m"
RESET = "\x1b[0m"


def paint(text: str, style: str, ctx: "ReportContext") -> str:
    return f"{style}{text}{RESET}" if ctx.color else text


def severity_style(severity: Severity) -> str:
    return BOLD + RED if severity is Severity.ERROR else BOLD + YELLOW


def header(f: Finding, ctx: "ReportContext") -> str:
    path = paint(f.path, BOLD, ctx)
    code = paint(f.code, severity_style(f.severity), ctx)
    return f"{path}:{f.where}:{f.column}: {code} {f.message}"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def summary(findings: List[Finding], ctx: "ReportContext") -> str:
    if not findings:
        return f"All checks passed ({plural(ctx.files_checked, 'file')} checked)."
    errors = sum(1 for f in findings if f.severity is Severity.ERROR)
    warnings = len(findings) - errors
    files = len({f.path for f in findings})
    return (
        f"Found {plural(errors, 'error')}, {plural(warnings, 'warning')} "
        f"in {plural(files, 'file')}."
    )


def statistics(findings: List[Finding]) -> List[str]:
    """One aligned line per code: count, code, name, [severity]; by count desc, then code."""
    counts = Counter(f.code for f in findings)
    names: Dict[str, str] = {}
    severities: Dict[str, Severity] = {}
    for f in findings:
        names.setdefault(f.code, f.name)
        if f.code not in severities or f.severity.rank > severities[f.code].rank:
            severities[f.code] = f.severity
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    count_w = max((len(str(n)) for _, n in rows), default=0)
    code_w = max((len(c) for c, _ in rows), default=0)
    name_w = max((len(names[c]) for c, _ in rows), default=0)
    return [
        f"  {n:>{count_w}}  {c:<{code_w}}  {names[c]:<{name_w}}  [{severities[c].value}]"
        for c, n in rows
    ]


def footer(findings: List[Finding], ctx: "ReportContext") -> List[str]:
    """The statistics table (if asked for) and the summary line (unless quiet)."""
    lines = statistics(findings) if ctx.statistics else []
    if not ctx.quiet:
        lines.append(summary(findings, ctx))
    return lines


def render(findings: List[Finding], ctx: "ReportContext") -> str:
    lines = [header(f, ctx) for f in findings] + footer(findings, ctx)
    return "".join(line + "\n" for line in lines)
