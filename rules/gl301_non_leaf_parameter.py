from __future__ import annotations

from typing import Any, List

import libcst as cst

from gradlint.rule import Rule, Severity


class NonLeafParameter(Rule):
    """
    ## What it does
    Finds a tensor created with `requires_grad=True` and then converted in the same expression
    or the next rebinding (`.cuda()`, `.to("cuda")`, `.to(torch.float64)`, `.double()`,
    `.half()`, `.view(...)`, `* 0.01`), and then used as a parameter: given to an optimizer,
    or its `.grad` read.

    ## Why is this bad
    The conversion is an operation recorded by autograd: the name now holds a *non-leaf*
    computed from the real leaf, which nothing else references. Its `.grad` stays `None` after
    `backward()` (torch only warns when `.grad` is read), so an update that reads it fails or
    does nothing; `torch.optim.SGD([w])` raises `ValueError: can't optimize a non-leaf Tensor`.
    This is common in real code as `torch.randn(n, requires_grad=True).cuda()`.

    `.float()` / `.to("cpu")` on a CPU float32 tensor return the tensor itself and are fine.
    `.to(device)` with a device known only at run time is reported as a warning: it is a bug
    whenever the device is not the CPU.

    ## Example
    ```python
    w = torch.randn(3, requires_grad=True).cuda()
    opt = torch.optim.SGD([w], lr=0.1)     # ValueError: can't optimize a non-leaf Tensor
    ```

    ## Use instead
    ```python
    w = torch.randn(3, device="cuda", requires_grad=True)
    w = torch.randn(3, dtype=torch.float64, requires_grad=True)
    w = nn.Parameter(torch.randn(3) * 0.01)   # scale first, then make the leaf
    ```

    ## References
    - https://pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation
    - https://pytorch.org/docs/stable/generated/torch.Tensor.is_leaf.html
    """

    code = "GL301"
    name = "non-leaf-parameter"
    severity = Severity.ERROR
    message = "{use} a tensor that is not a leaf: it was made with requires_grad=True and then converted here, so {effect}"
    hint = "create the leaf where it will live: `torch.randn(..., device=..., dtype=..., requires_grad=True)`, or scale before `requires_grad_()`"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        self._seen: set = set()

    def _flag(self, value: Any, use: str, effect: str) -> None:
        if value.kind != "tensor" or value.made != "conv" or value.made_node is None:
            return
        if id(value.made_node) in self._seen:
            return
        self._seen.add(id(value.made_node))
        self.report(
            value.made_node, use=use, effect=effect,
            severity=None if value.certain else Severity.WARNING,
        )

    def on_optimizer(self, node: Any, params: List[Any]) -> None:
        for v in params:
            self._flag(v, "an optimizer is given", "its constructor raises ValueError (can't optimize a non-leaf Tensor)")

    def on_grad_read(self, node: cst.Attribute, value: Any) -> None:
        self._flag(value, "`.grad` is read on", "its `.grad` stays None after backward()")
