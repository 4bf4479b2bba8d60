from __future__ import annotations

from typing import Any, List, Optional

import libcst as cst

from gradlint.model.names import dotted
from gradlint.rule import Rule, Severity


class GradAlias(Rule):
    """
    ## What it does
    Finds a reference to a `.grad` tensor that is kept (`g = p.grad`, `grads.append(p.grad)`)
    and then read after the gradient was changed in place: by `zero_grad(set_to_none=False)`,
    by `p.grad.zero_()`, or by a later `backward()` that accumulates into the same tensor.

    ## Why is this bad
    Silently wrong. `g = p.grad` is not a copy: it is the very tensor autograd accumulates into.
    A later `backward()` adds to it, and `zero_grad(set_to_none=False)` / `p.grad.zero_()` zero
    it, so the "saved" gradient changes under you (a list of N gradients holds N references to
    the last one).

    With the default `optimizer.zero_grad()` (which sets `.grad` to `None`) the next
    `backward()` makes a new tensor, and a kept reference stays correct: not reported.

    ## Example
    ```python
    loss.backward()
    g = p.grad
    optimizer.zero_grad(set_to_none=False)
    print(g)                   # zeros
    ```

    ## Use instead
    ```python
    g = p.grad.detach().clone()
    ```

    ## References
    - https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html
    """

    code = "GL402"
    name = "grad-alias"
    severity = Severity.ERROR
    message = "`{key}` holds the `.grad` tensor itself, not a copy: {how} before it is read again"
    hint = "keep a copy: `p.grad.detach().clone()`"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        self._holds: List[Any] = []

    def _hold(self, node: cst.CSTNode, key: Optional[str], value_node: cst.BaseExpression) -> None:
        model = self.model
        v = model.value_of(value_node)
        if key is None or v.kind != "tensor" or v.alias_kind != "grad":
            return
        function = model.walk_root()
        own = model.own_loop()  # (not a caller's loop: a helper's local dies when it returns)
        loop = own.node if own is not None else None
        start = own.start_id if own is not None else 0
        self._holds.append((node, model.here(), key, len(model.events), function, loop, v.alias_of, v.id, start))

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1:
            self._hold(node, dotted(node.targets[0].target), node.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "append" and len(node.args) == 1:
            self._hold(node, dotted(func.value), node.args[0].value)

    def on_finish(self) -> None:
        model = self.model
        events = model.events
        for node, context, key, seq, function, loop, owner, vid, start in self._holds:
            last_read = model.value_reads.get(vid, (-1, -1))[0]  # reads of the kept tensor itself
            same = [e for e in events if e.root is function]  # in it, or in what it calls
            after = [e for e in same if e.seq >= seq]
            if loop is not None:  # the next iteration runs the loop's earlier events again
                after += [e for e in same if e.seq < seq and loop in e.loops]
            how = None
            for e in after:
                if e.kind == "zero_grad":
                    break  # .grad becomes None: the next backward() makes a new tensor
                if e.kind == "backward" and _misses(e.value, owner):
                    continue  # this backward() does not reach the tensor whose .grad is kept
                if (e.kind in ("backward", "zero_grad_keep") and owner is not None and e.seq >= seq
                        and model.leaf_rebinds.get(owner.id, 1 << 30) <= e.seq):
                    continue  # its name holds a new leaf by then (`x, w = make_problem()`)
                if (e.kind in ("backward", "zero_grad_keep") and loop is not None and e.seq < seq
                        and owner is not None and owner.id >= start and not owner.is_param):
                    # the next iteration's backward() reaches (its `.grad.zero_()` zeroes) a new
                    # leaf, made in the loop, not the one whose gradient is kept
                    continue
                if e.kind in ("zero_grad_keep", "backward"):
                    if last_read > e.seq or (loop is not None and e.seq < seq):
                        how = {"zero_grad_keep": "it is zeroed in place (`zero_grad(set_to_none=False)` / `.grad.zero_()`)",
                               "backward": "a later backward() adds to it"}[e.kind]
                    break
            if how is not None:
                self.report(node, context=context, key=key, how=how)


def _misses(value: Any, owner: Any) -> bool:
    """Does a backward() of ``value`` certainly not reach ``owner`` (a tensor the code made, not a
    module's parameter: the model knows every path from such a leaf)?"""
    if value is None or owner is None or owner.is_param or value.kind != "tensor":
        return False
    return value.rg is True and not value.probable and owner.id not in value.deps
