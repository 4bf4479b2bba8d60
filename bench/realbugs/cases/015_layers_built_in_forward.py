# Source: https://github.com/pytorch/pytorch/issues/1291
# Category: module-in-forward
# Expect: raises ValueError: optimizer got an empty parameter list
"""Following the two-layer-net tutorial, the reporter writes a ThreeLayerNet whose Linear layers are
constructed inside forward(); the module owns no parameters, so the optimizer gets none."""
import torch

torch.manual_seed(0)
N, D_in, H, D_out = 16, 20, 8, 4


class ThreeLayerNet(torch.nn.Module):
    def __init__(self, D_in, H, D_out):
        super(ThreeLayerNet, self).__init__()

    def forward(self, x):
        h_relu = torch.nn.Linear(D_in, H)(x).clamp(min=0)  # BUG: module-in-forward
        h_relu = torch.nn.Linear(H, H)(h_relu).clamp(min=0)  # BUG: module-in-forward
        y_pred = torch.nn.Linear(H, D_out)(h_relu)  # BUG: module-in-forward
        return y_pred


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
