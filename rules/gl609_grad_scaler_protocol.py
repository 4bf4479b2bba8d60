from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

import libcst as cst

from gradlint.model.events import Branch
from gradlint.model.names import dotted
from gradlint.model.pathconds import (bound_keys, canonical_test, key_at_call_site, last_small_statement, overlaps,
                                      path_skipping, reads, reads_bound)
from gradlint.model.syntax import const_bool, kwvalue
from gradlint.model.values import OPTIMIZER, UNKNOWN, UNKNOWN_VALUE
from gradlint.rule import Rule, Severity

_KINDS = frozenset(("backward", "step", "unscale", "scaler_update"))
_CODE = cst.Module(body=[])


class GradScalerProtocol(Rule):
    """
    ## What it does
    Finds training loops that break the protocol of an AMP `GradScaler`
    (`torch.amp.GradScaler`, `torch.cuda.amp.GradScaler`), in two forms:

    - `scaler.step(optimizer)` or `scaler.unscale_(optimizer)` runs in a loop iteration and
      `scaler.update()` does not follow it on every path through the iteration: it is missing,
      or it runs only under a condition that changes from one iteration to the next (inside the
      branch that steps when a step can be skipped, or after an early `continue`);
    - `scaler.scale(loss).backward()` followed by a plain `optimizer.step()`, with no
      `scaler.step(...)` (and no `scaler.unscale_(...)`) in the iteration.

    The first form is reported at the conditional `update()` (or at the `step()` when there is
    no `update()`), the second at `optimizer.step()`. Code of this file that the loop calls is
    followed into (a `train_step()` helper, a trainer's method).

    ## Why is this bad
    A `GradScaler` records, per optimizer, whether its gradients were unscaled or stepped since
    the last `update()`, and only `update()` resets that record. After a `step()` (or
    `unscale_()`) with no `update()`, the next iteration's `scaler.step(optimizer)` raises
    `RuntimeError: step() has already been called since the last update().` (and
    `scaler.unscale_(optimizer)` raises `unscale_() has already been called on this optimizer
    since the last update().`): training stops at the second iteration, or at the first
    iteration where the condition skips `update()` (a skipped step on a large gradient norm).

    `scaler.scale(loss)` multiplies the loss by the loss scale (65536 at the start), and
    `backward()` leaves gradients that many times too large. Only `scaler.step(optimizer)`
    divides them back (and skips steps whose gradients hold inf/NaN); a plain
    `optimizer.step()` applies the scaled gradients as they are: silently wrong, every update is
    the loss scale times too large (with SGD; Adam's normalisation hides most of it, but its
    `eps` and weight decay no longer match), and an overflow is applied instead of skipped.

    Not reported: `update()` in the same branch as the `step()` and the `unscale_()` (gradient
    accumulation: `if (i + 1) % accum == 0:` around all three), an `update()` on every branch,
    an `update()` under a condition that does not change inside the loop (`if use_amp:`), a
    scaler made with the literal `enabled=False` (its `step()` is `optimizer.step()` and its
    `update()` does nothing), a scaler made in the loop (a new one each iteration), a loop over
    optimizers (`for opt in optimizers: scaler.step(opt)`, the `update()` after it), a scaler
    handed to code the linter cannot see (a callback, another module's function), and files
    that make no `GradScaler` of torch.

    ## Example
    ```python
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda"):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        norm = clip_grad_norm_(model.parameters(), 1.0)
        if norm < 100.0:
            scaler.step(optimizer)
            scaler.update()          # skipped with the step: the next unscale_() raises
    ```

    ## Use instead
    ```python
        if norm < 100.0:
            scaler.step(optimizer)
        scaler.update()              # every iteration that unscaled or stepped
    ```

    ## Fix safety
    No fix: where `update()` belongs (after the `step()`, after the branch) depends on the code
    around it.

    ## References
    - https://pytorch.org/docs/stable/amp.html#gradient-scaling
    - https://pytorch.org/docs/stable/notes/amp_examples.html
    """

    code = "GL609"
    name = "grad-scaler-protocol"
    severity = Severity.ERROR
    message = "{what}"
    hint = "call `scaler.step(optimizer)` then `scaler.update()` on every iteration that scaled a loss"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        self._made: List[Tuple[Optional[bool], Optional[str]]] = []  # (disabled, the name it is bound to)
        self._loop_fn: Dict[int, Any] = {}  # id(loop node) -> the function it is in (None: module level)
        self._test_fn: Dict[int, Any] = {}  # id(if test) -> the function it is in
        self._calls: List[Tuple[Any, frozenset, Any]] = []  # (call, its (loop, start) pairs, its function)
        self._scale_values: Dict[int, Any] = {}  # id(S.scale(...) call) -> the value S held
        self._bound: Dict[int, Set[str]] = {}

    # ------------------------------------------------------------------ walk
    def _function(self) -> Any:
        stack = self.model.function_stack
        return stack[-1] if stack else None

    def visit_For(self, node: cst.For) -> None:
        self._loop_fn.setdefault(id(node), self._function())

    def visit_While(self, node: cst.While) -> None:
        self._loop_fn.setdefault(id(node), self._function())

    def visit_If(self, node: cst.If) -> None:
        self._test_fn.setdefault(id(node.test), self._function())

    def visit_Call(self, node: cst.Call) -> None:
        model = self.model
        if model.repeat:
            return
        q = model.qualname(node.func)
        if q is not None and q.startswith("torch.") and q.endswith("GradScaler"):
            self._made.append((_disabled(node), _bound_name(model.current_statement, node)))
        keys = frozenset((id(loop.node), loop.start_id) for loop in model.loops)
        self._calls.append((node, keys, self._function()))
        if type(node.func) is cst.Attribute and node.func.attr.value == "scale":
            key = dotted(node.func.value)
            value = model.lookup(key) if key is not None else None
            if value is not None and value.made == "grad_scaler":
                self._scale_values.setdefault(id(node), value)

    # ------------------------------------------------------------------ judgement
    def on_finish(self) -> None:
        model = self.model
        if not self._made or all(d is True for d, _ in self._made) or not model.imports_torch():
            return  # no GradScaler of torch made here, or each one is disabled
        events = [e for e in model.events if e.kind in _KINDS]
        if not any(e.kind in ("step", "unscale") and e.target is not None for e in events) \
                and not any(_scaled_backward(e) for e in events):
            return
        reported: Set[int] = set()
        for (loop, start, level), group in _groups(events).items():
            found = self._skipped_update(loop, start, level, group) or self._bypassed(loop, start, level, group)
            if found is None:
                continue
            node, context, what, related = found
            if id(node) in reported:
                continue
            reported.add(id(node))
            self.report(node, context=(context, ()), what=what, related=related)

    def _disabled(self, key: str, value: Any) -> bool:
        """Is the scaler made with ``enabled=False`` (its step() is the optimizer's, its update() does
        nothing)? Known from the construction the value comes from, else from every scaler made in
        this file and bound to a name like ``key``."""
        if value is not None and value.made == "grad_scaler" and type(value.made_node) is cst.Call:
            return _disabled(value.made_node) is True
        last = key.rsplit(".", 1)[-1]
        made = [d for d, name in self._made if name == last]
        return bool(made) and all(d is True for d in made)

    def _skipped_update(self, loop: Any, start: int, level: int, group: List[Any]) -> Optional[Tuple[Any, ...]]:
        fn = self._loop_fn.get(id(loop), _MISSING)
        if fn is _MISSING:
            return None
        base = set.intersection(*({id(c) for c in e.conds} for e in group))
        updates = [e for e in group if e.kind == "scaler_update"]
        for a in group:
            if a.kind not in ("step", "unscale") or a.target is None or a.target[0] is None:
                continue
            if len(a.loops) != level or a.once or a.exits or self._disabled(a.target[0], a.target[2]):
                continue
            if not self._invariant(a, loop, start, fn):
                continue
            mine = [u for u in updates if _may_same(a, u)]
            if any(u.seq < a.seq for u in mine) or self._escapes(a, loop, start):
                continue
            later = [u for u in mine if u.seq > a.seq]
            if not self._path_without(a, later, base, loop, fn):
                continue
            scaler = a.target[0]
            opt = a.key or "optimizer"
            verb = "step" if a.kind == "step" else "unscale_"
            error = ("step() has already been called since the last update()" if a.kind == "step" else
                     "the scaler still holds this optimizer as unscaled, or stepped, until update()")
            if later:
                node = min(later, key=lambda u: u.seq)
                what = (f"`{scaler}.update()` runs only on some iterations after `{scaler}.{verb}({opt})`, which runs "
                        f"on every one: after an iteration that skips it, the next `{scaler}.{verb}({opt})` raises "
                        f"RuntimeError ({error}); call `update()` on every iteration, outside the branch")
                return node.node, node.statement, what, [(a.node, "raises on the iteration after a skipped update()")]
            steps = [e for e in group if e.kind == "step" and e.target is not None and e.target[0] == scaler
                     and e.seq >= a.seq]
            node = steps[-1] if steps else a
            if a.kind == "unscale" and steps:
                error = "unscale_() is being called after step()"
            where = f"{scaler}.step({steps[-1].key or 'optimizer'})" if steps else f"{scaler}.{verb}({opt})"
            what = (f"`{where}` in a loop with no `{scaler}.update()` after it: the GradScaler's record of this "
                    f"optimizer is reset only by `update()`, so the next iteration's `{scaler}.{verb}({opt})` raises "
                    f"RuntimeError ({error})")
            return node.node, node.statement, what, []
        return None

    def _bypassed(self, loop: Any, start: int, level: int, group: List[Any]) -> Optional[Tuple[Any, ...]]:
        for i, b in enumerate(group):
            scaler = _scaled_backward(b)
            if scaler is None or len(b.loops) != level or b.exits \
                    or self._disabled(scaler, self._scale_values.get(id(b.node.func.value))):
                continue
            if any(e.kind in ("step", "unscale") and e.target is not None and _may_same_key(b, scaler, e)
                   for e in group):
                continue  # the scaler steps (or unscales) somewhere in the iteration
            nxt = next((e for e in group[i + 1:] if e.kind in ("backward", "step")), None)
            if nxt is None or nxt.kind != "step" or nxt.target is not None or nxt.exits:
                continue
            if nxt.key is None or scaler.startswith(nxt.key + ".") \
                    or self._escapes_key(scaler, b.function, loop, start):
                continue  # (a wrapper holding the scaler may step through it)
            if self._reads_scale(scaler, b.function, loop, start):
                continue  # the gradients divided by hand (`p.grad.div_(scaler.get_scale())`)
            what = (f"`{nxt.key}.step()` after `{scaler}.scale(loss).backward()` with no `{scaler}.step({nxt.key})`: "
                    f"the optimizer applies the gradients still multiplied by the loss scale (never unscaled, "
                    f"and steps with inf/NaN gradients are not skipped); step through `{scaler}.step({nxt.key})` "
                    f"and call `{scaler}.update()`")
            return nxt.node, nxt.statement, what, [(b.node, "the scaled backward()")]
        return None

    def _invariant(self, a: Any, loop: Any, start: int, fn: Any) -> bool:
        """The scaler and the optimizer of ``a`` are the same objects on every iteration of the loop
        (made before it, not rebound in it: not a loop over optimizers)."""
        scaler, opt_value, scaler_value = a.target
        if scaler_value is not None and scaler_value.kind == UNKNOWN and scaler_value is not UNKNOWN_VALUE \
                and scaler_value.id >= start:
            return False  # a scaler made in the loop
        bound = self._bound_in(loop)
        index = a.loops.index(loop)
        outer_scaler, outer_opt = key_at_call_site(scaler, a, index, fn), key_at_call_site(a.key, a, index, fn)
        if outer_scaler is None or overlaps(outer_scaler, bound):
            return False
        if opt_value is not None and opt_value.kind == OPTIMIZER:
            return opt_value.id < start
        return outer_opt is not None and not overlaps(outer_opt, bound)

    def _bound_in(self, node: Any) -> Set[str]:
        out = self._bound.get(id(node))
        if out is None:
            out = self._bound[id(node)] = bound_keys(node)
        return out

    def _escapes(self, a: Any, loop: Any, start: int) -> bool:
        return self._escapes_key(a.target[0], a.function, loop, start)

    def _escapes_key(self, scaler: str, function: Any, loop: Any, start: int) -> bool:
        """Is the scaler handed to code the linter does not follow (a function, method or class not
        defined in this file: a callback, a wrapper, another module's training step), which may
        step or update it? Anywhere in the file, by its name; and for a scaler held in an attribute
        (``self.scaler``), a method of its holder called in the loop that the linter cannot see."""
        own = self._own_names()
        last = scaler.rsplit(".", 1)[-1]
        owner = scaler.rsplit(".", 1)[0] if "." in scaler else None
        key = (id(loop), start)
        for call, loops, fn in self._calls:
            callee = dotted(call.func)
            name = (callee or "").rsplit(".", 1)[-1]
            if name in own or (callee is not None and callee.rsplit(".", 1)[0].rsplit(".", 1)[-1] == last):
                continue  # walked by the linter, or the scaler's own method
            for arg in call.args:
                k = dotted(arg.value)
                if k is not None and k.rsplit(".", 1)[-1] == last:
                    return True
            if owner is not None and key in loops and fn is function and type(call.func) is cst.Attribute \
                    and dotted(call.func.value) == owner:
                held = self.model.lookup(callee) if callee is not None else UNKNOWN_VALUE
                if held.kind == UNKNOWN:
                    return True  # `self.after_step()`: a method of a class of another module
        return False

    def _reads_scale(self, scaler: str, function: Any, loop: Any, start: int) -> bool:
        """Does the loop read the scaler's current scale (``S.get_scale()``)?"""
        key = (id(loop), start)
        return any(key in loops and fn is function and dotted(call.func) == scaler + ".get_scale"
                   for call, loops, fn in self._calls)

    def _own_names(self) -> Set[str]:
        names = set(self.model.functions) | set(self.model.classes)
        for c in self.model.classes.values():
            names.update(c.methods)
        return names

    def _path_without(self, a: Any, later: List[Any], base: Set[int], loop: Any, fn: Any) -> bool:
        """Can an iteration that runs ``a`` skip every update in ``later``? Conditions that do not
        change in the loop (they read no name bound in it) are fixed for the whole loop: the
        answer must be yes whichever way they go (while ``a`` runs); the others may go either way."""
        a_lits = [self._literal(c, loop, fn) for c in a.conds if id(c) not in base]
        u_lits = []
        for u in later:
            lits = []
            for c in u.conds:
                if id(c) in base:
                    continue
                if self._leaves_loop(c, fn):
                    # the other way goes out of the loop (break, return, raise): no next iteration
                    a_lits.append(self._literal(c, loop, fn))
                else:
                    lits.append(self._literal(c, loop, fn))
            u_lits.append(lits)
        return path_skipping(a_lits, u_lits)

    def _leaves_loop(self, cond: Any, fn: Any) -> bool:
        """Is ``cond`` the marker of the code after an ``if`` whose other branch ends in ``break``,
        ``raise``, or ``return`` out of the loop's own function (not ``continue``, nor a helper's
        ``return``: the loop goes on after those)?"""
        if not isinstance(cond, Branch) or cond.test is None or type(cond.node) is not cst.If:
            return False
        if cond.negated:
            body = cond.node.body
        elif type(cond.node.orelse) is cst.Else:
            body = cond.node.orelse.body
        else:
            return False
        last = last_small_statement(body)
        if last is None or type(last) is cst.Continue:
            return False
        if type(last) is cst.Return:
            return self._test_fn.get(id(cond.test), fn) is fn
        return type(last) in (cst.Break, cst.Raise)

    def _literal(self, cond: Any, loop: Any, fn: Any) -> Tuple[str, bool, bool]:
        """(the condition's atom, its polarity, whether it may change from one iteration to the next)."""
        if isinstance(cond, Branch):
            if cond.test is None:
                return f"branch:{id(cond.node)}", True, True  # an except handler, a case
            atom, pol, varying = self._literal(cond.test, loop, fn)
            return atom, (not pol) if cond.negated else pol, varying
        test, pol = canonical_test(cond)
        where = self._test_fn.get(id(cond), fn)
        bound = self._bound_in(loop) if where is fn else (bound_keys(where.body) if where is not None else set())
        varying = any(reads_bound(k, bound) for k in reads(test))
        return f"{id(where)}:{_CODE.code_for_node(test)}", pol, varying


_MISSING = object()


def _groups(events: List[Any]) -> Dict[Tuple[Any, int, int], List[Any]]:
    """The events of one walk of each loop (its node, where its values start, its depth)."""
    out: Dict[Tuple[Any, int, int], List[Any]] = {}
    for e in events:
        for k, loop in enumerate(e.loops):
            out.setdefault((loop, e.starts[k], k + 1), []).append(e)
    return out


def _may_same(a: Any, u: Any) -> bool:
    """May the update ``u`` be of the scaler that ``a`` steps or unscales?"""
    if u.target is None:
        return True
    return _may_same_key(a, a.target[0], u, a.target[2])


def _may_same_key(a: Any, key: str, e: Any, value: Any = None) -> bool:
    other_key, other_value = e.target[0], e.target[2]
    if value is not None and other_value is not None and value is other_value and value is not UNKNOWN_VALUE:
        return True
    fresh = [v for v in (value, other_value) if v is not None and v.kind == UNKNOWN and v is not UNKNOWN_VALUE]
    if len(fresh) == 2:
        return False  # two scalers of their own
    if a.function is e.function:
        return key == other_key
    return True


def _scaled_backward(e: Any) -> Optional[str]:
    """``S`` of a ``S.scale(loss).backward()`` event whose ``S`` is named like a scaler."""
    node = e.node
    if e.kind != "backward" or type(node) is not cst.Call or type(node.func) is not cst.Attribute \
            or node.func.attr.value != "backward":
        return None
    inner = node.func.value
    if type(inner) is not cst.Call or type(inner.func) is not cst.Attribute or inner.func.attr.value != "scale":
        return None
    key = dotted(inner.func.value)
    return key if key is not None and "scaler" in key.rsplit(".", 1)[-1].lower() else None


def _disabled(node: cst.Call) -> Optional[bool]:
    """True when made with the literal ``enabled=False``; None when that cannot be read."""
    flag = kwvalue(node, "enabled")
    if flag is not None:
        value = const_bool(flag)
        return None if value is None else not value
    positional = [a for a in node.args if a.keyword is None]
    return None if len(positional) >= 5 or any(a.star for a in node.args) else False


def _bound_name(statement: Any, call: cst.Call) -> Optional[str]:
    """The last part of the name ``statement`` binds to ``call`` (``self.scaler = GradScaler()``)."""
    if type(statement) is not cst.SimpleStatementLine:
        return None
    for small in statement.body:
        if type(small) is cst.Assign and small.value is call and len(small.targets) == 1:
            key = dotted(small.targets[0].target)
            return key.rsplit(".", 1)[-1] if key is not None else None
        if type(small) is cst.AnnAssign and small.value is call:
            key = dotted(small.target)
            return key.rsplit(".", 1)[-1] if key is not None else None
    return None
