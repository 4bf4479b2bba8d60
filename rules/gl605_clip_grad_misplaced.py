from __future__ import annotations

from typing import Any, List, Optional, Tuple

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.names import dotted
from gradlint.rule import Rule, Severity

# the in-place clipping functions of torch and their look-alikes (a local copy of
# clip_grad_norm_, fairseq's utils.clip_grad_norm_, accelerate's accelerator.clip_grad_norm_)
_CLIP_NAMES = frozenset({"clip_grad_norm_", "clip_grad_value_"})
# keywords of torch's own clip functions (a False literal for any other keyword, such as a
# local copy's clip_grad=False, means the call only measures)
_TORCH_KEYWORDS = frozenset({"parameters", "max_norm", "clip_value", "norm_type", "error_if_nonfinite", "foreach"})
_GRADS = ("backward", "grad_set")
_ORDER = ("backward", "grad_set", "step")
_TRACKED = _ORDER + ("zero_grad", "zero_grad_keep")


class _Clip:
    __slots__ = ("seq", "node", "loops", "starts", "function", "exits", "context")

    def __init__(self, seq: int, node: Any, loops: Tuple[Any, ...], starts: Tuple[int, ...], function: Any,
                 exits: bool, context: Any) -> None:
        self.seq, self.node, self.loops, self.starts, self.function = seq, node, loops, starts, function
        self.exits, self.context = exits, context


class ClipGradMisplaced(Rule):
    """
    ## What it does
    Finds gradient clipping (`torch.nn.utils.clip_grad_norm_`, `clip_grad_value_`, and
    functions of that name such as `accelerator.clip_grad_norm_` or a local copy) that sits
    between an optimizer's `step()` and the next `backward()` of a training loop (or of a
    training-step function): called *before* the step's `backward()`, or *after*
    `optimizer.step()`.

    It is reported at the clipping call (move it between `backward()` and `step()`), with the
    `step()` that uses the unclipped gradients as a related location. Clipping done in a helper
    that the loop calls (a `training_step()` method) is followed into the helper.

    ## Why is this bad
    Silently wrong. Clipping rescales the gradients that are in `.grad` when it runs. Before
    `backward()` they are `None`, zeros, or the previous step's gradients (already used); after
    `step()` the update has already been made with the unclipped gradients. Either way every
    update uses unclipped gradients, and `max_norm` does nothing (training with large gradients
    diverges as if there were no clipping).

    With mixed precision (a `GradScaler`), clipping between `scaler.scale(loss).backward()` and
    `scaler.step(optimizer)` without `scaler.unscale_(optimizer)` before it is reported too: the
    gradients are still multiplied by the loss scale (65536 at the start), so the clip bounds
    the scaled norm, and once `scaler.step()` unscales them every update is that much smaller
    than the clipping asked for (training crawls, or stalls).

    Not reported: clipping between `backward()` and `step()` (also with gradient accumulation,
    `scaler.unscale_(optimizer)` first, or several optimizers each clipped before its own
    `step()`), clipping in a branch that ends the iteration (`continue`), and a call that only
    measures the norm (`max_norm=inf`).

    ## Example
    ```python
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        clip_grad_norm_(model.parameters(), 1.0)   # the update above used unclipped gradients
    ```

    ## Use instead
    ```python
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    ```

    ## References
    - https://pytorch.org/docs/stable/generated/torch.nn.utils.clip_grad_norm_.html
    - https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-clipping
    """

    code = "GL605"
    name = "clip-grad-misplaced"
    severity = Severity.ERROR
    message = "{what}"
    hint = "clip after `loss.backward()` and before `optimizer.step()` (after `scaler.unscale_(optimizer)` with AMP)"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        self._clips: List[_Clip] = []
        self._ifs: List[cst.If] = []
        self._unscales: List[int] = []  # where (the event count) each `scaler.unscale_(...)` ran

    def visit_If(self, node: cst.If) -> None:
        self._ifs.append(node)

    def leave_If(self, node: cst.If) -> None:
        if self._ifs and self._ifs[-1] is node:
            self._ifs.pop()

    def visit_Call(self, node: cst.Call) -> None:
        model = self.model
        if model.repeat:
            return  # the loop's second pass: events belong to the first
        if type(node.func) is cst.Attribute and node.func.attr.value == "unscale_":
            self._unscales.append(len(model.events))
            return
        q = model.qualname(node.func)
        if q is None:
            name = (dotted(node.func) or "").rsplit(".", 1)[-1]
            if name not in _CLIP_NAMES:
                return
        elif q not in api.CLIP_GRAD:
            return
        if _only_measures(node):
            return
        conditions = model.conditions
        # like the model's events: in the body of an `if` that ends in continue/break/return
        exits = any(_terminates(i.body) and any(c is i.test for c in conditions) for i in self._ifs)
        self._clips.append(_Clip(len(model.events), node, tuple(loop.node for loop in model.loops),
                                 tuple(loop.start_id for loop in model.loops), model.function_stack[-1] if model.function_stack else None, exits,
                                 model.here()))

    def on_finish(self) -> None:
        if not self._clips or not self.model.imports_torch():
            return
        events = [e for e in self.model.events if e.kind in _TRACKED and not e.exits and not self._grad_only(e)]
        reported: set = set()
        for clip in self._clips:
            if clip.exits or id(clip.node) in reported:
                continue
            group = _scope(clip, events)
            if not group:
                continue
            found = _misplaced(clip, group)
            if found is None:
                scaled = _scaled(clip, group, self._unscales)
                if scaled is not None:
                    backward, step = scaled
                    reported.add(id(clip.node))
                    what = ("gradient clipping of GradScaler-scaled gradients: no `scaler.unscale_(optimizer)` since "
                            "`scaler.scale(loss).backward()`, so the clip bounds the scaled norm and, once "
                            "`scaler.step()` unscales them, every update is shrunk by the loss scale")
                    self.report(clip.node, context=clip.context, what=what,
                                related=[(backward.node, "the scaled backward()"),
                                         (step.node, "the step that unscales the clipped gradients")])
                continue
            step, backward, after_step = found
            reported.add(id(clip.node))
            if after_step:
                what = ("gradient clipping after `optimizer.step()`: the update already used the unclipped "
                        "gradients, and the clipped ones are cleared or overwritten before the next step")
                related = [(step.node, "the step that uses the unclipped gradients")]
            else:
                what = ("gradient clipping before `backward()`: it clips the previous step's gradients (or none), "
                        "and the following step uses the new, unclipped gradients")
                related = [(backward.node, "the backward() that computes the gradients after the clipping"),
                           (step.node, "the step that uses them unclipped")]
            self.report(clip.node, context=clip.context, related=related, what=what)

    def _grad_only(self, e: Any) -> bool:
        """``torch.autograd.grad(...)`` returns gradients without writing ``.grad``."""
        if e.kind != "backward" or not isinstance(e.node, cst.Call):
            return False
        return self.model.qualname(e.node.func) == "torch.autograd.grad"


def _scaler_of(call: Any, method: str) -> Optional[str]:
    """``S`` of ``S.<method>(...)`` (dotted), else None."""
    if type(call) is cst.Call and type(call.func) is cst.Attribute and call.func.attr.value == method:
        return dotted(call.func.value)
    return None


def _scaled(clip: _Clip, group: List[Any], unscales: List[int]) -> Optional[Tuple[Any, Any]]:
    """(the backward, the step) when the clipping runs between ``S.scale(loss).backward()`` and
    ``S.step(optimizer)`` of the same GradScaler ``S`` with no ``unscale_(...)`` in between
    (AMP's gradients are still multiplied by the loss scale there); else None."""
    before = [e for e in group if e.seq < clip.seq and e.kind in _ORDER]
    after = [e for e in group if e.seq >= clip.seq and e.kind in _ORDER]
    if not before or not after or before[-1].kind != "backward" or after[0].kind != "step":
        return None
    backward, step = before[-1], after[0]
    node = backward.node
    receiver = node.func.value if type(node) is cst.Call and type(node.func) is cst.Attribute \
        and node.func.attr.value == "backward" else None
    scaler = _scaler_of(receiver, "scale")
    if scaler is None or _scaler_of(step.node, "step") != scaler:
        return None
    if any(backward.seq < u <= clip.seq for u in unscales):
        return None
    return backward, step


def _only_measures(node: cst.Call) -> bool:
    """``clip_grad_norm_(params, float('inf'))`` computes the norm without clipping; a local copy
    called with ``clip_grad=False`` (a keyword torch's function does not have) likewise."""
    limit = None
    positional = [a for a in node.args if a.keyword is None and not a.star]
    if len(positional) > 1:
        limit = positional[1].value
    for a in node.args:
        if a.keyword is None:
            continue
        kw = a.keyword.value
        if kw in ("max_norm", "clip_value"):
            limit = a.value
        elif kw not in _TORCH_KEYWORDS and isinstance(a.value, cst.Name) and a.value.value == "False":
            return True
    return limit is not None and _is_inf(limit)


def _is_inf(node: Any) -> bool:
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "float" and node.args:
        v = node.args[0].value
        return isinstance(v, cst.SimpleString) and v.evaluated_value.strip().lower() in ("inf", "infinity", "+inf")
    d = dotted(node) or ""
    return d in ("inf", "math.inf", "np.inf", "numpy.inf", "torch.inf", "float.inf")


def _terminates(body: Any) -> bool:
    if isinstance(body, cst.SimpleStatementSuite):  # `if x: continue` on one line
        body = cst.IndentedBlock(body=[cst.SimpleStatementLine(body=body.body)]) if body.body else body
    stmts = body.body if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)) else ()
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, cst.SimpleStatementLine) and last.body:
        return isinstance(last.body[-1], (cst.Return, cst.Raise, cst.Break, cst.Continue))
    if isinstance(last, cst.SimpleStatementSuite) and last.body:
        return isinstance(last.body[-1], (cst.Return, cst.Raise, cst.Break, cst.Continue))
    return False


def _scope(clip: _Clip, events: List[Any]) -> List[Any]:
    """The training events that one iteration around the clipping runs: those of the innermost
    loop of the call that backpropagates or steps (a loop over parameter groups is not the
    training loop), else those of the function (or module) the call is in, run as one step."""
    for loop, start in reversed(list(zip(clip.loops, clip.starts))):
        # this walk of the loop (a loop in a helper is walked again at each call)
        group = [e for e in events if loop in e.loops and e.starts[e.loops.index(loop)] == start]
        if any(e.kind in _ORDER for e in group):
            return group
    allowed = set(map(id, clip.loops))
    return [e for e in events if e.function is clip.function and all(id(lp) in allowed for lp in e.loops)]


def _misplaced(clip: _Clip, group: List[Any]) -> Optional[Tuple[Any, Any, bool]]:
    """(the step, the backward, whether the step comes first in the iteration) when, going
    around the loop, the nearest gradient event before the clipping is a ``step()`` and the
    nearest one after it a ``backward()`` (the clipping sits between a step and the next
    backward); else None."""
    before = [e for e in group if e.seq < clip.seq and e.kind in _ORDER]
    after = [e for e in group if e.seq >= clip.seq and e.kind in _ORDER]
    ring_prev = before[::-1] + after[::-1]
    ring_next = after + before
    if not ring_prev or not ring_next:
        return None
    prev, nxt = ring_prev[0], ring_next[0]
    if prev.kind != "step" or nxt.kind not in _GRADS:
        return None
    after_step = bool(before) and before[-1] is prev
    if after_step:
        return prev, nxt, True
    # before backward(): the step that follows it uses the new gradients unclipped
    rest = ring_next[1:]
    step = next((e for e in rest if e.kind == "step"), prev)
    return step, nxt, False
