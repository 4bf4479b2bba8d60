from __future__ import annotations

from typing import Optional

import libcst as cst

from gradlint.edits import count_comments, replace
from gradlint.rule import Fix, Rule, Severity

_CODE = cst.Module([])
# expressions that take `.detach()` without parentheses
_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)


class TensorCopyConstruct(Rule):
    """
    ## What it does
    Finds `torch.tensor(t)` (and `torch.tensor(t, requires_grad=True)`) whose argument is a
    tensor.

    Not reported where a type test proves the argument is no tensor: in the branch of
    `isinstance(t, (list, tuple))`, `isinstance(t, Sequence)`, `isinstance(t, np.ndarray)`,
    `not isinstance(t, torch.Tensor)`, `not torch.is_tensor(t)`, `t is None` (also combined with
    `and`/`or`, and in `a if test else b`), and after an `if` whose body returns, continues or
    raises (`if torch.is_tensor(t): return t`) or an `assert` of such a test.

    ## Why is this bad
    torch warns on every call: `UserWarning: To copy construct from a tensor, it is recommended
    to use sourceTensor.detach().clone() or sourceTensor.detach().clone().requires_grad_(True),
    rather than torch.tensor(sourceTensor).` The copy has no history: when `t` requires grad,
    the gradient stops there (see also GL203).

    ## Example
    ```python
    y = torch.tensor(x)
    ```

    ## Use instead
    ```python
    y = x.detach().clone()                        # a copy without history
    y = x.detach().clone().requires_grad_(True)   # a new leaf
    y = x.clone()                                 # a copy that keeps the gradient
    ```

    ## Fix safety
    Safe: `torch.tensor(t)` becomes `t.detach().clone()` and `torch.tensor(t,
    requires_grad=True)` becomes `t.detach().clone().requires_grad_(True)` (the replacement
    torch's own warning recommends; the argument is parenthesized when it is not a name,
    attribute, call or subscript: `(a + b).detach().clone()`). Both make a new tensor with the
    same values, dtype, device and strides, without history, so nothing but the warning
    changes. The fix is offered only when the call has exactly the tensor argument, optionally
    with `requires_grad=True`/`False` written as a literal; with `dtype=`, `device=`, any other
    argument, or a comment inside the call, it is left to a person.

    ## References
    - https://pytorch.org/docs/stable/generated/torch.tensor.html
    """

    code = "GL204"
    name = "tensor-copy-construct"
    severity = Severity.WARNING
    message = "`torch.tensor()` of a tensor copies it without history (and warns){extra}"
    hint = "use `t.detach().clone()` (or `t.clone()` to keep the gradient)"
    fixable = True

    def visit_Call(self, node: cst.Call, inlined: bool = False) -> None:
        model = self.model
        if model.qualname(node.func) != "torch.tensor" or not node.args or node.args[0].keyword is not None:
            return
        v = model.value_of(node.args[0].value)
        if v.kind != "tensor":
            return
        extra = ": the gradient to the source is lost" if v.rg is True else ""
        # no fix in a helper seen at one of its calls: another call may give it a list
        self.report(node, extra=extra, fix=None if inlined else _copy_fix(node))

    def on_inlined_call(self, node: cst.Call) -> None:
        self.visit_Call(node, inlined=True)  # `def collate(rows): return torch.tensor(rows)` given a tensor


def _copy_fix(node: cst.Call) -> Optional[Fix]:
    """`torch.tensor(t)` -> `t.detach().clone()`; with `requires_grad=<literal>`, then
    `.requires_grad_(True)` when the literal is True."""
    first = node.args[0]
    if first.star:
        return None
    requires_grad: Optional[bool] = False
    for a in node.args[1:]:
        if a.star or a.keyword is None or a.keyword.value != "requires_grad":
            return None  # dtype=, device=, a second positional argument, **kwargs
        v = a.value
        if isinstance(v, cst.Name) and v.value in ("True", "False") and not v.lpar:
            requires_grad = v.value == "True"
        else:
            return None  # not a literal: its value is known only at run time
    if count_comments(node) != count_comments(first.value):
        return None  # a comment inside the call, outside the argument, would be lost
    arg = _CODE.code_for_node(first.value)
    if not isinstance(first.value, _ATOMS) and not first.value.lpar:
        arg = f"({arg})"
    text = f"{arg}.detach().clone()" + (".requires_grad_(True)" if requires_grad else "")
    return Fix((replace(node, text),), safe=True, description=f"use `{text}`")
