from __future__ import annotations

from typing import Any, Dict, Optional

import libcst as cst

from gradlint.model.names import called_names, dotted, subtree
from gradlint.rule import Rule, Severity


def _graph(v: Any) -> Optional[Any]:
    """A non-leaf tensor that requires grad inside ``v`` (itself or in a literal container)."""
    if v.kind == "tensor":
        return v if v.rg is True and v.leaf is False else None
    if v.kind == "tuple":
        for i in v.items:
            g = _graph(i)
            if g is not None:
                return g
    return None


class DeepcopyNonLeaf(Rule):
    """
    ## What it does
    Finds `copy.deepcopy` of a tensor computed from others (a non-leaf that requires grad), of
    a dict/list/tuple literal holding one, or of a module on which such a tensor was stored as
    an attribute (`model.cache = model(x)`).

    Two more ways a module comes to hold one: one of its own methods (or a submodule's) stores
    an activation on `self` (`self.last = h`) during a forward run in grad mode before the copy,
    reported at that store; and a layer wrapped by the legacy `torch.nn.utils.weight_norm`,
    which keeps the recomposed `weight` (computed from `weight_g` and `weight_v`) on the layer,
    reported at the `weight_norm(...)` call when the module is copied without being called in
    that scope (a forward under `no_grad` recomputes the weight as a plain tensor; the
    parametrization-based `torch.nn.utils.parametrizations.weight_norm` copies fine).

    ## Why is this bad
    torch raises: `RuntimeError: Only Tensors created explicitly by the user (graph leaves)
    support the deepcopy protocol at the moment.` Keeping graph tensors on a module also keeps
    their graphs alive.

    ## Example
    ```python
    out = model(x)
    saved = copy.deepcopy({"logits": out})     # RuntimeError
    ```

    ## Use instead
    ```python
    saved = {"logits": out.detach().clone()}
    ```
    and do not keep graph tensors on modules you copy (store `.detach()`ed values).

    ## References
    - https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html
    - https://docs.python.org/3/library/copy.html
    """

    code = "GL403"
    name = "deepcopy-non-leaf"
    severity = Severity.ERROR
    message = "`copy.deepcopy` of {what}: torch raises RuntimeError (only graph leaves support deepcopy)"
    hint = "copy `t.detach().clone()` instead, and keep graph tensors off modules you copy"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        self._holders: Dict[str, Any] = {}
        # module value id -> attribute -> (the graph tensor, its store, where) for `self.<attr> = t`
        # in a method of the module walked at a call on it (a forward run before the copy)
        self._kept: Dict[int, Dict[str, Any]] = {}
        # class name -> (parameter of its __init__ that it deep-copies, its position, the deepcopy)
        self._copying_init: Dict[str, Any] = {}

    def visit_Assign(self, node: cst.Assign) -> None:
        model = self.model
        for t in node.targets:
            target = t.target
            if isinstance(target, cst.Attribute):
                owner = model.value_of(target.value)
                if owner.kind != "module":
                    continue
                g = _graph(model.value_of(node.value))
                if g is not None:
                    key = dotted(target.value)
                    if key is not None:
                        self._holders[(key, self._function())] = g
                if g is None:
                    self._kept.get(owner.id, {}).pop(target.attr.value, None)  # `model.cache = None`
                elif type(target.value) is cst.Name and target.value.value == "self" and model.function_stack:
                    self._kept.setdefault(owner.id, {})[target.attr.value] = (g, node, model.here(), model.walk_root())

    def _function(self) -> Any:
        stack = self.model.function_stack
        return stack[-1] if stack else None

    def on_deepcopy(self, node: Any, value: Any, key: Optional[str]) -> None:
        if value.kind == "unknown" and key is not None:
            self._note_copying_init(node, key)
        g = _graph(value)
        what = "a tensor computed from others (a non-leaf)" if value.kind == "tensor" else "a container holding a non-leaf tensor"
        if g is None and key is not None and (key, self._function()) in self._holders:
            g, what = self._holders[(key, self._function())], f"a module that holds a non-leaf tensor (`{key}.<attr> = ...`)"
        if g is None and value.kind == "module":
            wn = next((m for m in _submodules(self.model, value) if m.made == "weight_norm"), None)
            scope = self._function() or self.model.root_module
            if wn is not None and key is not None and scope is not None and not _called(scope, key) \
                    and "remove_weight_norm" not in called_names(self.model.root_module):
                # (a forward under no_grad recomputes the weight as a plain tensor, and
                # remove_weight_norm drops it: quiet when the copied module is called in this
                # scope at all, or the file removes a weight norm)
                call, where = wn.made_node
                self.report(call, context=where, related=[(node, "the deepcopy that raises")],
                            what="a module holding a layer wrapped by the legacy `torch.nn.utils.weight_norm` (its "
                            "`weight` is recomputed from weight_g and weight_v in grad mode, a non-leaf); use "
                            "`torch.nn.utils.parametrizations.weight_norm`")
                return
            kept = self._kept_in(value)
            if kept is not None:
                attr, (g, store, where, _) = kept
                self.report(store, context=where, related=[(node, "the deepcopy that raises")],
                            what=f"a module whose method stored a non-leaf tensor on it (`self.{attr} = ...`, run "
                            "before the copy)", severity=Severity.WARNING if g.probable else None)
            return
        if g is None:
            return
        self.report(node, what=what, severity=Severity.WARNING if g.probable else None)

    def _note_copying_init(self, node: Any, key: str) -> None:
        """``copy.deepcopy(model)`` of a parameter of a class's ``__init__`` (an EMA wrapper made
        with the model: ``ModelEma(model)``), walked on its own: its calls decide (visit_Call)."""
        fn = self._function()
        if fn is None or fn.name.value != "__init__":
            return
        cls = self.model.method_class.get(id(fn))
        names = [p.name.value for p in fn.params.params]
        if cls is None or key not in names[1:]:
            return
        self._copying_init.setdefault(cls.name.value, (key, names.index(key) - 1, node))

    def visit_Call(self, node: cst.Call) -> None:
        if not self._copying_init:
            return
        name = dotted(node.func)
        entry = self._copying_init.get((name or "").rsplit(".", 1)[-1]) if name is not None else None
        if entry is None or name not in self.model.classes and name.rsplit(".", 1)[-1] not in self.model.classes:
            return
        param, pos, copy_node = entry
        arg = next((a for a in node.args if a.keyword is not None and a.keyword.value == param), None)
        positional = [a for a in node.args if a.keyword is None and not a.star]
        if arg is None and any(a.star for a in node.args):
            return
        if arg is None and pos < len(positional):
            arg = positional[pos]
        if arg is None:
            return
        value = self.model.value_of(arg.value)
        if value.kind != "module":
            return
        kept = self._kept_in(value)
        if kept is not None:
            attr, (g, store, where, _) = kept
            self.report(store, context=where,
                        related=[(node, "the object made with the module"), (copy_node, "the deepcopy that raises")],
                        what=f"a module whose method stored a non-leaf tensor on it (`self.{attr} = ...`, run "
                        "before the copy)", severity=Severity.WARNING if g.probable else None)

    def _kept_in(self, module: Any) -> Any:
        """(attribute, (tensor, store, where, root)) of a graph tensor that a method of ``module`` or
        of one of its submodules (this file's classes) stored on it, walked at a call on it in the
        walk that makes this copy (not in a method's walk of its own, where ``self`` stands for
        any instance)."""
        root = self.model.walk_root()
        for m in _submodules(self.model, module):
            kept = [(a, k) for a, k in self._kept.get(m.id, {}).items() if k[3] is root]
            if kept:
                return kept[0]
        return None


def _submodules(model: Any, module: Any) -> Any:
    """``module`` and the modules it holds, as far as the model knows them: the layers of a
    container, the ``self.<name>`` modules of this file's classes, recursively."""
    todo, seen = [module], set()
    while todo:
        m = todo.pop()
        if m.id in seen:
            continue
        seen.add(m.id)
        yield m
        todo.extend(i for i in m.items if i.kind == "module")
        if isinstance(m.node, str):
            table = model.class_tables.get(m.node, {})
            todo.extend(v for a, v in table.items() if a.startswith("self.") and "." not in a[5:] and v.kind == "module")


def _called(scope: Any, key: str) -> bool:
    """Does ``scope`` call the module ``key`` (``model(x)``, ``model.forward(x)``) anywhere?"""
    for n in subtree(scope):
        if type(n) is cst.Call:
            f = dotted(n.func)
            if f == key or f == key + ".forward":
                return True
    return False
