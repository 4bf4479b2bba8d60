from __future__ import annotations

from typing import Any, Iterator, List

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.names import dotted
from gradlint.model.syntax import const_bool, kwvalue
from gradlint.rule import Rule, Severity


class OptimizerGivenGradlessTensor(Rule):
    """
    ## What it does
    Finds an optimizer that is stepped in the same code but was given, in place of parameters, a
    tensor made right there by a factory without `requires_grad=True` (`torch.randn(...)`,
    `torch.zeros_like(w)`, ...): as the optimizer's first argument, an element of its parameter
    list, or the `"params"` of a param group.

    And, as a warning, a param group built in the function that builds the optimizer
    (`group = {"lr": 0.5}`, then `group["params"].append(p)` in a loop over
    `named_parameters()`) that is used in no other way: never put in the list given to the
    optimizer, never added with `add_param_group()`. It is reported at the optimizer, with the
    group as a related location.

    ## Why is this bad
    Silently wrong. Nothing else holds that tensor: it never requires grad, never receives a
    gradient, and `step()` skips it (its `.grad` is None). The group updates nothing, and the
    parameters meant to be there (the second half of a model given per-layer learning rates, a
    head) are in no optimizer: they get gradients at every `backward()` and keep their initial
    values. torch raises nothing. A group that is built and dropped leaves its parameters out
    the same way, unless another group holds them too (hence a warning).

    Not reported: an optimizer that is never stepped in the code the linter sees (a dummy
    optimizer that only drives a learning-rate scheduler for a plot), a factory tensor with
    `requires_grad=True` or wrapped in `nn.Parameter(...)`, and a tensor bound to a name first
    (the code may make it require grad later).

    ## Example
    ```python
    optimizer = torch.optim.SGD([{"params": backbone_params, "lr": 0.1},
                                 {"params": torch.randn(3, 64, 64)}], lr=0.01)
    ```

    ## Use instead
    ```python
    optimizer = torch.optim.SGD([{"params": backbone_params, "lr": 0.1},
                                 {"params": head_params}], lr=0.01)
    ```

    ## Fix safety
    No automatic fix: which parameters belong in the group is for the author to say.

    ## References
    - https://pytorch.org/docs/stable/optim.html#per-parameter-options
    """

    code = "GL607"
    name = "optimizer-given-gradless-tensor"
    severity = Severity.ERROR
    message = "{what}: {effect}"
    hint = "give the optimizer the parameters this group is for (`model.head.parameters()`)"

    def __init__(self, model: Any, sink: Any) -> None:
        super().__init__(model, sink)
        # (tensor node, context, optimizer call, names it is bound to, events so far, walk root)
        self._found: List[Any] = []
        self._assigned: List[Any] = []  # (name, statement count, walk root, statement) of each binding
        self._seen: set = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            key = dotted(t.target)
            if key is not None:
                self._assigned.append((key, self.model.tick, self.model.walk_root(), node))

    def on_optimizer(self, node: Any, params: List[Any]) -> None:
        model = self.model
        if not isinstance(node, cst.Call):
            return
        first = node.args[0].value if node.args and node.args[0].keyword is None else kwvalue(node, "params")
        if first is None:
            return
        statement = model.current_statement
        names: List[str] = []
        small = getattr(statement, "body", None)
        if isinstance(small, (list, tuple)) and len(small) == 1 and isinstance(small[0], cst.Assign) \
                and small[0].value is node:
            names = [k for k in (dotted(t.target) for t in small[0].targets) if k is not None]
        given = list(_given(first, starred=True))
        gradless = [e for e in given if self._gradless(e)]
        if len(gradless) == len(given):
            # every tensor handed over is a placeholder (`SGD([torch.zeros(1)], lr=...)` to drive
            # an LR scheduler, preview a schedule, or stand in when nothing is trainable): the
            # optimizer is meant to train nothing; the bug is a placeholder beside real parameters
            gradless = []
        for expr in gradless:
            self._found.append((expr, model.here(), node, names, len(model.events), model.walk_root(), model.tick))
        fn = model.function_stack[-1] if model.function_stack else None
        if fn is not None and isinstance(fn.body, cst.IndentedBlock):
            for name, binding in _dead_groups(fn.body.body, statement):
                self._found.append(((name, binding), model.here(), node, names, len(model.events), model.walk_root(),
                                    model.tick))

    def _gradless(self, expr: cst.BaseExpression) -> bool:
        """A factory call made here whose tensor certainly does not require grad."""
        if not isinstance(expr, cst.Call) or self.model.qualname(expr.func) not in api.FACTORIES:
            return False
        flag = kwvalue(expr, "requires_grad")
        if flag is not None and const_bool(flag) is not False:
            return False  # requires_grad=True, or a flag the linter cannot read
        v = self.model.value_of(expr)
        return v.kind == "tensor" and v.rg is False and not v.is_param

    def on_finish(self) -> None:
        events = self.model.events
        for expr, context, call, names, start, root, tick in self._found:
            # a name bound again after the optimizer: a step through it may be another optimizer's
            names = [n for n in names if not any(k == n and r is root and t > tick for k, t, r, _ in self._assigned)]
            stepped = any(
                e.kind == "step" and e.value is not None and (
                    (e.value.kind == "optimizer" and e.value.made_node is call)
                    or (e.value.kind == "unknown" and e.key is not None and e.key in names and e.root is root))
                for e in events[start:])
            if not stepped or (expr, call) in self._seen:
                continue
            self._seen.add((expr, call))
            if isinstance(expr, tuple):
                name, binding = expr
                self.report(call, context=context, severity=Severity.WARNING,
                            related=[(binding, "the param group, built here and never used after")],
                            what=f"the param group built in `{name}` is never given to this optimizer (nor added to it later)",
                            effect="unless another group holds its parameters, they are never updated")
                continue
            text = _text(expr)
            text = text if len(text) <= 40 else text[:37] + "..."
            self.report(expr, context=context,
                        what=f"the optimizer is given `{text}`, a new tensor that never requires grad",
                        effect="it is never updated, and the parameters meant for it are in no optimizer")


def _dead_groups(body: Any, statement: Any) -> List[Any]:
    """Param groups built in a function and dropped before its optimizer: ``name = {...}`` (a
    dict literal) among the statements before ``statement`` (the optimizer's, in the same
    block), whose ``"params"`` is filled with tensors (``name["params"].append(p)``,
    ``name["params"] = [...]``) and that is used in no other way (never passed, appended,
    returned or read) from its binding to the end of the block or its next binding there."""
    body = list(body)
    at = next((i for i, s in enumerate(body) if s is statement), None)
    if at is None:
        return []
    out = []
    for i, s in enumerate(body[:at]):
        name = _dict_binding(s)
        if name is None:
            continue
        rest = []
        for t in body[i + 1:]:
            if _dict_binding(t) == name or _binds(t, name):
                break
            rest.append(t)
        if not any(r is statement for r in rest):
            continue  # bound again before the optimizer: the later binding is the one to look at
        uses = _Uses(name)
        for t in rest:
            t.visit(uses)
        if uses.filled and not uses.other:
            out.append((name, s))
    return out


def _dict_binding(statement: Any) -> Any:
    """``name`` of a statement ``name = {...}`` (a dict literal with constant string keys)."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    a = statement.body[0]
    if not (isinstance(a, cst.Assign) and len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name)
            and isinstance(a.value, cst.Dict)):
        return None
    if not all(isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString) for e in a.value.elements):
        return None
    return a.targets[0].target.value


def _binds(statement: Any, name: str) -> bool:
    """Does the statement (or a block in it) bind ``name`` again (assignment, loop target, with)?"""
    found = []

    class _V(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            if isinstance(node.target, cst.Name) and node.target.value == name:
                found.append(node)

        def visit_For(self, node: cst.For) -> None:
            if isinstance(node.target, cst.Name) and node.target.value == name:
                found.append(node)

    statement.visit(_V())
    return bool(found)


class _Uses(cst.CSTVisitor):
    """The uses of ``name``: ``filled`` when ``name["params"]`` gets tensors (an append, extend
    or store), ``other`` for any use that is not a store into or a fill of one of its keys."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.filled = False
        self.other = False
        self._ok: set = set()

    def _key(self, node: Any) -> Any:
        """``name["key"]`` -> "key" (None for anything else)."""
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and node.value.value == self.name \
                and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) \
                and isinstance(node.slice[0].slice.value, cst.SimpleString):
            return node.slice[0].slice.value.evaluated_value
        return None

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        key = self._key(node.target)
        if key is not None:
            self._ok.add(id(node.target.value))

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if self._key(t.target) == "params" and not (isinstance(node.value, cst.List) and not node.value.elements):
                self.filled = True  # `name["params"] = [p1, p2]` (an empty list is no fill)

    def visit_Call(self, node: cst.Call) -> None:
        f = node.func
        if isinstance(f, cst.Attribute) and f.attr.value in ("append", "extend") and self._key(f.value) == "params" \
                and node.args:
            self._ok.add(id(f.value.value))
            self.filled = True

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name and id(node) not in self._ok:
            self.other = True


def _given(arg: cst.BaseExpression, starred: bool = False) -> Iterator[cst.BaseExpression]:
    """What an optimizer's first argument hands it as tensors, written in place: the argument
    itself, the elements of a list or tuple literal, and each group's ``"params"`` (itself, or
    the elements of its list or tuple literal); with ``starred``, also what a ``*xs`` unpacks
    (as the expression ``xs``)."""
    if isinstance(arg, (cst.List, cst.Tuple)):
        for el in arg.elements:
            if isinstance(el, cst.StarredElement):
                if starred:
                    yield el.value
                continue
            value = el.value
            if isinstance(value, cst.Dict):
                for entry in value.elements:
                    if isinstance(entry, cst.DictElement) and isinstance(entry.key, cst.SimpleString) \
                            and entry.key.evaluated_value == "params":
                        yield from _one_or_many(entry.value)
            else:
                yield value
    else:
        yield arg


def _one_or_many(value: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    if isinstance(value, (cst.List, cst.Tuple)):
        for el in value.elements:
            if not isinstance(el, cst.StarredElement):
                yield el.value
    else:
        yield value


def _text(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)
