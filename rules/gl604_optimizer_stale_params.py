from __future__ import annotations

from typing import Any, Dict, List

import libcst as cst

from gradlint.model.names import dotted
from gradlint.rule import Rule, Severity


class OptimizerStaleParams(Rule):
    """
    ## What it does
    Finds a submodule or parameter replaced (`model.head = nn.Linear(...)`,
    `model.weight = nn.Parameter(...)`, `model.head.bias = nn.Parameter(...)`,
    `model[1] = nn.Linear(...)`) after an optimizer was built from that model's parameters, in
    the same function, or in methods of the file called one after the other on the same object
    (`trainer.setup()` builds the optimizer, `trainer.finetune()` swaps the head).

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

    Where it is reported: at the replacement, with the optimizer's construction as a related
    location. Either line can be the one to change (move the replacement before the optimizer, or
    build the optimizer after it); the replacement is the later statement and usually the one
    added without the optimizer in mind (fine-tuning code that swaps a head after the training
    setup), and it is where `add_param_group(...)` goes if the optimizer must stay.

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
        root = model.walk_root()
        value = model.value_of(node.value)
        if value.kind == "optimizer" and isinstance(value.node, str):
            # the module object too: a method walked at a call (`trainer.setup()`) builds the
            # optimizer that another (`trainer.finetune()`) makes stale
            obj = _optimized(value)
            key: Any = value.node
            if obj is not None and _module_of(model, key) is not obj:
                key = None  # built in a helper from its parameter `model`: here that name is another object
            else:
                obj = obj or _module_of(model, key)
            if key is not None:
                self._owners[key] = function
            self._builds.append((key, function, model.tick, root, obj, node))
            return
        if model.in_module_forward():
            return  # a layer made in forward() (walked at a call): GL603's finding
        for t in node.targets:
            target = t.target
            if not isinstance(target, (cst.Attribute, cst.Subscript)):
                continue
            owner = dotted(target.value)
            if owner is None:
                continue
            if isinstance(node.value, cst.Call):
                # a layer made here put into a part of the optimised module (`model.head.bias =
                # nn.Parameter(...)`, `model[1] = nn.Linear(...)`): stale for the whole module's optimizer
                owner = next((o for o in _prefixes(owner) if self._owners.get(o, False) is function), owner)
            elif isinstance(target, cst.Subscript):
                continue
            obj = _module_of(model, owner)
            if self._owners.get(owner, False) is not function and not any(
                    r is root and m is obj for _, _, _, r, m, _ in self._builds if m is not None):
                continue
            new_params = (value.kind == "module" and value.params is not False) or (
                value.kind == "tensor" and value.is_param
            )
            if new_params:
                self._pending.append((node, model.here(), dict(target=dotted(target) or owner, owner=owner),
                                      owner, function, model.tick, root, obj))

    def on_finish(self) -> None:
        for node, context, args, owner, function, tick, root, obj in self._pending:
            mine = [(t, b) for o, f, t, r, m, b in self._builds
                    if (o == owner and f is function) or (obj is not None and r is root and m is obj)]
            if any(t > tick for t, _ in mine):
                continue  # the optimizer is built again after the replacement
            built = [b for t, b in mine if t <= tick]
            related = [(built[-1], "the optimizer built before: it holds the old parameters")] if built else []
            self.report(node, context=context, related=related, **args)


def _prefixes(key: str) -> List[str]:
    """``model.head[0]`` -> ``model.head[0]``, ``model.head``, ``model`` (longest first)."""
    out = [key]
    while True:
        cut = max(key.rfind("."), key.rfind("["))
        if cut <= 0:
            return out
        key = key[:cut]
        out.append(key)


def _optimized(optimizer: Any) -> Any:
    """The module whose ``parameters()`` the optimizer was built from, when the model knows it."""
    mods = [i.alias_of for i in optimizer.items if i.kind == "params" and i.alias_of is not None]
    return mods[0] if len(mods) == 1 and mods[0].kind == "module" else None


def _module_of(model: Any, key: str) -> Any:
    """The module value ``key`` names now (None when it names no module the model knows)."""
    v = model.env.get(key)
    return v if v is not None and v.kind == "module" else None
