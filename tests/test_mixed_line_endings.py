"""Valid Python that mixes CRLF and LF line endings (files edited on two systems) is linted, not
reported as a syntax error (libcst alone rejects it; found on the corpus: dgl tutorials)."""

from gradlint.engine import Options, lint_text
from gradlint.rule import visit_rules


def test_mixed_line_endings_are_linted():
    text = '"""doc\r\nstring"""\r\nimport torch\n\nw = torch.ones(3, requires_grad=True)\nw.add_(1)\n'
    compile(text, "x.py", "exec")  # valid Python
    codes = frozenset(visit_rules()) | {"GL000"}
    findings = lint_text("x.py", text, Options(codes=codes))
    assert [(f.code, f.line) for f in findings] == [("GL101", 6)]
    assert all(f.fix is None for f in findings)  # no fix: its offsets would be the normalised text's
