"""The ``gradlint`` command line (click). Never imports torch."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, Optional, Tuple

import click

from gradlint import __version__

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class _Fail(click.ClickException):
    """A one-line error with exit status 2."""

    exit_code = EXIT_ERROR

    def show(self, file=None) -> None:  # type: ignore[override]
        click.echo(f"gradlint: error: {self.format_message()}", err=True)


def _split(values: Tuple[str, ...]) -> Optional[List[str]]:
    if not values:
        return None
    out: List[str] = []
    for v in values:
        out.extend(x.strip() for x in v.split(",") if x.strip())
    return out


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="gradlint", message="%(prog)s %(version)s")
def main() -> None:
    """gradlint: find PyTorch autograd misuse before a training run wastes hours on it."""


@main.command()
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
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Configuration file (default: nearest pyproject.toml with [tool.gradlint], or gradlint.toml).")
@click.option("--show-source", is_flag=True, help="Show the source line with a caret (full format).")
@click.option("--fail-on", type=click.Choice(["error", "warning"]), default=None,
              help="Lowest severity that makes the exit status 1 (default: warning).")
@click.option("--stdin-filename", default=None, help="The name to report for source read from stdin ('-').")
def check(paths: Tuple[str, ...], select, ignore, extend_select, fmt, output_file, apply_fixes, unsafe_fixes,
          show_diff, exit_zero, quiet, statistics, jobs, no_cache, config_path, show_source, fail_on,
          stdin_filename) -> None:
    """Lint PATHS (default: the current directory; '-' reads stdin)."""
    from gradlint.config import ConfigError, load_settings
    from gradlint.rule import Severity

    try:
        settings = load_settings(config_path)
        if _split(select) is not None:
            settings.select = _split(select)
        if _split(ignore) is not None:
            settings.ignore = settings.ignore + _split(ignore)  # type: ignore[operator]
        if _split(extend_select) is not None:
            settings.extend_select = settings.extend_select + _split(extend_select)  # type: ignore[operator]
        if fail_on:
            settings.fail_on = Severity(fail_on)
        selected = settings.selected_codes()
        if not paths:  # `--stdin-filename NAME` alone reads stdin (as in ruff)
            paths = ("-",) if stdin_filename else (".",)
        findings, files_checked, tasks, stdin_data = _run(paths, settings, selected, jobs, stdin_filename)
        fixing = None
        if apply_fixes or show_diff:
            fixing = _fix(findings, tasks, stdin_data, write=not show_diff, unsafe=unsafe_fixes)
            findings = fixing.findings
    except ConfigError as exc:
        raise _Fail(str(exc)) from None
    except KeyboardInterrupt:  # pragma: no cover
        raise _Fail("interrupted") from None
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
    """The report (or diff) to stdout, or to ``--output-file``."""
    if output_file is None:
        if text:
            click.echo(text, nl=False)
        return
    try:
        with open(output_file, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
    except OSError as exc:
        click.echo(f"gradlint: error: cannot write {output_file}: {exc.strerror or exc}", err=True)
        sys.exit(EXIT_ERROR)


def _run(paths, settings, selected, jobs, stdin_filename):
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
        return lint_data(name, data, options), 1, [Task(name, None, options)], data  # type: ignore[arg-type]
    files = discover(paths, settings)
    tasks = [Task(f, f, Options(codes=settings.codes_for(f, selected), severity=severity)) for f in files]
    n = jobs or os.cpu_count() or 1
    return lint_tasks(tasks, jobs=n), len(files), tasks, None


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


if __name__ == "__main__":  # pragma: no cover
    main()
