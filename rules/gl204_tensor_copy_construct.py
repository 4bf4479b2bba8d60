from __future__ import annotations

import libcst as cst

from gradlint.rule import Rule, Severity


class TensorCopyConstruct(Rule):
    """
    ## What it does
    Finds `torch.tensor(t)` (and `torch.tensor(t, requires_grad=True)`) whose argument is a
    tensor.

    ## Why is this bad
    torch warns on every call: `UserWarning: To copy construct from a tensor, it is recommended
    to use sourceTensor.detach().clone() or sourceTensor.detach().clone().requires_grad_(True),
    rather than torch.tensor(sourceTensor).` The copy has no history: when `t` requires grad,
    the gradient stops there (see also GL203).

    ## Example
    ```python
    y = torch.tensor(x)
    ```

    ## Use instead
    ```python
    y = x.detach().clone()                        # a copy without history
    y = x.detach().clone().requires_grad_(True)   # a new leaf
    y = x.clone()                                 # a copy that keeps the gradient
    ```

    ## References
    - https://pytorch.org/docs/stable/generated/torch.tensor.html
    """

    code = "GL204"
    name = "tensor-copy-construct"
    severity = Severity.WARNING
    message = "`torch.tensor()` of a tensor copies it without history (and warns){extra}"
    hint = "use `t.detach().clone()` (or `t.clone()` to keep the gradient)"

    def visit_Call(self, node: cst.Call) -> None:
        model = self.model
        if model.qualname(node.func) != "torch.tensor" or not node.args or node.args[0].keyword is not None:
            return
        v = model.value_of(node.args[0].value)
        if v.kind != "tensor":
            return
        extra = ": the gradient to the source is lost" if v.rg is True else ""
        self.report(node, extra=extra)
