"""Small helpers over libcst syntax: keyword and positional arguments, constant flags,
operator names, index forms."""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, List, Optional

import libcst as cst

from gradlint.model import torchapi as api
from gradlint.model.names import string_value


def const_bool(node: Optional[cst.BaseExpression]) -> Optional[bool]:
    if type(node) is cst.Name:
        if node.value == "True":
            return True
        if node.value == "False":
            return False
    return None


def kwarg(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a
    return None


def positional(call: cst.Call) -> List[cst.BaseExpression]:
    return [a.value for a in call.args if a.keyword is None and not a.star]


BINOP_NAMES = {
    cst.Multiply: "mul", cst.Divide: "div", cst.MatrixMultiply: "matmul", cst.Power: "pow",
    cst.Add: "add", cst.Subtract: "sub",
}
AUG_NAMES = {
    cst.AddAssign: "+=", cst.SubtractAssign: "-=", cst.MultiplyAssign: "*=", cst.DivideAssign: "/=",
    cst.FloorDivideAssign: "//=", cst.ModuloAssign: "%=", cst.PowerAssign: "**=",
    cst.BitAndAssign: "&=", cst.BitOrAssign: "|=", cst.BitXorAssign: "^=",
    cst.LeftShiftAssign: "<<=", cst.RightShiftAssign: ">>=",
}


def kwvalue(call: cst.Call, name: str) -> Optional[cst.BaseExpression]:
    a = kwarg(call, name)
    return a.value if a is not None else None


def basic_index(node: cst.Subscript, ints: FrozenSet[str] = frozenset()) -> bool:
    """x[0], x[:2], x[1, ::2], x[..., None]: a view (advanced indexing copies); ``ints``: names
    known to hold a Python int (a loop counter), which index like a number."""
    for el in node.slice:
        s = el.slice
        if type(s) is cst.Slice:
            continue
        v = s.value
        if type(v) is cst.UnaryOperation and type(v.operator) is cst.Minus:
            v = v.expression
        if isinstance(v, (cst.Integer, cst.Ellipsis)) or (type(v) is cst.Name and v.value in ("None", *ints)):
            continue
        return False
    return True


_DTYPE_METHODS = api.DTYPE_METHODS
_DTYPE_NAMES = api.DTYPES


def dtype_of_expr(node: Optional[cst.BaseExpression]) -> Optional[str]:
    """``torch.float64`` -> 'float64' (floating dtypes only); anything else -> None."""
    if type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == "torch":
        return _DTYPE_NAMES.get(node.attr.value)
    return None


def dtype_conversion(attr: str, node: cst.Call) -> Optional[str]:
    """The target dtype when this call only converts the dtype (``.double()``,
    ``.to(torch.float64)``, ``.to(dtype=torch.half)``), else None."""
    if attr in _DTYPE_METHODS:
        return _DTYPE_METHODS[attr] if not node.args else None
    if attr != "to" or len(node.args) != 1:
        return None
    a = node.args[0]
    if a.keyword is not None and a.keyword.value != "dtype":
        return None
    return dtype_of_expr(a.value)


def conversion_copies(attr: str, node: cst.Call, dtype: Optional[str] = "float32") -> Optional[bool]:
    """Does this conversion of a fresh CPU leaf of ``dtype`` (None: not known) certainly make a
    copy (True), maybe (False: e.g. ``.to(device)`` with a device only known at run time, or a
    dtype change from an unknown dtype), or certainly not (None: ``.float()`` of float32,
    ``.cpu()``, ``.to('cpu')``)."""
    target = _DTYPE_METHODS.get(attr)
    if target is not None:
        if dtype is None:
            return None if attr == "float" else False
        return True if target != dtype else None
    if attr == "cuda":
        return True
    if attr in ("cpu", "contiguous", "pin_memory"):
        return None
    if attr != "to":
        return False
    verdict: Optional[bool] = None
    for a in node.args:
        v = a.value
        if type(v) is cst.SimpleString:
            text = string_value(v)
            text = text if isinstance(text, str) else ""
            if text.startswith(("cuda", "mps", "xpu", "meta")):
                return True
            if text != "cpu":
                verdict = False
        elif type(v) is cst.Attribute and type(v.value) is cst.Name and v.value.value == "torch":
            target = _DTYPE_NAMES.get(v.attr.value)
            if target is not None and dtype is not None:
                if target != dtype:
                    return True
            else:
                verdict = False
        elif a.keyword is not None and a.keyword.value in ("non_blocking", "copy", "memory_format"):
            continue
        else:
            verdict = False
    return verdict


_LITERALS = frozenset({"True", "False", "None"})


def literal_arguments(fn: Any, call: cst.Call, bound_receiver: bool) -> Dict[str, str]:
    """The parameters of ``fn`` that this call gives a literal ``True``/``False``/``None``: passed
    so, or left out with such a default (``def backward(self, loss, retain_graph=False)`` called
    as ``opt.backward(loss)``). Empty when the call's form is beyond a plain binding (``*args``,
    ``**kw``)."""
    params = fn.params
    positional = list(getattr(params, "posonly_params", ())) + list(params.params)
    if bound_receiver:
        positional = positional[1:]
    by_name = {p.name.value: p for p in positional + list(params.kwonly_params)}
    passed: Dict[str, Any] = {}
    i = 0
    for a in call.args:
        if a.star:
            return {}
        if a.keyword is None:
            if i >= len(positional):
                return {}
            passed[positional[i].name.value] = a.value
            i += 1
        elif a.keyword.value in by_name:
            passed[a.keyword.value] = a.value
    out: Dict[str, str] = {}
    for name, p in by_name.items():
        v = passed[name] if name in passed else p.default
        if type(v) is cst.Name and v.value in _LITERALS:
            out[name] = v.value
    return out
