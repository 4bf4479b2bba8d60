"""``gradlint check PATHS --confirm -- SCRIPT [ARGS...]``: the static findings of PATHS, each
marked by one run of the program under the runtime monitor.

* ``confirmed``: the monitor reported the same code in the same file, at a line of the finding's
  statement (from ``statement_line`` to ``end_line``), or, failing that, within the same
  function (module-level code counts as one scope) for rules whose runtime check reports at
  another line than the static one (GL205: the static rule points at the re-wrap, the runtime
  at ``backward()``). Each runtime finding confirms at most one finding through that fallback.
* ``not observed``: the finding's line (or its statement's first line) ran, the monitor saw
  nothing with that code there. The rule may be out of the runtime's reach (GL202, GL301, GL304,
  GL4xx-GL7xx), or the data of this run did not trigger it.
* ``not reached``: the line never ran in this run.

Runtime findings that confirm nothing are "runtime only" (selection, per-file ignores, severity
overrides and ``# noqa`` of the linted files apply to them as to static findings).

"Line ran" is measured with ``sys.settrace``/``threading.settrace``: the global trace function
returns a line tracer only for frames of the linted files, so other code (torch, the standard
library, site-packages) runs without per-line tracing.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import json
import os
import sys
import threading
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from gradlint.rule import Finding, Severity

CONFIRMED, NOT_OBSERVED, NOT_REACHED, RUNTIME_ONLY = "confirmed", "not observed", "not reached", "runtime only"


# ------------------------------------------------------------------------------ lines that ran
class LineRecorder:
    """Records ``(file, line)`` for the lines of ``files`` (absolute, resolved paths) that run.

    ``with LineRecorder(files) as rec: ...``; then ``rec.ran[path]`` is the set of lines. The
    trace function of the previous tracer (a debugger, coverage) is replaced for the duration and
    restored afterwards."""

    def __init__(self, files: Iterable[str]) -> None:
        self.files = frozenset(files)
        self.ran: Dict[str, Set[int]] = {}
        self._targets: Dict[str, Optional[Callable[..., Any]]] = {}  # co_filename -> local tracer
        self._saved: Tuple[Any, Any] = (None, None)

    def _local_for(self, co_filename: str) -> Optional[Callable[..., Any]]:
        try:
            resolved = os.path.realpath(co_filename)
        except (OSError, ValueError):  # pragma: no cover
            resolved = co_filename
        if resolved not in self.files:
            return None
        add = self.ran.setdefault(resolved, set()).add

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                add(frame.f_lineno)
            return local

        return local

    def _global(self, frame: Any, event: str, arg: Any) -> Any:
        name = frame.f_code.co_filename
        try:
            return self._targets[name]
        except KeyError:
            local = self._targets[name] = self._local_for(name)
            return local

    def __enter__(self) -> "LineRecorder":
        self._saved = (sys.gettrace(), getattr(threading, "gettrace", lambda: None)())
        threading.settrace(self._global)
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.settrace(self._saved[0])
        threading.settrace(self._saved[1])  # type: ignore[arg-type]

    def lines(self, path: str) -> Set[int]:
        return self.ran.get(path, set())


# ------------------------------------------------------------------------------ one run
@dataclasses.dataclass
class ProgramResult:
    status: int = 0  # the exit status the program would have had
    exception: str = ""  # "RuntimeError: ..." for an uncaught exception, else ""
    findings: List[Finding] = dataclasses.field(default_factory=list)
    ran: Dict[str, Set[int]] = dataclasses.field(default_factory=dict)


def run_once(target: str, args: Sequence[str], files: Iterable[str], *, module: bool = False,
             deep: bool = False) -> ProgramResult:
    """Run the program as ``gradlint run`` does (its ``sys.argv``, ``__main__``, ``sys.path[0]``),
    under the monitor and the line recorder. Never raises for what the program does: an uncaught
    exception prints its traceback (without gradlint's frames) on stderr and is recorded; so is
    ``SystemExit``. The program's stdout goes to stderr, so that stdout holds only the report."""
    from gradlint.runtime.run import execute
    from gradlint.runtime.mode import Monitor

    mon = Monitor(deep=deep)
    recorder = LineRecorder(files)
    result = ProgramResult()
    try:
        with contextlib.redirect_stdout(sys.stderr):
            try:
                result.status, result.exception = execute(target, args, [recorder, mon], module=module)
            finally:
                sys.stdout.flush()
    finally:
        sys.stderr.flush()
    result.findings = mon.findings
    result.ran = recorder.ran
    return result


# ------------------------------------------------------------------------------ matching
@dataclasses.dataclass
class Confirmation:
    """The static findings with their status, and the runtime-only findings."""

    statuses: List[Tuple[Finding, str, Optional[int]]]  # finding, status, the runtime line that confirmed it
    runtime_only: List[Finding]

    def counts(self) -> Dict[str, int]:
        out = {CONFIRMED: 0, NOT_OBSERVED: 0, NOT_REACHED: 0}
        for _, status, _ in self.statuses:
            out[status] += 1
        out[RUNTIME_ONLY] = len(self.runtime_only)
        return out


def _scopes(path: str) -> List[Tuple[int, int]]:
    """The line ranges of the functions (and lambdas) of a file, decorators included."""
    try:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            out.append((start, node.end_lineno or node.lineno))
    return out


def _scope_of(line: int, scopes: List[Tuple[int, int]]) -> Optional[Tuple[int, int]]:
    """The innermost function containing ``line`` (None: module level)."""
    best = None
    for lo, hi in scopes:
        if lo <= line <= hi and (best is None or hi - lo < best[1] - best[0]):
            best = (lo, hi)
    return best


def confirm(static: List[Finding], runtime: List[Finding], ran: Dict[str, Set[int]], *,
            base: Optional[str] = None, resolve: Optional[Callable[[str], str]] = None) -> Confirmation:
    """Mark each static finding; ``ran`` maps resolved paths to the lines that ran. Paths of both
    kinds of findings are resolved relative to ``base`` (default: the current directory)."""
    base = base or os.getcwd()

    def _res(p: str) -> str:
        if resolve is not None:
            return resolve(p)
        return p if p.startswith("<") else os.path.realpath(os.path.join(base, p))

    by_key: Dict[Tuple[str, str], List[int]] = {}  # (code, file) -> indices into runtime
    for i, r in enumerate(runtime):
        by_key.setdefault((r.code, _res(r.path)), []).append(i)

    used: Set[int] = set()
    matched: Dict[int, int] = {}  # static index -> runtime index
    resolved = [_res(s.path) for s in static]
    # 1. the same statement: from its first line to the finding's end
    for si, s in enumerate(static):
        lo = min(s.statement_line or s.line, s.line)
        hi = max(s.end_line, s.line)
        for ri in by_key.get((s.code, resolved[si]), ()):
            if lo <= runtime[ri].line <= hi:
                matched[si] = ri
                used.add(ri)
                break
    # 2. the same function (or module level), with a runtime finding that matched nothing else
    scopes: Dict[str, List[Tuple[int, int]]] = {}
    for si, s in enumerate(static):
        if si in matched:
            continue
        free = [ri for ri in by_key.get((s.code, resolved[si]), ()) if ri not in used]
        if not free:
            continue
        sc = scopes.get(resolved[si])
        if sc is None:
            sc = scopes[resolved[si]] = _scopes(resolved[si])
        mine = _scope_of(s.line, sc)
        same = [ri for ri in free if _scope_of(runtime[ri].line, sc) == mine]
        if same:
            ri = min(same, key=lambda i: abs(runtime[i].line - s.line))
            matched[si] = ri
            used.add(ri)

    statuses: List[Tuple[Finding, str, Optional[int]]] = []
    for si, s in enumerate(static):
        if si in matched:
            statuses.append((s, CONFIRMED, runtime[matched[si]].line))
            continue
        lines = ran.get(resolved[si], set())
        first = s.statement_line or s.line
        reached = any(n in lines for n in range(min(first, s.line), max(first, s.line) + 1))
        statuses.append((s, NOT_OBSERVED if reached else NOT_REACHED, None))
    only = [r for i, r in enumerate(runtime) if i not in used]
    return Confirmation(statuses, only)


# ------------------------------------------------------------------------------ filtering
def filter_runtime(findings: List[Finding], tasks: Sequence[Any], selected: Any,
                   severity: Dict[str, Any], base: str) -> List[Finding]:
    """Apply what applies to static findings to the runtime's: the rule selection (the per-file
    one for linted files), severity overrides, and ``# noqa`` comments of the linted files."""
    from gradlint.suppress import apply_noqa

    codes_of = {os.path.realpath(os.path.join(base, t.path)): t.options.codes for t in tasks if t.path}
    kept: Dict[str, List[Finding]] = {}
    out: List[Finding] = []
    for f in findings:
        path = f.path if f.path.startswith("<") else os.path.realpath(os.path.join(base, f.path))
        codes = codes_of.get(path, selected)
        if f.code not in codes:
            continue
        sev = severity.get(f.code)
        if sev is not None:
            f = dataclasses.replace(f, severity=Severity(getattr(sev, "value", sev)))
        if path in codes_of:
            kept.setdefault(path, []).append(f)
        else:
            out.append(f)
    for path, group in kept.items():
        try:
            with open(path, "rb") as fh:
                from gradlint.engine import decode

                text = decode(fh.read())
        except (OSError, SyntaxError, UnicodeDecodeError, LookupError):
            out.extend(group)
            continue
        out.extend(apply_noqa(group, text))
    out.sort(key=Finding.sort_key)
    return out


# ------------------------------------------------------------------------------ the report
def render(conf: Confirmation, result: ProgramResult, fmt: str, ctx: Any) -> str:
    """The report: json gets ``{"findings": [... + "confirmation"], "runtime_only": [...],
    "program": {...}, "summary": {...}}``; every other format lists the static findings with
    ``[status]`` before the message, then the runtime-only findings (``[runtime only]``), and
    concise/full end with the static summary and ``Confirmed N, not observed M, not reached K;
    runtime only R.``"""
    from gradlint.report import render as render_findings
    from gradlint.report.concise import summary

    counts = conf.counts()
    if fmt == "json":
        findings = []
        for f, status, line in conf.statuses:
            d = f.to_dict()
            d["confirmation"] = status
            if line is not None:
                d["runtime_line"] = line
            findings.append(d)
        doc = {
            "findings": findings,
            "runtime_only": [f.to_dict() for f in conf.runtime_only],
            "program": {"exit_status": result.status, "exception": result.exception or None},
            "summary": {k.replace(" ", "_"): v for k, v in counts.items()},
        }
        return json.dumps(doc, indent=2) + "\n"
    marked = [dataclasses.replace(f, message=f"[{status}] {f.message}") for f, status, _ in conf.statuses]
    extra = [dataclasses.replace(f, message=f"[{RUNTIME_ONLY}] {f.message}") for f in conf.runtime_only]
    if fmt not in ("concise", "full"):
        return render_findings(sorted(marked + extra, key=Finding.sort_key), fmt, ctx)
    quiet = ctx.quiet
    text = render_findings(marked, fmt, dataclasses.replace(ctx, quiet=True, statistics=False))
    text += render_findings(extra, fmt, dataclasses.replace(ctx, quiet=True, statistics=False))
    if ctx.statistics:
        from gradlint.report.concise import statistics

        text += "".join(line + "\n" for line in statistics([f for f, _, _ in conf.statuses] + conf.runtime_only))
    if not quiet:
        static = [f for f, _, _ in conf.statuses]
        text += summary(static, ctx) + "\n"
        text += (f"Confirmed {counts[CONFIRMED]}, not observed {counts[NOT_OBSERVED]}, "
                 f"not reached {counts[NOT_REACHED]}; runtime only {counts[RUNTIME_ONLY]}.\n")
    return text


def program_note(result: ProgramResult) -> str:
    """One line for stderr about how the program ended (empty when it exited with 0)."""
    if result.exception:
        return (f"gradlint: the program raised {result.exception.splitlines()[0]} (exit status "
                f"{result.status}); the report covers what ran before that")
    if result.status:
        return f"gradlint: the program exited with status {result.status}"
    return ""


# ------------------------------------------------------------------------------ the command
def check_confirm(findings: List[Finding], tasks: Sequence[Any], settings: Any, selected: Any,
                  target: str, args: Sequence[str], *, module: bool, fmt: str, ctx: Any,
                  exit_zero: bool = False) -> Tuple[str, int, str]:
    """Run the program once and mark ``findings`` (those of ``gradlint check`` on ``tasks``):
    ``(report text, exit status, a note about how the program ended for stderr)``. The exit
    status is ``check``'s (static findings at or above ``fail_on``) or 1 for a runtime-only
    error finding."""
    base = os.getcwd()
    files = [os.path.realpath(os.path.join(base, t.path)) for t in tasks if t.path]
    result = run_once(target, args, files, module=module)
    runtime = filter_runtime(result.findings, tasks, selected, dict(settings.severity), base)
    conf = confirm(findings, runtime, result.ran, base=base)
    text = render(conf, result, fmt, ctx)
    threshold = settings.fail_on.rank
    failed = (any(f.severity.rank >= threshold for f in findings)
              or any(f.severity is Severity.ERROR for f in conf.runtime_only))
    return text, 0 if exit_zero or not failed else 1, program_note(result)
