"""The per-file pipeline and the process pool.

bytes -> skip-file? -> decode -> pre-filter -> libcst parse -> one walk (model + rules)
      -> positions (only for files with findings) -> noqa -> findings

Every failure on a file becomes a finding for that file (GL000 for input that does not decode or
parse, GL001 for a crash inside gradlint); the run goes on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc

import io
import os
import re
import signal
import sys
import threading
import time
import tokenize
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Tuple

from gradlint.rule import (
    Finding, InternalErrorRule, Rule, Severity, SyntaxErrorRule, registry, visit_rules,
)
from gradlint.suppress import apply_noqa, is_skipped
from gradlint.parsecheck import (  # (tests call _python_parse_first here)
    compile_error as _compile_error, line_text as _line, long_chain as _long_chain,
    parser_position as _parser_position, python_parse_first as _python_parse_first,
)

# Text that a file must contain for any rule to find something in it (a file with none of them
# skips the libcst parse). Tensors are only known through an import of torch; but some rules
# also read duck-typed calls on values passed in (`model.parameters()`, `model.buffers()`,
# `model.state_dict()`, `loss.backward()` in a training loop) and custom autograd Functions
# recognised by the base's name (`class F(Function)`), which need no import of torch, and
# `t.requires_grad = True` (evidence that `t` is a leaf tensor).
# tests/test_prefilter.py proves on the fixtures that no rule fires without one of these.
PREFILTER_TOKENS = ("torch", "parameters", "buffers", "state_dict", "backward", "Function", "requires_grad")


@dataclass(frozen=True)
class Options:
    """What the engine needs to lint one file (picklable, sent to workers)."""

    codes: FrozenSet[str]
    severity: Tuple[Tuple[str, str], ...] = ()  # per-code overrides
    prefilter: bool = True
    # follow imports of the project's other modules (gradlint.index); off: each file alone
    follow_imports: bool = True


@dataclass(frozen=True)
class Task:
    display: str  # the path as reported
    path: str  # the path to read
    options: Options
    cache_dir: Optional[str] = None  # the results cache (gradlint.cache); None: no cache


def _finding(rule: type, display: str, line: int, col: int, message: str, *,
             end_line: int = 0, end_col: int = 0, source_line: str = "",
             severity: Optional[Severity] = None) -> Finding:
    return Finding(
        path=display, line=line, column=col, end_line=end_line or line,
        end_column=end_col or col + 1, code=rule.code, name=rule.name,
        severity=severity or rule.severity, message=message, hint=rule.hint,
        fixable=rule.fixable, url=rule.url(), source_line=source_line,
    )


def decode(data: bytes) -> str:
    """Decode as Python does (BOM, coding cookie, default UTF-8). Raises UnicodeDecodeError /
    SyntaxError / LookupError on bad input."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


def lint_bytes(display: str, data: bytes, options: Options, project: Any = None) -> List[Finding]:
    """``project``: the project index as this file sees it (``gradlint.index.ProjectView``), so
    that the model follows the file's imports of the project's other modules; None: the text
    alone."""
    if display.endswith(".ipynb"):
        return lint_notebook(display, data, options, project)
    if is_skipped(data):
        return []
    codes = options.codes
    try:
        text = decode(data)
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        if SyntaxErrorRule.code not in codes:
            return []
        line = col = 1
        if isinstance(exc, UnicodeDecodeError):
            before = data[: exc.start]
            line = before.count(b"\n") + 1
            col = exc.start - (before.rfind(b"\n") + 1) + 1
        return [_finding(SyntaxErrorRule, display, line, col, f"cannot decode file: {exc}")]
    return lint_text(display, text, options, project)


def lint_notebook(display: str, data: bytes, options: Options, project: Any = None) -> List[Finding]:
    """A Jupyter notebook: its code cells linted as one script (gradlint.notebook), each finding
    placed in its cell. A notebook that cannot be read is one GL000 finding."""
    from gradlint import notebook

    try:
        nb = notebook.load(data)
    except notebook.NotebookError as exc:
        if SyntaxErrorRule.code not in options.codes:
            return []
        return [_finding(SyntaxErrorRule, display, 1, 1, str(exc))]
    if not nb.python or is_skipped(nb.script.encode("utf-8", "surrogatepass")):
        return []
    return [f if f.path != display else in_cell(nb, f) for f in lint_text(display, nb.script, options, project)]


def in_cell(nb: Any, f: Finding) -> Finding:
    """A finding on the notebook's script, placed in its cell (the fix keeps the script's
    offsets: ``gradlint.fix`` applies it to the script and writes the cells back)."""
    cell, line = nb.locate(f.line)
    end_cell, end_line = nb.locate(f.end_line)
    related = []
    for rline, rcol, rmsg in f.related:
        rcell, rl = nb.locate(rline)
        related.append((rl, rcol, rmsg if rcell == cell else f"cell {rcell}: {rmsg}"))
    return dataclasses.replace(
        f, cell=cell, line=line, end_line=end_line if end_cell == cell else line,
        statement_line=nb.locate(f.statement_line)[1] if f.statement_line else 0,
        related=tuple(related), raw_line=nb.raw_line(cell, line) if cell else 0,
    )


def lint_text(display: str, text: str, options: Options, project: Any = None) -> List[Finding]:
    codes = options.codes
    rules = [cls for code, cls in visit_rules().items() if code in codes]
    if options.prefilter and not any(tok in text for tok in PREFILTER_TOKENS) \
            and not _imports_project(project, text):
        # nothing for the rules to find; only check that the file is valid Python (cheaply)
        if SyntaxErrorRule.code in codes:
            err = _compile_error(text)
            if err is not None:
                return [_finding(SyntaxErrorRule, display, err[0], err[1], err[2],
                                 source_line=_line(text, err[0]))]
        return []
    # Python's own parser first where the text may hold what Python cannot compile and libcst
    # accepts or crashes on (brackets nested more than 200 deep, which libcst accepts, and 1,500
    # deep, which crash libcst's native parser; very long lines): a SyntaxError in a fraction of
    # libcst's time. Elsewhere libcst's verdict is Python's (checked on invalid-syntax probes in
    # tests/test_reliability.py), and ast.parse on every file cost ~10% of a cold run
    err = _compile_error(text) if _python_parse_first(text) else None
    if err is not None and "\r" not in text:
        if SyntaxErrorRule.code not in codes:
            return []
        return [_finding(SyntaxErrorRule, display, err[0], err[1], err[2], source_line=_line(text, err[0]))]
    chain = _long_chain(text)
    if chain is not None:
        return _internal(display, codes, "parser", RuntimeError(
            f"line {chain[0]} holds an expression of {chain[1]:,} operands; libcst's parser takes minutes on "
            f"such input (time grows with the square of the length), so this file is not linted"))
    import libcst as cst

    if project is not None and not rules:
        project = None
    try:
        shared = _shared_parse(project, text)
        module = shared if shared is not None else cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        if SyntaxErrorRule.code not in codes:
            return []
        # Python's own message and position when Python rejects the file too (familiar, and
        # more precise); libcst's when only libcst does (syntax newer than it supports)
        err = _compile_error(text)
        if err is None and "\r" in text:
            # valid Python with mixed line endings (CRLF and LF), which libcst rejects: lint the
            # same lines with LF endings (line and column numbers are unchanged; no fixes, since
            # their offsets would be those of the normalised text)
            normalised = text.replace("\r\n", "\n").replace("\r", "\n")
            try:
                module = cst.parse_module(normalised)
            except Exception:
                pass
            else:
                if not rules:
                    return []
                findings = _run_rules(display, normalised, module, rules, options)
                return [dataclasses.replace(f, fix=None, fixable=False) for f in findings]
        if err is None:
            line, col, message = _parser_position(exc)
            err = (line, col, f"syntax error (libcst): {message}")
        return [_finding(SyntaxErrorRule, display, err[0], err[1], err[2], source_line=_line(text, err[0]))]
    except (RecursionError, MemoryError) as exc:
        return _internal(display, codes, "parser", exc)
    if not rules:
        return []
    return _run_rules(display, text, module, rules, options, project)


_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import|import[ \t]+([\w.]+))", re.M)


def _imports_project(project: Any, text: str) -> bool:
    """Does the text import a module of its project (whose code may hold what the pre-filter's
    tokens stand for)? Found with a regular expression and the index's file look-ups, no parse."""
    if project is None:
        return False
    for m in _IMPORT_LINE.finditer(text):
        name = m.group(1) if m.group(1) is not None else m.group(2)
        level = len(name) - len(name.lstrip("."))
        if project.index.resolve(project.path, name[level:], level) is not None:
            return True
    return False


def _shared_parse(project: Any, text: str) -> Any:
    """The tree of a project file through the index's parse cache (the file may have been
    parsed already as a module another file imports, and may be imported by a later one)."""
    if project is None or not project.path.endswith(".py"):
        return None
    src = project.index.parsed_text(project.path, text)
    return src.module if src is not None else None


def _internal(display: str, codes: FrozenSet[str], where: str, exc: BaseException) -> List[Finding]:
    if InternalErrorRule.code not in codes:
        return []
    detail = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    return [_finding(InternalErrorRule, display, 1, 1,
                     InternalErrorRule.message.format(where=where, detail=detail))]


def _run_rules(display: str, text: str, module: Any, rule_classes: List[type], options: Options,
               project: Any = None) -> List[Finding]:
    from gradlint.model.walk import Walker

    sink: List[Tuple[Rule, Any, Dict[str, Any]]] = []
    rules = [cls(None, sink) for cls in rule_classes]
    walker = Walker(rules, project if options.follow_imports else None)
    try:
        walker.run(module, text)
    except RecursionError as exc:
        return _internal(display, options.codes, "the model (nesting too deep)", exc)
    except Exception as exc:  # the model itself failed: report it, keep the run going
        return _internal(display, options.codes, "the model", exc)
    if sink:
        # a finding made under an assumed "grad on" inside a function that this module calls
        # with grad off is not trustworthy
        off = walker.model.grad_off_functions()
        if off:
            sink = [e for e in sink if not any(name in off for name in e[2]["assumed"])]
        if sink and project is not None and options.follow_imports:
            # ... or that every caller in the project runs with grad off (an inference method
            # called under torch.no_grad() from another module)
            sink = _called_with_grad_off(sink, walker.model, project)
    findings: List[Finding] = []
    for err in walker.errors:
        findings.extend(_internal(display, options.codes, f"rule {err.rule.code}", err.exc))
    if sink:
        from gradlint.positions import positioned

        findings.extend(positioned(display, text, module, sink, dict(options.severity), walker.model.scopes))
    findings = apply_noqa(findings, text, display)
    findings.sort(key=Finding.sort_key)
    _tear_down(walker, rules)
    return findings


def _tear_down(walker: Any, rules: List[Any]) -> None:
    """Drop what one file's walk built. The walker, its model and the rules refer to one another
    (bound methods, the model's callbacks), so without this their values, environments and scopes
    wait for the cyclic collector; dropped here, reference counting frees them at once."""
    model = getattr(walker, "model", None)
    for obj in (model, walker, *rules):
        d = getattr(obj, "__dict__", None)
        if d is not None:
            d.clear()


def _called_with_grad_off(sink: List[Any], model: Any, project: Any) -> List[Any]:
    """The findings made under an assumed "grad on", less those inside a function every call of
    which, anywhere in the project, runs with grad off (``gradlint.callers``)."""
    from gradlint.callers import all_calls_grad_off

    verdicts: Dict[str, bool] = {}

    def off(name: str) -> bool:
        got = verdicts.get(name)
        if got is None:
            method = name not in model.functions and any(name in c.methods for c in model.classes.values())
            got = verdicts[name] = all_calls_grad_off(project, name, method)
        return got

    return [e for e in sink if not any(off(name) for name in e[2]["assumed"])]


# ---------------------------------------------------------------------------- files and pool
def lint_task(task: Task) -> List[Finding]:
    try:
        with open(task.path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        if SyntaxErrorRule.code not in task.options.codes:
            return []
        return [_finding(SyntaxErrorRule, task.display, 1, 1, f"cannot read file: {exc.strerror or exc}")]
    project = _project(task)
    if task.cache_dir is None:
        return _lint_one(task.display, data, task.options, project)
    from gradlint import cache

    key = _cache_key(task, data)  # the bytes' hash, before any decoding or parsing
    findings = cache.load(task.cache_dir, key, task.display, _current(project))
    if findings is None:
        findings = _lint_one(task.display, data, task.options, project)
        cache.store(task.cache_dir, key, findings, task.display, project.used if project is not None else None)
    return findings


def _project(task: Task) -> Any:
    """The project index as the task's file sees it (its imports of the project's modules are
    followed), or None."""
    if not task.options.follow_imports or task.path is None:
        return None
    from gradlint.index import view_for

    return view_for(task.path)


def _current(project: Any) -> Any:
    return project.index.current_digest if project is not None else None


def _cache_key(task: Task, data: bytes) -> str:
    from gradlint import cache

    place = os.path.dirname(os.path.abspath(task.path)) if task.options.follow_imports else ""
    return cache.key(data, task.options, place)


# A file at least this large is parsed by one worker at a time: libcst's parse of a file peaks at
# about 800 times its size in memory (a 1.4 MB module: 1.1 GiB), so two such parses at once
# would double the peak of the whole run. `python -m bench.memory` measures where the peak
# comes from; below this size a parse stays under about 200 MiB.
BIG_FILE_BYTES = 256 * 1024
_BIG_LOCK: Any = None  # a multiprocessing lock shared by the pool's workers


def _lint_one(display: str, data: bytes, options: Options, project: Any = None) -> List[Finding]:
    if _BIG_LOCK is not None and len(data) >= BIG_FILE_BYTES:
        with _BIG_LOCK:
            try:
                return lint_data(display, data, options, project)
            finally:
                _give_back_memory()
    return lint_data(display, data, options, project)


def _give_back_memory() -> None:
    """After a huge parse: free its objects now and hand the freed heap back to the operating
    system (glibc keeps it otherwise), so that the worker does not hold a peak's worth of memory
    while the other worker parses the next huge file."""
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


# A file that takes longer than this (seconds) is a GL001 finding, not a hang (GRADLINT_FILE_TIMEOUT;
# 0 turns the bound off). The slowest real file measured (a 1.4 MB generated module of the torch
# tree) takes about 15 s; a pathological one (a 5,000-term sum) about 10 s.
FILE_TIMEOUT = 120.0


class FileTimeout(Exception):
    pass


def _file_timeout() -> float:
    try:
        return float(os.environ.get("GRADLINT_FILE_TIMEOUT", FILE_TIMEOUT))
    except ValueError:
        return FILE_TIMEOUT


def _on_alarm(signum: int, frame: Any) -> None:
    raise FileTimeout()


def lint_data(display: str, data: bytes, options: Options, project: Any = None) -> List[Finding]:
    """``lint_bytes`` that turns any crash into a GL001 finding (never a traceback), and a file
    that runs past the time bound into a GL001 finding (in the main thread, where POSIX signals
    can interrupt the work between Python instructions)."""
    limit = _file_timeout()
    timed = (limit > 0 and hasattr(signal, "setitimer")
             and threading.current_thread() is threading.main_thread())
    old = None
    try:
        if timed:
            old = signal.signal(signal.SIGALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, limit)
        return lint_bytes(display, data, options, project)
    except FileTimeout:
        return _internal(display, options.codes, "gradlint",
                         TimeoutError(f"gave up after {limit:g} s (GRADLINT_FILE_TIMEOUT)"))
    except RecursionError as exc:
        return _internal(display, options.codes, "gradlint", exc)
    except Exception as exc:
        return _internal(display, options.codes, "gradlint", exc)
    finally:
        if timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            if old is not None:
                signal.signal(signal.SIGALRM, old)


def _lint_batch(tasks: Sequence[Task]) -> List[Finding]:
    out: List[Finding] = []
    for t in tasks:
        out.extend(lint_task(t))
    return out


# The cyclic garbage collector's thresholds while linting. With the defaults (a young-generation
# collection every 700 allocations) a run that keeps the project's parsed trees (the index) pays
# for traversing them over and over: on pytorch-image-models, cold -j 1, 73 s of CPU time with the
# defaults against 43 s with these (python -m bench.run). Parsed trees and the model's values make
# few reference cycles, so collecting them rarely costs little memory (peak RSS in the README).
# The middle generation holds every tree that survived a young collection (a million objects on
# timm): collected every 20 young collections it cost 1.9 s of ~35 s CPU there (gc.callbacks
# timing); every 200, nothing on timm and the same peak RSS (304 MiB against 307).
LINT_GC_THRESHOLD = (50_000, 200, 100)


@contextlib.contextmanager
def few_collections() -> Any:
    """Lint with ``LINT_GC_THRESHOLD``, then give the process its thresholds back (the flake8
    plugin and the pytest plugin lint inside someone else's process)."""
    from gradlint import index

    old = gc.get_threshold()
    gc.set_threshold(*LINT_GC_THRESHOLD)
    index.FREEZE_TREES = True
    try:
        yield
    finally:
        index.FREEZE_TREES = False
        # what the run made and still holds (the index's trees) is moved out of the collector's
        # sight first: with the old thresholds back, the next young collection would otherwise
        # escalate to a full one over all of it (seconds, and again when the interpreter exits);
        # refcounting still frees those objects when they are dropped
        gc.freeze()
        gc.set_threshold(*old)


def _init_worker(parent: Optional[int] = None, big_lock: Any = None) -> None:
    global _BIG_LOCK
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    gc.set_threshold(*LINT_GC_THRESHOLD)  # a worker of ours: no one else's thresholds to keep
    from gradlint import index

    index.FREEZE_TREES = True
    registry()
    _BIG_LOCK = big_lock
    if parent is None:
        return
    # a worker leaves stopping to the main process (Ctrl-C reaches the whole process group), and
    # exits by itself when the main process is gone (killed with SIGKILL): never an orphan
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="gradlint-parent-watch", daemon=True).start()


def _batches(tasks: Sequence[Task], jobs: int) -> List[List[Task]]:
    """Spread tasks over about 4*jobs batches of similar total size (largest files first)."""
    sized = []
    for t in tasks:
        try:
            size = os.path.getsize(t.path)
        except OSError:
            size = 0
        sized.append((size + 2048, t))
    sized.sort(key=lambda p: -p[0])
    n = max(1, min(len(sized), jobs * 4))
    bins: List[List[Task]] = [[] for _ in range(n)]
    loads = [0] * n
    for size, t in sized:
        i = loads.index(min(loads))
        bins[i].append(t)
        loads[i] += size
    return [b for b in bins if b]


# Below this much source in all, a run stays in the main process: starting the pool (forking,
# then collecting the workers) costs more than it saves: on 2 cores the pool lost at 13 KiB
# and won from about 16 KiB of fixture-like files (python -m bench.pool_threshold).
IN_PROCESS_BYTES = 32 * 1024


def _small(tasks: Sequence[Task]) -> bool:
    total = 0
    for t in tasks:
        try:
            total += os.path.getsize(t.path)
        except (OSError, TypeError):
            pass
        if total >= IN_PROCESS_BYTES:
            return False
    return True


def lint_tasks(tasks: Sequence[Task], jobs: int = 1) -> List[Finding]:
    """Lint every task; the result is sorted and identical for any ``jobs``."""
    findings: List[Finding] = []
    if any(t.cache_dir is not None for t in tasks):
        from gradlint import cache

        cache.code_fingerprint()  # once, here: forked workers inherit it
        # the cached results first, in this process (a warm run starts no pool and imports no
        # rule module); only the files that need linting go on
        findings, tasks = _cached(tasks)
        if not tasks:
            return _unique(findings)
    if jobs <= 1 or len(tasks) < 2 or _small(tasks):
        sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
        with few_collections():
            findings.extend(_lint_batch(tasks))
    else:
        findings.extend(_pooled(_batches(tasks, jobs), jobs))
    return _unique(findings)


def _unique(findings: List[Finding]) -> List[Finding]:
    """Sorted, each defect once: a finding in an imported module is found through every file
    that calls into it (and by that module's own lint); the first in sort order is kept, so the
    result is the same for any ``jobs``."""
    findings.sort(key=Finding.sort_key)
    out: List[Finding] = []
    seen = set()
    for f in findings:
        # (one file, however its name is spelled: given as `src/a.py`, met as `./src/a.py`)
        k = (os.path.normcase(os.path.abspath(f.path)) if f.path != "-" else f.path, f.cell, f.line, f.column, f.code)
        if k not in seen:
            seen.add(k)
            out.append(f)
    return out


def _cached(tasks: Sequence[Task]) -> Tuple[List[Finding], List[Task]]:
    """(the findings of the tasks whose result is cached, the tasks still to lint)."""
    from gradlint import cache

    found: List[Finding] = []
    todo: List[Task] = []
    for t in tasks:
        if t.cache_dir is None or t.path is None:
            todo.append(t)
            continue
        try:
            with open(t.path, "rb") as fh:
                data = fh.read()
        except OSError:
            todo.append(t)  # reported by lint_task
            continue
        hit = cache.load(t.cache_dir, _cache_key(t, data), t.display, _current(_project(t)))
        if hit is None:
            todo.append(t)
        else:
            found.extend(hit)
    return found, todo


def _pooled(batches: List[List[Task]], jobs: int) -> List[Finding]:
    """Run the batches on a process pool. A worker that dies (a native crash: a segfault in the
    parser, the kernel's OOM killer) takes only its files: the batches it did not finish are run
    again one file per process, and the file that kills its process is a GL001 finding. On
    KeyboardInterrupt (Ctrl-C, or SIGTERM turned into one by the CLI) every worker is killed and
    reaped before the exception goes on."""
    import multiprocessing

    findings: List[Finding] = []
    big_lock = multiprocessing.Lock()  # one huge parse at a time (BIG_FILE_BYTES)
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(batches)), initializer=_init_worker,
                               initargs=(os.getpid(), big_lock))
    pending: Dict[Any, List[Task]] = {}
    try:
        # Ctrl-C / SIGTERM held back while the batches are handed over: a KeyboardInterrupt
        # raised inside submit() (which takes the pool's locks and wakes its manager thread)
        # could leave the interpreter waiting for that thread at exit; delivered right after
        masked = _hold_stop_signals()
        try:
            pending = {pool.submit(_lint_batch, b): b for b in batches}
        finally:
            _release_stop_signals(masked)
        broken: List[List[Task]] = []
        for fut in as_completed(list(pending)):
            try:
                findings.extend(fut.result())
            except BrokenProcessPool:
                broken.append(pending[fut])
        pool.shutdown(wait=True)
        for batch in broken:
            for task in batch:
                findings.extend(_isolated(task))
    except BaseException:
        _kill(pool)
        raise
    return findings


def _hold_stop_signals() -> Any:
    """Block SIGINT and SIGTERM in this thread (the previous mask, or None where it cannot)."""
    try:
        return signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    except (AttributeError, ValueError, OSError):
        return None


def _release_stop_signals(masked: Any) -> None:
    if masked is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, masked)


def _isolated(task: Task) -> List[Finding]:
    """One file in a process of its own (after a worker died): its findings, or GL001 when the
    process dies on it too."""
    pool = ProcessPoolExecutor(max_workers=1, initializer=_init_worker, initargs=(os.getpid(),))
    try:
        return pool.submit(_lint_batch, [task]).result()
    except BrokenProcessPool:
        return _internal(task.display, task.options.codes, "gradlint",
                         RuntimeError("the process linting this file died (a crash in native code, or "
                                      "out of memory); the rest of the run is reported"))
    except BaseException:
        _kill(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _kill(pool: ProcessPoolExecutor) -> None:
    """Stop at once: kill every worker and reap it (no orphan, no zombie, no wait for the
    batches in flight)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    for p in procs:
        try:
            p.kill()
        except Exception:
            pass
    for p in procs:
        try:
            p.join(2)
        except Exception:
            pass
    try:
        pool.shutdown(wait=False, cancel_futures=True)
    except Exception:
        pass
