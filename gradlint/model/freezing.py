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

from typing import Any, Dict, List, Optional

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
    elif flag is True:
        unfreeze_parts(model, owner)
        if cur.params is False:
            model.env[owner] = unfrozen(cur)


def attribute_bound(env: Dict[str, Value], key: str, value: Value) -> List[str]:
    """``owner.attr = value`` binds something that may hold parameters on a module frozen as a
    whole: its parameters are no longer all frozen, but those of the parts bound on it before
    (``self.body``, frozen with it) still are: the keys of the parts it froze so."""
    cut = max(key.rfind("."), key.rfind("["))
    if cut <= 0:
        return []
    owner = env.get(key[:cut])
    if owner is None or owner.kind != MODULE or owner.params is not False or not may_hold_parameters(value):
        return []
    prefix = key[:cut] + "."
    n = len(prefix)
    parts = []
    for k, v in list(env.items()):
        if k.startswith(prefix) and k != key and "." not in k[n:] and "[" not in k[n:]:
            env[k] = frozen_part(v)
            if v.kind == MODULE:
                parts.append(k)
    env[key[:cut]] = unfrozen(owner)
    return parts


def frozen_part(v: Value) -> Value:
    """What an attribute of a module holds once the module is frozen as a whole: a submodule is
    frozen, a parameter no longer requires grad; anything else is as it was."""
    if v.kind == MODULE and v.params is not False:
        return with_params(v, False)
    if v.kind == TENSOR and v.is_param and v.rg is not False:
        return Value(TENSOR, rg=False, leaf=True, is_param=True)
    return v


def freeze_whole(model: Any, key: str, frozen: Value) -> None:
    """``key.requires_grad_(False)``: ``key`` holds the frozen module; its submodules and
    parameters bound before (``self.body``) stay bound, frozen (the same objects), so that a
    layer bound after the freeze leaves them frozen (``attribute_bound``)."""
    prefix = key + "."
    n = len(prefix)
    kept = {}
    if frozen.params is False:
        kept = {k: frozen_part(v) for k, v in model.env.items() if k.startswith(prefix) and "." not in k[n:]
                and "[" not in k[n:] and (v.kind == MODULE or (v.kind == TENSOR and v.is_param))}
    model.bind_key(key, frozen)
    for k, v in kept.items():
        if k not in model.env:
            model._dotted_keys += 1
        model.env[k] = v


def unfreeze_parts(model: Any, key: Optional[str]) -> None:
    """``key.requires_grad_(True)`` (or a loop making every parameter of ``key`` require grad):
    the parts of ``key`` frozen before (``self.body``) are free again too (in ``__init__``, as
    the submodules every method sees)."""
    if key is None:
        return
    env = model.env
    table = model.class_attrs[-1] if model.class_attrs and model.function_stack \
        and model.function_stack[-1].name.value == "__init__" else {}
    for k, v in list(env.items()):
        if k.startswith((key + ".", key + "[")) and v.kind == MODULE and v.params is False:
            env[k] = unfrozen(v)
            if table.get(k) is v:
                table[k] = env[k]


def record_frozen_init(model: Any, cls: str, me: str) -> None:
    """The end of class ``cls``'s ``__init__`` walked at its definition: when it left ``self``,
    or a part of it, frozen, what it bound on ``self`` (by attribute), for a subclass's
    ``super().__init__()`` (``inherited_init``)."""
    model.frozen_init_parts.pop(cls, None)
    v = model.env.get(me)
    if v is None or v.kind != MODULE:
        return
    prefix = me + "."
    n = len(prefix)
    parts = {k[n:]: x for k, x in model.env.items() if k.startswith(prefix) and "." not in k[n:] and "[" not in k[n:]}
    if v.params is False or any(x.kind == MODULE and x.params is False for x in parts.values()):
        model.frozen_init_parts[cls] = parts


def inherited_init(model: Any, node: cst.Call) -> None:
    """``super().__init__(...)`` (or ``super(Cls, self).__init__(...)``) in a method of a module
    class: when the base's ``__init__`` (walked at its definition) left ``self`` frozen as a
    whole, or parts of it frozen, so are they here, with what that ``__init__`` bound on
    ``self``; what the subclass binds after the call (a head) is trainable
    (``attribute_bound``), and ``self.requires_grad_(True)`` frees them all. A base the model
    cannot read, or one reached through a class with several bases and no ``__init__``, tells
    nothing."""
    func = node.func
    if type(func) is not cst.Attribute or func.attr.value != "__init__" or type(func.value) is not cst.Call \
            or dotted(func.value.func) != "super" or not model.function_stack:
        return
    fn = model.function_stack[-1]
    cls = model.method_class.get(id(fn))
    if cls is None or type(fn) is not cst.FunctionDef or not fn.params.params:
        return
    me = fn.params.params[0].name.value
    cur = model.env.get(me)
    if cur is None or cur.kind != MODULE or cur.params is False:
        return
    start = cls.name.value
    sargs = func.value.args
    if sargs:
        if len(sargs) != 2 or dotted(sargs[1].value) != me or dotted(sargs[0].value) is None:
            return
        start = dotted(sargs[0].value).rsplit(".", 1)[-1]  # type: ignore[union-attr]
    base = _next_init(model.classes, start)
    if base is None:
        return
    end = model.frozen_inits.get(base)
    parts = model.frozen_init_parts.get(base)
    if end is None or end.kind != MODULE or parts is None:
        return
    for attr, v in parts.items():
        model.bind_key(me + "." + attr, v)
    if end.params is False:
        model.env[me] = with_params(model.env[me], False)


def _next_init(classes: Dict[str, Any], start: str) -> Optional[str]:
    """The class whose ``__init__`` ``super().__init__()`` in class ``start`` runs: its first base
    when that has one; through bases without one only along single inheritance (where the
    method resolution order is plain). None when a class on the way is not the project's."""
    info = classes.get(start)
    if info is None or not info.bases:
        return None
    single = len(info.bases) == 1
    seen = {start}
    cur = info.bases[0]
    while cur not in seen:
        seen.add(cur)
        binfo = classes.get(cur)
        if binfo is None:
            return None
        if "__init__" in binfo.methods:
            return cur
        if not single or len(binfo.bases) != 1:
            return None
        cur = binfo.bases[0]
    return None
