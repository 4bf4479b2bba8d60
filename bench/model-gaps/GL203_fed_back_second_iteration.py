"""Fixture gap from GL203_detach_then_requires_grad.py: bad_fed_back_prediction_from_second_step -- bad (gradlint should report the marked line).

Missed: inp is data (torch.ones) in the first iteration; inp = w * 2 at the end of the loop body makes inp.detach().requires_grad_() cut w's graph from the second iteration on, and total.backward() after the loop leaves w.grad None. gradlint does not follow the loop back edge.

Run: python3 GL203_fed_back_second_iteration.py   (shows what torch does);  gradlint check --no-cache GL203_fed_back_second_iteration.py
"""
import torch
import torch.nn as nn
from gradlint.testing import silently_wrong, warns
COPY = "To copy construct from a tensor"


@silently_wrong
def bad_fed_back_prediction_from_second_step():
    w = torch.ones(3, requires_grad=True)
    inp = torch.ones(3)
    total = 0.0
    for step in range(2):
        x = inp.detach().requires_grad_()  # error: GL203
        total = total + (x * 3).sum()
        inp = w * 2  # from the second iteration on, inp is part of w's graph
    total.backward()
    return w.grad, torch.full((3,), 6.0)


if __name__ == "__main__":
    import traceback
    try:
        print("result:", bad_fed_back_prediction_from_second_step())
    except Exception:
        traceback.print_exc()
