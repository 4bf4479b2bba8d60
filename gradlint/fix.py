"""Applying fixes to files (``check --fix``/``--diff``). The edits rules state are in
``gradlint.edits`` (re-exported here for rules written against this module).

Applying (``fix_file``): lint, take the applicable fixes that do not overlap, apply them, check
that the result still parses with libcst, re-lint, and repeat (at most ``MAX_ROUNDS`` rounds).
A result that does not parse leaves the file unchanged. Writes are atomic (a temporary file in
the same directory, then ``os.replace``) and keep the encoding (coding cookie, BOM), the line
endings, the presence of a final newline (edits do not touch them) and the file's mode.
"""

from __future__ import annotations

import difflib
import io
import os
import re
import stat
import tempfile
import tokenize
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from gradlint.edits import (  # noqa: F401 (re-exported)
    NodeEdit, count_comments, insert_after, insert_before, line_starts, node_range, offset, position_of,
    replace, replace_span, resolve_fix,
)
from gradlint.rule import Edit, Finding, Fix

MAX_ROUNDS = 5

_BREAK = re.compile(r"\r\n|\r|\n")


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
