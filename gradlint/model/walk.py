"""The single traversal: walks the libcst tree once, drives the model, and hands each node to
the rules that asked for its type (how calls are walked: ``walk_calls.py``).

This is the only place that walks the tree. It reads each node type's child fields once
(skipping whitespace and punctuation) instead of going through libcst's visitor machinery,
which rebuilds every node it visits.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.names import child_fields as _fields, dotted, is_node as _is_node, subtree
from gradlint.model.classes import class_chain
from gradlint.model.env import FREED
from gradlint.model.events import Branch
from gradlint.model.freezing import freeze_after_loop
from gradlint.model.guards import (
    made_with_grad_off, narrow, no_graph_through, none_test_outcome, requires_grad_guards, type_guards, widen,
)
from gradlint.model.objects import harvest as _harvest
from gradlint.model.state import Model, element_of
from gradlint.model.walk_calls import CallWalker
from gradlint.model.syntax import const_bool
from gradlint.model.lattice import alternatives
from gradlint.model.loops import leaves_early, loop_freed
from gradlint.model.values import (
    CLASS, CONST, FUNCTION, INSTANCE, MODULE, TENSOR, TUPLE, UNKNOWN_VALUE, Value, join_values, next_id,
)


# Decorators known not to change grad mode.
_NEUTRAL_DECORATORS = frozenset(
    "staticmethod classmethod property abstractmethod wraps lru_cache cache cached_property "
    "overload override contextmanager setter getter deleter dataclass".split()
)
_FUNCTION_BASES = ("Function", "InplaceFunction")
_AUTOGRAD_FUNCTION_METHODS = frozenset({"forward", "backward", "setup_context", "jvp", "vjp"})
# The hooks of a LightningModule that Lightning's evaluation loops call with grad off (under
# torch.inference_mode, or torch.no_grad with Trainer(inference_mode=False)); training_step is
# called with grad on.
_LIGHTNING_EVAL_STEPS = frozenset({"validation_step", "test_step", "predict_step"})
_LIGHTNING_MODULE = "LightningModule"  # pytorch_lightning / lightning.pytorch / lightning, by any import


class RuleError(Exception):
    def __init__(self, rule: Any, exc: BaseException) -> None:
        super().__init__(f"{rule.code}: {type(exc).__name__}: {exc}")
        self.rule = rule
        self.exc = exc


_HANDLERS: Dict[type, Tuple[Tuple[str, str, str], ...]] = {}


def _handler_names(cls: type) -> Tuple[Tuple[str, str, str], ...]:
    """A rule class's handlers as (prefix, name, attribute), read once per class (``dir()`` of
    every rule for every file was ~2% of a project's lint)."""
    out = _HANDLERS.get(cls)
    if out is None:
        found = []
        for attr in dir(cls):
            for prefix in ("visit_", "leave_", "on_"):
                if attr.startswith(prefix):
                    found.append((prefix, attr[len(prefix):], attr))
                    break
        out = _HANDLERS[cls] = tuple(found)
    return out


class Walker(CallWalker):
    def __init__(self, rules: List[Any], project: Any = None) -> None:
        self.model = Model(self._emit)
        self.model.project = project  # gradlint.index.ProjectView: the file's project, or None
        self.rules = rules
        self.visit: Dict[str, List[Callable[[Any], None]]] = {}
        self.leave: Dict[str, List[Callable[[Any], None]]] = {}
        self.events: Dict[str, List[Callable[..., None]]] = {}
        tables = {"visit_": self.visit, "leave_": self.leave, "on_": self.events}
        for r in rules:
            r.model = self.model
            for prefix, name, attr in _handler_names(type(r)):
                tables[prefix].setdefault(name, []).append(getattr(r, attr))
        self.errors: List[RuleError] = []
        self._call_graph: Optional[Dict[str, list]] = None  # functions by name (walk_calls)
        self._answers: Dict[Any, bool] = {}
        self._eventful_size = (0, 0, 0)
        self._called_memo: Dict[Any, Any] = {}
        self._summarising: set = set()  # functions of other modules being summarised (walk_calls)
        self._tainted: set = set()
        self.muted = 0  # > 0: the rules see nothing (another module's top level being evaluated)
        self._binds_cache: Dict[int, bool] = {}
        self._special = {
            cst.Module: self._module,
            cst.SimpleStatementLine: self._simple_line,
            cst.SimpleStatementSuite: self._simple_line,
            cst.FunctionDef: self._function,
            cst.ClassDef: self._class,
            cst.If: self._if,
            cst.For: self._for,
            cst.While: self._while,
            cst.Try: self._try,
            cst.With: self._with,
            cst.Lambda: self._lambda,
            cst.IfExp: self._if_exp,
            cst.ListComp: self._comp,
            cst.SetComp: self._comp,
            cst.GeneratorExp: self._comp,
            cst.DictComp: self._comp,
        }
        if hasattr(cst, "TryStar"):
            self._special[cst.TryStar] = self._try
        if hasattr(cst, "Match"):
            self._special[cst.Match] = self._match

    # ------------------------------------------------------------------ dispatch
    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:  # one rule's crash must not stop the others
            self.errors.append(RuleError(fn.__self__, exc))  # type: ignore[attr-defined]

    def _emit(self, event: str, args: Tuple[Any, ...]) -> None:
        if self.muted:
            return
        for fn in self.events.get(event, ()):
            try:
                fn(*args)
            except Exception as exc:  # (as _call: written out, this runs for every event)
                self.errors.append(RuleError(fn.__self__, exc))  # type: ignore[attr-defined]

    def run(self, module: cst.Module, text: Optional[str] = None) -> None:
        if text is None or "set_default_dtype" in text or "set_default_tensor_type" in text:
            self.model.default_dtype = None  # factories' dtype unknown
        self._definitions(module.body)
        self.model.walk_callee = self._walk_callee
        self.model.module_values = self._module_values
        self.model.root_module = module
        self.model.root_text = text  # (None when the caller has no text: then rules may not skip by it)
        self.model.walk_statement = self._walk_statement
        self.walk(module)
        self._emit("finish", ())

    # ------------------------------------------------------------------ calls of this file
    def walk(self, node: cst.CSTNode) -> None:
        t = type(node)
        name = t.__name__
        handlers = self.visit.get(name) if not self.muted else None
        if handlers:
            for h in handlers:
                try:
                    h(node)
                except Exception as exc:  # one rule's crash must not stop the others (as _call)
                    self.errors.append(RuleError(h.__self__, exc))  # type: ignore[attr-defined]
        special = self._special.get(t)
        if special is not None:
            special(node)
        else:
            self.children(node)
        handlers = self.leave.get(name) if not self.muted else None
        if handlers:
            for h in handlers:
                try:
                    h(node)
                except Exception as exc:
                    self.errors.append(RuleError(h.__self__, exc))  # type: ignore[attr-defined]

    def children(self, node: cst.CSTNode, skip: Tuple[str, ...] = ()) -> None:
        walk = self.walk
        for f in _fields(type(node)):
            if f in skip:
                continue
            child = getattr(node, f)
            if child is None:
                continue
            t = type(child)
            if t is tuple or t is list:
                for c in child:  # (libcst's sequence fields hold nodes only)
                    walk(c)
            elif _is_node(t):
                walk(child)

    def field(self, node: Any) -> None:
        """Walk an optional child or a sequence of children."""
        if node is None:
            return
        if isinstance(node, cst.CSTNode):
            self.walk(node)
        else:
            for c in node:
                self.walk(c)

    # ------------------------------------------------------------------ statements
    def _module(self, node: cst.Module) -> None:
        self._block(node.body)

    def _block(self, body: Any) -> bool:
        """Walk a sequence of statements; True when it ends in return/raise/break/continue."""
        stmts = body.body if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)) else body
        model = self.model
        depth = len(model.branches)  # (an early exit's marker holds to the end of the block)
        try:
            for s in stmts:
                prev = model.current_statement
                model.current_statement = s
                model.tick += 1
                self.walk(s)
                model.current_statement = prev
        finally:
            del model.branches[depth:]
        return _terminates(stmts)

    def _simple_line(self, node: Any) -> None:
        model = self.model
        for small in node.body:
            self.walk(small)
            t = type(small)
            try:
                if t is cst.Assign:
                    model.exec_assign(small)
                elif t is cst.Expr:
                    self._expr_statement(small)
                elif t is cst.AugAssign:
                    model.exec_aug_assign(small)
                elif t is cst.AnnAssign:
                    model.exec_ann_assign(small)
                elif t is cst.Import:
                    model.exec_import(small)
                elif t is cst.ImportFrom:
                    model.exec_import_from(small)
                elif t is cst.Del:
                    model.exec_del(small)
                elif t is cst.Return and small.value is not None:
                    v = model.value_of(small.value)
                    model.note_return(node, v)
                    if model.returns:
                        model.returns[-1].append(v)
                elif t is cst.Assert:
                    model.value_of(small.test)  # `assert x.grad is not None` reads x.grad
                    if small.msg is not None:
                        model.value_of(small.msg)
                    for key in type_guards(model, small.test)[0]:  # `assert not torch.is_tensor(x)`
                        if model.env.get(key) is not None and model.env[key].kind == TENSOR:
                            model.bind_key(key, UNKNOWN_VALUE)
                elif t in (cst.Global, cst.Nonlocal):
                    for n in small.names:
                        model.unbind(n.name.value)
            except RecursionError:
                raise
            except Exception as exc:
                self.errors.append(RuleError(_ModelAsRule, exc))

    def _expr_statement(self, node: cst.Expr) -> None:
        model = self.model
        value = node.value
        if type(value) is cst.Call:
            q = model.qualname(value.func)
            if q in api.SET_GRAD:
                args = [a for a in value.args if a.keyword is None]
                model.grad_enabled = const_bool(args[0].value if args else None)
                model.grad_assumed = False
                model.grad_off_site = None
                return
        model.exec_expr(node)

    def _function(self, node: cst.FunctionDef) -> None:
        model = self.model
        for d in node.decorators:
            self.walk(d)
        self.field(node.params)
        self.field(node.returns)
        saved_env, saved_grad, saved_kind = model.snapshot(), model.grad_enabled, model.scope_kind
        saved_loop, saved_assumed, saved_loops = model.loop_depth, model.grad_assumed, model.loops
        model.loops = []
        model.restore({})
        model.grad_enabled, model.grad_assumed = self._function_grad_mode(node)
        saved_inference = model.inference
        model.inference = False
        role = self._autograd_function_role(node)
        if role is not None:
            # forward(ctx, *inputs) / backward(ctx, *grad_outputs) of a custom autograd.Function
            for i, p in enumerate(list(node.params.params)[1:]):
                ann = dotted(p.annotation.annotation) if p.annotation is not None else None
                if ann is None or ann.rsplit(".", 1)[-1] == "Tensor":
                    v = Value("tensor", rg=None, leaf=None, made=role)
                    model.fn_inputs[v.id] = (node, i)
                    model.bind_key(p.name.value, v)
        model.scope_kind = "function"
        model.loop_depth = 0
        cls = model.method_class.get(id(node))
        if cls is not None and model.class_stack and model.class_stack[-1] is cls and role is None:
            self._bind_self(node, cls)
        model.function_stack.append(node)
        model.returns.append([])
        model.frame_count += 1
        model.frames.append(model.frame_count)
        try:
            self._block(node.body)
            if cls is not None and model.class_attrs and model.class_stack and model.class_stack[-1] is cls:
                _harvest(node, model.env, model.class_attrs[-1])
                if node.name.value == "__init__" and node.params.params:
                    # what `self` holds at its end: frozen as a whole or not (freezing.py)
                    model.frozen_inits[cls.name.value] = model.env.get(node.params.params[0].name.value)
        finally:
            model.frames.pop()
            model.function_stack.pop()
            returned = model.returns.pop()
            if role == "fn_input" and model.class_stack:
                model.function_returns(model.class_stack[-1], node, returned)  # (customviews.py)
            model.restore(saved_env)
            model.grad_enabled, model.scope_kind, model.loop_depth = saved_grad, saved_kind, saved_loop
            model.grad_assumed, model.loops = saved_assumed, saved_loops
            model.inference = saved_inference
        fn = Value(FUNCTION, node=node, items=_summary(returned))
        model.bind_key(node.name.value, fn)
        if saved_kind == "class" and model.class_attrs:
            model.class_attrs[-1]["self." + node.name.value] = fn

    def _bind_self(self, node: cst.FunctionDef, cls: cst.ClassDef) -> None:
        """The first parameter of a method is the instance: a module of that class, or an
        instance of it (static and class methods excepted)."""
        for d in node.decorators:
            if (dotted(d.decorator) or "").rsplit(".", 1)[-1] in ("staticmethod", "classmethod"):
                return
        params = node.params.params
        if not params:
            return
        model = self.model
        is_module = bool(model.class_attrs) and model.class_attrs[-1].get("__module__") is not None
        name = cls.name.value
        model.bind_key(params[0].name.value,
                       Value(MODULE, params=None, node=name) if is_module else Value(INSTANCE, node=name))

    def _autograd_function_role(self, node: cst.FunctionDef) -> Optional[str]:
        model = self.model
        if not model.class_stack or node.name.value not in ("forward", "backward"):
            return None
        for b in model.class_stack[-1].bases:
            name = (dotted(b.value) or "").rsplit(".", 1)[-1]
            if name.endswith(_FUNCTION_BASES):
                return "fn_input" if node.name.value == "forward" else "fn_grad_output"
        return None

    def _function_grad_mode(self, node: cst.FunctionDef) -> Tuple[Optional[bool], bool]:
        """Grad mode at the function's entry, and whether it is only assumed (on by default:
        the callers decide, see Model.grad_off_functions)."""
        model = self.model
        mode: Optional[bool] = True
        explicit = False
        for d in node.decorators:
            expr = d.decorator
            call_args = None
            if type(expr) is cst.Call:
                call_args = expr.args
                expr = expr.func
            q = model.qualname(expr)
            if q in api.GRAD_OFF:
                if q == "torch.inference_mode" and call_args and const_bool(call_args[0].value) is False:
                    continue
                mode, explicit = False, True
            elif q in api.GRAD_ON:
                mode, explicit = True, True
            elif q in api.SET_GRAD:
                mode, explicit = const_bool(call_args[0].value if call_args else None), True
            else:
                last = (dotted(expr) or "").rsplit(".", 1)[-1]
                if last in _NEUTRAL_DECORATORS:
                    continue
                low = last.lower()
                if "grad" in low or "inference" in low or "differentiable" in low:
                    mode, explicit = None, True
        if mode is True and model.class_stack and node.name.value in _AUTOGRAD_FUNCTION_METHODS:
            cls = model.class_stack[-1]
            for b in cls.bases:
                name = (dotted(b.value) or "").rsplit(".", 1)[-1]
                if name.endswith(_FUNCTION_BASES):
                    return False, False  # custom autograd.Function: forward/backward run with grad off
        if mode is True and not explicit and node.name.value in _LIGHTNING_EVAL_STEPS:
            cls = model.method_class.get(id(node))
            if cls is not None and self._lightning_module(cls.name.value):
                return False, False  # Lightning's validation/test/predict loop: run without grad
        return mode, mode is True and not explicit

    def _lightning_module(self, name: str) -> bool:
        """Is the class ``name`` a LightningModule, through its bases (of this file or of the
        project's modules it imports: NeMo's ``ModelPT(LightningModule, ...)``)?"""
        return any(c == _LIGHTNING_MODULE for c, _info in class_chain(self.model.classes, name))

    def _class(self, node: cst.ClassDef) -> None:
        model = self.model
        for d in node.decorators:
            self.walk(d)
        for b in node.bases:
            self.walk(b)
        is_module = False
        for b in node.bases:
            q = model.qualname(b.value)
            if q in api.MODULE_BASES or (q or "").startswith("torch.nn."):
                is_module = True
            else:
                base = model.value_of(b.value)
                if base.kind == CLASS and base.params:
                    is_module = True
        saved_env, saved_kind = model.snapshot(), model.scope_kind
        model.restore({})
        model.scope_kind = "class"
        model.class_stack.append(node)
        table = model.class_tables.setdefault(node.name.value, {})
        model.walked_classes.add(node.name.value)
        if is_module:
            table["__module__"] = Value(CLASS)
        model.class_attrs.append(table)
        try:
            self._block(node.body)
        finally:
            model.class_stack.pop()
            model.class_attrs.pop()
            model.restore(saved_env)
            model.scope_kind = saved_kind
        model.bind_key(node.name.value, Value(CLASS, node=node, params=is_module or None))

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
        model.restore(Model.join(ends) if ends else before)

    def _if_exp(self, node: cst.IfExp) -> None:
        """``a if test else b``: each branch is seen with what the test proves there
        (``torch.tensor(x) if isinstance(x, list) else x``: no tensor in the first)."""
        model = self.model
        self.walk(node.test)
        not_in_body, not_in_else = type_guards(model, node.test)
        for branch, keys in ((node.body, not_in_body), (node.orelse, not_in_else)):
            saved = narrow(model, keys)
            try:
                self.walk(branch)
            finally:
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

    # ------------------------------------------------------------------ expressions with scopes
    def _lambda(self, node: cst.Lambda) -> None:
        model = self.model
        saved = model.snapshot()
        self.walk(node.params)
        for p in _param_names(node.params):
            model.unbind(p)
        self.walk(node.body)
        model.restore(saved)

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


class _ModelAsRule:
    code = "model"


def _param_names(params: cst.Parameters) -> List[str]:
    out = []
    for p in list(params.params) + list(params.kwonly_params) + list(getattr(params, "posonly_params", ())):
        out.append(p.name.value)
    for p in (params.star_arg, params.star_kwarg):
        if type(p) is cst.Param:
            out.append(p.name.value)
    return out


def _summary(returned: List[Value]) -> Tuple[Value, ...]:
    """What a function returns, when every ``return`` agrees on its shape: a tensor that
    requires grad (a loss), a module, a tuple of such, ... (or nothing known)."""
    if not returned:
        return ()
    first = returned[0]
    if all(_same_shape(first, v) for v in returned[1:]) and first.kind not in ("unknown", "function", "class"):
        return (first,)
    return ()


def _same_shape(a: Value, b: Value) -> bool:
    if a.kind != b.kind:
        return False
    if a.kind == "tensor":
        return a.rg == b.rg
    if a.kind == "tuple":
        return len(a.items) == len(b.items) and all(_same_shape(x, y) for x, y in zip(a.items, b.items))
    return True


def _terminates(stmts: Any) -> bool:
    if not stmts:
        return False
    last = stmts[-1]
    if type(last) is cst.SimpleStatementLine and last.body:
        return isinstance(last.body[-1], (cst.Return, cst.Raise, cst.Break, cst.Continue))
    return isinstance(last, (cst.Return, cst.Raise, cst.Break, cst.Continue))  # `if x: a(); continue`


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
