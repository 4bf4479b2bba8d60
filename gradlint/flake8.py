"""The flake8 plugin (entry point ``flake8.extension``: ``GL = gradlint.flake8:Plugin``).

A thin adapter over the engine: the lines flake8 has already read are joined and linted with
``engine.lint_text``, so each file is parsed once by libcst (flake8's own ``ast`` is not used),
and a file that never mentions torch costs one substring search (the engine's pre-filter).

flake8 only runs a plugin that asks for ``tree`` (or for logical/physical lines), and builds the
``ast`` for every file anyway (for E999), so asking for it costs nothing; it is ignored here.

Every gradlint code is reported and flake8 does the selection (``--select``, ``extend-select``,
``--extend-ignore``, ``per-file-ignores``, ``# noqa``). GL000 (syntax errors) is left out: flake8
reports E999 itself. ``[tool.gradlint]`` settings do not apply under flake8.
"""

from __future__ import annotations

from typing import Any, FrozenSet, Iterator, List, Optional, Tuple

import gradlint

_CODES: Optional[FrozenSet[str]] = None


def _codes() -> FrozenSet[str]:
    global _CODES
    if _CODES is None:
        from gradlint.rule import SyntaxErrorRule, registry

        _CODES = frozenset(c for c in registry() if c != SyntaxErrorRule.code)
    return _CODES


class Plugin:
    name = "gradlint"
    version = gradlint.__version__

    def __init__(self, tree: Any, lines: List[str], filename: str) -> None:
        self.lines = lines
        self.filename = filename

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        text = "".join(self.lines)
        from gradlint.engine import PREFILTER_TOKENS

        if not any(tok in text for tok in PREFILTER_TOKENS):
            return
        from gradlint.engine import Options, few_collections, lint_text
        from gradlint.suppress import is_skipped

        if is_skipped(text.encode("utf-8", "surrogatepass")):  # `# gradlint: skip-file`
            return
        try:
            with few_collections():
                findings = lint_text(self.filename, text, Options(codes=_codes()), _project(self.filename))
            # flake8 reports per file: a finding the walk made in an imported module of the
            # project is that module's (its own run reports what its own code shows)
            findings = [f for f in findings if f.path == self.filename]
        except Exception as exc:  # never a traceback from a plugin: report it as GL001
            detail = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            yield 1, 0, f"GL001 internal error in gradlint: {detail}", type(self)
            return
        for f in findings:
            yield f.line, max(f.column - 1, 0), f"{f.code} {f.message}", type(self)


def _project(filename: str):  # type: ignore[no-untyped-def]
    """The project index as the file sees it (its imports of the project are followed)."""
    import os

    if not filename or filename in ("-", "stdin") or not os.path.isfile(filename):
        return None
    from gradlint.index import view_for

    return view_for(filename)
