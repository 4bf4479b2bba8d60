"""What a method binds on its own object (``self.x = ...``): whether a call of it changes the
object, so that it is walked where it is called (objects.py, walk_calls.py)."""

from __future__ import annotations

from typing import Any, Dict, List

import libcst as cst

from gradlint.model.names import node_children


def binds_own_attributes(fn: cst.FunctionDef, cache: Dict[int, bool], computed: bool = False) -> bool:
    """Does method ``fn`` bind attributes of its first parameter to what a call returns
    (``self.head = nn.Linear(...)``)? A call of it changes the object (``self.build()``), so
    it is worth walking where it is called. ``computed``: to any value that is no literal
    (``self.activity = y`` in ``forward``: what the call computed stays on the object).
    (``cache``: the answers for this file's functions, by id.)"""
    if computed:
        return _stores_values(fn, cache)
    got = cache.get(id(fn))
    if got is None:
        me = fn.params.params[0].name.value if fn.params.params else None
        got = False
        stack: List[Any] = [fn.body] if me is not None else []
        while stack and not got:
            n = stack.pop()
            if isinstance(n, (cst.Assign, cst.AnnAssign)):
                targets = [t.target for t in n.targets] if type(n) is cst.Assign else [n.target]
                got = type(n.value) is cst.Call and any(
                    type(t) is cst.Attribute and type(t.value) is cst.Name and t.value.value == me
                    for t in targets)
            elif not isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.BaseExpression)):
                stack.extend(node_children(n))
        cache[id(fn)] = got
    return got


_LITERALS = (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString,
             cst.FormattedString)


def _stores_values(fn: cst.FunctionDef, cache: Dict[int, bool]) -> bool:
    """Does ``fn`` bind an attribute of its first parameter to a value that is no literal
    (``self.activity = y``, ``self.cache = self.proj(x)``; not ``self.count = 0``, ``self.x = None``)?
    (cached under the negative id: the answers of ``binds_own_attributes`` share the cache)"""
    got = cache.get(-id(fn))
    if got is None:
        me = fn.params.params[0].name.value if fn.params.params else None
        got = False
        stack: List[Any] = [fn.body] if me is not None else []
        while stack and not got:
            n = stack.pop()
            if isinstance(n, (cst.Assign, cst.AnnAssign)) and n.value is not None:
                targets = [t.target for t in n.targets] if type(n) is cst.Assign else [n.target]
                literal = isinstance(n.value, _LITERALS) or (
                    type(n.value) is cst.Name and n.value.value in ("None", "True", "False"))
                got = not literal and any(
                    type(t) is cst.Attribute and type(t.value) is cst.Name and t.value.value == me
                    for t in targets)
            elif not isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.BaseExpression)):
                stack.extend(node_children(n))
        cache[-id(fn)] = got
    return got


def own_submodule_calls(fn: cst.FunctionDef, me: str) -> List[str]:
    """The attributes ``fn`` calls on its first parameter (``self.merge(h)``: ``merge``)."""
    out: List[str] = []
    stack: List[Any] = [fn.body]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if type(n) is cst.Call and type(n.func) is cst.Attribute and type(n.func.value) is cst.Name \
                and n.func.value.value == me and n.func.attr.value not in out:
            out.append(n.func.attr.value)
        stack.extend(node_children(n))
    return out
