"""Classes of the file and of the project: what the pass over definitions records of each
(``ClassInfo``), and the one walk over a class and its bases that every question about a class
goes through (``class_chain``)."""

from __future__ import annotations

from collections import deque
from typing import Any, Dict, Iterator, List, Optional, Tuple

import libcst as cst

from gradlint.model.names import dotted


class ClassInfo:
    """A class of this file (or of a module of the project it imports), from the pass over
    definitions: its node, methods, base names (the last part of each dotted base)."""

    __slots__ = ("node", "bases", "methods")

    def __init__(self, node: cst.ClassDef, bases: List[str]) -> None:
        self.node = node
        self.bases = bases
        self.methods: Dict[str, cst.FunctionDef] = {}

    @classmethod
    def of(cls, stmt: cst.ClassDef) -> "ClassInfo":
        """A class statement's record, methods still to fill (``class A(nn.Module, Mixin)``:
        bases ``Module``, ``Mixin``; keyword arguments such as ``metaclass=`` are no bases)."""
        return cls(stmt, [(dotted(b.value) or "").rsplit(".", 1)[-1] for b in stmt.bases if b.keyword is None])


def class_chain(classes: Dict[str, Any], name: str) -> Iterator[Tuple[str, Optional[ClassInfo]]]:
    """The class ``name`` and its bases, breadth first (the order a method or class attribute
    is looked up in, for the single inheritance and simple mixins the model reads), each name
    once: ``(name, info)``, with ``info`` None for a class the model cannot read (a base from
    torch, a library, or a module it did not resolve). Cycles end."""
    seen = set()
    todo = deque((name,))
    while todo:
        c = todo.popleft()
        if c in seen:
            continue
        seen.add(c)
        info = classes.get(c)
        yield c, info
        if info is not None:
            todo.extend(info.bases)
