"""The rule reference is generated from the rules; it must not be stale."""

from gradlint.docs import readme_with_table, rules_markdown
from gradlint.rule import registry

SECTIONS = ("## What it does", "## Why is this bad", "## Example", "## Use instead", "## References")


def test_docs_rules_md_is_current(root):
    assert (root / "docs" / "rules.md").read_text(encoding="utf-8") == rules_markdown(), (
        "docs/rules.md is stale: run `python -m gradlint.docs`"
    )


def test_readme_rule_table_is_current(root):
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert readme_with_table(readme) == readme, "README rule table is stale: run `python -m gradlint.docs`"


def test_every_rule_is_documented():
    for code, rule in registry().items():
        doc = rule.docs()
        missing = [s for s in SECTIONS if s not in doc]
        assert not missing, f"{code} lacks {missing}"
        assert rule.name and rule.name == rule.name.lower() and " " not in rule.name
        assert rule.message and rule.hint, code
        if rule.fixable:
            assert "## Fix safety" in doc, code


def test_codes_are_stable_and_unique():
    names = [r.name for r in registry().values()]
    assert len(names) == len(set(names))
