from __future__ import annotations

from typing import Any

from gradlint.rule import Rule, Severity


class InferenceModeTensorInAutograd(Rule):
    """
    ## What it does
    Finds a tensor created under `torch.inference_mode()` that is later saved for backward by an
    operation run with grad enabled (multiplied with a tensor that requires grad, or fed to a
    module with parameters), and a module constructed (or converted: `.to(torch.float64)`,
    `.double()`, `.cuda()`) under `torch.inference_mode()` that is later called with grad
    enabled (trained). Tensors made by a helper, a module's output, or state a trainer set in
    another method are followed.

    ## Why is this bad
    Inference tensors cannot take part in autograd: `RuntimeError: Inference tensors cannot be
    saved for backward.` at the op line. A model *built* under `inference_mode` trains silently
    wrong: its weights are inference tensors, so `weight.grad` stays None (the `t()` view is not
    tracked) while the bias trains, and `optimizer.step()` then raises.

    `torch.no_grad()` has none of these restrictions.

    ## Example
    ```python
    with torch.inference_mode():
        feats = backbone(images)
    loss = head(feats).sum()          # RuntimeError: Inference tensors cannot be saved for backward
    ```

    ## Use instead
    ```python
    with torch.no_grad():
        feats = backbone(images)
    # or feats = feats.clone() outside inference_mode
    ```

    ## References
    - https://pytorch.org/docs/stable/generated/torch.inference_mode.html
    """

    code = "GL703"
    name = "inference-mode-tensor-in-autograd"
    severity = Severity.ERROR
    message = "{what}"
    hint = "use torch.no_grad() where the result is used for training, or .clone() the tensor outside inference_mode"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        self._seen: set = set()

    def on_inference_saved(self, node: Any, value: Any) -> None:
        if id(node) in self._seen:
            return
        self._seen.add(id(node))
        self.report(node, what="a tensor created under inference_mode is saved for backward by an op with grad enabled: torch raises RuntimeError (Inference tensors cannot be saved for backward)")

    def on_inference_module(self, node: Any, module: Any) -> None:
        if node is None or id(node) in self._seen:
            return
        self._seen.add(id(node))
        self.report(node, what="a module constructed (or converted with .to()/.double()) under inference_mode is called with grad enabled: its weights are inference tensors, their .grad stays None or backward() raises, and optimizer.step() raises")
