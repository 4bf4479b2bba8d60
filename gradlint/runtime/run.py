"""``gradlint run``: run a program as ``python SCRIPT ARGS`` / ``python -m MODULE ARGS`` would,
under the monitor, and report what it saw at exit (on stderr, or in ``--output``).

The program keeps its ``sys.argv``, ``__main__``, ``sys.path[0]``, stdout and exit status: an
uncaught exception prints its traceback (as Python would, without gradlint's frames) and exits
with status 1; ``SystemExit`` codes are preserved.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import signal
import sys
import threading
import traceback
from typing import Any, List, Optional, Sequence, Tuple


def execute(target: str, args: Sequence[str], contexts: Sequence[Any], *, module: bool = False) -> Tuple[int, str]:
    """Run the program inside ``contexts`` (the monitor, a line recorder, ...) as ``python
    SCRIPT ARGS`` / ``python -m MODULE ARGS`` would. Never raises for what the program does: an
    uncaught exception prints its traceback (without gradlint's frames) on stderr. Returns the
    exit status Python would have given, and ``"Type: message"`` for an uncaught exception."""
    saved_argv, saved_path0 = list(sys.argv), (sys.path[0] if sys.path else None)
    saved_cwd = os.getcwd()
    status: object = 0
    exception = ""
    try:
        sys.argv = [target, *args]  # run_module(alter_sys=True) replaces argv[0] with the file
        _set_path0(os.getcwd() if module else os.path.dirname(os.path.abspath(target)))
        with contextlib.ExitStack() as stack:
            for c in contexts:
                stack.enter_context(c)
            if module:
                runpy.run_module(target, run_name="__main__", alter_sys=True)
            elif target.endswith(".ipynb"):
                _run_notebook(os.path.abspath(target))
            else:
                runpy.run_path(os.path.abspath(target), run_name="__main__")
    except SystemExit as exc:
        status = exc.code
    except Terminated:
        status, exception = 128 + signal.SIGTERM, "SIGTERM"
    except KeyboardInterrupt:
        _print_traceback(*sys.exc_info())
        status, exception = 130, "KeyboardInterrupt"
    except BaseException as exc:
        _print_traceback(*sys.exc_info())
        status, exception = 1, f"{type(exc).__name__}: {exc}".rstrip(": ")
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None and sys.path:
            sys.path[0] = saved_path0
        with contextlib.suppress(OSError):
            os.chdir(saved_cwd)
    return _exit_code(status), exception  # prints a SystemExit message first, as Python does


def run_program(target: str, args: Sequence[str], *, module: bool = False, deep: bool = False,
                output: Optional[str] = None, fmt: str = "concise") -> int:
    """Run the program under the monitor; return the exit status it would have had (the caller
    exits with it). A notebook (``.ipynb``) runs its code cells in order as one script."""
    from gradlint.runtime.mode import Monitor

    mon = Monitor(deep=deep)

    def findings() -> List:
        return _in_cells(mon.findings)

    previous = _catch_sigterm()
    try:
        with _report_before_os_exit(lambda: _emit(findings(), output, fmt)):
            code, exception = execute(target, args, [mon], module=module)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    _emit(findings(), output, fmt, stopped=exception)
    if exception == "SIGTERM":
        # the findings are written: now end as the signal would have ended the program
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
    return code


class Terminated(BaseException):
    """SIGTERM (what SLURM, Kubernetes and CI send at a time limit) while the program runs."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def _catch_sigterm() -> Any:
    """While the program runs, SIGTERM stops it so that the findings so far are reported (as
    Ctrl-C does); the process then ends by the signal. Only where SIGTERM has its default
    action and in the main thread (a program that installs its own handler keeps it)."""
    if not hasattr(signal, "SIGTERM") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return None
        return signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):
        return None


_NOTEBOOKS: dict = {}  # absolute path -> gradlint.notebook.Notebook, for the notebooks run


def _run_notebook(path: str) -> None:
    """Run a notebook's code cells in order as one script in ``__main__``; IPython lines (magics,
    shell commands, help) are skipped, said once on stderr. The script is registered with
    ``linecache`` under the notebook's path, so tracebacks and the monitor's source reading
    show the cells' code."""
    import linecache
    import types

    from gradlint import notebook

    with open(path, "rb") as fh:
        nb = notebook.load(fh.read())
    _NOTEBOOKS[path] = nb
    skipped = sum(len(c.masked) for c in nb.cells)
    if skipped:
        sys.stderr.write(f"gradlint: {skipped} IPython line{'s' if skipped != 1 else ''} (magics, shell "
                         f"commands) skipped in {os.path.basename(path)}\n")
    lines = nb.script.splitlines(keepends=True)
    linecache.cache[path] = (len(nb.script), None, lines, path)
    code = compile(nb.script, path, "exec")
    main = types.ModuleType("__main__")
    main.__file__ = path
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def _in_cells(findings: List) -> List:
    """Runtime findings in a notebook that was run: placed in their cells."""
    if not _NOTEBOOKS:
        return findings
    from gradlint.engine import in_cell

    out = []
    for f in findings:
        nb = _NOTEBOOKS.get(os.path.abspath(f.path))
        out.append(in_cell(nb, f) if nb is not None else f)
    return out


@contextlib.contextmanager
def _report_before_os_exit(report: Any) -> Any:
    """A program that ends with ``os._exit(n)`` (common after multiprocessing or to skip slow
    teardown) skips every exit handler: report the findings so far first, then exit as asked."""
    real = os._exit

    def _exit(status: int) -> None:
        os._exit = real  # type: ignore[assignment]
        try:
            report()
            sys.stderr.flush()
        except BaseException:
            pass
        real(status)

    os._exit = _exit  # type: ignore[assignment]
    try:
        yield
    finally:
        os._exit = real  # type: ignore[assignment]


def _set_path0(path: str) -> None:
    if sys.path:
        sys.path[0] = path
    else:  # pragma: no cover
        sys.path.insert(0, path)


def _exit_code(code: object) -> int:
    """What Python does with ``SystemExit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")
    return 1


def _print_traceback(etype, value, tb) -> None:  # type: ignore[no-untyped-def]
    """The traceback without the frames of the runtime monitor and runpy (the program's own
    start at the script or module)."""
    here = os.path.dirname(os.path.abspath(__file__))
    skip = (here + os.sep, os.path.abspath(runpy.__file__), "<frozen runpy>")
    kept = []
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if not (name.startswith(skip) or os.path.abspath(name).startswith(skip)):
            kept.append(tb)
        tb = tb.tb_next
    for a, b in zip(kept, kept[1:]):
        a.tb_next = b
    if kept:
        kept[-1].tb_next = None
    tb = kept[0] if kept else None
    sys.stdout.flush()
    hook = sys.excepthook
    if hook is sys.__excepthook__:
        traceback.print_exception(etype, value, tb)
    else:  # the program installed its own hook: let it print
        hook(etype, value, tb)
    sys.stderr.flush()


def _emit(findings: List, output: Optional[str], fmt: str, stopped: str = "") -> None:
    """``stopped``: the uncaught exception that ended the program early ("" when it ran to its
    end or exited with ``sys.exit``): nothing is then said to be free of misuse beyond it."""
    from gradlint.report import ReportContext, render

    files = len({f.path for f in findings})
    try:
        sys.stdout.flush()
    except Exception:  # pragma: no cover - a closed stdout
        pass
    if output is not None:
        text = render(findings, fmt, ReportContext(files_checked=files))
        try:
            with open(output, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
        except OSError as exc:
            sys.stderr.write(f"gradlint: error: cannot write {output}: {exc.strerror or exc}\n")
        else:
            n = len(findings)
            sys.stderr.write(f"gradlint: {n} runtime finding{'s' if n != 1 else ''} written to {output}\n")
        return
    if fmt not in ("concise", "full"):  # a machine format without --output: on stderr, as asked
        sys.stderr.write(render(findings, fmt, ReportContext(files_checked=files)))
        sys.stderr.flush()
        return
    if not findings:
        if stopped:
            sys.stderr.write(f"gradlint: the program stopped early ({stopped.splitlines()[0][:200]}); no autograd "
                             "misuse observed up to there, the rest did not run.\n")
        else:
            sys.stderr.write("gradlint: no autograd misuse observed at runtime.\n")
        return
    color = sys.stderr.isatty() and not os.environ.get("NO_COLOR")
    text = render(findings, "concise", ReportContext(files_checked=files, color=color))
    sys.stderr.write("gradlint: runtime findings:\n" + text)
    sys.stderr.flush()
