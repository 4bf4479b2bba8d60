from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst

from gradlint.model.events import Branch
from gradlint.model.names import dotted, subtree
from gradlint.rule import Rule, Severity

_ZERO = ("zero_grad", "zero_grad_keep")
_TRACKED = frozenset(("backward", "step", "manual_step", "grad_set") + _ZERO)
_PARAM_ITERS = frozenset({"parameters", "named_parameters"})


class ZeroGradInAccumulation(Rule):
    """
    ## What it does
    Finds gradient accumulation whose `zero_grad()` runs on every micro-batch while
    `optimizer.step()` runs only every N micro-batches (under an accumulation condition, or
    once after a micro-batch loop).

    The clearing (`optimizer.zero_grad()`, `model.zero_grad()`, `p.grad = None` over the
    model's parameters) runs on every iteration where `backward()` runs, while the step of the
    same optimizer runs under an accumulation condition (`if (i + 1) % accum == 0:`,
    `if step % N == 0:`, a test on an `accumulate...` name, or the code after
    `if (i + 1) % accum: continue`). A training-step function (a `training_step()` called once
    per batch) counts as one iteration. Or a micro-batch loop clears and back-propagates on
    each iteration (directly or in a method it calls, `trainer.forward_backward(mb)`) while the
    `step()` runs once, after the loop.

    It is reported at the `zero_grad()` (move it next to the `step()`), with the `step()` as a
    related location.

    ## Why is this bad
    Silently wrong. `backward()` adds to `.grad`, which is what gradient accumulation relies on;
    a `zero_grad()` on every micro-batch throws away everything accumulated so far, so each
    step applies the last micro-batch's gradient alone (divided by the number of micro-batches
    when the loss is scaled for accumulation): the effective batch is N times smaller than
    intended and the step N times too small, and the other micro-batches' forward and backward
    passes are wasted.

    Not reported: `zero_grad()` inside the same condition as `step()` (or right after it), a
    `zero_grad()` before a `backward()` whose `step()` runs on every iteration, the
    `zero_grad()` of another optimizer or model than the one stepped (the two optimizers of a
    GAN, the generator stepped every n_critic iterations), a step that runs on one branch and
    another optimizer's on the other, a condition that is not about accumulation (skipping a
    step on a NaN loss), a micro-batch loop that reads the gradients it computes (per-sample
    gradients, gradient surgery) or sets them by hand before the step.

    ## Example
    ```python
    for i, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = criterion(model(x), y) / accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()          # applies the last micro-batch's gradient only
    ```

    ## Use instead
    ```python
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    ```

    ## Fix safety
    No fix: where the clearing belongs (after the step, inside its condition, or in the method
    that steps) depends on the code around it.

    ## References
    - https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html
    - https://lightning.ai/docs/pytorch/stable/model/manual_optimization.html#gradient-accumulation
    - https://github.com/gaozhihan/PreDiff/issues/32
    """

    code = "GL606"
    name = "zero-grad-in-accumulation"
    severity = Severity.WARNING
    message = "{what}"
    hint = "clear the gradients after the accumulated `step()` (inside its condition), not on every micro-batch"

    def on_finish(self) -> None:
        model = self.model
        if not model.imports_torch():
            return  # another framework's .step()/.zero_grad()
        events = [e for e in model.events if e.kind in _TRACKED and not e.exits and _accumulates(e)]
        if not any(e.kind in _ZERO for e in events):
            return
        reported: Set[int] = set()
        for level, group in _groups(events):
            found = _guarded_step(group, level)
            if found is None:
                found = _step_after_loop(model, events, group, level)
            if found is None:
                continue
            zero, step, what = found
            if id(zero.node) in reported:
                continue
            reported.add(id(zero.node))
            self.report(zero.node, context=(zero.statement, ()), what=what,
                        related=[(step.node, "the step that applies only the last micro-batch's gradient")])


def _accumulates(e: Any) -> bool:
    """``torch.autograd.grad(...)`` returns gradients: it does not add to ``.grad``."""
    if e.kind != "backward":
        return True
    func = getattr(e.node, "func", None)
    name = dotted(func) if func is not None else None
    return not (name is not None and (name == "grad" or name.endswith(".grad")))


def _groups(events: List[Any]) -> List[Tuple[int, List[Any]]]:
    """The events of one iteration, with the loop depth they belong to: per walk of a loop (its
    node and where its values start), and per training-step function walked for its own sake
    (its events outside loops: the function runs once per batch)."""
    out: Dict[Any, Tuple[int, List[Any]]] = {}
    for e in events:
        for k, loop in enumerate(e.loops):
            out.setdefault((id(loop), e.starts[k]), (k + 1, []))[1].append(e)
        if not e.loops and e.root is not None:
            out.setdefault(("fn", id(e.root)), (0, []))[1].append(e)
    return list(out.values())


def _rel(e: Any, base: Set[int]) -> Set[int]:
    return {id(c) for c in e.conds} - base


def _certain(e: Any, b: Any, base: Set[int], level: int, wrapped: bool) -> bool:
    """Does ``e`` run whenever ``b`` ran (after it in the same iteration, or on the next one
    when ``wrapped``)? Code in a nested loop may run zero times, except clearing over the
    parameters (``for p in model.parameters(): p.grad = None``)."""
    if e.once:
        return False
    if len(e.loops) > level and not (e.kind in _ZERO and _param_loop_owner(e, level) is not None):
        return False
    rel = _rel(e, base)
    return not rel if wrapped else rel <= {id(c) for c in b.conds}


def _param_loop_owner(e: Any, level: int) -> Optional[str]:
    """``M`` when the loops of ``e`` below ``level`` all go over ``M.parameters()`` (or
    ``named_parameters()``) and ``e`` clears the loop variable's ``.grad``."""
    extra = e.loops[level:]
    if not extra or e.key is None or not e.key.endswith(".grad"):
        return None
    owners = set()
    for loop in extra:
        it = getattr(loop, "iter", None)
        if type(it) is not cst.Call or type(it.func) is not cst.Attribute or it.func.attr.value not in _PARAM_ITERS:
            return None
        owners.add(dotted(it.func.value))
    return owners.pop() if len(owners) == 1 and None not in owners else None


def _module_keys(step: Any) -> List[str]:
    """The keys of the modules whose parameters the stepped optimizer holds (as the model knows)."""
    opt = step.value
    if opt is None or opt.kind != "optimizer":
        return []
    return [i.node for i in opt.items if i.kind in ("params", "named_params") and isinstance(i.node, str)]


def _clears(zero: Any, step: Any, level: int) -> bool:
    """Does ``zero`` clear (some of) the gradients that ``step`` applies?"""
    key = zero.key
    if key is None or step.key is None:
        return False
    if key == step.key:
        return True
    if key.endswith(".grad"):
        key = _param_loop_owner(zero, level)  # type: ignore[assignment]
        if key is None:
            return False
    return any(m == key or m.startswith(key + ".") or key.startswith(m + ".") for m in _module_keys(step))


def _accumulation_test(test: Any) -> bool:
    """Does a condition look like gradient accumulation's: a modulo of numbers (``(i + 1) %
    accum == 0``, ``step % N``), or a name about accumulation (``accumulating``,
    ``self.accumulate_grad_batches``)?"""
    for n in subtree(test, nested=False):
        if type(n) is cst.BinaryOperation and type(n.operator) is cst.Modulo:
            if isinstance(n.left, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
                continue  # "%d" % x
            if type(n.right) is cst.Integer and n.right.evaluated_value == 1:
                continue  # always 0
            return True
        if type(n) is cst.Name and "accum" in n.value.lower():
            return True
    return False


def _guard_of(step: Any, base: Set[int]) -> Optional[Any]:
    """The accumulation condition among the branches ``step`` runs in (not those of the whole
    iteration): an ``if`` test, or the test of a branch marker."""
    for c in step.conds:
        if id(c) in base:
            continue
        test = c.test if isinstance(c, Branch) else c
        if test is not None and _accumulation_test(test):
            return c
    return None


def _guarded_step(group: List[Any], level: int) -> Optional[Tuple[Any, Any, str]]:
    """(the zero_grad, the step, the message) when going around the iteration from a
    ``backward()``, the first clearing of the stepped optimizer's gradients that certainly runs
    comes before any step of it that certainly runs, and that optimizer's step is under an
    accumulation condition."""
    group = [e for e in group if len(e.loops) >= level]
    base = set.intersection(*({id(c) for c in e.conds} for e in group)) if group else set()
    steps = [e for e in group if e.kind == "step"]
    for step in steps:
        guard = _guard_of(step, base)
        if guard is None or len(step.loops) > level or _other_branch_steps(step, guard, steps):
            continue
        for b in group:
            if b.kind != "backward":
                continue
            zero = _next_clear(group, b, step, base, level)
            if zero is not None and not _between_backward_and_step(group, zero, step):
                what = ("`zero_grad()` on every micro-batch while `step()` runs only under the accumulation "
                        "condition: the gradients of the earlier micro-batches are thrown away and each step "
                        "applies the last one's alone")
                return zero, step, what
    return None


def _other_branch_steps(step: Any, guard: Any, steps: List[Any]) -> bool:
    """Does a step run on the other branch of the accumulation condition (``if i % 2 == 0:
    opt_a.step() else: opt_b.step()``)? Every iteration's gradients may then be used."""
    test = guard.test if isinstance(guard, Branch) else guard
    for s in steps:
        if s is step:
            continue
        for c in s.conds:
            other = c.test if isinstance(c, Branch) else c
            if other is test and (c is not guard):
                return True
    return False


def _next_clear(group: List[Any], b: Any, step: Any, base: Set[int], level: int) -> Optional[Any]:
    """Going around the iteration from backward ``b``: the clearing of ``step``'s gradients that
    certainly runs before any certain step of that optimizer, else None."""
    i = group.index(b)
    ring = [(e, False) for e in group[i + 1:]] + [(e, True) for e in group[:i]]
    for e, wrapped in ring:
        if e.kind == "grad_set":
            return None
        if e.kind in ("step", "manual_step"):
            if not _certain(e, b, base, level, wrapped):
                if e.key != step.key and e.kind == "step" and _others_cleared(e, ring, level):
                    return None  # another optimizer's step may use these gradients
                continue
            if e.key == step.key or not wrapped:
                return None  # used by this step (or belongs to another optimizer's)
            continue
        if e.kind in _ZERO and _certain(e, b, base, level, wrapped) and _clears(e, step, level):
            return e
    return None


def _others_cleared(other_step: Any, ring: Sequence[Tuple[Any, bool]], level: int) -> bool:
    """Does a clearing on the ring also clear ``other_step``'s optimizer (one
    ``model.zero_grad()`` for two optimizers stepped on alternate iterations)?"""
    return any(e.kind in _ZERO and _clears(e, other_step, level) for e, _ in ring)


def _between_backward_and_step(group: List[Any], zero: Any, step: Any) -> bool:
    """``backward(); zero_grad(); step()`` in that order: GL601's finding (the step sees no
    gradient at all), not this one's."""
    before = [e for e in group if e.seq < zero.seq]
    after = [e for e in group if e.seq > zero.seq and e.kind in ("backward", "grad_set", "step")]
    return any(e.kind == "backward" for e in before) and bool(after) and after[0].key == step.key \
        and after[0].kind == "step"


def _step_after_loop(model: Any, events: List[Any], group: List[Any], level: int) -> Optional[Tuple[Any, Any, str]]:
    """(the zero_grad, the step, the message) for a micro-batch loop with no step in it whose
    iterations each clear the gradients and then back-propagate, followed (after the loop, with
    no clearing or hand-set gradients in between) by a step of the optimizer it clears."""
    if level == 0 or any(e.kind in ("step", "manual_step", "grad_set") for e in group):
        return None
    group = [e for e in group if len(e.loops) >= level]
    if not group:
        return None
    base = set.intersection(*({id(c) for c in e.conds} for e in group))
    loop = group[0].loops[level - 1]
    outer, starts, root = group[0].loops[:level - 1], group[0].starts[:level - 1], group[0].root
    last = max(e.seq for e in group)
    zeros = [z for z in group if z.kind in _ZERO and _certain(z, z, base, level, True)]
    zero = next((z for z in zeros if any(b.kind == "backward" and b.seq > z.seq for b in group)), None)
    if zero is None:
        return None
    for e in events:
        if e.seq <= last:
            continue
        if e.root is not root or e.loops[:level - 1] != outer or e.starts[:level - 1] != starts:
            return None  # out of the walk that ran the loop
        if e.kind in _ZERO or e.kind == "grad_set" or (e.kind == "step" and len(e.loops) >= level):
            return None
        if e.kind == "step":
            if not _clears(zero, e, level) or _reads_gradients(model, loop, group, zero, e):
                return None
            what = ("`zero_grad()` on every micro-batch of a loop whose gradients one `step()` after the loop "
                    "applies: each iteration throws away the gradients of the earlier ones, and the step "
                    "applies the last micro-batch's alone")
            return zero, e, what
    return None


def _reads_gradients(model: Any, loop: Any, group: List[Any], zero: Any, step: Any) -> bool:
    """Does the loop (or a function of this file it calls) read the gradients it computes
    (``p.grad``), or pass the model, its parameters or the optimizer to a call of another
    module (a helper that may read them: per-sample gradients, gradient surgery)?"""
    keys = {k for k in (zero.key, step.key) if k is not None and not k.endswith(".grad")}
    keys.update(_module_keys(step))
    short = {_short(k) for k in keys}
    own: Dict[str, List[Any]] = {}
    for name, fn in model.functions.items():
        own.setdefault(name, []).append(fn)
    for c in model.classes.values():
        for name, fn in c.methods.items():
            own.setdefault(name, []).append(fn)
    todo: List[Any] = [loop.body] + [e.function.body for e in group if e.function is not None]
    # the objects the loop calls (``model(x)``): modules, whose gradients a helper given them
    # may read (``get_flat_grad(model)``) even where the model does not know the optimizer's
    for body in list(todo):
        for n in subtree(body):
            if type(n) is cst.Call and type(n.func) in (cst.Name, cst.Attribute):
                d = dotted(n.func)
                if d is not None:
                    short.add(_short(d))
    seen: Set[int] = set()
    while todo:
        body = todo.pop()
        if id(body) in seen or len(seen) > 50:
            continue
        seen.add(id(body))
        cleared = _clearing_nodes(body)
        for n in subtree(body):
            if type(n) is cst.Attribute and n.attr.value == "grad" and id(n) not in cleared:
                return True
            if type(n) is not cst.Call:
                continue
            name = _short(dotted(n.func) or "")
            if name in own:  # a function of this file: its body is read too
                todo.extend(fn.body for fn in own[name])
                continue
            for a in n.args:
                v = a.value
                if type(v) is cst.Call and type(v.func) is cst.Attribute and v.func.attr.value in _PARAM_ITERS:
                    v = v.func.value
                d = dotted(v)
                if d is not None and _short(d) in short:
                    return True
    return False


def _clearing_nodes(body: Any) -> Set[int]:
    """The ``.grad`` attributes under ``body`` that are only cleared (``p.grad = None``,
    ``p.grad.zero_()``, ``p.grad.data.zero_()``, ``p.grad.detach_()``), not read."""
    out: Set[int] = set()
    for n in subtree(body):
        if type(n) is cst.AssignTarget:
            out.add(id(n.target))
        elif type(n) is cst.Call and type(n.func) is cst.Attribute and n.func.attr.value in ("zero_", "detach_",
                                                                                               "requires_grad_"):
            v = n.func.value
            out.add(id(v))
            if type(v) is cst.Attribute and v.attr.value == "data":
                out.add(id(v.value))
    return out


def _short(key: str) -> str:
    """The last part of a key (``self.model`` and ``trainer.model`` name the same object seen from
    the method and from its caller)."""
    return key.rsplit(".", 1)[-1]
