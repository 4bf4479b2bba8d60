# Source: https://github.com/pytorch/pytorch/issues/1291
# Category: module-in-forward
# Expect: ok
"""The ThreeLayerNet with its Linear layers created once in __init__ as attributes, so they are
registered parameters that the optimizer trains across iterations."""
import torch

torch.manual_seed(0)
N, D_in, H, D_out = 16, 20, 8, 4


class ThreeLayerNet(torch.nn.Module):
    def __init__(self, D_in, H, D_out):
        super(ThreeLayerNet, self).__init__()
        self.linear1 = torch.nn.Linear(D_in, H)
        self.linear2 = torch.nn.Linear(H, H)
        self.linear3 = torch.nn.Linear(H, D_out)

    def forward(self, x):
        h_relu = self.linear1(x).clamp(min=0)
        h_relu = self.linear2(h_relu).clamp(min=0)
        y_pred = self.linear3(h_relu)
        return y_pred


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
