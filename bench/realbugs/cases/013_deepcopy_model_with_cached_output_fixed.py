# Source: https://github.com/pytorch/pytorch/issues/54580
# Category: deepcopy-non-leaf
# Expect: ok
"""The activation is cached as a detached tensor and forward returns the live one, so the model
holds no graph node and `deepcopy(model)` works after training."""
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
        self.exp = x.detach()
        return x


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
input = torch.randn(2, 1, 16, 16)
output = model(input)
loss = output.pow(2).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()

copyModel = deepcopy(model)
assert all(torch.equal(a, b) for a, b in zip(model.parameters(), copyModel.parameters()))
assert copyModel.con1.weight is not model.con1.weight
print("snapshot taken", sum(p.numel() for p in copyModel.parameters()))
