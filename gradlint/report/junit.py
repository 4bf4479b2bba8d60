"""JUnit XML, for CI systems that show test reports (GitLab, Jenkins, Azure Pipelines).

One ``<testsuite name="gradlint">``; one ``<testcase>`` per file with findings (``name`` and
``file`` are the path), holding one ``<failure>`` per finding (``type`` is the code, the text is
``path:line:col: CODE message`` and the hint). A run without findings is one passing testcase,
so that CI still shows that gradlint ran. ``failures`` counts failed testcases (files).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Dict, List

from gradlint.report.concise import plural
from gradlint.rule import Finding

if TYPE_CHECKING:
    from gradlint.report import ReportContext

# characters XML 1.0 cannot carry, even escaped
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _clean(text: str) -> str:
    return _INVALID_XML.sub("\ufffd", text)


def build(findings: List[Finding], ctx: "ReportContext") -> ET.Element:
    by_file: Dict[str, List[Finding]] = {}
    for f in findings:
        by_file.setdefault(f.path, []).append(f)
    tests = max(len(by_file), 1)
    failures = len(by_file)  # failed testcases (files), not failure elements
    counts = {"tests": str(tests), "failures": str(failures), "errors": "0", "skipped": "0"}
    root = ET.Element("testsuites", {"name": "gradlint", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": "gradlint", **counts})
    if not by_file:
        ET.SubElement(suite, "testcase", {
            "classname": "gradlint",
            "name": f"no findings ({plural(ctx.files_checked, 'file')} checked)",
        })
    for path, items in by_file.items():
        case = ET.SubElement(suite, "testcase", {
            "classname": "gradlint", "name": _clean(path), "file": _clean(path),
            "line": str(items[0].line),
        })
        for f in items:
            text = f"{f.path}:{f.where}:{f.column}: {f.code} {f.message}"
            if f.hint:
                text += f"\nhint: {f.hint}"
            failure = ET.SubElement(case, "failure", {
                "message": _clean(f"{f.code} {f.message}"), "type": f.code,
            })
            failure.text = _clean(text)
    return root


def render(findings: List[Finding], ctx: "ReportContext") -> str:
    root = build(findings, ctx)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
