"""GitHub Actions workflow commands (``::error file=...::message``), one per finding."""

from __future__ import annotations

from typing import TYPE_CHECKING, List

from gradlint.rule import Finding, Severity

if TYPE_CHECKING:
    from gradlint.report import ReportContext


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(f: Finding) -> str:
    kind = "error" if f.severity is Severity.ERROR else "warning"
    props = {"file": f.path, "line": f.file_line, "title": f"gradlint ({f.code})"} if f.cell else {
        "file": f.path,
        "line": f.line,
        "col": f.column,
        "endLine": f.end_line,
        "endColumn": f.end_column,
        "title": f"gradlint ({f.code})",
    }
    joined = ",".join(f"{k}={escape_property(str(v))}" for k, v in props.items())
    return f"::{kind} {joined}::{escape_data(f.message)}"


def render(findings: List[Finding], ctx: "ReportContext") -> str:
    return "".join(command(f) + "\n" for f in findings)
