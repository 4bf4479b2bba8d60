"""Autofix: ``gradlint check --fix`` / ``--diff`` / ``--unsafe-fixes``, the fix module
(node-relative edits, offsets, rounds, atomic writes that keep encoding, line endings and mode)
and GL101's first fix.

The fix fixtures live in ``fixtures/fixes/`` (see its README.md): every ``NAME.input.py`` is
fixed in a copy and compared with ``NAME.expected.py`` byte for byte, fixed again to show nothing
changes, and both the input and the fixed copy are imported: the input's ``check_fixed()`` must
fail with AssertionError on real torch, the fixed copy's must pass. A first line
``# gradlint-test: unsafe-fixes`` makes the test use ``--unsafe-fixes``.
"""

from __future__ import annotations

import difflib
import importlib.util
import os
import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gradlint.cli import main
from gradlint.engine import Options, lint_text
from gradlint.fix import (
    MAX_ROUNDS, apply_edits, fix_text, insert_after, insert_before, line_starts, node_range,
    offset, position_of, replace, resolve_fix, select_fixes, split_lines, unified_diff, write_atomic,
)
from gradlint.rule import Edit, Finding, Fix, Severity, registry

FIXES = Path(__file__).resolve().parent.parent / "fixtures" / "fixes"
INPUT = FIXES / "GL101_manual_update.input.py"
EXPECTED = FIXES / "GL101_manual_update.expected.py"

UPDATE = "import torch\nw = torch.ones(3, requires_grad=True)\n(w * 2).sum().backward()\nw -= 0.1 * w.grad\n"
UPDATE_FIXED = (
    "import torch\nw = torch.ones(3, requires_grad=True)\n(w * 2).sum().backward()\n"
    "with torch.no_grad():\n    w -= 0.1 * w.grad\n"
)
# a GL101 without a fix (a method call)
METHOD = "import torch\nx = torch.ones(3, requires_grad=True)\nx.add_(1)\n"
# GL101 whose fix is unsafe: not the manual update pattern
IADD = "import torch\nx = torch.ones(3, requires_grad=True)\nx += 1\n"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # click < 8.2
    except TypeError:
        return CliRunner()


def check(*args: str, input=None):
    return _runner().invoke(main, ["check", "-j", "1", *args], input=input, catch_exceptions=False)


def write(path: Path, text) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_bytes(text.encode("utf-8"))
    return path


def options() -> Options:
    return Options(codes=frozenset(registry()))


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ------------------------------------------------------------------------- the fix fixture
def test_fixture_input_has_fixable_findings(tmp_path):
    findings = lint_text("in.py", INPUT.read_text(encoding="utf-8"), options())
    assert [(f.line, f.code) for f in findings] == [(17, "GL101"), (18, "GL101"), (28, "GL101")]
    assert all(f.fixable and f.fix is not None and f.fix.safe for f in findings)
    # and the expected output is clean
    assert lint_text("out.py", EXPECTED.read_text(encoding="utf-8"), options()) == []


def test_fix_fixture_matches_expected(tmp_path):
    target = tmp_path / "manual_update.py"
    target.write_bytes(INPUT.read_bytes())
    r = check("--fix", "manual_update.py")
    assert r.exit_code == 0, r.output
    assert target.read_bytes() == EXPECTED.read_bytes()
    assert r.stdout == "All checks passed (1 file checked).\n"
    assert r.stderr == "Fixed 3 findings in 1 file.\n"


def test_fixed_fixture_runs_on_torch(tmp_path):
    torch = pytest.importorskip("torch")
    broken = load(INPUT, "gradlint_fix_input")
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        broken.train()

    target = tmp_path / "fixed_manual_update.py"
    target.write_bytes(INPUT.read_bytes())
    assert check("--fix", target.name).exit_code == 0
    fixed = load(target, "gradlint_fix_output")
    w, b = fixed.train(steps=3, lr=0.1)

    # the same steps written by hand
    ew = torch.ones(3, requires_grad=True)
    eb = torch.zeros(1, requires_grad=True)
    x = torch.tensor([1.0, 2.0, 3.0])
    for _ in range(3):
        (((ew * x).sum() + eb).pow(2).sum()).backward()
        with torch.no_grad():
            ew -= 0.1 * ew.grad
            eb -= 0.1 * eb.grad
        ew.grad = None
        eb.grad = None
    assert torch.allclose(w, ew) and torch.allclose(b, eb)
    assert not torch.equal(w, torch.ones(3))  # it did update
    assert w.is_leaf and w.requires_grad
    assert torch.allclose(fixed.one_step(), torch.zeros(2))  # w - 0.5 * 2w


def test_fix_twice_changes_nothing_the_second_time(tmp_path):
    target = write(tmp_path / "a.py", INPUT.read_bytes())
    assert check("--fix", "a.py").exit_code == 0
    once = target.read_bytes()
    mtime = target.stat().st_mtime_ns
    r = check("--fix", "a.py")
    assert r.exit_code == 0
    assert target.read_bytes() == once
    assert target.stat().st_mtime_ns == mtime  # not even rewritten
    assert r.stderr == ""


# ------------------------------------------------------------------- every fix fixture pair
UNSAFE_MARKER = "# gradlint-test: unsafe-fixes"
PAIRS = sorted(FIXES.glob("*.input.py"))


def _expected_of(inp: Path) -> Path:
    return inp.with_name(inp.name[: -len(".input.py")] + ".expected.py")


def _code_of(inp: Path) -> str:
    return inp.name.split("_", 1)[0]


def _is_unsafe(inp: Path) -> bool:
    lines = inp.read_text(encoding="utf-8").splitlines()
    return bool(lines) and lines[0].strip() == UNSAFE_MARKER


def _fix_args(inp: Path):
    return ("--fix", "--unsafe-fixes") if _is_unsafe(inp) else ("--fix",)


def _module_name(path: Path) -> str:
    return "gradlint_fix_" + "".join(c if c.isalnum() else "_" for c in path.name[: -len(".py")])


def test_every_fixable_rule_has_a_fix_fixture():
    pairs = {_code_of(p) for p in PAIRS}
    fixable = {code for code, rule in registry().items() if rule.fixable}
    assert fixable - pairs == set(), f"fixable rules without a fix fixture: {sorted(fixable - pairs)}"
    assert {"GL101", "GL204", "GL301", "GL401", "GL501"} <= pairs


def test_every_fix_fixture_is_a_pair():
    inputs = {p.name[: -len(".input.py")] for p in FIXES.glob("*.input.py")}
    expected = {p.name[: -len(".expected.py")] for p in FIXES.glob("*.expected.py")}
    assert inputs == expected, f"unpaired: {sorted(inputs ^ expected)}"
    assert {p.name for p in FIXES.glob("*.py")} == {f"{n}.{k}.py" for n in inputs for k in ("input", "expected")}


@pytest.mark.parametrize("inp", PAIRS, ids=lambda p: p.name[: -len(".input.py")])
def test_fix_pair_findings(inp):
    """The input's findings are all of the pair's rule and all fixable (safe ones, unless the
    pair is marked unsafe); the expected output has none."""
    code = _code_of(inp)
    findings = lint_text(inp.name, inp.read_text(encoding="utf-8"), options())
    assert findings, f"{inp.name} has no finding"
    assert {f.code for f in findings} == {code}
    assert all(f.fixable and f.fix is not None for f in findings)
    if _is_unsafe(inp):
        assert any(not f.fix.safe for f in findings), f"{inp.name} is marked unsafe but all its fixes are safe"
    else:
        assert all(f.fix.safe for f in findings), f"{inp.name} has unsafe fixes: mark it `{UNSAFE_MARKER}`"
    expected = _expected_of(inp)
    assert lint_text(expected.name, expected.read_text(encoding="utf-8"), options()) == []


@pytest.mark.parametrize("inp", PAIRS, ids=lambda p: p.name[: -len(".input.py")])
def test_fix_pair_matches_expected_and_is_idempotent(tmp_path, inp):
    expected = _expected_of(inp).read_bytes()
    target = write(tmp_path / "target.py", inp.read_bytes())
    r = check(*_fix_args(inp), "target.py")
    assert r.exit_code == 0, r.output
    assert target.read_bytes() == expected, "".join(difflib.unified_diff(
        split_lines(expected.decode("utf-8")), split_lines(target.read_text(encoding="utf-8")),
        fromfile="expected", tofile="fixed"))
    n = len(lint_text(inp.name, inp.read_text(encoding="utf-8"), options()))
    assert r.stderr == f"Fixed {n} finding{'s' if n != 1 else ''} in 1 file.\n"
    # again: nothing to fix, the file is not even rewritten
    mtime = target.stat().st_mtime_ns
    again = check(*_fix_args(inp), "target.py")
    assert again.exit_code == 0 and again.stderr == ""
    assert target.read_bytes() == expected
    assert target.stat().st_mtime_ns == mtime


@pytest.mark.parametrize("inp", [p for p in PAIRS if _is_unsafe(p)], ids=lambda p: p.name[: -len(".input.py")])
def test_unsafe_fix_pair_needs_unsafe_fixes(tmp_path, inp):
    target = write(tmp_path / "target.py", inp.read_bytes())
    r = check("--fix", "target.py")
    assert r.exit_code == 1  # findings remain
    assert target.read_bytes() != _expected_of(inp).read_bytes()
    assert "unsafe fix" in r.stderr and "not applied" in r.stderr


@pytest.mark.parametrize("inp", PAIRS, ids=lambda p: p.name[: -len(".input.py")])
def test_fix_pair_removes_the_bug_on_torch(tmp_path, inp):
    """``check_fixed()`` fails on the input (the bug is real) and passes on the fixed copy."""
    pytest.importorskip("torch")
    broken = load(inp, _module_name(inp))
    assert callable(getattr(broken, "check_fixed", None)), f"{inp.name} has no check_fixed()"
    with pytest.raises(AssertionError):
        broken.check_fixed()

    target = write(tmp_path / ("fixed_" + inp.name.replace(".input", "")), inp.read_bytes())
    assert check(*_fix_args(inp), target.name).exit_code == 0
    assert target.read_bytes() == _expected_of(inp).read_bytes()
    fixed = load(target, _module_name(target))
    fixed.check_fixed()


# ------------------------------------------------------------------ GL204's and GL301's fixes
def _fixed(src: str, code: str):
    """(the source after applying ``code``'s safe fixes, the findings of ``code`` before)."""
    opts = Options(codes=frozenset({code}))
    findings = lint_text("a.py", src, opts)
    return fix_text("a.py", src, opts).text, findings


@pytest.mark.parametrize("line, fixed", [
    ("a = torch.tensor(x)", "a = x.detach().clone()"),
    ("a = torch.tensor(x, requires_grad=True)", "a = x.detach().clone().requires_grad_(True)"),
    ("a = torch.tensor(x, requires_grad=False,)", "a = x.detach().clone()"),
    ("a = torch.tensor(x + x)", "a = (x + x).detach().clone()"),
    ("a = torch.tensor((x + x))", "a = (x + x).detach().clone()"),
    ("a = torch.tensor(-x)", "a = (-x).detach().clone()"),
    ("a = torch.tensor(x if x.sum() > 0 else x)", "a = (x if x.sum() > 0 else x).detach().clone()"),
    ("a = T.tensor(x[1:])", "a = x[1:].detach().clone()"),
    ("a = torch.tensor(x.double())", "a = x.double().detach().clone()"),
    ("a = (torch.tensor(x)).sum()", "a = (x.detach().clone()).sum()"),
    ("a = torch.tensor(\n    x,\n    requires_grad=True,\n)", "a = x.detach().clone().requires_grad_(True)"),
])
def test_gl204_fix(line, fixed):
    head = "import torch\nimport torch as T\nx = torch.arange(3.0)\n"
    out, findings = _fixed(head + line + "\n", "GL204")
    assert [f.code for f in findings] == ["GL204"] and findings[0].fix.safe
    assert out == head + fixed + "\n"


@pytest.mark.parametrize("line", [
    "a = torch.tensor(x, dtype=torch.float64)",
    "a = torch.tensor(x, device='cpu')",
    "a = torch.tensor(x, requires_grad=flag)",
    "a = torch.tensor(x, requires_grad=True, pin_memory=False)",
    "a = torch.tensor(x, **kw)",
    "a = torch.tensor(\n    x,  # the source\n)",
])
def test_gl204_no_fix(line):
    src = "import torch\nx = torch.arange(3.0)\nflag = True\nkw = {}\n" + line + "\n"
    findings = lint_text("a.py", src, options())
    assert [f.code for f in findings] == ["GL204"]
    assert findings[0].fix is None and not findings[0].fixable


@pytest.mark.parametrize("made, fixed", [
    ("torch.randn(3, requires_grad=True).cuda()", 'torch.randn(3, requires_grad=True, device="cuda")'),
    ('torch.randn(3, requires_grad=True).to("cuda:1")', 'torch.randn(3, requires_grad=True, device="cuda:1")'),
    ("torch.randn(3, requires_grad=True).to('meta')", "torch.randn(3, requires_grad=True, device='meta')"),
    ("torch.randn(3, requires_grad=True).double()", "torch.randn(3, requires_grad=True, dtype=torch.float64)"),
    ("T.ones(3, requires_grad=True).half()", "T.ones(3, requires_grad=True, dtype=T.float16)"),
    ("torch.zeros(3, requires_grad=True).bfloat16()", "torch.zeros(3, requires_grad=True, dtype=torch.bfloat16)"),
    ("randn(3, requires_grad=True).double()", "randn(3, requires_grad=True, dtype=torch.float64)"),
    ("torch.randn(3, requires_grad=True).to(torch.float64)", "torch.randn(3, requires_grad=True, dtype=torch.float64)"),
    ("torch.randn(3, requires_grad=True).to(T.double)", "torch.randn(3, requires_grad=True, dtype=T.double)"),
    ("torch.randn(3, requires_grad=True).to(dtype=torch.float64)",
     "torch.randn(3, requires_grad=True, dtype=torch.float64)"),
    ('torch.randn(3, requires_grad=True,).to("cuda", torch.float64)',
     'torch.randn(3, requires_grad=True, device="cuda", dtype=torch.float64,)'),
    ("torch.randn(3, dtype=torch.float32, requires_grad=True).cuda()",
     'torch.randn(3, dtype=torch.float32, requires_grad=True, device="cuda")'),
    ("torch.randn(3, device='cuda', requires_grad=True).double()",
     "torch.randn(3, device='cuda', requires_grad=True, dtype=torch.float64)"),
    ("torch.randn(3, generator=g, requires_grad=True).double()",
     "torch.randn(3, generator=g, requires_grad=True, dtype=torch.float64)"),
    ("torch.randn(\n        3,\n        requires_grad=True,  # keep\n    ).to(torch.float64)",
     "torch.randn(\n        3,\n        requires_grad=True, dtype=torch.float64,  # keep\n    )"),
])
def test_gl301_fix(made, fixed):
    head = "import torch\nimport torch as T\nfrom torch import randn\n\n\ndef f(g):\n"
    tail = "\n    return torch.optim.SGD([w], lr=0.1)\n"
    out, findings = _fixed(head + "    w = " + made + tail, "GL301")
    assert [f.code for f in findings] == ["GL301"] and findings[0].fix.safe
    assert out == head + "    w = " + fixed + tail


@pytest.mark.parametrize("made", [
    "torch.randn(3, requires_grad=True) * 0.01",
    "torch.randn(6, requires_grad=True).view(2, 3)",
    "torch.randn(3, requires_grad=True).to(dev)",
    "torch.randn(3, requires_grad=True).to('cuda', non_blocking=True)",
    "torch.randn(3, requires_grad=True).cuda(1)",
    "torch.randn(3, device='cpu', requires_grad=True).cuda()",
    "torch.randn(3, dtype=torch.float32, requires_grad=True).double()",
    "torch.randn(3, requires_grad=True, dtype=torch.float32).to('cuda', torch.float64)",
    "torch.randn(3, generator=g, requires_grad=True).cuda()",
    "torch.randn(3, pin_memory=True, requires_grad=True).cuda()",
    "torch.randn(3, requires_grad=True, **kw).cuda()",
    "(torch.randn(3, requires_grad=True)).cuda()",
    "(torch.randn(3, requires_grad=True)  # a comment\n         .cuda())",
])
def test_gl301_no_fix(made):
    src = ("import torch\n\n\ndef f(dev, g, kw):\n    w = " + made + "\n"
           "    return torch.optim.SGD([w], lr=0.1)\n")
    findings = lint_text("a.py", src, options())
    assert [f.code for f in findings] == ["GL301"]
    assert findings[0].fix is None and not findings[0].fixable


@pytest.mark.parametrize("src", [
    # a conversion of a name (rebinding)
    "import torch\nw = torch.randn(3, requires_grad=True)\nw = w.cuda()\ntorch.optim.SGD([w], lr=0.1)\n",
    # `.double()` with no name for torch in the file
    "from torch import randn, optim\nw = randn(3, requires_grad=True).double()\noptim.SGD([w], lr=0.1)\n",
])
def test_gl301_no_fix_without_a_literal_factory(src):
    findings = lint_text("a.py", src, options())
    assert [f.code for f in findings] == ["GL301"]
    assert findings[0].fix is None


def test_gl301_fix_without_torch_alias_for_a_device():
    src = "from torch import randn, optim\nw = randn(3, requires_grad=True).to('meta')\noptim.SGD([w], lr=0.1)\n"
    out, _ = _fixed(src, "GL301")
    assert out == "from torch import randn, optim\nw = randn(3, requires_grad=True, device='meta')\noptim.SGD([w], lr=0.1)\n"


def test_replace_span_resolves_from_one_node_to_another():
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    from gradlint.fix import replace_span

    text = "y = torch.randn(3).cuda()\n"
    module = cst.parse_module(text)
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    call = module.body[0].body[0].value
    inner = call.func.value
    tail = resolve_fix(Fix((replace_span(inner, call, "", after_start=True),)), positions, text, module)
    assert apply_edits(text, tail.edits) == "y = torch.randn(3)\n"
    whole = resolve_fix(Fix((replace_span(inner.func, call, "z"),)), positions, text, module)
    assert apply_edits(text, whole.edits) == "y = z\n"
    # an end node that ends before the start: the fix is dropped
    assert resolve_fix(Fix((replace_span(call, inner.func, "", after_start=True),)), positions, text, module) is None


# ------------------------------------------------------------------------------- --diff
def test_diff_prints_the_change_and_writes_nothing(tmp_path):
    target = write(tmp_path / "a.py", INPUT.read_bytes())
    before = target.read_bytes()
    r = check("--diff", "a.py")
    assert r.exit_code == 1
    assert target.read_bytes() == before
    expected = "".join(difflib.unified_diff(
        split_lines(INPUT.read_text(encoding="utf-8")), split_lines(EXPECTED.read_text(encoding="utf-8")),
        fromfile="a.py", tofile="a.py"))
    assert r.stdout == expected
    assert r.stdout.startswith("--- a.py\n+++ a.py\n@@ ")
    assert r.stderr == "Would fix 3 findings in 1 file.\n"
    assert not list(tmp_path.glob(".a.py.*"))  # no temporary file left


def test_diff_with_nothing_to_fix_exits_0(tmp_path):
    write(tmp_path / "m.py", METHOD)  # a finding, but no fix
    r = check("--diff", "m.py")
    assert r.exit_code == 0
    assert r.stdout == ""
    assert r.stderr == "No fixes to apply.\n"


def test_diff_exit_zero_and_quiet(tmp_path):
    write(tmp_path / "a.py", UPDATE)
    r = check("--diff", "--exit-zero", "-q", "a.py")
    assert r.exit_code == 0 and r.stdout.startswith("--- a.py") and r.stderr == ""


def test_diff_to_output_file(tmp_path):
    write(tmp_path / "a.py", UPDATE)
    r = check("--diff", "--output-file", "fix.diff", "a.py")
    assert r.exit_code == 1 and r.stdout == ""
    assert (tmp_path / "fix.diff").read_text(encoding="utf-8").startswith("--- a.py\n+++ a.py\n")
    assert (tmp_path / "a.py").read_text(encoding="utf-8") == UPDATE


# ------------------------------------------------------------------------ what gets fixed
def test_only_fixed_findings_disappear(tmp_path):
    write(tmp_path / "a.py", UPDATE + "w.add_(1)\n")
    r = check("--fix", "a.py")
    assert r.exit_code == 1  # the method call remains
    out = r.stdout.splitlines()
    assert len(out) == 2 and out[0].startswith("a.py:6:1: GL101 in-place `.add_()`")
    assert (tmp_path / "a.py").read_text(encoding="utf-8") == UPDATE_FIXED + "w.add_(1)\n"
    assert r.stderr == "Fixed 1 finding in 1 file.\n"


def test_unsafe_fix_needs_unsafe_fixes(tmp_path):
    write(tmp_path / "a.py", IADD)
    r = check("--fix", "a.py")
    assert r.exit_code == 1
    assert (tmp_path / "a.py").read_text(encoding="utf-8") == IADD
    assert "1 unsafe fix not applied" in r.stderr
    assert "a.py:3:1: GL101" in r.stdout
    r = check("--fix", "--unsafe-fixes", "a.py")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "a.py").read_text(encoding="utf-8") == (
        "import torch\nx = torch.ones(3, requires_grad=True)\nwith torch.no_grad():\n    x += 1\n")


def test_unsafe_fixes_without_fix_changes_nothing(tmp_path):
    write(tmp_path / "a.py", UPDATE)
    r = check("--unsafe-fixes", "a.py")
    assert r.exit_code == 1 and (tmp_path / "a.py").read_text(encoding="utf-8") == UPDATE


def test_noqa_is_honoured_by_fix(tmp_path):
    src = UPDATE.replace("w.grad\n", "w.grad  # noqa: GL101\n")
    write(tmp_path / "a.py", src)
    r = check("--fix", "a.py")
    assert r.exit_code == 0 and (tmp_path / "a.py").read_text(encoding="utf-8") == src


@pytest.mark.parametrize("imports, spelled", [
    ("import torch as T\n", "T.no_grad"),
    ("import torch.nn as nn\nimport torch\n", "torch.no_grad"),
    ("from torch import no_grad\nimport torch as tt\n", "tt.no_grad"),
])
def test_fix_uses_the_files_name_for_torch(tmp_path, imports, spelled):
    src = imports + "w = " + ("T" if "as T" in imports else "tt" if "as tt" in imports else "torch") + \
        ".ones(3, requires_grad=True)\nw -= 0.1 * w.grad\n"
    write(tmp_path / "a.py", src)
    assert check("--fix", "a.py").exit_code == 0
    assert f"\nwith {spelled}():\n    w -= 0.1 * w.grad\n" in (tmp_path / "a.py").read_text(encoding="utf-8")


def test_fix_with_only_no_grad_imported(tmp_path):
    src = "from torch import no_grad, ones\nw = ones(3, requires_grad=True)\nw -= 0.1 * w.grad\n"
    write(tmp_path / "a.py", src)
    assert check("--fix", "a.py").exit_code == 0
    assert (tmp_path / "a.py").read_text(encoding="utf-8").endswith("with no_grad():\n    w -= 0.1 * w.grad\n")


@pytest.mark.parametrize("line", [
    "y = 1; w -= 0.1 * w.grad",  # not alone on its line
    "w -= 0.1 * w.grad;",  # a semicolon
    "if True: w -= 0.1 * w.grad",  # a one-line suite
    "w -= (0.1 *\n      w.grad)",  # over two lines
])
def test_no_fix_offered(tmp_path, line):
    src = "import torch\nw = torch.ones(3, requires_grad=True)\n" + line + "\n"
    findings = lint_text("a.py", src, options())
    assert [f.code for f in findings] == ["GL101"]
    assert findings[0].fix is None and not findings[0].fixable


def test_fix_keeps_nested_indentation_and_tabs(tmp_path):
    src = ("import torch\n"
           "def f():\n"
           "\tw = torch.ones(3, requires_grad=True)\n"
           "\tfor _ in range(2):\n"
           "\t\tw -= 0.1 * w.grad  # step\n")
    write(tmp_path / "a.py", src)
    assert check("--fix", "a.py").exit_code == 0
    assert (tmp_path / "a.py").read_text(encoding="utf-8").endswith(
        "\tfor _ in range(2):\n\t\twith torch.no_grad():\n\t\t\tw -= 0.1 * w.grad  # step\n")


# ------------------------------------------------------------------ bytes on disk are kept
def test_crlf_is_kept(tmp_path):
    target = write(tmp_path / "a.py", INPUT.read_bytes().replace(b"\n", b"\r\n"))
    assert check("--fix", "a.py").exit_code == 0
    assert target.read_bytes() == EXPECTED.read_bytes().replace(b"\n", b"\r\n")


def test_bom_is_kept(tmp_path):
    target = write(tmp_path / "a.py", b"\xef\xbb\xbf# \xc3\xa9t\xc3\xa9\n" + UPDATE.encode())
    assert check("--fix", "a.py").exit_code == 0
    assert target.read_bytes() == b"\xef\xbb\xbf# \xc3\xa9t\xc3\xa9\n" + UPDATE_FIXED.encode()


def test_coding_cookie_is_kept(tmp_path):
    head = "# -*- coding: latin-1 -*-\n# caf\xe9\n"
    target = write(tmp_path / "a.py", (head + UPDATE).encode("latin-1"))
    assert check("--fix", "a.py").exit_code == 0
    assert target.read_bytes() == (head + UPDATE_FIXED).encode("latin-1")


def test_missing_final_newline_is_kept(tmp_path):
    target = write(tmp_path / "a.py", UPDATE.rstrip("\n"))
    assert check("--fix", "a.py").exit_code == 0
    assert target.read_text(encoding="utf-8") == UPDATE_FIXED.rstrip("\n")


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_file_mode_is_kept(tmp_path):
    target = write(tmp_path / "a.py", UPDATE)
    target.chmod(0o750)
    assert check("--fix", "a.py").exit_code == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    assert target.read_text(encoding="utf-8") == UPDATE_FIXED


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="symbolic links")
def test_fix_writes_through_a_symlink(tmp_path):
    real = write(tmp_path / "real.py", UPDATE)
    link = tmp_path / "link.py"
    link.symlink_to(real)
    assert check("--fix", "link.py").exit_code == 0
    assert link.is_symlink()
    assert real.read_text(encoding="utf-8") == UPDATE_FIXED


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_read_only_file(tmp_path):
    ro = write(tmp_path / "ro.py", UPDATE)
    rw = write(tmp_path / "rw.py", UPDATE)
    ro.chmod(0o444)
    try:
        r = check("--fix", "ro.py", "rw.py")
    finally:
        ro.chmod(0o644)
    assert r.exit_code == 1  # ro.py's finding remains
    assert ro.read_text(encoding="utf-8") == UPDATE
    assert rw.read_text(encoding="utf-8") == UPDATE_FIXED
    err = r.stderr.splitlines()
    assert err[0] == "gradlint: ro.py: cannot write fixes: the file is read-only"
    assert err[1] == "Fixed 1 finding in 1 file."
    assert [line.split(":")[0] for line in r.stdout.splitlines() if ": GL" in line] == ["ro.py"]
    assert not [p for p in tmp_path.iterdir() if "gradlint-tmp" in p.name]


def test_unwritable_directory(tmp_path, monkeypatch):
    """(root ignores directory permissions, so the failure is simulated)"""
    import tempfile

    write(tmp_path / "a.py", UPDATE)

    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    r = check("--fix", "a.py")
    assert r.exit_code == 1
    assert (tmp_path / "a.py").read_text(encoding="utf-8") == UPDATE
    assert r.stderr.splitlines()[0].startswith("gradlint: a.py: cannot write fixes: cannot create a file in")


# --------------------------------------------------------------- a fix that breaks the code
def test_fix_whose_result_does_not_parse_is_rejected(tmp_path, monkeypatch):
    rule_module = sys.modules[registry()["GL101"].__module__]

    def broken(model, node):
        return Fix((insert_before(node, "with (:\n    "),), safe=True, description="broken")

    monkeypatch.setattr(rule_module, "_no_grad_fix", broken)
    target = write(tmp_path / "a.py", UPDATE)
    r = check("--fix", "a.py")
    assert r.exit_code == 1
    assert target.read_text(encoding="utf-8") == UPDATE
    err = r.stderr.splitlines()
    assert len(err) == 1
    assert err[0].startswith("gradlint: a.py: the fixed code does not parse (fixes for GL101")
    assert err[0].endswith("the file is left unchanged")
    assert r.stdout.startswith("a.py:4:1: GL101 ")  # the finding stays


def _finding(line: int, fix: Fix) -> Finding:
    return Finding(path="t.py", line=line, column=1, end_line=line, end_column=2, code="GL101",
                   name="inplace-on-leaf", severity=Severity.ERROR, message="m", fixable=True, fix=fix)


def test_fix_text_rejects_unparseable_result():
    calls = []

    def lint(display, text, opts):
        calls.append(text)
        return [_finding(1, Fix((Edit(0, 0, "def ("),)))]

    result = fix_text("t.py", "x = 1\n", None, lint=lint)
    assert result.text == "x = 1\n" and result.fixed == 0
    assert "does not parse" in result.error
    assert [f.line for f in result.findings] == [1]


# ------------------------------------------------------------------ rounds and overlaps
def test_overlapping_fixes_take_several_rounds():
    """Two fixes that touch the same range: one per round, re-linting in between."""
    def lint(display, text, opts):
        out = []
        if "a" in text:
            out.append(_finding(1, Fix((Edit(text.index("a"), text.index("a") + 1, "b"),))))
        if "xy" in text:
            i = text.index("xy")
            out.append(_finding(1, Fix((Edit(i - 1 if i else 0, i + 2, "z"),))))
        return out

    # "axy": the first fix (a -> b) overlaps the second ([0, 3) -> z); round 1 takes only the
    # first, round 2 (re-linted: "bxy") the second
    result = fix_text("t.py", "axy\n", None, lint=lint)
    assert result.text == "z\n" and result.fixed == 2 and not result.error


def test_rounds_are_bounded():
    def lint(display, text, opts):  # a fix that never makes its finding go away
        return [_finding(1, Fix((Edit(0, 0, "#\n"),)))]

    result = fix_text("t.py", "x = 1\n", None, lint=lint)
    assert result.fixed == MAX_ROUNDS
    assert result.text == "#\n" * MAX_ROUNDS + "x = 1\n"
    assert "did not converge" in result.note


def test_select_fixes_skips_conflicts_and_unsafe():
    a = _finding(1, Fix((Edit(0, 5, "A"),)))
    b = _finding(1, Fix((Edit(3, 8, "B"),)))  # overlaps a
    c = _finding(2, Fix((Edit(8, 8, "C"),)))  # touches b's end only, not a's
    d = _finding(3, Fix((Edit(10, 12, "D"),), safe=False))
    e = _finding(3, Fix((Edit(0, 0, "E"),)))  # same start as a: ambiguous order
    chosen = [f for f, _ in select_fixes([a, b, c, d, e])]
    assert chosen == [a, c]
    assert [f for f, _ in select_fixes([a, b, c, d, e], unsafe=True)] == [a, c, d]


def test_apply_edits():
    assert apply_edits("hello world", [Edit(0, 5, "HELLO"), Edit(11, 11, "!"), Edit(5, 5, ",")]) == "HELLO, world!"
    with pytest.raises(ValueError):
        apply_edits("abc", [Edit(2, 9, "x")])


# ---------------------------------------------------------------------- offsets and nodes
def test_line_starts_and_offsets():
    text = "ab\r\ncd\ne\rf"
    assert line_starts(text) == (0, 4, 7, 9)
    assert offset(text, 2, 1) == 5 and text[5] == "d"
    assert offset(text, 4, 0) == 9 and text[9] == "f"
    assert position_of(text, 5) == (2, 1)
    with pytest.raises(ValueError):
        offset(text, 9, 0)


def test_node_edits_resolve_to_offsets():
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    text = "import torch\r\nif x:\r\n\té = w.grad  # c\r\n"
    module = cst.parse_module(text)
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    assign = module.body[1].body.body[0].body[0]
    value = assign.value
    start, end = node_range(positions, value, text)
    assert text[start:end] == "w.grad"
    fix = Fix((replace(value, "g"), insert_after(value, ".clone()"),
               insert_before(assign, "with a:\n    ", reindent=True)), safe=False, description="d")
    resolved = resolve_fix(fix, positions, text, module)
    assert resolved.safe is False and resolved.description == "d"
    assert all(type(e) is Edit for e in resolved.edits)  # plain offsets, no nodes kept
    assert apply_edits(text, resolved.edits) == "import torch\r\nif x:\r\n\twith a:\r\n\t\té = g.clone()  # c\r\n"
    # a node that is not in the tree: the fix is dropped
    assert resolve_fix(Fix((replace(cst.Name("zz"), "y"),)), positions, text, module) is None


def test_unified_diff_marks_a_missing_final_newline():
    d = unified_diff("f.py", "a\nb", "a\nc")
    assert d.endswith("-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n")


def test_write_atomic_refuses_read_only(tmp_path):
    p = write(tmp_path / "f.py", "x\n")
    p.chmod(0o444)
    try:
        assert "read-only" in write_atomic(str(p), b"y\n")
    finally:
        p.chmod(0o644)
    assert p.read_text(encoding="utf-8") == "x\n"


# ------------------------------------------------------------------------------ stdin
def test_fix_stdin_prints_the_fixed_source(tmp_path):
    r = check("--fix", "-", "--stdin-filename", "t.py", input=UPDATE + "w.add_(1)\n")
    assert r.exit_code == 1
    assert r.stdout == UPDATE_FIXED + "w.add_(1)\n"
    assert "t.py:6:1: GL101" in r.stderr  # the report goes to stderr


def test_diff_stdin(tmp_path):
    r = check("--diff", "-", "--stdin-filename", "t.py", input=UPDATE)
    assert r.exit_code == 1
    assert r.stdout.startswith("--- t.py\n+++ t.py\n")
    assert "+with torch.no_grad():\n" in r.stdout


def test_gl401_fix_does_not_import_copy_twice(tmp_path):
    import subprocess
    import sys

    src = tmp_path / "snap.py"
    src.write_text(
        "import copy\nimport torch\n\n\ndef f(model, opt):\n    best = model.state_dict()\n"
        "    for _ in range(2):\n        opt.step()\n    return best\n",
        encoding="utf-8",
    )
    r = subprocess.run([sys.executable, "-m", "gradlint", "check", str(src), "--fix", "--no-cache", "-j", "1"],
                       capture_output=True, text=True, cwd=tmp_path)
    text = src.read_text(encoding="utf-8")
    assert "best = copy.deepcopy(model.state_dict())" in text, (r.stdout, r.stderr, text)
    assert text.count("import copy") == 1
