# Source: https://github.com/pytorch/pytorch/issues/30454
# Category: function-mutates-input
# Expect: ok
"""The custom Function computes its output and its gradient out of place, so it owns a fresh
output tensor; the model's in-place scaling of the logits is then fine and the custom backward runs."""
import torch

from custom_ops.function import calls
from custom_ops.net import Net

torch.manual_seed(0)

bs, in_channel, out_channel = 8, 16, 32
net = Net(in_channel, out_channel)
dummy_x = torch.rand(bs, in_channel)
x = net(dummy_x)
x.mean().backward()
assert calls, "custom backward was not called"
expected = 2.0 * 400.0 * dummy_x.mean(0).expand(out_channel, in_channel) / out_channel
assert torch.allclose(net.fc.weight.grad, expected, rtol=1e-4)
print("custom backward ran", len(calls), "time(s); fc grad", net.fc.weight.grad.norm().item())
