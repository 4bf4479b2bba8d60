"""pytest plugin: run each test under the runtime monitor (``pytest --gradlint``).

Registered through the ``pytest11`` entry point, so pytest loads this module in every session:
it imports neither torch nor the monitor until ``--gradlint`` (or ``--gradlint-strict``) is
given. Findings are listed in the terminal summary with the test that triggered them;
``--gradlint-strict`` also fails a test whose run produced an error-level finding.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("gradlint", "gradlint runtime monitor")
    group.addoption("--gradlint", action="store_true", default=False,
                    help="run each test under the gradlint runtime monitor and report autograd misuse")
    group.addoption("--gradlint-strict", action="store_true", default=False,
                    help="like --gradlint, and fail a test that produced an error-level finding")
    group.addoption("--gradlint-deep", action="store_true", default=False,
                    help="with --gradlint: also checksum tensors saved for backward (slower)")


def pytest_configure(config: Any) -> None:
    opt = config.getoption
    if opt("gradlint") or opt("gradlint_strict") or opt("gradlint_deep"):
        config.pluginmanager.register(_GradlintRuntime(config), "gradlint-runtime")


class GradlintFindings(Exception):
    """Raised (under --gradlint-strict) after a test whose run produced error-level findings."""


class _GradlintRuntime:
    def __init__(self, config: Any) -> None:
        self.strict = bool(config.getoption("gradlint_strict"))
        self.deep = bool(config.getoption("gradlint_deep"))
        self.results: List[Tuple[str, Any]] = []  # (nodeid, finding)
        self._seen: Dict[Tuple[str, str, str, int], None] = {}
        self._strict: Dict[str, List[Any]] = {}  # nodeid -> error findings of its call phase

    def _watch(self, item: Any):  # type: ignore[no-untyped-def]
        from gradlint.runtime.mode import Monitor

        return Monitor(deep=self.deep)

    def _collect(self, item: Any, mon: Any) -> List[Any]:
        new = []
        for f in mon.findings:
            key = (item.nodeid, f.code, f.path, f.line)
            if key not in self._seen:
                self._seen[key] = None
                self.results.append((item.nodeid, f))
                new.append(f)
        return new

    # Old-style hook wrappers (``hookwrapper=True``): every pluggy version pytest 7+ runs with
    # supports them (``wrapper=True`` needs pluggy 1.2 and raised at import on older ones).
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item: Any):  # type: ignore[no-untyped-def]
        yield from self._around(item)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: Any):  # type: ignore[no-untyped-def]
        new = yield from self._around(item)
        errors = [f for f in new if f.severity.value == "error"]
        if self.strict and errors:
            self._strict[item.nodeid] = errors

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item: Any, nextitem: Any):  # type: ignore[no-untyped-def]
        yield from self._around(item)

    def _around(self, item: Any):  # type: ignore[no-untyped-def]
        mon = self._watch(item)
        mon.__enter__()
        try:
            yield
        finally:
            mon.__exit__(None, None, None)
        return self._collect(item, mon)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: Any, call: Any):  # type: ignore[no-untyped-def]
        outcome = yield
        errors = self._strict.pop(item.nodeid, None) if call.when == "call" else None
        if not errors:
            return
        report = outcome.get_result()
        if report.passed:  # --gradlint-strict: a passing test with error findings fails
            lines = "\n".join(f"{f.path}:{f.line}: {f.code} {f.message}" for f in errors)
            report.outcome = "failed"
            report.longrepr = f"GradlintFindings: gradlint found autograd misuse in this test:\n{lines}"

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        tr = terminalreporter
        if not self.results:
            tr.write_sep("=", "gradlint: no autograd misuse observed")
            return
        tr.write_sep("=", f"gradlint runtime findings ({len(self.results)})")
        for nodeid, f in self.results:
            tr.write_line(f"{f.path}:{f.line}:{f.column}: {f.code} [{f.severity.value}] {f.message}")
            tr.write_line(f"    in {nodeid}")
