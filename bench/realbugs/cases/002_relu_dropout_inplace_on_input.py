# Source: https://github.com/pytorch/pytorch/issues/727
# Category: inplace-on-leaf
# Expect: raises RuntimeError: a leaf Variable that requires grad is being used in an in-place operation
"""An input batch that requires grad (to inspect input gradients) goes straight through
F.relu(inplace=True) and F.dropout(inplace=True); the first in-place op hits the leaf itself."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
np.random.seed(0)


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(6, 2, 3)

    def forward(self, x):
        x = F.relu(x, inplace=True)  # BUG: inplace-on-leaf
        x = F.dropout(x, p=0.1, inplace=True)  # BUG: inplace-on-saved
        return self.conv(x)


x = torch.from_numpy(np.random.randn(4, 6, 10, 10)).float().requires_grad_(True)
model = Head()
result = torch.sum(model(x))
result.backward()
print("input grad norm", x.grad.norm().item())
