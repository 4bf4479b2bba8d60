"""The model: what each name holds at each statement, and the grad mode.

It is flow-sensitive within a function (and at module level): statements are executed in order;
``if``/``try`` branches are joined (a name keeps its value only when all branches agree); a loop
body is executed once from the state before the loop (what holds on the first iteration), and
after the loop the state is the join of "zero iterations" and "after the body". Function bodies
start from an empty state (a parameter is unknown) with grad mode on, unless decorated.

Rules query it through ``value_of(expr)``, ``grad_enabled``, ``qualname(expr)`` and the events
it emits (``on_backward``). Only ``gradlint.model.walk`` drives it.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Tuple

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.names import ImportMap, canonical, dotted
from gradlint.model.values import (
    CLASS, FUNCTION, MODULE, NAMED_PARAMS, NDARRAY, OPTIMIZER, PARAMS, SCALAR, TENSOR, TUPLE,
    UNKNOWN, UNKNOWN_VALUE, Cut, Value, leaf_rg, next_id, plain_tensor,
)


class Loop:
    """A loop being walked: the names bound before it, and where its values start."""

    __slots__ = ("node", "outer", "start_id", "first_use", "freed", "products")

    def __init__(self, node: Any, outer: set, start_id: int) -> None:
        self.node = node
        self.outer = outer  # keys bound before the loop (the loop variable excluded)
        self.start_id = start_id  # values with a smaller id were made before the loop
        # outer name -> the statement that first reads it in the body, or None when the body
        # rebinds it before any read
        self.first_use: Dict[str, Any] = {}
        # ids of graph values that a backward() in the body frees (without retain_graph)
        self.freed: set = set()
        # statement -> ids of the values it bound (to see whether a first use feeds a backward)
        self.products: Dict[int, set] = {}


class Event:
    """One training-step call, in walk order: kind is 'backward', 'step', 'zero_grad',
    'zero_grad_keep' (set_to_none=False, p.grad.zero_()); ``key`` names the receiver."""

    __slots__ = ("seq", "kind", "key", "node", "loops", "statement", "function")

    def __init__(self, seq: int, kind: str, key: Optional[str], node: Any, loops: Tuple[Any, ...],
                 statement: Any, function: Any) -> None:
        self.seq, self.kind, self.key, self.node = seq, kind, key, node
        self.loops, self.statement, self.function = loops, statement, function

Env = Dict[str, Value]
FREED = "<freed>"  # env key: the graphs freed on this path (a Value whose items are ids)


def _const_bool(node: Optional[cst.BaseExpression]) -> Optional[bool]:
    if isinstance(node, cst.Name):
        if node.value == "True":
            return True
        if node.value == "False":
            return False
    return None


def _kwarg(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a
    return None


def _positional(call: cst.Call) -> List[cst.BaseExpression]:
    return [a.value for a in call.args if a.keyword is None and not a.star]


def _union(sets) -> frozenset:
    out: frozenset = frozenset()
    for s in sets:
        if s:
            out = out | s if out else s
    return out


class Model:
    def __init__(self, emit: Callable[[str, Tuple[Any, ...]], None]) -> None:
        self.imports = ImportMap()
        self.env: Env = {}
        self.grad_enabled: Optional[bool] = True
        # True while grad mode is on only by assumption (a function body without decorators or
        # an explicit context): its callers decide
        self.grad_assumed = False
        # callee name -> [(enclosing function name or None, "off" | "assumed" | "on")]
        self.calls: Dict[str, List[Tuple[Optional[str], str]]] = {}
        self.current_statement: Any = None
        self.scope_kind: str = "module"  # module | function | class
        self.class_stack: List[cst.ClassDef] = []
        self.function_stack: List[cst.FunctionDef] = []
        self.loop_depth = 0
        self.module_classes: Dict[str, Value] = {}
        # ids of values that something called backward()/autograd.grad() on
        self.backwarded: set = set()
        # ids of tensors whose .grad was read, or that were handed to code the model does not
        # know (an optimizer, a helper function): their use as a leaf may be intended
        self.used_as_leaf: set = set()
        # value id -> [(id of the value whose backward needs it, what saved it)]
        self.saved: Dict[int, List[Tuple[int, str]]] = {}
        # per enclosing class: "self.<attr>" -> the module/method value assigned in the class
        self.class_attrs: List[Dict[str, Value]] = []
        # per enclosing function: the values it returns
        self.returns: List[List[Value]] = []
        # module-level functions and classes, visible from function bodies
        self.definitions: Dict[str, Value] = {}
        # value id -> how many times a name holding it was read; name or dotted key -> the
        # number of training events (see Event) logged before its last read
        self.reads: Dict[int, int] = {}
        self.last_read: Dict[str, int] = {}
        # ids of tensors on which retain_grad() was called
        self.retained: set = set()
        self._inlining = False
        self.loops: List[Loop] = []
        # backward/step/zero_grad calls in walk order (see Event)
        self.events: List[Event] = []
        # ids of op outputs whose backward reads saved tensors; ids of graph values that a
        # backward() without retain_graph has freed
        self.savers: set = set()
        # keys (names) on which backward() was called
        self.backwarded_keys: set = set()
        # inside torch.inference_mode() (grad_enabled is False there too)
        self.inference = False
        # inside `with pytest.raises(...)` / `self.assertRaises(...)`: errors are expected there
        self.expecting_error = False
        self.freed_stack: List[Any] = []
        # ids of tensors a custom Function's forward marked dirty (ctx.mark_dirty)
        self.dirty: set = set()
        self._memo: Dict[int, Value] = {}
        self._emit = emit
        self._dotted_keys = 0

    # ------------------------------------------------------------------ queries for rules
    def qualname(self, node: cst.BaseExpression) -> Optional[str]:
        return canonical(self.imports.qualname(node))

    def value_of(self, node: cst.BaseExpression) -> Value:
        v = self._memo.get(id(node))
        if v is None:
            v = self._eval(node)
            self._memo[id(node)] = v
        return v

    def lookup(self, key: str) -> Value:
        return self.env.get(key, UNKNOWN_VALUE)

    # ------------------------------------------------------------------ environment
    def bind_key(self, key: str, value: Value) -> None:
        env = self.env
        if self._dotted_keys:
            stale = [k for k in env if k.startswith(key) and k[len(key):len(key) + 1] in (".", "[")]
            for k in stale:
                del env[k]
                self._dotted_keys -= 1
        if ("." in key or "[" in key) and key not in env:
            self._dotted_keys += 1
        env[key] = value
        if self.loops:
            self.loops[-1].products.setdefault(id(self.current_statement), set()).add(value.id)
        if self.loops and key in self.loops[-1].outer:
            first = self.loops[-1].first_use
            if key not in first:
                first[key] = None  # rebound before any read
            elif first[key] is self.current_statement and not (value.kind == TENSOR and value.rg is True):
                first[key] = None  # `hidden = hidden.detach()`: the read only cut the graph
        if self.scope_kind == "module" and "." not in key:
            if value.kind in (FUNCTION, CLASS):
                self.definitions[key] = value
            else:
                self.definitions.pop(key, None)
        if (
            value.kind == MODULE
            and self.class_attrs
            and key.startswith("self.")
            and self.function_stack
            and self.function_stack[-1].name.value == "__init__"
        ):
            self.class_attrs[-1][key] = value  # a submodule: the same object in every method

    def unbind(self, key: str) -> None:
        if key in self.env:
            if "." in key or "[" in key:
                self._dotted_keys -= 1
            del self.env[key]

    def snapshot(self) -> Env:
        return dict(self.env)

    def restore(self, env: Env) -> None:
        self.env = env
        self._dotted_keys = sum(1 for k in env if "." in k or "[" in k)

    @staticmethod
    def join(envs: List[Env]) -> Env:
        if not envs:
            return {}
        if len(envs) == 1:
            return envs[0]
        first, rest = envs[0], envs[1:]
        out: Env = {}
        for k, v in first.items():
            if all(e.get(k) is v for e in rest):
                out[k] = v
        # graphs freed by backward() on every path stay freed
        freed = [e.get(FREED) for e in envs]
        if all(f is not None for f in freed):
            common = set(freed[0].items)  # type: ignore[union-attr]
            for f in freed[1:]:
                common &= set(f.items)  # type: ignore[union-attr]
            out[FREED] = Value(TUPLE, items=tuple(sorted(common)))  # type: ignore[arg-type]
        return out

    def freed_ids(self) -> set:
        """Ids of graph values whose saved tensors a backward() on this path has freed."""
        f = self.env.get(FREED)
        return set(f.items) if f is not None else set()  # type: ignore[arg-type]

    # ------------------------------------------------------------------ binding targets
    def bind_target(self, target: cst.BaseExpression, value: Value) -> None:
        if isinstance(target, cst.Name):
            self.imports.forget(target.value)
            self.bind_key(target.value, value)
        elif isinstance(target, cst.Attribute):
            key = dotted(target)
            if key is not None:
                self.bind_key(key, value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            starred = any(isinstance(e, cst.StarredElement) for e in elements)
            items = value.items if value.kind == TUPLE else ()
            if value.kind == TENSOR and value.rg is True and value.probable and not starred:
                # `out, hidden = rnn(x, hidden)`: the parts of a module's output carry its graph
                items = tuple(Value(TENSOR, rg=True, leaf=False, probable=True, deps=value.deps,
                                    cuts=value.cuts) for _ in elements)
            for i, el in enumerate(elements):
                if isinstance(el, cst.StarredElement):
                    self.bind_target(el.value, UNKNOWN_VALUE)
                elif not starred and len(items) == len(elements):
                    self.bind_target(el.value, items[i])
                else:
                    self.bind_target(el.value, UNKNOWN_VALUE)
        elif isinstance(target, cst.Subscript):
            # x[i] = v: an in-place write into x
            base = target.value
            bv = self.value_of(base)
            if bv.kind in (TENSOR, NDARRAY):
                self.inplace(self.current_statement, bv, "item assignment")
                self._inplace_effect(base, [value])
            else:
                key = dotted(target)  # d["loss"] = v: a container slot with a constant index
                if key is not None:
                    self.bind_key(key, value)
        elif isinstance(target, cst.StarredElement):
            self.bind_target(target.value, UNKNOWN_VALUE)

    def forget_target(self, target: cst.BaseExpression) -> None:
        if isinstance(target, (cst.Name, cst.Attribute)):
            key = dotted(target)
            if key is not None:
                self.unbind(key)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self.forget_target(el.value)

    def _inplace_effect(self, receiver: cst.BaseExpression, operands: List[Value]) -> Optional[Value]:
        """The receiver was written in place with ``operands``: it now requires grad if any
        operand does (a plain buffer that receives graph values becomes part of the graph)."""
        key = dotted(receiver)
        if key is None:
            return None
        cur = self.env.get(key)
        if cur is None or cur.kind != TENSOR:
            return None
        grad = self.grad_enabled
        gets_graph = any(o.kind == TENSOR and o.rg for o in operands)
        if cur.rg is True or not gets_graph or grad is False:
            new_cuts = _union([cur.cuts] + [o.cuts for o in operands])
            if new_cuts == cur.cuts:
                return cur
            new = Value(TENSOR, rg=cur.rg, leaf=cur.leaf, probable=cur.probable,
                        view_of_leaf=cur.view_of_leaf, deps=cur.deps, cuts=new_cuts, src=cur.src)
        elif grad is None:
            new = Value(TENSOR, rg=None, leaf=None)
        else:
            new = Value(
                TENSOR, rg=True, leaf=False,
                probable=all(o.probable for o in operands if o.kind == TENSOR and o.rg),
                deps=_union([cur.deps] + [o.deps for o in operands if o.kind == TENSOR and o.rg]),
                cuts=_union([cur.cuts] + [o.cuts for o in operands]),
            )
        self.bind_key(key, new)
        return new

    # ------------------------------------------------------------------ statements
    def exec_assign(self, node: cst.Assign) -> None:
        value = self.value_of(node.value)
        for t in node.targets:
            target = t.target
            if (
                isinstance(target, cst.Attribute)
                and target.attr.value == "requires_grad"
            ):
                self._set_requires_grad(target.value, node.value, node)
                continue
            if isinstance(target, cst.Attribute) and target.attr.value == "grad":
                if isinstance(node.value, cst.Name) and node.value.value == "None":
                    self.log("zero_grad", dotted(target), node)  # p.grad = None
                continue
            self.bind_target(target, value)

    def exec_ann_assign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self.bind_target(node.target, self.value_of(node.value))

    def exec_aug_assign(self, node: cst.AugAssign) -> None:
        target = node.target
        operand = self.value_of(node.value)
        op = f"`{_AUG_NAMES.get(type(node.operator), 'augmented assignment')}`"
        if isinstance(target, cst.Subscript):
            base = self.value_of(target.value)
            if base.kind in (TENSOR, NDARRAY):
                self.inplace(node, base, op)
            self._inplace_effect(target.value, [operand])
            return
        cur = self.value_of(target)
        if cur.kind in (TENSOR, NDARRAY) and not isinstance(node.operator, cst.MatrixMultiplyAssign):
            self.inplace(node, cur, op)
        if cur.kind == TENSOR:
            if self._inplace_effect(target, [operand]) is None:
                self.bind_target(target, self._combine([cur, operand], node))
        else:
            self.bind_target(target, self._combine([cur, operand], node))

    def exec_expr(self, node: cst.Expr) -> None:
        self.value_of(node.value)

    def exec_del(self, node: cst.Del) -> None:
        self.forget_target(node.target)

    def exec_import(self, node: cst.Import) -> None:
        self.imports.add_import(node)
        for alias in node.names:
            local = alias.evaluated_alias or alias.evaluated_name.split(".", 1)[0]
            self.unbind(local)

    def exec_import_from(self, node: cst.ImportFrom) -> None:
        self.imports.add_import_from(node)
        if not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                self.unbind(alias.evaluated_alias or alias.evaluated_name)

    def _set_requires_grad(self, receiver: cst.BaseExpression, flag_node: cst.BaseExpression, stmt: Any) -> None:
        """``x.requires_grad = flag``."""
        key = dotted(receiver)
        if key is None:
            return
        cur = self.value_of(receiver)
        flag = _const_bool(flag_node)
        new = self._requires_grad(cur, flag, stmt)
        if new is not None:
            self.bind_key(key, new)

    def _requires_grad(self, cur: Value, flag: Optional[bool], node: Any) -> Optional[Value]:
        """The value of ``cur`` after ``requires_grad_(flag)`` / ``.requires_grad = flag``."""
        if cur.kind == UNKNOWN:
            if flag is True:
                return Value(TENSOR, rg=True, leaf=None)
            return Value(TENSOR, rg=None if flag is None else False, leaf=None)
        if cur.kind != TENSOR:
            return None
        if cur.leaf is False:
            return cur  # a non-leaf: a no-op (requires_grad_) or a RuntimeError (setter)
        if flag is None:
            return Value(TENSOR, rg=None, leaf=cur.leaf, cuts=cur.cuts)
        if flag is False:
            return Value(TENSOR, rg=False, leaf=cur.leaf, cuts=cur.cuts, src=cur.src)
        if cur.leaf is None:
            return Value(TENSOR, rg=True, leaf=None, cuts=cur.cuts)
        if cur.src is not None and cur.rg is False:
            v = self._cut_leaf(Cut(node, "detach_rg", cur.src, self.current_statement), cur.cuts)
            v.made, v.made_node = "rewrap", node
            return v
        if cur.rg is False and (cur.made == "computed" or cur.cuts):
            return leaf_rg(cuts=cur.cuts, made="rewrap", made_node=node)
        return leaf_rg(cuts=cur.cuts)

    @staticmethod
    def _cut_leaf(cut: Cut, cuts: frozenset) -> Value:
        v = leaf_rg(cuts=cuts | {cut})
        cut.result = v
        return v

    def _escape(self, values: List[Value]) -> None:
        for v in values:
            if v.kind == TENSOR:
                self.used_as_leaf.add(v.id)
            elif v.kind == TUPLE:
                self._escape(list(v.items))

    # ------------------------------------------------------------------ evaluation
    def _eval(self, node: cst.BaseExpression) -> Value:
        t = type(node)
        if t is cst.Name:
            self.last_read[node.value] = len(self.events)
            if self.loops:
                loop = self.loops[-1]
                if node.value in loop.outer and node.value not in loop.first_use:
                    loop.first_use[node.value] = self.current_statement
            v = self.env.get(node.value)
            if v is None:
                return self.definitions.get(node.value, UNKNOWN_VALUE) if self.scope_kind != "module" else UNKNOWN_VALUE
            self.reads[v.id] = self.reads.get(v.id, 0) + 1
            return v
        if t is cst.Attribute:
            return self._eval_attribute(node)
        if t is cst.Call:
            return self._eval_call(node)
        if t is cst.BinaryOperation:
            return self._combine([self.value_of(node.left), self.value_of(node.right)], node,
                                 _BINOP_NAMES.get(type(node.operator)))
        if t is cst.UnaryOperation:
            v = self.value_of(node.expression)
            if isinstance(node.operator, cst.Not):
                return UNKNOWN_VALUE
            return self._combine([v], node)
        if t is cst.Subscript:
            return self._eval_subscript(node)
        if t in (cst.Tuple, cst.List):
            items = []
            for el in node.elements:
                v = self.value_of(el.value)
                items.append(UNKNOWN_VALUE if isinstance(el, cst.StarredElement) else v)
            return Value(TUPLE, items=tuple(items), cuts=_union(i.cuts for i in items))
        if t in (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp):
            return self._eval_comp(node)
        if t is cst.Dict:
            items = []
            for el in node.elements:
                if isinstance(el, cst.DictElement):
                    self.value_of(el.key)
                    items.append(self.value_of(el.value))
                else:
                    items.append(UNKNOWN_VALUE)
            return Value(TUPLE, items=tuple(items), cuts=_union(i.cuts for i in items))
        if t is cst.Comparison:
            vals = [self.value_of(node.left)] + [self.value_of(c.comparator) for c in node.comparisons]
            if any(v.kind == TENSOR for v in vals):
                return plain_tensor()
            return UNKNOWN_VALUE
        if t is cst.IfExp:
            self.value_of(node.test)
            a, b = self.value_of(node.body), self.value_of(node.orelse)
            return a if a is b else UNKNOWN_VALUE
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
        return UNKNOWN_VALUE

    def _eval_comp(self, node: Any) -> Value:
        """A comprehension: its element's value, evaluated in the comprehension's own scope
        (the walker later visits the same nodes and finds their values memoised)."""
        saved = self.snapshot()
        try:
            comp = node.for_in
            while comp is not None:
                self.bind_target(comp.target, element_of(self.value_of(comp.iter)))
                for cond in comp.ifs:
                    self.value_of(cond.test)
                comp = comp.inner_for_in
            if isinstance(node, cst.DictComp):
                self.value_of(node.key)
            v = self.value_of(node.value if isinstance(node, cst.DictComp) else node.elt)
        finally:
            self.restore(saved)
        return Value(TUPLE, items=(v,))

    def _eval_attribute(self, node: cst.Attribute) -> Value:
        key = dotted(node)
        if key is not None:
            self.last_read[key] = len(self.events)
            if key in self.env:
                return self.env[key]
            if self.class_attrs and key in self.class_attrs[-1]:
                return self.class_attrs[-1][key]
        base = self.value_of(node.value)
        if base.kind != TENSOR:
            return UNKNOWN_VALUE
        attr = node.attr.value
        if attr == "data":
            return plain_tensor(cuts=base.cuts, src=base if base.rg else base.src,
                                alias_of=base, alias_kind="data")
        if attr == "grad":
            self.used_as_leaf.add(base.id)
            self._emit("grad_read", (node, base))
            return Value(TENSOR, rg=False, leaf=True, alias_of=base, alias_kind="grad")
        if attr in api.TENSOR_ATTRS_VIEW:
            return self._derived(base, [], node, view=True)
        return UNKNOWN_VALUE

    def _eval_subscript(self, node: cst.Subscript) -> Value:
        key = dotted(node)
        if key is not None and key in self.env:
            self.last_read[key] = len(self.events)
            return self.env[key]
        base = self.value_of(node.value)
        for el in node.slice:
            if isinstance(el.slice, cst.Index):
                self.value_of(el.slice.value)
        if base.kind == TENSOR:
            return self._derived(base, [], node, view=_basic_index(node))
        if base.kind == NDARRAY:
            return Value(NDARRAY, src=base.src, cuts=base.cuts)
        if base.kind == TUPLE and len(node.slice) == 1:
            idx = node.slice[0].slice
            if isinstance(idx, cst.Index) and isinstance(idx.value, cst.Integer):
                i = int(idx.value.value, 0)
                if -len(base.items) <= i < len(base.items):
                    return base.items[i]
        return UNKNOWN_VALUE

    def _combine(self, operands: List[Value], node: Any, op: Optional[str] = None) -> Value:
        """An arithmetic operation over ``operands``."""
        tensors = [o for o in operands if o.kind == TENSOR]
        if tensors:
            if op is not None and len(operands) == 2 and operands[0] is not tensors[0]:
                op = "r" + op  # scalar * tensor: operand order matters only for the save check
            out = self._derived(tensors[0], operands[1:] if operands[0] is tensors[0] else operands, node,
                                op=op)
            if (
                len(tensors) == 1 and tensors[0].fresh and tensors[0].leaf_requiring_grad and out.rg is True
                and op in ("mul", "rmul", "div") and all(o.kind in (TENSOR, SCALAR) for o in operands)
                and isinstance(node, cst.BinaryOperation)
                and self._conversion_site(node.left if operands[0] is tensors[0] else node.right)
            ):
                out.made, out.made_node = "conv", node  # torch.randn(..., requires_grad=True) * 0.01
            return out
        arrays = [o for o in operands if o.kind == NDARRAY]
        if arrays:
            return Value(NDARRAY, src=arrays[0].src, cuts=_union(o.cuts for o in operands))
        scalars = [o for o in operands if o.kind == SCALAR]
        if scalars and len(scalars) == len(operands):
            src = next((s.src for s in scalars if s.src is not None), None)
            return Value(SCALAR, src=src, cuts=_union(o.cuts for o in operands))
        return UNKNOWN_VALUE

    def _derived(self, base: Value, others: List[Value], node: Any, view: bool = False,
                 op: Optional[str] = None) -> Value:
        """A differentiable function of ``base`` and ``others`` (tensors or not); ``op`` names
        the operation when it matters for what autograd saves."""
        out = self._derived_value(base, others, node, view)
        if op is not None and out.rg is True:
            self._record_saves(op, out, base, others, node)
        for o in others:
            if o.kind == SCALAR and o.src is not None:
                # a number taken out of a graph tensor, folded back in as a constant
                out.cuts = out.cuts | {Cut(node, "scalar", o.src, self.current_statement)}
        if out.rg is False and (self.grad_enabled is False or any(
                o.kind == TENSOR and (o.rg or o.src is not None or o.made == "computed")
                for o in [base] + others)):
            out.made = "computed"  # no graph recorded, though it was computed from graph values
        return out

    def _record_saves(self, op: str, out: Value, base: Value, others: List[Value], node: Any) -> None:
        before = {k: len(v) for k, v in self.saved.items()}
        self._record_saves_of(op, out, base, others)
        for v in [base] + others:
            if v.kind == TENSOR and v.made == "inference" and len(self.saved.get(v.id, ())) > before.get(v.id, 0):
                self._emit("inference_saved", (node, v))

    def _record_saves_of(self, op: str, out: Value, base: Value, others: List[Value]) -> None:
        saved = self.saved
        self.savers.add(out.id)
        if op in api.SAVES_OUTPUT:
            saved.setdefault(out.id, []).append((out.id, f"the output of `{op}`"))
        elif op in api.SAVES_OTHER or op == "div":
            tensors = [base] + [o for o in others if o.kind == TENSOR]
            if len(tensors) == 2 and len(others) == 1:
                a, b = tensors
                if b.rg is True:
                    saved.setdefault(a.id, []).append((out.id, f"an input of `{op}`"))
                if a.rg is True and op != "div":
                    saved.setdefault(b.id, []).append((out.id, f"an input of `{op}`"))
        elif op in api.SAVES_SELF:
            if base.rg is True:
                saved.setdefault(base.id, []).append((out.id, f"an input of `{op}`"))

    def _derived_value(self, base: Value, others: List[Value], node: Any, view: bool = False) -> Value:
        operands = [base] + [o for o in others if o.kind in (TENSOR, TUPLE)]
        flat: List[Value] = []
        for o in operands:
            if o.kind == TUPLE:
                flat.extend(i for i in o.items if i.kind == TENSOR)
                if any(i.kind == UNKNOWN for i in o.items):
                    flat.append(UNKNOWN_VALUE)
            else:
                flat.append(o)
        cuts = _union([o.cuts for o in operands] + [o.cuts for o in others])
        rgs = [o.rg if o.kind == TENSOR else None for o in flat]
        grad = self.grad_enabled
        if any(r is True for r in rgs):
            if grad is True:
                rg_inputs = [o for o in flat if o.kind == TENSOR and o.rg]
                return Value(
                    TENSOR, rg=True, leaf=False,
                    probable=all(o.probable for o in rg_inputs),
                    view_of_leaf=view and base.leaf_requiring_grad,
                    deps=_union(o.deps for o in rg_inputs),
                    cuts=cuts,
                )
            if grad is False:
                return plain_tensor(cuts=cuts)
            return Value(TENSOR, rg=None, leaf=None, cuts=cuts)
        if all(r is False for r in rgs):
            # nothing requires grad: the result is a new plain tensor (a view keeps src)
            src = base.src if view else None
            return plain_tensor(cuts=cuts, src=src)
        return Value(TENSOR, rg=None, leaf=None, cuts=cuts)

    def _conversion_site(self, receiver: cst.BaseExpression) -> bool:
        """Is a conversion of ``receiver`` part of creating the tensor: chained on the factory
        call itself, or rebinding the same name (``w = w.cuda()``)?"""
        if isinstance(receiver, cst.Call):
            return True
        key = dotted(receiver)
        stmt = self.current_statement
        if key is None or not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return False
        small = stmt.body[0]
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            return dotted(small.targets[0].target) == key
        return False

    # ------------------------------------------------------------------ calls
    def _eval_call(self, node: cst.Call) -> Value:
        func = node.func
        callee = func.value if isinstance(func, cst.Name) else (func.attr.value if isinstance(func, cst.Attribute) else None)
        if callee is not None:
            mode = "off" if self.grad_enabled is not True else ("assumed" if self.grad_assumed else "on")
            caller = self.function_stack[-1].name.value if self.function_stack else None
            self.calls.setdefault(callee, []).append((caller, mode))
        arg_values = [self.value_of(a.value) for a in node.args]
        q = self.qualname(func)
        if q is not None:
            return self._call_qualified(q, node, arg_values)
        if isinstance(func, cst.Attribute):
            key = dotted(func)
            bound = None
            if key is not None:
                bound = self.env.get(key) or (self.class_attrs[-1].get(key) if self.class_attrs else None)
            if bound is None or bound.kind not in (MODULE, FUNCTION, CLASS):
                receiver = self.value_of(func.value)
                return self._call_method(receiver, func.attr.value, node, arg_values)
        callee = self.value_of(func)
        if callee.kind == MODULE:
            return self._call_module(callee, arg_values, node)
        if callee.kind == FUNCTION:
            inlined = self._inline(callee.node, node, arg_values)
            if inlined is not None:
                return inlined
        if callee.kind == FUNCTION and callee.items:
            # a function of this module whose result the model summarised (e.g. a loss)
            self._escape(arg_values)
            return self._instantiate(callee.items[0])
        if callee.kind == CLASS:
            if not callee.params:
                self._escape(arg_values)
                return UNKNOWN_VALUE
            return Value(MODULE, params=None, made="inference" if self.inference else None, made_node=node,
                         node=callee.node.name.value if callee.node is not None else None)
        if isinstance(func, cst.Name):
            name = func.value
            if name in ("list", "tuple") and arg_values and arg_values[0].kind in (PARAMS, NAMED_PARAMS):
                return arg_values[0]
            if name in ("float", "int") and arg_values and arg_values[0].kind == TENSOR:
                v = arg_values[0]
                return Value(SCALAR, src=v if v.rg else v.src, cuts=v.cuts)
            if name == "enumerate" and arg_values:
                return Value(TUPLE, items=(Value(SCALAR), _element(arg_values[0])), params=True)
            if name == "zip" and arg_values:
                return Value(TUPLE, items=tuple(_element(a) for a in arg_values), params=True)
        self._escape(arg_values)
        return UNKNOWN_VALUE

    def _inline(self, fn: Any, call: cst.Call, args: List[Value]) -> Optional[Value]:
        """A one-expression helper of this module (``def to_np(t): return t.detach().numpy()``)
        evaluated with this call's arguments, so values and graph cuts flow through it."""
        if not isinstance(fn, cst.FunctionDef) or fn.decorators or self._inlining:
            return None
        body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else ()
        stmts = [b for b in body if not (isinstance(b, cst.SimpleStatementLine) and len(b.body) == 1
                                         and isinstance(b.body[0], cst.Expr)
                                         and isinstance(b.body[0].value, cst.SimpleString))]
        if len(stmts) != 1 or not isinstance(stmts[0], cst.SimpleStatementLine) or len(stmts[0].body) != 1:
            return None
        ret = stmts[0].body[0]
        params = fn.params
        if not isinstance(ret, cst.Return) or ret.value is None or params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) \
                or params.kwonly_params or params.star_kwarg is not None:
            return None
        if any(a.keyword is not None or a.star for a in call.args) or len(args) > len(params.params):
            return None
        env: Env = {p.name.value: v for p, v in zip(params.params, args)}
        saved_env, saved_memo, saved_kind = self.env, self._memo, self.scope_kind
        self.env, self._memo, self.scope_kind, self._inlining = env, {}, "function", True
        try:
            out = self.value_of(ret.value)
        finally:
            self.env, self._memo, self.scope_kind, self._inlining = saved_env, saved_memo, saved_kind, False
        before = _union(a.cuts for a in args)
        for cut in out.cuts - before:  # a cut made inside the helper is reported at this call
            cut.node, cut.statement = call, self.current_statement
        return out

    def _instantiate(self, summary: Value) -> Value:
        """A fresh value shaped like a function's summarised result, at this call's grad mode."""
        if summary.kind == TENSOR:
            if summary.rg is True:
                grad = self.grad_enabled
                if grad is True:
                    return Value(TENSOR, rg=True, leaf=False, probable=True)
                return plain_tensor() if grad is False else Value(TENSOR, rg=None, leaf=None)
            if summary.rg is False:
                return plain_tensor()
            return UNKNOWN_VALUE
        if summary.kind == MODULE:
            return Value(MODULE, params=summary.params, act=summary.act, inplace=summary.inplace,
                         node=summary.node)
        if summary.kind == TUPLE:
            return Value(TUPLE, items=tuple(self._instantiate(i) for i in summary.items))
        if summary.kind in (PARAMS, NAMED_PARAMS, SCALAR):
            return Value(summary.kind)
        return UNKNOWN_VALUE

    def _call_module(self, module: Value, args: List[Value], node: Any) -> Value:
        tensors = [a for a in args if a.kind in (TENSOR, TUPLE)]
        if module.params is False:
            if tensors:
                if module.inplace and tensors[0].kind == TENSOR:
                    self.inplace(node, tensors[0], f"`{module.node}(inplace=True)`")
                return self._derived(tensors[0], tensors[1:], node, op=module.act)
            return UNKNOWN_VALUE
        grad = self.grad_enabled
        cuts = _union(a.cuts for a in args)
        if grad is True:
            if module.made == "inference":
                self._emit("inference_module", (module.made_node, module))
            for a in args:
                if a.kind == TENSOR and a.made == "inference":
                    self._emit("inference_saved", (node, a))  # the module saves its input
            deps = _union(a.deps for a in args if a.kind == TENSOR and a.rg)
            out = Value(TENSOR, rg=True, leaf=False, probable=True, deps=deps, cuts=cuts)
            self.savers.add(out.id)  # e.g. Linear saves its input to compute the weight's grad
            return out
        if grad is False:
            out = plain_tensor(cuts=cuts)
            out.made = "computed"
            return out
        return Value(TENSOR, rg=None, leaf=None, cuts=cuts)

    def _call_qualified(self, q: str, node: cst.Call, args: List[Value]) -> Value:
        if q in api.FACTORIES or q in api.REBUILDERS:
            return self._factory(q, node, args)
        if q in api.PARAMETER:
            rg = _kwarg(node, "requires_grad")
            pos = _positional(node)
            flag_node = rg.value if rg is not None else (pos[1] if len(pos) > 1 else None)
            flag = True if flag_node is None else _const_bool(flag_node)
            data = args[0] if args else UNKNOWN_VALUE
            cuts = data.cuts
            if flag is True and data.kind == TENSOR and data.rg is True and data.leaf is False:
                cuts = cuts | {Cut(node, "parameter", data, self.current_statement)}
            if flag is True:
                return leaf_rg(cuts=cuts, is_param=True)
            if flag is False:
                return plain_tensor(cuts=cuts)
            return Value(TENSOR, rg=None, leaf=True, cuts=cuts)
        if q in api.BACKWARD_FUNCS:
            if args:
                self.backward_on(node, args[0], dotted(node.args[0].value), retain=_retains(node))
            self._escape(args[1:])  # autograd.grad(loss, inputs): gradients of these are wanted
            return UNKNOWN_VALUE
        if q in api.DIFF_FUNCS:
            tensors = [a for a in args if a.kind in (TENSOR, TUPLE)]
            if tensors:
                if q in api.INPLACE_KW_FUNCS and _const_bool(_kwvalue(node, "inplace")) is True:
                    self.inplace(node, tensors[0], f"`{q.rsplit('.', 1)[-1]}(..., inplace=True)`")
                return self._derived(tensors[0], tensors[1:] + [a for a in args if a.kind not in (TENSOR, TUPLE)],
                                     node, op=q.rsplit(".", 1)[-1])
            return UNKNOWN_VALUE
        if q in api.NONDIFF_FUNCS:
            return plain_tensor() if any(a.kind == TENSOR for a in args) else UNKNOWN_VALUE
        if q in api.PARAMLESS_MODULES:
            inplace = _const_bool(_kwvalue(node, "inplace")) is True
            return Value(MODULE, params=False, act=api.MODULE_ACTS.get(q), inplace=inplace,
                         node=q.rsplit(".", 1)[-1])
        if q in api.PARAM_MODULES:
            return Value(MODULE, params=True, made="inference" if self.inference else None, made_node=node)
        if q in api.CONTAINER_MODULES:
            has = [a.params for a in args if a.kind == MODULE]
            prev = None
            for arg, v in zip(node.args, args):
                if v.kind == MODULE and v.inplace and prev is not None and prev.act in api.SAVES_OUTPUT:
                    self._emit("sequential_inplace", (arg, prev, v))
                prev = v if v.kind == MODULE else None
            return Value(MODULE, params=True if any(has) else None)
        if q in api.NUMPY_FROM_TENSOR:
            a = args[0] if args else UNKNOWN_VALUE
            if a.kind == TENSOR:
                return Value(NDARRAY, src=a if a.rg else a.src, cuts=a.cuts)
            if a.kind in (NDARRAY, TUPLE, SCALAR):
                return Value(NDARRAY, src=_src_of(a), cuts=a.cuts)
            return Value(NDARRAY)
        if q.startswith("numpy."):
            srcs = [_src_of(a) for a in args if a.kind in (NDARRAY, SCALAR, TUPLE, TENSOR)]
            if srcs:
                return Value(NDARRAY, src=next((s for s in srcs if s is not None), None),
                             cuts=_union(a.cuts for a in args))
            return UNKNOWN_VALUE
        if q == "copy.deepcopy" and args:
            self._emit("deepcopy", (node, args[0], dotted(node.args[0].value)))
            return UNKNOWN_VALUE
        if q.startswith("torch.optim.") and q.rsplit(".", 1)[-1][:1].isupper() and "lr_scheduler" not in q:
            params = args[0] if args else UNKNOWN_VALUE
            self._emit("optimizer", (node, _flatten(params)))
            self._escape(args)
            owner = None
            first = node.args[0].value if node.args else None
            if isinstance(first, cst.Call) and isinstance(first.func, cst.Attribute) \
                    and first.func.attr.value in ("parameters", "named_parameters"):
                owner = dotted(first.func.value)
            return Value(OPTIMIZER, node=owner)
        self._escape(args)
        return UNKNOWN_VALUE

    def _factory(self, q: str, node: cst.Call, args: List[Value]) -> Value:
        v = self._factory_value(q, node, args)
        if self.inference and v.kind == TENSOR and v.made is None:
            v.made, v.made_node = "inference", node
        return v

    def _factory_value(self, q: str, node: cst.Call, args: List[Value]) -> Value:
        rg_arg = _kwarg(node, "requires_grad")
        flag = False if rg_arg is None else _const_bool(rg_arg.value)
        data = args[0] if args and node.args[0].keyword is None else UNKNOWN_VALUE
        cuts = _union(a.cuts for a in args)
        if q in api.REBUILDERS or q == "torch.Tensor":
            if q == "torch.as_tensor" and data.kind == TENSOR:
                return data  # as_tensor returns the tensor itself
            if data.kind == TENSOR and data.rg is True:
                # torch.tensor(t): a copy without history (and a UserWarning)
                if flag is True:
                    return self._cut_leaf(Cut(node, "copy_rg", data, self.current_statement), cuts)
                return plain_tensor(cuts=cuts, src=data) if flag is False else Value(TENSOR, rg=None, leaf=True, cuts=cuts)
            src = _src_of(data)
            if src is not None:
                kind = "numpy" if data.kind == NDARRAY else "scalar"
                cuts = cuts | {Cut(node, kind, src, self.current_statement)}
                if flag is True:  # torch.tensor(loss.item(), requires_grad=True)
                    return leaf_rg(cuts=cuts, made="rewrap", made_node=node)
        if flag is True:
            return leaf_rg(cuts=cuts, fresh=q in api.FACTORIES and q != "torch.tensor" or data.kind != TENSOR)
        if flag is False:
            return plain_tensor(cuts=cuts)
        return Value(TENSOR, rg=None, leaf=True, cuts=cuts)

    def _call_method(self, receiver: Value, attr: str, node: cst.Call, args: List[Value]) -> Value:
        kind = receiver.kind
        if attr in ("parameters",):
            return Value(PARAMS)
        if attr == "named_parameters":
            return Value(NAMED_PARAMS)
        if attr == "backward":
            key = dotted(node.func.value)  # type: ignore[attr-defined]
            if kind == UNKNOWN and args and node.args[0].keyword is None:
                receiver = args[0]  # accelerator.backward(loss), manual_backward(loss)
                key = dotted(node.args[0].value)
            self.backward_on(node, receiver, key, retain=_retains(node))
            return UNKNOWN_VALUE
        if attr in ("step", "zero_grad"):
            self._train_call(receiver, attr, node)
        if attr == "mark_dirty":
            self.dirty.update(a.id for a in args)
            return UNKNOWN_VALUE
        if attr == "state_dict":
            return Value(UNKNOWN)  # a value of its own, so that reads of it can be followed
        if kind == MODULE:
            if attr in ("to", "cuda", "cpu", "train", "eval", "float", "double", "half", "requires_grad_"):
                return receiver
            if attr == "forward":
                return self._call_module(receiver, args, node)
            return UNKNOWN_VALUE
        if attr == "requires_grad_":
            pos = _positional(node)
            kw = _kwarg(node, "requires_grad")
            flag_node = kw.value if kw is not None else (pos[0] if pos else None)
            flag = True if flag_node is None else _const_bool(flag_node)
            new = self._requires_grad(receiver, flag, node)
            if new is None:
                return UNKNOWN_VALUE
            key = dotted(node.func.value)  # type: ignore[attr-defined]
            if key is not None:
                self.bind_key(key, new)
            return new
        if attr == "detach" or attr == "detach_":
            if kind == TENSOR:
                src = receiver if receiver.rg else receiver.src
                out = plain_tensor(cuts=receiver.cuts, src=src,
                                   alias_of=receiver if attr == "detach" else None,
                                   alias_kind="detach" if attr == "detach" else None)
                key = dotted(node.func.value) if attr == "detach_" else None  # type: ignore[attr-defined]
                if key is not None:
                    self.bind_key(key, out)
                return out
            if kind == UNKNOWN:
                return Value(TENSOR, rg=False, leaf=True)
            return UNKNOWN_VALUE
        if attr == "numpy":
            if kind == TENSOR:
                base = receiver.alias_of if receiver.alias_kind in ("data", "detach") else receiver
                return Value(NDARRAY, src=receiver if receiver.rg else receiver.src, cuts=receiver.cuts,
                             alias_of=base, alias_kind="numpy")
            return Value(NDARRAY)
        if attr in ("item", "tolist"):
            if kind == TENSOR:
                return Value(SCALAR, src=receiver if receiver.rg else receiver.src, cuts=receiver.cuts)
            if kind == NDARRAY:
                return Value(SCALAR, src=receiver.src, cuts=receiver.cuts)
            return Value(SCALAR)
        if kind == NDARRAY:
            return Value(NDARRAY, src=receiver.src, cuts=_union([receiver.cuts] + [a.cuts for a in args]))
        if kind != TENSOR:
            return UNKNOWN_VALUE
        if attr.endswith("_") and not attr.startswith("_") and attr not in api.NOT_INPLACE:
            if not (attr == "copy_" and node.args and dotted(node.args[0].value) == dotted(node.func.value)):  # type: ignore[attr-defined]
                self.inplace(node, receiver, f"`.{attr}()`")  # (x.copy_(x) changes nothing)
            if receiver.alias_kind == "grad" and attr == "zero_":
                self.log("zero_grad_keep", dotted(node.func.value), node)  # type: ignore[attr-defined]
            new = self._inplace_effect(node.func.value, args)  # type: ignore[attr-defined]
            return new if new is not None else receiver
        if attr == "clone":
            if receiver.rg is False:
                return plain_tensor(cuts=receiver.cuts, src=receiver.src)
            return self._derived(receiver, [], node)
        if attr in api.CONVERSION_METHODS:
            v = self._derived(receiver, [], node)
            if (receiver.fresh and receiver.leaf_requiring_grad and self.grad_enabled is True
                    and self._conversion_site(node.func.value)):  # type: ignore[attr-defined]
                certain = _conversion_copies(attr, node)
                if certain is not None:
                    return Value(TENSOR, rg=True, leaf=False if certain else None, deps=v.deps,
                                 cuts=v.cuts, made="conv", made_node=node, certain=certain)
            if receiver.rg is True and receiver.leaf is True and self.grad_enabled is True:
                # may return self (same device/dtype): leaf-ness unknown
                return Value(TENSOR, rg=True, leaf=None, deps=v.deps, cuts=v.cuts)
            if receiver.rg is False:
                return plain_tensor(cuts=receiver.cuts, src=receiver.src)
            return v
        if attr in api.VIEW_METHODS:
            out = self._derived(receiver, args, node, view=True)
            if (receiver.fresh and receiver.leaf_requiring_grad and out.rg is True
                    and self._conversion_site(node.func.value)):  # type: ignore[attr-defined]
                out.made, out.made_node = "conv", node
            return out
        if attr in api.DIFF_METHODS:
            return self._derived(receiver, args, node, op=attr)
        if attr in ("max", "min", "median") and not node.args:
            return self._derived(receiver, [], node)
        if attr in api.NONDIFF_METHODS:
            return plain_tensor()
        if attr == "retain_grad":
            self.retained.add(receiver.id)
        self._escape([receiver])  # retain_grad(), register_hook(), ...
        return UNKNOWN_VALUE

    def imports_torch(self) -> bool:
        """Did this module import torch (rules that go by method names alone, such as
        ``.step()``/``.zero_grad()``, must not fire on other frameworks' code)?"""
        return any(q == "torch" or q.startswith("torch.") for q in self.imports.names.values())

    def enter_loop(self, node: Any, outer: set) -> None:
        self.loops.append(Loop(node, outer, next_id()))
        self.loop_depth += 1

    def exit_loop(self) -> None:
        loop = self.loops.pop()
        self.loop_depth -= 1
        # a name read at the top of the body that the body rebinds to a graph value freed by
        # the body's own backward(): the next iteration back-propagates into a freed graph
        for key, stmt in loop.first_use.items():
            if stmt is None:
                continue
            end = self.env.get(key)
            feeds_backward = loop.products.get(id(stmt), set()) & loop.freed
            if feeds_backward and end is not None and end.kind == TENSOR and end.rg is True and any(
                    d >= loop.start_id for d in end.deps & loop.freed & self.savers):
                self._emit("loop_carried_graph", (stmt, key))

    def log(self, kind: str, key: Optional[str], node: Any) -> None:
        self.events.append(Event(len(self.events), kind, key, node, tuple(l.node for l in self.loops),
                                 self.current_statement,
                                 self.function_stack[-1] if self.function_stack else None))

    def defined_before_loop(self, key: Optional[str]) -> bool:
        """Is ``key`` a name bound before the innermost loop (it outlives an iteration)?"""
        if key is None or not self.loops:
            return False
        outer = self.loops[-1].outer
        return key in outer or re.split(r"[.\[]", key, 1)[0] in outer

    def here(self) -> Tuple[Any, ...]:
        """Where a finding recorded now belongs (for a rule that reports it later): the
        statement, the functions whose grad mode is assumed, and whether the code is inside
        ``with pytest.raises(...)`` (a test that expects the error)."""
        return (self.current_statement, self.assumed_chain(), self.expecting_error)

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
        self._emit("inplace", (node, value, op))

    def read_count(self, value: Value) -> int:
        """How many times so far a name holding ``value`` was read."""
        return self.reads.get(value.id, 0)

    def saved_entries(self, value: Value) -> List[Tuple[int, str]]:
        """What saved ``value`` for backward (empty if nothing known did)."""
        return self.saved.get(value.id, [])

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
            keep = _const_bool(_kwvalue(node, "set_to_none")) is False
            self.log("zero_grad_keep" if keep else "zero_grad", key, node)
            return
        last = (key or "").rsplit(".", 1)[-1].lower()
        if receiver.kind == OPTIMIZER or (receiver.kind == UNKNOWN and "opt" in last and "sched" not in last):
            self.log("step", key, node)
        elif receiver.kind == UNKNOWN and "scaler" in last and node.args:
            self.log("step", dotted(node.args[0].value), node)  # GradScaler.step(optimizer)

    def backward_on(self, node: Any, value: Value, key: Optional[str] = None, retain: bool = False) -> None:
        values = value.items if value.kind == TUPLE else (value,)
        if key is not None:
            self.backwarded_keys.add(key)
        self.log("backward", key, node)
        for v in values:
            self._emit("backward", (node, v))
            self.backwarded.add(v.id)
            if not retain:
                for loop in self.loops:
                    loop.freed |= v.deps
                new = {d for d in v.deps if d in self.savers}
                if new:
                    freed = self.freed_ids() | new
                    self.env[FREED] = Value(TUPLE, items=tuple(sorted(freed)))  # type: ignore[arg-type]


_BINOP_NAMES = {
    cst.Multiply: "mul", cst.Divide: "div", cst.MatrixMultiply: "matmul", cst.Power: "pow",
    cst.Add: "add", cst.Subtract: "sub",
}
_AUG_NAMES = {
    cst.AddAssign: "+=", cst.SubtractAssign: "-=", cst.MultiplyAssign: "*=", cst.DivideAssign: "/=",
    cst.FloorDivideAssign: "//=", cst.ModuloAssign: "%=", cst.PowerAssign: "**=",
    cst.BitAndAssign: "&=", cst.BitOrAssign: "|=", cst.BitXorAssign: "^=",
    cst.LeftShiftAssign: "<<=", cst.RightShiftAssign: ">>=",
}


def _retains(call: cst.Call) -> bool:
    """backward(retain_graph=...)/autograd.grad(create_graph=...): anything but a literal False
    may keep the graph."""
    for name in ("retain_graph", "create_graph"):
        v = _kwvalue(call, name)
        if v is not None and _const_bool(v) is not False:
            return True
    return False


def _kwvalue(call: cst.Call, name: str) -> Optional[cst.BaseExpression]:
    a = _kwarg(call, name)
    return a.value if a is not None else None


def _basic_index(node: cst.Subscript) -> bool:
    """x[0], x[:2], x[1, ::2], x[..., None]: a view (advanced indexing copies)."""
    for el in node.slice:
        s = el.slice
        if isinstance(s, cst.Slice):
            continue
        v = s.value
        if isinstance(v, cst.UnaryOperation) and isinstance(v.operator, cst.Minus):
            v = v.expression
        if isinstance(v, (cst.Integer, cst.Ellipsis)) or (isinstance(v, cst.Name) and v.value == "None"):
            continue
        return False
    return True


def _flatten(v: Value) -> List[Value]:
    if v.kind == TUPLE:
        out: List[Value] = []
        for i in v.items:
            out.extend(_flatten(i))
        return out
    return [v]


_COPY_DTYPES = frozenset({"float64", "double", "float16", "half", "bfloat16"})
_SAME_DTYPES = frozenset({"float32", "float"})


def _conversion_copies(attr: str, node: cst.Call) -> Optional[bool]:
    """Does this conversion of a fresh float32 CPU leaf certainly make a copy (True), maybe
    (False: e.g. ``.to(device)`` with a device only known at run time), or certainly not (None:
    ``.float()``, ``.cpu()``, ``.to('cpu')``)."""
    if attr in ("double", "half", "bfloat16", "cuda"):
        return True
    if attr in ("float", "cpu", "contiguous", "pin_memory"):
        return None
    if attr != "to":
        return False
    verdict: Optional[bool] = None
    for a in node.args:
        v = a.value
        if isinstance(v, cst.SimpleString):
            text = v.evaluated_value if isinstance(v.evaluated_value, str) else ""
            if text.startswith(("cuda", "mps", "xpu", "meta")):
                return True
            if text != "cpu":
                verdict = False
        elif isinstance(v, cst.Attribute) and isinstance(v.value, cst.Name) and v.value.value == "torch":
            if v.attr.value in _COPY_DTYPES:
                return True
            if v.attr.value not in _SAME_DTYPES:
                verdict = False
        elif a.keyword is not None and a.keyword.value in ("non_blocking", "copy", "memory_format"):
            continue
        else:
            verdict = False
    return verdict


def _src_of(v: Value) -> Optional[Value]:
    if v.kind == TUPLE:
        for i in v.items:
            s = _src_of(i)
            if s is not None:
                return s
        return None
    if v.kind == TENSOR:
        return v if v.rg else v.src
    return v.src


def _element(v: Value) -> Value:
    """The value of one element when iterating over ``v``."""
    if v.kind == PARAMS:
        return leaf_rg(is_param=True)
    if v.kind == NAMED_PARAMS:
        return Value(TUPLE, items=(Value(SCALAR), leaf_rg(is_param=True)))
    if v.kind == TUPLE:
        if v.params:  # enumerate()/zip() results
            return v
        items = v.items
        if items and all(i is items[0] for i in items):
            return items[0]
    return UNKNOWN_VALUE


element_of = _element
