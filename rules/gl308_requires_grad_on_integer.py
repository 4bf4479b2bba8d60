from __future__ import annotations

from typing import Optional

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.dtypes import int_dtype
from gradlint.model.syntax import const_bool, kwarg, positional
from gradlint.rule import Rule, Severity

# factories and rebuilders that take `requires_grad=`
_MAKERS = api.FACTORIES | api.REBUILDERS | api.VARIABLE


def _flag(node: cst.Call, position: Optional[int], default: Optional[bool]) -> Optional[bool]:
    """The literal `requires_grad` a call passes (keyword, or positional at ``position``)."""
    kw = kwarg(node, "requires_grad")
    pos = positional(node)
    flag = kw.value if kw is not None else (pos[position] if position is not None and position < len(pos) else None)
    if any(a.star for a in node.args) and kw is None:
        return None  # `*args`: the flag may be among them
    return default if flag is None else const_bool(flag)


class RequiresGradOnInteger(Rule):
    """
    ## What it does
    Finds an integer or bool tensor asked to require grad: `idx.requires_grad_()` or
    `idx.requires_grad = True` on indices (`argmax`, `argsort`, `torch.max(x, 1)[1]`, `.indices`
    of `topk`/`sort`), masks (`x > 0`) or conversions (`.long()`, `.byte()`, `.bool()`,
    `.to(torch.long)`); a factory with `requires_grad=True` that makes an integer tensor
    (`torch.tensor([1, 2], ...)` of integer literals, `torch.arange(3, ...)` of integers,
    `torch.randint`, `torch.zeros(3, dtype=torch.long, ...)`); and `nn.Parameter(t)` of such a
    tensor without `requires_grad=False`.

    Reported only where the dtype is certain: a tensor whose dtype the linter does not know
    (a function argument, a loaded tensor, `.to(dtype)` with a dtype held in a variable) is
    never reported. Indices and conversions are reported also where the linter does not know
    that the receiver is a tensor (`out.argmax(1)` of a helper's argument): were it a NumPy
    array, the same line would fail as well (no `requires_grad_` there).

    ## Why is this bad
    torch raises at that line: `RuntimeError: only Tensors of floating point and complex dtype
    can require gradients` (`nn.Parameter(...)` and a factory's `requires_grad=True` say
    "Only Tensors of floating point and complex dtype ..."; `.requires_grad_()` says "only
    Tensors of floating point dtype ..."). Integers have no gradient: indices and masks are
    step functions of what produced them. Making them require grad does not make a loss built
    from them trainable; what produced them (the logits) gets no gradient through them either.

    ## Example
    ```python
    _, predicted = torch.max(outputs, 1)
    predicted.requires_grad = True              # RuntimeError
    loss = F.mse_loss(predicted.float(), labels.float())

    self.mask = nn.Parameter(mask.byte())       # RuntimeError
    ```

    ## Use instead
    ```python
    loss = F.cross_entropy(outputs, labels)     # a loss on the float scores

    self.register_buffer("mask", mask.byte())   # integer state: a buffer
    self.mask = nn.Parameter(mask.byte(), requires_grad=False)   # or a frozen Parameter
    w = torch.tensor([1.0, 2.0], requires_grad=True)             # trainable: a float tensor
    ```
    For a rounded or quantised value that should still pass gradients, use a straight-through
    estimator on the float tensor: `w + (w.round() - w).detach()`.

    ## References
    - https://pytorch.org/docs/stable/generated/torch.Tensor.requires_grad_.html
    - https://pytorch.org/docs/stable/notes/autograd.html
    - https://github.com/pytorch/pytorch/issues/95110
    """

    code = "GL308"
    name = "requires-grad-on-integer"
    severity = Severity.ERROR
    message = "{what}: torch raises RuntimeError here, only floating point and complex tensors can require gradients"
    hint = ("compute the loss from floating tensors (integer indices and masks have no gradient); keep integer "
            "state in a buffer or `nn.Parameter(..., requires_grad=False)`; give trainable tensors a floating dtype")

    def _check(self, node: cst.CSTNode, subject: cst.BaseExpression, how: str, makes: bool = False) -> None:
        v = self.model.value_of(subject)
        dtype = int_dtype(v)
        if dtype is None:
            return
        kind = "a bool" if dtype == "bool" else "an integer"
        what = f"{how} makes {kind} tensor (`torch.{dtype}`)" if makes else f"{how} on {kind} tensor (`torch.{dtype}`)"
        self.report_value(node, v, what=what)

    def visit_Assign(self, node: cst.Assign) -> None:
        if const_bool(node.value) is not True:
            return
        for t in node.targets:
            target = t.target
            if type(target) is cst.Attribute and target.attr.value == "requires_grad":
                self._check(node, target.value, "setting `.requires_grad = True`")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is cst.Attribute and func.attr.value == "requires_grad_":
            if _flag(node, 0, True) is True:
                self._check(node, func.value, "`.requires_grad_()`")
            return
        q = self.model.qualname(func)
        if q in api.PARAMETER:
            if node.args and node.args[0].keyword is None and not node.args[0].star and _flag(node, 1, True) is True:
                self._check(node, node.args[0].value, "`nn.Parameter(...)`")
        elif q in _MAKERS and _flag(node, 1 if q in api.VARIABLE else None, None) is True:
            self._check(node, node, f"`{q.replace('torch.autograd.', '')}(..., requires_grad=True)`", makes=True)
