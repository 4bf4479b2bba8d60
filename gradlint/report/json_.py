"""A JSON list of ``Finding.to_dict()`` objects."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, List

from gradlint.rule import Finding

if TYPE_CHECKING:
    from gradlint.report import ReportContext


def render(findings: List[Finding], ctx: "ReportContext") -> str:
    return json.dumps([f.to_dict() for f in findings], indent=2) + "\n"
