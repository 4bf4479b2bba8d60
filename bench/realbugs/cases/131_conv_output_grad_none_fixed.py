# Source: https://github.com/pytorch/pytorch/issues/2677
# Category: non-leaf-grad-read
# Expect: ok
"""As the maintainers answered: call y.retain_grad() before backward to keep the gradient of the intermediate conv
output; then y.grad holds dL/dy (all ones for a sum)."""
import torch
import torch.nn as nn

torch.manual_seed(0)

x = torch.rand(8, 1, 5, 5, requires_grad=True)
conv = nn.Conv2d(1, 1, 3)
y = conv(x)
y.retain_grad()
final = torch.sum(y)
print('y.grad before', y.grad)
final.backward()
print('y.grad', y.grad)
print('y.requires_grad', y.requires_grad)
print('x.grad', tuple(x.grad.shape))
assert x.grad is not None and torch.equal(y.grad, torch.ones_like(y))
