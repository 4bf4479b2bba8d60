"""A SARIF 2.1.0 log: one run, one reportingDescriptor per code present, one result per
finding (with its fix, when it has one)."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Type
from urllib.parse import quote

import gradlint
from gradlint.rule import Finding, InternalErrorRule, Rule, SyntaxErrorRule, registry

if TYPE_CHECKING:
    from gradlint.report import ReportContext

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def lookup_rule(code: str) -> Optional[Type[Rule]]:
    """The registered rule for ``code``; the built-in ones if the rule catalogue can't be
    imported; None for an unknown code."""
    try:
        return registry().get(code)
    except ImportError:
        return {r.code: r for r in (SyntaxErrorRule, InternalErrorRule)}.get(code)


def descriptor(f: Finding) -> Dict[str, Any]:
    """A reportingDescriptor for ``f``'s code, from the registry or else from ``f`` itself."""
    rule = lookup_rule(f.code)
    d: Dict[str, Any] = {"id": f.code, "name": rule.name if rule else f.name}
    if rule is not None:
        summary, docs, hint = rule.summary(), rule.docs(), rule.hint
        if summary:
            d["shortDescription"] = {"text": summary}
            d["fullDescription"] = {"text": f"{summary} {hint}" if hint else summary}
        if docs:
            d["help"] = {"text": docs, "markdown": docs}
        if rule.url():
            d["helpUri"] = rule.url()
        level = rule.severity.value
    else:
        if f.hint:
            d["help"] = {"text": f.hint}
        if f.url:
            d["helpUri"] = f.url
        level = f.severity.value
    d["defaultConfiguration"] = {"level": level}
    return d


def artifact_location(path: str) -> Dict[str, Any]:
    """Forward slashes; a relative path stays relative to ``%SRCROOT%``, an absolute one
    becomes a ``file://`` URI."""
    p = path.replace("\\", "/")
    if re.match(r"^[A-Za-z]:/", p):  # Windows drive
        return {"uri": "file:///" + quote(p, safe="/:")}
    if p.startswith("/"):
        return {"uri": "file://" + quote(p, safe="/")}
    return {"uri": quote(p, safe="/"), "uriBaseId": "%SRCROOT%"}


def result(f: Finding, index: int) -> Dict[str, Any]:
    location = artifact_location(f.path)
    r: Dict[str, Any] = {
        "ruleId": f.code,
        "ruleIndex": index,
        "level": f.severity.value,
        "message": {"text": f.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": location,
                    # a notebook: the line of the .ipynb file that holds the source line
                    "region": {"startLine": f.file_line} if f.cell else {
                        "startLine": f.line,
                        "startColumn": f.column,
                        "endLine": f.end_line,
                        "endColumn": f.end_column,
                    },
                }
            }
        ],
    }
    if f.related and not f.cell:  # (a notebook's related lines are lines of its cells)
        r["relatedLocations"] = [
            {
                "id": i,
                "message": {"text": message},
                "physicalLocation": {
                    "artifactLocation": location,
                    "region": {"startLine": line, "startColumn": column},
                },
            }
            for i, (line, column, message) in enumerate(f.related, 1)
        ]
    if f.fix is not None:
        fix: Dict[str, Any] = {}
        if f.fix.description:
            fix["description"] = {"text": f.fix.description}
        fix["artifactChanges"] = [
            {
                "artifactLocation": location,
                "replacements": [
                    {
                        "deletedRegion": {"charOffset": e.start, "charLength": e.end - e.start},
                        "insertedContent": {"text": e.text},
                    }
                    for e in f.fix.edits
                ],
            }
        ]
        r["fixes"] = [fix]
    return r


def build_log(findings: List[Finding]) -> Dict[str, Any]:
    first: Dict[str, Finding] = {}
    for f in findings:
        first.setdefault(f.code, f)
    codes = sorted(first)
    index = {code: i for i, code in enumerate(codes)}
    driver = {
        "name": "gradlint",
        "version": gradlint.__version__,
        "rules": [descriptor(first[c]) for c in codes],
    }
    run = {
        "tool": {"driver": driver},
        # columns and fix offsets count code points of the decoded source
        "columnKind": "unicodeCodePoints",
        "results": [result(f, index[f.code]) for f in findings],
    }
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}


def render(findings: List[Finding], ctx: "ReportContext") -> str:
    return json.dumps(build_log(findings), indent=2) + "\n"
