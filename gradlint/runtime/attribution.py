"""Where a finding happened: the innermost frame outside torch, NumPy, gradlint and the
standard library.

Called only when a finding (or a candidate that may become one) is about to be recorded, never
on the hot path of the monitor.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from types import FrameType, FunctionType
from typing import Any, Optional, Tuple


def _package_dir(name: str) -> Optional[str]:
    mod = sys.modules.get(name)
    f = getattr(mod, "__file__", None)
    return os.path.dirname(os.path.abspath(f)) + os.sep if f else None


_SKIP: Optional[Tuple[str, ...]] = None
# frozen stdlib modules, and the code torch.fx generates (torch.compile's graphs run as
# "<eval_with_key>.N"): the finding belongs to the user's line that called into them
_GENERATED = ("<frozen ", "<eval_with_key>")


def _skip_prefixes() -> Tuple[str, ...]:
    global _SKIP
    if _SKIP is None:
        dirs = [_package_dir(n) for n in ("torch", "numpy", "gradlint")]
        _SKIP = tuple(d for d in dirs if d)
    return _SKIP


def _stdlib_dirs() -> Tuple[str, ...]:
    out = []
    for key in ("stdlib", "platstdlib"):
        try:
            d = sysconfig.get_paths()[key]
        except (KeyError, Exception):
            continue
        if d:
            out.append(os.path.abspath(d) + os.sep)
    return tuple(dict.fromkeys(out))


_STDLIB = _stdlib_dirs()
_PACKAGES = ("site-packages", "dist-packages")


def _skipped(name: str, skip: Tuple[str, ...]) -> bool:
    """Torch, NumPy, gradlint, generated code and the standard library (``copy.deepcopy``,
    ``contextlib``, ``functools``), but not the packages installed next to it."""
    if name.startswith(skip) or name.startswith(_GENERATED):
        return True
    if _STDLIB and name.startswith(_STDLIB):
        return not any(p in name for p in _PACKAGES)
    return False


_SKIPPED_FILE: "dict[str, bool]" = {}  # filename -> _skipped(filename): a frame walk per event


def skipped_file(name: str) -> bool:
    """``_skipped`` with the answer kept per file name."""
    skipped = _SKIPPED_FILE.get(name)
    if skipped is None:
        skipped = _SKIPPED_FILE[name] = _skipped(name, _skip_prefixes())
    return skipped


def user_frame(depth: int = 1) -> Optional[FrameType]:
    """The innermost frame whose file is outside torch, NumPy, gradlint and the standard library
    (None when there is none, for example on an autograd worker thread)."""
    frame: Optional[FrameType] = sys._getframe(depth)
    known = _SKIPPED_FILE
    while frame is not None:
        name = frame.f_code.co_filename
        skipped = known.get(name)
        if skipped is None:
            skipped = known[name] = _skipped(name, _skip_prefixes())
        if not skipped:
            return frame
        frame = frame.f_back
    return None


def where_raw(depth: int = 1) -> Tuple[str, int]:
    """``(file, line)`` of ``user_frame`` without making the path relative (cheap: for records
    that may never be reported; pass the path through ``display_path`` when reporting)."""
    frame = user_frame(depth + 1)
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("<unknown>", 0)


def where(depth: int = 1) -> Tuple[str, int]:
    """``(path, line)`` of ``user_frame``, the path relative to the current directory when below
    it (``("<unknown>", 0)`` when there is none)."""
    path, line = where_raw(depth + 1)
    return display_path(path), line


def _trampoline(f, a, k): return f(*a, **k)  # noqa: E704  (one line: the call's line is the first)


_TRAMPOLINES: "dict[Tuple[str, int, int], FunctionType]" = {}


def call_as_user(func: Any, args: Any, kwargs: Any) -> Any:
    """Call ``func`` from a frame that has the user's file, line and globals, so that the
    warnings torch raises from C++ (which name the calling Python frame) point at the user's
    line and use the user's module's once-per-location registry, exactly as without the monitor.
    Used only for calls that are findings (it costs a frame walk)."""
    frame = user_frame(2)
    if frame is None:
        return func(*args, **kwargs)
    key = (frame.f_code.co_filename, frame.f_lineno, id(frame.f_globals))
    fn = _TRAMPOLINES.get(key)
    if fn is None or fn.__globals__ is not frame.f_globals:
        code = _trampoline.__code__.replace(co_filename=key[0], co_firstlineno=key[1], co_name=frame.f_code.co_name)
        fn = _TRAMPOLINES[key] = FunctionType(code, frame.f_globals)
    return fn(func, args, kwargs)


def display_path(name: str) -> str:
    """A path relative to the current directory when the file is below it, else as given."""
    if name.startswith("<"):
        return name
    try:
        absolute = os.path.abspath(name)
        rel = os.path.relpath(absolute, os.getcwd())
    except ValueError:  # another drive (Windows)
        return name
    return absolute if rel.startswith(os.pardir) else rel
