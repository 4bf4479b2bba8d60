"""Fixture gap from GL205_loss_rewrap.py: bad_loss_rewrapped_late_in_loop -- bad (gradlint should report the marked line).

Missed + false alarm: the first iteration back-propagates the real loss; loss = torch.tensor(mse(...).item(), requires_grad=True) at the end of the loop body makes loss.backward() a re-wrapped leaf from the second iteration on, so model.weight.grad stays None (after opt.zero_grad()). gradlint misses GL205 there and instead reports GL502 ('the second iteration goes through [the graph built before the loop] again: torch raises') at the statement before the loop, which is false: loss is rebound before the second backward() and torch raises nothing.

Run: python3 GL205_rewrapped_late_in_loop.py   (shows what torch does);  gradlint check --no-cache GL205_rewrapped_late_in_loop.py
"""
import torch
import torch.nn as nn
from gradlint.testing import silently_wrong


def _data():
    torch.manual_seed(0)
    return nn.Linear(3, 1), torch.randn(4, 3), torch.randn(4, 1)


@silently_wrong
def bad_loss_rewrapped_late_in_loop():
    model, x, y = _data()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = nn.functional.mse_loss(model(x), y)
    for step in range(2):
        opt.zero_grad()
        loss.backward()  # error: GL205
        opt.step()
        loss = torch.tensor(nn.functional.mse_loss(model(x), y).item(), requires_grad=True)
    return model.weight.grad, "a gradient"


if __name__ == "__main__":
    import traceback
    try:
        print("result:", bad_loss_rewrapped_late_in_loop())
    except Exception:
        traceback.print_exc()
