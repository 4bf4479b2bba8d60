"""Statements: assignments, augmented assignments (in-place writes), imports, ``del``, and
``requires_grad`` changes."""

from __future__ import annotations

from typing import Any, List, Optional

import libcst as cst

from gradlint.model import containers, torchapi as api
from gradlint.model.lattice import deps_of, ids_of
from gradlint.model.names import dotted, reads_grad_of
from gradlint.model.syntax import AUG_NAMES, const_bool
from gradlint.model.values import (
    MODULE, NDARRAY, TENSOR, TUPLE, UNKNOWN, Cut, Value, leaf_rg, union,
)


class StatementMixin:
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
            new_cuts = union([cur.cuts] + [o.cuts for o in operands])
            if new_cuts == cur.cuts:
                return cur
            new = Value(TENSOR, rg=cur.rg, leaf=cur.leaf, probable=cur.probable,
                        view_of_leaf=cur.view_of_leaf, deps=cur.deps, mdeps=cur.mdeps, cuts=new_cuts, src=cur.src)
        elif grad is None:
            new = Value(TENSOR, rg=None, leaf=None)
        else:
            new = Value(
                TENSOR, rg=True, leaf=False,
                probable=all(o.probable for o in operands if o.kind == TENSOR and o.rg),
                **deps_of([cur] + [o for o in operands if o.kind == TENSOR and o.rg]),
                cuts=union([cur.cuts] + [o.cuts for o in operands]),
            )
        self.bind_key(key, new)
        return new

    # ------------------------------------------------------------------ statements
    def exec_assign(self, node: cst.Assign) -> None:
        value = self.value_of(node.value)
        for t in node.targets:
            target = t.target
            if (
                type(target) is cst.Attribute
                and target.attr.value == "requires_grad"
            ):
                self._set_requires_grad(target.value, node.value, node)
                continue
            if type(target) is cst.Attribute and target.attr.value == "inplace":
                self._set_inplace(target.value, node.value, node)
                continue
            if type(target) is cst.Attribute and target.attr.value == "data":
                self.manual_update(target, node.value, node)  # `w.data = w.data - lr * w.grad`
            if type(target) is cst.Subscript:
                self.manual_update(target.value, node.value, node)  # `w.data[i] = (w - lr * w.grad)[i]`
            if type(target) is cst.Attribute and target.attr.value == "grad":
                if type(node.value) is cst.Name and node.value.value == "None":
                    self.log("zero_grad", dotted(target), node)  # p.grad = None
                else:
                    self.log("grad_set", dotted(target), node)  # gradients given by hand
                continue
            key = dotted(target) if isinstance(target, (cst.Name, cst.Attribute)) else None
            if key is not None and value.kind == TENSOR and self.lookup(key).leaf_requiring_grad \
                    and reads_grad_of(node.value, key):
                # `w = w - lr * w.grad`: the manual update rebinds the parameter (GL304 reports it
                # here); what follows from the rebinding (a non-leaf .grad, a graph-less loss on the
                # next step) is its consequence, marked so that it is reported once, here
                cut = Cut(node, "rebound", self.lookup(key), self.current_statement)
                cut.in_loop = bool(self.loops) or self.repeat
                value.cuts = value.cuts | {cut}
            self.bind_target(target, value)

    def exec_ann_assign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self.bind_target(node.target, self.value_of(node.value))

    def exec_aug_assign(self, node: cst.AugAssign) -> None:
        target = node.target
        operand = self.value_of(node.value)
        op = f"`{AUG_NAMES.get(type(node.operator), 'augmented assignment')}`"
        if type(target) is cst.Subscript:
            self.manual_update(target.value, node.value, node)  # `w.data[mask] -= lr * w.grad[mask]`
            base = self.value_of(target.value)
            if base.kind in (TENSOR, NDARRAY):
                self.inplace(node, base, op)
            elif base.kind == TUPLE and not base.params:
                self._aug_assign_element(node, target, operand, op)  # `params["w"] -= lr * g`
                return
            self._inplace_effect(target.value, [operand])
            return
        cur = self.value_of(target)
        if cur.kind == TUPLE and cur.keys is None and not cur.params and type(node.operator) is cst.AddAssign:
            self.bind_target(target, containers.added(cur, operand, "extend"))  # `xs += [t]`
            return
        if cur.kind == TENSOR and isinstance(target, (cst.Name, cst.Attribute)):
            self.manual_update(target, node.value, node)  # `w.data -= lr * w.grad`
        if cur.kind in (TENSOR, NDARRAY) and not type(node.operator) is cst.MatrixMultiplyAssign:
            self.inplace(node, cur, op)
        if cur.kind == TENSOR:
            if self._inplace_effect(target, [operand]) is None:
                out = self.shaped_binop(node, [cur, operand], self._combine([cur, operand], node))
                out.inference = cur.inference  # in place: an inference tensor only if it was one
                self.bind_target(target, out)
        else:
            self.bind_target(target, self._combine([cur, operand], node))

    def _aug_assign_element(self, node: cst.AugAssign, target: cst.Subscript, operand: Value, op: str) -> None:
        """``d["k"] += v`` / ``xs[i] -= v``: in place on a tensor element, else a new element."""
        cur = self.value_of(target)
        if cur.kind in (TENSOR, NDARRAY) and not type(node.operator) is cst.MatrixMultiplyAssign:
            self.inplace(node, cur, op)
        if cur.kind == TENSOR:
            key = dotted(target)
            if key is not None:
                if key not in self.env:
                    self.bind_key(key, cur)
                new = self._inplace_effect(target, [operand])
                if new is not None and new is not cur:
                    self.rebind_element(target, new)
            return
        self.rebind_element(target, self._combine([cur, operand], node))

    def exec_expr(self, node: cst.Expr) -> None:
        self.value_of(node.value)

    def exec_del(self, node: cst.Del) -> None:
        targets = node.target.elements if type(node.target) in (cst.Tuple, cst.List) else [node.target]
        for t in targets:
            self.forget_positions(t.value if type(t) is cst.Element else t)  # type: ignore[attr-defined]
        self.forget_target(node.target)

    def exec_import(self, node: cst.Import) -> None:
        self.imports.add_import(node)
        for alias in node.names:
            local = alias.evaluated_alias or alias.evaluated_name.split(".", 1)[0]
            self.unbind(local)
        self.project_import(node)

    def exec_import_from(self, node: cst.ImportFrom) -> None:
        self.imports.add_import_from(node)
        if not type(node.names) is cst.ImportStar:
            for alias in node.names:
                self.unbind(alias.evaluated_alias or alias.evaluated_name)
        self.project_import(node)

    def _set_inplace(self, receiver: cst.BaseExpression, flag_node: cst.BaseExpression, stmt: Any) -> None:
        """``act.inplace = True`` after construction counts like ``nn.ReLU(inplace=True)``; on a
        layer of an ``nn.Sequential`` (``model[2].inplace = True``) the layer before it decides."""
        cur = self.value_of(receiver)
        if cur.kind != MODULE or cur.params is not False:
            return
        flag = const_bool(flag_node)
        new = Value(MODULE, params=False, act=cur.act, inplace=flag is True, node=cur.node)
        key = dotted(receiver)
        if key is not None:
            self.bind_key(key, new)
        if flag is True and type(receiver) is cst.Subscript and len(receiver.slice) == 1:
            owner = self.value_of(receiver.value)
            idx = receiver.slice[0].slice
            if owner.kind == MODULE and owner.items and type(idx) is cst.Index and type(idx.value) is cst.Integer:
                i = int(idx.value.value, 0)
                prev = owner.items[i - 1] if 0 < i < len(owner.items) else None
                if prev is not None and prev.kind == MODULE and prev.act in api.SAVES_OUTPUT:
                    self._emit("sequential_inplace", (stmt, prev, new))

    def _set_requires_grad(self, receiver: cst.BaseExpression, flag_node: cst.BaseExpression, stmt: Any) -> None:
        """``x.requires_grad = flag``."""
        key = dotted(receiver)
        if key is None:
            return
        cur = self.value_of(receiver)
        flag = const_bool(flag_node)
        if flag is not True and cur.kind == TENSOR and cur.is_param and "." in key:
            # `self.emb.weight.requires_grad = False`: that parameter stays frozen in every method
            self.freeze(key)
        new = self._requires_grad(cur, flag, stmt)
        if new is not None:
            self.same_tensor(cur, new)
            self.bind_key(key, new)

    def _requires_grad(self, cur: Value, flag: Optional[bool], node: Any) -> Optional[Value]:
        """The value of ``cur`` after ``requires_grad_(flag)`` / ``.requires_grad = flag``."""
        if flag is True:
            for c in cur.cuts:
                if c.kind == "rebound":
                    self.releafed.add(id(c.node))  # `w = w - lr * w.grad` then `w.requires_grad_()`
        if flag is not True:
            self._freezes(cur)
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
            cut = Cut(node, "detach_rg", cur.src, self.current_statement)
            cut.after_backward = bool((cur.src.deps - {cur.src.id}) & self.backwarded_deps)
            v = self._cut_leaf(cut, cur.cuts)
            v.made, v.made_node = "rewrap", node
            return v
        if cur.rg is False and (cur.made == "computed" or cur.cuts):
            return leaf_rg(cuts=cur.cuts, made="rewrap", made_node=node)
        return leaf_rg(cuts=cur.cuts)

    def _freezes(self, param: Value) -> None:
        """``param`` stops requiring grad (``requires_grad_(False)``, ``requires_grad = False``,
        ``detach_()``): when it is the loop variable of ``for p in model.backbone.parameters()``,
        every parameter of that module is frozen from here on, in every method (an EMA or teacher
        copy of a model, updated in place later without ``no_grad``)."""
        owner = self.param_owner.get(param.id)
        if owner is not None:
            self.freeze(owner)

    @staticmethod
    def _cut_leaf(cut: Cut, cuts: frozenset) -> Value:
        v = leaf_rg(cuts=cuts | {cut})
        cut.result = v
        return v

    def _escape(self, values: List[Value]) -> None:
        for v in values:
            if v.kind == TENSOR:
                self.used_as_leaf.update(ids_of(v))
            elif v.kind == TUPLE:
                self._escape(list(v.items))
