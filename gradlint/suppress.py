"""Inline suppressions: ``# noqa``, ``# noqa: GL101, GL203`` and ``# gradlint: skip-file``."""

from __future__ import annotations

import io
import re
import tokenize
from typing import Dict, FrozenSet, Iterable, List, Optional

from gradlint.rule import Finding

NOQA_RE = re.compile(
    r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE
)
SKIP_FILE_RE = re.compile(rb"#\s*gradlint:\s*skip-file\b")
SKIP_FILE_LINES = 20  # "near the top": within the first lines of the file

ALL: FrozenSet[str] = frozenset({"*"})


def is_skipped(data: bytes) -> bool:
    head = b"\n".join(data.split(b"\n", SKIP_FILE_LINES)[:SKIP_FILE_LINES])
    return SKIP_FILE_RE.search(head) is not None


def noqa_map(text: str) -> Dict[int, FrozenSet[str]]:
    """line -> the codes its ``# noqa`` comment suppresses (``ALL`` for a bare noqa). Uses the
    tokenizer, so ``# noqa`` inside a string does not count."""
    out: Dict[int, FrozenSet[str]] = {}
    if "noqa" not in text.lower():
        return out
    tokens = []
    try:  # keep the comments seen before a tokenizer error
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            tokens.append(tok)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        m = NOQA_RE.search(tok.string)
        if not m:
            continue
        codes = m.group("codes")
        if codes:
            out[tok.start[0]] = frozenset(c.upper() for c in re.split(r"[,\s]+", codes) if c)
        else:
            out[tok.start[0]] = ALL
    return out


def _matches(codes: Optional[FrozenSet[str]], code: str) -> bool:
    if not codes:
        return False
    return codes is ALL or "*" in codes or code in codes


def apply_noqa(findings: Iterable[Finding], text: str, path: Optional[str] = None) -> List[Finding]:
    """The findings that no ``# noqa`` comment of ``text`` suppresses; with ``path``, only the
    findings in that file are checked against it (the others are in other files)."""
    findings = list(findings)
    if not findings:
        return findings
    table = noqa_map(text)
    if not table:
        return findings
    kept = []
    for f in findings:
        if path is not None and f.path != path:
            kept.append(f)
            continue
        if _matches(table.get(f.line), f.code):
            continue
        if f.statement_line and _matches(table.get(f.statement_line), f.code):
            continue
        kept.append(f)
    return kept
