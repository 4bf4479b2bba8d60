# Source: https://github.com/pytorch/pytorch/issues/55980
# Category: inplace-on-saved
# Expect: ok
"""The maintainers' fix: multiply a clone of the slice, so the tensor saved by the multiply is not
the one the slice assignment overwrites."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Model(nn.Module):
    def __init__(self, channels=8):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3)

    def forward(self, x, y):
        x = self.conv(x)
        y = self.conv(y)
        var = y[0].mean(dim=(1, 2))
        x[0, :, 0, 0] = x[0, :, 0, 0].clone() * var
        var.register_hook(lambda grad: print("var grad", grad.sum().item()))
        return torch.mean(x)


model = Model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(2, 8, 5, 5), torch.randn(2, 8, 5, 5)
before = model.conv.weight.detach().clone()
for step in range(2):
    optimizer.zero_grad()
    loss = model(x, y)
    loss.backward()
    optimizer.step()
assert torch.isfinite(model.conv.weight.grad).all()
assert not torch.equal(before, model.conv.weight.detach())
print("conv weight grad", model.conv.weight.grad.norm().item())
