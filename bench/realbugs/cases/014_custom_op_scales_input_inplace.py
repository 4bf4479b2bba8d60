# Source: https://github.com/pytorch/pytorch/issues/30454
# Category: function-mutates-input
# Expect: raises RuntimeError: This view was created inside a custom Function (or because an input was returned as-is)
"""A custom autograd.Function doubles its input in place and returns that same tensor (its backward
also doubles grad_output in place); the model then scales the logits in place, and the custom
backward is never called (torch now refuses the in-place op on that output)."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class CustomOp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x *= 2.0  # BUG: function-mutates-input
        return x

    @staticmethod
    def backward(ctx, grad_output):
        print("Running in backward...")
        grad_output *= 2.0  # BUG: function-mutates-grad-output
        return grad_output


def custom_op(x):
    return CustomOp.apply(x)


class Net(nn.Module):
    def __init__(self, in_channel, out_channel, scale=400.0):
        super().__init__()
        self.fc = nn.Linear(in_channel, out_channel)
        self.s = scale

    def forward(self, input):
        x = self.fc(input)
        logits = custom_op(x)
        logits *= self.s
        return logits


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
