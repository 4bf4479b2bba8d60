from __future__ import annotations

import libcst as cst

from gradlint.rule import Rule, Severity


def _flag(node: cst.Call):
    for a in node.args:
        if a.keyword is None or a.keyword.value == "requires_grad":
            v = a.value
            if isinstance(v, cst.Name) and v.value in ("True", "False"):
                return v.value == "True"
            return None
    return True


class RequiresGradOnNonLeaf(Rule):
    """
    ## What it does
    Finds `y.requires_grad = True` / `y.requires_grad = False` and `y.requires_grad_(False)` on
    a tensor computed from others (a non-leaf that requires grad).

    ## Why is this bad
    torch raises at that line: `RuntimeError: you can only change requires_grad flags of leaf
    variables.` A computed tensor's `requires_grad` follows from its inputs. (On such a tensor,
    `y.requires_grad_()` / `requires_grad_(True)` is a silent no-op and is not reported.)

    ## Example
    ```python
    y = x * 2                  # x requires grad
    y.requires_grad = False    # RuntimeError
    ```

    ## Use instead
    ```python
    y = (x * 2).detach()       # to stop gradients
    ```
    Nothing is needed to enable gradients on a computed tensor.

    ## References
    - https://pytorch.org/docs/stable/generated/torch.Tensor.requires_grad_.html
    """

    code = "GL302"
    name = "requires-grad-on-non-leaf"
    severity = Severity.ERROR
    message = "{how} on a computed (non-leaf) tensor: torch raises RuntimeError here"
    hint = "use `.detach()` to stop gradients; a computed tensor's requires_grad follows its inputs"

    def _check(self, node: cst.CSTNode, receiver: cst.BaseExpression, how: str) -> None:
        v = self.model.value_of(receiver)
        if v.kind == "tensor" and v.rg is True and v.leaf is False and not v.probable:
            self.report_value(node, v, how=how)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            target = t.target
            if isinstance(target, cst.Attribute) and target.attr.value == "requires_grad":
                self._check(node, target.value, "setting `.requires_grad`")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_" and _flag(node) is False:
            self._check(node, func.value, "`.requires_grad_(False)`")
