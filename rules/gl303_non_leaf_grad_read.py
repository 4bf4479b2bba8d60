from __future__ import annotations

from typing import Any

from gradlint.rule import Rule, Severity


class NonLeafGradRead(Rule):
    """
    ## What it does
    Finds `.grad` read on a tensor computed from others (a non-leaf) on which `retain_grad()`
    was not called, the output of a `torch.nn` layer included (`feats = model.backbone(x)`:
    a new tensor whether the layer is frozen or not, so its `.grad` is never filled). The
    output of another module is not reported: it may return a leaf it was given.

    ## Why is this bad
    Silently wrong: autograd only fills `.grad` of leaves. The value is `None` (torch warns
    `The .grad attribute of a Tensor that is not a leaf Tensor is being accessed...`), so code
    that uses it fails later with a `TypeError` on `None`, or skips its work.

    ## Example
    ```python
    y = x * 2
    y.sum().backward()
    print(y.grad)             # None
    ```

    ## Use instead
    ```python
    y = x * 2
    y.retain_grad()           # before backward()
    y.sum().backward()
    print(y.grad)
    ```
    or `torch.autograd.grad(loss, y)`, or read the leaf's gradient (`x.grad`).

    ## References
    - https://pytorch.org/docs/stable/generated/torch.Tensor.retain_grad.html
    - https://pytorch.org/docs/stable/generated/torch.Tensor.is_leaf.html
    """

    code = "GL303"
    name = "non-leaf-grad-read"
    severity = Severity.ERROR
    message = "`.grad` of a computed (non-leaf) tensor is always None: autograd fills `.grad` only for leaves"
    hint = "call `.retain_grad()` before backward(), use `torch.autograd.grad(loss, y)`, or read the leaf's `.grad`"

    def on_grad_read(self, node: Any, value: Any) -> None:
        if value.kind != "tensor" or value.rg is not True or value.leaf is not False:
            return
        if value.probable and value.made != "layer":
            return  # a module that may return a leaf it was given (or its own parameter)
        if value.id in self.model.retained:
            return
        if value.made == "conv":
            return  # GL301 explains the cause at the conversion
        if any(c.kind == "rebound" and c.in_loop for c in value.cuts):
            return  # GL304 reports the cause: the parameter rebound by a manual update in a loop
        self.report_value(node, value)
