"""Fixture gap from GL101_inplace_on_leaf.py: bad_name_rebound_late_in_loop -- bad (gradlint should report the marked line).

Missed: scale.mul_(0.5) is on a plain tensor in the first iteration, but scale = w at the end of the loop body makes it the leaf w from the second iteration on; torch raises 'a leaf Variable that requires grad ...' there. gradlint does not follow the loop back edge for this name.

Run: python3 GL101_rebound_late_in_loop.py   (shows what torch does);  gradlint check --no-cache GL101_rebound_late_in_loop.py
"""
import torch
import torch.nn as nn
from torch import nn as tnn
from gradlint.testing import raises
LEAF = "a leaf Variable that requires grad is being used in an in-place operation"
VIEW = "a view of a leaf Variable that requires grad is being used in an in-place operation"


@raises(RuntimeError, LEAF)
def bad_name_rebound_late_in_loop():
    w = torch.randn(3, requires_grad=True)
    x = torch.randn(3)
    scale = torch.ones(3)
    for step in range(3):
        scale.mul_(0.5)  # error: GL101
        loss = (w * scale * x).sum()
        loss.backward()
        scale = w  # meant w.detach().clone(): from the second iteration on, scale is the leaf


if __name__ == "__main__":
    import traceback
    try:
        print("result:", bad_name_rebound_late_in_loop())
    except Exception:
        traceback.print_exc()
