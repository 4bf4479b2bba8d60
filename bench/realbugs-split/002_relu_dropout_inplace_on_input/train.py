# Source: https://github.com/pytorch/pytorch/issues/727
# Category: inplace-on-leaf
# Expect: raises RuntimeError: a leaf Variable that requires grad is being used in an in-place operation
"""An input batch that requires grad (to inspect input gradients) goes straight through
F.relu(inplace=True) and F.dropout(inplace=True); the first in-place op hits the leaf itself."""
import numpy as np
import torch

from nets.head import Head

torch.manual_seed(0)
np.random.seed(0)

x = torch.from_numpy(np.random.randn(4, 6, 10, 10)).float().requires_grad_(True)
model = Head()
result = torch.sum(model(x))
result.backward()
print("input grad norm", x.grad.norm().item())
