"""The language server: ``gradlint server`` speaks LSP over stdio (pygls, the ``lsp`` extra).

What it offers an editor, for the Python documents it has open:

* diagnostics, published on open and save at once and on change after ``DEBOUNCE`` seconds of
  quiet; only the latest version of a document is published, and closing it clears them. The
  unsaved text is linted (never the file on disk), in the static mode only: torch is never
  imported. Severity, ``code`` (GLxxx), ``codeDescription`` (the rule's documentation),
  ``source`` "gradlint" and the finding's related places as ``relatedInformation``;
* code actions: each finding's safe fix (preferred), its unsafe fix (said in the title),
  "Add `# noqa: GLxxx`" on its line, and the source action ``source.fixAll.gradlint``, which
  applies what ``gradlint check --fix`` would (``gradlint.fix.fix_text``);
* hover on a diagnostic: the rule's documentation as Markdown.

The project's configuration is the one ``gradlint check`` would use for the document's path (the
nearest ``gradlint.toml`` or ``pyproject.toml`` with ``[tool.gradlint]``): selection,
``per-file-ignores``, ``severity``, and ``exclude`` (an excluded file gets no diagnostics). A
configuration that cannot be read is reported once per version of the file through
``window/showMessage``, and the defaults are used meanwhile. An internal error on a document is
a GL001 diagnostic: the server itself never stops on one. Not linted (no diagnostics): stubs
(``.pyi``), documents in another language, and notebook cells (a notebook is linted as a whole,
with its IPython lines masked, by ``gradlint check``).

Lints run one at a time on a worker thread, so that the event loop keeps answering. Positions go
to the client in the position encoding negotiated at initialisation (UTF-16 unless the client
offers another); gradlint's own columns count code points.
"""

from __future__ import annotations

import asyncio
import gc
import io
import logging
import os
import re
import sys
import tokenize
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import unquote

from lsprotocol import types as lsp

try:  # pygls 2
    from pygls.lsp.server import LanguageServer
except ImportError:  # pragma: no cover - pygls 1.x
    from pygls.server import LanguageServer  # type: ignore[no-redef]
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.uris import to_fs_path

from gradlint import __version__
from gradlint.config import ConfigError, Settings, find_config, load_settings
from gradlint.engine import LINT_GC_THRESHOLD, Options, _finding, lint_text
from gradlint.edits import position_of
from gradlint.rule import Finding, InternalErrorRule, Severity, registry
from gradlint.suppress import NOQA_RE, is_skipped

log = logging.getLogger("gradlint.server")

DEBOUNCE = 0.3  # seconds of quiet after a change before the document is linted
FIX_ALL = "source.fixAll.gradlint"
NO_NOQA = ("GL000", "GL001")  # reported before `# noqa` is read: a noqa would not silence them
HOVER_SECTIONS = ("What it does", "Why is this bad", "Example", "Use instead")
_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass
class Linted:
    """The findings of one text of a document (what code actions and hover work from)."""

    text: str
    findings: List[Finding]
    lines: List[str]
    display: str = ""
    options: Optional[Options] = None  # None: the document is not linted (excluded, skipped)
    fix_all: Optional[str] = None  # what `check --fix` makes of the text, once asked for


# ------------------------------------------------------------------------ linting one document
class ConfigCache:
    """Settings per configuration file, read again when the file changes."""

    def __init__(self) -> None:
        self._by_path: Dict[str, Tuple[Tuple[int, int], Settings, str]] = {}

    def settings(self, start: Path) -> Tuple[Settings, str, Any]:
        """(settings, the error that made them the defaults or "", a key naming this version of
        the configuration file)."""
        config = find_config(start)
        if config is None:
            return Settings(root=start.resolve()), "", None
        try:
            st = config.stat()
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = (0, 0)
        hit = self._by_path.get(str(config))
        if hit is None or hit[0] != stamp:
            try:
                settings, error = load_settings(config), ""
                settings.selected_codes()  # every code is valid
            except ConfigError as exc:
                settings, error = Settings(root=config.parent.resolve()), str(exc)
            hit = self._by_path[str(config)] = (stamp, settings, error)
        return hit[1], hit[2], (str(config), stamp)


def lint_document(text: str, path: Optional[str], display: str, configs: ConfigCache,
                  root: Optional[str] = None, project: Any = None) -> Tuple[List[Finding], Optional[Options], str, Any]:
    """(findings, the options used or None when the file is excluded or skipped, a configuration
    error or "", the configuration's key). Never raises: a crash is a GL001 finding.
    ``project``: the project index as the document sees it (gradlint.index), so that its imports
    of the workspace's modules are followed; only the document's own findings are kept (the
    diagnostics of a document are its own)."""
    codes = frozenset({InternalErrorRule.code})
    error, key = "", None
    try:
        start = Path(path).parent if path else Path(root or os.getcwd())
        settings, error, key = configs.settings(start)
        selected = settings.selected_codes()
        if path is not None:
            from gradlint.discovery import _in_excluded_dir

            # as `gradlint check`: excluded files, and stubs (no executable code), are not linted
            if settings.is_excluded(path) or _in_excluded_dir(path, settings) or path.endswith(".pyi"):
                return [], None, error, key
            codes = settings.codes_for(path, selected)
        else:
            codes = selected
        if is_skipped(text.encode("utf-8", "surrogatepass")):
            return [], None, error, key
        severity = tuple(sorted((c, s.value) for c, s in settings.severity.items()))
        options = Options(codes=codes, severity=severity)
        findings = [f for f in lint_text(display, text, options, project) if f.path == display]
        return findings, options, error, key
    except Exception as exc:  # the server never stops on a document
        log.exception("internal error on %s", display)
        if InternalErrorRule.code not in codes:
            return [], None, error, key
        detail = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        message = InternalErrorRule.message.format(where="the language server", detail=detail)
        return [_finding(InternalErrorRule, display, 1, 1, message)], None, error, key


# ------------------------------------------------------------------------ positions
def _width(ch: str, encoding: str) -> int:
    if encoding == lsp.PositionEncodingKind.Utf32:
        return 1
    if encoding == lsp.PositionEncodingKind.Utf8:
        return len(ch.encode("utf-8", "surrogatepass"))
    return 2 if ord(ch) > 0xFFFF else 1


def to_client(lines: List[str], line: int, column: int, encoding: str) -> lsp.Position:
    """1-based ``line``, 0-based ``column`` in code points -> an LSP position."""
    if not lines:
        return lsp.Position(line=0, character=0)
    line = min(max(line, 1), len(lines))
    text = lines[line - 1]
    column = min(max(column, 0), len(text))
    return lsp.Position(line=line - 1, character=sum(_width(c, encoding) for c in text[:column]))


def offset_to_client(text: str, lines: List[str], offset: int, encoding: str) -> lsp.Position:
    line, column = position_of(text, offset)
    return to_client(lines, line, column, encoding)


def _range(lines: List[str], f: Finding, encoding: str) -> lsp.Range:
    start = (f.line, f.column - 1)
    end = (f.end_line, f.end_column - 1)
    if end <= start:
        end = (start[0], start[1] + 1)
    return lsp.Range(start=to_client(lines, *start, encoding), end=to_client(lines, *end, encoding))


def diagnostic(f: Finding, uri: str, lines: List[str], encoding: str) -> lsp.Diagnostic:
    related = [
        lsp.DiagnosticRelatedInformation(
            location=lsp.Location(uri=uri, range=lsp.Range(start=to_client(lines, ln, col - 1, encoding),
                                                           end=to_client(lines, ln, col, encoding))),
            message=msg)
        for ln, col, msg in f.related
    ]
    return lsp.Diagnostic(
        range=_range(lines, f, encoding),
        message=f.message,
        severity=lsp.DiagnosticSeverity.Error if f.severity is Severity.ERROR else lsp.DiagnosticSeverity.Warning,
        code=f.code,
        code_description=lsp.CodeDescription(href=f.url) if f.url else None,
        source="gradlint",
        related_information=related or None,
    )


def _pos(p: lsp.Position) -> Tuple[int, int]:
    return (p.line, p.character)


# ------------------------------------------------------------------------ code actions
def text_edits(text: str, lines: List[str], edits: Any, encoding: str) -> List[lsp.TextEdit]:
    return [lsp.TextEdit(range=lsp.Range(start=offset_to_client(text, lines, e.start, encoding),
                                         end=offset_to_client(text, lines, e.end, encoding)),
                         new_text=e.text) for e in edits]


def minimal_edit(old: str, new: str) -> Tuple[int, int, str]:
    """One edit ``(start, end, text)`` that turns ``old`` into ``new`` (common ends kept, never
    splitting a ``\\r\\n``)."""
    n = min(len(old), len(new))
    p = 0
    while p < n and old[p] == new[p]:
        p += 1
    s = 0
    while s < n - p and old[-1 - s] == new[-1 - s]:
        s += 1
    if 0 < p < len(old) and old[p - 1] == "\r" and old[p] == "\n":
        p -= 1
    end = len(old) - s
    if 0 < end < len(old) and old[end - 1] == "\r" and old[end] == "\n":
        end += 1
        s -= 1
    return p, end, new[p:len(new) - s]


def noqa_edit(text: str, lines: List[str], f: Finding) -> Optional[Tuple[int, int, str]]:
    """Where ``# noqa: CODE`` goes for finding ``f``: ``(line, column, text to insert)``, on the
    finding's line or the first line of its statement (where ``gradlint.suppress`` looks): added
    to a ``# noqa: ...`` already there, else a new comment at the end of a line that can take
    one (not inside a multi-line string, not after a backslash continuation). None if neither can."""
    candidates = [n for n in dict.fromkeys([f.line, f.statement_line]) if 0 < n <= len(lines)]
    blocked, comments = set(), {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                comments[tok.start[0]] = tok
            elif tok.start[0] != tok.end[0] and tok.type != tokenize.NL:
                blocked.update(range(tok.start[0], tok.end[0]))  # a multi-line string's lines
    except (tokenize.TokenError, SyntaxError):
        pass
    for n in candidates:  # an existing noqa with codes first
        tok = comments.get(n)
        m = NOQA_RE.search(tok.string) if tok is not None else None
        if m is not None and m.group("codes"):
            return n, tok.start[1] + m.end("codes"), f", {f.code}"
    for n in candidates:
        line = lines[n - 1]
        if n in blocked or (n not in comments and line.rstrip().endswith("\\")):
            continue
        return n, len(line.rstrip(" \t")), f"  # noqa: {f.code}"
    return None


def _kind_wanted(kind: str, only: Optional[List[str]]) -> bool:
    return not only or any(kind == k or kind.startswith(k + ".") for k in only)


def hover_text(f: Finding) -> str:
    cls = registry().get(f.code)
    head = f"**{f.code} `{f.name}`** ({f.severity.value}): {f.message}"
    if cls is None:
        return head
    sections: Dict[str, List[str]] = {}
    current: Optional[List[str]] = None
    for line in cls.docs().splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif current is not None:
            current.append(line)
    parts = [head]
    for name in HOVER_SECTIONS:
        body = "\n".join(sections.get(name, [])).strip()
        if body:
            parts.append(f"**{name}**\n\n{body}")
    if f.url:
        parts.append(f"[{f.code} {f.name}: full documentation]({f.url})")
    else:
        parts.append(f"Full documentation: `gradlint rule {f.code}`")
    return "\n\n".join(parts)


# ------------------------------------------------------------------------ the server
class _Protocol(LanguageServerProtocol):  # type: ignore[misc, valid-type]
    """pygls's protocol, except that a change to a document that was never opened is ignored
    (pygls raises KeyError and shows the user an error)."""

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CHANGE)  # type: ignore[misc]
    def lsp_text_document__did_change(self, params: lsp.DidChangeTextDocumentParams) -> Any:
        uri = params.text_document.uri
        docs = getattr(self.workspace, "text_documents", None)
        if docs is None:  # pragma: no cover - pygls 1.x
            docs = self.workspace.documents
        if uri not in docs and unquote(uri) not in docs:
            log.info("didChange for a document that is not open: %s (ignored)", uri)
            return
        yield from super().lsp_text_document__did_change(params)


class GradlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("gradlint", __version__, protocol_cls=_Protocol)
        self.configs = ConfigCache()
        self.linted: Dict[str, Linted] = {}
        self.pending: Dict[str, asyncio.Task] = {}
        self.inflight: Dict[str, Tuple[str, Any]] = {}  # uri -> (text, the lint under way)
        self.reported: set = set()
        self.open_uris: set = set()
        self.deps: Dict[str, set] = {}  # uri -> paths of the project's modules its findings used
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gradlint-lint")

    # -- documents
    def document(self, uri: str) -> Any:
        docs = getattr(self.workspace, "text_documents", None)
        if docs is None:  # pragma: no cover - pygls 1.x
            docs = self.workspace.documents
        return docs.get(uri) or docs.get(unquote(uri))  # pygls 2 keeps them by the unquoted uri

    def encoding(self) -> str:
        enc = getattr(self.workspace, "position_encoding", None)
        return enc if enc else lsp.PositionEncodingKind.Utf16

    def _lint_sync(self, uri: str, text: str, language: str) -> Tuple[Linted, str, Any]:
        path = to_fs_path(uri) if uri.startswith("file:") else None
        lines = _BREAK.split(text)
        if (language not in ("python", "") and not (path or "").endswith(".py")) or \
                uri.split(":", 1)[0] not in ("file", "untitled"):
            # not Python; or a notebook's cell (whose names come from the cells before it, and
            # whose IPython lines only `gradlint check` masks)
            return Linted(text, [], lines, path or uri), "", None
        root = getattr(self.workspace, "root_path", None)
        project = self._project(path)
        findings, options, error, key = lint_document(text, path, path or uri, self.configs, root, project)
        if project is not None:
            self.deps[uri] = set(project.used)
        return Linted(text, findings, lines, path or uri, options), error, key

    def _project(self, path: Optional[str]) -> Any:
        """The workspace's project index as the document at ``path`` sees it, with the open
        documents' unsaved texts in place of their files."""
        if path is None:
            return None
        from gradlint.index import view_for

        view = view_for(path)
        overlay = {}
        for doc_uri in list(self.open_uris):
            doc = self.document(doc_uri)
            if doc is not None and doc_uri.startswith("file:"):
                overlay[os.path.abspath(to_fs_path(doc_uri))] = doc.source
        view.index.overlay = overlay
        view.index.refresh()  # files may have appeared or gone since the last lint
        return view

    def importers_of(self, uri: str) -> List[str]:
        """The open documents whose findings used the module at ``uri`` (an edit to
        ``models.py`` re-lints the open ``train.py`` that imports it)."""
        if not uri.startswith("file:"):
            return []
        path = os.path.abspath(to_fs_path(uri))
        return [other for other, used in self.deps.items() if other != uri and path in used]

    def changed(self, uri: str, delay: float) -> None:
        """``uri`` changed: lint it, and again the open documents that import it."""
        self.schedule(uri, delay)
        for other in self.importers_of(uri):
            self.linted.pop(other, None)
            self.schedule(other, delay)

    async def linted_now(self, uri: str, doc: Any) -> Linted:
        """The findings of the document's current text, linting it unless that was done (or is
        under way: a request and the publishing share one lint)."""
        text = doc.source
        cached = self.linted.get(uri)
        if cached is not None and cached.text == text:
            return cached
        flight = self.inflight.get(uri)
        if flight is None or flight[0] != text:
            job = asyncio.get_running_loop().run_in_executor(
                self.pool, self._lint_sync, uri, text, getattr(doc, "language_id", "") or "")
            flight = self.inflight[uri] = (text, job)
        linted, error, key = await asyncio.shield(flight[1])
        if self.inflight.get(uri) is flight:
            del self.inflight[uri]
        if error and key not in self.reported:
            self.reported.add(key)
            self.show(f"gradlint: {error} (using the default settings)", lsp.MessageType.Error)
        doc = self.document(uri)
        if doc is not None and doc.source == text:
            self.linted[uri] = linted
        return linted

    def show(self, message: str, kind: lsp.MessageType) -> None:
        params = lsp.ShowMessageParams(type=kind, message=message)
        if hasattr(self, "window_show_message"):
            self.window_show_message(params)
        else:  # pragma: no cover - pygls 1.x
            self.show_message(message, kind)

    def publish(self, uri: str, diagnostics: List[lsp.Diagnostic], version: Optional[int]) -> None:
        if hasattr(self, "text_document_publish_diagnostics"):
            self.text_document_publish_diagnostics(
                lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version))
        else:  # pragma: no cover - pygls 1.x
            self.publish_diagnostics(uri, diagnostics, version)

    # -- scheduling
    def schedule(self, uri: str, delay: float) -> None:
        if uri in self.pending:
            self.pending.pop(uri).cancel()
        self.pending[uri] = asyncio.get_running_loop().create_task(self._lint_and_publish(uri, delay))

    async def _lint_and_publish(self, uri: str, delay: float) -> None:
        try:
            if delay:
                await asyncio.sleep(delay)
            doc = self.document(uri)
            if doc is None:
                return
            version, text = doc.version, doc.source
            linted = await self.linted_now(uri, doc)
            doc = self.document(uri)
            if doc is None or doc.version != version or doc.source != text:
                return  # a newer version is on its way
            enc = self.encoding()
            self.publish(uri, [diagnostic(f, uri, linted.lines, enc) for f in linted.findings], version)
        except asyncio.CancelledError:
            raise
        except Exception:  # pragma: no cover - never stop the server
            log.exception("publishing diagnostics for %s", uri)
        finally:
            if self.pending.get(uri) is asyncio.current_task():
                del self.pending[uri]

    def close(self, uri: str) -> None:
        if uri in self.pending:
            self.pending.pop(uri).cancel()
        self.linted.pop(uri, None)
        self.inflight.pop(uri, None)
        self.open_uris.discard(uri)
        self.deps.pop(uri, None)
        self.publish(uri, [], None)

    # -- requests
    async def code_actions(self, params: lsp.CodeActionParams) -> List[lsp.CodeAction]:
        uri = params.text_document.uri
        doc = self.document(uri)
        if doc is None:
            return []
        linted = await self.linted_now(uri, doc)
        if doc.source != linted.text:
            return []  # changed meanwhile: the client asks again
        enc, only, version = self.encoding(), params.context.only, doc.version
        text, lines = linted.text, linted.lines
        actions: List[lsp.CodeAction] = []
        quick = _kind_wanted(lsp.CodeActionKind.QuickFix, only)
        for f in linted.findings if quick else ():
            diag = diagnostic(f, uri, lines, enc)
            if _pos(diag.range.start) > _pos(params.range.end) or _pos(params.range.start) > _pos(diag.range.end):
                continue  # not where the client asks
            fix = f.fix
            if fix is not None and fix.edits and all(0 <= e.start <= e.end <= len(text) for e in fix.edits):
                what = fix.description or f.hint
                actions.append(lsp.CodeAction(
                    title=f"Fix {f.code}: {what}" + ("" if fix.safe else " (unsafe)"),
                    kind=lsp.CodeActionKind.QuickFix, diagnostics=[diag], is_preferred=fix.safe or None,
                    edit=self.edit(uri, version, text_edits(text, lines, fix.edits, enc))))
            where = noqa_edit(text, lines, f) if f.code not in NO_NOQA else None
            if where is not None:
                pos = to_client(lines, where[0], where[1], enc)
                actions.append(lsp.CodeAction(
                    title=f"Add `# noqa: {f.code}`", kind=lsp.CodeActionKind.QuickFix, diagnostics=[diag],
                    edit=self.edit(uri, version, [lsp.TextEdit(range=lsp.Range(start=pos, end=pos),
                                                               new_text=where[2])])))
        if _kind_wanted(FIX_ALL, only) and any(f.fix is not None and f.fix.safe for f in linted.findings):
            fixed = await asyncio.get_running_loop().run_in_executor(self.pool, _fix_all, linted)
            if fixed is not None and fixed != text:
                start, end, new = minimal_edit(text, fixed)
                rng = lsp.Range(start=offset_to_client(text, lines, start, enc),
                                end=offset_to_client(text, lines, end, enc))
                actions.append(lsp.CodeAction(
                    title="Fix all safe gradlint findings", kind=FIX_ALL,
                    edit=self.edit(uri, version, [lsp.TextEdit(range=rng, new_text=new)])))
        return actions

    def edit(self, uri: str, version: Optional[int], edits: List[lsp.TextEdit]) -> lsp.WorkspaceEdit:
        """Edits of one document; tied to its version where the client can check it (it then
        refuses them once the text has changed)."""
        try:
            caps = self.client_capabilities.workspace.workspace_edit  # type: ignore[union-attr]
        except AttributeError:  # not initialised, or the client says nothing of it
            caps = None
        if version is None or not getattr(caps, "document_changes", False):
            return lsp.WorkspaceEdit(changes={uri: edits})
        return lsp.WorkspaceEdit(document_changes=[lsp.TextDocumentEdit(
            text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version), edits=edits)])

    async def hover(self, params: lsp.HoverParams) -> Optional[lsp.Hover]:
        uri = params.text_document.uri
        doc = self.document(uri)
        if doc is None:
            return None
        linted = await self.linted_now(uri, doc)
        enc, at = self.encoding(), _pos(params.position)
        parts, ranges = [], []
        for f in linted.findings:
            rng = _range(linted.lines, f, enc)
            if _pos(rng.start) <= at <= _pos(rng.end):
                parts.append(hover_text(f))
                ranges.append(rng)
        if not parts:
            return None
        return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value="\n\n---\n\n".join(parts)),
                         range=ranges[0] if len(ranges) == 1 else None)


def _fix_all(linted: Linted) -> Optional[str]:
    """The text ``gradlint check --fix`` would write (None when fixing fails)."""
    from gradlint.fix import fix_text

    if linted.options is None:
        return None
    if linted.fix_all is None:
        try:
            result = fix_text(linted.display, linted.text, linted.options)
        except Exception:
            log.exception("fixing %s", linted.display)
            return None
        linted.fix_all = linted.text if result.error else result.text
    return linted.fix_all


def create_server() -> GradlintServer:
    ls = GradlintServer()

    @ls.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: GradlintServer, params: lsp.DidOpenTextDocumentParams) -> None:
        ls.open_uris.add(params.text_document.uri)
        ls.changed(params.text_document.uri, 0)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: GradlintServer, params: lsp.DidChangeTextDocumentParams) -> None:
        ls.changed(params.text_document.uri, DEBOUNCE)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: GradlintServer, params: lsp.DidSaveTextDocumentParams) -> None:
        ls.linted.pop(params.text_document.uri, None)  # the configuration may have changed
        ls.changed(params.text_document.uri, 0)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: GradlintServer, params: lsp.DidCloseTextDocumentParams) -> None:
        ls.close(params.text_document.uri)

    @ls.feature(lsp.TEXT_DOCUMENT_CODE_ACTION,
                lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, FIX_ALL]))
    async def code_action(ls: GradlintServer, params: lsp.CodeActionParams) -> List[lsp.CodeAction]:
        return await ls.code_actions(params)

    @ls.feature(lsp.TEXT_DOCUMENT_HOVER)
    async def hover(ls: GradlintServer, params: lsp.HoverParams) -> Optional[lsp.Hover]:
        return await ls.hover(params)

    return ls


def main() -> None:
    """Serve on stdin/stdout. Anything printed by mistake goes to stderr, never into the
    protocol's stream."""
    logging.basicConfig(level=os.environ.get("GRADLINT_LOG_LEVEL", "WARNING").upper(), stream=sys.stderr,
                        format="gradlint server: %(levelname)s: %(message)s")
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    gc.set_threshold(*LINT_GC_THRESHOLD)  # the server's own process lints and keeps the project's trees
    server = create_server()
    server.start_io(stdin, stdout)
    # `exit` without `shutdown` before it ends the server with status 1 (the protocol says so)
    sys.exit(0 if getattr(server.protocol, "_shutdown", True) else 1)
