# Source: http://discuss.pytorch.org/t/in-place-operation-and-resnet/10724
# Category: inplace-on-saved
# Expect: ok
"""Fixed twin: the residual sum is out of place, so the x that conv_1 saved stays intact
(the thread's ResidualUnitB instead adds in place into the bn_1 output, which no backward needs)."""
import torch
import torch.nn as nn

from resnet import ResidualUnitA

torch.manual_seed(0)

model = ResidualUnitA()
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

images = torch.randn(4, 3, 8, 8)
target = torch.randn(4, 8, 8, 8)

optimizer.zero_grad()
out = model(images)
loss = criterion(out, target)
loss.backward()
optimizer.step()
assert all(p.grad is not None for p in model.parameters())
print("trained one step, every parameter has a gradient")
