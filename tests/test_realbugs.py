"""The real-bug benchmark's cases still behave as labelled on torch (raise, warn, or show their
evidence; fixed twins and negatives run clean). The score itself is a benchmark, not a test:
``python -m bench.realbugs``."""

import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(REPO)  # for bench; appended, so an installed gradlint is never shadowed by the checkout

from bench.realbugs import load, tools  # noqa: E402

pytest.importorskip("torch")

CASES = load()


@pytest.fixture(scope="module")
def verdicts():
    return tools.verify(CASES, os.cpu_count() or 1)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_behaves_as_labelled(case, verdicts):
    assert verdicts[case.path] == []


def test_every_bug_has_a_fixed_twin_and_a_known_shape():
    names = {c.name for c in CASES}
    for c in CASES:
        if c.kind == "bug":
            assert c.name + "_fixed" in names, f"{c.name} has no fixed twin"
        assert c.category and c.sources, c.name


def test_sources_list_is_current():
    import subprocess

    out = subprocess.run([sys.executable, "-m", "bench.realbugs", "--sources"], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    with open(os.path.join(REPO, "bench", "realbugs", "SOURCES.md"), encoding="utf-8") as fh:
        assert out in fh.read(), "run: python -m bench.realbugs --sources (and update bench/realbugs/SOURCES.md)"
