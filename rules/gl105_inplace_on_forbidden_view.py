from __future__ import annotations

from typing import Any

from gradlint.model.customviews import HOOKED
from gradlint.rule import Rule, Severity


class InplaceOnForbiddenView(Rule):
    """
    ## What it does
    Finds an in-place operation, with grad mode on, on a view that autograd forbids writing in
    place. First, one of the tensors that `chunk`,
    `split` or `unbind` returned for a tensor that requires grad (or on a view of one):
    `q, k, v = qkv(x).chunk(3, dim=-1)` then `q *= scaling`, `a, b = h.split(2)` then
    `a.relu_()`, `h.unbind(0)[0].zero_()`, `for part in h.chunk(2): part.clamp_(0)`. The
    in-place operation may be a `Tensor.*_` method, an augmented or item assignment, or an
    `inplace=True` activation.

    Also an in-place operation on the output of a module that has a full backward hook
    (`register_full_backward_hook`, `register_full_backward_pre_hook`), or on a view of it:
    `block.register_full_backward_hook(h)` then `F.relu(block(x), inplace=True)`; and, reported
    at the registration, such a hook on a layer of an `nn.Sequential` whose next layer is an
    in-place activation (`nn.ReLU(inplace=True)`), which writes the hooked layer's output each
    time the Sequential runs. Likewise an in-place operation on the output of a custom
    `autograd.Function` of the project whose `forward` returns a view (`x.view(...)`,
    `x.view_as(x)`, `x[...]`, `x.t()`, ...) or one of its inputs as it is, given a tensor that
    requires grad.

    ## Why is this bad
    These parts are views of the input made by one autograd node that returns several views;
    autograd cannot rebase such a view onto an in-place op's graph, so torch refuses the write at
    that line: `RuntimeError: Output 0 of Split is a view and is being modified inplace. This
    view is the output of a function that returns multiple views. Such functions do not allow
    the output views to be modified inplace. You should replace the inplace operation by an
    out-of-place one.` (`Unbind` for `unbind`). Code written for older torch versions, where
    it was allowed, crashes on its first training step.

    A full backward hook passes the module's outputs through its own identity `autograd.Function`
    whenever one of them requires grad and grad mode is on; a tensor a custom Function returns as
    a view cannot be written in place either: `RuntimeError: Output 0 of
    BackwardHookFunction is a view and is being modified inplace. This view was created
    inside a custom Function (or because an input was returned as-is) and the autograd logic to
    handle view+inplace would override the custom backward ...`. Grad-CAM style code that hooks
    a layer followed by `nn.ReLU(inplace=True)` (VGG, DenseNet's final `F.relu(features,
    inplace=True)`) crashes on its first call. The same error comes from a custom Function whose
    `forward` returns a view or an input as it is (a gradient-reversal layer's `x.view_as(x)`).

    Not reported: the same write under `torch.no_grad()` or `torch.inference_mode()` (allowed),
    parts of a tensor that does not require grad, a `.clone()`, a `.detach()`, `.data` or any
    out-of-place result of a part, parts of `tensor_split`, `hsplit`/`vsplit` or `unsafe_chunk`
    (torch does not mark them), and parts of a leaf that requires grad (GL101 reports those).
    A part of a layer's output (`self.qkv(x).chunk(3)`) is a warning: the output requires grad
    only while the layer has trainable parameters, which a freeze elsewhere may change.
    Not reported for hooks: the legacy `register_backward_hook` and forward hooks (no wrapping), a
    hook whose handle was `remove()`d before the call, a write under `no_grad`, to a copy or an
    out-of-place result of the output, a hook on a parent module (only the hooked module's own
    outputs are wrapped), or a layer whose next layer in the Sequential is anything but an
    in-place activation (in-place dropouts write nothing in eval mode). The output of a layer
    given no input that requires grad is a warning, as above. Not reported for custom Functions:
    an output computed out of place, an input modified in place and marked dirty, a Function that
    marks outputs non-differentiable, and `reshape`/`contiguous`/`flatten` or `F.linear` results
    (a view or a new tensor depending on the input's layout and rank).

    ## Example
    ```python
    q, k, v = F.linear(x, w_qkv).chunk(3, dim=-1)
    q *= scaling              # RuntimeError: Output 0 of Split is a view ...
    ```

    ```python
    layer.register_full_backward_hook(save_grad)
    out = layer(x)
    out.relu_()               # RuntimeError: Output 0 of BackwardHookFunction is a view ...
    ```

    ## Use instead
    ```python
    q, k, v = F.linear(x, w_qkv).chunk(3, dim=-1)
    q = q * scaling           # out of place
    ```

    ```python
    def keep_grad(module, inputs, output):
        output.register_hook(save_grad)  # a tensor hook: the output is not wrapped

    layer.register_forward_hook(keep_grad)
    out = layer(x)
    out.relu_()
    ```

    ## Fix safety
    No fix is offered.

    ## References
    - https://pytorch.org/docs/stable/notes/autograd.html#in-place-operations-with-autograd
    - https://pytorch.org/docs/stable/generated/torch.chunk.html
    - https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.register_full_backward_hook
    """

    code = "GL105"
    name = "inplace-on-forbidden-view"
    severity = Severity.ERROR
    message = "in-place {op} on {what}: torch raises RuntimeError {when}"
    hint = ("use the out-of-place op (`q = q * s`, `inplace=False`), or `.clone()` the tensor before writing into "
            "it; for a hooked module, record its gradient with a tensor hook (`out.register_hook`) instead")

    def on_inplace(self, node: Any, value: Any, op: str) -> None:
        model = self.model
        if model.grad_enabled is not True or value.view_of_leaf:
            return  # allowed under no_grad; a leaf's parts: GL101
        made = model.multi_view_op(value)
        note = " (if the layer that made the tensor has trainable parameters)"
        if made is not None:
            what = (f"a part that `{made}` returned (one of several views of a tensor that requires grad, "
                    "which torch forbids writing in place)")
        elif model.custom_view_of(value) == HOOKED:
            what = ("the output of a module that has a full backward hook (a view made by the hook's custom "
                    "Function, which torch forbids writing in place)")
            note = " (if the module's output requires grad: the hook wraps it only then)"
        elif model.custom_view_of(value) is not None:
            what = (f"the output of custom Function `{model.custom_view_of(value)}`, a view its forward returns "
                    "(torch forbids writing a view made inside a custom Function in place)")
            note = " (if the Function's input requires grad)"
        else:
            return
        if value.probable:
            # made from a layer's output: it requires grad unless the layer is frozen where the
            # model does not see it
            self.report(node, op=op, what=what, when="here", severity=Severity.WARNING, note=note)
        else:
            self.report(node, op=op, what=what, when="here")

    def on_hooked_before_inplace(self, node: Any, module: Any, nxt: Any, trainable: bool) -> None:
        """``layer.register_full_backward_hook(h)`` where ``layer`` is followed, in an
        ``nn.Sequential``, by an in-place activation: reported at the registration."""
        what = ("the output of the layer hooked here, which its full backward hook makes a view of a custom "
                "Function (torch forbids writing it in place)")
        op = f"`{nxt.node}(inplace=True)` (the next layer of its `nn.Sequential`)"
        if trainable:
            self.report(node, op=op, what=what, when="when the Sequential runs with grad enabled")
        else:
            # a layer without trainable parameters: its output requires grad only when its input does
            self.report(node, op=op, what=what, when="when the Sequential runs with grad enabled",
                        severity=Severity.WARNING, note=" (if the layer's input requires grad)")
