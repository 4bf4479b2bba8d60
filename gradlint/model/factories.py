"""Tensor creation: torch's factories and rebuilders (``torch.randn``, ``torch.tensor``), their
floating dtype, the legacy constructors (``torch.FloatTensor``, ``torch.Tensor``) and
``torch.autograd.Variable``."""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.syntax import const_bool, dtype_of_expr, kwarg, positional
from gradlint.model.values import (
    NDARRAY, SCALAR, TENSOR, UNKNOWN, UNKNOWN_VALUE, Cut, Value, flatten, leaf_rg, plain_tensor, src_of, union,
)


class FactoryMixin:
    def _factory(self, q: str, node: cst.Call, args: List[Value]) -> Value:
        v = self._factory_value(q, node, args)
        if self.inference and v.kind == TENSOR and all(v is not a for a in args):
            v.inference = True
        return v

    def _factory_dtype(self, q: str, node: cst.Call, args: List[Value]) -> Optional[str]:
        """The floating dtype a factory's result certainly has, or its integer/bool dtype
        (dtypes.py), or None."""
        given = kwarg(node, "dtype")
        if given is not None:
            return dtype_of_expr(given.value) or self.int_factory_dtype(q, node, args)
        if q in api.DEFAULT_FLOAT_FACTORIES:
            return self.default_dtype
        if q in api.LIKE_FACTORIES and args and args[0].kind == TENSOR and args[0].dtype is not None:
            return args[0].dtype
        if q == "torch.tensor" and node.args and node.args[0].keyword is None and _float_literal(node.args[0].value):
            return self.default_dtype  # torch.tensor([1.0, 2.0])
        return self.int_factory_dtype(q, node, args)

    def _legacy_constructor(self, q: str, node: cst.Call, args: List[Value]) -> Value:
        """``torch.Tensor(...)``, ``torch.FloatTensor(...)``: of a tensor, an alias that keeps
        its graph; of sizes or data, a plain tensor of the constructor's dtype."""
        data = args[0] if len(args) == 1 and node.args[0].keyword is None else None
        if data is not None and data.kind == TENSOR:
            return self._derived(data, [], node, view=True)
        if data is not None and data.kind == UNKNOWN:
            return UNKNOWN_VALUE  # may be a tensor (an alias with its graph)
        dtype = api.LEGACY_CONSTRUCTORS[q]
        cuts = union(a.cuts for a in args)
        src = src_of(data) if data is not None else None
        if src is not None:
            # `torch.FloatTensor(rows)` of numbers taken out of a graph tensor: a new tensor
            # without its history, as `torch.tensor(rows)` makes
            cuts = cuts | {Cut(node, _cut_kind(data), src, self.current_statement)}
        out = plain_tensor(cuts=cuts)
        out.dtype = self.default_dtype if dtype == "default" else dtype
        return out

    def _variable(self, node: cst.Call, args: List[Value]) -> Value:
        """``Variable(t)`` is ``t.detach()``; ``Variable(t, requires_grad=True)`` is
        ``t.detach().requires_grad_()`` (a new leaf sharing t's storage)."""
        pos = positional(node)
        kw = kwarg(node, "requires_grad")
        flag_node = kw.value if kw is not None else (pos[1] if len(pos) > 1 else None)
        flag = False if flag_node is None else const_bool(flag_node)
        data = args[0] if args and node.args[0].keyword is None else UNKNOWN_VALUE
        if data.kind != TENSOR:
            if data.kind == UNKNOWN and flag is True:
                return leaf_rg()
            if data.kind == UNKNOWN and flag is False:
                return Value(TENSOR, rg=False, leaf=True)
            return UNKNOWN_VALUE
        src = data if data.rg else data.src
        detached = plain_tensor(cuts=data.cuts, src=src)
        detached.dtype = data.dtype
        if src is not None:
            detached.made, detached.made_node = "computed", self.current_statement
        if flag is False:
            return detached
        new = self._requires_grad(detached, flag, node)
        if new is None:
            return UNKNOWN_VALUE
        if new.leaf_requiring_grad and src is None and not new.cuts:
            new.fresh = True  # Variable(torch.randn(3), requires_grad=True): like a factory
        new.dtype = data.dtype
        return new

    def _factory_value(self, q: str, node: cst.Call, args: List[Value]) -> Value:
        rg_arg = kwarg(node, "requires_grad")
        flag = False if rg_arg is None else const_bool(rg_arg.value)
        data = args[0] if args and node.args[0].keyword is None else UNKNOWN_VALUE
        cuts = union(a.cuts for a in args)
        if q in api.REBUILDERS or q == "torch.Tensor":
            if q == "torch.as_tensor" and data.kind == TENSOR:
                return data  # as_tensor returns the tensor itself
            if data.kind == TENSOR and data.rg is True:
                # torch.tensor(t): a copy without history (and a UserWarning)
                if flag is True:
                    return self._cut_leaf(Cut(node, "copy_rg", data, self.current_statement), cuts)
                return plain_tensor(cuts=cuts, src=data) if flag is False else Value(TENSOR, rg=None, leaf=True, cuts=cuts)
            src = src_of(data)
            if src is not None:
                cuts = cuts | {Cut(node, _cut_kind(data), src, self.current_statement)}
                if flag is True:  # torch.tensor(loss.item(), requires_grad=True)
                    return leaf_rg(cuts=cuts, made="rewrap", made_node=node)
        if flag is True:
            return leaf_rg(cuts=cuts, fresh=q in api.FACTORIES and q != "torch.tensor" or data.kind != TENSOR)
        if flag is False:
            return plain_tensor(cuts=cuts)
        return Value(TENSOR, rg=None, leaf=True, cuts=cuts)


def _cut_kind(data: Value) -> str:
    """How data taken out of a graph came back: 'numpy' (an ndarray, or numbers its
    ``.tolist()`` gave), else 'scalar' (``.item()``, a tensor's ``.tolist()``)."""
    if data.kind == NDARRAY or any(v.kind == SCALAR and v.made == "numpy" for v in flatten(data)):
        return "numpy"
    return "scalar"


def _float_literal(node: cst.BaseExpression) -> bool:
    """A number or a (nested) list/tuple of numbers with at least one float: ``[1.0, 2]``."""
    seen = False
    stack = [node]
    while stack:
        n = stack.pop()
        if type(n) is cst.UnaryOperation:
            n = n.expression
        if type(n) is cst.Float:
            seen = True
        elif isinstance(n, (cst.List, cst.Tuple)):
            stack.extend(e.value for e in n.elements if type(e) is cst.Element)
        elif not type(n) is cst.Integer:
            return False
    return seen
