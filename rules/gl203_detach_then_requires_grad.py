from __future__ import annotations

from typing import Any, List

from gradlint.rule import Rule, Severity

_KINDS = frozenset({"detach_rg", "copy_rg"})


class DetachThenRequiresGrad(Rule):
    """
    ## What it does
    Finds a new leaf made from a tensor that is part of a graph, then back-propagated as if
    it were still connected.
    The forms: `y.detach().requires_grad_()`, `z = y.detach(); z.requires_grad = True`,
    `(x * 2).clone().detach().requires_grad_()`, `torch.tensor(y, requires_grad=True)`.
    It reports when a value computed from the new leaf is back-propagated while the original
    `y` reaches that value by no other path, and the new leaf's own gradient is never used
    (its `.grad` is not read, it is not given to an optimizer, `torch.autograd.grad`, or any
    other call the linter cannot see into).

    ## Why is this bad
    Silently wrong. `detach()` (and `torch.tensor(t)`) makes a tensor with no history; turning
    `requires_grad` back on makes it a new leaf. `backward()` stops at that leaf: everything
    upstream of `y` gets `grad=None` and is never trained, with no error and no warning
    (`torch.tensor(t, requires_grad=True)` only warns about the copy).

    `clone()` alone is fine: the gradient flows through it. A fresh leaf from data that does
    not require grad (an input image for an adversarial attack, a latent you then optimise,
    a feature map whose `.grad` you read for a saliency map) is fine too and is not reported.

    ## Example
    ```python
    y = x * 2
    z = y.detach().requires_grad_()
    (z * 3).sum().backward()     # x.grad is None
    ```

    ## Use instead
    ```python
    z = y                        # or y.clone(): the gradient reaches x
    (z * 3).sum().backward()
    ```

    ## References
    - https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html
    - https://pytorch.org/docs/stable/notes/autograd.html
    """

    code = "GL203"
    name = "detach-then-requires-grad"
    severity = Severity.ERROR
    message = "{what}, then back-propagated: the gradient stops at this new leaf and what produced the source gets grad=None"
    hint = "keep the original tensor (or `.clone()` it) where gradients must flow; detach only values that should not be trained through"

    _WHAT = {
        "detach_rg": "a detached tensor made to require grad again",
        "copy_rg": "`torch.tensor(t, requires_grad=True)` copies `t` without its history",
    }

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        self._pending: List[Any] = []

    def on_backward(self, node: Any, value: Any) -> None:
        if value.made == "rewrap" and value.leaf_requiring_grad:
            return  # GL205: backward() on the re-wrapped tensor itself
        self._pending.extend(self.model.lost_cuts(value, _KINDS))

    def on_finish(self) -> None:
        model = self.model
        for cut in self._pending:
            if cut.src.id in model.backwarded:
                continue  # y.backward(z.grad): a deliberate split backward
            if cut.result is not None and cut.result.id in model.used_as_leaf:
                continue  # its own gradient is used: a deliberate new leaf
            self.report(
                cut.node,
                context=(cut.statement, ()),
                what=self._WHAT[cut.kind],
                severity=Severity.WARNING if cut.src.probable else None,
            )
