from __future__ import annotations

from typing import Any, List, Optional

import libcst as cst

from gradlint.model.names import dotted, reads_grad_of, subtree
from gradlint.rule import Rule, Severity



class ParameterRebound(Rule):
    """
    ## What it does
    Finds a manual update that rebinds a leaf instead of changing it in place:
    `w = w - lr * w.grad` where `w` is a tensor created with `requires_grad=True` (or a
    parameter).

    ## Why is this bad
    The name now holds a new tensor:
    - outside `torch.no_grad()` it is a *non-leaf* computed from the old `w`: after the next
      `backward()` its `.grad` is `None` (torch warns), and `lr * w.grad` raises
      `TypeError: unsupported operand type(s) for *: 'float' and 'NoneType'`;
    - inside `torch.no_grad()` it no longer requires grad: the next `backward()` raises
      `RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn`.
    In a training loop this fails on the second iteration (an error); outside a loop it is
    reported as a warning. A registered parameter of a `torch.nn` layer (`model.fc.weight = ...`)
    cannot be rebound to a plain tensor at all: the assignment raises `TypeError: cannot assign
    'torch.FloatTensor' as parameter 'weight'`.

    ## Example
    ```python
    for _ in range(steps):
        loss = ((w * x - y) ** 2).sum()
        loss.backward()
        w = w - lr * w.grad
    ```

    ## Use instead
    ```python
    with torch.no_grad():
        w -= lr * w.grad      # in place: w stays the same leaf
    w.grad = None
    ```

    ## References
    - https://pytorch.org/tutorials/beginner/examples_autograd/polynomial_autograd.html
    """

    code = "GL304"
    name = "parameter-rebound"
    severity = Severity.ERROR
    message = "`{name} = ... {name}.grad ...` rebinds the leaf `{name}` to a new tensor: {effect}"
    hint = "update in place under `with torch.no_grad(): {name} -= lr * {name}.grad`"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        self._pending: List[Any] = []

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1:
            return
        key: Optional[str] = dotted(node.targets[0].target)
        if key is None:
            return
        model = self.model
        cur = model.lookup(key)
        layer_param = False
        target = node.targets[0].target
        if cur.kind == "unknown" and isinstance(target, cst.Attribute) and reads_grad_of(node.value, key):
            # `model.fc.weight = ...`: a parameter of a torch.nn layer, known from the module
            cur = model.value_of(target)
            layer_param = cur.is_param and model.value_of(target.value).kind == "module"
            if not layer_param:
                return
        if not cur.leaf_requiring_grad or not reads_grad_of(node.value, key):
            return
        if model.value_of(node.value).leaf_requiring_grad:
            return  # rebound to a new leaf on purpose (.detach().requires_grad_())
        if layer_param:
            self._pending.append((node, model.here(), dict(
                name=key, effect="a registered parameter cannot hold a plain tensor: the assignment raises TypeError",
                severity=None)))
            return
        new = model.value_of(node.value)
        if new.kind == "tensor" and new.rg is False and model.loops and _requires_grad_again(model.loops[-1].node, key):
            # `x = x.detach() + a * x.grad.sign()` (PGD): a new tensor that requires no grad,
            # made a leaf requiring grad again by the loop (`x.requires_grad_()` at its top)
            return
        if model.grad_enabled is True:
            effect = "it is a non-leaf, so its `.grad` is None after the next backward()"
        elif model.grad_enabled is False:
            effect = "it no longer requires grad, so the next backward() raises RuntimeError"
        else:
            return
        self._pending.append((node, model.here(), dict(
            name=key, effect=effect, severity=None if model.loop_depth > 0 else Severity.WARNING)))

    def on_finish(self) -> None:
        for node, context, args in self._pending:
            if id(node) in self.model.releafed:
                continue  # `w.requires_grad_()` right after: a new leaf on purpose, each step
            self.report(node, context=context, **args)


def _requires_grad_again(loop: Any, key: str) -> bool:
    """Does the loop's body set ``key.requires_grad_()`` / ``key.requires_grad = True``?"""
    for n in subtree(loop.body):
        if type(n) is cst.Call and type(n.func) is cst.Attribute and n.func.attr.value == "requires_grad_" \
                and dotted(n.func.value) == key:
            return True
        if type(n) is cst.AssignTarget and type(n.target) is cst.Attribute \
                and n.target.attr.value == "requires_grad" and dotted(n.target.value) == key:
            return True
    return False
