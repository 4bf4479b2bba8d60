# Source: https://github.com/pytorch/pytorch/issues/30454
# Category: function-mutates-input
# Expect: raises RuntimeError: This view was created inside a custom Function (or because an input was returned as-is)
"""A custom autograd.Function doubles its input in place and returns that same tensor (its backward
also doubles grad_output in place); the model then scales the logits in place, and the custom
backward is never called (torch now refuses the in-place op on that output)."""
import torch

from custom_ops.net import Net

torch.manual_seed(0)

bs, in_channel, out_channel = 8, 16, 32
net = Net(in_channel, out_channel)
optimizer = torch.optim.SGD(net.parameters(), lr=1e-4)
dummy_x = torch.rand(bs, in_channel)
for step in range(2):
    optimizer.zero_grad()
    x = net(dummy_x)
    x.mean().backward()
    optimizer.step()
print("fc grad", net.fc.weight.grad.norm().item())
