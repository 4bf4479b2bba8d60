# Source: http://discuss.pytorch.org/t/in-place-operation-and-resnet/10724
# Category: inplace-on-saved
# Expect: raises RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""A residual unit adds the branch output back into x with `x += residual`, but x is the
input conv_1 saved for its backward (reporter's ResidualUnitA raised; ResidualUnitB did not)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class ResidualUnitA(nn.Module):
    def __init__(self):
        super(ResidualUnitA, self).__init__()
        self.conv_0 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn_0 = nn.BatchNorm2d(8)
        self.conv_1 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn_1 = nn.BatchNorm2d(8)

    def forward(self, x):
        x = self.conv_0(x)
        x = self.bn_0(x)
        x = F.relu(x, inplace=True)

        residual = self.conv_1(x)
        residual = self.bn_1(residual)
        x += residual  # BUG: inplace-on-saved
        x = F.relu(x, inplace=True)
        return x


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
