"""Training and eval mode of modules, flow-sensitively: ``m.eval()`` (or ``m.train(False)``)
sets ``m.training`` to False on ``m`` and every submodule, ``m.train()`` back to True. The
model keeps it as the attribute ``m.training`` (``EVAL`` or ``TRAINING``), so a method walked
for ``m`` sees it as ``self.training``. In eval mode a dropout writes nothing: an in-place
``nn.Dropout(inplace=True)`` called there, or ``F.dropout(x, training=self.training,
inplace=True)``, is no in-place write."""

from __future__ import annotations

from typing import Any, Optional

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
