"""Fixture gap from GL202_scalar_roundtrip.py: bad_norm_cached_from_previous_step -- bad (gradlint should report the marked line).

Missed: norm is the constant 1.0 in the first iteration; norm = float(w.norm()) at the end of the loop body makes it a number taken out of w from the second iteration on, so loss = (w / norm).sum() there silently ignores the norm's dependence on w (w.grad = [0.2, 0.2] instead of the true gradient). gradlint does not follow the loop back edge.

Run: python3 GL202_norm_cached_second_iteration.py   (shows what torch does);  gradlint check --no-cache GL202_norm_cached_second_iteration.py
"""
import math
import torch
import torch.nn as nn
from gradlint.testing import silently_wrong
_W0 = [3.0, 4.0]
_X = [1.0, 2.0]


@silently_wrong
def bad_norm_cached_from_previous_step():
    w = torch.tensor([3.0, 4.0], requires_grad=True)
    norm = 1.0
    for step in range(2):
        w.grad = None
        loss = (w / norm).sum()  # error: GL202
        loss.backward()
        norm = float(w.norm())  # from the second iteration on, a number taken from w
    n = torch.tensor([3.0, 4.0]).norm()
    expected = torch.ones(2) / n - torch.tensor([3.0, 4.0]) * 7.0 / n**3
    return w.grad, expected


if __name__ == "__main__":
    import traceback
    try:
        print("result:", bad_norm_cached_from_previous_step())
    except Exception:
        traceback.print_exc()
