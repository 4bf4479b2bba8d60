"""GL305 at its cause: where did the tensor given to ``backward()`` lose its graph?

Torch raises "element 0 of tensors does not require grad" at ``backward()``; the line to change
is where the graph was lost: a statement under ``torch.no_grad()``/``inference_mode()``, a
``.detach()``/``.data``, a non-differentiable op (``argmax``), or a call of a function, method or
module whose body runs under ``@torch.no_grad()``. From the live frame of the ``backward()`` the
statement that bound the root's variable is read (``ast``), then, through the variables it reads
that hold tensors without a graph, the statements that bound those, every binding of each name
(a later binding in a loop body counts: the value arrives on the next iteration). The first
statement that shows one of the causes is the finding's location; when none does, the finding
stays at ``backward()``.
"""

from __future__ import annotations

import ast
import inspect
from types import FrameType
from typing import Any, List, Optional, Set, Tuple

from gradlint.runtime.sites import _binds, _own_nodes, _scope_of, _tree, enclosing_with, user_frames

__all__ = ["graph_lost_at"]

_NO_GRAD = ("no_grad", "inference_mode", "set_grad_enabled")
_CUTS = frozenset({"detach", "argmax", "argmin", "argsort"})
_MAX_DEPTH = 6


def _is_tensor_without_graph(v: Any) -> bool:
    try:
        import torch

        return isinstance(v, torch.Tensor) and not v.requires_grad and v.is_floating_point()
    except Exception:
        return False


def _statements(frame: FrameType, name: str) -> List[ast.stmt]:
    tree = _tree(frame.f_code.co_filename)
    if tree is None:
        return []
    out = []
    for node in _own_nodes(_scope_of(tree, frame)):
        targets: List[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and getattr(node, "value", None) is not None:
            targets = [node.target]
        if any(_binds(t, name) for t in targets):
            out.append(node)
    return sorted(out, key=lambda n: n.lineno)


def _statement_at(frame: FrameType) -> Optional[ast.stmt]:
    tree = _tree(frame.f_code.co_filename)
    if tree is None:
        return None
    best = None
    for node in _own_nodes(_scope_of(tree, frame)):
        if isinstance(node, ast.stmt) and node.lineno <= frame.f_lineno <= (node.end_lineno or node.lineno):
            if best is None or node.lineno >= best.lineno:
                best = node
    return best


def _decorated_no_grad(fn: Any) -> Optional[Tuple[str, int]]:
    """``(file, line)`` of the last ``return`` of ``fn`` when ``fn`` runs under ``@torch.no_grad()``
    / ``@torch.inference_mode()`` or returns from inside ``with torch.no_grad():``."""
    fn = inspect.unwrap(fn) if callable(fn) else fn
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    tree = _tree(code.co_filename)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name != code.co_name:
            continue
        if code.co_firstlineno not in [node.lineno] + [d.lineno for d in node.decorator_list]:
            continue
        returns = [n for n in _own_nodes(node) if isinstance(n, ast.Return) and n.value is not None]
        decorated = any(_called_name(d) in _NO_GRAD for d in node.decorator_list)
        for ret in reversed(returns):
            if decorated or _inside_no_grad(node, ret.lineno):
                return code.co_filename, ret.lineno
        return None
    return None


def _inside_no_grad(scope: ast.AST, line: int) -> bool:
    for node in _own_nodes(scope):
        if isinstance(node, (ast.With, ast.AsyncWith)) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if any(_called_name(i.context_expr) in _NO_GRAD for i in node.items):
                return True
    return False


def _called_name(expr: ast.AST) -> str:
    func = expr.func if isinstance(expr, ast.Call) else expr
    if isinstance(func, ast.Attribute):
        return func.attr
    return getattr(func, "id", "")


def _callee(frame: FrameType, call: ast.Call) -> Any:
    func = call.func
    value: Any = None
    if isinstance(func, ast.Name):
        value = frame.f_locals.get(func.id, frame.f_globals.get(func.id))
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        owner = frame.f_locals.get(func.value.id, frame.f_globals.get(func.value.id))
        if owner is not None and not inspect.ismodule(owner):
            value = getattr(owner, func.attr, None)
    if value is None:
        return None
    forward = getattr(type(value), "forward", None)
    if forward is not None and hasattr(value, "_modules"):  # an nn.Module: its forward runs
        return forward
    return value


def _cause(frame: FrameType, stmt: ast.stmt) -> Optional[Tuple[str, int, str]]:
    scope_tree = _tree(frame.f_code.co_filename)
    if scope_tree is None:
        return None
    if enclosing_with(frame, stmt.lineno, _NO_GRAD) is not None:
        return frame.f_code.co_filename, stmt.lineno, "computed under torch.no_grad()/inference_mode()"
    value = getattr(stmt, "value", None)
    if value is None:
        return None
    for node in ast.walk(value):
        if isinstance(node, ast.Attribute) and node.attr == "data":
            return frame.f_code.co_filename, stmt.lineno, "`.data` has no graph"
        if isinstance(node, ast.Call):
            name = _called_name(node)
            if name in _CUTS:
                return frame.f_code.co_filename, stmt.lineno, f"`{name}()` cuts the graph"
            try:
                site = _decorated_no_grad(_callee(frame, node))
            except Exception:
                site = None
            if site is not None:
                return site[0], site[1], "runs under torch.no_grad() (called from here)"
    return None


def _trace(frame: FrameType, names: List[str]) -> Optional[Tuple[str, int, str]]:
    seen: Set[str] = set()
    todo = list(names)
    depth = 0
    while todo and depth < _MAX_DEPTH:
        depth += 1
        nxt: List[str] = []
        for name in todo:
            if name in seen:
                continue
            seen.add(name)
            stmts = _statements(frame, name)
            before = [s for s in stmts if s.lineno <= frame.f_lineno]
            after = [s for s in stmts if s.lineno > frame.f_lineno]
            for stmt in list(reversed(before)) + after:
                cause = _cause(frame, stmt)
                if cause is not None:
                    return cause
            for stmt in stmts:
                for node in ast.walk(getattr(stmt, "value", stmt)):
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                        if _is_tensor_without_graph(frame.f_locals.get(node.id)):
                            nxt.append(node.id)
        todo = nxt
    return None


def graph_lost_at(root: Any) -> Optional[Tuple[str, int, str]]:
    """``(file, line, why)`` of the statement where ``root`` (given to ``backward()``) lost its
    graph, or None when the source does not show it."""
    for frame in list(user_frames())[:4]:
        names = [n for n, v in list(frame.f_locals.items()) if v is root]
        stmt = _statement_at(frame)
        if stmt is not None:
            cause = _cause(frame, stmt) if not names else None
            if cause is not None:
                return cause
            for node in ast.walk(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in names:
                    if _is_tensor_without_graph(frame.f_locals.get(node.id)):
                        names.append(node.id)
        if not names:
            continue
        cause = _trace(frame, names)
        if cause is not None:
            return cause
    return None
