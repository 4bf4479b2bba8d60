"""Which files to lint: ``*.py`` and Jupyter notebooks (``*.ipynb``) under the given paths, minus
excludes. Stub files (``*.pyi``) hold no executable code, so no autograd misuse: they are not
linted (a stub given explicitly is not either)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, List, Optional, Tuple

from gradlint.config import ConfigError, Settings

EXTENSIONS = (".py", ".ipynb")


Unreadable = Tuple[str, str]  # (path, what went wrong: "cannot read directory: Permission denied")


def discover(paths: Iterable[str], settings: Settings,
             unreadable: Optional[List[Unreadable]] = None) -> List[str]:
    """Files to lint, in a stable order, without duplicates. A path that does not exist is a
    ConfigError (exit status 2). Excludes apply to files given explicitly too (as in flake8),
    so a pre-commit hook honours them. A path that exists but cannot be read (a directory without
    permission, a file under one) is added to ``unreadable`` (the CLI reports each as a GL000
    finding: never a silent pass); without the list it is a ConfigError."""
    out: List[str] = []
    seen = set()
    for raw in paths:
        if raw == "":
            raise ConfigError("empty path ''")
        p = Path(raw)
        try:
            exists, is_file = p.exists(), p.is_file()
        except OSError as exc:  # EACCES on a parent directory
            problem = f"cannot read file: {exc.strerror or exc}"
            if unreadable is None:
                raise ConfigError(f"{raw}: {problem}") from None
            unreadable.append((raw, problem))
            continue
        if not exists:
            raise ConfigError(f"path not found: {raw}")
        if is_file:
            skip = settings.is_excluded(raw) or _in_excluded_dir(raw, settings) or raw.endswith(".pyi")
            candidates = [] if skip else [raw]
        else:
            candidates = _walk(raw, settings, unreadable)
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
    except (ValueError, OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
        return False
    d = settings.root.resolve()
    for part in rel.parts[:-1]:
        d = d / part
        if settings.is_excluded(str(d)):
            return True
    return False


def _walk(top: str, settings: Settings, unreadable: Optional[List[Unreadable]] = None) -> List[str]:
    found: List[str] = []

    def failed(exc: OSError) -> None:
        where = os.path.normpath(exc.filename or top)
        problem = f"cannot read directory: {exc.strerror or exc}"
        if unreadable is None:
            raise ConfigError(f"{where}: {problem}")
        if not settings.is_excluded(where):
            unreadable.append((where, problem))

    for dirpath, dirnames, filenames in os.walk(top, onerror=failed):
        dirnames[:] = sorted(
            d for d in dirnames if not settings.is_excluded(os.path.join(dirpath, d))
        )
        for name in sorted(filenames):
            if name.endswith(EXTENSIONS):
                full = os.path.join(dirpath, name)
                if not settings.is_excluded(full):
                    found.append(os.path.normpath(full))
    return found
