"""Fixes: node-relative edits for rules, and applying fixes to files (``check --fix``/``--diff``).

A rule offers a fix while the tree is walked, before any position is known, so it states its
edits relative to nodes::

    from gradlint.fix import insert_before, replace
    self.report(node, fix=Fix((replace(node.value, "x + 1"),), safe=False, description="..."))

The engine resolves them to character offsets into the decoded source once positions are
computed (``resolve_fix``, called from ``engine._positioned``); a ``Finding.fix`` only ever holds
plain offset ``Edit``s, which reporters (SARIF) and the fixer use.

In an edit's text ``\\n`` stands for a line break: it becomes the file's own line ending. With
``reindent=True`` every line of the text after the first is also prefixed with the indentation
of the line where the node starts, and each leading group of four spaces becomes one indentation
unit of the file (a tab in a tab-indented file): the text is written as if the node's line had
no indentation and the file indented by four spaces.

Applying (``fix_file``): lint, take the applicable fixes that do not overlap, apply them, check
that the result still parses with libcst, re-lint, and repeat (at most ``MAX_ROUNDS`` rounds).
A result that does not parse leaves the file unchanged. Writes are atomic (a temporary file in
the same directory, then ``os.replace``) and keep the encoding (coding cookie, BOM), the line
endings, the presence of a final newline (edits do not touch them) and the file's mode.
"""

from __future__ import annotations

import bisect
import difflib
import io
import os
import re
import stat
import tempfile
import tokenize
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Dict, List, Optional, Sequence, Tuple

from gradlint.rule import Edit, Finding, Fix

MAX_ROUNDS = 5

_BREAK = re.compile(r"\r\n|\r|\n")


# ------------------------------------------------------------------------ edits for rules
@dataclass(frozen=True)
class NodeEdit(Edit):
    """An edit stated relative to a libcst node; ``start``/``end`` are unset (-1) until
    ``resolve_fix`` turns it into a plain ``Edit``. ``where``: ``replace`` the node's code,
    insert ``before`` it or ``after`` it. With ``end_node`` the edit spans from the node's start
    (``replace``) or end (``after``) to the end of ``end_node``."""

    node: Any = field(default=None, compare=False, repr=False)
    where: str = "replace"
    reindent: bool = False
    end_node: Any = field(default=None, compare=False, repr=False)


def replace(node: Any, text: str, *, reindent: bool = False) -> NodeEdit:
    """Replace the code of ``node`` (without its surrounding whitespace and comments)."""
    return NodeEdit(-1, -1, text, node, "replace", reindent)


def insert_before(node: Any, text: str, *, reindent: bool = False) -> NodeEdit:
    return NodeEdit(-1, -1, text, node, "before", reindent)


def insert_after(node: Any, text: str, *, reindent: bool = False) -> NodeEdit:
    return NodeEdit(-1, -1, text, node, "after", reindent)


def replace_span(start: Any, end: Any, text: str, *, after_start: bool = False) -> NodeEdit:
    """Replace the code from the start of node ``start`` (its end, with ``after_start``) to the
    end of node ``end``: ``replace_span(call.func.value, call, "", after_start=True)`` deletes
    ``.cuda()`` from ``torch.randn(3).cuda()``."""
    return NodeEdit(-1, -1, text, start, "after" if after_start else "replace", False, end)


def count_comments(node: Any) -> int:
    """The comments inside ``node``: a fix that regenerates part of it must not drop one."""
    count, stack = 0, [node]
    while stack:
        n = stack.pop()
        if type(n).__name__ == "Comment":
            count += 1
        stack.extend(n.children)
    return count


# ------------------------------------------------------------------------ offsets
@lru_cache(maxsize=4)
def line_starts(text: str) -> Tuple[int, ...]:
    """Offset of the first character of each line (``\\r\\n``, ``\\r`` and ``\\n`` end a line,
    as for Python's tokenizer and libcst); index 0 is line 1."""
    return (0,) + tuple(m.end() for m in _BREAK.finditer(text))


def offset(text: str, line: int, column: int) -> int:
    """The character offset of 1-based ``line`` and 0-based ``column`` (libcst's convention:
    columns count code points, a tab is one)."""
    starts = line_starts(text)
    if not 1 <= line <= len(starts):
        raise ValueError(f"line {line} out of range (1..{len(starts)})")
    return starts[line - 1] + column


def position_of(text: str, off: int) -> Tuple[int, int]:
    """The inverse of ``offset``: (1-based line, 0-based column)."""
    starts = line_starts(text)
    i = bisect.bisect_right(starts, off) - 1
    return i + 1, off - starts[i]


def node_range(positions: Any, node: Any, text: str) -> Optional[Tuple[int, int]]:
    """``[start, end)`` character offsets of ``node`` from a resolved ``PositionProvider``
    mapping (libcst ``CodeRange``s), or None when the node has no position."""
    rng = positions.get(node)
    if rng is None:
        return None
    return offset(text, rng.start.line, rng.start.column), offset(text, rng.end.line, rng.end.column)


def _indent_of_line(text: str, off: int) -> str:
    line, _ = position_of(text, off)
    start = line_starts(text)[line - 1]
    m = re.match(r"[ \t\f]*", text[start:off])
    return m.group(0) if m else ""


def _reindent(body: str, indent: str, unit: str) -> str:
    lines = body.split("\n")
    out = [lines[0]]
    for line in lines[1:]:
        if not line:
            out.append(line)
            continue
        stripped = line.lstrip(" ")
        levels, extra = divmod(len(line) - len(stripped), 4)
        out.append(indent + unit * levels + " " * extra + stripped)
    return "\n".join(out)


def resolve_fix(fix: Fix, positions: Any, text: str, module: Any = None) -> Optional[Fix]:
    """``fix`` with every ``NodeEdit`` turned into an offset ``Edit`` into ``text``; None when a
    node has no position (the fix is then dropped, the finding stays)."""
    newline = getattr(module, "default_newline", None) or _detect_newline(text)
    unit = getattr(module, "default_indent", None) or "    "
    edits: List[Edit] = []
    for e in fix.edits:
        if isinstance(e, NodeEdit):
            try:
                rng = node_range(positions, e.node, text)
            except ValueError:
                rng = None
            if rng is None:
                return None
            start, end = rng
            if e.where == "before":
                end = start
            elif e.where == "after":
                start = end
            if e.end_node is not None:
                try:
                    last = node_range(positions, e.end_node, text)
                except ValueError:
                    last = None
                if last is None or last[1] < start:
                    return None
                end = last[1]
            body = e.text
            if e.reindent:
                body = _reindent(body.replace("\r\n", "\n"), _indent_of_line(text, rng[0]), unit)
            edits.append(Edit(start, end, _BREAK.sub(lambda _m: newline, body)))
        else:
            edits.append(Edit(e.start, e.end, e.text))
    return Fix(tuple(edits), safe=fix.safe, description=fix.description)


def _detect_newline(text: str) -> str:
    m = _BREAK.search(text)
    return m.group(0) if m else "\n"


# ------------------------------------------------------------------------ applying edits
def _conflict(a: Edit, b: Edit) -> bool:
    # overlapping ranges, or two edits at the same start (their order would be ambiguous)
    return (a.start < b.end and b.start < a.end) or a.start == b.start


def select_fixes(findings: Sequence[Finding], unsafe: bool = False) -> List[Tuple[Finding, Fix]]:
    """The applicable fixes (safe ones, and unsafe ones when ``unsafe``) that do not overlap,
    first come first served in the order of ``findings``."""
    taken: List[Edit] = []
    chosen: List[Tuple[Finding, Fix]] = []
    for f in findings:
        fix = f.fix
        if fix is None or not fix.edits or not (fix.safe or unsafe):
            continue
        edits = list(fix.edits)
        if any(e.start < 0 or e.end < e.start for e in edits):
            continue  # unresolved or malformed
        if any(_conflict(a, b) for i, a in enumerate(edits) for b in edits[i + 1:]):
            continue
        if any(_conflict(a, b) for a in edits for b in taken):
            continue
        taken.extend(edits)
        chosen.append((f, fix))
    return chosen


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """``text`` with non-overlapping ``edits`` applied."""
    out = text
    for e in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        if not 0 <= e.start <= e.end <= len(text):
            raise ValueError(f"edit [{e.start}, {e.end}) outside the source (length {len(text)})")
        out = out[: e.start] + e.text + out[e.end:]
    return out


def parses(text: str) -> Optional[str]:
    """None when libcst parses ``text``; else the parser's message (first line)."""
    import libcst as cst

    try:
        cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else "syntax error"
    except (RecursionError, MemoryError) as exc:  # pragma: no cover
        return type(exc).__name__
    return None


@dataclass
class TextFix:
    """The outcome of fixing one source text."""

    text: str  # the fixed text (the original when ``error`` is set)
    findings: List[Finding]  # what remains
    fixed: int = 0  # fixes applied
    error: str = ""  # why nothing was changed, when something went wrong
    note: str = ""  # a non-fatal remark (fixes did not converge)
    skipped_unsafe: int = 0  # unsafe fixes left out (no --unsafe-fixes)


def fix_text(display: str, text: str, options: Any, unsafe: bool = False,
             lint: Any = None) -> TextFix:
    """Apply fixes to ``text`` in rounds; ``lint(display, text, options)`` (default:
    ``engine.lint_text``) gives the findings of each round."""
    if lint is None:
        from gradlint.engine import lint_text as lint
    original = text
    findings = lint(display, text, options)
    fixed = 0
    for _ in range(MAX_ROUNDS):
        chosen = select_fixes(findings, unsafe)
        if not chosen:
            break
        try:
            new = apply_edits(text, [e for _, fix in chosen for e in fix.edits])
        except ValueError as exc:
            return TextFix(original, lint(display, original, options),
                           error=f"a fix is invalid ({exc}); the file is left unchanged")
        problem = parses(new)
        if problem is not None:
            codes = ", ".join(sorted({f.code for f, _ in chosen}))
            return TextFix(original, lint(display, original, options),
                           error=f"the fixed code does not parse (fixes for {codes}: {problem}); "
                                 f"the file is left unchanged")
        fixed += len(chosen)
        text = new
        findings = lint(display, text, options)
    note = ""
    if select_fixes(findings, unsafe):
        note = f"fixes did not converge after {MAX_ROUNDS} rounds; run --fix again"
    skipped = sum(1 for f in findings if f.fix is not None and not f.fix.safe and not unsafe)
    return TextFix(text, findings, fixed=fixed, note=note, skipped_unsafe=skipped)


# ------------------------------------------------------------------------ files
@dataclass
class Source:
    data: bytes
    text: str
    encoding: str
    bom: str = ""  # a U+FEFF stripped after decoding (besides the one utf-8-sig removes)


def read_source(data: bytes) -> Source:
    """Decode as the engine does (``engine.decode``), remembering how, to encode back."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    bom = ""
    if text.startswith("\ufeff"):
        text, bom = text[1:], "\ufeff"
    return Source(data, text, encoding, bom)


def encode_source(src: Source, text: str) -> bytes:
    """``text`` encoded as ``src`` was (``utf-8-sig`` writes the BOM back)."""
    return (src.bom + text).encode(src.encoding)


@dataclass
class FileFix:
    display: str
    findings: List[Finding]  # what remains to report for this file
    fixed: int = 0
    diff: str = ""
    error: str = ""
    note: str = ""
    skipped_unsafe: int = 0
    new_text: Optional[str] = None  # the fixed text, when it differs


def fix_notebook(display: str, data: bytes, options: Any, unsafe: bool = False) -> Tuple[FileFix, Optional[bytes]]:
    """Fix a notebook's code cells (as one script), then write the changed cells back into its
    JSON, with outputs, metadata, cell ids, key order and formatting kept."""
    from gradlint import notebook
    from gradlint.engine import in_cell, lint_data

    try:
        nb = notebook.load(data)
    except notebook.NotebookError:
        return FileFix(display, lint_data(display, data, options)), None
    if not nb.python:
        return FileFix(display, []), None
    try:
        result = fix_text(display, nb.script, options, unsafe)
        new_raw = nb.with_script(result.text) if not result.error and result.text != nb.script else None
        after = notebook.load(new_raw.encode("utf-8")) if new_raw is not None else nb
    except Exception as exc:  # a crash while fixing must not lose the notebook
        return (FileFix(display, lint_data(display, data, options),
                        error=f"internal error while fixing: {type(exc).__name__}: {exc}"), None)
    out = FileFix(display, [in_cell(after, f) for f in result.findings], fixed=result.fixed, error=result.error,
                  note=result.note, skipped_unsafe=result.skipped_unsafe)
    if new_raw is None:
        return out, None
    out.diff = unified_diff(display, nb.raw, new_raw)
    out.new_text = new_raw
    return out, new_raw.encode("utf-8")


def fix_source(display: str, data: bytes, options: Any, unsafe: bool = False) -> Tuple[FileFix, Optional[bytes]]:
    """Fix the bytes of one file in memory: (result, the new bytes or None when unchanged)."""
    if display.endswith(".ipynb"):
        return fix_notebook(display, data, options, unsafe)
    try:
        src = read_source(data)
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        from gradlint.engine import lint_data

        return FileFix(display, lint_data(display, data, options), error=f"cannot decode: {exc}"), None
    if encode_source(src, src.text) != data:
        from gradlint.engine import lint_data

        return (FileFix(display, lint_data(display, data, options),
                        error=f"the file does not round-trip through its encoding ({src.encoding}); "
                              f"not fixing it"), None)
    try:
        result = fix_text(display, src.text, options, unsafe)
    except Exception as exc:  # a crash while fixing must not lose the file
        from gradlint.engine import lint_data

        return (FileFix(display, lint_data(display, data, options),
                        error=f"internal error while fixing: {type(exc).__name__}: {exc}"), None)
    out = FileFix(display, result.findings, fixed=result.fixed, error=result.error, note=result.note,
                  skipped_unsafe=result.skipped_unsafe)
    if result.error or result.text == src.text:
        return out, None
    try:
        new = encode_source(src, result.text)
    except UnicodeEncodeError as exc:
        from gradlint.engine import lint_data

        return (FileFix(display, lint_data(display, data, options),
                        error=f"the fixed code cannot be encoded as {src.encoding} ({exc.reason}); "
                              f"the file is left unchanged"), None)
    out.diff = unified_diff(display, src.text, result.text)
    out.new_text = result.text
    return out, new


def fix_file(path: str, display: str, options: Any, *, unsafe: bool = False, write: bool = True,
             findings: Optional[List[Finding]] = None) -> FileFix:
    """Fix one file on disk (or only compute the diff when ``write`` is False). On any problem
    the file is left unchanged, ``error`` says why and ``findings`` are the file's findings as
    they were (``findings`` when given, else a fresh lint)."""
    target = os.path.realpath(path)  # write through a symbolic link, not over it
    try:
        with open(target, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        return FileFix(display, list(findings or []), error=f"cannot read: {exc.strerror or exc}")
    result, new = fix_source(display, data, options, unsafe)
    if result.error and findings is not None:
        result.findings = list(findings)
    if new is None or not write:
        return result
    problem = write_atomic(target, new)
    if problem:
        kept = list(findings) if findings is not None else _relint(display, data, options)
        return FileFix(display, kept, error=problem, skipped_unsafe=result.skipped_unsafe)
    return result


def _relint(display: str, data: bytes, options: Any) -> List[Finding]:
    from gradlint.engine import lint_data

    return lint_data(display, data, options)


def write_atomic(path: str, data: bytes) -> str:
    """Replace ``path``'s content with ``data``: a temporary file in the same directory, fsynced,
    with the original mode, owner and group, then ``os.replace``. A file with several hard links
    is written in place instead (after the complete content was written and synced to the
    temporary file), so that every link sees the fix. Returns "" or a one-line reason it did not
    write. A file without any write permission bit is not written, even by a user (root) who
    could."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"cannot write fixes: {exc.strerror or exc}"
    mode = stat.S_IMODE(st.st_mode)
    if not os.access(path, os.W_OK) or not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        return "cannot write fixes: the file is read-only"
    directory = os.path.dirname(path) or "."
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".gradlint-tmp",
                                   dir=directory)
    except OSError as exc:
        return f"cannot write fixes: cannot create a file in {directory}: {exc.strerror or exc}"
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if st.st_nlink > 1:
            _write_in_place(path, data)
            os.unlink(tmp)
            return ""
        os.chmod(tmp, mode)
        _keep_owner(tmp, st)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return f"cannot write fixes: {exc.strerror or exc}"
    return ""


def _keep_owner(tmp: str, st: os.stat_result) -> None:
    """The new file gets the original's owner and group (a file fixed by root in a container
    stays the user's). Where the process may not give the file away, the group alone is kept
    when possible, and a file owned by the user running gradlint is unaffected."""
    if not hasattr(os, "chown"):
        return
    try:
        os.chown(tmp, st.st_uid, st.st_gid)
    except PermissionError:
        try:
            os.chown(tmp, -1, st.st_gid)
        except OSError:
            pass


def _write_in_place(path: str, data: bytes) -> None:
    """Overwrite the file's content through its existing inode (every hard link sees it)."""
    with open(path, "r+b") as fh:
        fh.write(data)
        fh.truncate()
        fh.flush()
        os.fsync(fh.fileno())


# ------------------------------------------------------------------------ diffs
def unified_diff(display: str, old: str, new: str) -> str:
    """A unified diff of ``old`` -> ``new`` (``--- display`` / ``+++ display``), keeping each
    line's own ending, with the ``\\ No newline at end of file`` marker."""
    a = split_lines(old)
    b = split_lines(new)
    out: List[str] = []
    for line in difflib.unified_diff(a, b, fromfile=display, tofile=display):
        out.append(line)
        if not line.endswith(("\n", "\r")):
            out.append("\n\\ No newline at end of file\n")
    return "".join(out)


def split_lines(text: str) -> List[str]:
    """Lines with their endings; only ``\r\n``, ``\r`` and ``\n`` end a line (not the other
    characters ``str.splitlines`` breaks at)."""
    return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text)


def fixes_by_path(findings: Sequence[Finding], unsafe: bool) -> Dict[str, List[Finding]]:
    """path -> its findings, for the paths with at least one applicable fix."""
    by: Dict[str, List[Finding]] = {}
    for f in findings:
        by.setdefault(f.path, []).append(f)
    return {p: fs for p, fs in by.items()
            if any(f.fix is not None and f.fix.edits and (f.fix.safe or unsafe) for f in fs)}
