from __future__ import annotations

from typing import Any, Optional

import libcst as cst

from gradlint.model.shapes import MANY
from gradlint.model.syntax import kwarg, positional
from gradlint.rule import Rule, Severity


class BackwardOnNonScalar(Rule):
    """
    ## What it does
    Finds `backward()` (or `torch.autograd.backward(out)`, `torch.autograd.grad(out, inputs)`)
    without an explicit gradient on a tensor that holds more than one element: a per-sample loss
    (the output of a criterion built with `reduction="none"`, `F.*_loss(..., reduction="none")`,
    what is computed from it element-wise, reshaped or reduced over a dim other than the batch
    dim), a `torch.stack` of several losses, a tensor of literal sizes.

    Where it is reported: at the `backward()` (or `autograd.grad`) to change, with the place
    the per-sample loss was made (the criterion, the `reduction="none"` call) as a related
    location; when the loss is returned by a function (a model's `compute_loss`) and
    back-propagated by its caller, at that `return` (the function's result is what must be a
    scalar), with the `backward()` as a related location; when the loss is rebound at the end of
    a loop's body and back-propagated on the next iteration, at that binding.

    ## Why is this bad
    torch creates the implicit gradient (ones) only for an output of exactly one element and
    raises otherwise: `RuntimeError: grad can be implicitly created only for scalar outputs`.
    The model does not track shapes: a tensor of literal sizes or a stack of several tensors
    certainly has more than one element (an error finding); a per-sample loss has one element
    per sample and raises unless the batch holds one sample (a warning: a batch of one works,
    until the batch grows).

    Not reported: `backward(gradient)` / `backward(torch.ones_like(loss))`,
    `torch.autograd.grad(out, x, grad_outputs=...)`, a per-sample loss reduced first (`.mean()`,
    `.sum()`, `(w * loss).sum()`, `loss.mean(0)`), a criterion with `reduction="mean"` or
    `"sum"` (the default), and any tensor whose shape the model does not know (a model's output).

    ## Example
    ```python
    criterion = nn.CrossEntropyLoss(reduction="none")
    loss = criterion(model(x), y)
    loss.backward()           # RuntimeError: one loss per sample
    ```

    ## Use instead
    ```python
    criterion = nn.CrossEntropyLoss(reduction="none")
    loss = criterion(model(x), y)
    loss.mean().backward()    # or (weights * loss).sum(), or reduction="mean"
    ```

    ## References
    - https://pytorch.org/docs/stable/generated/torch.Tensor.backward.html
    - https://pytorch.org/docs/stable/generated/torch.autograd.grad.html
    - https://pytorch.org/docs/stable/generated/torch.nn.CrossEntropyLoss.html
    - https://github.com/pytorch/pytorch/blob/main/torch/autograd/__init__.py (`_make_grads`:
      the implicit gradient is made only when `numel() == 1`)
    """

    code = "GL307"
    name = "backward-on-non-scalar"
    severity = Severity.ERROR
    message = "{call} without a gradient on {what}: torch raises RuntimeError (grad can be implicitly created only for scalar outputs)"
    hint = "reduce the loss to one element first (`.mean()`, `.sum()`), or pass the gradient (`backward(gradient=...)`, `grad_outputs=...`)"

    def on_backward(self, node: Any, value: Any) -> None:
        fact = getattr(value, "numel", None)
        if value.kind != "tensor" or fact is None or value.rg is False or type(node) is not cst.Call:
            return
        call = self._implicit_gradient(node)
        if call is None:
            return
        certain = fact.kind == MANY
        what = "a tensor of more than one element" if certain else "a per-sample loss (one element per sample)"
        severity = None if certain else Severity.WARNING
        made = (fact.node, f"made here: {fact.what}")
        returned = self.model.numel_returns.get(value.id)
        if returned is not None and returned[1] not in self.model.function_stack:
            # a function returns the non-scalar loss that its caller back-propagates: its
            # `return` is the line to change
            stmt, _fn, context = returned
            related = [(node, f"the {call} that raises")]
            related.append(made)
            self.report(stmt, context=context, call=call, what=what, severity=severity, related=related,
                        note=" (returned here, back-propagated at the related location)")
            return
        if self.model.carried_cause(value) is None:
            self.report(node, call=call, what=what, severity=severity, related=[made])
            return
        # rebound at the end of one iteration, back-propagated at the start of the next
        self.report_value(node, value, call=call, what=what, severity=severity)

    def _implicit_gradient(self, node: cst.Call) -> Optional[str]:
        """When this call back-propagates its first tensor with no gradient given: how to name
        the call; else None."""
        q = self.model.qualname(node.func)
        if q == "torch.autograd.grad":
            ok = _first_is(node, "outputs") and not _given(node, "grad_outputs", 2)
            return "autograd.grad()" if ok else None
        if q == "torch.autograd.backward":
            ok = _first_is(node, "tensors") and not _given(node, "grad_tensors", 1)
            return "autograd.backward()" if ok else None
        func = node.func
        if type(func) is not cst.Attribute:
            return None
        if func.attr.value == "backward":
            # `loss.backward()`: a positional argument is the gradient (or, for
            # `accelerator.backward(loss)`, the loss: not followed)
            ok = not positional(node) and kwarg(node, "gradient") is None
            return "backward()" if ok else None
        if func.attr.value == "manual_backward":  # a LightningModule's `self.manual_backward(loss)`
            ok = len(positional(node)) == 1 and kwarg(node, "gradient") is None
            return "manual_backward()" if ok else None
        return None


def _first_is(node: cst.Call, keyword: str) -> bool:
    first: Optional[cst.Arg] = node.args[0] if node.args else None
    return first is not None and not first.star and (first.keyword is None or first.keyword.value == keyword)


def _given(node: cst.Call, keyword: str, position: int) -> bool:
    """Is the argument ``keyword`` (or the positional argument at ``position``) passed?"""
    if any(a.star for a in node.args):
        return True  # `*args`/`**kwargs`: it may be
    return kwarg(node, keyword) is not None or len(positional(node)) > position
