# Source: https://github.com/pytorch/pytorch/issues/1291
# Category: module-in-forward
# Expect: ok
"""The ThreeLayerNet with its Linear layers created once in __init__ as attributes, so they are
registered parameters that the optimizer trains across iterations."""
import torch

from config import D_in, D_out, H, N
from model import ThreeLayerNet

torch.manual_seed(0)

x = torch.randn(N, D_in)
y = torch.randn(N, D_out)
model = ThreeLayerNet(D_in, H, D_out)
criterion = torch.nn.MSELoss(reduction="sum")
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
losses = []
for t in range(20):
    y_pred = model(x)
    loss = criterion(y_pred, y)
    losses.append(loss.item())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
assert len(list(model.parameters())) == 6
assert losses[-1] < losses[0]
print(t, losses[0], "->", losses[-1])
