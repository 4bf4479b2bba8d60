from __future__ import annotations

from typing import Any

from gradlint.rule import Rule, Severity


class FunctionMutatesGradOutput(Rule):
    """
    ## What it does
    Finds, in `backward(ctx, grad_output)` of a custom `torch.autograd.Function`, an in-place
    change of the incoming gradient (`grad_output.mul_(2)`, `grad_output *= 2`,
    `grad_output[mask] = 0`).

    ## Why is this bad
    The incoming gradient may be shared with other branches of the graph: modifying it corrupts
    their gradients silently (whether it does depends on operand order: `b + f(a)` is corrupted
    where `f(a) + b` is not), or raises `RuntimeError: unsupported operation: more than one
    element of the written-to tensor refers to a single memory location` when it is an expanded
    tensor (after `.sum()`). Tensor hooks may change their gradient in place; custom Functions
    may not.

    ## Example
    ```python
    @staticmethod
    def backward(ctx, grad_output):
        grad_output.mul_(2)
        return grad_output
    ```

    ## Use instead
    ```python
        return grad_output * 2
    ```

    ## References
    - https://pytorch.org/docs/stable/notes/extending.html#extending-torch-autograd
    """

    code = "GL701"
    name = "function-mutates-grad-output"
    severity = Severity.ERROR
    message = "in-place {op} on the incoming gradient of a custom Function's backward(): it may be shared with other branches, whose gradients become wrong"
    hint = "return a new tensor (`grad_output * 2`) instead of changing the incoming gradient"

    def on_inplace(self, node: Any, value: Any, op: str) -> None:
        if value.kind == "tensor" and value.made == "fn_grad_output":
            self.report(node, op=op)
