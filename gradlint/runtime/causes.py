"""Finer cause lines for the core monitor's findings, read from the live frames and the source.

* A NumPy array written in place (``arr *= 2``) is invisible to torch: when the deep level finds
  a saved tensor changed behind autograd's back and an array made from it is still held by a
  variable, the write to that variable is the line to change.
* A leaf changed in place under another name (``scale = w`` late in a loop body, then
  ``scale.mul_(...)`` on the next iteration): the aliasing statement is the line to change.
* An in-place module (``nn.ReLU(inplace=True)``) inside a container such as ``nn.Sequential``
  runs in torch's code: the line to change is the module's construction in the user's file.

Each function returns None when the source does not show the cause; the finding then stays where
the monitor saw the op.
"""

from __future__ import annotations

import ast
import sys
from typing import Any, Optional, Tuple

from gradlint.runtime.attribution import display_path
from gradlint.runtime.sites import _own_nodes, _scope_of, _target_name, _tree, user_frames


def numpy_write_line(saved: Any) -> Optional[Tuple[str, int]]:
    """The last in-place write (``arr *= k``, ``arr[...] = v``) to a live NumPy array that shares
    memory with ``saved``, in the user's frames."""
    try:
        import numpy as np
        import torch
    except ImportError:  # pragma: no cover
        return None
    try:
        ptr = saved.untyped_storage().data_ptr()
        size = saved.untyped_storage().nbytes()
    except Exception:
        return None
    for frame in list(user_frames())[:4]:
        for name, value in list(frame.f_locals.items()):
            if not isinstance(value, np.ndarray) or isinstance(value, torch.Tensor):
                continue
            try:
                addr = value.__array_interface__["data"][0]
            except Exception:
                continue
            if not (ptr <= addr < ptr + max(size, 1)):
                continue
            line = _last_write(frame, name)
            if line is not None:
                return display_path(frame.f_code.co_filename), line
    return None


def _last_write(frame: Any, name: str) -> Optional[int]:
    tree = _tree(frame.f_code.co_filename)
    if tree is None:
        return None
    lines = []
    for node in _own_nodes(_scope_of(tree, frame)):
        if isinstance(node, ast.AugAssign) and _target_name(node.target) == name:
            lines.append(node.lineno)
        elif isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Subscript) and _target_name(t.value) == name for t in node.targets):
                lines.append(node.lineno)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript):
            if _target_name(node.target.value) == name:
                lines.append(node.lineno)
    lines = [ln for ln in lines if ln <= frame.f_lineno]
    return max(lines) if lines else None


def leaf_alias_line(t: Any) -> Optional[Tuple[str, int]]:
    """``name = other`` later in the innermost user function, where ``name`` is the variable the
    in-place op goes through and ``other`` holds the same leaf ``t`` under its own name."""
    frames = list(user_frames())[:1]
    if not frames:
        return None
    frame = frames[0]
    local = frame.f_locals
    aliases = [n for n, v in local.items() if v is t]
    if len(aliases) < 2:
        return None
    tree = _tree(frame.f_code.co_filename)
    if tree is None:
        return None
    best = None
    for node in _own_nodes(_scope_of(tree, frame)):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.lineno > frame.f_lineno
                and any(isinstance(tg, ast.Name) and tg.id in aliases and tg.id != node.value.id for tg in node.targets)):
            best = node.lineno if best is None else min(best, node.lineno)
    if best is None:
        return None
    return display_path(frame.f_code.co_filename), best


def inplace_module_line() -> Optional[Tuple[str, int]]:
    """The construction of the in-place module (``nn.ReLU(inplace=True)``) whose forward is
    running, in the user's function that called the container holding it."""
    try:
        import torch.nn as nn
    except ImportError:  # pragma: no cover
        return None
    frame = sys._getframe(1)
    module = None
    while frame is not None:
        obj = frame.f_locals.get("self")
        if isinstance(obj, nn.Module) and getattr(obj, "inplace", False):
            module = obj
            break
        frame = frame.f_back
    if module is None:
        return None
    frames = list(user_frames())[:1]
    if not frames:
        return None
    user = frames[0]
    # only inside a container (nn.Sequential, ModuleList, ...): called from the user's own forward,
    # the user's line that calls the module is the line to change already
    inside_container = False
    while frame is not None and frame is not user:
        obj = frame.f_locals.get("self")
        if isinstance(obj, nn.Module) and obj is not module:
            inside_container = True
        frame = frame.f_back
    if not inside_container:
        return None
    tree = _tree(user.f_code.co_filename)
    if tree is None:
        return None
    cls = type(module).__name__
    candidates = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if called != cls:
            continue
        if any(k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value is True for k in node.keywords):
            candidates.append(node.lineno)
    if not candidates:
        return None
    before = [ln for ln in candidates if ln <= user.f_lineno]
    line = max(before) if before else min(candidates)
    return display_path(user.f_code.co_filename), line
