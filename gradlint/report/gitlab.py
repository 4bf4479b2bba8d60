"""GitLab Code Quality (a subset of the Code Climate format): a JSON list of issues.

Each issue has ``description``, ``check_name`` (the code), ``fingerprint``, ``severity``
(``major`` for an error, ``minor`` for a warning) and ``location`` (``path`` relative to the
working directory with ``/``, ``lines.begin``/``lines.end``).

The fingerprint identifies an issue across commits, so that GitLab can tell new issues from
fixed ones in a merge request: a SHA-256 over the path, the code, the stripped source line and
the occurrence index of that (path, code, line text) triple, and *not* the line number, so an
edit elsewhere in the file does not make every finding below it look new.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING, Any, Dict, List, Tuple

from gradlint.rule import Finding, Severity

if TYPE_CHECKING:
    from gradlint.report import ReportContext


def report_path(path: str) -> str:
    """Forward slashes, relative to the working directory when under it, without ``./``."""
    p = path
    if os.path.isabs(p):
        try:
            rel = os.path.relpath(p)
        except ValueError:  # another drive (Windows)
            rel = p
        if not rel.startswith(".."):
            p = rel
    p = p.replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return p


def fingerprint(path: str, code: str, source_line: str, occurrence: int) -> str:
    payload = "\0".join((path, code, source_line.strip(), str(occurrence)))
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def issues(findings: List[Finding]) -> List[Dict[str, Any]]:
    seen: Dict[Tuple[str, str, str], int] = {}
    out = []
    for f in findings:
        path = report_path(f.path)
        key = (path, f.code, f.source_line.strip())
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        out.append({
            "description": f"{f.code} {f.message}",
            "check_name": f.code,
            "fingerprint": fingerprint(path, f.code, f.source_line, occurrence),
            "severity": "major" if f.severity is Severity.ERROR else "minor",
            "location": {"path": path, "lines": {"begin": f.file_line, "end": f.file_line if f.cell else max(f.end_line, f.line)}},
        })
    return out


def render(findings: List[Finding], ctx: "ReportContext") -> str:
    return json.dumps(issues(findings), indent=2) + "\n"
