from __future__ import annotations

from typing import Any

from gradlint.rule import CutRule, Severity



class DetachThenRequiresGrad(CutRule):
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

    cut_kinds = frozenset({"detach_rg", "copy_rg"})

    def skip_cut(self, cut: Any) -> bool:
        # its own gradient is used (read, given to an optimizer): a deliberate new leaf
        if cut.after_backward:
            return True  # a new leaf from a value whose inputs were already back-propagated
        return cut.result is not None and cut.result.id in self.model.used_as_leaf

    def report_cut(self, cut: Any, value: Any, **kw: Any) -> None:
        self.report(cut.node, what=self._WHAT[cut.kind], **kw)
