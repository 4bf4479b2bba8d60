from __future__ import annotations

from typing import Any, Dict

from gradlint.rule import BackwardRule, Severity


class InplaceOnSavedOutput(BackwardRule):
    """
    ## What it does
    Finds an in-place operation on a tensor that autograd saved for the backward pass, followed
    by a `backward()` through that graph.
    Saved tensors are the outputs of `sigmoid`, `tanh`, `exp`, `exp2`, `expm1`, `relu`,
    `softmax`, `log_softmax`, `sqrt`, `rsqrt` and `reciprocal` (their gradient formula reads
    the output), and the operands of `a * b` / `a @ b` (each is saved when the other requires
    grad) and of `a ** k`. The in-place operation may be a `Tensor.*_` method, an augmented or
    item assignment, `F.relu(y, inplace=True)` (and the other `inplace=True` functions), or an
    `nn.ReLU(inplace=True)`/`nn.Dropout(inplace=True)` module applied to such a tensor, also
    right after `nn.Sigmoid()`/`nn.Tanh()`/`nn.ReLU()`/`nn.Softmax()` in an `nn.Sequential` or
    inside a module's `forward()`. A view shares its base's storage and version counter, so
    the write may also hit a view of a saved tensor (`h = relu(x); h[:, :2] /= 2`, a `.view()`
    of it, a part of `h.chunk(2)` written under `no_grad`), the base of a saved view
    (`T[i] = layer(T[i])`: the layer saved the row `T[i]`), or another view of the same base.

    ## Why is this bad
    The in-place write bumps the tensor's version counter; when `backward()` reaches the op that
    saved it, torch raises `RuntimeError: one of the variables needed for gradient computation
    has been modified by an inplace operation: [...], which is output 0 of SigmoidBackward0, is
    at version 1; expected version 0 instead.` The error surfaces at `backward()`, far from the
    line that caused it; this rule points at the in-place line. It happens under
    `torch.no_grad()` too (the version counter is still bumped).

    Not reported: in-place ops on results that nothing saved (`y = a * 2; y.relu_()`,
    `y = a + 1; y.exp_()`, `Linear -> ReLU(inplace=True)`, `BatchNorm -> ReLU(inplace=True)`),
    and in-place ops after the last `backward()` through the graph.

    ## Example
    ```python
    b = a.sigmoid()
    b.mul_(2)
    b.sum().backward()        # RuntimeError: ... output 0 of SigmoidBackward0 ...
    ```

    ## Use instead
    ```python
    b = a.sigmoid()
    b = b * 2                 # out of place
    ```
    and `inplace=False` for an activation that follows a sigmoid/tanh/softmax/ReLU.

    ## References
    - https://pytorch.org/docs/stable/notes/autograd.html#in-place-operations-with-autograd
    - https://github.com/pytorch/pytorch/blob/main/tools/autograd/derivatives.yaml
    """

    code = "GL102"
    name = "inplace-on-saved-output"
    severity = Severity.ERROR
    message = "in-place {op} on {what}, which autograd saved for backward: backward() raises RuntimeError ({where})"
    hint = "use the out-of-place op (`y = y * 2`, `inplace=False`) on tensors that an earlier op saved"

    def on_inplace(self, node: Any, value: Any, op: str) -> None:
        model = self.model
        entries = model.saved_entries(value)
        if not entries:
            return
        if (value.leaf_requiring_grad or value.view_of_leaf) and model.grad_enabled is True:
            return  # GL101: it raises right here
        if model.grad_enabled is True and model.multi_view_op(value) is not None:
            return  # GL105: a part of chunk/split/unbind, it raises right here
        what = entries[0][1]
        if model.in_module_forward():
            self.report(node, op=op, what=what, where="when the module is trained")
        else:
            self.defer(node, tuple(s for s, _ in entries), op=op, what=what)

    def confirmed(self, node: Any, context: Any, payload: Dict[str, Any]) -> None:
        self.report(node, context=context, where="at the later backward()", **payload)

    def on_sequential_inplace(self, node: Any, prev: Any, module: Any) -> None:
        self.report(
            node, op=f"`{module.node}(inplace=True)`", what=f"the output of `{prev.act}`",
            where="when the model is trained",
        )
