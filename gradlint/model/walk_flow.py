"""The walk of control flow: ``if``/``else`` and conditional expressions (each branch from the
state before it, joined after), loops (a second pass when the first changes what a name holds),
``try``, ``match``, ``with`` (grad-mode context managers) and comprehensions."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.names import dotted, subtree
from gradlint.model.env import FREED
from gradlint.model.events import Branch
from gradlint.model.freezing import freeze_after_loop
from gradlint.model.guards import (
    made_with_grad_off, narrow, no_graph_through, none_test_outcome, requires_grad_guards, type_guards, widen,
)
from gradlint.model.state import Model, element_of
from gradlint.model.syntax import const_bool
from gradlint.model.lattice import alternatives
from gradlint.model.loops import leaves_early, loop_freed
from gradlint.model.modes import enter_eval, enter_eval_scope, eval_branches, leave_eval_scope, settle_modes
from gradlint.model.values import CONST, TENSOR, TUPLE, UNKNOWN_VALUE, Value, join_values, next_id


class FlowWalker:
    """The ``Walker``'s handlers for branches, loops, ``try``, ``match``, ``with`` and
    comprehensions (a mixin: ``walk.py``)."""

    def _if(self, node: cst.If) -> None:
        model = self.model
        literal = model.parameter_literal(node.test)
        grad_test = _grad_mode_test(model, node.test)
        if grad_test is not None and model.grad_enabled is not None and not model.grad_assumed:
            # `if torch.is_grad_enabled():` where this walk knows the mode: one branch runs
            literal = "True" if model.grad_enabled == grad_test else "False"
        if literal in ("False", "None") and type(node.orelse) is not cst.If:
            # `if no_dec:` in a function this call gives `no_dec=False`: the body does not run
            # (its code is checked by the walk at the definition)
            if node.orelse is not None:
                self._block(node.orelse.body)
            return
        if literal == "True":
            self._block(node.body)  # (and its else does not)
            return
        self.walk(node.test)
        model.value_of(node.test)
        before = model.snapshot()
        ends: List[Any] = []
        model.conditions.append(node.test)
        first_event = len(model.events)
        not_in_body, not_in_else = type_guards(model, node.test)
        # `if out is None:` where `out` certainly is (or is not) None: the other branch is walked
        # (rules see its code) but its path does not reach the code after the `if`
        outcome = none_test_outcome(model, node.test)
        if outcome is None:
            # `if validation:` where this call gives `validation=False`: the path of the other
            # branch does not run here (it is walked all the same: rules see its code)
            literal = model.parameter_literal(node.test)
            outcome = None if literal is None else literal == "True"
        grad_before = (model.grad_enabled, model.grad_assumed)
        eval_in_body, eval_in_else = eval_branches(node.test)  # `if not self.training:` (modes.py)
        enter_eval(model, eval_in_body)
        no_grad_in_body, no_grad_in_else = requires_grad_guards(node.test)
        no_graph_through(model, no_grad_in_body)  # `if not x.requires_grad: y.mul_(2)` (guards.py)
        for key in not_in_body:  # `if not torch.is_tensor(x): x = torch.tensor(x)`: no tensor here
            if model.env.get(key) is not None and model.env[key].kind == TENSOR:
                model.bind_key(key, UNKNOWN_VALUE)
        if grad_test is False:  # `if not torch.is_grad_enabled(): y.mul_(2)`: grad is off there
            made_with_grad_off(model)  # (and was where this call computed what it holds: guards.py)
            model.grad_enabled, model.grad_assumed = False, False
        try:
            terminated = self._block(node.body)
        finally:
            model.conditions.pop()
            if grad_test is False:
                model.grad_enabled, model.grad_assumed = grad_before
        if terminated:
            for e in model.events[first_event:]:
                e.exits = True  # `opt.zero_grad(); continue`: nothing after the `if` follows it
            grad_after_body = None  # that path does not reach the code after the `if`
        else:
            ends.append(model.env)
            grad_after_body = (model.grad_enabled, model.grad_assumed)
        model.grad_enabled, model.grad_assumed = grad_before
        model.restore(dict(before))
        enter_eval(model, eval_in_else)
        no_graph_through(model, no_grad_in_else)
        for key in not_in_else:
            if model.env.get(key) is not None and model.env[key].kind == TENSOR:
                model.bind_key(key, UNKNOWN_VALUE)
        orelse = node.orelse
        if orelse is None:
            ends.append(model.env)
        else:
            prev = model.current_statement
            depth = len(model.branches)
            model.branches.append(Branch(node, node.test, negated=True))
            else_ends = False
            if grad_test is True:  # the else of `if torch.is_grad_enabled():` runs with grad off
                made_with_grad_off(model)
                model.grad_enabled, model.grad_assumed = False, False
            try:
                if type(orelse) is cst.If:
                    model.current_statement = orelse
                    self.walk(orelse)
                    ends.append(model.env)
                else:
                    else_ends = self._block(orelse.body)
                    if not else_ends:
                        ends.append(model.env)
            finally:
                del model.branches[depth:]
                if grad_test is True:
                    model.grad_enabled, model.grad_assumed = grad_before
            model.current_statement = prev
            if else_ends and not terminated:
                # `if ready: ... else: continue`: what follows runs only when the test is true
                model.branches.append(Branch(node, node.test))
        if terminated:
            # the statements after the `if` (to the end of the enclosing block) run only when
            # its test is false
            model.branches.append(Branch(node, node.test, negated=True))
        if grad_after_body is not None and grad_after_body[0] != model.grad_enabled:
            # set_grad_enabled() on one path only: the mode after the `if` is not known
            model.grad_enabled, model.grad_assumed = None, False
        if outcome is not None and len(ends) == 2 and not terminated:
            ends = [ends[0] if outcome else ends[1]]
        joined = Model.join(ends) if ends else before
        if ends and (eval_in_body or eval_in_else):
            joined = dict(joined)
            settle_modes(eval_in_body + eval_in_else, before, ends, joined)
        model.restore(joined)

    def _if_exp(self, node: cst.IfExp) -> None:
        """``a if test else b``: each branch is seen with what the test proves there
        (``torch.tensor(x) if isinstance(x, list) else x``: no tensor in the first)."""
        model = self.model
        self.walk(node.test)
        not_in_body, not_in_else = type_guards(model, node.test)
        eval_in_body, eval_in_else = eval_branches(node.test)
        for branch, keys, evaluated in ((node.body, not_in_body, eval_in_body),
                                        (node.orelse, not_in_else, eval_in_else)):
            saved = narrow(model, keys)
            modes = enter_eval_scope(model, evaluated)
            try:
                self.walk(branch)
            finally:
                leave_eval_scope(model, modes)
                widen(model, saved)

    def _loop_body(self, body: Any, orelse: Any, node: Any, outer: Any = None) -> None:
        model = self.model
        before = model.snapshot()
        outer = outer if outer is not None else set(before)
        born = next_id()  # values with this id or a larger one are made in the loop
        model.enter_loop(node, outer)
        try:
            self._block(body)
        finally:
            model.exit_loop()
        ends = [before, model.env]
        if _carried_change(before, model.env, outer) and not model.repeat and model.inline_budget > 0:
            # the back edge: what the body leaves is what the next iteration starts with. Walk
            # the body once more from there (rules see the second iteration's values; training
            # events and graph-freeing checks belong to the first pass)
            model.inline_budget -= 1
            saved_memo = model._memo
            model._memo = {}
            model.repeat = True
            saved_carried = model.carried
            model.carried = {v.id: model.bound_stmt.get(k) for k, v in model.env.items()
                             if k in outer and before.get(k) is not v and model.bound_stmt.get(k) is not None}
            model.restore(dict(model.env))
            model.enter_loop(node, outer)
            try:
                self._block(body)
            finally:
                model.exit_loop()
                model.repeat = False
                model.carried = saved_carried
                model._memo = saved_memo
            ends.append(model.env)
        # the body runs zero or more times: keep what all paths agree on
        joined = Model.join(ends)
        for k in set(ends[1]) - set(before):
            # bound in the body, unbound before the loop: read after it only if the loop ran
            # (else a NameError), so it holds what the last iteration left
            if k not in joined and k != FREED and all(k in e for e in ends[1:]):
                joined[k] = join_values([e[k] for e in ends[1:]])
        # likewise a graph made in the body and freed by a backward() in it on every pass: on the
        # path where the loop did not run it does not exist, so it is freed wherever it exists
        made_freed = loop_freed(ends[1:], born) if not leaves_early(body) else set()
        if made_freed:
            kept = set(joined[FREED].items) if FREED in joined else set()  # type: ignore[arg-type]
            joined[FREED] = Value(TUPLE, items=tuple(sorted(kept | made_freed)))  # type: ignore[arg-type]
        model.restore(joined)
        if orelse is not None:
            self._block(orelse.body)

    def _for(self, node: cst.For) -> None:
        model = self.model
        self.walk(node.iter)
        it = model.value_of(node.iter)
        outer = set(model.env)
        self.walk(node.target)
        elem = model.row_of(it, node.iter) or element_of(it)  # (`for part in h.chunk(3)`: multiviews.py)
        if it.kind in ("params", "named_params") and isinstance(it.node, str):
            p = elem.items[1] if elem.kind == "tuple" and len(elem.items) == 2 else elem
            model.param_owner[p.id] = it.node
        model.bind_target(node.target, elem)
        # a generator (`model.parameters()`) made before an enclosing loop is exhausted by its
        # first pass: from the second on, this body does not run
        loop = model.own_loop()
        once = it.made == "generator" and loop is not None and it.id < loop.start_id
        model.once_depth += once
        try:
            self._loop_body(node.body, node.orelse, node, outer)
        finally:
            model.once_depth -= once
        if it.kind in ("params", "named_params") and isinstance(it.node, str):
            freeze_after_loop(model, it.node, node)

    def _while(self, node: cst.While) -> None:
        self.walk(node.test)
        self.model.value_of(node.test)
        self._loop_body(node.body, node.orelse, node)

    def _try(self, node: Any) -> None:
        model = self.model
        before = model.snapshot()
        saved_expecting = model.expecting_error
        if self._handles_torch_error(node):
            model.expecting_error = True  # the body demonstrates torch's error (a tutorial, a test)
        try:
            body_ends = self._block(node.body)
        finally:
            model.expecting_error = saved_expecting
        after_body = model.env
        ends: List[Any] = []
        for h in node.handlers:
            model.restore(Model.join([before, after_body]))
            prev = model.current_statement
            model.current_statement = h
            self.field(h.type)
            if h.name is not None:
                model.bind_target(h.name.name, UNKNOWN_VALUE)
            model.branches.append(Branch(h))
            try:
                terminated = self._block(h.body)
            finally:
                model.branches.pop()
            model.current_statement = prev
            if not terminated:
                ends.append(model.env)
        model.restore(after_body)
        if node.orelse is not None:
            body_ends = self._block(node.orelse.body)
        if not body_ends:
            ends.insert(0, model.env)
        model.restore(Model.join(ends) if ends else Model.join([before, after_body]))
        if node.finalbody is not None:
            self._block(node.finalbody.body)

    @staticmethod
    def _handles_torch_error(node: Any) -> bool:
        """``try: ... except RuntimeError: <no raise>``: the error torch raises in the body is
        caught and handled for good, so the code expects it (``print(e)`` in a tutorial). A
        handler that re-raises (``if "out of memory" in str(e): ... else: raise``) does not
        count, nor does ``except Exception`` (a training loop's catch-all)."""
        for h in node.handlers:
            names = []
            t = h.type
            for item in (t.elements if type(t) is cst.Tuple else [t] if t is not None else []):
                expr = item.value if type(item) is cst.Element else item
                names.append((dotted(expr) or "").rsplit(".", 1)[-1])
            if "RuntimeError" not in names:
                continue
            reraises = any(type(n) is cst.Raise for n in subtree(h.body, nested=False))
            if not reraises:
                return True
        return False

    def _match(self, node: Any) -> None:
        model = self.model
        self.walk(node.subject)
        before = model.snapshot()
        ends: List[Any] = []
        for case in node.cases:
            model.restore(dict(before))
            prev = model.current_statement
            model.current_statement = case
            self.children(case, skip=("body",))
            model.branches.append(Branch(case))
            try:
                if not self._block(case.body):
                    ends.append(model.env)
            finally:
                model.branches.pop()
            model.current_statement = prev
        ends.append(before)
        model.restore(Model.join(ends))

    def _with(self, node: cst.With) -> None:
        model = self.model
        saved, saved_assumed, saved_inference = model.grad_enabled, model.grad_assumed, model.inference
        saved_expecting, saved_off_site = model.expecting_error, model.grad_off_site
        for item in node.items:
            self.walk(item.item)
            if type(item.item) is cst.Call:
                last = (dotted(item.item.func) or "").rsplit(".", 1)[-1]
                if last in ("raises", "assertRaises", "assertRaisesRegex", "assertRaisesRegexp"):
                    model.expecting_error = True
            mode = self._context_grad_mode(item.item)
            if mode != "keep":
                model.grad_enabled = mode  # type: ignore[assignment]
                model.grad_assumed = False
                model.grad_off_site = None
                expr = item.item.func if type(item.item) is cst.Call else item.item
                if mode is False and model.qualname(expr) == "torch.inference_mode":
                    model.inference = True
            else:
                model.value_of(item.item)
            if item.asname is not None:
                self.walk(item.asname.name)
                model.bind_target(item.asname.name, UNKNOWN_VALUE)
        try:
            self._block(node.body)
        finally:
            model.grad_enabled, model.grad_assumed, model.inference = saved, saved_assumed, saved_inference
            model.expecting_error, model.grad_off_site = saved_expecting, saved_off_site

    def _context_grad_mode(self, expr: cst.BaseExpression) -> Any:
        model = self.model
        if type(expr) in (cst.Name, cst.Attribute) and model.qualname(expr) is None:
            # `with off:` of `off = torch.no_grad()` (or `self.ctx = torch.inference_mode()`):
            # the mode of the call the name holds
            held = model.value_of(expr)
            calls = [a.node for a in alternatives(held)]
            if all(type(c) is cst.Call for c in calls) and (held.kind == CONST or held.alts):
                modes = {self._context_grad_mode(c) for c in calls}  # (every path's: one mode, or unknown)
                return modes.pop() if len(modes) == 1 else None
        args = None
        if type(expr) is cst.Call:
            args = [a for a in expr.args if a.keyword is None or a.keyword.value == "mode"]
            func = expr.func
        else:
            func = expr
        q = model.qualname(func)
        if q in api.GRAD_OFF:
            if q == "torch.inference_mode" and args:
                flag = const_bool(args[0].value)
                # inference_mode(False) leaves grad mode alone; a variable: unknown
                return "keep" if flag is False else (False if flag else None)
            return False
        if q in api.GRAD_ON:
            return True
        if q in api.SET_GRAD:
            return const_bool(args[0].value if args else None)
        if q is None:
            last = ((dotted(func) or "").rsplit(".", 1)[-1]).lower()
            if "grad" in last or "inference" in last:
                return None
        return "keep"

    def _comp(self, node: Any) -> None:
        model = self.model
        model.value_of(node)  # evaluates the element in the comprehension's scope (memoised)
        saved = model.snapshot()
        comp = node.for_in
        while comp is not None:
            self.walk(comp.iter)
            self.walk(comp.target)
            it = model.value_of(comp.iter)
            model.bind_target(comp.target, model.row_of(it, comp.iter) or element_of(it))
            for cond in comp.ifs:
                self.walk(cond)
            comp = comp.inner_for_in
        if type(node) is cst.DictComp:
            self.walk(node.key)
            self.walk(node.value)
        else:
            self.walk(node.elt)
        model.restore(saved)




def _shape(v: Any) -> Any:
    return (v.kind, v.rg, v.leaf, v.alias_kind, v.made, v.src is None, v.view_of_leaf, v.inference,
            v.numel.kind if v.numel is not None else None)


def _carried_change(before: Dict[str, Value], after: Dict[str, Value], outer: Any) -> bool:
    """Does the body leave a tensor (or array) bound before the loop in another state than the
    one the loop started with (a leaf rebound to a computed value, a plain tensor to a graph
    one)? Then the second iteration sees other facts than the first."""
    for k in outer:
        a, b = before.get(k), after.get(k)
        if a is None or b is None or a is b:
            continue
        if (a.kind in ("tensor", "ndarray") or b.kind in ("tensor", "ndarray")) and _shape(a) != _shape(b):
            return True
    return False




def _grad_mode_test(model: Any, test: Any) -> Optional[bool]:
    """True for a test that holds exactly when grad mode is on (``torch.is_grad_enabled()``),
    False for its negation, None for any other test."""
    negated = False
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, negated = test.expression, not negated
    if isinstance(test, cst.Call) and not test.args and model.qualname(test.func) == "torch.is_grad_enabled":
        return not negated
    return None
