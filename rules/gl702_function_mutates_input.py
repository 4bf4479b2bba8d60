from __future__ import annotations

from typing import Any, List

import libcst as cst

from gradlint.model.names import node_children
from gradlint.rule import Rule, Severity


class FunctionMutatesInput(Rule):
    """
    ## What it does
    Finds, in `forward(ctx, ...)` of a custom `torch.autograd.Function`, an in-place change of
    an input without `ctx.mark_dirty(input)`.
    It looks at in-place tensor methods (`x.mul_(2)`, `x.copy_(y)`); arguments annotated with a
    type other than `Tensor` are ignored, and so are inputs for which `backward()` returns None
    on every path (a running-statistics buffer the Function updates, as batch norm does: it is
    not differentiated, and torch's own SyncBatchNorm Function does the same).

    ## Why is this bad
    Silently wrong. Grad mode is off inside `forward`, so torch's leaf check does not apply: the
    caller's tensor (even a leaf parameter) is silently changed, and autograd does not know the
    input was modified, so tensors saved for backward and the gradient are wrong.

    ## Example
    ```python
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        x.mul_(2)
        return x
    ```

    ## Use instead
    ```python
    @staticmethod
    def forward(ctx, x):
        y = x * 2                  # out of place
        ctx.save_for_backward(x)
        return y
    ```
    or, when the in-place update is the point, `ctx.mark_dirty(x)` and return `x` (inputs that
    are not leaves only).

    ## References
    - https://pytorch.org/docs/stable/generated/torch.autograd.function.FunctionCtx.mark_dirty.html
    """

    code = "GL702"
    name = "function-mutates-input"
    severity = Severity.ERROR
    message = "in-place {op} on an input of a custom Function's forward() without ctx.mark_dirty(): the caller's tensor changes and the gradient is wrong"
    hint = "compute out of place, or call ctx.mark_dirty(x) and return x"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        self._pending: List[Any] = []

    def on_inplace(self, node: Any, value: Any, op: str) -> None:
        # only tensor methods (`x.mul_()`): forward's other arguments may be ints or dicts,
        # for which `n += 1` or `cache[k] = v` is no mutation of a tensor
        if value.kind == "tensor" and value.made == "fn_input" and op.startswith("`."):
            self._pending.append((node, self.model.here(), value, op))

    def on_finish(self) -> None:
        for node, context, value, op in self._pending:
            if value.id not in self.model.dirty and not self._no_gradient_input(value):
                self.report(node, context=context, op=op)

    def _no_gradient_input(self, value: Any) -> bool:
        """Is ``value`` an input for which the Function's backward() returns None on every
        path? Such an input is a state the Function updates (batch norm's running statistics,
        an output buffer), not something differentiated: mark_dirty() does not concern it."""
        model = self.model
        where = model.fn_inputs.get(value.id)
        cls = model.method_class.get(id(where[0])) if where is not None else None
        info = model.classes.get(cls.name.value) if cls is not None else None
        backward = info.methods.get("backward") if info is not None else None
        if backward is None:
            return False
        returns = _returns(backward.body)
        return bool(returns) and all(_none_at(r.value, where[1]) for r in returns)


def _returns(node: Any) -> List[cst.Return]:
    out: List[cst.Return] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Return):
            out.append(n)
        elif not isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(node_children(n))
    return out


def _none_at(value: Any, i: int) -> bool:
    return (isinstance(value, cst.Tuple) and i < len(value.elements)
            and not any(isinstance(e, cst.StarredElement) for e in value.elements[:i + 1])
            and isinstance(value.elements[i].value, cst.Name) and value.elements[i].value.value == "None")
