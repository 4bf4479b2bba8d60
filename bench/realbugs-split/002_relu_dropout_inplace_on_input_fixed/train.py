# Source: https://github.com/pytorch/pytorch/issues/727
# Category: inplace-on-leaf
# Expect: ok
"""The same input-gradient probe with the maintainers' fix: drop the inplace flags so the leaf
input is never written and relu's saved output is never overwritten by dropout."""
import numpy as np
import torch

from nets.head import Head

torch.manual_seed(0)
np.random.seed(0)

x = torch.from_numpy(np.random.randn(4, 6, 10, 10)).float().requires_grad_(True)
model = Head()
result = torch.sum(model(x))
result.backward()
assert x.grad is not None and x.grad.abs().sum() > 0
assert (x.grad[x.detach() < 0] == 0).all()  # relu blocks the gradient of negative inputs
print("input grad norm", x.grad.norm().item())
