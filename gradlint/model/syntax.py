"""Small helpers over libcst syntax: keyword and positional arguments, constant flags,
operator names, index forms."""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from gradlint.model import torchapi as api


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


def retains(call: cst.Call) -> bool:
    """backward(retain_graph=...)/autograd.grad(create_graph=...): anything but a literal False
    may keep the graph."""
    for name in ("retain_graph", "create_graph"):
        v = kwvalue(call, name)
        if v is not None and const_bool(v) is not False:
            return True
    return False


def kwvalue(call: cst.Call, name: str) -> Optional[cst.BaseExpression]:
    a = kwarg(call, name)
    return a.value if a is not None else None


def basic_index(node: cst.Subscript) -> bool:
    """x[0], x[:2], x[1, ::2], x[..., None]: a view (advanced indexing copies)."""
    for el in node.slice:
        s = el.slice
        if type(s) is cst.Slice:
            continue
        v = s.value
        if type(v) is cst.UnaryOperation and type(v.operator) is cst.Minus:
            v = v.expression
        if isinstance(v, (cst.Integer, cst.Ellipsis)) or (type(v) is cst.Name and v.value == "None"):
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
            text = v.evaluated_value if isinstance(v.evaluated_value, str) else ""
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
