"""Score-function terms: log-probabilities and the differences that weight them.

A policy-gradient (REINFORCE, actor-critic) loss multiplies the log-probability of sampled
actions by a weight, `(returns - baseline) * log_prob`. The model keeps two facts for it:

- ``log_probs``: tensors that are a log-probability, or a function of log-probabilities and of
  nothing else that requires grad. A `.log_prob(...)` call (of a `torch.distributions`
  object, or any object the model does not know) starts one; tensor methods, torch functions,
  arithmetic, indexing and views keep it as long as every other operand certainly does not
  require grad (`dist.log_prob(a).sum(-1)`, `-log_p`, `torch.stack(log_ps)`, `log_p * 0.5`).
  A module's call, or any operand the model does not know, ends it.
- ``differences``: tensors made by a subtraction `a - b` (or a view of one, with nothing else
  that requires grad), with the values of both sides: the weight `returns - values`.

- ``score_values``: once the file has a log-probability, every tensor evaluated after it that
  requires grad, by id: with ``Value.deps`` they tell what a loss is made of (the critic's own
  regression term beside the policy term, GL309).

Rules decide what such a product means (GL309); the model only keeps the facts.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.values import CONST, SCALAR, TENSOR, TUPLE, UNKNOWN, Value

_VIEWS = api.VIEW_METHODS | {"reshape", "flatten", "squeeze", "unsqueeze", "contiguous"}


class ScoreMixin:
    """The model's part that keeps ``log_probs`` and ``differences`` (see the module docstring)."""

    log_probs: Dict[int, Any]
    differences: Dict[int, Tuple[Value, Value]]
    score_values: Dict[int, Value]

    def scored(self, node: cst.BaseExpression, out: Value) -> Value:
        """Called with each evaluated expression: returns ``out`` (or, for a `.log_prob(...)`
        whose result the model does not know, a tensor) and records the facts above."""
        t = type(node)
        if t is cst.Call:
            func = node.func
            if type(func) is cst.Attribute and func.attr.value == "log_prob":
                receiver = self._memo.get(id(func.value))  # type: ignore[attr-defined]
                # (a distribution the model took for a tensor, or an object it does not know)
                if receiver is not None and receiver.kind in (UNKNOWN, TENSOR) and out.kind in (UNKNOWN, TENSOR):
                    if receiver.kind == TENSOR:
                        # a differentiable function of the distribution's parameters and the value
                        args = [self._memo.get(id(a.value)) for a in node.args]  # type: ignore[attr-defined]
                        out = self._derived(receiver, [a for a in args if a is not None], node)  # type: ignore[attr-defined]
                    elif out.kind == UNKNOWN:
                        out = Value(TENSOR, rg=None, leaf=None)  # (what an unknown object's log_prob returns)
                    self.log_probs[out.id] = node
                    return out
        if out.kind != TENSOR or (not self.log_probs and not self.differences and t is not cst.BinaryOperation):
            return out
        if self.log_probs and out.rg is True:
            self.score_values[out.id] = out
        if t is cst.BinaryOperation and type(node.operator) is cst.Subtract:
            left, right = self._memo.get(id(node.left)), self._memo.get(id(node.right))  # type: ignore[attr-defined]
            if left is not None and right is not None:
                self.differences[out.id] = (left, right)
        if out.id in self.log_probs:
            return out
        operands = self._score_operands(node)
        if operands is None:
            return out
        marked = [o for o in operands if o.kind == TENSOR and o.id in self.log_probs]
        if self.log_probs and marked and all(o in marked or _no_grad(o) for o in operands):
            self.log_probs[out.id] = self.log_probs[marked[0].id]
        if self.differences and operands and operands[0].kind == TENSOR and operands[0].id in self.differences \
                and _is_view(node) and all(_no_grad(o) for o in operands[1:]):
            self.differences[out.id] = self.differences[operands[0].id]
        return out

    def carry_scores(self, old: Value, new: Value) -> None:
        """``new`` is what a memoised walk's ``old`` is for another call (objects.py): the same
        function of that call's inputs, so the same facts."""
        if old.id in self.log_probs:
            self.log_probs[new.id] = self.log_probs[old.id]
        if old.id in self.differences:
            self.differences[new.id] = self.differences[old.id]

    def _score_operands(self, node: cst.BaseExpression) -> Optional[List[Value]]:
        """The values a torch operation at ``node`` computes from (its receiver first), or None
        when ``node`` is no such operation (a module's call, a function of the project)."""
        memo = self._memo  # type: ignore[attr-defined]
        t = type(node)
        if t is cst.BinaryOperation:
            parts: List[Any] = [memo.get(id(node.left)), memo.get(id(node.right))]
        elif t is cst.UnaryOperation:
            parts = [memo.get(id(node.expression))]
        elif t is cst.Attribute:
            parts = [memo.get(id(node.value))]
        elif t is cst.Subscript:
            parts = [memo.get(id(node.value))]
            for el in node.slice:
                if type(el.slice) is cst.Index:
                    parts.append(memo.get(id(el.slice.value), _PLAIN))
        elif t is cst.Call:
            func = node.func
            q = self.qualname(func)  # type: ignore[attr-defined]
            if q is not None:
                if not q.startswith("torch.") or (
                        q.startswith(("torch.nn.", "torch.optim.")) and not q.startswith("torch.nn.functional.")):
                    return None  # (a module's construction or call, an optimizer)
                parts = []
            elif type(func) is cst.Attribute:
                receiver = memo.get(id(func.value))
                if receiver is None or receiver.kind != TENSOR:
                    return None  # (a module's call, a method of an object)
                parts = [receiver]
            else:
                return None
            parts.extend(memo.get(id(a.value)) for a in node.args)
        else:
            return None
        out: List[Value] = []
        for p in parts:
            if p is None:
                return None
            if p.kind == TUPLE:
                out.extend(p.items)
            else:
                out.append(p)
        return out


_PLAIN = Value(CONST)


def _no_grad(v: Value) -> bool:
    """Certainly nothing that requires grad: a number, a literal, a tensor without grad."""
    return v.kind in (SCALAR, CONST) or (v.kind == TENSOR and v.rg is False)


def _is_view(node: cst.BaseExpression) -> bool:
    t = type(node)
    if t is cst.Attribute:
        return node.attr.value in api.TENSOR_ATTRS_VIEW
    if t is cst.Call and type(node.func) is cst.Attribute:
        return node.func.attr.value in _VIEWS
    return False
