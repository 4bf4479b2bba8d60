"""Which files to lint: ``*.py`` (and ``*.pyi``) under the given paths, minus excludes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, List

from gradlint.config import ConfigError, Settings

EXTENSIONS = (".py", ".pyi")


def discover(paths: Iterable[str], settings: Settings) -> List[str]:
    """Files to lint, in a stable order, without duplicates. A path that does not exist is a
    ConfigError (exit status 2). Excludes apply to files given explicitly too (as in flake8),
    so a pre-commit hook honours them."""
    out: List[str] = []
    seen = set()
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise ConfigError(f"path not found: {raw}")
        if p.is_file():
            candidates = [] if settings.is_excluded(raw) or _in_excluded_dir(raw, settings) else [raw]
        else:
            candidates = _walk(raw, settings)
        for c in candidates:
            key = os.path.normcase(os.path.abspath(c))
            if key not in seen:
                seen.add(key)
                out.append(c)
    return out


def _in_excluded_dir(path: str, settings: Settings) -> bool:
    """Whether a directory between the configuration root and ``path`` is excluded, so that
    ``vendor/x.py`` given explicitly (say by a pre-commit hook) is skipped under an ``exclude``
    of ``vendor``, as a walk of the project would skip it. Directories above the root (where
    the project happens to be checked out) never count."""
    try:
        rel = Path(path).resolve().relative_to(settings.root.resolve())
    except (ValueError, OSError):
        return False
    d = settings.root.resolve()
    for part in rel.parts[:-1]:
        d = d / part
        if settings.is_excluded(str(d)):
            return True
    return False


def _walk(top: str, settings: Settings) -> List[str]:
    found: List[str] = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(
            d for d in dirnames if not settings.is_excluded(os.path.join(dirpath, d))
        )
        for name in sorted(filenames):
            if name.endswith(EXTENSIONS):
                full = os.path.join(dirpath, name)
                if not settings.is_excluded(full):
                    found.append(os.path.normpath(full))
    return found
