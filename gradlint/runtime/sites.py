"""Where the cause is: from a live value back to the statement of the user's code that made it.

Torch names the symptom (the ``backward()`` that failed, the op that could not save a tensor);
the line to change is usually where a value was made: the features built before the loop, the
batch created under ``inference_mode``, the model constructed there. At the moment a finding is
recorded the user's frames are still alive, so the monitor can ask them which local variable (or
attribute of ``self``) holds the value, and the source which statement last bound that name.

Used only when a finding is recorded, never on the hot path. Reads source files with ``ast``
(cached per file and modification time); never imports or runs anything.
"""

from __future__ import annotations

import ast
import linecache
import os
from types import FrameType
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from gradlint.runtime.attribution import _skip_prefixes, _skipped, display_path, user_frame

__all__ = ["user_frames", "find_holders", "binding_line", "enclosing_with", "Holder"]

Holder = Tuple[FrameType, str, Any]  # the frame, the name ("feats", "self.hidden"), the value


def user_frames(limit: int = 8) -> Iterator[FrameType]:
    """The user's frames, innermost first (frames of torch, NumPy and gradlint skipped)."""
    frame = user_frame(1)
    seen = 0
    skip = _skip_prefixes()
    while frame is not None and seen < limit:
        name = frame.f_code.co_filename
        if not _skipped(name, skip):
            seen += 1
            yield frame
        frame = frame.f_back


def _values(value: Any, name: str, depth: int = 0) -> Iterator[Tuple[str, Any]]:
    yield name, value
    if depth >= 1:
        return
    if isinstance(value, (list, tuple)) and len(value) <= 64:
        for i, v in enumerate(value):
            yield from _values(v, f"{name}[{i}]", depth + 1)
    elif isinstance(value, dict) and len(value) <= 64:
        for k, v in list(value.items()):
            if isinstance(k, (str, int)):
                yield from _values(v, f"{name}[{k!r}]", depth + 1)


def find_holders(frames: List[FrameType], match: Callable[[Any], bool], *, attrs: bool = True,
                 depth: int = 1) -> List[Holder]:
    """Locals of ``frames`` (and attributes of their ``self``) whose value, or an element of it
    (``depth`` 1; 0: the value only), satisfies ``match``; in frame order (innermost first)."""
    start = 1 - depth
    out: List[Holder] = []
    for frame in frames:
        try:
            items = list(frame.f_locals.items())
        except Exception:  # pragma: no cover
            continue
        for name, value in items:
            for label, v in _values(value, name, start):
                try:
                    if match(v):
                        out.append((frame, label, v))
                        break
                except Exception:
                    pass
        if attrs:
            obj = frame.f_locals.get("self")
            d = getattr(obj, "__dict__", None)
            if isinstance(d, dict):
                for name, value in list(d.items()):
                    for label, v in _values(value, f"self.{name}", start):
                        try:
                            if match(v):
                                out.append((frame, label, v))
                                break
                        except Exception:
                            pass
    return out


# ------------------------------------------------------------------------------ source
_TREES: Dict[str, Tuple[float, Optional[ast.Module]]] = {}


def _tree(filename: str) -> Optional[ast.Module]:
    try:
        mtime = os.stat(filename).st_mtime
    except OSError:
        mtime = -1.0
    hit = _TREES.get(filename)
    if hit is not None and hit[0] == mtime:
        return hit[1]
    lines = linecache.getlines(filename)
    tree: Optional[ast.Module] = None
    if lines:
        try:
            tree = ast.parse("".join(lines))
        except (SyntaxError, ValueError):
            tree = None
    _TREES[filename] = (mtime, tree)
    return tree


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _scope_of(tree: ast.Module, frame: FrameType) -> ast.AST:
    """The function definition the frame runs (the module for module-level code)."""
    first = frame.f_code.co_firstlineno
    name = frame.f_code.co_name
    if name == "<module>":
        return tree
    best: ast.AST = tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if start == first or node.lineno == first:
                return node
            best = node if best is tree else best
    return best


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """Nodes of ``scope`` outside nested functions and classes."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _SCOPES):
            stack.extend(ast.iter_child_nodes(node))


def _binds(target: ast.AST, name: str) -> bool:
    if isinstance(target, ast.Name):
        return target.id == name
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        return f"{target.value.id}.{target.attr}" == name
    if isinstance(target, (ast.Tuple, ast.List)):
        return any(_binds(t, name) for t in target.elts)
    if isinstance(target, ast.Starred):
        return _binds(target.value, name)
    return False


def _reads(node: ast.AST, name: str) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id == name and isinstance(sub.ctx, ast.Load):
            return True
        if (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name)
                and f"{sub.value.id}.{sub.attr}" == name and isinstance(sub.ctx, ast.Load)):
            return True
    return False


def bindings(frame: FrameType, name: str) -> List[Tuple[int, bool]]:
    """``(line, reads_itself)`` of each statement of the frame's function that binds ``name``
    (``x = ...``, ``x += ...``, ``for x in``, ``with ... as x``, ``self.x = ...``), in source order.
    ``reads_itself``: the bound value is computed from the name's previous value (carried state:
    ``h = rnn(x, h)``, ``total += loss``)."""
    tree = _tree(frame.f_code.co_filename)
    if tree is None:
        return []
    base = name.split("[", 1)[0]
    out: List[Tuple[int, bool]] = []
    for node in _own_nodes(_scope_of(tree, frame)):
        if isinstance(node, ast.Assign) and any(_binds(t, base) for t in node.targets):
            out.append((node.lineno, _reads(node.value, base)))
        elif isinstance(node, ast.AugAssign) and _binds(node.target, base):
            out.append((node.lineno, True))
        elif isinstance(node, ast.AnnAssign) and node.value is not None and _binds(node.target, base):
            out.append((node.lineno, _reads(node.value, base)))
        elif isinstance(node, (ast.For, ast.AsyncFor)) and _binds(node.target, base):
            out.append((node.lineno, False))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None and _binds(item.optional_vars, base):
                    out.append((node.lineno, False))
        elif isinstance(node, ast.NamedExpr) and _binds(node.target, base):
            out.append((node.lineno, _reads(node.value, base)))
    out.sort()
    return out


def binding_line(frame: FrameType, name: str, *, before: Optional[int] = None) -> Optional[int]:
    """The line of the last statement that bound ``name`` in the frame's function at or before
    ``before`` (default: the frame's current line); None when the name was bound elsewhere (a
    parameter, a global)."""
    limit = frame.f_lineno if before is None else before
    lines = [line for line, _ in bindings(frame, name) if line <= limit]
    return lines[-1] if lines else None


def enclosing_with(frame: FrameType, line: int, names: Tuple[str, ...]) -> Optional[int]:
    """The line of the innermost ``with`` statement around ``line`` in the frame's function whose
    context expression calls one of ``names`` (``inference_mode``, ``no_grad``)."""
    tree = _tree(frame.f_code.co_filename)
    if tree is None:
        return None
    best = None
    for node in _own_nodes(_scope_of(tree, frame)):
        if isinstance(node, (ast.With, ast.AsyncWith)) and node.lineno <= line <= (node.end_lineno or node.lineno):
            for item in node.items:
                expr = item.context_expr
                func = expr.func if isinstance(expr, ast.Call) else expr
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called in names and (best is None or node.lineno > best):
                    best = node.lineno
    return best


def location(frame: FrameType, line: Optional[int] = None) -> Tuple[str, int]:
    return display_path(frame.f_code.co_filename), frame.f_lineno if line is None else line


_EXPECTING = ("raises", "assertRaises", "assertRaisesRegex")


def error_expected() -> bool:
    """The current call runs inside ``with pytest.raises(...)`` (or ``self.assertRaises``), or in
    the body of ``try: ... except RuntimeError:`` whose handler does not re-raise, in one of the
    user's frames: the program expects torch's error (a test or a tutorial of that error)."""
    for frame in user_frames():
        try:
            if enclosing_with(frame, frame.f_lineno, _EXPECTING) is not None or _caught(frame):
                return True
        except Exception:
            pass
    return False


def _caught(frame: FrameType) -> bool:
    tree = _tree(frame.f_code.co_filename)
    if tree is None:
        return False
    line = frame.f_lineno
    for node in _own_nodes(_scope_of(tree, frame)):
        if not isinstance(node, ast.Try) or not node.body:
            continue
        if not (node.body[0].lineno <= line <= (node.body[-1].end_lineno or node.body[-1].lineno)):
            continue
        for h in node.handlers:
            types = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type] if h.type is not None else []
            named = [t.attr if isinstance(t, ast.Attribute) else getattr(t, "id", "") for t in types]
            if "RuntimeError" in named and not any(isinstance(n, ast.Raise) for n in ast.walk(h)):
                return True
    return False


_GROWS = frozenset({"append", "extend", "insert", "update", "setdefault", "add"})


def _target_name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return ""


def _unsubscripted(node: ast.AST) -> ast.AST:
    """``history`` of ``history["loss"]`` (a list held in a dict grows its dict)."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return node


def growth_lines(frame: FrameType, name: str) -> List[int]:
    """Lines of the frame's function that add to the container or running value ``name``:
    ``name.append(...)`` (extend, insert, update, ...), ``name[k].append(...)``, ``name[k] = ...``, ``name[k] += ...``,
    ``name += ...`` and ``name = name + ...``; in source order."""
    tree = _tree(frame.f_code.co_filename)
    if tree is None:
        return []
    base = name.split("[", 1)[0]
    out: List[int] = []
    for node in _own_nodes(_scope_of(tree, frame)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _GROWS
                and _target_name(_unsubscripted(node.func.value)) == base):
            out.append(node.lineno)
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and _target_name(t.value) == base:
                    out.append(node.lineno)
                elif _target_name(t) == base and (isinstance(node, ast.AugAssign) or _reads(node.value, base)):
                    out.append(node.lineno)
    return sorted(set(out))
