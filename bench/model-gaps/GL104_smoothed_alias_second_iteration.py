"""Fixture gap from GL104_inplace_on_detached_alias.py: bad_smoothed_alias_from_second_step -- bad (gradlint should report the marked line).

Missed: smoothed.mul_(0.9) is on plain zeros in the first iteration; from the second on, smoothed = h.detach() aliases the previous iteration's sigmoid output, which SigmoidBackward saved for total.backward() after the loop: backward() raises 'modified by an inplace operation'. gradlint does not follow the loop back edge.

Run: python3 GL104_smoothed_alias_second_iteration.py   (shows what torch does);  gradlint check --no-cache GL104_smoothed_alias_second_iteration.py
"""
import torch
import torch.nn as nn
from gradlint.testing import raises, silently_wrong
MODIFIED = "modified by an inplace operation"


@raises(RuntimeError, MODIFIED)
def bad_smoothed_alias_from_second_step():
    w = torch.rand(3, requires_grad=True)
    total = 0.0
    smoothed = torch.zeros(3)
    for t in range(3):
        smoothed.mul_(0.9)  # error: GL104
        h = torch.sigmoid(w * (t + 1))
        total = total + h.sum()
        smoothed = h.detach()  # meant h.detach().clone()
    total.backward()


if __name__ == "__main__":
    import traceback
    try:
        print("result:", bad_smoothed_alias_from_second_step())
    except Exception:
        traceback.print_exc()
