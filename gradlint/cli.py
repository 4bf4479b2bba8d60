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
@click.option("--format", "fmt", type=click.Choice(["concise", "full", "json", "github", "sarif"]),
              default="concise", show_default=True, help="Output format.")
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
def check(paths: Tuple[str, ...], select, ignore, extend_select, fmt, exit_zero, quiet, statistics,
          jobs, no_cache, config_path, show_source, fail_on, stdin_filename) -> None:
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
        findings, files_checked = _run(paths, settings, selected, jobs, stdin_filename)
    except ConfigError as exc:
        raise _Fail(str(exc)) from None
    except KeyboardInterrupt:  # pragma: no cover
        raise _Fail("interrupted") from None
    except Exception as exc:  # an internal error: one line, exit 2, never a traceback
        raise _Fail(f"internal error: {type(exc).__name__}: {exc}") from None

    from gradlint.report import ReportContext, render

    color = fmt in ("concise", "full") and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    ctx = ReportContext(files_checked=files_checked, show_source=show_source or fmt == "full",
                        color=color, statistics=statistics, quiet=quiet)
    out = render(findings, fmt, ctx)
    if out:
        click.echo(out, nl=False)
    if exit_zero:
        sys.exit(EXIT_OK)
    threshold = settings.fail_on.rank
    sys.exit(EXIT_FINDINGS if any(f.severity.rank >= threshold for f in findings) else EXIT_OK)


def _run(paths, settings, selected, jobs, stdin_filename):
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
        return lint_data(name, data, Options(codes=codes, severity=severity)), 1
    files = discover(paths, settings)
    tasks = [Task(f, f, Options(codes=settings.codes_for(f, selected), severity=severity)) for f in files]
    n = jobs or os.cpu_count() or 1
    return lint_tasks(tasks, jobs=n), len(files)


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
