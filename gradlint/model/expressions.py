"""Expressions and the torch API: names, attributes, subscripts, arithmetic, and what each
differentiable operation makes of its operands (graph, leaf, views, saved tensors, cuts)."""

from __future__ import annotations

from typing import Any, List, Optional

import libcst as cst

from gradlint.model import containers, torchapi as api
from gradlint.model.dtypes import int_dtype, is_bool_comparison
from gradlint.model.guards import narrow, type_guards, widen
from gradlint.model.modes import enter_eval_scope, eval_branches, leave_eval_scope
from gradlint.model.names import dotted
from gradlint.model.syntax import BINOP_NAMES, basic_index
from gradlint.model.values import (
    NAMESPACE,
    CONST, CONST_VALUE, NONE_VALUE, FUNCTION, INSTANCE, MODULE, NDARRAY, PARAMS, SCALAR, TENSOR, TUPLE, UNKNOWN,
    UNKNOWN_VALUE, Cut, Value,
    element_of, flatten, plain_tensor, union,
)
from gradlint.model.lattice import deps_of, ids_of, join_branch_values, tensor_view


_CONST_NAMES = frozenset({"None", "True", "False"})
_CONST_NODES = (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.Ellipsis)


class ExpressionMixin:
    # ------------------------------------------------------------------ evaluation
    def _eval(self, node: cst.BaseExpression) -> Value:
        t = type(node)
        if t is cst.Name:
            if node.value in _CONST_NAMES:
                return NONE_VALUE if node.value == "None" else CONST_VALUE
            self.last_read[node.value] = len(self.events)
            self.last_read_tick[node.value] = self.tick
            self.frame_reads[(self.frames[-1], node.value)] = (len(self.events), self.tick)
            loop = self.own_loop()
            if loop is not None:
                if node.value in loop.outer and node.value not in loop.first_use:
                    loop.first_use[node.value] = self.current_statement
            v = self.env.get(node.value)
            if v is None:
                if self.scope_kind == "module":
                    return UNKNOWN_VALUE
                v = self.definitions.get(node.value)
                if v is None and node.value in self.classes:
                    v = self.later_class(node.value)  # a class defined further down the file
                return v if v is not None else UNKNOWN_VALUE
            self.reads[v.id] = self.reads.get(v.id, 0) + 1
            self.read_value(v)
            return v
        if t is cst.Attribute:
            return self._eval_attribute(node)
        if t is cst.Call:
            return self.shaped_call(node)
        if t is cst.BinaryOperation:
            operands = [self.value_of(node.left), self.value_of(node.right)]
            return self.shaped_binop(node, operands, self._combine(operands, node, BINOP_NAMES.get(type(node.operator))))
        if t is cst.UnaryOperation:
            v = self.value_of(node.expression)
            if type(node.operator) is cst.Not:
                return UNKNOWN_VALUE
            return self.shaped_binop(node, [v], self._combine([v], node))
        if t is cst.Subscript:
            return self._eval_subscript(node)
        if t in (cst.Tuple, cst.List):
            items = []
            for el in node.elements:
                v = self.value_of(el.value)
                items.append(UNKNOWN_VALUE if type(el) is cst.StarredElement else v)
            return Value(TUPLE, items=tuple(items), cuts=union(i.cuts for i in items))
        if t in (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp):
            return self._eval_comp(node)
        if t is cst.Dict:
            out = containers.make((), keys=())
            for el in node.elements:
                if type(el) is cst.DictElement:
                    self.value_of(el.key)
                    out = containers.store(out, containers.const_key(el.key), self.value_of(el.value))
                else:  # `**other`
                    out = containers.updated(out, self.value_of(el.value))
            return out
        if t is cst.Comparison:
            vals = [self.value_of(node.left)] + [self.value_of(c.comparator) for c in node.comparisons]
            if any(v.kind == TENSOR for v in vals):
                out = plain_tensor()
                out.dtype = "bool" if is_bool_comparison(node) else None  # `logits > 0`: a bool mask
                return out
            return UNKNOWN_VALUE
        if t is cst.IfExp:
            self.value_of(node.test)
            # `a if c else b`: either value, each seen with what the test proves in its branch
            # (guards.py). For tensors, the must and may views of the join (lattice.py); other
            # objects only when both are the same (`nn.Linear(...) if c else None` is no module
            # on every path)
            branches = []
            for branch, keys, evaluated in zip((node.body, node.orelse), type_guards(self, node.test),
                                               eval_branches(node.test)):
                saved = narrow(self, keys)
                modes = enter_eval_scope(self, evaluated)  # `h if self.training else ...` (modes.py)
                try:
                    branches.append(self.value_of(branch))
                finally:
                    leave_eval_scope(self, modes)
                    widen(self, saved)
            a, b = branches
            if a is b or (a.kind != TENSOR and b.kind != TENSOR):
                if a.kind == CONST == b.kind and type(a.node) is cst.Call and type(b.node) is cst.Call:
                    # `torch.inference_mode() if fast else torch.no_grad()`: a context object
                    # on either path (a `with` of it reads both: objects.py, walk.py)
                    v = Value(CONST)
                    v.alts = (a, b)
                    return v
                return a if a is b else UNKNOWN_VALUE
            v = join_branch_values([a, b])
            return v if v is not None else UNKNOWN_VALUE
        if t is cst.NamedExpr:
            v = self.value_of(node.value)
            self.bind_target(node.target, v)
            return v
        if t is cst.Await:
            self.value_of(node.expression)
            return UNKNOWN_VALUE
        if t is cst.BooleanOperation:
            self.value_of(node.left)
            self.value_of(node.right)
            return UNKNOWN_VALUE
        if t in (cst.Integer, cst.Float):
            return Value(SCALAR)
        if t in _CONST_NODES:
            return CONST_VALUE
        if t is cst.Lambda:
            return Value(FUNCTION, node=node)
        return UNKNOWN_VALUE

    def read_value(self, v: Value) -> Value:
        """Note that the object ``v`` was read now (by any name that holds it)."""
        if v is UNKNOWN_VALUE or v is CONST_VALUE or v is NONE_VALUE:
            return v  # shared by every unknown value: its reads say nothing
        self.value_reads[v.id] = (len(self.events), self.tick)
        if v.kind == UNKNOWN and v.items:
            for i in v.items:
                self.read_value(i)
        for a in v.alts:  # a join: each path's value is read
            self.read_value(a)
        if self.repeat and v.id in self.carried:
            self.carried_reads.add(v.id)  # read on the next iteration, after that iteration's steps
        return v

    def _eval_comp(self, node: Any) -> Value:
        """A comprehension: its element's value, evaluated in the comprehension's own scope
        (the walker later visits the same nodes and finds their values memoised)."""
        saved = self.snapshot()
        try:
            comp = node.for_in
            while comp is not None:
                it = self.value_of(comp.iter)
                self.bind_target(comp.target, self.row_of(it, comp.iter) or element_of(it))  # type: ignore[attr-defined]
                for cond in comp.ifs:
                    self.value_of(cond.test)
                comp = comp.inner_for_in
            if type(node) is cst.DictComp:
                self.value_of(node.key)
            v = self.value_of(node.value if type(node) is cst.DictComp else node.elt)
        finally:
            self.restore(saved)
        if type(node) is cst.DictComp:
            return containers.make((v,), keys=(None,))
        return Value(TUPLE, items=(v,), made="comp")

    def _subclass_attribute(self, key: str) -> Optional[Value]:
        """``self.tap`` in a method inherited from a base class, called on an object of a
        subclass that binds ``tap`` itself: the subclass's (looked up from the object's class
        through its bases), not the class that defines the method."""
        head, _, attr = key.partition(".")
        recv = self.env.get(head)
        if recv is None or recv.kind not in (MODULE, INSTANCE) or not isinstance(recv.node, str) \
                or "." in attr or not self.class_stack or recv.node == self.class_stack[-1].name.value:
            return None
        return self._class_attribute(recv.node, key)  # type: ignore[attr-defined]

    def _eval_attribute(self, node: cst.Attribute) -> Value:
        key = dotted(node)
        if key is not None:
            self.last_read[key] = len(self.events)
            self.last_read_tick[key] = self.tick
            self.frame_reads[(self.frames[-1], key)] = (len(self.events), self.tick)
            head, _, rest = key.partition(".")
            obj = self.env.get(head)
            if obj is not None and obj.kind == INSTANCE:
                # `self.best` read in any method walked with this very object (a callback's)
                self.object_reads[(obj.id, rest)] = (len(self.events), self.tick)
            if key in self.env:
                if self.loops:  # `self.hidden` read in a loop body, as for a name
                    loop = self.own_loop()
                    if loop is not None and key in loop.outer and key not in loop.first_use:
                        loop.first_use[key] = self.current_statement
                return self.read_value(self.env[key])
            if self.class_attrs and key in self.class_attrs[-1]:
                return self._subclass_attribute(key) or self.class_attrs[-1][key]
        base = self.value_of(node.value)
        if base.kind == NAMESPACE:
            return self.namespace_attribute(base, node.attr.value)
        if base.kind == INSTANCE and base.keys is not None and node.attr.value in base.keys:
            return containers.read(base, node.attr.value)  # a field of a dataclass or NamedTuple
        if base.kind in (MODULE, INSTANCE):
            v = self.module_attribute(base, node.attr.value, key)
            return v if v is not None else UNKNOWN_VALUE
        if base.kind == TUPLE and base.made == "indices" and node.attr.value in ("values", "indices"):
            return base.items[node.attr.value == "indices"]  # `x.max(1).indices` (dtypes.py)
        if base.kind != TENSOR:
            return UNKNOWN_VALUE
        attr = node.attr.value
        if attr == "data":
            return plain_tensor(cuts=base.cuts, src=base if base.rg else base.src,
                                alias_of=base, alias_kind="data")
        if attr == "grad":
            self.used_as_leaf.update(ids_of(base))
            self._emit("grad_read", (node, base))
            return Value(TENSOR, rg=False, leaf=True, alias_of=base, alias_kind="grad")
        if attr in api.TENSOR_ATTRS_VIEW:
            return self._derived(base, [], node, view=True)
        return UNKNOWN_VALUE

    def _eval_subscript(self, node: cst.Subscript) -> Value:
        key = dotted(node)
        if key is not None and key in self.env:
            self.last_read[key] = len(self.events)
            self.last_read_tick[key] = self.tick
            self.frame_reads[(self.frames[-1], key)] = (len(self.events), self.tick)
            return self.read_value(self.env[key])
        base = self.value_of(node.value)
        for el in node.slice:
            if type(el.slice) is cst.Index:
                self.value_of(el.slice.value)
        if base.kind == TENSOR:
            out = self._derived(base, [], node, view=basic_index(node, self.counter_names()))
            out.dtype = int_dtype(base)  # indexing keeps an integer dtype
            return out
        if int_dtype(base) is not None:
            return Value(UNKNOWN, dtype=base.dtype)  # `x.argmax(1)[0]`
        if base.kind == NDARRAY:
            return Value(NDARRAY, src=base.src, cuts=base.cuts)
        if len(node.slice) != 1 or type(node.slice[0].slice) is not cst.Index:
            if base.kind == TUPLE and base.keys is None and not base.params and base.items:
                return containers.make(base.items, made="joined")  # `xs[1:]`: some of the elements
            return UNKNOWN_VALUE
        if base.kind == MODULE and base.items:
            return containers.module_read(base, containers.subscript_key(node))  # `self.layers[i]`
        if base.kind == TUPLE:
            return containers.read(base, containers.subscript_key(node))  # `xs[0]`, `d["loss"]`, `xs[i]`
        if base.kind == INSTANCE and base.made == containers.NAMED_TUPLE:
            return containers.read(containers.make(base.items), containers.subscript_key(node))
        return UNKNOWN_VALUE

    def _combine(self, operands: List[Value], node: Any, op: Optional[str] = None) -> Value:
        """An arithmetic operation over ``operands``."""
        # `total = 0.0; for ...: total += loss`, then `total / n`: the tensors the loop left
        operands = [tensor_view(o) for o in operands]
        tensors = [o for o in operands if o.kind == TENSOR]
        if tensors:
            if op is not None and len(operands) == 2 and operands[0] is not tensors[0]:
                op = "r" + op  # scalar * tensor: operand order matters only for the save check
            out = self._derived(tensors[0], operands[1:] if operands[0] is tensors[0] else operands, node,
                                op=op, taint=any(o.kind == UNKNOWN for o in operands))
            if (
                len(tensors) == 1 and tensors[0].fresh and tensors[0].leaf_requiring_grad and out.rg is True
                and op in ("mul", "rmul", "div") and all(o.kind in (TENSOR, SCALAR) for o in operands)
                and type(node) is cst.BinaryOperation
                and self._conversion_site(node.left if operands[0] is tensors[0] else node.right)
            ):
                out.made, out.made_node = "conv", node  # torch.randn(..., requires_grad=True) * 0.01
            return out
        if op == "add" and len(operands) == 2 and all(o.kind in (TUPLE, PARAMS) for o in operands):
            # list(model.parameters()) + [model.scale]: one list of both
            return Value(TUPLE, items=tuple(i for o in operands for i in (o.items if o.kind == TUPLE else (o,))))
        arrays = [o for o in operands if o.kind == NDARRAY]
        if arrays:
            return Value(NDARRAY, src=arrays[0].src, cuts=union(o.cuts for o in operands))
        scalars = [o for o in operands if o.kind == SCALAR]
        if scalars and len(scalars) == len(operands):
            src = next((s.src for s in scalars if s.src is not None), None)
            return Value(SCALAR, src=src, cuts=union(o.cuts for o in operands))
        return UNKNOWN_VALUE

    def _derived(self, base: Value, others: List[Value], node: Any, view: bool = False,
                 op: Optional[str] = None, taint: bool = False) -> Value:
        """A differentiable function of ``base`` and ``others`` (tensors or not); ``op`` names
        the operation when it matters for what autograd saves. ``taint``: an operand the model
        does not know may be a tensor that requires grad (unknown never turns into "no graph")."""
        out = self._derived_value(base, others, node, view, taint)
        if view and base.kind == TENSOR:
            self.view_base[out.id] = self.view_base.get(base.id, base)
            self.view_part(base, out)
            self.custom_view_part(base, out)
        # made under inference_mode, or a view of an inference tensor: an inference tensor
        out.inference = base.inference if view else self.inference
        if op is not None and out.rg is True:
            self._record_saves(op, out, base, others, node)
        if op == "flatten" and out.rg is True and base.kind == TENSOR and base.leaf is not False:
            out.leaf = None  # flattening nothing (a 2-D input, Flatten's default dims) returns the leaf itself
        for o in others:
            if o.kind == SCALAR and o.src is not None:
                # a number taken out of a graph tensor, folded back in as a constant
                out.cuts = out.cuts | {Cut(node, "scalar", o.src, self.current_statement)}
        # (the tensors of a list operand too: `torch.stack([a.argmax(0), b.argmax(0)])`)
        operands = [t for o in [base] + others for t in (flatten(o) if o.kind == TUPLE and not o.params else (o,))]
        if out.rg is False and (self.grad_enabled is False or any(
                o.kind == TENSOR and (o.rg or o.src is not None or o.made == "computed")
                for o in operands)):
            out.made = "computed"  # no graph recorded, though it was computed from graph values
            # where the graph was lost: an operand's own loss point, or here
            out.made_node = next((o.made_node for o in operands if o.kind == TENSOR
                                  and (o.made == "computed" or o.src is not None) and o.made_node is not None),
                                 self.grad_lost_site())
        return out

    def _record_saves(self, op: str, out: Value, base: Value, others: List[Value], node: Any) -> None:
        before = {k: len(v) for k, v in self.saved.items()}
        self._record_saves_by_op(op, out, base, others)
        for v in [base] + others:
            if v.kind == TENSOR and v.inference and len(self.saved.get(v.id, ())) > before.get(v.id, 0):
                self._emit("inference_saved", (node, v))

    def _record_saves_by_op(self, op: str, out: Value, base: Value, others: List[Value]) -> None:
        self.add_saver(out)
        if op in api.SAVES_OUTPUT:
            self.record_saved(out, out.id, f"the output of `{op}`")
        elif op in api.SAVES_OTHER or op == "div":
            tensors = [base] + [o for o in others if o.kind == TENSOR]
            if len(tensors) == 2 and len(others) == 1:
                a, b = tensors
                if b.rg is True:
                    self.record_saved(a, out.id, f"an input of `{op}`")
                if a.rg is True and op != "div":
                    self.record_saved(b, out.id, f"an input of `{op}`")
        elif op in api.SAVES_SELF:
            if base.rg is True:
                self.record_saved(base, out.id, f"an input of `{op}`")

    def _derived_value(self, base: Value, others: List[Value], node: Any, view: bool = False,
                       taint: bool = False) -> Value:
        operands = [base] + [o for o in others if o.kind in (TENSOR, TUPLE)]
        flat: List[Value] = []
        for o in operands:
            if o.kind == TUPLE:
                flat.extend(i for i in o.items if i.kind == TENSOR)
                if any(i.kind == UNKNOWN for i in o.items):
                    flat.append(UNKNOWN_VALUE)
            else:
                flat.append(o)
        cuts = union([o.cuts for o in operands] + [o.cuts for o in others])
        rgs = [o.rg if o.kind == TENSOR else None for o in flat]
        grad = self.grad_enabled
        if any(r is True for r in rgs):
            if grad is True:
                rg_inputs = [o for o in flat if o.kind == TENSOR and o.rg]
                out = Value(
                    TENSOR, rg=True, leaf=False,
                    probable=all(o.probable for o in rg_inputs),
                    view_of_leaf=view and base.leaf_requiring_grad,
                    **deps_of(rg_inputs),
                    cuts=cuts,
                )
                if len(rg_inputs) == 1 and not taint and all(r is not None for r in rgs):
                    # its graph comes through that input only (guards.no_graph_through)
                    self.sole_source[out.id] = rg_inputs[0].id
                if self.grad_assumed:
                    # made in the caller's grad mode, whatever it is (guards.made_with_grad_off)
                    self.assumed_made[out.id] = self.frames[-1] if self.frames else 0
                return out
            if grad is False:
                return plain_tensor(cuts=cuts)
            return Value(TENSOR, rg=None, leaf=None, cuts=cuts)
        if all(r is False for r in rgs) and not taint:
            # nothing requires grad: the result is a new plain tensor (a view keeps src)
            src = base.src if view else None
            return plain_tensor(cuts=cuts, src=src)
        return Value(TENSOR, rg=None, leaf=None, cuts=cuts)

    def _conversion_site(self, receiver: cst.BaseExpression) -> bool:
        """Is a conversion of ``receiver`` part of creating the tensor: chained on the factory
        call itself, or rebinding the same name (``w = w.cuda()``)?"""
        if type(receiver) is cst.Call:
            return True
        key = dotted(receiver)
        stmt = self.current_statement
        if key is None or not type(stmt) is cst.SimpleStatementLine or len(stmt.body) != 1:
            return False
        small = stmt.body[0]
        if type(small) is cst.Assign and len(small.targets) == 1:
            return dotted(small.targets[0].target) == key
        return False
