from __future__ import annotations

from typing import Any, Iterator, List, Optional

import libcst as cst

from gradlint.model.names import dotted, subtree
from gradlint.model.pathconds import bound_keys, reads, reads_bound
from gradlint.rule import Rule, Severity

_FLAG = "require_backward_grad_sync"
_LOOPS = (cst.For, cst.While)
_GRAD_OFF = frozenset({"no_grad", "inference_mode"})


class DdpSyncFlagAfterForward(Rule):
    """
    ## What it does
    Finds `model.require_backward_grad_sync = ...` assigned, in a loop iteration, after that
    iteration's forward call of the same model (`model(x)`, also inside a `with autocast():`)
    and before its `backward()`, with a value that changes from one iteration to the next
    (`micro_step == grad_accum_steps - 1`): the flag of a `DistributedDataParallel` model that
    gradient accumulation sets to all-reduce only the last micro-step.

    ## Why is this bad
    Silently wrong. DDP reads `require_backward_grad_sync` in its forward: when it is true the
    forward prepares the reducer, and only then does the following `backward()` all-reduce the
    gradients. A value set after the forward is seen by the *next* forward. The last micro-step
    (whose forward ran with the flag still false) is not all-reduced, and the first micro-step
    of the next window (which runs with the flag left true) is: `optimizer.step()` applies
    rank-local gradients, the replicas drift apart, and with one process nothing shows at all.

    Not reported: the flag set before the forward (the fix), or after the `backward()` for the
    next micro-step, a value that is the same on every iteration, and a forward run in a helper
    (`loss = compute_loss(model, batch)`): the linter does not follow it.

    ## Example
    ```python
    for micro_step in range(grad_accum_steps):
        logits, loss = model(x, y)
        model.require_backward_grad_sync = (micro_step == grad_accum_steps - 1)
        (loss / grad_accum_steps).backward()
    ```

    ## Use instead
    ```python
    for micro_step in range(grad_accum_steps):
        model.require_backward_grad_sync = (micro_step == grad_accum_steps - 1)
        logits, loss = model(x, y)
        (loss / grad_accum_steps).backward()
    ```
    (or `with model.no_sync():` around the forward and backward of every micro-step but the last)

    ## Fix safety
    No fix: the assignment must move above the forward, which may span several statements.

    ## References
    - https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html#torch.nn.parallel.DistributedDataParallel.no_sync
    - https://github.com/karpathy/build-nanogpt/pull/30
    """

    code = "GL610"
    name = "ddp-sync-flag-after-forward"
    severity = Severity.ERROR
    message = "{what}"
    hint = ("set `require_backward_grad_sync` before the forward call (or wrap the other micro-steps in "
            "`model.no_sync()`)")

    def on_finish(self) -> None:
        module = self.model.root_module
        if module is None or not self.model.imports_torch():
            return
        text = self.model.root_text
        if text is not None and _FLAG not in text:
            return  # (the scan of every loop below costs ~6% of a run over a project otherwise)
        for loop in subtree(module):
            if type(loop) in _LOOPS:
                self._loop(loop)

    def _loop(self, loop: Any) -> None:
        bound = None
        for block in _blocks(loop.body):
            stmts = list(block.body)
            for i, st in enumerate(stmts):
                found = _flag_assignment(st)
                if found is None:
                    continue
                assign, key = found
                if bound is None:
                    bound = {k for k in bound_keys(loop) if not k.endswith("." + _FLAG)}
                if not any(reads_bound(k, bound) for k in reads(assign.value)):
                    continue  # the same value on every iteration
                forward = next((c for s in stmts[:i] for c in _unconditional_calls(s) if _calls_model(c, key)), None)
                if forward is None:
                    continue
                backward = None
                for s in stmts[i + 1:]:
                    if any(type(c) is cst.Call and _calls_model(c, key) for c in subtree(s, nested=False)):
                        break  # another forward first: it reads the new value
                    backward = next((c for c in _unconditional_calls(s) if _is_backward(c)), None)
                    if backward is not None:
                        break
                if backward is None:
                    continue
                what = (f"`{key}.{_FLAG}` set after `{key}(...)`'s forward and before `backward()`: DDP reads the "
                        "flag in its forward, so this backward all-reduces (or not) as the previous iteration's value "
                        "said, and the value set here applies to the next micro-step: the micro-step meant to "
                        "synchronise does not, and the step applies rank-local gradients")
                self.report(assign, context=(st, ()), what=what,
                            related=[(forward, "the forward that already read the flag"),
                                     (backward, "the backward that follows the old value")])


def _blocks(body: Any) -> Iterator[Any]:
    """The blocks of a loop body whose statements run in order within one iteration: the body
    itself and the bodies of the ``with`` statements in it (not nested loops: their own)."""
    if not isinstance(body, cst.IndentedBlock):
        return
    yield body
    for st in body.body:
        if type(st) is cst.With:
            yield from _blocks(st.body)


def _flag_assignment(st: Any) -> Optional[Any]:
    """(the assignment, the model's key) of ``M.require_backward_grad_sync = v``, also as the body
    of an ``if`` (``if ddp: model.require_backward_grad_sync = ...``)."""
    lines: List[Any] = [st]
    if type(st) is cst.If and st.orelse is None and isinstance(st.body, cst.IndentedBlock):
        lines = list(st.body.body)
    for line in lines:
        if type(line) is not cst.SimpleStatementLine:
            continue
        for small in line.body:
            if type(small) is cst.Assign and len(small.targets) == 1:
                target = small.targets[0].target
                if type(target) is cst.Attribute and target.attr.value == _FLAG:
                    key = dotted(target.value)
                    if key is not None:
                        return small, key
    return None


def _unconditional_calls(st: Any) -> Iterator[Any]:
    """The calls of a statement that run whenever it runs (a simple statement, or a ``with``'s
    items and its body's simple statements)."""
    if type(st) is cst.SimpleStatementLine:
        for n in subtree(st, nested=False):
            if type(n) is cst.Call:
                yield n
    elif type(st) is cst.With:
        if any(type(item.item) is cst.Call and (dotted(item.item.func) or "").rsplit(".", 1)[-1] in _GRAD_OFF
               for item in st.items):
            return  # a forward under no_grad prepares no backward
        for item in st.items:
            for n in subtree(item, nested=False):
                if type(n) is cst.Call:
                    yield n
        if isinstance(st.body, cst.IndentedBlock):
            for inner in st.body.body:
                yield from _unconditional_calls(inner)


def _calls_model(call: Any, key: str) -> bool:
    if type(call) is not cst.Call:
        return False
    name = dotted(call.func)
    return name == key or name == key + ".forward"


def _is_backward(call: Any) -> bool:
    func = call.func
    if type(func) is cst.Attribute and func.attr.value == "backward":
        return True
    return dotted(func) in ("torch.autograd.backward", "autograd.backward")
