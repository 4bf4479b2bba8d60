from __future__ import annotations

from typing import Any

from gradlint.rule import CutRule, Severity



class ScalarRoundtrip(CutRule):
    """
    ## What it does
    Finds a Python number taken out of a tensor that requires grad (`.item()`, `.tolist()`,
    `float(t)`, `int(t)`) and put back into a computation that is back-propagated, when the
    tensor it came from does not otherwise reach that computation.
    Typical forms: `torch.tensor(h.tolist())`, `torch.tensor(t.item())`,
    `norm = float(w.norm()); loss = (w / norm).sum()`.

    ## Why is this bad
    Silently wrong. A Python number has no history: the value becomes a constant, and
    `backward()` computes a gradient that ignores how it depended on the parameters (or no
    gradient at all upstream of it). `.item()` and `.tolist()` never warn; `float(t)` warns only
    once per process.

    Logging and metrics (`print(loss.item())`, `total += loss.item()`) are correct and not
    reported, nor is a deliberate constant scale of a value that keeps its own path to the loss
    (`loss / loss.item()`: the gradient reaches `loss` directly).

    ## Example
    ```python
    norm = float(w.norm())
    loss = (w / norm).sum()
    loss.backward()           # w.grad ignores the dependence of the norm on w
    ```

    ## Use instead
    ```python
    loss = (w / w.norm()).sum()          # keep it a tensor
    # or, when a constant is really intended, say so:
    loss = (w / w.norm().detach()).sum()
    ```

    ## References
    - https://pytorch.org/docs/stable/generated/torch.Tensor.item.html
    - https://pytorch.org/docs/stable/notes/autograd.html
    """

    code = "GL202"
    name = "scalar-roundtrip"
    severity = Severity.ERROR
    message = (
        "a Python number taken out of a tensor that requires grad is used in a value that is "
        "back-propagated: it is a constant there, so the gradient silently ignores it"
    )
    hint = "keep the value a tensor; use `.detach()` explicitly if a constant is intended"

    cut_kinds = frozenset({"scalar"})

    def report_cut(self, cut: Any, value: Any, **kw: Any) -> None:
        self.report(cut.node, **kw)
