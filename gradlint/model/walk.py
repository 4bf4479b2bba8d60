"""The single traversal: walks the libcst tree once, drives the model, and hands each node to
the rules that asked for its type. Here: the dispatch and the statements; definitions are
walked in ``walk_defs.py``, branches, loops and other control flow in ``walk_flow.py``, calls
of the file's and the project's functions in ``walk_calls.py``.

This is the only place that walks the tree. It reads each node type's child fields once
(skipping whitespace and punctuation) instead of going through libcst's visitor machinery,
which rebuilds every node it visits.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.names import child_fields as _fields, is_node as _is_node
from gradlint.model.guards import type_guards
from gradlint.model.state import Model
from gradlint.model.syntax import const_bool
from gradlint.model.values import TENSOR, UNKNOWN_VALUE
from gradlint.model.walk_calls import CallWalker
from gradlint.model.walk_defs import DefinitionWalker
from gradlint.model.walk_flow import FlowWalker

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


class Walker(DefinitionWalker, FlowWalker, CallWalker):
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

class _ModelAsRule:
    code = "model"


def _terminates(stmts: Any) -> bool:
    if not stmts:
        return False
    last = stmts[-1]
    if type(last) is cst.SimpleStatementLine and last.body:
        return isinstance(last.body[-1], (cst.Return, cst.Raise, cst.Break, cst.Continue))
    return isinstance(last, (cst.Return, cst.Raise, cst.Break, cst.Continue))  # `if x: a(); continue`
