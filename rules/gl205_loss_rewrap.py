from __future__ import annotations

from typing import Any

from gradlint.rule import Rule, Severity


class LossRewrap(Rule):
    """
    ## What it does
    Finds `backward()` called on a tensor that was itself made to require grad after the fact:
    `loss = torch.tensor(loss.item(), requires_grad=True)`, `loss.requires_grad = True` or
    `loss.requires_grad_()` on a loss that lost its graph (it was detached, computed under
    `torch.no_grad()`, or rebuilt from a number).

    ## Why is this bad
    Silently wrong. The usual reason is an error such as `element 0 of tensors does not require
    grad and does not have a grad_fn`; making the loss require grad silences it, but the loss is
    now a new leaf with no history: `backward()` "works" and no model parameter gets a gradient,
    so nothing trains.

    ## Example
    ```python
    loss = torch.tensor(criterion(out, y).item(), requires_grad=True)
    loss.backward()           # every parameter's .grad stays None
    ```

    ## Use instead
    Find and fix the real graph break (a `.item()`, `.numpy()`, `.detach()` or `torch.no_grad()`
    on the way from the parameters to the loss) and call `backward()` on the loss as computed.

    ## References
    - https://pytorch.org/docs/stable/notes/autograd.html
    """

    code = "GL205"
    name = "loss-rewrap"
    severity = Severity.ERROR
    message = (
        "backward() on a tensor made to require grad after its graph was lost: it is a new leaf, "
        "so no parameter gets a gradient"
    )
    hint = "fix the graph break upstream (.item(), .numpy(), .detach(), no_grad) instead of re-wrapping the loss"

    def on_backward(self, node: Any, value: Any) -> None:
        if value.made == "rewrap" and value.leaf_requiring_grad and value.made_node is not None:
            self.report(node)
