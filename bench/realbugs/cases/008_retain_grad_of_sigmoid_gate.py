# Source: https://github.com/pytorch/pytorch/issues/3890
# Category: requires-grad-non-leaf
# Expect: raises RuntimeError: you can only change requires_grad flags of leaf variables
"""To read the gradient of an intermediate sigmoid output the reporter sets `requires_grad = True`
on it before `retain_grad()`; torch refuses to change the flag of a non-leaf."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class GatedLayer(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.gate_logits = nn.Linear(n, n)

    def forward(self, x):
        s = torch.sigmoid(self.gate_logits(x))
        s.requires_grad = True  # BUG: requires-grad-non-leaf
        s.retain_grad()
        self.last_gate = s
        return s * x


layer = GatedLayer(3)
x = torch.zeros(3, 3, requires_grad=True)
total = torch.sum(layer(x + 1.0))
total.backward()
assert layer.last_gate.grad is not None
print("gate grad", layer.last_gate.grad)
