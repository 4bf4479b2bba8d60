from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.names import dotted, node_children
from gradlint.rule import Rule, Severity

_GRAD_CONTEXTS = api.GRAD_OFF | api.GRAD_ON | api.SET_GRAD


class _Leak:
    """One execution (in the walk) of a statement ``torch.set_grad_enabled(False)``."""

    __slots__ = ("node", "frames", "stack", "inline", "withs", "loops", "starts", "seq", "context", "cancelled_at", "returns")

    def __init__(self, node: Any, model: Any, withs: Tuple[int, ...]) -> None:
        self.node = node
        self.frames = list(model.frames)
        self.stack = list(model.function_stack)
        self.inline = [any(f is g for g in model.inline_stack) for f in model.function_stack]
        self.withs = withs
        self.loops = tuple(loop.node for loop in model.loops)
        self.starts = tuple(loop.start_id for loop in model.loops)
        self.seq = len(model.events)
        self.context = model.here()
        self.cancelled_at: Optional[int] = None  # the statement count when grad mode was set again
        # in a branch that ends in `return`: the rest of its function does not follow it, only
        # what runs after the function returns
        self.returns = False

    def root(self) -> int:
        """Index in ``frames`` of the walk the statement belongs to: the module or a function
        body walked on its own; the frames above it are calls walked inline (when they return,
        grad mode stays off in the caller)."""
        r = len(self.frames) - 1
        while r > 0 and self.inline[r - 1]:
            r -= 1
        return r


class GradModeLeftOff(Rule):
    """
    ## What it does
    Finds `torch.set_grad_enabled(False)` (or `torch.autograd.set_grad_enabled(False)`) called
    as a statement, at module level or in a function, that is not undone (no
    `torch.set_grad_enabled(True)` or `torch.set_grad_enabled(prev)` later in the same function
    or module) before this file computes gradients again: a `backward()` or
    `torch.autograd.grad()` later in the program, or earlier in the same loop (the next
    iteration), runs with grad mode still off.

    It is reported at the `set_grad_enabled(False)` call, with the `backward()` that raises as a
    related location.

    ## Why is this bad
    Called as a function, `torch.set_grad_enabled(False)` switches autograd off for the whole
    thread until something switches it back on: it is not scoped to the function that calls it.
    Everything computed afterwards has no graph, and the next `backward()` raises
    `RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn`
    (a library that does this on import, or in an evaluation helper, breaks its callers'
    training).

    Not reported: `with torch.set_grad_enabled(False):` and the decorator (they restore the
    previous mode), a statement inside such a block or in a function decorated with
    `@torch.no_grad()`/`@torch.enable_grad()` (the block's exit restores the mode), a mode saved
    and restored (`prev = torch.is_grad_enabled()` ... `torch.set_grad_enabled(prev)`), code
    that switches grad back on before it trains (`torch.set_grad_enabled(True)`, `with
    torch.enable_grad():`), and programs that never compute gradients after the call (an
    evaluation or inference script that turns autograd off for good on purpose).

    ## Example
    ```python
    def evaluate(model, loader):
        torch.set_grad_enabled(False)       # stays off after evaluate() returns
        return sum(metric(model(x), y) for x, y in loader)

    for epoch in range(epochs):
        train_one_epoch(model, optimizer)   # epoch 2: loss.backward() raises RuntimeError
        evaluate(model, val_loader)
    ```

    ## Use instead
    ```python
    @torch.no_grad()
    def evaluate(model, loader):
        return sum(metric(model(x), y) for x, y in loader)
    ```

    ## References
    - https://pytorch.org/docs/stable/generated/torch.autograd.grad_mode.set_grad_enabled.html
    - https://pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation
    """

    code = "GL306"
    name = "grad-mode-left-off"
    severity = Severity.ERROR
    message = "{what}"
    hint = "use `with torch.no_grad():` or `@torch.no_grad()`, or restore the mode: `torch.set_grad_enabled(prev)`"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        self._module: Optional[cst.Module] = None
        # per module (the linted file's, an imported one's): its set_grad_enabled statements
        self._calls: Dict[int, Dict[int, Tuple[int, Any, Optional[bool]]]] = {}
        self._withs: List[Tuple[int, int]] = []  # (id of a grad-mode `with`, function depth)
        self._ifs: List[Tuple[cst.If, int]] = []  # enclosing `if` statements, function depth
        self._leaks: List[_Leak] = []
        self._confirmed: Dict[int, Tuple[_Leak, Any]] = {}
        self._backwards: List[Tuple[int, Any, Tuple[Any, ...], Tuple[int, ...], bool]] = []
        self._restores: List[Tuple[int, Tuple[Any, ...], Tuple[int, ...]]] = []

    def visit_Module(self, node: cst.Module) -> None:
        self._module = node

    # ------------------------------------------------------------------ grad-mode scopes
    def visit_If(self, node: cst.If) -> None:
        self._ifs.append((node, len(self.model.function_stack)))

    def leave_If(self, node: cst.If) -> None:
        if self._ifs and self._ifs[-1][0] is node:
            self._ifs.pop()

    def _branch_end(self) -> Optional[type]:
        """How the enclosing branches of this function end: the statement type (Return, Raise,
        Break, Continue) when one of them ends the flow, else None."""
        depth = len(self.model.function_stack)
        conditions = self.model.conditions
        for node, d in self._ifs:
            if d != depth:
                continue
            if any(c is node.test for c in conditions):
                end = _ends(node.body)
            elif isinstance(node.orelse, cst.Else):
                end = _ends(node.orelse.body)
            else:
                end = None
            if end is not None:
                return end
        return None

    def visit_With(self, node: cst.With) -> None:
        if any(self._is_grad_context(item.item) for item in node.items):
            self._withs.append((id(node), len(self.model.function_stack)))

    def leave_With(self, node: cst.With) -> None:
        if self._withs and self._withs[-1][0] == id(node):
            self._withs.pop()

    def _is_grad_context(self, expr: Any) -> bool:
        func = expr.func if isinstance(expr, cst.Call) else expr
        q = self.model.qualname(func)
        if q is not None:
            return q in _GRAD_CONTEXTS
        last = (dotted(func) or "").rsplit(".", 1)[-1].lower()
        return "grad" in last or "inference" in last

    def _grad_decorated(self, fn: Any) -> bool:
        for d in getattr(fn, "decorators", ()):
            expr = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
            q = self.model.qualname(expr)
            if q is not None:
                if q in _GRAD_CONTEXTS:
                    return True
                continue
            low = (dotted(expr) or "").rsplit(".", 1)[-1].lower()
            if "grad" in low or "inference" in low or "differentiable" in low:
                return True
        return False

    # ------------------------------------------------------------------ the statements
    def visit_Expr(self, node: cst.Expr) -> None:
        call = node.value
        if not isinstance(call, cst.Call) or self.model.qualname(call.func) not in api.SET_GRAD:
            return
        flag = _flag(call)
        model = self.model
        if flag is not False:
            if not model.repeat:
                self._restores.append((len(model.events), tuple(loop.node for loop in model.loops),
                                       tuple(loop.start_id for loop in model.loops)))
            for leak in self._leaks:  # grad mode set again (True, or a saved mode)
                if leak.cancelled_at is None and self._same_walk(leak):
                    leak.cancelled_at = model.tick
            return
        depth = len(model.function_stack)
        if any(d == depth for _, d in self._withs):
            return  # inside `with torch.no_grad():` (...) of the same function: its exit restores
        fn = model.function_stack[-1] if model.function_stack else None
        if fn is not None and (fn.name.value in ("__enter__", "__exit__") or self._grad_decorated(fn)):
            return  # a context manager's own enter, or a decorated function: restored on exit
        if self._restored_later(node):
            return
        end = self._branch_end()
        if end is not None and end is not cst.Return:
            return  # raise / continue / break right after: not followed
        leak = _Leak(node, model, tuple(w for w, _ in self._withs))
        leak.returns = end is cst.Return
        self._leaks.append(leak)

    def _restored_later(self, node: cst.Expr) -> bool:
        """Is there a ``torch.set_grad_enabled(<not False>)`` statement after ``node`` in the
        same function (or at module level after it, for a module-level one)?"""
        module = self.model.current_module()  # the linted file's, or an imported module's
        calls = self._calls.get(id(module)) if module is not None else None
        if calls is None and module is not None:
            calls = self._calls[id(module)] = self._collect(module)
        me = calls.get(id(node)) if calls is not None else None
        if me is None:
            return True  # not found: do not guess
        index, scope, _ = me
        return any(s is scope and i > index and f is not False for i, s, f in calls.values())

    def _collect(self, module: Any) -> Dict[int, Tuple[int, Any, Optional[bool]]]:
        """Every statement-form ``set_grad_enabled(...)`` of ``module``: its order in the source,
        the innermost function around it (None at module level), its flag."""
        out: Dict[int, Tuple[int, Any, Optional[bool]]] = {}
        count = 0
        stack: List[Tuple[Any, Any]] = [(module, None)]
        while stack:
            n, scope = stack.pop()
            count += 1
            if isinstance(n, cst.Expr) and isinstance(n.value, cst.Call) \
                    and self.model.qualname(n.value.func) in api.SET_GRAD:
                out[id(n)] = (count, scope, _flag(n.value))
            inner = n if isinstance(n, cst.FunctionDef) else scope
            stack.extend((c, inner) for c in reversed(node_children(n)))
        return out

    # ------------------------------------------------------------------ what follows
    def _same_walk(self, leak: _Leak) -> bool:
        """Is the walk now in the walk the statement was executed in (the module, or a function
        body walked on its own, and calls walked inline from it)? A function body walked at its
        definition is not executed after the statement."""
        model = self.model
        frames, stack, inline = model.frames, model.function_stack, model.inline_stack
        r = len(frames) - 1
        while r > 0 and any(stack[r - 1] is g for g in inline):
            r -= 1
        return r == leak.root() and frames[r] == leak.frames[r]

    def _alive(self, leak: _Leak) -> bool:
        if leak.cancelled_at is not None or not self._same_walk(leak):
            return False
        frames = self.model.frames
        r = leak.root()
        if leak.returns:
            top = len(leak.frames) - 1
            if top == r or (len(frames) > top and frames[top] == leak.frames[top]):
                return False  # its function has not returned yet (or is the walk's root)
        for i in range(r + 1, len(leak.frames)):
            ended = len(frames) <= i or frames[i] != leak.frames[i]
            if ended and self._grad_decorated(leak.stack[i - 1]):
                return False  # a decorated caller returned: its decorator restored the mode
        live = {w for w, _ in self._withs}
        return all(w in live for w in leak.withs)  # a `with` around the call exited: restored

    def _protected(self, leak: Optional[_Leak]) -> bool:
        """Does a grad-mode context entered after ``leak`` (all of them when None) enclose the
        current statement?"""
        before = set(leak.withs) if leak is not None else set()
        if any(w not in before for w, _ in self._withs):
            return True
        stack = self.model.function_stack
        start = 0
        if leak is not None:
            while start < min(len(stack), len(leak.stack)) and stack[start] is leak.stack[start] \
                    and self.model.frames[start + 1] == leak.frames[start + 1]:
                start += 1
        return any(self._grad_decorated(f) for f in stack[start:])

    def on_backward(self, node: Any, value: Any) -> None:
        model = self.model
        if not model.repeat:
            self._backwards.append((len(model.events) - 1, node, tuple(loop.node for loop in model.loops),
                                    tuple(loop.start_id for loop in model.loops), self._protected(None)))
        for leak in self._leaks:
            if id(leak.node) in self._confirmed or not self._alive(leak) or self._protected(leak):
                continue
            self._confirmed[id(leak.node)] = (leak, node)

    def on_finish(self) -> None:
        for leak in self._leaks:
            if id(leak.node) in self._confirmed or leak.withs or not leak.loops or leak.returns:
                continue
            ends = [self.model.loop_exit_seq.get(id(lp)) for lp in leak.loops]
            if any(self._grad_decorated(leak.stack[i - 1]) for i in range(leak.root() + 1, len(leak.frames))):
                continue
            # the same loop ran a backward() before the statement: the next iteration's fails
            for seq, node, loops, starts, protected in self._backwards:
                if protected or seq > leak.seq:
                    continue
                if any(lp in loops and starts[loops.index(lp)] == st
                       and (leak.cancelled_at is None or end is None or leak.cancelled_at > end)
                       and not _restored_in(lp, st, seq, self._restores)
                       for lp, st, end in zip(leak.loops, leak.starts, ends)):
                    self._confirmed[id(leak.node)] = (leak, node)
                    break
        for leak, backward in self._confirmed.values():
            self.report(
                leak.node, context=leak.context,
                related=[(backward, "the backward() that then runs with grad mode off and raises")],
                what="`torch.set_grad_enabled(False)` switches autograd off globally and nothing switches it "
                "back on: a later backward() raises RuntimeError (element 0 of tensors does not require grad)",
            )


def _ends(body: Any) -> Optional[type]:
    if isinstance(body, cst.SimpleStatementSuite):  # `if x: continue` on one line
        body = cst.IndentedBlock(body=[cst.SimpleStatementLine(body=body.body)]) if body.body else body
    stmts = body.body if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)) else ()
    if not stmts:
        return None
    last = stmts[-1]
    if isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and last.body:
        t = type(last.body[-1])
        if t in (cst.Return, cst.Raise, cst.Break, cst.Continue):
            return t
    return None


def _restored_in(loop: Any, start: int, before: int, restores: List[Tuple[int, Tuple[Any, ...], Tuple[int, ...]]]) -> bool:
    """Does the same walk of ``loop`` switch grad mode back on before event ``before`` (the
    next iteration runs that statement before its backward())?"""
    return any(seq <= before and loop in loops and starts[loops.index(loop)] == start
               for seq, loops, starts in restores)


def _flag(call: cst.Call) -> Optional[bool]:
    arg = None
    for a in call.args:
        if a.keyword is None or a.keyword.value == "mode":
            arg = a.value
            break
    if isinstance(arg, cst.Name) and arg.value in ("True", "False"):
        return arg.value == "True"
    return None
