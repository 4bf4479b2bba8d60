"""Fixture gap from GL203_detach_then_requires_grad.py: bad_module_attribute_weight_detached -- bad (gradlint should report the marked line).

Missed: w = model[0].weight.detach().requires_grad_() makes a new leaf from the parameter of an nn.Sequential's Linear; the loss is back-propagated through w only, so model[0].weight.grad stays None silently. gradlint does not report it (the parameter reached by indexing an nn.Sequential is not seen as part of a graph).

Run: python3 GL203_sequential_weight_detached.py   (shows what torch does);  gradlint check --no-cache GL203_sequential_weight_detached.py
"""
import torch
import torch.nn as nn
from gradlint.testing import silently_wrong, warns
COPY = "To copy construct from a tensor"


@silently_wrong
def bad_module_attribute_weight_detached():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 1))
    w = model[0].weight.detach().requires_grad_()  # error: GL203
    loss = (torch.randn(4, 3) @ w.T).sum()
    loss.backward()
    return model[0].weight.grad, "a gradient"


if __name__ == "__main__":
    import traceback
    try:
        print("result:", bad_module_attribute_weight_detached())
    except Exception:
        traceback.print_exc()
