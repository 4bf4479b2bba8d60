"""``gradlint server``, end to end: a real LSP client (pytest-lsp) drives the server over pipes.

One server for the module; each test works on documents of its own (a uri per test).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Callable, List, Tuple

import pytest

pytest.importorskip("pygls")
pytest_lsp = pytest.importorskip("pytest_lsp")

from lsprotocol import types as lsp  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# the change event that carries the whole text (named so from lsprotocol 2025 on)
WHOLE = getattr(lsp, "TextDocumentContentChangeWholeDocument", None) or lsp.TextDocumentContentChangeEvent_Type2
PARTIAL = getattr(lsp, "TextDocumentContentChangePartial", None) or lsp.TextDocumentContentChangeEvent_Type1
PUBLISH = "textDocument/publishDiagnostics"

BUGGY = textwrap.dedent("""\
    import torch
    import torch.nn as nn

    w = torch.randn(3, requires_grad=True)
    x = torch.tensor(w)
    loss = (w * 2).sum()
    loss.backward()
    w -= 0.1 * w.grad

    model = nn.Linear(3, 1)
    losses = []
    for _ in range(3):
        out = model(torch.randn(4, 3)).pow(2).mean()
        out.backward()
        losses.append(out)

    with torch.no_grad():
        pred = model(torch.randn(4, 3)).sum()
    pred.backward()
    """)
# code -> (0-based line, start character, end character, severity)
EXPECTED = {
    "GL204": (4, 4, 19, lsp.DiagnosticSeverity.Warning),
    "GL101": (7, 0, 17, lsp.DiagnosticSeverity.Error),
    "GL501": (14, 4, 22, lsp.DiagnosticSeverity.Error),
    "GL305": (17, 4, 41, lsp.DiagnosticSeverity.Error),
}
CLEAN = "import torch\n\nw = torch.randn(3, requires_grad=True)\nwith torch.no_grad():\n    w -= 1\n"

lsp_test = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ws")  # no configuration: the defaults


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=[sys.executable, "-m", "gradlint", "server"],
                              server_env={**os.environ}),
)
async def client(lsp_client: LanguageClient, workspace: Path):
    published: List[lsp.PublishDiagnosticsParams] = []
    features = lsp_client.protocol.fm.features
    original = features[PUBLISH]

    def record(params: Any) -> Any:
        published.append(params)
        return original(params)

    features[PUBLISH] = record
    lsp_client.published = published  # type: ignore[attr-defined]
    # as editors do: edits tied to the document's version
    capabilities = lsp.ClientCapabilities(workspace=lsp.WorkspaceClientCapabilities(
        workspace_edit=lsp.WorkspaceEditClientCapabilities(document_changes=True)))
    await lsp_client.initialize_session(lsp.InitializeParams(capabilities=capabilities, root_uri=workspace.as_uri()))
    yield
    await lsp_client.shutdown_session()


# ---------------------------------------------------------------------------- helpers
async def until(condition: Callable[[], Any], timeout: float = 20.0) -> Any:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        value = condition()
        if value:
            return value
        if loop.time() > end:
            raise AssertionError("timed out waiting for the server")
        await asyncio.sleep(0.02)


async def diagnostics(client: LanguageClient, uri: str, version: Any = None, after: int = 0) -> List[lsp.Diagnostic]:
    """The first diagnostics published for ``uri`` (for ``version``) among the notifications
    from index ``after`` on."""

    def found() -> Any:
        for p in client.published[after:]:  # type: ignore[attr-defined]
            if p.uri == uri and (version is None or p.version == version):
                return [p]
        return None

    return list((await until(found))[0].diagnostics)


def open_doc(client: LanguageClient, path: Path, text: str, version: int = 1) -> str:
    uri = path.as_uri()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)))
    return uri


def change_doc(client: LanguageClient, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[WHOLE(text=text)]))


def offset(text: str, pos: lsp.Position) -> int:
    """An LSP position (UTF-16) -> an offset into ``text``."""
    lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text) or [""]
    start = sum(len(line) for line in lines[:pos.line])
    line, units, i = lines[pos.line] if pos.line < len(lines) else "", 0, 0
    while units < pos.character and i < len(line):
        units += 2 if ord(line[i]) > 0xFFFF else 1
        i += 1
    return start + i


def apply(text: str, edits: List[lsp.TextEdit]) -> str:
    spans = sorted(((offset(text, e.range.start), offset(text, e.range.end), e.new_text) for e in edits), reverse=True)
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


def edits_of(action: lsp.CodeAction, uri: str, version: int = 1) -> List[lsp.TextEdit]:
    assert action.edit is not None and action.edit.changes is None and action.edit.document_changes
    (change,) = action.edit.document_changes
    assert change.text_document.uri == uri and change.text_document.version == version
    return list(change.edits)


def cli_fix(tmp_path: Path, text: str, *args: str) -> str:
    """What `gradlint check --fix ARGS` makes of ``text``."""
    target = tmp_path / "cli_fix.py"
    target.write_text(text)
    subprocess.run([sys.executable, "-m", "gradlint", "check", "--fix", "--no-cache", *args, str(target)],
                   cwd=tmp_path, capture_output=True, env={**os.environ})
    return target.read_text()


async def actions(client: LanguageClient, uri: str, rng: lsp.Range, only: Any = None) -> List[lsp.CodeAction]:
    result = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=rng,
        context=lsp.CodeActionContext(diagnostics=[], only=only)))
    return [a for a in result or [] if isinstance(a, lsp.CodeAction)]


def at(line: int, start: int, end: int) -> lsp.Range:
    return lsp.Range(start=lsp.Position(line=line, character=start), end=lsp.Position(line=line, character=end))


# ---------------------------------------------------------------------------- diagnostics
@lsp_test
async def test_diagnostics_of_a_buggy_document(client: LanguageClient, workspace: Path):
    uri = open_doc(client, workspace / "diag.py", BUGGY)
    diags = await diagnostics(client, uri)
    got = {d.code: (d.range.start.line, d.range.start.character, d.range.end.character, d.severity) for d in diags}
    assert got == EXPECTED
    for d in diags:
        assert d.source == "gradlint"
        assert d.range.start.line == d.range.end.line
        assert d.code_description is None  # no docs URL set: no link to a site that is not ours
    gl305 = next(d for d in diags if d.code == "GL305")
    assert gl305.related_information is not None
    (rel,) = gl305.related_information
    assert rel.location.uri == uri and rel.location.range.start == lsp.Position(line=18, character=0)
    assert "backward()" in rel.message


@lsp_test
async def test_republished_after_a_change_latest_version_only(client: LanguageClient, workspace: Path):
    uri = open_doc(client, workspace / "change.py", BUGGY)
    assert len(await diagnostics(client, uri, version=1)) == 4
    mark = len(client.published)  # type: ignore[attr-defined]
    change_doc(client, uri, BUGGY.replace("x = torch.tensor(w)\n", ""), 2)
    change_doc(client, uri, BUGGY.replace("x = torch.tensor(w)\n", "x = 1\n"), 3)
    change_doc(client, uri, CLEAN, 4)
    assert await diagnostics(client, uri, version=4, after=mark) == []
    await asyncio.sleep(0.5)  # debounced: the intermediate versions are never published
    versions = [p.version for p in client.published[mark:] if p.uri == uri]  # type: ignore[attr-defined]
    assert versions == [4]
    mark = len(client.published)  # type: ignore[attr-defined]
    # an incremental change (as editors send them); the unsaved text is linted, not the file on disk
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=5),
        content_changes=[PARTIAL(range=at(5, 0, 0), text="w -= 1\n")]))
    (d,) = await diagnostics(client, uri, version=5, after=mark)
    assert d.code == "GL101" and d.range.start.line == 5


@lsp_test
async def test_cleared_on_close(client: LanguageClient, workspace: Path):
    uri = open_doc(client, workspace / "close.py", BUGGY)
    assert await diagnostics(client, uri)
    mark = len(client.published)  # type: ignore[attr-defined]
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))
    assert await diagnostics(client, uri, after=mark) == []


@lsp_test
async def test_syntax_error_is_one_gl000(client: LanguageClient, workspace: Path):
    uri = open_doc(client, workspace / "syntax.py", "import torch\n\ndef f(:\n    pass\n")
    (d,) = await diagnostics(client, uri)
    assert d.code == "GL000" and d.severity == lsp.DiagnosticSeverity.Error and d.range.start.line == 2
    assert [a.title for a in await actions(client, uri, d.range)] == []  # `# noqa` does not silence GL000


@lsp_test
async def test_other_languages_are_not_linted(client: LanguageClient, workspace: Path):
    uri = (workspace / "notes.md").as_uri()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(
        uri=uri, language_id="markdown", version=1, text="# torch notes\n\nw -= lr * w.grad\n")))
    assert await diagnostics(client, uri) == []
    # nor stubs, nor a notebook's cells (`gradlint check` lints the notebook as a whole)
    stub = open_doc(client, workspace / "stub.pyi", BUGGY)
    assert await diagnostics(client, stub) == []
    cell = "vscode-notebook-cell:" + (workspace / "nb.ipynb").as_posix() + "#W0sZmlsZQ%3D%3D"
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(
        uri=cell, language_id="python", version=1, text="%matplotlib inline\n" + BUGGY)))
    assert await diagnostics(client, cell) == []


@lsp_test
async def test_positions_in_utf16(client: LanguageClient, workspace: Path):
    text = 'import torch\nw = torch.randn(3, requires_grad=True)\ns = "\U0001F600é"; x = torch.tensor(w)\n'
    uri = open_doc(client, workspace / "utf16.py", text)
    (d,) = await diagnostics(client, uri)
    assert d.code == "GL204"
    assert (d.range.start.character, d.range.end.character) == (15, 30)  # the emoji is two UTF-16 units
    (fix,) = [a for a in await actions(client, uri, d.range) if a.title.startswith("Fix GL204")]
    assert apply(text, edits_of(fix, uri)).splitlines()[2] == 's = "\U0001F600é"; x = w.detach().clone()'


# ---------------------------------------------------------------------------- code actions
@lsp_test
async def test_fix_actions_match_check_fix(client: LanguageClient, workspace: Path, tmp_path: Path):
    uri = open_doc(client, workspace / "fix.py", BUGGY)
    diags = {d.code: d for d in await diagnostics(client, uri)}
    for code, unsafe in (("GL204", False), ("GL101", False), ("GL501", True)):
        found = [a for a in await actions(client, uri, diags[code].range) if a.title.startswith(f"Fix {code}:")]
        assert len(found) == 1, [a.title for a in found]
        action = found[0]
        assert action.kind == lsp.CodeActionKind.QuickFix
        assert action.diagnostics and action.diagnostics[0].code == code
        assert ("(unsafe)" in action.title) is unsafe
        assert bool(action.is_preferred) is not unsafe
        args = ("--select", code) + (("--unsafe-fixes",) if unsafe else ())
        assert apply(BUGGY, edits_of(action, uri)) == cli_fix(tmp_path, BUGGY, *args)
    # GL305 has no fix: only the noqa action
    titles = [a.title for a in await actions(client, uri, diags["GL305"].range, only=["quickfix"])]
    assert titles == ["Add `# noqa: GL305`"]


@lsp_test
async def test_fix_all_safe_source_action(client: LanguageClient, workspace: Path, tmp_path: Path):
    uri = open_doc(client, workspace / "fixall.py", BUGGY)
    await diagnostics(client, uri)
    (action,) = await actions(client, uri, at(0, 0, 0), only=["source.fixAll.gradlint"])
    assert action.kind == "source.fixAll.gradlint"
    fixed = apply(BUGGY, edits_of(action, uri))
    assert fixed == cli_fix(tmp_path, BUGGY) != BUGGY
    assert "w.detach().clone()" in fixed and "losses.append(out)" in fixed  # the unsafe fix is not applied
    # `source` (what editors ask on save) includes it; `quickfix` does not
    assert [a.kind for a in await actions(client, uri, at(0, 0, 0), only=["source"])] == ["source.fixAll.gradlint"]
    assert await actions(client, uri, at(0, 0, 0), only=[lsp.CodeActionKind.QuickFix]) == []


@lsp_test
async def test_noqa_action(client: LanguageClient, workspace: Path):
    uri = open_doc(client, workspace / "noqa.py", BUGGY)
    diags = {d.code: d for d in await diagnostics(client, uri)}
    (noqa,) = [a for a in await actions(client, uri, diags["GL101"].range) if a.title == "Add `# noqa: GL101`"]
    text = apply(BUGGY, edits_of(noqa, uri))
    assert text.splitlines()[7] == "w -= 0.1 * w.grad  # noqa: GL101"
    mark = len(client.published)  # type: ignore[attr-defined]
    change_doc(client, uri, text, 2)
    assert "GL101" not in {d.code for d in await diagnostics(client, uri, version=2, after=mark)}
    # appended to an existing noqa comment
    text = text.replace("x = torch.tensor(w)", "x = torch.tensor(w)  # noqa: GL101 (kept on purpose)")
    change_doc(client, uri, text, 3)
    (d,) = [d for d in await diagnostics(client, uri, version=3, after=mark) if d.code == "GL204"]
    (noqa,) = [a for a in await actions(client, uri, d.range) if a.title == "Add `# noqa: GL204`"]
    text = apply(text, edits_of(noqa, uri, version=3))
    assert text.splitlines()[4] == "x = torch.tensor(w)  # noqa: GL101, GL204 (kept on purpose)"
    change_doc(client, uri, text, 4)
    assert "GL204" not in {d.code for d in await diagnostics(client, uri, version=4, after=mark)}


# ---------------------------------------------------------------------------- hover
@lsp_test
async def test_hover_shows_the_rule_docs(client: LanguageClient, workspace: Path):
    uri = open_doc(client, workspace / "hover.py", BUGGY)
    diags = {d.code: d for d in await diagnostics(client, uri)}
    pos = lsp.Position(line=7, character=3)
    hover = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=pos))
    assert hover is not None and isinstance(hover.contents, lsp.MarkupContent)
    assert hover.contents.kind == lsp.MarkupKind.Markdown
    value = hover.contents.value
    assert "GL101" in value and "inplace-on-leaf" in value
    for section in ("What it does", "Why is this bad", "Example", "Use instead"):
        assert section in value
    assert "```python" in value
    assert hover.range == diags["GL101"].range
    nothing = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(line=0, character=0)))
    assert nothing is None


# ---------------------------------------------------------------------------- configuration
@lsp_test
async def test_project_configuration_is_honoured(client: LanguageClient, tmp_path: Path):
    project = tmp_path / "my proj"  # a space: quoted in the uri
    (project / "vendor").mkdir(parents=True)
    (project / "pyproject.toml").write_text(textwrap.dedent("""\
        [tool.gradlint]
        ignore = ["GL204"]
        extend-exclude = ["vendor"]
        severity = { GL501 = "warning" }

        [tool.gradlint.per-file-ignores]
        "tests/*" = ["GL101"]
        """))
    uri = open_doc(client, project / "train.py", BUGGY)
    diags = {d.code: d for d in await diagnostics(client, uri)}
    assert set(diags) == {"GL101", "GL501", "GL305"}
    assert diags["GL501"].severity == lsp.DiagnosticSeverity.Warning
    (project / "tests").mkdir()
    uri = open_doc(client, project / "tests" / "test_x.py", BUGGY)
    assert {d.code for d in await diagnostics(client, uri)} == {"GL501", "GL305"}
    uri = open_doc(client, project / "vendor" / "lib.py", BUGGY)  # excluded: nothing
    assert await diagnostics(client, uri) == []


@lsp_test
async def test_broken_configuration_is_reported_once(client: LanguageClient, tmp_path: Path):
    project = tmp_path / "broken"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.gradlint]\nselect = [\"GL999\"]\n")
    before = len(client.messages)
    first = open_doc(client, project / "a.py", BUGGY)
    assert {d.code for d in await diagnostics(client, first)} == set(EXPECTED)  # the defaults
    second = open_doc(client, project / "b.py", BUGGY)
    assert len(await diagnostics(client, second)) == 4
    messages = [m for m in client.messages[before:] if "GL999" in m.message]
    assert len(messages) == 1 and messages[0].type == lsp.MessageType.Error


# ---------------------------------------------------------------------------- robustness
@lsp_test
async def test_alive_after_a_bad_request(client: LanguageClient, workspace: Path):
    uri = open_doc(client, workspace / "alive.py", BUGGY)
    await diagnostics(client, uri)
    # a request on a document the server does not have, and one out of range
    missing = (workspace / "missing.py").as_uri()
    assert await actions(client, missing, at(0, 0, 1)) == []
    assert await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=missing), position=lsp.Position(line=0, character=0))) is None
    assert await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(line=999, character=5))) is None
    # malformed messages written straight to the pipe: invalid params, then invalid JSON
    server = client._server  # type: ignore[attr-defined]
    for body in (b'{"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {"textDocument": 3}}',
                 b'{"jsonrpc": "2.0", "id": "bad-1", "method": "textDocument/hover", "params": {"position": "x"}}',
                 b'{"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"bogus": [}'):
        server.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    await server.stdin.drain()
    await asyncio.sleep(0.3)
    assert server.returncode is None
    mark = len(client.published)  # type: ignore[attr-defined]
    change_doc(client, uri, CLEAN, 2)
    assert await diagnostics(client, uri, version=2, after=mark) == []
    assert await actions(client, uri, at(0, 0, 1)) == []


# ---------------------------------------------------------------------------- in process
def test_internal_error_is_a_gl001_finding(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    from gradlint import server

    def boom(*args: Any) -> Any:
        raise ValueError("boom")

    monkeypatch.setattr(server, "lint_text", boom)
    findings, _, _, _ = server.lint_document(BUGGY, str(tmp_path / "x.py"), "x.py", server.ConfigCache())
    (f,) = findings
    assert f.code == "GL001" and "ValueError: boom" in f.message


def test_the_server_never_imports_torch(tmp_path: Path):
    code = ("import sys\nfrom gradlint.server import ConfigCache, create_server, lint_document\ncreate_server()\n"
            f"f = lint_document({BUGGY!r}, None, 'x.py', ConfigCache())[0]\n"
            "assert len(f) == 4, f\nassert 'torch' not in sys.modules, 'torch imported'\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr


def test_server_command_without_pygls(monkeypatch: pytest.MonkeyPatch):
    from click.testing import CliRunner

    from gradlint.cli import main

    monkeypatch.setitem(sys.modules, "pygls", None)
    result = CliRunner().invoke(main, ["server"])
    assert result.exit_code == 2
    assert result.output.strip() == ("gradlint: error: the language server needs pygls: "
                                     "pip install 'torch-gradlint[lsp]'")


def test_plain_edits_for_a_client_without_document_changes():
    from gradlint.server import create_server

    edit = create_server().edit("file:///x.py", 3, [])
    assert edit.changes == {"file:///x.py": []} and edit.document_changes is None


def test_noqa_placement():
    from gradlint.rule import Finding, Severity
    from gradlint.server import _BREAK, noqa_edit

    def where(text: str, line: int, statement: int = 0) -> Any:
        f = Finding("x.py", line, 1, line, 2, "GL101", "n", Severity.ERROR, "m", statement_line=statement)
        return noqa_edit(text, _BREAK.split(text), f)

    assert where("x = 1   \n", 1) == (1, 5, "  # noqa: GL101")
    assert where("x = 1  # noqa:GL204\n", 1) == (1, 19, ", GL101")
    assert where("x = 1  # a comment\n", 1) == (1, 18, "  # noqa: GL101")
    # inside a multi-line string: the statement's first line takes it
    assert where('x = f(1,\n  """a\nb""")\n', 2, 1) == (1, 8, "  # noqa: GL101")
    assert where('f(1, """\nabc\n""")\n', 2, 1) is None  # no line of the statement can take one
    # after a backslash continuation: likewise
    assert where("y = 1 + \\\n    2\n", 1, 1) is None
    assert where("y = (1 +\n    2)\n", 2, 1) == (2, 6, "  # noqa: GL101")


def test_positions_in_each_encoding():
    from gradlint.server import minimal_edit, to_client

    line = ["é\U0001F600x = 1"]
    enc = lsp.PositionEncodingKind
    assert [to_client(line, 1, 2, e).character for e in (enc.Utf16, enc.Utf8, enc.Utf32)] == [3, 6, 2]
    assert to_client(line, 9, 99, enc.Utf16) == lsp.Position(line=0, character=8)  # clamped
    # one edit for "fix all", never splitting a CRLF
    assert minimal_edit("a\r\nb\r\n", "a\r\nb\r\nc\r\n") == (6, 6, "c\r\n")
    assert minimal_edit("x = 1\r\n", "x = 1\r\ny\r\n") == (7, 7, "y\r\n")
    old, new = "a\r\nz", "a\r\ny\r\nz"
    start, end, text = minimal_edit(old, new)
    assert old[:start] + text + old[end:] == new and old[start - 1:start + 1] != "\r\n"


LEAF_FACTORY = "import torch\n\n\ndef make_weights():\n    return torch.zeros(3, requires_grad=True)\n"
NOT_A_LEAF = "import torch\n\n\ndef make_weights():\n    return torch.zeros(3)\n"
USES_FACTORY = ("import torch\nfrom helpers import make_weights\n\n\ndef train():\n    w = make_weights()\n"
                "    w.add_(1)\n    return w\n")


@lsp_test
async def test_an_edit_to_an_imported_module_relints_its_importers(client: LanguageClient, tmp_path: Path):
    """The workspace is the project: train.py's finding comes from what helpers.py defines, and
    an unsaved edit to helpers.py re-lints the open train.py (with the edited text)."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text("")
    (proj / "helpers.py").write_text(LEAF_FACTORY)
    (proj / "train.py").write_text(USES_FACTORY)
    mark = len(client.published)  # type: ignore[attr-defined]
    train = open_doc(client, proj / "train.py", USES_FACTORY)
    (d,) = await diagnostics(client, train, version=1, after=mark)
    assert d.code == "GL101" and d.range.start.line == 6
    helpers = open_doc(client, proj / "helpers.py", LEAF_FACTORY)
    assert await diagnostics(client, helpers, version=1, after=mark) == []
    mark = len(client.published)  # type: ignore[attr-defined]
    change_doc(client, helpers, NOT_A_LEAF, 2)  # not saved: the file on disk still makes a leaf

    def published_for_train(codes: List[str]) -> Any:
        return [p for p in client.published[mark:]  # type: ignore[attr-defined]
                if p.uri == train and [d.code for d in p.diagnostics] == codes]

    await until(lambda: published_for_train([]))  # (opening helpers.py may re-publish train.py first)
    mark = len(client.published)  # type: ignore[attr-defined]
    change_doc(client, helpers, LEAF_FACTORY, 3)
    await until(lambda: published_for_train(["GL101"]))


def _frame(obj: Any) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _raw_session(messages: List[Any], pause: float = 1.5) -> Tuple[int, str, str]:
    """A client speaking JSON-RPC over the server's stdin/stdout by hand (for what pytest-lsp's
    client never does: exit without shutdown)."""
    proc = subprocess.Popen([sys.executable, "-m", "gradlint", "server"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"processId": None, "rootUri": None, "capabilities": {}}}
    proc.stdin.write(_frame(init) + _frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    for m in messages:
        proc.stdin.write(_frame(m))
    proc.stdin.flush()
    time.sleep(pause)
    proc.stdin.write(_frame({"jsonrpc": "2.0", "method": "exit"}))
    proc.stdin.flush()
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def test_exit_without_shutdown_is_status_1_and_with_it_0():
    code, _, _ = _raw_session([])
    assert code == 1
    code, _, _ = _raw_session([{"jsonrpc": "2.0", "id": 2, "method": "shutdown"}])
    assert code == 0


def test_a_change_to_a_document_never_opened_is_ignored():
    change = {"jsonrpc": "2.0", "method": "textDocument/didChange",
              "params": {"textDocument": {"uri": "file:///nowhere/never_opened.py", "version": 2},
                         "contentChanges": [{"text": "import torch\n"}]}}
    code, out, err = _raw_session([change, {"jsonrpc": "2.0", "id": 2, "method": "shutdown"}])
    assert code == 0
    assert "showMessage" not in out and "KeyError" not in out + err and "publishDiagnostics" not in out
