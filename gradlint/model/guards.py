"""Type guards: what a test proves about the names it checks, where it holds (the body of an
``if``, the branch of a conditional expression, the code after ``assert`` or after an ``if``
whose body returns or continues) and where it fails (the ``else``).

Only one fact is kept: "this name holds no tensor here" (``isinstance(x, (list, tuple))``,
``isinstance(x, np.ndarray)``, ``not torch.is_tensor(x)``, ``x is None``), so that a value
the model took for a tensor is not one on that path; and where ``x.requires_grad`` fails, ``x``
is no tensor that requires grad (unknown there too). The name then holds what the model does
not know; a guard that proves a tensor changes nothing (the model's value stays)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from gradlint.model.classes import class_chain
from gradlint.model.names import dotted
from gradlint.model.values import NONE_VALUE, TENSOR, UNKNOWN_VALUE, Value, plain_tensor

Guards = Tuple[List[str], List[str]]
_NONE: Guards = ([], [])


def type_guards(model: Any, test: Any) -> Guards:
    """The names ``test`` proves hold no tensor: (where it is true, where it is false)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        when_true, when_false = type_guards(model, test.expression)
        return when_false, when_true
    if isinstance(test, cst.BooleanOperation):
        left, right = type_guards(model, test.left), type_guards(model, test.right)
        if isinstance(test.operator, cst.And):
            # both hold in the body; the else only knows that one failed
            return _union(left[0], right[0]), _common(left[1], right[1])
        # `a or b`: the body only knows that one held; both failed in the else
        return _common(left[0], right[0]), _union(left[1], right[1])
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        return _none_test(test)
    if isinstance(test, cst.Call) and len(test.args) == 1 and type(test.func) is cst.Name \
            and test.func.value in ("all", "any") and type(test.args[0].value) is cst.GeneratorExp:
        return _each_test(model, test.func.value, test.args[0].value)
    if isinstance(test, cst.Call) and test.args:
        return _call_test(model, test)
    if isinstance(test, cst.Attribute) and test.attr.value == "requires_grad":
        # `if x.requires_grad: ... else: x.mul_(s)`: where the test fails, x is no tensor that
        # requires grad (the code chose the in-place form for that case): unknown there
        key = dotted(test.value)
        return ([], [key]) if key is not None else _NONE
    return _NONE


def _none_test(test: cst.Comparison) -> Guards:
    """``x is None`` (no tensor when true), ``x is not None`` (none when false)."""
    comp = test.comparisons[0]
    if not (isinstance(comp.comparator, cst.Name) and comp.comparator.value == "None"):
        return _NONE
    key = dotted(test.left)
    if key is None:
        return _NONE
    if isinstance(comp.operator, cst.Is):
        return [key], []
    if isinstance(comp.operator, cst.IsNot):
        return [], [key]
    return _NONE


def none_test_outcome(model: Any, test: Any) -> Optional[bool]:
    """The outcome of ``x is None`` / ``x is not None`` where the model knows it on every path:
    the local name ``x`` holds the literal None (``out = None`` before a loop's first pass). None
    when not known (an attribute may be set by code the model does not see)."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and type(test.left) is cst.Name):
        return None
    comp = test.comparisons[0]
    if not (isinstance(comp.comparator, cst.Name) and comp.comparator.value == "None"):
        return None
    if model.env.get(test.left.value) is not NONE_VALUE:
        return None
    if isinstance(comp.operator, cst.Is):
        return True
    if isinstance(comp.operator, cst.IsNot):
        return False
    return None


def _each_test(model: Any, how: str, gen: cst.GeneratorExp) -> Guards:
    """``all(isinstance(p, list) for p in [x1, x2])``: the element test for each name of the
    literal list; for ``all``, what the test proves where it holds holds for every one in the
    body; for ``any``, what it proves where it fails holds for every one in the else."""
    comp = gen.for_in
    if comp.inner_for_in is not None or comp.ifs or type(comp.target) is not cst.Name \
            or not isinstance(comp.iter, (cst.List, cst.Tuple)):
        return _NONE
    keys = [dotted(el.value) for el in comp.iter.elements]
    if not keys or any(k is None or type(el) is not cst.Element for k, el in zip(keys, comp.iter.elements)):
        return _NONE
    when_true, when_false = type_guards(model, gen.elt)
    var = comp.target.value
    if how == "all" and var in when_true:
        return list(keys), []  # type: ignore[arg-type]
    if how == "any" and var in when_false:
        return [], list(keys)  # type: ignore[arg-type]
    return _NONE


def _call_test(model: Any, call: cst.Call) -> Guards:
    key = dotted(call.args[0].value)
    if key is None:
        return _NONE
    q = model.qualname(call.func)
    proves_tensor: Optional[bool] = None  # true: a tensor when the test holds; false: no tensor
    if q == "torch.is_tensor" or (q is None and (dotted(call.func) or "").rsplit(".", 1)[-1] == "is_tensor"):
        # (also a project's or a backend's own `is_tensor(x)` helper: `F.is_tensor(x)`)
        proves_tensor = True
    elif isinstance(call.func, cst.Name) and call.func.value == "isinstance" and len(call.args) == 2:
        types = call.args[1].value
        names = [el.value for el in types.elements] if isinstance(types, (cst.Tuple, cst.List)) else [types]
        quals = [model.qualname(t) or dotted(t) or "" for t in names]
        if all(x == "torch.Tensor" or x.endswith("Parameter") for x in quals):
            proves_tensor = True
        elif all(x and "Tensor" not in x and "Parameter" not in x and x.rsplit(".", 1)[-1] != "object"
                 and not _tensor_class(model, x) for x in quals):
            proves_tensor = False  # isinstance(x, (np.ndarray, list)), isinstance(x, Sequence)
    if proves_tensor is None:
        return _NONE
    return ([], [key]) if proves_tensor else ([key], [])


def _tensor_class(model: Any, name: str) -> bool:
    """Is ``name`` a class of the file or the project that derives from a tensor class (or from
    a class the model cannot read, which may)?"""
    for _c, info in class_chain(model.classes, name.rsplit(".", 1)[-1]):
        if info is not None and any("Tensor" in b or "Parameter" in b for b in info.bases):
            return True
    return False


def _union(a: List[str], b: List[str]) -> List[str]:
    return a + [k for k in b if k not in a]


def _common(a: List[str], b: List[str]) -> List[str]:
    return [k for k in a if k in b]


def narrow(model: Any, keys: List[str]) -> Dict[str, Value]:
    """Within an expression (a branch of ``a if test else b``): the names of ``keys`` that the
    model holds for tensors hold an unknown value; returns what to put back (``widen``)."""
    saved: Dict[str, Value] = {}
    env = model.env
    for key in keys:
        cur = env.get(key)
        if cur is not None and cur.kind == TENSOR:
            saved[key] = cur
            env[key] = UNKNOWN_VALUE
    return saved


def widen(model: Any, saved: Dict[str, Value]) -> None:
    for key, v in saved.items():
        model.env[key] = v


def requires_grad_guards(test: Any) -> Guards:
    """The names whose ``requires_grad`` ``test`` proves false: (in the body, in the else)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        in_body, in_else = requires_grad_guards(test.expression)
        return in_else, in_body
    if isinstance(test, cst.Attribute) and test.attr.value == "requires_grad":
        key = dotted(test.value)
        return ([], [key]) if key is not None else _NONE
    return _NONE


def no_graph_through(model: Any, keys: List[str]) -> None:
    """Where ``x.requires_grad`` is false: a tensor that requires grad only through ``x`` (made
    from it by operations whose only input that may require grad is ``x``: ``y = torch.sigmoid(x)``,
    model.sole_source) has no graph either."""
    for key in keys:
        x = model.env.get(key)
        if x is None or x.kind != TENSOR or x.rg is False:
            continue
        for k, v in list(model.env.items()):
            if k == key or v.kind != TENSOR or v.rg is False or x.id not in v.deps:
                continue
            src = model.sole_source.get(v.id)
            while src is not None and src != x.id:
                src = model.sole_source.get(src)
            if src == x.id:
                model.env[k] = plain_tensor(cuts=v.cuts)


def made_with_grad_off(model: Any) -> None:
    """Entering the branch of ``if torch.is_grad_enabled()`` that runs with grad off, in a call
    whose grad mode is its caller's (not set in it): what this call computed so far, in that same
    mode, was computed with grad off too, and has no graph (``y = torch.sigmoid(x)`` before
    ``if torch.is_grad_enabled(): ... else: y.mul_(2)``; model.assumed_made)."""
    if not model.grad_assumed or model.grad_enabled is not True:
        return
    frame = model.frames[-1] if model.frames else 0
    made = model.assumed_made
    for k, v in list(model.env.items()):
        if v.kind == TENSOR and v.rg is not False and made.get(v.id) == frame:
            model.env[k] = plain_tensor(cuts=v.cuts)
