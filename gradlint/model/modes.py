"""Training and eval mode of modules, flow-sensitively: ``m.eval()`` (or ``m.train(False)``)
sets ``m.training`` to False on ``m`` and every submodule, ``m.train()`` back to True. The
model keeps it as the attribute ``m.training`` (``EVAL`` or ``TRAINING``), so a method walked
for ``m`` sees it as ``self.training``. A branch on the flag says the mode on its paths: the
body of ``if not self.training:`` and the ``else`` of ``if self.training:`` (and the code after
``if self.training: return ...``) run in eval mode (``eval_branches``). In eval mode a dropout
writes nothing: an in-place ``nn.Dropout(inplace=True)`` called there, or ``F.dropout(x,
training=self.training, inplace=True)``, is no in-place write (measured on torch 2.13: the
input's version counter does not move, and backward through the saved output runs)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from gradlint.model.names import dotted
from gradlint.model.syntax import const_bool
from gradlint.model.values import CONST, Value

EVAL = Value(CONST)
TRAINING = Value(CONST)

DROPOUT_MODULES = frozenset("Dropout Dropout1d Dropout2d Dropout3d AlphaDropout FeatureAlphaDropout".split())


def set_mode(model: Any, key: Optional[str], attr: str, node: cst.Call, receiver: Value) -> None:
    """``key.eval()``, ``key.train(flag)``; on a module no name holds yet (``Net().eval()``),
    that module object is in eval mode."""
    if attr == "eval":
        training: Optional[bool] = False
    else:
        args = [a for a in node.args if a.keyword is None or a.keyword.value == "mode"]
        training = True if not node.args else const_bool(args[0].value) if args else None
    if key is None:
        if training is False and type(node.func) is cst.Attribute and type(node.func.value) is cst.Call:
            model.eval_ids.add(receiver.id)
        return
    model.bind_key(key + ".training", EVAL if training is False else TRAINING)


def in_eval(model: Any, key: Optional[str]) -> bool:
    """Is the module ``key`` (or a module it belongs to) in eval mode here?"""
    if key is None:
        return False
    env = model.env
    cut = len(key)
    while cut > 0:
        v = env.get(key[:cut] + ".training")
        if v is not None:
            return v is EVAL  # (the innermost mode set wins)
        v = env.get(key[:cut])
        if v is not None and v.id in model.eval_ids:
            return True
        cut = max(key.rfind(".", 0, cut), key.rfind("[", 0, cut))
    return False


def dropout_in_eval(model: Any, q: str, node: cst.Call) -> bool:
    """``F.dropout(x, p, self.training, inplace=True)`` with the module in eval mode."""
    if "dropout" not in q:
        return False
    arg = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "training"), None)
    if arg is None:
        pos = [a for a in node.args if a.keyword is None]
        arg = pos[2].value if len(pos) > 2 and not any(a.star for a in pos[:3]) else None
    key = dotted(arg) if arg is not None else None
    return key is not None and key.endswith(".training") and in_eval(model, key[: -len(".training")])


def eval_branches(test: cst.BaseExpression) -> Tuple[List[str], List[str]]:
    """The modules that an ``if`` test shows in eval mode: (in its body, in its ``else``). The
    body of ``if not m.training:`` (or ``if not m.training and ...``), the ``else`` of
    ``if m.training:`` (or ``if m.training or ...``)."""
    return _eval_when(test, True), _eval_when(test, False)


def _eval_when(test: Any, outcome: bool) -> List[str]:
    """The modules whose ``training`` flag is False whenever ``test`` evaluates to ``outcome``."""
    t = type(test)
    if t is cst.Attribute and test.attr.value == "training":
        key = dotted(test.value)
        return [key] if key is not None and not outcome else []
    if t is cst.UnaryOperation and type(test.operator) is cst.Not:
        return _eval_when(test.expression, not outcome)
    if t is cst.BooleanOperation:
        # `a and b` true: both are; `a or b` false: both are
        if (type(test.operator) is cst.And) == outcome:
            return _eval_when(test.left, outcome) + _eval_when(test.right, outcome)
    return []


def enter_eval(model: Any, keys: List[str]) -> None:
    """A path on which the modules ``keys`` are in eval mode (``eval_branches``)."""
    for key in keys:
        model.bind_key(key + ".training", EVAL)


def settle_modes(keys: List[str], before: Dict[str, Value], ends: List[Dict[str, Value]],
                 joined: Dict[str, Value]) -> None:
    """After the ``if``: a mode the walk knew before it is still known where the paths differ
    only by what the test showed (the test changes no mode)."""
    for key in keys:
        k = key + ".training"
        was = before.get(k)
        if was is not None and k not in joined and all(e.get(k) is was or e.get(k) is EVAL for e in ends):
            joined[k] = was


def enter_eval_scope(model: Any, keys: List[str]) -> Dict[str, Optional[Value]]:
    """A branch of a conditional expression on which the modules ``keys`` are in eval mode
    (``h if self.training else self.drop(h)``): what their flags held, for ``leave_eval_scope``."""
    saved: Dict[str, Optional[Value]] = {}
    for key in keys:
        k = key + ".training"
        if k not in saved:
            saved[k] = model.env.get(k)
            if k not in model.env:
                model._dotted_keys += 1
            model.env[k] = EVAL
    return saved


def leave_eval_scope(model: Any, saved: Dict[str, Optional[Value]]) -> None:
    for k, v in saved.items():
        if v is None:
            model.unbind(k)
        else:
            model.env[k] = v
