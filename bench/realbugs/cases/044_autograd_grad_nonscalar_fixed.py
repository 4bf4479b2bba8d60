# Source: https://stackoverflow.com/questions/54754153/autograd-grad-for-tensor-in-pytorch/54757383
# Category: nonscalar-backward
# Expect: ok
"""Fixed twin: the non-scalar Y gets explicit grad_outputs (ones), which gives the summed
gradient dsum(Y)/dX, as the accepted answer shows."""
import torch
import torch.nn as nn
from torch.autograd import grad

torch.manual_seed(0)


class ConvNet(nn.Module):
    def __init__(self, m=12, n=5):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(1, 4, kernel_size=3, padding=1), nn.ReLU(),
            nn.Conv1d(4, 2, kernel_size=3, padding=1), nn.ReLU(),
        )
        self.head = nn.Linear(2 * m, n)

    def forward(self, x):
        h = self.conv(x.unsqueeze(1))
        return self.head(h.flatten(1))


net = ConvNet()
X = torch.randn(8, 12, requires_grad=True)
Y = net(X)

dY_dX = grad(outputs=Y, inputs=X, grad_outputs=torch.ones_like(Y), create_graph=True)[0]
penalty = dY_dX.pow(2).mean()
penalty.backward()

reference = grad(net(X).sum(), X)[0]
assert dY_dX.shape == X.shape
assert torch.allclose(dY_dX.detach(), reference)
assert net.head.weight.grad is not None
print("dY/dX", tuple(dY_dX.shape), "penalty", penalty.item())
