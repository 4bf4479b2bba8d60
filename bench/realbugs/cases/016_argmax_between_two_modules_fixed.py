# Source: https://github.com/pytorch/pytorch/issues/1339
# Category: nondifferentiable-op
# Expect: ok
"""The hard choice is made with a straight-through Gumbel-softmax: the second module still sees a
one-hot vector, but the backward pass uses the soft relaxation, so the first module gets gradients."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
num_classes = 5

first_model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, num_classes))
second_model = nn.Sequential(nn.Linear(num_classes, 16), nn.ReLU(), nn.Linear(16, 1))
criterion = nn.MSELoss()

x, target = torch.randn(24, 10), torch.randn(24, 1)
y_p = first_model(x)
y_p = F.gumbel_softmax(y_p, tau=1.0, hard=True)
assert torch.equal(y_p.detach().sum(1), torch.ones(24))  # still one-hot in the forward pass
loss = criterion(second_model(y_p), target)

first_model.zero_grad()
second_model.zero_grad()
loss.backward()

for param in second_model.parameters():
    print("second grad norm", param.grad.data.norm().item())
for param in first_model.parameters():
    assert param.grad is not None and param.grad.abs().sum() > 0
    print("first grad norm", param.grad.data.norm().item())
