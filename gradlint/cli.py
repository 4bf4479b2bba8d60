"""The ``gradlint`` command line (click). Never imports torch."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any, List, Optional, Tuple

import click

from gradlint import __version__

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class _Fail(click.ClickException):
    """A one-line error with exit status 2."""

    exit_code = EXIT_ERROR

    def show(self, file=None) -> None:  # type: ignore[override]
        click.echo(f"gradlint: error: {self.format_message()}", err=True)


_STOPPED_BY = ["SIGINT"]


def _stop_on_sigterm() -> None:
    """SIGTERM (what CI runners, IDEs and supervisors send) stops a run as Ctrl-C does: the
    workers are killed and reaped, one line on stderr, exit status 2."""

    def stop(signum: int, frame: Any) -> None:
        _STOPPED_BY[0] = "SIGTERM"
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt()

    try:
        signal.signal(signal.SIGTERM, stop)
    except (ValueError, OSError):  # not the main thread (an embedding program)
        pass


def _split(values: Tuple[str, ...]) -> Optional[List[str]]:
    if not values:
        return None
    out: List[str] = []
    for v in values:
        out.extend(x.strip() for x in v.split(",") if x.strip())
    return out


class _CheckCommand(click.Command):
    """``check ... --confirm -- SCRIPT [ARGS...]``: with ``--confirm``/``--confirm-module`` before
    ``--``, what follows ``--`` is the program (and its arguments), not PATHS."""

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        if "--" in args:
            i = args.index("--")
            if any(a == "--confirm" or a.startswith("--confirm-module") for a in args[:i]):
                ctx.meta["gradlint.program"] = list(args[i + 1:])
                args = args[:i]
        return super().parse_args(ctx, args)


def _one_line_usage_error(self: click.UsageError, file: Any = None) -> None:
    """Click's usage errors in one line (click prints usage, a hint and the error in four)."""
    hint = ""
    if self.ctx is not None:
        hint = f" (see '{self.ctx.command_path} --help')"
    click.echo(f"gradlint: error: {self.format_message()}{hint}", err=True)


click.UsageError.show = _one_line_usage_error  # type: ignore[method-assign]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="gradlint", message="%(prog)s %(version)s")
def main() -> None:
    """gradlint: find PyTorch autograd misuse before a training run wastes hours on it."""


@main.command(cls=_CheckCommand)
@click.argument("paths", nargs=-1, type=str)
@click.option("--select", multiple=True, help="Rule codes or prefixes to check (comma-separated); ALL for every rule.")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to skip (comma-separated).")
@click.option("--extend-select", multiple=True, help="Rule codes or prefixes to add to the selection.")
@click.option("--format", "fmt",
              type=click.Choice(["concise", "full", "json", "github", "sarif", "junit", "gitlab"]),
              default="concise", show_default=True, help="Output format.")
@click.option("--output-file", "-o", "output_file", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Write the report (or the diff) to this file instead of stdout.")
@click.option("--fix", "apply_fixes", is_flag=True, help="Apply safe fixes in place; report what remains.")
@click.option("--unsafe-fixes", is_flag=True, help="With --fix or --diff: apply unsafe fixes too.")
@click.option("--diff", "show_diff", is_flag=True,
              help="Print a unified diff of what --fix would change, write nothing "
                   "(exit status 1 when there is a diff).")
@click.option("--exit-zero", is_flag=True, help="Exit with status 0 even when there are findings.")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only (no summary).")
@click.option("--statistics", is_flag=True, help="Show the number of findings per rule.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="Worker processes (default: number of cores).")
@click.option("--no-cache", is_flag=True, help="Do not read or write the cache.")
@click.option("--cache-dir", "cache_dir", type=click.Path(file_okay=False), default=None, envvar="GRADLINT_CACHE_DIR",
              help="Cache directory (default: .gradlint_cache in the current directory).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Configuration file (default: nearest pyproject.toml with [tool.gradlint], or gradlint.toml).")
@click.option("--show-source", is_flag=True, help="Show the source line with a caret (full format).")
@click.option("--fail-on", type=click.Choice(["error", "warning"]), default=None,
              help="Lowest severity that makes the exit status 1 (default: warning).")
@click.option("--stdin-filename", default=None, help="The name to report for source read from stdin ('-').")
@click.option("--confirm", is_flag=True,
              help="Then run the program given after `--` (SCRIPT [ARGS...]) once under the runtime monitor and "
                   "mark each finding confirmed / not observed / not reached (needs torch).")
@click.option("--confirm-module", default=None, metavar="MODULE",
              help="As --confirm, running `python -m MODULE` (its arguments after `--`).")
def check(paths: Tuple[str, ...], select, ignore, extend_select, fmt, output_file, apply_fixes, unsafe_fixes,
          show_diff, exit_zero, quiet, statistics, jobs, no_cache, config_path, show_source, fail_on,
          stdin_filename, cache_dir=None, confirm=False, confirm_module=None) -> None:
    """Lint PATHS (default: the current directory; '-' reads stdin)."""
    from gradlint.config import ConfigError, load_settings
    from gradlint.rule import Severity

    program = _confirm_program(confirm, confirm_module, paths, apply_fixes or show_diff)
    _stop_on_sigterm()
    from gradlint.cache import keep_code_table

    # (source read from stdin is never cached, and makes no cache directory)
    keep_code_table(None if no_cache or "-" in paths else _cache_dir(cache_dir))
    try:
        settings = load_settings(config_path)
        if _split(select) is not None:
            settings.select = _split(select)
            # the command line wins: a code selected there is not taken away by the config's ignore
            settings.ignore = settings.unignore(settings.select)
        if _split(ignore) is not None:
            settings.ignore = settings.ignore + _split(ignore)  # type: ignore[operator]
        if _split(extend_select) is not None:
            settings.extend_select = settings.extend_select + _split(extend_select)  # type: ignore[operator]
        if fail_on:
            settings.fail_on = Severity(fail_on)
        selected = settings.selected_codes()
        if not paths:  # `--stdin-filename NAME` alone reads stdin (as in ruff)
            paths = ("-",) if stdin_filename else (".",)
        findings, files_checked, tasks, stdin_data = _run(paths, settings, selected, jobs, stdin_filename,
                                                              cache_dir=None if no_cache else _cache_dir(cache_dir))
        fixing = None
        if apply_fixes or show_diff:
            fixing = _fix(findings, tasks, stdin_data, write=not show_diff, unsafe=unsafe_fixes)
            findings = fixing.findings
    except ConfigError as exc:
        raise _Fail(str(exc)) from None
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the workers are killed and reaped by now
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C does not interrupt the exit
        raise _Fail(f"interrupted ({_STOPPED_BY[0]}); no report") from None
    except Exception as exc:  # an internal error: one line, exit 2, never a traceback
        raise _Fail(f"internal error: {type(exc).__name__}: {exc}") from None

    from gradlint.report import ReportContext, render

    if fixing is not None:
        for line in fixing.messages:
            click.echo(f"gradlint: {line}", err=True)
    if show_diff:
        # ruff's behaviour: only the diff, and exit status 1 when there is one
        _emit(fixing.diff, output_file)
        if not quiet:
            click.echo(fixing.summary(would=True), err=True)
        sys.exit(EXIT_FINDINGS if fixing.diff and not exit_zero else EXIT_OK)

    to_stderr = fixing is not None and stdin_data is not None and output_file is None
    stream = sys.stderr if to_stderr else sys.stdout
    color = (fmt in ("concise", "full") and output_file is None and stream.isatty()
             and not os.environ.get("NO_COLOR"))
    ctx = ReportContext(files_checked=files_checked, show_source=show_source or fmt == "full",
                        color=color, statistics=statistics, quiet=quiet)
    if program is not None:
        _confirm(findings, tasks, settings, selected, program, confirm_module, fmt, ctx, output_file, exit_zero)
    out = render(findings, fmt, ctx)
    if fixing is not None and stdin_data is not None:
        # `--fix -`: the fixed source on stdout (as ruff does), the report on stderr
        sys.stdout.flush()
        sys.stdout.buffer.write(fixing.stdin_output)
        sys.stdout.flush()
    if to_stderr:
        if out:
            click.echo(out, nl=False, err=True)
    else:
        _emit(out, output_file)
    if fixing is not None and (fixing.fixed or fixing.skipped_unsafe) and not quiet:
        click.echo(fixing.summary(would=False), err=True)
    if exit_zero:
        sys.exit(EXIT_OK)
    threshold = settings.fail_on.rank
    sys.exit(EXIT_FINDINGS if any(f.severity.rank >= threshold for f in findings) else EXIT_OK)


def _emit(text: str, output_file: Optional[Path]) -> None:
    """The report (or diff) to stdout, or to ``--output-file``. A report that cannot be written
    (a full disk) is a one-line error, exit status 2: never read as "findings"."""
    if output_file is None:
        if text:
            try:
                click.echo(text, nl=False)
                sys.stdout.flush()
            except OSError as exc:
                _unwritable_stdout(exc)
        return
    try:
        with open(output_file, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
    except OSError as exc:
        click.echo(f"gradlint: error: cannot write {output_file}: {exc.strerror or exc}", err=True)
        sys.exit(EXIT_ERROR)


def _unwritable_stdout(exc: OSError) -> None:
    try:  # the rest of the buffered report cannot be written either: drop it
        sys.stdout = open(os.devnull, "w")
    except OSError:
        pass
    click.echo(f"gradlint: error: cannot write the report to stdout: {exc.strerror or exc}", err=True)
    os._exit(EXIT_ERROR)  # exit now: flushing stdout at interpreter exit would fail again


def _confirm_program(confirm: bool, module: Optional[str], paths: Tuple[str, ...],
                     fixing: bool) -> Optional[List[str]]:
    """The program of ``--confirm`` (``[SCRIPT, ARGS...]``) or ``--confirm-module``
    (``[MODULE, ARGS...]``); None without either."""
    if not confirm and module is None:
        return None
    if fixing:
        raise _Fail("--confirm cannot be combined with --fix or --diff")
    if "-" in paths:
        raise _Fail("--confirm cannot check stdin ('-')")
    args = list(click.get_current_context().meta.get("gradlint.program", []))
    if module is not None:
        return [module, *args]
    if not args:
        raise _Fail("--confirm needs the program after `--`: gradlint check PATHS --confirm -- SCRIPT [ARGS...]")
    if not os.path.isfile(args[0]):
        raise _Fail(f"can't open file {args[0]!r}: no such file")
    return args


def _confirm(findings, tasks, settings, selected, program, module, fmt, ctx, output_file, exit_zero) -> None:
    """Run the program once, print the confirm report and exit (gradlint.runtime.confirm)."""
    try:
        import gradlint.runtime.mode  # noqa: F401  (torch)
        from gradlint.runtime.confirm import check_confirm
    except ImportError as exc:
        raise _Fail(f"--confirm needs torch: {exc}") from None
    text, code, note = check_confirm(findings, tasks, settings, selected, program[0], program[1:],
                                     module=module is not None, fmt=fmt, ctx=ctx, exit_zero=exit_zero)
    if note:
        click.echo(note, err=True)
    _emit(text, output_file)
    sys.exit(code)


def _cache_dir(option: Optional[str]) -> str:
    from gradlint.cache import DEFAULT_DIR

    return option or DEFAULT_DIR


def _run(paths, settings, selected, jobs, stdin_filename, cache_dir=None):
    """(findings, files checked, the tasks (one per file; for stdin a task whose path is
    None), the bytes read from stdin or None)."""
    from gradlint.config import ConfigError
    from gradlint.discovery import discover
    from gradlint.engine import Options, Task, lint_data, lint_tasks

    severity = tuple(sorted((c, s.value) for c, s in settings.severity.items()))
    if "-" in paths:
        if len(paths) > 1:
            raise ConfigError("'-' (stdin) cannot be combined with other paths")
        name = stdin_filename or "-"
        data = sys.stdin.buffer.read()
        codes = settings.codes_for(name, selected) if stdin_filename else selected
        options = Options(codes=codes, severity=severity)
        project = None
        if stdin_filename:  # its imports resolve from the folder the name places it in
            from gradlint.index import view_for

            project = view_for(stdin_filename)
        return lint_data(name, data, options, project), 1, [Task(name, None, options)], data  # type: ignore[arg-type]
    unreadable: List[Tuple[str, str]] = []
    files = discover(paths, settings, unreadable)
    tasks = [Task(f, f, Options(codes=settings.codes_for(f, selected), severity=severity), cache_dir)
             for f in files]
    n = jobs or usable_cpus()
    findings = lint_tasks(tasks, jobs=n)
    if unreadable:
        findings = sorted(findings + _unreadable(unreadable, settings, selected), key=lambda f: f.sort_key())
    return findings, len(files), tasks, None


def _unreadable(unreadable, settings, selected):
    """A path that cannot be read is a GL000 finding (never a silent pass); where GL000 is not
    selected for it, a one-line error (exit status 2)."""
    from gradlint.config import ConfigError
    from gradlint.engine import _finding
    from gradlint.rule import SyntaxErrorRule

    out = []
    for path, problem in unreadable:
        if SyntaxErrorRule.code not in settings.codes_for(path, selected):
            raise ConfigError(f"{path}: {problem}")
        out.append(_finding(SyntaxErrorRule, path, 1, 1, problem))
    return out


def usable_cpus() -> int:
    """CPUs this process may use: its affinity mask and the cgroup's CPU quota (a container
    limited to 2 CPUs on a 64-core host), not the host's count."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="ascii") as fh:  # cgroup v2
            quota, period = fh.read().split()[:2]
        if quota != "max":
            n = min(n, max(1, int(int(quota) / int(period))))
    except (OSError, ValueError):
        try:  # cgroup v1
            with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", encoding="ascii") as fh:
                quota_us = int(fh.read())
            with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us", encoding="ascii") as fh:
                period_us = int(fh.read())
            if quota_us > 0 and period_us > 0:
                n = min(n, max(1, quota_us // period_us))
        except (OSError, ValueError):
            pass
    return max(1, n)


class _Fixing:
    """What ``--fix``/``--diff`` did: the findings that remain, the diff, notes for stderr."""

    def __init__(self) -> None:
        self.findings: list = []
        self.diff = ""
        self.messages: List[str] = []
        self.fixed = 0
        self.files = 0
        self.skipped_unsafe = 0
        self.stdin_output = b""

    def summary(self, would: bool) -> str:
        from gradlint.report.concise import plural

        done = f"{plural(self.fixed, 'finding')} in {plural(self.files, 'file')}"
        if self.fixed:
            text = f"Would fix {done}." if would else f"Fixed {done}."
        else:
            text = "No fixes to apply."
        if self.skipped_unsafe:
            n = self.skipped_unsafe
            text += f" ({n} unsafe {'fix' if n == 1 else 'fixes'} not applied: see --unsafe-fixes.)"
        return text


def _fix(findings, tasks, stdin_data, *, write: bool, unsafe: bool) -> _Fixing:
    """Apply (or, for --diff, compute) the fixes of every file that has an applicable one."""
    from gradlint.fix import fix_file, fix_source, fixes_by_path

    out = _Fixing()
    todo = fixes_by_path(findings, unsafe)
    out.skipped_unsafe = sum(1 for f in findings if f.fix is not None and not f.fix.safe and not unsafe
                             and f.path not in todo)
    if stdin_data is not None:
        out.stdin_output = stdin_data
    if not todo:
        out.findings = list(findings)
        return out
    by_task = {t.display: t for t in tasks}
    kept = [f for f in findings if f.path not in todo]
    diffs: List[str] = []
    for display in sorted(todo):
        task = by_task[display]
        if task.path is None:  # stdin: fix in memory
            result, new = fix_source(display, stdin_data, task.options, unsafe)
            if new is not None:
                out.stdin_output = new
        else:
            result = fix_file(task.path, display, task.options, unsafe=unsafe, write=write,
                              findings=todo[display])
        kept.extend(result.findings)
        out.skipped_unsafe += result.skipped_unsafe
        if result.error:
            out.messages.append(f"{display}: {result.error}")
        if result.note:
            out.messages.append(f"{display}: {result.note}")
        if result.diff:
            diffs.append(result.diff)
            out.fixed += result.fixed
            out.files += 1
    from gradlint.rule import Finding

    kept.sort(key=Finding.sort_key)
    out.findings = kept
    out.diff = "".join(diffs)
    return out


@main.command("rule")
@click.argument("code")
def rule_cmd(code: str) -> None:
    """Print the documentation of rule CODE (e.g. GL101)."""
    from gradlint.rule import registry

    reg = registry()
    cls = reg.get(code.strip().upper())
    if cls is None:
        by_name = {r.name: r for r in reg.values()}
        cls = by_name.get(code.strip().lower())
    if cls is None:
        raise _Fail(f"unknown rule code {code!r} (see `gradlint rules`)")
    click.echo(f"# {cls.code} {cls.name}\n")
    click.echo(f"Severity: {cls.severity.value}. Fixable: {'yes' if cls.fixable else 'no'}.\n")
    click.echo(cls.docs())


@main.command("rules")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
def rules_cmd(fmt: str) -> None:
    """List every rule: code, name, severity, fixable, summary."""
    from gradlint.docs import rules_json, rules_table, rules_text

    if fmt == "json":
        click.echo(rules_json())
    elif fmt == "markdown":
        click.echo(rules_table(), nl=False)
    else:
        click.echo(rules_text(), nl=False)


@main.command("server")
@click.option("--stdio", is_flag=True, hidden=True, help="Accepted (and ignored) for clients that pass it.")
def server_cmd(stdio: bool) -> None:
    """Run the language server (LSP over stdin/stdout) for editors (needs pygls)."""
    try:
        import pygls  # noqa: F401
    except ImportError:
        raise _Fail("the language server needs pygls: pip install 'torch-gradlint[lsp]'") from None
    from gradlint.server import main as serve

    serve()


@main.command("clean")
@click.option("--cache-dir", "cache_dir", type=click.Path(file_okay=False), default=None, envvar="GRADLINT_CACHE_DIR",
              help="Cache directory (default: .gradlint_cache in the current directory).")
def clean_cmd(cache_dir: Optional[str]) -> None:
    """Remove the cache directory."""
    from gradlint.cache import clean

    path = _cache_dir(cache_dir)
    try:
        removed = clean(path)
    except (ValueError, OSError) as exc:
        raise _Fail(str(exc)) from None
    if removed is None:
        click.echo(f"No cache at {path}.")
    else:
        entries, size = removed
        click.echo(f"Removed {path} ({entries} {'entry' if entries == 1 else 'entries'}, {size / 1024:.0f} KiB).")


@main.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("-m", "as_module", is_flag=True, help="TARGET is a module name, run as `python -m TARGET`.")
@click.option("--deep", is_flag=True,
              help="Also checksum tensors saved for backward (finds writes through .data or NumPy views; slower).")
@click.option("--output", "output", type=click.Path(dir_okay=False), default=None,
              help="Write the findings to this file instead of stderr.")
@click.option("--format", "fmt", type=click.Choice(["concise", "json", "sarif"]), default="concise",
              show_default=True, help="Format of --output.")
@click.argument("target")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run_cmd(as_module: bool, deep: bool, output: Optional[str], fmt: str, target: str, args: Tuple[str, ...]) -> None:
    """Run SCRIPT [ARGS...] (or -m MODULE [ARGS...]) under the runtime monitor (needs torch).

    The program keeps its argv, stdout and exit status; findings go to stderr at exit."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise _Fail("`gradlint run` needs torch, which is not installed here (pip install torch)")
    try:
        from gradlint.runtime.run import run_program
    except ImportError as exc:  # torch is broken
        raise _Fail(f"`gradlint run` needs torch: {exc}") from None
    _can_start(target, as_module)
    sys.exit(run_program(target, args, module=as_module, deep=deep, output=output, fmt=fmt))


def _can_start(target: str, as_module: bool) -> None:
    """What would stop the program before its first line is one line and exit status 2, never
    a traceback followed by a reassurance: a file that is missing or does not compile, a module
    that cannot be found, a notebook that cannot be read. A notebook of another language is
    skipped, as `check` skips it (exit status 0)."""
    import importlib.util

    if as_module:
        sys.path.insert(0, os.getcwd())  # as `python -m` finds it
        try:
            found = importlib.util.find_spec(target)
        except (ImportError, ValueError) as exc:
            raise _Fail(f"cannot run module {target!r}: {type(exc).__name__}: {exc}") from None
        finally:
            sys.path.pop(0)
        if found is None:
            raise _Fail(f"cannot run module {target!r}: no module of that name")
        return
    if not os.path.isfile(target):
        raise _Fail(f"can't open file {target!r}: no such file")
    try:
        with open(target, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise _Fail(f"can't open file {target!r}: {exc.strerror or exc}") from None
    if target.endswith(".ipynb"):
        from gradlint import notebook

        try:
            nb = notebook.load(data)
        except notebook.NotebookError as exc:
            raise _Fail(f"cannot run {target}: {exc}") from None
        if not nb.python:
            click.echo(f"gradlint: {target} is not a Python notebook; not run (as `gradlint check` skips it).", err=True)
            sys.exit(0)
        return
    try:
        compile(data, target, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise _Fail(f"cannot run {target}: SyntaxError: {exc.msg} (line {exc.lineno})") from None
    except ValueError as exc:  # null bytes
        raise _Fail(f"cannot run {target}: {exc}") from None


if __name__ == "__main__":  # pragma: no cover
    main()
