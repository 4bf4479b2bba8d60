"""Instances that carry their attributes: ``Cls(...)`` of a class of the project whose
``__init__`` was walked at the construction (calls._construct) keeps, as a record (attributes by
name, as a dataclass's fields, containers.record), what that walk bound on ``self``; a method
walked with such an instance (or a dataclass) sees them as ``self.x``."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from gradlint.model.classes import class_chain
from gradlint.model.names import dotted, node_fact, subtree
from gradlint.model.values import INSTANCE, NAMED_PARAMS, PARAMS, Value


def instance_record(model: Any, name: str, obj: Value, bound: Dict[str, Value]) -> Value:
    """An instance of class ``name`` whose ``__init__`` was walked at its construction: it
    carries, as a record (attributes by name, as a dataclass's fields), what that walk bound on
    ``self``, for the attributes no other method of the class (or of its bases) binds; the
    others are the class's (``harvest``). Nothing is carried when a method sets attributes
    the model cannot name (``setattr(self, ...)``, ``self.__dict__``)."""
    others = _rebound_elsewhere(model, name)
    if others is None:
        return obj
    # (not a view of a module's parameters, `self.params = list(model.parameters())`: the live
    # list a trainer keeps for its optimizer and helpers is no value of the construction's)
    keys = tuple(k for k in bound if k not in others and bound[k].kind not in (PARAMS, NAMED_PARAMS))
    if not keys:
        return obj
    return Value(INSTANCE, node=obj.node, keys=keys, items=tuple(bound[k] for k in keys))


def record_state(model: Any, env: Dict[str, Value], receiver: Optional[Value], fn: cst.FunctionDef) -> None:
    """A method walked with an instance that carries its attributes (``instance_record``, a
    dataclass's fields): ``self.x`` holds them, for those no other method rebinds (what the
    caller bound on the object since, ``receiver_state``, comes first)."""
    if receiver is None or receiver.kind != INSTANCE or receiver.keys is None or not fn.params.params:
        return
    me = fn.params.params[0].name.value
    if env.get(me) is not receiver or not isinstance(receiver.node, str):
        return
    others = _rebound_elsewhere(model, receiver.node)
    if others is None:
        return
    for k, v in zip(receiver.keys, receiver.items):
        if isinstance(k, str) and k not in others:
            env.setdefault(me + "." + k, v)


def _rebound_elsewhere(model: Any, name: str) -> Optional[set]:
    """The attributes of ``self`` that a method other than ``__init__`` of class ``name`` or of
    its bases assigns; None when one assigns attributes by a name the model does not see."""
    out: set = set()
    for _c, info in class_chain(model.classes, name):
        if info is None:
            continue
        for fn in info.methods.values():
            dynamic, attrs = node_fact("self_attrs", fn, _self_attrs)
            if dynamic:
                return None
            out |= attrs
    return out


def _self_attrs(fn: Any) -> Tuple[bool, frozenset]:
    """Does ``fn`` bind attributes in a way the model does not see (``setattr``, ``__dict__``),
    and which attributes of its first parameter it assigns (none for ``__init__``)?"""
    me = fn.params.params[0].name.value if fn.params.params else None
    if me is None:
        return False, frozenset()
    init = fn.name.value == "__init__"
    out: set = set()
    for n in subtree(fn.body):
        t = type(n)
        if t is cst.Call and (dotted(n.func) or "") in ("setattr", "self.__dict__.update", "vars"):
            return True, frozenset()
        if t is cst.Attribute and n.attr.value == "__dict__":
            return True, frozenset()
        if init:
            continue
        targets: List[Any] = []
        if t is cst.Assign:
            targets = [x.target for x in n.targets]
        elif t in (cst.AugAssign, cst.AnnAssign):
            targets = [n.target]
        while targets:
            x = targets.pop()
            if isinstance(x, (cst.Tuple, cst.List)):
                targets.extend(e.value for e in x.elements)
            elif type(x) is cst.StarredElement:
                targets.append(x.value)
            elif type(x) is cst.Attribute and type(x.value) is cst.Name and x.value.value == me:
                out.add(x.attr.value)
    return False, frozenset(out)
