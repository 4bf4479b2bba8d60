"""Fixture gap from GL102_inplace_on_saved_output.py: bad_hidden_state_decayed_in_place_from_second_step -- bad (gradlint should report the marked line).

Missed: state.mul_(0.9) is on plain zeros in the first iteration; from the second on, state is the output of torch.tanh from the previous iteration (saved by TanhBackward, and the graph is alive until total.backward() after the loop): backward() raises 'modified by an inplace operation'. gradlint does not follow the loop back edge.

Run: python3 GL102_hidden_state_second_iteration.py   (shows what torch does);  gradlint check --no-cache GL102_hidden_state_second_iteration.py
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from gradlint.testing import raises
MODIFIED = "modified by an inplace operation"


@raises(RuntimeError, MODIFIED)
def bad_hidden_state_decayed_in_place_from_second_step():
    w = torch.rand(3, requires_grad=True)
    xs = torch.randn(3, 3)
    state = torch.zeros(3)
    total = 0.0
    for t in range(3):
        state.mul_(0.9)  # error: GL102
        state = torch.tanh(state + xs[t] * w)
        total = total + state.sum()
    total.backward()


if __name__ == "__main__":
    import traceback
    try:
        print("result:", bad_hidden_state_decayed_in_place_from_second_step())
    except Exception:
        traceback.print_exc()
