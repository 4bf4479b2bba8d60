"""Packages are discovered, never listed by hand: the engine's (``gradlint/`` and every subpackage
it grows) and the rules' (``rules/``, installed as ``gradlint.rules``). A hand-written list once
left ``gradlint.runtime.watchers`` out of the wheel; ``tests/test_packaging.py`` builds the wheel
and the sdist and checks that every module of the source tree is in them."""

from setuptools import find_namespace_packages, setup

# namespace packages too: a folder that lacks its __init__.py is still part of the program
SKIP = ["*__pycache__*"]
PACKAGES = find_namespace_packages(include=["gradlint", "gradlint.*"], exclude=SKIP)
PACKAGES += ["gradlint.rules"] + ["gradlint.rules." + name for name in find_namespace_packages("rules", exclude=SKIP)]

setup(packages=PACKAGES, package_dir={"gradlint.rules": "rules"})
