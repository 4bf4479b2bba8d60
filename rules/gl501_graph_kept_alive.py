from __future__ import annotations

from typing import Any, List, Optional

import libcst as cst

from gradlint.edits import replace
from gradlint.model.names import dotted, node_children, reads_key
from gradlint.rule import Fix, Rule, Severity

_CODE = cst.Module([])


def _graph_values(v: Any) -> List[Any]:
    """The non-leaf tensors that require grad in ``v`` (leaves such as parameters hold no graph)."""
    if v.kind == "tensor":
        return [v] if v.rg is True and v.leaf is False else []
    if v.kind == "tuple":
        out: List[Any] = []
        for i in v.items:
            out.extend(_graph_values(i))
        return out
    return []


class GraphKeptAlive(Rule):
    """
    ## What it does
    Finds a graph-carrying tensor (a loss, a model output) accumulated into something that
    outlives the loop iteration: `total_loss += loss`, `losses.append(loss)`,
    `history[k] += loss * n`, `outputs.append({"loss": loss})`, `total = total + loss`, a running
    average (`avg = loss if avg is None else 0.9 * avg + 0.1 * loss`), also when the loss comes
    from a function or method of the same module that returns it.
    It reports accumulation into a number (`total = 0`) in any loop, and into a list or dict in
    a training loop (one that calls `backward()` or `optimizer.step()`); collecting outputs in a
    module's `forward()` is how a forward pass works and is not reported.

    ## Why is this bad
    Silently wrong (memory). The accumulated tensor references the loss, and the loss references
    its whole graph, so every iteration's graph stays alive: without `backward()` all the saved
    activations too (2 MB after one iteration, 80 MB after 40 in a measured example), with
    `backward()` the graph nodes (about 11 per iteration). Memory grows until the process dies;
    summing tensors also costs time in every step.

    Not reported: `total += loss.item()`, `losses.append(loss.detach())`, accumulation under
    `torch.no_grad()` (also in a LightningModule's `validation_step`, `test_step` and
    `predict_step`, which Lightning runs without grad), and an accumulated loss that is
    back-propagated later in the same function, itself or through a loss computed from it after
    the loop (`loss.backward()`, Lightning's `self.manual_backward(loss)`: summing losses to call
    `backward()` once is deliberate).

    ## Example
    ```python
    total_loss = 0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss           # keeps every iteration's graph
    ```

    ## Use instead
    ```python
        total_loss += loss.item()    # a Python float
        losses.append(loss.detach()) # a tensor without history
    ```

    ## Fix safety
    Unsafe: the fix replaces `loss` by `loss.item()` (augmented assignment) or `loss.detach()`
    (stored in a container). It is right when the accumulator is only reported or logged; if the
    code later back-propagates through the accumulated value, or needs a tensor where it now
    gets a float, behaviour changes. Applied only with `--unsafe-fixes`.

    ## References
    - https://pytorch.org/docs/stable/notes/faq.html#my-model-reports-cuda-runtime-error-2-out-of-memory
    """

    code = "GL501"
    name = "graph-kept-alive"
    severity = Severity.ERROR
    fixable = True
    message = "a graph-carrying tensor is accumulated into `{acc}`, which outlives the loop iteration: every iteration's graph stays in memory"
    hint = "accumulate `loss.item()` (a float) or `loss.detach()`"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        self._pending: List[Any] = []

    def _candidate(self, node: cst.CSTNode, acc: Optional[str], value_node: cst.BaseExpression, item: bool) -> None:
        model = self.model
        if acc is None or not model.loops or not model.defined_before_loop(acc):
            return
        if acc.endswith(".data"):
            # `x.data[i] = t`, `x.data += t`: `.data` is a new detached tensor at each read, the
            # write lands in x's storage and the graph stays on that temporary, which dies
            return
        if model.function_stack and model.function_stack[-1].name.value == "forward":
            return  # collecting a forward pass's outputs: the graph is meant to live until backward()
        values = _graph_values(model.value_of(value_node))
        if not values:
            return
        # a number accumulator (total = 0) only makes sense for reporting; anything else must be
        # in a training loop (one that calls backward()/step()) to be worth a finding
        numeric = model.lookup(acc.split(".")[0] if "." not in acc else acc).kind == "scalar"
        fix = None
        code = _CODE.code_for_node(value_node)
        if isinstance(value_node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
            text = f"{code}.item()" if item else f"{code}.detach()"
            fix = Fix((replace(value_node, text),), safe=False,
                      description=f"use `{text}`")
        function = model.function_stack[-1] if model.function_stack else None
        self._pending.append((node, model.here(), acc, values, fix, numeric, model.loops[-1].node,
                              model.walk_root(), len(model.events), model.frames[-1], function))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        target = node.target
        base = target.value if isinstance(target, cst.Subscript) else target
        self._candidate(node, dotted(base), node.value, item=not isinstance(target, cst.Subscript))

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1:
            return
        target = node.targets[0].target
        key = dotted(target)
        value = node.value
        if key is not None and isinstance(value, cst.IfExp):
            # `avg = loss if avg is None else 0.9 * avg + 0.1 * loss`: the branch that keeps `avg`
            value = next((b for b in (value.orelse, value.body) if _added_to(b, key) is not None), value)
        if key is not None and isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
            added = _added_to(value, key)
            if added is not None:
                self._candidate(node, key, added, item=added is value.right)
        elif isinstance(target, cst.Subscript):
            self._candidate(node, dotted(target.value), value, item=False)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("append", "extend", "add", "insert") and node.args:
            arg = node.args[-1].value
            self._candidate(node, dotted(func.value), arg, item=False)

    def on_finish(self) -> None:
        model = self.model
        training_loops = {loop for e in model.events if e.kind in ("backward", "step") for loop in e.loops}
        # statements whose accumulated values reach a backward() after their loop (through what
        # is computed from the accumulator: `loss = total / n; loss.backward()`), on any walk of it
        later = [e for e in model.events if e.kind == "backward" and e.value is not None and e.value.deps]
        backwarded = {id(p[0]) for p in self._pending
                      if any(p[6] not in e.loops and any(v.id in e.value.deps for v in p[3]) for e in later)}
        for node, context, acc, values, fix, numeric, loop, root, seq, frame, function in self._pending:
            if ((root, acc) in model.backwarded_in if acc.isidentifier() else acc in model.backwarded_keys):
                continue  # the accumulated losses are back-propagated (a local: in the same function): deliberate
            if id(node) in backwarded or _propagated_after(model, values, loop, root, seq,
                                                           model.frame_reads.get((frame, acc))):
                continue  # ... or what is computed from them, once the loop is over (`loss = nll + penalty`)
            if _backward_after(model.events, loop, seq, function):
                continue  # summed over sub-batches or domains, back-propagated once after the loop
            if _over_structure(loop):
                continue  # a loop over parameters or submodules (a penalty term): bounded, one graph
            if loop not in training_loops and (not numeric or _returns(function, acc)):
                continue  # (a loss built as a sum and returned to the caller, which uses it)
            certain = any(not v.probable or v.id in model.backwarded for v in values)
            self.report(node, context=context, acc=acc, fix=fix,
                        severity=None if certain else Severity.WARNING)


def _added_to(value: Any, key: str) -> Any:
    """In ``key + t``, ``t + key``, ``a * key + t`` (a running sum or average of ``key``): ``t``."""
    if not isinstance(value, cst.BinaryOperation) or not isinstance(value.operator, cst.Add):
        return None
    for kept, other in ((value.left, value.right), (value.right, value.left)):
        if isinstance(kept, cst.BinaryOperation) and isinstance(kept.operator, cst.Multiply):
            kept = kept.right if dotted(kept.right) == key else kept.left
        if dotted(kept) == key and not reads_key(other, key):
            return other
    return None


def _propagated_after(model: Any, values: List[Any], loop: Any, root: Any, seq: int, read: Any) -> bool:
    """Does a backward() (or autograd.grad) after the loop, in the same function, go through the
    graphs of the accumulated values, or follow the loop that the accumulator is read after (a
    graph mixed with an unknown value does not list all it goes through)?"""
    deps = set()
    for v in values:
        deps |= v.deps
    read_after = read is not None and read[1] > model.loop_exit_seq.get(id(loop), 1 << 30)
    for e in model.events:
        if e.kind != "backward" or e.seq < seq or e.root is not root or loop in e.loops or e.value is None:
            continue
        outs = e.value.items if e.value.kind == "tuple" else (e.value,)
        if any(o.kind == "tensor" and o.deps & deps for o in outs):
            return True
        if read_after:
            return True
    return False


def _backward_after(events: List[Any], loop: Any, seq: int, fn: Any) -> bool:
    """Does ``fn`` call backward() after ``loop`` (and no backward()/step() of its own in it)?
    (``autograd.grad`` of a penalty in a helper the loop calls does not make it a training loop.)"""
    after = False
    for e in events:
        if e.function is not fn or e.kind not in ("backward", "step"):
            continue
        if loop in e.loops:
            return False
        after = after or (e.kind == "backward" and e.seq >= seq)
    return after


_STRUCTURE = frozenset({"parameters", "named_parameters", "modules", "named_modules", "children",
                        "named_children", "buffers", "named_buffers"})


def _over_structure(loop: Any) -> bool:
    """``for name, p in model.named_parameters():``: the loop walks a model's parts, not steps."""
    it = getattr(loop, "iter", None)
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in ("enumerate", "list", "zip") \
            and it.args:
        it = it.args[0].value
    return isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value in _STRUCTURE


def _returns(function: Any, name: str) -> bool:
    """Does ``function`` return ``name`` (alone or in a tuple)?"""
    if function is None:
        return False
    stack = node_children(function.body)
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue  # not the nested functions
        if isinstance(n, cst.Return) and n.value is not None:
            value = n.value
            parts = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
            if any(dotted(p) == name for p in parts):
                return True
        stack.extend(node_children(n))
    return False
