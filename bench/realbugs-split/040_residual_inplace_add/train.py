# Source: http://discuss.pytorch.org/t/in-place-operation-and-resnet/10724
# Category: inplace-on-saved
# Expect: raises RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""A residual unit adds the branch output back into x with `x += residual`, but x is the
input conv_1 saved for its backward (reporter's ResidualUnitA raised; ResidualUnitB did not)."""
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
print("trained one step")
