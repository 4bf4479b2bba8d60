from __future__ import annotations

from typing import Any, Dict

from gradlint.rule import BackwardRule, Severity

_ALIAS = {"data": "`.data`", "numpy": "a NumPy view (`.numpy()`)"}


class InplaceThroughData(BackwardRule):
    """
    ## What it does
    Finds an in-place write through `.data`, or through a NumPy array that shares memory with
    a tensor (`arr = t.detach().numpy()`), to a tensor that a graph saved for backward, followed
    by a `backward()` through that graph.

    ## Why is this bad
    Silently wrong. `.data` has its own version counter and NumPy writes bump none, so
    autograd's check never fires: `backward()` runs and uses the modified values, giving a
    wrong gradient with no error and no warning (for example `x.grad` = 4 instead of 2, or a
    sigmoid gradient of 0 instead of 0.25).

    `.data` updates with no live graph (an optimizer-style update after `backward()`, weight
    clipping between steps) are not reported: nothing saved those tensors any more.

    ## Example
    ```python
    y = (x * x).sum()
    x.data.add_(1)            # x was saved by x * x
    y.backward()              # x.grad is computed from the new x: wrong
    ```

    ## Use instead
    Finish `backward()` first, then update under `torch.no_grad()` (never through `.data`):
    ```python
    y = (x * x).sum()
    y.backward()
    with torch.no_grad():
        x.add_(1)
    ```
    and `t.detach().clone().numpy()` before changing NumPy data in place.

    ## References
    - https://pytorch.org/docs/stable/notes/autograd.html#in-place-operations-with-autograd
    - https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html
    """

    code = "GL103"
    name = "inplace-through-data"
    severity = Severity.ERROR
    message = (
        "in-place {op} through {alias} of a tensor saved for backward ({what}): autograd cannot "
        "see it and the gradient of the later backward() is silently wrong"
    )
    hint = "call backward() first, then update under `with torch.no_grad():`; copy (`.clone()`) before writing NumPy data"

    def on_inplace(self, node: Any, value: Any, op: str) -> None:
        if value.alias_kind not in _ALIAS or value.alias_of is None:
            return
        entries = self.model.saved_entries(value.alias_of)
        if entries:
            self.defer(node, tuple(s for s, _ in entries), op=op, alias=_ALIAS[value.alias_kind],
                       what=entries[0][1])

    def confirmed(self, node: Any, context: Any, payload: Dict[str, Any]) -> None:
        self.report(node, context=context, **payload)
