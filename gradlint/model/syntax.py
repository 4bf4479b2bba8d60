"""Small helpers over libcst syntax: keyword and positional arguments, constant flags,
operator names, index forms."""

from __future__ import annotations

from typing import List, Optional

import libcst as cst


def const_bool(node: Optional[cst.BaseExpression]) -> Optional[bool]:
    if isinstance(node, cst.Name):
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
        if isinstance(s, cst.Slice):
            continue
        v = s.value
        if isinstance(v, cst.UnaryOperation) and isinstance(v.operator, cst.Minus):
            v = v.expression
        if isinstance(v, (cst.Integer, cst.Ellipsis)) or (isinstance(v, cst.Name) and v.value == "None"):
            continue
        return False
    return True


_COPY_DTYPES = frozenset({"float64", "double", "float16", "half", "bfloat16"})
_SAME_DTYPES = frozenset({"float32", "float"})


def conversion_copies(attr: str, node: cst.Call) -> Optional[bool]:
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
