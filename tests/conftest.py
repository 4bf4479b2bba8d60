from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


@pytest.fixture
def root() -> Path:
    return ROOT


def pytest_configure(config):
    """``GRADLINT_TEST_INSTALLED=1`` (set by ``.ci/run``): the tests must exercise the installed
    wheel, not this checkout's sources; stop at once if the checkout shadows it."""
    import os

    if os.environ.get("GRADLINT_TEST_INSTALLED") == "1":
        import gradlint

        where = Path(gradlint.__file__).resolve()
        if ROOT in where.parents:
            pytest.exit(f"GRADLINT_TEST_INSTALLED=1 but gradlint comes from the checkout ({where}); "
                        "run with PYTHONSAFEPATH=1 (python -P) so the current folder is not on sys.path",
                        returncode=3)
