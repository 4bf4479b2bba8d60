"""``[tool.gradlint]`` (in the nearest ``pyproject.toml``, or ``gradlint.toml``) -> Settings.

Every key is validated; an error names the file and the key. CLI options override the file.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Dict, FrozenSet, List, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from gradlint.rule import Severity, code_table, expand_selector


class ConfigError(Exception):
    """A bad configuration file, option or rule code (exit status 2)."""


DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", ".gradlint_cache", "__pycache__", "build", "dist", "node_modules",
    "site-packages", ".eggs", "*.egg-info",
)

KEYS = {
    "select": "a list of rule codes or prefixes",
    "ignore": "a list of rule codes or prefixes",
    "extend-select": "a list of rule codes or prefixes",
    "per-file-ignores": "a table of glob -> list of codes",
    "exclude": "a list of glob patterns",
    "extend-exclude": "a list of glob patterns",
    "fail-on": '"error" or "warning"',
    "severity": 'a table of code -> "error" or "warning"',
}


@dataclass
class Settings:
    select: Optional[List[str]] = None
    ignore: List[str] = field(default_factory=list)
    extend_select: List[str] = field(default_factory=list)
    per_file_ignores: Dict[str, List[str]] = field(default_factory=dict)
    exclude: List[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    extend_exclude: List[str] = field(default_factory=list)
    fail_on: Severity = Severity.WARNING
    severity: Dict[str, Severity] = field(default_factory=dict)
    root: Path = field(default_factory=Path.cwd)  # the directory globs are relative to
    source: Optional[Path] = None  # the config file read, if any

    # -------------------------------------------------------------------- selection
    def unignore(self, selected: Any) -> List[str]:
        """``ignore`` without the codes (and prefixes) in ``selected``: what the command line's
        ``--select`` takes back from the configuration's ``ignore``."""
        chosen = set(_expand_all(selected))
        return [c for c in (self.ignore or []) if not set(_expand_all([c])) <= chosen]

    def selected_codes(self) -> FrozenSet[str]:
        table = code_table()  # the light list: no rule module imported when it is cached
        if self.select is None:
            codes = {c for c, on in table.items() if on}
        else:
            codes = set(_expand_all(self.select))
        codes |= set(_expand_all(self.extend_select))
        codes -= set(_expand_all(self.ignore))
        return frozenset(codes)

    def codes_for(self, path: str, selected: FrozenSet[str]) -> FrozenSet[str]:
        """``selected`` minus the per-file-ignores that match ``path``."""
        if not self.per_file_ignores:
            return selected
        rel = _relative(path, self.root)
        drop: set = set()
        for pattern, codes in self.per_file_ignores.items():
            if _glob_match(rel, pattern):
                drop |= set(_expand_all(codes))
        return selected - drop if drop else selected

    def is_excluded(self, path: str) -> bool:
        """A pattern without ``/`` matches the file or directory name; one with ``/`` matches
        the path relative to the configuration root (for paths inside it)."""
        name = os.path.basename(os.path.normpath(path))
        rel = _inside(path, self.root)
        for pattern in list(self.exclude) + list(self.extend_exclude):
            pat = pattern.strip().rstrip("/")
            if pat.startswith("./"):
                pat = pat[2:]
            if "/" not in pat:
                if fnmatch.fnmatchcase(name, pat):
                    return True
            elif rel is not None and _glob_match(rel, pat):
                return True
        return False


def _inside(path: str, root: Path) -> Optional[str]:
    try:
        return Path(path).resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
        return None


def _expand_all(selectors: List[str]) -> List[str]:
    out: List[str] = []
    for s in selectors:
        try:
            out.extend(expand_selector(s))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    return out


def _relative(path: str, root: Path) -> str:
    p = Path(path)
    try:
        p = p.resolve().relative_to(root.resolve())
    except (ValueError, OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
        pass
    return p.as_posix()


def _glob_match(rel: str, pattern: str) -> bool:
    pattern = pattern.strip()
    if pattern.startswith("./"):
        pattern = pattern[2:]
    if fnmatch.fnmatchcase(rel, pattern):
        return True
    if pattern.endswith("/**") and (rel + "/").startswith(pattern[:-2]):
        return True
    if "/" not in pattern:
        return fnmatch.fnmatchcase(PurePosixPath(rel).name, pattern)
    # ``**/`` may match nothing
    return "**/" in pattern and fnmatch.fnmatchcase(rel, pattern.replace("**/", ""))


# ------------------------------------------------------------------------ reading
def _is_file(path: Path) -> bool:
    """False also where a directory on the way cannot be searched (a parent without permission:
    there is no configuration of ours to find there)."""
    try:
        return path.is_file()
    except OSError:
        return False


def find_config(start: Path) -> Optional[Path]:
    """The nearest gradlint.toml, or pyproject.toml with a [tool.gradlint] table."""
    d = start.resolve()
    for parent in [d] + list(d.parents):
        g = parent / "gradlint.toml"
        if _is_file(g):
            return g
        p = parent / "pyproject.toml"
        if _is_file(p):
            try:
                raw = p.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                # a pyproject.toml that cannot be read or is not UTF-8 (TOML's encoding) may hold
                # our settings: an error (load_settings reports it in one line), never silently
                # the defaults
                return p
            try:
                data = tomllib.loads(raw)
            except tomllib.TOMLDecodeError:
                # a broken file that seems meant for us is reported (by load_settings), not
                # silently skipped in favour of a config further up
                if "gradlint" in raw:
                    return p
                continue
            if isinstance(data.get("tool"), dict) and "gradlint" in data["tool"]:
                return p
    return None


def load_settings(config: Optional[Path] = None, start: Optional[Path] = None) -> Settings:
    path = config if config is not None else find_config(start or Path.cwd())
    if path is None:
        return Settings(root=(start or Path.cwd()).resolve())
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("gradlint", {}) if isinstance(data.get("tool"), dict) else {}
    else:
        table = data.get("tool", {}).get("gradlint", data) if isinstance(data.get("tool"), dict) else data
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.gradlint] must be a table")
    return settings_from_table(table, path)


def _str_list(table: Dict[str, Any], key: str, where: str) -> List[str]:
    v = table[key]
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ConfigError(f"{where}: `{key}` must be {KEYS[key]}")
    return list(v)


def _severity(value: Any, where: str, key: str) -> Severity:
    try:
        return Severity(str(value).lower()) if isinstance(value, str) else Severity(value)
    except ValueError:
        raise ConfigError(f'{where}: `{key}` must be "error" or "warning", not {value!r}') from None


def settings_from_table(table: Dict[str, Any], path: Path) -> Settings:
    where = str(path)
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key `{unknown[0]}` in [tool.gradlint] (known: {', '.join(KEYS)})")
    s = Settings(root=path.parent.resolve(), source=path)
    if "select" in table:
        s.select = _str_list(table, "select", where)
    if "ignore" in table:
        s.ignore = _str_list(table, "ignore", where)
    if "extend-select" in table:
        s.extend_select = _str_list(table, "extend-select", where)
    if "exclude" in table:
        s.exclude = _str_list(table, "exclude", where)
    if "extend-exclude" in table:
        s.extend_exclude = _str_list(table, "extend-exclude", where)
    if "fail-on" in table:
        s.fail_on = _severity(table["fail-on"], where, "fail-on")
    if "per-file-ignores" in table:
        pfi = table["per-file-ignores"]
        if not isinstance(pfi, dict):
            raise ConfigError(f"{where}: `per-file-ignores` must be {KEYS['per-file-ignores']}")
        for glob, codes in pfi.items():
            if isinstance(codes, str):
                codes = [codes]
            if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
                raise ConfigError(f"{where}: `per-file-ignores.{glob}` must be a list of codes")
            s.per_file_ignores[glob] = list(codes)
    if "severity" in table:
        sev = table["severity"]
        if not isinstance(sev, dict):
            raise ConfigError(f"{where}: `severity` must be {KEYS['severity']}")
        for code, value in sev.items():
            if code.upper() not in code_table():
                raise ConfigError(f"{where}: unknown rule code `{code}` in `severity`")
            s.severity[code.upper()] = _severity(value, where, f"severity.{code}")
    # validate every code now, so a typo is an error even if it would select nothing
    for key in ("select", "ignore", "extend-select"):
        if key in table:
            try:
                _expand_all(_str_list(table, key, where))
            except ConfigError as exc:
                raise ConfigError(f"{where}: `{key}`: {exc}") from None
    for glob, codes in s.per_file_ignores.items():
        try:
            _expand_all(codes)
        except ConfigError as exc:
            raise ConfigError(f"{where}: `per-file-ignores.{glob}`: {exc}") from None
    return s
