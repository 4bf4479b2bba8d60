"""Fixture gap from GL201_numpy_on_graph_tensor.py: bad_history_rebound_late_in_loop -- bad (gradlint should report the marked line).

Missed: last.numpy() is on plain zeros in the first iteration; last = w * 2 at the end of the loop body makes it a tensor that requires grad from the second iteration on, and torch raises "Can't call numpy() on Tensor that requires grad". gradlint does not follow the loop back edge.

Run: python3 GL201_rebound_late_in_loop.py   (shows what torch does);  gradlint check --no-cache GL201_rebound_late_in_loop.py
"""
import numpy as np
import torch
import torch.nn as nn
from gradlint.testing import raises, silently_wrong
NUMPY = "Can't call numpy() on Tensor that requires grad"


@raises(RuntimeError, NUMPY)
def bad_history_rebound_late_in_loop():
    w = torch.ones(3, requires_grad=True)
    last = torch.zeros(3)
    for epoch in range(3):
        arr = last.numpy()  # error: GL201
        loss = (w * 2).sum()
        loss.backward()
        last = w * 2  # meant (w * 2).detach(): from the second iteration on, last requires grad


if __name__ == "__main__":
    import traceback
    try:
        print("result:", bad_history_rebound_late_in_loop())
    except Exception:
        traceback.print_exc()
