# Source: https://github.com/pytorch/pytorch/issues/54580
# Category: deepcopy-non-leaf
# Expect: raises RuntimeError: Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol
"""A model caches its last activation on `self.exp` inside a helper called from forward; a later
`deepcopy(model)` (here for a snapshot after a training step) trips over that non-leaf tensor."""
from copy import deepcopy

import torch
import torch.nn as nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.con1 = nn.Conv2d(1, 2, 3)
        self.con2 = nn.Conv2d(2, 1, 3)

    def forward(self, x):
        return self.func(x)

    def func(self, x):
        self.exp = None
        x = self.con1(x)
        x = self.con2(x)
        self.exp = x  # BUG: deepcopy-non-leaf
        return self.exp  # BUG: deepcopy-non-leaf


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
input = torch.randn(2, 1, 16, 16)
output = model(input)
loss = output.pow(2).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()

copyModel = deepcopy(model)
print("snapshot taken", sum(p.numel() for p in copyModel.parameters()))
