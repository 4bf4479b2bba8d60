from __future__ import annotations

import re
from typing import Any, Dict, List, Set

import libcst as cst

from gradlint.model.names import called_names, dotted, node_children, subtree
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
    `w.grad.zero_()`, `w.grad.data.zero_()` or `w.grad = None`. The update may read the gradient
    through a name (`g = delta.grad.detach()`, `step = delta.grad.sign() * lr`) and write an
    item or slice (`delta.data[mask] = ...`, `patch[:] = ...` under `no_grad`).

    An attack's perturbation (a plain tensor that requires grad, no `nn.Parameter`) updated by
    hand from its `.grad` is not cleared by `model.zero_grad()` nor by an optimizer over the
    model's parameters: a loop whose only clears are those is reported at the clear (the place
    for `delta.grad = None`). Computing the gradient with `torch.autograd.grad`, clearing
    `delta.grad`, or a new perturbation each iteration are fine.

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
            if not kinds & set(_ZERO) and all(_fresh_each_iteration(self.model, e, loop) for e in steps):
                continue  # a new optimizer over new leaves every iteration: nothing accumulates
            # a function of the same name whose walk reached this loop is the one the loop calls
            walked = {e.function.name.value for e in evs if e.function is not None}
            if not kinds & set(_ZERO):
                if zero_helpers - walked and called_names(loop) & (zero_helpers - walked):
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
                    at = _step_call(backward, step, loop)
                    if at is not backward.statement:
                        related = [(backward.node, "the backward() that adds to the gradients")] + related
                        self.report(at, context=(at, ()), related=related, what=what)
                        continue
                    self.report(backward.node, context=(backward.statement, ()), related=related, what=what)
                continue
            seen = {id(e.node) for e in evs}
            others = {e.function.name.value for e in events
                      if e.kind in _ZERO and e.function is not None and id(e.node) not in seen} - walked
            uncleared = _uncleared_leaf(self.model, loop, evs, steps, others)
            if uncleared is not None:
                step, zero = uncleared
                backward = next(e for e in evs if e.kind == "backward")
                if id(backward.node) not in reported:
                    reported.add(id(backward.node))
                    what = (f"the loop updates `{step.key}` from `{step.key}.grad` but never clears it: "
                            f"`{zero.key}.zero_grad()` clears other gradients, so each `backward()` adds to "
                            f"`{step.key}.grad` and every update uses its running sum (set `{step.key}.grad = None` "
                            "each iteration)")
                    related = [(backward.node, "the backward() that adds to the gradients"),
                               (step.node, "the update that uses the accumulated gradients")]
                    if zero.seq < backward.seq and zero.function is backward.function:
                        self.report(zero.node, context=(zero.statement, ()), related=related, what=what)
                    else:
                        self.report(backward.node, context=(backward.statement, ()), related=related[1:], what=what)
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


def _fresh_each_iteration(model: Any, step: Any, loop: Any) -> bool:
    """Is the optimizer of this ``step()`` made in the loop body over tensors made there too?"""
    opt = step.value
    if opt is not None and step.kind == "manual_step" and loop in step.loops:
        # a leaf made in the loop (not one made before it whose requires_grad the loop sets)
        return not opt.is_param and model.first_id(opt) >= step.starts[step.loops.index(loop)]
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


def _step_call(backward: Any, step: Any, loop: Any) -> Any:
    """Where a missing ``zero_grad()`` belongs: the backward's statement, or, when the loop body
    reaches both the backward and the step through one call (a ``train_step()`` of this file)
    whose body reaches the backward through a further helper (``self.forward_backward()``), that
    helper's call in it, next to the step."""
    if loop not in backward.loops or loop not in step.loops:
        return backward.statement
    b = backward.chain[backward.levels[backward.loops.index(loop)]:]
    s = step.chain[step.levels[step.loops.index(loop)]:]
    k = 0
    while k < min(len(b), len(s)) - 1 and b[k] is s[k]:
        k += 1
    return b[k] if k >= 1 else backward.statement


def _uncleared_leaf(model: Any, loop: Any, evs: List[Any], steps: List[Any], zero_helpers: Set[str]) -> Any:
    # zero_helpers: the functions with a clear that the loop's walk did not reach
    """(a hand-written update, a clear of other gradients) when the loop updates a tensor that is
    no parameter (``delta = torch.zeros_like(x, requires_grad=True)``, an attack's perturbation)
    from its own ``.grad`` while its only clears are ``zero_grad()`` calls of modules or
    optimizers that cannot hold it: ``module.zero_grad()`` clears its parameters, an optimizer's
    the tensors it was given. A clear of the tensor's own ``.grad`` (``= None``, ``.zero_()``, a
    new tensor), an optimizer over it or over what the model does not know, and a helper called
    in the loop that clears gradients all count."""
    zeros = [e for e in evs if e.kind in _ZERO or e.kind == "grad_set"]
    calls = [z for z in zeros if z.kind in _ZERO and not (z.key or "").split(".data")[0].endswith(".grad")]
    if not calls or (zero_helpers and called_names(loop) & zero_helpers):
        return None
    for step in steps:
        leaf = step.value
        if step.kind != "manual_step" or leaf is None or leaf.is_param or _fresh_each_iteration(model, step, loop):
            continue
        helper = step.function is not None and not any(n is loop for n in subtree(step.function))
        if _rebinds(loop, step.key) or (helper and _rebinds(step.function, step.key)):
            continue  # `delta = delta.detach()` late in the body: maybe a new tensor (no .grad) each time
        own = {step.key + ".grad", step.key + ".grad.data"}
        if any(z.key in own for z in zeros):
            continue
        if all(_cannot_hold(model, z, leaf, step) for z in calls):
            return step, calls[0]
    return None


_OPTIMIZERS = frozenset({"SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
                         "Rprop", "ASGD", "LBFGS", "SparseAdam", "Adafactor"})


def _cannot_hold(model: Any, zero: Any, leaf: Any, step: Any) -> bool:
    """Is the receiver of this ``zero_grad()`` certainly a module (whose parameters cannot include
    a plain tensor) or an optimizer over known tensors none of which is ``leaf``? One the model
    does not know counts as neither when its name says optimizer or when the updated tensor is
    given to an optimizer where it is visible (``torch.optim.Adam([self.delta])`` in the class
    of the update, ``Adam([delta])`` in its function)."""
    receiver = zero.value
    if receiver is None:
        return False
    if receiver.kind == "module":
        return True
    if receiver.kind == "unknown":
        last = (zero.key or "").rsplit(".", 1)[-1].lower()
        return "opt" not in last and not _given_to_optimizer(_visible_in(model.root_module, step), step.key)
    if receiver.kind != "optimizer" or not receiver.items:
        return False
    first = model.first_id(leaf)
    for p in receiver.items:
        if p.kind in ("params", "named_params") and p.alias_of is not None and p.alias_of.kind == "module":
            continue  # module.parameters(): nn.Parameters only
        if p.kind == "tensor" and p.leaf is True and model.first_id(p) != first:
            continue
        return False
    return True


def _visible_in(module: Any, step: Any) -> Any:
    """Where the tensor a hand-written update writes can be handed around: the class whose method
    makes the update for ``self.<attr>``, else that function (the module at its top level)."""
    fn = step.function
    if fn is None or module is None:
        return module
    if not step.key.startswith("self."):
        return fn
    for n in subtree(module):
        if type(n) is cst.ClassDef and any(m is fn for m in subtree(n.body)):
            return n
    return module


def _given_to_optimizer(module: Any, key: str) -> bool:
    """Does ``module`` (a scope) pass ``key`` (or its last attribute, ``self.delta`` -> ``delta``)
    to an optimizer's constructor, or to a call whose name says optimizer (``build_optimizer``)?"""
    if module is None:
        return True
    name = key.rsplit(".", 1)[-1]
    for n in subtree(module):
        if type(n) is not cst.Call:
            continue
        f = dotted(n.func) or ""
        last = f.rsplit(".", 1)[-1]
        if last not in _OPTIMIZERS and "optim" not in f.lower():
            continue
        for a in n.args:
            for m in subtree(a.value):
                if (type(m) is cst.Name and m.value == name) or (type(m) is cst.Attribute and m.attr.value == name):
                    return True
    return False


def _rebinds(node: Any, key: str) -> bool:
    """Does the code under ``node`` bind ``key`` itself (``delta = ...``, ``self.delta = ...``, a
    loop target), not only write into it (``delta.data = ...``, ``delta[i] = ...``)?"""
    for n in subtree(node):
        targets: List[Any] = []
        if type(n) is cst.Assign:
            targets = [t.target for t in n.targets]
        elif isinstance(n, (cst.AnnAssign, cst.For)):
            targets = [n.target]  # (`delta += step` writes into the same tensor)
        elif type(n) is cst.AsName:
            targets = [n.name]
        while targets:
            t = targets.pop()
            if isinstance(t, (cst.Tuple, cst.List)):
                targets.extend(e.value for e in t.elements)
            elif dotted(t) == key:
                return True
    return False
