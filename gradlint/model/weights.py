"""Layer weights saved by the graph: which op output keeps which torch.nn layer's weight for its
backward, and under which name each frame of the walk knows that layer (rule GL503: an
optimizer's step() between the forward that saved a weight and the backward that needs it).

torch (2.13) facts, checked: ``Linear`` saves its weight for the input's gradient only when the
input requires grad; ``Conv1d``/``Conv2d``/``Conv3d`` save it whenever the output requires grad
(a first layer applied to data, its weight trainable, too: the convolution's backward saves
both operands); an ``nn.Sequential`` runs its layers in order, so a layer's input requires grad
once the sequence's input does or an earlier layer with trainable parameters ran;
``optimizer.step()`` writes in place (a new version) each parameter that has a ``.grad``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from gradlint.model.layersaves import SAVES_WEIGHT, SAVES_WEIGHT_ALWAYS
from gradlint.model.names import dotted
from gradlint.model.values import flatten

# recurrent layers: given an input or a hidden state that requires grad, the step multiplies it by
# a weight, which is saved for that input's gradient (checked: LSTM, GRUCell)
RECURRENT = frozenset("torch.nn." + n for n in "RNN LSTM GRU RNNCell LSTMCell GRUCell".split())


class WeightMixin:
    def record_saved_weights(self, module: Any, args: List[Any], out: Any, node: Any) -> None:
        """``out`` is the output of the layer or ``nn.Sequential`` ``module`` called at ``node``:
        note the trainable weights it saved, each with the key of its layer in every frame of the
        walk (``weight_saves``)."""
        if type(node) is not cst.Call:
            return  # (also on a loop's second pass: the carried state there requires grad, loops.py)
        key = dotted(node.func)
        if key is not None and key.endswith(".forward"):
            key = key[: -len(".forward")]
        if key is None:
            return
        rg = any(a.kind == "tensor" and a.rg is True for a in args)
        saved: List[Tuple[Any, str]] = []
        if module.node in SAVES_WEIGHT:
            if rg or module.node in SAVES_WEIGHT_ALWAYS:
                saved.append((module, key))
        elif module.node in RECURRENT:
            if any(t.kind == "tensor" and t.rg is True for a in args for t in flatten(a)):
                saved.append((module, key))  # `lstm(x, (h, c))` with a state that requires grad
        elif module.items and module.node is None and all(i.kind == "module" for i in module.items):
            for i, layer in enumerate(module.items):  # an nn.Sequential of layers given in place
                if layer.node in SAVES_WEIGHT and (rg or layer.node in SAVES_WEIGHT_ALWAYS):
                    saved.append((layer, f"{key}[{i}]"))
                if layer.params is True:
                    rg = True
                elif layer.params is not False:
                    break  # a layer the model does not know: what follows is not known either
        found = []
        for layer, k in saved:
            if layer.params is not True or self.frozen(k):  # type: ignore[attr-defined]
                continue  # a frozen weight gets no gradient: step() leaves it
            keys = self._keys_by_frame(k)
            if keys:
                found.append((layer, keys))
        if found:
            self.weight_saves[out.id] = found  # type: ignore[attr-defined]

    def frame_names(self, fn: Any, keys: Dict[str, Optional[str]], receiver: Any,
                    receiver_key: Optional[str]) -> Dict[str, Optional[str]]:
        """A walked call's frame: each parameter -> the caller's key for its argument, and the
        receiver's parameter (``self``) -> the caller's key for the receiver (for a module's
        forward, the module called: ``pending_owner``)."""
        names = dict(keys)
        owner = receiver_key if receiver_key is not None else self.pending_owner
        self.pending_owner = None
        positional = list(getattr(fn.params, "posonly_params", ())) + list(fn.params.params) \
            if type(fn) is cst.FunctionDef else []
        static = type(fn) is cst.FunctionDef and any(
            (dotted(d.decorator) or "").rsplit(".", 1)[-1] in ("staticmethod", "classmethod") for d in fn.decorators)
        if receiver is not None and positional and not static:
            names[positional[0].name.value] = owner
        return names

    def _keys_by_frame(self, key: str) -> Dict[int, str]:
        """``key`` (a name in the frame being walked) as each enclosing frame names it, through
        the arguments and receivers of the walked calls (``self.net`` in ``forward``, called as
        ``d(x)``: ``d.net``); frames where it has no name are left out. Levels count the walked
        calls (``call_statements``): a one-expression function is evaluated in its caller's."""
        level = len(self.call_statements)  # type: ignore[attr-defined]
        out = {level: key}
        for inline, names in reversed(self.frame_keys):  # type: ignore[attr-defined]
            head, sep, rest = _split(key)
            caller: Optional[str] = names.get(head)
            if caller is None:
                break
            key = caller + sep + rest
            if not inline:
                level -= 1
            out[level] = key
        return out


def _split(key: str) -> Tuple[str, str, str]:
    cut = min((i for i in (key.find("."), key.find("[")) if i > 0), default=len(key))
    return key[:cut], key[cut:cut + 1], key[cut + 1:]


def covers(owner: str, key: str) -> bool:
    """Is ``key`` the module ``owner`` or a part of it (``d``, ``d.net[0]``)?"""
    return key == owner or key.startswith(owner + ".") or key.startswith(owner + "[")
