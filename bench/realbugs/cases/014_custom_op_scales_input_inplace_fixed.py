# Source: https://github.com/pytorch/pytorch/issues/30454
# Category: function-mutates-input
# Expect: ok
"""The custom Function computes its output and its gradient out of place, so it owns a fresh
output tensor; the model's in-place scaling of the logits is then fine and the custom backward runs."""
import torch
import torch.nn as nn

torch.manual_seed(0)
calls = []


class CustomOp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, grad_output):
        calls.append(1)
        return grad_output * 2.0


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
dummy_x = torch.rand(bs, in_channel)
x = net(dummy_x)
x.mean().backward()
assert calls, "custom backward was not called"
expected = 2.0 * 400.0 * dummy_x.mean(0).expand(out_channel, in_channel) / out_channel
assert torch.allclose(net.fc.weight.grad, expected, rtol=1e-4)
print("custom backward ran", len(calls), "time(s); fc grad", net.fc.weight.grad.norm().item())
