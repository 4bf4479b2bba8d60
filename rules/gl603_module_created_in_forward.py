from __future__ import annotations

from typing import Optional

import libcst as cst

from gradlint.model.names import dotted
from gradlint.rule import Rule, Severity


# module containers: they hold the modules they are given, and make no parameter themselves
_CONTAINERS = frozenset({"torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"})


class ModuleCreatedInForward(Rule):
    """
    ## What it does
    Finds an `nn.Parameter(...)` or a module with parameters (`nn.Linear(...)`, `nn.Conv2d(...)`,
    a module class of the same file, ...) created inside `forward()` of an `nn.Module`.

    ## Why is this bad
    Silently wrong. A new, freshly initialised parameter is made on every call: it is not in the
    optimizer (built once from `model.parameters()`), so it never learns, and every forward pass
    uses different random weights. Its gradient is computed and thrown away.

    Modules without parameters (`nn.ReLU()`, `nn.Dropout()`) cost only time and are not
    reported, nor is a container of existing modules (`nn.Sequential(self.block, self.norm)`,
    a hypernetwork's predicted layer wrapped with the module's own): it makes no parameter; a
    layer made in its arguments (`nn.Sequential(nn.Linear(4, 4))`) is reported at that call.

    ## Example
    ```python
    def forward(self, x):
        self.scale = nn.Parameter(torch.ones(1))   # re-initialised each call
        return self.fc(x) * self.scale
    ```

    ## Use instead
    Create parameters and submodules once, in `__init__`; use the functional form
    (`F.linear(x, self.weight)`) when you need an op without state in `forward`.

    ## References
    - https://pytorch.org/docs/stable/notes/modules.html
    """

    code = "GL603"
    name = "module-created-in-forward"
    severity = Severity.ERROR
    message = "`{what}` created inside forward(): a new, untrained parameter on every call, never in the optimizer"
    hint = "create parameters and submodules once in __init__"

    def visit_Call(self, node: cst.Call) -> None:
        model = self.model
        if not (model.function_stack and model.function_stack[-1].name.value == "forward"):
            return
        if not (model.class_attrs and model.class_attrs[-1].get("__module__") is not None):
            return
        v = model.value_of(node)
        q = model.qualname(node.func)
        if self._built_once(node):
            return
        if q == "torch.nn.Parameter":
            self.report(node, what="nn.Parameter(...)")
        elif q in _CONTAINERS:
            return  # it makes no parameter: a layer made in its arguments is reported at its own call
        elif v.kind == "module" and v.params is True and self._constructs(node, q):
            self.report(node, what=(q or "module").replace("torch.nn.", "nn.") + "(...)")

    def on_param_made(self, node: cst.Call, what: str) -> None:
        """A parameter or a module with parameters made in a function that forward() calls
        (a helper of the file, a method such as `self.build()`): made on every call too."""
        model = self.model
        stack = model.function_stack
        i = len(stack) - 1
        while i >= 0 and stack[i] in model.inline_stack:
            i -= 1  # frames of callees walked at their call
        if i < 0 or (i == len(stack) - 1 and not model._inlining):
            return  # not in a callee (forward's own calls are seen by visit_Call)
        fwd = stack[i]
        cls = model.method_class.get(id(fwd))
        if fwd.name.value != "forward" or cls is None:
            return
        if model.class_tables.get(cls.name.value, {}).get("__module__") is None:
            return
        if not model.conditions:  # (`if not self.built: self.build()`: may run once only)
            where = f"`{stack[-1].name.value}()`" if i < len(stack) - 1 else "a helper"
            self.report(node, what=what, note=f" (in {where}, which forward() calls)")

    def _constructs(self, node: cst.Call, q: Optional[str]) -> bool:
        """A constructor call (`nn.Linear(...)`, a module class of this file), not a method that
        returns an existing module (`self.bn.float()`, `self.m.to(x.dtype)`)."""
        if q is not None:
            return q.rsplit(".", 1)[-1][:1].isupper()
        return self.model.value_of(node.func).kind == "class"

    def _built_once(self, node: cst.Call) -> bool:
        """`if self.inv is None: self.inv = nn.Conv1d(...)`: made on the first call, then cached."""
        model = self.model
        stmt = model.current_statement
        if not isinstance(stmt, cst.SimpleStatementLine) or not isinstance(stmt.body[0], cst.Assign):
            return False
        keys = {dotted(t.target) for t in stmt.body[0].targets}
        keys.discard(None)
        for test in model.conditions:
            text = cst.Module(body=[]).code_for_node(test)
            if any(k in text and ("None" in text or "hasattr" in text) for k in keys):
                return True
            if any(k.startswith("self.") and (f'"{k[5:]}"' in text or f"'{k[5:]}'" in text) for k in keys):
                return True
        return False
