from __future__ import annotations

import libcst as cst

from gradlint.rule import Rule, Severity


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
    reported.

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
        if q == "torch.nn.Parameter":
            self.report(node, what="nn.Parameter(...)")
        elif v.kind == "module" and v.params is True:
            self.report(node, what=(q or "module").replace("torch.nn.", "nn.") + "(...)")
