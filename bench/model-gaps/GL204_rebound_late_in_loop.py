"""Fixture gap from GL204_tensor_copy_construct.py: bad_previous_output_rebound_late_in_loop -- bad (gradlint should report the marked line).

Missed: prev is a list in the first iteration; prev = out at the end of the loop body makes torch.tensor(prev) a copy construct of a tensor from the second iteration on, and torch warns 'To copy construct from a tensor'. gradlint does not follow the loop back edge.

Run: python3 GL204_rebound_late_in_loop.py   (shows what torch does);  gradlint check --no-cache GL204_rebound_late_in_loop.py
"""
import torch
import torch.nn as nn
from gradlint.testing import silently_wrong, warns
COPY = "To copy construct from a tensor"


@warns(UserWarning, COPY)
def bad_previous_output_rebound_late_in_loop():
    w = torch.ones(3, requires_grad=True)
    prev = [0.0, 0.0, 0.0]
    for step in range(3):
        x = torch.tensor(prev)  # warning: GL204
        out = w * x + 1
        out.sum().backward()
        prev = out  # meant out.tolist(): from the second iteration on, prev is a tensor


if __name__ == "__main__":
    import traceback
    try:
        print("result:", bad_previous_output_rebound_late_in_loop())
    except Exception:
        traceback.print_exc()
