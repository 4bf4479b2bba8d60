from __future__ import annotations

from typing import Any

from gradlint.rule import Rule, Severity


class BackwardWithoutGraph(Rule):
    """
    ## What it does
    Finds `backward()` (or `torch.autograd.backward/grad`) on a value that was computed without
    a graph: entirely under `torch.no_grad()` or `torch.inference_mode()` (or in a function
    decorated with them), or only from detached tensors.

    Where it is reported: at the line where the graph was lost (the computation under
    `no_grad`/`inference_mode`, the `.detach()`, an `argmax`/`max` index taken from a graph
    value), with the `backward()` that raises as a related location.

    ## Why is this bad
    torch raises at `backward()`: `RuntimeError: element 0 of tensors does not require grad and
    does not have a grad_fn`. The forward pass recorded nothing to differentiate.

    Not reported: `backward()` *inside* `torch.no_grad()` on a loss computed with grad enabled
    (that is fine), and a frozen part of a model run under `no_grad` on purpose while the rest
    of the loss keeps its graph.

    ## Example
    ```python
    with torch.no_grad():
        loss = criterion(model(x), y)
    loss.backward()           # RuntimeError
    ```

    ## Use instead
    ```python
    loss = criterion(model(x), y)   # grad enabled for the forward pass
    loss.backward()
    ```

    ## References
    - https://pytorch.org/docs/stable/generated/torch.no_grad.html
    - https://pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation
    """

    code = "GL305"
    name = "backward-without-graph"
    severity = Severity.ERROR
    message = "backward() on a value computed without a graph (under no_grad/inference_mode, or from detached tensors): torch raises RuntimeError here"
    hint = "run the forward pass with grad enabled; keep no_grad for evaluation and frozen parts only"

    def on_backward(self, node: Any, value: Any) -> None:
        if value.kind == "tensor" and value.rg is False and value.made == "computed" and not value.cuts:
            cause = value.made_node
            if cause is not None and cause is not self.model.current_statement:
                # at the line where the graph was lost (computed under no_grad, through argmax, ...)
                # (the backward's own context decides whether the error is expected there)
                self.report(cause, context=(cause, (), self.model.expecting_error), note=" (the graph is lost here)",
                            related=[(node, "the backward() that raises")])
            else:
                self.report(node)
