"""Modules frozen as a whole, flow-sensitively: after ``m.requires_grad_(False)`` or a loop
that sets ``requires_grad = False`` on every parameter of ``m`` (``for p in m.parameters()``),
the name ``m`` holds the module with ``params=False``: calling it is differentiable in its
inputs only, and so is calling any of its submodules (``m.encoder(x)``, ``self.conv(x)`` in a
``forward`` walked for it). A construction ``Cls(...)`` whose ``__init__`` left ``self`` frozen
so (its last word on its parameters) makes an instance that is frozen. Making the module's
parameters require grad again, or binding something that may hold parameters on it after the
freeze (``self.head = nn.Linear(...)``), undoes it. (The scope-based ``frozen_keys`` of
objects.py are not flow-sensitive; these are.)"""

from __future__ import annotations

from typing import Any, Dict, Optional

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.classes import class_chain
from gradlint.model.names import dotted, subtree
from gradlint.model.syntax import const_bool
from gradlint.model.values import MODULE, TENSOR, TUPLE, UNKNOWN, Value


def with_params(module: Value, params: Optional[bool]) -> Value:
    """``module`` with its parameters frozen (False) or free again."""
    return Value(MODULE, params=params, act=module.act, inplace=module.inplace, node=module.node,
                 items=module.items, keys=module.keys, made=module.made, made_node=module.made_node)


def unfrozen(module: Value) -> Value:
    """A frozen module whose parameters may require grad again: a torch.nn layer's are
    parameters again, a container's or a class's are unknown."""
    layer = isinstance(module.node, str) and module.node in api.PARAM_MODULES and not module.items
    return with_params(module, True if layer else None)


def owner_frozen(env: Dict[str, Value], key: Optional[str]) -> bool:
    """Is a module that ``key`` belongs to (``model`` for ``model.encoder``, ``self`` for
    ``self.conv``) frozen as a whole here?"""
    if key is None:
        return False
    cut = len(key)
    while True:
        cut = max(key.rfind(".", 0, cut), key.rfind("[", 0, cut))
        if cut <= 0:
            return False
        v = env.get(key[:cut])
        if v is None:
            continue
        if v.kind != MODULE:
            return False  # (a plain list or object holding layers: they are no submodules)
        if v.params is False:
            return True


def may_hold_parameters(v: Value) -> bool:
    """May ``v``, bound as an attribute of a module, hold trainable parameters (a layer, an
    ``nn.Parameter``, something the model does not know), unlike a number, a computed tensor or
    a frozen module?"""
    if v.kind == MODULE:
        return v.params is not False
    if v.kind == TENSOR:
        return bool(v.is_param) and v.rg is not False
    if v.kind == TUPLE:
        return not v.items or any(may_hold_parameters(i) for i in v.items)
    return v.kind == UNKNOWN


def loop_sets_requires_grad(node: cst.For) -> Optional[bool]:
    """``for p in m.parameters(): p.requires_grad = flag`` (or ``p.requires_grad_(flag)``,
    ``for n, p in m.named_parameters()``): False when a statement of the body itself (not under
    a condition) freezes the loop's parameter and nothing leaves the body early (every
    parameter is frozen after the loop); True when the body may make one require grad again;
    None when it does neither."""
    target = node.target
    if type(target) is cst.Tuple and len(target.elements) == 2:
        target = target.elements[1].value
    if type(target) is not cst.Name:
        return None
    name = target.value
    flags = []
    top = set()
    for stmt in node.body.body:
        if type(stmt) is cst.SimpleStatementLine:
            top.update(id(s) for s in stmt.body)
    early = False
    for n in subtree(node.body):
        t = type(n)
        if t in (cst.Break, cst.Continue, cst.Return, cst.Raise):
            early = True
        flag: Any = "none"
        if t is cst.Assign and len(n.targets) == 1:
            tg = n.targets[0].target
            if type(tg) is cst.Attribute and tg.attr.value == "requires_grad" and dotted(tg.value) == name:
                flag = const_bool(n.value)
        elif t is cst.Expr and type(n.value) is cst.Call and dotted(n.value.func) == name + ".requires_grad_":
            args = n.value.args
            flag = True if not args else const_bool(args[0].value)
        if flag == "none":
            continue
        flags.append((flag, id(n) in top))
    if any(f is not False for f, _ in flags):
        return True
    if not early and any(at_top for _, at_top in flags):
        return False
    return None


def unfreezes_elsewhere(model: Any, name: str) -> bool:
    """Does a method of class ``name`` (or of its bases) other than ``__init__`` set
    ``requires_grad`` (``unfreeze()``): then a freeze in ``__init__`` is not the instance's
    last word on its parameters."""
    for _c, info in class_chain(model.classes, name):
        if info is None:
            continue
        for mname, fn in info.methods.items():
            if mname == "__init__":
                continue
            for n in subtree(fn.body):
                t = type(n)
                if t is cst.Call and type(n.func) is cst.Attribute and n.func.attr.value == "requires_grad_":
                    return True
                if t is cst.Assign and any(type(x.target) is cst.Attribute and x.target.attr.value == "requires_grad"
                                           for x in n.targets):
                    return True
    return False


def freeze_after_loop(model: Any, owner: str, node: cst.For) -> None:
    """After ``for p in owner.parameters(): ...``: ``owner`` is frozen as a whole when the body
    freezes every parameter, free again when it may make one require grad."""
    cur = model.env.get(owner)
    if cur is None or cur.kind != MODULE:
        return
    flag = loop_sets_requires_grad(node)
    # (the same object: what is bound on it, `self.conv`, stays)
    if flag is False and cur.params is not False:
        model.env[owner] = with_params(cur, False)
    elif flag is True and cur.params is False:
        model.env[owner] = unfrozen(cur)


def attribute_bound(env: Dict[str, Value], key: str, value: Value) -> None:
    """``owner.attr = value`` binds something that may hold parameters on a module frozen as a
    whole: its parameters are no longer all frozen."""
    cut = max(key.rfind("."), key.rfind("["))
    if cut <= 0:
        return
    owner = env.get(key[:cut])
    if owner is not None and owner.kind == MODULE and owner.params is False and may_hold_parameters(value):
        env[key[:cut]] = unfrozen(owner)
