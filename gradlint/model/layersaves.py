"""What torch.nn layers save for backward (an in-place write to a saved tensor before backward()
raises there: GL102), as far as the model claims it; each claim is checked in the fixtures."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gradlint.model.syntax import const_bool, kwvalue
from gradlint.model.values import MODULE, Value

# Linear/Conv save their weight (for the input's gradient) and their input (for the weight's);
# Linear its weight only when the input requires grad, a convolution whenever its output does
# (torch 2.13, checked: a Conv applied to data keeps its weight for backward, a Linear does not)
SAVES_WEIGHT = frozenset("torch.nn." + n for n in "Linear Conv1d Conv2d Conv3d".split())
SAVES_WEIGHT_ALWAYS = frozenset("torch.nn." + n for n in "Conv1d Conv2d Conv3d".split())
# layers that save their input whenever their output requires grad (torch 2.13: native_layer_norm,
# native_group_norm; with the input requiring grad, or the affine weight trainable)
SAVES_INPUT = frozenset({"torch.nn.LayerNorm", "torch.nn.GroupNorm"})


def input_layer(module: Value) -> Optional[Value]:
    """The layer that receives a module call's input: the module, or the first layer of an
    ``nn.Sequential`` whose layers are known by position."""
    if isinstance(module.node, str):
        return module
    if module.node is None and module.items and module.keys is None and module.made is None \
            and module.items[0].kind == MODULE:
        return module.items[0]
    return None


def affine(layer: Value) -> bool:
    """Was the norm layer built with its weight (no ``elementwise_affine=False`` / ``affine=False``)?"""
    made = layer.made_node
    if type(made) is not cst.Call:
        return False
    return all(const_bool(kwvalue(made, k)) is not False for k in ("elementwise_affine", "affine"))
