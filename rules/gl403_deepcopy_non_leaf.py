from __future__ import annotations

from typing import Any, Dict, Optional

import libcst as cst

from gradlint.model.names import dotted
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

    def visit_Assign(self, node: cst.Assign) -> None:
        model = self.model
        for t in node.targets:
            target = t.target
            if isinstance(target, cst.Attribute):
                owner = model.value_of(target.value)
                if owner.kind == "module" and _graph(model.value_of(node.value)) is not None:
                    key = dotted(target.value)
                    if key is not None:
                        self._holders[(key, self._function())] = _graph(model.value_of(node.value))

    def _function(self) -> Any:
        stack = self.model.function_stack
        return stack[-1] if stack else None

    def on_deepcopy(self, node: Any, value: Any, key: Optional[str]) -> None:
        g = _graph(value)
        what = "a tensor computed from others (a non-leaf)" if value.kind == "tensor" else "a container holding a non-leaf tensor"
        if g is None and key is not None and (key, self._function()) in self._holders:
            g, what = self._holders[(key, self._function())], f"a module that holds a non-leaf tensor (`{key}.<attr> = ...`)"
        if g is None:
            return
        self.report(node, what=what, severity=Severity.WARNING if g.probable else None)
