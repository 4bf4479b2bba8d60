# Source: https://github.com/pytorch/pytorch/issues/2677
# Category: non-leaf-grad-read
# Expect: warns UserWarning: The .grad attribute of a Tensor that is not a leaf Tensor is being accessed
"""The reporter runs a Conv2d on an input that requires grad, backprops the summed output and prints the conv
output's .grad before and after backward, expecting dL/dy; y is not a leaf, so its gradient is not kept (None)."""
import torch
import torch.nn as nn

torch.manual_seed(0)

x = torch.rand(8, 1, 5, 5, requires_grad=True)
conv = nn.Conv2d(1, 1, 3)
y = conv(x)  # BUG: non-leaf-grad-read
final = torch.sum(y)
print('y.grad before', y.grad)
final.backward()
print('y.grad', y.grad)
print('y.requires_grad', y.requires_grad)
print('x.grad', tuple(x.grad.shape))
assert y.grad is None and x.grad is not None
