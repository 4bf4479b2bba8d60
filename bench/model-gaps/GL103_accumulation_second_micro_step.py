"""Fixture gap from GL103_inplace_through_data.py: bad_decay_while_accumulating_from_second_step -- bad (gradlint should report the marked line).

Missed: w.data.mul_(0.5) runs before anything is saved in the first micro-step, but from the second one on the graph of the previous micro-step (w * w saved w) is alive until loss.backward() after the loop: w.grad is 2*0.5 + 2*0.5 = 2 instead of 2*1 + 2*0.5 = 3, silently. gradlint does not follow the loop back edge.

Run: python3 GL103_accumulation_second_micro_step.py   (shows what torch does);  gradlint check --no-cache GL103_accumulation_second_micro_step.py
"""
import torch
import torch.nn as nn
from gradlint.testing import silently_wrong


@silently_wrong
def bad_decay_while_accumulating_from_second_step():
    w = torch.full((3,), 2.0, requires_grad=True)
    loss = 0.0
    for micro_step in range(2):
        w.data.mul_(0.5)  # error: GL103
        loss = loss + (w * w).sum()
    loss.backward()
    return w.grad, torch.full((3,), 2 * 1.0 + 2 * 0.5)


if __name__ == "__main__":
    import traceback
    try:
        print("result:", bad_decay_while_accumulating_from_second_step())
    except Exception:
        traceback.print_exc()
