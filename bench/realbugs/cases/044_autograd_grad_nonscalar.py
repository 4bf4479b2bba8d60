# Source: https://stackoverflow.com/questions/54754153/autograd-grad-for-tensor-in-pytorch/54757383
# Category: nonscalar-backward
# Expect: raises RuntimeError: grad can be implicitly created only for scalar outputs
"""For a new loss term the reporter wants dY/dX of a conv net's (batch x n) output w.r.t.
its (batch x m) input, like tf.gradients, and calls autograd.grad on the non-scalar Y."""
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

dY_dX = grad(outputs=Y, inputs=X, create_graph=True)[0]  # BUG: nonscalar-backward
penalty = dY_dX.pow(2).mean()
penalty.backward()
print(penalty.item())
