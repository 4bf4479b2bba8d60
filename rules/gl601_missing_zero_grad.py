from __future__ import annotations

import re
from typing import Any, Dict, List, Set

import libcst as cst

from gradlint.model.names import called_names, dotted, node_children
from gradlint.rule import Rule, Severity

_ZERO = ("zero_grad", "zero_grad_keep")


class MissingZeroGrad(Rule):
    """
    ## What it does
    Finds a training loop that calls `backward()` and `optimizer.step()` but never clears the
    gradients in the loop (`optimizer.zero_grad()`, `model.zero_grad()`, `p.grad = None`), and
    a `zero_grad()` placed between `backward()` and `step()` of the same optimizer. A
    hand-written update counts as a step: an in-place write to a leaf (or its `.data`) computed
    from its own `.grad` (`w.data -= lr * w.grad`, `p.add_(p.grad, alpha=-lr)`), cleared by
    `w.grad.zero_()`, `w.grad.data.zero_()` or `w.grad = None`.

    A missing `zero_grad()` is reported at the loop's `backward()` (clear the gradients before
    it), with the `step()` as a related location; a misplaced one at the `zero_grad()` itself.

    ## Why is this bad
    Silently wrong. `backward()` *adds* to `.grad`: without clearing, every step uses the sum of
    all gradients so far (2, 4, 6, ... instead of 2, 2, 2), so training diverges or crawls.
    Clearing between `backward()` and `step()` throws the fresh gradients away: `step()` sees
    `None` (or zeros) and nothing is updated.

    A loop whose only clearing is a part's (`model.backbone.zero_grad()`) while the optimizer
    steps the whole model, whose class (in the file) calls other trainable parts in `forward`,
    leaves those parts' gradients to accumulate: reported at the `backward()` too.

    Gradient accumulation (`if (i + 1) % k == 0: optimizer.step(); optimizer.zero_grad()`) is
    fine, as are several optimizers (a GAN) each cleared in the loop, and a `zero_grad()` done
    inside a helper that the loop calls.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()          # gradients of all previous batches are still in .grad
    ```

    ## Use instead
    ```python
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## References
    - https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html
    - https://pytorch.org/tutorials/recipes/recipes/zeroing_out_gradients.html
    """

    code = "GL601"
    name = "missing-zero-grad"
    severity = Severity.ERROR
    message = "{what}"
    hint = "call `optimizer.zero_grad()` once per step, before `loss.backward()`"

    def on_finish(self) -> None:
        if not self.model.imports_torch():
            return  # another framework's .step()/.state_dict()
        events = self.model.events
        by_loop: Dict[Any, List[Any]] = {}
        for e in events:
            if e.once and e.kind in _ZERO and e.loops:
                # clears on the first pass of the outer loop only (an exhausted generator)
                by_loop.setdefault(e.loops[-1], []).append(e)
                continue
            for loop in e.loops:
                by_loop.setdefault(loop, []).append(e)
        zero_helpers = {e.function.name.value for e in events if e.kind in _ZERO and e.function is not None}
        reported: Set[int] = set()
        for loop, evs in by_loop.items():
            # torch.autograd.grad() returns gradients: it does not add to .grad
            evs = [e for e in evs if e.kind != "backward" or _accumulates(e)]
            kinds = {e.kind for e in evs}
            if "backward" not in kinds or not kinds & {"step", "manual_step"}:
                continue
            steps = [e for e in evs if e.kind in ("step", "manual_step")]
            if not kinds & set(_ZERO) and all(_fresh_each_iteration(e, loop) for e in steps):
                continue  # a new optimizer over new leaves every iteration: nothing accumulates
            if not kinds & set(_ZERO):
                if zero_helpers and called_names(loop) & zero_helpers:
                    continue  # a helper called in the loop clears the gradients
                step = steps[0]
                backward = next(e for e in evs if e.kind == "backward")
                if id(backward.node) not in reported:
                    reported.add(id(backward.node))
                    if all(e.kind == "manual_step" for e in steps):
                        # a hand-written update: the gradients are cleared right after it (the
                        # last update of the loop is the line to change; backward() the symptom)
                        last = max(steps, key=lambda e: e.seq)
                        keys = list(dict.fromkeys(e.key for e in steps))
                        names = ", ".join(f"`{k}`" for k in keys)
                        what = (f"the loop updates {names} from {'its' if len(keys) == 1 else 'their'} `.grad` "
                                f"but never clears {'it' if len(keys) == 1 else 'them'}: each `backward()` adds to "
                                "the last iteration's gradients, and every update uses their running sum "
                                "(zero them after the update)")
                        self.report(last.node, context=(last.statement, ()), what=what,
                                    related=[(backward.node, "the backward() that adds to the gradients")])
                        continue
                    if step.kind == "manual_step":
                        related = [(step.node, "the update that uses the accumulated gradients")]
                        what = (f"`backward()` in a loop that updates `{step.key}` from `{step.key}.grad` but never "
                                "clears it: gradients accumulate across iterations and every update uses their "
                                "running sum")
                    else:
                        related = [(step.node, "the optimizer step that uses the accumulated gradients")]
                        what = ("`backward()` in a loop with `step()` but no `zero_grad()`: gradients accumulate "
                                "across iterations and every step uses their running sum")
                    self.report(backward.node, context=(backward.statement, ()), related=related, what=what)
                continue
            partial = _partial_clear(self.model, loop, steps, [e for e in evs if e.kind in _ZERO])
            if partial is not None:
                zero, rest = partial
                backward = next(e for e in evs if e.kind == "backward")
                if id(backward.node) not in reported:
                    reported.add(id(backward.node))
                    self.report(
                        backward.node, context=(backward.statement, ()),
                        related=[(zero.node, "the only gradients cleared in the loop")],
                        what=f"the loop clears only `{zero.key}`'s gradients, but the optimizer also steps "
                        f"{', '.join('`%s`' % r for r in rest)}: their gradients accumulate across iterations",
                    )
                continue
            for step in steps:
                before = [e for e in evs if e.seq < step.seq and e.kind in ("backward", "grad_set") + _ZERO
                          and not e.exits]
                if not before or before[-1].kind not in _ZERO or before[-1].key != step.key:
                    continue
                if not any(e.kind == "backward" for e in before):
                    continue
                zero = before[-1]
                if id(zero.node) not in reported:
                    reported.add(id(zero.node))
                    self.report(
                        zero.node, context=(zero.statement, ()),
                        what="`zero_grad()` between `backward()` and `step()` clears the new gradients "
                        "before the optimizer uses them: nothing is updated",
                    )


def _partial_clear(model: Any, loop: Any, steps: List[Any], zeros: List[Any]) -> Any:
    """(a zero_grad, the parts left uncleared) when every ``zero_grad()`` in the loop is a part's
    (``model.backbone.zero_grad()``) while a step's optimizer holds the whole module, whose class
    (of this file) calls other trainable parts in its ``forward``, and the loop calls the module."""
    if not zeros or any(z.key is None or z.kind != "zero_grad" or z.key.endswith(".grad") for z in zeros):
        return None
    for step in steps:
        opt = step.value
        if opt is None or opt.kind != "optimizer" or not isinstance(opt.node, str):
            continue
        owner = opt.node
        if not all(z.key.startswith(owner + ".") for z in zeros) or not _calls(loop, owner):
            continue
        mods = [i.alias_of for i in opt.items if i.kind == "params" and i.alias_of is not None]
        if len(mods) != 1 or mods[0].kind != "module" or not isinstance(mods[0].node, str):
            continue
        forward = model.resolve_method(mods[0], "forward")
        if forward is None:
            continue
        used = called_names(forward.body)
        cleared = {re.split(r"[.\[]", z.key[len(owner) + 1:], 1)[0] for z in zeros}
        table = model.class_tables.get(mods[0].node, {})
        rest = sorted(owner + "." + a[5:] for a, v in table.items()
                      if a.startswith("self.") and "." not in a[5:] and v.kind == "module" and v.params is not False
                      and a[5:] not in cleared and a[5:] in used and not model.frozen(owner + "." + a[5:]))
        if rest:
            return zeros[0], rest
    return None


def _calls(loop: Any, key: str) -> bool:
    """Does the loop's body call ``key`` itself (``model(x)``)?"""
    stack = [loop.body]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Call) and dotted(n.func) == key:
            return True
        stack.extend(node_children(n))
    return False


def _fresh_each_iteration(step: Any, loop: Any) -> bool:
    """Is the optimizer of this ``step()`` made in the loop body over tensors made there too?"""
    opt = step.value
    if opt is not None and step.kind == "manual_step" and loop in step.loops:
        return not opt.is_param and opt.id >= step.starts[step.loops.index(loop)]  # a leaf made in the loop
    if opt is None or opt.kind != "optimizer" or loop not in step.loops:
        return False
    start = step.starts[step.loops.index(loop)]
    if opt.id < start or not opt.items:
        return False
    for p in opt.items:
        if p.kind in ("params", "named_params"):  # model.parameters() of a model made in the loop
            if p.alias_of is None or p.alias_of.kind != "module" or p.alias_of.id < start:
                return False
        elif p.kind != "tensor" or p.id < start:
            return False
    return True


def _accumulates(backward: Any) -> bool:
    """Does this backward event add to ``.grad`` (not ``torch.autograd.grad(...)``)?"""
    func = getattr(backward.node, "func", None)
    name = dotted(func) if func is not None else None
    return not (name is not None and (name == "grad" or name.endswith(".grad")))
