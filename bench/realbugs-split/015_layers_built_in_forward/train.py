# Source: https://github.com/pytorch/pytorch/issues/1291
# Category: module-in-forward
# Expect: raises ValueError: optimizer got an empty parameter list
"""Following the two-layer-net tutorial, the reporter writes a ThreeLayerNet whose Linear layers are
constructed inside forward(); the module owns no parameters, so the optimizer gets none."""
import torch

from config import D_in, D_out, H, N
from model import ThreeLayerNet

torch.manual_seed(0)

x = torch.randn(N, D_in)
y = torch.randn(N, D_out)
model = ThreeLayerNet(D_in, H, D_out)
criterion = torch.nn.MSELoss(reduction="sum")
optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
for t in range(20):
    y_pred = model(x)
    loss = criterion(y_pred, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(t, loss.item())
