"""Integer and bool dtypes: where a tensor certainly has one (a factory given an integer dtype or
integer data, indices from ``argmax``/``sort``/``max(dim)``, ``.long()``/``.bool()``/``.to(torch.long)``,
comparisons), so that a rule can tell it can never require grad.

The fact lives in a value's ``dtype`` (floating dtypes are set by factories.py where conversions
depend on them). Where the object is not known to be a tensor (``out.argmax(1)`` of a model's
output the model does not know), the value stays of kind unknown and carries the dtype all the
same: whatever it is, if it is a tensor, it has that dtype. Set only where certain; an operation
not listed here gives no dtype (unknown)."""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.names import string_value
from gradlint.model.syntax import kwarg, positional
from gradlint.model.values import TENSOR, TUPLE, UNKNOWN, UNKNOWN_VALUE, Value, plain_tensor

INT_DTYPES = api.INT_DTYPE_NAMES
_COMPARE = (cst.Equal, cst.NotEqual, cst.LessThan, cst.GreaterThan, cst.LessThanEqual, cst.GreaterThanEqual)


def int_dtype(v: Value) -> Optional[str]:
    """The integer/bool dtype ``v`` certainly has (a tensor, or an object that is one if it is a
    tensor at all), else None."""
    return v.dtype if v.kind in (TENSOR, UNKNOWN) and v.dtype in INT_DTYPES else None


def _int_literal(node: cst.BaseExpression) -> bool:
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus:
        node = node.expression
    return type(node) is cst.Integer


def literal_dtype(node: cst.BaseExpression) -> Optional[str]:
    """The dtype ``torch.tensor`` gives literal data: 'int64' for integers (nested lists and
    tuples of them, bools among them), 'bool' for True/False only; None for anything else (a
    float anywhere, a name, an empty list)."""
    kinds = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if _int_literal(n):
            kinds.add("int")
        elif type(n) is cst.Name and n.value in ("True", "False"):
            kinds.add("bool")
        elif isinstance(n, (cst.List, cst.Tuple)):
            for e in n.elements:
                if type(e) is not cst.Element:
                    return None
                stack.append(e.value)
        else:
            return None
    if "int" in kinds:
        return "int64"
    return "bool" if kinds else None


def is_bool_comparison(node: cst.Comparison) -> bool:
    """``a > b``, ``a == b`` ... (not ``in``/``is``, which give a Python bool)."""
    return all(isinstance(c.operator, _COMPARE) for c in node.comparisons)


class DtypeMixin:
    def int_dtype_of_expr(self, node: Optional[cst.BaseExpression]) -> Optional[str]:
        """``torch.long``, ``torch.LongTensor``, ``'torch.LongTensor'`` -> the integer dtype."""
        if node is None:
            return None
        if type(node) is cst.SimpleString:
            text = string_value(node)
            text = text if isinstance(text, str) else ""
            return api.INT_TENSOR_TYPES.get(text.rsplit(".", 1)[-1]) if text.startswith("torch.") else None
        q = self.qualname(node)
        if q is None or not q.startswith("torch."):
            return None
        last = q.rsplit(".", 1)[-1]
        if q.count(".") == 1 and last in api.INT_DTYPES:
            return api.INT_DTYPES[last]
        if q in ("torch." + last, "torch.cuda." + last):
            return api.INT_TENSOR_TYPES.get(last)
        return None

    def int_factory_dtype(self, q: str, node: cst.Call, args: List[Value]) -> Optional[str]:
        """The integer/bool dtype a factory's result certainly has, or None."""
        given = kwarg(node, "dtype")
        if given is not None:
            return self.int_dtype_of_expr(given.value)
        pos = positional(node)
        if q in ("torch.randint", "torch.randperm"):
            return "int64"
        if q in api.LIKE_FACTORIES or q == "torch.randint_like":
            return int_dtype(args[0]) if args and node.args[0].keyword is None else None
        if q == "torch.arange":
            numbers = pos + [a.value for a in node.args if a.keyword is not None
                             and a.keyword.value in ("start", "end", "step")]
            return "int64" if numbers and all(_int_literal(n) for n in numbers) else None
        if q == "torch.full":
            fill = kwarg(node, "fill_value")
            value = fill.value if fill is not None else (pos[1] if len(pos) > 1 else None)
            return literal_dtype(value) if value is not None else None
        if q in ("torch.tensor", "torch.as_tensor", "torch.asarray") and pos and node.args[0].keyword is None:
            return literal_dtype(pos[0]) or int_dtype(args[0])
        return None

    def _method_int_dtype(self, receiver: Value, attr: str, node: cst.Call) -> Optional[str]:
        if attr in api.INT_CONVERSIONS:
            return api.INT_CONVERSIONS[attr] if not node.args else None
        if attr in api.INT_RESULTS:
            return api.INT_RESULTS[attr]
        if attr in ("to", "type"):
            found = None
            for a in node.args:
                if a.keyword is not None and a.keyword.value in ("non_blocking", "copy", "memory_format", "device"):
                    continue
                if a.keyword is not None and a.keyword.value not in ("dtype",):
                    return None
                d = self.int_dtype_of_expr(a.value)
                if d is not None:
                    found = d
                elif type(a.value) is cst.SimpleString and attr == "to" and a.keyword is None:
                    continue  # `.to("cuda")`: a device
                else:
                    return None  # a name: a device, or a dtype, or a tensor whose dtype it takes
            return found if found is not None else (int_dtype(receiver) if node.args else None)
        keep = attr in api.DTYPE_KEEPING or (attr == "view" and all(
            _int_literal(a.value) and a.keyword is None for a in node.args) and node.args)
        return int_dtype(receiver) if keep else None

    def int_method_result(self, receiver: Value, attr: str, node: cst.Call, out: Value, made: int) -> Value:
        """``out``, the value of ``receiver.attr(...)``, with the integer dtype it certainly has."""
        if receiver.kind not in (TENSOR, UNKNOWN):
            return out
        if attr in api.INDEX_PAIRS or attr in api.INDEX_PAIRS_WITH_DIM:
            if out is UNKNOWN_VALUE and _pair_call(attr, positional(node), node):
                return _pair(receiver)
            return out
        return _with_dtype(out, self._method_int_dtype(receiver, attr, node), made)

    def int_function_result(self, q: str, node: cst.Call, args: List[Value], out: Value, made: int) -> Value:
        """``out``, the value of the torch function ``q``, with the integer dtype it certainly has."""
        if not q.startswith("torch.") or q.count(".") != 1:
            return out
        name = q[len("torch."):]
        first = args[0] if args and node.args[0].keyword is None and not node.args[0].star else UNKNOWN_VALUE
        if name in api.INDEX_PAIRS or name in api.INDEX_PAIRS_WITH_DIM:
            if out is UNKNOWN_VALUE and first.kind in (TENSOR, UNKNOWN) and _pair_call(
                    name, positional(node)[1:], node):
                return _pair(first)
            return out
        return _with_dtype(out, api.INT_RESULTS.get(name), made)


def _with_dtype(out: Value, dtype: Optional[str], made: int) -> Value:
    if dtype is None:
        return out
    if out.kind == TENSOR and out.id >= made and out.dtype is None:
        out.dtype = dtype  # a value made by this call
        return out
    if out is UNKNOWN_VALUE:
        return Value(UNKNOWN, dtype=dtype)
    return out


def _pair_call(name: str, rest: List[cst.BaseExpression], node: cst.Call) -> bool:
    """Does this call return a (values, indices) pair? ``max``/``min``/``median``/``mode`` only
    with a dimension (an integer literal or ``dim=``: ``max(a, b)`` of two tensors is one tensor)."""
    if any(a.star for a in node.args):
        return False
    if name in api.INDEX_PAIRS:
        return True
    if kwarg(node, "dim") is not None:
        return True
    return bool(rest) and _int_literal(rest[0])


def _pair(receiver: Value) -> Value:
    """(values, indices): the values as unknown as before, the indices int64 and graph-less."""
    if receiver.kind == TENSOR:
        indices = plain_tensor()
        indices.dtype = "int64"
    else:
        # of something not known to be a tensor: a NumPy array's `a.max(1)` is one array of
        # maxima, and its `[1]` a row of floats, not indices
        indices = UNKNOWN_VALUE
    return Value(TUPLE, items=(UNKNOWN_VALUE, indices), made="indices")
