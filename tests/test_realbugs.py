"""The real-bug benchmark's cases still behave as labelled on torch (raise, warn, or show their
evidence; fixed twins and negatives run clean), the single-file cases and the split ones
(``bench/realbugs-split/``, each run as ``python train.py`` from its directory). The score itself is
a benchmark, not a test: ``python -m bench.realbugs`` (and ``--split``)."""

import collections
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(REPO)  # for bench; appended, so an installed gradlint is never shadowed by the checkout

from bench.realbugs import load, load_split, parse_case, tools  # noqa: E402

pytest.importorskip("torch")

CASES = load()
SPLIT = load_split()


@pytest.fixture(scope="module")
def verdicts():
    # one pool for both sets, so the split cases share the parallel run
    return tools.verify(list(CASES) + list(SPLIT), os.cpu_count() or 1)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_behaves_as_labelled(case, verdicts):
    assert verdicts[case.path] == []


@pytest.mark.parametrize("case", SPLIT, ids=["split/" + c.name for c in SPLIT])
def test_split_case_behaves_as_labelled(case, verdicts):
    assert verdicts[case.path] == []


def test_every_bug_has_a_fixed_twin_and_a_known_shape():
    names = {c.name for c in CASES}
    for c in CASES:
        if c.kind == "bug":
            assert c.name + "_fixed" in names, f"{c.name} has no fixed twin"
        assert c.category and c.sources, c.name


def test_split_cases_keep_their_original_label_and_markers():
    """A split case is its single-file case laid out over files: the same header (in the entry
    script), the same BUG markers (wherever their lines now live), a fixed twin."""
    names = {c.name for c in SPLIT}
    for c in SPLIT:
        assert c.problems == [], (c.name, c.problems)
        if c.kind == "bug":
            assert c.name + "_fixed" in names, f"{c.name} has no fixed twin"
        original = parse_case(c.original, c.kind)
        assert (c.sources, c.category, c.expect, c.exc, c.text) == \
            (original.sources, original.category, original.expect, original.exc, original.text), c.name
        assert collections.Counter(k for _, _, k in c.bug_sites) == collections.Counter(k for _, k in original.bug_lines), c.name


def test_split_layouts_are_varied():
    bugs = [c for c in SPLIT if c.kind == "bug"]
    if not bugs:
        pytest.skip("no split cases")
    layouts = [c.layout for c in bugs]
    assert sum("package" in lay for lay in layouts) * 4 >= len(bugs)
    assert sum("re-export" in lay for lay in layouts) >= 2
    assert any("star" in lay for lay in layouts)
    # the BUG line lives outside the entry script in many of them
    assert sum(any(p != os.path.join(c.path, c.entry) for p, _, _ in c.bug_sites) for c in bugs) * 2 >= len(bugs)


def test_sources_list_is_current():
    import subprocess

    # (bench/ is no installed package: put the checkout on the path for it, after site-packages)
    code = f"import sys, runpy; sys.path.append({REPO!r}); sys.argv = ['bench.realbugs', '--sources']; " \
           "runpy.run_module('bench.realbugs', run_name='__main__')"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    with open(os.path.join(REPO, "bench", "realbugs", "SOURCES.md"), encoding="utf-8") as fh:
        assert out in fh.read(), "run: python -m bench.realbugs --sources (and update bench/realbugs/SOURCES.md)"
