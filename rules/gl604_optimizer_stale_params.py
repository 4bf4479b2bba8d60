from __future__ import annotations

from typing import Any, Dict, List

import libcst as cst

from gradlint.model.names import dotted
from gradlint.rule import Rule, Severity


class OptimizerStaleParams(Rule):
    """
    ## What it does
    Finds a submodule or parameter replaced (`model.head = nn.Linear(...)`,
    `model.weight = nn.Parameter(...)`) after an optimizer was built from that model's
    parameters, in the same function.

    ## Why is this bad
    Silently wrong. The optimizer holds the parameter objects it was given; the new layer's
    parameters get gradients but are never updated (and the old ones, no longer used, are
    "updated" with no effect). `model.to(device)` after building the optimizer is fine in torch
    2.x (it keeps the same Parameter objects) and is not reported.

    ## Example
    ```python
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.fc = nn.Linear(512, 10)      # fine-tuning head swapped too late
    ```

    ## Use instead
    Replace layers first, then build the optimizer (or `optimizer.add_param_group(...)` for the
    new parameters).

    ## References
    - https://pytorch.org/docs/stable/optim.html#constructing-it
    """

    code = "GL604"
    name = "optimizer-stale-params"
    severity = Severity.ERROR
    message = "`{target}` is replaced after the optimizer was built from `{owner}.parameters()`: the new parameters are never updated"
    hint = "replace layers before building the optimizer, or add the new parameters with add_param_group()"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        self._owners: Dict[str, Any] = {}  # module key -> function where its optimizer was built
        self._builds: List[Any] = []  # (module key, function, statement count) of each optimizer built
        self._pending: List[Any] = []

    def visit_Assign(self, node: cst.Assign) -> None:
        model = self.model
        function = model.function_stack[-1] if model.function_stack else None
        value = model.value_of(node.value)
        if value.kind == "optimizer" and isinstance(value.node, str):
            self._owners[value.node] = function
            self._builds.append((value.node, function, model.tick))
            return
        for t in node.targets:
            target = t.target
            if not isinstance(target, cst.Attribute):
                continue
            owner = dotted(target.value)
            if owner is None or self._owners.get(owner, False) is not function:
                continue
            new_params = (value.kind == "module" and value.params is not False) or (
                value.kind == "tensor" and value.is_param
            )
            if new_params:
                self._pending.append((node, model.here(), dict(target=dotted(target) or owner, owner=owner),
                                      owner, function, model.tick))

    def on_finish(self) -> None:
        for node, context, args, owner, function, tick in self._pending:
            if any(o == owner and f is function and t > tick for o, f, t in self._builds):
                continue  # the optimizer is built again after the replacement
            self.report(node, context=context, **args)
