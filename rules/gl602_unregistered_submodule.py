from __future__ import annotations

from typing import Any, Dict, List, Optional, Set

import libcst as cst

from gradlint.model.names import called_names, dotted
from gradlint.rule import Rule, Severity

_DROPOUT_BN = ("Dropout", "BatchNorm", "InstanceNorm")
# module containers: what is passed to them (their items, for a list or a dict) is registered
_CONTAINERS = frozenset({"torch.nn.ModuleList", "torch.nn.ModuleDict", "torch.nn.Sequential"})
# methods of a module container that register what they are given (`self.gates.extend(...)`)
_CONTAINER_ADDS = frozenset({"append", "extend", "insert", "update", "add_module", "register_module"})
# calls that pass on the items of their arguments (`nn.ModuleList(list(self.heads))`)
_ITEM_PASSING = frozenset({"list", "tuple", "reversed", "dict", "zip", "enumerate", "OrderedDict", "chain"})


def _trainable(v: Any, model: Any = None, seen: Optional[Set[str]] = None) -> bool:
    """A module with parameters (or that behaves differently in train/eval mode). A module of a
    class of this file counts when its class shows one: a torch.nn layer with parameters, an
    ``nn.Parameter``, or such a module of another class of the file (a wrapper of a library
    object without parameters, a resampler say, is not flagged)."""
    if v.kind != "module":
        return False
    if isinstance(v.node, str) and v.node.startswith(_DROPOUT_BN):
        return True
    if v.params is False:
        return False
    if model is not None and isinstance(v.node, str) and v.node in model.classes and v.params is None:
        seen = seen if seen is not None else set()
        if v.node in seen:
            return False
        seen.add(v.node)
        info = model.classes[v.node]
        if any(b not in model.classes and b not in ("Module",) for b in info.bases):
            return True  # a subclass of a torch.nn layer or of a class from elsewhere: may have some
        for a in model.class_tables.get(v.node, {}).values():
            if (a.kind == "tensor" and a.is_param) or (a.kind == "module" and _trainable(a, model, seen)):
                return True
            if a.kind == "module" and isinstance(a.node, str) and a.node.startswith("torch.nn.") and a.params is not False:
                return True
        return any(_trainable(model.env.get(b) or _class_module(b), model, seen) for b in info.bases
                   if b in model.classes)
    return True


def _class_module(name: str) -> Any:
    from gradlint.model.values import MODULE, Value

    return Value(MODULE, params=None, node=name)


class UnregisteredSubmodule(Rule):
    """
    ## What it does
    Finds, in `__init__` of an `nn.Module` subclass, submodules stored in a plain `list`,
    `tuple` or `dict` attribute (`self.blocks = [nn.Linear(...) for _ in range(n)]`, also
    `self.blocks.append(nn.Linear(...))` on such a list), and a plain tensor created with
    `requires_grad=True` stored as a weight (`self.w = torch.randn(..., requires_grad=True)`).

    ## Why is this bad
    Silently wrong. `nn.Module` registers only attributes that are modules, parameters or
    buffers: these are not in `model.parameters()` (so the optimizer never updates them), not in
    `state_dict()` (never saved), not moved by `model.to(device)`, and not switched by
    `model.eval()` (a Dropout stays active).

    ## Example
    ```python
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = [nn.Linear(8, 8) for _ in range(3)]
            self.scale = torch.ones(1, requires_grad=True)
    ```

    A class that registers such modules itself (`self.add_module(name, module)`,
    `register_parameter`, `setattr`) is not reported, nor a plain list or dict used as
    scaffolding whose modules the class then hands to a module container
    (`self.blocks = nn.ModuleList(self.block_list)`, `nn.Sequential(*self.layers)`,
    `self.stages.extend(self.block_list)` on an `nn.ModuleList`): those modules are registered.

    ## Use instead
    ```python
            self.blocks = nn.ModuleList(nn.Linear(8, 8) for _ in range(3))   # or nn.ModuleDict
            self.scale = nn.Parameter(torch.ones(1))
    ```

    ## References
    - https://pytorch.org/docs/stable/generated/torch.nn.ModuleList.html
    - https://pytorch.org/docs/stable/generated/torch.nn.parameter.Parameter.html
    """

    code = "GL602"
    name = "unregistered-submodule"
    severity = Severity.ERROR
    message = "`{key}` {what}: not registered with the module, so it is not in parameters() or state_dict() and never trained or saved"
    hint = "use nn.ModuleList / nn.ModuleDict / nn.ParameterList, or nn.Parameter for a weight"

    _REGISTERS = frozenset({"add_module", "register_module", "register_parameter", "register_buffer", "setattr"})

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        self._pending: Dict[int, List[Any]] = {}
        # per class: the self.<attr> keys that __init__ rebinds to a registered container
        self._registered: Dict[int, Set[str]] = {}
        # per class: the names (`self.blocks`, `layers`) whose items are handed to a module
        # container, with the last time (in walk order) that they were
        self._handed: Dict[int, Dict[str, int]] = {}
        self._tick = 0

    def _defer(self, node: cst.CSTNode, names: Set[str], modules: bool, **args: Any) -> None:
        """A finding, decided when the class is over; ``names``: what its modules may be handed on
        as to a container (``modules``: the finding is about modules, not a tensor weight)."""
        cls = self.model.class_stack[-1]
        pending = self._pending.setdefault(id(cls), [])
        if all(n is not node for n, *_ in pending):  # (a method walked again at a call of it)
            pending.append((node, self.model.here(), args, names if modules else set(), self._tick))

    def _hand(self, exprs: List[cst.BaseExpression]) -> None:
        """The items of these expressions go into a module container (in a method of the class)."""
        handed = self._handed.setdefault(id(self.model.class_stack[-1]), {})
        for expr in exprs:
            for name in _passed_names(expr):
                handed[name] = self._tick

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        pending = self._pending.pop(id(node), [])
        if not pending:
            return
        # a class that registers modules itself (self.add_module(name, self.blocks[-1])) is fine
        if called_names(node.body) & self._REGISTERS:
            return
        registered = self._registered.pop(id(node), set())
        handed = self._handed.pop(id(node), {})
        for n, context, args, names, tick in pending:
            if args["key"] in registered:
                continue  # `self.layers = nn.Sequential(*self.layers)` later in __init__
            if any(handed.get(name, -1) > tick for name in names):
                continue  # scaffolding: `self.transforms = nn.ModuleList(self.transform)` after the appends
            self.report(n, context=context, **args)

    def _in_module_method(self) -> Optional[str]:
        """The name of the method of an nn.Module subclass being walked (``__init__``, or a
        ``build()``/``setup()`` that sets submodules), None elsewhere; ``forward`` is GL603's."""
        model = self.model
        if not (model.function_stack and model.class_stack and model.class_attrs
                and model.class_attrs[-1].get("__module__") is not None):
            return None
        fn = model.function_stack[-1]
        if model.method_class.get(id(fn)) is not model.class_stack[-1] or fn.name.value == "forward":
            return None
        return fn.name.value

    def _holder_is_module(self, key: str) -> bool:
        """``self.x`` (held by the module itself), or ``self.encoder.x`` where ``self.encoder`` is
        a module: setting an attribute on a module registers modules and parameters only."""
        holder = key.rsplit(".", 1)[0]
        return holder == "self" or self.model.lookup(holder).kind == "module"

    def visit_Assign(self, node: cst.Assign) -> None:
        self._tick += 1
        method = self._in_module_method()
        if len(node.targets) != 1 or method is None:
            return
        key = dotted(node.targets[0].target)
        if key is None or not key.startswith("self.") or not self._holder_is_module(key):
            return
        if isinstance(node.value, cst.Call):
            q = self.model.qualname(node.value.func) or ""
            if q.startswith("torch.nn.") and q.rsplit(".", 1)[-1][:1].isupper():
                self._registered.setdefault(id(self.model.class_stack[-1]), set()).add(key)
                return
        v = self.model.value_of(node.value)
        what = self._what(v, node.value)
        if what and (method == "__init__" or v.kind != "tensor"):  # (a hidden state set in init_hidden())
            # the modules are handed on later under this attribute's name or the name it copies
            names = {key} | ({dotted(node.value)} if dotted(node.value) is not None else set())
            self._defer(node, names, v.kind != "tensor", key=key, what=what)

    def _what(self, v: Any, expr: cst.BaseExpression) -> Optional[str]:
        if isinstance(expr, (cst.List, cst.Tuple)) and all(
                _is_self_attr(el.value) for el, i in zip(expr.elements, v.items) if _trainable(i, self.model)):
            return None  # [self.b1, self.b2]: aliases of submodules registered as attributes
        if v.kind == "tuple" and any(_trainable(i, self.model) for i in v.items):
            kind = {cst.Dict: "dict", cst.DictComp: "dict", cst.Tuple: "tuple"}.get(type(expr), "list")
            return f"is a plain {kind} of modules"
        if v.kind == "tensor" and v.leaf_requiring_grad and not v.is_param:
            return "is a plain tensor with requires_grad=True, not an nn.Parameter"
        return None

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._tick += 1
        # `self.stages += self.block_list` on an nn.ModuleList (its extend)
        if isinstance(node.operator, cst.AddAssign) and self._in_module_method() is not None \
                and self.model.value_of(node.target).kind == "module":
            self._hand([node.value])

    def visit_Call(self, node: cst.Call) -> None:
        self._tick += 1
        func = node.func
        if node.args and self._in_module_method() is not None:
            if (self.model.qualname(func) or "") in _CONTAINERS:
                self._hand([a.value for a in node.args])  # nn.ModuleList(self.transform)
            elif isinstance(func, cst.Attribute) and func.attr.value in _CONTAINER_ADDS \
                    and self.model.value_of(func.value).kind == "module":
                self._hand([a.value for a in node.args])  # self.gates.extend(self.transform)
        if not (isinstance(func, cst.Attribute) and func.attr.value in ("append", "extend", "insert")):
            return
        if not node.args or self._in_module_method() is None:
            return
        key = dotted(func.value)
        if key is None or not key.startswith("self."):
            return
        holder = self.model.lookup(key)
        if holder.kind != "tuple":
            return  # only a plain list assigned in this __init__ (an nn.ModuleList is a module)
        arg = self.model.value_of(node.args[-1].value)
        if _trainable(arg, self.model) or (arg.kind == "tuple" and any(_trainable(i, self.model) for i in arg.items)):
            self._defer(node, {key}, True, key=key, what="is a plain list that modules are appended to")


def _is_self_attr(expr: cst.BaseExpression) -> bool:
    key = dotted(expr)
    return key is not None and key.startswith("self.")


def _passed_names(expr: cst.BaseExpression) -> Set[str]:
    """The names (``self.blocks``, ``layers``) whose items ``expr`` passes on: the expression
    itself, the elements of a literal (``[*self.a, *self.b]``), ``list(self.a)``,
    ``self.d.values()``, ``self.a + self.b``, ``(m for m in self.a)``."""
    out: Set[str] = set()
    stack: List[Any] = [expr]
    while stack:
        e = stack.pop()
        key = dotted(e)
        if key is not None:
            out.add(key)
        elif isinstance(e, (cst.List, cst.Tuple, cst.Set)):
            stack.extend(el.value for el in e.elements)
        elif isinstance(e, cst.Dict):
            stack.extend(el.value for el in e.elements)
        elif isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Add):
            stack.extend((e.left, e.right))
        elif isinstance(e, (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)):
            comp = e.for_in
            while comp is not None:
                stack.append(comp.iter)
                comp = comp.inner_for_in
        elif isinstance(e, cst.Call):
            func = e.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("values", "items") and not e.args:
                stack.append(func.value)
            elif (dotted(func) or "").rsplit(".", 1)[-1] in _ITEM_PASSING:
                stack.extend(a.value for a in e.args)
    return out
