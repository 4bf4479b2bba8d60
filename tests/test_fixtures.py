"""Every rule's fixture: (1) lint findings equal the inline markers exactly; (2) every example
runs on real torch, bad ones showing what the rule claims, good ones computing the right thing."""

from __future__ import annotations

import re
import warnings

import pytest

from fixture_harness import (
    declared, device_reason, examples, expectations, fixture_files, helpers_used, load, on_device, test_devices,
)
from gradlint.engine import Options, Task, lint_tasks
from gradlint.rule import registry, visit_rules

FILES = fixture_files()
ALL_CODES = frozenset(registry())


def _lint(path):
    return lint_tasks([Task(str(path), str(path), Options(codes=ALL_CODES))])


def test_every_rule_has_a_fixture():
    stems = {p.name.split("_", 1)[0] for p in FILES}
    missing = [c for c in visit_rules() if c not in stems]
    assert not missing, f"rules without a fixture: {missing}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_fixture_findings_match_markers(path):
    got = {(f.line, f.code, f.severity.value) for f in _lint(path)}
    want = expectations(path)
    assert got == want, f"unexpected: {sorted(got - want)}; missing: {sorted(want - got)}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_markers_sit_in_bad_examples_only(path):
    exs = examples(path)
    helpers = examples(path, ("_",))
    marks = expectations(path)
    own_code = path.name.split("_", 1)[0]

    def codes_in(ex):
        return {c for ln, c, _ in marks if ex.first <= ln <= ex.last}

    for ex in exs:
        codes = codes_in(ex)
        if ex.name.startswith("bad_"):
            for h in helpers_used(path, ex):
                codes |= codes_in(h)
            assert own_code in codes, f"{ex.id} has no {own_code} marker (in it or in a helper it uses)"
        else:
            assert not codes, f"{ex.id} is a good example but has a marker"
    for ln, _, _ in marks:
        assert any(e.first <= ln <= e.last for e in exs + helpers), f"line {ln}: a marker outside any example or helper"


torch = pytest.importorskip("torch")


def _all_examples():
    return [ex for p in FILES for ex in examples(p)]


@pytest.mark.parametrize("device", test_devices())
@pytest.mark.parametrize("ex", _all_examples(), ids=lambda e: e.id)
def test_example_runs_as_declared(ex, device):
    from gradlint.testing import expectation

    if device_reason(ex, device):
        pytest.skip(f"{ex.id}: CPU only: {device_reason(ex, device)}")

    fn = getattr(load(ex.path), ex.name)
    spec = declared(ex, {k: v for k, v in (expectation(fn) or {}).items() if k != "shapes"})
    if ex.name.startswith("bad_"):
        assert spec, f"{ex.id}: a bad example must declare what torch does (@raises/@warns/@silently_wrong)"
    else:
        assert not spec, f"{ex.id}: a good example declares a failure"
    torch.manual_seed(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.set_warn_always(True)
        try:
            with on_device(device):
                if "raises" in spec:
                    exc, match = spec["raises"]
                    with pytest.raises(exc, match=re.escape(match)):
                        fn()
                    result = None
                else:
                    result = fn()
        finally:
            torch.set_warn_always(False)
    if "warns" in spec:
        category, match = spec["warns"]
        assert any(issubclass(w.category, category) and match in str(w.message) for w in caught), (
            f"{ex.id}: expected {category.__name__} containing {match!r}; got {[str(w.message) for w in caught]}"
        )
    if "wrong" in spec:
        assert isinstance(result, tuple) and len(result) == 2, f"{ex.id} must return (actual, expected)"
        actual, expected = result
        assert actual is None or not _equal(actual, expected), f"{ex.id}: the result is correct, the rule's claim is not shown"
    elif ex.name.startswith("good_") and result is not None:
        actual, expected = result
        assert actual is not None and _equal(actual, expected), f"{ex.id}: {actual!r} != {expected!r}"


def _equal(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        a, b = torch.as_tensor(a), torch.as_tensor(b)
        return a.shape == b.shape and torch.allclose(a.double(), b.double())
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return a == b
