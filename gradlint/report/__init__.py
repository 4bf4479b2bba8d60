"""Reporters: turn a list of findings into text for one output format.

Each format lives in its own module exposing ``render(findings, ctx) -> str``; it is imported
only when asked for. Findings arrive sorted and are reported in the order given.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import List

from gradlint.rule import Finding


@dataclass
class ReportContext:
    files_checked: int = 0
    show_source: bool = False  # full format: source line + caret
    color: bool = False  # ANSI colours (the CLI decides: TTY and no NO_COLOR)
    statistics: bool = False  # append per-code counts
    quiet: bool = False  # concise: findings only, no summary line


FORMATS = ("concise", "full", "json", "github", "sarif", "junit", "gitlab")

# format name -> module in this package ("json_" so as not to shadow the standard library)
_MODULES = {"concise": "concise", "full": "full", "json": "json_", "github": "github", "sarif": "sarif",
            "junit": "junit", "gitlab": "gitlab"}


def render(findings: List[Finding], fmt: str, ctx: ReportContext) -> str:
    """Render ``findings`` in format ``fmt``; the text ends with a newline unless empty."""
    if fmt not in _MODULES:
        raise ValueError(f"unknown output format {fmt!r} (expected one of: {', '.join(FORMATS)})")
    if fmt == "concise" and ctx.show_source:
        fmt = "full"
    module = importlib.import_module(f"{__name__}.{_MODULES[fmt]}")
    text = module.render(findings, ctx)
    if text and not text.endswith("\n"):
        text += "\n"
    return text
