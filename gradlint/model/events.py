"""Training events: ``backward()``, ``optimizer.step()``, ``zero_grad()`` in walk order, in-place
writes, and where a finding recorded now belongs."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import libcst as cst

from gradlint.model.env import FREED
from gradlint.model.lattice import ids_of, must_deps
from gradlint.model.names import dotted, reads_grad_of, reads_grad_through, rebound_names
from gradlint.model.syntax import const_bool, kwvalue
from gradlint.model.values import INSTANCE, MODULE, OPTIMIZER, TENSOR, TUPLE, UNKNOWN, Cut, Value, flatten, join_values


class Event:
    """One training-step call, in walk order: kind is 'backward', 'step', 'zero_grad', 'grad_set'
    (``p.grad = g``: gradients given by hand), 'clip' (``clip_grad_norm_``),
    'zero_grad_keep' (set_to_none=False, p.grad.zero_()), 'unscale' and 'scaler_update' (a
    GradScaler's ``unscale_(optimizer)`` and ``update()``; its ``step(optimizer)`` is a 'step');
    ``key`` names the receiver (the optimizer, for a scaler's step and unscale_)."""

    __slots__ = ("seq", "kind", "key", "node", "loops", "statement", "function", "exits", "value", "starts",
                 "root", "once", "conds", "module", "chain", "levels", "target")

    def __init__(self, seq: int, kind: str, key: Optional[str], node: Any, loops: Tuple[Any, ...],
                 statement: Any, function: Any) -> None:
        self.seq, self.kind, self.key, self.node = seq, kind, key, node
        self.loops, self.statement, self.function = loops, statement, function
        # in a branch that ends in continue/break/return/raise: the code after it does not follow
        self.exits = False
        self.value: Optional[Value] = None  # the optimizer of a 'step', the tensor of a 'backward'
        self.starts: Tuple[int, ...] = ()  # per loop in ``loops``: the first value id made in it
        # the function whose walk this is, when the event sits in a function of this file walked
        # at a call (``train_step()`` called in ``main``: main), else ``function``
        self.root: Any = function
        # in the body of a loop over a generator made before an enclosing loop (``for p in
        # params`` with ``params = model.parameters()``): it runs on that loop's first pass only
        self.once = False
        # the branches it runs in: the tests of the enclosing ``if`` bodies (``model.conditions``)
        # and ``Branch`` markers (``model.branches``: else, except, case, the code after an
        # early exit)
        self.conds: Tuple[Any, ...] = ()
        # a 'step' of an optimizer made over ``m.parameters()``: ``m``'s key, while that name
        # still holds the very module the optimizer was given (else None)
        self.module: Optional[str] = None
        # the call site of each function of this file walked at a call, outermost first, then the
        # statement itself; per loop in ``loops``: how many of those calls were made outside it
        self.chain: Tuple[Any, ...] = ()
        self.levels: Tuple[int, ...] = ()
        # a GradScaler's 'step', 'unscale' or 'scaler_update': ``(the scaler's key, the value its
        # optimizer argument holds (None for update()), the value the scaler's key holds)``
        self.target: Optional[Tuple[Optional[str], Optional[Value], Optional[Value]]] = None


class Branch:
    """A branch of code that runs only on some paths, other than an ``if`` body (whose marker is
    its test): an ``else`` (``test`` false), an ``except`` handler or a ``case`` (``test`` None),
    or the statements after an ``if`` whose body ends in continue/return/break/raise (they run
    only when its ``test`` is false)."""

    __slots__ = ("node", "test", "negated")

    def __init__(self, node: Any, test: Any = None, negated: bool = False) -> None:
        self.node, self.test, self.negated = node, test, negated


class EventMixin:
    def imports_torch(self) -> bool:
        """Did this module import torch (rules that go by method names alone, such as
        ``.step()``/``.zero_grad()``, must not fire on other frameworks' code)?"""
        return any(q == "torch" or q.startswith("torch.") for q in self.imports.names.values())

    def log(self, kind: str, key: Optional[str], node: Any, value: Optional[Value] = None) -> None:
        if self.repeat:
            return
        e = Event(len(self.events), kind, key, node, tuple(loop.node for loop in self.loops),
                  self.current_statement, self.function_stack[-1] if self.function_stack else None)
        e.value = value
        e.starts = tuple(loop.start_id for loop in self.loops)
        e.root = self.walk_root()
        e.once = self.once_depth > 0
        e.conds = tuple(self.conditions) + tuple(self.branches)
        e.chain = (*self.call_statements, self.current_statement)
        e.levels = tuple(loop.level for loop in self.loops)
        self.events.append(e)

    def walk_root(self) -> Any:
        """The function being walked for its own sake (not at a call of it from this file):
        what happens in the functions it calls, walked with its arguments, happens in it too
        (None at module level, or in a function walked at a module-level call)."""
        depth = len(self.function_stack) - len(self.inline_stack)
        return self.function_stack[depth - 1] if depth > 0 else None

    def here(self) -> Tuple[Any, ...]:
        """Where a finding recorded now belongs (for a rule that reports it later): the
        statement, the functions whose grad mode is assumed, and whether the code is inside
        ``with pytest.raises(...)`` (a test that expects the error), and in another module's code,
        the call in the linted file that reached it and that module's parsed source (where the
        finding's position is looked up first)."""
        return (self.current_statement, self.assumed_chain(), self.expecting_error, self.root_call_site(),
                self.scope.src)

    def assumed_chain(self) -> Tuple[str, ...]:
        """The enclosing functions, when the current grad mode is only assumed to be on."""
        if not self.grad_assumed:
            return ()
        return tuple(f.name.value for f in self.function_stack)

    def grad_off_functions(self) -> set:
        """Names of functions of this module that are called with grad mode off (or unknown),
        directly or through functions that are: their bodies' "grad on" was a wrong guess."""
        off = {name for name, sites in self.calls.items() if any(m == "off" for _, m in sites)}
        changed = True
        while changed:
            changed = False
            for name, sites in self.calls.items():
                if name not in off and any(m == "assumed" and c in off for c, m in sites):
                    off.add(name)
                    changed = True
        return off

    # ------------------------------------------------------------------ events
    @staticmethod
    def lost_cuts(value: Value, kinds: frozenset) -> List[Cut]:
        """The cuts of ``kind`` in ``value`` whose source does not otherwise reach ``value``
        through the graph: the gradient stops there, so whatever produced the source gets none
        through this value."""
        return [c for c in value.cuts if c.kind in kinds and c.src.id not in value.deps]

    def inplace(self, node: Any, value: Value, op: str) -> None:
        """``value`` (a tensor or an ndarray) is written in place at ``node``."""
        self.inplace_log.append((node, value, op))
        self._emit("inplace", (node, value, op))

    def read_count(self, value: Value) -> int:
        """How many times so far a name holding ``value`` was read."""
        return self.reads.get(value.id, 0)

    def saved_entries(self, value: Value) -> List[Tuple[int, str]]:
        """What saved ``value`` for backward (empty if nothing known did). A view shares its
        base's storage and version counter: an in-place write to it changes what was saved of the
        base or of any other view of the same base (those saves are recorded on the base)."""
        own = self.saved.get(value.id, [])
        root = self.view_base.get(value.id) if value.kind == TENSOR else None
        if root is None:
            return own
        seen, sibling = {o for o, _ in own}, " (a view of this tensor)"
        return own + [(o, what[: -len(sibling)] + " (another view of the same tensor)" if what.endswith(sibling)
                       else f"a view of {what}") for o, what in self.saved.get(root.id, []) if o not in seen]

    def record_saved(self, value: Value, out_id: int, what: str) -> None:
        """``value`` is saved for the backward of the op that made ``out_id``; a view's save is
        recorded on its base too (an in-place write to the base or to another view changes it)."""
        self.saved.setdefault(value.id, []).append((out_id, what))
        root = self.view_base.get(value.id) if value.kind == TENSOR else None
        if root is not None:
            self.saved.setdefault(root.id, []).append((out_id, f"{what} (a view of this tensor)"))

    def in_module_forward(self) -> bool:
        """Inside ``forward`` of an nn.Module subclass, with grad mode on (assumed)."""
        return (
            bool(self.function_stack)
            and self.function_stack[-1].name.value == "forward"
            and bool(self.class_attrs)
            and self.class_attrs[-1].get("__module__") is not None
            and self.grad_enabled is True
        )

    def _train_call(self, receiver: Value, attr: str, node: cst.Call) -> None:
        key = dotted(node.func.value)  # type: ignore[attr-defined]
        if attr == "zero_grad":
            keep = const_bool(kwvalue(node, "set_to_none")) is False
            self.log("zero_grad_keep" if keep else "zero_grad", key, node, receiver)
            return
        last = (key or "").rsplit(".", 1)[-1].lower()
        if receiver.kind == OPTIMIZER or (receiver.kind == UNKNOWN and "opt" in last and "sched" not in last):
            self.log("step", key, node, receiver)
            owner = receiver.node if receiver.kind == OPTIMIZER else None
            params = receiver.items[0] if len(receiver.items) == 1 else None
            if (self.events and self.events[-1].node is node and isinstance(owner, str) and params is not None
                    and params.alias_of is not None and self._module_at(owner) is params.alias_of):
                self.events[-1].module = owner
        elif receiver.kind == UNKNOWN and "scaler" in last and node.args:
            self.scaler_call("step", node)  # GradScaler.step(optimizer)

    def scaler_call(self, attr: str, node: cst.Call) -> None:
        """``S.step(optimizer)``, ``S.unscale_(optimizer)``, ``S.update()`` of an object the model
        does not know whose name says it is a (GradScaler) scaler: logged as 'step' (the
        optimizer's key), 'unscale' (likewise) and 'scaler_update' (the scaler's key)."""
        key = dotted(node.func.value)  # type: ignore[attr-defined]
        if "scaler" not in (key or "").rsplit(".", 1)[-1].lower():
            return
        if attr == "update":
            self.log("scaler_update", key, node)
        elif node.args:
            opt = dotted(node.args[0].value)
            self.log("step" if attr == "step" else "unscale", opt, node)
        else:
            return
        if self.events and self.events[-1].node is node:
            opt_key = self.events[-1].key if attr != "update" else None
            self.events[-1].target = (key, self.lookup(opt_key) if opt_key is not None else None,
                                      self.lookup(key) if key is not None else None)

    def _module_at(self, key: str) -> Optional[Value]:
        """The module a dotted key names now (``gen``, ``self.nets.gen``), without reading it."""
        parts = key.split(".")
        v = self.env.get(parts[0])
        for i in range(1, len(parts)):
            if v is None:
                return None
            sub = ".".join(parts[:i + 1])
            if sub in self.env:
                v = self.env[sub]
            elif v.kind in (MODULE, INSTANCE):
                v = self.module_attribute(v, parts[i], sub)
            else:
                return None
        return v

    def manual_update(self, written: cst.BaseExpression, update: cst.CSTNode, node: Any) -> None:
        """An in-place write to a leaf that requires grad (or its ``.data``) computed from its own
        ``.grad`` (``w.data -= lr * w.grad``, ``p.add_(p.grad, alpha=-lr)``): a hand-written
        optimizer step, logged as 'manual_step' with the leaf."""
        key = dotted(written)
        if key is None or self.repeat:
            return
        if key.endswith(".data"):
            key = key[: -len(".data")]
        leaf = self.lookup(key)
        if leaf.kind == UNKNOWN and key not in self.env and key.startswith("self."):
            # an attribute of `self` that the method did not bind (`self.delta`, made in __init__)
            leaf = self.value_of(written.value if key != dotted(written) else written)  # type: ignore[attr-defined]
        if not (leaf.kind == TENSOR and leaf.rg is True and leaf.leaf is True):
            return
        if reads_grad_of(update, key) or reads_grad_through(update, key, self.enclosing_scope()):
            self.log("manual_step", key, node, leaf)

    def retains(self, call: Any) -> bool:
        """Does this backward()/autograd.grad call keep the graph? Anything but a literal False
        (or None: torch then follows create_graph, checked too) may keep it; a name is resolved
        where it is a parameter of the function walked at this call that the call gives a
        literal (``retain_graph=retain_graph`` in ``def backward(self, loss, retain_graph=False)``,
        called without it) and that the function does not rebind."""
        for name in ("retain_graph", "create_graph"):
            v = kwvalue(call, name)
            if v is None:
                continue
            lit = self.parameter_literal(v)
            if lit is not None:
                v = cst.Name(lit)
            if type(v) is cst.Name and v.value in ("False", "None"):
                continue
            return True
        return False

    def parameter_literal(self, node: Any) -> Optional[str]:
        """'True', 'False' or 'None' when ``node`` is a parameter of the function walked at this
        call that the call gives that literal (passed, or left at its default) and that the
        function does not rebind; else None."""
        if type(node) is not cst.Name or node.value in ("True", "False", "None") or not self.inline_literals:
            return None
        fn, literals = self.inline_literals[-1]
        lit = literals.get(node.value)
        if lit is None:
            return None
        rebound = self._rebound.get(id(fn))
        if rebound is None:
            rebound = self._rebound[id(fn)] = rebound_names(fn.body)
        return None if node.value in rebound else lit
    def enclosing_scope(self) -> Any:
        """The function whose body is being walked, or the linted module at its top level (None
        at another module's top level)."""
        if self.function_stack:
            return self.function_stack[-1]
        return self.root_module if self.scope.src is None else None

    def same_tensor(self, old: Value, new: Value) -> None:
        """``new`` is what the tensor of ``old`` holds after an in-place change of its flags
        (``x.requires_grad = True``): the same object, whose ``.grad`` stays."""
        if new is not old and old.kind == TENSOR and new.kind == TENSOR:
            self.first_value[new.id] = self.first_value.get(old.id, old.id)

    def first_id(self, value: Value) -> int:
        """The id of the first value of the tensor object that ``value`` is one state of."""
        return self.first_value.get(value.id, value.id)

    def add_saver(self, value: Value) -> None:
        """``value`` is the output of an op whose backward reads saved tensors (made here)."""
        self.savers.add(value.id)
        self.saver_deps[value.id] = value.deps
        self.saver_seq[value.id] = len(self.events)
        self.saver_stmt[value.id] = self.current_statement
        self.saver_chain[value.id] = (*self.call_statements, self.current_statement)

    def backward_on(self, node: Any, value: Value, key: Optional[str] = None, retain: bool = False,
                    inputs: Optional[Value] = None) -> None:
        """``inputs``: the tensors the gradients are asked for (``autograd.grad(loss, inputs)``,
        ``backward(inputs=...)``): the engine stops at them, so what they were computed from
        (their own graph) is neither run nor freed."""
        below: frozenset = frozenset()
        if inputs is not None:
            below = frozenset().union(*(i.deps for i in flatten(inputs) if i.kind == TENSOR))
        values = value.items if value.kind == TUPLE else (value,)
        if value.kind == UNKNOWN and value.items:
            # backward() on a name that holds one of these tensors or a number: a tensor (evidence)
            tensors = [i for i in value.items if i.kind == TENSOR]
            if tensors and len(tensors) == len(value.items):  # (no path left an unknown object)
                value = join_values(tensors)
                values = (value,)
                self.backwarded.update(t.id for t in tensors)
        if value.kind == UNKNOWN and key is not None and not self.expecting_error:
            # evidence: what backward() is called on (and returns) is a tensor with a graph
            value = Value(TENSOR, rg=True, leaf=False)
            values = (value,)
            self.bind_key(key, value)
        if key is not None:
            self.backwarded_keys.add(key)
            self.backwarded_in.add((self.walk_root(), key))
        self.log("backward", key, node, value)
        loop = self.loops[-1] if self.loops else None
        runs = []
        if retain:
            self.retaining.add(id(node))
        for v in values:
            self._emit("backward", (node, v))
            self.backwarded.update(ids_of(v))
            if v.kind == TENSOR:
                self.backwarded_deps |= v.deps
            # the nodes this backward runs (on every path: a join's must view, lattice.py)
            deps = must_deps(v)
            run = deps - below if below else deps
            if (loop is not None and not retain and not self.repeat and not self.expecting_error
                    and v.kind == TENSOR and any(d < loop.start_id and d in self.savers for d in run)
                    and not run & self.freed_ids()):
                # judged when the loop's walk ends (unless an earlier backward() freed the part:
                # then the first iteration fails already, a finding of its own)
                loop.before.append((node, v, key))
            runs.append(run)
        # the outputs of one call (`autograd.grad([a, b], x)`, `autograd.backward([l1, l2])`)
        # are back-propagated together, in one pass: what they share is freed after all of them
        for run in runs:
            if retain:
                for outer in self.loops:
                    outer.retained |= run
            else:
                for outer in self.loops:
                    outer.freed |= run
                new = {d for d in run if d in self.savers}
                for d in new:
                    if d not in self.freed_by:
                        self.freed_by[d] = (node, self.current_statement)
                        self.freed_chain[d] = (*self.call_statements, self.current_statement)
                if new:
                    freed = self.freed_ids() | new
                    self.env[FREED] = Value(TUPLE, items=tuple(sorted(freed)))  # type: ignore[arg-type]
