from __future__ import annotations

from typing import Any

from gradlint.rule import Rule, Severity


class InplaceOnMultiOutputView(Rule):
    """
    ## What it does
    Finds an in-place operation, with grad mode on, on one of the tensors that `chunk`,
    `split` or `unbind` returned for a tensor that requires grad (or on a view of one):
    `q, k, v = qkv(x).chunk(3, dim=-1)` then `q *= scaling`, `a, b = h.split(2)` then
    `a.relu_()`, `h.unbind(0)[0].zero_()`, `for part in h.chunk(2): part.clamp_(0)`. The
    in-place operation may be a `Tensor.*_` method, an augmented or item assignment, or an
    `inplace=True` activation.

    ## Why is this bad
    These parts are views of the input made by one autograd node that returns several views;
    autograd cannot rebase such a view onto an in-place op's graph, so torch refuses the write at
    that line: `RuntimeError: Output 0 of Split is a view and is being modified inplace. This
    view is the output of a function that returns multiple views. Such functions do not allow
    the output views to be modified inplace. You should replace the inplace operation by an
    out-of-place one.` (`Unbind` for `unbind`). Code written for older torch versions, where
    it was allowed, crashes on its first training step.

    Not reported: the same write under `torch.no_grad()` or `torch.inference_mode()` (allowed),
    parts of a tensor that does not require grad, a `.clone()`, a `.detach()`, `.data` or any
    out-of-place result of a part, parts of `tensor_split`, `hsplit`/`vsplit` or `unsafe_chunk`
    (torch does not mark them), and parts of a leaf that requires grad (GL101 reports those).
    A part of a layer's output (`self.qkv(x).chunk(3)`) is a warning: the output requires grad
    only while the layer has trainable parameters, which a freeze elsewhere may change.

    ## Example
    ```python
    q, k, v = F.linear(x, w_qkv).chunk(3, dim=-1)
    q *= scaling              # RuntimeError: Output 0 of Split is a view ...
    ```

    ## Use instead
    ```python
    q, k, v = F.linear(x, w_qkv).chunk(3, dim=-1)
    q = q * scaling           # out of place
    ```

    ## Fix safety
    No fix is offered.

    ## References
    - https://pytorch.org/docs/stable/notes/autograd.html#in-place-operations-with-autograd
    - https://pytorch.org/docs/stable/generated/torch.chunk.html
    """

    code = "GL105"
    name = "inplace-on-multi-output-view"
    severity = Severity.ERROR
    message = ("in-place {op} on a part that `{source}` returned (one of several views of a tensor that requires "
               "grad): torch raises RuntimeError here")
    hint = "use the out-of-place op (`q = q * s`), or `.clone()` the part before writing into it"

    def on_inplace(self, node: Any, value: Any, op: str) -> None:
        model = self.model
        if model.grad_enabled is not True or value.view_of_leaf:
            return  # allowed under no_grad; a leaf's parts: GL101
        made = model.multi_view_op(value)
        if made is None:
            return
        if value.probable:
            # made from a layer's output: it requires grad unless the layer is frozen where the
            # model does not see it
            self.report(node, op=op, source=made, severity=Severity.WARNING,
                        note=" (if the layer that made the tensor has trainable parameters)")
        else:
            self.report(node, op=op, source=made)
