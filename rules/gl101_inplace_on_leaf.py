from __future__ import annotations

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.lattice import tensor_view
from gradlint.model.names import dotted, node_children
from gradlint.rule import Fix, Rule, Severity

_AUG_OPS = {
    cst.AddAssign: "+=", cst.SubtractAssign: "-=", cst.MultiplyAssign: "*=",
    cst.DivideAssign: "/=", cst.FloorDivideAssign: "//=", cst.ModuloAssign: "%=",
    cst.PowerAssign: "**=", cst.BitAndAssign: "&=", cst.BitOrAssign: "|=",
    cst.BitXorAssign: "^=", cst.LeftShiftAssign: "<<=", cst.RightShiftAssign: ">>=",
}


def _name(node: cst.BaseExpression) -> str:
    d = dotted(node)
    if d is not None:
        return d
    if isinstance(node, cst.Subscript):
        return _name(node.value) + "[...]"
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return _name(node.func.value) + f".{node.func.attr.value}(...)"
    return "tensor"


class InplaceOnLeaf(Rule):
    """
    ## What it does
    Finds an in-place operation on a leaf tensor that requires grad (or on a view of one)
    while grad mode is on.
    That is any `Tensor.*_` method (`add_`, `zero_`, `copy_`, `clamp_`,
    `normal_`, ...), augmented assignment (`x += ...`, `w -= lr * w.grad`), and item or slice
    assignment (`x[0] = ...`, `x[:2] *= 2`), including on the loop variable of
    `for p in model.parameters()` and on a leaf kept in a list or dict
    (`params["w"] -= lr * params["w"].grad`; by a variable key when every element is such a leaf).

    ## Why is this bad
    torch refuses it at that line: `RuntimeError: a leaf Variable that requires grad is being
    used in an in-place operation.` (or `a view of a leaf Variable ...` for `x[0] = ...`). The
    in-place write would overwrite the value autograd needs, so the manual SGD step
    `w -= lr * w.grad` written outside `torch.no_grad()` crashes on its first iteration.

    It does not fire under `torch.no_grad()`, `torch.inference_mode()`, a `@torch.no_grad()`
    function, or in the `forward`/`backward` of a custom `autograd.Function` (grad mode is off
    there); nor for `torch.nn.init.*` functions (they run under `no_grad` internally), writes
    through `.data`, `x.grad.zero_()`, or a tensor that does not require grad, such as the
    parameters of a module the code froze (`requires_grad_(False)`, `p.requires_grad = False`
    or `p.detach_()` over its `parameters()`, also in `__init__` or a helper): an EMA or teacher
    copy (`self.ema = copy.deepcopy(model)`, then `ema_p.mul_(d).add_(p.detach(), alpha=1 - d)`).

    After an `if`/`else`, `a if c else b`, `try`/`except` or a loop, it fires only when the
    tensor is a leaf that requires grad on every path that reaches the op (a path where the name
    holds `None` or a number fails there anyway for a method such as `.add_()`); a leaf on one
    path only is not reported.

    ## Example
    ```python
    w = torch.randn(3, requires_grad=True)
    loss = (w * x).sum()
    loss.backward()
    w -= 0.1 * w.grad          # RuntimeError
    ```

    ## Use instead
    ```python
    with torch.no_grad():
        w -= 0.1 * w.grad
    w.grad = None
    ```
    or an out-of-place op (`y = x + 1`) when you want a new value in the graph.

    ## Fix safety
    An augmented assignment to a name (`w -= lr * w.grad`) that is a statement alone on its
    line is wrapped in `with torch.no_grad():` at the same indentation (spelled with the name
    the file imported torch, or `no_grad`, under). The fix is safe when the right-hand side
    reads the target's own `.grad` (the manual optimizer step: doing it under `no_grad` is the
    only intent it can have); otherwise (`x += 1`) it is unsafe, since an out-of-place
    `x = x + 1` may have been meant, and is applied only with `--unsafe-fixes`. No fix is
    offered for method calls, item assignment, views, or when torch is not imported by name.

    ## References
    - https://pytorch.org/docs/stable/notes/autograd.html#in-place-operations-with-autograd
    - https://pytorch.org/docs/stable/generated/torch.no_grad.html
    """

    code = "GL101"
    name = "inplace-on-leaf"
    severity = Severity.ERROR
    message = "in-place {op} on `{target}`, {what} that requires grad: torch raises RuntimeError here"
    hint = "do the update under `with torch.no_grad():`, or use an out-of-place op (`y = x + 1`)"
    fixable = True

    def _check(self, node: cst.CSTNode, receiver: cst.BaseExpression, op: str, view: bool = False,
               shown: str = "", method: bool = False) -> None:
        model = self.model
        if model.grad_enabled is not True:
            return
        v = model.value_of(receiver)
        if method:
            # `x = None` / `total = 0` on one path, a tensor on the others: a tensor method fails
            # on a number or None anyway, so the tensors decide (lattice.tensor_view)
            v = tensor_view(v)
        if v.leaf_requiring_grad:
            what = "a view of a leaf tensor" if view else "a leaf tensor"
        elif v.kind == "tensor" and v.view_of_leaf:
            what = "a view of a leaf tensor"
        else:
            return
        fix = _no_grad_fix(model, node) if what == "a leaf tensor" else None
        self.report_value(node, v, op=op, target=shown or _name(receiver), what=what, fix=fix)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        attr = func.attr.value
        if not attr.endswith("_") or attr.startswith("_") or attr in api.NOT_INPLACE:
            return
        if self.model.qualname(func) is not None:
            return  # a module-level function such as torch.nn.init.normal_
        self._check(node, func.value, f"`.{attr}()`", method=True)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        op = _AUG_OPS.get(type(node.operator))
        if op is None:
            return
        target = node.target
        if isinstance(target, cst.Subscript):
            self._subscript(node, target, f"`{op}`")
        else:
            self._check(node, target, f"`{op}`")

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if isinstance(t.target, cst.Subscript):
                self._subscript(node, t.target, "item assignment")

    def _subscript(self, node: cst.CSTNode, target: cst.Subscript, op: str) -> None:
        if self.model.value_of(target.value).kind == "tuple":
            # `params["w"] -= lr * g`: a list's or dict's element written in place (an assignment
            # only replaces the element)
            if isinstance(node, cst.AugAssign):
                self._check(node, target, op)
            return
        # x[...] = v writes into x (basic or advanced indexing alike)
        self._check(node, target.value, op, view=True, shown=_name(target))


# ---------------------------------------------------------------------------- the fix
def _no_grad_fix(model, node: cst.CSTNode):
    """`w -= lr * w.grad` alone on its line -> the same under `with torch.no_grad():`."""
    from gradlint.edits import insert_before

    if not isinstance(node, cst.AugAssign) or not isinstance(node.target, cst.Name):
        return None
    stmt = model.current_statement
    if (not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or stmt.body[0] is not node
            or not isinstance(node.semicolon, cst.MaybeSentinel)):
        return None
    if "\n" in cst.Module(body=[]).code_for_node(node):
        return None  # a statement over several lines: leave it to a person
    no_grad = _no_grad_spelling(model)
    if no_grad is None:
        return None
    name = node.target.value
    return Fix((insert_before(node, f"with {no_grad}():\n    ", reindent=True),),
               safe=_reads_own_grad(node.value, name),
               description=f"wrap the update of `{name}` in `with {no_grad}():`")


def _no_grad_spelling(model):
    return model.imports.spelling("torch.no_grad", module_first=True)


def _reads_own_grad(expr: cst.CSTNode, name: str) -> bool:
    stack = [expr]
    while stack:
        n = stack.pop()
        if (isinstance(n, cst.Attribute) and n.attr.value == "grad" and isinstance(n.value, cst.Name)
                and n.value.value == name):
            return True
        stack.extend(node_children(n))
    return False
