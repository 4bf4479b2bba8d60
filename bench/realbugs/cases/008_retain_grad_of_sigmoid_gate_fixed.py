# Source: https://github.com/pytorch/pytorch/issues/3890
# Category: requires-grad-non-leaf
# Expect: ok
"""The sigmoid output already requires grad because it is computed from parameters; calling only
`retain_grad()` keeps its gradient after backward."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class GatedLayer(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.gate_logits = nn.Linear(n, n)

    def forward(self, x):
        s = torch.sigmoid(self.gate_logits(x))
        s.retain_grad()
        self.last_gate = s
        return s * x


layer = GatedLayer(3)
x = torch.zeros(3, 3, requires_grad=True)
total = torch.sum(layer(x + 1.0))
total.backward()
assert layer.last_gate.grad is not None
assert torch.allclose(layer.last_gate.grad, torch.ones(3, 3))  # d(sum(s * 1))/ds
print("gate grad", layer.last_gate.grad)
