from __future__ import annotations

from typing import Any, Dict

from gradlint.rule import BackwardRule, Severity


class InplaceOnDetachedAlias(BackwardRule):
    """
    ## What it does
    Finds an in-place operation on the result of `.detach()` (`c = a.detach(); c.zero_()`,
    `a.detach().mul_(2)`) where `a` is a graph-carrying tensor.
    It is an error when autograd saved `a` for a `backward()` that follows, and a warning when
    `a` is a computed tensor that is merely changed and then used again.

    ## Why is this bad
    `detach()` does not copy: the result shares storage (and the version counter) with `a`, so
    the write changes `a` too. When `a` was saved for backward, `backward()` raises
    `RuntimeError: one of the variables needed for gradient computation has been modified by an
    inplace operation`; otherwise every later use of `a` silently sees the new values.

    Not reported: the same on a parameter or other leaf (`p.detach().mul_(decay)` is a
    deliberate update that bypasses autograd), and on `a.detach().clone()`.

    ## Example
    ```python
    b = a.sigmoid()
    c = b.detach()
    c.zero_()                 # b is zeroed too
    b.sum().backward()        # RuntimeError
    ```

    ## Use instead
    ```python
    c = b.detach().clone()    # an independent copy
    c.zero_()
    ```

    ## References
    - https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html
    - https://pytorch.org/docs/stable/notes/autograd.html#in-place-operations-with-autograd
    """

    code = "GL104"
    name = "inplace-on-detached-alias"
    severity = Severity.ERROR
    message = "in-place {op} on a `.detach()` alias {effect}"
    hint = "use `.detach().clone()` for an independent copy"

    _CHANGED = "changes the original tensor too (detach() shares its storage)"

    def on_inplace(self, node: Any, value: Any, op: str) -> None:
        if value.alias_kind != "detach" or value.alias_of is None:
            return
        base = value.alias_of
        entries = self.model.saved_entries(base)
        graph = base.kind == "tensor" and base.rg is True and base.leaf is False
        if entries or graph:
            # without a confirming backward(), only worth a warning if the original is read again
            self.defer(node, tuple(s for s, _ in entries), op=op, what=entries[0][1] if entries else "",
                       graph=graph, base=base, reads=self.model.read_count(base))

    def confirmed(self, node: Any, context: Any, payload: Dict[str, Any]) -> None:
        self.report(
            node, context=context, op=payload["op"],
            effect=f"changes the original, which autograd saved ({payload['what']}): backward() raises RuntimeError",
        )

    def unconfirmed(self, node: Any, context: Any, payload: Dict[str, Any]) -> None:
        if payload["graph"] and self.model.read_count(payload["base"]) > payload["reads"]:
            self.report(node, context=context, op=payload["op"], severity=Severity.WARNING, effect=self._CHANGED)
